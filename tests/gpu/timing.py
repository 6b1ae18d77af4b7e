"""Replay timing on a GPU: eagle's cuda backend against CuPy, in one run on one machine.

    python tests/gpu/timing.py            # run by tests/gpu/run_on_gpu.sh

Three tiny kernels (a chain over 256 doubles) make one step. Measured, per replay:

* eagle     ``g.launch(n)``: one cudaGraphLaunch per replay, issued from C;
* one by one   the same three RawKernels launched from Python with CuPy;
* CuPy graph   the same kernels captured with ``cupy.cuda.Stream.begin_capture`` /
               ``end_capture`` and replayed with ``graph.launch(stream)`` from Python.

Two numbers each: *host* is the time to issue a batch of replays that fits in
the launch queue (no waiting on the GPU: the per-replay host overhead), *wall*
is issue plus waiting for a long run (whichever of host or device is slower).
Then ``set_logical_size`` (patches the instantiated graph) against re-capture
plus instantiate (``g.build()``, and CuPy's capture + end_capture).
Ratios are what to read; single numbers on shared machines are noisy.
Total runtime: a few seconds.
"""
import sys
import time

import numpy as np

try:
    import cupy as cp
except Exception as exc:  # pragma: no cover
    print(f"timing skipped: CuPy is not importable ({type(exc).__name__}: {exc})")
    sys.exit(0)

import eagle
from eagle import _cuda

try:
    from eagle.graph import SIZE, cuda_kernel
except ImportError:
    from eagle._cuda_kernel import SIZE, cuda_kernel

SRC = r"""
extern "C" __global__ void step(double *y, const double *x, double a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + 1.0;
}
"""
N = 256
HOST_BATCH = 500        # replays issued without waiting (fits in the launch queue)
WALL_REPLAYS = 20_000
REPEATS = 5


def best(fn, repeats=REPEATS):
    """Best of a few runs of fn() -> seconds."""
    return min(fn() for _ in range(repeats))


def us(seconds, per):
    return seconds / per * 1e6


def main():
    failures = 0
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    print(f"device: {props['name'].decode() if isinstance(props['name'], bytes) else props['name']}, "
          f"CuPy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, "
          f"driver {cp.cuda.runtime.driverGetVersion()}")
    print(f"eagle {eagle.__version__}, CUDA driver: {_cuda.driver_status()}")

    k = cp.RawKernel(SRC, "step")
    k.kernel  # compile and load now, not inside a timed region
    a = cp.arange(N, dtype=cp.float64)
    b, c, d = cp.zeros(N), cp.zeros(N), cp.zeros(N)
    grid, block = ((N + 127) // 128,), (128,)
    n64 = np.int64(N)

    # -- eagle ------------------------------------------------------------------------
    g = eagle.Graph()
    g.add_node(cuda_kernel(k, (b, a, 2.0, SIZE), reads={"a": a}, writes={"b": b}, block=128), name="k1")
    g.add_node(cuda_kernel(k, (c, b, 0.5, SIZE), reads={"b": b}, writes={"c": c}, block=128), name="k2")
    g.add_node(cuda_kernel(k, (d, c, 3.0, SIZE), reads={"c": c}, writes={"d": d}, block=128), name="k3")
    t0 = time.perf_counter()
    g.build()
    t_first_build = time.perf_counter() - t0
    print(g)
    g.launch(100)
    backend = g._backend
    expect = 3.0 * (0.5 * (2.0 * np.arange(N) + 1.0) + 1.0) + 1.0
    assert np.allclose(d.get(), expect), "eagle's graph computed a wrong result"

    def eagle_host():
        backend.stream.synchronize()
        t = time.perf_counter()
        backend.exec.launch(backend.stream, HOST_BATCH)
        dt = time.perf_counter() - t
        backend.stream.synchronize()
        return dt

    def eagle_wall():
        t = time.perf_counter()
        g.launch(WALL_REPLAYS)
        return time.perf_counter() - t

    def eagle_launch1():
        t = time.perf_counter()
        for _ in range(1000):
            g.launch(1)
        return time.perf_counter() - t

    # -- CuPy, one by one ------------------------------------------------------------------
    s = cp.cuda.Stream(non_blocking=True)

    def one_by_one(reps):
        with s:
            for _ in range(reps):
                k(grid, block, (b, a, 2.0, n64))
                k(grid, block, (c, b, 0.5, n64))
                k(grid, block, (d, c, 3.0, n64))

    def cupy_host():
        s.synchronize()
        t = time.perf_counter()
        one_by_one(HOST_BATCH)
        dt = time.perf_counter() - t
        s.synchronize()
        return dt

    def cupy_wall():
        t = time.perf_counter()
        one_by_one(WALL_REPLAYS)
        s.synchronize()
        return time.perf_counter() - t

    # -- CuPy's own graph ------------------------------------------------------------------
    def cupy_capture():
        with s:
            s.begin_capture()
            try:
                one_by_one(1)
            finally:
                graph = s.end_capture()
        return graph

    cgraph = cupy_capture()

    def cgraph_host():
        s.synchronize()
        t = time.perf_counter()
        for _ in range(HOST_BATCH):
            cgraph.launch(s)
        dt = time.perf_counter() - t
        s.synchronize()
        return dt

    def cgraph_wall():
        t = time.perf_counter()
        for _ in range(WALL_REPLAYS):
            cgraph.launch(s)
        s.synchronize()
        return time.perf_counter() - t

    rows = []
    for label, host, wall in (("eagle g.launch(n)", eagle_host, eagle_wall),
                              ("CuPy, kernels one by one", cupy_host, cupy_wall),
                              ("CuPy graph.launch() loop", cgraph_host, cgraph_wall)):
        try:
            h = us(best(host), HOST_BATCH)
            w = us(best(wall, 3), WALL_REPLAYS)
            rows.append((label, h, w))
        except Exception as exc:
            failures += 1
            print(f"{label}: FAILED {type(exc).__name__}: {exc}")
    print()
    print(f"per replay of 3 kernels (best of {REPEATS}; host: {HOST_BATCH} replays issued, "
          f"wall: {WALL_REPLAYS} replays incl. waiting)")
    print(f"{'':28} {'host µs':>9} {'wall µs':>9} {'host ratio vs eagle':>20}")
    base = rows[0][1] if rows and rows[0][0].startswith("eagle") else None
    for label, h, w in rows:
        ratio = f"{h / base:.2f}x" if base else "-"
        print(f"{label:28} {h:9.2f} {w:9.2f} {ratio:>20}")
    try:
        print(f"{'eagle g.launch(1) (+sync)':28} {us(best(eagle_launch1, 3), 1000):9.2f}   "
              "(one call per replay, each waiting for the GPU)")
    except Exception as exc:
        failures += 1
        print(f"g.launch(1): FAILED {type(exc).__name__}: {exc}")

    # -- retune against re-capture ------------------------------------------------------------
    print()
    try:
        sizes = [N, N // 2, N // 4, 1]

        def retune():
            t = time.perf_counter()
            for i in range(4000):
                g.set_logical_size(sizes[i & 3])
            return time.perf_counter() - t

        t_retune = us(best(retune, 3), 4000)
        g.set_logical_size(N // 2)
        d[:] = 0
        g.launch(1)
        got = d.get()
        assert np.allclose(got[:N // 2], expect[:N // 2]) and not got[N // 2:].any(), \
            "retuned graph computed a wrong result"
        g.set_logical_size(N)

        def rebuild():
            t = time.perf_counter()
            for _ in range(20):
                g.build()
            return time.perf_counter() - t

        t_rebuild = us(best(rebuild, 3), 20)

        def recapture_cupy():
            t = time.perf_counter()
            for _ in range(20):
                cupy_capture()
            return time.perf_counter() - t

        t_cupy = us(best(recapture_cupy, 3), 20)
        print(f"set_logical_size (3 kernel nodes patched)   {t_retune:10.2f} µs")
        print(f"g.build() (re-capture + instantiate)        {t_rebuild:10.2f} µs   "
              f"= {t_rebuild / t_retune:.0f}x set_logical_size (first build: {t_first_build * 1e3:.1f} ms)")
        print(f"CuPy capture + end_capture (instantiate)    {t_cupy:10.2f} µs   "
              f"= {t_cupy / t_retune:.0f}x set_logical_size")
    except Exception as exc:
        failures += 1
        print(f"retune timing: FAILED {type(exc).__name__}: {exc}")

    print()
    print(g.plan())
    return 1 if failures else 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"\ntiming.py done in {time.perf_counter() - t0:.1f} s")
    sys.exit(rc)
