"""Ufunc nodes and built-in kernels beside what they replace.

* the seed graph as ufunc nodes (``eagle.graph.ufunc``) beside the plain
  Python loop of the seed's three functions (goal: eagle <= 0.05x the loop);
* a multiply-add chain of four ufunc nodes over 4 million doubles beside the
  same four NumPy calls on one thread (goal: eagle on 2 threads >= 1.5x faster);
* the pair y = 1.0000001 x, z = y + x as two ufunc nodes (two stages, each
  team chosen on its own) over 4 million doubles beside NumPy (goal: eagle on
  2 threads >= 1.5x faster; the team choice must not be fooled by one noisy
  timing);
* the built-in kernels ``scale`` and ``polynomial`` beside the same work in
  NumPy (the plain C loop they are compared with lives in ``python -m eagle.bench``,
  which compiles it at run time).

Tiny graphs time ``REPLAYS`` (1000) replays per body, as the replay benchmarks do.
"""
import numpy as np

import eagle

from . import (BIG, QUICK, REPLAYS, THREADS, builtin_kernel_graph, numpy_horner, scaled, seed_graph,
               seed_ufunc_graph, ufunc_chain_graph, ufunc_pair_graph, use_threads)


class SeedUfunc:
    """The seed graph: ufunc nodes, and the Python loop of the seed's functions."""

    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.g = seed_ufunc_graph().graph
        self.g.build()
        self.g.launch(10)
        self.fns = seed_graph().fns

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
        g, _, self.calls = ufunc_chain_graph(scaled(BIG, 4096))
        self.g = g.build()
        self.g.launch(2)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, threads):
        self.g.launch(1)

    def time_numpy(self, threads):
        f1, f2, f3, f4 = self.calls
        f1()
        f2()
        f3()
        f4()


class UfuncPair:
    """y = 1.0000001 x, z = y + x as two ufunc nodes over 4 million doubles, and in NumPy.
    The graph is launched for a second first, so its stages' teams are verified."""

    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        import time

        self.previous_threads = use_threads(threads)
        g, _, self.calls = ufunc_pair_graph(scaled(BIG, 4096))
        self.g = g.build()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < (0.05 if QUICK else 1.0):
            self.g.launch(4)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, threads):
        self.g.launch(1)

    def time_numpy(self, threads):
        f1, f2 = self.calls
        f1()
        f2()


class BuiltinKernels:
    """eagle.kernels.scale (4M doubles) and polynomial (degree 31, 1M) beside NumPy."""

    params = [["scale", "polynomial"], THREADS]
    param_names = ["kernel", "threads"]

    def setup(self, kernel, threads):
        self.previous_threads = use_threads(threads)
        size = scaled(BIG if kernel == "scale" else BIG // 4, 4096)
        g, self.x, self.y, c = builtin_kernel_graph(kernel, size)
        self.g = g.build()
        self.g.launch(2)
        self.kernel = kernel
        self.horner = numpy_horner(self.x, c, self.y)

    def teardown(self, kernel, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, kernel, threads):
        self.g.launch(1)

    def time_numpy(self, kernel, threads):
        if self.kernel == "scale":
            np.multiply(self.x, 2.0, out=self.y)
            return
        self.horner()


class UfuncCast:
    """age + alive into age_next, int64 + bool -> int64 over 1 million samples: a ufunc node
    that casts (the bool operand through NumPy's buffered iterator), beside NumPy's own call
    (which casts the same way). Goal: eagle on 1 thread no slower than NumPy; measured on a
    loaded 2-core machine, 1 thread, 400 interleaved single replays in one process: 1.01x
    NumPy's time (fastest against fastest), 1.00x (medians); best-of-7 ratios ranged
    0.88-2.7x there with NumPy's own times ranging 1.1-2.5 ms (load, not the node)."""

    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        n = scaled(BIG // 4, 4096)
        self.age = np.arange(n, dtype=np.int64)
        self.alive = np.arange(n) % 3 == 0
        self.out = np.empty(n, dtype=np.int64)
        g = eagle.graph.Graph()
        g.add_node(eagle.graph.ufunc(np.add, {"age": self.age}, {"alive": self.alive},
                                     out={"age_next": self.out}), "age")
        self.g = g.build()
        self.g.launch(4)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, threads):
        self.g.launch(1)

    def time_numpy(self, threads):
        np.add(self.age, self.alive, out=self.out)


class MaskedUfunc:
    """A ufunc node under where= (a random half, 1%, long runs) beside the same node
    unmasked, one thread (eagle.bench.masked; goal: a random 50% mask <= 1.3x)."""

    params = [["add", "exp"], ["random 50%", "random 1%", "runs of 300"]]
    param_names = ["ufunc", "mask"]

    def setup(self, name, mask):
        from eagle.bench.masked import masked_pair

        self.previous_threads = use_threads("1")
        self.uf = getattr(np, name)
        self.masked, self.plain = masked_pair(self.uf, scaled(1_000_000, 1000), mask)

    def teardown(self, name, mask):
        eagle.set_num_threads(self.previous_threads)

    def time_masked(self, name, mask):
        self.masked.launch(1)

    def time_unmasked(self, name, mask):
        self.plain.launch(1)

    def track_masked_over_unmasked(self, name, mask):
        """The masked node's time / the unmasked one's (goal for a random half: <= 1.3)."""
        from eagle.bench.masked import masked_ratio

        t_masked, t_plain = masked_ratio(self.uf, scaled(1_000_000, 1000), mask, rounds=3)
        return t_masked / t_plain

    track_masked_over_unmasked.unit = "ratio"
