"""Reduction and tally nodes on the cpu: ``ufunc(np.add.reduce, x, out=s)`` (and the other
.reduce's) against NumPy over dtypes, where=, initial=, views and logical sizes; the same
bits for every thread count, tile, fusion setting and launch grouping; ``ufunc(np.add.at,
...)`` against ``np.add.at``; what is refused, with what message. eagle/cpu/reduce_node.py."""
import numpy as np
import pytest

import eagle
from eagle.graph import ufunc

OPS = ["add", "multiply", "maximum", "minimum", "logical_or", "logical_and", "bitwise_or",
       "bitwise_and", "bitwise_xor"]
DTYPES = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]


def values(dt, shape, rng, op):
    dt = np.dtype(dt)
    if dt == bool:
        return rng.random(shape) < (0.9 if op == "logical_and" else 0.1)
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -3
        hi = 3 if op == "multiply" else 100
        return rng.integers(lo, hi, shape).astype(dt)
    if op == "multiply":
        return (1 + 0.01 * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def valid(op, dt):
    uf = getattr(np, op)
    c = np.dtype(dt).char
    return f"{c}{c}->{c}" in uf.types


def close(got, want, dt, n):
    if np.dtype(dt).kind == "f":
        # a float sum's rounding differs from NumPy's pairwise sum: O(log n) ulps of the
        # sum of magnitudes (docs: the documented bound)
        eps = np.finfo(dt).eps
        np.testing.assert_allclose(got, want, rtol=8 * eps * max(np.log2(max(n, 2)), 1),
                                   atol=8 * eps * np.log2(max(n, 2)) * 10)
    else:
        np.testing.assert_array_equal(got, want)


def run(node, n=None, launches=1, threads=None, **cpu):
    g = eagle.Graph()
    g.add_node(node, name="r")
    g.build(cpu=eagle.CpuOptions(**cpu))
    if n is not None:
        g.set_logical_size(n)
    g.launch(launches)
    return g


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPES)
def test_every_op_and_dtype_as_numpy(op, dt):
    if not valid(op, dt):
        uf = getattr(np, op)
        with pytest.raises(TypeError, match="accumulates in its output's dtype"):
            ufunc(uf.reduce, np.zeros(4, dt), out=np.zeros((), dt))
        return
    uf = getattr(np, op)
    rng = np.random.default_rng(hash((op, dt)) % 2**32)
    for n in (0, 1, 7, 64, 65, 1000, 4099):
        x = values(dt, n, rng, op)
        s = np.zeros((), dt)
        if n == 0 and op in ("maximum", "minimum"):
            g = eagle.Graph()
            g.add_node(ufunc(uf.reduce, x, out=s), name="r")
            with pytest.raises(ValueError, match="zero-size array to reduction operation maximum|minimum"):
                g.build().launch(1)
            continue
        run(ufunc(uf.reduce, x, out=s))
        close(s, uf.reduce(x, out=np.zeros((), dt)), dt, n)


@pytest.mark.parametrize("dt", ["i4", "f8", "f4"])
@pytest.mark.parametrize("op", ["add", "maximum", "minimum", "multiply"])
def test_rows_where_initial_views_and_logical_sizes(op, dt):
    uf = getattr(np, op)
    rng = np.random.default_rng(7)
    base = values(dt, (3000, 12), rng, op)
    x = base[::2, 1:8]                      # a strided view: 1500 samples of 7 elements
    mask = rng.random(1500) < 0.5
    for n in (1500, 333, 64, 0):
        for masked in (False, True):
            initial = 5 if op in ("maximum", "minimum", "add") else None
            if masked and op == "multiply":
                initial = None
            s = np.zeros(7, dt)
            kw = {}
            if masked:
                kw["where"] = mask[:, None]
                if op in ("maximum", "minimum"):
                    kw["initial"] = initial
            elif initial is not None and op != "add":
                kw["initial"] = initial
            run(ufunc(uf.reduce, x, out=s, **kw), n=n)
            ref_kw = dict(kw)
            if masked:
                ref_kw["where"] = mask[:n, None]
            want = uf.reduce(x[:n], axis=0, out=np.zeros(7, dt), **ref_kw)
            close(s, want, dt, n)


def test_counting_a_bool_and_count_nonzero():
    rng = np.random.default_rng(2)
    alive = rng.random(100_001) < 0.3
    c = np.zeros((), np.int64)
    run(ufunc(np.add.reduce, {"alive": alive}, out={"count": c}), launches=1)
    assert c == np.count_nonzero(alive)
    c32 = np.zeros((), np.int32)
    run(ufunc(np.add.reduce, alive, out=c32), n=500)
    assert c32 == np.count_nonzero(alive[:500])


def bits(f):
    return np.asarray(f).tobytes()


@pytest.mark.parametrize("dt", ["f8", "f4", "i8"])
def test_the_same_bits_for_every_thread_count_tile_fusion_and_grouping(threads, dt):
    rng = np.random.default_rng(11)
    n = 100_003
    x = values(dt, n, rng, "add") * (1e8 if dt != "i8" else 1)
    y = np.zeros(n, dt)
    seen = set()
    for nt in (1, 2, 3):
        threads(nt)
        for fuse in (True, False, 256, 1000):
            for teams in ("serial", "parallel", "auto"):
                for launches in ((1, 1, 1), (3,)):
                    s = np.zeros((), dt)
                    g = eagle.Graph()
                    g.add_node(ufunc(np.multiply, x, 3, out=y), name="triple")   # fused before it
                    g.add_node(ufunc(np.add.reduce, y, out=s), name="sum")
                    g.build(cpu=eagle.CpuOptions(fuse=fuse, teams=teams))
                    if fuse is not False:
                        assert g.plan().fused_runs, (nt, fuse, teams)
                        assert g.plan().fused_runs[0][1] % 64 == 0   # a tile starts on a block
                    for k in launches:
                        g.launch(k)
                    seen.add(bits(s))
    assert len(seen) == 1
    close(np.frombuffer(seen.pop(), dt)[0], np.add.reduce(3 * x), dt, n)


def test_a_reduction_in_a_fused_run_reads_what_the_run_wrote_and_ends_the_run():
    x = np.arange(10_000, dtype=np.float64)
    y, z, s = np.zeros_like(x), np.zeros_like(x), np.zeros(())
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 2.0, out=y), name="a")
    g.add_node(ufunc(np.add.reduce, y, out=s), name="sum")
    g.add_node(ufunc(np.subtract, y, s, out=z), name="centre")   # reads s: after the run
    g.build(cpu=eagle.CpuOptions(fuse=512)).launch(1)
    assert g.plan().fused_runs == [((0, 1), 512)]
    assert s == 2 * x.sum()
    np.testing.assert_array_equal(z, y - s)


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dt", ["f8", "i8", "i4", "f4"])
def test_at_tallies_as_numpy(threads, op, dt):
    uf = getattr(np, op)
    rng = np.random.default_rng(5)
    n = 5000
    idx = rng.integers(-7, 7, n)
    w = values(dt, n, rng, op)
    start = values(dt, 7, rng, op)
    for nt in (1, 2):
        threads(nt)
        for size in (n, 129, 0):
            t = start.copy()
            g = eagle.Graph()
            g.add_node(ufunc(uf.at, {"tally": t}, {"cell": idx}, {"w": w}), name="tally")
            g.build(cpu=eagle.CpuOptions(teams="parallel"))
            g.set_logical_size(size)
            g.launch(2)
            want = start.copy()
            uf.at(want, idx[:size], w[:size])
            uf.at(want, idx[:size], w[:size])
            close(t, want, dt, size)


def test_at_with_a_scalar_weight_counts_and_a_bad_index_raises_as_numpy():
    t = np.zeros(4, np.int64)
    idx = np.array([0, 1, 1, 3, 3, 3])
    run(ufunc(np.add.at, t, idx, 1))
    np.testing.assert_array_equal(t, [1, 2, 0, 3])
    bad = np.array([0, 9, 1])
    g = eagle.Graph()
    g.add_node(ufunc(np.add.at, t, bad, 1), name="tally")
    with pytest.raises(IndexError, match="index 9 is out of bounds for axis 0 with size 4"):
        g.build().launch(1)


def test_bit_identical_tallies_across_threads(threads):
    rng = np.random.default_rng(9)
    idx, w = rng.integers(0, 3, 200_000), rng.standard_normal(200_000) * 1e6
    seen = set()
    for nt in (1, 2, 3):
        threads(nt)
        t = np.zeros(3)
        run(ufunc(np.add.at, t, idx, w), teams="parallel")
        seen.add(t.tobytes())
    assert len(seen) == 1


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ufunc(np.subtract.reduce, np.zeros(3), out=np.zeros(())), TypeError, "takes the .reduce of add"),
    (lambda: ufunc(np.add.accumulate, np.zeros(3), out=np.zeros(3)), TypeError, "add.accumulate is not a node"),
    (lambda: ufunc(np.add.reduce, np.zeros(3), out=np.zeros(1)), ValueError, r"gives shape \(\)"),
    (lambda: ufunc(np.add.reduce, np.zeros(3)), TypeError, "needs out="),
    (lambda: ufunc(np.add.reduce, np.zeros(3, np.float32), out=np.zeros(())), TypeError,
     "reads its operand in the output's dtype"),
    (lambda: ufunc(np.maximum.reduce, np.zeros(3), out=np.zeros(()), where=np.ones(3, bool)), ValueError,
     "does not have an identity, so to use a where mask one has to specify 'initial'"),
    (lambda: ufunc(np.bitwise_or.reduce, np.zeros(3), out=np.zeros(())), TypeError,
     "accumulates in its output's dtype"),
    (lambda: ufunc(np.add.reduce, np.zeros((3, 4))[:, ::2][:, [0]].T.T[:, :], out=np.zeros(1)), None, None),
    (lambda: ufunc(np.add.reduce, np.zeros((4, 3, 3))[:, :2, :2], out=np.zeros((2, 2))), ValueError,
     "are not one run of equal steps"),
    (lambda: ufunc(np.add.reduce, np.zeros(3), out=np.zeros(()), where=np.ones(3)), TypeError,
     "pass a bool array"),
    (lambda: ufunc(np.add.at, np.zeros(3), np.zeros(3), 1.0), TypeError, "1-d integer array"),
    (lambda: ufunc(np.add.at, np.zeros(3), np.zeros(3, int), 1.0, out=np.zeros(3)), TypeError,
     "takes no out="),
    (lambda: ufunc(np.add.at, np.zeros((3, 2)), np.zeros(3, int), 1.0), ValueError, "1-d tally"),
    (lambda: ufunc(np.add.at, np.zeros(3), np.zeros(3, int), np.zeros(3, np.float32)), TypeError,
     "give them the tally's dtype"),
    (lambda: ufunc(np.add.reduce, np.zeros(3), out=np.zeros(()), per_sample=False), TypeError,
     "per_sample= is for elementwise"),
    (lambda: ufunc(np.add, np.zeros(3), 1.0, out=np.zeros(3), initial=0), TypeError, "initial= is for a reduction"),
])
def test_refusals_say_why(call, exc, match):
    if exc is None:
        call()
        return
    with pytest.raises(exc, match=match):
        call()


def test_a_0d_node_runs_once_per_replay_whatever_the_logical_size():
    r, more, k = np.array(1.0), np.array(False), np.zeros(())
    x = np.zeros(10)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, x, 1.0, out=x), name="x")
    g.add_node(ufunc(np.greater, r, 0.5, out=more), name="more")
    g.add_node(ufunc(np.add, k, 1.0, out=k), name="k")
    g.build()
    assert [s.team for s in g.plan().stages] and g.capacity == 10
    g.launch(3)
    assert more and k == 3
    g.set_logical_size(0)
    r[...] = 0.0
    g.launch(1)
    assert not more and k == 4


def test_the_convergence_loop_runs_without_python_and_matches_numpy(threads):
    """A 1-D heat equation until the max change is below tol: max of |difference| (a
    reduction) -> greater (a 0-d node) -> the while_loop's condition."""
    from eagle.graph import while_loop

    n, tol = 3000, 1e-4
    v = np.zeros(n)
    v[0] = 1.0
    k = 0
    while True:
        w = v.copy()
        w[1:-1] = (v[:-2] + v[2:]) * 0.5
        r = np.abs(w[1:-1] - v[1:-1]).max()
        v[1:-1] = w[1:-1]
        k += 1
        if not r > tol:
            break
    for nt in (1, 2):
        threads(nt)
        for teams in ("serial", "parallel"):
            u = np.zeros(n)
            u[0] = 1.0
            new, d = u.copy(), np.zeros(n - 2)
            res, more, it = np.zeros(()), np.ones((), bool), np.zeros((), np.int64)
            body = eagle.Graph()
            body.add_node(ufunc(np.add, u[:-2], u[2:], out=new[1:-1]), name="sum")
            body.add_node(ufunc(np.multiply, new[1:-1], 0.5, out=new[1:-1]), name="half")
            body.add_node(ufunc(np.subtract, new[1:-1], u[1:-1], out=d), name="d")
            body.add_node(ufunc(np.absolute, d, out=d), name="abs")
            body.add_node(ufunc(np.maximum.reduce, d, out=res), name="max")
            body.add_node(ufunc(np.greater, res, tol, out=more), name="more")
            body.add_node(ufunc(np.add, it, 1, out=it), name="count")
            body.add_node(ufunc(np.add, new[1:-1], 0.0, out=u[1:-1]), name="copy")
            g = eagle.Graph()
            g.add_node(while_loop(more, body, max_iterations=10**6), name="loop")
            g.build(cpu=eagle.CpuOptions(teams=teams)).launch(1)
            assert it == k and res == r
            np.testing.assert_array_equal(u, v)
