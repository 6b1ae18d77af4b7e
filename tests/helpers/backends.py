"""One scenario, every backend: what a test needs to write a scenario once and run it
on the cpu backend, on the cuda backend against the CPU stand-in of the driver
(tests/doubles), and on a real GPU with CuPy.

The ``backend`` and ``cuda_backend`` fixtures (tests/conftest.py) hand a test one of
these. Each makes arrays of its kind (NumPy, the stand-in's ``DeviceArray``, CuPy),
reads them back to NumPy, and makes the few nodes a scenario needs with the same
meaning everywhere (``add``, ``dec``, ``life_step``, ``touch``, ``ufunc``, ``capture``): on the cpu
NumPy through ufunc / opaque nodes, on both cuda backends the kernels of
backend_kernels.cu (one source: NVRTC on a GPU, the CUDA C emulator on the stand-in).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

BACKEND_ENV = "EAGLE_TEST_BACKEND"     # the backend a child process makes (child_backend)
KERNELS_CU = Path(__file__).resolve().with_name("backend_kernels.cu")
# name -> number of arguments (the stand-in's cuda_kernel needs it)
KERNEL_ARGS = {"b_add": 3, "b_dec": 2, "b_life_step": 4, "b_touch": 2}


@functools.lru_cache(maxsize=None)
def gpu_unavailable_reason():
    """Why the real-GPU backend cannot run here, or None."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy that cannot load its CUDA libraries
        return f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"CuPy finds no usable GPU ({type(exc).__name__}: {exc})"
    if n < 1:
        return "CuPy finds no GPU"
    return None


def shim_bound_to_the_standin():
    """Whether eagle's CUDA shim in this process is (or will be) bound to the stand-in."""
    if "EAGLE_LIBCUDA" in os.environ:
        return True
    try:
        from eagle.cuda import _driver
    except ImportError:
        return False
    return _driver.is_loaded() and "fake_libcuda" in _driver.library()


class Backend:
    """A backend as a scenario sees it."""

    name = ""              # the test id: "cpu", "cuda-standin", "gpu"
    graph_backend = ""     # what g.backend says once built
    exact_math = True      # float results bit for bit the host's (a GPU's may differ by ulps)
    fake = None            # the stand-in's ctypes handle (its counters), else None
    big = False            # sizes worth a GPU (a scenario picks larger n on one)

    def __repr__(self):
        return f"<backend {self.name}>"

    def zeros(self, shape, dtype=np.float64):
        return self.asarray(np.zeros(shape, dtype))

    def sync(self):
        """Wait for the device (nothing to wait for on the cpu or the stand-in)."""

    def child_env(self):
        """The environment variables a child process needs to make this backend again
        (``child_backend()``), beside tests/helpers/ctrl_c.child_env's."""
        return {BACKEND_ENV: self.name}


class CpuBackend(Backend):
    name, graph_backend = "cpu", "cpu"

    def asarray(self, a):
        return np.array(a)

    def asnumpy(self, a):
        return np.array(a)

    def put(self, a, index, value):
        a[index] = value

    def add(self, x, v):
        from eagle.graph import ufunc
        return ufunc(np.add, {"x": x}, float(v), out={"x": x})

    def dec(self, k):
        from eagle.graph import opaque

        def dec():
            k[0] -= 1
        return opaque(dec, writes={"k": k})

    def life_step(self, alive, life, x):
        """Over every sample (those past the logical size have finished: left alone)."""
        from eagle.graph import opaque

        def step():
            m = alive.copy()
            x[m] += 1.0 + 0.5 * life[m].astype(float)
            life[m] -= 1
            alive[m & (life <= 0)] = False
        return opaque(step, writes={"alive": alive, "life": life, "x": x})

    def touch(self, t):
        return self.add(t, 1.0)

    def ufunc(self, *args, **kwargs):
        from eagle.graph import ufunc
        return ufunc(*args, **kwargs)

    def capture(self, fn, *args, **kwargs):
        import eagle
        return eagle.capture(fn, *args, **kwargs)


class CudaBackend(Backend):
    """The cuda backend: kernels from backend_kernels.cu, by name."""

    graph_backend = "cuda"
    block = 128

    def __init__(self, kernels):
        self.kernels = kernels   # name -> what cuda_kernel takes as its kernel

    def _kernel(self, name, args, **arrays):
        from eagle.graph import cuda_kernel
        return cuda_kernel(self.kernels[name], args, block=self.block, **arrays)

    def add(self, x, v):
        from eagle.graph import SIZE
        return self._kernel("b_add", [x, float(v), SIZE], updates={"x": x})

    def dec(self, k):
        from eagle.graph import SIZE
        return self._kernel("b_dec", [k, SIZE], updates={"k": k})

    def life_step(self, alive, life, x):
        from eagle.graph import SIZE_PTR
        return self._kernel("b_life_step", [alive, life, x, SIZE_PTR],
                            updates={"alive": alive, "life": life, "x": x})

    def touch(self, t):
        from eagle.graph import SIZE_PTR
        return self._kernel("b_touch", [t, SIZE_PTR], updates={"t": t})


class StandinBackend(CudaBackend):
    """The cuda backend against tests/doubles/fake_libcuda.c; arrays are ``DeviceArray``
    (the stand-in's device memory, its ``.host`` a NumPy view of it)."""

    name = "cuda-standin"
    block = 4              # several blocks even for a few samples

    def __init__(self, fake, kernels, emulating_cupy, modules=()):
        super().__init__(kernels)
        self.fake = fake
        self._emulating_cupy = emulating_cupy
        self.modules = modules   # the emulated modules loaded into the stand-in (for a child)

    def child_env(self):
        return {**super().child_env(), "EAGLE_LIBCUDA": os.environ["EAGLE_LIBCUDA"],
                "EAGLE_TEST_MODULES": os.pathsep.join(self.modules)}

    def asarray(self, a):
        from fake_cuda import DeviceArray
        return DeviceArray(np.asarray(a))

    def asnumpy(self, a):
        return np.array(a.host)

    def put(self, a, index, value):
        a.host[index] = value

    def ufunc(self, *args, **kwargs):
        return self._emulating_cupy()(*args, **kwargs)

    def capture(self, fn, *args, **kwargs):
        import eagle
        return self._emulating_cupy().within(eagle.capture, fn, *args, **kwargs)


class GpuBackend(CudaBackend):
    """The cuda backend on a real GPU; arrays are CuPy's."""

    name, exact_math, big = "gpu", False, True

    def __init__(self, cupy, kernels):
        super().__init__(kernels)
        self.cupy = cupy

    def asarray(self, a):
        return self.cupy.asarray(np.asarray(a))

    def asnumpy(self, a):
        return self.cupy.asnumpy(a)

    def put(self, a, index, value):
        # CuPy takes no host array on the right of `a[index] =` (only a scalar, as a fill)
        a[index] = self.cupy.asarray(value)

    def ufunc(self, *args, **kwargs):
        from eagle.graph import ufunc
        return ufunc(*args, **kwargs)

    def capture(self, fn, *args, **kwargs):
        import eagle
        return eagle.capture(fn, *args, **kwargs)

    def sync(self):
        self.cupy.cuda.Device().synchronize()


def gpu_kernels(cupy):
    mod = cupy.RawModule(code=KERNELS_CU.read_text())
    return {name: mod.get_function(name) for name in KERNEL_ARGS}


def standin_kernels(fake, out_dir):
    """backend_kernels.cu through the CUDA C emulator, loaded into the stand-in:
    ({name: (CUfunction, nargs)}, the module's path)."""
    from fake_cuda_build import build_emulated_module
    so = build_emulated_module(out_dir, sources=[KERNELS_CU], kernels=list(KERNEL_ARGS))
    assert fake.fake_cuda_load_module(so.encode()) == 0
    return {k: (fake.fake_cuda_module_function(k.encode()), n) for k, n in KERNEL_ARGS.items()}, so


def child_backend():
    """In a child process whose environment has a backend's child_env(): that backend
    (on the stand-in: the shim bound to it, eagle's emulated kernels and ours loaded)."""
    name = os.environ[BACKEND_ENV]
    if name == "cpu":
        return CpuBackend()
    if name == "gpu":
        import cupy
        return GpuBackend(cupy, gpu_kernels(cupy))
    import ctypes

    from eagle.cuda import _driver
    assert _driver.load() == os.environ["EAGLE_LIBCUDA"]
    from eagle.cuda.finished import set_kernel_provider
    from fake_cuda_build import EmulatedKernels, bind_fake_libcuda
    lib = bind_fake_libcuda(ctypes.CDLL(os.environ["EAGLE_LIBCUDA"]))
    for so in os.environ["EAGLE_TEST_MODULES"].split(os.pathsep):
        assert lib.fake_cuda_load_module(so.encode()) == 0
    set_kernel_provider(lambda: EmulatedKernels(lib))
    kernels = {k: (lib.fake_cuda_module_function(k.encode()), n) for k, n in KERNEL_ARGS.items()}
    return StandinBackend(lib, kernels, None)
