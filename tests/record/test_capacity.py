"""The capacity: the longest extent among sized nodes, a node's extent being the shortest
axis 0 of its per-sample arrays, and which array sets it. ``g.capacity_bound_by``, the
picture's header and ``g.plan()`` name it; ``per_sample=`` leaves tables and parameters
out of it. Each sized node runs over [0, min(logical size, its extent)) (docs/graph.md,
"Extents"); tests/record/test_extents.py runs the rule."""
import numpy as np
import pytest

import eagle
import eagle.kernels as ek
from eagle.graph import compact, native, opaque


def nop():
    pass


def test_the_longest_extent_sets_the_capacity_and_is_named():
    x, y, long = np.ones(8), np.zeros(4), np.zeros(6)
    g = eagle.Graph()
    g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"out": long}), name="a")
    assert g.capacity == 6 and g.capacity_bound_by == ("a", "out", 6)
    g.add_node(native(ek.scale(3.0), reads={"x": x}, writes={"y": y}), name="k")
    # 'k' runs over its own 4 samples; the capacity stays 'a''s 6
    assert g.capacity == 6 and g.capacity_bound_by == ("a", "out", 6)
    header = str(g).splitlines()[0]
    assert header.endswith("logical size 6 of 6 (bounded by 'out' of 'a')")
    g.build().launch(1)
    np.testing.assert_array_equal(long, [2.0] * 6)
    np.testing.assert_array_equal(y, [3.0] * 4)
    assert "capacity 6: bounded by 'out' of 'a'" in str(g.plan())
    g.set_logical_size(2)
    assert str(g).splitlines()[0].endswith("logical size 2 of 6 (bounded by 'out' of 'a')")
    long[:], y[:] = 0, 0
    g.launch(1)
    np.testing.assert_array_equal(long, [2, 2, 0, 0, 0, 0])
    np.testing.assert_array_equal(y, [3, 3, 0, 0])


def test_the_first_recorded_of_equal_lengths_bounds_it():
    g = eagle.Graph()
    g.add_node(native(ek.scale(2.0), reads={"x": np.zeros(5)}, writes={"y": np.zeros(5)}), name="first")
    g.add_node(native(ek.scale(2.0), reads={"x": np.zeros(5)}, writes={"y": np.zeros(5)}), name="second")
    assert g.capacity_bound_by == ("first", "x", 5)


def test_opaque_arrays_do_not_bound_a_graph_with_native_nodes_and_opaque_headers_stay():
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"short": np.zeros(2)}), name="o")
    assert g.capacity == 2 and g.capacity_bound_by == ("o", "short", 2)
    assert str(g).splitlines()[0] == "eagle.Graph 1 node · 0 groups · backend: (not built)"
    g.add_node(native(ek.fill(1.0), writes={"y": np.zeros(7)}), name="n")
    assert g.capacity == 7 and g.capacity_bound_by == ("n", "y", 7)


def test_arrays_that_are_not_per_sample_do_not_bound_it():
    x, y, table = np.zeros(100), np.zeros(100), np.zeros(3)
    g = eagle.Graph()
    g.add_node(native(ek.add(), reads={"x": x, "table": table}, writes={"y": y},
                      per_sample={"x", "y"}), name="lookup")
    assert g.capacity == 100 and g.capacity_bound_by == ("lookup", "x", 100)
    # the table still orders the nodes: it is memory like any other
    g.add_node(opaque(nop, writes={"t": table}), name="retable")
    assert g.stage_of("retable") == 1
    g.build()
    g.set_logical_size(100)


def test_per_sample_false_leaves_every_array_of_the_node_out():
    g = eagle.Graph()
    g.add_node(native(ek.fill(1.0), writes={"params": np.zeros(2)}, per_sample=False), name="p")
    assert g.capacity == 0 and g.capacity_bound_by is None
    g.add_node(native(ek.fill(1.0), writes={"y": np.zeros(9)}), name="q")
    assert g.capacity == 9 and g.capacity_bound_by == ("q", "y", 9)
    g2 = eagle.Graph()
    g2.add_node(opaque(nop, writes={"t": np.zeros(3)}, per_sample=False), name="o")
    assert g2.capacity == 0 and g2.capacity_bound_by is None


def test_compaction_count_does_not_bound_it():
    alive, x = np.ones(6, bool), np.zeros(6)
    g = eagle.Graph()
    g.add_node(compact(alive, {"x": x}), name="c")
    assert g.capacity == 6 and g.capacity_bound_by[0] == "c" and g.capacity_bound_by[2] == 6


@pytest.mark.parametrize("per_sample, exc, match", [
    ({"nope"}, ValueError, "'nope', which the node does not declare"),
    ("x", TypeError, "per_sample="),
    (3, TypeError, "per_sample="),
    (None, TypeError, "per_sample="),
])
def test_bad_per_sample_is_refused(per_sample, exc, match):
    with pytest.raises(exc, match=match):
        native(ek.scale(2.0), reads={"x": np.zeros(3)}, writes={"y": np.zeros(3)}, per_sample=per_sample)
    with pytest.raises(exc, match=match):
        opaque(nop, reads={"x": np.zeros(3)}, per_sample=per_sample)


# ---- a sized opaque node: fn(start, stop) over the logical size ----

def test_a_sized_opaque_node_bounds_the_capacity_and_is_handed_its_range():
    x, y, table = np.arange(10.0), np.zeros(10), np.zeros(3)
    seen = []

    def double(start, stop):
        seen.append((start, stop))
        y[start:stop] = 2 * x[start:stop]

    g = eagle.Graph()
    g.add_node(opaque(double, reads={"x": x, "table": table}, writes={"y": y},
                      per_sample={"x", "y"}, sized=True), name="double")
    assert g.capacity == 10 and g.capacity_bound_by == ("double", "x", 10)
    assert str(g).splitlines()[0].endswith("logical size 10 of 10 (bounded by 'x' of 'double')")
    g.build().launch(2)
    assert seen == [(0, 10), (0, 10)]
    g.set_logical_size(4)
    y[:] = -1
    g.launch(1)
    assert seen[-1] == (0, 4)
    np.testing.assert_array_equal(y, [0, 2, 4, 6] + [-1] * 6)
    g.set_logical_size(0)
    g.launch(1)
    assert seen[-1] == (0, 0)
    with pytest.raises(ValueError, match="0..10"):
        g.set_logical_size(11)


def test_a_sized_opaque_node_makes_plain_opaque_arrays_stop_bounding_it():
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"short": np.zeros(2)}), name="o")
    g.add_node(opaque(lambda s, e: None, writes={"y": np.zeros(7)}, sized=True), name="s")
    assert g.capacity == 7 and g.capacity_bound_by == ("s", "y", 7)


def test_a_sized_opaque_node_follows_a_compaction_inside_a_launch():
    n = 8
    alive, left = np.ones(n, bool), np.arange(n, 0, -1).astype(np.int64)   # sample i lives n - i replays
    sizes = []

    def step(start, stop):
        sizes.append(stop - start)
        left[start:stop] -= 1
        alive[start:stop] = left[start:stop] > 0

    g = eagle.Graph()
    g.add_node(opaque(step, updates={"left": left, "alive": alive}, sized=True), name="step")
    g.add_node(compact(alive, {"left": left}, min_dead_fraction=0), name="compact")
    # a compaction reads what it moves: its edge carries the arrays
    assert g.dependencies == [("step", "compact", "alive"), ("step", "compact", "left")]
    assert g.build().launch_until_done(100) == n
    assert sizes == list(range(n, 0, -1))


def test_a_sized_opaque_node_is_not_kept_alive_by_its_own_backend():
    import gc
    import weakref

    g = eagle.Graph()
    g.add_node(opaque(lambda s, e: None, writes={"y": np.zeros(3)}, sized=True), name="s")
    g.build()
    backend = weakref.ref(g._backend)
    del g
    gc.collect()
    assert backend() is None
