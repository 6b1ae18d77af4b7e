"""A recording captured into one CUDA graph: stages, branches, and the stream a node's work
goes to.

The whole graph is captured in **one** stream capture on eagle's stream, in relaxed capture
mode, stage by stage in recording order, each node through its kind's lowering
(eagle/cuda/capture.py). A stage with several nodes is captured as side-by-side branches:
an event recorded on eagle's stream forks the side streams, each node is captured on its own
stream, and events join them back before the next stage. One capture with fork/join keeps
every kernel node at the top level of the CUDA graph, where a retune can patch it. While a
node is captured, its stream is ``capture_stream()`` and, with CuPy imported, CuPy's current
stream, and CuPy and torch allocate from pools the graph owns (eagle/cuda/interop.py).

Two branches of one stage that call a library keeping per-thread state (cuBLAS's handle and
workspace, cuFFT's plans: recognised by their kernels' names) would race on it at every
replay: ``stages_sharing_library_state`` names those stages, and the backend captures them
again in order (``CudaOptions.library_branches``).
"""
from __future__ import annotations

import contextlib
import re
import threading

from eagle._errors import CudaError, add_note
from eagle.cuda import _nvtx
from eagle.cuda._driver import (CAPTURE_MODE_RELAXED, CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_NONE,
                                CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, DriverError)
from eagle.cuda._graph import kernel_node_name
from eagle.cuda._stream import Event, collection_paused, fork, join
from eagle.cuda.interop import cupy_stream
from eagle.record.node import RunsAs

__all__ = ["GraphCapture", "capture_stream"]

_tls = threading.local()

#: what library_serial_stages lists for a kernel the driver cannot name (before 12.3)
_UNNAMED_KERNEL = "<a kernel: this driver (CUDA < 12.3) has no cuFuncGetName to name it>"
#: kernel names of libraries that keep per-thread handles, workspaces or plan caches
#: (nvjet: cuBLAS 12.8+'s GEMMs on Hopper and Blackwell, named nvjet_* with no "gemm")
_LIBRARY_KERNEL = re.compile(r"gemm|gemv|cublas|cutlass|xmma|nvjet|fft|cusolver|cusparse|cudnn|trsm|syrk",
                             re.IGNORECASE)


def capture_stream():
    """The ``eagle.cuda._stream`` stream the current node is being captured on, or None.

    Inside an opaque node during ``build()`` on the cuda backend this is the
    stream its GPU work must go to (CuPy code needs nothing: the stream is
    CuPy's current stream then). Other libraries can wrap its ``.ptr``, e.g.
    ``torch.cuda.ExternalStream(eagle.cuda.backend.capture_stream().ptr)``; torch's
    allocations then come from a pool the graph owns (torch 2.5+,
    ``torch.cuda.use_mem_pool``; with older torch allocate before ``build()``).
    numba cannot allocate while a stream captures: allocate before ``build()``.
    """
    return getattr(_tls, "stream", None)


class GraphCapture:
    """The capture of one build's ``recording`` on eagle's ``stream`` with the ``sides``
    streams for branches; ``branches[s]``: whether stage s is captured as branches (the
    backend's list, which it changes for a capture in order); ``pools``: the graph's
    ``CapturePools``; ``cp``: CuPy or None."""

    def __init__(self, recording, stream, sides, branches, pools, cp):
        self.recording = recording
        self.stream = stream
        self.sides = sides
        self.branches = branches
        self.pools = pools
        self._cp = cp
        self._cupy_streams = {}
        #: per branch stage: {eagle node index: library kernel names its capture added}
        self.library_kernels = {}

    @contextlib.contextmanager
    def on(self, stream):
        """Make ``stream`` the one a node's GPU work goes to (``capture_stream()``, CuPy's
        current stream)."""
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

    def capture(self, root, owners, tail):
        """Every node captured through its kind's lowering (``root.capture``: eagle's
        stream, or a branch's), stage by stage, into one CUDA graph, which is returned
        (owned); ``owners`` (a ``NodeOwners``) learns which eagle node added which graph
        node; ``tail``: what ends each replay, after every node: (index of the eagle node it
        belongs to or None, ``step(stream, owners)``) pairs."""
        self.library_kernels = {}
        _nvtx.push("eagle capture")
        try:
            return self._capture_stages(root, owners, tail)
        finally:
            _nvtx.pop()

    def _capture_stages(self, root, owners, tail):
        rec = self.recording
        s0 = self.stream
        events = []
        where = None
        # the collector stays off past end_capture until the pools' scope is left: the
        # collection the capture put off, run as that scope was left, aborted the process
        # on an H200 (eagle.cuda._stream's doc)
        with collection_paused(), self.pools.scope():
            try:
                # inside the try: a Ctrl-C raised as the call returns still ends the capture
                s0.begin_capture(CAPTURE_MODE_RELAXED)
                for s, idx in enumerate(rec.rows):
                    sides = self.sides[:len(idx) - 1] if self.branches[s] else []
                    if sides:
                        ev = Event()
                        events.append(ev)
                        fork(s0, sides, ev)
                    streams = [s0] + sides if sides else [s0] * len(idx)
                    for i, stream in zip(idx, streams):
                        where = (i, s)
                        node = rec.nodes[i]
                        root.capture(node, i, rec.names[i], stream)
                        if stream.capture_status() != CAPTURE_STATUS_ACTIVE:
                            raise DriverError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                                              f"node {rec.names[i]!r} invalidated the CUDA graph capture "
                                              "(a GPU call inside it failed or is not allowed while "
                                              "capturing)", node_index=i, node_name=rec.names[i])
                        added = owners.mark(i, stream)
                        if sides and node.runs_as is RunsAs.OPAQUE:
                            self._note_library_kernels(s, i, added)
                    where = None
                    if sides:
                        joins = [Event() for _ in sides]
                        events += joins
                        join(s0, sides, joins)
                for i, step in tail:
                    where = None if i is None else (i, rec.stage_of[i])
                    step(s0, owners)
                    where = None
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
            sides = [s for s in self.sides if s.capture_status() != CAPTURE_STATUS_NONE]
            joins = [Event() for _ in sides]
            events += joins
            join(s0, sides, joins)
        with contextlib.suppress(CudaError):
            if s0.capture_status() != CAPTURE_STATUS_NONE:
                s0.end_capture().close()
        for ev in events:
            with contextlib.suppress(CudaError):
                ev.close()

    def _note_library_kernels(self, stage, index, handles):
        names = []
        for h in handles:
            # a driver without cuFuncGetName (12.0-12.2) cannot say which kernels are a
            # library's: every kernel the branch launched counts as one (stage in order)
            name = kernel_node_name(h, unknown=_UNNAMED_KERNEL)
            if name is _UNNAMED_KERNEL or (name is not None and _LIBRARY_KERNEL.search(name)):
                names.append(name)
        if names:
            self.library_kernels.setdefault(stage, {})[index] = names

    def stages_sharing_library_state(self):
        """{stage: {node name: [kernel names]}} of the branch stages in which two or more
        nodes launched a library's kernels in the last capture."""
        names_of = self.recording.names
        return {s: {names_of[i]: names for i, names in by_node.items()}
                for s, by_node in self.library_kernels.items() if len(by_node) >= 2}
