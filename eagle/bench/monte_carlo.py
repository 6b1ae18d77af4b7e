"""The user's step at real size: a European call priced by Monte Carlo over geometric
Brownian motion, written the ways a user would write it.

Each path starts at ``S0`` and takes ``steps`` steps of length ``dt``:
``S *= exp((r - sigma**2 / 2) dt + sigma sqrt(dt) z)`` with ``z`` a standard normal
draw per path and step. The price is ``exp(-r T) mean(max(S - K, 0))``, which the
Black–Scholes formula gives exactly (:func:`black_scholes_call`): every way of running
the step must land within Monte Carlo error of it.

The ways (:data:`WAYS`, in the table's order), each one replay = one time step:

* ``numpy``: the loop a NumPy user writes (``rng.standard_normal(out=z)`` then four
  ufunc calls with ``out=``);
* ``numexpr``: the draw as above, the arithmetic as one ``numexpr.evaluate``;
* ``numba``: an ``@njit(parallel=True)`` loop over ``prange`` drawing with numba's
  ``np.random.standard_normal`` (one stream per thread);
* ``eagle, opaque draw``: the NumPy draw as an opaque node, the arithmetic as ufunc nodes;
* ``eagle, normal node``: the draw as an ``eagle.graph.normal`` node, built with
  ``fuse=False`` (stage by stage);
* ``eagle, fused``: the same graph built as it is by default: the draw and the arithmetic
  run tile by tile.

Nothing here runs when imported; ``python -m eagle.bench`` prints :func:`print_table`.
"""
from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass

import numpy as np

import eagle
from eagle.graph import normal, opaque, ufunc

from .timing import fmt_time


@dataclass(frozen=True)
class Option:
    """A European call on a stock following geometric Brownian motion."""

    S0: float = 100.0
    K: float = 105.0
    r: float = 0.03
    sigma: float = 0.2
    T: float = 1.0

    def step_terms(self, steps):
        """(drift, vol) of one step: log S grows by drift + vol * z."""
        dt = self.T / steps
        return (self.r - 0.5 * self.sigma ** 2) * dt, self.sigma * math.sqrt(dt)


def black_scholes_call(opt: Option) -> float:
    """The exact price of the call."""
    def cdf(x):
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    st = opt.sigma * math.sqrt(opt.T)
    d1 = (math.log(opt.S0 / opt.K) + (opt.r + 0.5 * opt.sigma ** 2) * opt.T) / st
    return opt.S0 * cdf(d1) - opt.K * math.exp(-opt.r * opt.T) * cdf(d1 - st)


def price(S, opt: Option):
    """(price, standard error) of the call from the paths' final values."""
    payoff = np.maximum(S - opt.K, 0.0) * math.exp(-opt.r * opt.T)
    return float(payoff.mean()), float(payoff.std(ddof=1) / math.sqrt(len(payoff)))


# ---- the ways of running the step ----------------------------------------------------------

class Way:
    """One way of running the step: ``reset()`` puts every path back at S0 (outside the
    timing), ``run(steps)`` takes that many steps, ``S`` holds the paths."""

    name = ""
    note = ""

    def __init__(self, paths, opt, steps, seed):
        self.opt, self.steps = opt, steps
        self.drift, self.vol = opt.step_terms(steps)
        self.S = np.empty(paths)
        self.z = np.empty(paths)
        self.w = np.empty(paths)
        self.seed = seed

    def reset(self):
        self.S.fill(self.opt.S0)

    def run(self, steps):
        raise NotImplementedError


class NumpyLoop(Way):
    name = "numpy loop"

    def reset(self):
        super().reset()
        self.rng = np.random.default_rng(self.seed)

    def run(self, steps):
        rng, S, z, w, drift, vol = self.rng, self.S, self.z, self.w, self.drift, self.vol
        for _ in range(steps):
            rng.standard_normal(out=z)
            np.multiply(z, vol, out=w)
            np.add(w, drift, out=w)
            np.exp(w, out=w)
            np.multiply(S, w, out=S)


class Numexpr(Way):
    name = "numexpr"

    def __init__(self, *args):
        super().__init__(*args)
        import numexpr
        self.evaluate = numexpr.evaluate
        self.note = f"numexpr {numexpr.__version__}, {numexpr.get_num_threads()} threads"

    def reset(self):
        super().reset()
        self.rng = np.random.default_rng(self.seed)

    def run(self, steps):
        rng, S, z, evaluate = self.rng, self.S, self.z, self.evaluate
        names = {"S": S, "z": z, "drift": self.drift, "vol": self.vol}
        for _ in range(steps):
            rng.standard_normal(out=z)
            evaluate("S * exp(drift + vol * z)", local_dict=names, out=S)


_numba_steps = None


def _numba_kernel():
    global _numba_steps
    if _numba_steps is None:
        import numba

        @numba.njit(parallel=True, fastmath=False, cache=False)
        def gbm_steps(S, steps, drift, vol):
            for _ in range(steps):
                for i in numba.prange(S.shape[0]):
                    S[i] *= math.exp(drift + vol * np.random.standard_normal())

        _numba_steps = gbm_steps
    return _numba_steps


class NumbaPrange(Way):
    name = "numba prange"

    def __init__(self, *args):
        super().__init__(*args)
        import numba
        self.kernel = _numba_kernel()
        self.kernel(self.S[:8].copy(), 1, self.drift, self.vol)   # compile outside the timing
        self.note = f"numba {numba.__version__}, {numba.get_num_threads()} threads"

    def reset(self):
        super().reset()
        import numba

        @numba.njit
        def seed(s):
            np.random.seed(s)
        seed(self.seed)   # seeds the thread that calls; prange workers keep their own streams

    def run(self, steps):
        self.kernel(self.S, steps, self.drift, self.vol)


class EagleGraph(Way):
    """The step as an eagle graph: a draw into z, then w = exp(drift + vol z), S *= w."""

    fuse = True
    node_draw = True

    def __init__(self, *args):
        super().__init__(*args)
        S, z, w = self.S, self.z, self.w
        g = eagle.Graph()
        if self.node_draw:
            g.add_node(normal({"z": z}, key=self.seed), name="draw")
        else:
            self.rng = np.random.default_rng(self.seed)
            g.add_node(opaque(lambda: self.rng.standard_normal(out=z), writes={"z": z}), name="draw")
        g.add_node(ufunc(np.multiply, {"z": z}, self.vol, out={"w": w}), name="diffuse")
        g.add_node(ufunc(np.add, {"w": w}, self.drift, out={"w": w}), name="drift")
        g.add_node(ufunc(np.exp, {"w": w}, out={"w": w}), name="grow")
        g.add_node(ufunc(np.multiply, {"S": S}, {"w": w}, out={"S": S}), name="step")
        g.build(cpu=eagle.CpuOptions(fuse=self.fuse))
        self.graph = g
        self.graph.launch(2)   # the team choice's first measurements, outside the timing

    def reset(self):
        super().reset()
        if self.node_draw:
            self.graph.replays = 0
        else:
            self.rng = np.random.default_rng(self.seed)

    def run(self, steps):
        self.graph.launch(steps)


class EagleOpaqueDraw(EagleGraph):
    name = "eagle, opaque draw"
    node_draw = False


class EagleNormal(EagleGraph):
    name = "eagle, normal node"
    note = "CpuOptions(fuse=False)"
    fuse = False


class EagleFused(EagleGraph):
    name = "eagle, fused"
    note = "build()"


WAYS = (NumpyLoop, Numexpr, NumbaPrange, EagleOpaqueDraw, EagleNormal, EagleFused)


def make_ways(paths, opt, steps, seed=2026):
    """The ways that can run here, and notes for the ones that cannot (a peer not installed)."""
    ways, notes = [], []
    for cls in WAYS:
        try:
            ways.append(cls(paths, opt, steps, seed))
        except ImportError as exc:
            notes.append(f"{cls.name} skipped: {exc}")
    return ways, notes


def measure(ways, steps, rounds):
    """Best-of-``rounds`` wall time of ``steps`` steps for each way, interleaved round by
    round; the price from the last run of each."""
    best = {w.name: float("inf") for w in ways}
    prices = {}
    enabled = gc.isenabled()
    for _ in range(rounds):
        for w in ways:
            w.reset()
            gc.disable()
            try:
                t0 = time.perf_counter()
                w.run(steps)
                t = time.perf_counter() - t0
            finally:
                if enabled:
                    gc.enable()
            best[w.name] = min(best[w.name], t)
            prices[w.name] = price(w.S, w.opt)
    return best, prices


def print_table(paths, steps, rounds, threads, out=None):
    """Time every way on ``paths`` × ``steps`` with ``threads`` threads and print the table."""
    import sys
    out = out if out is not None else sys.stdout
    opt = Option()
    before = eagle.get_num_threads()
    eagle.set_num_threads(threads)
    _peer_threads(threads)
    try:
        ways, notes = make_ways(paths, opt, steps)
        best, prices = measure(ways, steps, rounds)
    finally:
        eagle.set_num_threads(before)
    exact = black_scholes_call(opt)
    ref = best[NumpyLoop.name]
    print(f"Monte Carlo call (GBM), {paths:,} paths × {steps} steps, {threads} threads: "
          f"Black–Scholes {exact:.4f}", file=out)
    head = ("way", "time", "per step", "× numpy", "price ± s.e.", "")
    rows = [(w.name, fmt_time(best[w.name]), fmt_time(best[w.name] / steps),
             f"{ref / best[w.name]:.2f}", "{:.3f} ± {:.3f}".format(*prices[w.name]), w.note)
            for w in ways]
    widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
    for cells in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(c.rjust(wd) if j in (1, 2, 3) else c.ljust(wd)
                        for j, (c, wd) in enumerate(zip(cells, widths))).rstrip(), file=out)
    print(f"best of {rounds} interleaved runs; × numpy: the NumPy loop's time / this way's "
          "(> 1: faster)", file=out)
    for n in notes:
        print(f"note: {n}", file=out)
    return best, prices


def _peer_threads(threads):
    """Give the peers that run their own threads the same thread count as eagle."""
    try:
        import numexpr
        numexpr.set_num_threads(threads)
    except ImportError:
        pass
    try:
        import numba
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        pass
