"""The operands of a ufunc node, for both backends: parsed, named and declared.

``eagle.graph.ufunc(uf, *operands, out=..., where=...)`` takes an array, a
scalar or a one-entry dict ``{"name": array}`` per operand (and for ``where=``,
NumPy's mask); this module turns them into ``Operand`` objects and into the
node's ``reads`` / ``writes`` declarations (the mask is a read).
The cpu node (``eagle.cpu.ufunc_node``) and the cuda node
(``eagle.cuda.ufunc_node``) build on it.
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from eagle.record.arrays import named_array
from eagle.record.memory import array_kind

__all__ = ["Operand", "real_ufunc", "parse_operands", "parse_where", "declare", "updated_names",
           "reduce_operands", "at_operands", "reduce_identity",
           "weak_dtype",
           "parse_signature"]


class Operand:
    __slots__ = ("name", "array", "value", "given_name")

    def __init__(self, name, array=None, value=None, given_name=False):
        self.name, self.array, self.value, self.given_name = name, array, value, given_name

    @property
    def is_array(self):
        return self.array is not None


def real_ufunc(uf):
    """(np.ufunc, numba DUFunc or None) for a ufunc or an object wrapping one."""
    if isinstance(uf, np.ufunc):
        return uf, None
    inner = getattr(uf, "ufunc", None)   # numba's DUFunc (@vectorize) and GUFunc (@guvectorize)
    if isinstance(inner, np.ufunc):
        return inner, uf
    raise TypeError(f"ufunc() needs a NumPy ufunc (np.add, scipy.special.erf, a numba @vectorize "
                    f"function...), got {type(uf).__name__}")


def _operand(x, default_name, what, write=False):
    """An operand: a scalar (copied at record time), or an array or ``{name: array}``
    (``eagle.record.arrays``)."""
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return Operand(None, value=x)
    if isinstance(x, Mapping) and len(x) == 1 and isinstance(next(iter(x.values())),
                                                             (bool, int, float, complex, np.generic)):
        raise TypeError(f"{what}: {next(iter(x))!r} must be an array (a scalar goes bare, without a name)")
    name, a = named_array(x, what, default_name, write=write,
                          expected="an array, a scalar or a one-entry dict {name: array}")
    return Operand(name, array=a, given_name=isinstance(x, Mapping))


def parse_operands(uf, operands, out):
    if len(operands) != uf.nin:
        raise TypeError(f"{uf.__name__} takes {uf.nin} operand(s), got {len(operands)}")
    if out is None:
        raise TypeError(f"ufunc({uf.__name__}, ...) needs out=: the array(s) the node writes")
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != uf.nout:
        raise TypeError(f"{uf.__name__} has {uf.nout} output(s), out= gives {len(outs)}")
    ins = [_operand(x, f"in{k}", f"operand {k} of {uf.__name__}") for k, x in enumerate(operands)]
    for k, o in enumerate(outs):
        if isinstance(o, (bool, int, float, complex, np.generic)):
            raise TypeError(f"out[{k}] of {uf.__name__} must be an array, got a scalar")
    os_ = [_operand(x, f"out{k}", f"out[{k}] of {uf.__name__}", write=True) for k, x in enumerate(outs)]
    return ins, os_


def parse_where(uf, where):
    """``where=`` as NumPy takes it: None or a scalar (True / False as ``bool(where)``,
    NumPy's reading of a scalar mask) -> True / False; an array or ``{"name": array}``
    -> an ``Operand`` (default name ``where``). An array mask must be bool: NumPy
    casts it to bool under 'safe' casting, which only bool passes."""
    if where is None:
        return True
    if isinstance(where, (bool, int, float, complex, np.generic)):
        return bool(where)
    if uf.signature is not None:
        raise TypeError(f"{uf.__name__} is a generalized ufunc ({uf.signature}); NumPy takes no "
                        "where= for those, nor does a ufunc node")
    op = _operand(where, "where", f"where= of {uf.__name__}")
    dt = np.dtype(op.array.__cuda_array_interface__["typestr"]) if array_kind(op.array) == "cuda" \
        else getattr(op.array, "dtype", None)
    if dt != np.dtype(bool):
        raise TypeError(f"where= of {uf.__name__}: the mask {op.name!r} is {dt}; NumPy casts a mask "
                        "to bool under casting='safe', which refuses it: pass a bool array "
                        f"({op.name} != 0)")
    return op


def reduce_operands(uf, operands, out, where):
    """(x, out, mask) of ``ufunc(uf.reduce, x, out=s, where=...)``: ``Operand`` s (the
    mask True, False or an ``Operand``, as ``parse_where``), names distinct."""
    what = f"ufunc({uf.__name__}.reduce)"
    if len(operands) != 1:
        raise TypeError(f"{what} takes one operand (the array to reduce over its sample axis), "
                        f"got {len(operands)}")
    if out is None or isinstance(out, (tuple, list)):
        raise TypeError(f"{what} needs out=: one array of the operand's shape past the sample axis "
                        "(0-d for a 1-d operand)")
    x = _operand(operands[0], "in0", f"operand of {what}")
    s = _operand(out, "out0", f"out= of {what}", write=True)
    if not s.is_array:
        raise TypeError(f"out= of {what} must be an array, got a scalar")
    mask = True if where is None else (bool(where) if isinstance(where, (bool, int, float, complex, np.generic))
                                       else _mask_operand(uf, where, what))
    _distinct_names([x, s] + ([mask] if isinstance(mask, Operand) else []), what)
    return x, s, mask


def _mask_operand(uf, where, what):
    op = _operand(where, "where", f"where= of {what}")
    dt = np.dtype(op.array.__cuda_array_interface__["typestr"]) if array_kind(op.array) == "cuda" \
        else getattr(op.array, "dtype", None)
    if dt != np.dtype(bool):
        raise TypeError(f"where= of {what}: the mask {op.name!r} is {dt}; pass a bool array ({op.name} != 0)")
    return op


def at_operands(uf, operands):
    """(tally, index, weights) of ``ufunc(uf.at, tally, index, weights)``: ``Operand`` s
    (weights may be a scalar)."""
    what = f"ufunc({uf.__name__}.at)"
    if len(operands) != 3:
        raise TypeError(f"{what} takes (tally, index, weights) as NumPy's {uf.__name__}.at(a, indices, b), "
                        f"got {len(operands)} operand(s)")
    tally = _operand(operands[0], "tally", f"the tally of {what}", write=True)
    index = _operand(operands[1], "index", f"the indices of {what}")
    weights = _operand(operands[2], "weights", f"the weights of {what}")
    _distinct_names([op for op in (tally, index, weights) if op.is_array], what)
    return tally, index, weights


def _distinct_names(ops, what):
    seen = {}
    for op in ops:
        if op.is_array:
            other = seen.setdefault(op.name, op)
            if other is not op:
                if other.array is op.array:
                    raise ValueError(f"{what}: one array {op.name!r} is given twice")
                raise ValueError(f"{what}: two different arrays are both named {op.name!r}; give one "
                                 "another name")


def declare(ins, outs, where=None, who="ufunc()"):
    """reads, writes ({name: array}) and each operand's slot in the kernel's data[]
    (the mask's slot last, when ``where`` is an ``Operand``).

    An array given twice is declared once (under writes if the node writes it: see
    ``updated_names`` for the read the node makes of it too);
    its name is the one the caller gave it, else the name of its first position; an array
    named as an input and, differently, as an output (``{"v": w}, out={"w2": w}``) is an
    in-place update declared under its output's name.
    """
    mask = [where] if isinstance(where, Operand) else []
    ops = ins + outs + mask
    names = {}       # id(array) -> name
    owner = {}       # name -> id(array)
    # outputs first: an array read under one name and written under another is an in-place
    # update (NumPy's ``np.multiply(w, 2.0, out=w)``), declared once under its output's name
    for op in outs + ins + mask:
        if op.is_array and op.given_name:
            if owner.setdefault(op.name, id(op.array)) != id(op.array):
                raise ValueError(f"{who}: two different arrays (operands, out= or where=) are both named "
                                 f"{op.name!r}; give one another name")
    out_names = {id(o.array): o.name for o in outs if o.is_array and o.given_name}
    for op in outs + ins + mask:
        if op.is_array and op.given_name:
            prev = names.setdefault(id(op.array), op.name)
            if prev != op.name and prev != out_names.get(id(op.array)):
                raise ValueError(f"one array is bound to two names, {prev!r} and {op.name!r}")
    for op in ops:
        if op.is_array and id(op.array) not in names:
            name, k = op.name, 2
            while name in owner:
                name, k = f"{op.name}_{k}", k + 1
            names[id(op.array)] = name
            owner[name] = id(op.array)
    written = {id(o.array) for o in outs}
    reads, writes = {}, {}
    for op in ins + mask:
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


def updated_names(ins, outs, where=None):
    """The declared names of the outputs that are also inputs or the ``where=`` mask
    (``declare`` puts them under writes only): the node reads them as well as writing them."""
    read = {id(op.array) for op in ins + ([where] if isinstance(where, Operand) else [])
            if op.is_array}
    return {o.name for o in outs if id(o.array) in read}


NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def weak_dtype(v):
    """What NumPy's promotion sees for a scalar: Python int/float/complex are weak (NEP 50)."""
    if isinstance(v, np.generic):
        return v.dtype
    if isinstance(v, bool):
        return np.dtype(bool)
    if not NUMPY_2:
        # NumPy 1.x resolves dtypes only; value-based casting comes closest through the
        # smallest dtype that holds the value
        return np.min_scalar_type(v)
    return type(v)


def parse_signature(sig):
    """[(core dim names per input)], [(per output)] of a gufunc signature like '(n,k),(k)->(n)'."""
    lhs, rhs = sig.replace(" ", "").split("->")

    def side(s):
        return [tuple(d.rstrip("?") for d in grp.split(",") if d) for grp in re.findall(r"\(([^)]*)\)", s)]

    return side(lhs), side(rhs)


def reduce_identity(op, dtype):
    """The value a reduction's partial starts from: the op's identity (maximum / minimum:
    the type's extreme, which stands for "no sample yet"), for both backends."""
    dtype = np.dtype(dtype)
    if op in ("add", "logical_or", "bitwise_or", "bitwise_xor"):
        return 0
    if op in ("multiply", "logical_and"):
        return 1
    if op == "bitwise_and":
        return True if dtype == bool else (-1 if dtype.kind == "i" else np.iinfo(dtype).max)
    # maximum / minimum: the type's extreme stands for "no sample yet"
    if dtype == bool:
        return op == "minimum"
    if dtype.kind == "f":
        return -np.inf if op == "maximum" else np.inf
    info = np.iinfo(dtype)
    return info.min if op == "maximum" else info.max
