"""The timing harness of ``python -m eagle.bench``: runners, and how they are timed.

A :class:`Runner` is one way to run a case's work n times (``run(n)``): eagle's
``g.launch(n)``, a plain Python loop, a loop in C, a thread pool, dask.
:func:`measure` times runners best-of-k, interleaved round by round in this one
process, each timing long enough (``target_s``, tens of ms) for the clock not to
matter; the garbage collector is paused while a timing runs.
"""
from __future__ import annotations

import ctypes
import gc
import time
from dataclasses import dataclass

import eagle
from eagle._text import duration

from .chelpers import KernelArgs, ctypes_range_call

#: replays eagle runs once after build(), before any timing
WARMUP = 10


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


def c_loop_runner(c_loop, case):
    """Replays in C: the graph's kernels in recording order, n times, in one call."""
    order = [case.kernel_nodes[name] for name in case.graph.nodes]
    args = [KernelArgs(node) for node in order]
    k = len(args)
    fns = (ctypes.c_void_p * k)(*[a.fn_address for a in args])
    data = (ctypes.c_void_p * k)(*[ctypes.addressof(a.data) for a in args])
    strides = (ctypes.c_void_p * k)(*[ctypes.addressof(a.strides) for a in args])
    uds = (ctypes.c_void_p * k)(*[a.user_data for a in args])
    keep = (args, fns, data, strides, uds)

    def run(n, _keep=keep):
        c_loop(n, k, fns, data, strides, uds, case.samples)
    return run


def runners_for(case, threads, c_loop, dask_get, pool, tools=None):
    """The runners timed for one case (see ``eagle.bench.cases.Case``): eagle with all
    threads first (the reference of the ratios), then 1 thread, then the peers."""
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
        make = ctypes_range_call(node)
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


def best_per_call(fn, n, rounds):
    """Best-of-``rounds`` seconds per call of ``fn(n)`` (n calls), the collector paused."""
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


def fmt_time(s):
    """A time given in seconds, as eagle prints times (``eagle._text.duration``)."""
    return duration(s * 1e9)