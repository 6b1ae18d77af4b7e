"""TEST DOUBLE of the parts of CuPy 14 the cuda backend meets, over the CUDA driver
stand-in's memory and streams (tests/doubles/fake_libcuda.c through eagle's shim).
Not CuPy; installed as ``sys.modules["cupy"]`` by the tests that use it.

What is modelled, and from where (CuPy's source, ``cupy/cuda/stream.pyx`` and
``cupy/_core/core.pyx``, and the CuPy 14 release notes as read for issue 20):

- ``cupy.cuda.get_current_stream()``: the innermost stream entered with ``with``,
  else ``Stream.null`` (``ptr == 0``, the legacy stream); per thread.
- ``cupy.cuda.Stream.from_external(obj)`` (CuPy 14): wraps any object with the CUDA
  stream protocol, ``obj.__cuda_stream__()`` returning ``(version, handle)``; the
  handle is read once, at wrapping (CuPy does not own it).
- ``cupy.cuda.ExternalStream(ptr)``: still there in 14.0-14.2 but deprecated: each
  construction warns ``DeprecationWarning`` (so under ``-W error`` it raises).
  ``version=13`` gives the CuPy 13 module: ExternalStream without a warning, no
  ``from_external``.
- ``cupy.ndarray.__cuda_array_interface__`` (v3): its ``stream`` entry is the
  *current* stream at the moment the property is read (``1`` for the legacy null
  stream), as with the default ``CUPY_CUDA_ARRAY_INTERFACE_SYNC=1``.
- ``cupy.cuda.MemoryPool`` / ``using_allocator``: a pool object; ``using_allocator``
  sets the allocator for the thread while its block runs.
"""
import contextlib
import threading
import types
import warnings

_state = threading.local()


def _stack():
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


class Stream:
    """cupy.cuda.Stream over a handle it does not own (eagle's or a test's)."""

    def __init__(self, ptr=0):
        self.ptr = int(ptr)

    @classmethod
    def from_external(cls, obj):
        version, handle = obj.__cuda_stream__()
        if version != 0:
            raise ValueError(f"unsupported __cuda_stream__ version {version}")
        return cls(handle)

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()

    def synchronize(self):
        from eagle.cuda import _stream
        _stream.BorrowedStream(self.ptr).synchronize()


Stream.null = Stream(0)


class MemoryPool:
    def __init__(self):
        self.freed_all = False

    def malloc(self, n):
        raise NotImplementedError("the fake pool allocates nothing")

    def free_all_blocks(self):
        self.freed_all = True


def make(version=14):
    """A fresh ``cupy`` module double; ``cp.state`` has ``ext`` (ExternalStream calls),
    ``pools`` (MemoryPools made) and ``allocator`` (the current one)."""
    cp = types.ModuleType("cupy")
    cp.__version__ = f"{version}.2.0"
    st = types.SimpleNamespace(ext=[], pools=[], allocator=None)
    cuda = types.SimpleNamespace()

    class StreamV(Stream):   # this module's own class, so Stream.null is its own
        pass

    if version < 14:
        StreamV.from_external = None   # CuPy 13 has no Stream.from_external
    StreamV.null = StreamV(0)

    def external(ptr, device_id=-1):
        if version >= 14:
            warnings.warn("cupy.cuda.ExternalStream is deprecated; use cupy.cuda.Stream.from_external",
                          DeprecationWarning, stacklevel=2)
        st.ext.append(ptr)
        return StreamV(ptr)

    def memory_pool():
        p = MemoryPool()
        st.pools.append(p)
        return p

    @contextlib.contextmanager
    def using_allocator(alloc):
        prev, st.allocator = st.allocator, alloc
        try:
            yield
        finally:
            st.allocator = prev

    cuda.Stream = StreamV
    cuda.ExternalStream = external
    cuda.MemoryPool = memory_pool
    cuda.using_allocator = using_allocator
    cuda.get_current_stream = lambda: _stack()[-1] if _stack() else cuda.Stream.null
    cuda.get_cuda_path = lambda: None
    cuda.runtime = types.SimpleNamespace(runtimeGetVersion=lambda: 13000)
    cp.cuda = cuda

    class ndarray:
        """A CuPy array over a test DeviceArray's memory (tests/doubles/fake_cuda.py)."""

        def __init__(self, device_array):
            self._d = device_array

        @property
        def __cuda_array_interface__(self):
            d = dict(self._d.__cuda_array_interface__)
            ptr = cuda.get_current_stream().ptr
            d["stream"] = 1 if ptr == 0 else ptr   # read now: the current stream
            return d

    cp.ndarray = ndarray
    cp.state = st
    return cp

