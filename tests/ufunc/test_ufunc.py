"""Ufunc nodes (eagle.graph.ufunc) against NumPy running the same ufunc."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import eagle
from eagle.graph import opaque, ufunc
from eagle.cuda.ufunc_node import cuda_source

N = 1003


def run(node, n=1, size=None, teams="auto"):
    g = eagle.Graph()
    g.add_node(node)
    if size is not None:
        g.set_logical_size(size)
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(n)
    return g


def data(dtype, n=N, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        lo = 1 if positive else -50
        return rng.integers(lo, 50, n).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    x = rng.standard_normal(n).astype(dt)
    return np.abs(x) + 0.5 if positive else x


# ---- the seed graph --------------------------------------------------------------

def seed_graph():
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_group([ufunc(np.multiply, {"x": x}, 2.0, out={"a": left}),
                 ufunc(np.add, {"x": x}, 1.0, out={"b": right})], names=["l", "r"])
    g.add_node(ufunc(np.add, {"a": left}, {"b": right}, out={"out": out}), name="join")
    return g, out


def test_seed_graph_as_ufunc_nodes_same_picture_and_result():
    g, out = seed_graph()
    picture = str(g)
    assert "(l)" in picture and "(r)" in picture and "(join)" in picture
    assert g.stages == [["l", "r"], ["join"]]
    assert sorted(g.dependencies) == [("l", "join", "a"), ("r", "join", "b")]
    g.build()
    g.launch(3)
    np.testing.assert_array_equal(out, [1.0, 4.0, 7.0, 10.0])


def test_picture_shape_matches_the_opaque_seed_graph():
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_group([opaque(lambda: None, reads={"x": x}, writes={"a": left}),
                 opaque(lambda: None, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(lambda: None, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    u, _ = seed_graph()
    strip = lambda s: s.splitlines()[1:]   # the ufunc graph's header adds its logical size
    assert [line.replace("(", "<").replace(")", ">") for line in strip(str(u))] == strip(str(g))


# ---- against NumPy: operands and dtypes ---------------------------------------------

@pytest.mark.parametrize("dtype", ["f8", "f4", "i8", "i4", "?", "c16", "c8", "u2"])
@pytest.mark.parametrize("uf", [np.add, np.multiply, np.maximum, np.subtract])
def test_binary(uf, dtype, threads):
    if dtype == "?" and uf is np.subtract:
        pytest.skip("NumPy has no boolean subtract")
    threads(2)
    a, b = data(dtype, seed=1), data(dtype, seed=2)
    out = np.zeros(N, dtype)
    run(ufunc(uf, {"a": a}, {"b": b}, out={"out": out}), teams="parallel")
    np.testing.assert_array_equal(out, uf(a, b))


@pytest.mark.parametrize("dtype", ["f8", "f4", "c16"])
@pytest.mark.parametrize("uf", [np.sqrt, np.exp, np.negative, np.sin, np.absolute, np.square])
def test_unary(uf, dtype):
    a = data(dtype, positive=True)
    want = uf(a)
    out = np.zeros(N, want.dtype)
    run(ufunc(uf, a, out=out))
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", ["f8", "f4", "i8", "i4", "i1", "c16"])
@pytest.mark.parametrize("scalar", [3, 2.5, np.float32(1.5), np.int8(3), True, 2j])
def test_scalar_first_and_second(dtype, scalar):
    a = data(dtype, positive=True)
    for operands in ((scalar, a), (a, scalar)):
        try:
            want = np.multiply(*operands)
        except (TypeError, OverflowError):
            continue
        if want.dtype != a.dtype:
            continue   # would need an output of another dtype: covered below
        out = np.zeros(N, a.dtype)
        run(ufunc(np.multiply, *operands, out=out))
        np.testing.assert_array_equal(out, want)


def test_scalar_promotes_like_numpy():
    # NEP 50: a Python float beside float32 stays float32; beside int64 it makes float64
    x32 = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    node = ufunc(np.multiply, x32, 0.1, out=out)
    assert node.loop_dtypes == (np.dtype("f4"),) * 3
    run(node)
    np.testing.assert_array_equal(out, x32 * 0.1)
    xi = np.arange(5)
    outf = np.zeros(5)
    node = ufunc(np.add, xi, 0.5, out=outf)       # the int64 input is cast to the float64 loop
    assert node.loop_dtypes == (np.dtype("f8"),) * 3 and node.loop.through_iterator
    run(node)
    np.testing.assert_array_equal(outf, xi + 0.5)
    outi = np.zeros(5, np.int64)
    run(ufunc(np.add, xi, 7, out=outi))
    np.testing.assert_array_equal(outi, xi + 7)


def test_int_scalar_too_large_for_the_loop_is_an_overflow_like_numpy():
    a = np.arange(4, dtype=np.int8)
    with pytest.raises(OverflowError):
        np.add(a, 300)
    with pytest.raises(OverflowError):
        ufunc(np.add, a, 300, out=np.zeros(4, np.int8))


def test_divide_by_zero_gives_numpys_result_without_a_warning():
    a = np.array([1.0, -1.0, 0.0])
    out = np.zeros(3)
    with np.errstate(all="ignore"):
        want = np.divide(a, 0.0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(ufunc(np.divide, a, 0.0, out=out))
    np.testing.assert_array_equal(out, want)


def test_0d_array_operand_is_read_on_every_replay():
    x = np.arange(6.0)
    alpha = np.array(2.0)
    out = np.zeros(6)
    g = run(ufunc(np.multiply, {"x": x}, {"alpha": alpha}, out={"y": out}))
    np.testing.assert_array_equal(out, 2 * x)
    alpha[()] = 5.0
    g.launch(1)
    np.testing.assert_array_equal(out, 5 * x)
    assert g.capacity == 6


def test_in_place_and_repeated_operand():
    x = np.arange(10.0)
    g = run(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), n=3)
    np.testing.assert_array_equal(x, np.arange(10.0) + 3)
    node = ufunc(np.multiply, {"x": x}, {"x": x}, out=x)
    assert list(node.reads) == [] and list(node.writes) == ["x"]
    y = np.zeros(10)
    node = ufunc(np.multiply, x, x, out=y)
    assert list(node.reads) == ["in0"] and list(node.writes) == ["out0"]
    run(node)
    np.testing.assert_array_equal(y, x * x)


def test_in_place_under_an_input_name_and_an_output_name():
    """np.multiply(w, 2.0, out=w) with the array named once as the input, once as the
    output: an in-place update, declared under the output's name and read too (so the
    edge into the node carries it), as NumPy runs it."""
    w = np.arange(8.0)
    node = ufunc(np.multiply, {"v": w}, 2.0, out={"w2": w})
    assert list(node.reads) == [] and list(node.writes) == ["w2"]
    assert node.updated == {"w2"} and node.operand_names[0] == "w2"
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"w": w}), name="init")
    g.add_node(node, name="m")
    g.build()
    g.launch(2)
    np.testing.assert_array_equal(w, 4 * np.arange(8.0))
    # staging sees a read before the write, as for updates=: data flows in along the edge
    assert [(name, is_write) for name, _, is_write in node.accesses()] == [("w2", False), ("w2", True)]
    assert "w" in [r.strip() for r in str(g).splitlines()]       # the edge init -> m is labelled
    # the where= mask given under its own name as the output: read and written in place
    m = np.array([True, False, True, True])
    mnode = ufunc(np.logical_and, np.array([True, True, False, True]), True, out={"m": m},
                  where={"mask": m})
    assert mnode.updated == {"m"} and list(mnode.reads) == ["in0"]
    run(mnode)
    np.testing.assert_array_equal(m, [True, False, False, True])
    # two names for one array among the inputs only is still refused
    with pytest.raises(ValueError, match="two names"):
        ufunc(np.add, {"a": w}, {"b": w}, out=np.zeros(8))


def test_a_partial_overlap_is_refused_naming_both_operands():
    """NumPy copies an input that overlaps its output unsafely (out=w[1:], input w[:-1]);
    a ufunc node splits the loop across threads and tiles, so it refuses at record time."""
    w = np.arange(8.0)
    with pytest.raises(ValueError, match="output 'w1' overlaps 'w0' other than element for element"):
        ufunc(np.add, {"w0": w[:-1]}, 1.0, out={"w1": w[1:]})
    with pytest.raises(ValueError, match="output 'r' overlaps 'w' other than element"):
        ufunc(np.negative, {"w": w}, out={"r": w[::-1]})
    np.testing.assert_array_equal(w, np.arange(8.0))   # nothing ran


def test_in_place_through_another_view_is_allowed():
    x = np.arange(8.0)
    run(ufunc(np.multiply, x[:], 2.0, out=x))
    np.testing.assert_array_equal(x, 2 * np.arange(8.0))


# ---- several outputs ------------------------------------------------------------------

@pytest.mark.parametrize("uf", [np.divmod, np.modf, np.frexp])
def test_several_outputs(uf, threads):
    threads(2)
    a = data("f8", seed=3) * 10
    operands = (a, 3.0) if uf is np.divmod else (a,)
    want = uf(*operands)
    outs = tuple(np.zeros(N, w.dtype) for w in want)
    node = ufunc(uf, *operands, out=outs)
    assert len(node.writes) == 2
    run(node, teams="parallel")
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got, w)


def test_several_outputs_named():
    a = np.linspace(-4, 4, 9)
    q, r = np.zeros(9), np.zeros(9)
    node = ufunc(np.divmod, {"a": a}, 2.0, out=({"q": q}, {"r": r}))
    assert list(node.writes) == ["q", "r"]
    run(node)
    np.testing.assert_array_equal(q, np.divmod(a, 2.0)[0])
    np.testing.assert_array_equal(r, np.divmod(a, 2.0)[1])


# ---- threads, retune, sizes, strides ---------------------------------------------------------

@pytest.mark.parametrize("n_threads", [1, 2])
def test_threads_and_retune(threads, n_threads):
    threads(n_threads)
    x = np.arange(1000.0)
    y = np.full(1000, -1.0)
    g = run(ufunc(np.multiply, {"x": x}, 3.0, out={"y": y}), teams="parallel")
    np.testing.assert_array_equal(y, 3 * x)
    y[:] = -1
    g.set_logical_size(321)
    g.launch(2)
    np.testing.assert_array_equal(y[:321], 3 * x[:321])
    assert (y[321:] == -1).all()


def test_zero_samples():
    x, y = np.zeros(0), np.zeros(0)
    g = run(ufunc(np.sin, x, out=y))
    assert g.capacity == 0
    x, y = np.arange(5.0), np.full(5, 7.0)
    g = run(ufunc(np.sin, x, out=y), size=0)
    assert (y == 7.0).all()


def test_strided_1d_views(threads):
    threads(2)
    buf = np.arange(40.0)
    out = np.zeros(60)
    run(ufunc(np.add, buf[::2], buf[1::2], out=out[::3]), teams="parallel")
    np.testing.assert_array_equal(out[::3], buf[::2] + buf[1::2])
    assert (np.delete(out, np.arange(0, 60, 3)) == 0).all()
    rev = np.zeros(20)
    run(ufunc(np.negative, buf[::-2], out=rev))
    np.testing.assert_array_equal(rev, -buf[::-2])


@pytest.mark.parametrize("uf", [np.exp, np.log, np.sin, np.tanh, np.add])
@pytest.mark.parametrize("views", ["x[::-1] -> y[::-1]", "x[::-2] -> y[::-1]", "in place x[::-1]",
                                   "m[:, ::-1] -> n[:, ::-1]", "m[::-1, -2:0:-2] -> n[::-1, -2:0:-2]"])
def test_operands_all_stepping_backwards_give_numpys_bits(uf, views, threads):
    # NumPy's iterator runs an axis every operand steps backwards forwards: its float64 exp
    # and log loops take another code path (other last bits) for a negative step
    threads(2)
    r = np.random.default_rng(5)
    x, y = np.abs(r.standard_normal(4000)) * 9 + 0.1, np.zeros(4000)
    m, n = np.abs(r.standard_normal((200, 40))) * 9 + 0.1, np.zeros((200, 40))
    pick = {"x[::-1] -> y[::-1]": lambda x, y, m, n: (x[::-1], y[::-1]),
            "x[::-2] -> y[::-1]": lambda x, y, m, n: (x[::-2], y[:2000][::-1]),
            "in place x[::-1]": lambda x, y, m, n: (x[::-1], x[::-1]),
            "m[:, ::-1] -> n[:, ::-1]": lambda x, y, m, n: (m[:, ::-1], n[:, ::-1]),
            "m[::-1, -2:0:-2] -> n[::-1, -2:0:-2]": lambda x, y, m, n: (m[::-1, -2:0:-2], n[::-1, -2:0:-2])}[views]
    want = [a.copy() for a in (x, y, m, n)]
    src, dst = pick(x, y, m, n)
    args = (src, 0.25) if uf is np.add else (src,)
    g = run(ufunc(uf, *args, out=dst), teams="parallel")
    wsrc, wdst = pick(*want)
    uf(*((wsrc, 0.25) if uf is np.add else (wsrc,)), out=wdst)
    for got, w in zip((x, y, m, n), want):
        assert got.tobytes() == w.tobytes(), views
    if views != "in place x[::-1]":
        g.set_logical_size(7)       # the first 7 samples of the views, as before
        dst[...] = 0.0
        g.launch(1)
        assert dst[:7].tobytes() == wdst[:7].tobytes() and not dst[7:].any()


@pytest.mark.parametrize("n", [1, 2, 100])
@pytest.mark.parametrize("src", ["contiguous", "reversed", "every other"])
@pytest.mark.parametrize("dst", ["contiguous", "reversed", "every other", "in place"])
def test_a_1d_loop_gets_the_steps_numpys_own_call_gives_it(n, src, dst):
    # NumPy's trivial loop (one output of positive steps) passes the operands' steps as they
    # are; its iterator (an output stepping backwards) gives one element steps 0 and turns an
    # axis every operand steps backwards around. Its float64 exp takes another code path for
    # other steps: a node handed other steps gave other last bits
    values = np.random.default_rng(n).standard_normal((40, n)) * 6
    pick = {"contiguous": lambda b: b[:n], "reversed": lambda b: b[n - 1::-1], "every other": lambda b: b[:2 * n:2]}

    def operands():
        a = pick[src](np.zeros(2 * n))
        return a, (a if dst == "in place" else pick[dst](np.zeros(2 * n)))

    for row in values:
        (a1, o1), (a2, o2) = operands(), operands()
        a1[...], a2[...] = row, row
        np.exp(a1, out=o1)
        run(ufunc(np.exp, a2, out=o2))
        assert o2.tobytes() == o1.tobytes(), row


def test_nd_rows_packed_and_unpacked(threads):
    threads(2)
    a = np.arange(60.0).reshape(10, 6)
    out = np.zeros((10, 6))
    g = run(ufunc(np.multiply, a, 2.0, out=out), teams="parallel")
    assert not g._nodes[0].loop.per_sample
    np.testing.assert_array_equal(out, 2 * a)
    wide = np.arange(100.0).reshape(10, 10)
    out2 = np.zeros((10, 4))
    g = run(ufunc(np.add, wide[:, 2:6], 1.0, out=out2), teams="parallel")
    assert g._nodes[0].loop.per_sample
    np.testing.assert_array_equal(out2, wide[:, 2:6] + 1)
    out2[:] = 0
    g.set_logical_size(3)
    g.launch(1)
    np.testing.assert_array_equal(out2[:3], wide[:3, 2:6] + 1)
    assert (out2[3:] == 0).all()


def test_nd_rows_not_contiguous_run_as_numpy():
    # rows of any strides run along their innermost dimension (they were refused before)
    a = np.arange(60.0).reshape(10, 6)
    out = np.zeros((10, 3))
    g = run(ufunc(np.add, a[:, ::2], 1.0, out=out), teams="parallel")
    assert g._nodes[0].loop.per_sample
    np.testing.assert_array_equal(out, a[:, ::2] + 1)


def test_shape_mismatch_refused():
    with pytest.raises(ValueError, match="share one shape"):
        ufunc(np.add, np.zeros(5), np.zeros(6), out=np.zeros(5))
    with pytest.raises(ValueError, match="share one shape"):
        ufunc(np.add, np.zeros(5), np.zeros((5, 2)), out=np.zeros((5, 2)))


# ---- other ufuncs: scipy, numba, gufuncs --------------------------------------------------

def test_scipy_special():
    sp = pytest.importorskip("scipy.special")
    a = data("f8", seed=4)
    for uf, operands in [(sp.erf, (a,)), (sp.expit, (a,)), (sp.gammaln, (np.abs(a) + 1,)),
                         (sp.jv, (2.0, a))]:
        out = np.zeros(N)
        run(ufunc(uf, *operands, out=out))
        np.testing.assert_array_equal(out, uf(*operands))


def test_numba_vectorize_eager_and_lazy(threads):
    numba = pytest.importorskip("numba")
    threads(2)

    @numba.vectorize(["float32(float32, float32)", "float64(float64, float64)"])
    def fma1(a, b):
        return a * b + 1.0

    @numba.vectorize(["float64(float64, float64)", "float32(float32, float32)"])
    def f64_first(a, b):
        return a * b

    @numba.vectorize
    def lazy(a):
        return a * a - 2.0

    a, b = data("f8", seed=5), data("f8", seed=6)
    out = np.zeros(N)
    run(ufunc(fma1, a, b, out=out), teams="parallel")
    np.testing.assert_array_equal(out, a * b + 1.0)
    a32 = a.astype(np.float32)
    out32 = np.zeros(N, np.float32)
    run(ufunc(fma1, a32, a32, out=out32))
    np.testing.assert_array_equal(out32, fma1(a32, a32))
    # NumPy takes the first loop float32 casts to safely: here the float64 one, with a cast
    assert f64_first(a32, a32).dtype == np.float64
    out64 = np.zeros(N)
    run(ufunc(f64_first, a32, a32, out=out64), teams="parallel")
    np.testing.assert_array_equal(out64, f64_first(a32, a32))
    out[:] = 0
    run(ufunc(lazy, a, out=out))
    np.testing.assert_array_equal(out, a * a - 2.0)


def test_matmul_per_sample_matrices(threads):
    threads(2)
    rng = np.random.default_rng(7)
    A, B = rng.standard_normal((50, 3, 4)), rng.standard_normal((50, 4, 2))
    C = np.zeros((50, 3, 2))
    g = run(ufunc(np.matmul, {"A": A}, {"B": B}, out={"C": C}), teams="parallel")
    np.testing.assert_allclose(C, A @ B, rtol=1e-14)
    C[:] = 0
    g.set_logical_size(7)
    g.launch(1)
    np.testing.assert_allclose(C[:7], A[:7] @ B[:7], rtol=1e-14)
    assert (C[7:] == 0).all()
    with pytest.raises(ValueError, match="core dimension 'n'"):
        ufunc(np.matmul, A, B, out=np.zeros((50, 4, 2)))
    with pytest.raises(ValueError, match="optional core dimensions must be present"):
        ufunc(np.matmul, A, np.zeros((50, 4)), out=np.zeros((50, 3)))


def test_numba_guvectorize():
    numba = pytest.importorskip("numba")

    @numba.guvectorize(["void(float64[:], float64, float64[:])"], "(n),()->(n)")
    def shift(a, s, out):
        for i in range(a.shape[0]):
            out[i] = a[i] + s * i

    a = np.arange(24.0).reshape(6, 4)
    out = np.zeros((6, 4))
    run(ufunc(shift, a, 0.5, out=out))
    np.testing.assert_array_equal(out, shift(a, 0.5))


_FIXED_DIM_GUFUNC = """
import numpy as np
import eagle
from eagle.graph import ufunc
from numba.np.ufunc.gufunc import GUFunc

def affine(a, b, out):
    for i in range(b.shape[0]):
        out[i] = a[0] * b[i] + a[1] * a.shape[0] + a[2]

# numba's @guvectorize takes no literal dimension: build its loop for (m),(n)->(n), whose
# loop reads m = dimensions[1] and n = dimensions[2], and give NumPy the signature
# (3),(n)->(n): NumPy passes it [N, 3, n]
uf = GUFunc(affine, "(m),(n)->(n)")
uf.gufunc_builder.signature = "(3),(n)->(n)"
uf.add("void(float64[:], float64[:], float64[:])")
uf.build_ufunc()
uf._frozen = True
assert uf.ufunc.signature == "(3),(n)->(n)"
rng = np.random.default_rng(3)
a, b = rng.standard_normal((9, 3)), rng.standard_normal((9, 5))
out = np.zeros((9, 5))
eagle.set_num_threads(2)
g = eagle.Graph()
g.add_node(ufunc(uf, a, b, out=out))
g.build(cpu=eagle.CpuOptions(teams="parallel"))
g.launch(1)
np.testing.assert_array_equal(out, uf(a, b))
# NumPy's own: cross1d (3),(3)->(3), one fixed dimension shared by all operands
from numpy._core._umath_tests import cross1d
x, y, z = rng.standard_normal((7, 3)), rng.standard_normal((7, 3)), np.zeros((7, 3))
g = eagle.Graph()
g.add_node(ufunc(cross1d, x, y, out=z))
g.build()
g.launch(1)
np.testing.assert_array_equal(z, cross1d(x, y))
print("same as NumPy")
"""


def test_gufunc_with_a_fixed_size_core_dimension_gets_numpys_dimensions(tmp_path):
    # a subprocess: with the fixed dimension dropped the loop reads n from past the end
    # of the dimensions it is given and writes out of bounds
    pytest.importorskip("numba")
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _FIXED_DIM_GUFUNC], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0 and "same as NumPy" in p.stdout, p.stdout + p.stderr


def _numpy_refuses(uf, *arrays, out):
    try:
        uf(*arrays, out=out)
    except ValueError as e:
        return str(e)
    return None


@pytest.mark.parametrize("m, n, p", [(3, 4, 6), (3, 4, 5), (3, 4, 7), (1, 1, 1), (5, 2, 6), (2, 5, 4)])
def test_gufunc_own_core_dimension_check_is_numpys(m, n, p):
    # conv1d_full (m),(n)->(p) checks p == m + n - 1 in its process_core_dims_func (NumPy 2)
    from numpy._core._umath_tests import conv1d_full
    rng = np.random.default_rng(m * 100 + n * 10 + p)
    x, y, out = rng.standard_normal((6, m)), rng.standard_normal((6, n)), np.zeros((6, p))
    refused = _numpy_refuses(conv1d_full, x, y, out=np.zeros((6, p)))
    if refused is not None:
        with pytest.raises(ValueError, match="NumPy refuses these core shapes") as e:
            ufunc(conv1d_full, x, y, out=out)
        assert refused in str(e.value)
        return
    run(ufunc(conv1d_full, x, y, out=out))
    np.testing.assert_array_equal(out, conv1d_full(x, y))


_PARALLEL_VECTORIZE = """
import numpy as np, numba, eagle
from eagle.graph import ufunc

twice = numba.vectorize(["float64(float64)"], target="parallel")(lambda v: 2.0 * v)
shift = numba.guvectorize(["void(float64[:], float64[:])"], "(n)->(n)",
                          target="parallel")(lambda a, o: None)
cpu = numba.guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")(lambda a, o: None)
x, out = np.arange(100000.0), np.zeros(100000)
eagle.set_num_threads(2)
refused = []
for uf, a, o in [(twice, x, out), (shift, x.reshape(1000, 100), out.reshape(1000, 100)),
                 (cpu.ufunc, x.reshape(1000, 100), out.reshape(1000, 100))]:
    try:
        node = ufunc(uf, a, out=o)
    except TypeError as e:
        assert "target='parallel'" in str(e), e
        refused.append(uf.__name__)
        continue
    g = eagle.Graph()
    g.add_node(node)
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    g.launch(20)
ufunc(cpu, x.reshape(1000, 100), out=out.reshape(1000, 100))   # the cpu GUFunc itself is fine
print("refused", len(refused))
"""


def test_numba_parallel_target_ufunc_refused(tmp_path):
    # a subprocess: numba's workqueue threading layer, entered from two of eagle's threads
    # at once, aborts the process
    pytest.importorskip("numba")
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue")
    p = subprocess.run([sys.executable, "-c", _PARALLEL_VECTORIZE], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env=env)
    assert p.returncode == 0 and "refused 3" in p.stdout, p.stdout + p.stderr


# ---- refused ------------------------------------------------------------------------------------

def test_object_loops_and_frompyfunc_refused():
    obj = np.array([1, 2, 3], dtype=object)
    with pytest.raises(TypeError, match="object and string loops need the GIL"):
        ufunc(np.add, obj, 1, out=np.zeros(3, dtype=object))
    f = np.frompyfunc(lambda v: v + 1, 1, 1)
    with pytest.raises(TypeError, match="need the GIL"):
        ufunc(f, obj, out=np.zeros(3, dtype=object))
    with pytest.raises(TypeError, match="need the GIL|no loop"):
        ufunc(f, np.zeros(3), out=np.zeros(3))


def test_bad_casts_refused():
    i8, f8 = np.zeros(4, np.int8), np.zeros(4)
    with pytest.raises(TypeError, match="casting='same_kind'"):
        ufunc(np.add, i8, f8, out=np.zeros(4, np.int8))
    with pytest.raises(TypeError, match="casting='same_kind'"):
        ufunc(np.sqrt, np.zeros(4), out=np.zeros(4, np.int64))


def test_bad_operands_refused():
    x = np.zeros(4)
    with pytest.raises(TypeError, match="needs a NumPy ufunc"):
        ufunc(np.sum, x, out=x)
    with pytest.raises(TypeError, match="takes 2 operand"):
        ufunc(np.add, x, out=x)
    with pytest.raises(TypeError, match="needs out="):
        ufunc(np.add, x, x)
    with pytest.raises(TypeError, match="has 2 output"):
        ufunc(np.divmod, x, 2.0, out=x)
    with pytest.raises(TypeError, match="must be an array, got a scalar"):
        ufunc(np.add, x, x, out=3.0)
    with pytest.raises(TypeError, match="one-entry dict"):
        ufunc(np.add, {"a": x, "b": x}, x, out=x)
    with pytest.raises(TypeError, match="a scalar goes bare"):
        ufunc(np.add, {"a": 2.0}, x, out=x)
    with pytest.raises(TypeError, match="an array, a scalar"):
        ufunc(np.add, [1.0, 2.0], x, out=x)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(4)
        ro.flags.writeable = False
        ufunc(np.add, x, x, out=ro)
    with pytest.raises(ValueError, match="0-d"):
        ufunc(np.add, x, x, out=np.zeros(()))
    with pytest.raises(ValueError, match=r"ufunc\(\): two different arrays .* are both named 'a'"):
        ufunc(np.add, {"a": x}, {"a": np.zeros(4)}, out=np.zeros(4))
    with pytest.raises(ValueError, match="two names"):
        ufunc(np.add, {"a": x}, {"b": x}, out=np.zeros(4))


def test_partial_overlap_refused_and_disjoint_views_allowed():
    buf = np.arange(10.0)
    with pytest.raises(ValueError, match="overlaps"):
        ufunc(np.add, buf[:-1], 1.0, out=buf[1:])
    q = np.zeros(4)
    with pytest.raises(ValueError, match="two outputs"):
        ufunc(np.divmod, np.ones(4), 2.0, out=(q, q))
    with pytest.raises(ValueError, match="overlaps"):
        ufunc(np.divmod, np.ones(4), 2.0, out=(q, q[:]))
    run(ufunc(np.add, buf[::2], 1.0, out=buf[1::2]))
    np.testing.assert_array_equal(buf[1::2], np.arange(0, 10.0, 2) + 1)


def test_refusal_changes_nothing_in_the_graph():
    g, out = seed_graph()
    before = str(g)
    with pytest.raises(TypeError):
        g.add_node(ufunc(np.add, np.zeros(4, np.int8), np.zeros(4), out=np.zeros(4, np.int8)))
    assert str(g) == before


def test_ufunc_nodes_beside_native_and_opaque_nodes(threads):
    threads(2)
    from eagle import kernels
    from eagle.graph import native
    x = np.arange(100.0)
    a, b, c = np.zeros(100), np.zeros(100), np.zeros(100)
    g = eagle.Graph()
    g.add_node(native(kernels.scale(2.0), reads={"x": x}, writes={"a": a}))
    g.add_node(ufunc(np.sqrt, {"a": a}, out={"b": b}))
    g.add_node(opaque(lambda: np.add(b, 1, out=c), reads={"b": b}, writes={"c": c}))
    assert g.stages == [["scale"], ["sqrt"], ["opaque"]]
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    g.launch(2)
    np.testing.assert_array_equal(c, np.sqrt(2 * x) + 1)


def test_repr_and_default_name():
    node = ufunc(np.multiply, {"x": np.zeros(3)}, 2.0, out={"y": np.zeros(3)})
    assert node.default_name() == "multiply"
    assert repr(node) == "ufunc(multiply, x, 2.0, out=(y), loop d,d->d)"
    assert node.box == ("(", ")") and node.sized


# ---- GPU: the generated kernel source (compiled and run by the gpu tests) ------------------------

def test_cuda_source_text():
    src, name = cuda_source("multiply", (np.dtype("f8"),) * 3, [False, True])
    assert name == "eagle_ufunc_multiply_float64_as"
    assert 'extern "C" __global__ void eagle_ufunc_multiply_float64_as(const char *in0, long long s0, ' \
           'double b, char *out0, long long so, long long n)' in src
    assert "if (i >= n) return;" in src
    assert "*(double *)(out0 + i * so) = (double)(a * b);" in src
    src, _ = cuda_source("sqrt", (np.dtype("f4"),) * 2, [False])
    assert "float a = *(const float *)(in0 + i * s0);" in src and "sqrt(a)" in src
    assert cuda_source("sqrt", (np.dtype("i8"),) * 2, [False]) is None
    assert cuda_source("erf", (np.dtype("f8"),) * 2, [False]) is None
    assert cuda_source("add", (np.dtype("f8"), np.dtype("f4"), np.dtype("f8")), [False, False]) is None


def test_cuda_source_compiles_with_nvcc(tmp_path):
    import os
    import shutil
    import subprocess
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if
                                    os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("no nvcc")
    srcs = [cuda_source(n, (np.dtype(d),) * (k + 1), s)[0]
            for n, k, s in [("add", 2, [False, False]), ("maximum", 2, [True, False]),
                            ("exp", 1, [False]), ("absolute", 1, [False])]
            for d in ("f8", "f4")]
    srcs.append(cuda_source("absolute", (np.dtype("i8"),) * 2, [False])[0])
    path = tmp_path / "k.cu"
    path.write_text("\n".join(srcs))
    r = subprocess.run([nvcc, "--ptx", "-o", str(tmp_path / "k.ptx"), str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_cupy_ufunc_node():
    cp = pytest.importorskip("cupy")
    x = cp.arange(100, dtype=cp.float64)
    y = cp.zeros(100)
    z = cp.zeros(100)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"y": y}))
    g.add_node(ufunc(np.arctan2, {"y": y}, {"x": x}, out={"z": z}))   # no generated kernel: opaque
    assert g._nodes[0].kind == "cuda_kernel" and g._nodes[1].kind == "opaque"
    g.build()
    g.launch(1)
    cp.testing.assert_array_equal(y, 2 * x)
    cp.testing.assert_array_equal(z, cp.arctan2(y, x))
    y[:] = 0
    g.set_logical_size(10)
    g.launch(1)
    assert float(y[10:].sum()) == 0 and float(y[:10].sum()) == float((2 * x[:10]).sum())


# ---- the tour and the benchmark rows ------------------------------------------------------------

def test_tour_shows_the_seed_graph_as_ufunc_nodes(capsys):
    from eagle.__main__ import main

    main(["--replays", "200", "--repeats", "2"])
    text = capsys.readouterr().out
    part = text[text.index("== 5. The same graph as ufunc nodes"):]
    assert "│ (l) │" in part and "(join)" in part and "[ 1.  4.  7. 10.]" in part
    row = next(line for line in part.splitlines() if line.lstrip().startswith("ufunc:"))
    assert "ratio eagle/loop" in row


def test_bench_rows_for_ufunc_nodes_and_builtin_kernels(capsys):
    from eagle import bench

    threads = eagle.get_num_threads()
    bench.main(["--quick", "--rounds", "1", "--target-ms", "1", "--big", "4096", "--only", "ufunc"])
    bench.main(["--quick", "--rounds", "1", "--target-ms", "1", "--big", "4096", "--only", "built-in"])
    assert eagle.get_num_threads() == threads
    out = capsys.readouterr().out
    assert "seed graph: 3 ufunc nodes" in out and "Python loop, the seed's functions" in out
    assert "multiply-add chain: 4 ufunc nodes" in out and "NumPy, the same ufunc calls" in out
    assert "built-in kernel scale" in out and "built-in kernel polynomial" in out
    assert ("plain C loop" in out) or ("plain C loops skipped" in out)
    assert "native diamond" not in out


# ---- more dtypes and gufuncs; arrays a ufunc node must not take ----------------------------------

def test_comparison_into_bool_and_float16_and_timedelta():
    a, b = data("f8", seed=8), data("f8", seed=9)
    less = np.zeros(N, bool)
    run(ufunc(np.less, a, b, out=less))
    np.testing.assert_array_equal(less, a < b)
    h = data("f2", seed=10)
    out = np.zeros(N, np.float16)
    run(ufunc(np.multiply, h, 3, out=out))
    np.testing.assert_array_equal(out, h * 3)
    t0 = np.arange(N).astype("M8[s]")
    dt = np.arange(N).astype("m8[s]")
    t1 = np.zeros(N, "M8[s]")
    run(ufunc(np.add, t0, dt, out=t1))
    np.testing.assert_array_equal(t1, t0 + dt)


def test_vecdot_gufunc_with_a_per_sample_scalar_output():
    if not hasattr(np, "vecdot"):
        pytest.skip("np.vecdot is NumPy >= 2.0")
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((40, 5)), rng.standard_normal((40, 5))
    out = np.zeros(40)
    run(ufunc(np.vecdot, a, b, out=out))
    np.testing.assert_allclose(out, np.vecdot(a, b), rtol=1e-14)


def test_masked_and_unaligned_arrays_refused():
    m = np.ma.masked_array(np.arange(4.0), mask=[0, 1, 0, 0])
    with pytest.raises(TypeError, match="MaskedArray, which gives ufuncs a meaning of its own"):
        ufunc(np.add, m, 1.0, out=np.zeros(4))

    class Logged(np.ndarray):
        def __array_ufunc__(self, *args, **kwargs):
            return NotImplemented

    with pytest.raises(TypeError, match="Logged"):
        ufunc(np.add, np.zeros(4).view(Logged), 1.0, out=np.zeros(4))
    mm = np.zeros(4).view(np.memmap)     # plain data under another type: taken
    run(ufunc(np.add, mm, 1.0, out=mm))
    assert (np.asarray(mm) == 1).all()
    raw = np.zeros(8 * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float64)
    assert not unaligned.flags.aligned
    with pytest.raises(ValueError, match="not aligned"):
        ufunc(np.add, unaligned, 1.0, out=np.zeros(4))


def test_node_keeps_its_arrays_and_constants_alive():
    import gc
    import weakref
    x = np.arange(5.0)
    y = np.zeros(5)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, np.float64(2.5), out={"y": y}))
    ref = weakref.ref(x)
    del x
    gc.collect()
    assert ref() is not None
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(y, np.arange(5.0) + 2.5)


# ---- the GPU face without a GPU: a fake cupy module (a TEST DOUBLE) records what eagle builds -----

class HostCudaArray:
    """TEST-ONLY: host memory presenting itself as a CUDA array."""

    def __init__(self, host):
        self.host = host

    @property
    def __cuda_array_interface__(self):
        h = self.host
        return {"shape": h.shape, "typestr": h.dtype.str, "data": (h.ctypes.data, False),
                "version": 3, "strides": None if h.flags.c_contiguous else h.strides}


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    import types

    cp = types.SimpleNamespace(made=[], called=[])

    class RawKernel:
        def __init__(self, source, name):
            self.source, self.name = source, name
            cp.made.append(self)

            class Function:
                ptr = 0x1000

                def __call__(self, *args, **kwargs):
                    raise AssertionError("not launched in these tests")

            self.kernel = Function()

    def arctan2(*args, out=None):
        cp.called.append(("arctan2", args, out))

    class ndarray:   # never instantiated: HostCudaArrays are not CuPy arrays
        pass

    cp.RawKernel, cp.arctan2, cp.ndarray = RawKernel, arctan2, ndarray
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


def test_cuda_arrays_make_a_sized_generated_kernel_node(fake_cupy):
    from eagle.graph import SIZE
    hx, hy = np.arange(8.0), np.zeros(16)
    x, y = HostCudaArray(hx), HostCudaArray(hy[::2])
    node = ufunc(np.multiply, {"x": x}, 2.0, out={"y": y})
    assert node.kind == "cuda_kernel" and node.sized
    assert list(node.reads) == ["x"] and list(node.writes) == ["y"]
    (kernel,) = fake_cupy.made
    assert kernel.name == "eagle_ufunc_multiply_float64_as"
    assert node.args[0] is x and node.args[1] == 8 and node.args[2] == np.float64(2.0)
    assert node.args[3] is y and node.args[4] == 16 and node.args[5] == SIZE
    assert node.size_arg == 5


def test_cuda_ufunc_refuses_an_output_overlapping_an_input_but_not_exact_in_place(fake_cupy):
    """The generated kernel's threads and blocks run at once on a GPU: out=x[1:] for
    an input x[:-1] races (thread i writes what thread i+1 reads; NumPy buffers it)."""
    h = np.arange(9.0)
    whole = HostCudaArray(h)
    node = ufunc(np.multiply, {"x": whole}, 2.0, out={"x": whole})   # exact in place: fine
    assert node.kind == "cuda_kernel"
    with pytest.raises(ValueError, match="output 'y' overlaps 'x' other than element for element"):
        ufunc(np.multiply, {"x": HostCudaArray(h[:-1])}, 2.0, out={"y": HostCudaArray(h[1:])})
    with pytest.raises(ValueError, match="overlaps"):
        ufunc(np.add, {"x": HostCudaArray(h[::2])}, {"z": HostCudaArray(h[1::2])},
              out={"y": HostCudaArray(h[:5])})
    stride0 = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(4,), strides=(0,))
    with pytest.raises(ValueError, match="share memory"):
        ufunc(np.negative, {"x": HostCudaArray(np.ones(4))}, out={"y": HostCudaArray(stride0)})
    # disjoint halves of one buffer are fine
    ufunc(np.add, {"x": HostCudaArray(h[:4])}, 1.0, out={"y": HostCudaArray(h[4:8])})


def test_cuda_ufunc_without_a_generated_kernel_is_opaque(fake_cupy):
    a, b, out = (HostCudaArray(np.ones(4)) for _ in range(3))
    node = ufunc(np.arctan2, {"a": a}, {"b": b}, out={"out": out})
    assert node.kind == "opaque" and not node.sized and node.default_name() == "arctan2"
    assert not fake_cupy.made
    node.fn()   # what the capture runs: CuPy's own ufunc
    assert fake_cupy.called == [("arctan2", (a, b), out)]
    with pytest.raises(TypeError, match="mixes NumPy arrays and CUDA arrays"):
        ufunc(np.add, a, np.ones(4), out=out)


# ---- Hostile aliasing in ufunc nodes: a node gives NumPy's result or refuses.
#
# NumPy buffers an output that overlaps its operands other than element for
# element; a ufunc node runs the inner loop in place, so it must refuse what
# NumPy would buffer. Two cases an "exact in-place" rule lets through: an
# output whose own elements share bytes, and a generalized ufunc whose output
# is one of its inputs (each output element reads several input elements).

def _run(node):
    g = eagle.Graph()
    g.add_node(node, name="u")
    g.build()
    g.launch(1)


def _self_overlapping(n=64):
    return {
        "zero stride": lambda: as_strided(np.zeros(1), shape=(n,), strides=(0,)),
        "overlapping rows": lambda: as_strided(np.zeros(n + 1), shape=(n, 2), strides=(8, 8)),
        "sliding window": lambda: sliding_window_view(np.zeros(n + 2), 3, writeable=True),
    }


@pytest.mark.parametrize("label", list(_self_overlapping()))
def test_an_output_whose_elements_share_bytes_is_refused(label):
    out = _self_overlapping()[label]()
    x = np.ones(out.shape)
    with pytest.raises(ValueError, match="share memory"):
        ufunc(np.add, x, 1.0, out=out)
    with pytest.raises(ValueError, match="share memory"):
        ufunc(np.add, {"acc": out}, x, out={"acc": out})   # "in place": NumPy buffers it too


def test_numpy_buffers_a_self_overlapping_in_place_output():
    # why it is refused: NumPy's result is not an elementwise in-place loop's
    n = 64
    x = np.ones(n)
    cell = np.zeros(1)
    acc = as_strided(cell, shape=(n,), strides=(0,))
    np.add(acc, x, out=acc)
    assert cell[0] == 1.0          # an unbuffered loop would accumulate n


@pytest.mark.parametrize("how", ["same array", "another view"])
def test_a_gufunc_writing_one_of_its_inputs_is_refused(how):
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 3, 3)), rng.random((4, 3, 3))
    out = a if how == "same array" else a[...]
    with pytest.raises(ValueError, match="overlaps"):
        ufunc(np.matmul, a, b, out=out)


def test_a_gufunc_with_a_separate_output_still_matches_numpy():
    rng = np.random.default_rng(1)
    a, b = rng.random((5, 3, 2)), rng.random((5, 2, 4))
    out = np.zeros((5, 3, 4))
    _run(ufunc(np.matmul, a, b, out=out))
    np.testing.assert_allclose(out, np.matmul(a, b))


@pytest.mark.parametrize("make", [
    lambda n: np.zeros((n, 3))[:, 1],
    lambda n: np.zeros(2 * n)[::-2],
    lambda n: np.zeros((2, n)).T.copy(),
], ids=["column", "reversed", "dense 2-d"])
def test_outputs_with_disjoint_elements_are_accepted(make):
    out = make(16)
    x = np.arange(out.size, dtype=float).reshape(out.shape)
    _run(ufunc(np.add, x, 1.0, out=out))
    np.testing.assert_array_equal(out, x + 1)


def test_a_zero_stride_input_is_fine():
    n = 32
    x = as_strided(np.full(1, 2.0), shape=(n,), strides=(0,))
    out = np.zeros(n)
    _run(ufunc(np.multiply, x, 3.0, out=out))
    np.testing.assert_array_equal(out, np.full(n, 6.0))


@pytest.mark.parametrize("shape", [(0,), (0, 3), (0, 2, 3), (4, 0)])
def test_empty_operands_are_accepted_whatever_their_strides(shape):
    # NumPy 2 gives np.zeros((0, 2, 3)) the strides (0, 0, 0): no row is ever run
    x, out = np.zeros(shape), np.ones(shape)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, x, 1.0, out=out), name="u")
    g.build()
    g.launch(2)
    assert g.capacity == shape[0]
    np.testing.assert_array_equal(out, np.ones(shape))


# ---- Python thread states of the team's workers -------------------------------------------------

def _thread_states():
    """How many Python thread states the main interpreter holds (dead threads' included)."""
    import ctypes
    api = ctypes.pythonapi
    api.PyInterpreterState_Main.restype = ctypes.c_void_p
    api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
    api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
    api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
    api.PyThreadState_Next.restype = ctypes.c_void_p
    n, ts = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Main())
    while ts:
        n, ts = n + 1, api.PyThreadState_Next(ts)
    return n


def test_workers_of_short_lived_launching_threads_leave_no_thread_state(threads):
    # each launching thread has its own OpenMP team; its worker runs the ufunc loop and
    # needs a Python thread state while it does (a loop reports errors through it); when
    # the launching thread ends, its workers end too and must not leave their state behind
    import threading
    import time
    threads(2)
    x, out = np.arange(1000.0), np.zeros(1000)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"out": out}))
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    before = _thread_states()
    for _ in range(100):
        t = threading.Thread(target=g.launch, args=(2,))
        t.start()
        t.join()
    np.testing.assert_array_equal(out, 2 * x)
    deadline = time.monotonic() + 10    # the workers end a moment after their launching thread
    while _thread_states() > before + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _thread_states() <= before + 2
