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
from libc.stdint cimport int64_t, uintptr_t

ctypedef void (*kernel_t)(int64_t start, int64_t stop, char **data,
                          const int64_t *strides, void *user_data) noexcept nogil


cdef class Kernel:
    cdef kernel_t fn
    cdef void *user_data
    cdef readonly str name
    # what keeps user_data (and the code behind fn) alive
    cdef readonly object owner
    # optional checks of the arrays a node gives the kernel
    cdef readonly object n_reads
    cdef readonly object n_writes
    cdef readonly object dtype


cdef Kernel wrap_kernel(kernel_t fn, str name, void *user_data=*, object owner=*,
                        object n_reads=*, object n_writes=*, object dtype=*)
