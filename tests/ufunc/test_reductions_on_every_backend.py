"""Reductions on every backend (the ``backend`` fixture: cpu, the cuda stand-in, a GPU when
present): integer results equal to the cpu's, float results the cpu's bits (the CUDA
kernels combine in the cpu's order: eagle/cuda/reduce_node.py); a reduction feeding a
0-d node that is a ``while_loop`` condition, a loop until converged without Python."""
import numpy as np
import pytest

import eagle
from eagle.graph import while_loop


def cpu_result(op, x, out_dt, n, **kw):
    from eagle.graph import ufunc

    s = np.zeros((), out_dt)
    g = eagle.Graph()
    g.add_node(ufunc(getattr(np, op).reduce, x, out=s, **kw), name="r")
    g.build()
    g.set_logical_size(n)
    g.launch(1)
    return s


@pytest.mark.parametrize("op, in_dt, out_dt", [
    ("add", "f8", "f8"), ("add", "f4", "f4"), ("add", "i8", "i8"), ("add", "?", "i8"),
    ("maximum", "f8", "f8"), ("minimum", "i4", "i4"), ("multiply", "i8", "i8"),
    ("logical_or", "?", "?"), ("bitwise_xor", "u4", "u4"),
])
def test_a_reduction_equals_the_cpus_bits(backend, op, in_dt, out_dt):
    b = backend
    rng = np.random.default_rng(4)
    n = 1000
    h = (rng.standard_normal(n) * 100).astype(in_dt) if np.dtype(in_dt).kind == "f" else \
        (rng.random(n) < 0.3) if in_dt == "?" else rng.integers(0, 50, n).astype(in_dt)
    x, s = b.asarray(h), b.asarray(np.zeros((), out_dt))
    g = eagle.Graph()
    g.add_node(b.ufunc(getattr(np, op).reduce, {"x": x}, out={"s": s}), name="r")
    g.build()
    for size in (1000, 333, 64, 1):
        g.set_logical_size(size)
        g.launch(2)
        want = cpu_result(op, h, out_dt, size)
        got = b.asnumpy(s)
        if b.exact_math or np.dtype(out_dt).kind != "f":
            assert got.tobytes() == want.tobytes(), (size, got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12 if out_dt == "f8" else 1e-5)
        np.testing.assert_allclose(got, getattr(np, op).reduce(h[:size], out=np.zeros((), out_dt)),
                                   rtol=1e-12 if out_dt == "f8" else 1e-5)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_a_reduction_without_identity_over_no_sample_raises(backend, op):
    """maximum/minimum.reduce over 0 samples without initial= has no value: every backend
    raises the cpu's ValueError after the launch (on CUDA the finish kernel sets an error
    word the launch reads back; it left the output unchanged and said nothing), once, and
    leaves the output as it was; the next launch over samples runs normally."""
    b = backend
    h = np.arange(10.0)
    x, s = b.asarray(h), b.asarray(np.full((), 7.0))
    g = eagle.Graph()
    g.add_node(b.ufunc(getattr(np, op).reduce, x, out=s), name="r")
    g.build()
    g.set_logical_size(0)
    with pytest.raises(ValueError, match=f"zero-size array to reduction operation {op}.reduce which has "
                                         "no identity"):
        g.launch(1)
    assert b.asnumpy(s) == 7.0
    g.set_logical_size(10)
    g.launch(1)
    assert b.asnumpy(s) == getattr(np, op).reduce(h)


def test_where_and_initial(backend):
    b = backend
    rng = np.random.default_rng(8)
    h = rng.standard_normal(500)
    m = rng.random(500) < 0.4
    x, w, s = b.asarray(h), b.asarray(m), b.asarray(np.zeros(()))
    g = eagle.Graph()
    g.add_node(b.ufunc(np.maximum.reduce, x, out=s, where={"alive": w}, initial=-10.0), name="r")
    g.build().launch(1)
    assert b.asnumpy(s) == np.maximum.reduce(h, where=m, initial=-10.0)


def test_a_loop_until_converged_without_python(backend):
    """x <- x / 2 on every sample until max(x) <= tol: a reduction, a 0-d greater node,
    a while_loop on its result."""
    b = backend
    h = np.linspace(1.0, 64.0, 200)
    x, res, more = b.asarray(h.copy()), b.asarray(np.zeros(())), b.asarray(np.ones((), bool))
    body = eagle.Graph()
    body.add_node(b.ufunc(np.multiply, x, 0.5, out=x), name="halve")
    body.add_node(b.ufunc(np.maximum.reduce, x, out=res), name="max")
    body.add_node(b.ufunc(np.greater, res, 1e-3, out=more), name="more")
    g = eagle.Graph()
    g.add_node(while_loop(more, body, max_iterations=1000), name="loop")
    g.build().launch(1)
    k, v = 0, h.copy()
    while True:
        v *= 0.5
        k += 1
        if not v.max() > 1e-3:
            break
    np.testing.assert_array_equal(b.asnumpy(x), v)
    assert b.asnumpy(res) == v.max() and not b.asnumpy(more)
