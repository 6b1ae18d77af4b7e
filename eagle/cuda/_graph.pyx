# cython: language_level=3
"""eagle.cuda._graph — CUDA graphs and executable graphs.

In the manner of NVIDIA cuda.core's graph classes, with ownership in the class:

* :class:`Graph` — a ``cudaGraph_t`` eagle owns (``Graph()``, or a capture's result):
  destroyed by ``close()`` or on collection. ``instantiate()`` gives a :class:`GraphExec`.
* :class:`BorrowedGraph` — a graph someone else owns: the body of a conditional node
  (``add_conditional``, ``add_while``), the graph of a child-graph node (``child_graph``),
  the graph a stream is capturing. It keeps its ``owner`` alive (a body keeps the graph
  whose node holds it), refuses work once that graph is closed, and never destroys it.
* :class:`GraphExec` — ``launch(stream, n)`` (one ``cuGraphLaunch`` per replay, without
  the GIL), ``upload``, ``update`` from a graph of the same topology. Its sized kernel
  nodes are retuned by an eagle.cuda._retune ``Retune``.

Thread-safety: a ``GraphExec`` serializes its own ``launch`` / ``update`` / ``close`` (and
its retune's calls) with a lock.
"""
from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uintptr_t

from eagle.cuda._driver cimport (
    eagle_cudaGraphNode_t, eagle_cudaStream_t, eagle_CUfunction, eagle_dim3,
    eagle_CUDA_KERNEL_NODE_PARAMS_v2, eagle_CUgraphExecUpdateResultInfo, NodeArray, check, dim3,
    stream_handle, graph_create, graph_destroy, graph_nodes, add_child_graph, child_graph_of,
    add_dependencies, add_kernel_node, add_conditional_node, graph_instantiate, graph_exec_destroy,
    graph_upload, graph_launch_n, graph_exec_update, kernel_node_get_params, kernel_node_name_of,
    EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, EAGLE_CUDA_ERROR_TOO_OLD)

import threading

from eagle.cuda._driver import DriverError

__all__ = ["GraphBase", "Graph", "BorrowedGraph", "GraphExec", "kernel_node_name",
           "kernel_node_params"]

_INSTANTIATE_RESULTS = {
    0: "cuGraphInstantiateSuccess",
    1: "cuGraphInstantiateError",
    2: "cuGraphInstantiateInvalidStructure",
    3: "cuGraphInstantiateNodeOperationNotSupported",
    4: "cuGraphInstantiateMultipleCtxsNotSupported",
    5: "cuGraphInstantiateConditionalHandleUnused",
}

# replays issued between two checks for Ctrl-C in GraphExec.launch
cdef long long _SIGNAL_CHUNK = 4096


cdef class GraphBase:
    """What every graph does; made as a :class:`Graph` (owned) or a :class:`BorrowedGraph`."""

    def __cinit__(self, *args, **kwargs):
        self.handle = NULL

    cdef eagle_cudaGraph_t live_handle(self) except? NULL:
        if self.handle == NULL:
            raise ValueError("the graph is closed")
        return self.handle

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def nodes(self):
        """Node handles, in the runtime's order."""
        return graph_nodes(self.live_handle())

    def instantiate(self, upload_stream=None, owners=None, names=None, inner=None):
        """Instantiate (cudaGraphInstantiateWithParams) into a :class:`GraphExec`.

        With ``upload_stream`` the graph is also uploaded there. On failure
        raises DriverError naming the failing node: its eagle index via
        ``owners`` (an eagle.cuda._stream ``NodeOwners``) and its name via ``names`` (a
        sequence indexed by eagle node), with ``node_index`` / ``node_name`` set. A failing
        node of a conditional body or child graph (the driver names it there), or of a body
        captured in place, is looked up in ``inner`` (before ``owners``): {handle:
        (what it is, index of the top-level eagle node)};
        ``node_index`` / ``node_name`` are then the top-level node's.
        """
        cdef eagle_cudaGraphExec_t e = NULL
        cdef eagle_cudaGraphNode_t bad = NULL
        cdef int result = 0
        cdef eagle_cudaStream_t us = stream_handle(upload_stream)
        cdef unsigned long long flags = EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD if upload_stream is not None else 0
        cdef int st
        cdef eagle_cudaGraph_t g = self.live_handle()
        with nogil:
            st = graph_instantiate(&e, g, flags, us, &bad, &result)
        if st != 0:
            raise _instantiate_error(st, <uintptr_t>bad, result, owners, names, inner)
        cdef GraphExec out = GraphExec.__new__(GraphExec)
        out.handle = e
        out.graph = self
        return out

    def add_conditional(self, str kind, deps=(), unsigned int initial=0):
        """A conditional node (``kind`` "if" or "while", 12.4+ drivers) after ``deps``;
        returns (node handle, condition handle, body :class:`BorrowedGraph`: the node owns
        it, and it keeps this graph alive). ``initial`` is the handle's value at each launch."""
        cdef int t
        if kind == "if":
            t = 0
        elif kind == "while":
            t = 1
        else:
            raise ValueError(f"kind is 'if' or 'while', got {kind!r}")
        return self._conditional(t, deps, initial)

    def add_while(self, deps=(), unsigned int initial=1):
        """A conditional WHILE node (driver 12.4+): returns (node, condition handle, body
        :class:`BorrowedGraph`, which keeps this graph alive)."""
        return self._conditional(1, deps, initial)

    def _conditional(self, int kind, deps, unsigned int initial):
        cdef unsigned long long handle = 0
        cdef eagle_cudaGraph_t body = NULL
        node = add_conditional_node(self.live_handle(), NodeArray(deps), kind, initial, &handle, &body)
        return <uintptr_t>node, handle, BorrowedGraph(<uintptr_t>body, self)

    def child_graph(self, uintptr_t node):
        """The graph embedded in child-graph node ``node`` of this graph (a
        :class:`BorrowedGraph` keeping this graph alive; cuGraphChildGraphNodeGetGraph,
        no clone)."""
        self.live_handle()
        return BorrowedGraph(<uintptr_t>child_graph_of(<eagle_cudaGraphNode_t>node), self)

    def add_child(self, GraphBase child not None, deps=()):
        """A child-graph node running a clone of ``child`` after ``deps`` (node handles)."""
        return <uintptr_t>add_child_graph(self.live_handle(), NodeArray(deps), child.live_handle())

    def add_dependencies(self, src, dst):
        """Edges src[i] -> dst[i] (cuGraphAddDependencies, the form the driver's version has)."""
        add_dependencies(self.live_handle(), NodeArray(src), NodeArray(dst))

    def add_kernel(self, uintptr_t func, grid, block, args=(), deps=(), unsigned int shared_mem=0):
        """A kernel node (cuGraphAddKernelNode); ``args``: ctypes objects, one per parameter."""
        import ctypes
        cdef void *argv[64]
        if len(args) > 64:
            raise ValueError("at most 64 kernel arguments")
        for i, a in enumerate(args):
            argv[i] = <void *><uintptr_t>ctypes.addressof(a)
        return <uintptr_t>add_kernel_node(self.live_handle(), NodeArray(deps), <eagle_CUfunction>func,
                                          dim3(grid), dim3(block), shared_mem, argv)


cdef class Graph(GraphBase):
    """A ``cudaGraph_t`` eagle owns: ``Graph()`` creates an empty one, a capture's end
    returns one; destroyed by ``close()`` or on collection."""

    def __cinit__(self, *, bint _create=True):
        if _create:
            self.handle = graph_create()

    def close(self):
        cdef int st
        g = self.handle
        if g != NULL:
            self.handle = NULL
            with nogil:
                st = graph_destroy(g)
            check(st, "cuGraphDestroy")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                graph_destroy(self.handle)
            self.handle = NULL


cdef Graph own_graph(eagle_cudaGraph_t g):
    cdef Graph out = Graph.__new__(Graph, _create=False)
    out.handle = g
    return out


cdef class BorrowedGraph(GraphBase):
    """A graph someone else owns (see the module doc): keeps ``owner`` alive; with a graph
    as ``owner`` (the one whose node holds this body) it refuses work once that graph is
    closed. ``close()`` only forgets the handle."""

    def __cinit__(self, uintptr_t ptr, owner=None):
        self.handle = <eagle_cudaGraph_t>ptr
        self.owner = owner

    cdef eagle_cudaGraph_t live_handle(self) except? NULL:
        if self.handle == NULL:
            raise ValueError("the graph is closed")
        if isinstance(self.owner, GraphBase):
            try:
                (<GraphBase>self.owner).live_handle()
            except ValueError:
                raise ValueError("the graph holding this body or child graph is closed") from None
        return self.handle

    def close(self):
        self.handle = NULL
        self.owner = None


def _instantiate_error(int st, uintptr_t bad, int result, owners, names, inner):
    """The DriverError of a failed instantiate, naming the failing node as well as known."""
    index = owners.owner(bad) if (owners is not None and bad) else None
    name = None
    if index is not None and names is not None:
        try:
            name = names[index]
        except (IndexError, KeyError, TypeError):
            name = None
    where = ""
    # inner first: a subgraph body captured in place sits in the top-level graph,
    # where owners knows only the top-level node holding it
    what = inner.get(bad) if (inner is not None and bad) else None
    if what is not None:
        index = what[1]
        if index is not None and names is not None:
            try:
                name = names[index]
            except (IndexError, KeyError, TypeError):
                name = None
        where = f" at {what[0]}"
    elif name is not None:
        where = f" at node {name!r} (eagle node {index})"
    elif index is not None:
        where = f" at eagle node {index}"
    elif bad:
        where = f" at graph node 0x{bad:x}"
    reason = _INSTANTIATE_RESULTS.get(result, f"result {result}")
    return DriverError(st, f"instantiating the CUDA graph failed{where} ({reason})",
                       node_index=index, node_name=name)


cdef class GraphExec:
    """An instantiated graph. Keeps the graph it was instantiated from alive (its node
    handles name the nodes to patch), and the last graph ``update()`` took arguments from
    (``updated_from``, one at most). ``launch``, ``update``, ``close`` and the retune's
    calls are serialized by a lock."""

    def __cinit__(self):
        self.handle = NULL
        self.graph = None
        self.updated_from = []
        self.lock = threading.Lock()
        self.retune = None

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    cdef int alive(self) except -1:
        if self.handle == NULL:
            raise ValueError("the GraphExec is closed")
        return 0

    def upload(self, stream=None):
        s = stream_handle(stream)
        with self.lock:
            self.alive()
            graph_upload(self.handle, s)

    def launch(self, stream=None, long long n=1, long long first=0, long long of=-1):
        """Replay n times on ``stream``: one cuGraphLaunch per replay, issued
        without the GIL; Ctrl-C is honoured between chunks of replays. Returns
        the number issued. Does not synchronize. A failure names the replay as
        ``first`` + its index here, out of ``of`` (default n): a caller issuing one
        launch(n) in windows says where in the whole its window starts."""
        cdef eagle_cudaStream_t s = stream_handle(stream)
        cdef long long done = 0, total = 0, chunk
        cdef int st = 0
        if n < 0:
            raise ValueError(f"launch(n) needs n >= 0, got {n}")
        with self.lock:
            self.alive()
            while total < n:
                chunk = n - total
                if chunk > _SIGNAL_CHUNK:
                    chunk = _SIGNAL_CHUNK
                with nogil:
                    st = graph_launch_n(self.handle, s, chunk, &done)
                total += done
                if st != 0:
                    check(st, f"cuGraphLaunch (replay {first + total} of {n if of < 0 else of})")
                if total < n:
                    PyErr_CheckSignals()
        return total

    def update(self, GraphBase graph not None):
        """cuGraphExecUpdate from a graph of the same topology. The graph instantiated from
        stays the one whose node handles name nodes; the exec's retune (if any) takes each
        sized kernel's arguments from the node at the same position of ``graph``, so a later
        retune keeps what update set."""
        cdef eagle_CUgraphExecUpdateResultInfo info
        cdef int st
        g = graph.live_handle()
        with self.lock:
            self.alive()
            info.result = 0
            with nogil:
                st = graph_exec_update(self.handle, g, &info)
            check(st, f"cuGraphExecUpdate (result {info.result})")
            retune = self.retune() if self.retune is not None else None
            if retune is not None:
                retune.after_update(graph)
            # the retune took its copy of the arguments above: only the latest graph is
            # kept (a list growing with every update() held every graph)
            self.updated_from = [graph]

    def close(self):
        cdef int st = 0
        with self.lock:
            e = self.handle
            self.handle = NULL
            self.updated_from = []
            if e != NULL:
                with nogil:
                    st = graph_exec_destroy(e)
                check(st, "cuGraphExecDestroy")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                graph_exec_destroy(self.handle)
            self.handle = NULL


def kernel_node_name(uintptr_t node, unknown=None):
    """The kernel's name of a kernel node (driver 12.3+; its CUfunction or CUkernel), or
    None (not a kernel node, or a name the driver did not give); ``unknown`` for a kernel
    node on a driver without cuFuncGetName (12.0-12.2)."""
    cdef const char *name = NULL
    cdef int st
    with nogil:
        st = kernel_node_name_of(<eagle_cudaGraphNode_t>node, &name)
    if st == EAGLE_CUDA_ERROR_TOO_OLD:
        return unknown
    if st != 0 or name == NULL:
        return None
    return name.decode("utf-8", "replace")


def kernel_node_params(uintptr_t node):
    """Driver view of a kernel node: dict(func, grid, block, shared_mem, kernel_params)."""
    cdef eagle_CUDA_KERNEL_NODE_PARAMS_v2 p
    kernel_node_get_params(<eagle_cudaGraphNode_t>node, &p)
    return dict(func=<uintptr_t>p.func,
                grid=(p.gridDimX, p.gridDimY, p.gridDimZ),
                block=(p.blockDimX, p.blockDimY, p.blockDimZ),
                shared_mem=p.sharedMemBytes,
                kernel_params=<uintptr_t>p.kernelParams)
