"""Captured steps beside hand-built graphs: ``eagle.capture`` of the plain NumPy step
against the graph a user builds node by node for the same step (``python -m eagle.bench
--capture``). Each case is the NumPy function as a user has it; capture adds at most three
lines. Both run the same number of replays from the same start and must give the same
arrays; the row is the ratio of their times (goal: captured <= 1.05x hand-built). Each
time is the best of interleaved rounds (the order reversed every other round), one timing
repeating replays or runs until it lasts ``TARGET_S`` at least, after a warm-up (a graph's
first replays measure its costs and choose its teams: timed, they made a first heat run
twice a warm one).

Cases: the GBM step (a ``normal`` node, then NumPy), 1-D and 2-D Jacobi and the 2-D FDTD
step (the stencils of PolyBench), the heat equation until converged (the body captured,
a ``while_loop`` on what it returns, beside ``eagle.bench.heat.HeatGraph`` of the same step,
and beside the one that takes the change from the Laplacian, a pass fewer), slab transport
until every particle is done (the step captured with its draws and its compaction, beside
``eagle.bench.slab.SlabGraph``: the same nodes, so the same tallies), at 100,000 and
1,000,000 particles.
"""
from __future__ import annotations

import time

import numpy as np

import eagle
from eagle.graph import compact, exponential, normal, ufunc, uniform, while_loop

from . import heat, slab

VOL, DRIFT = 0.02, 0.0001


# ---- the steps, as a NumPy user writes them -------------------------------------------

def gbm_step(S, z, w):
    normal(z, key=7)                     # the draw (NumPy's Generator cannot be captured)
    np.exp(VOL * z + DRIFT, out=w)
    S *= w


def jacobi_1d(A, B):
    B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
    A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_2d(A, B):
    B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
    A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def fdtd_2d(ex, ey, hz, fict):
    ey[0, :] = fict
    ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
    ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
    hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


# ---- the same steps, hand-built ----------------------------------------------------------

def gbm_by_hand(S, z, w):
    g = eagle.Graph()
    g.add_node(normal(z, key=7), name="draw")
    g.add_node(ufunc(np.multiply, VOL, z, out=w), name="diffuse")
    g.add_node(ufunc(np.add, w, DRIFT, out=w), name="drift")
    g.add_node(ufunc(np.exp, w, out=w), name="grow")
    g.add_node(ufunc(np.multiply, S, w, out=S), name="step")
    return g


def _sum_into(g, terms, out, scale, name):
    g.add_node(ufunc(np.add, terms[0], terms[1], out=out), name=f"{name}0")
    for k, t in enumerate(terms[2:]):
        g.add_node(ufunc(np.add, out, t, out=out), name=f"{name}{k + 1}")
    g.add_node(ufunc(np.multiply, scale, out, out=out), name=f"{name}_scale")


def jacobi_1d_by_hand(A, B):
    g = eagle.Graph()
    _sum_into(g, [A[:-2], A[1:-1], A[2:]], B[1:-1], 0.33333, "b")
    t = np.empty_like(A[1:-1])    # A[1:-1] is read by its own sum: a separate sum
    _sum_into(g, [B[:-2], B[1:-1], B[2:]], t, 0.33333, "a")
    g.add_node(ufunc(np.positive, t, out=A[1:-1]), name="a")
    return g


def jacobi_2d_by_hand(A, B):
    g = eagle.Graph()
    _sum_into(g, [A[1:-1, 1:-1], A[1:-1, :-2], A[1:-1, 2:], A[2:, 1:-1], A[:-2, 1:-1]], B[1:-1, 1:-1], 0.2, "b")
    t = np.empty_like(A[1:-1, 1:-1])
    _sum_into(g, [B[1:-1, 1:-1], B[1:-1, :-2], B[1:-1, 2:], B[2:, 1:-1], B[:-2, 1:-1]], t, 0.2, "a")
    g.add_node(ufunc(np.positive, t, out=A[1:-1, 1:-1]), name="a")
    return g


def fdtd_2d_by_hand(ex, ey, hz, fict):
    g = eagle.Graph()
    nx, ny = hz.shape
    dy, dx, d = np.empty((nx - 1, ny)), np.empty((nx, ny - 1)), np.empty((nx - 1, ny - 1))
    g.add_node(ufunc(np.positive, fict, out=ey[0, :]), name="source")
    g.add_node(ufunc(np.subtract, hz[1:, :], hz[:-1, :], out=dy), name="dy")
    g.add_node(ufunc(np.multiply, 0.5, dy, out=dy), name="hy")
    g.add_node(ufunc(np.subtract, ey[1:, :], dy, out=ey[1:, :]), name="ey")
    g.add_node(ufunc(np.subtract, hz[:, 1:], hz[:, :-1], out=dx), name="dx")
    g.add_node(ufunc(np.multiply, 0.5, dx, out=dx), name="hx")
    g.add_node(ufunc(np.subtract, ex[:, 1:], dx, out=ex[:, 1:]), name="ex")
    g.add_node(ufunc(np.subtract, ex[:-1, 1:], ex[:-1, :-1], out=d), name="cx")
    g.add_node(ufunc(np.add, d, ey[1:, :-1], out=d), name="cy")
    g.add_node(ufunc(np.subtract, d, ey[:-1, :-1], out=d), name="curl")
    g.add_node(ufunc(np.multiply, 0.7, d, out=d), name="scale")
    g.add_node(ufunc(np.subtract, hz[:-1, :-1], d, out=hz[:-1, :-1]), name="hz")
    return g


class HeatCaptured:
    """The heat loop with its body captured: three lines for eagle (marked) beside the
    sweep of ``heat.numpy_until_converged``, which is the NumPy loop's body as it is."""

    def __init__(self, u, tol=heat.TOL):
        def sweep(u, new):
            c = u[1:-1, 1:-1]
            new[1:-1, 1:-1] = c + heat.ALPHA * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4.0 * c)
            change = np.abs(new[1:-1, 1:-1] - c).max()
            u[1:-1, 1:-1] = new[1:-1, 1:-1]
            return change > tol

        self.body = eagle.capture(sweep, u, u.copy())                                                   # eagle: 1
        self.g = eagle.capture(lambda: while_loop(self.body.result, self.body, max_iterations=10**7)).build()  # 2

    def run(self):
        self.body.result[...] = True    # 3 (while_loop tests before a pass; NumPy's `while True:` does not)
        self.g.launch(1)
        return self.g.iterations(self.g.nodes[0])


def slab_step(x, mu, first, alive, ids, totals):
    """One step of ``slab.numpy_slab`` written for capture: the draws are eagle's random
    nodes (the same keys as ``slab.SlabGraph``'s) and finished particles leave through
    ``compact`` instead of ``x = x[keep]``."""
    d, u = np.empty_like(x), np.empty_like(x)
    uniform({"u": u, "mu": mu}, key=8, low=-1.0, high=1.0, ids=ids)   # one block, two numbers
    np.maximum(mu, first, out=mu)   # first: 1.0 on the first replay (along the normal), -1.0 after
    exponential(d, key=7, scale=1.0 / slab.SIGMA_T, ids=ids)
    x += mu * d
    refl, trans = x < 0.0, x > slab.THICKNESS
    leak = refl | trans
    absorbed = (u < slab.ABSORB_BELOW) & ~leak
    totals[0] += np.count_nonzero(refl)
    totals[1] += np.count_nonzero(trans)
    totals[2] += np.count_nonzero(absorbed)
    alive[...] = ~(leak | absorbed)
    np.minimum(first, -1.0, out=first)
    compact(alive, {"x": x}, ids=ids, min_dead_fraction=0.0)   # as slab.SlabGraph's


class SlabCaptured:
    """``slab_step`` captured; ``run()`` as ``slab.SlabGraph.run``."""

    def __init__(self, n):
        self.n = n
        self.x, self.mu, self.alive = np.zeros(n), np.zeros(n), np.ones(n, bool)
        self.first = np.ones(())
        self.ids, self.totals = np.arange(n, dtype=np.int64), np.zeros(3, np.int64)
        self.g = eagle.capture(slab_step, self.x, self.mu, self.first, self.alive, self.ids,
                               self.totals).build()

    def run(self, max_replays=10_000):
        self.x[:], self.alive[:], self.totals[:], self.first[...] = 0.0, True, 0, 1.0
        self.ids[:] = np.arange(self.n)
        self.g.restart(self.n)          # as slab.SlabGraph.run: compaction's state as made, too
        self.g.launch_until_done(max_replays)
        return tuple(int(t) for t in self.totals)


def _cases(size):
    r = np.random.default_rng(0)
    n1, n2 = 200_000 * size, 256 * size
    yield "GBM step", gbm_step, gbm_by_hand, [np.full(n1, 100.0), np.zeros(n1), np.zeros(n1)]
    yield "Jacobi 1-D", jacobi_1d, jacobi_1d_by_hand, [r.random(n1), r.random(n1)]
    yield "Jacobi 2-D", jacobi_2d, jacobi_2d_by_hand, [r.random((n2, n2)), r.random((n2, n2))]
    yield "FDTD 2-D", fdtd_2d, fdtd_2d_by_hand, [r.random((n2, n2)), r.random((n2, n2)), r.random((n2, n2)),
                                                 np.array(0.5)]


#: the shortest timing: replays (or runs) are repeated until one timing lasts this long
TARGET_S = 0.02


def _timed(fn, k):
    """Seconds of ``k`` calls of ``fn`` (each returns the seconds it timed itself)."""
    return sum(fn() for _ in range(k))


def _repeats(fn, target_s):
    """How many calls of ``fn`` one timing makes: the fewest (doubling) whose time, best of
    three, is ``target_s`` or more. The calls also warm ``fn`` up (a graph's first replays
    measure its costs and choose its teams)."""
    k = 1
    while min(_timed(fn, k) for _ in range(3)) < target_s and k < 1 << 20:
        k *= 2
    return k


def _interleaved(fns, k, rounds):
    """The best time of ``k`` calls of each of ``fns``, over ``rounds`` rounds that take them
    in turn, the order reversed every other round (a load that comes and goes hits all)."""
    best = [float("inf")] * len(fns)
    for r in range(rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            best[i] = min(best[i], _timed(fns[i], k))
    return best


def _launches(graph, n, clock=time.perf_counter):
    def launch():
        t = clock()
        graph.launch(n)
        return clock() - t
    return launch


def _heat_runs(graph, u, u0, iterations, clock):
    def run():
        u[...] = u0                     # the same start every run (not timed)
        t = clock()
        iterations[graph] = graph.run()
        return clock() - t
    return run


def _slab_runs(graph, tallies, clock):
    def run():
        t = clock()
        tallies[graph] = graph.run()
        return clock() - t
    return run


def rows_capture(rounds=5, target_s=TARGET_S, size=1, slab_sizes=(100_000, 1_000_000),
                 clock=time.perf_counter):
    """[(case, captured s, hand-built s, ratio)]: each the best of ``rounds`` interleaved
    timings in one process, each timing repeated to last ``target_s`` at least (after a
    warm-up: first replays measure costs); each pair checked to give the same arrays.

    ``clock``: ``time.perf_counter`` (wall time), or ``time.process_time``: the CPU time of
    all the process's threads, which a neighbour's load does not stretch (a graph
    descheduled is not counted); beside other work its ratios are steadier, but a stage
    run on a team counts every thread's time (compare like with like: ``eagle.set_num_threads(1)``)."""
    rows = []
    for name, step, by_hand, arrays in _cases(size):
        mine, theirs = [a.copy() for a in arrays], [a.copy() for a in arrays]
        g, h = eagle.capture(step, *mine).build(), by_hand(*theirs).build()
        n = 1
        while True:   # replays per timing, found on both graphs alike (their arrays stay in step)
            t = min(_interleaved([_launches(g, n, clock), _launches(h, n, clock)], 1, 3))
            if t >= target_s or n >= 1 << 20:
                break
            n *= 2
        best = _interleaved([_launches(g, n, clock), _launches(h, n, clock)], 1, rounds)
        for a, b in zip(mine, theirs):
            if not np.array_equal(a, b):
                raise AssertionError(f"{name}: the captured and the hand-built graph disagree")
        rows.append((f"{name} ({n} replays)", best[0], best[1], best[0] / best[1]))
    u0 = heat.start(heat.SIDE * size // 2)
    # the hand-built loop of the same step (|new - c|, the NumPy loop's test bit for bit), and
    # the bench's HeatGraph (|ALPHA * lap|: a pass fewer, the test within rounding)
    grids = [u0.copy() for _ in range(3)]
    loops = [HeatCaptured(grids[0]), heat.HeatGraph(grids[1], as_numpy=True), heat.HeatGraph(grids[2])]
    iterations = {}
    runs = [_heat_runs(loop, u, u0, iterations, clock) for loop, u in zip(loops, grids)]
    k = max(_repeats(run, target_s) for run in runs)
    best = _interleaved(runs, k, rounds)
    iters = [iterations[loop] for loop in loops]
    if not (np.array_equal(grids[0], grids[1]) and np.allclose(grids[0], grids[2], rtol=0, atol=1e-12)):
        raise AssertionError("heat: the captured and the hand-built loop disagree")
    if iters[0] != iters[1]:
        raise AssertionError(f"heat: the captured loop ran {iters[0]} iterations, the hand-built one {iters[1]}")
    rows.append((f"heat until converged ({iters[0]} iterations)", best[0], best[1], best[0] / best[1]))
    rows.append(("heat, beside HeatGraph's |lap| (a pass fewer)", best[0], best[2], best[0] / best[2]))
    for n in slab_sizes:
        n *= size
        graphs = (SlabCaptured(n), slab.SlabGraph(n))
        done = {}
        runs = [_slab_runs(graph, done, clock) for graph in graphs]
        k = max(_repeats(run, target_s) for run in runs)
        best = _interleaved(runs, k, rounds)
        tallies = [done[graph] for graph in graphs]
        if tallies[0] != tallies[1]:
            raise AssertionError(f"slab: the captured and the hand-built step disagree: {tallies}")
        rows.append((f"slab transport, {n:,} particles until done", best[0], best[1], best[0] / best[1]))
    return rows


def print_rows(rows, out=None):
    print(f"{'captured step':44s} {'captured':>10s} {'by hand':>10s} {'ratio':>7s}", file=out)
    for name, a, b, ratio in rows:
        print(f"{name:44s} {a * 1e3:8.2f}ms {b * 1e3:8.2f}ms {ratio:6.2f}x", file=out)


if __name__ == "__main__":
    import os
    import sys
    cpu = "--cpu-time" in sys.argv[1:]     # process CPU time instead of wall time (see rows_capture)
    print(f"load: {os.getloadavg()[0]:.1f}" + ("; process CPU time" if cpu else ""))
    print_rows(rows_capture(clock=time.process_time if cpu else time.perf_counter))
