"""Fixtures for the CUDA tests that run without a GPU.

``fake_libcuda_path`` compiles the CPU stand-in of the CUDA driver
(tests/cuda_standin/fake_libcuda.c, a TEST DOUBLE) into a temporary directory
as ``libcuda.so.1`` and points EAGLE_LIBCUDA at it before eagle's shim binds
a driver. ``emulated_kernels`` compiles eagle's own CUDA C source
(eagle/cuda/kernels/partition.cu) with the CUDA C emulator
(tests/cuda_standin/cuda_emulation.h) and loads it into the stand-in, so the
device code itself runs in these tests.

``DeviceArray`` (a test double of a device array) lives in the stand-in's
device address range: kernels given host memory fault there, as on a GPU.
Its ``.host`` is a NumPy view of that memory (only the stand-in allows it).
"""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "cuda_standin"
STANDIN_SRC = STANDIN / "fake_libcuda.c"
KERNELS_DIR = ROOT / "eagle" / "cuda" / "kernels"


def _compiler(names):
    for cc in names:
        if cc and shutil.which(cc):
            return cc
    return None


def build_standin(out_dir, extra=()):
    cc = _compiler((os.environ.get("CC"), "cc", "gcc", "clang"))
    if cc is None:
        pytest.skip("no C compiler to build the CUDA driver stand-in")
    out = Path(out_dir) / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *extra, str(STANDIN_SRC), "-o", str(out),
                    "-lpthread", "-ldl"], check=True)
    return str(out)


def build_emulated_module(out_dir, sources=None, kernels=None):
    """Compile CUDA C `sources` with the emulator into one shared object (kernels: names)."""
    cxx = _compiler((os.environ.get("CXX"), "c++", "g++", "clang++"))
    if cxx is None:
        pytest.skip("no C++ compiler for the CUDA C emulator")
    if sources is None:
        sources = [KERNELS_DIR / "partition.cu", KERNELS_DIR / "until_done.cu"]
    if kernels is None:
        from eagle.cuda.finished import KERNELS, UNTIL_DONE_KERNELS
        kernels = list(KERNELS) + list(UNTIL_DONE_KERNELS)
    unit = Path(out_dir) / "kernels_emulated.cpp"
    # each .cu in a namespace of its own would hide extern "C" names; they share one unit
    unit.write_text('#include "cuda_emulation.h"\n' + "".join(f'#include "{s}"\n' for s in sources)
                    + "EAGLE_EMU_MODULE(" + ", ".join(f"EAGLE_EMU_KERNEL({k})" for k in kernels) + ")\n")
    out = Path(out_dir) / "kernels_emulated.so"
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-I", str(STANDIN), str(unit),
                    "-o", str(out), "-lpthread"], check=True)
    return str(out)


@pytest.fixture(scope="session")
def fake_libcuda_path(tmp_path_factory):
    return build_standin(tmp_path_factory.mktemp("fake_libcuda"))


@pytest.fixture(scope="session")
def cuda_mod(fake_libcuda_path):
    """eagle.cuda._shim bound to the stand-in (EAGLE_LIBCUDA set before it binds)."""
    _cuda = pytest.importorskip("eagle.cuda._shim", reason="eagle.cuda._shim is not built")
    if _cuda.is_loaded() and _cuda.library() != fake_libcuda_path:
        pytest.skip(f"the shim is already bound to {_cuda.library()} in this process; "
                    "run tests/cuda in a process of its own")
    os.environ["EAGLE_LIBCUDA"] = fake_libcuda_path
    assert _cuda.load() == fake_libcuda_path
    return _cuda


def _bind(lib):
    lib.fake_cuda_counter.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_counter.restype = ctypes.c_long
    lib.fake_cuda_live.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_live.restype = ctypes.c_long
    lib.fake_cuda_launch_count.restype = ctypes.c_long
    lib.fake_cuda_last_grid_x.restype = ctypes.c_uint
    lib.fake_cuda_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.fake_cuda_fail_instantiate_at_node.argtypes = [ctypes.c_long]
    lib.fake_cuda_kernel.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_kernel.restype = ctypes.c_void_p
    lib.fake_cuda_module_function.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_module_function.restype = ctypes.c_void_p
    lib.fake_cuda_load_module.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_is_device.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
    return lib


@pytest.fixture(scope="session")
def emulated_kernels(cuda_mod, fake_libcuda_path, tmp_path_factory):
    """eagle's partition.cu compiled by the CUDA C emulator, loaded into the stand-in."""
    lib = _bind(ctypes.CDLL(fake_libcuda_path))
    so = build_emulated_module(tmp_path_factory.mktemp("emulated"))
    assert lib.fake_cuda_load_module(so.encode()) == 0
    return lib


@pytest.fixture
def fake(cuda_mod, fake_libcuda_path, emulated_kernels):
    """ctypes handle on the stand-in (the same loaded library the shim uses), reset per test."""
    lib = _bind(ctypes.CDLL(fake_libcuda_path))
    lib.fake_cuda_reset()
    yield lib
    lib.fake_cuda_reset()
