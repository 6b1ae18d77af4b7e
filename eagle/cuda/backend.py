"""The cuda backend: a graph captured once into a CUDA graph, replayed with ``cuGraphLaunch``.

``g.build()`` picks this backend when the graph's arrays are CUDA arrays (CuPy
arrays or any object with ``__cuda_array_interface__``). It

1. binds the CUDA driver (``eagle.cuda._driver``: libcuda.so.1, or ``EAGLE_LIBCUDA``)
   and raises :class:`eagle.CudaError` saying whether no driver was found, it
   is too old (before CUDA 12.0), or no GPU is usable; orders itself after the
   streams the arrays name (``__cuda_array_interface__['stream']``) and CuPy's
   current stream;
2. captures the whole graph in **one** stream capture on eagle's own stream
   (a blocking stream: legacy-default-stream work inside a node then fails the
   capture, ``CUDA_ERROR_STREAM_CAPTURE_IMPLICIT``, naming the node), in relaxed
   capture mode, stage by stage in recording order, each node through its kind's
   lowering (eagle/cuda/capture.py; the whole capture: eagle/cuda/graph_capture.py). A stage with
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
   corrupt them; eagle/cuda/interop.py);
3. instantiates the captured graph once (a failure names the eagle node);
4. registers the kernel nodes the lowerings added as sized (``SizedKernel``: every
   ``cuda_kernel``, random and partition kernel, in bodies too) with the
   instantiated graph's retune (``eagle.cuda._retune.Retune``).

The device memory a build owns (size block, replay counter, stop flag, the lowerings'
buffers) is one ``DeviceState`` (eagle/cuda/device_state.py), released in one place
when the build fails or the graph is closed.

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
``until_done_path``), never past the end. See eagle/cuda/until_done.py and
eagle/cuda/finished.py; the plan report is eagle/cuda/plan.py.
"""
from __future__ import annotations

import contextlib
import time
import weakref

from eagle._errors import CudaError, add_note
from eagle._text import with_article
from eagle.cuda import _driver  # ImportError: eagle was built without the cuda backend (Graph.build says so)
from eagle.cuda import _nvtx
from eagle.cuda._retune import Retune
from eagle.cuda._stream import Event, NodeOwners, Stream
from eagle.cuda.capture import Capture, Lowering, Need, runs_on_cuda
from eagle.cuda.device_state import DeviceState
from eagle.cuda.graph_capture import GraphCapture, capture_stream
from eagle.cuda.interop import CapturePools, Producers, cupy
from eagle.cuda.plan import CudaPlan, cuda_plan
from eagle.cuda.until_done import UntilDone
from eagle.record.backend import Backend
from eagle.record.control import ControlNode
from eagle.record.node import RunsAs

__all__ = ["CudaBackend", "CudaPlan", "capture_stream", "close_all", "ensure_driver"]

# graph launches issued per C call; Ctrl-C is seen between chunks
_CHUNK = 4096
#: the device time one window of replays should take (launch keeps at most two in
#: flight, so Ctrl-C drains about this much twice)
_WINDOW_S = 0.01

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


def ensure_driver() -> str:
    """Bind the CUDA driver and check that a GPU is usable; return the library's path.

    Raises :class:`eagle.CudaError` whose message says which failed: no CUDA
    driver library (``libcuda.so.1``) was found (``status`` -1), the driver is
    older than CUDA 12.0, or a driver was found but no GPU is usable.
    """
    try:
        return _driver.load()
    except CudaError as error:
        what = ("no CUDA driver" if error.status == _driver.ERROR_NOT_LOADED
                else "a CUDA driver but no usable GPU" if error.status > 0
                else "a CUDA driver eagle cannot use")
        raise _driver.DriverError(error.status,
                                  f"the cuda backend (this graph holds CUDA arrays) found {what}: "
                                  f"{error.detail or error}") from None


class CudaBackend(Backend):
    """A recorded graph captured into one CUDA graph, instantiated once (see the module doc).

    Attributes for the curious: ``stream`` (eagle's stream, an
    ``eagle.cuda._stream.Stream``), ``exec`` (the ``eagle.cuda._graph.GraphExec``),
    ``retune`` (its ``eagle.cuda._retune.Retune``), ``state`` (the ``DeviceState``),
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
        self.device = _driver.current_device()
        self._context = _driver.current_context()
        nodes = recording.nodes
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
        _control.check_bodies(recording, _driver)
        #: the nodes with every control node's body nodes (for what the graph needs set up)
        flat = _control.flat_nodes(nodes)
        #: whether a compaction node sets the next replay's logical size (on the device)
        self.resizes = recording.index_of_resizer() is not None
        # a stage of several nodes is captured as branches, unless CudaOptions(branches=False)
        self._branches = [len(idx) > 1 and options.branches for idx in recording.rows]
        width = max([len(idx) for s, idx in enumerate(recording.rows) if self._branches[s]] or [1])

        # blocking (not CU_STREAM_NON_BLOCKING): the legacy default stream synchronizes with
        # it, so a node's work on the legacy stream (PyTorch's default stream,
        # cupy.cuda.Stream.null) fails the capture with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
        # instead of running once, eagerly, and missing from every replay
        self.stream = Stream(non_blocking=False)
        self._sides = [Stream() for _ in range(width - 1)]
        #: the pools the capture's temporaries come from (they live as long as the graph)
        self.pools = CapturePools()
        #: the producers of the graph's arrays, waited for before the capture and every launch
        self.producers = Producers(a for n in nodes for _, a, _ in n.arrays())
        #: every device buffer of this build, released in one place (``state.close()``)
        self.state = DeviceState(self.stream)
        #: {stage: {node name: [kernel names]}} captured serially for library calls
        self.library_serial_stages = {}
        self.last_failure = None
        #: eagle's kernels (eagle.cuda.finished.kernel_provider), when the graph needs them
        self.kernels = None
        self._made_lowerings = []   # this build's lowerings (restart)
        self._after_launch = []     # those that check their nodes' errors after a launch
        self.exec = self.retune = self.until_done = None
        self._captured = None
        self._stop_pending = False
        #: replays per launch window (measured as launches go) and the two window events
        self._window = 1
        self._window_events = None
        self._logical_size = recording.logical_size
        try:
            self._build(recording, flat)
        except BaseException:
            self._release_build()
            raise
        self.closed = False
        _live.add(self)

    # -- build ----------------------------------------------------------------------------

    def _build(self, recording, flat):
        """Allocate, capture, instantiate and register the sized kernels (module doc)."""
        from eagle.cuda import finished as fc

        nodes, size = recording.nodes, recording.logical_size
        self._capturer = GraphCapture(recording, self.stream, self._sides, self._branches, self.pools,
                                      cupy())
        # what every node's lowering sees of this build (eagle/cuda/capture.py)
        capture = Capture(self.stream, size, on_stream=self._capturer.on, register_buffer=self.state.own,
                          kernel_provider=fc.kernel_provider)
        # each node once (a body used twice holds the same nodes), in order
        distinct = list({id(node): node for node in flat}.values())
        needs = set()
        for node in distinct:
            needs |= capture.lowering(type(node)).needs(node)
        #: whether a node writes the device block (compaction, reorder): launch reads it back
        self._has_partitions = Need.READ_BACK in needs
        # the device logical size: for compaction / reorder nodes and SIZE_PTR kernels
        if needs & {Need.DEVICE_SIZE, Need.READ_BACK}:
            _refuse_short_extents(recording, flat)
        #: the control-flow nodes' lowering: their capture and loop states (eagle/cuda/control.py)
        self.control = capture.lowering(ControlNode)
        if needs & {Need.DEVICE_SIZE, Need.READ_BACK}:
            if Need.READ_BACK in needs or self.resizes:
                self.kernels = fc.kernel_provider()
            self.state.make_size_block(size)
        if Need.REPLAY_COUNTER in needs:
            if self.kernels is None:
                self.kernels = fc.kernel_provider()
            self.state.make_replay_counter()
        capture.size_ptr, capture.replay_ptr, capture.kernels = (self.state.size_ptr, self.state.replay_ptr,
                                                                 self.kernels)
        root = capture.context()
        for node in distinct:   # before the capture: no copy may run while it captures
            capture.lowering(type(node)).allocate(node, root)
        self._made_lowerings = capture.made()
        self._after_launch = [lw for lw in self._made_lowerings
                              if type(lw).after_launch is not Lowering.after_launch]
        self.control.prepare(nodes, recording.names, root)
        if self.control.loops or self.resizes:
            #: the stop flag the loops' condition kernels read (Ctrl-C sets it)
            self.state.make_stop_flag()
            capture.stop_ptr = self.state.stop_ptr
        # the capture reads what the producers wrote (CuPy arrays, torch, numba ...)
        self.producers.order(self.stream)
        tail = self._replay_tail(recording)
        owners = NodeOwners(self.stream)
        self._captured = self._capturer.capture(root, owners, tail)
        shared = self._capturer.stages_sharing_library_state()
        if shared and self.options.library_branches == "serial":
            # two branches of one stage call a library that keeps per-thread state
            # (CuPy's cuBLAS handle and workspace, cuFFT plans): replays would race
            # on it, so capture those stages in order (opaque nodes run again)
            self._captured.close()
            self._captured = None
            for st in shared:
                self._branches[st] = False
            self.library_serial_stages = shared
            owners = NodeOwners(self.stream)
            capture.sized.clear()
            self.control.forget_capture()
            self._captured = self._capturer.capture(root, owners, tail)
        self.until_done = UntilDone(self.control, capture.communicators)
        try:
            self.exec = self._captured.instantiate(upload_stream=self.stream, owners=owners,
                                                   names=list(recording.names),
                                                   inner=self.control.body_owners)
        except CudaError as e:
            if e.node_index is not None:
                add_note(e, f"eagle: the CUDA graph captured from {recording.where(e.node_index)} "
                            "failed to instantiate")
            raise
        self.retune = Retune(self.exec)
        for k in capture.sized:
            try:
                self.retune.add(k.handle, k.nargs, k.size_index, k.size_type, per_block=k.per_block,
                                arg_sizes=k.arg_sizes, in_body=k.in_body,
                                limit=-1 if k.extent is None else k.extent)
            except (TypeError, CudaError) as e:
                add_note(e, f"eagle: registering kernel node {k.name!r} as sized")
                raise
        self.graph_nodes = len(self._captured.nodes())
        self.sized_kernels = len(capture.sized)

    def _replay_tail(self, recording):
        """What ends each replay, after every node (``GraphCapture.capture``'s ``tail``): the
        compaction's count becomes the next replay's size; the replay counter (random
        nodes) goes to r + 1, inside the graph, so every replay of a launch, and of a WHILE
        node's body, draws its own numbers."""
        steps = []
        if self.resizes:
            i = recording.index_of_resizer()

            def commit(stream, owners):
                self.kernels.launch("eagle_commit", stream, 1, 1, [("i", self.state.size_ptr)])
                owners.mark(i)
            steps.append((i, commit))
        if self.state.counter is not None:
            last = len(recording.nodes) - 1

            def replay_step(stream, owners):
                self.kernels.launch("eagle_replay_step", stream, 1, 1, [("i", self.state.replay_ptr)])
                owners.mark(last)
            steps.append((None, replay_step))
        return steps

    def _release_build(self):
        """A build that failed: release what it made (the one place; streams go with the
        backend object)."""
        for obj in (self.retune, self.exec, self._captured):
            if obj is not None:
                with contextlib.suppress(CudaError):
                    obj.close()
        self.state.close()

    # -- the device state ---------------------------------------------------------------

    @property
    def replays(self) -> int:
        """The replays run over all launches (``g.replays``): with random nodes the device
        counter they read (copied back: synchronizes eagle's stream), else the host's count."""
        return self.state.replays

    @replays.setter
    def replays(self, r: int) -> None:
        self.state.replays = r

    @property
    def size_ptr(self) -> int:
        """Device address of the graph's logical size (int64), 0 if it keeps none."""
        return self.state.size_ptr

    def read_back(self):
        """Copy the device block to the host (synchronizes eagle's stream); take the
        device logical size as the host's, patching sized grids down to it."""
        from eagle.cuda.finished import G_SIZE

        self.stream.wait()   # interruptible; the copy below then waits for nothing
        g = self.state.read_block()
        n = int(g[G_SIZE])
        if n != self._logical_size:
            self.retune.set_logical_size(n)
            self._logical_size = n
        if self.state.take_invalid():
            raise ValueError("reorder: a key outside [0, n_keys) was met in the last launch; the "
                             "samples were left in place on that replay")
        return g

    # -- the backend interface ----------------------------------------------------------

    @property
    def logical_size(self) -> int:
        """The logical size as of the end of the last launch (or the last retune)."""
        return self._logical_size

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
        cur = _driver.current_context()
        if cur == self._context:
            yield
            return
        _driver.set_current_context(self._context)
        try:
            yield
        finally:
            _driver.set_current_context(cur)

    def launch(self, n: int, until_done: bool = False) -> int:
        """``n`` graph launches on eagle's stream, then wait for them (synchronize).

        With ``until_done`` (a compaction node needed): stop once the device live
        count is 0, with no overshoot (eagle/cuda/until_done.py). Returns the replays
        that started with live samples (until_done) or ``n``. Inside an NVTX range
        ``eagle launch(n)``. A node's error its kernels reported on the device (a
        reduction without identity over no sample) is raised once the launch is done."""
        _nvtx.push(f"eagle launch_until_done({n})" if until_done else f"eagle launch({n})")
        try:
            with self._on_device():
                done = self._launch_body(n, until_done)
                if self.control.limits and done:
                    self.control.check_limits(self.stream)
                if done:
                    for lowering in self._after_launch:
                        lowering.after_launch(self.stream)
                return done
        finally:
            _nvtx.pop()

    def _launch_body(self, n: int, until_done: bool) -> int:
        self.last_failure = None
        if self._stop_pending:   # a Ctrl-C during the last one's drain cut its clean-up short
            self._clear_stop()
        # with collectives over several ranks a rank with no live sample left still takes
        # part: the ranks decide together (eagle/cuda/until_done.py)
        if n == 0 or (until_done and self._logical_size == 0 and self.until_done.ranks is None):
            return 0
        self.producers.order(self.stream)
        if until_done:
            return self.until_done.run(self, n)
        issued = [0]
        try:
            self._replay(n, issued)
            self.stream.wait()
        except KeyboardInterrupt as e:
            # the replay the interrupt landed in: the last one issued (they all ran once
            # drained; its loops may have been cut short), counted from 0 as on the cpu
            self.last_failure = (-1, max(issued[0] - 1, 0))
            self.interrupted(e, f"launch({n})", issued[0])
            raise
        except CudaError as e:
            if issued[0]:
                add_note(e, f"eagle: {issued[0]} replays of launch({n}) had been issued")
            self.settle()
            raise
        finally:
            self.state.host_replays += issued[0]
        if self.state.block is None or not self._has_partitions:  # the size changes on the host only
            return n
        self.read_back()
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
            self._window_events = [Event(), Event()]
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

    def interrupted(self, exc, what, issued):
        """Ctrl-C while eagle waited for ``what`` (``issued``: the replays issued, or a
        callable that counts them once the device is drained): set the stop flag (each device loop
        ends at its next condition check), drain eagle's stream, clear the flag and the
        loops' state, and say on ``exc`` what was stopped. A kernel that is running
        cannot be stopped: the drain waits for it. A second Ctrl-C during the drain
        stops the waiting: that KeyboardInterrupt is raised, and the flag stays set
        until the next launch (or close) has drained the device."""
        self._stop_pending = True
        if self.state.stop is not None:
            self.state.stop.set(1)
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
        self.settle()
        stopped = []
        with contextlib.suppress(CudaError):
            stopped = self.control.stopped(self.stream)
        if self.state.stop is not None:
            self.state.stop.set(0)
        self._stop_pending = False
        return stopped

    # -- launch_until_done (eagle/cuda/until_done.py) -------------------------------------

    @property
    def until_done_mode(self):
        """"device" (a conditional WHILE node, 12.4+ drivers) or "host" (one replay per
        check); None picks device when the driver has conditional nodes."""
        return self.until_done.mode

    @until_done_mode.setter
    def until_done_mode(self, mode):
        self.until_done.mode = mode

    @property
    def until_done_fallback(self):
        """Why the WHILE node could not be built (then the host loop runs), or None."""
        return self.until_done.fallback

    @property
    def until_done_chunk(self):
        """Replays one launch of the WHILE node may run at most (Ctrl-C is seen between launches)."""
        return self.until_done.chunk

    @until_done_chunk.setter
    def until_done_chunk(self, chunk):
        self.until_done.chunk = chunk

    def until_done_path(self) -> str:
        return self.until_done.path()

    def settle(self):
        """Drain eagle's stream (after a failure, and at close), then take the device size
        back. Interruptible: a device loop may still be running with no stop flag set, so
        Ctrl-C sets the flag (the loops end at their next condition check), the drain goes
        on, and the KeyboardInterrupt is raised once drained; a second one raises at once
        (the flag stays set until the next launch or close has drained the device)."""
        interrupted = None
        stop = self.state.stop
        while True:
            try:
                self.stream.wait()
                break
            except KeyboardInterrupt as e:
                self._stop_pending = True
                if interrupted is not None:
                    raise
                interrupted = e
                if stop is not None:
                    stop.set(1)
            except CudaError:
                break
        if self.state.block is not None and self._has_partitions:  # keep host and device in step
            with contextlib.suppress(Exception):
                self.read_back()
        if interrupted is not None:
            stopped = []
            with contextlib.suppress(CudaError):
                stopped = self.control.stopped(self.stream)
            if stop is not None:
                stop.set(0)
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
        self.retune.set_logical_size(n)
        old = self._logical_size
        if n > old:
            # a replay's device time grows with the size at most in proportion (fixed costs
            # aside): the window learned at `old` shrinks so it stays about _WINDOW_S
            self._window = max(1, self._window * old // n)
        if self.state.block is not None:
            self.state.write_sizes(n)
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
        return self.control.iterations(node, self.stream)

    def plan(self) -> CudaPlan:
        return cuda_plan(self.recording, self._branches, self.logical_size, self.graph_nodes,
                         self.sized_kernels, self.library_serial_stages)

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
            self.settle()
        except CudaError as e:
            first = e
        except KeyboardInterrupt as e:
            if self._stop_pending:   # a second Ctrl-C: the device still runs, its objects stay
                raise
            interrupted = e          # drained: close the rest, then raise it
        attempt(self.control.close_streams)
        attempt(self.until_done.close)
        attempt(self.retune.close)
        attempt(self.exec.close)
        attempt(lambda: self.exec.graph.close() if self.exec.graph is not None else None)
        for s in [self.stream] + self._sides:
            attempt(s.close)
        attempt(self.producers.close)
        for ev in self._window_events or ():
            attempt(ev.close)
        self._window_events = None
        attempt(self.state.close)
        attempt(self.pools.close)
        if interrupted is not None:
            raise interrupted
        if first is not None:
            raise first


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

