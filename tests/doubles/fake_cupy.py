"""TEST DOUBLE of the parts of CuPy 14 the cuda backend meets, over the CUDA driver
stand-in's memory and streams (tests/doubles/fake_libcuda.c through eagle's shim).
Not CuPy; installed as ``sys.modules["cupy"]`` by the tests that use it.

What is modelled, and from where (CuPy's source, ``cupy/cuda/stream.pyx`` and
``cupy/_core/core.pyx``, and the CuPy 14 release notes as read for issue 20):

- ``cupy.cuda.get_current_stream()``: the innermost stream entered with ``with``,
  else ``Stream.null`` (``ptr == 0``, the legacy stream); per thread.
- ``cupy.cuda.Stream.from_external(obj)`` (CuPy 14): wraps any object with the CUDA
  stream protocol, ``obj.__cuda_stream__()`` returning ``(version, handle)``, both ints
  and version 0 (else ``TypeError``); the handle is read once, at wrapping (CuPy does
  not own it, and keeps ``obj`` alive).
- ``cupy.cuda.ExternalStream(ptr)``: still there in 14.0-14.2 but deprecated: each
  construction warns ``DeprecationWarning`` (so under ``-W error`` it raises).
  ``version=13`` gives the CuPy 13 module: ExternalStream without a warning, no
  ``from_external``.
- ``cupy.ndarray.__cuda_array_interface__`` (v3): its ``stream`` entry is the
  *current* stream at the moment the property is read (``1`` for the legacy null
  stream), as with the default ``CUPY_CUDA_ARRAY_INTERFACE_SYNC=1``.
- ``cupy.cuda.MemoryPool`` / ``using_allocator``: a pool object; ``using_allocator``
  sets the allocator for the thread while its block runs.
- ``cupy.RawModule(code=..., options=tuple)`` / ``cupy.RawKernel(code, name, options)``
  (``cupy/_core/raw.pyx``, ``cupy/cuda/function.pyx``), when ``make`` is given the
  stand-in's kernels (``functions``: name -> CUfunction address): ``options`` must be a
  tuple (a Cython ``tuple`` argument: anything else is ``TypeError``);
  ``RawModule.get_function(name)`` returns a ``RawKernel``, which has no ``ptr``: its
  compiled ``cupy.cuda.Function`` is ``RawKernel.kernel`` (``.ptr``, the CUfunction;
  ``.module``). Calling either takes ``grid`` and ``block`` tuples, ``args`` (NumPy
  scalars passed by their bytes, Python ints as int64, floats as float64) and
  ``stream=`` (anything with ``.ptr``; None: the current stream). No compiling: the
  source is not read, the kernel is the stand-in's of that name (an unknown name is
  CuPy's ``cuModuleGetFunction`` error, ``CUDA_ERROR_NOT_FOUND``).
- ``cupy.cuda.runtime.getDevice()``: 0.
"""
import contextlib
import ctypes
import threading
import types
import warnings

import numpy as np

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
        try:
            version, handle = obj.__cuda_stream__()
        except AttributeError as e:
            raise TypeError(f"Object of type {type(obj).__name__} does not implement the CUDA "
                            "stream protocol (__cuda_stream__ method)") from e
        if not isinstance(version, int) or not isinstance(handle, int):
            raise TypeError("__cuda_stream__() must return (int, int)")
        if version != 0:
            raise TypeError(f"__cuda_stream__() returned unsupported version {version}")
        stream = cls(handle)
        stream._foreign_stream_ref = obj
        return stream

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


class Function:
    """cupy.cuda.Function: a compiled kernel, ``ptr`` its CUfunction."""

    def __init__(self, module, ptr):
        self.module = module
        self.ptr = int(ptr)

    def __call__(self, grid, block, args, shared_mem=0, stream=None, enable_cooperative_groups=False):
        if not isinstance(grid, tuple) or not isinstance(block, tuple):
            raise TypeError("grid and block must be tuples")   # Cython `tuple grid, tuple block`
        from eagle.cuda import _stream
        grid = tuple(max(1, v) for v in (grid + (1, 1))[:3])
        block = tuple(max(1, v) for v in (block + (1, 1))[:3])
        argv = []
        for a in args:
            if isinstance(a, bool):
                a = np.bool_(a)
            elif isinstance(a, int):
                a = np.int64(a)
            elif isinstance(a, float):
                a = np.float64(a)
            if not isinstance(a, np.generic):
                raise TypeError(f"Unsupported type {type(a)}")
            argv.append((ctypes.c_char * a.itemsize).from_buffer_copy(a.tobytes()))
        ptr = _current_stream_ptr() if stream is None else stream.ptr
        _stream.launch_kernel(self.ptr, grid, block, argv, shared_mem, _stream.BorrowedStream(ptr))


class _Module:
    """cupy.cuda.Module: the stand-in's kernels by name."""

    def __init__(self, functions):
        self._functions = functions

    def get_function(self, name):
        ptr = self._functions(name)
        if not ptr:
            raise RuntimeError("CUDA_ERROR_NOT_FOUND: named symbol not found")   # CUDADriverError
        return Function(self, ptr)


def _current_stream_ptr():
    return _stack()[-1].ptr if _stack() else 0


def make(version=14, functions=None):
    """A fresh ``cupy`` module double; ``cp.state`` has ``ext`` (ExternalStream calls),
    ``pools`` (MemoryPools made) and ``allocator`` (the current one). ``functions``
    (name -> CUfunction address, 0 if none) gives it ``RawModule`` and ``RawKernel``."""
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
    cuda.runtime = types.SimpleNamespace(runtimeGetVersion=lambda: 13000, getDevice=lambda: 0)
    cuda.Function = Function
    cp.cuda = cuda

    if functions is not None:
        class RawKernel:
            """cupy.RawKernel: compiled on first use of ``kernel``; no ``ptr`` of its own."""

            def __init__(self, code, name, options=(), backend="nvrtc", **kwargs):
                if not isinstance(options, tuple):
                    raise TypeError(f"Argument 'options' has incorrect type (expected tuple, "
                                    f"got {type(options).__name__})")
                self.code, self.name, self.options = code, name, options
                self.__name__ = name
                self._kernel = None

            @property
            def kernel(self):
                if self._kernel is None:
                    self._kernel = _Module(functions).get_function(self.name)
                return self._kernel

            def __call__(self, grid, block, args, **kwargs):
                self.kernel(grid, block, args, **kwargs)

        class RawModule:
            """cupy.RawModule: ``get_function`` gives a RawKernel (compiled at once)."""

            def __init__(self, *, code=None, path=None, options=(), **kwargs):
                if (code is None) == (path is None):
                    raise TypeError("Exactly one of `code` and `path` keyword arguments must be given.")
                if not isinstance(options, tuple):
                    raise TypeError(f"Argument 'options' has incorrect type (expected tuple, "
                                    f"got {type(options).__name__})")
                self.code, self.options = code, options

            def get_function(self, name):
                ker = RawKernel(self.code, name, self.options)
                ker.kernel   # noqa: B018 -- compiled (looked up) now, as CuPy does
                return ker

        cp.RawKernel = RawKernel
        cp.RawModule = RawModule

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

