"""Every ```python block of README.md runs as written, each on its own in a fresh interpreter.

A block runs as a reader would paste it into a new ``python`` session: nothing from
the blocks before it. The line before a block may say how it runs, in an HTML
comment the rendered README does not show:

* ``<!-- eagle-test: mpiexec -n 2 -->`` -- under ``mpiexec -n 2`` (skipped, with the
  reason, without mpi4py or an ``mpiexec``), as tests/mpi runs its programs;
* ``<!-- eagle-test: gpu -->`` -- needs an NVIDIA GPU and CuPy (skipped here without them).

Blocks are found by reading the README, so a new block is tested without editing this file.
"""
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import eagle
from cell_runner import readme_blocks

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "cell_runner.py"
BLOCKS = readme_blocks((ROOT / "README.md").read_text())


def fresh_env():
    """The environment of a fresh interpreter that imports the eagle under test."""
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    here = str(Path(eagle.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def run_cells(cells, cwd, launcher=(), timeout=600):
    """Run ``cells`` (dicts of source, tags, where) in order in one fresh interpreter
    (under ``launcher``, e.g. mpiexec, when given); fail with the output if one raises."""
    if importlib.util.find_spec("IPython") is None:
        pytest.skip("the cells run in an IPython shell: pip install ipython (the test extra has it)")
    path = Path(cwd) / "cells.json"
    path.write_text(json.dumps(cells))
    cmd = [*launcher, sys.executable, str(RUNNER), str(path)]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=fresh_env(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)} still running after {timeout} s\n{exc.stdout}\n{exc.stderr}")
    if proc.returncode != 0:
        pytest.fail(f"{cells[0]['where'] if cells else ''}: exit {proc.returncode}\n"
                    f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    return proc


def find_mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec") or shutil.which("mpirun")


def launcher_for(how):
    """The command prefix a block marked ``how`` runs under, or pytest.skip with the reason."""
    if not how:
        return ()
    if how == "gpu":
        if importlib.util.find_spec("cupy") is None:
            pytest.skip("a GPU block: needs CuPy and an NVIDIA GPU")
        return ()
    words = shlex.split(how)
    if words[0] == "mpiexec":
        if importlib.util.find_spec("mpi4py") is None:
            pytest.skip("an MPI block: needs mpi4py (pip install '.[mpi]')")
        mpiexec = find_mpiexec()
        if mpiexec is None:
            pytest.skip("an MPI block: no mpiexec found (pip install '.[mpi]' brings the mpich wheel's)")
        return (mpiexec, *words[1:])
    raise AssertionError(f"README: unknown <!-- eagle-test: {how} --> (say 'gpu' or 'mpiexec -n N')")


def test_the_readme_has_python_blocks_to_run():
    assert BLOCKS, "README.md: no ```python block found"
    assert any(not b["how"] for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b["where"] for b in BLOCKS])
def test_the_readme_block_runs_on_its_own(block, tmp_path):
    launcher = launcher_for(block["how"])
    run_cells([block], tmp_path, launcher)


def test_a_block_that_raises_fails_the_run(tmp_path):
    # the runner must not pass what does not run (the README's MPI block was a fragment:
    # NameError: name 'g' is not defined)
    cells = [{"source": "import numpy as np", "tags": [], "where": "README.md:1"},
             {"source": "g.add_node(None)", "tags": [], "where": "README.md:2"}]
    path = tmp_path / "cells.json"
    path.write_text(json.dumps(cells))
    proc = subprocess.run([sys.executable, str(RUNNER), str(path)], cwd=tmp_path, env=fresh_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "README.md:2" in proc.stderr and "NameError" in proc.stdout + proc.stderr


def test_the_marks_and_fences_are_read_as_written():
    text = "\n".join([
        "intro", "```python", "a = 1", "```",
        "<!-- eagle-test: mpiexec -n 2 -->", "```python", "b = 2", "```",
        "```bash", "echo not python", "```",
        "<!-- eagle-test: gpu -->", "```python", "import cupy", "```"])
    blocks = readme_blocks(text)
    assert [(b["source"], b["how"]) for b in blocks] == [("a = 1", ""), ("b = 2", "mpiexec -n 2"),
                                                          ("import cupy", "gpu")]
    assert blocks[1]["where"] == "README.md:6"
    with pytest.raises(AssertionError, match="unknown"):
        launcher_for("cluster")
