"""The stencil rows of ``python -m eagle.bench``: four solver sweeps of a public benchmark
suite (npbench's polybench kernels jacobi_1d, jacobi_2d, heat_3d and fdtd_2d at its "L"
sizes), each as its NumPy function (slices, repeated for the time steps), as eagle
graphs written the way that function is (the same slices, one ufunc node per NumPy
operation, ``launch(steps)``; its fused runs compiled into generated loops, and
without them), as numba ``prange`` loops and as JAX ``jit`` of the same
NumPy-style function, where those are installed. eagle's results equal NumPy's bit for
bit (the same operations in the same order per element); numba's and JAX's are checked
to 1e-12. Shared with asv (asv_bench/benchmarks/bench_stencils.py) and docs/stencils.md.

The NumPy functions are written from the suite's published definitions.
"""
from __future__ import annotations

import time

import numpy as np

import eagle
from eagle.graph import ufunc

#: name -> (the suite's "L" parameters, the time steps the bench runs); steps are
#: fewer than the suite's where a NumPy run would take seconds: the ratios are per step
SIZES = {
    "jacobi_1d": (dict(N=34000), 850),
    "jacobi_2d": (dict(N=700), 100),
    "heat_3d": (dict(N=70), 50),
    "fdtd_2d": (dict(NX=800, NY=900), 60),
}
#: small sizes of the same kernels (--quick, the tests)
QUICK = {
    "jacobi_1d": (dict(N=3200), 100),
    "jacobi_2d": (dict(N=150), 20),
    "heat_3d": (dict(N=25), 10),
    "fdtd_2d": (dict(NX=200, NY=220), 10),
}


# ---- the NumPy functions (npbench's, from its definitions) -----------------------------

def jacobi_1d_init(N):
    return (np.arange(N, dtype=np.float64) + 2) / N, (np.arange(N, dtype=np.float64) + 3) / N


def jacobi_1d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_2d_init(N):
    i = np.arange(N, dtype=np.float64)
    return (i[:, None] * (i[None, :] + 2) + 2) / N, (i[:, None] * (i[None, :] + 3) + 3) / N


def jacobi_2d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def heat_3d_init(N):
    i = np.arange(N, dtype=np.float64)
    A = (i[:, None, None] + i[None, :, None] + (N - i[None, None, :])) * 10 / N
    return A, A.copy()


def heat_3d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
            + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
            + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, 0:-2])
            + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
            + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
            + 0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, 0:-2])
            + B[1:-1, 1:-1, 1:-1])


def fdtd_2d_init(TMAX, NX, NY):
    i, j = np.arange(NX, dtype=np.float64)[:, None], np.arange(NY, dtype=np.float64)[None, :]
    ex = i * (j + 1) / NX
    ey = i * (j + 2) / NY
    hz = i * (j + 3) / NX
    return ex, ey, hz, np.arange(TMAX, dtype=np.float64)


def fdtd_2d(TMAX, ex, ey, hz, _fict_):
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


# ---- the same, as eagle graphs: one ufunc node per NumPy operation -----------------------

def jacobi_1d_graph(A, B, **build):
    """One time step of ``jacobi_1d`` (launch it TSTEPS - 1 times). NumPy's temporaries
    are the destination's interior itself (it is written whole by the last operation and
    read by none of them), so a fused run stores it once and needs no scratch array."""
    g = eagle.Graph()
    for src, dst in ((A, B), (B, A)):
        d = dst[1:-1]
        g.add_node(ufunc(np.add, src[:-2], src[1:-1], out=d))
        g.add_node(ufunc(np.add, d, src[2:], out=d))
        g.add_node(ufunc(np.multiply, 0.33333, d, out=d))
    return g.build(**build)


def jacobi_2d_graph(A, B, **build):
    """One time step of ``jacobi_2d``; the temporaries are the destination's interior,
    as in ``jacobi_1d_graph``."""
    g = eagle.Graph()
    for src, dst in ((A, B), (B, A)):
        d = dst[1:-1, 1:-1]
        g.add_node(ufunc(np.add, src[1:-1, 1:-1], src[1:-1, :-2], out=d))
        g.add_node(ufunc(np.add, d, src[1:-1, 2:], out=d))
        g.add_node(ufunc(np.add, d, src[2:, 1:-1], out=d))
        g.add_node(ufunc(np.add, d, src[:-2, 1:-1], out=d))
        g.add_node(ufunc(np.multiply, 0.2, d, out=d))
    return g.build(**build)


def heat_3d_graph(A, B, **build):
    """One time step of ``heat_3d``: the first axis's term and the running sum in the
    interior view it assigns (``dst[c]``), each other axis's term in one scratch ``t``
    (three scratch grids were three more arrays each fused run stores)."""
    t = np.empty(tuple(n - 2 for n in A.shape))
    c = (slice(1, -1),) * 3
    g = eagle.Graph()
    for src, dst in ((A, B), (B, A)):
        d = dst[c]
        for axis in range(3):
            hi, lo = list(c), list(c)
            hi[axis], lo[axis] = slice(2, None), slice(None, -2)
            acc = d if axis == 0 else t
            g.add_node(ufunc(np.multiply, 2.0, src[c], out=acc))
            g.add_node(ufunc(np.subtract, src[tuple(hi)], acc, out=acc))
            g.add_node(ufunc(np.add, acc, src[tuple(lo)], out=acc))
            g.add_node(ufunc(np.multiply, 0.125, acc, out=acc))
            if axis:
                g.add_node(ufunc(np.add, d, t, out=d))
        g.add_node(ufunc(np.add, d, src[c], out=d))
    return g.build(**build)


def fdtd_2d_graph(ex, ey, hz, _fict_, **build):
    """One time step of ``fdtd_2d``. ``_fict_[t]`` is t (the suite's start): a row ``now``
    of the step's t, one per column of ``ey[0, :]``, stands for it, copied into ``ey[0, :]``
    and stepped once a replay (per-sample nodes, so they fuse with the rest). The three
    updates' temporaries are views of one scratch grid (as NumPy's temporaries reuse
    freed memory): three grids of their own would push the step's arrays past the L3
    cache, since a node stores every array it writes."""
    if not np.array_equal(_fict_, np.arange(_fict_.shape[0])):
        raise ValueError("fdtd_2d_graph takes _fict_[t] == t, as fdtd_2d_init makes it")
    nx, ny = ex.shape
    now = np.zeros(ny)
    scratch = np.empty((nx, ny))
    d1, d2, d3 = scratch[:-1, :], scratch[:, :-1], scratch[:-1, :-1]
    g = eagle.Graph()
    g.add_node(ufunc(np.positive, now, out=ey[0, :]), name="fict")
    g.add_node(ufunc(np.subtract, hz[1:, :], hz[:-1, :], out=d1))
    g.add_node(ufunc(np.multiply, 0.5, d1, out=d1))
    g.add_node(ufunc(np.subtract, ey[1:, :], d1, out=ey[1:, :]))
    g.add_node(ufunc(np.subtract, hz[:, 1:], hz[:, :-1], out=d2))
    g.add_node(ufunc(np.multiply, 0.5, d2, out=d2))
    g.add_node(ufunc(np.subtract, ex[:, 1:], d2, out=ex[:, 1:]))
    g.add_node(ufunc(np.subtract, ex[:-1, 1:], ex[:-1, :-1], out=d3))
    g.add_node(ufunc(np.add, d3, ey[1:, :-1], out=d3))
    g.add_node(ufunc(np.subtract, d3, ey[:-1, :-1], out=d3))
    g.add_node(ufunc(np.multiply, 0.7, d3, out=d3))
    g.add_node(ufunc(np.subtract, hz[:-1, :-1], d3, out=hz[:-1, :-1]))
    g.add_node(ufunc(np.add, now, 1.0, out=now), name="next_t")
    return g.build(**build)


class Stencil:
    """One kernel: its arrays from the init function, its NumPy run and its graph."""

    def __init__(self, name, params, steps):
        self.name, self.params, self.steps = name, dict(params), steps
        self.numpy_fn = globals()[name]
        self.graph_fn = globals()[name + "_graph"]

    def arrays(self):
        init = globals()[self.name + "_init"]
        if self.name == "fdtd_2d":
            return init(self.steps, **self.params)
        return init(**self.params)

    def run_numpy(self, arrays):
        self.numpy_fn(self.steps, *arrays)

    def replays(self) -> int:
        """Graph replays for the NumPy function's time steps."""
        return self.steps if self.name == "fdtd_2d" else self.steps - 1

    def graph(self, arrays, **build):
        return self.graph_fn(*arrays, **build)

    def shape_text(self):
        return " x ".join(str(v) for v in self.params.values()) + \
            ("^3" if self.name == "heat_3d" else "^2" if self.name == "jacobi_2d" else "")


def stencils(quick=False):
    return [Stencil(name, *(QUICK if quick else SIZES)[name]) for name in SIZES]


# ---- numba prange and JAX jit of the same kernels (when installed) ----------------------

def numba_runner(stencil):
    """A function running the kernel with numba ``prange`` loops, or None without numba."""
    try:
        import numba
    except ImportError:
        return None
    prange = numba.prange
    name = stencil.name
    if name == "jacobi_1d":
        @numba.njit(parallel=True, cache=False)
        def run(T, A, B):
            n = A.shape[0]
            for t in range(1, T):
                for i in prange(1, n - 1):
                    B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
                for i in prange(1, n - 1):
                    A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
    elif name == "jacobi_2d":
        @numba.njit(parallel=True, cache=False)
        def run(T, A, B):
            n = A.shape[0]
            for t in range(1, T):
                for i in prange(1, n - 1):
                    for j in range(1, n - 1):
                        B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
                for i in prange(1, n - 1):
                    for j in range(1, n - 1):
                        A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])
    elif name == "heat_3d":
        @numba.njit(parallel=True, cache=False)
        def sweep(A, B):
            n = A.shape[0]
            for i in prange(1, n - 1):
                for j in range(1, n - 1):
                    for k in range(1, n - 1):
                        c = A[i, j, k]
                        B[i, j, k] = (0.125 * (A[i + 1, j, k] - 2.0 * c + A[i - 1, j, k])
                                      + 0.125 * (A[i, j + 1, k] - 2.0 * c + A[i, j - 1, k])
                                      + 0.125 * (A[i, j, k + 1] - 2.0 * c + A[i, j, k - 1]) + c)

        @numba.njit(cache=False)
        def run(T, A, B):
            for t in range(1, T):
                sweep(A, B)
                sweep(B, A)
    else:
        @numba.njit(parallel=True, cache=False)
        def run(T, ex, ey, hz, fict):
            nx, ny = ex.shape
            for t in range(T):
                for j in prange(ny):
                    ey[0, j] = fict[t]
                for i in prange(1, nx):
                    for j in range(ny):
                        ey[i, j] -= 0.5 * (hz[i, j] - hz[i - 1, j])
                for i in prange(nx):
                    for j in range(1, ny):
                        ex[i, j] -= 0.5 * (hz[i, j] - hz[i, j - 1])
                for i in prange(nx - 1):
                    for j in range(ny - 1):
                        hz[i, j] -= 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])
    return run


def jax_runner(stencil):
    """(jitted function of the arrays returning the new ones, the JAX module), or None
    without JAX. The NumPy function with ``x.at[...].set(...)`` for its assignments and
    ``jax.lax.fori_loop`` for its time loop, in float64."""
    try:
        import jax
        import jax.numpy as jnp   # noqa: F401
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    name, T = stencil.name, stencil.steps
    if name == "jacobi_1d":
        def step(t, ab):
            A, B = ab
            B = B.at[1:-1].set(0.33333 * (A[:-2] + A[1:-1] + A[2:]))
            A = A.at[1:-1].set(0.33333 * (B[:-2] + B[1:-1] + B[2:]))
            return A, B
        first = 1
    elif name == "jacobi_2d":
        def step(t, ab):
            A, B = ab
            B = B.at[1:-1, 1:-1].set(0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                                            + A[:-2, 1:-1]))
            A = A.at[1:-1, 1:-1].set(0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                                            + B[:-2, 1:-1]))
            return A, B
        first = 1
    elif name == "heat_3d":
        def half(A, B):
            return B.at[1:-1, 1:-1, 1:-1].set(
                0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
                + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
                + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, 0:-2])
                + A[1:-1, 1:-1, 1:-1])

        def step(t, ab):
            A, B = ab
            B = half(A, B)
            return half(B, A), B
        first = 1
    else:
        def step(t, arrays):
            ex, ey, hz, fict = arrays
            ey = ey.at[0, :].set(fict[t])
            ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
            ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
            hz = hz.at[:-1, :-1].add(-0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1]))
            return ex, ey, hz, fict
        first = 0

    @jax.jit
    def run(*arrays):
        return jax.lax.fori_loop(first, T, step, tuple(arrays))
    return run, jax


SETTLE_S = 0.05


def _best(fn, rounds_of, best):
    # a pause before each timing, untimed: the thread pools of the runner before it (JAX's,
    # numba's) stop spinning, so no runner is timed beside another's busy threads
    time.sleep(SETTLE_S)
    t = time.perf_counter()
    fn()
    best[rounds_of] = min(best.get(rounds_of, float("inf")), time.perf_counter() - t)


def rows_stencils(rounds, quick=False):
    """[(what, eagle s, reference name, reference s)]: for each kernel, eagle's graph (built
    by default: its fused runs compiled where they pay, eagle.cpu.codegen) against its NumPy
    function, the graph built with ``codegen=False``, numba and JAX where installed, interleaved round
    by round in this process, best of ``rounds``; eagle's result must equal NumPy's bit for bit."""
    rows = []
    for st in stencils(quick):
        start = st.arrays()
        ours = [a.copy() for a in start]
        g = st.graph(ours)
        ref = [a.copy() for a in start]
        st.run_numpy(ref)
        g.launch(st.replays())
        if not all(np.array_equal(x, y) for x, y in zip(ours, ref)):
            raise AssertionError(f"{st.name}: the graph's result differs from NumPy's")
        # the same graph with its fused runs' nodes run one by one (no generated loop)
        plain = [a.copy() for a in start]
        g_plain = st.graph(plain, cpu=eagle.CpuOptions(codegen=False))
        g_plain.launch(st.replays())
        if not all(np.array_equal(x, y) for x, y in zip(plain, ref)):
            raise AssertionError(f"{st.name}: the graph's result without codegen differs from NumPy's")
        runners = {"eagle": lambda: g.launch(st.replays()),
                   "NumPy": lambda a=[x.copy() for x in start]: st.run_numpy(a),
                   "eagle, codegen off": lambda: g_plain.launch(st.replays())}
        nb = numba_runner(st)
        if nb is not None:
            got = [a.copy() for a in start]
            nb(st.steps, *got)
            if not all(np.allclose(x, y, rtol=1e-12, atol=1e-12) for x, y in zip(got, ref)):
                raise AssertionError(f"{st.name}: numba's result differs from NumPy's")
            runners["numba prange"] = lambda a=got: nb(st.steps, *a)
        jx = jax_runner(st)
        if jx is not None:
            run, jax = jx
            dev = [jax.numpy.asarray(a) for a in start]
            got = [np.asarray(a) for a in jax.block_until_ready(run(*dev))]
            if not all(np.allclose(x, y, rtol=1e-12, atol=1e-12) for x, y in zip(got, ref)):
                raise AssertionError(f"{st.name}: JAX's result differs from NumPy's")
            runners["JAX jit"] = lambda: jax.block_until_ready(run(*dev))
        best = {}
        for _ in range(rounds):
            for k, fn in runners.items():
                _best(fn, k, best)
        what = f"{st.name} {st.shape_text()}, {st.steps} steps"
        for k in runners:
            if k != "eagle":
                rows.append((what, best["eagle"], k, best[k]))
    return rows
