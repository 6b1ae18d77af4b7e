"""Another thread calls plan(), str(g), set_logical_size and set_num_threads while
launches of masked ufunc nodes (on the arrays, and through NumPy's iterator with a cast),
a reduction and a tally run on a team: every change lands between two launches, never
inside one, and nothing is lost or counted twice (each launch's replays cover one range;
the tally holds exactly the samples the counters ran)."""
import numpy as np
import pytest
from meddling import meddling

import eagle
from eagle.graph import ufunc


@pytest.mark.parametrize("teams", ["serial", "parallel", "auto"])
def test_masked_nodes_a_reduction_and_a_tally_beside_a_meddling_thread(threads, teams):
    threads(3)
    n, cells = 30_011, 13
    half = n // 2 + 1
    mask = np.arange(n) % 3 != 0
    direct = np.zeros(n)                      # masked, run on the array itself
    cast = np.zeros(n, np.int16)              # masked, int64 loop cast back to int16
    plain = np.zeros(n)
    ones = np.ones(n, np.int64)
    size = np.zeros((), np.int64)
    idx = np.arange(n) % cells
    tally = np.zeros(cells)
    g = eagle.Graph()
    direct_node = ufunc(np.add, {"direct": direct}, 1.0, out={"direct": direct}, where={"mask": mask})
    g.add_node(direct_node, name="direct")
    through = ufunc(np.add, {"cast": cast}, {"ones": ones}, out={"cast": cast}, where={"mask": mask})
    assert through.loop.through_iterator and not direct_node.loop.through_iterator
    g.add_node(through, name="cast")
    g.add_node(ufunc(np.add, {"plain": plain}, 1.0, out={"plain": plain}), name="plain")
    g.add_node(ufunc(np.add.reduce, {"ones": ones}, out={"size": size}), name="size")
    g.add_node(ufunc(np.add.at, {"tally": tally}, {"idx": idx}, 1.0), name="tally")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    total = 0
    with meddling(g, sizes=(n, half), thread_counts=(1, 2, 3)):
        for _ in range(150):
            g.launch(5)
            total += 5
            assert size in (half, n)
    assert (plain[:half] == total).all()
    upper = plain[half:]
    assert (upper == upper[0]).all() and upper[0] % 5 == 0
    assert (direct == np.where(mask, plain, 0)).all()
    assert (cast == np.where(mask, plain, 0)).all()
    assert tally.sum() == plain.sum()
    assert (tally == np.bincount(idx, weights=plain, minlength=cells)).all()
    g.set_logical_size(half)
    g.launch(1)
    assert size == half
