"""MPI tests: collective nodes in one process, and programs under ``mpiexec -n 2`` / ``-n 4``.

They need mpi4py and an MPI launcher (``pip install '.[mpi]'`` brings both: mpi4py
and the mpich wheel, whose ``mpiexec`` sits beside the Python executable).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def find_mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec") or shutil.which("mpirun")


class MpiRun:
    def __init__(self, launcher):
        self.launcher = launcher

    def __call__(self, n, *args, timeout=120, env=None, module=False):
        """Run ``python ranks.py args`` (or ``python -m args`` with module=True) on n ranks."""
        e = dict(os.environ)
        e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [e.get("PYTHONPATH")] if p])
        e.setdefault("OMP_NUM_THREADS", "1")
        e.update(env or {})
        target = ["-m", *args] if module else [str(HERE / "ranks.py"), *args]
        cmd = [self.launcher, "-n", str(n), sys.executable, *target]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, cwd=str(ROOT))
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{' '.join(cmd)} hung: still running after {timeout} s\n"
                        f"stdout: {exc.stdout}\nstderr: {exc.stderr}")


@pytest.fixture(scope="session")
def mpirun():
    pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py (pip install '.[mpi]')")
    launcher = find_mpiexec()
    if launcher is None:
        pytest.skip("no mpiexec found (pip install '.[mpi]' installs the mpich wheel's)")
    return MpiRun(launcher)
