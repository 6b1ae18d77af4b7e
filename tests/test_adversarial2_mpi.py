"""Hostile MPI runs under ``mpiexec -n 2`` (subprocess, with a timeout: a hang fails).

A node raising an exception whose ``str()`` itself raises on one rank: the
abort that keeps the other rank from waiting forever in the next collective
must still happen.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")
ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"

BROKEN_STR_CHILD = textwrap.dedent("""
    import numpy as np
    import eagle
    from eagle.graph import opaque
    from eagle.mpi import allreduce
    from mpi4py import MPI

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no str for you")

    rank = MPI.COMM_WORLD.Get_rank()
    x, total, z = np.ones(4), np.zeros(4), np.zeros(1)

    def step():
        z[0] += 1
        if rank == 1 and z[0] == 3:
            raise Unprintable()

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"z": z}), name="step")
    g.add_node(allreduce(x, total), name="sum")
    g.build()
    g.launch(10)
    print("FINISHED", rank, flush=True)
""")


@pytest.mark.skipif(not MPIEXEC.exists(), reason="no mpiexec beside the Python executable")
def test_an_exception_with_a_broken_str_on_one_rank_still_aborts_the_job(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(BROKEN_STR_CHILD)
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    try:
        proc = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(script)], capture_output=True,
                              text=True, timeout=60, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the job hung after a rank's node raised: {exc.stderr!r:.3000}")
    assert proc.returncode != 0
    assert "FINISHED" not in proc.stdout
    assert "eagle: rank 1 of 2: Unprintable" in proc.stderr, proc.stderr[-3000:]
    assert "MPI.COMM_WORLD.Abort(1)" in proc.stderr
