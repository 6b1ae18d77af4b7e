"""The user's step at real size: a Monte Carlo European call over geometric Brownian
motion (1e6 paths, one replay per time step), the ways ``eagle.bench.monte_carlo``
defines: the NumPy loop, numexpr, a numba ``prange`` loop, and eagle with an opaque
draw, with a ``normal`` node (unfused) and fused.

Each ``time_steps`` body takes ``STEPS`` steps from a fresh start; divide by ``STEPS``
for the time per step. Peers that are not installed are skipped (asv shows them failed
in setup, with the ImportError)."""
import eagle
from eagle.bench.monte_carlo import WAYS, Option

from . import THREADS, scaled, use_threads

#: time steps per timed body
STEPS = 10


class MonteCarloStep:
    params = [[w.name for w in WAYS], THREADS]
    param_names = ["way", "threads"]

    def setup(self, way, threads):
        self.previous_threads = use_threads(threads)
        cls = {w.name: w for w in WAYS}[way]
        try:
            self.way = cls(scaled(1_000_000, 4096), Option(), 100, 2026)
        except ImportError as exc:
            eagle.set_num_threads(self.previous_threads)
            raise NotImplementedError(f"{way}: {exc}") from exc

    def teardown(self, way, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_steps(self, way, threads):
        self.way.reset()
        self.way.run(STEPS)
