"""Captured steps beside their hand-built graphs (eagle.bench.capture): the plain NumPy step
given to ``eagle.capture``, and the graph a user builds node by node for the same step.
``track_`` gives the captured graph's time over the hand-built one's in one process, best of
3, so a machine's speed cancels out (goal: at most 1.05)."""
import time

import numpy as np

import eagle
from eagle.bench import capture as cases

from . import THREADS, scaled, use_threads

STEPS = {"jacobi_2d": (cases.jacobi_2d, cases.jacobi_2d_by_hand, 2),
         "fdtd_2d": (cases.fdtd_2d, cases.fdtd_2d_by_hand, 3)}


class CapturedStencil:
    params = [THREADS, list(STEPS)]
    param_names = ["threads", "step"]
    timeout = 300

    def setup(self, threads, step):
        self.previous_threads = use_threads(threads)
        fn, by_hand, n = STEPS[step]
        side = scaled(512, 34)
        r = np.random.default_rng(0)
        arrays = [r.random((side, side)) for _ in range(n)] + ([np.array(0.5)] if step == "fdtd_2d" else [])
        self.captured = eagle.capture(fn, *[a.copy() for a in arrays]).build()
        self.by_hand = by_hand(*[a.copy() for a in arrays]).build()

    def teardown(self, threads, step):
        eagle.set_num_threads(self.previous_threads)

    def time_captured(self, threads, step):
        self.captured.launch(10)

    def time_by_hand(self, threads, step):
        self.by_hand.launch(10)

    def track_captured_over_by_hand(self, threads, step):
        """The captured graph's time / the hand-built one's (1: the same)."""
        best = [float("inf"), float("inf")]
        for _ in range(3):
            for k, g in enumerate((self.captured, self.by_hand)):
                t = time.perf_counter()
                g.launch(10)
                best[k] = min(best[k], time.perf_counter() - t)
        return best[0] / best[1]

    track_captured_over_by_hand.unit = "ratio"
