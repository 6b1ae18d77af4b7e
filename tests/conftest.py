"""Fixtures shared by every test directory; tests/doubles and tests/helpers on sys.path.

tests/doubles holds every test double (stand-ins for the CUDA driver, MPI and NCCL,
and the Python helpers that build and bind them: ``fake_cuda``, ``fake_cuda_build``);
tests/helpers what several test directories share (``backends``, ``ctrl_c``,
``oracle_graphs``, the stand-in's fixtures). Both are put on sys.path here so any
test directory imports them by name.

Every test session compiles generated loops (eagle.cpu.codegen) into a temporary cache
folder of its own (EAGLE_CACHE_DIR, unless the caller set one), never into the user's.

``backend`` runs a scenario on each backend (cpu, the cuda stand-in, a GPU when one
is present: marked ``gpu``, skipped cleanly otherwise); ``cuda_backend`` on the two
cuda ones. See tests/helpers/backends.py.
"""
import os
import sys
import tempfile
from pathlib import Path

import pytest

import eagle

HERE = Path(__file__).resolve().parent
for _path in (HERE / "doubles", HERE / "helpers"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from backends import (CpuBackend, GpuBackend, StandinBackend, gpu_kernels,  # noqa: E402
                      gpu_unavailable_reason, shim_bound_to_the_standin)
from standin_fixtures import (cuda_mod, emulated_kernels, emulating_cupy, fake,  # noqa: E402,F401
                              fake_libcuda_path, standin_backend_kernels)

if not os.environ.get("EAGLE_CACHE_DIR"):
    # set at import, before any test builds a graph; removed at exit with the folder
    _session_cache = tempfile.TemporaryDirectory(prefix="eagle-test-cache-")
    os.environ["EAGLE_CACHE_DIR"] = _session_cache.name

CUDA_BACKENDS = ["cuda-standin", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.fixture
def threads():
    """Set eagle's thread count inside a test (skips a count > 1 in a build without OpenMP);
    the count in force before is restored."""
    before = eagle.get_num_threads()

    def set_threads(n):
        if n > 1 and not eagle.have_openmp():
            pytest.skip("eagle was built without OpenMP: it runs on one thread")
        eagle.set_num_threads(n)

    yield set_threads
    eagle.set_num_threads(before)


@pytest.fixture(scope="session")
def gpu_backend_kernels():
    import cupy
    return gpu_kernels(cupy)


def _make_backend(request):
    if request.param == "cpu":
        yield CpuBackend()
    elif request.param == "cuda-standin":
        kernels, modules = request.getfixturevalue("standin_backend_kernels")
        yield StandinBackend(request.getfixturevalue("fake"), kernels,
                             lambda: request.getfixturevalue("emulating_cupy"), modules)
    else:
        reason = gpu_unavailable_reason()
        if reason:
            pytest.skip(reason)
        if shim_bound_to_the_standin():
            pytest.skip("eagle's CUDA shim is bound to the CPU stand-in in this process (a "
                        "cuda-standin test ran first); run the gpu tests in a process of their own: "
                        "pytest -m gpu")
        import cupy
        b = GpuBackend(cupy, request.getfixturevalue("gpu_backend_kernels"))
        yield b
        b.sync()


@pytest.fixture(params=["cpu", *CUDA_BACKENDS])
def backend(request):
    """The scenario's backend: cpu, cuda-standin, gpu (tests/helpers/backends.py)."""
    yield from _make_backend(request)


@pytest.fixture(params=CUDA_BACKENDS)
def cuda_backend(request):
    """The scenario's cuda backend: cuda-standin, gpu."""
    yield from _make_backend(request)

