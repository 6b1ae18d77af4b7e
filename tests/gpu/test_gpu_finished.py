"""Compaction and reorder as captured kernels on a real GPU, with CuPy arrays (marker ``gpu``;
skips cleanly without CuPy or a GPU, see conftest.py). Run in a process of its own:
``pytest -m gpu tests/gpu/test_gpu_finished.py -v``.

The oracle is the CPU backend: the same Monte Carlo step (a live sample moves
and ages; it finishes when its life runs out) and the same compaction / reorder
nodes on NumPy arrays. Both partitions are stable with the same policy, so
every state array, the id map, the count and the logical size must be equal
after every launch.
"""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, opaque, reorder

pytestmark = pytest.mark.gpu

STEP_SRC = r"""
extern "C" __global__ void life_step(bool *alive, long long *life, double *x, const long long *n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= *n || !alive[i]) return;
    x[i] += 1.0 + 0.5 * (double)life[i];
    if (--life[i] <= 0) alive[i] = false;
}
extern "C" __global__ void touch(double *t, const long long *n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < *n) t[i] += 1.0;
}
"""


@pytest.fixture(autouse=True)
def real_runtime(cupy):
    from eagle.cuda import _shim as _cuda
    if _cuda.is_loaded() and "fake_libcuda" in _cuda.library() or "EAGLE_LIBCUDA" in __import__("os").environ:
        pytest.skip("eagle's CUDA shim is bound to the CPU stand-in in this process (tests/cuda "
                    "ran first); run tests/gpu in a process of its own")
    yield
    cupy.cuda.Device().synchronize()


@pytest.fixture
def kernels(cupy):
    mod = cupy.RawModule(code=STEP_SRC)
    return mod.get_function("life_step"), mod.get_function("touch")


def initial_state(n, seed, max_life=6):
    rng = np.random.default_rng(seed)
    life = rng.integers(0, max_life + 1, size=n).astype(np.int64)
    return (life > 0), life, np.arange(n) * 0.25


def numpy_step(alive, life, x):
    m = alive.copy()
    x[m] += 1.0 + 0.5 * life[m].astype(float)
    life[m] -= 1
    alive[m & (life <= 0)] = False


def cpu_graph(alive, life, x, **policy):
    ids, count = np.arange(len(alive), dtype=np.int64), np.zeros(1, dtype=np.int64)
    g = eagle.Graph()
    g.add_node(opaque(lambda: numpy_step(alive, life, x), writes={"alive": alive, "life": life, "x": x}),
               name="step")
    g.add_node(compact(alive, {"life": life, "x": x}, ids=ids, count=count, **policy), name="compact")
    return g.build(), (alive, life, x, ids, count)


def gpu_graph(cupy, kernels, alive, life, x, touch=None, **policy):
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    step, touch_k = kernels
    da, dl, dx = cupy.asarray(alive), cupy.asarray(life), cupy.asarray(x)
    g = eagle.Graph()
    g.add_node(cuda_kernel(step, (da, dl, dx, SIZE_PTR), writes={"alive": da, "life": dl, "x": dx}),
               name="step")
    if touch is not None:
        g.add_node(cuda_kernel(touch_k, (touch, SIZE_PTR), writes={"t": touch}), name="touch")
    node = compact(da, {"life": dl, "x": dx}, **policy)   # ids / count made with CuPy
    g.add_node(node, name="compact")
    return g.build(), (da, dl, dx, node.ids, node.count), node


def assert_same(cpu, gpu):
    for c, d in zip(cpu, gpu):
        np.testing.assert_array_equal(c, d.get())


@pytest.mark.parametrize("n", [1, 100, 5000, 100_003])
@pytest.mark.parametrize("policy", [{}, dict(every=3), dict(min_dead_fraction=0.25)])
def test_compaction_equals_the_cpu_backend(cupy, kernels, n, policy):
    host = initial_state(n, n)
    gc_, cpu = cpu_graph(*(a.copy() for a in host), **policy)
    gg, gpu, node = gpu_graph(cupy, kernels, *host, **policy)
    assert gg.backend == "cuda"
    for k in (1, 2, 5):
        gc_.launch(k)
        gg.launch(k)
        assert gg.logical_size == gc_.logical_size
        assert_same(cpu, gpu)
    # scatter back by ids: the computation without compaction
    ref = tuple(a.copy() for a in host)
    for _ in range(8):
        numpy_step(*ref)
    for compacted, want in zip(gpu[:3], ref):
        np.testing.assert_array_equal(node.scatter_back(compacted).get(), want)


def test_device_count_drives_the_next_replay(cupy, kernels):
    n = 4096
    host = initial_state(n, 3)
    t = cupy.zeros(n)
    gg, gpu, node = gpu_graph(cupy, kernels, *host, touch=t)
    ref = tuple(a.copy() for a in host)
    sizes = [n]
    for _ in range(4):
        numpy_step(*ref)
        sizes.append(int(ref[0].sum()))
    gg.launch(4)
    want = np.zeros(n)
    for s in sizes[:4]:
        want[:s] += 1
    np.testing.assert_array_equal(t.get(), want)
    assert gg.logical_size == sizes[4] == int(node.count.get()[0])


@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done(cupy, kernels, mode):
    from eagle.cuda import _shim as _cuda
    if mode == "device" and not _cuda.has("conditional"):
        pytest.skip(f"conditional nodes need a 12.4 driver, this one is {_cuda.driver_version()}")
    host = initial_state(50_000, 9, max_life=40)
    gc_, cpu = cpu_graph(*(a.copy() for a in host))
    gg, gpu, node = gpu_graph(cupy, kernels, *host)
    gg._backend.until_done_mode = mode
    assert gg.launch_until_done(1000) == gc_.launch_until_done(1000) == 40
    assert gg.logical_size == 0
    assert_same(cpu, gpu)


def test_reorder_equals_the_cpu_backend(cupy):
    n, n_keys = 10_000, 37
    rng = np.random.default_rng(1)
    key, val = rng.integers(0, n_keys, size=n).astype(np.int32), rng.random((n, 3))
    kc, vc, ic = key.copy(), val.copy(), np.arange(n, dtype=np.int64)
    gc_ = eagle.Graph()
    gc_.add_node(reorder(kc, {"v": vc}, n_keys=n_keys, ids=ic))
    gc_.build().launch(1)
    kg, vg = cupy.asarray(key), cupy.asarray(val)
    node = reorder(kg, {"v": vg}, n_keys=n_keys)
    gg = eagle.Graph()
    gg.add_node(node)
    gg.build().launch(1)
    assert_same((kc, vc, ic), (kg, vg, node.ids))
    kg[7] = n_keys + 1
    with pytest.raises(ValueError, match="outside"):
        gg.launch(1)


COUNT_SRC = r"""
extern "C" __global__ void bump(unsigned long long *c) { if (threadIdx.x == 0) c[0] += 1; }
"""


@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done_runs_no_replay_past_the_end(cupy, kernels, mode):
    """A kernel captured inside an opaque node counts the replays that ran: exactly the
    ones that started with live samples (no overshoot), on the WHILE node and the host loop."""
    from eagle.cuda import _shim as _cuda
    if mode == "device" and not _cuda.has("conditional"):
        pytest.skip(f"conditional nodes need a 12.4 driver, this one is {_cuda.driver_version()}")
    bump = cupy.RawKernel(COUNT_SRC, "bump")
    counter = cupy.zeros(1, dtype=cupy.uint64)
    host = initial_state(20_000, 4, max_life=30)
    gg, gpu, node = gpu_graph(cupy, kernels, *host)
    gg.add_node(opaque(lambda: bump((1,), (32,), (counter,)), writes={"c": counter}), name="bump")
    gg.build()
    gg._backend.until_done_mode = mode
    done = gg.launch_until_done(10_000)
    assert done == 30 == int(counter.get()[0])
    assert gg.launch_until_done(10) == 0 and int(counter.get()[0]) == 30
    assert gg._backend.until_done_fallback is None
