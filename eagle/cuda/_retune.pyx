# cython: language_level=3
"""eagle.cuda._retune — the sized-kernel retune of an executable graph, as one object.

A :class:`Retune` holds eagle's own copy of the launch and arguments of each kernel node
registered as sized (``add``), and ``set_logical_size(n)`` patches every one of them for n
samples (grid and size argument) in the executable graph, without the GIL, with no
re-capture and no re-instantiation. Kernel nodes of conditional bodies and child graphs
are patched in the graph, then carried into the exec by one whole-graph update. It keeps
its ``GraphExec`` alive and shares its lock; ``GraphExec.update`` hands it the new graph
(``after_update``) so a later retune keeps what the update set.
"""
from cpython.mem cimport PyMem_Realloc, PyMem_Free
from libc.stdint cimport uintptr_t, int32_t, uint32_t, uint64_t

from eagle.cuda._driver cimport (
    eagle_cudaGraphNode_t, eagle_CUDA_KERNEL_NODE_PARAMS_v2, eagle_CUgraphExecUpdateResultInfo,
    check, dim3, kernel_node_get_params, kernel_node_set_params, graph_exec_update, sized_init,
    sized_refresh, sized_apply, sized_apply_to_graph, sized_free, EAGLE_CUDA_ERROR_BAD_ARGUMENT)
from eagle.cuda._graph cimport GraphBase, GraphExec

import weakref

from eagle.cuda._driver import kernel_param_sizes

__all__ = ["Retune"]

_SIZE_KINDS = {"int32": (0, 4), "int64": (1, 8), "uint32": (2, 4), "uint64": (3, 8), "none": (4, 0)}


cdef class Retune:
    """The sized kernel nodes of ``exec_`` (a ``GraphExec``; one Retune per exec)."""

    def __cinit__(self, GraphExec exec_ not None):
        self.sized = NULL
        self.n_sized = 0
        self.cap_sized = 0
        if exec_.retune is not None and exec_.retune() is not None:
            raise ValueError("this GraphExec has a Retune already")
        self.exec_ = exec_
        exec_.retune = weakref.ref(self)

    def __len__(self):
        return self.n_sized

    def add(self, uintptr_t node, unsigned int nargs, unsigned int size_index,
            str size_type="int64", unsigned long long per_block=0, grid_yz=(1, 1),
            arg_sizes=None, bint in_body=False, long long limit=-1):
        """Register kernel node ``node`` (a handle from ``Stream.last_node()``, of the graph
        the exec was instantiated from) as sized: ``set_logical_size(n)`` sets its argument
        ``size_index`` (of ``nargs``, C type ``size_type``: int32/int64/uint32/uint64) to n
        and its grid.x to ceil(n / per_block) (at least 1). ``per_block`` defaults to the
        node's block.x. ``size_type="none"`` patches the grid only. eagle copies the node's
        arguments now (each by its size: ``arg_sizes``, default 8 bytes each, or the
        kernel's real sizes from cuFuncGetParamInfo on 12.4+ drivers, which also refuse a
        wrong ``nargs`` or size-parameter width with TypeError). ``in_body``: the node sits
        in a conditional body or a child graph of that graph; a retune patches it in the
        graph and carries it into the exec with one cuGraphExecUpdate (per-node exec updates
        name top-level nodes only). ``limit`` >= 0: the node's extent, the most samples it
        gets (a retune to n patches it for min(n, limit))."""
        if size_type not in _SIZE_KINDS:
            raise ValueError(f"size_type must be one of {sorted(_SIZE_KINDS)}, got {size_type!r}")
        cdef int kind
        cdef unsigned int width
        kind, width = _SIZE_KINDS[size_type]
        if size_type != "none" and size_index >= nargs:
            raise ValueError(f"size_index {size_index} is not below nargs {nargs}")
        if nargs > 256:
            raise ValueError(f"at most 256 kernel arguments, got {nargs}")
        cdef size_t sizes[256]
        cdef const size_t *sp = NULL
        cdef eagle_CUDA_KERNEL_NODE_PARAMS_v2 p
        cdef int st
        cdef eagle_sized_kernel *k
        if arg_sizes is not None:
            if len(arg_sizes) != nargs:
                raise ValueError(f"arg_sizes has {len(arg_sizes)} entries for {nargs} arguments")
            for i, a in enumerate(arg_sizes):
                sizes[i] = a
            sp = sizes
        kernel_node_get_params(<eagle_cudaGraphNode_t>node, &p)
        if per_block == 0:
            per_block = p.blockDimX
        # a CUfunction, or a CUkernel (in func, or in kern with func NULL)
        real = (kernel_param_sizes(<uintptr_t>(p.func if p.func != NULL else p.kern))
                if p.func != NULL or p.kern != NULL else None)
        if real is not None:
            if len(real) != nargs:
                raise TypeError(f"the kernel takes {len(real)} parameter(s) (sizes {real}), "
                                f"eagle was told {nargs}")
            if width and real[size_index] != width:
                raise TypeError(f"the kernel's size parameter {size_index} is {real[size_index]} "
                                f"bytes wide, eagle was told {size_type} ({width} bytes)")
        with self.exec_.lock:
            self.exec_.alive()
            if self.n_sized == self.cap_sized:
                newcap = 2 * self.cap_sized if self.cap_sized else 4
                k = <eagle_sized_kernel *>PyMem_Realloc(self.sized, newcap * sizeof(eagle_sized_kernel))
                if k == NULL:
                    raise MemoryError()
                self.sized = k
                self.cap_sized = newcap
            k = &self.sized[self.n_sized]
            with nogil:
                st = sized_init(&k.k, <eagle_cudaGraphNode_t>node, nargs, sp, size_index, width)
            check(st, "copying a sized kernel node's arguments")
            k.size_kind = kind
            k.per_block = per_block
            k.block_grid = dim3((1,) + tuple(grid_yz))
            k.in_body = in_body
            k.limit = limit
            self.n_sized += 1

    def set_logical_size(self, long long n):
        """Patch every registered sized kernel for n samples (grid + size argument, from
        eagle's own copy of the arguments), without the GIL. Never re-captures or
        re-instantiates."""
        cdef Py_ssize_t i = 0
        cdef int st = 0
        cdef eagle_sized_kernel *k
        cdef eagle_dim3 grid
        cdef const void *value
        cdef unsigned long long blocks
        cdef long long m
        cdef bint bodies = False
        cdef eagle_CUgraphExecUpdateResultInfo info
        cdef GraphExec ex = self.exec_
        if n < 0:
            raise ValueError(f"logical size must be >= 0, got {n}")
        with ex.lock:
            ex.alive()
            with nogil:
                for i in range(self.n_sized):
                    k = &self.sized[i]
                    m = n if k.limit < 0 or n < k.limit else k.limit
                    blocks = (<unsigned long long>m + k.per_block - 1) // k.per_block
                    if blocks == 0:
                        blocks = 1
                    if blocks > 0x7fffffff:
                        st = EAGLE_CUDA_ERROR_BAD_ARGUMENT
                        break
                    grid = k.block_grid
                    grid.x = <unsigned int>blocks
                    if k.size_kind == 0:
                        k.value_i32 = <int32_t>m
                        value = &k.value_i32
                    elif k.size_kind == 1:
                        k.value_i64 = m
                        value = &k.value_i64
                    elif k.size_kind == 2:
                        k.value_u32 = <uint32_t>m
                        value = &k.value_u32
                    elif k.size_kind == 4:
                        value = NULL
                    else:
                        k.value_u64 = <uint64_t>m
                        value = &k.value_u64
                    if k.in_body:
                        bodies = True
                        st = sized_apply_to_graph(&k.k, value, grid)
                    else:
                        st = sized_apply(ex.handle, &k.k, value, grid)
                    if st != 0:
                        break
            if st != 0:
                check(st, f"retuning sized kernel node {i} for logical size {n}")
            if bodies:
                # kernel nodes inside conditional bodies / child graphs: the graph now holds
                # their new launch; the top-level ones get eagle's copy too (the update
                # takes every node from the graph), then one whole-graph update
                g = ex.graph.live_handle()
                with nogil:
                    for i in range(self.n_sized):
                        if not self.sized[i].in_body:
                            st = kernel_node_set_params(self.sized[i].k.node, &self.sized[i].k.params)
                            if st != 0:
                                break
                    if st == 0:
                        info.result = 0
                        st = graph_exec_update(ex.handle, g, &info)
                check(st, f"cuGraphExecUpdate carrying the retune into control-flow bodies "
                          f"(logical size {n})")

    def write_back_to_graph(self):
        """Set every sized node of the instantiated-from graph to eagle's current copy (grid
        and arguments), so a clone of the graph (the body of a WHILE node) launches as the
        exec does now."""
        cdef Py_ssize_t i
        cdef int st = 0
        with self.exec_.lock:
            self.exec_.alive()
            for i in range(self.n_sized):
                with nogil:
                    st = kernel_node_set_params(self.sized[i].k.node, &self.sized[i].k.params)
                check(st, f"cuGraphKernelNodeSetParams (sized kernel node {i})")

    def after_update(self, GraphBase graph not None):
        """``GraphExec.update(graph)`` succeeded (it calls this with its lock held): take each
        sized kernel's arguments from the node at the same position of ``graph``."""
        cdef Py_ssize_t i
        cdef int st
        if not self.n_sized:
            return
        old = self.exec_.graph.nodes()
        new = graph.nodes()
        where = {h: j for j, h in enumerate(old)}
        for i in range(self.n_sized):
            j = where.get(<uintptr_t>self.sized[i].k.node)
            if j is None or j >= len(new):
                continue
            st = sized_refresh(&self.sized[i].k, <eagle_cudaGraphNode_t><uintptr_t>new[j])
            check(st, f"reading the arguments of sized kernel node {i} after update")

    cdef void _free(self) noexcept:
        cdef Py_ssize_t i
        for i in range(self.n_sized):
            sized_free(&self.sized[i].k)
        PyMem_Free(self.sized)
        self.sized = NULL
        self.n_sized = self.cap_sized = 0

    def close(self):
        """Free eagle's copies (the exec is left as it is)."""
        with self.exec_.lock:
            self._free()

    def __dealloc__(self):
        self._free()
