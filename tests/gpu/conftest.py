"""GPU tests: everything here is marked ``gpu`` and skips cleanly (with the
reason) when CuPy or an NVIDIA GPU is missing, or when eagle's CUDA shim is bound
to the CPU stand-in in this process (a cuda-standin test ran first). Run on a GPU
machine with ``tests/gpu/run_on_gpu.sh`` or ``pytest -m gpu tests -v``."""
import pytest
from backends import gpu_unavailable_reason, shim_bound_to_the_standin


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    reason = None
    checked = False
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        item.add_marker(pytest.mark.gpu)
        if not checked:
            reason, checked = gpu_unavailable_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def cupy():
    import cupy
    return cupy


@pytest.fixture(autouse=True)
def real_runtime(cupy):
    """The real driver, and the device idle after each test."""
    if shim_bound_to_the_standin():
        pytest.skip("eagle's CUDA shim is bound to the CPU stand-in in this process (a cuda-standin "
                    "test ran first); run the gpu tests in a process of their own: pytest -m gpu")
    yield
    cupy.cuda.Device().synchronize()
