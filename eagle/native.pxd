# eagle's Cython face for native kernels: cimport this to hand eagle nogil kernels.
#
#     from libc.stdint cimport int64_t
#     from eagle.native cimport kernel_t, Kernel, wrap_kernel
#
#     cdef void twice(int64_t start, int64_t stop, char **data,
#                     const int64_t *strides, void *user_data) noexcept nogil:
#         cdef int64_t i
#         for i in range(start, stop):
#             (<double *>(data[1] + i * strides[1]))[0] = 2 * (<double *>(data[0] + i * strides[0]))[0]
#
#     node = eagle.graph.native(wrap_kernel(twice, "twice"), reads={"x": x}, writes={"y": y})
#
# data[k] is the k-th declared array's data pointer (reads, then writes, in
# declaration order); sample i of it is at data[k] + i * strides[k].
from libc.stdint cimport int32_t, int64_t, uintptr_t

ctypedef void (*kernel_t)(int64_t start, int64_t stop, char **data,
                          const int64_t *strides, void *user_data) noexcept nogil

# A team kernel runs in phases over samples [0, size); all threads finish
# phase p before any starts p + 1 (see csrc/include/eagle/kernel.h).
ctypedef void (*team_kernel_t)(int32_t phase, int32_t thread, int32_t n_threads, int64_t size,
                               char **data, const int64_t *strides, void *user_data) noexcept nogil


cdef class Kernel:
    cdef kernel_t fn
    cdef team_kernel_t team_fn
    # 0 for a kernel over [start, stop); else the phases of a team kernel
    cdef readonly int phases
    cdef void *user_data
    cdef readonly str name
    # what keeps user_data (and the code behind fn) alive
    cdef readonly object owner
    # optional checks of the arrays a node gives the kernel
    cdef readonly object n_reads
    cdef readonly object n_writes
    cdef readonly object dtype
    # what an untyped kernel declared it takes (None: not declared): one dtype / ndim
    # for every array, or a tuple with one per array (reads, then writes); added last
    # so that the fields above keep their place for extensions built before
    cdef readonly object dtypes
    cdef readonly object ndim
    # whether the kernel touches its per-sample arrays only at its own samples
    # [start, stop) (sample i of each at data[k] + i * strides[k], nothing else
    # written): its nodes may be fused into sample tiles (kernel.h); added last too
    cdef public bint sample_local


cdef Kernel wrap_kernel(kernel_t fn, str name, void *user_data=*, object owner=*,
                        object n_reads=*, object n_writes=*, object dtype=*)


cdef Kernel wrap_team_kernel(team_kernel_t fn, int phases, str name, void *user_data=*,
                             object owner=*, object n_reads=*, object n_writes=*)
