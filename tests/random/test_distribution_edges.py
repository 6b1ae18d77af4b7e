"""Distribution nodes (``exponential``, ``poisson``, ``binomial``, ``integers``) at the
edges of their parameters, per sample, on teams of 2 and 3: lam one ulp either side of
the switch from inversion to PTRS and of its largest value, n around 2**31 and at 2**52,
n p one ulp either side of the binomial switch at n = 2**52 - 1, p one ulp from 1,
subnormal parameters, integers over the whole int64 range and at the int32 bounds. Each
sample gets the scalar sampler's number (eagle/distributions.h) or its marker. Parameter
views (reversed, a zero stride) and repeated or negative ids give the numbers of the
values and ids they show; a parameter in out's memory is refused by name."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import eagle
from eagle.cpu._random import reference_sample
from eagle.graph import binomial, exponential, integers, poisson
from eagle.record.distributions import BINOMIAL, EXPONENTIAL, INTEGERS, POISSON

KEY, REPLAY = 0x5eed, 4


def draw(node, replays=REPLAY + 1):
    g = eagle.Graph()
    g.add_node(node, name="draw")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    g.launch(replays)    # the numbers of replay REPLAY


def reference(what, params, ids=None, **fixed):
    n = len(next(iter(params.values())))
    ids = range(n) if ids is None else ids
    return np.array([reference_sample(what, KEY, int(i), REPLAY, **fixed,
                                      **{k: (float(v[s]) if k[0] == "d" else int(v[s])) for k, v in params.items()})
                     for s, i in enumerate(ids)])


def tiled(values, n, dtype):
    return np.resize(np.array(values, dtype=dtype), n)


N = 3_000
up, down = (lambda x: np.nextafter(x, np.inf)), (lambda x: np.nextafter(x, -np.inf))


@pytest.mark.parametrize("nthreads", [2, 3])
def test_parameters_at_the_edges_give_the_scalar_sampler_s_numbers(threads, nthreads):
    threads(nthreads)
    lam = tiled([down(10.0), 10.0, up(10.0), 1e15, up(1e15), 5e-324, -0.0, 0.0, 2.0**62], N, np.float64)
    k = np.empty(N, np.int64)
    draw(poisson(k, key=KEY, lam=lam))
    assert k.tobytes() == reference(POISSON, {"d0": lam}).tobytes()
    assert ((k == -1) == ((lam > 1e15) | np.signbit(lam) & (lam != 0))).all()

    big = (1 << 52) - 1
    n = tiled([(1 << 31) - 1, 1 << 31, (1 << 31) + 1, big, 1 << 52, big, big, big, big], N, np.int64)
    p = tiled([0.5, 0.25, 0.75, 0.5, 0.5, down(10.0 / big), 10.0 / big, up(10.0 / big), down(1.0)],
              N, np.float64)
    k = np.empty(N, np.int64)
    draw(binomial(k, key=KEY, n=n, p=p))
    assert k.tobytes() == reference(BINOMIAL, {"i0": n, "d1": p}).tobytes()
    assert ((k == -1) == (n > big)).all() and (k <= n).all()

    low = tiled([-(1 << 63), -(1 << 63), (1 << 63) - 2, -(1 << 31), -(1 << 31) - 1, 0, 5], N, np.int64)
    high = tiled([(1 << 63) - 1, -(1 << 63) + 1, (1 << 63) - 1, 1 << 31, 0, (1 << 31) + 1, 5], N, np.int64)
    for dtype in (np.int64, np.int32):
        x = np.empty(N, dtype)
        draw(integers(x, key=KEY, low=low, high=high))
        want = reference(INTEGERS, {"i0": low, "i1": high}, i32=dtype == np.int32)
        assert (x.astype(np.int64) == want).all(), dtype
        fits = np.ones(N, bool) if dtype == np.int64 else (low >= -(1 << 31)) & (high <= 1 << 31)
        assert (x[~((low < high) & fits)] == np.iinfo(dtype).min).all(), dtype

    scale = tiled([5e-324, 1e-300, 1.0, 1e300, np.inf, -0.0], N, np.float64)
    for dtype in (np.float64, np.float32):
        t = np.empty(N, dtype)
        with np.errstate(over="ignore"):
            want = reference(EXPONENTIAL, {"d0": scale}).astype(dtype)
        draw(exponential(t, key=KEY, scale=scale))
        assert t.tobytes() == want.tobytes(), dtype


def test_parameter_views_and_ids_give_the_numbers_of_what_they_show(threads):
    threads(3)
    lam = np.linspace(0.0, 30.0, N)
    k, want = np.empty(N, np.int64), np.empty(N, np.int64)
    draw(poisson(k, key=KEY, lam=lam[::-1]))
    draw(poisson(want, key=KEY, lam=lam[::-1].copy()))
    assert (k == want).all()
    draw(poisson(k, key=KEY, lam=as_strided(lam[7:], (N,), (0,))))
    draw(poisson(want, key=KEY, lam=float(lam[7])))
    assert (k == want).all()
    # repeated and negative ids: each sample draws its id's numbers
    ids = np.resize(np.array([7, 7, -1, 0, -1, 1 << 40], np.int64), N)
    for make, kw in ((exponential, {}), (poisson, {"lam": 12.5}), (integers, {"low": 0, "high": 1 << 40})):
        out = np.empty(N, np.float64 if make is exponential else np.int64)
        draw(make(out, key=KEY, ids=ids, **kw))
        alone = {}
        for i in (7, -1, 0, 1 << 40):
            one = np.empty(N, out.dtype)
            draw(make(one, key=KEY, ids=np.full(N, i, np.int64), **kw))
            alone[i] = one[0]
        assert [alone[i] for i in ids] == out.tolist(), make.__name__


@pytest.mark.parametrize("make", [
    lambda buf: poisson(buf.view(np.int64), key=1, lam={"rates": buf}),
    lambda buf: binomial(buf.view(np.int64)[::-1], key=1, n={"rates": buf.view(np.int64)}, p=0.5),
    lambda buf: exponential(buf[:], key=1, scale={"rates": buf}),
    lambda buf: integers(buf.view(np.int64), key=1, low=0, high={"rates": buf.view(np.int64)}),
])
def test_a_parameter_in_out_s_memory_is_refused_by_name(make):
    with pytest.raises(ValueError, match="'rates' shares memory with out 'out'"):
        make(np.zeros(64))
