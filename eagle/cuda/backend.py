"""The cuda backend: a graph captured once into a CUDA graph, replayed with ``cuGraphLaunch``.

``g.build()`` picks this backend when the graph's arrays are CUDA arrays (CuPy
arrays or any object with ``__cuda_array_interface__``). It

1. binds the CUDA driver (``eagle.cuda._shim``: libcuda.so.1, or ``EAGLE_LIBCUDA``)
   and raises :class:`eagle.CudaError` saying whether no driver was found, it
   is too old (before CUDA 12.0), or no GPU is usable; orders itself after the
   streams the arrays name (``__cuda_array_interface__['stream']``) and CuPy's
   current stream;
2. captures the whole graph in **one** stream capture on eagle's own stream
   (a blocking stream: legacy-default-stream work inside a node then fails the
   capture, ``CUDA_ERROR_STREAM_CAPTURE_IMPLICIT``, naming the node), in relaxed
   capture mode, stage by stage in recording order, each node through its kind's
   lowering (eagle/cuda/capture.py). A stage with
   several nodes is captured as side-by-side branches: an event recorded on
   eagle's stream forks the side streams, each node is captured on its own
   stream, and events join them back before the next stage. One capture with
   fork/join keeps every kernel node at the top level of the CUDA graph, where
   ``set_logical_size`` can patch it. With CuPy imported, the stream a node is
   captured on is made CuPy's current stream (``cupy.cuda.Stream.from_external``
   on CuPy 14, through eagle's ``Stream.__cuda_stream__``; ``ExternalStream`` before)
   and CuPy allocates from a memory pool that belongs to this graph, so the
   temporaries a node allocates while it is captured (``2 * x`` makes a new
   array) are baked into the graph and never handed to other allocations
   (returned to CuPy's shared pool they would be reused, and replays would
   corrupt them);
3. instantiates the captured graph once (a failure names the eagle node);
4. registers the kernel nodes the lowerings added as sized (``SizedKernel``: every
   ``cuda_kernel``, random and partition kernel, in bodies too) with the
   instantiated graph.

**Opaque nodes run once, while the graph is captured.** Their Python code does
not run again on replay: each replay repeats the GPU work they launched during
capture, with the arguments, sizes and temporaries of that moment. (On the CPU
an opaque node runs on every replay.) So after ``g.build(); g.launch(3)`` the
seed page's ``calls`` reads ``{'l': 1, 'r': 1, 'join': 1}`` on a GPU, and
``out`` holds the replayed result. Code that must run each replay belongs in
kernels. A node that synchronizes (``.get()``, ``float(x)``, printing a CuPy
array) cannot be captured: the capture fails with the node named. CuPy
compiles and loads kernels on first use, which may then happen during capture:
drivers for CUDA 12.3 and newer allow that; with older drivers run the step's
CuPy code once before ``build()``.

``cuda_kernel`` nodes are launched by eagle itself during capture; ``set_logical_size(n)``
patches their grid and size argument in the instantiated graph (no re-capture,
no re-instantiation). Kernels launched from inside opaque nodes keep the size
they were captured with.

``launch(n)`` issues ``n`` graph launches (one ``cudaGraphLaunch`` each, from
C without the GIL) on eagle's stream, ordered after the work already queued on
CuPy's current stream, then waits for eagle's stream: when ``launch`` returns, the arrays hold the result,
as on the CPU. **Ctrl-C** stops a long launch promptly: the wait polls the stream
(``cuStreamQuery``, sleeps backing off to 1 ms) and checks for signals every few ms;
replays are issued in windows of about 10 ms of device time, at most two in flight,
so the launch stops between replays; a ``while_loop`` (and ``launch_until_done``'s
WHILE node) also reads eagle's stop flag on the device, so a loop that would never
end stops at its next condition check. Then eagle's stream is drained, the flag
cleared, and ``KeyboardInterrupt`` raised with a note naming the loops stopped (and
their iteration); the graph launches normally afterwards. A single kernel that is
running cannot be stopped: the launch raises when it ends.

**Compaction and reorder** (``compact``/``reorder`` on CUDA arrays) are
captured kernels; with them, or with ``SIZE_PTR`` kernels, the graph keeps
its logical size in device memory (``size_ptr``), a compaction node sets the
next replay's size there, and ``launch`` reads it back once at its end (one
small D2H copy per launch, not per replay). ``launch_until_done`` runs as one
conditional WHILE node on 12.4+ drivers (an exact replay-by-replay host loop
before, and for a graph holding conditional nodes, which no child graph may hold:
``until_done_path``), never past the end. See eagle/cuda/finished.py.
"""
from __future__ import annotations

import contextlib
import re
import weakref

import numpy as np
import sys
import threading
import time
from dataclasses import dataclass, field

from eagle._errors import CudaError, add_note
from eagle._text import with_article
from eagle.cuda import _nvtx
from eagle.cuda import _shim as _cuda  # ImportError: eagle was built without the cuda backend (Graph.build says so)
from eagle.cuda.capture import Capture, Need, runs_on_cuda
from eagle.record.backend import Backend
from eagle.record.control import ControlNode
from eagle.record.node import RunsAs
from eagle.record.plan import Plan, StagePlan

__all__ = ["CudaBackend", "CudaPlan", "capture_stream", "dlpack_producers", "ensure_driver",
           "producer_streams"]

# graph launches issued per C call; Ctrl-C is seen between chunks
_CHUNK = 4096
#: the device time one window of replays should take (launch keeps at most two in
#: flight, so Ctrl-C drains about this much twice)
_WINDOW_S = 0.01

_tls = threading.local()

#: the backends not yet closed or collected, for ``close_all`` at exit
_live = weakref.WeakSet()


def close_all(which=None) -> list:
    """Close every live cuda backend (``which(backend)`` true, if given): their CUDA
    graphs, executables and streams are destroyed now, whoever still refers to them.
    eagle.mpi calls it at exit for the graphs that captured NCCL collectives, before it
    destroys the communicators (NCCL 2.14+ waits in ``ncclCommDestroy`` until every graph
    that captured the communicator is destroyed: it would wait forever). Returns the
    errors met (each backend is closed as far as it can be)."""
    errors = []
    for b in list(_live):
        if which is not None and not which(b):
            continue
        try:
            b.close()
        except Exception as e:   # a sticky error: the others are still closed
            errors.append(e)
    return errors


def capture_stream():
    """The ``eagle.cuda._shim.Stream`` the current node is being captured on, or None.

    Inside an opaque node during ``build()`` on the cuda backend this is the
    stream its GPU work must go to (CuPy code needs nothing: the stream is
    CuPy's current stream then). Other libraries can wrap its ``.ptr``, e.g.
    ``torch.cuda.ExternalStream(eagle.cuda.backend.capture_stream().ptr)``; torch's
    allocations then come from a pool the graph owns (torch 2.5+,
    ``torch.cuda.use_mem_pool``; with older torch allocate before ``build()``).
    numba cannot allocate while a stream captures: allocate before ``build()``.
    """
    return getattr(_tls, "stream", None)


def _cupy():
    """CuPy if the program imported it (eagle never imports it itself)."""
    return sys.modules.get("cupy")


def _torch():
    """PyTorch if the program imported it and it has set up CUDA (eagle never imports it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return torch if torch.cuda.is_initialized() else None
    except Exception:   # a torch build without CUDA
        return None


def _torch_for_capture():
    """PyTorch if the program imported it and it can use CUDA, initialised or not: a node's
    first use of torch's CUDA may come inside the capture (the documented
    ``ExternalStream(capture_stream().ptr)`` pattern), and its temporaries must come from
    the graph's pool then too (entering the pool initialises torch's CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:   # a torch build without CUDA
        return None


def _torch_current_stream():
    torch = _torch()
    return int(torch.cuda.current_stream().cuda_stream) if torch is not None else None


def _torch_pool_scope(torch, pool):
    """Route torch's caching allocator to ``pool`` while a node is captured (torch 2.5+:
    ``torch.cuda.use_mem_pool``), so its temporaries stay the graph's."""
    return torch.cuda.use_mem_pool(pool)


def cupy_stream(cp, stream):
    """``stream`` (an ``eagle.cuda._shim.Stream``) as a CuPy stream: through the CUDA
    stream protocol (``Stream.from_external``, CuPy 14, where ``ExternalStream`` is
    deprecated and warns) or ``ExternalStream`` before."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(stream)
    return cp.cuda.ExternalStream(stream.ptr)


# ---- the driver ---------------------------------------------------------------------

def ensure_driver() -> str:
    """Bind the CUDA driver and check that a GPU is usable; return the library's path.

    Raises :class:`eagle.CudaError` whose message says which failed: no CUDA
    driver library (``libcuda.so.1``) was found (``status`` -1), the driver is
    older than CUDA 12.0, or a driver was found but no GPU is usable.
    """
    try:
        return _cuda.load()
    except CudaError as error:
        what = ("no CUDA driver" if error.status == _cuda.ERROR_NOT_LOADED
                else "a CUDA driver but no usable GPU" if error.status > 0
                else "a CUDA driver eagle cannot use")
        raise CudaError(error.status, error.name, error.text,
                        f"the cuda backend (this graph holds CUDA arrays) found {what}: "
                        f"{error.detail or error}") from None


# ---- producers on other streams ------------------------------------------------------

def dlpack_producers(arrays):
    """Arrays that order themselves through DLPack: ``__dlpack__(stream=consumer)``
    makes the producer's pending work precede ``consumer`` (the DLPack contract).
    Taken for CUDA arrays whose ``__cuda_array_interface__`` names no stream and that
    are not CuPy arrays (CuPy's current stream is waited for anyway)."""
    cp = sys.modules.get("cupy")
    out = []
    for a in arrays:
        if cp is not None and isinstance(a, cp.ndarray):
            continue
        if not (hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__")):
            continue
        try:
            if a.__cuda_array_interface__.get("stream") is not None:
                continue
            device_type = a.__dlpack_device__()[0]
        except Exception:
            continue
        if int(device_type) in (2, 13) and not any(a is b for b in out):  # kDLCUDA, kDLCUDAManaged
            out.append(a)
    return out


def producer_streams(arrays):
    """The CUDA streams the graph's arrays say their producers used: the ``stream``
    entry of ``__cuda_array_interface__`` (v3: an int handle; 1 = legacy, 2 =
    per-thread default), or for DLPack-only arrays none (DLPack's stream is the
    consumer's to name). Returns the distinct handles other than None/0.

    Read afresh at every ``build()`` and ``launch``: the entry is what the array says
    *now* (a stream named at build may be destroyed since). CuPy arrays are skipped:
    theirs is CuPy's current stream at the moment of reading, which eagle waits for
    anyway (``_order_after_producers``)."""
    out = []
    cp = sys.modules.get("cupy")
    for a in arrays:
        if cp is not None and isinstance(a, cp.ndarray):
            continue
        try:
            cai = a.__cuda_array_interface__
        except Exception:   # AttributeError; torch's RuntimeError for a tensor that requires grad
            continue
        st = cai.get("stream")
        if st is None or isinstance(st, bool) or not isinstance(st, int):
            continue
        if st not in out:
            out.append(st)
    return out


# ---- the plan -------------------------------------------------------------------------

@dataclass
class CudaPlan(Plan):
    """How a graph built for cuda runs: per stage, captured on one stream or as branches."""

    runtime: str = ""
    graph_nodes: int = 0
    sized_kernels: int = 0
    #: {stage: {node name: [kernel names]}} of the stages captured in order because two of
    #: their branches called a library that keeps per-thread state (see ``CudaOptions.library_branches``)
    library_serial_stages: dict = field(default_factory=dict)

    def __str__(self):
        lines = [f"eagle plan · backend: cuda · {self.runtime} · logical size {self.logical_size} of "
                 f"{self.capacity} · {self.graph_nodes} CUDA graph nodes, {self.sized_kernels} "
                 "retuned by set_logical_size · one cudaGraphLaunch per replay"]
        for sp in self.stages:
            streams = "1 stream " if sp.team == 1 else f"{sp.team} streams"
            lines.append(f"stage {sp.stage}  {sp.policy:8} on {streams}   " + " ".join(sp.nodes))
        return "\n".join(lines)


# ---- the backend ----------------------------------------------------------------------

class CudaBackend(Backend):
    """A recorded graph captured into one CUDA graph, instantiated once (see the module doc).

    Attributes for the curious: ``stream`` (eagle's stream, an
    ``eagle.cuda._shim.Stream``), ``exec`` (the ``eagle.cuda._shim.GraphExec``),
    ``graph_nodes`` (nodes in the captured CUDA graph), ``sized_kernels``
    (kernel nodes ``set_logical_size`` patches), ``replays`` (the replays run, as
    ``g.replays``), ``library`` (the path of the CUDA driver library in use).
    """

    name = "cuda"

    def __init__(self, recording, options):   # options: eagle.CudaOptions
        super().__init__(recording)
        self.options = options
        self.library = ensure_driver()
        #: the device whose context eagle's streams, events and graph belong to (the one
        #: current at build()); that context is made current around every later call
        #: (see ``_on_device``)
        self.device = _cuda.current_device()
        self._context = _cuda.current_context()
        self._cp = _cupy()
        nodes = recording.nodes
        stages = recording.rows
        # the lowerings of eagle.record's kinds: opaque (eagle.cuda.capture), control flow
        from eagle.cuda import control as _control

        for i, node in enumerate(nodes):
            if not runs_on_cuda(node):
                raise TypeError(f"node {recording.names[i]!r} is {with_article(node.kind)} node, which the cuda "
                                "backend cannot capture (a CPU kind, or no CUDA lowering is registered "
                                "for it: eagle.cuda.capture.register); "
                                "a graph of CUDA arrays takes opaque(), cuda_kernel(), ufunc(), "
                                "compact(), reorder() and random nodes")
            if node.runs_as is RunsAs.OPAQUE and node.sized:
                raise TypeError(f"node {recording.names[i]!r} is a sized opaque node (opaque(fn, "
                                "sized=True)): on cuda an opaque node runs once, at capture, and the "
                                "kernels it launches keep that call's size, so it could not follow "
                                "set_logical_size(); use cuda_kernel() with SIZE, or a plain opaque node")
        _control.check_bodies(recording, _cuda)
        #: the nodes with every control node's body nodes (for what the graph needs set up)
        flat = _control.flat_nodes(nodes)
        #: whether a compaction node sets the next replay's logical size (on the device)
        self.resizes = recording.index_of_resizer() is not None
        self._until_done_refused = None
        # a stage of several nodes is captured as branches, unless CudaOptions(branches=False)
        self._branches = [len(idx) > 1 and options.branches for idx in stages]
        width = max([len(idx) for s, idx in enumerate(stages) if self._branches[s]] or [1])

        # blocking (not CU_STREAM_NON_BLOCKING): the legacy default stream synchronizes with
        # it, so a node's work on the legacy stream (PyTorch's default stream,
        # cupy.cuda.Stream.null) fails the capture with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
        # instead of running once, eagerly, and missing from every replay
        self.stream = _cuda.Stream(non_blocking=False)
        self._sides = [_cuda.Stream() for _ in range(width - 1)]
        self._cupy_streams = {}
        # temporaries allocated while capturing live in this pool, as long as the graph
        self._pool = self._cp.cuda.MemoryPool() if self._cp is not None else None
        # and torch's (its caching allocator would hand them out again after capture)
        torch = _torch_for_capture()
        self._torch = torch if torch is not None and hasattr(torch.cuda, "use_mem_pool") else None
        self._torch_pool = self._torch.cuda.MemPool() if self._torch is not None else None
        self._in_event = _cuda.Event()
        self._while = None
        #: per branch stage: {eagle node index: library kernel names its capture added}
        self._library_kernels = {}
        #: {stage: {node name: [kernel names]}} captured serially for library calls
        self.library_serial_stages = {}
        self._arrays = []
        for a in (a for n in nodes for _, a, _ in n.arrays()):
            if not any(a is b for b in self._arrays):
                self._arrays.append(a)
        #: arrays that order themselves on eagle's stream through ``__dlpack__(stream=...)``
        self._dlpack = dlpack_producers(self._arrays)
        self.last_failure = None
        self._host_replays = 0
        self._replay_buf = None   # the device replay counter (graphs with random nodes)

        size = recording.logical_size
        self._buffers = []
        self._gblock = None
        self._made_lowerings = []   # this build's lowerings (restart)
        self._host_g = None
        self._kernels = None
        from eagle.cuda import finished as fc

        # what every node's lowering sees of this build (eagle/cuda/capture.py)
        capture = Capture(self.stream, size, on_stream=self._on, register_buffer=self._buffers.append,
                          kernel_provider=fc.kernel_provider)
        # each node once (a body used twice holds the same nodes), in order
        distinct = list({id(node): node for node in flat}.values())
        needs = set()
        for node in distinct:
            needs |= capture.lowering(type(node)).needs(node)
        #: whether a node writes the device block (compaction, reorder): launch reads it back
        self._has_partitions = Need.READ_BACK in needs
        # the device logical size: for compaction / reorder nodes and SIZE_PTR kernels
        self._device_size = bool(needs & {Need.DEVICE_SIZE, Need.READ_BACK})
        if self._device_size:
            _refuse_short_extents(recording, flat)
        #: the control-flow nodes' lowering: their capture and loop states (eagle/cuda/control.py)
        self._control = capture.lowering(ControlNode)
        #: the stop flag the loops' condition kernels read (Ctrl-C sets it), when there are
        #: loops on the device (while_loop nodes, launch_until_done's WHILE node)
        self._stop = None
        self._stop_pending = False
        #: replays per launch window (measured as launches go) and the two window events
        self._window = 1
        self._window_events = None
        try:
            if self._device_size:
                self._setup_device_size(size, needs)
            if Need.REPLAY_COUNTER in needs:
                self._setup_replay_counter()
            capture.size_ptr, capture.kernels = self.size_ptr, self._kernels
            if self._replay_buf is not None:
                capture.replay_ptr = self._replay_buf.ptr
            root = capture.context()
            for node in distinct:   # before the capture: no copy may run while it captures
                capture.lowering(type(node)).allocate(node, root)
            self._made_lowerings = capture.made()
            self._control.prepare(nodes, recording.names, root)
            if self._control.loops or self.resizes:
                self._stop = _cuda.HostFlag()
                self._buffers.append(self._stop)
                capture.stop_ptr = self._stop.device_ptr
            # the capture reads what the producers wrote (CuPy arrays, torch, numba ...)
            self._order_after_producers()
        except BaseException:
            self._free_buffers()
            raise
        owners = _cuda.NodeOwners(self.stream)
        try:
            captured = self._capture(root, stages, owners)
            shared = self._stages_sharing_library_state()
            if shared and self.options.library_branches == "serial":
                # two branches of one stage call a library that keeps per-thread state
                # (CuPy's cuBLAS handle and workspace, cuFFT plans): replays would race
                # on it, so capture those stages in order (opaque nodes run again)
                captured.close()
                for st in shared:
                    self._branches[st] = False
                self.library_serial_stages = shared
                owners = _cuda.NodeOwners(self.stream)
                capture.sized.clear()
                self._control.forget_capture()
                self._library_kernels = {}
                captured = self._capture(root, stages, owners)
        except BaseException:
            self._free_buffers()
            raise
        sized = capture.sized
        #: the communicator launch_until_done agrees over (collectives over several ranks)
        self._ranks = self._ranks_of(capture.communicators)
        try:
            self.exec = captured.instantiate(upload_stream=self.stream, owners=owners,
                                             names=list(recording.names),
                                             inner=self._control.body_owners)
        except CudaError as e:
            if e.node_index is not None:
                add_note(e, f"eagle: the CUDA graph captured from {recording.where(e.node_index)} "
                            "failed to instantiate")
            captured.close()
            self._free_buffers()
            raise
        try:
            for k in sized:
                try:
                    self.exec.add_sized_kernel(k.handle, k.nargs, k.size_index, k.size_type,
                                               per_block=k.per_block, arg_sizes=k.arg_sizes,
                                               in_body=k.in_body,
                                               limit=-1 if k.extent is None else k.extent)
                except (TypeError, CudaError) as e:
                    add_note(e, f"eagle: registering kernel node {k.name!r} as sized")
                    raise
        except BaseException:
            self.exec.close()
            captured.close()
            self._free_buffers()
            raise
        self.graph_nodes = len(captured.nodes())
        self.sized_kernels = len(sized)
        self._logical_size = size
        self.closed = False
        _live.add(self)

    # -- capture ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _on(self, stream):
        """Make ``stream`` the one a node's GPU work goes to (CuPy's current stream)."""
        prev = getattr(_tls, "stream", None)
        _tls.stream = stream
        try:
            if self._cp is None:
                yield
            else:
                ext = self._cupy_streams.get(stream.ptr)
                if ext is None:
                    ext = self._cupy_streams[stream.ptr] = cupy_stream(self._cp, stream)
                with ext:
                    yield
        finally:
            _tls.stream = prev

    def _capture(self, root, stages, owners):
        _nvtx.push("eagle capture")
        try:
            return self._capture_stages(root, stages, owners)
        finally:
            _nvtx.pop()

    def _capture_stages(self, root, stages, owners):
        """Every node captured through its kind's lowering (``root.capture``: eagle's
        stream, or a branch's), stage by stage, into one CUDA graph."""
        rec = self.recording
        s0 = self.stream
        events = []
        where = None
        with contextlib.ExitStack() as scope:
            if self._pool is not None:
                scope.enter_context(self._cp.cuda.using_allocator(self._pool.malloc))
            if self._torch_pool is not None:
                scope.enter_context(_torch_pool_scope(self._torch, self._torch_pool))
            s0.begin_capture(_cuda.CAPTURE_MODE_RELAXED)
            try:
                for s, idx in enumerate(stages):
                    sides = self._sides[:len(idx) - 1] if self._branches[s] else []
                    if sides:
                        ev = _cuda.Event()
                        events.append(ev)
                        _cuda.fork(s0, sides, ev)
                    streams = [s0] + sides if sides else [s0] * len(idx)
                    for i, stream in zip(idx, streams):
                        where = (i, s)
                        node = rec.nodes[i]
                        root.capture(node, i, rec.names[i], stream)
                        if stream.capture_status() != _cuda.CAPTURE_STATUS_ACTIVE:
                            st = 901  # cudaErrorStreamCaptureInvalidated
                            raise CudaError(st, _cuda.status_name(st), _cuda.status_text(st),
                                            f"node {rec.names[i]!r} invalidated the CUDA graph capture "
                                            "(a GPU call inside it failed or is not allowed while "
                                            "capturing)", node_index=i, node_name=rec.names[i])
                        added = owners.mark(i, stream)
                        if sides and node.runs_as is RunsAs.OPAQUE:
                            self._note_library_kernels(s, i, added)
                    where = None
                    if sides:
                        joins = [_cuda.Event() for _ in sides]
                        events += joins
                        _cuda.join(s0, sides, joins)
                if self.resizes:
                    # the compaction's count becomes the next replay's size, after every node
                    i = rec.index_of_resizer()
                    where = (i, rec.stage_of[i])
                    self._kernels.launch("eagle_commit", s0, 1, 1, [("i", self.size_ptr)])
                    owners.mark(i)
                    where = None
                if self._replay_buf is not None:
                    self._capture_replay_step(s0, owners)
            except BaseException as exc:
                self._abandon(events)
                if where is not None:
                    i, s = where
                    if isinstance(exc, CudaError) and exc.node_index is None:
                        exc.node_index, exc.node_name = i, rec.names[i]
                    add_note(exc, f"eagle: raised by node {rec.names[i]!r} (stage {s}) while build() "
                                   "captured the CUDA graph; the capture was ended and the graph "
                                   "is not built")
                raise
            try:
                captured = s0.end_capture()
            except CudaError as exc:
                self._abandon([])  # whatever stream still captures is ended too
                add_note(exc, "eagle: ending the CUDA graph capture failed in build(); the graph "
                               "is not built")
                raise
            finally:
                for ev in events:
                    ev.close()
        return captured

    def _abandon(self, events):
        """End a failed capture, whatever state it is in, so every stream stays usable."""
        s0 = self.stream
        with contextlib.suppress(CudaError):  # join what joined the capture, for a clean end
            sides = [s for s in self._sides if s.capture_status() != _cuda.CAPTURE_STATUS_NONE]
            joins = [_cuda.Event() for _ in sides]
            events += joins
            _cuda.join(s0, sides, joins)
        with contextlib.suppress(CudaError):
            if s0.capture_status() != _cuda.CAPTURE_STATUS_NONE:
                s0.end_capture().close()
        for ev in events:
            with contextlib.suppress(CudaError):
                ev.close()

    def _note_library_kernels(self, stage, index, handles):
        names = []
        for h in handles:
            # a driver without cuFuncGetName (12.0-12.2) cannot say which kernels are a
            # library's: every kernel the branch launched counts as one (stage in order)
            name = _cuda.kernel_node_name(h, unknown=_UNNAMED_KERNEL)
            if name is _UNNAMED_KERNEL or (name is not None and _LIBRARY_KERNEL.search(name)):
                names.append(name)
        if names:
            self._library_kernels.setdefault(stage, {})[index] = names

    def _stages_sharing_library_state(self):
        names_of = self.recording.names
        return {s: {names_of[i]: names for i, names in by_node.items()}
                for s, by_node in self._library_kernels.items() if len(by_node) >= 2}

    # -- the device logical size --------------------------------------------------------

    def _setup_device_size(self, size, needs):
        """The graph's device block (eagle/cuda/finished.py): its logical size, for nodes
        that read it there, or write it (``needs``: the ``Need`` of the graph's nodes)."""
        from eagle.cuda import finished as fc

        if Need.READ_BACK in needs or self.resizes:
            self._kernels = fc.kernel_provider()
        self._gblock = _cuda.DeviceBuffer(fc.G_WORDS * 8)
        self._buffers.append(self._gblock)
        self._host_g = np.zeros(fc.G_WORDS, dtype=np.int64)
        self._host_g[fc.G_SIZE] = self._host_g[fc.G_NEXT] = size
        self._gblock.write(self._host_g, self.stream)

    # -- the replay counter (random nodes) ----------------------------------------------

    def _setup_replay_counter(self):
        """The device uint64 the random kernels read as the replay (``g.replays``)."""
        from eagle.cuda import finished as fc

        if self._kernels is None:
            self._kernels = fc.kernel_provider()
        self._replay_buf = _cuda.DeviceBuffer(8)
        self._buffers.append(self._replay_buf)
        self._replay_buf.write(np.zeros(1, dtype=np.uint64), self.stream)

    def _capture_replay_step(self, s0, owners):
        """The replay's last node: the counter goes to r + 1 (inside the graph, so every
        replay of a launch, and of a WHILE node's body, draws its own numbers)."""
        self._kernels.launch("eagle_replay_step", s0, 1, 1, [("i", self._replay_buf.ptr)])
        owners.mark(len(self.recording.nodes) - 1)

    @property
    def replays(self) -> int:
        """The replays run over all launches (``g.replays``): with random nodes the device
        counter they read (copied back: synchronizes eagle's stream), else the host's count."""
        if self._replay_buf is None:
            return self._host_replays
        host = np.zeros(1, dtype=np.uint64)
        self._replay_buf.read_into(host, self.stream)
        return int(host[0])

    @replays.setter
    def replays(self, r: int) -> None:
        self._host_replays = int(r)
        if self._replay_buf is not None:
            self._replay_buf.write(np.array([r], dtype=np.uint64), self.stream)

    @property
    def size_ptr(self) -> int:
        """Device address of the graph's logical size (int64), 0 if it keeps none."""
        return self._gblock.ptr if self._gblock is not None else 0

    def _free_buffers(self):
        for b in self._buffers:
            with contextlib.suppress(CudaError):
                b.close()
        self._buffers.clear()   # in place: the build's capture context registers into it
        self._gblock = None
        self._replay_buf = None
        self._stop = None

    def _read_back(self):
        """Copy the device block to the host (synchronizes eagle's stream); take the
        device logical size as the host's, patching sized grids down to it."""
        from eagle.cuda import finished as fc

        self.stream.wait()   # interruptible; the copy below then waits for nothing
        g = self._gblock.read_into(self._host_g, self.stream)
        n = int(g[fc.G_SIZE])
        if n != self._logical_size:
            self.exec.set_logical_size(n)
            self._logical_size = n
        if g[fc.G_INVALID]:
            g[fc.G_INVALID] = 0
            self._gblock.write(g[fc.G_INVALID:fc.G_INVALID + 1], self.stream, offset=8 * fc.G_INVALID)
            raise ValueError("reorder: a key outside [0, n_keys) was met in the last launch; the "
                             "samples were left in place on that replay")
        return g

    # -- the backend interface ----------------------------------------------------------

    @property
    def logical_size(self) -> int:
        """The logical size as of the end of the last launch (or the last retune)."""
        return self._logical_size

    def _order_after_producers(self):
        """Make eagle's stream wait for the work queued on the streams the arrays name
        (``__cuda_array_interface__['stream']``) and on CuPy's current stream."""
        streams = producer_streams(self._arrays)
        cp = self._cp
        if cp is not None:
            cur = cp.cuda.get_current_stream().ptr
            if cur not in streams:
                streams.append(cur)
        cur = _torch_current_stream()
        if cur is not None and cur not in streams:
            # torch's array interface (v2) names no stream, and __dlpack__ refuses tensors
            # that require grad before it orders anything: wait for torch's current stream
            streams.append(cur)
        for st in streams:
            if st != self.stream.ptr:
                self._in_event.record(st)
                self.stream.wait_event(self._in_event)
        for a in self._dlpack:
            try:
                a.__dlpack__(stream=self.stream.ptr)
            except (TypeError, BufferError, NotImplementedError):
                pass  # a producer that cannot order on our stream: nothing more to ask

    def launch_observed(self, n, until_done, progress, record):
        """A profile sees whole launches on cuda; a progress bar is updated between chunks."""
        if progress is None:
            return self.launch(n, until_done)
        from eagle.observe.progress import launch_in_chunks
        return launch_in_chunks(self, n, until_done, progress)

    @contextlib.contextmanager
    def _on_device(self):
        """Make the build's device current for eagle's calls, and restore the caller's:
        a stream and its events belong to the context they were made in, and work on
        them while another device is current fails (or records across contexts)."""
        cur = _cuda.current_context()
        if cur == self._context:
            yield
            return
        _cuda.set_current_context(self._context)
        try:
            yield
        finally:
            _cuda.set_current_context(cur)

    def launch(self, n: int, until_done: bool = False) -> int:
        """``n`` graph launches on eagle's stream, then wait for them (synchronize).

        With ``until_done`` (a compaction node needed): stop once the device live
        count is 0, with no overshoot: one conditional WHILE node on 12.4+ drivers
        (one cuGraphLaunch runs all replays), else one replay at a time with the
        count read back after each. Returns the replays that started with live
        samples (until_done) or ``n``. Inside an NVTX range ``eagle launch(n)``."""
        _nvtx.push(f"eagle launch_until_done({n})" if until_done else f"eagle launch({n})")
        try:
            with self._on_device():
                done = self._launch_body(n, until_done)
                if self._control.limits and done:
                    self._control.check_limits(self.stream)
                return done
        finally:
            _nvtx.pop()

    def _launch_body(self, n: int, until_done: bool) -> int:
        self.last_failure = None
        if self._stop_pending:   # a Ctrl-C during the last one's drain cut its clean-up short
            self._clear_stop()
        # with collectives over several ranks a rank with no live sample left still takes
        # part: the ranks decide together (_launch_until_done_ranks)
        if n == 0 or (until_done and self._logical_size == 0 and self._ranks is None):
            return 0
        self._order_after_producers()
        if until_done:
            return self._launch_until_done(n)
        issued = [0]
        try:
            self._replay(n, issued)
            self.stream.wait()
        except KeyboardInterrupt as e:
            # the replay the interrupt landed in: the last one issued (they all ran once
            # drained; its loops may have been cut short), counted from 0 as on the cpu
            self.last_failure = (-1, max(issued[0] - 1, 0))
            self._interrupted(e, f"launch({n})", issued[0])
            raise
        except CudaError as e:
            if issued[0]:
                add_note(e, f"eagle: {issued[0]} replays of launch({n}) had been issued")
            self._settle()
            raise
        finally:
            self._host_replays += issued[0]
        if self._gblock is None or not self._has_partitions:  # the size changes on the host only
            return n
        self._read_back()
        return n

    def _replay(self, n, issued):
        """Issue ``n`` replays on eagle's stream in windows of about ``_WINDOW_S`` of
        device time, at most two in flight: before a third is issued eagle waits
        (interruptibly) for the oldest, so Ctrl-C leaves at most two windows to drain
        and a launch stops between replays. The window starts at one replay (a graph's
        replay time is unknown until measured: the time between two windows' ends),
        grows at most twofold per window and is kept for the next launch. ``issued[0]``
        counts the replays issued; the last window's wait is the caller's."""
        window = self._window
        if n <= window:
            issued[0] += self.exec.launch(self.stream, n)
            return
        if self._window_events is None:
            self._window_events = [_cuda.Event(), _cuda.Event()]
        inflight = []
        k = 0
        t0 = time.perf_counter()
        while issued[0] < n:
            c = min(n - issued[0], window)
            issued[0] += self.exec.launch(self.stream, c, issued[0], n)
            if issued[0] >= n:
                break
            ev = self._window_events[k]
            k ^= 1
            ev.record(self.stream)
            inflight.append((ev, c))
            if len(inflight) == 2:
                ev0, c0 = inflight.pop(0)
                ev0.wait()
                t1 = time.perf_counter()
                per = (t1 - t0) / c0
                t0 = t1
                want = int(_WINDOW_S / per) if per > 0 else 2 * window
                window = max(1, min(want, 2 * window, _CHUNK))
        self._window = window

    def _interrupted(self, exc, what, issued):
        """Ctrl-C while eagle waited for ``what`` (``issued``: the replays issued, or a
        callable that counts them once the device is drained): set the stop flag (each device loop
        ends at its next condition check), drain eagle's stream, clear the flag and the
        loops' state, and say on ``exc`` what was stopped. A kernel that is running
        cannot be stopped: the drain waits for it. A second Ctrl-C during the drain
        stops the waiting: that KeyboardInterrupt is raised, and the flag stays set
        until the next launch (or close) has drained the device."""
        self._stop_pending = True
        if self._stop is not None:
            self._stop.set(1)
        try:
            stopped = self._clear_stop(interruptible=True)
        except KeyboardInterrupt as again:
            add_note(again, f"eagle: a second Ctrl-C while eagle drained the device after "
                            f"interrupting {what} on cuda: it stopped waiting; the work left "
                            "drains (its loops stopped) before the next launch")
            raise
        if callable(issued):   # counted on the device: known once the work is drained
            issued = issued()
        loops = ("; the stop flag ended " + ", ".join(f"while_loop node {w}" for w in stopped)
                 if stopped else "")
        add_note(exc, f"eagle: Ctrl-C interrupted {what} on cuda after {issued} replays were "
                      f"issued{loops}; the work already on the device was drained (a kernel "
                      "that is running cannot be stopped), and the graph can be launched again")

    def _clear_stop(self, interruptible=False):
        """Drain eagle's stream, then clear the stop flag and the loops' state; returns
        the loops the flag stopped (``ControlCapture.stopped``)."""
        if interruptible:
            self.stream.wait()
        self._settle()
        stopped = []
        with contextlib.suppress(CudaError):
            stopped = self._control.stopped(self.stream)
        if self._stop is not None:
            self._stop.set(0)
        self._stop_pending = False
        return stopped

    #: "device" (a conditional WHILE node, 12.4+ drivers) or "host" (one replay per check);
    #: None picks device when the driver has conditional nodes
    until_done_mode = None
    #: why the WHILE node could not be built (then the host loop runs), or None
    until_done_fallback = None
    #: replays one launch of the WHILE node may run at most (Ctrl-C is seen between launches)
    until_done_chunk = 4096

    def until_done_path(self) -> str:
        if self._ranks is not None:
            return "ranks"
        mode = self.until_done_mode
        if mode is None:
            mode = "device" if _cuda.has("conditional") else "host"
        if mode == "device" and self._control.conditional_nodes:
            # the WHILE node's body holds the replay graph as a child graph (_while_exec),
            # and CUDA refuses a child graph holding conditional nodes: decided here, with
            # no driver call made to fail
            self.until_done_fallback = (
                f"the replay graph holds {self._control.conditional_nodes} conditional "
                "node(s) (while_loop / if_else), and CUDA refuses a child graph holding "
                "conditional nodes, which launch_until_done's WHILE node would need around "
                "the replay: it replays one at a time, reading the live count after each")
            mode = "host"
        return mode

    def _ranks_of(self, comms):
        """The MPI communicator of the graph's collectives over several ranks (``comms``:
        what their lowerings added, ``CaptureContext.add_communicator``), or None.
        ``launch_until_done`` then decides on every rank together: a rank whose samples
        finish first must keep replaying (its collectives pair with the others'), or
        the others' next collective would wait forever."""
        if len(comms) > 1:
            self._until_done_refused = ("launch_until_done: this graph's collectives use "
                                        f"{len(comms)} communicators; eagle agrees on the stop "
                                        "over one only (use launch(n))")
        return comms[0] if comms else None

    def _launch_until_done_ranks(self, n, done):
        """Replay by replay; after each, the ranks agree (MPI allreduce, max of the live
        counts) on whether any sample is live anywhere. A rank with none left replays on
        at logical size 0 (its kernels do nothing, its collectives pair with the others').
        ``done[0]`` counts the replays issued (every rank's count, as on the CPU)."""
        from eagle.cuda import finished as fc

        mpi = sys.modules["mpi4py.MPI"]
        live_anywhere = self._ranks.allreduce(int(self._logical_size), op=mpi.MAX)
        while done[0] < n and live_anywhere > 0:
            self.exec.launch(self.stream, 1)
            done[0] += 1
            local = int(self._read_back()[fc.G_SIZE])
            live_anywhere = self._ranks.allreduce(local, op=mpi.MAX)

    def _launch_until_done(self, n):
        from eagle.cuda import finished as fc

        if self._until_done_refused:
            raise ValueError(self._until_done_refused)
        live_before = int(self._host_g[fc.G_LIVE_REPLAYS])
        done = 0
        if self._ranks is not None:
            # a rank whose samples finished replays on at size 0: its replays count (the
            # CPU's count, and the device replay counter of random nodes advances on each)
            ran = [0]
            try:
                self._launch_until_done_ranks(n, ran)
            except KeyboardInterrupt as e:
                self.last_failure = (-1, 0)
                self._interrupted(e, f"launch_until_done({n})", ran[0])
                raise
            except CudaError:
                self._settle()
                raise
            finally:
                self._host_replays += ran[0]
            return ran[0]
        try:
            exec_ = None
            if self.until_done_path() == "device":
                try:
                    exec_ = self._while_exec()
                except Exception as e:  # e.g. the condition kernel does not load: use the host loop
                    self.until_done_fallback = f"{type(e).__name__}: {e}"
                    self.until_done_mode = "host"
            if exec_ is not None:
                # chunks of replays per WHILE launch, so Ctrl-C is seen between them
                while done < n:
                    step = min(n - done, self.until_done_chunk)
                    before = int(self._host_g[fc.G_LIVE_REPLAYS])
                    stop = np.array([before + step], dtype=np.int64)
                    self._gblock.write(stop, self.stream, offset=8 * fc.G_STOP)
                    exec_.launch(self.stream, 1)
                    g = self._read_back()
                    ran = int(g[fc.G_LIVE_REPLAYS]) - before
                    done += ran
                    if g[fc.G_SIZE] == 0 or ran < step:
                        break
            else:
                while done < n:
                    self.exec.launch(self.stream, 1)
                    done += 1
                    if self._read_back()[fc.G_SIZE] == 0:
                        break
        except KeyboardInterrupt as e:
            # the device path counts its replays on the device: `done` lags by the chunk
            # under way, the counter read back after the drain does not
            self._interrupted(e, f"launch_until_done({n})",
                              lambda: int(self._host_g[fc.G_LIVE_REPLAYS]) - live_before)
            self.last_failure = (-1, max(int(self._host_g[fc.G_LIVE_REPLAYS]) - live_before - 1, 0))
            raise
        except CudaError as e:
            self._settle()
            raise
        finally:
            self._host_replays += int(self._host_g[fc.G_LIVE_REPLAYS]) - live_before
        return int(self._host_g[fc.G_LIVE_REPLAYS]) - live_before

    def _while_exec(self):
        """One WHILE node whose body is the captured replay then the condition
        kernel (``eagle_until_done_condition``: continue while the live count is
        above 0 and fewer than the allowed replays ran). Built for the logical
        size the host knows (sized grids are an upper bound within the call),
        rebuilt when that changed."""
        import ctypes

        key = self._logical_size
        if self._while is not None and self._while[0] == key:
            return self._while[1]
        self._close_while()
        self.exec.write_back_to_graph()
        top = _cuda.Graph()
        try:
            _node, handle, body = top.add_while(initial=1)
            child = body.add_child(self.exec.graph)
            func = self._kernels.function("eagle_until_done_condition")
            stop = self._stop.device_ptr if self._stop is not None else 0
            body.add_kernel(func, 1, 1, [ctypes.c_uint64(handle), ctypes.c_uint64(self.size_ptr),
                                         ctypes.c_uint64(stop)],
                            deps=[child])
            exec_ = top.instantiate(upload_stream=self.stream)
        except BaseException:
            top.close()
            raise
        self._while = (key, exec_, top)
        return exec_

    def _close_while(self):
        if self._while is not None:
            _, exec_, top = self._while
            self._while = None
            first = None
            for obj in (exec_, top):
                try:
                    obj.close()
                except CudaError as e:
                    first = first or e
            if first is not None:
                raise first

    def _settle(self):
        """Drain eagle's stream (after a failure, and at close), then take the device size
        back. Interruptible: a device loop may still be running with no stop flag set, so
        Ctrl-C sets the flag (the loops end at their next condition check), the drain goes
        on, and the KeyboardInterrupt is raised once drained; a second one raises at once
        (the flag stays set until the next launch or close has drained the device)."""
        interrupted = None
        while True:
            try:
                self.stream.wait()
                break
            except KeyboardInterrupt as e:
                self._stop_pending = True
                if interrupted is not None:
                    raise
                interrupted = e
                if self._stop is not None:
                    self._stop.set(1)
            except CudaError:
                break
        if self._gblock is not None and self._has_partitions:  # keep host and device in step
            with contextlib.suppress(Exception):
                self._read_back()
        if interrupted is not None:
            stopped = []
            with contextlib.suppress(CudaError):
                stopped = self._control.stopped(self.stream)
            if self._stop is not None:
                self._stop.set(0)
            self._stop_pending = False
            loops = "".join(f"; the stop flag ended while_loop node {w}" for w in stopped)
            add_note(interrupted, f"eagle: Ctrl-C while eagle drained the device after a failure{loops}; "
                                  "the graph can be launched again")
            raise interrupted

    def restart(self, n: int) -> None:
        """``Graph.restart``: the lowerings' device state as built (a compaction's run
        counter, its id map), then logical size ``n``."""
        with self._on_device():
            for lowering in self._made_lowerings:
                lowering.restart(self.stream)
            self._set_logical_size(n)

    def set_logical_size(self, n: int) -> None:
        """Patch grid and size argument of every ``cuda_kernel`` node in the instantiated graph."""
        with self._on_device():
            self._set_logical_size(n)

    def _set_logical_size(self, n: int) -> None:
        self.exec.set_logical_size(n)
        old = self._logical_size
        if n > old:
            # a replay's device time grows with the size at most in proportion (fixed costs
            # aside): the window learned at `old` shrinks so it stays about _WINDOW_S
            self._window = max(1, self._window * old // n)
        if self._gblock is not None:
            import numpy as np

            self._gblock.write(np.array([n, n], dtype=np.int64), self.stream)
            self._host_g[0] = self._host_g[1] = n
        self._logical_size = n

    def stage_notes(self):
        """Per stage: ``branches`` (its nodes captured side by side on their own streams)
        or ``stream`` (captured in order on eagle's stream; also a stage whose branches
        called library kernels, see ``library_serial_stages``)."""
        return ["branches" if b else "stream" for b in self._branches]

    def body_stage_notes(self, body):
        """A body's nodes are captured in recording order on one stream (eagle/cuda/control.py)."""
        return ["stream"] * len(body.rows)

    def control_iterations(self, steps, node):
        return self._control.iterations(node, self.stream)

    def plan(self) -> CudaPlan:
        rec = self.recording
        stages = [StagePlan(s, [rec.box(i) for i in idx], "branches" if b else "stream",
                            len(idx) if b else 1, None)
                  for s, (idx, b) in enumerate(zip(rec.rows, self._branches))]
        return CudaPlan("cuda", 1, self.logical_size, rec.capacity, 0.0, stages,
                        runtime=f"driver {_cuda.version_text(_cuda.driver_version())}",
                        graph_nodes=self.graph_nodes,
                        sized_kernels=self.sized_kernels,
                        library_serial_stages=dict(self.library_serial_stages))

    def close(self) -> None:
        """Release the CUDA objects now (collection does it too). Destroys every
        object it can, also after a failure (e.g. a sticky error), then raises
        the first error met."""
        _live.discard(self)
        self.closed = True
        with self._on_device():
            self._close()

    def _close(self) -> None:
        first = None

        def attempt(fn):
            nonlocal first
            try:
                fn()
            except CudaError as e:
                if first is None:
                    first = e

        interrupted = None
        try:
            self._settle()
        except CudaError as e:
            first = e
        except KeyboardInterrupt as e:
            if self._stop_pending:   # a second Ctrl-C: the device still runs, its objects stay
                raise
            interrupted = e          # drained: close the rest, then raise it
        attempt(self._control.close_streams)
        attempt(self._close_while)
        attempt(self.exec.close)
        attempt(lambda: self.exec.graph.close() if self.exec.graph is not None else None)
        for s in [self.stream] + self._sides:
            attempt(s.close)
        attempt(self._in_event.close)
        for ev in self._window_events or ():
            attempt(ev.close)
        self._window_events = None
        attempt(self._free_buffers)
        if self._pool is not None:
            attempt(self._pool.free_all_blocks)
        self._torch_pool = None
        if interrupted is not None:
            raise interrupted
        if first is not None:
            raise first


#: kernel names of libraries that keep per-thread handles, workspaces or plan caches
#: what library_serial_stages lists for a kernel the driver cannot name (before 12.3)
_UNNAMED_KERNEL = "<a kernel: this driver (CUDA < 12.3) has no cuFuncGetName to name it>"
#: (nvjet: cuBLAS 12.8+'s GEMMs on Hopper and Blackwell, named nvjet_* with no "gemm")
_LIBRARY_KERNEL = re.compile(r"gemm|gemv|cublas|cutlass|xmma|nvjet|fft|cusolver|cusparse|cudnn|trsm|syrk",
                             re.IGNORECASE)


def _refuse_short_extents(recording, nodes):
    """A graph that keeps its logical size on the device (a compaction, a reorder, a
    ``SIZE_PTR`` kernel) hands every kernel that size: a sized node whose extent is
    shorter than the capacity would run past its arrays there, so it is refused."""
    cap = recording.capacity
    names = {id(n): name for n, name in zip(recording.nodes, recording.names)}
    for node in nodes:
        extent = node.extent() if node.sized and not node.bodies else None
        if extent is not None and extent < cap:
            array, _ = node.extent_by()
            who = f"node {names[id(node)]!r}" if id(node) in names else f"{node!r} (in a body)"
            raise ValueError(
                f"{who}: its array {array!r} holds {extent} samples, fewer than the graph's "
                f"capacity {cap}; on CUDA a graph that keeps its logical size on the device "
                "(compaction, reorder, SIZE_PTR kernels) runs every sized node over that size: "
                "give every per-sample array the capacity's length, or mark the short one "
                "not per-sample (per_sample=)")

