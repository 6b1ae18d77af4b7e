"""Indices of a tally node (``ufunc(np.add.at, tally, index, weights)``) as NumPy's
``ufunc.at`` reads them: negative ones count from the end, uint64 ones are cast to intp
as NumPy casts them (2**64 - 1 is the last cell, 2**63 out of bounds), and the error
names the index at the first sample out of bounds, whatever the team that met it. The
launch's other samples are added, the graph goes on (csrc/cpu/reduce_kernels.c)."""
import numpy as np
import pytest

import eagle
from eagle.graph import ufunc


def tally_graph(t, idx, w=1.0, teams="parallel"):
    g = eagle.Graph()
    g.add_node(ufunc(np.add.at, t, idx, w), name="tally")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    return g


def test_uint64_indices_wrap_as_numpys():
    n = 5_000
    idx = np.arange(n, dtype=np.uint64) % 7
    idx[::3] = np.uint64(2**64 - 1)                 # -1 to NumPy: the last cell
    t, want = np.zeros(7), np.zeros(7)
    np.add.at(want, idx, 1.0)
    tally_graph(t, idx).launch(1)
    assert t.tobytes() == want.tobytes()
    idx[10] = np.uint64(2**63)
    with pytest.raises(IndexError) as numpy_error:
        np.add.at(np.zeros(7), idx, 1.0)
    with pytest.raises(IndexError, match=f"^{numpy_error.value} "):
        tally_graph(np.zeros(7), idx).launch(1)


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_the_error_names_the_first_sample_out_of_bounds(threads, nthreads):
    threads(nthreads)
    n = 1 << 20
    idx = np.arange(n) % 10
    # the last sample of the first thread's share, then the first of the second's: a
    # team meets the later one first
    idx[n // 2 - 1], idx[n // 2], idx[-1] = 50, 60, -70
    for _ in range(3):
        with pytest.raises(IndexError, match="^index 50 is out of bounds for axis 0 with size 10"):
            tally_graph(np.zeros(10), idx).launch(2)


def test_a_launch_that_met_a_bad_index_added_every_other_sample_and_the_graph_goes_on(threads):
    threads(2)
    n = 5_000
    idx = np.arange(n) % 10
    t = np.zeros(10)
    g = tally_graph(t, idx)
    idx[2_500] = -11
    with pytest.raises(IndexError, match="index -11 "):
        g.launch(2)
    assert g.replays == 2 and t.sum() == 2 * (n - 1)
    idx[2_500] = 3
    g.launch(1)
    assert g.replays == 3 and t.sum() == 3 * n - 2
    g.set_logical_size(2_500)                       # the bad sample past the logical size
    idx[2_500] = 99
    g.launch(1)
    assert t.sum() == 3 * n - 2 + 2_500
