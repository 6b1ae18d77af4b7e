"""GPU tests: everything here is marked ``gpu`` and skips cleanly (with the
reason) when CuPy or an NVIDIA GPU is missing. Run on a GPU machine with
``tests/gpu/run_on_gpu.sh`` or ``pytest -m gpu tests/gpu -v``."""
import pytest


def _gpu_unavailable_reason():
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


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    reason = None
    checked = False
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        item.add_marker(pytest.mark.gpu)
        if not checked:
            reason, checked = _gpu_unavailable_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def cupy():
    import cupy
    return cupy
