"""Random nodes (random_bits, uniform, normal), one scenario per test run on every backend
(the ``backend`` fixture: cpu, the cuda stand-in, a GPU when present).

The oracles: the Python reference of Philox4x32-10 (philox_reference.py, itself
checked against Random123's known answers) for the bits, and the cpu backend's node
launched one replay at a time, in the same process, for every sample's value: equal
bit for bit (normal within 2 ulp on a GPU, equal where its fma, sqrt and division
round as the host's, which IEEE requires). On cuda the kernel is eagle_random
(eagle/cuda/kernels/random.cu; the stand-in runs it through the CUDA C emulator), the
replay counter advancing inside the CUDA graph.
"""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, normal, random_bits, uniform

from backends import CpuBackend
from philox_reference import philox_np, uniform_np

MAKERS = {
    "bits": lambda out, **kw: random_bits(out, **kw),
    "uniform": lambda out, **kw: uniform(out, low=-2.0, high=3.0, **kw),
    "normal": lambda out, **kw: normal(out, loc=0.5, scale=2.0, **kw),
}
CASES = [("bits", np.uint32), ("uniform", np.float64), ("uniform", np.float32),
         ("normal", np.float64), ("normal", np.float32)]


def filled(kind, dtype, n, fill=7):
    return np.full((n, 4) if kind == "bits" else (n,), fill, dtype=dtype)


def one_node_graph(kind, out, key, ids=None, start=0):
    g = eagle.Graph()
    g.add_node(MAKERS[kind]({"out": out}, key=key, **({"ids": {"id": ids}} if ids is not None else {})),
               name="draw")
    g.build()
    g.replays = start
    return g


def reference(kind, dtype, n, key, replay, ids=None):
    """The cpu backend's numbers for `replay` (one replay, one launch)."""
    out = filled(kind, dtype, n)
    one_node_graph(kind, out, key, ids, start=replay).launch(1)
    return out


def assert_same_numbers(backend, kind, got, want):
    if kind == "normal" and not backend.exact_math:
        view = np.int64 if got.dtype == np.float64 else np.int32
        ulps = np.abs(got.view(view).astype(np.int64) - want.view(view).astype(np.int64))
        assert ulps.max() <= 2, ulps.max()
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind,dtype", CASES)
@pytest.mark.parametrize("start", [0, 5, (1 << 32) - 2, (1 << 64) - 3])
def test_same_numbers_whatever_the_launch_grouping_and_logical_size(backend, kind, dtype, start):
    """launch(1) + launch(2) against three launch(1) of the cpu backend; rewinding
    g.replays draws a replay's numbers again, and a smaller logical size (patched into
    the kernel node on cuda) the same numbers for the samples it covers."""
    # 700 samples: three blocks of 256 threads, the last one partly past the end
    n, key = (100_003 if backend.big else 700), 0xfedcba9876543210
    out = backend.asarray(filled(kind, dtype, n))
    g = one_node_graph(kind, out, key, start=start)
    assert g.backend == backend.graph_backend
    g.launch(1)
    assert_same_numbers(backend, kind, backend.asnumpy(out), reference(kind, dtype, n, key, start))
    g.launch(2)
    last = (start + 2) % (1 << 64)
    got = backend.asnumpy(out)
    assert_same_numbers(backend, kind, got, reference(kind, dtype, n, key, last))
    assert g.replays == (start + 3) % (1 << 64)   # the count wraps at 2**64
    if kind == "bits":
        np.testing.assert_array_equal(got, philox_np(np.arange(n), last, key))
    g.replays = last               # replay start + 2 again: its numbers again
    g.launch(1)
    np.testing.assert_array_equal(backend.asnumpy(out), got)
    g.replays = start
    g.launch(1)
    assert not np.array_equal(backend.asnumpy(out), got)   # another replay draws other numbers
    fake = backend.fake
    instantiated = fake.fake_cuda_counter(b"cuGraphInstantiate") if fake else 0
    for size in (1, 257, 256, 0, n - 1):
        backend.put(out, Ellipsis, 7)
        g.set_logical_size(size)
        g.replays = last
        g.launch(1)
        part = backend.asnumpy(out)
        np.testing.assert_array_equal(part[:size], got[:size])
        assert (part[size:] == 7).all()            # past the logical size: untouched
        if fake and size:
            assert fake.fake_cuda_last_grid_x() >= 1
    if fake:
        assert fake.fake_cuda_counter(b"cuGraphInstantiate") == instantiated   # patched, not rebuilt


def test_ids_set_the_counter(backend):
    rng = np.random.default_rng(3)
    n, key = 500, 99
    ids = rng.integers(-(1 << 62), 1 << 62, size=n).astype(np.int64)
    ids[:3] = [0, -1, (1 << 63) - 1]
    for kind, dtype in CASES:
        out = backend.asarray(filled(kind, dtype, n))
        g = one_node_graph(kind, out, key, backend.asarray(ids), start=123)
        g.launch(2)
        got = backend.asnumpy(out)
        assert_same_numbers(backend, kind, got, reference(kind, dtype, n, key, 124, ids))
        if kind == "bits":
            np.testing.assert_array_equal(got, philox_np(ids, 124, key))


def test_strided_out(backend):
    whole = backend.asarray(np.full(800, 7.0))
    g = eagle.Graph()
    g.add_node(normal(whole[::2], key=4))
    g.build()
    g.launch(1)
    want = np.zeros(400)
    gc = eagle.Graph()
    gc.add_node(normal(want, key=4))
    gc.build().launch(1)
    got = backend.asnumpy(whole)
    assert_same_numbers(backend, "normal", got[::2], want)
    assert (got[1::2] == 7.0).all()


# ---- with compaction: the logical size from the live count, and launch_until_done --------

def life_state(n, seed, max_life):
    rng = np.random.default_rng(seed)
    life = rng.integers(0, max_life + 1, size=n).astype(np.int64)
    return (life > 0), life, np.arange(n) * 0.25


def compaction_graph(backend, n, seed, max_life):
    """step, compact, then a uniform node keyed by the compaction's ids."""
    b = backend
    alive, life, x = (b.asarray(a) for a in life_state(n, seed, max_life))
    ids, count, u = b.asarray(np.arange(n, dtype=np.int64)), b.zeros(1, np.int64), b.zeros(n)
    g = eagle.Graph()
    g.add_node(b.life_step(alive, life, x), name="step")
    g.add_node(compact(alive, {"life": life, "x": x}, ids=ids, count=count, min_dead_fraction=0.0),
               name="compact")
    g.add_node(uniform(u, key=8, ids={"id": ids}), name="draw")
    g.build()
    return g, ids, u


def drawn_for(ids, replay, n_live):
    """What the uniform node draws for the live samples (their ids) in `replay`."""
    return uniform_np(philox_np(ids[:n_live], replay, 8), 0.0, 1.0, np.float64)


def test_a_sample_keeps_its_stream_through_compaction(backend):
    g, ids, u = compaction_graph(backend, 200, 4, 6)
    alive = life_state(200, 4, 6)[0]
    for k in (1, 2, 1):
        g.launch(k)
        live = g.logical_size
        assert 0 < live < alive.size
        np.testing.assert_array_equal(backend.asnumpy(u)[:live],
                                      drawn_for(backend.asnumpy(ids), g.replays - 1, live))


@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done_advances_the_counter_inside_the_while_node(cuda_backend, mode):
    from eagle.cuda import _driver
    if mode == "device" and not _driver.has("conditional"):
        pytest.skip(f"conditional nodes need a 12.4 driver, this one is {_driver.driver_version()}")
    b = cuda_backend
    g, ids, u = compaction_graph(b, 300, 21, 25)
    g._backend.until_done_mode = mode
    g.replays = 1000
    assert g.launch_until_done(1000) == 25
    if mode == "device" and b.fake:
        assert b.fake.fake_cuda_launch_count() == 1   # every replay inside one cuGraphLaunch
    assert g.replays == 1025
    # the same ids and numbers as the cpu backend's launch_until_done
    cpu, cpu_ids, cpu_u = compaction_graph(CpuBackend(), 300, 21, 25)
    cpu.replays = 1000
    cpu.launch_until_done(1000)
    np.testing.assert_array_equal(b.asnumpy(ids), cpu_ids)
    np.testing.assert_array_equal(b.asnumpy(u), cpu_u)


@pytest.mark.parametrize("kind,params", [
    ("uniform", {"low": 0.0, "high": 3e-38}),            # subnormal and small normal results
    ("uniform", {"low": -1e-39, "high": 2e-39}),         # subnormal low, high and span
    ("normal", {"loc": 0.0, "scale": 1e-39}),            # subnormal results, rounded from double
])
def test_float32_subnormals_are_the_cpu_s(backend, kind, params):
    """CuPy compiles every module with -ftz=true, which makes the compiler's float32
    instructions flush subnormal operands and results to 0 (the stand-in's emulator models
    it): eagle_random's float32 work is explicit PTX that keeps them, as the CPU does."""
    n, key = 700, 11
    make = uniform if kind == "uniform" else normal
    out = backend.asarray(np.full(n, 7, np.float32))
    g = eagle.Graph()
    g.add_node(make({"out": out}, key=key, **params), name="draw")
    g.build()
    g.launch(1)
    want = np.full(n, 7, np.float32)
    gc = eagle.Graph()
    gc.add_node(make({"out": want}, key=key, **params), name="draw")
    gc.build()
    gc.launch(1)
    assert (np.abs(want[want != 0]) < np.finfo(np.float32).tiny).sum() > 10   # subnormals drawn
    got = backend.asnumpy(out)
    if kind == "normal" and not backend.exact_math:
        assert_same_numbers(backend, kind, got, want)
    else:
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_two_output_uniform_gives_the_cpu_numbers(backend, dtype):
    """A uniform node with two outputs (words 0, 1 and 2, 3 of one block) through ids and a
    replay past 2**32: the cpu backend's numbers on every backend."""
    n, key, replay = (100_003 if backend.big else 700), 0xfedcba9876543210, (1 << 32) + 5
    ids = np.random.default_rng(5).permutation(4 * n)[:n].astype(np.int64)
    outs = []
    for b in (backend, CpuBackend()):
        a, c = b.asarray(np.full(n, 7, dtype)), b.asarray(np.full(n, 7, dtype))
        g = eagle.Graph()
        g.add_node(uniform({"a": a, "c": c}, key=key, low=-2.0, high=3.0, ids={"id": b.asarray(ids)}))
        g.build()
        g.replays = replay
        g.launch(1)
        outs.append((b.asnumpy(a), b.asnumpy(c)))
    (a, c), (a_cpu, c_cpu) = outs
    np.testing.assert_array_equal(a, a_cpu)
    np.testing.assert_array_equal(c, c_cpu)
    np.testing.assert_array_equal(a_cpu, reference("uniform", dtype, n, key, replay, ids))
    assert not np.array_equal(a_cpu, c_cpu)
