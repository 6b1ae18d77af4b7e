"""Collective graphs on 2 and 4 ranks (oversubscribed on small machines), run by mpiexec.

Every run has a timeout: a hang fails the test instead of stalling the suite.
"""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def ok_ranks(proc):
    return sorted(int(m) for m in re.findall(r"^OK rank (\d+)$", proc.stdout, re.M))


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_give_what_numpy_computes(mpirun, n):
    proc = mpirun(n, "results")
    assert proc.returncode == 0, proc.stderr
    assert ok_ranks(proc) == list(range(n))


@pytest.mark.parametrize("teams", ["parallel", "auto"])
def test_collectives_with_a_team_of_threads_per_rank(mpirun, teams):
    # MPI is called by thread 0 of the team, the thread that launched
    proc = mpirun(2, "results", teams, env={"OMP_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr
    assert ok_ranks(proc) == [0, 1]


@pytest.mark.parametrize("kind, n, node", [("shape", 2, "#1"), ("count", 4, "#2"), ("op", 2, "#1")])
def test_a_different_graph_on_one_rank_raises_on_every_rank(mpirun, kind, n, node):
    proc = mpirun(n, f"mismatch_{kind}")
    assert proc.returncode == 0, proc.stderr
    lines = re.findall(r"^MISMATCH rank (\d+): (.*)$", proc.stdout, re.M)
    assert sorted(int(r) for r, _ in lines) == list(range(n)), proc.stdout + proc.stderr
    assert "BUILT" not in proc.stdout
    for _, message in lines:
        assert f"node {node} differs" in message
        assert "the ranks recorded different graphs" in message
    if kind == "count":
        assert "'extra': opaque" in lines[0][1] and "the graph ends after 2 nodes" in lines[0][1]
    if kind == "op":
        assert "op=max" in lines[0][1] and "op=sum" in lines[0][1]


def test_ranks_of_different_hash_seeds_build_the_same_control_flow_graph(mpirun):
    """A while_loop updating several arrays, on ranks whose PYTHONHASHSEED differ: the
    cross-rank check passes (the control node's arrays once followed string hashing)."""
    proc = mpirun(2, "hash_seeds")
    assert proc.returncode == 0, proc.stderr
    built = re.findall(r"^BUILT rank (\d+) seed (\d+) y (\S+)$", proc.stdout, re.M)
    assert sorted(int(r) for r, _, _ in built) == [0, 1], proc.stdout + proc.stderr
    assert len({seed for _, seed, _ in built}) == 2                # the seeds differed
    assert {y for _, _, y in built} == {"6"}                       # 3 iterations on each, summed


def test_a_node_that_raises_on_one_rank_ends_the_job_without_a_hang(mpirun):
    proc = mpirun(4, "failure", timeout=120)
    assert proc.returncode != 0
    assert "FINISHED" not in proc.stdout
    err = proc.stderr
    assert "eagle: rank 2 of 4: ValueError: a particle left the geometry" in err, err
    assert "raised by node 'transport' (stage 0) in replay 2 of launch(10)" in err
    assert "MPI.COMM_WORLD.Abort(1)" in err


def test_failure_mode_raise_hands_the_exception_over(mpirun):
    proc = mpirun(2, "failure_raise")
    assert proc.returncode == 0, proc.stderr
    assert "RAISED rank 0: KeyError('only here')" in proc.stdout
    assert "raised by node 'transport'" in proc.stdout
    assert proc.stdout.count("DONE rank") == 2


def test_a_rank_without_the_collectives_cannot_hang_build(mpirun):
    proc = mpirun(2, "no_collectives", env={"EAGLE_MPI_BUILD_TIMEOUT": "3"}, timeout=90)
    assert proc.returncode != 0
    assert "rank 0 of 2: build() waited 3 s for the other ranks' graph check" in proc.stderr, proc.stderr


def test_an_mpi_error_in_the_kernel_names_the_node_and_aborts(mpirun):
    proc = mpirun(2, "mpi_error")
    assert proc.returncode != 0
    assert "FINISHED" not in proc.stdout
    assert re.search(r"eagle: rank \d of 2: MPI_Sendrecv in node 'halo' failed \(MPI error \d+: ", proc.stderr), \
        proc.stderr
    assert "truncated" in proc.stderr.lower()


@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_launch_until_done_stops_every_rank_at_the_last_ranks_last_replay(mpirun, teams):
    # rank 0's samples are done after 3 replays, rank 1's after 7: rank 0 goes on
    # replaying (at logical size 0) until rank 1 is done, so neither waits in a collective
    proc = mpirun(2, "until_done", teams, env={"OMP_NUM_THREADS": "2"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(re.findall(r"^OK rank (\d) replays 7$", proc.stdout, re.M)) == ["0", "1"], proc.stdout


@pytest.mark.parametrize("kind, says", [("teams", "CpuOptions(teams=...) needs one policy per stage (2), got 7"),
                                        ("size", "logical size 9 exceeds the capacity 4")])
def test_a_build_that_fails_on_one_rank_raises_on_every_rank_at_once(mpirun, kind, says):
    # the failing rank still takes part in the graph check, saying why; the others raise
    # instead of waiting EAGLE_MPI_BUILD_TIMEOUT (300 s) for it
    proc = mpirun(2, "build_fails_on_one_rank", kind, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "BUILT" not in proc.stdout
    told = re.findall(r"^TOLD rank 0: (.*)$", proc.stdout, re.M)
    assert told and f"build() failed on another rank (rank 1 of 2: ValueError: {says}" in told[0], proc.stdout
    failed = re.findall(r"^FAILED rank 1: (.*)$", proc.stdout, re.M)
    assert failed and says in failed[0] and "their build() raises eagle.mpi.RankBuildError" in failed[0]


def test_a_sendrecv_whose_ranks_do_not_pair_up_is_refused_at_build_on_every_rank(mpirun):
    proc = mpirun(2, "sendrecv_unpaired", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = re.findall(r"^MISMATCH rank (\d): (.*)$", proc.stdout, re.M)
    assert sorted(r for r, _ in lines) == ["0", "1"], proc.stdout + proc.stderr
    for _, message in lines:
        assert ("sendrecv 'halo' does not pair up: rank 0 receives from rank 1, which sends to no rank "
                "(MPI.PROC_NULL)") in message


def test_ranks_launching_different_counts_end_the_job_naming_them(mpirun):
    # the first collective of replay 0 compares the launch calls over the ranks
    proc = mpirun(2, "launch_counts", "plain", timeout=60)
    assert proc.returncode != 0
    assert "LAUNCHED" not in proc.stdout
    assert re.search(r"eagle: rank [01] of 2: launch\([34]\) of the graph with collective 'combine', but the ranks "
                     r"launch it differently \(counts from 3 to 4\)", proc.stderr), proc.stderr


def test_launch_0_on_one_rank_against_launch_2_on_another_never_pairs_two_calls(mpirun):
    # launch(0) has no replay whose collective could compare the calls: it compares at its
    # start, so rank 0 is refused and rank 1's launch(2) ends the job, naming the counts;
    # a later launch(2) of rank 0 must not silently pair with rank 1's first
    proc = mpirun(2, "launch_counts", "zero", timeout=60)
    assert "REFUSED rank 0: rank 0 of 2: launch(0) of the graph with collective 'combine'" in proc.stdout, \
        proc.stdout + proc.stderr
    assert "the counts run from 0 to 2" in proc.stdout
    assert "LAUNCHED rank 1" not in proc.stdout and "[4.0, 4.0]" not in proc.stdout
    assert proc.returncode != 0
    assert re.search(r"eagle: rank 1 of 2: launch\(2\) of the graph with collective 'combine', but the ranks "
                     r"launch it differently \(counts from 0 to 2\)", proc.stderr), proc.stderr


def test_launch_and_launch_until_done_mixed_over_the_ranks_end_the_job(mpirun):
    proc = mpirun(2, "launch_counts", "until_done", timeout=60)
    assert proc.returncode != 0
    assert "LAUNCHED rank 1" not in proc.stdout
    assert "but the ranks launch it differently (some call launch_until_done, others launch; counts from 3 to 3)" \
        in proc.stderr, proc.stderr


def test_launch_until_done_with_different_counts_raises_on_every_rank(mpirun):
    proc = mpirun(2, "until_done_counts", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = re.findall(r"^REFUSED rank (\d): (.*)$", proc.stdout, re.M)
    assert sorted(r for r, _ in lines) == ["0", "1"], proc.stdout + proc.stderr
    assert "rank 0 of 2: launch_until_done(100) of the graph with collective 'total'" in lines[0][1]
    for _, message in lines:
        assert "the counts run from 50 to 100" in message and "No replay ran." in message
        assert message.endswith(" then 7")   # then both launch_until_done(100): 7 replays


def test_a_rank_that_never_launches_cannot_hang_the_others(mpirun):
    proc = mpirun(2, "launch_missing", env={"EAGLE_MPI_LAUNCH_TIMEOUT": "3"}, timeout=60)
    assert proc.returncode != 0
    assert "LAUNCHED" not in proc.stdout
    assert ("eagle: rank 0 of 2: launch(2) of the graph with collective 'combine' waited 3 s in replay 0, in its "
            "launch check at this node for the other ranks") in proc.stderr, proc.stderr


def tallies(proc):
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("ranks: ")
    return lines[0].split(" · ", 1)[1], lines[1:]


def test_the_monte_carlo_example_gives_the_same_tallies_on_1_2_and_4_ranks(mpirun):
    args = ["eagle.examples.monte_carlo", "--particles", "3001", "--steps", "60"]
    runs = [tallies(mpirun(n, *args, module=True)) for n in (1, 2, 4)]
    assert runs[0] == runs[1] == runs[2]
    head, body = runs[0]
    assert head.startswith("particles 3001 · steps 60")
    assert body[0].startswith("absorbed per cell: ")
    counts = [int(v) for v in body[0].split(": ")[1].split()]
    assert len(counts) == 32 and sum(counts) > 0


# ---- Hostile MPI runs under ``mpiexec -n 2`` (subprocess, with a timeout: a hang fails).
#
# A node raising an exception whose ``str()`` itself raises on one rank: the
# abort that keeps the other rank from waiting forever in the next collective
# must still happen.

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"

BROKEN_STR_CHILD = textwrap.dedent("""
    import numpy as np
    import eagle
    from eagle.graph import allreduce, opaque
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
    pytest.importorskip("mpi4py")
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
