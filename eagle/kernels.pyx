"""eagle's own native kernels, written against the public kernel API (eagle/native.pxd).

Each works on 1-d float64 arrays, one sample per element, and is used as
``eagle.graph.native(eagle.kernels.axpy(2.0), reads={"x": x}, writes={"y": y})``.
The arrays are taken in declaration order: reads first, then writes.

Where every array is contiguous (and an output is either an input exactly or
disjoint from the inputs) a kernel runs a loop the compiler vectorises
(csrc/cpu/builtin_kernels.h); otherwise the strided loop, in sample order. Both
give the same bits (no fused multiply-adds).
"""
from libc.stdint cimport int64_t

from eagle.native cimport Kernel, kernel_t, wrap_kernel

# contiguous fast paths the compiler vectorises (csrc/cpu/builtin_kernels.h)
cdef extern from "builtin_kernels.h" nogil:
    int eagle_partly_overlap(const double *a, const double *b, int64_t n)
    void eagle_fill_contig(int64_t n, double v, double *y)
    void eagle_copy_contig(int64_t n, const double *x, double *y)
    void eagle_scale_contig(int64_t n, double a, const double *x, double *y)
    void eagle_scale_inplace(int64_t n, double a, double *x)
    void eagle_axpy_contig(int64_t n, double a, const double *x, double *y)
    void eagle_axpy_inplace(int64_t n, double a, double *x)
    void eagle_add_contig(int64_t n, const double *a, const double *b, double *out)
    void eagle_add_inplace(int64_t n, const double *a, const double *b, double *out)
    void eagle_polynomial_contig(int64_t n, const double *x, double *y, const double *c, int64_t degree)

from eagle._public import public_dir

__all__ = ["fill", "copy", "scale", "axpy", "add", "polynomial", "nothing"]


def __dir__():
    return public_dir(globals())


cdef class _Scalar:
    """A double that lives as long as the kernel using it (the kernel's user_data)."""
    cdef double value

    def __cinit__(self, double value):
        self.value = value


cdef inline double *at(char **data, const int64_t *strides, int k, int64_t i) noexcept nogil:
    return <double *>(data[k] + i * strides[k])


cdef inline bint contiguous(const int64_t *strides, int n) noexcept nogil:
    cdef int k
    for k in range(n):
        if strides[k] != sizeof(double):
            return False
    return True


cdef void _fill(int64_t start, int64_t stop, char **data, const int64_t *strides,
                void *user_data) noexcept nogil:
    cdef double v = (<double *>user_data)[0]
    cdef int64_t i
    if stop > start and contiguous(strides, 1):
        eagle_fill_contig(stop - start, v, at(data, strides, 0, start))
        return
    for i in range(start, stop):
        at(data, strides, 0, i)[0] = v


cdef void _copy(int64_t start, int64_t stop, char **data, const int64_t *strides,
                void *user_data) noexcept nogil:
    cdef int64_t i
    cdef double *x
    cdef double *y
    if stop > start and contiguous(strides, 2):
        x, y = at(data, strides, 0, start), at(data, strides, 1, start)
        if x == y:
            return
        if not eagle_partly_overlap(x, y, stop - start):
            eagle_copy_contig(stop - start, x, y)
            return
    for i in range(start, stop):
        at(data, strides, 1, i)[0] = at(data, strides, 0, i)[0]


cdef void _scale(int64_t start, int64_t stop, char **data, const int64_t *strides,
                 void *user_data) noexcept nogil:
    cdef double a = (<double *>user_data)[0]
    cdef int64_t i
    cdef double *x
    cdef double *y
    if stop > start and contiguous(strides, 2):
        x, y = at(data, strides, 0, start), at(data, strides, 1, start)
        if x == y:
            eagle_scale_inplace(stop - start, a, y)
            return
        if not eagle_partly_overlap(x, y, stop - start):
            eagle_scale_contig(stop - start, a, x, y)
            return
    for i in range(start, stop):
        at(data, strides, 1, i)[0] = a * at(data, strides, 0, i)[0]


cdef void _axpy(int64_t start, int64_t stop, char **data, const int64_t *strides,
                void *user_data) noexcept nogil:
    cdef double a = (<double *>user_data)[0]
    cdef int64_t i
    cdef double *x
    cdef double *y
    if stop > start and contiguous(strides, 2):
        x, y = at(data, strides, 0, start), at(data, strides, 1, start)
        if x == y:
            eagle_axpy_inplace(stop - start, a, y)
            return
        if not eagle_partly_overlap(x, y, stop - start):
            eagle_axpy_contig(stop - start, a, x, y)
            return
    for i in range(start, stop):
        at(data, strides, 1, i)[0] += a * at(data, strides, 0, i)[0]


cdef void _add(int64_t start, int64_t stop, char **data, const int64_t *strides,
               void *user_data) noexcept nogil:
    cdef int64_t i, n = stop - start
    cdef double *a
    cdef double *b
    cdef double *out
    if n > 0 and contiguous(strides, 3):
        a, b, out = at(data, strides, 0, start), at(data, strides, 1, start), at(data, strides, 2, start)
        if not eagle_partly_overlap(a, out, n) and not eagle_partly_overlap(b, out, n):
            if out == a or out == b:
                eagle_add_inplace(n, a, b, out)
            else:
                eagle_add_contig(n, a, b, out)
            return
    for i in range(start, stop):
        at(data, strides, 2, i)[0] = at(data, strides, 0, i)[0] + at(data, strides, 1, i)[0]


cdef struct _Poly:
    int64_t degree
    double coeffs[64]


cdef void _polynomial(int64_t start, int64_t stop, char **data, const int64_t *strides,
                      void *user_data) noexcept nogil:
    cdef _Poly *p = <_Poly *>user_data
    cdef int64_t i, k
    cdef double x, acc
    cdef double *xs
    cdef double *ys
    if stop > start and contiguous(strides, 2):
        xs, ys = at(data, strides, 0, start), at(data, strides, 1, start)
        if not eagle_partly_overlap(xs, ys, stop - start):
            eagle_polynomial_contig(stop - start, xs, ys, p.coeffs, p.degree)
            return
    for i in range(start, stop):
        x = at(data, strides, 0, i)[0]
        acc = p.coeffs[p.degree]
        for k in range(p.degree - 1, -1, -1):
            acc = acc * x + p.coeffs[k]
        at(data, strides, 1, i)[0] = acc


cdef class _Coefficients:
    """A polynomial's coefficients, living as long as the kernel using them."""
    cdef _Poly poly


cdef void _nothing(int64_t start, int64_t stop, char **data, const int64_t *strides,
                   void *user_data) noexcept nogil:
    pass


cdef Kernel _local(Kernel k):
    """Every built-in kernel touches sample i of its arrays only at sample i."""
    k.sample_local = True
    return k


cdef Kernel _with_scalar(kernel_t fn, str name, double value, int n_reads, int n_writes):
    s = _Scalar(value)
    return _local(wrap_kernel(fn, name, &(<_Scalar>s).value, s, n_reads, n_writes, "float64"))


def fill(double value):
    """out[i] = value. Arrays: writes={out}."""
    return _with_scalar(_fill, "fill", value, 0, 1)


def copy():
    """out[i] = x[i]. Arrays: reads={x}, writes={out}."""
    return _local(wrap_kernel(_copy, "copy", NULL, None, 1, 1, "float64"))


def scale(double alpha):
    """out[i] = alpha * x[i]. Arrays: reads={x}, writes={out}."""
    return _with_scalar(_scale, "scale", alpha, 1, 1)


def axpy(double alpha):
    """y[i] += alpha * x[i]. Arrays: reads={x}, writes={y} (y is read and written)."""
    return _with_scalar(_axpy, "axpy", alpha, 1, 1)


def add():
    """out[i] = a[i] + b[i]. Arrays: reads={a, b}, writes={out}."""
    return _local(wrap_kernel(_add, "add", NULL, None, 2, 1, "float64"))


def polynomial(coefficients):
    """out[i] = c[0] + c[1] x[i] + ... + c[d] x[i]**d (Horner; up to degree 63).
    Arrays: reads={x}, writes={out}. Compute-bound for a high degree: the kernel
    the benchmarks use to measure how replays scale with threads."""
    cs = [float(c) for c in coefficients]
    if not 1 <= len(cs) <= 64:
        raise ValueError(f"polynomial() takes 1 to 64 coefficients, got {len(cs)}")
    holder = _Coefficients()
    holder.poly.degree = len(cs) - 1
    for k, c in enumerate(cs):
        holder.poly.coeffs[k] = c
    return _local(wrap_kernel(_polynomial, "polynomial", &holder.poly, holder, 1, 1, "float64"))


def nothing():
    """Does nothing: a kernel to measure eagle's own per-node cost. Any arrays."""
    return _local(wrap_kernel(_nothing, "nothing", NULL, None, None, None, None))
