"""Hostile aliasing in ufunc nodes: a node gives NumPy's result or refuses.

NumPy buffers an output that overlaps its operands other than element for
element; a ufunc node runs the inner loop in place, so it must refuse what
NumPy would buffer. Two cases an "exact in-place" rule lets through: an
output whose own elements share bytes, and a generalized ufunc whose output
is one of its inputs (each output element reads several input elements).
"""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import eagle
from eagle.graph import ufunc


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
