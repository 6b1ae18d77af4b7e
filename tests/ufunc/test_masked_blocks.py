"""A where= mask runs block by block (eagle/cpu/_ufunc.pyx, _masked_run): a fragmented
mask runs the loop over the whole block into a scratch and copies the set elements out
(NumPy's masked loop would call the loop once per run of set elements), a sparse one
calls the loop once per run. Either way the result is NumPy's own
``uf(*operands, out=out, where=mask)``: outputs untouched where the mask is not set,
casts, exact in-place, errors only from the set elements."""
import numpy as np
import pytest

import eagle
from eagle.graph import ufunc


def run(node, replays=1):
    g = eagle.Graph()
    g.add_node(node, name="u")
    g.build()
    g.launch(replays)
    return g


def masks(n, rng):
    """Masks of every density and structure a block meets."""
    runs = np.zeros(n, bool)
    for start in range(0, n, 700):
        runs[start:start + 300] = True
    return {"none": np.zeros(n, bool), "all": np.ones(n, bool), "half": rng.random(n) < 0.5,
            "1%": rng.random(n) < 0.01, "99%": rng.random(n) < 0.99, "long runs": runs,
            "alternating": np.arange(n) % 2 == 0}


def test_a_fragmented_mask_runs_whole_blocks_and_a_sparse_one_runs_by_runs(threads):
    """NumPy's loop under a mask (np.maximum: no fused masked loop of eagle's own)."""
    threads(1)
    n = 100_000
    rng = np.random.default_rng(0)
    a, b = rng.random(n), rng.random(n)
    # maximum: not a fused op (those run in one pass, tests/ufunc/test_masked_run_patterns.py)
    for name, mask, way in [("half", rng.random(n) < 0.5, 0), ("sparse", rng.random(n) < 0.002, 1)]:
        out = np.full(n, -1.0)
        node = ufunc(np.maximum, a, b, out=out, where=mask)
        run(node)
        want = np.full(n, -1.0)
        np.maximum(a, b, out=want, where=mask)
        np.testing.assert_array_equal(out, want)
        blocks = node.loop.masked_blocks
        assert blocks[way] > 0 and blocks[1 - way] == 0, (name, blocks)


@pytest.mark.parametrize("dt", ["f8", "f4", "i1", "i2", "?", "c16", "clongdouble", "m8[s]"])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_every_density_gives_numpys_result(threads, dt, nthreads):
    threads(nthreads)
    n = 20_011
    rng = np.random.default_rng(1)
    dt = np.dtype(dt)
    uf = np.logical_xor if dt.kind == "b" else np.add
    x = (rng.integers(-50, 50, n)).astype(dt) if dt.kind != "c" else \
        (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    y = x[::-1].copy()
    for name, mask in masks(n, rng).items():
        out = np.ones(n, dt) if dt.kind != "m" else np.full(n, 7, dt)
        want = out.copy()
        uf(x, y, out=want, where=mask)
        run(ufunc(uf, x, y, out=out, where=mask))
        np.testing.assert_array_equal(out, want, err_msg=f"{dt} {name}")


@pytest.mark.parametrize("how", ["in place", "strided out", "cast", "rows", "row flag", "0-d"])
def test_layouts_in_place_and_casts_under_a_fragmented_mask(threads, how):
    threads(2)
    n = 9_001
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n)
    mask = rng.random(n) < 0.5
    if how == "in place":
        want = x.copy()
        np.exp(want, out=want, where=mask)
        run(ufunc(np.exp, x, out=x, where=mask))
        np.testing.assert_array_equal(x, want)
        return
    if how == "strided out":
        buf = np.zeros(2 * n)
        out = buf[::2]
        want = buf.copy()
        np.multiply(x, 3.0, out=want[::2], where=mask)
        run(ufunc(np.multiply, x, 3.0, out=out, where=mask))
        np.testing.assert_array_equal(buf, want)
        return
    if how == "cast":
        out = np.zeros(n, np.float32)
        want = out.copy()
        np.add(x, 1.0, out=want, where=mask, casting="same_kind")
        run(ufunc(np.add, x, 1.0, out=out, where=mask))
        np.testing.assert_array_equal(out, want)
        return
    if how == "0-d":
        for flag in (True, False):
            out = np.zeros(n)
            want = out.copy()
            np.negative(x, out=want, where=np.array(flag))
            run(ufunc(np.negative, x, out=out, where=np.array(flag)))
            np.testing.assert_array_equal(out, want)
        return
    rows = rng.standard_normal((n, 3))
    m = rng.random((n, 3)) < 0.5 if how == "rows" else rng.random((n, 1)) < 0.5
    out = np.zeros((n, 3))
    want = out.copy()
    np.sqrt(np.abs(rows), out=want, where=m)
    absolute = np.abs(rows)
    run(ufunc(np.sqrt, absolute, out=out, where=m))
    np.testing.assert_array_equal(out, want)


def test_an_error_only_the_unset_elements_would_raise_is_not_raised(threads):
    # integer power reports a negative exponent as an error: a whole block run over
    # the unset elements too meets one, and runs that block again by runs
    threads(1)
    n = 10_000
    rng = np.random.default_rng(3)
    base = rng.integers(1, 5, n)
    exponent = rng.integers(0, 4, n)
    mask = rng.random(n) < 0.5
    exponent[~mask] = -1
    out = np.zeros(n, np.int64)
    want = out.copy()
    np.power(base, exponent, out=want, where=mask)
    run(ufunc(np.power, base, exponent, out=out, where=mask), replays=2)
    np.testing.assert_array_equal(out, want)
    assert out[mask].size and (out[mask] == base[mask] ** exponent[mask]).all()


def test_an_error_of_a_set_element_is_raised_as_numpys(threads):
    threads(1)
    n = 10_000
    rng = np.random.default_rng(4)
    base = rng.integers(1, 5, n)
    exponent = rng.integers(0, 4, n)
    mask = rng.random(n) < 0.5
    exponent[np.flatnonzero(mask)[5]] = -1
    with pytest.raises(ValueError, match="negative integer powers"):
        np.power(base, exponent, where=mask, out=np.zeros(n, np.int64))
    with pytest.raises(ValueError, match="negative integer powers"):
        run(ufunc(np.power, base, exponent, out=np.zeros(n, np.int64), where=mask))


SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 5e-324, 1.7976931348623157e308, 1e-300])


@pytest.mark.parametrize("uf", [np.add, np.subtract, np.multiply, np.divide])
@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("shape", ["arrays", "scalar first", "scalar second", "in place"])
def test_masked_float_arithmetic_runs_fused_with_numpys_bits(threads, uf, dt, shape):
    # a fragmented mask over a float add/subtract/multiply/divide computes and selects in
    # one pass (eagle_masked_arith), not the loop into a scratch and a select after it
    threads(1)
    n = 50_001
    rng = np.random.default_rng(3)
    pool = np.concatenate([SPECIALS, rng.standard_normal(64) * 10.0 ** rng.integers(-30, 30, 64)])
    with np.errstate(over="ignore"):   # float32: the large ones round to inf
        a, b, out = (rng.choice(pool, n).astype(dt) for _ in range(3))
    mask = rng.random(n) < 0.5
    want = out.copy()
    args = {"arrays": (a, b), "scalar first": (dt(2.5), b), "scalar second": (a, dt(-0.75)),
            "in place": (out, b)}[shape]
    with np.errstate(all="ignore"):
        uf(*[x.copy() if isinstance(x, np.ndarray) else x for x in args], out=want, where=mask)
        node = ufunc(uf, *args, out=out, where=mask)
        run(node)
    assert node.loop.fused_op == [np.add, np.subtract, np.multiply, np.divide].index(uf) + 1 + 4 * (dt == np.float32)
    assert node.loop.masked_blocks == (0, 0) and sum(node.loop.masked_chunks) > 0
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{want.itemsize}"))


def test_other_loops_and_mixed_dtypes_keep_the_scratch_and_select():
    n = 1000
    mask = np.arange(n) % 2 == 0
    x = np.ones(n)
    assert ufunc(np.exp, x, out=np.zeros(n), where=mask).loop.fused_op == 0
    assert ufunc(np.maximum, x, x, out=np.zeros(n), where=mask).loop.fused_op == 0
    assert ufunc(np.add, np.ones(n, np.int8), 1, out=np.zeros(n, np.int8), where=mask).loop.fused_op == 0
    assert ufunc(np.add, np.ones(n, np.int64), 1, out=np.zeros(n, np.int64), where=mask).loop.fused_op == 9
    assert ufunc(np.add, np.ones(n, np.float32), 1.0, out=np.zeros(n), where=mask).loop.fused_op == 0


@pytest.mark.parametrize("dt", ["f8", "f4", "i8", "i4", "i2", "?"])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_blended_blocks_select_every_width_around_the_vector_lengths(threads, dt, nthreads):
    """A loop with no fused form (maximum) under fragmented masks: each blended block's set
    elements go to the output by a select (csrc/cpu/mask_select.h: 16 or 8 lanes at a time
    where the CPU has AVX-512, then the tail), at lengths around the lane counts and block
    sizes; the unset elements keep their values, the set ones are NumPy's."""
    threads(nthreads)
    dt = np.dtype(dt)
    rng = np.random.default_rng(5)
    for n in (1, 7, 8, 9, 15, 16, 17, 31, 33, 511, 512, 513, 2047, 2048, 2049, 5003):
        for pattern in ("half", "alternating", "last only"):
            mask = rng.random(n) < 0.5 if pattern == "half" else \
                np.arange(n) % 2 == 1 if pattern == "alternating" else np.arange(n) == n - 1
            x = (rng.integers(-100, 100, n)).astype(dt)
            y = (rng.integers(-100, 100, n)).astype(dt)
            out = (rng.integers(-100, 100, n)).astype(dt)
            want = out.copy()
            np.maximum(x, y, out=want, where=mask)
            node = ufunc(np.maximum, x, y, out=out, where=mask)
            run(node)
            np.testing.assert_array_equal(out, want, err_msg=f"{dt} n={n} {pattern}")
