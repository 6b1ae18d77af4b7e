"""``python -m eagle.bench.mpi``: collective nodes beside mpi4py, and replays as ranks grow.

It starts ``mpiexec -n N python -m eagle.bench.mpi --worker`` for N in 1, 2, 4
(the ranks may outnumber the cores: the table says how many there are) and prints:

* **allreduce node vs comm.Allreduce**: one replay of a graph holding one
  ``allreduce`` node against one ``comm.Allreduce(send, recv)`` call from a
  plain Python loop, on the same buffers (goal: ratio <= 1.0);
* **weak scaling**: one replay of a step with fixed work per rank (a native
  polynomial kernel over the rank's samples, then an allreduce of a small
  tally) on 1, 2 and 4 ranks.

Each figure is the best of several interleaved rounds; a round's time is the
slowest rank's. Run it under ``mpiexec`` yourself (``mpiexec -n 4 python -m
eagle.bench.mpi --worker``) to measure one rank count with your own launcher.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from eagle._text import duration

SIZES = (8, 65536)          # float64 elements of the allreduce
WEAK_SAMPLES = 200_000      # per rank
DEGREE = 16


def _timed(comm, fn):
    from mpi4py import MPI

    comm.Barrier()
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return comm.allreduce(t, op=MPI.MAX)


def worker(quick):
    from mpi4py import MPI

    import eagle
    from eagle import kernels
    from eagle.graph import allreduce, native

    comm = MPI.COMM_WORLD
    rounds = 3 if quick else 7
    out = {"ranks": comm.Get_size(), "library": " ".join(MPI.Get_library_version().splitlines()[0].split()),
           "threads": eagle.get_num_threads(), "allreduce": {}, "weak": None}
    for n in SIZES:
        replays = (200 if quick else 2000) if n <= 1024 else (20 if quick else 200)
        send, recv = np.ones(n), np.zeros(n)
        g = eagle.Graph()
        g.add_node(allreduce(send, recv, comm=comm))
        g.build()
        g.launch(10)
        Allreduce = comm.Allreduce

        def loop():
            for _ in range(replays):
                Allreduce(send, recv)

        node_t, loop_t = [], []
        for k in range(rounds):   # interleaved, each first in every other round
            if k % 2:
                loop_t.append(_timed(comm, loop) / replays)
            node_t.append(_timed(comm, lambda: g.launch(replays)) / replays)
            if not k % 2:
                loop_t.append(_timed(comm, loop) / replays)
        out["allreduce"][n] = (min(node_t), min(loop_t))
    m = WEAK_SAMPLES // (10 if quick else 1)
    x = np.linspace(0.0, 1.0, m)
    y = np.zeros(m)
    tally = np.zeros(8)
    g = eagle.Graph()
    g.add_node(native(kernels.polynomial([1.0 / (k + 1) for k in range(DEGREE + 1)]), reads={"x": x},
                      writes={"y": y}), name="work")
    g.add_node(allreduce(y[:8], tally, comm=comm), name="tally")
    g.build()
    g.launch(3)
    replays = 5 if quick else 30
    out["weak"] = (m, min(_timed(comm, lambda: g.launch(replays)) / replays for _ in range(rounds)))
    if comm.Get_rank() == 0:
        print("EAGLE_BENCH_MPI " + json.dumps(out), flush=True)


def _mpiexec():
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.exists(beside) else shutil.which("mpiexec")


def _fmt(t):
    return f"{duration(t * 1e9):>12}"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m eagle.bench.mpi", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter timings")
    p.add_argument("--ranks", default="1,2,4", help="rank counts to run (default 1,2,4)")
    p.add_argument("--worker", action="store_true", help="measure in this MPI job (under mpiexec)")
    args = p.parse_args(argv)
    if args.worker:
        worker(args.quick)
        return None
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        print("eagle.bench.mpi: mpi4py is not installed (pip install 'eagle[mpi]'); nothing to measure")
        return None
    launcher = _mpiexec()
    if launcher is None:
        print("eagle.bench.mpi: no mpiexec found; nothing to measure")
        return None
    from eagle.cpu.threads import usable_cpus

    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    results = []
    for n in [int(v) for v in args.ranks.split(",")]:
        cmd = [launcher, "-n", str(n), sys.executable, "-m", "eagle.bench.mpi", "--worker"] + \
              (["--quick"] if args.quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("EAGLE_BENCH_MPI ")), None)
        if proc.returncode != 0 or line is None:
            print(f"eagle.bench.mpi: {' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            continue
        results.append(json.loads(line.split(" ", 1)[1]))
    if not results:
        return results
    cores = os.cpu_count()
    print(f"eagle.bench.mpi · {cores} CPU cores on this machine ({usable_cpus()} usable) · "
          f"{results[0]['library']} · {results[0]['threads']} eagle thread(s) per rank")
    print("ranks beyond the cores are oversubscribed: they share cores and MPI's busy-waiting, not the")
    print("call, sets their times (the node's ratio is at most 1 only with ranks <= cores)\n")
    print("allreduce node vs comm.Allreduce from a Python loop, same buffers, per replay (slowest rank):")
    print(f"{'ranks':>5} {'float64s':>9} {'eagle node':>13} {'Python loop':>13} {'ratio':>7}")
    for r in results:
        for n, (node_t, loop_t) in r["allreduce"].items():
            over = " (oversubscribed)" if r["ranks"] > usable_cpus() else ""
            print(f"{r['ranks']:>5} {int(n):>9} {_fmt(node_t):>13} {_fmt(loop_t):>13} {node_t / loop_t:>7.2f}"
                  f"{over}")
    m = results[0]["weak"][0]
    print(f"\nweak scaling: polynomial (degree {DEGREE}) on {m:,} samples per rank, then an allreduce "
          "of 8 doubles, per replay:")
    base = results[0]["weak"][1]
    print(f"{'ranks':>5} {'replay':>13} {'vs ' + str(results[0]['ranks']) + ' rank(s)':>14}")
    for r in results:
        t = r["weak"][1]
        over = " (oversubscribed)" if r["ranks"] > usable_cpus() else ""
        print(f"{r['ranks']:>5} {_fmt(t):>13} {t / base:>13.2f}x{over}")
    return results


if __name__ == "__main__":
    main()
