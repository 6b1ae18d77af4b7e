"""Hostile aliasing in compaction and reorder nodes: every array a partition
permutes must own its bytes, or there is no result to agree on (moving one
array's samples would move another's). Such input is refused, naming both."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from eagle.graph import compact, reorder

N = 10


def _alive():
    return np.array([1, 0] * (N // 2), dtype=bool)


@pytest.mark.parametrize("label", ["shifted views", "same array twice", "a view of the key", "ids aliasing"])
def test_compact_refuses_arrays_that_share_memory(label):
    alive = _alive()
    buf = np.arange(N + 1.0)
    x = np.arange(N, dtype=float)
    ids = np.arange(N, dtype=np.int64)
    kwargs = {}
    if label == "shifted views":
        state = {"a": buf[:N], "b": buf[1:]}
    elif label == "same array twice":
        state = {"a": x, "b": x}
    elif label == "a view of the key":
        state = {"m": alive.view(np.uint8)}
    else:
        state = {"i": ids}
        kwargs["ids"] = ids
    with pytest.raises(ValueError, match="share memory"):
        compact(alive, state, **kwargs)


def test_compact_refuses_a_state_array_whose_samples_share_memory():
    z = as_strided(np.zeros(1), shape=(N,), strides=(0,))
    with pytest.raises(ValueError, match="share memory"):
        compact(_alive(), {"z": z})


def test_reorder_refuses_a_state_array_aliasing_the_key():
    key = np.zeros(N, dtype=np.int64)
    with pytest.raises(ValueError, match="share memory"):
        reorder(key, {"k": key[:]}, n_keys=2)


def test_disjoint_views_of_one_buffer_are_fine():
    buf = np.zeros((N, 2))
    node = compact(_alive(), {"a": buf[:, 0], "b": buf[:, 1]})
    assert set(node.writes) >= {"a", "b"}
