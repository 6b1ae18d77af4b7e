"""The stand-in a captured step receives for each of its arrays: an ndarray over the same memory.

A ``StandIn`` views the memory of the array it stands for (an argument of the step, a
temporary the graph owns, a view of either), so slicing, ``.T``, ``reshape`` and the
other views NumPy makes are real views with real byte ranges: hazards come from bytes,
as for every node. What would compute (ufuncs, reductions, NumPy functions, assignment,
the methods that copy) is handed to the recorder of the capture in progress on this
thread (``eagle.stepcapture.session``), which records a node and computes nothing.
Reading a value (``bool(x)``, ``float(x)``, ``x.tolist()``) is refused with the line.

Once its capture is over a stand-in is an ordinary array over its memory again: an
``eagle.graph.opaque`` callable that closed over one computes on replay.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from eagle.stepcapture.refusals import CONTROL_FLOW, NO_FORM, VALUE_READ, refuse

__all__ = ["StandIn", "recorder", "recording", "index_label", "FRESH_REFS"]

_stack = threading.local()


def recorder():
    """The recorder of the capture in progress on this thread, or None."""
    stack = getattr(_stack, "sessions", None)
    return stack[-1] if stack else None


class recording:
    """``with recording(session):`` the stand-ins of this thread record into ``session``."""

    def __init__(self, session):
        self.session = session
        self._depth = None

    def __enter__(self):
        if not hasattr(_stack, "sessions"):
            _stack.sessions = []
        self._depth = len(_stack.sessions)
        _stack.sessions.append(self.session)
        return self.session

    def __exit__(self, *exc):
        # back to the depth it was entered at: a capture inside the step whose exit an
        # interrupt skipped does not stay on the thread, recording what runs after
        del _stack.sessions[self._depth:]


def index_label(key) -> str:
    """``1:-1, 2:`` for the key of ``a[1:-1, 2:]``."""
    def one(k):
        if isinstance(k, slice):
            text = ("" if k.start is None else str(k.start)) + ":" + ("" if k.stop is None else str(k.stop))
            return text + ("" if k.step is None else f":{k.step}")
        if k is Ellipsis:
            return "..."
        return repr(k) if not isinstance(k, np.ndarray) else "<array>"
    return ", ".join(one(k) for k in (key if isinstance(key, tuple) else (key,)))


def _basic(key) -> bool:
    """Whether ``key`` is basic indexing (a view): ints, slices, ``...``, ``None``."""
    for k in key if isinstance(key, tuple) else (key,):
        if not (k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer))) or isinstance(k, (bool, np.bool_)):
            return False
    return True


class _Probe:
    def __setitem__(self, key, value):
        self.refs = sys.getrefcount(value)


def _fresh_refs():
    """The reference count ``__setitem__`` sees for a value no name holds (``a[...] = b + c``)
    and for a named one; None when this Python does not tell them apart."""
    probe = _Probe()

    def unnamed():
        probe[...] = _Probe()
        return probe.refs

    def named():
        v = _Probe()
        probe[...] = v
        return probe.refs

    fresh, held = unnamed(), named()
    return fresh if fresh < held else None


#: what ``sys.getrefcount(value)`` is in ``StandIn.__setitem__`` for an unnamed temporary
FRESH_REFS = _fresh_refs()


class _UfuncProbe(np.ndarray):
    def __array_ufunc__(self, uf, method, *inputs, **kwargs):
        _UfuncProbe.refs = [sys.getrefcount(x) for x in inputs]
        _UfuncProbe.is_self = [x is self for x in inputs]
        return None


def _new_probe():
    return np.zeros(1).view(_UfuncProbe)


def _probe_unnamed(kw):
    """(count, is self) of an operand no name holds, through each way a ufunc is reached."""
    t = _new_probe()
    seen = []
    if not kw:     # operators take no keywords
        _new_probe() * 2.0
        seen.append((_UfuncProbe.refs[0], True))
        2.0 * _new_probe()
        seen.append((_UfuncProbe.refs[1], True))
        t * _new_probe()
        seen.append((_UfuncProbe.refs[1], False))
    np.exp(_new_probe(), **kw)
    seen.append((_UfuncProbe.refs[0], True))
    np.add(t, _new_probe(), **kw)
    seen.append((_UfuncProbe.refs[1], False))
    return seen


def _probe_named(kw):
    t, u = _new_probe(), _new_probe()
    seen = []
    if not kw:
        t * 2.0
        seen.append((_UfuncProbe.refs[0], True))
        2.0 * t
        seen.append((_UfuncProbe.refs[1], True))
        u + t
        seen.append((_UfuncProbe.refs[1], False))
    np.exp(t, **kw)
    seen.append((_UfuncProbe.refs[0], True))
    np.add(t, u, **kw)
    seen.append((_UfuncProbe.refs[1], False))
    return seen


def _fresh_operand_refs(kw):
    """(for the operand ``__array_ufunc__`` is called on, for the others): the reference count
    an operand no name holds has at most (``(a + b) * c``, ``np.exp(a + b)``, ``np.add(t, a + b)``;
    with keywords ``kw``: ``np.exp(a + b, out=w)``); None when this Python does not tell it
    from a named one."""
    unnamed, named = _probe_unnamed(kw), _probe_named(kw)
    limits = []
    for own in (True, False):
        fresh = [n for n, s in unnamed if s is own]
        held = [n for n, s in named if s is own]
        if max(fresh) >= min(held):
            return None
        limits.append(max(fresh))
    return tuple(limits)


#: what ``sys.getrefcount(x)`` is in ``StandIn.__array_ufunc__`` for an operand no name holds:
#: for a call without keywords, and for one with (``out=``, ``where=``: NumPy holds the
#: operands once more then)
FRESH_OPERAND_REFS = (_fresh_operand_refs({}), _fresh_operand_refs({"out": np.zeros(1)}))


def _plain(x):
    return x.__eagle_view__() if isinstance(x, StandIn) else x


def _plainly(x):
    if isinstance(x, tuple):
        return tuple(_plainly(v) for v in x)
    if isinstance(x, list):
        return [_plainly(v) for v in x]
    if isinstance(x, dict):
        return {k: _plainly(v) for k, v in x.items()}
    return _plain(x)


def memory_order(x):
    """The view of ``x`` whose C order is NumPy's ``ravel('K')`` / ``flatten('K')`` order: its
    axes by step, largest first, whatever their sign (NumPy reverses no axis for 'K'; a
    broadcast axis, of step 0, is refused)."""
    if any(st == 0 and n > 1 for n, st in zip(x.shape, x.strides)):
        raise refuse(NO_FORM, what=f"{getattr(x, 'label', 'array')}.ravel('K') / .flatten('K') of a "
                                   "broadcast view")
    return x.transpose(sorted(range(x.ndim), key=lambda k: -abs(x.strides[k])))


class StandIn(np.ndarray):
    """An array of a captured step: its memory, its name, the capture it records into."""

    def __array_finalize__(self, obj):
        if obj is None:
            return
        self.capture_session = getattr(obj, "capture_session", None)
        self.label = getattr(obj, "label", None)
        # a view of a temporary keeps the temporary's stand-in alive: its buffer is in use
        self.temporary_root = obj if getattr(obj, "owns_memory", False) else getattr(obj, "temporary_root", None)
        self.owns_memory = False

    def __eagle_view__(self):
        """The plain ndarray over this stand-in's memory (what a node schedules)."""
        return self.view(np.ndarray)

    def _recorder(self):
        """The capture in progress on this thread, or None (the stand-in is plain again)."""
        return recorder()

    # ---- what computes ----------------------------------------------------------

    def __array_ufunc__(self, uf, method, *inputs, **kwargs):
        refs = [sys.getrefcount(x) for x in inputs]
        own = [x is self for x in inputs]
        session = recorder()
        if session is None:
            return getattr(uf, method)(*_plainly(inputs), **_plainly(kwargs))
        limits = FRESH_OPERAND_REFS[bool(kwargs)]
        if method == "__call__" and limits is not None:
            kwargs["_fresh"] = tuple(n <= limits[0 if mine else 1] for n, mine in zip(refs, own))
        return session.ufunc(uf, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        session = recorder()
        if session is None:
            return func(*_plainly(args), **_plainly(kwargs))
        return session.function(func, types, args, kwargs)

    def __getitem__(self, key):
        session = recorder()
        if session is None:
            return _plain(self)[_plainly(key)]
        if not _basic(key):
            return session.gather(self, key)
        view = np.ndarray.__getitem__(self, key)
        if not isinstance(view, np.ndarray):
            # a[3] of a 1-d array: a 0-d view (NumPy would read the value now)
            view = np.ndarray.__getitem__(self, (key if isinstance(key, tuple) else (key,)) + (Ellipsis,))
        view.label = f"{self.label}[{index_label(key)}]"
        return view

    def __setitem__(self, key, value):
        fresh = FRESH_REFS is not None and sys.getrefcount(value) <= FRESH_REFS
        session = recorder()
        if session is None:
            _plain(self)[_plainly(key)] = _plainly(value)
            return
        session.assign(self, key, value, fresh)

    @property
    def T(self):
        view = np.ndarray.T.__get__(self)
        view.label = f"{self.label}.T"
        return view

    def __iter__(self):
        if recorder() is None:
            return iter(_plain(self))
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    # ---- methods that would copy or fill: recorded -----------------------------

    def copy(self, order="C"):
        session = recorder()
        return _plain(self).copy(order) if session is None else session.copy(self, order)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        session = recorder()
        if session is None:
            return _plain(self).astype(dtype, order=order, casting=casting, copy=copy)
        return session.astype(self, dtype, copy, order)

    def round(self, decimals=0, out=None):
        session = recorder()
        if session is None:
            return _plain(self).round(decimals, _plainly(out))
        return session.function(np.round, (StandIn,), (self, decimals, out), {})

    def fill(self, value):
        session = recorder()
        if session is None:
            _plain(self).fill(value)
        else:
            session.assign(self, Ellipsis, value, False)

    def reshape(self, *shape, **kwargs):
        session = recorder()
        if session is None:
            return _plain(self).reshape(*shape, **kwargs)
        return session.reshape(self, shape[0] if len(shape) == 1 else shape, kwargs)

    def ravel(self, order="C"):
        if order in ("K", "k") and recorder() is not None:
            return memory_order(self).reshape(-1)
        return self.reshape(-1, order=order)

    def flatten(self, order="C"):
        session = recorder()
        if session is None:
            return _plain(self).flatten(order)
        if order in ("K", "k"):
            return session.flatten(memory_order(self), "C")
        return session.flatten(self, order)

    # ---- what reads values: refused while capturing ------------------------------

    def _value(self, what, template=VALUE_READ):
        if recorder() is not None:
            raise refuse(template, what=what.format(self.label))

    def __bool__(self):
        self._value("`if`, `while`, `and`, `or` or bool() on {}", CONTROL_FLOW)
        return bool(_plain(self))

    def __float__(self):
        self._value("float({})")
        return float(_plain(self))

    def __int__(self):
        self._value("int({})")
        return int(_plain(self))

    def __index__(self):
        self._value("{} used as an index or a count")
        return _plain(self).__index__()

    def __complex__(self):
        self._value("complex({})")
        return complex(_plain(self))

    def __contains__(self, v):
        self._value("`in` {}")
        return v in _plain(self)

    def item(self, *args):
        self._value("{}.item()")
        return _plain(self).item(*args)

    def tolist(self):
        self._value("{}.tolist()")
        return _plain(self).tolist()

    def tobytes(self, order="C"):
        self._value("{}.tobytes()")
        return _plain(self).tobytes(order)

    def tofile(self, *args, **kwargs):
        self._value("{}.tofile() (I/O)")
        return _plain(self).tofile(*args, **kwargs)

    def __repr__(self):
        # repr stays informative (a traceback, a debugger): str and format are the step's I/O
        if recorder() is None:
            return repr(_plain(self))
        return f"<stand-in for {self.label}: {self.shape} {self.dtype}, nothing computed while capturing>"

    def __str__(self):
        self._value("print({}) or str() (I/O)")
        return str(_plain(self))

    def __format__(self, spec):
        self._value("formatting {} (I/O)")
        return format(_plain(self), spec)


def _no_form(name):
    def method(self, *args, **kwargs):
        if recorder() is not None:
            raise refuse(NO_FORM, what=f"{self.label}.{name}()")
        return getattr(_plain(self), name)(*_plainly(args), **_plainly(kwargs))
    method.__name__ = name
    return method


for _name in ("sort", "partition", "put", "resize", "setfield", "byteswap", "argsort", "argmax", "argmin",
              "nonzero", "searchsorted", "cumsum", "cumprod", "take", "compress", "choose", "repeat",
              "dot", "trace", "ptp", "std", "var", "argpartition", "dump", "dumps"):
    setattr(StandIn, _name, _no_form(_name))
del _name
