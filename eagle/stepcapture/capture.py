"""``eagle.capture(fn, *args)``: a plain NumPy step, recorded as the nodes it would run.

``capture`` calls ``fn`` once with stand-ins (``eagle.stepcapture.standin``) for the
arrays among its arguments; what ``fn`` does to them is recorded (``eagle.stepcapture.session``)
into an unbuilt ``CapturedGraph``: an ``eagle.Graph`` that also owns the temporaries of the
step and holds what ``fn`` returned (``g.result``). Replaying it gives what calling ``fn``
eagerly gives.
"""
from __future__ import annotations

import dataclasses
import dis
import inspect
import types

import numpy as np

from eagle.graph import Graph
from eagle.record.memory import array_kind
from eagle.record.node import Node
from eagle.record.plan import Plan
from eagle.record import hooks
from eagle.stepcapture.refusals import ESCAPE, GENERATOR, NOT_AN_ARRAY_RESULT, CaptureError
from eagle.stepcapture.session import Session
from eagle.stepcapture.source import Site
from eagle.stepcapture.standin import StandIn, recorder, recording

__all__ = ["capture", "CapturedGraph", "CapturedPlan"]


@dataclasses.dataclass(repr=False)
class CapturedPlan(Plan):
    """A captured graph's plan: the plan, and the temporaries the graph owns."""

    temporaries: tuple = ()

    def __str__(self):
        return "\n".join([super().__str__(), *self.temporaries])


class CapturedGraph(Graph):
    """The graph ``eagle.capture`` records: an ``eagle.Graph`` that owns the step's temporaries.

    ``result`` is what the step returned (None, an array or a tuple of arrays: the step's
    arguments, or temporaries the graph owns, updated by every replay); ``temporaries``
    lists the temporaries (name, shape, dtype, the buffer of the pool they live in, the
    line that made them) and ``temporary_bytes`` the memory the graph holds for them.
    """

    def __init__(self):
        super().__init__()
        self.result = None
        self._pool = None

    def own(self, pool, kept, result) -> None:
        """Hold the capture's temporaries (``pool``, the stand-ins ``kept``) and its result."""
        self._pool, self._kept, self.result = pool, kept, result

    @property
    def temporaries(self) -> list:
        return list(self._pool.temporaries) if self._pool is not None else []

    @property
    def temporary_bytes(self) -> int:
        return self._pool.nbytes if self._pool is not None else 0

    def _temporary_lines(self):
        temps = self.temporaries
        if not temps:
            return []
        return [f"temporaries: {len(temps)} in {self._pool.buffers_in_use} buffers, "
                f"{self.temporary_bytes:,} bytes owned by the graph (allocated once, reused by every replay)"
                ] + [f"  {t!r}" for t in temps]

    def __str__(self):
        return "\n".join([super().__str__(), *self._temporary_lines()])

    def plan(self) -> CapturedPlan:
        """The plan (``Graph.plan``), with the temporaries the graph owns under it."""
        plan = super().plan()
        fields = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}
        captured = CapturedPlan(**fields, temporaries=tuple(self._temporary_lines()))
        for name in ("capacity_bound_by", "split_refused", "bodies", "costs_at"):
            setattr(captured, name, getattr(plan, name))
        return captured


def _on_node(node):
    session = recorder()
    if session is not None:
        session.node_made(node)


hooks.register(node_made=_on_node)


def _is_generator(v) -> bool:
    return isinstance(v, (np.random.Generator, np.random.RandomState, np.random.BitGenerator)) or v is np.random


def _refuse_generators(fn, bound):
    """NumPy's Generator in the step's own code (a global, a closed-over name, an argument,
    ``np.random.*``): its draws would be made once, now."""
    for name, value in bound.arguments.items():
        if _is_generator(value):
            raise CaptureError(f"capture: the argument {name!r} of {fn.__name__} is {type(value).__name__}: "
                               + GENERATOR)
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in (fn.__closure__ or ()) if _full(c))))
    stack = [code]
    while stack:
        co = stack.pop()
        stack += [c for c in co.co_consts if isinstance(c, types.CodeType)]
        prev = None
        for ins in dis.get_instructions(co):
            value = None
            if ins.opname == "LOAD_GLOBAL":
                value = fn.__globals__.get(ins.argval)
            elif ins.opname == "LOAD_DEREF" and co is code:
                value = cells.get(ins.argval)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval == "random" and prev is np:
                value = np.random
            if _is_generator(value):
                site = Site(fn.__name__, co.co_filename, ins.positions.lineno if ins.positions else co.co_firstlineno)
                raise CaptureError(f"capture: {site.describe()}: {GENERATOR}")
            prev = value if value is not None else (fn.__globals__.get(ins.argval)
                                                    if ins.opname == "LOAD_GLOBAL" else None)


def _full(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _standins(session, value, label):
    """The step's argument with stand-ins for its arrays (also inside tuples and lists)."""
    if session.device is not None and hasattr(value, "__cuda_array_interface__"):
        return session.standin(session.device.shadow(value), label)
    if isinstance(value, np.ndarray):
        plain = value.__eagle_view__() if isinstance(value, StandIn) else value
        if plain.dtype == object:
            return value
        return session.standin(plain, label)
    if isinstance(value, (tuple, list)) and any(array_kind(v) for v in value):
        return type(value)(_standins(session, v, f"{label}[{k}]") for k, v in enumerate(value))
    return value


def _refuse_escapes(fn, session):
    """A stand-in of this capture left in the step's globals or closed-over names."""
    code = getattr(fn, "__code__", None)
    places = [(f"global {k}", v) for k, v in getattr(fn, "__globals__", {}).items()]
    if code is not None:
        places += [(f"closed-over {k}", c.cell_contents)
                   for k, c in zip(code.co_freevars, fn.__closure__ or ()) if _full(c)]
    for where, v in places:
        for x in (v if isinstance(v, (list, tuple)) else (v.values() if isinstance(v, dict) else (v,))):
            if isinstance(x, StandIn) and x.capture_session is session:
                raise CaptureError(f"capture: {fn.__name__}: " + ESCAPE.format(what=x.label, where=where))


def _result(value, what, session):
    if value is None:
        return None
    if isinstance(value, Node) and any(op.node is value for op in session.ops):
        return None   # ``lambda: while_loop(...)``: the node the step made is in the graph
    if isinstance(value, tuple):
        return tuple(_result(v, what, session) for v in value)
    if isinstance(value, StandIn):
        if session.device is not None:
            return session.device.view(value.__eagle_view__())
        return value.__eagle_view__()
    if isinstance(value, np.ndarray):
        return value
    raise CaptureError(f"capture: {what}: " + NOT_AN_ARRAY_RESULT.format(what=type(value).__name__))


def _escaping(value) -> list:
    """The arrays the step returned (also inside tuples), as the nodes see them."""
    if isinstance(value, tuple):
        return [a for v in value for a in _escaping(v)]
    if isinstance(value, StandIn):
        return [value.__eagle_view__()]
    return [value] if isinstance(value, np.ndarray) else []


def _cuda_arrays(arguments) -> dict:
    """{name: array} of the CUDA arrays (CuPy...) among the step's arguments; TypeError when
    NumPy arrays come with them (a graph runs on one device)."""
    flat = {}
    for key, value in arguments.items():
        items = enumerate(value) if isinstance(value, (tuple, list)) else [(None, value)]
        for k, v in items:
            kind = array_kind(v) if isinstance(v, np.ndarray) or hasattr(v, "__cuda_array_interface__") else None
            if kind is not None:
                flat[key if k is None else f"{key}[{k}]"] = (kind, v)
    kinds = {kind for kind, _ in flat.values()}
    if "cuda" not in kinds:
        return {}
    if len(kinds) > 1:
        raise TypeError("capture(): the step's arrays mix NumPy and CUDA arrays; a graph runs on one "
                        "device: give it CuPy arrays for cuda, NumPy arrays for the cpu")
    return {k: v for k, (_, v) in flat.items()}


def capture(fn, *args, **kwargs) -> CapturedGraph:
    """Record what the plain NumPy function ``fn`` does to its arrays as a graph.

    ``fn`` is called once, with stand-ins for the NumPy arrays among ``args`` and ``kwargs``
    (also inside tuples and lists): nothing is computed. Its ufunc calls (operators and
    in-place operators included), reductions, assignments to views and the nodes it makes
    with ``eagle.graph``'s constructors are recorded, in order, as ufunc, reduction and
    those nodes, each named after its line (``step:3 np.exp``). Results without ``out=``
    are temporaries the graph owns, allocated once and reused by every replay.

    A step given CUDA arrays (CuPy's, or anything with ``__cuda_array_interface__``) is
    recorded the same way, into the same nodes, made by the cuda backend: its generated
    elementwise and reduction kernels, temporaries in device memory the graph owns; what
    has no such kernel is refused at its line (``eagle.stepcapture.device``).

    Parameters
    ----------
    fn : callable
        The step: plain NumPy on its array arguments, updating them in place.
    *args, **kwargs
        What ``fn`` is called with; the arrays among them are the arrays the graph runs on.

    Returns
    -------
    CapturedGraph
        An unbuilt ``eagle.Graph``; ``g.result`` is what ``fn`` returned (arrays the graph
        updates on every replay).

    Raises
    ------
    CaptureError
        What a graph cannot replay, at the line of ``fn`` that asked for it, with what to
        write instead: Python control flow on an array's value (``if residual > tol:``),
        a NumPy function with no ufunc or reduction form, I/O, NumPy's random Generator,
        a stand-in stored outside the step, a cast NumPy makes under 'unsafe' casting.
    TypeError, ValueError
        What NumPy or ``eagle.graph`` refuses for the operation (with its line in the node
        name it would have had).

    Examples
    --------
    >>> import numpy as np, eagle
    >>> def step(x, y):
    ...     y[...] = np.sqrt(x) + 1.0
    >>> x, y = np.arange(4.0), np.zeros(4)
    >>> g = eagle.capture(step, x, y)
    >>> g.nodes == [f"step:{step.__code__.co_firstlineno + 1} np.sqrt", f"step:{step.__code__.co_firstlineno + 1} np.add"]
    True
    >>> g.build().launch(1)
    >>> y
    array([1.        , 2.        , 2.41421356, 2.73205081])
    """
    if not callable(fn):
        raise TypeError(f"capture() needs the step function first, got {type(fn).__name__}")
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ValueError):   # no signature (a builtin): arguments by position
            bound = None
        else:
            raise TypeError(f"capture({getattr(fn, '__name__', 'fn')}, ...): {exc}") from None
    name = getattr(fn, "__name__", type(fn).__name__)
    arguments = bound.arguments if bound is not None else {f"arg{k}": v for k, v in enumerate(args)}
    session = Session(name, on_cuda=bool(_cuda_arrays(arguments)))
    if bound is not None:
        _refuse_generators(fn, bound)
        for key, value in bound.arguments.items():
            bound.arguments[key] = _standins(session, value, key)
        call_args, call_kwargs = bound.args, bound.kwargs
    else:
        call_args = tuple(_standins(session, v, f"arg{k}") for k, v in enumerate(args))
        call_kwargs = {k: _standins(session, v, k) for k, v in kwargs.items()}
    with recording(session):
        returned = fn(*call_args, **call_kwargs)
    _refuse_escapes(fn, session)
    session.fold_negations()
    session.reuse_dying_operands(_escaping(returned))
    session.pool.keep()
    if session.device is not None:
        session.device.forget_unused()
    g = CapturedGraph()
    g.own(session.pool, session.kept + [session.device], _result(returned, name, session))
    for op in session.ops:
        g.add_node(op.node, name=op.name)
    return g
