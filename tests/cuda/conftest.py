"""Fixtures for the CUDA shim tests that run without a GPU.

``fake_cudart`` compiles the CPU stand-in of the CUDA runtime
(tests/cuda_standin/fake_cudart.c, a test double) into a temporary directory
and points EAGLE_CUDA_RUNTIME at it before eagle's shim binds a runtime.
"""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN_SRC = ROOT / "tests" / "cuda_standin" / "fake_cudart.c"


def _compiler():
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


@pytest.fixture(scope="session")
def fake_cudart_path(tmp_path_factory):
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler to build the CUDA runtime stand-in")
    out = tmp_path_factory.mktemp("fake_cudart") / "libfake_cudart.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(STANDIN_SRC), "-o", str(out)], check=True)
    return str(out)


@pytest.fixture(scope="session")
def cuda_mod(fake_cudart_path):
    """eagle._cuda bound to the stand-in (EAGLE_CUDA_RUNTIME set before it binds)."""
    _cuda = pytest.importorskip("eagle._cuda", reason="eagle._cuda is not built")
    if _cuda.is_loaded() and _cuda.library() != fake_cudart_path:
        pytest.skip(f"the shim is already bound to {_cuda.library()} in this process; "
                    "run tests/cuda in a process of its own")
    os.environ["EAGLE_CUDA_RUNTIME"] = fake_cudart_path
    assert _cuda.load() == fake_cudart_path
    return _cuda


@pytest.fixture
def fake(cuda_mod, fake_cudart_path):
    """ctypes handle on the stand-in (the same loaded library the shim uses), reset per test."""
    lib = ctypes.CDLL(fake_cudart_path)
    lib.fake_cudart_counter.argtypes = [ctypes.c_char_p]
    lib.fake_cudart_counter.restype = ctypes.c_long
    lib.fake_cudart_live.argtypes = [ctypes.c_char_p]
    lib.fake_cudart_live.restype = ctypes.c_long
    lib.fake_cudart_launch_count.restype = ctypes.c_long
    lib.fake_cudart_last_grid_x.restype = ctypes.c_uint
    lib.fake_cudart_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.fake_cudart_fail_instantiate_at_node.argtypes = [ctypes.c_long]
    lib.fake_cudart_reset()
    yield lib
    lib.fake_cudart_reset()
