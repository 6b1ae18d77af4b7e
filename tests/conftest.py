"""Fixtures shared by the CPU test files."""
import pytest

import eagle


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
