"""Random nodes (random_bits, uniform, normal) on the cuda backend, against the CPU
stand-in of the CUDA driver (tests/doubles/fake_libcuda.c, a TEST DOUBLE).

The stand-in runs eagle's own kernel, eagle_random of eagle/cuda/kernels/random.cu,
compiled by the CUDA C emulator (tests/doubles/cuda_emulation.h) from the same
csrc/include/eagle/philox.h the CPU kernels are built from. The oracle is the cpu
backend in the same process (itself checked against Random123's known answers and a
NumPy reference in tests/random): every sample's bits equal, for random_bits,
uniform and normal, float32 and float64, across logical sizes (retuned by patching
the kernel node), launch grouping, g.replays rewinds and skips, ids, compaction and
launch_until_done's WHILE node (the replay counter advances inside the graph).
"""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, normal, random_bits, uniform
from fake_cuda import DeviceArray, dev, kernel


@pytest.fixture
def ck(cuda_mod):
    import eagle.cuda.backend  # noqa: F401  (binds the backend to the stand-in)
    from eagle.cuda.kernel_nodes import SIZE, SIZE_PTR, cuda_kernel
    return cuda_kernel, SIZE, SIZE_PTR


MAKERS = {
    "bits": lambda out, **kw: random_bits(out, **kw),
    "uniform": lambda out, **kw: uniform(out, low=-2.0, high=3.0, **kw),
    "normal": lambda out, **kw: normal(out, loc=0.5, scale=2.0, **kw),
}
CASES = [("bits", np.uint32), ("uniform", np.float64), ("uniform", np.float32),
         ("normal", np.float64), ("normal", np.float32)]


def empty(kind, dtype, n, fill=7):
    shape = (n, 4) if kind == "bits" else (n,)
    return np.full(shape, fill, dtype=dtype)


def one_node_graph(kind, out, key, ids=None):
    g = eagle.Graph()
    g.add_node(MAKERS[kind]({"out": out}, key=key, **({"ids": {"id": ids}} if ids is not None else {})),
               name="draw")
    return g.build()


class Pair:
    """The same random node on the cpu backend (NumPy) and the cuda backend (stand-in)."""

    def __init__(self, kind, dtype, n, key, ids=None):
        self.cpu_out = empty(kind, dtype, n)
        d_out = DeviceArray(empty(kind, dtype, n))
        self.gpu_out = d_out.host
        d_ids = DeviceArray(ids) if ids is not None else None
        self.cpu = one_node_graph(kind, self.cpu_out, key, ids)
        self.gpu = one_node_graph(kind, d_out, key, d_ids)
        assert (self.cpu.backend, self.gpu.backend) == ("cpu", "cuda")

    def launch(self, n):
        self.cpu.launch(n)
        self.gpu.launch(n)

    def same(self):
        np.testing.assert_array_equal(self.gpu_out, self.cpu_out)
        assert self.gpu.replays == self.cpu.replays


@pytest.mark.parametrize("kind,dtype", CASES)
@pytest.mark.parametrize("start", [0, 5, (1 << 32) - 2, (1 << 64) - 3])
def test_same_numbers_as_the_cpu(fake, ck, kind, dtype, start):
    # 700 samples: three blocks of 256 threads, the last one partly past the end
    p = Pair(kind, dtype, 700, key=0xfedcba9876543210)
    p.cpu.replays = p.gpu.replays = start
    for _ in range(3):
        p.launch(1)
        p.same()
    assert (p.gpu_out != 7).any() and p.gpu.replays == (start + 3) % (1 << 64)


@pytest.mark.parametrize("kind,dtype", CASES)
def test_launch_3_equals_three_launch_1_and_rewinding_replays(fake, ck, kind, dtype):
    p = Pair(kind, dtype, 300, key=11)
    p.gpu.launch(3)
    after3 = p.gpu_out.copy()
    assert p.gpu.replays == 3
    p.gpu.replays = 0
    for _ in range(3):
        p.gpu.launch(1)
    np.testing.assert_array_equal(p.gpu_out, after3)
    p.gpu.replays = 2          # replay 2 again: the third replay's numbers
    p.gpu.launch(1)
    np.testing.assert_array_equal(p.gpu_out, after3)
    p.cpu.replays = 2
    p.cpu.launch(1)
    p.same()
    p.gpu.replays = 0
    p.gpu.launch(1)
    assert not np.array_equal(p.gpu_out, after3)   # replay 0 draws other numbers


@pytest.mark.parametrize("kind,dtype", CASES)
def test_logical_size_is_patched_and_does_not_change_a_sample_s_numbers(fake, ck, kind, dtype):
    n = 600
    p = Pair(kind, dtype, n, key=5)
    p.gpu.launch(1)
    full = p.gpu_out.copy()
    nodes = fake.fake_cuda_counter(b"cuGraphInstantiate")
    for size in (1, 257, 256, 0, 599):
        p.gpu.replays = 0
        p.gpu_out[...] = 7
        p.gpu.set_logical_size(size)
        p.gpu.launch(1)
        np.testing.assert_array_equal(p.gpu_out[:size], full[:size])
        assert (p.gpu_out[size:] == 7).all()           # past the logical size: untouched
        if size:
            assert fake.fake_cuda_last_grid_x() >= 1
    assert fake.fake_cuda_counter(b"cuGraphInstantiate") == nodes   # patched, not rebuilt


def test_ids_set_the_counter(fake, ck):
    rng = np.random.default_rng(3)
    ids = rng.integers(-(1 << 62), 1 << 62, size=500).astype(np.int64)
    ids[:3] = [0, -1, (1 << 63) - 1]
    for kind, dtype in CASES:
        p = Pair(kind, dtype, 500, key=99, ids=ids)
        p.launch(2)
        p.same()


def test_strided_out(fake, ck):
    host = np.full(800, 7.0)
    d = DeviceArray(host)
    view = d[::2]
    g = eagle.Graph()
    g.add_node(normal(view, key=4))
    g.build()
    g.launch(1)
    want = np.zeros(400)
    gc = eagle.Graph()
    gc.add_node(normal(want, key=4))
    gc.build().launch(1)
    np.testing.assert_array_equal(d.host[::2], want)
    assert (d.host[1::2] == 7.0).all()


def test_two_random_nodes_and_the_graph_s_replay_node(fake, ck):
    """Two nodes of one graph read one counter; the capture adds one eagle_random per
    node and one eagle_replay_step per graph."""
    a, b = dev(np.zeros(100), np.zeros(100, dtype=np.float32))
    g = eagle.Graph()
    g.add_node(uniform(a, key=1), name="u")
    g.add_node(normal(b, key=1), name="z")
    g.build()
    assert g._backend.graph_nodes == 3 and g._backend.sized_kernels == 2
    g.replays = 41
    g.launch(2)
    ca, cb = np.zeros(100), np.zeros(100, dtype=np.float32)
    gc = eagle.Graph()
    gc.add_node(uniform(ca, key=1), name="u")
    gc.add_node(normal(cb, key=1), name="z")
    gc.build()
    gc.replays = 41
    gc.launch(2)
    np.testing.assert_array_equal(a.host, ca)
    np.testing.assert_array_equal(b.host, cb)
    assert g.replays == 43


def test_replays_survive_a_rebuild(fake, ck):
    a, = dev(np.zeros(10))
    g = eagle.Graph()
    g.add_node(uniform(a, key=1))
    g.build()
    g.launch(4)
    g.build()                      # a new CUDA graph, the same g.replays
    assert g.replays == 4
    g.launch(1)
    assert g.replays == 5


# ---- with compaction: the device logical size and launch_until_done ---------------------

def life_state(n, seed, max_life):
    rng = np.random.default_rng(seed)
    life = rng.integers(0, max_life + 1, size=n).astype(np.int64)
    return (life > 0), life, np.arange(n) * 0.25


def numpy_step(alive, life, x):
    m = alive.copy()
    x[m] += 1.0 + 0.5 * life[m].astype(float)
    life[m] -= 1
    alive[m & (life <= 0)] = False


def compaction_graphs(fake, ck, n, seed, max_life):
    """step, compact, then a uniform node keyed by the compaction's ids: on both backends."""
    from eagle.graph import opaque

    cuda_kernel, SIZE, SIZE_PTR = ck
    alive, life, x = life_state(n, seed, max_life)
    ids, count, u = np.arange(n, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(n)
    da, dl, dx, di, dc, du = dev(alive, life, x, ids, count, u)
    gpu = eagle.Graph()
    gpu.add_node(cuda_kernel((kernel(fake, "life_step"), 4), (da, dl, dx, SIZE_PTR),
                             writes={"alive": da, "life": dl, "x": dx}, block=4), name="step")
    gpu.add_node(compact(da, {"life": dl, "x": dx}, ids=di, count=dc, min_dead_fraction=0.0),
                 name="compact")
    gpu.add_node(uniform(du, key=8, ids={"id": di}), name="draw")
    gpu.build()
    cpu = eagle.Graph()
    cpu.add_node(opaque(lambda: numpy_step(alive, life, x),
                        writes={"alive": alive, "life": life, "x": x}), name="step")
    cpu.add_node(compact(alive, {"life": life, "x": x}, ids=ids, count=count, min_dead_fraction=0.0),
                 name="compact")
    cpu.add_node(uniform(u, key=8, ids={"id": ids}), name="draw")
    cpu.build()
    return cpu, gpu, (ids, u), (di.host, du.host)


def test_a_sample_keeps_its_stream_through_compaction(fake, ck):
    cpu, gpu, (ids, u), (gids, gu) = compaction_graphs(fake, ck, 200, 4, 6)
    for k in (1, 2, 1):
        cpu.launch(k)
        gpu.launch(k)
        live = cpu.logical_size
        assert gpu.logical_size == live
        np.testing.assert_array_equal(gids, ids)
        np.testing.assert_array_equal(gu[:live], u[:live])
        assert gpu.replays == cpu.replays


@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done_advances_the_counter_inside_the_while_node(fake, ck, mode):
    cpu, gpu, (ids, u), (gids, gu) = compaction_graphs(fake, ck, 300, 21, 25)
    gpu._backend.until_done_mode = mode
    gpu.replays = cpu.replays = 1000
    assert cpu.launch_until_done(1000) == gpu.launch_until_done(1000) == 25
    if mode == "device":
        assert fake.fake_cuda_launch_count() == 1   # every replay inside one cuGraphLaunch
    assert gpu.replays == cpu.replays == 1025
    np.testing.assert_array_equal(gids, ids)
    # the last replay that drew had samples live: its numbers equal the cpu's (replay 1024)
    np.testing.assert_array_equal(gu, u)


# ---- record-time errors -----------------------------------------------------------------

def test_cuda_record_time_errors(fake, ck):
    a, ids32, ro = dev(np.zeros(10), np.zeros(10, dtype=np.int32), np.zeros(10))
    with pytest.raises(TypeError, match="int64"):
        uniform(a, key=1, ids={"id": ids32})
    with pytest.raises(TypeError, match="one device"):
        uniform(a, key=1, ids={"id": np.zeros(10, dtype=np.int64)})
    bad, = dev(np.zeros((4, 8), dtype=np.uint32))
    with pytest.raises(ValueError, match="contiguous"):
        random_bits(bad[:, ::2], key=1)
    same, = dev(np.zeros(10, dtype=np.int64))
    with pytest.raises(TypeError):
        uniform(same, key=1)      # int64 out
    node = normal({"z": a}, key=2)
    assert node.kind == "random" and node.sized and repr(node) == "normal(out='z', key=2, cuda)"
