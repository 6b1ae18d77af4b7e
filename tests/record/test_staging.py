"""Stages come from memory, not names: views, slices, hazards, and linear cost."""
import numpy as np
import pytest

import eagle
from eagle.record import memory as _memory
from eagle.graph import opaque


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
