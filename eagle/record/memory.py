"""The memory an array covers, and whether two arrays' memory overlaps.

eagle orders nodes by memory, not by object identity: two views of one buffer
that overlap conflict, disjoint slices do not. An array's *extent* is the byte
range [lo, hi) between its first and last element; extents that do not meet
cannot share memory. When extents meet but an array has holes (a strided
view), NumPy's exact ``shares_memory`` decides, so ``x[::2]`` and ``x[1::2]``
stay independent.

Who owns the memory does not matter: ``as_strided``, ``sliding_window_view``,
``np.frombuffer``, memoryviews and ctypes-backed arrays are compared with every
other array by their bytes. ``eagle.record.staging`` indexes extents by address so
that an access meets only the arrays whose extents it overlaps.
"""
from __future__ import annotations

from typing import Any

import numpy as np

# NumPy's exact overlap test solves a small integer program; past this much work
# it gives up and eagle assumes the two views conflict (safe: it only orders them).
_SHARES_MEMORY_MAX_WORK = 10_000


def array_kind(a: Any) -> str | None:
    """'numpy', 'cuda', or None when ``a`` is not an array eagle can schedule."""
    if isinstance(a, np.ndarray):
        return "numpy"
    if hasattr(a, "__cuda_array_interface__"):
        return "cuda"
    return None


def array_family(arrays) -> str | None:
    """'numpy' or 'cuda' for a list of arrays; mixing them is an error."""
    kinds = {array_kind(a) for a in arrays}
    if len(kinds) > 1:
        raise TypeError("a node mixes NumPy arrays and CUDA arrays; eagle runs a graph on one "
                        "device: use NumPy arrays for the cpu backend or CuPy arrays for cuda")
    return kinds.pop() if kinds else None


class Extent:
    """Where an array's bytes lie: [lo, hi), plus what an exact test needs."""

    __slots__ = ("lo", "hi", "contiguous", "array")

    def __init__(self, lo: int, hi: int, contiguous: bool, array: Any):
        self.lo, self.hi, self.contiguous, self.array = lo, hi, contiguous, array

    def __repr__(self):
        return f"Extent(0x{self.lo:x}..0x{self.hi:x}, {'dense' if self.contiguous else 'strided'})"

    @property
    def empty(self) -> bool:
        return self.hi <= self.lo

    def key(self):
        """Identity of the view: accesses to the same view share one staging entry."""
        a = self.array
        if isinstance(a, np.ndarray):
            return (self.lo, self.hi, a.shape, a.strides, a.dtype.itemsize)
        iface = a.__cuda_array_interface__
        return (self.lo, self.hi, tuple(iface["shape"]), iface.get("strides"), iface["typestr"])

    def overlaps(self, other: "Extent") -> bool:
        """Whether the two arrays share a byte: extents first, NumPy's exact test where
        an array has holes (a test too hard to finish counts as an overlap)."""
        global overlap_tests
        overlap_tests += 1
        if self.empty or other.empty or self.hi <= other.lo or other.hi <= self.lo:
            return False
        if self.contiguous and other.contiguous:
            return True
        a, b = self.array, other.array
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            try:
                return bool(np.shares_memory(a, b, max_work=_SHARES_MEMORY_MAX_WORK))
            except np.exceptions.TooHardError:
                return True
        return True  # device arrays: extents meet, assume they conflict


#: overlap tests made so far in this process (the recording-scale tests count work with it)
overlap_tests = 0


def _span(ptr: int, shape, strides, itemsize: int):
    if any(n == 0 for n in shape):
        return ptr, ptr
    lo = hi = ptr
    for n, s in zip(shape, strides):
        if s >= 0:
            hi += s * (n - 1)
        else:
            lo += s * (n - 1)
    return lo, hi + itemsize


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


#: ndarray's own ``__array_interface__`` getter, which a subclass cannot replace
_ndarray_interface = np.ndarray.__dict__["__array_interface__"].__get__


def data_pointer(a: np.ndarray) -> int:
    """The address of ``a``'s first element, read from the array itself.

    Every address eagle takes from a NumPy array (the pointer a node is given, the
    extents staging compares, the same-memory tests) comes from here. Not from
    ``a.__array_interface__`` or ``a.ctypes``: an ndarray subclass can override
    those in Python and name another buffer, so a node would write memory the
    recording never saw. ndarray's own getter reads the array's data pointer."""
    return _ndarray_interface(a)["data"][0]


def extent_of(a: Any) -> Extent:
    if isinstance(a, np.ndarray):
        lo, hi = _span(data_pointer(a), a.shape, a.strides, a.itemsize)
        contiguous = a.flags.c_contiguous or a.flags.f_contiguous
        return Extent(lo, hi, contiguous, a)
    iface = a.__cuda_array_interface__
    ptr = iface["data"][0]
    shape = tuple(iface["shape"])
    itemsize = np.dtype(iface["typestr"]).itemsize
    strides = iface.get("strides") or _c_strides(shape, itemsize)
    lo, hi = _span(ptr, shape, strides, itemsize)
    contiguous = tuple(strides) == _c_strides(shape, itemsize)
    return Extent(lo, hi, contiguous, a)


def overlap(a: Any, b: Any) -> bool:
    """Whether two arrays share memory, by the rule staging and the group check use."""
    return extent_of(a).overlaps(extent_of(b))


def _disjoint_elements(shape, strides, itemsize) -> bool:
    """A sufficient test that no two elements of a strided layout share a byte:
    taken from the smallest stride up, each axis must step past everything the
    axes below it span (true of every C/F-ordered, sliced, transposed or
    reversed view; false of zero strides and overlapping windows)."""
    span = itemsize
    for n, s in sorted(((n, abs(s)) for n, s in zip(shape, strides) if n > 1), key=lambda t: t[1]):
        if s < span:
            return False
        span += s * (n - 1)
    return True


def refuse_shared_elements(a, where: str, subject: str, why: str) -> None:
    """ValueError when two elements of ``a``, an array a node writes element by element
    (a NumPy or ``__cuda_array_interface__`` array), may share a byte (a zero stride,
    ``as_strided`` rows that overlap, ``sliding_window_view``); the message begins
    with ``where`` (``"negative"``, ``"uniform()"``), names ``subject`` (``"out 'x'"``)
    and says ``why`` it cannot be written."""
    if isinstance(a, np.ndarray):
        shape, strides, itemsize = a.shape, a.strides, a.itemsize
    else:
        cai = a.__cuda_array_interface__
        shape, itemsize = tuple(cai["shape"]), np.dtype(cai["typestr"]).itemsize
        strides = cai.get("strides")
        if strides is None:
            return   # C-contiguous
    if int(np.prod(shape, dtype=np.int64)) > 1 and not _disjoint_elements(shape, tuple(strides), itemsize):
        raise ValueError(f"{where}: elements of {subject} share memory (strides {tuple(strides)}); {why} "
                         "(give an output whose elements are distinct)")


def samples_may_overlap(a: np.ndarray) -> bool:
    """Whether two different samples (indexes on axis 0) of ``a`` may share a byte:
    threads splitting the sample range would then race on it."""
    if a.ndim == 0 or a.shape[0] <= 1 or a.size == 0:
        return False
    row = a[0]
    lo, hi = _span(0, row.shape, row.strides, a.itemsize)
    if abs(a.strides[0]) >= hi - lo:
        return False   # each sample's bytes lie before the next sample's first byte
    return not _disjoint_elements(a.shape, a.strides, a.itemsize)


def same_view(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are one array: the same object, or views of the same bytes
    with the same layout (a DLPack object adopted twice gives two such views)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return (data_pointer(a) == data_pointer(b) and a.shape == b.shape
                and a.strides == b.strides and a.dtype == b.dtype)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return False
    ia, ib = a.__cuda_array_interface__, b.__cuda_array_interface__
    return all(ia.get(k) == ib.get(k) for k in ("data", "shape", "strides", "typestr"))


def leading_length(a: Any) -> int | None:
    """Length of the sample axis (axis 0), or None for a 0-d array."""
    shape = a.shape if isinstance(a, np.ndarray) else tuple(a.__cuda_array_interface__["shape"])
    return shape[0] if shape else None


def sample_extent(a: np.ndarray):
    """(lo, hi): the bytes of one sample (axis-0 index) of ``a``, from that sample's
    first element's address (lo < 0 where an inner stride is negative)."""
    return _span(0, a.shape[1:], a.strides[1:], a.itemsize)
