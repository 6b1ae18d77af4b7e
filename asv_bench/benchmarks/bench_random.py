"""Random nodes beside NumPy's generator.

* a ``normal`` node over 1 million doubles (Philox4x32-10 + Box-Muller, vectorised) beside
  ``np.random.default_rng().standard_normal(out=)`` on the same array (goal: eagle on one
  thread >= 1.5x faster, and faster again with more threads);
* a ``uniform`` node over the same array, beside ``rng.random(out=)``.
"""
import numpy as np

import eagle
from eagle.graph import uniform

from . import THREADS, scaled, use_threads
from eagle.bench.cases import normal_graph

SAMPLES = 1_000_000


class Normal:
    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.g, self.z = normal_graph(scaled(SAMPLES, 4096))
        self.g.build()
        self.g.launch(3)
        self.rng = np.random.default_rng(1)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_normal_node(self, threads):
        self.g.launch(1)

    def time_numpy_standard_normal(self, threads):
        self.rng.standard_normal(out=self.z)


class Uniform:
    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.u = np.empty(scaled(SAMPLES, 4096))
        self.g = eagle.Graph()
        self.g.add_node(uniform(self.u, key=7))
        self.g.build()
        self.g.launch(3)
        self.rng = np.random.default_rng(1)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_uniform_node(self, threads):
        self.g.launch(1)

    def time_numpy_random(self, threads):
        self.rng.random(out=self.u)
