"""Ufunc nodes on the CPU: a ufunc's own compiled inner loop, run nogil over samples.

A ufunc node runs a ufunc's own compiled inner loop (NumPy's, scipy.special's,
a numba ``@vectorize``'d function's) over samples [start, stop) of the graph's
logical size, without the GIL, split across the team like a native kernel: no
Python call per replay. The loop is the one NumPy itself would run for the
operands' dtypes under ``casting="same_kind"``, resolved once, at record time
(see ``eagle.cpu._ufunc``). What ``eagle.graph.ufunc`` accepts and refuses is
in its docstring; the GPU face is ``eagle.cuda.ufunc_node``.
Operands: an array, a scalar (copied at record time and broadcast to every
sample), or a one-entry dict ``{"name": array}`` that names the array for the
picture (bare arrays are named ``in0``, ``in1``, ..., ``out0``...). Axis 0 is
the sample axis: array operands share one shape ``(n, *row)``; rows may have
any strides (the loop runs over ``(stop - start) * row`` elements where the
samples are packed, else row by row, and along a row's innermost dimension
where its elements are not contiguous: an interior view ``a[1:-1, 1:-1, 1:-1]``
is taken as it is); a 0-d array broadcasts and is
read on every replay. A generalized ufunc (``np.matmul``, numba
``@guvectorize``) takes per-sample core dimensions: operands ``(n, *core)``.

Refused, with the reason: object loops and ``np.frompyfunc`` (they need the
GIL), a ufunc numba built with ``target="parallel"`` (its loop runs numba's own
threads), core shapes NumPy itself refuses for a gufunc, a gufunc's operands whose dtype differs
from the loop's, mismatched shapes, an output that partly
overlaps another operand (exact in-place, ``out=x`` with ``x`` an input, is
fine for an elementwise ufunc, not for a gufunc with core dimensions), an
output whose own elements share memory (a zero stride, overlapping rows):
NumPy would buffer these.

Casting and ``where=``: operands of other dtypes than the loop's are cast as NumPy
casts them, by NumPy's own buffered iterator (``UfuncLoop.run_through_iterator``:
one iterator per thread, reset to each call's [start, stop), buffers of 8192
elements, no GIL). A mask leaves the outputs untouched where it is not set, as
NumPy's does, but runs block by block (``_masked_run``): where set elements come in
long runs, the loop runs once per run, as NumPy's masked loop does; where they are
dense and fragmented (a random half), the loop runs over the whole block into a
scratch and the set elements are copied out, which costs about the unmasked loop
(NumPy's per-run calls cost several times that). Without a cast the masked loop
runs on the arrays themselves (``run_masked_direct``), with one through the
iterator; there a float64 or float32 add, subtract, multiply or divide (and an
integer add, subtract or multiply) runs in one pass over the mask, chunk by chunk
(``_fused_op``: an unset chunk skipped, a set one computed, a mixed one computed
and selected; a copy-out after a loop that cheap would be a second pass), NumPy's
results bit for bit.

Floating-point errors are not reported: eagle does not consult
``np.errstate``; results are NumPy's under ``np.errstate(all="ignore")``.

"""
from __future__ import annotations

import math

import numpy as np

from eagle._text import with_article
from eagle.cpu.lowering import cpu_lowering
from eagle.cpu.native_node import NativeNode
from eagle.cpu.spec import NativeSpec
from eagle.record.memory import data_pointer, refuse_shared_elements
from eagle.record.ufunc_operands import Operand, declare, parse_signature, weak_dtype

__all__ = ["UfuncNode", "cpu_ufunc"]

#: dtype kinds a ufunc node runs: bool, integers, floats, complex, datetimes
_KINDS = "biufcmM"


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
    elementwise = uf.signature is None or not any(g for side in parse_signature(uf.signature)
                                                  for g in side)
    for i, o in enumerate(outs):
        if any(o.array is p.array for p in outs[i + 1:]):
            raise ValueError(f"{uf.__name__}: one array is given for two outputs")
        refuse_shared_elements(o.array, uf.__name__, f"output {o.name!r}",
                               "NumPy would buffer it, a ufunc node does not")
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
            same_layout = (data_pointer(a) == data_pointer(o.array)
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


class UfuncNode(NativeNode):
    """A ufunc's inner loop run over samples [start, stop), nogil; drawn ``(name)``."""

    kind = "ufunc"
    box = ("(", ")")

    def __init__(self, uf, ins, outs, reads, writes, loop_dtypes, loop, where=True, whole=None):
        # a ufunc's loop touches row i of every operand (and of the mask) for sample i only
        super().__init__(loop.kernel(), reads, writes, split=whole is None, sample_local=whole is None,
                         per_sample=whole is None)
        #: None; or, for a node on arrays that are not per-sample (0-d ones, ``per_sample=False``),
        #: the samples its loop runs once per replay: their whole axis 0 (1 for 0-d arrays)
        self.whole = whole
        if whole is not None:
            self.sized = False
        self.ufunc = uf
        self.loop_dtypes = tuple(loop_dtypes)
        self.loop = loop
        #: each operand's array (inputs then outputs), or None for a scalar (eagle.cpu.codegen)
        self.operands = tuple(op.array if op.is_array else None for op in ins + outs)
        self.operand_names = [op.name if op.is_array else repr(op.value) for op in ins + outs]
        #: the where= mask's name, or True / False for a scalar mask
        self.where = where.name if isinstance(where, Operand) else where

    def default_name(self) -> str:
        return self.ufunc.__name__

    def __repr__(self):
        args = ", ".join(self.operand_names[:self.ufunc.nin])
        outs = ", ".join(self.operand_names[self.ufunc.nin:])
        types = ",".join(d.char for d in self.loop_dtypes[:self.ufunc.nin]) + "->" + \
            ",".join(d.char for d in self.loop_dtypes[self.ufunc.nin:])
        where = "" if self.where is True else f", where={self.where}"
        return f"ufunc({self.ufunc.__name__}, {args}, out=({outs}){where}, loop {types})"


@cpu_lowering(UfuncNode)
def _lower_ufunc(node, index, ctx):
    # the loop rides on the spec: the backend raises its error after the launch
    if node.whole is not None:
        # once per replay over the whole arrays, whatever the logical size (0 included):
        # the node's finish (csrc/cpu/plan.h), its kernel nothing
        from eagle.cpu._reduce import Whole, nothing_kernel

        return NativeSpec(index, nothing_kernel(node.kernel.name), tuple(node.arrays_in_order), False,
                          loop=node.loop, finish=Whole(node.kernel, node.whole))
    return NativeSpec(index, node.kernel, tuple(node.arrays_in_order), node.split, loop=node.loop)


def cpu_ufunc(uf, dufunc, ins, outs, where=True, per_sample=True) -> UfuncNode:
    """``eagle.graph.ufunc`` on NumPy arrays (it dispatches here): ``ins`` and ``outs`` are the
    parsed operands (``eagle.record.ufunc_operands``); ``dufunc`` the numba DUFunc or None;
    ``where`` True, False or the mask's ``Operand`` (``parse_where``). ``per_sample=False``,
    or operands that are all 0-d: the node's arrays are not per-sample, and its loop runs
    once per replay over their whole axis 0 (their one element), whatever the logical size."""
    if not isinstance(per_sample, bool):
        raise TypeError(f"ufunc(): per_sample= is True or False (a ufunc's operands share one "
                        f"shape: all are per-sample or none), got {per_sample!r}")
    arrays = [op for op in ins + outs if op.is_array]
    if arrays and all(op.array.ndim == 0 for op in arrays):
        if isinstance(where, Operand) and where.array.ndim:
            raise ValueError(f"{uf.__name__}: the mask {where.name!r} has shape {where.array.shape}; the "
                             "operands are 0-d, so the mask is too")
        # 0-d operands: the loop runs over their one element, through (1,)-views of them
        # (the same memory: staging orders the node as it would the 0-d arrays)
        # one view per array: an array given twice (np.divide(s, 3, out=s)) stays one array
        ones = {id(op.array): op.array.reshape(1) for op in ins + outs if op.is_array}
        views = [Operand(op.name, ones[id(op.array)], None, op.given_name) if op.is_array else op
                 for op in ins + outs]
        mask = where
        if isinstance(where, Operand):
            mask = Operand(where.name, ones.get(id(where.array), where.array.reshape(1)), None,
                           where.given_name)
        node = _cpu_ufunc(uf, dufunc, views[:len(ins)], views[len(ins):], mask, whole=1)
        for op, view in zip(ins + outs, views):
            op.name = view.name   # the names the node declared, for updated_names
        return node
    if not per_sample:
        if uf.signature is not None:
            raise ValueError(f"{uf.__name__}{uf.signature}: per_sample=False is for elementwise ufuncs")
        n = next(op.array.shape[0] for op in arrays if op.array.ndim)
        return _cpu_ufunc(uf, dufunc, ins, outs, where, whole=n)
    return _cpu_ufunc(uf, dufunc, ins, outs, where)


def _cpu_ufunc(uf, dufunc, ins, outs, where=True, whole=None) -> UfuncNode:
    mask = where if isinstance(where, Operand) else None
    for op in ins + outs + ([mask] if mask is not None else []):
        if not op.is_array:
            continue
        a = op.array
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{op.name!r} must be a NumPy array, got {type(a).__name__}")
        if type(a).__array_ufunc__ is not np.ndarray.__array_ufunc__ or isinstance(a, np.ma.MaskedArray):
            # a masked array, a unit-carrying array...: its ufunc behaviour is its own
            raise TypeError(f"{op.name!r} is {with_article(type(a).__name__)}, which gives ufuncs a meaning of its "
                            "own (a mask, __array_ufunc__); a ufunc node runs NumPy's loop on the plain "
                            "data and would bypass it: pass a plain ndarray")
        if not a.flags.aligned:
            raise ValueError(f"{op.name!r} is not aligned for its dtype {a.dtype}; NumPy would copy it "
                             "through a buffer, a ufunc node does not (pass an aligned array)")

    if dufunc is None and _built_by_numba(uf):
        raise TypeError(
            f"{uf.__name__} is a ufunc numba built for a target other than 'cpu' (@vectorize or "
            "@guvectorize with target='parallel'): its loop hands the work to numba's own thread "
            "pool, which a ufunc node would enter from several of eagle's threads at once (numba's "
            "'workqueue' threading layer then aborts the process). Use numba's default target: a "
            "ufunc node already splits the loop across eagle's team (if you passed the .ufunc of a "
            "cpu @vectorize/@guvectorize object, pass the object itself)")
    ops = ins + outs
    nargs = len(ops)
    if uf.signature is None:
        layout = _elementwise_layout(uf, ins, outs)
        if where is True and _backwards(layout):
            # NumPy's iterator turns an axis every operand steps backwards around, so the loop
            # sees positive steps: a loop may pick another code path for a negative one
            layout["steps"], layout["backwards"] = [-s for s in layout["steps"]], True
    else:
        layout = _gufunc_layout(uf, ins, outs)
    steps = layout["steps"]

    dtypes = [op.array.dtype if op.is_array else weak_dtype(op.value) for op in ops]
    for op, d in zip(ops, dtypes):
        if isinstance(d, np.dtype) and d.kind not in _KINDS:
            raise TypeError(f"{uf.__name__}: {op.name or repr(op.value)!r} has dtype {d}; a ufunc node "
                            "runs loops over bool, integer, float, complex and datetime dtypes "
                            "(object and string loops need the GIL)")
    loop_dtypes, capsule = _resolve(uf, dufunc, dtypes, steps)
    casts = [op for op, want in zip(ops, loop_dtypes) if op.is_array and op.array.dtype != want]
    if casts and uf.signature is not None:
        op = casts[0]
        want = loop_dtypes[ops.index(op)]
        raise TypeError(
            f"{uf.__name__}: {op.name!r} is {op.array.dtype}, but the loop NumPy picks for these "
            f"operands is {_loop_text(uf, loop_dtypes)}; a ufunc node casts the operands of an "
            f"elementwise ufunc, not of a generalized one ({uf.signature}): pass {with_article(want)} array")
    through_iterator = bool(casts) or where is not True
    if through_iterator:
        # NumPy's iterator hands the loop its buffers or the arrays: strides known per call only
        loop_dtypes, capsule = _resolve(uf, dufunc, dtypes, [None] * nargs)
    constants = [None] * nargs
    for k, (op, want) in enumerate(zip(ops, loop_dtypes)):
        if not op.is_array:
            v = op.value
            if isinstance(v, np.generic):
                constants[k] = np.asarray(v).astype(want, casting="same_kind")
            else:
                constants[k] = np.array(v, dtype=want)   # OverflowError as NumPy's for a too-large int
    if uf.signature is not None:
        _numpy_checks_core_dims(uf, ops, loop_dtypes)
    mask_view = _mask_view(uf, mask, layout["shape"]) if mask is not None else None
    _check_overlap(ins + ([mask] if mask is not None else []), outs, uf)
    reads, writes, slots = declare(ins, outs, where)

    from eagle.cpu._ufunc import UfuncLoop

    loop = UfuncLoop(uf.__name__, capsule, slots[:nargs], constants, layout["sample_strides"], steps,
                     layout["per_sample"], layout["row_len"], layout["core_dims"], layout["core_steps"],
                     layout.get("inner_len"), layout.get("outer_dims"), layout.get("outer_strides"),
                     layout.get("backwards", False))
    direct = None if casts or mask is None or layout["per_sample"] else \
        _flat_mask_steps(mask_view, layout["row_len"])
    if direct is not None:
        # the mask alone: the loop runs on the arrays under it, no iterator
        loop.run_masked_direct(uf.nin, [d.itemsize for d in loop_dtypes[uf.nin:]], slots[nargs], *direct,
                               fused_op=_fused_op(uf, loop_dtypes, layout))
    elif through_iterator:
        # a 0-d operand as a broadcast view: NumPy's iterator casts a 0-d array once, into a
        # copy of its own, where this node reads it on every call
        views = [c if not op.is_array else np.broadcast_to(op.array, layout["shape"])
                 if op.array.ndim == 0 else op.array for op, c in zip(ops, constants)]
        loop.run_through_iterator(views, list(loop_dtypes), uf.nin,
                                  mask_view if mask is not None else where,
                                  slots[nargs] if mask is not None else -1)
    return UfuncNode(uf, ins, outs, reads, writes, loop_dtypes, loop, where, whole=whole)


_FUSED_OPS = {np.add: 1, np.subtract: 2, np.multiply: 3, np.divide: 4}


def _fused_op(uf, loop_dtypes, layout):
    """The fused masked loop of an add, subtract, multiply or divide of float64 or float32,
    or an add, subtract or multiply of 64- or 32-bit integers (its code for
    UfuncLoop.run_masked_direct), 0 for any other loop: computed and selected in one pass,
    with NumPy's results bit for bit (IEEE arithmetic, one rounding; integers wrap)."""
    if uf not in _FUSED_OPS or layout["core_dims"] or len(set(loop_dtypes)) != 1:
        return 0
    kind = np.dtype(loop_dtypes[0])
    if kind == np.float64:
        return _FUSED_OPS[uf]
    if kind == np.float32:
        return _FUSED_OPS[uf] + 4
    if kind.kind in "iu" and kind.itemsize in (8, 4) and uf is not np.divide:
        return _FUSED_OPS[uf] + (8 if kind.itemsize == 8 else 12)
    return 0


def _flat_mask_steps(view, row_len):
    """(bytes a sample, bytes an element) of the mask broadcast to the operands (``view``)
    when its elements lie a fixed step apart in the order the loop runs them (flat, sample
    after sample), else None (a per-sample flag over longer rows: NumPy's iterator)."""
    if view.ndim == 0:
        return None
    step = view.strides[-1] if view.ndim > 1 else view.strides[0]
    expected = step
    for n, s in zip(reversed(view.shape[1:]), reversed(view.strides[1:])):
        if n != 1 and s != expected:
            return None
        expected *= n
    if view.shape[0] > 1 and view.strides[0] != step * row_len:
        return None
    return step * row_len, step


def _mask_view(uf, mask, shape):
    """The mask as NumPy's iterator reads it: broadcast to the operands' shape. NumPy
    broadcasts it as it broadcasts an operand; eagle also wants its sample axis to be the
    operands' (a per-sample mask) unless it is 0-d (one flag, read on every replay)."""
    m = mask.array
    if m.ndim and (m.ndim != len(shape) or m.shape[0] != shape[0]):
        want = f"({shape[0]},)" if len(shape) == 1 else \
            f"{shape} or {(shape[0],) + (1,) * (len(shape) - 1)}"
        raise ValueError(f"{uf.__name__}: the mask {mask.name!r} has shape {m.shape}; a ufunc node "
                         f"takes a per-sample mask, shape {want} here (or a 0-d mask or a scalar)")
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(f"{uf.__name__}: the mask {mask.name!r} of shape {m.shape} does not "
                         f"broadcast to the operands' shape {shape}") from None




def _built_by_numba(uf) -> bool:
    """Whether numba built this np.ufunc itself (it keeps its compiled loops alive through a
    ``numba._UFuncCleaner`` the ufunc holds). numba's cpu target wraps its ufuncs in a DUFunc
    or GUFunc object (``real_ufunc`` then gives that object as ``dufunc``); a bare numba-built
    np.ufunc comes from the 'parallel' target (or is the .ufunc taken out of a cpu one)."""
    import gc

    return any(type(r).__name__ == "_UFuncCleaner" and type(r).__module__ == "numba"
               for r in gc.get_referents(uf))


def _loop_text(uf, dts):
    return (",".join(str(d) for d in dts[:uf.nin]) + "->" + ",".join(str(d) for d in dts[uf.nin:]))


def _resolve(uf, dufunc, dtypes, steps):
    from eagle.cpu._ufunc import resolve_loop

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


def _numpy_checks_core_dims(uf, ops, loop_dtypes):
    """Let NumPy check the core dimensions as it would for these operands: a gufunc may
    check them itself (NumPy 2's process_core_dims_func: ``conv1d_full``'s p == m + n - 1),
    and a loop given sizes its gufunc refuses writes rows padded or cut short. The call is
    on zero samples of the operands' core shapes: NumPy's checks run, no row is computed."""
    args = [np.empty((0,) + op.array.shape[1:], dtype=dt) if op.is_array else op.value
            for op, dt in zip(ops, loop_dtypes)]
    try:
        with np.errstate(all="ignore"):
            uf(*args[:uf.nin], out=tuple(args[uf.nin:]))
    except ValueError as e:
        shapes = ", ".join(f"{op.name}: {op.array.shape[1:]}" for op in ops if op.is_array)
        raise ValueError(f"{uf.__name__}{uf.signature}: NumPy refuses these core shapes ({shapes}): "
                         f"{e}") from None


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
    sample_strides = [op.array.strides[0] if op.is_array and op.array.ndim else 0 for op in ops]
    if not row:
        return dict(sample_strides=sample_strides, steps=_numpys_1d_steps(ins, outs, sample_strides, n),
                    per_sample=False, row_len=1, core_dims=[], core_steps=[], shape=shape)
    contiguous = all(_row_contiguous(row, op.array.strides[1:], op.array.itemsize) for op in shaped)
    packed = contiguous and (n <= 1 or all(op.array.strides[0] == row_len * op.array.itemsize
                                           for op in shaped))
    if contiguous or row_len == 0:
        steps = [op.array.itemsize if op.is_array and op.array.ndim else 0 for op in ops]
        return dict(sample_strides=sample_strides, steps=steps, per_sample=not packed and row_len > 0,
                    row_len=row_len, core_dims=[], core_steps=[], shape=shape)
    # rows of other strides (an interior view a[1:-1, 1:-1, 1:-1]): the loop runs along the
    # row's innermost dimension, once per index of the outer ones, sample by sample
    dims, strides = _merged_row(row, [op.array.strides[1:] if op.is_array and op.array.ndim
                                      else (0,) * len(row) for op in ops])
    return dict(sample_strides=sample_strides, steps=[s[-1] for s in strides], per_sample=True,
                row_len=row_len, core_dims=[], core_steps=[], shape=shape,
                inner_len=dims[-1], outer_dims=dims[:-1], outer_strides=[list(s[:-1]) for s in strides])


def _numpys_1d_steps(ins, outs, strides, n):
    """The steps NumPy's own call hands the loop over these 1-d operands (a loop may take
    another code path for other steps, with other last bits: NumPy's float64 exp and log).
    One output of positive steps, no smaller than its items: NumPy's trivial loop, the
    operands' own steps. Otherwise NumPy's iterator: one element has steps 0, and an axis
    every operand steps backwards is turned around (``_backwards``)."""
    o = outs[0].array
    if len(outs) == 1 and o.strides[0] >= o.itemsize:
        return list(strides)
    return [0] * len(strides) if n == 1 else list(strides)


def _backwards(layout) -> bool:
    """Whether every operand steps backwards along the loop's dimension (a step <= 0, one
    < 0: ``x[::-1]`` into ``y[::-1]``), where NumPy's iterator would run it forwards."""
    steps = layout["steps"]
    return all(s <= 0 for s in steps) and any(s < 0 for s in steps)


def _merged_row(row, strides):
    """(dims, each operand's strides of them): the row's dimensions with those of length 1
    left out and each one merged into the next where every operand steps over both as one."""
    keep = [d for d, m in enumerate(row) if m != 1] or [len(row) - 1]
    dims = [row[d] for d in keep]
    per_op = [[s[d] for d in keep] for s in strides]
    d = len(dims) - 2
    while d >= 0:
        if all(s[d] == s[d + 1] * dims[d + 1] for s in per_op):
            dims[d + 1] *= dims[d]
            del dims[d]
            for s in per_op:
                del s[d]
        d -= 1
    return dims, per_op


def _gufunc_layout(uf, ins, outs):
    core_in, core_out = parse_signature(uf.signature)
    cores = core_in + core_out
    ops = ins + outs
    # NumPy's dimensions[1:] are the distinct core dimensions in order of first appearance,
    # a fixed size ("3") among them: equal fixed sizes are one dimension, as a name is
    key = lambda d: int(d) if d.isdigit() else d
    sizes = {}
    order = []
    for grp in cores:
        for d in grp:
            if key(d) not in order:
                order.append(key(d))
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
                sizes[int(d)] = size
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
                core_dims=[sizes[d] for d in order], core_steps=core_steps, shape=None)


