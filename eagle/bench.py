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
launch whose kernel turns from cheap (a million calls) to 2 ms a call.

Every runner is timed best-of-k, interleaved round by round in this one
process, each timing long enough (tens of ms) for the clock not to matter.
Ratios are against eagle with all threads. Peers that are not installed are
skipped with a note, never faked.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import gc
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

import eagle
from eagle import kernels
from eagle.cpu._executor import have_openmp
from eagle.graph import native, opaque, ufunc
from eagle.native import CTYPES_KERNEL

TINY = 4
BIG = 4_000_000
#: replays eagle runs once after build(), before any timing
WARMUP = 10


# ---- the graphs ---------------------------------------------------------------

@dataclass
class Case:
    """A graph and what the peers need to run the same work."""

    title: str
    samples: int
    graph: eagle.Graph
    fns: dict            # node name -> a no-argument callable doing the node's work
    kernel_nodes: dict = field(default_factory=dict)   # node name -> NativeNode (native graphs)
    big: bool = False
    #: peers(threads, tools) -> the runners to time beside eagle, for cases that bring their own
    peers: object = None

    @property
    def stages(self):
        return self.graph.stages

    @property
    def deps(self):
        """node name -> the names it must wait for."""
        out = {name: [] for name in self.graph.nodes}
        for before, after, _ in self.graph.dependencies:
            if before not in out[after]:
                out[after].append(before)
        return out


def seed_functions():
    """The seed page's arrays and its three functions, as a plain loop would call them."""
    x, left, right, out = np.arange(float(TINY)), np.zeros(TINY), np.zeros(TINY), np.zeros(TINY)

    def run_l():
        left[:] = 2 * x

    def run_r():
        right[:] = x + 1

    def run_join():
        out[:] = left + right

    return (x, left, right, out), (run_l, run_r, run_join)


def seed_case():
    (x, left, right, out), (run_l, run_r, run_join) = seed_functions()
    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return Case("seed graph: 3 opaque nodes", TINY, g, {"l": run_l, "r": run_r, "join": run_join})


def _native_case(title, samples, named_nodes, groups, big=False):
    g = eagle.Graph()
    for names in groups:
        nodes = [named_nodes[n] for n in names]
        if len(nodes) == 1:
            g.add_node(nodes[0], name=names[0])
        else:
            g.add_group(nodes, names=names)
    fns = {name: _ctypes_call(node, samples) for name, node in named_nodes.items()}
    return Case(title, samples, g, fns, kernel_nodes=dict(named_nodes), big=big)


def diamond_case():
    x, a, b, out = np.arange(float(TINY)), np.zeros(TINY), np.zeros(TINY), np.zeros(TINY)
    nodes = {"l": native(kernels.scale(2.0), reads={"x": x}, writes={"a": a}),
             "r": native(kernels.scale(3.0), reads={"x": x}, writes={"b": b}),
             "join": native(kernels.add(), reads={"a": a, "b": b}, writes={"out": out})}
    return _native_case("native diamond: 3 nodes", TINY, nodes, [["l", "r"], ["join"]])


def chain_case(n=10):
    bufs = [np.arange(float(TINY))] + [np.zeros(TINY) for _ in range(n)]
    nodes = {f"n{i}": native(kernels.scale(1.0), reads={"x": bufs[i]}, writes={"y": bufs[i + 1]})
             for i in range(n)}
    return _native_case(f"native chain: {n} nodes", TINY, nodes, [[k] for k in nodes])


def big_case(size):
    x, y = np.ones(size), np.zeros(size)
    nodes = {"scale": native(kernels.scale(2.0), reads={"x": x}, writes={"y": y})}
    amount = f"{size / 1e6:g}M" if size >= 1_000_000 else f"{size:,}"
    return _native_case(f"1 native node, {amount} doubles", size, nodes, [["scale"]], big=True)


def big_compute_case(size, degree=31):
    """One compute-bound node (a polynomial of degree 31 per sample): how replays
    scale with threads when memory bandwidth does not cap them."""
    x, y = np.random.default_rng(0).random(size), np.zeros(size)
    coefficients = np.linspace(0.1, 0.01, degree + 1)
    nodes = {"poly": native(kernels.polynomial(coefficients), reads={"x": x}, writes={"y": y})}
    amount = f"{size / 1e6:g}M" if size >= 1_000_000 else f"{size:,}"
    return _native_case(f"1 compute-bound node, {amount}", size, nodes, [["poly"]], big=True)


def seed_ufunc_case():
    """The seed graph with ufunc nodes: the loops NumPy would run, without a Python call."""
    (x, left, right, out), (run_l, run_r, run_join) = seed_functions()
    g = eagle.Graph()
    g.add_group([ufunc(np.multiply, {"x": x}, 2.0, out={"a": left}),
                 ufunc(np.add, {"x": x}, 1.0, out={"b": right})], names=["l", "r"])
    g.add_node(ufunc(np.add, {"a": left}, {"b": right}, out={"out": out}), name="join")
    fns = {"l": run_l, "r": run_r, "join": run_join}
    calls = [lambda: np.multiply(x, 2.0, out=left), lambda: np.add(x, 1.0, out=right),
             lambda: np.add(left, right, out=out)]

    def peers(threads, tools):
        loop = python_loop_runner([run_l, run_r, run_join], "Python loop, the seed's functions")
        loop.note = "goal: eagle <= 0.05x this"
        return [loop, python_loop_runner(calls, "Python loop, the same ufunc calls (out=)")]

    return Case("seed graph: 3 ufunc nodes", TINY, g, fns, peers=peers)


def ufunc_chain_case(size):
    """y = ((x * 1.5 + 0.25) * 0.5) + x: four ufunc nodes over millions of doubles."""
    x, t, y = np.random.default_rng(0).random(size), np.zeros(size), np.zeros(size)
    steps = [(np.multiply, {"x": x}, 1.5, {"t": t}), (np.add, {"t": t}, 0.25, {"t": t}),
             (np.multiply, {"t": t}, 0.5, {"t": t}), (np.add, {"t": t}, {"x": x}, {"y": y})]
    g = eagle.Graph()
    for k, (uf, a, b, o) in enumerate(steps):
        g.add_node(ufunc(uf, a, b, out=o), name=f"{uf.__name__}{k}")
    calls = [lambda: np.multiply(x, 1.5, out=t), lambda: np.add(t, 0.25, out=t),
             lambda: np.multiply(t, 0.5, out=t), lambda: np.add(t, x, out=y)]

    def peers(threads, tools):
        r = python_loop_runner(calls, "NumPy, the same ufunc calls (out=)")
        r.note = "goal: eagle on 2 threads >= 1.5x faster than this"
        return [r]

    amount = f"{size / 1e6:g}M" if size >= 1_000_000 else f"{size:,}"
    return Case(f"multiply-add chain: 4 ufunc nodes, {amount} doubles", size, g,
                dict(zip(g.nodes, calls)), big=True, peers=peers)


def builtin_scale_case(size):
    """eagle.kernels.scale against the plain OpenMP C loop of y = a x."""
    x, y = np.random.default_rng(0).random(size), np.zeros(size)
    g = eagle.Graph()
    g.add_node(native(kernels.scale(2.0), reads={"x": x}, writes={"y": y}), name="scale")

    def peers(threads, tools):
        rs = []
        plain = tools.get("plain")
        if plain is not None:
            for t in sorted({threads, 1}, reverse=True):
                rs.append(Runner("plain C loop (OpenMP, cc -O3)", t,
                                 lambda n, t=t: plain.eagle_bench_plain_scale(
                                     n, t, size, 2.0, x.ctypes.data, y.ctypes.data)))
            rs[-1].note = "goal: eagle on 1 thread <= 1.05x this"
        rs.append(python_loop_runner([lambda: np.multiply(x, 2.0, out=y)], "NumPy np.multiply(out=)"))
        return rs

    amount = f"{size / 1e6:g}M" if size >= 1_000_000 else f"{size:,}"
    return Case(f"built-in kernel scale, {amount} doubles", size, g, {}, big=True, peers=peers)


def builtin_polynomial_case(size, degree=31):
    """eagle.kernels.polynomial against the plain C loop and NumPy's Horner loop."""
    x, y = np.random.default_rng(0).random(size), np.zeros(size)
    coefficients = np.linspace(0.1, 0.01, degree + 1)
    g = eagle.Graph()
    g.add_node(native(kernels.polynomial(coefficients), reads={"x": x}, writes={"y": y}), name="poly")
    acc = np.zeros(size)

    def numpy_horner():
        acc.fill(coefficients[-1])
        for ck in coefficients[-2::-1]:
            np.multiply(acc, x, out=acc)
            np.add(acc, ck, out=acc)

    def peers(threads, tools):
        rs = []
        plain = tools.get("plain")
        if plain is not None:
            for t in sorted({threads, 1}, reverse=True):
                rs.append(Runner("plain C loop (OpenMP, cc -O3)", t,
                                 lambda n, t=t: plain.eagle_bench_plain_polynomial(
                                     n, t, size, coefficients.ctypes.data, degree, x.ctypes.data,
                                     y.ctypes.data)))
            rs[-1].note = "goal: eagle on 1 thread <= 1.05x this"
        rs.append(python_loop_runner([numpy_horner], "NumPy Horner loop (out=)"))
        rs.append(python_loop_runner([lambda: np.polynomial.polynomial.polyval(x, coefficients)],
                                     "np.polynomial.polynomial.polyval"))
        return rs

    amount = f"{size / 1e6:g}M" if size >= 1_000_000 else f"{size:,}"
    return Case(f"built-in kernel polynomial (degree {degree}), {amount}", size, g, {}, big=True,
                peers=peers)


# ---- calling the kernels from outside eagle ------------------------------------------

class _KernelArgs:
    """A native node's kernel and its arguments as C values, kept alive together."""

    def __init__(self, node):
        arrays = node.arrays_in_order
        self.fn_address = node.kernel.address
        self.user_data = node.kernel.user_data_address
        self.data = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        self.strides = (ctypes.c_int64 * len(arrays))(*[a.strides[0] for a in arrays])
        self.arrays = arrays


def _ctypes_call(node, samples):
    """A no-argument callable running ``node``'s kernel over [0, samples) through ctypes
    (which releases the GIL for the call, so threads run it in parallel)."""
    return _ctypes_range_call(node)(0, samples)


def _ctypes_range_call(node):
    args = _KernelArgs(node)
    fn = CTYPES_KERNEL(args.fn_address)
    data = ctypes.cast(args.data, ctypes.POINTER(ctypes.c_char_p))
    strides = ctypes.cast(args.strides, ctypes.POINTER(ctypes.c_int64))
    ud = args.user_data

    def make(start, stop):
        def call(_keep=args):
            fn(start, stop, data, strides, ud)
        return call
    return make


_C_LOOP = r"""
#include <stdint.h>
typedef void (*kernel_t)(int64_t, int64_t, char **, const int64_t *, void *);
void eagle_bench_c_loop(int64_t n_replays, int32_t n_nodes, void **fns, char ***data,
                        const int64_t **strides, void **user_data, int64_t size)
{
    for (int64_t r = 0; r < n_replays; ++r)
        for (int32_t i = 0; i < n_nodes; ++i)
            ((kernel_t)fns[i])(0, size, data[i], strides[i], user_data[i]);
}
"""


_PLAIN_LOOPS = r"""
#include <stdint.h>
void eagle_bench_plain_scale(int64_t reps, int32_t threads, int64_t n, double a,
                             const double *x, double *y)
{
    for (int64_t r = 0; r < reps; ++r) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t i = 0; i < n; ++i)
            y[i] = a * x[i];
    }
}
void eagle_bench_plain_polynomial(int64_t reps, int32_t threads, int64_t n, const double *c,
                                  int64_t degree, const double *x, double *y)
{
    for (int64_t r = 0; r < reps; ++r) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            double acc = c[degree];
            for (int64_t k = degree - 1; k >= 0; --k)
                acc = acc * x[i] + c[k];
            y[i] = acc;
        }
    }
}
"""


def _compile_helper(source, name, flag_sets):
    """(ctypes library, None) for C ``source`` built with the first of ``flag_sets`` that
    compiles, or (None, why it is skipped). The library stays mapped after its files go."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return None, "no C compiler (cc) found"
    tmp = tempfile.mkdtemp(prefix="eagle_bench_")
    src, lib = os.path.join(tmp, f"{name}.c"), os.path.join(tmp, f"{name}.so")
    with open(src, "w") as f:
        f.write(source)
    try:
        for k, flags in enumerate(flag_sets):
            try:
                subprocess.run(cc.split() + flags + ["-shared", "-fPIC", "-o", lib, src],
                               check=True, capture_output=True, timeout=60)
                break
            except subprocess.CalledProcessError:
                if k == len(flag_sets) - 1:
                    raise
        return ctypes.CDLL(lib), None
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"{cc} could not build the {name} helper ({exc}; {detail.decode(errors='replace').strip()[:200]})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile_plain_loops():
    """(ctypes library, None) of plain C loops doing what eagle's built-in kernels do
    (``cc -O3 -fopenmp``; serial where the compiler has no OpenMP), or (None, why not)."""
    dll, why = _compile_helper(_PLAIN_LOOPS, "plain", [["-O3", "-fopenmp"], ["-O3"]])
    if dll is None:
        return None, why
    i64, i32, dbl, ptr = ctypes.c_int64, ctypes.c_int32, ctypes.c_double, ctypes.c_void_p
    dll.eagle_bench_plain_scale.argtypes = [i64, i32, i64, dbl, ptr, ptr]
    dll.eagle_bench_plain_scale.restype = None
    dll.eagle_bench_plain_polynomial.argtypes = [i64, i32, i64, ptr, i64, ptr, ptr]
    dll.eagle_bench_plain_polynomial.restype = None
    return dll, None


def compile_c_loop():
    """(ctypes function, None) for the C loop helper, or (None, why it is skipped)."""
    dll, why = _compile_helper(_C_LOOP, "loop", [["-O2"]])
    if dll is None:
        return None, why
    fn = dll.eagle_bench_c_loop
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, ctypes.c_int32] + [ctypes.c_void_p] * 4 + [ctypes.c_int64]
    return fn, None


def c_loop_runner(c_loop, case):
    """Replays in C: the graph's kernels in recording order, n times, in one call."""
    order = [case.kernel_nodes[name] for name in case.graph.nodes]
    args = [_KernelArgs(node) for node in order]
    k = len(args)
    fns = (ctypes.c_void_p * k)(*[a.fn_address for a in args])
    data = (ctypes.c_void_p * k)(*[ctypes.addressof(a.data) for a in args])
    strides = (ctypes.c_void_p * k)(*[ctypes.addressof(a.strides) for a in args])
    uds = (ctypes.c_void_p * k)(*[a.user_data for a in args])
    keep = (args, fns, data, strides, uds)

    def run(n, _keep=keep):
        c_loop(n, k, fns, data, strides, uds, case.samples)
    return run


# ---- the runners ----------------------------------------------------------------

@dataclass
class Runner:
    name: str
    threads: int
    run: object              # run(n): n replays
    prepare: object = None   # called before each timing, outside it
    n: int = 1
    best: float = float("inf")
    note: str = ""


def eagle_runner(case, threads, label):
    g = case.graph

    def prepare():
        eagle.set_num_threads(threads)

    return Runner(label, threads, g.launch, prepare)


def python_loop_runner(fns, name):
    fns = tuple(fns)
    if len(fns) == 3:
        f1, f2, f3 = fns

        def run(n):
            for _ in range(n):
                f1()
                f2()
                f3()
    else:
        def run(n):
            for _ in range(n):
                for f in fns:
                    f()
    return Runner(name, 1, run)


def thread_pool_runner(stages, threads, pool):
    """Per replay, per stage: submit the stage's callables, wait for them all."""
    stages = [tuple(s) for s in stages]
    submit = pool.submit

    def run(n):
        for _ in range(n):
            for stage in stages:
                futures = [submit(f) for f in stage]
                for fut in futures:
                    fut.result()
    return Runner("ThreadPoolExecutor, a stage at a time", threads, run)


def _after(fn, *_deps):
    fn()


def dask_runner(dask_get, tasks, deps, threads):
    """tasks: key -> callable; deps: key -> keys it waits for. One dask.threaded.get per replay."""
    dsk = {k: (_after, fn, *deps.get(k, ())) for k, fn in tasks.items()}
    waited_on = {d for ds in deps.values() for d in ds}
    sinks = [k for k in tasks if k not in waited_on]

    def run(n):
        for _ in range(n):
            dask_get(dsk, sinks, num_workers=threads)
    return Runner("dask.threaded.get on a dict graph", threads, run)


def runners_for(case, threads, c_loop, dask_get, pool, tools=None):
    split_note = f"range split in {threads} chunks" if case.big and threads > 1 else ""
    rs = [eagle_runner(case, threads, "eagle launch(n)")]
    if threads > 1:
        rs.append(eagle_runner(case, 1, "eagle launch(n)"))
    if case.peers is not None:
        return rs + case.peers(threads, tools or {})
    names = case.graph.nodes
    if not case.kernel_nodes:
        rs.append(python_loop_runner([case.fns[k] for k in names], "Python loop, same functions"))
    else:
        if not case.big:
            empties = [(lambda: None) for _ in names]
            r = python_loop_runner(empties, f"Python loop, {len(names)} empty functions")
            rs.append(r)
        rs.append(python_loop_runner([case.fns[k] for k in names], "Python loop, same kernels (ctypes)"))
        if c_loop is not None:
            rs.append(Runner("C loop, same kernels", 1, c_loop_runner(c_loop, case)))
    if case.big and threads > 1:
        # one node: a thread pool or dask would split its range, as eagle does
        (node,) = case.kernel_nodes.values()
        make = _ctypes_range_call(node)
        n = case.samples
        chunks = [make(n * t // threads, n * (t + 1) // threads) for t in range(threads)]
        r = thread_pool_runner([chunks], threads, pool)
        r.note = split_note
        rs.append(r)
        if dask_get is not None:
            r = dask_runner(dask_get, {f"c{t}": f for t, f in enumerate(chunks)}, {}, threads)
            r.note = split_note
            rs.append(r)
    else:
        rs.append(thread_pool_runner([[case.fns[k] for k in st] for st in case.stages], threads, pool))
        if dask_get is not None:
            rs.append(dask_runner(dask_get, dict(case.fns), case.deps, threads))
    return rs


# ---- timing ---------------------------------------------------------------------------

def _time_once(r, n):
    if r.prepare is not None:
        r.prepare()
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        r.run(n)
        return time.perf_counter() - t0
    finally:
        if gc_was:
            gc.enable()


def calibrate(r, target_s):
    """Pick replays per timing so that one timing lasts about target_s (this also warms up)."""
    n = 1
    while True:
        t = _time_once(r, n)
        if t >= target_s / 4 or n >= 1 << 24:
            break
        n = n * 10 if t < target_s / 100 else n * 2
    r.n = max(1, min(1 << 24, int(n * target_s / max(t, 1e-9))))


def measure(runners, rounds, target_s):
    for r in runners:
        calibrate(r, target_s)
    for _ in range(rounds):
        for r in runners:
            r.best = min(r.best, _time_once(r, r.n) / r.n)


# ---- the table ------------------------------------------------------------------------

def fmt_time(s):
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} µs"
    return f"{s * 1e3:.2f} ms"


def _teams(case):
    try:
        return ",".join(str(sp.team) for sp in case.graph.plan().stages)
    except Exception:
        return "?"


def print_table(results, threads, rounds, notes, out=None):
    out = out if out is not None else sys.stdout   # the stream at call time, not at import
    head = ("graph", "samples", "runner", "threads", "per replay", "× eagle", "")
    rows = []
    for case, runners, teams in results:
        ref = runners[0].best
        for i, r in enumerate(runners):
            note = r.note
            if r.name.startswith("eagle"):
                note = f"stage teams {teams[r.threads]}"
            rows.append((case.title if i == 0 else "", f"{case.samples:,}" if i == 0 else "",
                         r.name, str(r.threads), fmt_time(r.best), f"{r.best / ref:.2f}", note))
        rows.append(None)
    widths = [max(len(h), *(len(row[j]) for row in rows if row)) for j, h in enumerate(head)]
    right = {1, 3, 4, 5}

    def line(cells):
        return "  ".join(c.rjust(w) if j in right else c.ljust(w) for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(head), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in rows[:-1]:
        print(line(row) if row else "", file=out)
    print(file=out)
    print(f"per replay: best of {rounds} interleaved timings, each of many replays; "
          f"× eagle: time / eagle's with {threads} threads (below 1: faster than eagle)", file=out)
    print(f"eagle rows: after build() and a warm-up launch({WARMUP}); 'stage teams' is the team "
          "eagle chose per stage (1: run on the calling thread, no barrier)", file=out)
    for n in notes:
        print(f"note: {n}", file=out)


# ---- recording: shapes of graph that must record in linear time ---------------------

#: what the recording rows time; every shape records n native nodes that read one shared x
RECORDING_SHAPES = {
    "separate": "n nodes on separate arrays, add_node one by one",
    "group": "one add_group of the n nodes on separate arrays",
    "slices": "n nodes writing disjoint slices of one buffer",
}
RECORDING_SIZES = (4_000, 40_000)


def recording_nodes(shape, n, size=TINY):
    """The n nodes of a recording shape (see RECORDING_SHAPES), made before any timing."""
    x = np.arange(float(size))
    if shape == "slices":
        buf = np.zeros(size * n)
        outs = [buf[i * size:(i + 1) * size] for i in range(n)]
    elif shape in ("separate", "group"):
        outs = [np.zeros(size) for _ in range(n)]
    else:
        raise ValueError(f"unknown recording shape {shape!r}")
    k = kernels.scale(2.0)
    return [native(k, reads={"x": x}, writes={"y": y}) for y in outs]


def record_shape(shape, nodes):
    """A fresh graph with ``nodes`` recorded as the shape says (one group, or one by one)."""
    g = eagle.Graph()
    names = [f"n{i}" for i in range(len(nodes))]
    if shape == "group":
        g.add_group(nodes, names=names)
    else:
        for node, name in zip(nodes, names):
            g.add_node(node, name=name)
    return g


def measure_recording(sizes=RECORDING_SIZES, rounds=3):
    """{(shape, n): best seconds}, the shapes interleaved round by round, the garbage
    collector paused while a recording is timed (as ``timeit`` does)."""
    best = {}
    for n in sizes:
        for _ in range(rounds):
            for shape in RECORDING_SHAPES:
                nodes = recording_nodes(shape, n)
                gc.collect()
                gc.disable()
                try:
                    t0 = time.perf_counter()
                    record_shape(shape, nodes)
                    dt = time.perf_counter() - t0
                finally:
                    gc.enable()
                best[shape, n] = min(best.get((shape, n), dt), dt)
    return best


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
    print(f"recording: the nodes made beforehand, best of {rounds} interleaved rounds; × separate: "
          "time / the same number of nodes on separate arrays recorded one by one", file=out)

# ---- fixed costs, load and interrupts (the rows below the table) -----------------------

_C_EXTRA = r"""
#include <stdint.h>
#include <time.h>
void eagle_bench_noop(void) {}
/* cheap for the first state[0] calls, then about 2 ms a call */
void eagle_bench_slowing(int64_t start, int64_t stop, char **data, const int64_t *strides, void *ud)
{
    (void)start; (void)stop; (void)strides; (void)ud;
    int64_t *state = (int64_t *)data[0];
    if (__atomic_add_fetch(&state[1], 1, __ATOMIC_RELAXED) <= state[0])
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1e9 + (t.tv_nsec - t0.tv_nsec) < 2e6);
}
"""


def compile_extra():
    """The ctypes library of the rows below the table, or (None, why)."""
    return _compile_helper(_C_EXTRA, "extra", [["-O2"]])


def _best_per_call(fn, n, rounds):
    best = float("inf")
    for _ in range(rounds):
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(n)
            best = min(best, (time.perf_counter() - t0) / n)
        finally:
            gc.enable()
    return best


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
        a = min(a, _best_per_call(run_launch, n, 1))
        b = min(b, _best_per_call(run_noop, n, 1))
        c = min(c, _best_per_call(run_empty, n, 1))
    return ("launch(1), one native node, 1 sample (the Python loop's own cost taken off both)", a - c,
            "ctypes call of a C no-op", b - c)


def row_busy_neighbour(rounds, samples=2_000_000):
    """A native stage on the whole team (auto) beside busy processes, against 1 thread."""
    from eagle.cpu._executor import usable_cpus

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
        for _ in range(max(rounds, 7)):
            auto = min(auto, _best_per_call(g.launch, 20, 1))
            eagle.set_num_threads(1)
            try:
                one = min(one, _best_per_call(g.launch, 20, 1))
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
        g.build(teams=teams)
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


def print_extra_rows(rounds, out=sys.stdout):
    dll, why = compile_extra()
    print(file=out)
    if dll is None:
        print(f"fixed costs and Ctrl-C: skipped ({why})", file=out)
        return
    rows = [row_launch1(dll, rounds)]
    busy = row_busy_neighbour(rounds)
    if busy is not None:
        rows.append(busy)
    print("case                                                      eagle      reference                    ratio",
          file=out)
    for what, t, ref_name, ref in rows:
        print(f"{what}\n    {fmt_time(t):>58}  {ref_name:<28} {fmt_time(ref):>9}  {t / ref:.2f}", file=out)
    import signal
    if os.name == "posix" and hasattr(signal, "SIGINT"):
        cases = [(1, "serial", False, "1 thread, nogil"), (1, "serial", True, "1 thread, GIL (opaque node)")]
        if eagle.have_openmp() and eagle.get_num_threads() > 1:
            cases.append((2, "parallel", False, "2 threads, team"))
        for n_threads, teams, gil, label in cases:
            ms = ctrl_c_latency(dll, n_threads, teams, gil)
            print(f"Ctrl-C latency, kernel cheap for 1,000,000 calls then 2 ms each, {label}: {ms:.1f} ms "
                  "(target < 100 ms)", file=out)



def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m eagle.bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer and shorter timings (a few seconds)")
    p.add_argument("--rounds", type=int, help="interleaved timings per runner; the best counts (default 7, quick 3)")
    p.add_argument("--target-ms", type=float, help="length of one timing (default 40 ms, quick 8 ms)")
    p.add_argument("--big", type=int, default=BIG, help=f"samples of the one-node graph (default {BIG:,})")
    p.add_argument("--threads", type=int, help="threads for 'all' (default: eagle.get_num_threads())")
    p.add_argument("--only", help="run only the graphs whose title contains this text (e.g. ufunc)")
    p.add_argument("--recording", type=int, nargs="*",
                   help="node counts of the recording rows (default 4000 40000, quick 4000; none: skip)")
    args = p.parse_args(argv)
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
          f"dask {dask_version or 'not installed'} · {threads} threads "
          f"(OpenMP {'yes' if have_openmp() else 'no'}, CPUs {os.cpu_count()}) · "
          f"{platform.machine()}")
    print(flush=True)

    cases = [seed_case(), diamond_case(), chain_case(10), big_case(args.big),
             big_compute_case(args.big // 4),
             seed_ufunc_case(), ufunc_chain_case(args.big), builtin_scale_case(args.big),
             builtin_polynomial_case(args.big // 4)]
    if args.only:
        cases = [c for c in cases if args.only in c.title]
    results = []
    t_start = time.perf_counter()
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
        RECORDING_SIZES[:1] if args.quick else RECORDING_SIZES)
    if sizes:
        print()
        rec_rounds = 2 if args.quick else 3
        print_recording(measure_recording(sizes, rec_rounds), rec_rounds)
    print_extra_rows(rounds)
    print(f"({time.perf_counter() - t_start:.1f} s)")


if __name__ == "__main__":
    main()
