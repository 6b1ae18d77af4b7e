"""What the distribution nodes of both backends share (``eagle.graph.exponential``,
``poisson``, ``binomial``, ``integers``): the checks of their arguments and the numbers
their kernels take.

The samplers are csrc/include/eagle/distributions.h (one source for the CPU kernels,
csrc/cpu/distribution_kernels.c, and the GPU kernel, eagle/cuda/kernels/random.cu): block
``(c, j)`` at replay ``r`` is the Philox counter ``(c & 0xffffffff, c >> 32, r & 0xffffffff,
(r >> 32) ^ (j << 16))`` under the node's key; sample ``id``'s own blocks are ``(id, 0), (id,
1), ...`` (``(id, 0)`` is the block ``random_bits`` draws), so a rejection sampler takes as
many blocks as it needs, and exponential and integers start from their part of a block
consecutive samples share (``(id >> 1, 0)``, ``(id >> 2, 0)``): a sample's numbers depend
only on key, id, replay and the parameters. A parameter is a scalar, checked here, or a per-sample array (an array or a
one-entry dict: float64 for ``scale``/``lam``/``p``, int64 for ``n``/``low``/``high``),
read by the node; a sample whose own parameter is out of range gets a marker instead
of a number: nan (exponential), -1 (poisson, binomial), the output type's smallest
value (integers).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from eagle.record.arrays import named_array
from eagle.record.memory import array_kind, refuse_shared_elements
from eagle.record.random import as_uint64, checked_ids, shape_dtype

#: the distribution numbers of csrc/cpu/distribution_kernels.h
EXPONENTIAL, POISSON, BINOMIAL, INTEGERS = 0, 1, 2, 3
KIND_NAMES = {EXPONENTIAL: "exponential", POISSON: "poisson", BINOMIAL: "binomial", INTEGERS: "integers"}
#: the output types of csrc/cpu/distribution_kernels.h
OUT_TYPES = {np.dtype(np.float64): 0, np.dtype(np.float32): 1, np.dtype(np.int64): 2, np.dtype(np.int32): 3}

#: the largest lam and n the samplers take (EAGLE_POISSON_LAM_MAX, EAGLE_BINOMIAL_N_MAX)
POISSON_LAM_MAX = 1e15
BINOMIAL_N_MAX = (1 << 52) - 1
#: the largest standard exponential the node draws: -log(2**-53) (53 ln 2 = 36.7368...)
EXPONENTIAL_MAX = 53 * math.log(2.0)

@dataclass
class Param:
    """One parameter: its scalar value, or the per-sample array the node reads."""

    arg: str                # the keyword (scale, lam, n, p, low, high)
    value: float | int      # the scalar (0 when per-sample)
    array: object = None
    name: str | None = None  # the array's name

    @property
    def per_sample(self) -> bool:
        return self.array is not None


@dataclass
class DistributionSpec:
    """A distribution node's checked arguments."""

    what: int
    out_name: str
    out: object
    ids: object
    ids_name: str | None
    key: int
    out_type: int
    params: tuple   # of Param, in the kernel's order (parameter 0, parameter 1)

    @property
    def kind(self) -> str:
        return KIND_NAMES[self.what]

    def reads(self) -> dict:
        """The arrays the node reads: the ids, then the per-sample parameters."""
        r = {self.ids_name: self.ids} if self.ids is not None else {}
        r.update({p.name: p.array for p in self.params if p.per_sample})
        return r

    def scalars(self):
        """``(d0, d1, i0, i1)``: the scalar parameters as the kernels take them."""
        d = [0.0, 0.0]
        i = [0, 0]
        for k, p in enumerate(self.params):
            if isinstance(p.value, float):
                d[k] = p.value
            else:
                i[k] = p.value
        return d[0], d[1], i[0], i[1]


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _real(kind, arg, v):
    if not _is_scalar(v):
        raise TypeError(f"{kind}(): {arg}= must be a real number or a per-sample float64 array, got "
                        f"{type(v).__name__}")
    v = float(v)
    if math.isnan(v):
        raise ValueError(f"{kind}(): {arg}= is nan")
    return v


def _integer(kind, arg, v):
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{kind}(): {arg}= must be an integer or a per-sample int64 array, got a bool")
    if isinstance(v, (float, np.floating)):
        if not float(v).is_integer():
            raise TypeError(f"{kind}(): {arg}= must be an integer, got {v!r}")
        v = int(v)
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{kind}(): {arg}= must be an integer or a per-sample int64 array, got "
                        f"{type(v).__name__}") from None
    if not -(1 << 63) <= v < 1 << 63:
        raise ValueError(f"{kind}(): {arg}={v} is outside int64")
    return v


def _per_sample(kind, arg, v, dtype, out, out_name, taken):
    """A per-sample parameter array: 1-d, ``dtype``, one entry per sample of out, on
    out's device, its name not taken by another array of the node."""
    what = f"a real number or a per-sample {np.dtype(dtype)} array" if dtype == np.float64 else \
        f"an integer or a per-sample {np.dtype(dtype)} array"
    try:
        name, a = named_array(v, f"{kind}(): {arg}", arg)
    except TypeError as e:
        raise TypeError(f"{kind}(): {arg}= must be {what}: {e}") from None
    shape, dt = shape_dtype(a)
    if dt != dtype:
        raise TypeError(f"{kind}(): {arg} {name!r} must be {np.dtype(dtype)} (one {arg} per sample), got {dt}")
    n = shape_dtype(out)[0][0]
    if len(shape) != 1 or shape[0] != n:
        raise ValueError(f"{kind}(): {arg} {name!r} must be per-sample: 1-d with one entry per sample of "
                         f"out ({n}), got shape {shape}")
    if array_kind(a) != array_kind(out):
        raise TypeError(f"{kind}(): {arg} {name!r} and out {out_name!r} must be on one device")
    if name in taken:
        raise ValueError(f"{kind}(): {arg} and {taken[name]} are both named {name!r}; give one another "
                         "name with a one-entry dict {name: array}")
    taken[name] = arg
    return Param(arg, 0.0 if dtype == np.float64 else 0, a, name)


def _param(kind, arg, v, dtype, out, out_name, taken, check):
    """A scalar (checked by ``check``) or a per-sample array parameter."""
    if _is_scalar(v) or isinstance(v, (bool, np.bool_)):
        value = (_real if dtype == np.float64 else _integer)(kind, arg, v)
        check(value)
        return Param(arg, value)
    return _per_sample(kind, arg, v, dtype, out, out_name, taken)


def distribution_spec(what, out, key, ids=None, **kw) -> DistributionSpec:
    """Check a distribution node's arguments (keywords: scale; lam; n, p; low, high) and
    return its spec; every error names the node and the argument."""
    kind = KIND_NAMES[what]
    out_name, out = named_array(out, f"{kind}(): out", "out", write=True)
    shape, dtype = shape_dtype(out)
    refuse_shared_elements(out, f"{kind}()", f"out {out_name!r}",
                           "every sample's numbers would land in the same bytes")
    floats = what == EXPONENTIAL
    allowed = (np.float32, np.float64) if floats else (np.int32, np.int64) if what == INTEGERS else (np.int64,)
    if dtype not in allowed:
        want = " or ".join(str(np.dtype(t)) for t in allowed)
        raise TypeError(f"{kind}(): out {out_name!r} must be a {want} array, got {dtype}")
    if len(shape) != 1:
        raise ValueError(f"{kind}(): out {out_name!r} must be 1-d, one number per sample, got shape {shape}")
    key = as_uint64(key, f"{kind}(): key= must be")
    taken = {out_name: "out"}
    ids_name, ids = checked_ids(kind, ids, out_name, out)
    if ids is not None:
        taken[ids_name] = "ids"

    def param(arg, dt, check=lambda v: None):
        return _param(kind, arg, kw[arg], dt, out, out_name, taken, check)

    if what == EXPONENTIAL:
        def scale_ok(v):
            if not 0.0 <= v < math.inf:
                raise ValueError(f"exponential(): scale must be finite and >= 0, got {v}")
            t = np.float32 if dtype == np.float32 else np.float64
            with np.errstate(over="ignore"):
                if not np.isfinite(t(v * EXPONENTIAL_MAX)):
                    raise ValueError(
                        f"exponential(): scale={v!r} × {EXPONENTIAL_MAX:.4f} (the largest standard "
                        f"exponential the node draws, -log(2**-53)) overflows {dtype}: some samples would "
                        "be inf; use a smaller scale" + (" or a float64 out" if t is np.float32 else ""))
        params = (param("scale", np.float64, scale_ok),)
    elif what == POISSON:
        def lam_ok(v):
            if not 0.0 <= v <= POISSON_LAM_MAX:
                raise ValueError(f"poisson(): lam must be in [0, {POISSON_LAM_MAX:g}], got {v}")
        params = (param("lam", np.float64, lam_ok),)
    elif what == BINOMIAL:
        def n_ok(v):
            if not 0 <= v <= BINOMIAL_N_MAX:
                raise ValueError(f"binomial(): n must be in [0, 2**52 - 1], got {v}")

        def p_ok(v):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"binomial(): p must be in [0, 1], got {v}")
        params = (param("n", np.int64, n_ok), param("p", np.float64, p_ok))
    else:
        i32 = dtype == np.int32
        params = (param("low", np.int64), param("high", np.int64))
        lo, hi = params
        if not lo.per_sample and not hi.per_sample and not lo.value < hi.value:
            raise ValueError(f"integers(): low must be below high (high is excluded), got low={lo.value}, "
                             f"high={hi.value}")
        if i32:
            for p, least, most in ((lo, -(1 << 31), (1 << 31) - 1), (hi, -(1 << 31) + 1, 1 << 31)):
                if not p.per_sample and not least <= p.value <= most:
                    raise ValueError(f"integers(): {p.arg}={p.value} does not fit the int32 out "
                                     f"{out_name!r} (low in [-2**31, 2**31), high in (-2**31, 2**31]); "
                                     "use an int64 out")
    return DistributionSpec(what, out_name, out, ids, ids_name, key, OUT_TYPES[np.dtype(dtype)], params)

