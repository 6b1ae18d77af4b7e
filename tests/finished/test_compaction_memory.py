"""What a compaction node costs when it is made: one scratch as wide as the widest sample
it moves (a reorder's destinations beside it), allocated, not touched
(eagle/cpu/_partition.pyx); the first compaction touches them. Before, the node kept a touched copy of every array it moves."""
import os

import numpy as np

import eagle
from eagle.graph import compact


def resident_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_the_scratch_is_one_array_as_wide_as_the_widest_sample():
    n = 10_000
    state = {"x": np.zeros(n), "mu": np.zeros(n), "cell": np.zeros(n, np.int32), "v": np.zeros((n, 3))}
    node = compact(np.ones(n, bool), state)
    widest = 3 * 8
    scratch = node.partition.scratch_bytes
    # a compaction reads its destinations off the flags: no 8 bytes a sample of them
    assert n * widest <= scratch < n * widest + 64 * 1024, scratch   # + counts per chunk


def test_a_reorder_keeps_its_destinations():
    from eagle.graph import reorder
    n = 10_000
    node = reorder({"cell": np.zeros(n, np.int32)}, {"x": np.zeros(n)}, n_keys=4)
    assert n * (8 + 8) <= node.partition.scratch_bytes < n * (8 + 8) + 64 * 1024


def test_making_the_node_touches_none_of_its_scratch():
    if not os.path.exists(f"/proc/{os.getpid()}/statm"):
        import pytest
        pytest.skip("reads the resident size from /proc")
    n = 4_000_000
    alive = np.ones(n, bool)
    state = {name: np.zeros(n) for name in ("x", "mu", "w")}
    for a in state.values():
        a[:] = 1.0                                 # touched before the measure
    before = resident_bytes()
    node = compact(alive, state)
    grown = resident_bytes() - before
    # 4 arrays moved (alive, x, mu, w, ids: the ids made and filled by the node, 32 MB):
    # a touched copy of each was ~100 MB more
    assert grown < n * 8 + 16 * 2**20, grown / 2**20
    g = eagle.Graph()
    g.add_node(node)
    g.build()
    alive[::2] = False
    state["x"][:] = np.arange(n)
    g.launch(1)
    assert g.logical_size == n // 2
    np.testing.assert_array_equal(state["x"][:n // 2], np.arange(1, n, 2))
    np.testing.assert_array_equal(node.ids[n // 2:], np.arange(0, n, 2))
