"""Fused sample tiles: four ufunc nodes over 16M doubles on one thread, fused (the
default) and ``build(cpu=eagle.CpuOptions(fuse=False))``, beside the same four NumPy calls with ``out=``
(goal: fused >= 1.5x faster than NumPy). ``track_`` rows give the ratio measured in
one process, best of 5, so a machine's speed cancels out."""
import time

import eagle
from eagle.bench.tiles import FourUfuncs

from . import use_threads


class FusedTiles:
    timeout = 300

    def setup(self):
        self.previous_threads = use_threads("1")
        self.case = FourUfuncs()
        self.fused = self.case.graph(True)
        self.unfused = self.case.graph(False)
        self.fused.launch(3)
        self.unfused.launch(3)

    def teardown(self):
        eagle.set_num_threads(self.previous_threads)

    def time_fused(self):
        self.fused.launch(1)

    def time_unfused(self):
        self.unfused.launch(1)

    def time_numpy(self):
        self.case.numpy_step()

    def _best(self, fn, rounds=5):
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best

    def track_numpy_over_fused(self):
        """NumPy's time / the fused graph's (above 1: eagle faster)."""
        return self._best(self.case.numpy_step) / self._best(lambda: self.fused.launch(1))

    track_numpy_over_fused.unit = "ratio"

    def track_unfused_over_fused(self):
        return self._best(lambda: self.unfused.launch(1)) / self._best(lambda: self.fused.launch(1))

    track_unfused_over_fused.unit = "ratio"
