"""The compiled half of the cpu random nodes (eagle/cpu/random_node.py): the kernel's
parameters and the ``eagle.native.Kernel`` that runs csrc/cpu/random_kernels.c."""
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from eagle.native cimport Kernel, kernel_t, wrap_kernel

from eagle.cpu._executor import THREAD_REPLAY

cdef extern from "random_kernels.h" nogil:
    ctypedef struct eagle_random_params:
        uint32_t key0, key1
        int32_t what
        int32_t f32
        int32_t has_ids
        double a, b
        double below
        int32_t second
        uint64_t (*replay)() noexcept nogil
    void eagle_random_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                             void *user_data)

BITS, UNIFORM, NORMAL = 0, 1, 2

ctypedef uint64_t (*replay_fn)() noexcept nogil
cdef replay_fn _thread_replay = <replay_fn>PyCapsule_GetPointer(THREAD_REPLAY, "eagle.cpu.thread_replay")


cdef extern from "distribution_kernels.h" nogil:
    ctypedef struct eagle_dist_params:
        uint32_t key0, key1
        int32_t what
        int32_t out_type
        int32_t has_ids
        int32_t per_sample0, per_sample1
        double d0, d1
        int64_t i0, i1
        uint64_t (*replay)() noexcept nogil
    void eagle_distribution_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                                   void *user_data)

ctypedef fused kernel_params:
    eagle_random_params
    eagle_dist_params


cdef inline (uint32_t, uint32_t) _key_words(uint64_t key) noexcept:
    """A Philox key as its two 32-bit words (low, high)."""
    return <uint32_t>(key & 0xffffffff), <uint32_t>(key >> 32)


cdef inline void _set_common(kernel_params *p, uint64_t key, bint has_ids) noexcept:
    """What every random kernel's parameters hold alike: the key's words, whether the
    node reads ids, and the call that gives the replay being run."""
    p.key0, p.key1 = _key_words(key)
    p.has_ids = has_ids
    p.replay = _thread_replay


cdef class _Params:
    """The kernel's user_data; lives as long as the kernel (its owner)."""
    cdef eagle_random_params p


def random_kernel(str name, int what, uint64_t key, bint f32, bint has_ids, double a, double b,
                  double below, bint second=False):
    """The Kernel of one random node: ``what`` is BITS, UNIFORM or NORMAL; ``a, b`` are
    (low, high - low) or (loc, scale) and ``below`` the largest value below high;
    ``second``: a uniform node's second output (words 2 and 3), after the first."""
    cdef _Params params = _Params()
    _set_common(&params.p, key, has_ids)
    params.p.what = what
    params.p.f32 = f32
    params.p.a = a
    params.p.b = b
    params.p.below = below
    params.p.second = second
    return wrap_kernel(<kernel_t>eagle_random_kernel, name, <void *>&params.p, params)


cdef extern from "eagle/philox.h" nogil:
    ctypedef struct eagle_philox_words:
        uint32_t w0, w1, w2, w3
    double eagle_normal_from_words(eagle_philox_words w)


def normal_from_words(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3):
    """The standard normal philox.h's transform makes of one sample's four words, as the
    kernels compute it (the tests check eagle.record.random.NORMAL_Z_MAX against it)."""
    cdef eagle_philox_words w
    w.w0, w.w1, w.w2, w.w3 = w0, w1, w2, w3
    return eagle_normal_from_words(w)


cdef class _DistParams:
    """A distribution kernel's user_data; lives as long as the kernel (its owner)."""
    cdef eagle_dist_params p


def distribution_kernel(str name, int what, int out_type, uint64_t key, bint has_ids,
                        bint per_sample0, bint per_sample1, double d0, double d1, int64_t i0,
                        int64_t i1):
    """The Kernel of one distribution node (csrc/cpu/distribution_kernels.h: ``what`` and
    ``out_type`` are its EAGLE_DIST_* numbers; d0, d1, i0, i1 the scalar parameters)."""
    cdef _DistParams params = _DistParams()
    _set_common(&params.p, key, has_ids)
    params.p.what = what
    params.p.out_type = out_type
    params.p.per_sample0 = per_sample0
    params.p.per_sample1 = per_sample1
    params.p.d0 = d0
    params.p.d1 = d1
    params.p.i0 = i0
    params.p.i1 = i1
    return wrap_kernel(<kernel_t>eagle_distribution_kernel, name, <void *>&params.p, params)


cdef extern from "eagle/distributions.h" nogil:
    double eagle_exponential_sample(double scale, uint64_t id, uint64_t r, uint32_t key0, uint32_t key1)
    int64_t eagle_poisson_sample(double lam, uint64_t id, uint64_t r, uint32_t key0, uint32_t key1)
    int64_t eagle_binomial_sample(int64_t n, double p, uint64_t id, uint64_t r, uint32_t key0,
                                  uint32_t key1)
    int64_t eagle_integers_value(int64_t low, int64_t high, int i32, uint64_t id, uint64_t r,
                                 uint32_t key0, uint32_t key1)
    eagle_philox_words eagle_dist_block(uint64_t id, uint64_t r, uint32_t key0, uint32_t key1,
                                        uint32_t j)


def reference_sample(int what, uint64_t key, uint64_t id, uint64_t replay, double d0=0.0,
                     double d1=0.0, int64_t i0=0, int64_t i1=0, bint i32=False):
    """One sample as eagle/distributions.h's scalar sampler draws it, one at a time (the
    tests' oracle for the vectorised kernels): ``what`` as distribution_kernel's."""
    cdef uint32_t k0, k1
    k0, k1 = _key_words(key)
    if what == 0:
        return eagle_exponential_sample(d0, id, replay, k0, k1)
    if what == 1:
        return eagle_poisson_sample(d0, id, replay, k0, k1)
    if what == 2:
        return eagle_binomial_sample(i0, d1, id, replay, k0, k1)
    return eagle_integers_value(i0, i1, i32, id, replay, k0, k1)


def dist_block(uint64_t key, uint64_t c, uint64_t replay, uint32_t j):
    """Block ``(c, j)`` (the counter layout of eagle/distributions.h)."""
    cdef uint32_t k0, k1
    k0, k1 = _key_words(key)
    cdef eagle_philox_words w = eagle_dist_block(c, replay, k0, k1, j)
    return (w.w0, w.w1, w.w2, w.w3)
