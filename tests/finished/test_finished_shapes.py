"""compact and reorder over the shapes eagle's own code must not trip on: zero samples,
2-d state (rows per sample), rows of zero width; bad shapes get clear errors, not IndexError."""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, reorder


def build(node):
    g = eagle.Graph()
    g.add_node(node)
    return g.build()


@pytest.mark.parametrize("state_shape", [(0,), (0, 3), (0, 2, 2), (0, 0)])
def test_zero_samples(state_shape):
    g = build(compact(np.zeros(0, bool), {"s": np.zeros(state_shape)}))
    g.launch(2)
    assert g.logical_size == 0 and g.capacity == 0
    g = build(reorder(np.zeros(0, np.int64), {"s": np.zeros(state_shape)}, n_keys=3))
    g.launch(2)
    assert g.logical_size == 0


@pytest.mark.parametrize("n_threads", [1, 2])
def test_2d_state_rows_move_with_their_sample(threads, n_threads):
    threads(n_threads)
    n = 9
    alive = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1], bool)
    rows = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    cube = np.arange(n * 4, dtype=np.int64).reshape(n, 2, 2)
    want_rows = np.concatenate([rows[alive], rows[~alive]])
    want_cube = np.concatenate([cube[alive], cube[~alive]])
    node = compact(alive, {"rows": rows, "cube": cube}, min_dead_fraction=0.0)
    g = build(node)
    g.launch(1)
    assert g.logical_size == alive.sum()
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cube, want_cube)

    key = np.array([2, 0, 1, 0, 2, 1, 0, 1, 2], np.int64)
    rows = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
    order = np.argsort(key, kind="stable")
    want = rows[order]
    g = build(reorder(key, {"rows": rows}, n_keys=3))
    g.launch(1)
    np.testing.assert_array_equal(rows, want)


def test_rows_of_zero_width():
    alive = np.array([0, 1, 1, 0], bool)
    g = build(compact(alive, {"empty": np.zeros((4, 0))}, min_dead_fraction=0.0))
    g.launch(1)
    assert g.logical_size == 2


@pytest.mark.parametrize("make, exc, match", [
    (lambda: compact(np.zeros((3, 2), bool), {}), ValueError, "must be 1-d"),
    (lambda: compact(np.zeros(0, bool), {"s": np.zeros(())}), ValueError, "one row per sample"),
    (lambda: compact(np.zeros(0, bool), {"s": np.zeros((1, 3))}), ValueError, "one row per sample"),
    (lambda: compact(np.zeros(3, bool), {"s": np.zeros((3, 4))[:, ::2]}), ValueError, "contiguous"),
    (lambda: reorder(np.zeros((2, 2), np.int64), {}, n_keys=2), ValueError, "must be 1-d"),
])
def test_bad_shapes_get_clear_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()
