# cython: language_level=3
"""eagle._cuda — Python face of eagle's CUDA runtime shim.

Thin wrappers in the style of CuPy's ``cupy_backends.cuda.api.runtime``: each
one calls the C function of ``csrc/include/eagle/cuda_shim.h`` without the
GIL, then ``check`` turns a failing status into :class:`eagle.CudaError`
(name and text from the runtime). Nothing here links against CUDA: the
runtime is found at run time (``EAGLE_CUDA_RUNTIME``, an already-loaded
``libcudart`` such as CuPy's, then ``libcudart.so.13/.12/.so``) on first use.

Objects (all own their handle and release it in ``close()`` / on collection,
unless made with ``from_ptr``, which borrows):

* :class:`Stream` — a non-blocking stream; ``capture()`` is a context manager
  that always ends the capture (also on error) and yields the :class:`Graph`.
* :class:`Event` — timing-free event, for fork/join of side-by-side branches
  during capture (record on the capturing stream, wait on the side stream,
  and back).
* :class:`NodeOwners` — attributes the graph nodes a capture adds to eagle
  node indices, so a failed instantiate names the eagle node.
* :class:`Graph` — an owned ``cudaGraph_t``; ``instantiate()`` gives a
  :class:`GraphExec`.
* :class:`GraphExec` — ``launch(stream, n)`` (one ``cudaGraphLaunch`` per
  replay, without the GIL), ``add_sized_kernel`` / ``set_logical_size``
  (patches grid and size argument of registered kernel nodes).

Thread-safety: handles may be used from any thread; a ``GraphExec`` serializes
its own ``launch`` / ``set_logical_size`` / ``close`` with a lock.
"""
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uintptr_t, int32_t, int64_t, uint32_t, uint64_t

import threading

from eagle._errors import CudaError

__all__ = [
    "CudaError", "check_status", "status_name", "status_text", "load", "is_loaded",
    "library", "runtime_version", "driver_version", "device_count", "runtime_status",
    "retune_uses_driver", "Stream", "Event", "Graph", "GraphExec", "NodeOwners",
    "launch_kernel", "kernel_node_params", "DeviceBuffer", "CAPTURE_MODE_GLOBAL",
    "CAPTURE_MODE_THREAD_LOCAL", "CAPTURE_MODE_RELAXED",
]

CAPTURE_MODE_GLOBAL = EAGLE_CUDA_CAPTURE_MODE_GLOBAL
CAPTURE_MODE_THREAD_LOCAL = EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL
CAPTURE_MODE_RELAXED = EAGLE_CUDA_CAPTURE_MODE_RELAXED
CAPTURE_STATUS_NONE = EAGLE_CUDA_CAPTURE_STATUS_NONE
CAPTURE_STATUS_ACTIVE = EAGLE_CUDA_CAPTURE_STATUS_ACTIVE
CAPTURE_STATUS_INVALIDATED = EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED
ERROR_NOT_LOADED = EAGLE_CUDA_ERROR_NOT_LOADED
ERROR_MISSING_SYMBOL = EAGLE_CUDA_ERROR_MISSING_SYMBOL
ERROR_BAD_ARGUMENT = EAGLE_CUDA_ERROR_BAD_ARGUMENT
ERROR_UNSUPPORTED_NODE = EAGLE_CUDA_ERROR_UNSUPPORTED_NODE
ERROR_TOO_OLD = EAGLE_CUDA_ERROR_TOO_OLD

_INSTANTIATE_RESULTS = {
    0: "cudaGraphInstantiateSuccess",
    1: "cudaGraphInstantiateError",
    2: "cudaGraphInstantiateInvalidStructure",
    3: "cudaGraphInstantiateNodeOperationNotSupported",
    4: "cudaGraphInstantiateMultipleDevicesNotSupported",
    5: "cudaGraphInstantiateConditionalHandleUnused",
}

# replays issued between two checks for Ctrl-C in GraphExec.launch
cdef long long _SIGNAL_CHUNK = 4096


# ---- errors ---------------------------------------------------------------------

cpdef str status_name(int status):
    """The error name for a status (``cudaErrorInvalidValue``, ``eagleCudaErrorNotLoaded``...)."""
    cdef const char *name
    cdef const char *text
    eagle_cuda_status_text(status, &name, &text)
    return name.decode("utf-8", "replace")


cpdef str status_text(int status):
    """The runtime's sentence for a status."""
    cdef const char *name
    cdef const char *text
    eagle_cuda_status_text(status, &name, &text)
    return text.decode("utf-8", "replace")


cdef int check(int status, str detail=None) except -1:
    if status != 0:
        raise CudaError(status, status_name(status), status_text(status), detail)
    return 0


def check_status(int status, detail=None):
    """Raise :class:`eagle.CudaError` for a failing status; return None on success."""
    check(status, detail)


# ---- loading ----------------------------------------------------------------------

def load():
    """Find and bind the CUDA runtime (idempotent). Returns the library's path.

    Raises CudaError saying whether no runtime library was found (and which
    names were tried) or a runtime was found but no GPU/driver is usable.
    """
    cdef char buf[2048]
    cdef int st
    buf[0] = 0
    with nogil:
        st = eagle_cuda_load(buf, sizeof(buf))
    if st != 0:
        raise CudaError(st, status_name(st), status_text(st),
                        buf.decode("utf-8", "replace") or None)
    return eagle_cuda_library().decode("utf-8", "replace")


def is_loaded():
    return bool(eagle_cuda_is_loaded())


def library():
    """Path (or label) of the bound runtime, '' if none."""
    return eagle_cuda_library().decode("utf-8", "replace")


def runtime_status():
    """One line for ``eagle.show_config()``: the runtime in use, or why there is none."""
    try:
        try:  # with the cuda backend's fallbacks (runtimes from wheels, beside CuPy)
            from eagle._backend_cuda import load_runtime
        except ImportError:
            load_runtime = load
        path = load_runtime()
        return (f"{path} (runtime {runtime_version()}, driver {driver_version()}, "
                f"{device_count()} device(s))")
    except CudaError as e:
        return f"unavailable: {e.detail or e}"


def runtime_version():
    cdef int v = 0
    cdef int st
    with nogil:
        st = eagle_cuda_runtime_version(&v)
    check(st)
    return v


def driver_version():
    cdef int v = 0
    cdef int st
    with nogil:
        st = eagle_cuda_driver_version(&v)
    check(st)
    return v


def device_count():
    cdef int n = 0
    cdef int st
    with nogil:
        st = eagle_cuda_get_device_count(&n)
    check(st)
    return n


def retune_uses_driver():
    """True when kernel-node retuning goes through the driver API (the usual case)."""
    cdef int r
    with nogil:
        r = eagle_cuda_retune_uses_driver()
    if r < 0:
        check(r)
    return bool(r)


cdef inline eagle_dim3 _dim3(object d) except *:
    cdef eagle_dim3 out
    out.x = 1
    out.y = 1
    out.z = 1
    if isinstance(d, int):
        out.x = d
        return out
    d = tuple(d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"a launch dimension has 1 to 3 entries, got {d!r}")
    out.x = d[0]
    if len(d) > 1:
        out.y = d[1]
    if len(d) > 2:
        out.z = d[2]
    return out


cdef inline eagle_cudaStream_t _stream_handle(object stream) except? NULL:
    if stream is None:
        return NULL
    if isinstance(stream, Stream):
        return (<Stream>stream).handle
    if isinstance(stream, int):
        return <eagle_cudaStream_t><uintptr_t>stream
    ptr = getattr(stream, "ptr", None)  # cupy.cuda.Stream
    if isinstance(ptr, int):
        return <eagle_cudaStream_t><uintptr_t>ptr
    raise TypeError(f"expected an eagle._cuda.Stream, a CuPy stream or a handle, "
                    f"got {type(stream).__name__}")


# ---- streams and events --------------------------------------------------------------

cdef class Stream:
    """A CUDA stream. ``Stream()`` creates (and owns) a non-blocking stream;
    ``Stream.from_ptr(ptr, owner)`` borrows an existing one (e.g. CuPy's
    ``stream.ptr``), keeping ``owner`` alive. Usable from any thread."""

    def __cinit__(self, bint non_blocking=True, *, bint _create=True):
        self.handle = NULL
        self.owned = False
        self.owner = None
        if not _create:
            return
        cdef eagle_cudaStream_t s = NULL
        cdef unsigned int flags = EAGLE_CUDA_STREAM_NON_BLOCKING if non_blocking else 0
        cdef int st
        with nogil:
            st = eagle_cuda_stream_create(&s, flags)
        check(st, "cudaStreamCreateWithFlags")
        self.handle = s
        self.owned = True

    @staticmethod
    def from_ptr(uintptr_t ptr, owner=None):
        cdef Stream s = Stream.__new__(Stream, _create=False)
        s.handle = <eagle_cudaStream_t>ptr
        s.owner = owner
        return s

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def synchronize(self):
        cdef int st
        with nogil:
            st = eagle_cuda_stream_synchronize(self.handle)
        check(st, "cudaStreamSynchronize")

    def wait_event(self, Event event not None):
        cdef int st
        with nogil:
            st = eagle_cuda_stream_wait_event(self.handle, event.handle, 0)
        check(st, "cudaStreamWaitEvent")

    def begin_capture(self, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Start capturing (relaxed mode by default: a memory pool may allocate
        during capture). Pair with ``end_capture`` on every path."""
        cdef int st
        with nogil:
            st = eagle_cuda_stream_begin_capture(self.handle, mode)
        check(st, "cudaStreamBeginCapture")

    def end_capture(self):
        """End the capture and return the captured :class:`Graph` (owned)."""
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_stream_end_capture(self.handle, &g)
        check(st, "cudaStreamEndCapture")
        return Graph._own(g)

    def capture(self, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Context manager: ``with stream.capture() as cap: ...``; afterwards
        ``cap.graph`` is the captured Graph. The capture is ended also when
        the body raises (the body's exception wins; the invalid graph is
        dropped)."""
        return _Capture(self, mode)

    def capture_status(self):
        cdef int cs = 0
        cdef int st
        with nogil:
            st = eagle_cuda_stream_is_capturing(self.handle, &cs)
        check(st, "cudaStreamIsCapturing")
        return cs

    def is_capturing(self):
        return self.capture_status() == EAGLE_CUDA_CAPTURE_STATUS_ACTIVE

    def capture_info(self):
        """(status, capture id, graph handle, [current dependency node handles])."""
        cdef int cs = 0
        cdef unsigned long long cid = 0
        cdef eagle_cudaGraph_t g = NULL
        cdef const eagle_cudaGraphNode_t *deps = NULL
        cdef size_t n = 0, i
        cdef int st
        with nogil:
            st = eagle_cuda_stream_capture_info(self.handle, &cs, &cid, &g, &deps, &n)
        check(st, "cudaStreamGetCaptureInfo")
        return cs, cid, <uintptr_t>g, [<uintptr_t>deps[i] for i in range(n)]

    def last_node(self):
        """Handle of the node the last captured operation added (for retune)."""
        cdef eagle_cudaGraphNode_t node = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_stream_last_node(self.handle, &node)
        check(st, "the node just captured (cudaStreamGetCaptureInfo)")
        return <uintptr_t>node

    def close(self):
        cdef eagle_cudaStream_t s = self.handle
        cdef int st = 0
        if self.owned and s != NULL:
            self.handle = NULL
            self.owned = False
            with nogil:
                st = eagle_cuda_stream_destroy(s)
            check(st, "cudaStreamDestroy")
        self.handle = NULL

    def __dealloc__(self):
        if self.owned and self.handle != NULL:
            with nogil:
                eagle_cuda_stream_destroy(self.handle)
            self.handle = NULL

    def __repr__(self):
        return f"<eagle._cuda.Stream 0x{<uintptr_t>self.handle:x}{'' if self.owned else ' borrowed'}>"


class _Capture:
    def __init__(self, stream, mode):
        self.stream = stream
        self.mode = mode
        self.graph = None

    def __enter__(self):
        self.stream.begin_capture(self.mode)
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.graph = self.stream.end_capture()
        except CudaError:
            if exc_type is None:
                raise
            # the body's error is the story; the ended capture is discarded
        return False


cdef class Event:
    """A timing-free CUDA event (for fork/join during capture). Owns its handle."""

    def __cinit__(self, bint timing=False):
        self.handle = NULL
        cdef eagle_cudaEvent_t e = NULL
        cdef unsigned int flags = 0 if timing else EAGLE_CUDA_EVENT_DISABLE_TIMING
        cdef int st
        with nogil:
            st = eagle_cuda_event_create(&e, flags)
        check(st, "cudaEventCreateWithFlags")
        self.handle = e

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def record(self, stream=None):
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        with nogil:
            st = eagle_cuda_event_record(self.handle, s)
        check(st, "cudaEventRecord")

    def synchronize(self):
        cdef int st
        with nogil:
            st = eagle_cuda_event_synchronize(self.handle)
        check(st, "cudaEventSynchronize")

    def close(self):
        cdef eagle_cudaEvent_t e = self.handle
        cdef int st = 0
        if e != NULL:
            self.handle = NULL
            with nogil:
                st = eagle_cuda_event_destroy(e)
            check(st, "cudaEventDestroy")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                eagle_cuda_event_destroy(self.handle)
            self.handle = NULL


def fork(Stream origin not None, sides, Event event not None):
    """Fork during capture: record ``event`` on ``origin``, make each side stream wait on it."""
    event.record(origin)
    for s in sides:
        (<Stream?>s).wait_event(event)


def join(Stream origin not None, sides, events):
    """Join during capture: record one event per side stream, make ``origin`` wait on each."""
    for s, e in zip(sides, events):
        (<Event?>e).record(s)
        origin.wait_event(e)


# ---- node attribution ------------------------------------------------------------

cdef class NodeOwners:
    """Which eagle node added which graph node during one capture.

    Call ``mark(index)`` after capturing eagle node ``index`` (on any stream of
    the capture): every graph node not seen before is attributed to it.
    ``owner(handle)`` gives the index (or None). Linear in the graph's node
    count per mark.
    """
    cdef Stream stream
    cdef dict owners

    def __init__(self, Stream stream not None):
        self.stream = stream
        self.owners = {}

    def mark(self, index):
        cdef int cs = 0
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_stream_capture_info(self.stream.handle, &cs, NULL, &g, NULL, NULL)
        check(st, "cudaStreamGetCaptureInfo")
        if cs != EAGLE_CUDA_CAPTURE_STATUS_ACTIVE or g == NULL:
            return []
        added = []
        for h in _graph_nodes(g):
            if h not in self.owners:
                self.owners[h] = index
                added.append(h)
        return added

    def owner(self, handle):
        return self.owners.get(handle)

    def __len__(self):
        return len(self.owners)


cdef list _graph_nodes(eagle_cudaGraph_t g):
    cdef size_t n = 0, i
    cdef int st
    cdef eagle_cudaGraphNode_t *buf
    with nogil:
        st = eagle_cuda_graph_get_nodes(g, NULL, &n)
    check(st, "cudaGraphGetNodes")
    if n == 0:
        return []
    buf = <eagle_cudaGraphNode_t *>PyMem_Malloc(n * sizeof(eagle_cudaGraphNode_t))
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            st = eagle_cuda_graph_get_nodes(g, buf, &n)
        check(st, "cudaGraphGetNodes")
        return [<uintptr_t>buf[i] for i in range(n)]
    finally:
        PyMem_Free(buf)


# ---- graphs -----------------------------------------------------------------------

cdef class Graph:
    """An owned ``cudaGraph_t`` (from a capture or ``Graph()``)."""

    def __cinit__(self, *, bint _create=True):
        self.handle = NULL
        self.owned = False
        if not _create:
            return
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_graph_create(&g, 0)
        check(st, "cudaGraphCreate")
        self.handle = g
        self.owned = True

    @staticmethod
    cdef Graph _own(eagle_cudaGraph_t g):
        cdef Graph out = Graph.__new__(Graph, _create=False)
        out.handle = g
        out.owned = g != NULL
        return out

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def nodes(self):
        """Node handles, in the runtime's order."""
        return _graph_nodes(self.handle)

    def instantiate(self, upload_stream=None, NodeOwners owners=None, names=None):
        """Instantiate (cudaGraphInstantiateWithParams) into a :class:`GraphExec`.

        With ``upload_stream`` the graph is also uploaded there. On failure
        raises CudaError naming the failing node: its eagle index via
        ``owners`` and its name via ``names`` (a sequence indexed by eagle
        node), with ``node_index`` / ``node_name`` set.
        """
        cdef eagle_cudaGraphExec_t e = NULL
        cdef eagle_cudaGraphNode_t bad = NULL
        cdef int result = 0
        cdef eagle_cudaStream_t us = _stream_handle(upload_stream)
        cdef unsigned long long flags = EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD if upload_stream is not None else 0
        cdef int st
        if self.handle == NULL:
            raise ValueError("the graph is closed")
        with nogil:
            st = eagle_cuda_graph_instantiate(&e, self.handle, flags, us, &bad, &result)
        if st != 0:
            index = owners.owner(<uintptr_t>bad) if (owners is not None and bad != NULL) else None
            name = None
            if index is not None and names is not None:
                try:
                    name = names[index]
                except (IndexError, KeyError, TypeError):
                    name = None
            where = ""
            if name is not None:
                where = f" at node {name!r} (eagle node {index})"
            elif index is not None:
                where = f" at eagle node {index}"
            elif bad != NULL:
                where = f" at graph node 0x{<uintptr_t>bad:x}"
            reason = _INSTANTIATE_RESULTS.get(result, f"result {result}")
            raise CudaError(st, status_name(st), status_text(st),
                            f"instantiating the CUDA graph failed{where} ({reason})",
                            node_index=index, node_name=name)
        cdef GraphExec out = GraphExec.__new__(GraphExec)
        out.handle = e
        out.graph = self
        return out

    def close(self):
        cdef eagle_cudaGraph_t g = self.handle
        cdef int st = 0
        if self.owned and g != NULL:
            self.handle = NULL
            self.owned = False
            with nogil:
                st = eagle_cuda_graph_destroy(g)
            check(st, "cudaGraphDestroy")
        self.handle = NULL

    def __dealloc__(self):
        if self.owned and self.handle != NULL:
            with nogil:
                eagle_cuda_graph_destroy(self.handle)
            self.handle = NULL


cdef class GraphExec:
    """An instantiated graph. Keeps its :class:`Graph` alive (kernel node
    handles used for retuning belong to it). ``launch``, ``set_logical_size``
    and ``close`` are serialized by a lock: two threads may launch the same
    GraphExec, one after the other."""

    def __cinit__(self):
        self.handle = NULL
        self.graph = None
        self.sized = NULL
        self.n_sized = 0
        self.cap_sized = 0
        self._lock = threading.Lock()

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    cdef int _alive(self) except -1:
        if self.handle == NULL:
            raise ValueError("the GraphExec is closed")
        return 0

    def upload(self, stream=None):
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        with self._lock:
            self._alive()
            with nogil:
                st = eagle_cuda_graph_upload(self.handle, s)
            check(st, "cudaGraphUpload")

    def launch(self, stream=None, long long n=1):
        """Replay n times on ``stream``: one cudaGraphLaunch per replay, issued
        without the GIL; Ctrl-C is honoured between chunks of replays. Returns
        the number issued. Does not synchronize."""
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef long long done = 0, total = 0, chunk
        cdef int st = 0
        if n < 0:
            raise ValueError(f"launch(n) needs n >= 0, got {n}")
        with self._lock:
            self._alive()
            while total < n:
                chunk = n - total
                if chunk > _SIGNAL_CHUNK:
                    chunk = _SIGNAL_CHUNK
                with nogil:
                    st = eagle_cuda_graph_launch_n(self.handle, s, chunk, &done)
                total += done
                if st != 0:
                    check(st, f"cudaGraphLaunch (replay {total} of {n})")
                if total < n:
                    PyErr_CheckSignals()
        return total

    def update(self, Graph graph not None):
        """cudaGraphExecUpdate from a graph of the same topology."""
        cdef eagle_cudaGraphExecUpdateResultInfo info
        cdef int st
        with self._lock:
            self._alive()
            with nogil:
                st = eagle_cuda_graph_exec_update(self.handle, graph.handle, &info)
            check(st, f"cudaGraphExecUpdate (result {info.result})")
            self.graph = graph

    # -- retune --------------------------------------------------------------

    def add_sized_kernel(self, uintptr_t node, unsigned int nargs, unsigned int size_index,
                         str size_type="int64", unsigned long long per_block=0,
                         grid_yz=(1, 1)):
        """Register kernel node ``node`` (a handle from ``Stream.last_node()``)
        as sized: ``set_logical_size(n)`` sets its argument ``size_index`` (of
        ``nargs``, C type ``size_type``: int32/int64/uint32/uint64) to n and
        its grid.x to ceil(n / per_block) (at least 1: an empty grid cannot
        launch, so n = 0 launches one block that must see n = 0 and do
        nothing). ``per_block`` defaults to the node's block.x. ``size_type="none"``
        patches the grid only (kernels that read the logical size from device
        memory: ``SIZE_PTR`` kernels, the compaction kernels)."""
        kinds = {"int32": 0, "int64": 1, "uint32": 2, "uint64": 3, "none": 4}
        if size_type not in kinds:
            raise ValueError(f"size_type must be one of {sorted(kinds)}, got {size_type!r}")
        if size_type != "none" and size_index >= nargs:
            raise ValueError(f"size_index {size_index} is not below nargs {nargs}")
        cdef eagle_cudaKernelNodeParams p
        cdef int st
        if per_block == 0:
            with nogil:
                st = eagle_cuda_kernel_node_get_params(<eagle_cudaGraphNode_t>node, &p)
            if st != 0:
                raise ValueError("per_block is needed: the runtime API cannot describe this "
                                 f"kernel node ({status_name(st)})")
            per_block = p.blockDim.x
        cdef eagle_sized_kernel *k
        with self._lock:
            self._alive()
            if self.n_sized == self.cap_sized:
                newcap = 2 * self.cap_sized if self.cap_sized else 4
                k = <eagle_sized_kernel *>PyMem_Realloc(self.sized, newcap * sizeof(eagle_sized_kernel))
                if k == NULL:
                    raise MemoryError()
                self.sized = k
                self.cap_sized = newcap
            k = &self.sized[self.n_sized]
            k.node = <eagle_cudaGraphNode_t>node
            k.nargs = nargs
            k.size_index = size_index
            k.size_kind = kinds[size_type]
            k.per_block = per_block
            k.block_grid = _dim3((1,) + tuple(grid_yz))
            self.n_sized += 1

    @property
    def n_sized_kernels(self):
        return self.n_sized

    def set_logical_size(self, long long n):
        """Patch every registered sized kernel for n samples (grid + size
        argument), without the GIL. Never re-captures or re-instantiates."""
        cdef Py_ssize_t i
        cdef int st = 0
        cdef eagle_sized_kernel *k
        cdef eagle_dim3 grid
        cdef const void *value
        cdef unsigned long long blocks
        if n < 0:
            raise ValueError(f"logical size must be >= 0, got {n}")
        with self._lock:
            self._alive()
            with nogil:
                for i in range(self.n_sized):
                    k = &self.sized[i]
                    blocks = (<unsigned long long>n + k.per_block - 1) // k.per_block
                    if blocks == 0:
                        blocks = 1
                    if blocks > 0x7fffffff:
                        st = EAGLE_CUDA_ERROR_BAD_ARGUMENT
                        break
                    grid = k.block_grid
                    grid.x = <unsigned int>blocks
                    if k.size_kind == 0:
                        k.value_i32 = <int32_t>n
                        value = &k.value_i32
                    elif k.size_kind == 1:
                        k.value_i64 = n
                        value = &k.value_i64
                    elif k.size_kind == 2:
                        k.value_u32 = <uint32_t>n
                        value = &k.value_u32
                    elif k.size_kind == 4:
                        value = NULL
                    else:
                        k.value_u64 = <uint64_t>n
                        value = &k.value_u64
                    st = eagle_cuda_retune_kernel_node(self.handle, k.node, k.nargs,
                                                       k.size_index, value, grid)
                    if st != 0:
                        break
            if st != 0:
                check(st, f"retuning sized kernel node {i} for logical size {n}")

    def close(self):
        cdef eagle_cudaGraphExec_t e
        cdef int st = 0
        with self._lock:
            e = self.handle
            self.handle = NULL
            PyMem_Free(self.sized)
            self.sized = NULL
            self.n_sized = self.cap_sized = 0
            if e != NULL:
                with nogil:
                    st = eagle_cuda_graph_exec_destroy(e)
                check(st, "cudaGraphExecDestroy")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                eagle_cuda_graph_exec_destroy(self.handle)
            self.handle = NULL
        PyMem_Free(self.sized)
        self.sized = NULL


# ---- kernels ----------------------------------------------------------------------

def launch_kernel(uintptr_t func, grid, block, args=(), size_t shared_mem=0, stream=None):
    """cudaLaunchKernel. ``args``: a sequence of ctypes objects (one per kernel
    parameter, e.g. ``c_void_p(ptr)``, ``c_int64(n)``); the runtime copies
    their values during the call (also during capture)."""
    import ctypes
    cdef eagle_dim3 g = _dim3(grid)
    cdef eagle_dim3 b = _dim3(block)
    cdef eagle_cudaStream_t s = _stream_handle(stream)
    cdef Py_ssize_t n = len(args), i
    cdef void **argv = <void **>PyMem_Malloc((n if n else 1) * sizeof(void *))
    cdef int st
    if argv == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            argv[i] = <void *><uintptr_t>ctypes.addressof(args[i])
        with nogil:
            st = eagle_cuda_launch_kernel(<const void *>func, g, b, argv, shared_mem, s)
        check(st, "cudaLaunchKernel")
    finally:
        PyMem_Free(argv)


def kernel_node_params(uintptr_t node):
    """Runtime-API view of a kernel node: dict(func, grid, block, shared_mem, kernel_params)."""
    cdef eagle_cudaKernelNodeParams p
    cdef int st
    with nogil:
        st = eagle_cuda_kernel_node_get_params(<eagle_cudaGraphNode_t>node, &p)
    check(st, "cudaGraphKernelNodeGetParams")
    return dict(func=<uintptr_t>p.func,
                grid=(p.gridDim.x, p.gridDim.y, p.gridDim.z),
                block=(p.blockDim.x, p.blockDim.y, p.blockDim.z),
                shared_mem=p.sharedMemBytes,
                kernel_params=<uintptr_t>p.kernelParams)


def retune_kernel_node(GraphExec exec not None, uintptr_t node, unsigned int nargs,
                       unsigned int size_index, size_value, grid):
    """One-off retune: ``size_value`` is a ctypes object of the size parameter's type."""
    import ctypes
    cdef eagle_dim3 g = _dim3(grid)
    cdef const void *v = <const void *><uintptr_t>ctypes.addressof(size_value)
    cdef int st
    exec._alive()
    with nogil:
        st = eagle_cuda_retune_kernel_node(exec.handle, <eagle_cudaGraphNode_t>node, nargs,
                                           size_index, v, g)
    check(st, "retuning a kernel node")


# ---- device memory ------------------------------------------------------------------

cdef class DeviceBuffer:
    """``nbytes`` of device memory (cudaMalloc), owned; freed by ``close()`` or on
    collection. ``ptr`` is the device address. ``write(data, stream)`` and
    ``read(nbytes, stream)`` copy from / to host memory with cudaMemcpyAsync on
    ``stream`` and then synchronize it (never while it captures). eagle uses it
    for the device logical size and the compaction scratch, which live as long
    as the built graph."""
    cdef void *handle
    cdef readonly size_t nbytes

    def __cinit__(self, size_t nbytes):
        cdef void *p = NULL
        cdef int st
        self.handle = NULL
        self.nbytes = nbytes
        with nogil:
            st = eagle_cuda_malloc(&p, nbytes)
        check(st, f"cudaMalloc({nbytes})")
        self.handle = p

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def write(self, data, stream=None, size_t offset=0):
        """Copy the bytes of ``data`` (a buffer, e.g. a NumPy array) to ``ptr + offset``."""
        cdef const unsigned char[::1] view = memoryview(data).cast("B")
        cdef size_t n = view.shape[0]
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        if self.handle == NULL:
            raise ValueError("the DeviceBuffer is closed")
        if offset + n > self.nbytes:
            raise ValueError(f"writing {n} bytes at {offset} overruns the buffer ({self.nbytes})")
        if n == 0:
            return
        with nogil:
            st = eagle_cuda_memcpy_async(<char *>self.handle + offset, &view[0], n, s)
            if st == 0:
                st = eagle_cuda_stream_synchronize(s)
        check(st, "cudaMemcpyAsync (host to device)")

    def read_into(self, out, stream=None, size_t offset=0, bint synchronize=True):
        """Copy len(out) bytes from ``ptr + offset`` into the writable buffer ``out``."""
        cdef unsigned char[::1] view = memoryview(out).cast("B")
        cdef size_t n = view.shape[0]
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        if self.handle == NULL:
            raise ValueError("the DeviceBuffer is closed")
        if offset + n > self.nbytes:
            raise ValueError(f"reading {n} bytes at {offset} overruns the buffer ({self.nbytes})")
        if n == 0:
            return out
        with nogil:
            st = eagle_cuda_memcpy_async(&view[0], <char *>self.handle + offset, n, s)
            if st == 0 and synchronize:
                st = eagle_cuda_stream_synchronize(s)
        check(st, "cudaMemcpyAsync (device to host)")
        return out

    def close(self):
        cdef void *p = self.handle
        cdef int st
        self.handle = NULL
        if p != NULL:
            with nogil:
                st = eagle_cuda_free(p)
            check(st, "cudaFree")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                eagle_cuda_free(self.handle)
            self.handle = NULL
