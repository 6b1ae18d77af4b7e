"""The SIR row of ``python -m eagle.bench``: a stochastic SIR epidemic with tau-leaping over
many replicate populations, each step drawing the new infections ``Binomial(S, p)`` with
``p = 1 - exp(-beta I dt / N)`` per replicate and the recoveries ``Binomial(I, 1 - exp(-gamma
dt))``. As the NumPy loop with ``rng.binomial``, as one graph (binomial nodes whose ``n`` and
``p`` are per-sample arrays, ufunc nodes for ``p`` and the update) replayed once per step,
and, when installed, as a numba ``prange`` loop over replicates and a JAX ``jit`` loop
(``jax.random.binomial``, float32). The final recovered counts agree within Monte Carlo
error (different random streams). Shared with asv (asv_bench/benchmarks/bench_sir.py)."""
from __future__ import annotations

import math

import numpy as np

import eagle
from eagle.graph import binomial, ufunc

POPULATION, INFECTED0 = 1000, 10
BETA, GAMMA, DT = 0.5, 0.1, 0.1
#: the issue's case: 1e5 replicates x 400 steps
REPLICATES, STEPS = 100_000, 400
#: -beta dt / N (p = -expm1(C_INF * I)) and the recovery probability
C_INF = -BETA * DT / POPULATION
P_REC = -math.expm1(-GAMMA * DT)


def start(replicates):
    """(S, I, R): every replicate at the start, int64."""
    S = np.full(replicates, POPULATION - INFECTED0, np.int64)
    return S, np.full(replicates, INFECTED0, np.int64), np.zeros(replicates, np.int64)


def numpy_sir(replicates, steps, seed=0):
    """The NumPy loop; returns the final (S, I, R)."""
    rng = np.random.default_rng(seed)
    S, I, R = start(replicates)
    for _ in range(steps):
        infected = rng.binomial(S, -np.expm1(C_INF * I))
        recovered = rng.binomial(I, P_REC)
        S -= infected
        I += infected - recovered
        R += recovered
    return S, I, R


class SirGraph:
    """The step as a graph over the replicates; ``run(steps)`` starts them again and
    replays the step ``steps`` times."""

    def __init__(self, replicates, key=11):
        self.S, self.I, self.R = start(replicates)
        p = np.zeros(replicates)
        infected, recovered = np.zeros(replicates, np.int64), np.zeros(replicates, np.int64)
        S, I, R = {"S": self.S}, {"I": self.I}, {"R": self.R}
        g = eagle.Graph()
        g.add_node(ufunc(np.multiply, I, C_INF, out={"p": p}), name="rate")
        g.add_node(ufunc(np.expm1, {"p": p}, out={"p": p}), name="expm1")
        g.add_node(ufunc(np.negative, {"p": p}, out={"p": p}), name="p")
        g.add_node(binomial({"infected": infected}, key=key, n=S, p={"p": p}), name="infect")
        g.add_node(binomial({"recovered": recovered}, key=key + 1, n=I, p=P_REC), name="recover")
        g.add_node(ufunc(np.subtract, S, {"infected": infected}, out=S), name="S")
        g.add_node(ufunc(np.add, I, {"infected": infected}, out=I), name="I_in")
        g.add_node(ufunc(np.subtract, I, {"recovered": recovered}, out=I), name="I_out")
        g.add_node(ufunc(np.add, R, {"recovered": recovered}, out=R), name="R")
        self.g = g.build()

    def run(self, steps):
        S, I, R = start(self.S.size)
        self.S[:], self.I[:], self.R[:] = S, I, R
        self.g.replays = 0
        self.g.launch(steps)
        return self.S, self.I, self.R


_numba_sir = None


def numba_sir():
    """The numba ``prange`` loop (compiled once): each replicate's steps in one thread."""
    global _numba_sir
    if _numba_sir is None:
        import numba

        @numba.njit(parallel=True)
        def run(S, I, R, steps, c_inf, p_rec):
            for i in numba.prange(S.shape[0]):
                s, x, r = S[i], I[i], R[i]
                for _ in range(steps):
                    a = np.random.binomial(s, -math.expm1(c_inf * x))
                    b = np.random.binomial(x, p_rec)
                    s -= a
                    x += a - b
                    r += b
                S[i], I[i], R[i] = s, x, r

        S, I, R = start(4)
        run(S, I, R, 1, C_INF, P_REC)   # compile outside the timing
        _numba_sir = run
    return _numba_sir


_jax_sir = None


def jax_sir():
    """The JAX ``jit`` loop (``lax.fori_loop``, float32 counts: exact below 2**24)."""
    global _jax_sir
    if _jax_sir is None:
        import jax
        import jax.numpy as jnp

        def run(S, I, R, key, steps):
            def body(_, state):
                S, I, R, key = state
                key, k1, k2 = jax.random.split(key, 3)
                # dtype given: with jax_enable_x64 on (eagle.bench.stencils sets it) the
                # draws would be float64 and the loop's float32 carry refused
                a = jax.random.binomial(k1, S, -jnp.expm1(C_INF * I), dtype=S.dtype)
                b = jax.random.binomial(k2, I, P_REC, dtype=I.dtype)
                return S - a, I + a - b, R + b, key
            return jax.lax.fori_loop(0, steps, body, (S, I, R, key))[:3]

        _jax_sir = jax.jit(run, static_argnums=4)
    return _jax_sir


def _peers(replicates, steps):
    """{name: callable returning the final R} for the peers installed, and notes."""
    peers, notes = {}, []
    try:
        import numba
        kernel = numba_sir()

        def numba_run():
            S, I, R = start(replicates)
            kernel(S, I, R, steps, C_INF, P_REC)
            return R
        peers[f"numba prange ({numba.get_num_threads()} thr)"] = numba_run
    except ImportError as exc:
        notes.append(f"numba skipped: {exc}")
    try:
        import jax
        run = jax_sir()
        key = jax.random.PRNGKey(0)

        def jax_run():
            S, I, R = (np.asarray(a, np.float32) for a in start(replicates))
            return np.asarray(run(S, I, R, key, steps)[2].block_until_ready())
        jax_run()   # compile outside the timing
        peers[f"JAX jit {jax.__version__}"] = jax_run
    except ImportError as exc:
        notes.append(f"JAX skipped: {exc}")
    return peers, notes


def agree(a, b):
    """Whether two samples of final R have means within 6 standard errors."""
    se = math.sqrt(a.var() / a.size + b.var() / b.size)
    return abs(a.mean() - b.mean()) <= 6 * se + 1e-9


def rows_sir(rounds, replicates=REPLICATES, steps=STEPS):
    """[(what, eagle s, reference name, reference s)]: the graph against the NumPy loop and
    each peer installed, interleaved, best of ``rounds``; every final R must agree."""
    import time

    graph = SirGraph(replicates)
    graph.run(2)   # the team choice's first measurements, outside the timing
    runners = {"eagle": lambda: graph.run(steps)[2].copy(),
               "NumPy loop, rng.binomial": lambda: numpy_sir(replicates, steps)[2]}
    peers, notes = _peers(replicates, steps)
    runners.update(peers)
    best = {k: float("inf") for k in runners}
    finals = {}
    for _ in range(rounds):
        for k, fn in runners.items():
            t = time.perf_counter()
            finals[k] = fn()
            best[k] = min(best[k], time.perf_counter() - t)
    for k, r in finals.items():
        if not agree(finals["eagle"], np.asarray(r, np.float64)):
            raise AssertionError(f"SIR final R disagree: eagle {finals['eagle'].mean()}, {k} {r.mean()}")
    what = f"SIR tau-leaping, {replicates:,} replicates x {steps} steps, binomial nodes"
    rows = [(what, best["eagle"], k, best[k]) for k in runners if k != "eagle"]
    return rows, notes
