"""Fixtures shared by the CPU test files, and the test doubles on sys.path.

tests/doubles holds every test double (stand-ins for the CUDA driver, MPI and NCCL,
and the Python helpers that build and bind them: ``fake_cuda``, ``fake_cuda_build``);
it is put on sys.path here so any test directory imports them by name.
"""
import sys
from pathlib import Path

import pytest

import eagle

DOUBLES = Path(__file__).resolve().parent / "doubles"
if str(DOUBLES) not in sys.path:
    sys.path.insert(0, str(DOUBLES))


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
