"""TEST DOUBLE: device arrays in the CUDA driver stand-in's memory (fake_libcuda.c),
and its built-in test kernels; shared by the stand-in tests (tests/cuda, tests/mpi).

Importable as ``fake_cuda`` in the test session (tests/conftest.py puts tests/doubles
on sys.path) and in the tests' subprocesses (they put it on PYTHONPATH)."""
import ctypes

import numpy as np


def kernel(fake, name):
    """A built-in test kernel of the stand-in (a CUfunction address)."""
    addr = fake.fake_cuda_kernel(name.encode())
    assert addr, name
    return addr


def library_kernel(fake, name):
    """The CUkernel (a library kernel, as the CUDA 12+ runtime launches) of a built-in
    test kernel of the stand-in."""
    addr = fake.fake_cuda_library_kernel(kernel(fake, name))
    assert addr, name
    return addr


class DeviceArray:
    """TEST-ONLY: an array in the stand-in's device memory, with
    ``__cuda_array_interface__``; ``.host`` views the same memory from NumPy."""

    def __init__(self, init, stream=None):
        from eagle.cuda import _memory
        init = np.asarray(init)
        self.buffer = _memory.DeviceBuffer(max(init.nbytes, 1))
        raw = (ctypes.c_char * max(init.nbytes, 1)).from_address(self.buffer.ptr)
        self.host = np.frombuffer(raw, dtype=init.dtype, count=init.size).reshape(init.shape)
        self.host[...] = init
        self.stream = stream
        self._base = None

    @classmethod
    def _view(cls, base, host):
        out = cls.__new__(cls)
        out.buffer, out.host, out.stream, out._base = base.buffer, host, base.stream, base
        return out

    @property
    def __cuda_array_interface__(self):
        h = self.host
        d = {"shape": h.shape, "typestr": h.dtype.str, "data": (h.ctypes.data, False),
             "version": 3, "strides": None if h.flags.c_contiguous else h.strides}
        if self.stream is not None:
            d["stream"] = self.stream
        return d

    def __getitem__(self, key):
        return DeviceArray._view(self, self.host[key])


def dev(*hosts):
    return [DeviceArray(h) for h in hosts]
