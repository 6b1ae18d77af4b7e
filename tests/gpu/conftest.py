"""GPU tests: everything here is marked ``gpu`` and skips cleanly (with the
reason) when CuPy or an NVIDIA GPU is missing. Run on a GPU machine with
``tests/gpu/run_on_gpu.sh`` or ``pytest -m gpu tests/gpu -v``."""
import pytest
from backends import gpu_unavailable_reason


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
