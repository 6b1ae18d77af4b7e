"""The libraries a CUDA graph meets: CuPy, PyTorch and DLPack producers.

eagle never imports CuPy or PyTorch itself: it works with them when the program did. Here:

* the producers a build and every launch order after (``Producers``): the streams the
  arrays name (``__cuda_array_interface__['stream']``), CuPy's and torch's current
  streams, and arrays that order themselves through ``__dlpack__(stream=...)``;
* the memory pools the graph owns while it is captured (``CapturePools``): temporaries a
  node allocates during the capture (``2 * x`` makes a new array) are baked into the
  graph, so they must never be handed to other allocations (returned to CuPy's or
  torch's shared cache they would be reused, and replays would corrupt them);
* eagle's stream as a CuPy stream (``cupy_stream``).
"""
from __future__ import annotations

import contextlib
import sys

from eagle.cuda._stream import Event

__all__ = ["CapturePools", "Producers", "cupy", "cupy_stream", "dlpack_producers", "producer_streams",
           "torch_current_stream"]


def cupy():
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


def torch_current_stream():
    """torch's current CUDA stream (a handle), or None (no torch, or its CUDA not set up)."""
    torch = _torch()
    return int(torch.cuda.current_stream().cuda_stream) if torch is not None else None


def cupy_stream(cp, stream):
    """``stream`` (an eagle.cuda._stream stream) as a CuPy stream: through the CUDA
    stream protocol (``Stream.from_external``, CuPy 14, where ``ExternalStream`` is
    deprecated and warns) or ``ExternalStream`` before."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(stream)
    return cp.cuda.ExternalStream(stream.ptr)


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
    anyway (``Producers.order``)."""
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


class Producers:
    """What eagle's stream waits for before a capture and before every launch: the work
    queued by the producers of the graph's ``arrays`` (each array once)."""

    def __init__(self, arrays):
        self.arrays = []
        for a in arrays:
            if not any(a is b for b in self.arrays):
                self.arrays.append(a)
        #: arrays that order themselves on eagle's stream through ``__dlpack__(stream=...)``
        self.dlpack = dlpack_producers(self.arrays)
        self._event = Event()

    def order(self, stream):
        """Make ``stream`` (eagle's) wait for the work queued on the streams the arrays name
        (``__cuda_array_interface__['stream']``), on CuPy's and torch's current streams, and
        ask the DLPack producers to order on it."""
        streams = producer_streams(self.arrays)
        cp = cupy()
        if cp is not None:
            cur = cp.cuda.get_current_stream().ptr
            if cur not in streams:
                streams.append(cur)
        cur = torch_current_stream()
        if cur is not None and cur not in streams:
            # torch's array interface (v2) names no stream, and __dlpack__ refuses tensors
            # that require grad before it orders anything: wait for torch's current stream
            streams.append(cur)
        for st in streams:
            if st != stream.ptr:
                self._event.record(st)
                stream.wait_event(self._event)
        for a in self.dlpack:
            try:
                a.__dlpack__(stream=stream.ptr)
            except (TypeError, BufferError, NotImplementedError):
                pass  # a producer that cannot order on our stream: nothing more to ask

    def close(self):
        self._event.close()


class CapturePools:
    """The memory pools one graph owns while it is captured: CuPy's (``cupy.cuda.MemoryPool``,
    made when CuPy is imported) and torch's (``torch.cuda.MemPool``, torch 2.5+, made when
    torch is imported and can use CUDA, initialised or not). They live as long as the graph."""

    def __init__(self):
        cp = cupy()
        self._cp = cp
        self.cupy = cp.cuda.MemoryPool() if cp is not None else None
        torch = _torch_for_capture()
        self._torch = torch if torch is not None and hasattr(torch.cuda, "use_mem_pool") else None
        self.torch = self._torch.cuda.MemPool() if self._torch is not None else None

    @contextlib.contextmanager
    def scope(self):
        """Context manager: CuPy and torch allocate from these pools inside it."""
        with contextlib.ExitStack() as scope:
            if self.cupy is not None:
                scope.enter_context(self._cp.cuda.using_allocator(self.cupy.malloc))
            if self.torch is not None:
                scope.enter_context(self._torch.cuda.use_mem_pool(self.torch))
            yield

    def close(self):
        """Give the pools' memory back (the graph is closed)."""
        self.torch = None
        if self.cupy is not None:
            self.cupy.free_all_blocks()
