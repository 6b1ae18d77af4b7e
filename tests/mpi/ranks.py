"""Programs the MPI tests run under ``mpiexec -n N``: ``python ranks.py MODE``.

Each mode records a graph on every rank; ``results`` checks every collective's
output against what NumPy computes from all ranks' inputs (each rank knows
them: they follow from the rank number) and prints ``OK rank R``. The other
modes set up a mismatch or a failure for the test to watch.
"""
import os
import sys
import time

if sys.argv[1:2] == ["hash_seeds"] and "EAGLE_TEST_HASH_SEEDED" not in os.environ:
    # each rank its own string hashing (set before the interpreter starts: run again)
    _rank = next((os.environ[k] for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID")
                  if k in os.environ), "0")
    os.execve(sys.executable, [sys.executable, *sys.argv],
              dict(os.environ, PYTHONHASHSEED=str(101 + int(_rank)), EAGLE_TEST_HASH_SEEDED="1"))

import numpy as np
from mpi4py import MPI

import eagle
from eagle.graph import allgather, allreduce, bcast, compact, opaque, sendrecv
from eagle.mpi import GraphMismatchError

# looked up here, not imported: these programs also run on an eagle without them (the
# baseline a test is shown to fail on), where they show the hang the error replaced
RankBuildError = getattr(eagle.mpi, "RankBuildError", ())
LaunchMismatchError = getattr(eagle.mpi, "LaunchMismatchError", ())

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def report(text):
    """Print one line per rank, from rank 0 (lines printed by several ranks at once can interleave)."""
    lines = comm.gather(text, root=0)
    if rank == 0:
        print("\n".join(lines), flush=True)


def contribution(r, replay, n=5):
    """What rank r holds on a replay (1-based), for the reductions."""
    return np.arange(n, dtype=np.float64) * (r + 1) + replay


def results(teams):
    n = 5
    g = eagle.Graph()
    x = np.zeros(n)
    replay = [0]
    total = np.zeros(n)
    biggest = np.zeros(n)
    flags = np.zeros(3, dtype=np.int32)
    gathered = np.zeros(size * n)
    root_data = np.zeros(4, dtype=np.int64)
    ring_out = np.zeros(2, dtype=np.complex128)
    ring_in = np.zeros(2, dtype=np.complex128)
    inplace = np.zeros(n)
    per_sample = np.zeros(8)   # gives the graph a logical size

    def fill():
        replay[0] += 1
        k = replay[0]
        x[:] = contribution(rank, k, n)
        flags[:] = [rank == 0, 1, rank % 2]
        root_data[:] = (np.arange(4) + 100 * k) if rank == size - 1 else -1
        ring_out[:] = rank + 1j * k
        inplace[:] = rank * k

    g.add_node(opaque(fill, writes={"x": x, "flags": flags, "root_data": root_data, "ring_out": ring_out,
                                    "inplace": inplace}), name="fill")
    g.add_node(allreduce(x, total), name="total")
    g.add_node(allreduce(x, biggest, op="max"), name="biggest")
    g.add_node(allreduce(flags, flags, op="lor"), name="any_flag")
    g.add_node(allgather(x, gathered), name="gather")
    g.add_node(bcast(root_data, root=size - 1), name="from_last")
    g.add_node(sendrecv(ring_out, ring_in, dest=(rank + 1) % size, source=(rank - 1) % size, tag=7), name="ring")
    g.add_node(allreduce(inplace, inplace), name="inplace")
    g.add_node(opaque(lambda: None, writes={"per_sample": per_sample}), name="samples")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    for k in range(1, 5):
        if k == 3:
            g.set_logical_size(0)   # collectives run whatever the logical size
        g.launch(1)
        every = np.array([contribution(r, k, n) for r in range(size)])
        np.testing.assert_array_equal(total, every.sum(axis=0))
        np.testing.assert_array_equal(biggest, every.max(axis=0))
        np.testing.assert_array_equal(flags, [1, 1, 1 if size > 1 else 0])
        np.testing.assert_array_equal(gathered, every.ravel())
        np.testing.assert_array_equal(root_data, np.arange(4) + 100 * k)
        np.testing.assert_array_equal(ring_in, ((rank - 1) % size) + 1j * k)
        np.testing.assert_array_equal(inplace, sum(r * k for r in range(size)))
    assert replay[0] == 4
    text = str(g)
    assert f"{{total ×{size}}}" in text, text
    # many replays in one launch, the reduction fed by the previous replay's result
    acc = np.ones(3)
    h = eagle.Graph()
    h.add_node(allreduce(acc, acc), name="grow")
    h.build(cpu=eagle.CpuOptions(teams=teams))
    h.launch(6)
    np.testing.assert_array_equal(acc, float(size) ** 6)
    report(f"OK rank {rank}")


def mismatch(kind):
    x = np.zeros(4 if (kind != "shape" or rank != 1) else 5)
    y = np.zeros_like(x)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"x": x}), name="fill")
    g.add_node(allreduce(x, y, op="max" if kind == "op" and rank == 0 else "sum"), name="combine")
    if kind == "count" and rank == size - 1:
        g.add_node(opaque(lambda: None, reads={"y": y}), name="extra")
    try:
        g.build()
    except GraphMismatchError as e:
        assert g.backend is None
        report(f"MISMATCH rank {rank}: {e}")
        return
    report(f"BUILT rank {rank}")


def hash_seeds():
    """Ranks with different PYTHONHASHSEED record the same while_loop updating several
    arrays: the cross-rank check compares the control node's arrays in the bodies' order,
    never in a set's (which follows string hashing)."""
    from eagle.graph import ufunc, while_loop

    names = ["temperature", "pressure", "alpha", "zeta", "b", "velocity_x", "q"]
    arrs = {k: np.zeros(8) for k in names}
    more, y = np.ones(1, bool), np.zeros(8)
    body = eagle.Graph()
    for k in names:
        body.add_node(ufunc(np.add, {k: arrs[k]}, 1.0, out={k: arrs[k]}), name="inc_" + k)
    body.add_node(ufunc(np.less, {"t0": arrs["temperature"][:1]}, 3.0, out={"more": more}), name="test")
    g = eagle.Graph()
    g.add_node(while_loop(more, body, max_iterations=10), name="loop")
    g.add_node(allreduce({"temperature": arrs["temperature"]}, y), name="combine")
    try:
        g.build()
    except GraphMismatchError as e:
        report(f"MISMATCH rank {rank} seed {os.environ.get('PYTHONHASHSEED')}: {e}")
        return
    g.launch(1)
    report(f"BUILT rank {rank} seed {os.environ.get('PYTHONHASHSEED')} y {y[0]:g}")


def failure():
    x = np.ones(3)
    y = np.zeros(3)
    replay = [0]

    def step():
        replay[0] += 1
        if rank == size // 2 and replay[0] == 3:
            raise ValueError("a particle left the geometry")

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"x": x}), name="transport")
    g.add_node(allreduce(x, y), name="tally")
    g.build()
    g.launch(10)
    print(f"FINISHED rank {rank}", flush=True)


def failure_raise():
    eagle.mpi.set_failure_mode("raise")
    x = np.ones(3)
    g = eagle.Graph()

    def step():
        raise KeyError("only here")

    g.add_node(opaque(step, writes={"x": x}), name="transport")
    g.add_node(allreduce(x, x), name="tally")
    g.build()
    if rank == 0:
        try:
            g.launch(1)
        except KeyError as e:
            print(f"RAISED rank {rank}: {e!r} {getattr(e, '__notes__', [])}", flush=True)
    report(f"DONE rank {rank}")


def no_collectives():
    x = np.zeros(2)
    g = eagle.Graph()
    if rank == 0:
        g.add_node(allreduce(x, x), name="combine")
    else:
        g.add_node(opaque(lambda: None, writes={"x": x}), name="alone")
    g.build()
    print(f"BUILT rank {rank}", flush=True)
    comm.Barrier()   # rank 0 never comes: it aborts from build()


def mpi_error():
    # every rank receives 4 elements into a buffer of 2: MPI_ERR_TRUNCATE inside the kernel
    send = np.zeros(4)
    recv = np.zeros(2)
    g = eagle.Graph()
    g.add_node(sendrecv(send, recv, dest=(rank + 1) % size, source=(rank - 1) % size), name="halo")
    g.build()
    g.launch(1)
    print(f"FINISHED rank {rank}", flush=True)


# lives of each rank's samples: rank r's last one finishes on replay 3 + 4 r
def lives(r):
    return np.array([1, 2, 2, 3 + 4 * r], dtype=np.int64)


def until_done_graph():
    """A graph that steps each rank's samples until their lives are spent (see lives())."""
    life = lives(rank).copy()
    alive = np.ones(life.size, dtype=np.bool_)
    stepped = np.zeros(1, dtype=np.int64)
    total = np.zeros(1, dtype=np.int64)
    tally = np.zeros(1, dtype=np.int64)
    g = eagle.Graph()

    def step():
        m = g.logical_size
        live = life[:m] > 0
        stepped[0] = live.sum()
        life[:m][live] -= 1
        alive[:m] = life[:m] > 0

    g.add_node(opaque(step, reads={"life": life}, writes={"alive": alive, "stepped": stepped}), name="step")
    g.add_node(allreduce(stepped, total), name="total")
    g.add_node(opaque(lambda: tally.__setitem__(0, tally[0] + total[0]), reads={"total": total},
                      writes={"tally": tally}), name="add")
    g.add_node(compact(alive, {"life": life}, min_dead_fraction=0), name="compact")
    return g, tally


def until_done(teams="auto"):
    """launch_until_done where the ranks run out of samples on different replays."""
    g, tally = until_done_graph()
    g.build(cpu=eagle.CpuOptions(teams=teams))
    done = g.launch_until_done(100)
    # every rank replays until the last sample of every rank is done
    assert done == 3 + 4 * (size - 1), done
    assert tally[0] == sum(lives(r).sum() for r in range(size)), tally
    assert g.logical_size == 0
    again = g.launch_until_done(100)   # no sample anywhere: no replay, on every rank
    assert again == 0, again
    report(f"OK rank {rank} replays {done}")


def until_done_counts():
    """launch_until_done with a different max_replays on one rank: refused on every rank."""
    g, tally = until_done_graph()
    g.build()
    try:
        g.launch_until_done(100 if rank == 0 else 50)
    except LaunchMismatchError as e:
        assert tally[0] == 0
        done = g.launch_until_done(100)   # the graph is still usable
        report(f"REFUSED rank {rank}: {e} then {done}")
        return
    report(f"LAUNCHED rank {rank}")


def build_fails_on_one_rank(kind):
    x = np.zeros(4)
    y = np.zeros(4)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"x": x}), name="fill")
    g.add_node(allreduce(x, y), name="combine")
    teams = "auto"
    if rank == size - 1:
        if kind == "teams":
            teams = ["serial"] * 7
        else:
            g._logical_size = 9   # as a set_logical_size() before the arrays shrank
    try:
        g.build(cpu=eagle.CpuOptions(teams=teams))
    except RankBuildError as e:
        assert g.backend is None
        report(f"TOLD rank {rank}: {e}")
        return
    except ValueError as e:
        report(f"FAILED rank {rank}: {e} {getattr(e, '__notes__', [])}")
        return
    report(f"BUILT rank {rank}")


def sendrecv_unpaired():
    send, recv = np.zeros(3), np.zeros(3)
    g = eagle.Graph()
    # rank 0 receives from rank 1, which sends to nobody: rank 0 would wait forever
    dest = MPI.PROC_NULL if rank == 1 else (rank + 1) % size
    g.add_node(sendrecv(send, recv, dest=dest, source=(rank + 1) % size), name="halo")
    try:
        g.build()
    except GraphMismatchError as e:
        report(f"MISMATCH rank {rank}: {e}")
        return
    report(f"BUILT rank {rank}")


def launch_counts(kind):
    """Rank 0 launches the graph 3 times, rank 1 4 times (or launch_until_done(3))."""
    if kind == "until_done":
        g, tally = until_done_graph()
        g.build()
        if rank == 0:
            try:
                g.launch(3)
            except LaunchMismatchError as e:
                print(f"REFUSED rank {rank}: {e}", flush=True)
        else:
            g.launch_until_done(3)
        print(f"LAUNCHED rank {rank}", flush=True)
        return
    x = np.ones(2)
    g = eagle.Graph()
    g.add_node(allreduce(x, x), name="combine")
    g.build()
    if kind == "zero":   # launch(0) runs no replay: compared at its start, not in a collective
        try:
            g.launch(0 if rank == 0 else 2)
        except LaunchMismatchError as e:
            print(f"REFUSED rank {rank}: {e}", flush=True)
            g.launch(2)   # rank 1's launch(2) must not pair with this one
        print(f"LAUNCHED rank {rank} {x.tolist()}", flush=True)
        return
    g.launch(3 if rank == 0 else 4)
    print(f"LAUNCHED rank {rank}", flush=True)


def launch_missing():
    x = np.ones(2)
    g = eagle.Graph()
    g.add_node(allreduce(x, x), name="combine")
    g.build()
    if rank == 0:
        g.launch(2)
        print(f"LAUNCHED rank {rank}", flush=True)
    else:
        time.sleep(30)   # never launches: rank 0 must not wait for ever


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "results":
        results(sys.argv[2] if len(sys.argv) > 2 else "auto")
    elif mode.startswith("mismatch_"):
        mismatch(mode.split("_", 1)[1])
    elif mode in ("until_done", "build_fails_on_one_rank", "launch_counts"):
        globals()[mode](*sys.argv[2:])
    else:
        globals()[mode]()
