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

from dataclasses import replace

from eagle._errors import add_note
from eagle._text import with_article
from eagle.cpu.kernel_arrays import check_kernel_arrays
from eagle.cpu.spec import ControlSpec, NativeSpec, OpaqueSpec
from eagle.record.control import ControlNode
from eagle.record.memory import same_view
from eagle.record.node import Node, OpaqueNode

__all__ = ["cpu_lowering"]

_LOWERINGS: dict[type, object] = {}


def cpu_lowering(kind: type, *, replace: bool = False):
    """Register the decorated ``lower(node, index, ctx)`` as node class ``kind``'s cpu lowering.

    ``kind`` is a subclass of ``eagle.record.node.Node``. A class has one lowering: a second
    registration for it raises ``ValueError``, unless ``replace=True`` says it replaces the
    first on purpose (a test's stand-in, a reloaded module).
    """
    if not (isinstance(kind, type) and issubclass(kind, Node)):
        raise TypeError(f"cpu_lowering() takes a node class (a subclass of eagle.record.node.Node), "
                        f"got {kind!r}")

    def register(lower):
        if not callable(lower):
            raise TypeError(f"cpu_lowering({kind.__name__}) decorates a function lower(node, index, ctx), "
                            f"got {type(lower).__name__}")
        if kind in _LOWERINGS and not replace:
            raise ValueError(f"{kind.__name__} already has a cpu lowering ({_name(_LOWERINGS[kind])}); "
                             "pass cpu_lowering(kind, replace=True) to replace it")
        _LOWERINGS[kind] = lower
        return lower
    return register


def _name(fn):
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def lower(node, index: int, ctx):
    """The spec of recorded node ``node`` (index ``index`` in ``ctx``'s recording), checked:
    a spec of the node's own index, a callable for an opaque spec, and for a native spec
    the arrays its kernel declares (``eagle.cpu.kernel_arrays``), each one the node
    declares (staging orders the nodes by them, and a per-sample one bounds the capacity,
    so a kernel split over [0, logical_size) stays inside it), a written one among its writes.
    An exception the lowering raises gets a note naming the node."""
    for cls in type(node).__mro__:
        fn = _LOWERINGS.get(cls)
        if fn is not None:
            break
    else:
        raise TypeError(f"{ctx.where(index)} is {with_article(node.kind)} node, which has no cpu lowering "
                        "(it runs on the GPU, or declares no way to run); a graph of NumPy arrays takes "
                        "opaque(), native(), ufunc(), compact() and reorder() nodes")
    try:
        spec = fn(node, index, ctx)
    except BaseException as exc:
        add_note(exc, f"eagle: raised by the cpu lowering {_name(fn)} of {ctx.where(index)}")
        raise
    where = f"{ctx.where(index)}: its cpu lowering {_name(fn)}"
    if not isinstance(spec, (OpaqueSpec, NativeSpec, ControlSpec)):
        got = "None" if spec is None else with_article(type(spec).__name__)
        raise TypeError(f"{where} returned {got}; a cpu lowering returns "
                        "an OpaqueSpec, a NativeSpec or a ControlSpec (eagle.cpu.spec)")
    if spec.index != index:
        raise ValueError(f"{where} returned a spec for node index {spec.index!r}; it is node {index}")
    if isinstance(spec, OpaqueSpec) and not callable(spec.call):
        raise TypeError(f"{where} returned an OpaqueSpec whose call is not callable "
                        f"({type(spec.call).__name__})")
    if isinstance(spec, NativeSpec):
        _check_native(node, spec, where)
        if spec.extent is None and node.sized:
            spec = replace(spec, extent=node.extent())
    return spec


def _check_native(node, spec, where):
    """A NativeSpec's kernel and arrays, as a native node's are checked when it is recorded."""
    from eagle.native import Kernel

    if not isinstance(spec.kernel, Kernel):
        raise TypeError(f"{where} returned a NativeSpec whose kernel is not an eagle.native.Kernel "
                        f"({type(spec.kernel).__name__})")
    declared = list(node.arrays())
    n_reads = spec.kernel.n_reads
    named = []
    for k, a in enumerate(spec.arrays):
        written = n_reads is not None and k >= n_reads
        match = next((name for name, d, w in declared if same_view(a, d) and (w or not written)), None)
        if match is None:
            what = "a written array" if written else "an array"
            raise ValueError(f"{where} gives kernel {spec.kernel.name!r} {what} (array {k}) the node does "
                             f"not declare{' in writes or updates' if written else ''}; a kernel gets only "
                             "the node's declared arrays (they order the nodes and bound the capacity)")
        named.append((match, a))
    try:
        check_kernel_arrays(spec.kernel, named)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where} returned a NativeSpec the kernel does not take: {exc}") from None


@cpu_lowering(OpaqueNode)
def _lower_opaque(node, index, ctx):
    return OpaqueSpec(index, node.callable_for(ctx.logical_size))


@cpu_lowering(ControlNode)
def _lower_control(node, index, ctx):
    bodies, bases = ctx.compile_bodies(node, index)
    cond = node.cond[1] if node.cond is not None else None
    return ControlSpec(index, node.control, cond, tuple(bodies), node.max_iterations, ctx.name_of(index),
                       tuple(bases), node.on_max)
