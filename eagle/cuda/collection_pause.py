"""No cyclic garbage collection while a CUDA graph is being captured.

A collection that runs inside a capture deallocates whatever garbage it finds there, and
the finalizers of GPU objects (CuPy's, torch's, eagle's own) make CUDA calls a capture
does not allow: the capture is invalidated, or the process aborts (seen on an H200: pytest
aborted in a collection inside the capture of an unrelated graph, tests/gpu/RESULTS.md).
PyTorch's ``torch.cuda.graph`` guards its captures against the same thing. The garbage is
collected after the capture, as usual.

Shared by every thread: the first capture to start disables the collector (if it was
enabled), the last to end restores it."""
import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collection_paused():
    global _depth, _was_enabled
    entered = False
    try:
        with _lock:
            _depth += 1
            entered = True      # no call since the line above: a Ctrl-C cannot fall between
            if _depth == 1:
                _was_enabled = gc.isenabled()
                gc.disable()
        yield
    finally:
        if entered:
            with _lock:
                _depth -= 1
                if _depth == 0 and _was_enabled:
                    gc.enable()
