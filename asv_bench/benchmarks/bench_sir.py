"""Stochastic SIR with tau-leaping over replicate populations: binomial nodes whose ``n``
(susceptibles) and ``p`` (infection probability) are per-replicate arrays, replayed once per
step, beside the NumPy loop with ``rng.binomial``, a numba ``prange`` loop and a JAX ``jit``
loop when installed (eagle.bench.sir; goal >= 3x the NumPy loop, 1e5 replicates x 400
steps, 2 threads). ``track_`` gives NumPy's time over eagle's in one process, best of 3."""
import time

import eagle
from eagle.bench.sir import C_INF, P_REC, REPLICATES, STEPS, SirGraph, numba_sir, numpy_sir, start

from . import THREADS, scaled, use_threads


class SirTauLeaping:
    params = [THREADS]
    param_names = ["threads"]
    timeout = 600

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.n, self.steps = scaled(REPLICATES, 500), scaled(STEPS, 4)
        self.graph = SirGraph(self.n)
        self.graph.run(2)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_graph(self, threads):
        self.graph.run(self.steps)

    def time_numpy(self, threads):
        numpy_sir(self.n, self.steps)

    def track_numpy_over_graph(self, threads):
        """NumPy's time / the graph's (above 1: eagle faster)."""
        best_g = best_n = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            self.graph.run(self.steps)
            best_g = min(best_g, time.perf_counter() - t)
            t = time.perf_counter()
            numpy_sir(self.n, self.steps)
            best_n = min(best_n, time.perf_counter() - t)
        return best_n / best_g

    track_numpy_over_graph.unit = "ratio"


class SirNumbaPrange:
    """The numba ``prange`` loop over replicates beside the graph above (numba's own threads)."""

    params = [THREADS]
    param_names = ["threads"]
    timeout = 600

    def setup(self, threads):
        try:
            self.kernel = numba_sir()
        except ImportError:
            raise NotImplementedError("numba is not installed") from None
        self.n, self.steps = scaled(REPLICATES, 500), scaled(STEPS, 4)

    def time_numba_prange(self, threads):
        S, I, R = start(self.n)
        self.kernel(S, I, R, self.steps, C_INF, P_REC)
