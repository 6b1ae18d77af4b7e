"""Four stencil sweeps of npbench (jacobi_1d, jacobi_2d, heat_3d, fdtd_2d at its "L" sizes;
eagle.bench.stencils): each kernel's time steps as its NumPy function, as the eagle graph
written the same way (one ufunc node per NumPy operation on the same slices, fused into
sample tiles, each fused run one generated loop; and with ``codegen=False``: node by node), as numba ``prange`` loops and as JAX ``jit`` of the NumPy-style function.
The ways are those installed when asv imports this module (JAX is no test dependency).
``track_`` gives NumPy's time over eagle's, and JAX's over eagle's, in one process, best of 3."""
import importlib.util
import time

import eagle
from eagle.bench import stencils

from . import THREADS, QUICK, use_threads

WAYS = ["eagle", "eagle, codegen off", "numpy"] + [name for name, module in (("numba prange", "numba"), ("JAX jit", "jax"))
                             if importlib.util.find_spec(module) is not None]


def _kernel(name):
    return stencils.Stencil(name, *(stencils.QUICK if QUICK else stencils.SIZES)[name])


def _runner(st, way):
    """A function running the kernel's time steps from its start, the arrays made once."""
    start = st.arrays()
    if way in ("eagle", "eagle, codegen off"):
        arrays = [a.copy() for a in start]
        g = st.graph(arrays, cpu=eagle.CpuOptions(codegen=False if way != "eagle" else None))
        g.launch(st.replays())   # the team choice measures the first replays
        return lambda: g.launch(st.replays())
    if way == "numpy":
        return lambda: st.run_numpy([a.copy() for a in start])
    if way == "numba prange":
        run = stencils.numba_runner(st)
        arrays = [a.copy() for a in start]
        run(st.steps, *arrays)   # compiles
        return lambda: run(st.steps, *arrays)
    run, jax = stencils.jax_runner(st)
    dev = [jax.numpy.asarray(a) for a in start]
    jax.block_until_ready(run(*dev))   # compiles
    return lambda: jax.block_until_ready(run(*dev))


class StencilSweep:
    params = [list(stencils.SIZES), WAYS, THREADS]
    param_names = ["kernel", "way", "threads"]
    timeout = 300

    def setup(self, kernel, way, threads):
        self.previous_threads = use_threads(threads)
        self.run = _runner(_kernel(kernel), way)

    def teardown(self, kernel, way, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_steps(self, kernel, way, threads):
        self.run()


class StencilRatios:
    params = [list(stencils.SIZES), THREADS]
    param_names = ["kernel", "threads"]
    timeout = 600

    def setup(self, kernel, threads):
        self.previous_threads = use_threads(threads)
        st = _kernel(kernel)
        self.runs = {way: _runner(st, way) for way in ("eagle", "numpy") + (("JAX jit",) if "JAX jit" in WAYS
                                                                             else ())}

    def teardown(self, kernel, threads):
        eagle.set_num_threads(self.previous_threads)

    def _best(self):
        best = {way: float("inf") for way in self.runs}
        for _ in range(3):
            for way, run in self.runs.items():
                t = time.perf_counter()
                run()
                best[way] = min(best[way], time.perf_counter() - t)
        return best

    def track_numpy_over_eagle(self, kernel, threads):
        """NumPy's time / eagle's (above 1: eagle faster)."""
        best = self._best()
        return best["numpy"] / best["eagle"]

    track_numpy_over_eagle.unit = "ratio"

    def track_jax_over_eagle(self, kernel, threads):
        """JAX jit's time / eagle's (above 1: eagle faster); NaN without JAX."""
        best = self._best()
        return best["JAX jit"] / best["eagle"] if "JAX jit" in best else float("nan")

    track_jax_over_eagle.unit = "ratio"
