"""The fused-tiles rows of ``python -m eagle.bench``: four ufunc nodes over many doubles
on one thread, fused into sample tiles (the default) and not (``build(cpu=eagle.CpuOptions(fuse=False))``),
beside the same four NumPy calls with ``out=``, timed best-of-k, interleaved, in this
process. Shared with asv (asv_bench/benchmarks/bench_tiles.py)."""
from __future__ import annotations

import numpy as np

import eagle
from eagle.graph import ufunc

#: samples of the fused-tiles case (16M doubles: 128 MiB per array, far beyond any cache)
SAMPLES = 16 * 1024 * 1024


class FourUfuncs:
    """y = 1.0000001 x; z = y + x; z = z y; z = z - x: as NumPy calls and as a graph."""

    def __init__(self, samples=SAMPLES):
        self.x = np.random.default_rng(0).random(samples)
        self.y, self.z = np.empty(samples), np.empty(samples)

    def numpy_step(self):
        x, y, z = self.x, self.y, self.z
        np.multiply(x, 1.0000001, out=y)
        np.add(y, x, out=z)
        np.multiply(z, y, out=z)
        np.subtract(z, x, out=z)

    def graph(self, fuse=True):
        x, y, z = {"x": self.x}, {"y": self.y}, {"z": self.z}
        g = eagle.Graph()
        g.add_node(ufunc(np.multiply, x, 1.0000001, out=y), name="scale")
        g.add_node(ufunc(np.add, y, x, out=z), name="add")
        g.add_node(ufunc(np.multiply, z, y, out=z), name="mul")
        g.add_node(ufunc(np.subtract, z, x, out=z), name="sub")
        return g.build(cpu=eagle.CpuOptions(fuse=fuse))


def rows_fused_tiles(rounds, samples=SAMPLES):
    """[(what, eagle s, reference name, reference s)]: fused and unfused against NumPy,
    on one thread (the thread count in force is restored)."""
    import time

    case = FourUfuncs(samples)
    before = eagle.get_num_threads()
    eagle.set_num_threads(1)
    try:
        fused, unfused = case.graph(True), case.graph(False)
        for g in (fused, unfused):
            g.launch(3)   # the first replays measure the nodes' costs
        (_, tile), = fused.plan().fused_runs
        runners = {"fused": lambda: fused.launch(1), "unfused": lambda: unfused.launch(1),
                   "numpy": case.numpy_step}
        best = {k: float("inf") for k in runners}
        for _ in range(rounds):   # interleaved, best of each
            for k, run in runners.items():
                t = time.perf_counter()
                run()
                best[k] = min(best[k], time.perf_counter() - t)
    finally:
        eagle.set_num_threads(before)
    what = f"four ufunc nodes over {samples:,} doubles, 1 thread"
    return [(f"{what}, fused (tiles of {tile})", best["fused"], "the same NumPy calls, out=", best["numpy"]),
            (f"{what}, CpuOptions(fuse=False)", best["unfused"], "the same NumPy calls, out=", best["numpy"])]
