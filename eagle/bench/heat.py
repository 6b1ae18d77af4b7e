"""The heat-equation row of ``python -m eagle.bench``: an explicit 5-point stencil on a 2-D
grid, iterated until the largest change falls below a tolerance, as the NumPy loop a user
writes and as one graph whose convergence check is in the graph (``maximum.reduce`` of the
change, a 0-d ``greater`` node, a ``while_loop``): one ``launch(1)``, no Python between
iterations. Both run the same iterations to the same grid. Shared with asv
(asv_bench/benchmarks/bench_heat.py)."""
from __future__ import annotations

import numpy as np

import eagle
from eagle.graph import ufunc, while_loop

#: the grid's side (the issue's case is 1024; the bench's default keeps a run short)
SIDE = 512
ALPHA = 0.2
TOL = 1e-3


def start(side=SIDE):
    u = np.random.default_rng(0).random((side, side))
    u[0], u[-1], u[:, 0], u[:, -1] = 0.0, 0.0, 0.0, 0.0
    return u


def numpy_until_converged(u, tol=TOL):
    """The NumPy loop; returns the iterations run (``u`` is updated in place)."""
    new = u.copy()
    k = 0
    while True:
        c = u[1:-1, 1:-1]
        lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4.0 * c
        new[1:-1, 1:-1] = c + ALPHA * lap
        change = np.abs(new[1:-1, 1:-1] - c).max()
        u[1:-1, 1:-1] = new[1:-1, 1:-1]
        k += 1
        if not change > tol:
            return k


class HeatGraph:
    """The same loop as one graph on ``u``: ``run()`` launches it once, ``iterations``.

    The change is ``|ALPHA * lap|``, the increment the graph just added; ``as_numpy=True``
    computes it as the NumPy loop does, ``|new - c|``: one pass more, and the NumPy loop's
    test bit for bit (the two changes differ by rounding, which could move the last
    iteration; the grids are the same when the iterations are)."""

    def __init__(self, u, tol=TOL, as_numpy=False):
        side = u.shape[0]
        self.u = u
        new, lap = u.copy(), np.zeros((side - 2, side - 2))
        change, colmax = np.zeros((side - 2, side - 2)), np.zeros(side - 2)
        self.worst, self.more, self.iterations_done = np.zeros(()), np.ones((), bool), np.zeros((), np.int64)
        c, inner = u[1:-1, 1:-1], new[1:-1, 1:-1]
        body = eagle.Graph()
        body.add_node(ufunc(np.add, u[2:, 1:-1], u[:-2, 1:-1], out=lap), name="ns")
        body.add_node(ufunc(np.add, lap, u[1:-1, 2:], out=lap), name="e")
        body.add_node(ufunc(np.add, lap, u[1:-1, :-2], out=lap), name="w")
        body.add_node(ufunc(np.multiply, c, 4.0, out=change), name="c4")
        body.add_node(ufunc(np.subtract, lap, change, out=lap), name="lap")
        body.add_node(ufunc(np.multiply, lap, ALPHA, out=lap), name="scale")
        body.add_node(ufunc(np.add, c, lap, out=inner), name="new")
        if as_numpy:
            body.add_node(ufunc(np.subtract, inner, c, out=change), name="diff")
            body.add_node(ufunc(np.absolute, change, out=change), name="change")
        else:
            body.add_node(ufunc(np.absolute, lap, out=change), name="change")
        body.add_node(ufunc(np.maximum.reduce, change, out=colmax), name="colmax")
        body.add_node(ufunc(np.maximum.reduce, colmax, out=self.worst), name="worst")
        body.add_node(ufunc(np.greater, self.worst, tol, out=self.more), name="more")
        body.add_node(ufunc(np.add, self.iterations_done, 1, out=self.iterations_done), name="count")
        body.add_node(ufunc(np.add, inner, 0.0, out=c), name="copy")
        self.g = eagle.Graph()
        self.g.add_node(while_loop(self.more, body, max_iterations=10**7), name="until_converged")
        self.g.build()

    def run(self):
        self.more[...] = True
        self.iterations_done[...] = 0
        self.g.launch(1)
        return int(self.iterations_done)


def rows_heat(rounds, side=SIDE, tol=TOL):
    """[(what, eagle s, reference name, reference s)]: the graph against the NumPy loop, from
    the same start, interleaved, best of ``rounds``; the two must agree on the iterations.
    The issue's case is ``side=1024, tol=1e-4`` (about 10x the iterations of 1e-3)."""
    import time

    u0 = start(side)
    best = {"eagle": float("inf"), "numpy": float("inf")}
    iters = {}
    for _ in range(rounds):
        u = u0.copy()
        graph = HeatGraph(u, tol=tol)
        t = time.perf_counter()
        iters["eagle"] = graph.run()
        best["eagle"] = min(best["eagle"], time.perf_counter() - t)
        v = u0.copy()
        t = time.perf_counter()
        iters["numpy"] = numpy_until_converged(v, tol=tol)
        best["numpy"] = min(best["numpy"], time.perf_counter() - t)
        if iters["eagle"] != iters["numpy"] or np.abs(u - v).max() > 1e-12:
            raise AssertionError(f"the heat graph and the NumPy loop disagree: {iters}")
    what = f"heat {side}x{side} until the max change < {tol:g} ({iters['eagle']} iterations, check in the graph)"
    return [(what, best["eagle"], "the NumPy loop", best["numpy"])]
