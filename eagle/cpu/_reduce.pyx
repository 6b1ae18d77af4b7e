"""The compiled half of the reduction and tally nodes (eagle/cpu/reduce_node.py): their
per-build state (parameters, block partials) and the kernels of csrc/cpu/reduce_kernels.c."""
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t
from libc.string cimport memcpy, memset

from eagle.native cimport Kernel, kernel_t, wrap_kernel

import numpy as np

cdef extern from "reduce_kernels.h" nogil:
    enum: EAGLE_REDUCE_BLOCK
    ctypedef struct eagle_reduce_params:
        int32_t op, acc, src_bool, has_where, has_initial, empty_error
        int64_t row, x_step, w_step, out_step
        char *partials
        int64_t n_blocks
        uint64_t identity, initial
    ctypedef struct eagle_at_params:
        int32_t op, acc, index_type, has_weights
        uint64_t weight
        int64_t cells, tally_step
        int64_t *cell
        char *value
        int32_t *count
        int64_t n_blocks
        int64_t *bad_at
        int64_t *bad_index
        int32_t has_bad
    ctypedef struct eagle_whole_params:
        kernel_t kernel
        void *user_data
        int64_t n
    int eagle_reduce_supported(int32_t acc, int32_t op)
    void eagle_reduce_kernel(int64_t, int64_t, char **, const int64_t *, void *)
    void eagle_reduce_finish(int64_t, int64_t, char **, const int64_t *, void *)
    void eagle_at_kernel(int64_t, int64_t, char **, const int64_t *, void *)
    void eagle_at_finish(int64_t, int64_t, char **, const int64_t *, void *)
    void eagle_nothing_kernel(int64_t, int64_t, char **, const int64_t *, void *)
    void eagle_whole_finish(int64_t, int64_t, char **, const int64_t *, void *)

#: samples per block: thread shares and fused tiles start at multiples of it
BLOCK = EAGLE_REDUCE_BLOCK
#: the operations, by ufunc name (csrc/cpu/reduce_kernels.h)
OPS = {"add": 0, "multiply": 1, "maximum": 2, "minimum": 3, "logical_or": 4, "logical_and": 5,
       "bitwise_or": 6, "bitwise_and": 7, "bitwise_xor": 8}
#: the element types, by NumPy dtype character
TYPES = {"?": 0, "b": 1, "h": 2, "i": 3, "l": 4, "q": 4, "B": 5, "H": 6, "I": 7, "L": 8, "Q": 8,
         "f": 9, "d": 10}


def type_code(dtype):
    """The kernels' code for ``dtype`` (native byte order), or None."""
    dtype = np.dtype(dtype)
    if not dtype.isnative or dtype.char not in TYPES:
        return None
    if dtype.char in "lL" and dtype.itemsize != 8:
        return TYPES["i" if dtype.char == "l" else "I"]
    return TYPES[dtype.char]


def supported(int acc, int op):
    return bool(eagle_reduce_supported(acc, op))


cdef uint64_t _bytes_of(value, dtype) except? 0:
    cdef uint64_t out = 0
    cdef const unsigned char[:] raw = np.asarray(value, dtype=dtype).reshape(1).view(np.uint8)
    memcpy(&out, &raw[0], raw.shape[0])
    return out


cdef class Reduction:
    """One build's state of a reduction node: parameters and block partials."""
    cdef eagle_reduce_params p
    cdef readonly str name

    def __cinit__(self):
        self.p.partials = NULL

    def __init__(self, str name, int op, int acc, bint src_bool, bint has_where, int64_t row,
                 int64_t x_step, int64_t w_step, int64_t out_step, int64_t extent, acc_dtype,
                 identity, initial):
        self.name = name
        self.p.op, self.p.acc, self.p.src_bool, self.p.has_where = op, acc, src_bool, has_where
        self.p.row, self.p.x_step, self.p.w_step, self.p.out_step = row, x_step, w_step, out_step
        self.p.n_blocks = extent // BLOCK + (extent % BLOCK != 0)
        itemsize = np.dtype(acc_dtype).itemsize
        self.p.partials = <char *>PyMem_Calloc(max(self.p.n_blocks * row, 1), itemsize)
        if self.p.partials == NULL:
            raise MemoryError()
        self.p.identity = _bytes_of(identity, acc_dtype)
        self.p.has_initial = initial is not None
        if initial is not None:
            self.p.initial = _bytes_of(initial, acc_dtype)

    def __dealloc__(self):
        PyMem_Free(self.p.partials)

    def kernel(self):
        cdef Kernel k = wrap_kernel(<kernel_t>eagle_reduce_kernel, self.name, <void *>&self.p, self)
        k.sample_local = True
        return k

    @property
    def finish_address(self):
        return <uintptr_t>eagle_reduce_finish

    @property
    def finish_data_address(self):
        return <uintptr_t>&self.p

    def take_error(self):
        """The error the last launch met (a reduction without identity over no sample), once."""
        if not self.p.empty_error:
            return None
        self.p.empty_error = 0
        return ValueError(f"zero-size array to reduction operation {self.name} which has no identity "
                          "(the logical size was 0): pass initial= for an empty reduction")


cdef class Tally:
    """One build's state of a tally (``ufunc.at``) node."""
    cdef eagle_at_params p
    cdef readonly str name

    def __init__(self, str name, int op, int acc, int index_type, bint has_weights, weight, acc_dtype,
                 int64_t cells, int64_t tally_step, int64_t extent):
        self.name = name
        self.p.op, self.p.acc, self.p.index_type, self.p.has_weights = op, acc, index_type, has_weights
        if not has_weights:
            self.p.weight = _bytes_of(weight, acc_dtype)
        self.p.cells, self.p.tally_step = cells, tally_step
        self.p.n_blocks = extent // BLOCK + (extent % BLOCK != 0)
        cdef int64_t slots = max(self.p.n_blocks * BLOCK, 1)
        self.p.cell = <int64_t *>PyMem_Calloc(slots, sizeof(int64_t))
        self.p.value = <char *>PyMem_Calloc(slots, np.dtype(acc_dtype).itemsize)
        self.p.count = <int32_t *>PyMem_Calloc(max(self.p.n_blocks, 1), sizeof(int32_t))
        self.p.bad_at = <int64_t *>PyMem_Calloc(max(self.p.n_blocks, 1), sizeof(int64_t))
        self.p.bad_index = <int64_t *>PyMem_Calloc(max(self.p.n_blocks, 1), sizeof(int64_t))
        if (self.p.cell == NULL or self.p.value == NULL or self.p.count == NULL or self.p.bad_at == NULL
                or self.p.bad_index == NULL):
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.p.cell)
        PyMem_Free(self.p.value)
        PyMem_Free(self.p.count)
        PyMem_Free(self.p.bad_at)
        PyMem_Free(self.p.bad_index)

    def kernel(self):
        cdef Kernel k = wrap_kernel(<kernel_t>eagle_at_kernel, self.name, <void *>&self.p, self)
        k.sample_local = True
        return k

    @property
    def finish_address(self):
        return <uintptr_t>eagle_at_finish

    @property
    def finish_data_address(self):
        return <uintptr_t>&self.p

    def take_error(self):
        """IndexError for the index out of bounds at the first sample the last launch met
        one (NumPy's), once: the same whatever the team (its first replay that met one,
        for each block)."""
        cdef int64_t b, first = -1
        if not self.p.has_bad:
            return None
        self.p.has_bad = 0
        for b in range(self.p.n_blocks):
            if self.p.bad_at[b] and first < 0:
                first = b
        value = self.p.bad_index[first] if first >= 0 else None
        memset(self.p.bad_at, 0, max(self.p.n_blocks, 1) * sizeof(int64_t))
        return IndexError(f"index {value} is out of bounds for axis 0 with size {self.p.cells} "
                          f"({self.name}: that sample's weight was not added)")


cdef class Whole:
    """The finish of a node on arrays that are not per-sample: ``kernel`` once over
    [0, n) (its arrays' whole axis 0; 1 for 0-d arrays) after the stage's shares; the
    node's own kernel does nothing."""
    cdef eagle_whole_params p
    cdef object keep

    def __init__(self, Kernel kernel, int64_t n):
        self.p.kernel = kernel.fn
        self.p.user_data = kernel.user_data
        self.p.n = n
        self.keep = kernel

    @property
    def finish_address(self):
        return <uintptr_t>eagle_whole_finish

    @property
    def finish_data_address(self):
        return <uintptr_t>&self.p


def nothing_kernel(str name):
    """A kernel that does nothing (a node whose work is its finish)."""
    return wrap_kernel(<kernel_t>eagle_nothing_kernel, name, NULL, None)
