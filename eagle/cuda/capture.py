"""How a node kind is captured into eagle's CUDA graph: lowerings and the capture context.

The cuda backend (eagle/cuda/backend.py) captures a graph node by node and dispatches on
no node kind: for each node it looks up the kind's **lowering**, the ``Lowering`` subclass
registered for the node's class or its nearest base (``register``), and hands it a
``CaptureContext``: the stream the node is captured on (made current for its GPU work,
CuPy's current stream included), the logical size, the device logical size and replay
counter, eagle's kernels, the stop flag, and what the node adds to the build: device
buffers the graph owns (``register_buffer``), kernel nodes ``set_logical_size`` patches
(``add_sized_kernel``: a ``SizedKernel``), the communicator of a collective over several
ranks (``add_communicator``), and the nodes of a control-flow body (``capture``).

A node kind on CUDA is its class (a ``eagle.record.node.Node``) plus one lowering,
registered beside the class when it lives in ``eagle.cuda`` (or above it, as NCCL's in
``eagle.mpi``), or in the cuda package for the kinds of ``eagle.record``, which knows no
backend (opaque: here; control flow: eagle/cuda/control.py). A lowering also says what
the graph must hold for its nodes before the capture begins (``needs``) and makes their
device memory then (``allocate``: nothing may be allocated or copied while a stream
captures). One lowering object serves one ``build()``, so it may keep that build's
state (eagle/cuda/control.py's loop states, a partition's scratch buffers).
"""
from __future__ import annotations

import enum
from typing import Callable, NamedTuple

from eagle.record.node import Node, OpaqueNode, RunsAs

#: the extension API (docs/api.md); Capture, lowering_class and runs_on_cuda are the backend's
__all__ = ["CaptureContext", "Lowering", "Need", "SizedKernel", "register"]


class Need(enum.Enum):
    """What a node asks of the graph before the capture (``Lowering.needs``)."""

    #: it reads the logical size from device memory (``ctx.size_ptr``)
    DEVICE_SIZE = "device size"
    #: it writes the graph's device block (the next logical size, invalid reorder keys):
    #: the size lives on the device, and ``launch`` copies the block back at its end
    READ_BACK = "read back"
    #: it reads the replay count from device memory (``ctx.replay_ptr``)
    REPLAY_COUNTER = "replay counter"


class SizedKernel(NamedTuple):
    """A captured kernel node ``set_logical_size`` patches: what the exec's retune
    (``eagle.cuda._retune.Retune.add``) is given for it after instantiate."""

    #: the eagle node that launched it: its index in the recording holding it, and its name
    index: int
    name: str
    #: the kernel node in the captured graph (``Stream.last_node()``)
    handle: int
    #: the kernel's parameter count
    nargs: int
    #: the parameter that receives the logical size, and its C type ("int64"...), or
    #: "none": the grid alone follows the size (a kernel reading ``ctx.size_ptr``)
    size_index: int
    size_type: str
    #: samples per block: a retune sets the grid to ceil(size / per_block), at least 1
    per_block: int
    #: bytes of each parameter, or None: 8 each (or the kernel's own, 12.4+ drivers)
    arg_sizes: tuple | None = None
    #: whether it sits in a control-flow body (patched in the body graph, then one
    #: whole-graph exec update)
    in_body: bool = False
    #: its node's extent: a retune gives it min(size, extent) samples (None: no limit)
    extent: int | None = None


class Lowering:
    """How the cuda backend captures the nodes of one kind; subclass it, override
    ``capture``, and ``register`` it for the kind's class. Made once per ``build()``
    (with no arguments), when the build first meets a node of the kind."""

    def needs(self, node) -> frozenset:
        """What the graph must hold before the capture for ``node`` (``Need`` members)."""
        return frozenset()

    def allocate(self, node, ctx: "CaptureContext") -> None:
        """Before the capture, once per distinct node (a body used twice holds the same
        node): make its device memory (``ctx.register_buffer``) and write it on
        ``ctx.stream``."""

    def capture(self, node, ctx: "CaptureContext") -> None:
        """Launch ``node``'s GPU work on ``ctx.stream``, which is capturing; register the
        kernel nodes a retune patches with ``ctx.add_sized_kernel``."""
        raise NotImplementedError(f"{type(self).__name__}.capture")

    def restart(self, stream) -> None:
        """``Graph.restart``: put the device state ``allocate`` made back as it was made
        (on ``stream``, the device's context current)."""

    def after_launch(self, stream) -> None:
        """After a launch that ran replays, the device drained (on ``stream``): raise the
        error its nodes' kernels reported in device memory, as the cpu raises its kernels'
        errors once the launch is done. Called only for lowerings that override it."""


_LOWERINGS: dict[type, type] = {}


def register(kind: type, lowering: type, *, replace: bool = False) -> type:
    """Capture the nodes of class ``kind`` (a subclass of ``eagle.record.node.Node``, and its
    subclasses, unless they have their own) with ``lowering``, a ``Lowering`` subclass.
    Returns ``lowering``. A class has one lowering: a second registration for it raises
    ``ValueError``, unless ``replace=True`` says it replaces the first on purpose."""
    if not (isinstance(kind, type) and issubclass(kind, Node)):
        raise TypeError(f"register() takes a node class (a subclass of eagle.record.node.Node), got {kind!r}")
    if not (isinstance(lowering, type) and issubclass(lowering, Lowering)):
        raise TypeError(f"register() takes a Lowering subclass, got {lowering!r}")
    if kind in _LOWERINGS and not replace:
        raise ValueError(f"{kind.__name__} already has a CUDA lowering ({_LOWERINGS[kind].__qualname__}); "
                         "pass register(kind, lowering, replace=True) to replace it")
    _LOWERINGS[kind] = lowering
    return lowering


def lowering_class(kind: type) -> type | None:
    """The lowering registered for node class ``kind`` or its nearest base, or None (the
    kind has no CUDA lowering: it runs on the CPU)."""
    for cls in kind.__mro__:
        found = _LOWERINGS.get(cls)
        if found is not None:
            return found
    return None


def runs_on_cuda(node) -> bool:
    """Whether the cuda backend can capture ``node``: its kind has a lowering, and does not
    run as a native CPU kernel (``RunsAs.NATIVE``, whatever class it derives from)."""
    return node.runs_as is not RunsAs.NATIVE and lowering_class(type(node)) is not None


class Capture:
    """What the captures of one ``build()`` share: the cuda backend makes it, sets what it
    made before the capture (``size_ptr``, ``replay_ptr``, ``stop_ptr``, ``kernels``),
    and reads back what the lowerings added (``sized``, ``communicators``)."""

    def __init__(self, stream, size: int, *, on_stream: Callable, register_buffer: Callable,
                 kernel_provider: Callable):
        #: eagle's stream (the build's own; the capture's first stream)
        self.stream = stream
        self.size = size
        self.size_ptr = 0
        self.replay_ptr = 0
        self.stop_ptr = 0
        #: eagle's kernels (eagle.cuda.finished.kernel_provider), made on first use
        self.kernels = None
        self._kernel_provider = kernel_provider
        self._on_stream = on_stream
        self._register_buffer = register_buffer
        #: the ``SizedKernel`` records, in capture order
        self.sized: list[SizedKernel] = []
        #: the MPI communicators of collectives over several ranks, each once
        self.communicators: list = []
        self._lowerings: dict[type, Lowering] = {}

    def made(self) -> list:
        """The lowerings this build made, in the order it first met their kinds."""
        return list(self._lowerings.values())

    def lowering(self, kind: type) -> Lowering:
        """This build's lowering for node class ``kind`` (TypeError: it has none)."""
        cls = lowering_class(kind)
        if cls is None:
            raise TypeError(f"{kind.__name__} has no CUDA lowering (eagle.cuda.capture.register)")
        made = self._lowerings.get(cls)
        if made is None:
            made = self._lowerings[cls] = cls()
        return made

    def context(self, stream=None, index: int = -1, name: str = "", in_body: bool = False):
        """The context of node ``index`` (``name``) captured on ``stream`` (eagle's by default)."""
        return CaptureContext(self, self.stream if stream is None else stream, index, name, in_body)


class CaptureContext:
    """What a lowering is handed for one node (see the module doc)."""

    __slots__ = ("_capture", "stream", "index", "name", "in_body", "extent")

    def __init__(self, capture: Capture, stream, index: int, name: str, in_body: bool, extent=None):
        self._capture = capture
        #: the stream the node is captured on (eagle's, a branch's or a body's)
        self.stream = stream
        #: the node's index in the recording holding it, and its name there
        self.index = index
        self.name = name
        #: whether the graph being captured into is a control-flow body's
        self.in_body = in_body
        #: the node's own sample extent (``Node.extent``, a sized node's), or None: its
        #: kernels run over [0, min(logical size, extent)), ``size`` and every retune included
        self.extent = extent

    @property
    def size(self) -> int:
        """The samples the node runs at capture: min(logical size, its extent) (the grids'
        size until a retune, which clamps to the extent too)."""
        size = self._capture.size
        return size if self.extent is None else min(size, self.extent)

    @property
    def size_ptr(self) -> int:
        """Device address of the graph's logical size (int64); 0 when it keeps none
        (no node asked for ``Need.DEVICE_SIZE`` or ``Need.READ_BACK``)."""
        return self._capture.size_ptr

    @property
    def replay_ptr(self) -> int:
        """Device address of the replay counter (uint64, ``g.replays``); 0 when the graph
        keeps none (no node asked for ``Need.REPLAY_COUNTER``)."""
        return self._capture.replay_ptr

    @property
    def stop_ptr(self) -> int:
        """Device address of the stop flag Ctrl-C sets (a loop's condition reads it), or 0."""
        return self._capture.stop_ptr

    @property
    def kernels(self):
        """eagle's own kernels: ``function(name)`` and ``launch(name, stream, grid, block,
        args)`` (eagle.cuda.finished.kernel_provider)."""
        c = self._capture
        if c.kernels is None:
            c.kernels = c._kernel_provider()
        return c.kernels

    def register_buffer(self, buffer):
        """Hand ``buffer`` (a ``DeviceBuffer``, ``HostFlag``...) to the graph: closed with it."""
        self._capture._register_buffer(buffer)
        return buffer

    def add_sized_kernel(self, handle: int, *, nargs: int, size_index: int, size_type: str,
                         per_block: int, arg_sizes=None) -> SizedKernel:
        """Register kernel node ``handle`` (on ``stream``: ``stream.last_node()``) as one
        ``set_logical_size`` patches, for this node (see ``SizedKernel``)."""
        k = SizedKernel(self.index, self.name, handle, nargs, size_index, size_type, per_block,
                        None if arg_sizes is None else tuple(arg_sizes), self.in_body, self.extent)
        self._capture.sized.append(k)
        return k

    def add_communicator(self, comm) -> None:
        """The node is a collective over the ranks of MPI communicator ``comm``:
        ``launch_until_done`` decides on those ranks together."""
        if not any(comm is c or comm == c for c in self._capture.communicators):
            self._capture.communicators.append(comm)

    def on(self, stream):
        """Context manager: ``stream`` is where GPU work goes (``capture_stream()``, CuPy's
        current stream), for work a lowering launches on a stream other than its own."""
        return self._capture._on_stream(stream)

    def capture(self, node, index: int, name: str, stream, *, in_body: bool | None = None) -> None:
        """Capture ``node`` (``index``, ``name`` in its recording) on ``stream`` through its
        kind's lowering, ``stream`` made current: how the backend captures each node, and a
        control-flow lowering its bodies' (``in_body``: the graph ``stream`` captures into is
        a body's; None: the same graph as this node's)."""
        c = self._capture
        ctx = CaptureContext(c, stream, index, name, self.in_body if in_body is None else in_body,
                             node.extent() if node.sized else None)
        lowering = c.lowering(type(node))
        with c._on_stream(stream):
            lowering.capture(node, ctx)


class OpaqueCapture(Lowering):
    """An opaque node runs once, now: its GPU work on the capturing stream is captured."""

    def capture(self, node, ctx):
        node.fn()


register(OpaqueNode, OpaqueCapture)
