"""TEST DOUBLE of the parts of PyTorch the cuda backend meets, over the CUDA driver
stand-in's memory and streams (tests/doubles/fake_libcuda.c through eagle's shim).
Not PyTorch; installed as ``sys.modules["torch"]`` by the tests that use it.

Modelled from PyTorch's source (``torch/_tensor.py``, ``torch/cuda/streams.py``,
``torch/cuda/memory.py``, ``torch/cuda/graphs.py``):

- ``Tensor.__cuda_array_interface__``: version **2**, no ``stream`` entry; raises
  ``RuntimeError`` ("Can't get __cuda_array_interface__ on Variable that requires
  grad") when ``requires_grad`` is set.
- ``Tensor.__dlpack__(stream=None)``: raises ``BufferError`` ("Can't export tensors
  that require gradient, use tensor.detach()") for ``requires_grad`` tensors *before*
  any stream synchronisation; otherwise makes ``stream`` wait for the current stream
  (recorded here in ``state.dlpack_waits``). ``__dlpack_device__()`` is ``(2, 0)``
  (kDLCUDA, device 0).
- lazy CUDA initialisation: ``torch.cuda.is_initialized()`` is False until the first
  call that initialises torch's CUDA state (``current_stream()``, ``stream(s)``,
  ``use_mem_pool``, which reads the current device, or a CUDA tensor made); importing
  torch and ``is_available()`` do not; ``torch.cuda.current_stream()`` (``.cuda_stream``: the handle) and
  ``torch.cuda.stream(s)``, per thread; the default stream is the legacy stream
  (``cuda_stream == 0``).
- ``torch.cuda.MemPool()`` and ``torch.cuda.use_mem_pool(pool)``: while the block runs,
  the caching allocator serves this thread from ``pool`` (``state.pool`` shows it);
  ``torch.cuda.graph_pool_handle()``.
"""
import contextlib
import threading
import types

_state = threading.local()


def _stack():
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


class Stream:
    def __init__(self, handle=0):
        self.cuda_stream = int(handle)


class ExternalStream(Stream):
    pass


class MemPool:
    def __init__(self):
        self.allocations = 0


def make():
    torch = types.ModuleType("torch")
    torch.__version__ = "2.9.0"
    st = types.SimpleNamespace(dlpack_waits=[], pool=None, pools=[], initialized=False)
    cuda = types.SimpleNamespace()
    default = Stream(0)

    def lazy_init():
        st.initialized = True

    def current_stream(device=None):
        lazy_init()
        return _stack()[-1] if _stack() else default

    @contextlib.contextmanager
    def stream(s):
        lazy_init()
        _stack().append(s)
        try:
            yield s
        finally:
            _stack().pop()

    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        lazy_init()   # torch.cuda.current_device()
        prev, st.pool = st.pool, pool
        try:
            yield
        finally:
            st.pool = prev

    def mem_pool():
        p = MemPool()
        st.pools.append(p)
        return p

    cuda.current_stream = current_stream
    cuda.stream = stream
    cuda.ExternalStream = ExternalStream
    cuda.MemPool = mem_pool
    cuda.use_mem_pool = use_mem_pool
    cuda.graph_pool_handle = lambda: (0, len(st.pools))
    cuda.is_available = lambda: True
    cuda.is_initialized = lambda: st.initialized
    torch.cuda = cuda

    class Tensor:
        """A CUDA tensor over a test DeviceArray's memory (tests/doubles/fake_cuda.py)."""

        def __init__(self, device_array, requires_grad=False):
            lazy_init()
            self._d = device_array
            self.requires_grad = requires_grad

        @property
        def __cuda_array_interface__(self):
            if self.requires_grad:
                raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. "
                                   "If gradients aren't required, use var.detach() to get Variable that "
                                   "doesn't require grad.")
            d = dict(self._d.__cuda_array_interface__)
            d.pop("stream", None)
            d["version"] = 2
            return d

        def __dlpack__(self, stream=None):
            if self.requires_grad:
                raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
            cur = cuda.current_stream().cuda_stream
            st.dlpack_waits.append((stream, cur))
            if stream is not None and stream != cur:   # the consumer's stream waits for ours
                from eagle.cuda import _stream
                ev = _stream.Event()
                ev.record(cur)
                _stream.BorrowedStream(stream).wait_event(ev)
                ev.close()
            return types.SimpleNamespace(capsule_of=self)   # stands for the PyCapsule

        def __dlpack_device__(self):
            return (2, 0)

    torch.Tensor = Tensor
    torch.state = st
    return torch
