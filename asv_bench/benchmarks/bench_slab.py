"""Slab transport until every particle is done, the tallies of reflected / transmitted /
absorbed particles as reduction nodes, beside the vectorised NumPy loop that removes
finished particles (eagle.bench.slab; goal >= 2x on 2 threads). ``track_`` gives NumPy's
time over eagle's in one process, best of 3."""
import time

import eagle
from eagle.bench.slab import PARTICLES, SlabGraph, numpy_slab

from . import THREADS, scaled, use_threads


class SlabTransport:
    params = [THREADS]
    param_names = ["threads"]
    timeout = 300

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.n = scaled(PARTICLES, 1000)
        self.graph = SlabGraph(self.n)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_graph(self, threads):
        self.graph.run()

    def time_numpy(self, threads):
        numpy_slab(self.n)

    def track_numpy_over_graph(self, threads):
        """NumPy's time / the graph's (above 1: eagle faster)."""
        best_g = best_n = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            self.graph.run()
            best_g = min(best_g, time.perf_counter() - t)
            t = time.perf_counter()
            numpy_slab(self.n)
            best_n = min(best_n, time.perf_counter() - t)
        return best_n / best_g

    track_numpy_over_graph.unit = "ratio"
