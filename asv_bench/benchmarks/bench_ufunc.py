"""Ufunc nodes and built-in kernels beside what they replace.

* the seed graph as ufunc nodes (``eagle.graph.ufunc``) beside the plain
  Python loop of the seed's three functions (goal: eagle <= 0.05x the loop);
* a multiply-add chain of four ufunc nodes over 4 million doubles beside the
  same four NumPy calls on one thread (goal: eagle on 2 threads >= 1.5x faster);
* the built-in kernels ``scale`` and ``polynomial`` beside the same work in
  NumPy (the plain C loop they are compared with lives in ``python -m eagle.bench``,
  which compiles it at run time).

Tiny graphs time ``REPLAYS`` (1000) replays per body, as the replay benchmarks do.
"""
import numpy as np

import eagle
from eagle import kernels
from eagle.graph import native, ufunc

from . import BIG, REPLAYS, THREADS, TINY, scaled, seed_graph, use_threads


def seed_ufunc_graph(size=TINY):
    x, left, right, out = np.arange(float(size)), np.zeros(size), np.zeros(size), np.zeros(size)
    g = eagle.Graph()
    g.add_group([ufunc(np.multiply, {"x": x}, 2.0, out={"a": left}),
                 ufunc(np.add, {"x": x}, 1.0, out={"b": right})], names=["l", "r"])
    g.add_node(ufunc(np.add, {"a": left}, {"b": right}, out={"out": out}), name="join")
    return g, out


class SeedUfunc:
    """The seed graph: ufunc nodes, and the Python loop of the seed's functions."""

    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.g, _ = seed_ufunc_graph()
        self.g.build()
        self.g.launch(10)
        _, self.fns, _ = seed_graph()

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch_1000(self, threads):
        self.g.launch(REPLAYS)

    def time_python_loop_1000(self, threads):
        f1, f2, f3 = self.fns
        for _ in range(REPLAYS):
            f1()
            f2()
            f3()


class UfuncChain:
    """y = ((1.5 x + 0.25) 0.5) + x as four ufunc nodes over 4 million doubles, and in NumPy."""

    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        size = scaled(BIG, 4096)
        x, t, y = np.random.default_rng(0).random(size), np.zeros(size), np.zeros(size)
        g = eagle.Graph()
        g.add_node(ufunc(np.multiply, {"x": x}, 1.5, out={"t": t}))
        g.add_node(ufunc(np.add, {"t": t}, 0.25, out={"t": t}))
        g.add_node(ufunc(np.multiply, {"t": t}, 0.5, out={"t": t}))
        g.add_node(ufunc(np.add, {"t": t}, {"x": x}, out={"y": y}))
        self.g = g.build()
        self.g.launch(2)
        self.arrays = x, t, y

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, threads):
        self.g.launch(1)

    def time_numpy(self, threads):
        x, t, y = self.arrays
        np.multiply(x, 1.5, out=t)
        np.add(t, 0.25, out=t)
        np.multiply(t, 0.5, out=t)
        np.add(t, x, out=y)


class BuiltinKernels:
    """eagle.kernels.scale (4M doubles) and polynomial (degree 31, 1M) beside NumPy."""

    params = [["scale", "polynomial"], THREADS]
    param_names = ["kernel", "threads"]

    def setup(self, kernel, threads):
        self.previous_threads = use_threads(threads)
        size = scaled(BIG if kernel == "scale" else BIG // 4, 4096)
        self.x, self.y = np.random.default_rng(0).random(size), np.zeros(size)
        self.c = np.linspace(0.1, 0.01, 32)
        k = kernels.scale(2.0) if kernel == "scale" else kernels.polynomial(self.c)
        g = eagle.Graph()
        g.add_node(native(k, reads={"x": self.x}, writes={"y": self.y}))
        self.g = g.build()
        self.g.launch(2)
        self.kernel = kernel

    def teardown(self, kernel, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, kernel, threads):
        self.g.launch(1)

    def time_numpy(self, kernel, threads):
        if self.kernel == "scale":
            np.multiply(self.x, 2.0, out=self.y)
            return
        y = self.y
        y.fill(self.c[-1])
        for ck in self.c[-2::-1]:
            np.multiply(y, self.x, out=y)
            np.add(y, ck, out=y)
