"""Reductions over the sample axis and scatter tallies on the CPU, in NumPy's words.

``ufunc(np.add.reduce, x, out=s)`` is ``np.add.reduce(x[:n], axis=0, out=s)`` over the
logical size's samples ``n`` (``s`` of shape ``x.shape[1:]``, 0-d for a 1-d ``x``), with
``where=`` and ``initial=`` as NumPy's reduce has them; so are the ``.reduce`` of
``multiply``, ``maximum``, ``minimum``, ``logical_or``, ``logical_and`` and the bitwise
ufuncs. A count is ``np.add.reduce`` of a bool array into an integer ``out``.
``ufunc(np.add.at, tally, index, weights)`` is ``np.add.at(tally, index[:n], weights[:n])``
(also ``multiply``, ``maximum``, ``minimum``): a tally of per-sample contributions into
cells, added to what ``tally`` holds.

Both are split across the team and fused into sample tiles like any sized node, and
deterministic: the samples are cut into fixed blocks of ``BLOCK`` samples from sample 0,
each block's partial is computed in one fixed order, and the partials are combined in a
fixed pairwise tree once every share is done (csrc/cpu/reduce_kernels.h). The result
depends on the data and the logical size alone: the same bits for every thread count,
tile, fusion setting and launch grouping. Integer results are exact (wrapping as
NumPy's); a float sum differs from NumPy's pairwise sum by rounding only (both are
pairwise over blocks: the error bound is of the same order, O(log n) ulps of the sum of
magnitudes); maximum / minimum give NumPy's value (a NaN propagates), the sign of a zero
aside. A tally applies each block's combined weights to the cells in block order.
"""
from __future__ import annotations

import math

import numpy as np

from eagle.cpu.lowering import cpu_lowering
from eagle.cpu.native_node import NativeNode
from eagle.cpu.spec import NativeSpec
from eagle.record.memory import overlap
from eagle.record.ufunc_operands import Operand, reduce_identity

__all__ = ["ReduceNode", "TallyNode", "cpu_reduce", "cpu_at", "REDUCE_UFUNCS", "AT_UFUNCS"]

#: the ufuncs whose .reduce is a node
REDUCE_UFUNCS = ("add", "multiply", "maximum", "minimum", "logical_or", "logical_and",
                 "bitwise_or", "bitwise_and", "bitwise_xor")
#: the ufuncs whose .at is a node
AT_UFUNCS = ("add", "multiply", "maximum", "minimum")


def _compiled():
    from eagle.cpu import _reduce

    return _reduce


def _row_step(a, name, what):
    """The byte step between a sample's elements of ``a`` read flat in C order (its
    dimensions past the sample axis as one run), or ValueError."""
    dims = [(n, s) for n, s in zip(a.shape[1:], a.strides[1:]) if n != 1]
    if not dims:
        return a.itemsize
    step = dims[-1][1]
    expect = step
    for n, s in reversed(dims):
        if s != expect:
            raise ValueError(f"{what}: the elements of a sample of {name!r} (shape {a.shape}, strides "
                             f"{a.strides}) are not one run of equal steps; pass a view whose dimensions "
                             "past the sample axis can be read flat (a C-ordered row, or a slice of one "
                             "dimension)")
        expect = s * n
    return step


def _plain(a, name, what):
    if not isinstance(a, np.ndarray) or type(a).__array_ufunc__ is not np.ndarray.__array_ufunc__:
        raise TypeError(f"{what}: {name!r} must be a plain NumPy array, got {type(a).__name__}")
    if not a.flags.aligned or not a.dtype.isnative:
        raise ValueError(f"{what}: {name!r} must be aligned and in native byte order")


class ReduceNode(NativeNode):
    """``uf.reduce`` over the sample axis, into an output that is not per-sample."""

    kind = "reduce"
    box = ("(", ")")
    combines = True

    def __init__(self, uf, x, out, where, initial, state_args):
        self.ufunc = uf
        self.operand_names = (x.name, out.name)
        self.where = where.name if isinstance(where, Operand) else True
        self.initial = initial
        self._state_args = state_args
        reads = {x.name: x.array}
        if isinstance(where, Operand):
            reads[where.name] = where.array
        writes = {out.name: out.array}
        super().__init__(self._make_state().kernel(), reads, writes, split=True,
                         per_sample=[k for k in reads], sample_local=True)
        self.align = _compiled().BLOCK

    def _make_state(self):
        return _compiled().Reduction(*self._state_args)

    def default_name(self) -> str:
        return f"{self.ufunc.__name__}.reduce"

    def __repr__(self):
        where = "" if self.where is True else f", where={self.where}"
        initial = "" if self.initial is None else f", initial={self.initial!r}"
        return f"ufunc({self.ufunc.__name__}.reduce, {self.operand_names[0]}, out={self.operand_names[1]}" \
               f"{where}{initial})"


class TallyNode(NativeNode):
    """``uf.at(tally, index, weights)`` over the samples: a tally that is not per-sample."""

    kind = "tally"
    box = ("(", ")")
    combines = True

    def __init__(self, uf, tally, index, weights, state_args):
        self.ufunc = uf
        self.operand_names = (tally.name, index.name, weights.name if weights.is_array else repr(weights.value))
        self._state_args = state_args
        reads = {index.name: index.array}
        if weights.is_array:
            reads[weights.name] = weights.array
        super().__init__(self._make_state().kernel(), reads, None, split=True,
                         per_sample=list(reads), updates={tally.name: tally.array}, sample_local=True)
        self.align = _compiled().BLOCK

    def _make_state(self):
        return _compiled().Tally(*self._state_args)

    def default_name(self) -> str:
        return f"{self.ufunc.__name__}.at"

    def __repr__(self):
        t, i, w = self.operand_names
        return f"ufunc({self.ufunc.__name__}.at, {t}, {i}, {w})"


@cpu_lowering(ReduceNode)
@cpu_lowering(TallyNode)
def _lower(node, index, ctx):
    # a build's own partials: two graphs holding the node never share them
    state = node._make_state()
    return NativeSpec(index, state.kernel(), tuple(node.arrays_in_order), True, loop=state,
                      align=node.align, finish=state)


def cpu_reduce(uf, x, out, where=True, initial=None) -> ReduceNode:
    """``ufunc(uf.reduce, x, out=out, where=..., initial=...)`` on NumPy arrays (parsed
    operands, ``eagle.record.ufunc_operands``)."""
    name = uf.__name__
    what = f"ufunc({name}.reduce)"
    if name not in REDUCE_UFUNCS or uf.nin != 2 or uf.nout != 1:
        raise TypeError(f"{what}: a reduction node takes the .reduce of {', '.join(REDUCE_UFUNCS)}; "
                        f"for another ufunc use an opaque node")
    if not x.is_array:
        raise TypeError(f"{what}: the operand must be an array with a sample axis, got {x.value!r}")
    if not out.is_array:
        raise TypeError(f"{what}: out= must be an array")
    a, s = x.array, out.array
    _plain(a, x.name, what)
    _plain(s, out.name, what)
    if a.ndim == 0:
        raise ValueError(f"{what}: {x.name!r} is 0-d; a reduction runs over the sample axis (axis 0)")
    if s.shape != a.shape[1:]:
        raise ValueError(f"{what}: out= {out.name!r} has shape {s.shape}; reducing {x.name!r} {a.shape} "
                         f"over the sample axis gives shape {a.shape[1:]}")
    r = _compiled()
    acc = r.type_code(s.dtype)
    char = s.dtype.char
    if acc is None or not r.supported(acc, r.OPS[name]) or f"{char}{char}->{char}" not in uf.types:
        raise TypeError(f"{what}: out= {out.name!r} is {s.dtype}; a reduction node accumulates in its "
                        f"output's dtype, which must be bool, an integer, float32 or float64 with a "
                        f"{name} loop of its own ({char}{char}->{char})")
    src_bool = a.dtype == bool and s.dtype != bool
    if a.dtype != s.dtype and not src_bool:
        raise TypeError(f"{what}: {x.name!r} is {a.dtype} and out= {out.name!r} is {s.dtype}; a reduction "
                        "node reads its operand in the output's dtype (or a bool operand as 0 / 1, a "
                        f"count): give out= the dtype {a.dtype}, or cast the operand in a node before")
    if overlap(a, s):
        raise ValueError(f"{what}: out= {out.name!r} overlaps {x.name!r}")
    row = math.prod(a.shape[1:])
    x_step = _row_step(a, x.name, what)
    out_step = _row_step(s.reshape((1,) + s.shape), out.name, what) if s.ndim else s.itemsize
    w_step = 0
    mask = where if isinstance(where, Operand) else None
    if where is False:
        raise ValueError(f"{what}: where=False reduces no sample; leave the node out")
    if mask is not None:
        m = mask.array
        _plain(m, mask.name, what)
        if m.ndim == 0 or m.shape[0] != a.shape[0]:
            raise ValueError(f"{what}: the mask {mask.name!r} has shape {m.shape}; a reduction takes a "
                             f"per-sample mask of {x.name!r}'s shape {a.shape} (or one that broadcasts "
                             f"to it along its rows, ({a.shape[0]}, 1, ...))")
        try:
            m = np.broadcast_to(m, a.shape)
        except ValueError:
            raise ValueError(f"{what}: the mask {mask.name!r} of shape {mask.array.shape} does not "
                             f"broadcast to {x.name!r}'s shape {a.shape}") from None
        w_step = _row_step(m, mask.name, what)
        if name in ("maximum", "minimum") and initial is None:
            raise ValueError(f"{what}: reduction operation '{name}' does not have an identity, so to "
                             "use a where mask one has to specify 'initial' (NumPy's rule)")
        if overlap(mask.array, s):
            raise ValueError(f"{what}: out= {out.name!r} overlaps the mask {mask.name!r}")
    init = None
    if initial is not None:
        try:
            init = np.asarray(initial).astype(s.dtype, casting="same_kind").item()
        except TypeError as e:
            raise TypeError(f"{what}: initial={initial!r} does not cast to {s.dtype}: {e}") from None
    state_args = (f"{name}.reduce", r.OPS[name], acc, src_bool, mask is not None, row, x_step, w_step,
                  out_step, a.shape[0], s.dtype, reduce_identity(name, s.dtype), init)
    return ReduceNode(uf, x, out, where, init, state_args)


def cpu_at(uf, tally, index, weights) -> TallyNode:
    """``ufunc(uf.at, tally, index, weights)`` on NumPy arrays."""
    name = uf.__name__
    what = f"ufunc({name}.at)"
    if name not in AT_UFUNCS:
        raise TypeError(f"{what}: a tally node takes the .at of {', '.join(AT_UFUNCS)}")
    if not tally.is_array or not index.is_array:
        raise TypeError(f"{what}: the tally and the indices must be arrays")
    t, idx = tally.array, index.array
    _plain(t, tally.name, what)
    _plain(idx, index.name, what)
    if t.ndim != 1:
        raise ValueError(f"{what}: the tally {tally.name!r} has shape {t.shape}; a tally node takes a "
                         "1-d tally (one cell per index)")
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise TypeError(f"{what}: the indices {index.name!r} must be a 1-d integer array (one cell per "
                        f"sample), got {idx.dtype} of shape {idx.shape}")
    r = _compiled()
    acc = r.type_code(t.dtype)
    char = t.dtype.char
    if acc is None or f"{char}{char}->{char}" not in uf.types:
        raise TypeError(f"{what}: the tally {tally.name!r} is {t.dtype}; a tally node adds into bool, "
                        "integer, float32 or float64 cells")
    weight = None
    if weights.is_array:
        w = weights.array
        _plain(w, weights.name, what)
        if w.shape != idx.shape:
            raise ValueError(f"{what}: the weights {weights.name!r} have shape {w.shape}; one per "
                             f"sample, as the indices {idx.shape}")
        if w.dtype != t.dtype:
            raise TypeError(f"{what}: the weights {weights.name!r} are {w.dtype} and the tally {t.dtype}; "
                            "give them the tally's dtype")
        for other, nm in ((idx, index.name), (w, weights.name)):
            if overlap(t, other):
                raise ValueError(f"{what}: the tally {tally.name!r} overlaps {nm!r}")
    else:
        try:
            weight = np.asarray(weights.value).astype(t.dtype, casting="same_kind").item()
        except TypeError as e:
            raise TypeError(f"{what}: the weight {weights.value!r} does not cast to {t.dtype}: {e}") from None
        if overlap(t, idx):
            raise ValueError(f"{what}: the tally {tally.name!r} overlaps {index.name!r}")
    state_args = (f"{name}.at", r.OPS[name], acc, r.type_code(idx.dtype), weights.is_array, weight, t.dtype,
                  t.shape[0], t.strides[0], idx.shape[0])
    return TallyNode(uf, tally, index, weights, state_args)
