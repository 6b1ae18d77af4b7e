"""Replay timing on a GPU: eagle's cuda backend against CuPy, in one run on one machine.

    python tests/gpu/timing.py            # run by tests/gpu/run_on_gpu.sh

Three tiny kernels (a chain over 256 doubles) make one step. Measured, per replay:

* eagle     ``g.launch(n)``: one cudaGraphLaunch per replay, issued from C;
* one by one   the same three RawKernels launched from Python with CuPy;
* CuPy graph   the same kernels captured with ``cupy.cuda.Stream.begin_capture`` /
               ``end_capture`` and replayed with ``graph.launch(stream)`` from Python.

Two numbers each: *host* is the time to issue a batch of replays that fits in
the launch queue (no waiting on the GPU: the per-replay host overhead; the batch
is checked to fit: halved until issuing it costs per replay what a quarter of it
does), *wall* is issue plus waiting for a long run (whichever of host or device
is slower). Then ``set_logical_size`` (patches the instantiated graph, and the
next launch then uploads the patched nodes: both are counted) against re-capture
plus instantiate (``g.build()``, and CuPy's capture + end_capture).
Then, each as a ratio measured in this run: ``torch.cuda.CUDAGraph.replay()`` of
the same kernels; ``launch_until_done`` as one conditional WHILE node on the
device against the replay-by-replay host loop; the seed page's graph with CuPy
arrays against its CuPy code run eagerly; compaction and reorder against the CPU
backend (results checked equal). Every line names the GPU. With
EAGLE_TIMING_JSON=path the numbers are also written there, after each
measurement (a run killed part-way keeps what it measured).
Ratios are what to read; single numbers on shared machines are noisy.
Total runtime: well under a minute on an H200.
"""
import json
import os
from pathlib import Path
import sys
import time

import numpy as np

try:
    import cupy as cp
except Exception as exc:  # pragma: no cover
    print(f"timing skipped: CuPy is not importable ({type(exc).__name__}: {exc})")
    sys.exit(0)

import eagle
from eagle.cuda import _driver as _cuda

try:
    from eagle.graph import SIZE, cuda_kernel
except ImportError:
    from eagle.cuda.kernel_nodes import SIZE, cuda_kernel

SRC = r"""
extern "C" __global__ void step(double *y, const double *x, double a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + 1.0;
}
"""
N = 256
HOST_BATCH = 500        # replays issued without waiting (checked to fit in the launch queue)
WALL_REPLAYS = 20_000
REPEATS = 5


def best(fn, repeats=REPEATS):
    """Best of a few runs of fn() -> seconds."""
    return min(fn() for _ in range(repeats))


def us(seconds, per):
    return seconds / per * 1e6


RESULTS = {}


def record(key, **values):
    RESULTS[key] = values
    path = os.environ.get("EAGLE_TIMING_JSON")
    if path:  # as they come: a run killed at its budget keeps what it measured
        tmp = Path(path + ".tmp")
        tmp.write_text(json.dumps(RESULTS, indent=1))
        tmp.replace(path)


def fit_host_batch(issue, sync, batch=HOST_BATCH, floor=16):
    """The largest batch (from ``batch``, halving) whose issue does not wait for the GPU:
    when the launch queue fills, cuGraphLaunch blocks until a slot frees, and the host
    figure would include device time. Fits when issuing ``b`` replays costs per replay
    at most 1.5x what issuing b/4 does (best of 3 each, on an idle stream)."""
    def per(b):
        times = []
        for _ in range(3):
            sync()
            t = time.perf_counter()
            issue(b)
            times.append(time.perf_counter() - t)
            sync()
        return min(times) / b
    while batch > floor:
        full, quarter = per(batch), per(max(1, batch // 4))
        if full <= 1.5 * quarter:
            return batch, full, quarter
        print(f"  a batch of {batch} replays waited for the launch queue "
              f"({full * 1e6:.2f} vs {quarter * 1e6:.2f} µs per replay at {batch // 4}); halving")
        batch //= 2
    return batch, None, None


def main():
    failures = 0
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    gpu = props['name'].decode() if isinstance(props['name'], bytes) else props['name']
    RESULTS["gpu"] = gpu
    print(f"device: {gpu}, "
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

    global HOST_BATCH
    HOST_BATCH, full, quarter = fit_host_batch(lambda b: backend.exec.launch(backend.stream, b),
                                               backend.stream.synchronize)
    record("host batch (fits the launch queue)", batch=HOST_BATCH,
           per_replay_us=None if full is None else full * 1e6,
           per_replay_quarter_us=None if quarter is None else quarter * 1e6)
    print(f"host batch: {HOST_BATCH} replays (fits the launch queue)")

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
        record(f"replay: {label}", host_us=h, wall_us=w, host_ratio_vs_eagle=(h / base if base else None))
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

        # a retune's real cost includes the next launch, which uploads the patched nodes:
        # set_logical_size + launch(1) + sync, against launch(1) + sync alone
        def retune_launch(patch):
            def run():
                t = time.perf_counter()
                for i in range(400):
                    if patch:
                        g.set_logical_size(sizes[i & 3])
                    backend.exec.launch(backend.stream, 1)
                    backend.stream.synchronize()
                return time.perf_counter() - t
            return run

        t_with = us(best(retune_launch(True), 3), 400)
        t_without = us(best(retune_launch(False), 3), 400)
        t_retune_next = t_with - t_without
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
        t_retune_all = max(t_retune_next, t_retune)   # the difference is noisy: never below the patch alone
        record("set_logical_size vs re-capture", set_logical_size_us=t_retune, rebuild_us=t_rebuild,
               cupy_recapture_us=t_cupy, ratio=t_rebuild / t_retune,
               retune_plus_next_launch_us=t_with, launch_alone_us=t_without,
               retune_cost_incl_upload_us=t_retune_next, ratio_incl_upload=t_rebuild / max(t_retune_all, 1e-9))
        print(f"set_logical_size (3 kernel nodes patched)   {t_retune:10.2f} µs")
        print(f"  + the next launch's re-upload: retune + launch(1) + sync {t_with:.2f} µs, launch(1) + sync "
              f"{t_without:.2f} µs: a retune costs {t_retune_next:.2f} µs in all "
              f"(rebuild = {t_rebuild / max(t_retune_all, 1e-9):.0f}x that)")
        print(f"g.build() (re-capture + instantiate)        {t_rebuild:10.2f} µs   "
              f"= {t_rebuild / t_retune:.0f}x set_logical_size (first build: {t_first_build * 1e3:.1f} ms)")
        print(f"CuPy capture + end_capture (instantiate)    {t_cupy:10.2f} µs   "
              f"= {t_cupy / t_retune:.0f}x set_logical_size")
    except Exception as exc:
        failures += 1
        print(f"retune timing: FAILED {type(exc).__name__}: {exc}")

    print()
    print(g.plan())

    for section in (torch_graph, until_done, seed_page, partitions):
        print()
        try:
            section(gpu, k, one_by_one, backend, (a, b, c, d), expect, eagle_host)
        except Exception as exc:
            failures += 1
            print(f"{section.__name__}: FAILED {type(exc).__name__}: {exc}")

    print()
    print(f"== summary on {gpu}")
    for key, vals in RESULTS.items():
        if key == "gpu":
            continue
        print(f"  {key}: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                      for k, v in vals.items()))
    return 1 if failures else 0


def torch_graph(gpu, k, one_by_one, backend, arrays, expect, eagle_host):
    """The same three kernels captured by torch.cuda.graph and replayed with replay()."""
    import torch
    a, b, c, d = arrays
    grid, block = ((N + 127) // 128,), (128,)
    n64 = np.int64(N)

    def kernels_on(stream_ptr):
        with cp.cuda.ExternalStream(stream_ptr):
            k(grid, block, (b, a, 2.0, n64))
            k(grid, block, (c, b, 0.5, n64))
            k(grid, block, (d, c, 3.0, n64))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernels_on(side.cuda_stream)          # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(tg, capture_error_mode="relaxed"):
        kernels_on(torch.cuda.current_stream().cuda_stream)
    d[:] = 0
    cp.cuda.Device().synchronize()
    tg.replay()
    torch.cuda.synchronize()
    assert np.allclose(d.get(), expect), "torch's graph computed a wrong result"

    def host():
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(HOST_BATCH):
            tg.replay()
        dt = time.perf_counter() - t
        torch.cuda.synchronize()
        return dt

    h = us(best(host), HOST_BATCH)
    e = us(best(eagle_host), HOST_BATCH)
    record("replay: torch.cuda.CUDAGraph.replay()", host_us=h, eagle_host_us=e, ratio_vs_eagle=h / e)
    print(f"[{gpu}] torch CUDAGraph.replay(): {h:.2f} µs per replay (host), eagle {e:.2f} µs: "
          f"{h / e:.2f}x eagle's")


LIFE_SRC = r"""
extern "C" __global__ void life_step(bool *alive, long long *life, double *x, const long long *n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= *n || !alive[i]) return;
    x[i] += 1.0 + 0.5 * (double)life[i];
    if (--life[i] <= 0) alive[i] = false;
}
"""


def _life_state(n, seed, max_life):
    rng = np.random.default_rng(seed)
    life = rng.integers(1, max_life + 1, size=n).astype(np.int64)
    return np.ones(n, dtype=np.bool_), life, np.arange(n) * 0.25


def _life_graph(step, alive, life, x, **policy):
    from eagle.graph import compact
    try:
        from eagle.graph import SIZE_PTR
    except ImportError:
        from eagle.cuda.kernel_nodes import SIZE_PTR
    da, dl, dx = cp.asarray(alive), cp.asarray(life), cp.asarray(x)
    g = eagle.Graph()
    g.add_node(cuda_kernel(step, (da, dl, dx, SIZE_PTR), writes={"alive": da, "life": dl, "x": dx}),
               name="step")
    node = compact(da, {"life": dl, "x": dx}, **policy)
    g.add_node(node, name="compact")
    g.build()
    return g, (da, dl, dx, node.ids, node.count)


def until_done(gpu, *unused):
    """launch_until_done: one WHILE node (one cuGraphLaunch) against one replay per host check."""
    step = cp.RawModule(code=LIFE_SRC).get_function("life_step")
    n, max_life = 100_000, 200
    times, results = {}, {}
    # warm-up: the first launch_until_done compiles and loads the condition kernel (and the
    # first WHILE graph instantiates): not part of what either mode costs per call
    for mode in ("device", "host"):
        g, _ = _life_graph(step, *_life_state(n, 5, 3))
        g._backend.until_done_mode = mode
        g.launch_until_done(30)
        cp.cuda.Device().synchronize()
    for mode in ("device", "host"):
        best_t = None
        for _ in range(3):   # best of 3, each on a fresh graph and fresh state
            g, arrays = _life_graph(step, *_life_state(n, 5, max_life))
            g._backend.until_done_mode = mode
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            done = g.launch_until_done(10 * max_life)
            dt = time.perf_counter() - t
            best_t = dt if best_t is None else min(best_t, dt)
            results[mode] = (done, [a.get() for a in arrays])
        times[mode] = best_t
    assert results["device"][0] == results["host"][0] == max_life, results["device"][0]
    for x, y in zip(results["device"][1], results["host"][1]):
        np.testing.assert_array_equal(x, y)
    ratio = times["host"] / times["device"]
    record("launch_until_done: device WHILE vs host loop", replays=max_life,
           device_ms=times["device"] * 1e3, host_ms=times["host"] * 1e3, host_over_device=ratio)
    print(f"[{gpu}] launch_until_done({10 * max_life}) of {n} samples ({max_life} replays, warmed, "
          "best of 3 on fresh state): "
          f"WHILE node {times['device'] * 1e3:.2f} ms, host loop {times['host'] * 1e3:.2f} ms: "
          f"host loop takes {ratio:.2f}x (results equal)")


def seed_page(gpu, *unused):
    """The seed page's graph with CuPy arrays: replay against its CuPy code run eagerly."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_gpu_backend import run_seed_cells
    ns = run_seed_cells()   # asserts each cell prints what the page shows
    g = ns["g"]
    calls = dict(ns["calls"])
    fns = [ns["run_l"], ns["run_r"], ns["run_join"]]
    reps = 2000

    def replay():
        t = time.perf_counter()
        g.launch(reps)
        return time.perf_counter() - t

    def eager():
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        for _ in range(reps):
            for f in fns:
                f()
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t

    tr, te = best(replay, 3), best(eager, 3)
    ns["calls"].update(calls)
    record("seed page with CuPy: eager / replay", replay_us=us(tr, reps), eager_us=us(te, reps),
           ratio=te / tr)
    print(f"[{gpu}] seed page graph: replay {us(tr, reps):.2f} µs per step, the same CuPy code "
          f"eagerly {us(te, reps):.2f} µs: {te / tr:.2f}x")


def partitions(gpu, *unused):
    """Compaction and reorder on the GPU against the CPU backend: results equal, time ratio."""
    from eagle.graph import compact, opaque, reorder
    step = cp.RawModule(code=LIFE_SRC).get_function("life_step")
    n, launches = 1_000_000, 10
    alive, life, x = _life_state(n, 11, 30)
    ca, cl, cx = alive.copy(), life.copy(), x.copy()
    ids, count = np.arange(n, dtype=np.int64), np.zeros(1, dtype=np.int64)

    def numpy_step():
        m = ca.copy()
        cx[m] += 1.0 + 0.5 * cl[m].astype(float)
        cl[m] -= 1
        ca[m & (cl <= 0)] = False

    gc_ = eagle.Graph()
    gc_.add_node(opaque(numpy_step, writes={"alive": ca, "life": cl, "x": cx}), name="step")
    gc_.add_node(compact(ca, {"life": cl, "x": cx}, ids=ids, count=count), name="compact")
    gc_.build()
    gg, garrays = _life_graph(step, alive, life, x)
    t = time.perf_counter()
    gc_.launch(launches)
    t_cpu = time.perf_counter() - t
    t = time.perf_counter()
    gg.launch(launches)
    t_gpu = time.perf_counter() - t
    for want, got in zip((ca, cl, cx, ids, count), garrays):
        np.testing.assert_array_equal(want, got.get())
    record("compaction: CPU backend / GPU", n=n, launches=launches, cpu_ms=t_cpu * 1e3,
           gpu_ms=t_gpu * 1e3, ratio=t_cpu / t_gpu)
    print(f"[{gpu}] compaction ({n} samples, {launches} launches): CPU backend {t_cpu * 1e3:.1f} ms, "
          f"GPU {t_gpu * 1e3:.1f} ms: {t_cpu / t_gpu:.1f}x (results equal)")

    n_keys = 64
    rng = np.random.default_rng(3)
    key = rng.integers(0, n_keys, size=n).astype(np.int32)
    val = rng.random(n)
    kc, vc = key.copy(), val.copy()
    kg, vg = cp.asarray(key), cp.asarray(val)
    ic, ig = np.arange(n, dtype=np.int64), cp.arange(n, dtype=cp.int64)
    gcr = eagle.Graph()
    gcr.add_node(reorder(kc, {"v": vc}, n_keys=n_keys, ids=ic), name="sort")
    gcr.build()
    ggr = eagle.Graph()
    ggr.add_node(reorder(kg, {"v": vg}, n_keys=n_keys, ids=ig), name="sort")
    ggr.build()
    t = time.perf_counter()
    gcr.launch(1)
    t_cpu = time.perf_counter() - t
    t = time.perf_counter()
    ggr.launch(1)
    t_gpu = time.perf_counter() - t
    for want, got in zip((kc, vc, ic), (kg, vg, ig)):
        np.testing.assert_array_equal(want, got.get())
    record("reorder: CPU backend / GPU", n=n, n_keys=n_keys, cpu_ms=t_cpu * 1e3, gpu_ms=t_gpu * 1e3,
           ratio=t_cpu / t_gpu)
    print(f"[{gpu}] reorder ({n} samples, {n_keys} keys, 1 launch, first): CPU backend "
          f"{t_cpu * 1e3:.1f} ms, GPU {t_gpu * 1e3:.1f} ms: {t_cpu / t_gpu:.1f}x (results equal)")


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"\ntiming.py done in {time.perf_counter() - t0:.1f} s")
    sys.exit(rc)
