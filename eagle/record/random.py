"""What the random nodes of both backends share (``eagle.graph.random_bits``, ``uniform``,
``normal``): the checks of their arguments and the numbers their kernels take.

The generator is Philox4x32-10 (csrc/include/eagle/philox.h, one source for the CPU and
the GPU kernels). Sample ``i`` at replay ``r`` draws the four words of the counter
``(id & 0xffffffff, id >> 32, r & 0xffffffff, r >> 32)`` under the key
``(key & 0xffffffff, key >> 32)``, with ``id = i`` or ``ids[i]``; ``r`` is
``g.replays`` when the replay starts. The transforms are documented in philox.h.
The cpu nodes are in ``eagle.cpu.random_node``, the cuda nodes in ``eagle.cuda.random_node``.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from eagle.record.arrays import named_array
from eagle.record.memory import array_kind, refuse_shared_elements

#: what a random node draws (the numbers csrc/cpu/random_kernels.h and random.cu take)
BITS, UNIFORM, NORMAL = 0, 1, 2
KIND_NAMES = {BITS: "random_bits", UNIFORM: "uniform", NORMAL: "normal"}


@dataclass
class RandomSpec:
    """A random node's checked arguments."""

    what: int
    out_name: str
    out: object
    ids: object            # the ids array, or None (id = sample index)
    key: int
    f32: bool              # float32 output (uniform, normal)
    a: float               # uniform: low; normal: loc
    b: float               # uniform: high - low (in the output's type); normal: scale
    below: float           # uniform: the largest output value below high
    ids_name: str | None = None
    out2_name: str | None = None   # uniform: a second output, from words 2 and 3
    out2: object = None

    @property
    def kind(self) -> str:
        return KIND_NAMES[self.what]


def shape_dtype(a):
    """(shape, dtype) of a NumPy or ``__cuda_array_interface__`` array."""
    if isinstance(a, np.ndarray):
        return a.shape, a.dtype
    cai = a.__cuda_array_interface__
    return tuple(cai["shape"]), np.dtype(cai["typestr"])


def checked_ids(kind, ids, out_name, out):
    """``(name, array)`` of a random or distribution node's ``ids=`` (``(None, None)`` when
    not given): int64, one id per sample of ``out``, on its device, named apart from it."""
    if ids is None:
        return None, None
    ids_name, ids = named_array(ids, f"{kind}(): ids", "id")
    ishape, idt = shape_dtype(ids)
    n = shape_dtype(out)[0][0]
    if idt != np.int64:
        raise TypeError(f"{kind}(): ids {ids_name!r} must be int64, got {idt}")
    if len(ishape) != 1 or ishape[0] != n:
        raise ValueError(f"{kind}(): ids {ids_name!r} must be per-sample: 1-d with one id per sample "
                         f"of out ({n}), got shape {ishape}")
    if ids_name == out_name:
        raise ValueError(f"{kind}(): out and ids are both named {out_name!r}; give one another name "
                         "with a one-entry dict {name: array}")
    if array_kind(ids) != array_kind(out):
        raise TypeError(f"{kind}(): ids {ids_name!r} and out {out_name!r} must be on one device")
    return ids_name, ids


def as_uint64(value, what: str) -> int:
    """``value`` as a Philox counter or key word pair: an integer in [0, 2**64) (a NumPy
    integer too, not a bool), else a TypeError or ValueError that begins with ``what``
    ("g.replays is", "normal(): key= must be")."""
    if isinstance(value, bool):
        raise TypeError(f"{what} an integer in [0, 2**64), got a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} an integer in [0, 2**64), got {type(value).__name__}") from None
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{what} an integer in [0, 2**64), got {value}")
    return value


def _real(what, name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what}(): {name}= must be a real number, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{what}(): {name}= must be finite, got {v}")
    return v


def _largest_normal_z() -> float:
    """The largest |z| philox.h's Box-Muller transform can give: sqrt(-2 log u1) is largest
    at the smallest u1, 2**-53 (the top 53 bits of w0, w1 all zero), where eagle_log_01
    reduces exactly to -53 ln2_hi - 53 ln2_lo (k = -53, f = 0); |cos(2 pi u2)| is at most
    1, and exactly 1 at u2 = 0 (z = +max) and u2 = 1/2 (z = -max). Computed here with the
    kernel's own double operations (the tests check it against the compiled transform)."""
    ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    return math.sqrt(-2.0 * ((-53.0 * ln2_hi) - (53.0 * ln2_lo)))


#: the largest magnitude of a standard normal a ``normal`` node draws (8.5716743...)
NORMAL_Z_MAX = _largest_normal_z()


def _wider(t) -> str:
    return "a float64 out, or " if t is np.float32 else ""


def _finite_in(name, arg, v, t):
    """Refuse a parameter that is not finite in the output's type (a float32 node given
    1e39): the node's numbers would be inf or nan."""
    with np.errstate(over="ignore"):
        if not np.isfinite(t(v)):
            raise ValueError(f"{name}(): {arg}={v!r} is not finite in {np.dtype(t)} (its largest "
                             f"value is {np.finfo(t).max}); use {_wider(t)}a {arg} of smaller magnitude")


def _normal_fits(name, loc, scale, t):
    """Refuse loc, scale for which loc ± scale * NORMAL_Z_MAX, computed as the kernel
    computes it (in double, then rounded once to the output's type), overflows: those
    samples would be ±inf. The kernel's arithmetic is monotone in z, so the two extremes
    decide for every draw."""
    _finite_in(name, "loc", loc, t)
    _finite_in(name, "scale", scale, t)
    reach = scale * NORMAL_Z_MAX
    with np.errstate(over="ignore"):
        fits = np.isfinite(t(loc + reach)) and np.isfinite(t(loc - reach))
    if not fits:
        raise ValueError(
            f"{name}(): loc={loc!r} ± scale={scale!r} × {NORMAL_Z_MAX:.6f} (the largest |z| the "
            f"Philox normal transform draws, at u1 = 2**-53) overflows {np.dtype(t)} (largest "
            f"{np.finfo(t).max}): some samples would be inf; use {_wider(t)}a smaller scale or a "
            f"loc nearer 0")


def random_spec(what, out, key, ids=None, a=None, b=None) -> RandomSpec:
    """Check a random node's arguments (``a, b``: low, high or loc, scale) and return its
    spec; every error names the node and the argument."""
    name = KIND_NAMES[what]
    out2_name = out2 = None
    if what == UNIFORM and isinstance(out, Mapping) and len(out) == 2:
        (k1, a1), (k2, a2) = out.items()
        out2_name, out2 = named_array({k2: a2}, f"{name}(): out", "out", write=True)
        out = {k1: a1}
    out_name, out = named_array(out, f"{name}(): out", "out", write=True)
    shape, dtype = shape_dtype(out)
    if out2 is not None:
        shape2, dtype2 = shape_dtype(out2)
        if (shape2, dtype2) != (shape, dtype):
            raise TypeError(f"{name}(): the two outputs {out_name!r} and {out2_name!r} must have one shape "
                            f"and dtype, got {dtype} {shape} and {dtype2} {shape2}")
        if array_kind(out2) != array_kind(out):
            raise TypeError(f"{name}(): the two outputs {out_name!r} and {out2_name!r} must be on one device")
        refuse_shared_elements(out2, f"{name}()", f"out {out2_name!r}",
                               "every sample's numbers would land in the same bytes")
    refuse_shared_elements(out, f"{name}()", f"out {out_name!r}",
                           "every sample's numbers would land in the same bytes")
    if what == BITS:
        if dtype != np.uint32 or len(shape) != 2 or shape[1] != 4:
            raise TypeError(f"random_bits(): out {out_name!r} must be a uint32 array of shape (n, 4), "
                            f"got {dtype} {shape}")
        if isinstance(out, np.ndarray) and shape[0] > 0 and out.strides[1] != 4:
            raise ValueError(f"random_bits(): the rows of out {out_name!r} must be contiguous (the "
                             f"four words of a sample side by side), strides {out.strides}")
    else:
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"{name}(): out {out_name!r} must be a float32 or float64 array, got {dtype}")
        if len(shape) != 1:
            raise ValueError(f"{name}(): out {out_name!r} must be 1-d, one number per sample, got "
                             f"shape {shape}")
    key = as_uint64(key, f"{name}(): key= must be")
    ids_name, ids = checked_ids(name, ids, out_name, out)
    if out2 is not None and ids_name == out2_name:
        raise ValueError(f"{name}(): out and ids are both named {out2_name!r}; give one another name")
    f32 = dtype == np.float32
    below = 0.0
    if what == UNIFORM:
        low, high = _real(name, "low", a), _real(name, "high", b)
        if not low < high:
            raise ValueError(f"{name}(): low must be below high, got low={low}, high={high}")
        t = np.float32 if f32 else np.float64
        _finite_in(name, "low", low, t)
        _finite_in(name, "high", high, t)
        lo, hi = t(low), t(high)
        if not lo < hi:
            raise ValueError(f"{name}(): low={low} and high={high} are the same {dtype} value")
        with np.errstate(over="ignore"):
            span = t(hi - lo)
        if not np.isfinite(span):
            raise ValueError(f"{name}(): high - low = {high!r} - {low!r} overflows {dtype} (largest "
                             f"{np.finfo(t).max}); use {_wider(t)}a narrower range")
        a, b, below = float(lo), float(span), float(np.nextafter(hi, t(-np.inf)))
    elif what == NORMAL:
        a, b = _real(name, "loc", a), _real(name, "scale", b)
        if b < 0:
            raise ValueError(f"{name}(): scale must be >= 0, got {b}")
        _normal_fits(name, a, b, np.float32 if f32 else np.float64)
    else:
        a = b = 0.0
    return RandomSpec(what, out_name, out, ids, key, bool(f32), float(a), float(b), below, ids_name,
                      out2_name, out2)
