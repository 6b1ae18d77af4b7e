"""eagle's collective kernels speak both MPI handle ABIs: int handles (MPICH) and pointer
handles (Open MPI, the MPI-5 standard ABI). Checked against a stand-in MPI
(tests/doubles/fake_mpi.c, a test double) built both ways, each in a process of its own
(the kernels bind one MPI per process). Needs no mpi4py."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("abi", ["int", "pointer"])
def test_handles_reach_mpi_intact_and_errors_abort(abi, tmp_path):
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler to build the MPI stand-in")
    lib = tmp_path / f"libfake_mpi_{abi}.so"
    flags = ["-DPOINTER_HANDLES"] if abi == "pointer" else []
    from fake_cuda_build import DOUBLES_CFLAGS   # the sanitizer job's flags, if any (tests/sanitize.sh)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *DOUBLES_CFLAGS, *flags, str(HERE.parent / "doubles" / "fake_mpi.c"),
                    "-o", str(lib)], check=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parents[1])] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, str(HERE / "abi_program.py"), str(lib), abi], capture_output=True,
                          text=True, env=env, timeout=120)
    assert "ABI OK" in proc.stdout, proc.stderr
    assert "NOT REACHED" not in proc.stdout
    assert proc.returncode == 1, proc.stderr
    assert "eagle: rank 2 of 4: MPI_Allreduce in node 'tally' failed (MPI error 17: fake error 17)" in proc.stderr
    assert "fake MPI_Abort(1)" in proc.stderr
