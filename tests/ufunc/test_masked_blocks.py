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
    threads(1)
    n = 100_000
    rng = np.random.default_rng(0)
    a, b = rng.random(n), rng.random(n)
    for name, mask, way in [("half", rng.random(n) < 0.5, 0), ("sparse", rng.random(n) < 0.002, 1)]:
        out = np.full(n, -1.0)
        node = ufunc(np.add, a, b, out=out, where=mask)
        run(node)
        want = np.full(n, -1.0)
        np.add(a, b, out=want, where=mask)
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
