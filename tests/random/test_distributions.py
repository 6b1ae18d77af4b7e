"""Distribution nodes (eagle.graph.exponential, poisson, binomial, integers) on the cpu
backend: the vectorised kernels against the header's scalar sampler, the statistics
against scipy.stats, the counter layout, the parameters (scalars refused at record time,
per-sample arrays and their markers), and independence from threads, launch grouping,
fusion, logical size and compaction."""
import numpy as np
import pytest
from scipy import stats

import eagle
from eagle.cpu._random import dist_block, reference_sample
from eagle.graph import binomial, compact, exponential, integers, poisson, random_bits
from eagle.record.distributions import BINOMIAL, EXPONENTIAL, INTEGERS, POISSON

from philox_reference import philox_np


@pytest.fixture
def threads():
    before = eagle.get_num_threads()
    yield
    eagle.set_num_threads(before)


def draw(make, size, dtype=np.int64, replay=0, key=2026, build=None, **kw):
    out = np.zeros(size, dtype=dtype)
    g = eagle.Graph()
    g.add_node(make({"out": out}, key=key, **kw), name="draw")
    g.build(**(build or {}))
    g.replays = replay
    g.launch(1)
    return out


def reference(what, n, replay, key, step=1, **params):
    """The header's scalar sampler, sample by sample (params: scalars or per-sample arrays)."""
    names = {EXPONENTIAL: ("d0",), POISSON: ("d0",), BINOMIAL: ("i0", "d1"), INTEGERS: ("i0", "i1")}[what]
    got = []
    for i in range(0, n, step):
        kw = {}
        for name, v in zip(names, params["args"]):
            v = v[i] if isinstance(v, np.ndarray) else v
            kw[name] = float(v) if name.startswith("d") else int(v)
        got.append(reference_sample(what, key, i, replay, i32=params.get("i32", False), **kw))
    return np.array(got)


def same(got, want):
    return np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


# ---- the vectorised kernels give the scalar sampler's numbers -------------------------

SCALAR_CASES = [
    (EXPONENTIAL, exponential, np.float64, {"scale": 2.5}, (2.5,)),
    (EXPONENTIAL, exponential, np.float32, {"scale": 0.5}, (0.5,)),
    (POISSON, poisson, np.int64, {"lam": 0.0}, (0.0,)),
    (POISSON, poisson, np.int64, {"lam": 1e-3}, (1e-3,)),
    (POISSON, poisson, np.int64, {"lam": 7.25}, (7.25,)),
    (POISSON, poisson, np.int64, {"lam": 10.0}, (10.0,)),
    (POISSON, poisson, np.int64, {"lam": 1e4}, (1e4,)),
    (POISSON, poisson, np.int64, {"lam": 1e15}, (1e15,)),
    (BINOMIAL, binomial, np.int64, {"n": 0, "p": 0.5}, (0, 0.5)),
    (BINOMIAL, binomial, np.int64, {"n": 30, "p": 0.2}, (30, 0.2)),
    (BINOMIAL, binomial, np.int64, {"n": 30, "p": 0.8}, (30, 0.8)),
    (BINOMIAL, binomial, np.int64, {"n": 10**9, "p": 1e-9}, (10**9, 1e-9)),
    (BINOMIAL, binomial, np.int64, {"n": 10**9, "p": 0.5}, (10**9, 0.5)),
    (BINOMIAL, binomial, np.int64, {"n": 1000, "p": 0.97}, (1000, 0.97)),
    (BINOMIAL, binomial, np.int64, {"n": (1 << 52) - 1, "p": 0.25}, ((1 << 52) - 1, 0.25)),
    (INTEGERS, integers, np.int64, {"low": -3, "high": 4}, (-3, 4)),
    (INTEGERS, integers, np.int64, {"low": 0, "high": 3 << 30}, (0, 3 << 30)),   # a word rejected often
    (INTEGERS, integers, np.int64, {"low": 0, "high": (1 << 32) + 1}, (0, (1 << 32) + 1)),
    (INTEGERS, integers, np.int64, {"low": -(1 << 63), "high": (1 << 63) - 1}, (-(1 << 63), (1 << 63) - 1)),
    (INTEGERS, integers, np.int32, {"low": -(1 << 31), "high": 1 << 31}, (-(1 << 31), 1 << 31)),
]


@pytest.mark.parametrize("what,make,dtype,kw,args", SCALAR_CASES)
def test_the_kernel_gives_the_scalar_sampler_s_numbers(what, make, dtype, kw, args):
    n, replay, key = 3001, 5, 0xdeadbeefcafe
    got = draw(make, n, dtype, replay, key, **kw)
    want = reference(what, n, replay, key, step=7, args=args, i32=dtype == np.int32)
    assert same(got[::7], want.astype(got.dtype))


def test_per_sample_parameters_and_their_markers():
    """Per-sample arrays, good and bad values mixed: every sample gets the scalar
    sampler's number for its own parameters; a bad one gets the documented marker."""
    rng = np.random.default_rng(1)
    n, key, replay = 4000, 31, 9
    lam = rng.choice([0.0, 0.3, 4.0, 9.99, 10.0, 80.0, 1e6, -1.0, np.nan, np.inf, 2e15], n)
    got = draw(poisson, n, replay=replay, key=key, lam={"lam": lam})
    assert same(got, reference(POISSON, n, replay, key, args=(lam,)))
    assert (got[~((lam >= 0) & (lam <= 1e15))] == -1).all() and (got[(lam >= 0) & (lam <= 1e15)] >= 0).all()

    nn = rng.choice([0, 1, 7, 100, 10**6, 10**9, -5, 1 << 60], n).astype(np.int64)
    p = rng.choice([0.0, 1e-9, 0.01, 0.3, 0.5, 0.7, 1 - 1e-9, 1.0, np.nan, -0.1, 1.5], n)
    got = draw(binomial, n, replay=replay, key=key, n={"S": nn}, p={"beta": p})
    assert same(got, reference(BINOMIAL, n, replay, key, args=(nn, p)))
    bad = ~((nn >= 0) & (nn < 1 << 52) & (p >= 0) & (p <= 1))
    assert (got[bad] == -1).all() and ((got[~bad] >= 0) & (got[~bad] <= nn[~bad])).all()

    low = rng.integers(-100, 100, n)
    high = low + rng.choice([-1, 0, 1, 6, 1 << 32, 1 << 40], n)
    for dtype, smallest in ((np.int64, -(1 << 63)), (np.int32, -(1 << 31))):
        got = draw(integers, n, dtype, replay, key, low={"lo": low}, high={"hi": high})
        want = reference(INTEGERS, n, replay, key, args=(low, high), i32=dtype == np.int32)
        assert same(got.astype(np.int64), want)
        fits = high <= (1 << 31) if dtype == np.int32 else np.ones(n, bool)
        ok = (high > low) & fits
        assert (got[~ok] == smallest).all() and ((got[ok] >= low[ok]) & (got[ok] < high[ok])).all()

    scale = rng.choice([0.0, 1.0, 3.5, -1.0, np.inf, np.nan], n)
    got = draw(exponential, n, np.float64, replay, key, scale={"s": scale})
    assert same(got, reference(EXPONENTIAL, n, replay, key, args=(scale,)))
    good = (scale >= 0) & np.isfinite(scale)
    assert np.isnan(got[~good]).all() and (got[good] >= 0).all()
    assert (got[scale == 0] == 0).all() and not np.signbit(got[scale == 0]).any()


def test_per_sample_parameters_are_read_by_the_node():
    """The staging sees the parameter arrays: a node writing them runs first, and the
    picture names them."""
    n = 64
    lam, k = np.zeros(n), np.zeros(n, dtype=np.int64)
    g = eagle.Graph()
    g.add_node(eagle.graph.ufunc(np.add, {"lam": lam}, 3.0, out={"lam": lam}), name="grow")
    node = poisson({"k": k}, key=1, lam={"lam": lam})
    assert list(node.reads) == ["lam"] and list(node.writes) == ["k"]
    g.add_node(node, name="draw")
    g.build()
    g.launch(1)
    assert (lam == 3.0).all() and k.mean() > 1.0
    assert "lam" in str(g) and "poisson" in repr(node)


# ---- the counter layout -----------------------------------------------------------------

def test_block_0_is_random_bits_and_later_blocks_have_their_own_counters():
    key, replay = 0x0123456789abcdef, (1 << 40) + 3
    ids = np.array([0, 1, 1 << 33, (1 << 64) - 1], dtype=np.uint64)
    words = philox_np(ids.astype(np.int64), replay, key)
    for i, sample in enumerate(ids):
        assert dist_block(key, int(sample), replay, 0) == tuple(int(w) for w in words[i])
        # block j: the replay's high word xor j << 16 (python's philox of that counter)
        for j in (1, 2, 0xffff):
            want = philox_np(np.array([sample]).astype(np.int64), replay ^ (j << 48), key)[0]
            assert dist_block(key, int(sample), replay, j) == tuple(int(w) for w in want)
    out = np.zeros((4, 4), dtype=np.uint32)
    g = eagle.Graph()
    g.add_node(random_bits(out, key=key))
    g.build()
    g.replays = replay
    g.launch(1)
    assert dist_block(key, 2, replay, 0) == tuple(int(w) for w in out[2])


def shared_words(ids, per, replay, key, j=0):
    """What each sample takes of the blocks ``per`` consecutive samples share: for 2,
    block (id >> 1, j)'s (w1 << 32 | w0) for an even id, (w3 << 32 | w2) for an odd one;
    for 4, word id & 3 of block (id >> 2, j)."""
    ids = np.asarray(ids, dtype=np.uint64)
    shift = np.uint64(per.bit_length() - 1)
    w = philox_np((ids >> shift).astype(np.int64), replay ^ (j << 48), key).astype(np.uint64)
    part = (ids & np.uint64(per - 1)).astype(np.int64)
    if per == 4:
        return w[np.arange(ids.size), part]
    lo, hi = w[np.arange(ids.size), 2 * part], w[np.arange(ids.size), 2 * part + 1]
    return hi << np.uint64(32) | lo


def test_the_exponential_is_minus_log_of_its_half_of_a_shared_block():
    n, key = 10_001, 5
    t = draw(exponential, n, np.float64, 0, key)
    x = shared_words(np.arange(n), 2, 0, key)
    u = ((x >> np.uint64(11)).astype(np.float64) + 1) * 2.0 ** -53
    np.testing.assert_allclose(t, -np.log(u), rtol=4e-16, atol=0)
    assert t.max() <= 53 * np.log(2)


@pytest.mark.parametrize("start", [0, 1, 3])
def test_integers_take_their_word_of_a_block_four_samples_share(start):
    """With high - low = 2**32 Lemire's method takes every word as it is: the output is
    each sample's word of block (id >> 2, 0), whatever sample the node starts at."""
    n, key, replay = 1001, 77, (1 << 33) + 5
    ids = np.arange(start, start + n, dtype=np.int64)
    got = draw(integers, n, np.int64, replay, key, low=0, high=1 << 32, ids={"id": ids})
    np.testing.assert_array_equal(got, shared_words(ids, 4, replay, key).astype(np.int64))
    whole = draw(integers, start + n, np.int64, replay, key, low=-(1 << 31), high=1 << 31)
    np.testing.assert_array_equal(whole[start:], got - (1 << 31))


# ---- the statistics -----------------------------------------------------------------

def chi_square_p(sample, pmf, support_max=None):
    """The chi-square test's p-value of integer `sample` against `pmf` (a scipy frozen
    distribution), the cells with fewer than 20 expected merged into the tails."""
    n = sample.size
    lo, hi = int(sample.min()), int(sample.max())
    ks = np.arange(lo, hi + 1)
    expected = pmf.pmf(ks) * n
    observed = np.bincount(sample - lo, minlength=ks.size).astype(float)
    # merge the tails and thin cells into their neighbours
    edges, e_cells, o_cells, e_acc, o_acc = [], [], [], 0.0, 0.0
    for e, o in zip(expected, observed):
        e_acc += e
        o_acc += o
        if e_acc >= 20:
            e_cells.append(e_acc)
            o_cells.append(o_acc)
            e_acc = o_acc = 0.0
    if e_cells:
        e_cells[-1] += e_acc
        o_cells[-1] += o_acc
    e_cells[0] += pmf.cdf(lo - 1) * n               # the mass outside what was drawn
    e_cells[-1] += pmf.sf(hi) * n
    e_cells, o_cells = np.array(e_cells), np.array(o_cells)
    if e_cells.size < 2:
        return 1.0
    return stats.chisquare(o_cells, e_cells * (o_cells.sum() / e_cells.sum())).pvalue


N_STAT = 200_000


@pytest.mark.parametrize("lam", [1e-3, 0.1, 1.0, 4.5, 9.99, 10.0, 37.5, 1e3, 1e4])
def test_poisson_chi_square_against_scipy(lam):
    k = draw(poisson, N_STAT, lam=lam, key=int(lam * 1000) + 1)
    assert chi_square_p(k, stats.poisson(lam)) > 1e-4


def test_poisson_at_a_very_large_lam_has_its_moments():
    lam = 1e12
    k = draw(poisson, N_STAT, lam=lam, key=3).astype(np.float64)
    z = (k - lam) / np.sqrt(lam)
    assert stats.kstest(z, "norm").pvalue > 1e-4   # the normal limit, at 1e6 standard deviations of lam


@pytest.mark.parametrize("n,p", [(1, 0.5), (20, 0.3), (100, 0.05), (100, 0.95), (1000, 0.5), (5000, 0.002),
                                 (10**6, 0.999), (10**9, 1e-9), (10**9, 1 - 1e-9), (10**9, 3e-7),
                                 (10**9, 0.5), (50, 1e-12)])
def test_binomial_chi_square_against_scipy(n, p):
    k = draw(binomial, N_STAT, n=n, p=p, key=n % 1000 + 7)
    assert k.min() >= 0 and k.max() <= n
    assert chi_square_p(k, stats.binom(n, p)) > 1e-4


@pytest.mark.parametrize("n,p,want", [(0, 0.5, 0), (0, 0.0, 0), (10**9, 0.0, 0), (10**9, 1.0, 10**9),
                                      (7, 1.0, 7), (1, 0.0, 0)])
def test_binomial_at_the_edges_is_exact(n, p, want):
    assert (draw(binomial, 5000, n=n, p=p) == want).all()


def test_poisson_at_zero_is_exact():
    assert (draw(poisson, 5000, lam=0.0) == 0).all()


@pytest.mark.parametrize("low,high", [(0, 2), (-3, 4), (10, 1010)])
def test_integers_chi_square_uniform(low, high):
    k = draw(integers, N_STAT, low=low, high=high)
    assert k.min() == low and k.max() == high - 1
    counts = np.bincount(k - low, minlength=high - low)
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize("low,high", [(0, 3 << 30), (0, (1 << 32) + 1), (-(1 << 63), (1 << 63) - 1),
                                      (5, 5 + 3 * (1 << 61))])
def test_integers_wide_ranges_are_uniform(low, high):
    k = draw(integers, N_STAT, low=low, high=high)
    assert k.min() >= low and k.max() < high
    u = (k.astype(np.float64) - float(low)) / (float(high) - float(low))
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    # the low bits too (a biased reduction shows there first)
    assert stats.chisquare(np.bincount((k - low) % 97, minlength=97)).pvalue > 1e-4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exponential_kolmogorov_smirnov(dtype):
    t = draw(exponential, N_STAT, dtype, scale=3.0, key=17)
    assert t.dtype == dtype and t.min() >= 0
    assert stats.kstest(t.astype(np.float64), stats.expon(scale=3.0).cdf).pvalue > 1e-4


# ---- the same numbers whatever runs them ------------------------------------------------

def mixed_graph(n, build_kw, with_chain=True):
    """Every distribution node, scalar and per-sample parameters, and a ufunc chain the
    sample-local nodes may fuse with."""
    rng = np.random.default_rng(2)
    arrays = {"lam": rng.choice([0.5, 3.0, 25.0, 1e5], n), "S": rng.integers(0, 2000, n),
              "beta": rng.random(n), "t": np.zeros(n), "k": np.zeros(n, np.int64),
              "b": np.zeros(n, np.int64), "bs": np.zeros(n, np.int64), "i": np.zeros(n, np.int64),
              "ks": np.zeros(n, np.int64), "t2": np.zeros(n)}
    a = arrays
    g = eagle.Graph()
    g.add_node(exponential({"t": a["t"]}, key=1, scale=2.0), name="flight")
    if with_chain:
        g.add_node(eagle.graph.ufunc(np.multiply, {"t": a["t"]}, 0.5, out={"t2": a["t2"]}), name="half")
    g.add_node(poisson({"k": a["k"]}, key=2, lam={"lam": a["lam"]}), name="pois")
    g.add_node(poisson({"ks": a["ks"]}, key=3, lam=150.0), name="pois150")
    g.add_node(binomial({"b": a["b"]}, key=4, n={"S": a["S"]}, p={"beta": a["beta"]}), name="infect")
    g.add_node(binomial({"bs": a["bs"]}, key=5, n=400, p=0.3), name="bin")
    g.add_node(integers({"i": a["i"]}, key=6, low=-7, high=1 << 33), name="int")
    g.build(**build_kw)
    return g, a


def outputs(a):
    return {k: a[k].copy() for k in ("t", "k", "ks", "b", "bs", "i", "t2")}


def assert_same_outputs(x, y):
    for k in x:
        np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def test_same_numbers_on_any_threads_teams_fusion_and_launch_grouping(threads):
    n = 30_011
    results = []
    for nt, build in ((1, {"cpu": eagle.CpuOptions(teams="serial", fuse=False)}),
                      (2, {"cpu": eagle.CpuOptions(teams="parallel")}),
                      (2, {"cpu": eagle.CpuOptions(teams="parallel", fuse=512)}),
                      (2, {"cpu": eagle.CpuOptions(teams="auto")})):
        eagle.set_num_threads(nt)
        g, a = mixed_graph(n, build)
        g.replays = (1 << 32) - 1
        g.launch(3)
        results.append(outputs(a))
        g2, a2 = mixed_graph(n, build)
        g2.replays = (1 << 32) - 1
        for _ in range(3):
            g2.launch(1)
        assert_same_outputs(outputs(a2), results[-1])
    for r in results[1:]:
        assert_same_outputs(r, results[0])
    eagle.set_num_threads(2)
    fused, _ = mixed_graph(n, {"cpu": eagle.CpuOptions(fuse=512)})
    assert fused.plan().fused_runs, fused.plan()   # the test saw a fused run


def test_logical_size_does_not_change_a_sample_s_numbers(threads):
    eagle.set_num_threads(2)
    n = 5000
    g, a = mixed_graph(n, {}, with_chain=False)
    g.launch(1)
    full = outputs(a)
    g2, a2 = mixed_graph(n, {}, with_chain=False)
    g2.set_logical_size(1717)
    g2.launch(1)
    part = outputs(a2)
    for k in ("t", "k", "ks", "b", "bs", "i"):
        np.testing.assert_array_equal(part[k][:1717], full[k][:1717], err_msg=k)
        assert not part[k][1717:].any()


def test_a_sample_keeps_its_stream_through_compaction_with_ids():
    """Compaction moves a sample's row, its id and its parameter: it draws what it would
    have drawn in place."""
    n = 2000
    rng = np.random.default_rng(4)
    alive = rng.random(n) < 0.55
    ids = np.arange(n, dtype=np.int64)
    lam = rng.choice([2.0, 40.0], n)
    before = lam.copy()
    k = np.zeros(n, np.int64)
    g = eagle.Graph()
    g.add_node(poisson({"k": k}, key=12, lam={"lam": lam}, ids={"id": ids}), name="draw")
    g.add_node(compact(alive, {"k": k, "lam": lam}, ids=ids, min_dead_fraction=0.0), name="compact")
    g.build()
    g.launch(1)
    live = g.logical_size
    kept = ids[:live].copy()
    np.testing.assert_array_equal(lam[:live], before[kept])
    g.launch(1)   # replay 1: the live samples at their new positions
    whole = draw(poisson, n, replay=1, key=12, lam={"lam": before})
    np.testing.assert_array_equal(k[:live], whole[kept])


@pytest.mark.parametrize("make,dtype,kw", [
    (exponential, np.float64, {"scale": 2.0}),
    (integers, np.int64, {"low": -7, "high": 1000}),
    (integers, np.int32, {"low": -(1 << 31), "high": 3 << 29}),
    (integers, np.int64, {"low": 0, "high": 1 << 40}),
])
def test_samples_that_share_blocks_keep_their_numbers_through_compaction(make, dtype, kw):
    """exponential and integers take part of a block their neighbours share: a compacted
    sample (its id carried) still draws its own part, its neighbours gone or moved."""
    n = 3001
    alive = np.random.default_rng(5).random(n) < 0.4
    ids = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype)
    g = eagle.Graph()
    g.add_node(make({"out": out}, key=3, ids={"id": ids}, **kw), name="draw")
    g.add_node(compact(alive, {"out": out}, ids=ids, min_dead_fraction=0.0), name="compact")
    g.build()
    g.launch(2)
    live = g.logical_size
    whole = draw(make, n, dtype, replay=1, key=3, **kw)
    np.testing.assert_array_equal(out[:live], whole[ids[:live]])


@pytest.mark.parametrize("make,dtype,kw", [
    (exponential, np.float64, {"scale": 2.0}),
    (integers, np.int64, {"low": -7, "high": 1000}),
    (integers, np.int64, {"low": 0, "high": 1 << 40}),
])
@pytest.mark.parametrize("start", [0, 5, (1 << 63) - 300])
def test_ids_that_run_on_by_one_draw_each_sample_its_own_part(make, dtype, kw, start):
    """Blocks of ids that run on by one draw the blocks their samples share once (the
    path without ids); blocks that do not, and ids near 2**63, each sample's own: the
    same numbers as the ids' reference, a run broken anywhere, an odd start, or none."""
    n = 1100
    ids = np.arange(start, start + n, dtype=np.int64)
    ids[700] += 3                                       # one block's run broken
    ids[900:] = ids[900:][::-1].copy()                  # and the tail reversed
    got = draw(make, n, dtype, replay=4, key=11, ids={"id": ids}, **kw)
    if make is exponential:
        u = ((shared_words(ids, 2, 4, 11) >> np.uint64(11)).astype(np.float64) + 1) * 2.0 ** -53
        np.testing.assert_allclose(got, -2.0 * np.log(u), rtol=4e-16, atol=0)
    # shuffled, no block's ids run on: each sample draws its own part of its own copy
    perm = np.random.default_rng(1).permutation(n)
    shuffled = draw(make, n, dtype, replay=4, key=11, ids={"id": ids[perm]}, **kw)
    np.testing.assert_array_equal(shuffled, got[perm])


# ---- the parameters refused when recorded -------------------------------------------

F, I = np.zeros(4), np.zeros(4, np.int64)


@pytest.mark.parametrize("make,err,match", [
    (lambda: binomial(I, key=1, n=-1, p=0.5), ValueError, r"binomial\(\): n must be in \[0"),
    (lambda: binomial(I, key=1, n=1 << 52, p=0.5), ValueError, "n must be in"),
    (lambda: binomial(I, key=1, n=2.5, p=0.5), TypeError, "n= must be an integer"),
    (lambda: binomial(I, key=1, n=True, p=0.5), TypeError, "bool"),
    (lambda: binomial(I, key=1, n=10, p=1.5), ValueError, r"p must be in \[0, 1\]"),
    (lambda: binomial(I, key=1, n=10, p=-0.1), ValueError, r"p must be in \[0, 1\]"),
    (lambda: binomial(I, key=1, n=10, p=float("nan")), ValueError, "p= is nan"),
    (lambda: binomial(F, key=1, n=10, p=0.5), TypeError, "must be a int64 array"),
    (lambda: binomial(I, key=1, n={"S": np.zeros(4)}, p=0.5), TypeError, "n 'S' must be int64"),
    (lambda: binomial(I, key=1, n=3, p={"p": np.zeros(3)}), ValueError, "per-sample"),
    (lambda: binomial(I, key=1, n=3, p={"out": np.zeros(4)}), ValueError, "both named 'out'"),
    (lambda: binomial(I, key=1, n={"x": np.zeros(4, np.int64)}, p={"x": np.zeros(4)}), ValueError,
     "both named 'x'"),
    (lambda: poisson(I, key=1, lam=-1.0), ValueError, r"lam must be in \[0, 1e\+15\]"),
    (lambda: poisson(I, key=1, lam=2e15), ValueError, "lam must be in"),
    (lambda: poisson(I, key=1, lam=float("nan")), ValueError, "lam= is nan"),
    (lambda: poisson(I, key=1, lam="3"), TypeError, "real number"),
    (lambda: poisson(I, key=1, lam=[1.0] * 4), TypeError, "lam= must be a real number or a per-sample"),
    (lambda: poisson(np.zeros(4, np.int32), key=1, lam=1.0), TypeError, "int64"),
    (lambda: integers(I, key=1, low=5, high=5), ValueError, "low must be below high"),
    (lambda: integers(I, key=1, low=6, high=5), ValueError, "low must be below high"),
    (lambda: integers(I, key=1, low=0, high=1 << 63), ValueError, "outside int64"),
    (lambda: integers(np.zeros(4, np.int32), key=1, low=0, high=(1 << 31) + 1), ValueError, "int32"),
    (lambda: integers(F, key=1, low=0, high=3), TypeError, "int32 or int64"),
    (lambda: exponential(F, key=1, scale=-1.0), ValueError, "scale must be finite and >= 0"),
    (lambda: exponential(F, key=1, scale=float("inf")), ValueError, "scale must be finite"),
    (lambda: exponential(np.zeros(4, np.float32), key=1, scale=1e37), ValueError, "overflows float32"),
    (lambda: exponential(I, key=1), TypeError, "float32 or float64"),
    (lambda: exponential(F, key=-1), ValueError, "key"),
    (lambda: exponential(F, key=1, ids={"id": np.arange(3)}), ValueError, "per-sample"),
    (lambda: exponential(np.zeros((4, 2)), key=1), ValueError, "1-d"),
    (lambda: poisson(I, 1, lam=1.0), TypeError, r"poisson\(out, key=1"),
])
def test_record_time_errors(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_exponential_scale_at_the_float32_limit_is_taken():
    t = draw(exponential, 1000, np.float32, scale=1e36)
    assert np.isfinite(t).all()


def test_contiguous_ids_read_in_place_and_strided_ids_give_the_same_draws():
    # contiguous int64 ids are read where they lie, strided ones gathered: the same numbers
    n = 1_003
    order = np.random.default_rng(2).permutation(4 * n)[:n].astype(np.int64)
    wide = np.zeros((n, 2), np.int64)
    wide[:, 1] = order
    lam = np.linspace(0.01, 40.0, n)
    makes = {"exponential": lambda o, ids: exponential(o, key=3, scale=2.0, ids=ids),
             "poisson": lambda o, ids: poisson(o, key=3, lam={"lam": lam}, ids=ids),
             "binomial": lambda o, ids: binomial(o, key=3, n=30, p=0.2, ids=ids),
             "integers": lambda o, ids: integers(o, key=3, low=-5, high=2**40, ids=ids)}
    for name, make in makes.items():
        outs = []
        for ids in (order.copy(), wide[:, 1]):
            out = np.zeros(n, np.float64 if name == "exponential" else np.int64)
            g = eagle.Graph()
            g.add_node(make({"out": out}, {"id": ids}))
            g.build().launch(2)
            outs.append(out)
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=name)
