"""Reduction and tally nodes over every kind of view NumPy hands out — strided, reversed,
transposed, a column, an output that is a column of another array, an output in the same
buffer as the input but disjoint from it — against NumPy's own reduce and ``at``; and the
overlaps NumPy resolves by buffering (an output inside the input, weights inside the
tally) refused at record time, naming both arrays, instead of reading half-updated data."""
import numpy as np
import pytest

import eagle
from eagle.graph import ufunc


def replay(node, launches=1, threads=2):
    before = eagle.get_num_threads()
    eagle.set_num_threads(threads)
    try:
        g = eagle.Graph()
        g.add_node(node, name="r")
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        g.launch(launches)
    finally:
        eagle.set_num_threads(before)
    return g


VIEWS = {
    "every_other_row": lambda M: M[::2],
    "reversed": lambda M: M[::-1],
    "transposed": lambda M: M.T,
    "one_column": lambda M: M[:, 3],
    "reversed_columns": lambda M: M[1:, ::-2],
    "as_strided_rows": lambda M: np.lib.stride_tricks.as_strided(M, (40, 2), (M.strides[0], 16)),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("op", ["add", "maximum", "bitwise_xor"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_views_of_the_input_reduce_as_numpy(view, op, threads):
    rng = np.random.default_rng(5)
    M = rng.integers(-50, 50, (80, 7)).astype(np.int64)
    x = VIEWS[view](M)
    s = np.zeros(x.shape[1:], np.int64)
    uf = getattr(np, op)
    replay(ufunc(uf.reduce, x, out=s), threads=threads)
    np.testing.assert_array_equal(s, uf.reduce(x, axis=0))


@pytest.mark.parametrize("threads", [1, 3])
def test_outputs_that_are_views_of_other_memory(threads):
    rng = np.random.default_rng(6)
    M = rng.standard_normal((64, 5))
    O = np.full((5, 3), 7.0)
    replay(ufunc(np.maximum.reduce, M, out=O[:, 1]), threads=threads)
    np.testing.assert_array_equal(O[:, 1], M.max(axis=0))
    assert (O[:, [0, 2]] == 7.0).all()               # the neighbouring columns untouched
    # input and output in one buffer, disjoint: the last element is the sum of the rest
    v = np.arange(100, dtype=np.int64)
    replay(ufunc(np.add.reduce, v[:-1], out=v[-1:].reshape(())), threads=threads)
    assert v[-1] == sum(range(99))
    # a reversed output view
    R = np.zeros(5)
    replay(ufunc(np.add.reduce, M, out=R[::-1]), threads=threads)
    np.testing.assert_allclose(R[::-1], M.sum(axis=0), rtol=1e-12)


def test_a_where_mask_that_is_a_view():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(200)
    mask = rng.random(400) < 0.5
    s = np.zeros(())
    replay(ufunc(np.add.reduce, x, out=s, where=mask[::2]))
    np.testing.assert_allclose(s, np.add.reduce(x, where=mask[::2]), rtol=1e-12)


def test_tallies_with_views_for_cells_index_and_weights():
    rng = np.random.default_rng(8)
    T = np.zeros(20)
    idx = rng.integers(0, 5, 60)
    W = rng.integers(0, 9, 120).astype(float)
    want = T.copy()
    np.add.at(want[::4], idx, W[::2])
    replay(ufunc(np.add.at, T[::4], idx, W[::2]), threads=3)
    np.testing.assert_array_equal(T, want)
    # weights in the same buffer as the cells, disjoint from them
    B = np.arange(16.0)
    want = B.copy()
    np.add.at(want[:4], np.array([0, 1, 1, 3, 2, 0, 0, 3]), want[8:])
    replay(ufunc(np.add.at, B[:4], np.array([0, 1, 1, 3, 2, 0, 0, 3]), B[8:]))
    np.testing.assert_array_equal(B, want)


def test_overlaps_numpy_would_buffer_are_refused_by_name():
    A = np.arange(18.0).reshape(6, 3)
    before = A.copy()
    with pytest.raises(ValueError, match=r"add\.reduce.*overlaps"):
        eagle.Graph().add_node(ufunc(np.add.reduce, A, out=A[0]), name="r")
    B = np.arange(8.0)
    with pytest.raises(ValueError, match=r"add\.at.*overlaps"):
        eagle.Graph().add_node(ufunc(np.add.at, B[:4], np.array([0, 1]), B[2:4]), name="t")
    np.testing.assert_array_equal(A, before)
