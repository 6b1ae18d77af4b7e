"""A capture in progress: what the step's stand-ins did, as a list of nodes.

``Session`` receives every operation of the stand-ins (``eagle.stepcapture.standin``) and
records it as the node ``eagle.graph`` already has for it, in order, computing nothing:

* a ufunc call, with or without ``out=`` (operators and in-place operators are ufunc
  calls): ``eagle.graph.ufunc``; a result without ``out=`` is a temporary of the pool
  (``eagle.stepcapture.pool``), of NumPy's result dtype and broadcast shape;
* ``uf.reduce`` (``x.sum()``, ``np.max``, ``x.any()``...): ``ufunc(uf.reduce, ...)`` over
  the sample axis, the reduced axes moved first (one node when they merge into one axis,
  one node per axis otherwise; one node per line of the kept axes where a sample's elements
  are not one run, ``A.sum(axis=1)`` of a 3-d ``A``); ``uf.at``: ``ufunc(uf.at, ...)``;
* assignment ``a[k] = v``: the node that made ``v`` writes ``a[k]`` itself when ``v`` is an
  expression's temporary nobody else holds, else a copy node (``np.positive``, or
  ``np.logical_or(v, False)`` for bools);
* an input that overlaps an output other than element for element (``a[1:] += a[:-1]``) is
  copied to a temporary first, as NumPy's buffering does;
* a node an ``eagle.graph`` constructor makes inside the step (``eagle.record.hooks``).

Each node is named after the user's line (``step:3 np.exp``) and made at once, so what
eagle.graph refuses is refused at that line.
"""
from __future__ import annotations

import itertools
import operator
import weakref

import numpy as np

from eagle import graph as eg
from eagle.record.ufunc_operands import weak_dtype
from eagle.stepcapture import functions
from eagle.stepcapture.device import DeviceMemory, device_operands, refuse_opaque
from eagle.stepcapture.pool import TemporaryPool
from eagle.stepcapture.refusals import (ELEMENT_ORDER, ESCAPE, FANCY_INDEX, NO_FORM, OVERLAP_STEPS,
                                        UNSAFE_CAST, WRITE_OUTSIDE, CaptureError, refuse)
from eagle.stepcapture.reuse import reuse_dying_operands
from eagle.stepcapture.source import user_site
from eagle.stepcapture.standin import StandIn, index_label

__all__ = ["Session"]

#: the ufuncs whose .reduce is a node (eagle.cpu.reduce_node.REDUCE_UFUNCS)
_REDUCIBLE = ("add", "multiply", "maximum", "minimum", "logical_or", "logical_and",
              "bitwise_or", "bitwise_and", "bitwise_xor")
_SCALARS = (bool, int, float, complex, np.generic)


def _same_layout(a, b) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides and a.dtype == b.dtype)


def _overlaps(a, b) -> bool:
    """Whether ``a`` and ``b`` share a byte other than element for element."""
    if a is b or a.size == 0 or b.size == 0 or _same_layout(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except np.exceptions.TooHardError:
        return True


def _axis_order(a):
    """``a``'s axes from the largest step to the smallest (how ``_rows_first`` turns an op)."""
    return tuple(sorted(range(a.ndim), key=lambda k: -abs(a.strides[k])))


def _read_before_rewritten(t, ops) -> bool:
    """Whether one of ``ops``, in order, reads ``t``'s memory before one writes all of ``t``
    (a later temporary in its buffer)."""
    for op in ops:
        if any(isinstance(a, np.ndarray) and (_same_layout(a, t) or _overlaps(a, t))
               for _, a in op.ins + ([op.where] if op.where else [])):
            return True
        if any(isinstance(o, np.ndarray) and _same_layout(o, t) for _, o in op.outs):
            return False
    return False


def _rows_first(ins, outs, mask):
    """The operands of an elementwise op with their axes in the order of the first output's
    strides, largest first: a transposed output (``m.T[1:] -= ...``) is run over its rows."""
    o = outs[0][1]
    if o.ndim < 2:
        return ins, outs, mask
    perm = tuple(sorted(range(o.ndim), key=lambda k: -abs(o.strides[k])))
    if perm == tuple(range(o.ndim)):
        return ins, outs, mask

    def turn(pair):
        label, a = pair
        return (label, a.transpose(perm)) if isinstance(a, np.ndarray) and a.ndim == o.ndim else pair

    return [turn(p) for p in ins], [turn(p) for p in outs], None if mask is None else turn(mask)


#: the most columns (or rows) an op over differently laid-out operands is split into
_MAX_LINES = 64


def _row_is_a_run(a) -> bool:
    """Whether each row of ``a`` (axis 0 the sample) is one C-ordered run, as a ufunc node reads it."""
    expected = a.itemsize
    for n, st in zip(reversed(a.shape[1:]), reversed(a.strides[1:])):
        if n == 0:
            return True
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def _rows_not_runs(pairs) -> bool:
    """Whether an operand's rows are not runs: broadcast within the row (a zero step), or laid
    out across the output's rows (a transposed view beside a C-ordered output)."""
    return any(isinstance(a, np.ndarray) and a.ndim >= 2 and a.size and not _row_is_a_run(a)
               for _, a in pairs)


def _one_run(a) -> bool:
    """Whether the elements of a sample of ``a`` (its dimensions past axis 0, those of one
    element left out) are one run of equal steps, as a reduction node reads them."""
    dims = [(n, st) for n, st in zip(a.shape[1:], a.strides[1:]) if n != 1]
    expect = dims[-1][1] if dims else 0
    for n, st in reversed(dims):
        if st != expect:
            return False
        expect = st * n
    return True


#: ufuncs whose loops give the same bits whatever the steps they are handed: exact or
#: correctly rounded operations. NumPy's exp, log, power, arctan, cbrt... take a vector code
#: path (SVML, AVX-512) for contiguous operands and another for strided ones, with other last
#: bits: capture hands them the steps the eager call would
_STEPS_FREE = frozenset([
    np.add, np.subtract, np.multiply, np.true_divide, np.floor_divide, np.negative, np.positive,
    np.absolute, np.fabs, np.square, np.sqrt, np.reciprocal, np.maximum, np.minimum, np.fmax, np.fmin,
    np.copysign, np.floor, np.ceil, np.trunc, np.rint, np.sign, np.less, np.less_equal, np.greater,
    np.greater_equal, np.equal, np.not_equal, np.logical_and, np.logical_or, np.logical_xor,
    np.logical_not, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift,
    np.right_shift, np.isnan, np.isinf, np.conjugate, np.remainder, np.fmod, np.heaviside,
    np._core.umath.clip])


def _steps_free(uf, a, b) -> bool:
    """Whether ``uf``'s node may run over ``b`` where the eager call runs over ``a``: the
    same steps, or a loop whose bits do not depend on them (``_STEPS_FREE``)."""
    return uf in _STEPS_FREE or a.strides == b.strides


def _copy_is_numpys(a, out_ops) -> bool:
    """Whether a loop over a copy of the input ``a`` (1-d) into the one output is handed the
    steps NumPy's own call hands it: NumPy copies the output (a contiguous temporary) where it
    does not run in place (``_numpy_runs_in_place``) and reads the input as it is, so both
    must be contiguous."""
    if len(out_ops) != 1:
        return False
    o = out_ops[0][1]
    return (o.ndim == 1 and a.ndim == 1 and o.strides[0] == o.itemsize and a.strides[0] == a.itemsize
            and not _numpy_runs_in_place(a, o))


def _numpy_runs_in_place(a, o) -> bool:
    """Whether NumPy runs a one-output ufunc over ``a`` into ``o``, 1-d views that overlap,
    without a copy: its trivial loop, where ``a`` steps ahead of ``o`` (each element read
    before it is written: PyArray_EQUIVALENTLY_ITERABLE_OVERLAP_OK)."""
    if a.ndim != 1 or o.ndim != 1 or a.shape != o.shape or o.strides[0] < o.itemsize:
        return False
    pa, po = a.__array_interface__["data"][0], o.__array_interface__["data"][0]
    sa, so = a.strides[0], o.strides[0]
    return (sa >= so and pa >= po) if sa > 0 else (sa <= so and pa <= po) if sa < 0 else False


def _read_order(x, order):
    """NumPy's ``order=`` of a reshape or flatten that copies ``x``: 'C' or 'F' ('A' resolved)."""
    if order in ("A", "a"):
        return "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    if order in ("C", "c", "F", "f", None):
        return (order or "C").upper()
    raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")


def _fewest_lines(shape, works):
    """(axes, count): the axes of ``shape`` to take one index at a time, so that ``works(axes)``
    holds, with the fewest lines (the product of their lengths); no axes when it holds as is."""
    best = None
    for k in range(len(shape) + 1):
        for axes in itertools.combinations(range(len(shape)), k):
            lines = int(np.prod([shape[a] for a in axes], dtype=np.int64))
            if (best is None or lines < best[1]) and works(axes):
                best = (axes, lines)
    return best


def _lines(shape, axes):
    """(key, label) of each line: the index of ``axes`` fixed, the other axes whole."""
    for idx in np.ndindex(*[shape[a] for a in axes]):
        key = [slice(None)] * len(shape)
        for a, i in zip(axes, idx):
            key[a] = i
        labels = [":" if isinstance(v, slice) else str(v) for v in key]
        while labels and labels[-1] == ":":
            labels.pop()
        yield tuple(key), "[" + ", ".join(labels) + "]"


def _at(a, key) -> np.ndarray:
    """Line ``key`` of ``a`` (a view); a lower-dimensional operand (0-d) as it is."""
    return a[key] if isinstance(a, np.ndarray) and a.ndim == len(key) else a


def copy_ufunc(dtype):
    """The ufunc that copies values of ``dtype`` exactly, and its extra operands."""
    dtype = np.dtype(dtype)
    if dtype == bool:
        return np.logical_or, (np.False_,)
    if dtype.kind in "iufcm":
        return np.positive, ()
    raise CaptureError(f"capture: {user_site().describe()}: copying {dtype} values has no ufunc; "
                       "use eagle.graph.opaque")


class _Op:
    """A recorded operation: a node, remade when its output is retargeted."""

    __slots__ = ("name", "uf", "ins", "outs", "where", "initial", "node", "kind", "seq")

    def __init__(self, name, kind, uf=None, ins=(), outs=(), where=None, initial=None, node=None):
        self.name, self.kind, self.uf = name, kind, uf
        self.ins, self.outs, self.where, self.initial = list(ins), list(outs), where, initial
        self.node = node
        #: the op's serial number in its session: unchanged when ops before it are removed
        self.seq = None

    def make(self, session):
        if self.kind == "node":
            return self.node
        names = {}

        def named(label, a):
            if not isinstance(a, np.ndarray):
                return a
            label = label or "array"
            while label in names and not (names[label] is a or _same_layout(names[label], a)):
                label += "'"
            names.setdefault(label, a)
            return {label: names[label]}

        outs = [named(n, a) for n, a in self.outs]
        ins = [named(n, a) for n, a in self.ins]
        where = None if self.where is None else named(*self.where)
        if session.device is not None:
            ins, outs, where = device_operands(session.device, self.kind, self.uf, ins, outs, where, self.name)
        with session.quiet():
            if self.kind == "reduce":
                kw = {} if self.initial is None else {"initial": self.initial}
                self.node = eg.ufunc(self.uf.reduce, *ins, out=outs[0], where=where, **kw)
            elif self.kind == "at":
                self.node = eg.ufunc(self.uf.at, *ins)
            else:
                self.node = eg.ufunc(self.uf, *ins, out=tuple(outs) if len(outs) > 1 else outs[0], where=where)
        if session.device is not None:
            refuse_opaque(session.device, self.node, self.name)
        return self.node


class Session:
    """The capture of one call of ``fn``: stand-ins, temporaries, the operations in order."""

    copy_ufunc = staticmethod(copy_ufunc)

    def __init__(self, fn_name, on_cuda=False):
        self.fn_name = fn_name
        self.pool = TemporaryPool(shadow=on_cuda)
        #: over CUDA arrays: the stand-ins' device memory (eagle.stepcapture.device), else None
        self.device = DeviceMemory(self.pool) if on_cuda else None
        self.ops: list[_Op] = []
        self._serial = 0         # the next op's seq
        self._names: dict[str, int] = {}
        self._quiet = 0
        self._negations = {}     # id(~b) -> (weakref to ~b, the op that made it)
        self._folds = []         # ((weakref to ~b, its op), the op of a & ~b, which operand is ~b)
        # temporaries capture made for itself (an overlap's copy, a reduction's partial): kept, so
        # that no later temporary of the same node takes their memory
        self.kept: list[StandIn] = []

    # ---- stand-ins and temporaries ----------------------------------------------

    def standin(self, array, label):
        s = array.view(StandIn)
        s.capture_session, s.label, s.temporary_root, s.owns_memory = self, label, None, False
        return s

    def temporary(self, shape, dtype, like=None, order="K"):
        """A temporary of the pool; laid out as ``like`` when given (NumPy's ``order``: 'K' as
        ``like``, 'A' Fortran where ``like`` is Fortran-contiguous only, 'C', 'F')."""
        def own(plain, temp):
            s = plain.view(StandIn)
            s.capture_session, s.label, s.temporary_root, s.owns_memory = self, temp.name, None, True
            # the ops from here on are the ones that may touch it: a serial number, not an
            # index into self.ops (fold_negations removes ops)
            s.born = temp.born = self._serial
            return s

        axes = None
        if order == "A" and isinstance(like, np.ndarray):
            order = "F" if like.flags.f_contiguous and not like.flags.c_contiguous else "C"
        if order == "F":
            axes = tuple(reversed(range(len(shape))))
        elif order == "K" and isinstance(like, np.ndarray) and like.shape == tuple(shape) and like.ndim >= 2:
            axes = sorted(range(like.ndim), key=lambda k: -abs(like.strides[k]))
        elif order not in ("K", "C"):
            raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
        standin, _ = self.pool.take(shape, dtype, user_site().label(), own, axes)
        return standin

    def quiet(self):
        """``with session.quiet():`` the nodes eagle.graph makes now are capture's own."""
        session = self

        class _Quiet:
            def __enter__(self):
                session._quiet += 1

            def __exit__(self, *exc):
                session._quiet -= 1

        return _Quiet()

    def node_made(self, node):
        """A node an eagle.graph constructor made inside the step joins it (hooks.node_made)."""
        if self._quiet:
            return
        if self.device is not None:
            raise CaptureError(f"capture: {user_site().describe()}: a {node.default_name()} node made inside "
                               "a step captured over CUDA arrays would run on the host stand-ins; make "
                               "it outside the step, on the CUDA arrays, and add it to the captured "
                               "graph before or after the step's nodes (g.add_node)")
        self._append(_Op(self._name(node.default_name()), "node", node=node))

    def _append(self, op):
        op.seq = self._serial
        self._serial += 1
        self.ops.append(op)
        return op

    def _since(self, born):
        """The ops recorded from the serial number ``born`` on, in order."""
        return [op for op in self.ops if op.seq >= born]

    def _name(self, what):
        base = f"{user_site().label()} {what}"
        k = self._names.get(base, 0) + 1
        self._names[base] = k
        return base if k == 1 else f"{base} ({k})"

    def _mine(self, x):
        return isinstance(x, StandIn) and x.capture_session is self

    def _foreign(self, x) -> bool:
        """A stand-in of another capture (kept past it, or handed from another thread's): a
        view of the user's array it stood for, or refused when it is that capture's temporary
        (memory another graph owns and reuses)."""
        if not isinstance(x, StandIn) or self._mine(x):
            return False
        if x.owns_memory or x.temporary_root is not None:
            raise refuse(ESCAPE, what=x.label, where="kept from another capture")
        return True

    def _operand(self, x):
        """(label, plain array) of an array operand; scalars pass as they are."""
        if isinstance(x, StandIn):
            return ("array" if self._foreign(x) else x.label), x.__eagle_view__()
        if isinstance(x, np.ndarray):
            return "array", x
        return None, x

    def _writable(self, x, what):
        """The plain view an operation writes, refusing arrays nobody passed to the step."""
        if isinstance(x, StandIn) and not self._foreign(x):
            return x.label, x.__eagle_view__()
        if isinstance(x, np.ndarray):
            raise refuse(WRITE_OUTSIDE, what=what)
        raise TypeError(f"{what}: out= must be an array, got {type(x).__name__}")

    def _record(self, op):
        try:
            op.make(self)
        except CaptureError:
            raise
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"capture: {user_site().describe()}: {exc}") from exc
        return self._append(op)

    # ---- ufunc calls ---------------------------------------------------------------

    def ufunc(self, uf, method, inputs, kwargs):
        if method == "__call__":
            return self.call(uf, inputs, **kwargs)
        if method == "reduce":
            return self.reduce(uf, *inputs, **kwargs)
        if method == "at":
            return self.at(uf, *inputs)
        raise refuse(NO_FORM, what=f"np.{uf.__name__}.{method}")

    def call(self, uf, inputs, out=None, where=True, casting="same_kind", subok=True, dtype=None,
             signature=None, order="K", _label=None, _fresh=(), **extra):
        what = f"np.{uf.__name__}"
        if extra or dtype is not None or signature is not None:
            given = ", ".join(list(extra) + [k for k, v in (("dtype", dtype), ("signature", signature))
                                             if v is not None])
            raise refuse(NO_FORM, what=f"{what}(..., {given}=...)")
        outs = out if isinstance(out, tuple) else (out,) * (out is not None) or (None,) * uf.nout
        if len(outs) != uf.nout:
            raise TypeError(f"{what} has {uf.nout} output(s), out= gives {len(outs)}")
        for x in inputs:
            if not isinstance(x, (np.ndarray,) + _SCALARS):
                raise refuse(NO_FORM, what=f"{what} of {type(x).__name__}")
        dtypes = tuple(x.dtype if isinstance(x, np.ndarray) else weak_dtype(x) for x in inputs)
        if uf.signature is not None and any(o is None for o in outs):
            raise refuse(NO_FORM, what=f"{what}{uf.signature} without out=")
        resolved = uf.resolve_dtypes(dtypes + (None,) * uf.nout) if uf.signature is None else None
        shapes = [np.shape(x) for x in inputs if isinstance(x, np.ndarray)]
        if isinstance(where, np.ndarray):
            shapes.append(where.shape)
        shape = np.broadcast_shapes(*shapes) if shapes else ()
        if uf.nout == 1 and outs[0] is None and where is True and resolved is not None:
            outs = (self._elided(inputs, _fresh, shape, resolved[-1]),)
        result = []
        for k, o in enumerate(outs):
            if o is None:
                like = next((x for x in inputs if isinstance(x, np.ndarray) and x.shape == shape), None)
                o = self.temporary(shape, resolved[uf.nin + k], like)
            elif uf.signature is None and np.broadcast_shapes(shape, o.shape) != o.shape:
                raise ValueError(f"{what}: non-broadcastable output operand with shape {o.shape} "
                                 f"doesn't match the broadcast shape {shape}")
            result.append(o)
        if casting == "unsafe" and resolved is not None:
            for k, o in enumerate(result):
                if not np.can_cast(resolved[uf.nin + k], o.dtype, "same_kind"):
                    raise refuse(UNSAFE_CAST, what=what, src=resolved[uf.nin + k], dst=o.dtype)
        elif casting not in ("same_kind", "unsafe", None):
            raise refuse(NO_FORM, what=f"{what}(..., casting={casting!r})")
        if uf.signature is None:
            shape = result[0].shape      # inputs broadcast to the output's shape, as NumPy's
        out_ops = [self._writable(o, f"{what}(..., out=...)") for o in result]
        ins = [self._input(x, out_ops, shape if uf.signature is None else None, uf) for x in inputs]
        mask = None
        if isinstance(where, np.ndarray):
            mask = self._input(where, out_ops, shape)
        elif not isinstance(where, _SCALARS) and where is not None:
            raise TypeError(f"{what}: where= must be a bool array or a scalar")
        elif not where:
            mask = (None, False)
        if uf.signature is None:
            ins, out_ops, mask = _rows_first(ins, out_ops, mask)
        if uf.signature is None and _rows_not_runs(ins + ([mask] if mask else [])):
            self._by_line(uf, ins, out_ops, mask, _label or what)
        else:
            op = self._record(_Op(self._name(_label or what), "ufunc", uf, ins, out_ops, mask))
            if out is not None and mask is None and uf.nout == 1:
                # np.exp(a * b, out=w): the temporary a * b written in w itself
                for x, f in zip(inputs, _fresh):
                    if f and self._mine(x) and x.owns_memory and self._write_through(x, out_ops[0], op):
                        break
            if uf.nout == 1 and not _label:     # one node (not one per line): a & ~b may fold
                self._note_negation(uf, inputs, out, where, result[0])
        return result[0] if len(result) == 1 else tuple(result)

    # ---- ``a & ~b`` over bools: ``a > b`` -------------------------------------------

    def _note_negation(self, uf, inputs, out, where, result):
        """Remember ``~b`` (a bool temporary) and ``a & ~b`` (its reader): ``fold_negations``
        makes the pair one node, ``a > b``, once the step is over and it is known that
        nothing else read ``~b``."""
        op = self.ops[-1]
        if op.where is not None or where is not True:
            return
        if uf in (np.invert, np.logical_not) and out is None and result.dtype == bool and \
                isinstance(inputs[0], StandIn) and inputs[0].dtype == bool:
            # no strong reference: a held ~b (or b, its memory when elided) would not look fresh
            self._negations[id(result)] = (weakref.ref(result), op)
        elif uf in (np.bitwise_and, np.logical_and) and len(inputs) == 2 and \
                all(isinstance(x, np.ndarray) and x.dtype == bool and x.shape == result.shape for x in inputs):
            for k, x in enumerate(inputs):
                neg = self._negations.get(id(x))
                if neg is not None and neg[0]() is x:
                    self._folds.append((neg, op, k))
                    return

    def fold_negations(self):
        """``a & ~b`` over bools is ``a > b`` bit for bit (False, True as 0, 1): one pass instead
        of two, as a graph built by hand has it, where the step kept no ``~b`` to read again."""
        for (ref, neg_op), and_op, k in self._folds:
            if ref() is not None or neg_op not in self.ops or and_op not in self.ops:
                continue            # the step kept ~b (a name, the result), or it is folded already
            (t_label, t), = neg_op.outs
            b = neg_op.ins[0]       # b as the ~ node read it: element i of t is ~b[i]
            bp = b[1]
            if not _same_layout(and_op.ins[k][1], t):
                continue            # the & reads ~b in another order (a transposed output)
            if _same_layout(t, bp) or _overlaps(t, bp):
                continue            # ~b was written over b (NumPy's elision): b is gone
            start, end = self.ops.index(neg_op), self.ops.index(and_op)
            writes_t = any(_same_layout(o, t) for _, o in and_op.outs)
            later = self.ops[start + 1:end] + ([] if writes_t else self.ops[end + 1:])
            if _read_before_rewritten(t, later):
                continue            # ~b is read again
            if any(isinstance(o, np.ndarray) and (_same_layout(o, bp) or _overlaps(o, bp))
                   for op in self.ops[start + 1:end] for _, o in op.outs):
                continue            # b was written between ~b and the &
            old = (and_op.uf, list(and_op.ins), and_op.name)
            and_op.uf, and_op.ins[k] = np.greater, b
            and_op.ins = [and_op.ins[1 - k], and_op.ins[k]]
            site, _, rest = and_op.name.partition(f" np.{old[0].__name__}")
            and_op.name = f"{site} np.greater (a & ~b){rest}"
            try:
                and_op.make(self)
            except (TypeError, ValueError):
                and_op.uf, and_op.ins, and_op.name = old
                and_op.make(self)
                continue
            self.ops.remove(neg_op)
            if not writes_t:
                self.pool.forget(t_label)

    def reuse_dying_operands(self, escaping=()) -> int:
        """Once the step is over: a temporary an elementwise op reads for the last time gives
        its memory to the temporary the op makes (``eagle.stepcapture.reuse``); ``escaping``,
        the arrays the step returned. The number of temporaries moved."""
        return reuse_dying_operands(self, escaping)

    def _by_line(self, uf, ins, outs, mask, what):
        """An operand whose rows are not runs where the output's are (a column ``(n, 1)``
        broadcast against ``(n, k)``, a transposed view): a ufunc node reads a row as one run,
        so the op is recorded one node per line of the axes that make every operand's rows
        runs (per column of a 2-d output, or per row where there are fewer rows: NumPy's
        iterator would buffer), up to ``_MAX_LINES`` nodes."""
        o = outs[0][1]
        pairs = ins + ([mask] if mask else [])

        def works(axes):
            if not axes:
                return False
            key = tuple(0 if k in axes else slice(None) for k in range(o.ndim))
            return not _rows_not_runs([(lb, _at(a, key)) for lb, a in pairs])

        best = _fewest_lines(o.shape, works)
        if best is None or best[1] > _MAX_LINES:
            raise refuse(NO_FORM, what=f"{what} over operands laid out differently from its {o.shape} "
                                       f"output (a column broadcast within rows, a transposed view: "
                                       f"a ufunc node reads a row as one run; capture splits an op "
                                       f"into up to {_MAX_LINES} nodes, one per line of the axes that "
                                       f"make the rows runs, and this takes "
                                       f"{'more' if best is None else best[1]})")

        def line(pair, key, where):
            label, a = pair
            if isinstance(a, np.ndarray) and a.ndim == len(key):
                return f"{label}{where}", a[key]
            return pair

        for key, where in _lines(o.shape, best[0]):
            self._record(_Op(self._name(f"{what} {where}"), "ufunc", uf, [line(p, key, where) for p in ins],
                             [line(p, key, where) for p in outs], None if mask is None else line(mask, key, where)))

    def _elided(self, inputs, fresh, shape, dtype):
        """An operand the result may overwrite, as NumPy's temporary elision does: a temporary
        of this capture that no name holds (``(a + b) * c``), of the result's shape and dtype;
        None when there is none."""
        for x, f in zip(inputs, fresh):
            if (f and self._mine(x) and x.owns_memory and x.shape == shape and x.dtype == dtype
                    and sum(y is x for y in inputs) == 1):
                return x
        return None

    def _input(self, x, out_ops, shape, uf=None):
        """An input's (label, plain), copied first when it overlaps an output partly (NumPy's
        buffering), broadcast to ``shape`` (a 0-d array is read as it is)."""
        label, a = self._operand(x)
        if not isinstance(a, np.ndarray):
            return label, a
        if any(_overlaps(a, o) for _, o in out_ops):
            if uf is not None and uf not in _STEPS_FREE and not _copy_is_numpys(a, out_ops):
                # NumPy runs such a loop over the overlapping views where it may (its scalar
                # path: np.exp(z[0:9:2], out=z[0:5])), else over a copy of the output: a
                # node over a copy of the input is handed other steps
                name = getattr(x, "label", "the input")
                raise refuse(OVERLAP_STEPS, what=f"np.{uf.__name__}", name=name)
            label, a = self._copy_to_temporary(x)
        if shape is not None and a.ndim and a.shape != shape:
            a = np.broadcast_to(a, shape)
        return label, a

    def _copy_to_temporary(self, x):
        t = self.temporary(x.shape, x.dtype, x)
        uf, extra = copy_ufunc(x.dtype)
        self.call(uf, (x,) + extra, out=(t,), _label="copy")
        self.kept.append(t)
        return t.label, t.__eagle_view__()

    # ---- reductions ---------------------------------------------------------------

    def reduce(self, uf, x, axis=0, dtype=None, out=None, keepdims=False, initial=np._NoValue,
               where=True):
        what = f"np.{uf.__name__}.reduce"
        if uf.__name__ not in _REDUCIBLE:
            raise refuse(NO_FORM, what=what)
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if isinstance(out, tuple):
            (out,) = out
        axes = tuple(range(x.ndim)) if axis is None else tuple(
            sorted(operator.index(a) % max(x.ndim, 1) for a in (axis if isinstance(axis, tuple) else (axis,))))
        kw = {} if initial is np._NoValue else {"initial": initial}
        with np.errstate(all="ignore"):
            probe = uf.reduce(np.zeros((1,) * x.ndim, x.dtype), axis=axes, dtype=dtype, keepdims=keepdims, **kw)
        rdtype = np.asarray(probe).dtype
        kept = tuple(1 if k in axes else n for k, n in enumerate(x.shape)) if keepdims else \
            tuple(n for k, n in enumerate(x.shape) if k not in axes)
        if out is None:
            out = self.temporary(kept, rdtype if dtype is None else np.dtype(dtype))
        elif out.shape != kept:
            raise ValueError(f"{what}: output parameter has shape {out.shape}, expected {kept}")
        if not axes:
            return self.call(copy_ufunc(x.dtype)[0], (x,) + copy_ufunc(x.dtype)[1], out=(out,),
                             casting="unsafe")
        if rdtype == bool and x.dtype != bool and uf in (np.logical_or, np.logical_and):
            x = self.call(np.not_equal, (x, 0))     # x.any() of numbers: NumPy's cast to bool, x != 0
        if x.dtype != rdtype and not (x.dtype == bool and uf is np.add and rdtype.kind in "iu"):
            if not np.can_cast(x.dtype, rdtype, "same_kind"):
                raise refuse(UNSAFE_CAST, what=what, src=x.dtype, dst=rdtype)
            x = self.astype(x, rdtype, True)
        label, xp = self._operand(x)
        mask = None if (where is True or where is None) else where
        if mask is not None and not isinstance(mask, np.ndarray):
            raise refuse(NO_FORM, what=f"{what}(..., where={where!r})")
        front = np.moveaxis(xp, axes, tuple(range(len(axes))))
        rest = front.shape[len(axes):]
        stages = None
        if len(axes) == 1 or mask is not None:
            try:
                stages = [np.reshape(front, (-1,) + rest, copy=False)]
            except ValueError:
                stages = None
        out_label, outp = self._writable(out, f"{what}(..., out=...)")
        final = outp.reshape(tuple(n for k, n in enumerate(x.shape) if k not in axes)) if keepdims else outp
        if mask is not None:
            if stages is None:
                raise refuse(NO_FORM, what=f"{what} with where= over axes that do not merge into one")
            m = np.moveaxis(np.broadcast_to(self._operand(mask)[1], x.shape), axes, tuple(range(len(axes))))
            mask = (self._operand(mask)[0], np.reshape(m, (-1,) + rest, copy=False) if m.ndim else m)
        init = None if initial is np._NoValue else initial
        if stages is not None:
            self._reduce_lines(what, uf, (label, stages[0]), (out_label, final), mask, init)
            return out
        # axes that do not merge: one node per axis, the first ones into temporaries
        cur_label, cur = label, front
        for k in range(len(axes)):
            if k == len(axes) - 1:
                self._reduce_lines(what, uf, (cur_label, cur), (out_label, final), None, init)
            else:
                t = self.temporary(cur.shape[1:], cur.dtype if not (cur.dtype == bool and uf is np.add)
                                   else rdtype)
                self.kept.append(t)
                self._reduce_lines(what, uf, (cur_label, cur), (t.label, t.__eagle_view__()), None, None)
                cur_label, cur = t.label, t.__eagle_view__()
        return out

    def _reduce_lines(self, what, uf, x, out, mask, init):
        """``uf.reduce`` of ``x`` (label, plain) over its axis 0 into ``out``: one node where a
        sample's elements of every operand read flat (``_one_run``), else one node per line of
        the kept axes that do not (``A.sum(axis=1)`` of a 3-d ``A``: one node per ``A[i]``),
        each over the reduced axis as NumPy's loop runs it; up to ``_MAX_LINES`` nodes."""
        (label, a), (out_label, o) = x, out
        rest = a.shape[1:]
        if 0 in rest:
            return              # no output element: NumPy computes nothing
        arrays = [a, o.reshape((1,) + o.shape)] + ([mask[1]] if mask is not None and mask[1].ndim else [])

        def works(axes):
            key = (slice(None),) + tuple(0 if k in axes else slice(None) for k in range(len(rest)))
            return all(_one_run(b[key]) for b in arrays)

        axes, lines = _fewest_lines(rest, works)
        if not axes:
            self._record(_Op(self._name(what), "reduce", uf, [x], [out], mask, init))
            return
        if lines > _MAX_LINES:
            raise refuse(NO_FORM, what=(
                f"{what} of a {a.shape[1:]} result whose elements do not read as one run of equal steps "
                f"(a reduction over an inner axis of a 3-d array keeps axes on both sides of it; capture "
                f"splits it into one node per line of the kept axes, up to {_MAX_LINES}, and this takes "
                f"{lines}): reduce a copy with the reduced axis first, "
                f"np.moveaxis(A, axis, 0).copy().sum(axis=0), or move the axis in the arrays themselves"))
        for key, where in _lines(rest, axes):
            m = mask
            if mask is not None and mask[1].ndim:
                m = (mask[0], mask[1][(slice(None),) + key])
            self._record(_Op(self._name(f"{what} {where}"), "reduce", uf, [(label, a[(slice(None),) + key])],
                             [(out_label, o[key])], m, init))

    def at(self, uf, tally, index, weights=None):
        ops = [self._writable(tally, f"np.{uf.__name__}.at")] + [self._operand(v) for v in (index, weights)]
        self._record(_Op(self._name(f"np.{uf.__name__}.at"), "at", uf, ops))

    # ---- assignment, copies, views --------------------------------------------------

    def assign(self, target, key, value, fresh):
        if isinstance(key, np.ndarray) and key.dtype == bool:
            if key.shape != target.shape:
                raise refuse(FANCY_INDEX, what=f"{target.label}[mask] with a mask of another shape")
            if isinstance(value, np.ndarray) and value.ndim:
                raise refuse(FANCY_INDEX, what=f"{target.label}[mask] = an array")
            self.fill(target, value, key)
            return
        view = target[key] if key is not Ellipsis else target
        if isinstance(view, np.ndarray) and not isinstance(view, StandIn):
            raise refuse(FANCY_INDEX, what=f"{target.label}[{index_label(key)}] = ...")
        if isinstance(value, StandIn) and _same_layout(value.__eagle_view__(), view.__eagle_view__()):
            return   # a[k] += b: the in-place operator already wrote a[k]
        if not isinstance(value, np.ndarray):
            if isinstance(value, _SCALARS):
                self.fill(view, value, None)
                return
            value = np.asarray(value)
            if value.dtype == object:
                raise refuse(NO_FORM, what=f"assigning {type(value).__name__}")
        if value.shape != view.shape and np.broadcast_shapes(value.shape, view.shape) != view.shape:
            raise ValueError(f"could not broadcast input array from shape {value.shape} into shape {view.shape}")
        if not np.can_cast(value.dtype, view.dtype, "same_kind"):
            raise refuse(UNSAFE_CAST, what=f"{view.label} = ...", src=value.dtype, dst=view.dtype)
        self._refuse_ordered_copy(view, value)
        if fresh and self._retarget(value, view):
            return
        uf, extra = copy_ufunc(value.dtype)
        self.call(uf, (value,) + extra, out=(view,), _label="=")

    def _refuse_ordered_copy(self, view, value):
        """NumPy's assignment (PyArray_AssignArray) buffers an overlapping source unless the
        target is 1-d and both run the same direction: then it copies in order (memmove-like
        when the steps are equal, which is what a buffer gives; element by element otherwise)."""
        vp = value.__eagle_view__() if isinstance(value, StandIn) else value
        tp = view.__eagle_view__()
        if tp.ndim != 1 or vp.ndim < 1 or not _overlaps(vp, tp):
            return
        src_step, dst_step = vp.strides[-1], tp.strides[0]
        if src_step * dst_step > 0 and src_step != dst_step:
            label = getattr(value, "label", "source")
            raise refuse(ELEMENT_ORDER, what=f"{view.label} = {label}",
                         what_fixed=f"{view.label} = {label}.copy()")

    def _retarget(self, value, view):
        """Have the nodes that made the temporary ``value`` write ``view`` instead: all of them
        (``_write_through``), else the last one."""
        if not (self._mine(value) and value.owns_memory and self.ops and value.shape == view.shape):
            return False
        if self._write_through(value, (view.label, view.__eagle_view__())):
            return True
        op = self.ops[-1]
        vp, tp = value.__eagle_view__(), view.__eagle_view__()
        hit = [k for k, (_, o) in enumerate(op.outs) if _same_layout(o, vp)]
        if op.kind not in ("ufunc", "reduce") or op.where is not None or len(hit) != 1:
            return False
        if op.kind == "ufunc" and not _steps_free(op.uf, vp, tp):
            return False
        if op.kind == "reduce" and value.dtype != view.dtype:
            return False
        if any(isinstance(a, np.ndarray) and _overlaps(a, tp) for _, a in op.ins):
            return False
        old = op.outs[hit[0]]
        op.outs[hit[0]] = (view.label, tp)
        try:
            op.make(self)
        except (TypeError, ValueError):
            op.outs[hit[0]] = old
            op.make(self)
            return False
        if not any(a is not None and isinstance(a, np.ndarray) and _same_layout(a, vp) for _, a in op.ins):
            self.pool.forget(value.label)
        return True

    def _write_through(self, t, dest, final=None):
        """Have the ops since the temporary ``t`` was made write ``dest`` (label, plain view)
        where they write ``t`` and read it where they read ``t``; ``final``, the last op, reads
        ``t`` into ``dest``. An expression then accumulates in its destination, as a graph
        built by hand does (``b[1:-1] = a[:-2] + a[1:-1] + a[2:]``: every node writes
        ``b[1:-1]``), with no temporary in the fused run. False, nothing changed, where
        ``dest`` would be read or written out of turn: an op of the chain reads or writes
        ``dest`` (other than ``final`` writing it), reads ``t`` before a whole write of it,
        reaches ``t`` through another view, or is a node capture did not make."""
        label, dp = dest
        tp = t.__eagle_view__()
        born = getattr(t, "born", None)
        if born is None or tp.shape != dp.shape or tp.dtype != dp.dtype or _axis_order(tp) != _axis_order(dp):
            return False
        chain = self._since(born)
        if final is not None:
            if not chain or chain[-1] is not final:
                return False
            chain = chain[:-1]
        written = False
        for op in chain + ([final] if final is not None else []):
            if op.kind not in ("ufunc", "reduce"):
                return False
            if op.kind == "ufunc" and not _steps_free(op.uf, tp, dp):
                return False
            reads = [a for _, a in op.ins + ([op.where] if op.where else []) if isinstance(a, np.ndarray)]
            writes = [o for _, o in op.outs]
            if op is final:
                if len(writes) != 1 or not _same_layout(writes[0], dp):
                    return False
                writes = []
            for a in reads + writes:
                if a.size and (_same_layout(a, dp) or _overlaps(a, dp)):
                    return False
                if a.size and not _same_layout(a, tp) and _overlaps(a, tp):
                    return False
            if any(_same_layout(a, tp) for a in reads) and not written:
                return False
            if any(_same_layout(o, tp) for o in writes):
                if op.where is not None and not written:
                    return False     # a masked first write: what it leaves is t's, not dest's
                written = True
        if not written:
            return False
        changed = []
        for op in chain + ([final] if final is not None else []):
            old = (list(op.ins), list(op.outs), op.where)

            def swap(pair):
                return (label, dp) if isinstance(pair[1], np.ndarray) and _same_layout(pair[1], tp) else pair

            op.ins, op.outs = [swap(p) for p in op.ins], [swap(p) for p in op.outs]
            op.where = None if op.where is None else swap(op.where)
            if (op.ins, op.outs, op.where) != old:
                changed.append((op, old))
        if not self.remake_ops(changed):
            return False
        self.pool.forget(t.label)
        return True

    def remake_ops(self, changed):
        """Make the nodes of ops whose operands were changed again; if one refuses, give
        every op of ``changed`` ([(op, (ins, outs, where) before)]) back its operands and
        node, and return False."""
        try:
            for op, _ in changed:
                op.make(self)
        except (TypeError, ValueError):
            for op, (ins, outs, where) in changed:
                op.ins, op.outs, op.where = ins, outs, where
                op.make(self)
            return False
        return True

    def fill(self, view, value, mask):
        if isinstance(value, np.ndarray):
            v = value
        else:
            v = np.empty((), view.dtype)
            v[...] = value      # NumPy's own conversion of the scalar, done once
            v = v[()]
        uf, extra = copy_ufunc(view.dtype)
        self.call(uf, (v,) + extra, out=(view,), where=True if mask is None else mask, _label="=")

    def copy(self, x, order="K"):
        t = self.temporary(x.shape, x.dtype, x, order)
        uf, extra = copy_ufunc(x.dtype)
        return self.call(uf, (x,) + extra, out=(t,), _label="copy")

    def astype(self, x, dtype, copy, order="K"):
        dtype = np.dtype(dtype)
        if dtype == x.dtype and not copy:
            return x
        if not np.can_cast(x.dtype, dtype, "same_kind"):
            raise refuse(UNSAFE_CAST, what=f"{getattr(x, '_label', 'array')}.astype({dtype})", src=x.dtype,
                         dst=dtype)
        t = self.temporary(x.shape, dtype, x, order)
        uf, extra = copy_ufunc(x.dtype)
        return self.call(uf, (x,) + extra, out=(t,), _label=f"astype({dtype})")

    def reshape(self, x, shape, kwargs):
        try:
            return np.ndarray.reshape(x, shape, copy=False, **kwargs)
        except ValueError:
            pass
        # NumPy would copy: the copy is a temporary laid out in the order the elements are
        # read (C, or F), which the reshape then views (a copy made now would never be updated)
        order = _read_order(x, kwargs.get("order", "C"))
        if kwargs.get("copy", None) is False:
            raise ValueError(f"capture: {user_site().describe()}: cannot reshape {x.shape} to {shape} "
                             "without copying (copy=False)")
        kwargs = {k: v for k, v in kwargs.items() if k != "copy"}
        return np.ndarray.reshape(self.copy(x, order), shape, copy=False, **dict(kwargs, order=order))

    def flatten(self, x, order):
        order = _read_order(x, order)
        return np.ndarray.reshape(self.copy(x, order), -1, order=order, copy=False)

    def gather(self, x, key):
        raise refuse(FANCY_INDEX, what=f"{x.label}[{index_label(key)}]")

    def function(self, func, types, args, kwargs):
        return functions.dispatch(self, func, types, args, kwargs)
