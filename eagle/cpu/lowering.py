"""The cpu backend's one place that turns a recorded node into what the executor runs.

Each node kind has one cpu lowering: a function ``lower(node, index, ctx) -> spec``
(``eagle.cpu.spec``) registered for its class with ``@cpu_lowering(Kind)``, next to the
class when the class is the cpu's own (``eagle.cpu.native_node``, ``eagle.cpu.ufunc_node``,
``eagle.cpu.finished``, ``eagle.mpi``), here for the backend-neutral kinds of
``eagle.record`` (opaque and control-flow nodes). A subclass without a lowering of its
own takes its nearest base's. ``ctx`` is the backend's ``LoweringContext``: the replay's
logical size (for sized opaque nodes) and the compilation of a control node's bodies.
"""
from __future__ import annotations

from eagle._text import with_article
from eagle.cpu.spec import ControlSpec, OpaqueSpec
from eagle.record.control import ControlNode
from eagle.record.node import OpaqueNode

_LOWERINGS: dict[type, object] = {}


def cpu_lowering(kind: type):
    """Register the decorated ``lower(node, index, ctx)`` as node class ``kind``'s cpu lowering."""
    def register(lower):
        _LOWERINGS[kind] = lower
        return lower
    return register


def lower(node, index: int, ctx):
    """The spec of recorded node ``node`` (index ``index`` in ``ctx``'s recording)."""
    for cls in type(node).__mro__:
        fn = _LOWERINGS.get(cls)
        if fn is not None:
            return fn(node, index, ctx)
    raise TypeError(f"{ctx.where(index)} is {with_article(node.kind)} node, which has no cpu lowering "
                    "(it runs on the GPU, or declares no way to run); a graph of NumPy arrays takes "
                    "opaque(), native(), ufunc(), compact() and reorder() nodes")


@cpu_lowering(OpaqueNode)
def _lower_opaque(node, index, ctx):
    return OpaqueSpec(index, node.callable_for(ctx.logical_size))


@cpu_lowering(ControlNode)
def _lower_control(node, index, ctx):
    bodies, bases = ctx.compile_bodies(node, index)
    cond = node.cond[1] if node.cond is not None else None
    return ControlSpec(index, node.control, cond, tuple(bodies), node.max_iterations, ctx.name_of(index),
                       tuple(bases))
