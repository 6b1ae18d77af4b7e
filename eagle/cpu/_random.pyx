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
        uint64_t (*replay)() noexcept nogil
    void eagle_random_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                             void *user_data)

BITS, UNIFORM, NORMAL = 0, 1, 2

ctypedef uint64_t (*replay_fn)() noexcept nogil
cdef replay_fn _thread_replay = <replay_fn>PyCapsule_GetPointer(THREAD_REPLAY, "eagle.cpu.thread_replay")


cdef class _Params:
    """The kernel's user_data; lives as long as the kernel (its owner)."""
    cdef eagle_random_params p


def random_kernel(str name, int what, uint64_t key, bint f32, bint has_ids, double a, double b,
                  double below):
    """The Kernel of one random node: ``what`` is BITS, UNIFORM or NORMAL; ``a, b`` are
    (low, high - low) or (loc, scale) and ``below`` the largest value below high."""
    cdef _Params params = _Params()
    params.p.key0 = <uint32_t>(key & 0xffffffff)
    params.p.key1 = <uint32_t>(key >> 32)
    params.p.what = what
    params.p.f32 = f32
    params.p.has_ids = has_ids
    params.p.a = a
    params.p.b = b
    params.p.below = below
    params.p.replay = _thread_replay
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
