"""The heat equation until converged: a 5-point stencil on a 2-D grid iterated until the
largest change is below a tolerance, the check in the graph (a ``maximum.reduce``, a 0-d
``greater`` node, a ``while_loop``: one launch, no Python between iterations), beside the
NumPy loop (eagle.bench.heat). ``track_`` gives NumPy's time over eagle's in one process,
best of 3, so a machine's speed cancels out."""
import time

import eagle
from eagle.bench.heat import HeatGraph, numpy_until_converged, start

from . import THREADS, scaled, use_threads


class HeatUntilConverged:
    params = [THREADS]
    param_names = ["threads"]
    timeout = 300

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.u0 = start(scaled(512, 34))

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def _graph(self):
        return HeatGraph(self.u0.copy())

    def time_graph(self, threads):
        self._graph().run()

    def time_numpy(self, threads):
        numpy_until_converged(self.u0.copy())

    def track_numpy_over_graph(self, threads):
        """NumPy's time / the graph's (above 1: eagle faster)."""
        best_g = best_n = float("inf")
        for _ in range(3):
            g = self._graph()
            t = time.perf_counter()
            g.run()
            best_g = min(best_g, time.perf_counter() - t)
            t = time.perf_counter()
            numpy_until_converged(self.u0.copy())
            best_n = min(best_n, time.perf_counter() - t)
        return best_n / best_g

    track_numpy_over_graph.unit = "ratio"
