# cython: language_level=3
"""eagle.cuda._retune for ``cimport``: the sized kernel nodes of one executable graph."""
from eagle.cuda._driver cimport eagle_cuda_sized, eagle_dim3
from eagle.cuda._graph cimport GraphExec


# one registered sized kernel node
ctypedef struct eagle_sized_kernel:
    eagle_cuda_sized k       # eagle's own copy of the node's launch and arguments
    int size_kind            # 0: int32, 1: int64, 2: uint32, 3: uint64, 4: none (grid only)
    unsigned long long per_block   # samples one block covers (block.x * items per thread)
    eagle_dim3 block_grid    # grid.y / grid.z kept from the recording (x is recomputed)
    long long value_i64
    unsigned long long value_u64
    int value_i32
    unsigned int value_u32
    bint in_body             # a node of a conditional body / child graph: patched in the graph
    long long limit          # its node's extent: it gets min(n, limit) samples (< 0: no limit)


cdef class Retune:
    cdef readonly GraphExec exec_
    cdef eagle_sized_kernel *sized
    cdef Py_ssize_t n_sized
    cdef Py_ssize_t cap_sized
    cdef object __weakref__

    cdef void _free(self) noexcept
