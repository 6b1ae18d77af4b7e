"""Random nodes (eagle.graph.random_bits, uniform, normal) on the cpu backend:
Philox4x32-10's known answers, the counter layout, the transforms, the statistics,
independence from threads / launch grouping / logical size / compaction, g.replays,
and the record-time errors."""
import math
import subprocess
import sys

import numpy as np
from numpy.lib.stride_tricks import as_strided
import pytest

import eagle
from eagle.graph import compact, normal, opaque, random_bits, ufunc, uniform

from philox_reference import normal_np, philox_np, philox_py, uniform_np

# Random123's known-answer vectors for philox4x32-10 (kat_vectors): counter, key, result
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


@pytest.fixture
def threads():
    before = eagle.get_num_threads()
    yield
    eagle.set_num_threads(before)


def one_node(node):
    g = eagle.Graph()
    g.add_node(node)
    return g.build()


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_python_reference_gives_random123_known_answers(ctr, key, want):
    assert philox_py(ctr, key) == want
    ids = np.array([ctr[0] | ctr[1] << 32], dtype=np.uint64).view(np.int64)
    assert tuple(philox_np(ids, ctr[2] | ctr[3] << 32, key[0] | key[1] << 32)[0]) == want


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_random_bits_give_random123_known_answers(ctr, key, want):
    out = np.zeros((1, 4), dtype=np.uint32)
    ids = np.array([ctr[0] | ctr[1] << 32], dtype=np.uint64).view(np.int64)
    g = one_node(random_bits(out, key=key[0] | key[1] << 32, ids={"id": ids}))
    g.replays = ctr[2] | ctr[3] << 32
    g.launch(1)
    assert tuple(int(w) for w in out[0]) == want


def test_counter_layout_at_several_replays_and_across_2_32():
    n, key = 1000, 0x0123456789abcdef
    out = np.zeros((n, 4), dtype=np.uint32)
    g = one_node(random_bits({"bits": out}, key=key))
    for start in (0, 5, (1 << 32) - 2, (1 << 64) - 3):
        g.replays = start
        for r in range(start, start + 3):
            g.launch(1)
            np.testing.assert_array_equal(out, philox_np(np.arange(n), r, key))
        assert g.replays == (start + 3) % (1 << 64)   # the count wraps at 2**64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-3.5, 2.25), (1e6, 1e6 + 1)])
def test_uniform_matches_numpy_reference(dtype, low, high):
    n, key = 5000, 99
    out = np.empty(n, dtype=dtype)
    g = one_node(uniform(out, key=key, low=low, high=high))
    g.replays = 1 << 33
    g.launch(1)
    ref = uniform_np(philox_np(np.arange(n), 1 << 33, key), low, high, dtype)
    np.testing.assert_array_equal(out, ref)
    assert out.min() >= dtype(low) and out.max() < dtype(high)


@pytest.mark.parametrize("dtype,ulps", [(np.float64, 4), (np.float32, 1)])
def test_normal_matches_numpy_reference_within_ulps(dtype, ulps):
    n, key = 20000, 5
    out = np.empty(n, dtype=dtype)
    g = one_node(normal(out, key=key))
    g.launch(2)   # draws replay 1 last
    ref = normal_np(philox_np(np.arange(n), 1, key), 0.0, 1.0, dtype)
    err = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    assert np.all(err <= ulps * np.spacing(np.abs(ref).astype(dtype)).astype(np.float64))


def test_normal_loc_scale():
    n = 4096
    z, y = np.empty(n), np.empty(n)
    g = eagle.Graph()
    g.add_group([normal({"z": z}, key=3), normal({"y": y}, key=3, loc=2.0, scale=0.5)])
    g.build().launch(1)
    np.testing.assert_allclose(y, 2.0 + 0.5 * z, rtol=1e-15, atol=1e-15)
    zero = np.empty(8)
    one_node(normal(zero, key=1, loc=-1.5, scale=0.0)).launch(1)
    assert np.all(zero == -1.5)


def _ks_statistic(x):
    x = np.sort(x)
    cdf = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_normal_moments_and_kolmogorov_smirnov(dtype):
    n = 200_000
    out = np.empty(n, dtype=dtype)
    one_node(normal(out, key=2024)).launch(1)
    x = out.astype(np.float64)
    se = 1 / math.sqrt(n)
    assert abs(x.mean()) < 5 * se
    assert abs(x.var() - 1) < 5 * math.sqrt(2) * se
    assert abs(np.mean(x ** 3)) < 5 * math.sqrt(15) * se
    assert abs(np.mean(x ** 4) - 3) < 5 * math.sqrt(96) * se
    # KS on a subsample (the erf loop is Python): critical value at alpha = 0.001
    d = _ks_statistic(x[:20_000])
    assert d < 1.95 / math.sqrt(20_000)


def test_uniform_kolmogorov_smirnov():
    n = 100_000
    out = np.empty(n)
    one_node(uniform(out, key=11)).launch(1)
    x = np.sort(out)
    d = max(np.max(np.arange(1, n + 1) / n - x), np.max(x - np.arange(n) / n))
    assert d < 1.95 / math.sqrt(n)


def _chain(n, key=42):
    """normal -> in-place ufunc, so the stage is sized and splits."""
    z = np.empty(n)
    bits = np.empty((n, 4), dtype=np.uint32)
    g = eagle.Graph()
    g.add_node(normal({"z": z}, key=key), name="z")
    g.add_node(random_bits({"bits": bits}, key=key), name="bits")
    g.add_node(eagle.graph.ufunc(np.multiply, {"z": z}, 2.0, out={"z": z}), name="twice")
    return g, z, bits


def test_same_numbers_on_1_and_2_threads_and_any_launch_grouping(threads):
    n = 100_003
    results = []
    for nt, policy in ((1, "serial"), (2, "parallel"), (2, "auto")):
        eagle.set_num_threads(nt)
        g, z, bits = _chain(n)
        g.build(cpu=eagle.CpuOptions(teams=policy))
        g.launch(3)
        results.append((z.copy(), bits.copy()))
        g2, z2, bits2 = _chain(n)
        g2.build(cpu=eagle.CpuOptions(teams=policy))
        for _ in range(3):
            g2.launch(1)
        np.testing.assert_array_equal(z2, z)
        np.testing.assert_array_equal(bits2, bits)
        assert g.replays == g2.replays == 3
    for z, bits in results[1:]:
        np.testing.assert_array_equal(z, results[0][0])
        np.testing.assert_array_equal(bits, results[0][1])
    np.testing.assert_array_equal(results[0][1], philox_np(np.arange(n), 2, 42))


def test_logical_size_does_not_change_a_sample_s_numbers(threads):
    eagle.set_num_threads(2)
    n = 10_000
    full = np.empty(n)
    one_node(normal(full, key=8)).launch(1)
    part = np.full(n, np.nan)
    g = one_node(normal(part, key=8))
    g.set_logical_size(3_333)
    g.launch(1)
    np.testing.assert_array_equal(part[:3_333], full[:3_333])
    assert np.isnan(part[3_333:]).all()


def test_a_sample_keeps_its_stream_through_compaction_with_ids():
    n = 1000
    rng = np.random.default_rng(0)
    alive = rng.random(n) < 0.6
    ids = np.arange(n, dtype=np.int64)
    z = np.empty(n)
    g = eagle.Graph()
    g.add_node(normal({"z": z}, key=77, ids={"id": ids}), name="draw")
    g.add_node(compact(alive, {"z": z}, ids=ids, min_dead_fraction=0.0), name="compact")
    g.build()
    g.launch(1)   # replay 0 draws every sample, then compacts
    live = g.logical_size
    assert live == alive.sum()
    kept = ids[:live].copy()
    g.launch(1)   # replay 1 draws the live samples at their new positions
    ref = normal_np(philox_np(kept, 1, 77), 0.0, 1.0, np.float64)
    np.testing.assert_allclose(z[:live], ref, rtol=1e-13, atol=1e-15)
    # the same samples drawn in place, without compaction
    full = np.empty(n)
    g2 = one_node(normal(full, key=77))
    g2.replays = 1
    g2.launch(1)
    np.testing.assert_array_equal(z[:live], full[kept])


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("with_ids", [False, True])
def test_fused_with_a_ufunc_chain_gives_the_unfused_numbers(threads, n_threads, with_ids):
    """A random node is sample-local: it joins the fused run of the ufunc chain after it
    (the plan says so), and fused and unfused replays give the same bits, which are the
    NumPy reference's."""
    eagle.set_num_threads(n_threads)
    n = 50_001                                     # not a multiple of any tile
    ids = np.arange(n, dtype=np.int64)[::-1].copy() if with_ids else None

    def gbm(fuse, tile=None):
        z, w, S = np.empty(n), np.empty(n), np.full(n, 100.0)
        g = eagle.Graph()
        g.add_node(normal({"z": z}, key=7, ids={"id": ids} if with_ids else None), name="draw")
        g.add_node(eagle.graph.ufunc(np.multiply, {"z": z}, 0.02, out={"w": w}), name="diffuse")
        g.add_node(eagle.graph.ufunc(np.exp, {"w": w}, out={"w": w}), name="grow")
        g.add_node(eagle.graph.ufunc(np.multiply, {"S": S}, {"w": w}, out={"S": S}), name="step")
        g.build(cpu=eagle.CpuOptions(fuse=tile if (fuse and tile) else fuse))
        g.replays = 2**32 - 2                      # the replay word crosses 2**32 in the launch
        g.launch(3)
        return g, S, z

    gf, Sf, zf = gbm(True, 1000)
    gu, Su, zu = gbm(False)
    run = gf.plan().fused_runs
    assert run and run[0] == ((0, 3), 1000), gf.plan()   # the draw and the whole chain, one run
    assert not gu.plan().fused_runs
    assert np.array_equal(Sf, Su) and np.array_equal(zf, zu)
    ref = normal_np(philox_np(ids if with_ids else np.arange(n), 2**32, 7), 0.0, 1.0, np.float64)
    assert np.all(np.abs(zf - ref) <= 4 * np.spacing(np.abs(ref)))   # the last replay's draw


def test_replays_counts_launches_until_done_and_failed_launches():
    x = np.zeros(4)
    calls = []

    def step():
        calls.append(1)
        if len(calls) == 7:
            raise RuntimeError("boom")

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"x": x}))
    assert g.replays == 0
    g.replays = 10          # before build: kept
    g.build()
    assert g.replays == 10
    g.launch(4)
    assert g.replays == 14
    with pytest.raises(RuntimeError, match="boom"):
        g.launch(5)         # fails in its 3rd replay: 2 completed
    assert g.replays == 16
    g.build()               # a rebuild keeps the count
    assert g.replays == 16
    g.add_node(opaque(lambda: None, reads={"x": x}))   # so does recording
    assert g.replays == 16
    g.build().launch(1)
    assert g.replays == 17
    for bad, err in ((-1, ValueError), (1 << 64, ValueError), (1.0, TypeError), (True, TypeError)):
        with pytest.raises(err):
            g.replays = bad
    assert g.replays == 17


def test_replays_counts_launch_until_done():
    n = 100
    alive = np.ones(n, dtype=bool)
    left = np.arange(n, dtype=np.int64) % 5 + 1

    def age():
        left[:] -= 1
        alive[:] = left > 0

    g = eagle.Graph()
    g.add_node(opaque(age, writes={"left": left, "alive": alive}))
    g.add_node(compact(alive, {"left": left}, min_dead_fraction=0.0))
    g.build()
    done = g.launch_until_done(100)
    assert done == 5 and g.replays == 5


def test_rewinding_replays_draws_the_same_numbers():
    out = np.empty(1000)
    g = one_node(uniform(out, key=1))
    g.launch(1)
    first = out.copy()
    g.launch(1)
    assert not np.array_equal(out, first)
    g.replays = 0
    g.launch(1)
    np.testing.assert_array_equal(out, first)


def test_strided_out_and_ids():
    n = 999
    buf = np.zeros((n, 3))
    ids_buf = np.zeros((n, 2), dtype=np.int64)
    ids_buf[:, 1] = np.arange(n)[::-1]
    g = one_node(normal(buf[:, 1], key=4, ids={"id": ids_buf[:, 1]}))
    g.launch(1)
    ref = np.empty(n)
    one_node(normal(ref, key=4)).launch(1)
    np.testing.assert_array_equal(buf[:, 1], ref[::-1])
    assert not buf[:, 0].any() and not buf[:, 2].any()


def test_picture_and_plan_show_random_nodes():
    g, _, _ = _chain(64)
    text = str(g)
    assert "~z~" in text and "~bits~" in text
    assert "random_bits" in repr(g.recording().nodes[1]) or "bits" in repr(g.recording().nodes[1])
    assert "parallelogram" in g.to_dot()


@pytest.mark.parametrize("make,err,match", [
    (lambda: uniform(np.empty(4, dtype=np.int64), key=1), TypeError, "float32 or float64"),
    (lambda: normal(np.empty(4, dtype=np.complex128), key=1), TypeError, "float32 or float64"),
    (lambda: normal(np.empty((4, 2)), key=1), ValueError, "1-d"),
    (lambda: random_bits(np.empty((4, 4), dtype=np.int32), key=1), TypeError, r"uint32 array of shape \(n, 4\)"),
    (lambda: random_bits(np.empty((4, 2), dtype=np.uint32), key=1), TypeError, r"\(n, 4\)"),
    (lambda: random_bits(np.empty((4, 8), dtype=np.uint32)[:, ::2], key=1), ValueError, "contiguous"),
    (lambda: normal(np.empty(4), key=-1), ValueError, r"\[0, 2\*\*64\)"),
    (lambda: normal(np.empty(4), key=1 << 64), ValueError, r"\[0, 2\*\*64\)"),
    (lambda: normal(np.empty(4), key=1.5), TypeError, "key"),
    (lambda: normal(np.empty(4), key=True), TypeError, "key"),
    (lambda: normal(np.empty(4), key=1, ids={"id": np.arange(4, dtype=np.int32)}), TypeError, "int64"),
    (lambda: normal(np.empty(4), key=1, ids={"id": np.arange(3)}), ValueError, "per-sample"),
    (lambda: normal(np.empty(4), key=1, ids={"id": np.zeros((4, 1), dtype=np.int64)}), ValueError, "per-sample"),
    (lambda: normal(np.empty(4), key=1, scale=-1.0), ValueError, "scale"),
    (lambda: normal(np.empty(4), key=1, scale=float("nan")), ValueError, "scale"),
    (lambda: uniform(np.empty(4), key=1, low=1.0, high=1.0), ValueError, "low must be below high"),
    (lambda: uniform(np.empty(4), key=1, low=2.0, high=1.0), ValueError, "low must be below high"),
    (lambda: uniform(np.empty(4, dtype=np.float32), key=1, low=1.0, high=1.0 + 1e-12), ValueError, "same float32"),
    (lambda: uniform(np.empty(4), key=1, high=float("inf")), ValueError, "finite"),
    (lambda: normal(np.empty(4), key=1, loc="0"), TypeError, "real number"),
    (lambda: normal([1.0, 2.0], key=1), TypeError, "out must be a NumPy array, a CUDA array"),
    (lambda: normal({"a": np.empty(4), "b": np.empty(4)}, key=1), TypeError, "one-entry"),
    (lambda: normal(np.empty(4)[:0:-1].base if False else np.frombuffer(bytes(32)), key=1), ValueError, "read-only"),
    # an out whose samples share memory: every sample's draw would land in one element
    (lambda: uniform(as_strided(np.zeros(4), shape=(4,), strides=(0,)), key=1), ValueError,
     r"uniform\(\): elements of out 'out' share memory \(strides \(0,\)\)"),
    (lambda: normal({"z": as_strided(np.zeros(4), shape=(4,), strides=(0,))}, key=1), ValueError,
     r"normal\(\): elements of out 'z' share memory"),
    (lambda: random_bits(as_strided(np.zeros((4, 4), np.uint32), shape=(4, 4), strides=(0, 4)), key=1),
     ValueError, r"random_bits\(\): elements of out 'out' share memory"),
])
def test_record_time_errors(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_the_largest_normal_z_is_the_compiled_transform_s():
    """NORMAL_Z_MAX, the bound the record-time check uses, is what the compiled transform
    gives at its extremes (u1 = 2**-53: the top 53 bits of w0, w1 zero; u2 = 0 or 1/2),
    and no word near them draws a larger |z|."""
    from eagle.cpu._random import normal_from_words
    from eagle.record.random import NORMAL_Z_MAX
    assert normal_from_words(0, 0, 0, 0) == NORMAL_Z_MAX                # u2 = 0: cos = 1
    assert normal_from_words(0, 0, 0, 1 << 31) == -NORMAL_Z_MAX         # u2 = 1/2: cos = -1
    assert 8.5716 < NORMAL_Z_MAX < 8.5717                               # sqrt(106 ln 2)
    rng = np.random.default_rng(5)
    for w0 in [0, 2047, 2048, 4095, 1 << 20]:
        for w2, w3 in [(0, 0), (2047, 0), (0, 1), (0, (1 << 31) - 1), (0, 1 << 31), (0, (1 << 31) + 1),
                       *((int(a), int(b)) for a, b in rng.integers(0, 1 << 32, (20, 2)))]:
            assert abs(normal_from_words(w0, 0, w2, w3)) <= NORMAL_Z_MAX


def test_normal_and_uniform_parameters_that_overflow_the_dtype_are_refused():
    """A float32 normal with scale=1e38 drew inf for |z| > 3.4; the bound is the largest
    |z| the transform draws, so the largest scale that fits is accepted."""
    from eagle.record.random import NORMAL_Z_MAX
    f32 = np.empty(4, np.float32)
    big = float(np.finfo(np.float32).max)
    with pytest.raises(ValueError, match=r"normal\(\): loc=0.0 ± scale=1e\+38 × 8.571674 .* overflows "
                                         r"float32 .* use a float64 out"):
        normal(f32, key=1, scale=1e38)
    with pytest.raises(ValueError, match=r"normal\(\): scale=1e\+39 is not finite in float32"):
        normal(f32, key=1, scale=1e39)
    with pytest.raises(ValueError, match=r"normal\(\): loc=-3.5e\+38 is not finite in float32"):
        normal(f32, key=1, loc=-3.5e38, scale=0.0)
    with pytest.raises(ValueError, match="overflows float32"):
        normal(f32, key=1, loc=-big, scale=1e32)           # loc - scale * z below -max
    with pytest.raises(ValueError, match=r"overflows float64 \(largest 1.79.*\): some samples would "
                                         r"be inf; use a smaller scale"):
        normal(np.empty(4), key=1, scale=1e308)
    normal(f32, key=1, loc=big, scale=1.0)    # max + 8.57 rounds back to max in float32
    fits = big / NORMAL_Z_MAX * (1 - 1e-9)
    node = normal(f32, key=1, scale=fits)
    one_node(node).launch(3)
    assert np.isfinite(f32).all()
    with pytest.raises(ValueError, match=r"uniform\(\): high=1e\+39 is not finite in float32"):
        uniform(f32, key=1, high=1e39)
    with pytest.raises(ValueError, match=r"uniform\(\): low=-1e\+39 is not finite in float32"):
        uniform(f32, key=1, low=-1e39, high=0.0)
    with pytest.raises(ValueError, match=r"high - low = 3e\+38 - -3e\+38 overflows float32"):
        uniform(f32, key=1, low=-3e38, high=3e38)
    uniform(np.empty(4), key=1, low=-3e38, high=3e38)


def test_ids_sharing_memory_with_out_is_refused():
    buf = np.zeros(8, dtype=np.int64)
    with pytest.raises(ValueError, match="shares memory"):
        normal(buf.view(np.float64), key=1, ids={"id": buf})


def test_zero_samples_and_a_key_at_the_top():
    out = np.empty((0, 4), dtype=np.uint32)
    g = one_node(random_bits(out, key=(1 << 64) - 1))
    g.launch(2)
    assert g.replays == 2
    one = np.empty((1, 4), dtype=np.uint32)
    one_node(random_bits(one, key=(1 << 64) - 1)).launch(1)
    assert tuple(int(w) for w in one[0]) == philox_py((0, 0, 0, 0), (0xffffffff, 0xffffffff))


def test_a_launch_from_inside_a_node_keeps_the_outer_replay():
    """A node that launches another graph (its executor sets the thread's replay) does
    not change the replay the outer graph's later random node draws."""
    n = 16
    inner_out = np.empty(n)
    inner = one_node(normal(inner_out, key=1))
    inner.replays = 1000
    out = np.empty((n, 4), dtype=np.uint32)
    flag = np.zeros(1)
    g = eagle.Graph()
    g.add_node(opaque(lambda: inner.launch(1), writes={"flag": flag}), name="inner")
    g.add_node(random_bits(out, key=3), name="bits")
    g.build(cpu=eagle.CpuOptions(teams="serial"))
    g.replays = 5
    g.launch(1)
    np.testing.assert_array_equal(out, philox_np(np.arange(n), 5, 3))
    assert inner.replays == 1001


def test_cuda_arrays_make_a_cuda_node_without_a_driver():
    """A CUDA array makes the cuda node (eagle.cuda.random_node; tests/cuda runs it on the
    driver stand-in) at record time, with no driver needed; ids on another device are refused."""
    class DeviceArray:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (1 << 20, False), "version": 3}

    node = normal(DeviceArray(), key=1)
    assert type(node).__name__ == "CudaRandomNode" and node.sized
    with pytest.raises(TypeError, match="one device"):
        normal(DeviceArray(), key=1, ids={"id": np.zeros(4, dtype=np.int64)})


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_two_output_uniform_takes_words_0_1_then_2_3_of_one_block(dtype):
    """The first output is the one-output node's numbers; the second is the same transform
    of the block's words 2 and 3 (word 2 alone for float32), through ids and replays."""
    n, key, low, high = 3000, 0x5eed, -1.0, 1.0
    ids = np.random.default_rng(3).permutation(10 * n)[:n].astype(np.int64)
    a, b, one = np.zeros(n, dtype), np.zeros(n, dtype), np.zeros(n, dtype)
    g = one_node(uniform({"a": a, "b": b}, key=key, low=low, high=high, ids={"id": ids}))
    h = one_node(uniform({"one": one}, key=key, low=low, high=high, ids={"id": ids}))
    for replay in (0, 7, (1 << 32) - 1):
        g.replays = h.replays = replay
        g.launch(1)
        h.launch(1)
        w = philox_np(ids, replay, key)
        np.testing.assert_array_equal(a, one)
        np.testing.assert_array_equal(a, uniform_np(w, low, high, dtype))
        np.testing.assert_array_equal(b, uniform_np(w[:, [2, 3, 0, 1]], low, high, dtype))


def test_two_output_uniform_is_the_same_whatever_the_threads_and_tiles(threads):
    n = 50_000
    got = []
    for t, fuse in ((1, False), (2, False), (2, 256), (2, True)):
        eagle.set_num_threads(t)
        a, b, c = np.zeros(n), np.zeros(n), np.zeros(n)
        g = eagle.Graph()
        g.add_node(uniform({"a": a, "b": b}, key=9))
        g.add_node(ufunc(np.subtract, {"a": a}, {"b": b}, out={"c": c}))
        g.build(cpu=eagle.CpuOptions(teams="parallel", fuse=fuse))
        g.launch(2)
        got.append((a.copy(), b.copy(), c.copy()))
    for arrays in got[1:]:
        for x, y in zip(arrays, got[0]):
            np.testing.assert_array_equal(x, y)


def test_two_output_uniform_refusals():
    x = np.zeros(10)
    with pytest.raises(TypeError, match="one shape and dtype"):
        uniform({"a": x, "b": np.zeros(10, np.float32)}, key=1)
    with pytest.raises(TypeError, match="one shape and dtype"):
        uniform({"a": x, "b": np.zeros(11)}, key=1)
    with pytest.raises(ValueError, match="share memory"):
        uniform({"a": x, "b": x}, key=1)
    with pytest.raises(TypeError, match="one-entry dict"):
        uniform({"a": x, "b": np.zeros(10), "c": np.zeros(10)}, key=1)
    with pytest.raises(TypeError, match="one-entry dict"):
        normal({"a": x, "b": np.zeros(10)}, key=1)
    with pytest.raises(ValueError, match="both named 'id'"):
        uniform({"a": x, "id": np.zeros(10)}, key=1, ids={"id": np.arange(10)})
