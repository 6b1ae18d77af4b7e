"""Distribution nodes (exponential, poisson, binomial, integers), one scenario per test
run on every backend (the ``backend`` fixture: cpu, the cuda stand-in, a GPU when
present). The oracle is the cpu backend's node launched in the same process: the same
integers and the same float bits (the samplers of csrc/include/eagle/distributions.h use
only IEEE operations and eagle's own log and exp). On cuda the kernel is
eagle_distribution of eagle/cuda/kernels/random.cu (the stand-in runs it through the
CUDA C emulator: the header compiled as C++, one sample per thread, the scalar sampler
the CPU's vectorised kernel must reproduce)."""
import numpy as np
import pytest

import eagle
from eagle.cpu._random import reference_sample
from eagle.graph import binomial, compact, exponential, integers, poisson
from eagle.record.distributions import BINOMIAL, EXPONENTIAL, INTEGERS, POISSON

from backends import CpuBackend

N = 1500   # six blocks of 256 threads, the last one partly past the end

# (name, constructor, out dtype, parameters: scalars, or per-sample arrays by name)
CASES = [
    ("exponential", exponential, np.float64, {"scale": 2.0}),
    ("exponential32", exponential, np.float32, {"scale": 0.25}),
    ("exponential-each", exponential, np.float64, {"scale": "scale"}),
    ("poisson-small", poisson, np.int64, {"lam": 3.5}),
    ("poisson-large", poisson, np.int64, {"lam": 250.0}),
    ("poisson-each", poisson, np.int64, {"lam": "lam"}),
    ("binomial-small", binomial, np.int64, {"n": 40, "p": 0.1}),
    ("binomial-large", binomial, np.int64, {"n": 10**9, "p": 0.7}),
    ("binomial-each", binomial, np.int64, {"n": "n", "p": "p"}),
    ("integers", integers, np.int64, {"low": -5, "high": 1 << 34}),
    ("integers32", integers, np.int32, {"low": -(1 << 31), "high": 3 << 29}),
    ("integers-each", integers, np.int64, {"low": "low", "high": "high"}),
]


def per_sample(n):
    """Per-sample parameters with good and bad values (the bad ones get the markers)."""
    rng = np.random.default_rng(8)
    return {"scale": rng.choice([0.0, 1.0, 3.0, -1.0, np.nan], n),
            "lam": rng.choice([0.0, 0.7, 9.5, 10.0, 400.0, 1e7, -2.0, np.nan], n),
            "n": rng.choice([0, 3, 60, 5000, 10**8, -1], n).astype(np.int64),
            "p": rng.choice([0.0, 0.02, 0.4, 0.6, 0.999, 1.0, np.nan], n),
            "low": rng.integers(-50, 50, n),
            "high": rng.integers(-50, 50, n) + rng.choice([0, 1 << 33], n)}


def graph(backend, case, n, key=0xabcdef, ids=None, start=0):
    _, make, dtype, params = case
    arrays = per_sample(n)
    kw = {k: ({v: backend.asarray(arrays[v])} if isinstance(v, str) else v) for k, v in params.items()}
    out = backend.asarray(np.zeros(n, dtype=dtype))
    g = eagle.Graph()
    g.add_node(make({"out": out}, key=key, ids=ids, **kw), name="draw")
    g.build()
    g.replays = start
    return g, out


def reference(case, n, replay, key=0xabcdef, ids=None):
    g, out = graph(CpuBackend(), case, n, key, ids, replay)
    g.launch(1)
    return out


def assert_same(got, want):
    np.testing.assert_array_equal(got, want)   # nan == nan here: the markers too


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("start", [0, (1 << 32) - 2])
def test_same_numbers_whatever_the_launch_grouping_and_logical_size(backend, case, start):
    """launch(1) + launch(2) against the cpu backend's replays one at a time, then a
    smaller logical size (patched into the kernel node on cuda): the same numbers for
    the samples it covers, the rest untouched."""
    g, out = graph(backend, case, N, start=start)
    assert g.backend == backend.graph_backend
    g.launch(1)
    assert_same(backend.asnumpy(out), reference(case, N, start))
    g.launch(2)
    last = start + 2
    got = backend.asnumpy(out)
    assert_same(got, reference(case, N, last))
    assert g.replays == start + 3
    for size in (1, 257, 0, N - 1):
        backend.put(out, Ellipsis, 7)
        g.set_logical_size(size)
        g.replays = last
        g.launch(1)
        part = backend.asnumpy(out)
        assert_same(part[:size], got[:size])
        assert (part[size:] == 7).all()


def test_ids_set_the_counter(backend):
    rng = np.random.default_rng(5)
    ids = rng.integers(-(1 << 62), 1 << 62, size=N).astype(np.int64)
    ids[:3] = [0, -1, (1 << 63) - 1]
    for case in CASES[::2]:
        g, out = graph(backend, case, N, ids={"id": backend.asarray(ids)}, start=77)
        g.launch(1)
        assert_same(backend.asnumpy(out), reference(case, N, 77, ids={"id": ids}))


def test_a_sample_keeps_its_stream_through_compaction(backend):
    """A binomial step of a shrinking population, its n and p per sample and carried by
    the compaction: the same draws as the cpu backend's graph."""
    def run(b):
        rng = np.random.default_rng(6)
        n = 900
        alive = b.asarray(rng.random(n) < 0.5)
        life = b.asarray(rng.integers(1, 4, n).astype(np.int64))
        x = b.asarray(np.zeros(n))
        S = b.asarray(rng.integers(0, 500, n).astype(np.int64))
        p = b.asarray(rng.random(n))
        ids, count = b.asarray(np.arange(n, dtype=np.int64)), b.zeros(1, np.int64)
        new = b.asarray(np.zeros(n, np.int64))
        g = eagle.Graph()
        g.add_node(b.life_step(alive, life, x), name="step")
        g.add_node(compact(alive, {"life": life, "x": x, "S": S, "p": p}, ids=ids, count=count,
                           min_dead_fraction=0.0), name="compact")
        g.add_node(binomial({"new": new}, key=3, n={"S": S}, p={"p": p}, ids={"id": ids}), name="infect")
        g.build()
        g.launch(2)
        return g.logical_size, b.asnumpy(ids), b.asnumpy(new)

    live, ids, new = run(backend)
    cpu_live, cpu_ids, cpu_new = run(CpuBackend())
    assert live == cpu_live and 0 < live < 900
    np.testing.assert_array_equal(ids[:live], cpu_ids[:live])
    np.testing.assert_array_equal(new[:live], cpu_new[:live])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_zero_samples(backend, case):
    """A node over no samples builds and replays, drawing nothing (and a logical size
    of 0 on a larger node likewise)."""
    g, out = graph(backend, case, 0)
    g.launch(2)
    assert g.replays == 2 and backend.asnumpy(out).shape == (0,)
    g, out = graph(backend, case, 5)
    backend.put(out, Ellipsis, 7)
    g.set_logical_size(0)
    g.launch(1)
    assert (backend.asnumpy(out) == 7).all()


WHAT = {"exponential": (EXPONENTIAL, ("d0",)), "poisson": (POISSON, ("d0",)),
        "binomial": (BINOMIAL, ("i0", "d1")), "integers": (INTEGERS, ("i0", "i1"))}


@pytest.mark.parametrize("offset", [(1 << 31) - 5, (1 << 32) - 701, (1 << 63) - N])
def test_ids_past_2_to_the_31(backend, offset):
    """Consecutive ids from past 2**31 (an offset: no memory behind them), across 2**32
    and up to the largest int64: the cpu backend's numbers, and for scalar parameters the
    header's scalar sampler's, sample by sample (the blocks consecutive samples share
    included)."""
    ids = np.arange(N, dtype=np.int64) + offset
    for case in CASES:
        g, out = graph(backend, case, N, ids={"id": backend.asarray(ids)}, start=3)
        g.launch(1)
        got = backend.asnumpy(out)
        assert_same(got, reference(case, N, 3, ids={"id": ids}))
        name, _, dtype, params = case
        if any(isinstance(v, str) for v in params.values()):
            continue
        what, slots = WHAT[name.rstrip("32").split("-")[0]]
        kw = {slot: (float(v) if slot[0] == "d" else int(v)) for slot, v in zip(slots, params.values())}
        want = [reference_sample(what, 0xabcdef, int(i), 3, i32=dtype == np.int32, **kw) for i in ids[::37]]
        assert_same(got[::37], np.array(want).astype(dtype))
