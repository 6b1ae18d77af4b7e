"""``python -m eagle.bench``: eagle's per-replay time beside what you would otherwise use.

For the same graphs (the seed graph of three opaque nodes; a native diamond; a
chain of 10 native nodes; one native node on 4 million doubles) it times one
replay of each way to run the graph:

* eagle's ``g.launch(n)``, with all threads and with 1;
* a plain Python loop calling the same functions (for native graphs: a loop
  calling one empty Python function per node, the floor of any Python-driven
  loop, and a loop calling the same kernels through ctypes);
* a loop in C calling the same kernels (a tiny helper compiled with ``cc`` at
  run time; skipped with a note when there is no compiler);
* ``concurrent.futures.ThreadPoolExecutor`` running each stage's nodes and
  waiting for them before the next stage;
* dask's threaded scheduler (``dask.threaded.get``) on a dict graph with the
  same dependencies.

A second table times *recording*: n nodes on separate arrays recorded one by
one (the reference), the same nodes recorded as one ``add_group``, and n nodes
writing disjoint slices of one buffer, at 4,000 and 40,000 nodes (``--recording``).
Below the table, rows for eagle's fixed costs, load and interrupts: ``launch(1)``
beside one ctypes call of a C no-op; a native stage under ``auto`` beside busy
processes, against the same stage on 1 thread; and the Ctrl-C latency of a
launch whose kernel turns from cheap (a million calls) to 2 ms a call; the random nodes
(``normal`` and the distributions: exponential, integers, poisson, binomial, 1 million
samples) on 1 thread and on all beside NumPy's ``Generator``, the distributions' rows on all
threads with the team forced and their scaling over 1 thread; and four ufunc
nodes over 16M doubles (4M with --quick) on one thread, fused into sample tiles and
not, beside the same NumPy calls (``eagle.bench.tiles``); and the heat equation on a 2-D grid
until converged, its check in the graph, beside the NumPy loop (``eagle.bench.heat``); slab
transport until every particle is done, its tallies as reduction nodes, beside the NumPy loop
that removes finished particles (``eagle.bench.slab``); four stencil sweeps of npbench
(jacobi_1d, jacobi_2d, heat_3d, fdtd_2d) as eagle graphs beside their NumPy functions, numba
``prange`` and JAX ``jit`` (``eagle.bench.stencils``); the SIR step with tau-leaping over
replicate populations, binomial nodes with per-replicate ``n`` and ``p``, beside the NumPy loop
with ``rng.binomial``, numba ``prange`` and JAX ``jit`` (``eagle.bench.sir``); and steps
captured with ``eagle.capture`` beside the hand-built graphs of the same steps
(``eagle.bench.capture``).

Every runner is timed best-of-k, interleaved round by round in this one
process, each timing long enough (tens of ms) for the clock not to matter.
Ratios are against eagle with all threads. Peers that are not installed are
skipped with a note, never faked.

The graphs are ``eagle.bench.cases`` (shared with the tour and asv), the timing
``eagle.bench.timing``, the C helpers ``eagle.bench.chelpers``; this module is
the command line and its tables.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import os
import platform
import subprocess
import sys
import textwrap
import time

import numpy as np

import eagle
from eagle import kernels
from eagle.cpu.threads import have_openmp
from eagle.graph import native, opaque
from eagle.native import CTYPES_KERNEL

from . import monte_carlo
from .cases import BIG, RECORDING_SHAPES, RECORDING_SIZES, bench_cases, measure_recording
from .chelpers import compile_c_loop, compile_extra, compile_plain_loops
from .capture import rows_capture
from .heat import rows_heat
from .masked import rows_masked
from .sir import rows_sir
from .slab import rows_slab
from .stencils import rows_stencils
from .tiles import SAMPLES as TILE_SAMPLES, rows_fused_tiles
from .timing import WARMUP, best_per_call, fmt_time, measure, runners_for


#: --quick: samples of the one-node graphs, nodes of the recording rows
QUICK_BIG = BIG // 4
QUICK_RECORDING = 1_000


# ---- the table ------------------------------------------------------------------------

def _teams(case):
    try:
        return ",".join(str(sp.team) for sp in case.graph.plan().stages)
    except Exception:
        return "?"


#: the widest line the tables print (a terminal of 100 columns shows them unwrapped)
WIDTH = 99


def _wrapped(text, out, indent="  "):
    print(textwrap.fill(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False), file=out)


def print_table(results, threads, rounds, notes, out=None):
    """One block per graph: its title and size on a line, then a row per runner; a note
    that would pass WIDTH columns goes on its own line below its row."""
    out = out if out is not None else sys.stdout   # the stream at call time, not at import
    head = ("runner", "threads", "per replay", "× eagle")
    blocks = []
    for case, runners, teams in results:
        ref = runners[0].best
        rows = []
        for r in runners:
            note = f"stage teams {teams[r.threads]}" if r.name.startswith("eagle") else r.note
            rows.append((r.name, str(r.threads), fmt_time(r.best), f"{r.best / ref:.2f}", note))
        blocks.append((f"{case.title} ({case.samples:,} samples)", rows))
    widths = [max(len(h), *(len(row[j]) for _, rows in blocks for row in rows)) for j, h in enumerate(head)]

    def line(cells):
        return "  " + "  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(cells, widths)))

    print(line(head).rstrip(), file=out)
    print("  " + "  ".join("-" * w for w in widths), file=out)
    for k, (title, rows) in enumerate(blocks):
        if k:
            print(file=out)
        print(title, file=out)
        for *cells, note in rows:
            text = line(cells)
            if note and len(text) + 2 + len(note) <= WIDTH:
                print(f"{text}  {note}", file=out)
            else:
                print(text, file=out)
                if note:
                    print(textwrap.fill(note, WIDTH, initial_indent="      ", subsequent_indent="      "),
                          file=out)
    print(file=out)
    _wrapped(f"per replay: best of {rounds} interleaved timings, each of many replays; "
             f"× eagle: time / eagle's with {threads} threads (below 1: faster than eagle)", out)
    _wrapped(f"eagle rows: after build() and a warm-up launch({WARMUP}); 'stage teams' is the team "
             "eagle chose per stage (1: run on the calling thread, no barrier)", out)
    for n in notes:
        _wrapped(f"note: {n}", out)


# ---- the recording rows ------------------------------------------------------------

def print_recording(best, rounds, out=None):
    out = sys.stdout if out is None else out
    head = ("recording", "nodes", "time", "× separate")
    rows = [(RECORDING_SHAPES[shape], f"{n:,}", fmt_time(t), f"{t / best['separate', n]:.2f}")
            for (shape, n), t in best.items()]
    widths = [max(len(h), *(len(row[j]) for row in rows)) for j, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(cells, widths)))

    print(line(head), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows:
        print(line(row), file=out)
    _wrapped(f"recording: the nodes made beforehand, best of {rounds} interleaved rounds; × separate: "
             "time / the same number of nodes on separate arrays recorded one by one", out)


# ---- fixed costs, load and interrupts (the rows below the table) -----------------------

def row_launch1(dll, rounds):
    """launch(1) of a one-node graph on 1 sample, beside one ctypes call of a C no-op."""
    x, y = np.ones(1), np.zeros(1)
    g = eagle.Graph()
    g.add_node(native(kernels.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build()
    g.launch(WARMUP)
    noop = dll.eagle_bench_noop
    noop.restype, noop.argtypes = None, []
    launch = g.launch

    def run_launch(n):
        for _ in range(n):
            launch(1)

    def run_noop(n):
        for _ in range(n):
            noop()

    def run_empty(n):
        for _ in range(n):
            pass

    n = 100_000
    a, b, c = 1.0, 1.0, 1.0
    for _ in range(rounds):   # interleaved, best of each
        a = min(a, best_per_call(run_launch, n, 1))
        b = min(b, best_per_call(run_noop, n, 1))
        c = min(c, best_per_call(run_empty, n, 1))
    if a <= c or b <= c:
        # on a loaded machine the empty loop's best can beat a call's best: a difference
        # would be negative (it printed "-150 ns"), so both are given whole
        return ("launch(1), one native node, 1 sample (the Python loop's own cost included)", a,
                "ctypes call of a C no-op", b)
    return ("launch(1), one native node, 1 sample (the Python loop's own cost taken off both)", a - c,
            "ctypes call of a C no-op", b - c)


def row_busy_neighbour(rounds, samples=2_000_000, min_rounds=7):
    """A native stage on the whole team (auto) beside busy processes, against 1 thread."""
    from eagle.cpu.threads import usable_cpus

    threads = eagle.get_num_threads()
    if threads < 2:
        return None
    x, y = np.ones(samples), np.zeros(samples)
    g = eagle.Graph()
    g.add_node(native(kernels.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build()
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(max(1, usable_cpus() - 1))]
    try:
        time.sleep(0.3)
        g.launch(WARMUP)
        auto, one = float("inf"), float("inf")
        for _ in range(max(rounds, min_rounds)):
            auto = min(auto, best_per_call(g.launch, 20, 1))
            eagle.set_num_threads(1)
            try:
                one = min(one, best_per_call(g.launch, 20, 1))
            finally:
                eagle.set_num_threads(threads)
        teams = g.plan().stages[0]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return (f"axpy on {samples:,} doubles, auto ({threads} threads), {len(procs)} busy process(es) beside "
            f"[team {teams.team}: {teams.verdict or 'chosen by the cost rule alone'}]", auto,
            "the same, 1 thread", one)


def ctrl_c_latency(dll, n_threads, teams, with_gil, cheap=1_000_000):
    """ms from SIGINT to the launch returning, when a kernel turns from cheap to 2 ms a call
    after `cheap` calls."""
    import signal
    import threading

    state = np.array([cheap, 0], dtype=np.int64)
    y = np.zeros(4)
    g = eagle.Graph()
    kernel = CTYPES_KERNEL(ctypes.cast(dll.eagle_bench_slowing, ctypes.c_void_p).value)
    g.add_node(native(kernel, reads={"state": state}, writes={"y": y}), name="slowing")
    if with_gil:
        g.add_node(opaque([].clear, reads={"y": y}), name="gil")
    before = eagle.get_num_threads()
    eagle.set_num_threads(n_threads)
    sent = []

    def interrupt():
        while state[1] < cheap + 20:
            time.sleep(0.001)
        time.sleep(0.02)
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    try:
        g.build(cpu=eagle.CpuOptions(teams=teams))
        t = threading.Thread(target=interrupt, daemon=True)
        t.start()
        try:
            g.launch(10 ** 12)
        except KeyboardInterrupt:
            return (time.perf_counter() - sent[0]) * 1e3
        finally:
            t.join()
    finally:
        eagle.set_num_threads(before)
    return float("nan")


def rows_normal(rounds, samples=1_000_000):
    """A ``normal`` node on 1 thread and on all, against NumPy's
    ``default_rng().standard_normal(out=)`` on the same array, interleaved."""
    from .cases import normal_graph

    g, z = normal_graph(samples)
    g.build(cpu=eagle.CpuOptions(teams="serial"))
    gp, _ = normal_graph(samples)
    gp.build()
    rng = np.random.default_rng()
    g.launch(3)
    gp.launch(3)
    threads = eagle.get_num_threads()
    runners = {"serial": lambda n: g.launch(n), "team": lambda n: gp.launch(n),
               "numpy": lambda n: [rng.standard_normal(out=z) for _ in range(n)]}
    best = {k: float("inf") for k in runners}
    for _ in range(rounds):
        for k, fn in runners.items():
            best[k] = min(best[k], best_per_call(fn, 5, 1))
    return [(f"normal node, {samples:,} float64, 1 thread", best["serial"],
             "NumPy standard_normal(out=)", best["numpy"]),
            (f"normal node, {samples:,} float64, {threads} threads (auto)", best["team"],
             "NumPy standard_normal(out=)", best["numpy"])]


def rows_distributions(rounds, samples=1_000_000):
    """Each distribution node (``cases.DISTRIBUTIONS``) on 1 thread and on all, against
    NumPy's ``Generator`` drawing the same distribution, interleaved. On all threads the
    team is forced (``teams="parallel"``), so the row is the node's thread scaling, given
    in its label as the 1-thread time over the team's."""
    from .cases import DISTRIBUTIONS, distribution_graph

    rows = []
    threads = eagle.get_num_threads()
    rng = np.random.default_rng()
    for name in DISTRIBUTIONS:
        g, out, ref = distribution_graph(name, samples)
        g.build(cpu=eagle.CpuOptions(teams="serial"))
        gp, _, _ = distribution_graph(name, samples)
        gp.build(cpu=eagle.CpuOptions(teams="parallel"))
        g.launch(2)
        gp.launch(2)
        runners = {"serial": lambda n: g.launch(n), "team": lambda n: gp.launch(n),
                   "numpy": lambda n: [ref(rng, out) for _ in range(n)]}
        best = {k: float("inf") for k in runners}
        for _ in range(rounds):
            for k, fn in runners.items():
                best[k] = min(best[k], best_per_call(fn, 3, 1))
        kind = name.split()[0]
        rows += [(f"{name} node, {samples:,}, 1 thread", best["serial"], f"NumPy Generator.{kind}",
                  best["numpy"]),
                 (f"{name} node, {samples:,}, {threads} threads (team: "
                  f"{best['serial'] / best['team']:.2f}x its 1 thread)", best["team"],
                  f"NumPy Generator.{kind}", best["numpy"])]
    return rows


def print_extra_rows(rounds, out=None, quick=False, tile_samples=TILE_SAMPLES):
    out = out if out is not None else sys.stdout   # the stream at call time, not at import
    dll, why = compile_extra()
    print(file=out)
    print(f"{'random numbers':<42}{'eagle':>9}  {'reference':<28} {'time':>9}  ratio", file=out)
    size = 250_000 if quick else 1_000_000
    for what, t, ref_name, ref in rows_normal(rounds, samples=size) + rows_distributions(rounds, size):
        _wrapped(what, out)
        print(f"{fmt_time(t):>51}  {ref_name:<28} {fmt_time(ref):>9}  {t / ref:.2f}", file=out)
    if dll is None:
        print(f"fixed costs and Ctrl-C: skipped ({why})", file=out)
        return
    rows = [row_launch1(dll, rounds)]
    busy = row_busy_neighbour(rounds, samples=500_000 if quick else 2_000_000, min_rounds=3 if quick else 7)
    if busy is not None:
        rows.append(busy)
    rows += rows_fused_tiles(rounds, tile_samples)
    rows += rows_heat(min(rounds, 3), side=128 if quick else 512)
    rows += rows_masked(min(rounds, 5), n=100_000 if quick else 1_000_000)
    # every round: one run of the graph (~15 ms) and of the NumPy loop (~36 ms), cheap; a
    # 15 ms run feels the machine's noise (best of 3 read 1.7-2.9x NumPy, of 7 2.3-2.7x)
    rows += rows_slab(rounds, n=100_000 if quick else 1_000_000)
    rows += rows_stencils(min(rounds, 3), quick=quick)
    sir_rows, sir_notes = rows_sir(min(rounds, 3), replicates=10_000 if quick else 100_000,
                                   steps=40 if quick else 100)
    rows += sir_rows
    rows += [(f"captured: {what}", t, "the hand-built graph", ref)
             for what, t, ref, _ in rows_capture(min(rounds, 5), target_s=0.005 if quick else 0.02,
                                                  slab_sizes=(100_000,) if quick else (100_000, 1_000_000))]
    print(f"{'case':<42}{'eagle':>9}  {'reference':<28} {'time':>9}  ratio", file=out)
    for what, t, ref_name, ref in rows:
        _wrapped(what, out)
        print(f"{fmt_time(t):>51}  {ref_name:<28} {fmt_time(ref):>9}  {t / ref:.2f}", file=out)
    for n in sir_notes:
        print(f"note: {n}", file=out)
    import signal
    if os.name == "posix" and signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        # a background job of a non-interactive shell starts with SIGINT ignored: the
        # interrupt would never arrive and the launch(10**12) below would never end
        print("Ctrl-C latency: skipped (SIGINT is ignored or handled elsewhere in this process)", file=out)
    elif os.name == "posix" and hasattr(signal, "SIGINT"):
        cases = [(1, "serial", False, "1 thread, nogil"), (1, "serial", True, "1 thread, GIL (opaque node)")]
        if eagle.have_openmp() and eagle.get_num_threads() > 1:
            cases.append((2, "parallel", False, "2 threads, team"))
        print("Ctrl-C latency, a kernel cheap for 1,000,000 calls, then 2 ms a call (target < 100 ms):",
              file=out)
        for n_threads, teams, gil, label in cases:
            ms = ctrl_c_latency(dll, n_threads, teams, gil)
            print(f"  {label}: {ms:.1f} ms", file=out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m eagle.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"fewer, shorter timings on smaller arrays (--big {QUICK_BIG:,}, recording "
                        f"{QUICK_RECORDING:,} nodes): about 10 s of CPU")
    p.add_argument("--rounds", type=int, help="interleaved timings per runner; the best counts (default 7, quick 3)")
    p.add_argument("--target-ms", type=float, help="length of one timing (default 40 ms, quick 8 ms)")
    p.add_argument("--big", type=int, help=f"samples of the one-node graph (default {BIG:,}, quick {QUICK_BIG:,})")
    p.add_argument("--threads", type=int, help="threads for 'all' (default: eagle.get_num_threads())")
    p.add_argument("--only", help="run only the graphs whose title contains this text (e.g. ufunc)")
    p.add_argument("--paths", type=int,
                   help="paths of the Monte Carlo step (default 1,000,000, quick 250,000; 0: skip it)")
    p.add_argument("--steps", type=int, help="time steps of the Monte Carlo step (default 100, quick 10)")
    p.add_argument("--recording", type=int, nargs="*",
                   help=f"node counts of the recording rows (default 4000 40000, quick {QUICK_RECORDING}; "
                        "none: skip)")
    args = p.parse_args(argv)
    t_start, cpu_start = time.perf_counter(), time.process_time()   # the C helpers' compiling too
    rounds = args.rounds or (3 if args.quick else 7)
    target_s = (args.target_ms or (8.0 if args.quick else 40.0)) / 1e3
    threads = args.threads or eagle.get_num_threads()
    initial_threads = eagle.get_num_threads()

    notes = []
    c_loop, why = compile_c_loop()
    if c_loop is None:
        notes.append(f"C loop skipped: {why}")
    plain, why = compile_plain_loops()
    if plain is None:
        notes.append(f"plain C loops skipped: {why}")
    tools = {"plain": plain} if plain is not None else {}
    try:
        import dask
        import dask.threaded
        dask_get = dask.threaded.get
        dask_version = dask.__version__
    except ImportError as exc:
        dask_get, dask_version = None, None
        notes.append(f"dask skipped: not installed ({exc}); pip install dask")
    notes.append("the one-node graph has no empty-function row (its cost is the kernel's); "
                 "for it the ThreadPoolExecutor and dask split the range in chunks, as eagle does"
                 if threads > 1 else "the one-node graph has no empty-function row (its cost is the kernel's)")

    print(f"eagle {eagle.__version__} · Python {platform.python_version()} · numpy {np.__version__} · "
          f"dask {dask_version or 'not installed'} ·\n{threads} threads "
          f"(OpenMP {'yes' if have_openmp() else 'no'}, CPUs {os.cpu_count()}) · "
          f"{platform.machine()}")
    print(flush=True)

    cases = bench_cases(args.big or (QUICK_BIG if args.quick else BIG))
    if args.only:
        titles = [c.title for c in cases]
        cases = [c for c in cases if args.only in c.title]
        if not cases:   # an empty table failed on its column widths; say what there is
            p.error(f"--only {args.only!r}: no graph's title contains it; the titles: {'; '.join(titles)}")
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        try:
            for case in cases:
                case.graph.build()
                # eagle's first replays measure the nodes' costs, from which it picks each
                # stage's team; warm up as any benchmark would (see WARMUP)
                case.graph.launch(WARMUP)
                runners = runners_for(case, threads, c_loop, dask_get, pool, tools)
                measure(runners, rounds, target_s)
                teams = {}
                for t in {threads, 1}:
                    eagle.set_num_threads(t)
                    teams[t] = _teams(case)
                results.append((case, runners, teams))
        finally:
            eagle.set_num_threads(initial_threads)
    print_table(results, threads, rounds, notes)
    sizes = args.recording if args.recording is not None else (
        (QUICK_RECORDING,) if args.quick else RECORDING_SIZES)
    if sizes:
        print()
        rec_rounds = 2 if args.quick else 3
        print_recording(measure_recording(sizes, rec_rounds), rec_rounds)
    print_extra_rows(rounds, quick=args.quick,
                     tile_samples=TILE_SAMPLES // 4 if args.quick else TILE_SAMPLES)
    paths = args.paths if args.paths is not None else (250_000 if args.quick else 1_000_000)
    if paths > 0:
        print()
        monte_carlo.print_table(paths, args.steps or (10 if args.quick else 100),
                                rounds=2 if args.quick else 3, threads=threads)
    cpu = time.process_time() - cpu_start
    # the CPU time is what the run costs on an idle machine (less, with threads); the wall
    # time grows with whatever else the machine runs
    print(f"({time.perf_counter() - t_start:.1f} s, {cpu:.1f} s of CPU)")


if __name__ == "__main__":
    main()
