"""Fixtures for the cuda backend without a GPU, against the CPU stand-in of the driver
(tests/cuda, and the ``cuda-standin`` case of the ``backend`` fixture). tests/conftest.py
imports them, so every test directory has them.

``fake_libcuda_path`` compiles the CPU stand-in of the CUDA driver
(tests/doubles/fake_libcuda.c, a TEST DOUBLE) into a temporary directory
as ``libcuda.so.1`` and points EAGLE_LIBCUDA at it before eagle's shim binds
a driver. ``emulated_kernels`` compiles eagle's own CUDA C source
(eagle/cuda/kernels/partition.cu) with the CUDA C emulator
(tests/doubles/cuda_emulation.h) and loads it into the stand-in, so the
device code itself runs in these tests.

``DeviceArray`` (a test double of a device array) lives in the stand-in's
device address range: kernels given host memory fault there, as on a GPU.
Its ``.host`` is a NumPy view of that memory (only the stand-in allows it).
How the doubles are built and bound: tests/doubles/fake_cuda_build.py.
"""
import ctypes
import os
import sys
import types

import pytest
from fake_cuda_build import EmulatedKernels, bind_fake_libcuda, build_emulated_module, build_fake_libcuda


@pytest.fixture(scope="session")
def fake_libcuda_path(tmp_path_factory):
    return build_fake_libcuda(tmp_path_factory.mktemp("fake_libcuda"))


@pytest.fixture(scope="session")
def cuda_mod(fake_libcuda_path):
    """eagle.cuda._driver bound to the stand-in (EAGLE_LIBCUDA set before it binds)."""
    _cuda = pytest.importorskip("eagle.cuda._driver", reason="eagle.cuda._driver is not built")
    if _cuda.is_loaded() and _cuda.library() != fake_libcuda_path:
        pytest.skip(f"the shim is already bound to {_cuda.library()} in this process; "
                    "run tests/cuda in a process of its own")
    os.environ["EAGLE_LIBCUDA"] = fake_libcuda_path
    assert _cuda.load() == fake_libcuda_path
    return _cuda


@pytest.fixture(scope="session")
def emulated_kernels(cuda_mod, fake_libcuda_path, tmp_path_factory):
    """eagle's partition.cu compiled by the CUDA C emulator, loaded into the stand-in."""
    lib = bind_fake_libcuda(ctypes.CDLL(fake_libcuda_path))
    so = build_emulated_module(tmp_path_factory.mktemp("emulated"))
    assert lib.fake_cuda_load_module(so.encode()) == 0
    lib.module_path = so   # for a child process that loads it again
    from eagle.cuda.finished import set_kernel_provider
    set_kernel_provider(lambda: EmulatedKernels(lib))
    return lib


@pytest.fixture
def fake(cuda_mod, fake_libcuda_path, emulated_kernels):
    """ctypes handle on the stand-in (the same loaded library the shim uses), reset per test."""
    lib = bind_fake_libcuda(ctypes.CDLL(fake_libcuda_path))
    lib.fake_cuda_reset()
    dead = lib.fake_cuda_dead_handle_uses()
    lib.dead_uses_allowed = 0   # a test that destroys and reuses a handle on purpose says how often
    yield lib
    lib.fake_cuda_reset()
    # eagle never hands the driver a handle it destroyed (a crash, or another object's, on a GPU)
    assert lib.fake_cuda_dead_handle_uses() - dead == lib.dead_uses_allowed, \
        "a destroyed CUDA handle was used"


@pytest.fixture
def emulating_cupy(fake, fake_libcuda_path, tmp_path, monkeypatch):
    """TEST DOUBLE of cupy.RawKernel: compiles the source eagle generates with the CUDA C
    emulator and loads it into the stand-in. Shaped as CuPy 14's (cupy/_core/raw.pyx): no
    ``ptr`` of its own, its compiled ``cupy.cuda.Function`` is ``.kernel`` (``.ptr``: the
    CUfunction), ``.name`` the kernel's name."""
    import fake_cupy

    lib = bind_fake_libcuda(ctypes.CDLL(fake_libcuda_path))
    made = {}

    class RawKernel:
        def __init__(self, source, name, options=()):
            if not isinstance(options, tuple):
                raise TypeError("Argument 'options' has incorrect type (expected tuple)")
            if name not in made:
                d = tmp_path / name
                d.mkdir()
                # CUDA has the math functions built in; the emulator takes them from <cmath>
                (d / "k.cu").write_text("#include <cmath>\nusing std::sqrt;\n" + source)
                so = build_emulated_module(d, sources=[d / "k.cu"], kernels=[name], ftz=True)   # CuPy's -ftz=true
                assert lib.fake_cuda_load_module(so.encode()) == 0
                made[name] = lib.fake_cuda_module_function(name.encode())
                assert made[name], name
            self.code, self.name, self.options = source, name, options
            self.__name__ = name
            self.kernel = fake_cupy.Function(None, made[name])

    cp = types.SimpleNamespace(RawKernel=RawKernel, made=made)

    def record(*args, **kwargs):
        """eagle.graph.ufunc with this double as cupy (only while the node is made: the
        backend, finding a cupy, would use its memory pool and streams)"""
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "cupy", cp)
            from eagle.graph import ufunc

            return ufunc(*args, **kwargs)

    def within(fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` with this double as cupy (eagle.capture of a step over
        device arrays makes its ufunc nodes then)."""
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "cupy", cp)
            return fn(*args, **kwargs)

    record.within = within
    return record


@pytest.fixture(scope="session")
def standin_backend_kernels(emulated_kernels, tmp_path_factory):
    """tests/helpers/backend_kernels.cu, emulated and loaded into the stand-in: (kernels,
    the paths of the modules loaded: eagle's and this one)."""
    from backends import standin_kernels
    kernels, so = standin_kernels(emulated_kernels, tmp_path_factory.mktemp("backend_kernels"))
    return kernels, (emulated_kernels.module_path, so)
