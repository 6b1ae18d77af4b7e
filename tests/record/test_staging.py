"""Stages come from memory, not names: views, slices, hazards, and linear cost."""
import numpy as np
import pytest

import eagle
from eagle.record import memory as _memory
from eagle.graph import native, opaque


def nop():
    pass


def staged(*accesses):
    """Record one node per (reads, writes) pair; return the stage of each."""
    g = eagle.Graph()
    for k, (reads, writes) in enumerate(accesses):
        g.add_node(opaque(nop, reads=reads, writes=writes), name=f"n{k}")
    return [g.stage_of(f"n{k}") for k in range(len(accesses))], g


def test_raw_war_waw_order_nodes():
    a, b = np.zeros(4), np.zeros(4)
    stages, g = staged(({}, {"a": a}), ({"a": a}, {"b": b}))          # RAW
    assert stages == [0, 1] and g.dependencies == [("n0", "n1", "a")]
    stages, g = staged(({"a": a}, {}), ({}, {"a": a}))                 # WAR
    assert stages == [0, 1] and g.dependencies == [("n0", "n1", None)]
    stages, g = staged(({}, {"a": a}), ({}, {"a2": a}))                # WAW
    assert stages == [0, 1] and g.dependencies == [("n0", "n1", None)]
    stages, _ = staged(({"a": a}, {}), ({"a": a}, {}))                 # two reads
    assert stages == [0, 0]


def test_names_do_not_matter_memory_does():
    a, b = np.zeros(4), np.zeros(4)
    stages, _ = staged(({}, {"x": a}), ({"x": b}, {}))  # same name, other memory
    assert stages == [0, 0]
    stages, _ = staged(({}, {"x": a}), ({"y": a}, {}))  # other name, same memory
    assert stages == [0, 1]


@pytest.mark.parametrize("first, second, conflict", [
    (lambda x: x[:5], lambda x: x[5:], False),
    (lambda x: x[:6], lambda x: x[5:], True),
    (lambda x: x[::2], lambda x: x[1::2], False),
    (lambda x: x[::2], lambda x: x[2::4], True),
    (lambda x: x.reshape(2, 5)[:, 0], lambda x: x.reshape(2, 5)[:, 1], False),
    (lambda x: x.reshape(2, 5)[0], lambda x: x[3:4], True),
    (lambda x: x[::-1][:3], lambda x: x[:7], False),
    (lambda x: x[::-1][:3], lambda x: x[7:], True),
    (lambda x: x[:0], lambda x: x, False),
])
def test_views_conflict_exactly_when_they_share_memory(first, second, conflict):
    x = np.zeros(10)
    stages, _ = staged(({}, {"a": first(x)}), ({"b": second(x)}, {}))
    assert (stages == [0, 1]) == conflict
    assert conflict == np.shares_memory(first(x), second(x))


def test_arrays_over_one_foreign_buffer_conflict():
    raw = bytearray(80)
    a = np.frombuffer(raw, dtype=np.float64)
    b = np.frombuffer(memoryview(raw)[8:], dtype=np.float64)
    stages, _ = staged(({}, {"a": a}), ({"b": b}, {}))
    assert stages == [0, 1]


def test_a_stage_follows_the_latest_conflict_not_recording_order():
    a, b, c = np.zeros(2), np.zeros(2), np.zeros(2)
    stages, _ = staged(({}, {"a": a}), ({"a": a}, {"b": b}), ({}, {"c": c}), ({"c": c}, {}))
    assert stages == [0, 1, 0, 1]


def test_partially_overlapping_writes_keep_every_hazard():
    x = np.zeros(10)
    # n0 reads x[:5]; n1 writes x[3:] (WAR on n0); n2 writes x[:2] (WAR on n0 only)
    stages, _ = staged(({"h": x[:5]}, {}), ({}, {"t": x[3:]}), ({}, {"f": x[:2]}), ({"all": x}, {}))
    assert stages[1] > stages[0] and stages[2] > stages[0]
    assert stages[3] > max(stages[1], stages[2])


def test_group_members_share_the_latest_stage():
    a, b, c = np.zeros(2), np.zeros(2), np.zeros(2)
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"a": a}), name="w")
    g.add_group([opaque(nop, reads={"a": a}, writes={"b": b}), opaque(nop, writes={"c": c})],
                names=["p", "q"])
    assert g.stages == [["w"], ["p", "q"]]


def test_staging_is_linear_in_nodes_and_accesses(monkeypatch):
    """1000 nodes over 1000 arrays: overlap tests grow with accesses, not node pairs."""
    calls = {"n": 0}
    real = _memory.Extent.overlaps

    def counting(self, other):
        calls["n"] += 1
        return real(self, other)

    monkeypatch.setattr(_memory.Extent, "overlaps", counting)
    arrays = [np.zeros(3) for _ in range(1000)]
    g = eagle.Graph()
    for k in range(1000):  # a chain: node k reads array k-1 and writes array k
        g.add_node(opaque(nop, reads={"i": arrays[k - 1]} if k else {}, writes={"o": arrays[k]}),
                   name=f"n{k}")
    accesses = 1999
    assert g.stages[-1] == ["n999"] and len(g.stages) == 1000
    assert calls["n"] <= 3 * accesses
    g.build()


# ---- in-place updates: an array a node reads and writes carries data into it ----

def _diffuse_then_drift():
    """The user's step: ``w = z * vol`` then ``w += drift``, as two ufunc nodes."""
    z, vol, drift, w = np.arange(4.0), np.full(4, 2.0), np.ones(4), np.zeros(4)
    g = eagle.Graph()
    g.add_node(eagle.graph.ufunc(np.multiply, {"z": z}, vol, out={"w": w}), name="diffuse")
    g.add_node(eagle.graph.ufunc(np.add, {"w": w}, drift, out={"w": w}), name="drift")
    return g, (z, vol, drift, w)


def test_a_ufunc_whose_output_is_an_input_gets_a_data_edge():
    g, (z, vol, drift, w) = _diffuse_then_drift()
    assert g.dependencies == [("diffuse", "drift", "w")]
    assert g.stages == [["diffuse"], ["drift"]]
    g.build().launch(1)
    np.testing.assert_array_equal(w, z * vol + drift)


def test_a_bare_in_place_ufunc_operand_carries_its_default_name():
    w = np.zeros(4)
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"w": w}), name="fill")
    g.add_node(eagle.graph.ufunc(np.negative, w, out=w), name="neg")
    assert g.dependencies == [("fill", "neg", "w")]   # the writer's name for the array


def test_updates_is_a_read_and_a_write():
    w, y = np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"w": w}), name="make")
    g.add_node(opaque(nop, updates={"w": w}), name="bump")
    g.add_node(opaque(nop, reads={"w": w}), name="use")
    g.add_node(opaque(nop, updates={"w": w}), name="again")   # after a reader: still the data edge
    assert g.dependencies == [("make", "bump", "w"), ("bump", "use", "w"), ("bump", "again", "w"),
                              ("use", "again", None)]
    assert g.stages == [["make"], ["bump"], ["use"], ["again"]]
    node = opaque(nop, reads={"y": y}, updates={"w": w})
    assert list(node.writes) == ["w"] and node.updated == {"w"}
    assert [(n, a is w, wr) for n, a, wr in node.accesses() if n == "w"] == [("w", True, False),
                                                                           ("w", True, True)]


def test_one_name_in_reads_and_writes_bound_to_one_array_is_an_update():
    w = np.zeros(4)
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"w": w}), name="make")
    g.add_node(opaque(nop, reads={"w": w}, writes={"w": w}), name="bump")
    g.add_node(opaque(nop, reads={"w": w[:]}, writes={"w": w[:]}), name="view")   # the same bytes, layout
    assert g.dependencies == [("make", "bump", "w"), ("bump", "view", "w")]
    with pytest.raises(ValueError, match="'w' is bound to two different arrays"):
        opaque(nop, reads={"w": w}, writes={"w": w[::2]})


def test_a_write_only_declaration_still_orders_only():
    w = np.zeros(4)
    _, g = staged(({}, {"w": w}), ({}, {"w": w}))
    assert g.dependencies == [("n0", "n1", None)]


def test_an_update_in_a_group_conflicts_with_a_reader_and_a_writer():
    w = np.zeros(4)
    for other in (opaque(nop, reads={"w": w}), opaque(nop, writes={"w": w})):
        g = eagle.Graph()
        with pytest.raises(eagle.graph.GroupConflictError, match="'bump'"):
            g.add_group([opaque(nop, updates={"w": w}), other], names=["bump", "other"])
    g = eagle.Graph()   # disjoint halves of one array: independent
    g.add_group([opaque(nop, updates={"w": w[:2]}), opaque(nop, updates={"w": w[2:]})], names=["a", "b"])
    assert g.stages == [["a", "b"]]


def test_a_native_update_counts_as_a_write_and_runs_in_place():
    import eagle.kernels as ek
    x, w = np.ones(6), np.arange(6.0)
    g = eagle.Graph()
    g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"w": w}), name="scale")
    g.add_node(native(ek.axpy(3.0), reads={"x": x}, updates={"w": w}), name="axpy")   # w += 3 x
    assert g.dependencies == [("scale", "axpy", "w")]
    g.build().launch(1)
    np.testing.assert_array_equal(w, 2 * x + 3 * x)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(6)
        ro.flags.writeable = False
        native(ek.axpy(1.0), reads={"x": x}, updates={"w": ro})

