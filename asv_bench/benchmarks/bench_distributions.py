"""Distribution nodes beside NumPy's generator: ``exponential``, ``integers``,
``poisson`` (inversion at lam=5, PTRS at lam=100) and ``binomial`` (inversion at
n p = 5, BTRS at n p = 300) over 1 million samples, beside ``np.random.default_rng()``
drawing the same distribution (goals, one thread: exponential >= 2x faster, the others
>= 1.5x; and faster again with more threads)."""
import numpy as np

import eagle

from . import THREADS, scaled, use_threads
from eagle.bench.cases import DISTRIBUTIONS, distribution_graph

SAMPLES = 1_000_000


class Distributions:
    params = [list(DISTRIBUTIONS), THREADS]
    param_names = ["distribution", "threads"]

    def setup(self, name, threads):
        self.previous_threads = use_threads(threads)
        self.g, self.out, self.ref = distribution_graph(name, scaled(SAMPLES, 4096))
        self.g.build()
        self.g.launch(2)
        self.rng = np.random.default_rng(1)

    def teardown(self, name, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_node(self, name, threads):
        self.g.launch(1)

    def time_numpy_generator(self, name, threads):
        self.ref(self.rng, self.out)
