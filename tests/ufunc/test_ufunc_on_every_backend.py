"""Ufunc nodes, one scenario per test run on every backend (the ``backend`` fixture: cpu,
the cuda stand-in, a GPU when present): NumPy's casting and where=, replayed, compared
with NumPy's own results. On cuda eagle generates an elementwise kernel (compiled by
NVRTC on a GPU; on the stand-in by the CUDA C emulator, tests/doubles/cuda_emulation.h,
through the ``emulating_cupy`` double of cupy.RawKernel)."""
import numpy as np
import pytest

import eagle


def values(dt, n, rng):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -100, 100, n).astype(dt)
    return (rng.standard_normal(n) * 10).astype(dt)


CASES = [
    (np.add, ("i8", "?"), "i8"),          # the age + alive
    (np.add, ("i4", "f4"), "f8"),         # both inputs cast to the float64 loop
    (np.multiply, ("u1", "i1"), "i2"),
    (np.add, ("f8", "f8"), "f4"),         # a same_kind cast of the result
    (np.add, ("i8", "i8"), "i1"),         # wraps as NumPy's cast does
    (np.sqrt, ("i4",), "f8"),
]


def one_node(node):
    g = eagle.Graph()
    g.add_node(node, name="u")
    return g.build()


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}-{'-'.join(c[1])}-{c[2]}")
def test_casts_and_masks_as_numpy(backend, case, masked):
    b = backend
    uf, ins, out_dt = case
    rng = np.random.default_rng(1)
    n = 37
    hosts = [values(d, n, rng) for d in ins]
    hout = values(out_dt, 2 * n, rng)[::2]            # a strided output
    hmask = rng.integers(0, 2, n).astype(bool)
    want = hout.copy()
    with np.errstate(all="ignore"):
        uf(*hosts, out=want, where=hmask if masked else True)
    base = np.zeros(2 * n, out_dt)
    base[::2] = hout
    out_base = b.asarray(base)
    out = out_base[::2]
    kw = {"where": {"alive": b.asarray(hmask)}} if masked else {}
    node = b.ufunc(uf, *[b.asarray(h) for h in hosts], out=out, **kw)
    assert node.sized and node.kind == ("ufunc" if b.graph_backend == "cpu" else "cuda_kernel")
    if masked:
        assert "alive" in node.reads
    with np.errstate(all="ignore"):
        g = one_node(node)
        g.launch(2)
    got = b.asnumpy(out_base)
    if b.exact_math or uf is not np.sqrt:
        np.testing.assert_array_equal(got[::2], want)
    else:
        np.testing.assert_allclose(got[::2], want, rtol=1e-15)
    np.testing.assert_array_equal(got[1::2], 0)       # between the strided output's elements


def test_scalar_operand_a_0d_mask_and_where_false(backend):
    b = backend
    h = np.arange(-5, 5, dtype=np.int32)
    x = b.asarray(h)
    out = b.asarray(np.full(10, -1.0))
    flag = b.asarray(np.array(False))
    g = one_node(b.ufunc(np.multiply, {"x": x}, 0.5, out={"y": out}, where={"flag": flag}))
    g.launch(1)
    np.testing.assert_array_equal(b.asnumpy(out), -1.0)      # the 0-d mask is false
    b.put(flag, (), True)
    g.launch(1)                                               # read on every replay
    np.testing.assert_array_equal(b.asnumpy(out), h * 0.5)
    never = b.asarray(np.full(10, 7.0))
    one_node(b.ufunc(np.add, x, 1.0, out=never, where=False)).launch(1)
    np.testing.assert_array_equal(b.asnumpy(never), 7.0)


def test_numpys_refusals(backend):
    b = backend
    x, xi = b.zeros(4), b.zeros(4, np.int64)
    with pytest.raises(TypeError, match="casting='same_kind'"):
        b.ufunc(np.add, x, 1.0, out=xi)
    with pytest.raises(TypeError, match="mask .* casting='safe'"):
        b.ufunc(np.add, x, 1.0, out=x, where=b.asarray(np.ones(4, np.int8)))
    with pytest.raises(ValueError, match="mask 'where' has shape \\(5,\\)"):
        b.ufunc(np.add, x, 1.0, out=x, where=b.asarray(np.ones(5, bool)))


def test_in_place_under_two_names_and_a_partial_overlap(backend):
    """One array named as the input and, differently, as the output is NumPy's in-place
    np.multiply(w, 2.0, out=w). An output overlapping an input other than element for
    element (out=w[1:], input w[:-1]) would race between threads (on a GPU, between its
    threads and blocks): refused at record time, naming both operands."""
    b = backend
    w = b.asarray(np.arange(8.0))
    node = b.ufunc(np.multiply, {"v": w}, 2.0, out={"w2": w})
    assert node.kind == ("ufunc" if b.graph_backend == "cpu" else "cuda_kernel")
    assert list(node.writes) == ["w2"] and node.updated == {"w2"}
    one_node(node).launch(2)
    np.testing.assert_array_equal(b.asnumpy(w), 4 * np.arange(8.0))
    with pytest.raises(ValueError, match="output 'w1' overlaps 'w0' other than element for element"):
        b.ufunc(np.add, {"w0": w[:-1]}, 1.0, out={"w1": w[1:]})
