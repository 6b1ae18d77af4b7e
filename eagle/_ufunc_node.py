"""Ufunc nodes: ``ufunc(np.add, {"a": left}, {"b": right}, out={"out": out})``.

A ufunc node runs a ufunc's own compiled inner loop (NumPy's, scipy.special's,
a numba ``@vectorize``'d function's) over samples [start, stop) of the graph's
logical size, without the GIL, split across the team like a native kernel: no
Python call per replay. The loop is the one NumPy itself would run for the
operands' dtypes under ``casting="same_kind"``, resolved once, at record time
(see ``eagle._ufunc``).

Operands: an array, a scalar (copied at record time and broadcast to every
sample), or a one-entry dict ``{"name": array}`` that names the array for the
picture (bare arrays are named ``in0``, ``in1``, ..., ``out0``...). Axis 0 is
the sample axis: array operands share one shape ``(n, *row)``; rows must be
C-contiguous (the loop then runs over ``(stop - start) * row`` elements, or
row by row where the samples are not packed); a 0-d array broadcasts and is
read on every replay. A generalized ufunc (``np.matmul``, numba
``@guvectorize``) takes per-sample core dimensions: operands ``(n, *core)``.

Refused, with the reason: object loops and ``np.frompyfunc`` (they need the
GIL), operands whose dtype differs from the loop's (a buffered cast: pass
arrays of the loop's dtype), mismatched shapes, an output that partly
overlaps another operand (exact in-place, ``out=x`` with ``x`` an input, is
fine for an elementwise ufunc, not for a gufunc with core dimensions), an
output whose own elements share memory (a zero stride, overlapping rows):
NumPy would buffer these.

Floating-point errors are not reported: eagle does not consult
``np.errstate``; results are NumPy's under ``np.errstate(all="ignore")``.

With CuPy arrays the same constructor returns a GPU node: for the ufuncs in
``CUDA_EXPRESSIONS`` on 1-d operands, a sized ``cuda_kernel`` node running an
elementwise kernel eagle generates (retuned by patching, like any sized
kernel); for any other ufunc an opaque node that calls the CuPy ufunc during
capture, which keeps the size it was captured with.
"""
from __future__ import annotations

import math
import re
import numpy as np

from eagle._memory import array_kind, elements_may_overlap
from eagle._nodes import NativeNode, opaque

__all__ = ["ufunc", "UfuncNode", "cuda_source", "CUDA_EXPRESSIONS"]

#: dtype kinds a ufunc node runs: bool, integers, floats, complex, datetimes
_KINDS = "biufcmM"


class _Operand:
    __slots__ = ("name", "array", "value", "given_name")

    def __init__(self, name, array=None, value=None, given_name=False):
        self.name, self.array, self.value, self.given_name = name, array, value, given_name

    @property
    def is_array(self):
        return self.array is not None


def _real_ufunc(uf):
    """(np.ufunc, numba DUFunc or None) for a ufunc or an object wrapping one."""
    if isinstance(uf, np.ufunc):
        return uf, None
    inner = getattr(uf, "ufunc", None)   # numba's DUFunc (@vectorize) and GUFunc (@guvectorize)
    if isinstance(inner, np.ufunc):
        return inner, uf
    raise TypeError(f"ufunc() needs a NumPy ufunc (np.add, scipy.special.erf, a numba @vectorize "
                    f"function...), got {type(uf).__name__}")


def _operand(x, default_name, what):
    if isinstance(x, dict):
        if len(x) != 1:
            raise TypeError(f"{what}: a named operand is a one-entry dict {{name: array}}, got "
                            f"{len(x)} entries")
        (name, a), = x.items()
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what}: the name must be a non-empty string, got {name!r}")
        if array_kind(a) is None:
            raise TypeError(f"{what}: {name!r} must be an array (a scalar goes bare, without a name), "
                            f"got {type(a).__name__}")
        return _Operand(name, array=a, given_name=True)
    if array_kind(x) is not None:
        return _Operand(default_name, array=x)
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return _Operand(None, value=x)
    raise TypeError(f"{what} must be an array, a scalar or a one-entry dict {{name: array}}, "
                    f"got {type(x).__name__}")


def _parse(uf, operands, out):
    if len(operands) != uf.nin:
        raise TypeError(f"{uf.__name__} takes {uf.nin} operand(s), got {len(operands)}")
    if out is None:
        raise TypeError(f"ufunc({uf.__name__}, ...) needs out=: the array(s) the node writes")
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != uf.nout:
        raise TypeError(f"{uf.__name__} has {uf.nout} output(s), out= gives {len(outs)}")
    ins = [_operand(x, f"in{k}", f"operand {k} of {uf.__name__}") for k, x in enumerate(operands)]
    os_ = [_operand(x, f"out{k}", f"out[{k}] of {uf.__name__}") for k, x in enumerate(outs)]
    for k, o in enumerate(os_):
        if not o.is_array:
            raise TypeError(f"out[{k}] of {uf.__name__} must be an array, got a scalar")
    return ins, os_


def _declare(ins, outs):
    """reads, writes ({name: array}) and each operand's slot in the kernel's data[].

    An array given twice is declared once (under writes if the node writes it);
    its name is the one the caller gave it, else the name of its first position.
    """
    ops = ins + outs
    names = {}       # id(array) -> name
    owner = {}       # name -> id(array)
    for op in ops:
        if op.is_array and op.given_name:
            prev = names.setdefault(id(op.array), op.name)
            if prev != op.name:
                raise ValueError(f"one array is bound to two names, {prev!r} and {op.name!r}")
            if owner.setdefault(op.name, id(op.array)) != id(op.array):
                raise ValueError(f"the name {op.name!r} is bound to two different arrays")
    for op in ops:
        if op.is_array and id(op.array) not in names:
            name, k = op.name, 2
            while name in owner:
                name, k = f"{op.name}_{k}", k + 1
            names[id(op.array)] = name
            owner[name] = id(op.array)
    written = {id(o.array) for o in outs}
    reads, writes = {}, {}
    for op in ins:
        if op.is_array and id(op.array) not in written:
            reads.setdefault(names[id(op.array)], op.array)
    for op in outs:
        writes.setdefault(names[id(op.array)], op.array)
    order = [id(a) for a in reads.values()] + [id(a) for a in writes.values()]
    slots = [order.index(id(op.array)) if op.is_array else -1 for op in ops]
    for op in ops:
        if op.is_array:
            op.name = names[id(op.array)]
    return reads, writes, slots


_NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def _weak_dtype(v):
    """What NumPy's promotion sees for a scalar: Python int/float/complex are weak (NEP 50)."""
    if isinstance(v, np.generic):
        return v.dtype
    if isinstance(v, bool):
        return np.dtype(bool)
    if not _NUMPY_2:
        # NumPy 1.x resolves dtypes only; value-based casting comes closest through the
        # smallest dtype that holds the value
        return np.min_scalar_type(v)
    return type(v)


def _row_contiguous(shape, strides, itemsize):
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return True
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _check_overlap(ins, outs, uf):
    arrays = [op for op in ins + outs if op.is_array]
    # a gufunc's output element reads several input elements: no in-place is exact
    elementwise = uf.signature is None or not any(g for side in _parse_signature(uf.signature)
                                                  for g in side)
    for i, o in enumerate(outs):
        if any(o.array is p.array for p in outs[i + 1:]):
            raise ValueError(f"{uf.__name__}: one array is given for two outputs")
        if elements_may_overlap(o.array):
            raise ValueError(f"{uf.__name__}: elements of output {o.name!r} share memory (strides "
                             f"{o.array.strides}); NumPy would buffer it, a ufunc node does not "
                             "(give an output whose elements are distinct)")
        for op in arrays:
            a = op.array
            if o.array.size == 0 or a.size == 0:
                continue
            if a is o.array:
                if elementwise or any(op is x for x in outs):
                    continue
                raise ValueError(f"{uf.__name__}: output {o.name!r} is also an input; a generalized "
                                 "ufunc's output overlaps its input other than element for element, "
                                 "NumPy would buffer it, a ufunc node does not (give a separate output "
                                 "array)")
            same_layout = (a.__array_interface__["data"][0] == o.array.__array_interface__["data"][0]
                           and a.shape == o.array.shape and a.strides == o.array.strides
                           and a.dtype == o.array.dtype)
            is_output = any(op is x for x in outs)
            if same_layout and not is_output and elementwise:
                continue   # exact in-place through another view: sample i reads and writes sample i
            try:
                overlaps = np.shares_memory(o.array, a, max_work=100_000)
            except np.exceptions.TooHardError:
                overlaps = True
            if overlaps:
                raise ValueError(f"{uf.__name__}: output {o.name!r} overlaps {op.name!r} other than "
                                 "element for element; NumPy would buffer it, a ufunc node does not "
                                 "(give a separate output array)")


def _parse_signature(sig):
    """[(core dim names per input)], [(per output)] of a gufunc signature like '(n,k),(k)->(n)'."""
    lhs, rhs = sig.replace(" ", "").split("->")

    def side(s):
        return [tuple(d.rstrip("?") for d in grp.split(",") if d) for grp in re.findall(r"\(([^)]*)\)", s)]

    return side(lhs), side(rhs)


class UfuncNode(NativeNode):
    """A ufunc's inner loop run over samples [start, stop), nogil; drawn ``(name)``."""

    kind = "ufunc"
    box = ("(", ")")

    def __init__(self, uf, ins, outs, reads, writes, loop_dtypes, loop):
        super().__init__(loop.kernel(), reads, writes, split=True)
        self.ufunc = uf
        self.loop_dtypes = tuple(loop_dtypes)
        self.loop = loop
        self.operand_names = [op.name if op.is_array else repr(op.value) for op in ins + outs]

    def default_name(self) -> str:
        return self.ufunc.__name__

    def __repr__(self):
        args = ", ".join(self.operand_names[:self.ufunc.nin])
        outs = ", ".join(self.operand_names[self.ufunc.nin:])
        types = ",".join(d.char for d in self.loop_dtypes[:self.ufunc.nin]) + "->" + \
            ",".join(d.char for d in self.loop_dtypes[self.ufunc.nin:])
        return f"ufunc({self.ufunc.__name__}, {args}, out=({outs}), loop {types})"


def ufunc(uf, *operands, out=None):
    """A node that runs ufunc ``uf``'s own compiled inner loop on ``operands`` into ``out``.

    ``ufunc(np.multiply, {"x": x}, 2.0, out={"a": left})`` computes
    ``np.multiply(x, 2.0, out=left)`` over samples [0, logical_size) on every
    replay, without the GIL, split across the team like a native kernel; it
    is drawn ``(multiply)``. ``uf`` is any real ufunc: NumPy's, scipy.special's,
    a numba ``@vectorize`` or ``@guvectorize`` function.

    Each operand is an array, a scalar (copied at record time, broadcast), or
    a one-entry dict ``{"name": array}`` naming the array for the picture;
    ``out`` is an array or such a dict, a tuple of them for several outputs.
    Axis 0 is the sample axis: array operands share one shape ``(n, *row)``
    with C-contiguous rows (a gufunc takes ``(n, *core)``); a 0-d array
    broadcasts and is read on every replay.

    The loop is the one NumPy picks for these dtypes under
    ``casting="same_kind"``. Refused with ``TypeError``: object loops and
    ``np.frompyfunc`` (they need the GIL), and operands whose dtype is not the
    loop's (a buffered cast). Refused with ``ValueError``: mismatched shapes,
    non-contiguous rows, an output partly overlapping another operand (or, for a gufunc,
    being one of its inputs), an output whose elements share memory.
    Floating-point errors are not reported (as under ``np.errstate(all="ignore")``).
    With CuPy arrays it returns a GPU node (see ``eagle._ufunc_node``).
    """
    uf, dufunc = _real_ufunc(uf)
    ins, outs = _parse(uf, operands, out)
    kinds = {array_kind(op.array) for op in ins + outs if op.is_array}
    if len(kinds) > 1:
        raise TypeError("a node mixes NumPy arrays and CUDA arrays; eagle runs a graph on one "
                        "device: use NumPy arrays for the cpu backend or CuPy arrays for cuda")
    if kinds == {"cuda"}:
        return _cuda_ufunc(uf, ins, outs)
    for op in ins + outs:
        if not op.is_array:
            continue
        a = op.array
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{op.name!r} must be a NumPy array, got {type(a).__name__}")
        if type(a).__array_ufunc__ is not np.ndarray.__array_ufunc__ or isinstance(a, np.ma.MaskedArray):
            # a masked array, a unit-carrying array...: its ufunc behaviour is its own
            raise TypeError(f"{op.name!r} is a {type(a).__name__}, which gives ufuncs a meaning of its "
                            "own (a mask, __array_ufunc__); a ufunc node runs NumPy's loop on the plain "
                            "data and would bypass it: pass a plain ndarray")
        if not a.flags.aligned:
            raise ValueError(f"{op.name!r} is not aligned for its dtype {a.dtype}; NumPy would copy it "
                             "through a buffer, a ufunc node does not (pass an aligned array)")
    for o in outs:
        if not o.array.flags.writeable:
            raise ValueError(f"{uf.__name__} writes {o.name!r}, which is read-only")

    ops = ins + outs
    nargs = len(ops)
    if uf.signature is None:
        layout = _elementwise_layout(uf, ins, outs)
    else:
        layout = _gufunc_layout(uf, ins, outs)
    steps = layout["steps"]

    dtypes = [op.array.dtype if op.is_array else _weak_dtype(op.value) for op in ops]
    for op, d in zip(ops, dtypes):
        if isinstance(d, np.dtype) and d.kind not in _KINDS:
            raise TypeError(f"{uf.__name__}: {op.name or repr(op.value)!r} has dtype {d}; a ufunc node "
                            "runs loops over bool, integer, float, complex and datetime dtypes "
                            "(object and string loops need the GIL)")
    loop_dtypes, capsule = _resolve(uf, dufunc, dtypes, steps)
    constants = [None] * nargs
    for k, (op, want) in enumerate(zip(ops, loop_dtypes)):
        if op.is_array:
            if op.array.dtype != want:
                if k >= uf.nin:
                    how = (f"NumPy would cast the {want} result into it; give a {want} output "
                           f"(or inputs that make NumPy pick a {op.array.dtype} loop)")
                else:
                    how = f"NumPy would cast it to {want} first; pass a {want} array"
                raise TypeError(
                    f"{uf.__name__}: {op.name!r} is {op.array.dtype}, but the loop NumPy picks for these "
                    f"operands is {_loop_text(uf, loop_dtypes)}: {how}. That is a buffered cast, which "
                    "a ufunc node does not do")
        else:
            v = op.value
            if isinstance(v, np.generic):
                constants[k] = np.asarray(v).astype(want, casting="same_kind")
            else:
                constants[k] = np.array(v, dtype=want)   # OverflowError as NumPy's for a too-large int
    _check_overlap(ins, outs, uf)
    reads, writes, slots = _declare(ins, outs)

    from eagle._ufunc import UfuncLoop

    loop = UfuncLoop(uf.__name__, capsule, slots, constants, layout["sample_strides"], steps,
                     layout["per_sample"], layout["row_len"], layout["core_dims"], layout["core_steps"])
    return UfuncNode(uf, ins, outs, reads, writes, loop_dtypes, loop)


def _loop_text(uf, dts):
    return (",".join(str(d) for d in dts[:uf.nin]) + "->" + ",".join(str(d) for d in dts[uf.nin:]))


def _resolve(uf, dufunc, dtypes, steps):
    from eagle._ufunc import resolve_loop

    try:
        return resolve_loop(uf, dtypes, steps)
    except TypeError as e:
        if dufunc is not None and not getattr(dufunc, "_frozen", True):
            err = e
        else:
            shown = ", ".join(d.__name__ if isinstance(d, type) else str(d) for d in dtypes)
            raise TypeError(f"{uf.__name__} has no loop NumPy would run for ({shown}) under "
                            f"casting='same_kind': {e}") from None
    # a lazy numba @vectorize: compile the loop for the inputs' dtypes, then resolve again
    import numba

    argtys = tuple(numba.from_dtype(np.dtype(d) if isinstance(d, np.dtype)
                                    else np.result_type(d(0))) for d in dtypes[:uf.nin])
    try:
        dufunc._compile_for_argtys(argtys)
    except Exception as e:
        raise TypeError(f"numba could not compile {uf.__name__} for {argtys}: {e}") from err
    try:
        return resolve_loop(dufunc.ufunc, dtypes, steps)
    except TypeError as e:
        raise TypeError(f"{uf.__name__} has no loop for these operands after compiling: {e}") from None


def _elementwise_layout(uf, ins, outs):
    ops = ins + outs
    shaped = [op for op in ops if op.is_array and op.array.ndim >= 1]
    for k, o in enumerate(outs):
        if o.array.ndim == 0:
            raise ValueError(f"{uf.__name__}: output {o.name!r} is 0-d; a ufunc node's outputs have a "
                             "sample axis (axis 0)")
    shape = shaped[0].array.shape
    for op in shaped:
        if op.array.shape != shape:
            raise ValueError(f"{uf.__name__}: {op.name!r} has shape {op.array.shape} but "
                             f"{shaped[0].name!r} has {shape}; a ufunc node's array operands share one "
                             "shape (n, *row) (0-d arrays and scalars broadcast)")
    row = shape[1:]
    row_len = math.prod(row)
    n = shape[0]
    for op in shaped:
        a = op.array
        if a.size and not _row_contiguous(row, a.strides[1:], a.itemsize):   # empty: no row runs
            raise ValueError(f"{uf.__name__}: the per-sample rows of {op.name!r} are not contiguous "
                             f"(strides {a.strides}); a ufunc node runs rows as flat runs of elements: "
                             "pass a C-contiguous row layout (np.ascontiguousarray)")
    sample_strides = [op.array.strides[0] if op.is_array and op.array.ndim else 0 for op in ops]
    if not row:
        steps = list(sample_strides)
        per_sample = False
    else:
        steps = [op.array.itemsize if op.is_array and op.array.ndim else 0 for op in ops]
        packed = n <= 1 or all(op.array.strides[0] == row_len * op.array.itemsize for op in shaped)
        per_sample = not packed
    return dict(sample_strides=sample_strides, steps=steps, per_sample=per_sample,
                row_len=1 if not row else row_len, core_dims=[], core_steps=[])


def _gufunc_layout(uf, ins, outs):
    core_in, core_out = _parse_signature(uf.signature)
    cores = core_in + core_out
    ops = ins + outs
    sizes = {}
    order = []     # core dim names in order of first appearance (NumPy's dimensions[1:])
    for grp in cores:
        for d in grp:
            if d not in order and not d.isdigit():
                order.append(d)
    n = None
    core_steps = []
    for op, grp in zip(ops, cores):
        if not op.is_array:
            if grp:
                raise TypeError(f"{uf.__name__}{uf.signature}: a scalar cannot stand for an operand "
                                f"with core dimensions {grp}")
            continue
        a = op.array
        if a.ndim != 1 + len(grp):
            raise ValueError(f"{uf.__name__}{uf.signature}: {op.name!r} has shape {a.shape}; a ufunc "
                             f"node takes it as (samples, {', '.join(grp) or '...'}): "
                             f"{1 + len(grp)}-d (optional core dimensions must be present)")
        if n is None:
            n = a.shape[0]
        elif a.shape[0] != n:
            raise ValueError(f"{uf.__name__}: {op.name!r} has {a.shape[0]} samples, others {n}")
        for d, size, stride in zip(grp, a.shape[1:], a.strides[1:]):
            if d.isdigit():
                if size != int(d):
                    raise ValueError(f"{uf.__name__}{uf.signature}: {op.name!r} core dimension "
                                     f"must be {d}, got {size}")
            elif sizes.setdefault(d, size) != size:
                raise ValueError(f"{uf.__name__}{uf.signature}: core dimension {d!r} is {sizes[d]} in "
                                 f"one operand and {size} in {op.name!r}")
            core_steps.append(stride)
    if n is None:
        raise ValueError(f"{uf.__name__}: a ufunc node needs an array operand with a sample axis")
    missing = [d for d in order if d not in sizes]
    if missing:
        raise ValueError(f"{uf.__name__}{uf.signature}: core dimension {missing[0]!r} is not set by "
                         "any operand")
    sample_strides = [op.array.strides[0] if op.is_array else 0 for op in ops]
    return dict(sample_strides=sample_strides, steps=list(sample_strides), per_sample=False, row_len=1,
                core_dims=[sizes[d] for d in order], core_steps=core_steps)


# ---- the GPU face ------------------------------------------------------------------------

#: ufuncs eagle writes an elementwise CUDA kernel for: name -> C expression of a, b
CUDA_EXPRESSIONS = {
    "add": "a + b", "subtract": "a - b", "multiply": "a * b", "divide": "a / b",
    "true_divide": "a / b", "negative": "-a", "positive": "a", "square": "a * a",
    "maximum": "(a > b || a != a) ? a : b", "minimum": "(a < b || a != a) ? a : b",
    "sqrt": "sqrt(a)", "exp": "exp(a)", "log": "log(a)", "sin": "sin(a)", "cos": "cos(a)",
    "tanh": "tanh(a)", "absolute": "fabs(a)", "fabs": "fabs(a)", "reciprocal": "1 / a",
}
_FLOAT_ONLY = {"sqrt", "exp", "log", "sin", "cos", "tanh", "fabs"}
_C_TYPES = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int",
            "uint64": "unsigned long long", "uint32": "unsigned int"}


def cuda_source(name, loop_dtypes, scalar_args):
    """(CUDA source, kernel name) of an elementwise kernel for ufunc ``name`` over 1-d
    operands, or None when eagle does not generate one for these dtypes.

    ``scalar_args[k]`` says whether input k is a scalar passed by value. The
    kernel takes, per operand, a pointer and a byte stride (or, for a scalar
    input, its value), then the logical size ``n`` (``long long``).
    """
    expr = CUDA_EXPRESSIONS.get(name)
    nin = len(scalar_args)
    if expr is None or len(loop_dtypes) != nin + 1 or nin not in (1, 2):
        return None
    ctypes_ = [_C_TYPES.get(np.dtype(d).name) for d in loop_dtypes]
    if None in ctypes_ or len(set(ctypes_)) != 1:
        return None
    t = ctypes_[0]
    if name in _FLOAT_ONLY and t not in ("double", "float"):
        return None
    if name == "absolute" and t not in ("double", "float"):
        expr = "(a < 0 ? -a : a)"
    kname = f"eagle_ufunc_{name}_{np.dtype(loop_dtypes[0]).name}_" + \
        "".join("s" if s else "a" for s in scalar_args)
    params, loads = [], []
    for k, (var, scalar) in enumerate(zip("ab", scalar_args)):
        if scalar:
            params.append(f"{t} {var}")
        else:
            params.append(f"const char *in{k}, long long s{k}")
            loads.append(f"    {t} {var} = *(const {t} *)(in{k} + i * s{k});")
    src = (f'extern "C" __global__ void {kname}({", ".join(params)}, char *out0, long long so, '
           f"long long n) {{\n"
           f"    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
           f"    if (i >= n) return;\n" + "\n".join(loads) + "\n"
           f"    *({t} *)(out0 + i * so) = ({t})({expr});\n}}\n")
    return src, kname


def _cuda_strides(a):
    cai = a.__cuda_array_interface__
    strides = cai.get("strides")
    itemsize = np.dtype(cai["typestr"]).itemsize
    return strides[0] if strides else itemsize


def _cuda_ufunc(uf, ins, outs):
    import eagle.graph as graph

    reads, writes, _ = _declare(ins, outs)
    dtypes = [np.dtype(op.array.__cuda_array_interface__["typestr"]) if op.is_array
              else _weak_dtype(op.value) for op in ins + outs]
    loop_dtypes = uf.resolve_dtypes(tuple(dtypes), casting="same_kind")
    one_d = all(len(op.array.__cuda_array_interface__["shape"]) == 1 for op in ins + outs if op.is_array)
    exact = all(not op.is_array or d == want for op, d, want in zip(ins + outs, dtypes, loop_dtypes))
    made = None
    if one_d and exact and uf.nout == 1:
        made = cuda_source(uf.__name__, loop_dtypes, [not op.is_array for op in ins])
    if made is not None:
        import cupy

        src, kname = made
        kernel = cupy.RawKernel(src, kname)
        args = []
        for op, want in zip(ins, loop_dtypes):
            if op.is_array:
                args += [op.array, np.int64(_cuda_strides(op.array))]
            else:
                args.append(np.asarray(op.value).astype(want, casting="same_kind")[()])
        args += [outs[0].array, np.int64(_cuda_strides(outs[0].array)), graph.SIZE]
        return graph.cuda_kernel(kernel, args, reads=reads, writes=writes)
    # any other ufunc: CuPy's own, called while the graph is captured (keeps its captured size)
    import cupy

    cp_uf = getattr(cupy, uf.__name__, None)
    if cp_uf is None:
        raise TypeError(f"CuPy has no ufunc {uf.__name__!r}, and eagle generates no CUDA kernel for it")
    args = [op.array if op.is_array else op.value for op in ins]
    out_arrays = tuple(o.array for o in outs)

    def run():
        cp_uf(*args, out=out_arrays if len(out_arrays) > 1 else out_arrays[0])

    run.__name__ = uf.__name__
    return opaque(run, reads=reads, writes=writes)
