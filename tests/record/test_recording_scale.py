"""Recording is linear in every shape of graph, counted in work, never timed.

The work of staging is the overlap tests it makes (``eagle.record.memory.overlap_tests``)
and the index's steps: segments walked and entries met (``eagle.record.staging.index_steps``). For the
shapes that used to be quadratic -- one ``add_group`` of n members, n nodes
writing disjoint slices of one buffer -- that work stays within 3x of n nodes
on separate arrays recorded one by one, and doubles when n doubles.
``python -m eagle.bench`` and the asv ``RecordShapes`` benchmark time the same shapes.
"""
import numpy as np
import pytest

import eagle
from eagle.record import memory as _memory, staging as _staging
from eagle.bench import RECORDING_SHAPES, record_shape, recording_nodes
from eagle.graph import opaque


def work(record):
    """(overlap tests, index steps) while ``record()`` runs."""
    t0, v0 = _memory.overlap_tests, _staging.index_steps
    record()
    return _memory.overlap_tests - t0, _staging.index_steps - v0


def shape_work(shape, n):
    nodes = recording_nodes(shape, n)
    out = {}
    out["work"] = work(lambda: out.setdefault("g", record_shape(shape, nodes)))
    return out["work"], out["g"]


@pytest.mark.parametrize("shape", sorted(set(RECORDING_SHAPES) - {"separate"}))
def test_shapes_cost_what_separate_arrays_cost(shape):
    n = 2000
    (ref_tests, ref_met), _ = shape_work("separate", n)
    (tests, met), g = shape_work(shape, n)
    assert ref_tests <= 3 * n and ref_met <= 6 * n
    assert tests <= 3 * ref_tests and met <= 3 * ref_met, (shape, tests, met, ref_tests, ref_met)
    assert len(g.nodes) == n
    assert g.stages == [g.nodes]   # all independent: one stage


@pytest.mark.parametrize("shape", sorted(RECORDING_SHAPES))
def test_recording_work_doubles_when_nodes_double(shape):
    (t1, m1), _ = shape_work(shape, 1500)
    (t2, m2), _ = shape_work(shape, 3000)
    assert t2 <= 2.2 * t1 + 10 and m2 <= 2.2 * m1 + 10, (t1, t2, m1, m2)


def test_a_whole_buffer_between_its_slices_stays_linear():
    """Write the buffer, write n slices of it, read it whole, write it whole: each access meets
    only the entries it overlaps, and a covering write drops what it covers."""
    n = 3000
    buf = np.zeros(4 * n)

    def record():
        g = eagle.Graph()
        g.add_node(opaque(nop, writes={"all": buf}), name="first")
        for i in range(n):
            g.add_node(opaque(nop, writes={"s": buf[4 * i:4 * i + 4]}), name=f"s{i}")
        g.add_node(opaque(nop, reads={"all": buf}), name="reader")
        g.add_node(opaque(nop, writes={"all": buf}), name="last")
        for i in range(n):
            g.add_node(opaque(nop, reads={"s": buf[4 * i:4 * i + 4]}), name=f"r{i}")
        return g

    box = {}
    tests, met = work(lambda: box.setdefault("g", record()))
    assert tests <= 12 * n and met <= 20 * n, (tests, met)   # quadratic would be ~n * n / 2
    g = box["g"]
    assert g.stage_of("s0") == 1 and g.stage_of(f"s{n - 1}") == 1
    assert g.stage_of("reader") == 2 and g.stage_of("last") == 3 and g.stage_of("r7") == 4
    # the reader depends on every view that wrote what it reads: the slices, and the first
    # whole write (no single slice covered it)
    assert sorted(d[0] for d in g.dependencies if d[1] == "reader") == sorted(
        ["first"] + [f"s{i}" for i in range(n)])
    # the last write covered every entry: the readers after it depend on it alone
    assert [d for d in g.dependencies if d[1] == "r7"] == [("last", "r7", "all")]


def test_what_a_covering_write_cleared_costs_later_accesses_nothing():
    """n slices written, then the whole buffer: its write drops the slices' entries and merges
    their segments, so n later whole-buffer reads each walk one segment, not n."""
    n = 3000
    buf = np.zeros(4 * n)

    def record():
        g = eagle.Graph()
        for i in range(n):
            g.add_node(opaque(nop, writes={"s": buf[4 * i:4 * i + 4]}), name=f"s{i}")
        g.add_node(opaque(nop, writes={"all": buf}), name="whole")
        for i in range(n):
            g.add_node(opaque(nop, reads={"all": buf}), name=f"r{i}")
        return g

    box = {}
    tests, steps = work(lambda: box.setdefault("g", record()))
    assert tests <= 8 * n and steps <= 12 * n, (tests, steps)   # without the merge: ~n * n
    g = box["g"]
    assert len(g._stager._index._starts) == 2      # the buffer's two ends
    assert g.stage_of("r0") == 2 and g.stage_of(f"r{n - 1}") == 2


def nop():
    pass


class CountingSet(set):
    """A set that counts membership tests: the probes of default-name assignment."""

    probes = 0

    def __contains__(self, item):
        CountingSet.probes += 1
        return super().__contains__(item)


def test_default_names_are_found_in_constant_probes():
    n = 3000
    x = np.zeros(3)
    g = eagle.Graph()
    g._name_set = CountingSet()
    CountingSet.probes = 0
    for _ in range(n):
        g.add_node(opaque(nop, reads={"x": x}))
    g.add_group([opaque(nop, reads={"x": x}) for _ in range(n)])
    assert g.nodes[:3] == ["nop", "nop_2", "nop_3"] and g.nodes[-1] == f"nop_{2 * n}"
    assert len(set(g.nodes)) == 2 * n
    assert CountingSet.probes <= 3 * 2 * n


def test_default_names_skip_names_the_user_took_and_a_failed_recording_keeps_none():
    x = np.zeros(3)
    g = eagle.Graph()
    g.add_node(opaque(nop, reads={"x": x}))
    g.add_node(opaque(nop, reads={"x": x}), name="nop_2")
    g.add_node(opaque(nop, reads={"x": x}))
    with pytest.raises(eagle.graph.GroupConflictError):
        g.add_group([opaque(nop, writes={"x": x}), opaque(nop, writes={"x": x})])
    g.add_node(opaque(nop, reads={"x": x}))
    assert g.nodes == ["nop", "nop_2", "nop_3", "nop_4"]


def test_the_bench_rows_of_recording(capsys):
    from eagle import bench

    best = bench.measure_recording((300,), rounds=1)
    assert set(best) == {(shape, 300) for shape in RECORDING_SHAPES}
    bench.print_recording(best, 1)
    out = capsys.readouterr().out
    for title in RECORDING_SHAPES.values():
        assert title in out
    assert "× separate" in out and "1.00" in out


# ---- the sorted addresses under the index ------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


class SmallBlocks(_staging._SortedAddresses):
    """Blocks of a few addresses, so that a handful of inserts splits them."""

    LOAD = 2


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.integers(-50, 50), unique=True, max_size=60),
       dropped=st.sets(st.integers(0, 59)),
       queries=st.lists(st.tuples(st.integers(-60, 60), st.integers(-60, 60)), max_size=10))
def test_sorted_addresses_agree_with_a_sorted_list(values, dropped, queries):
    s = SmallBlocks()
    for v in values:
        s.insert(v)
    for i in sorted(dropped):
        if i < len(values):
            s.remove(values[i])
    ref = sorted(v for i, v in enumerate(values) if i not in dropped)
    assert all(s._blocks) and s._firsts == [b[0] for b in s._blocks]
    assert [x for b in s._blocks for x in b] == ref and len(s) == len(ref)
    assert all(len(b) <= 2 * s.LOAD for b in s._blocks)
    for a, below in queries:
        floor = max((x for x in ref if x <= a), default=None)
        assert s.floor(a) == floor
        start = floor if floor is not None else (ref[0] if ref else None)
        want = [x for x in ref if start is not None and start <= x < below]
        assert list(s.from_floor(a, below)) == want


def test_arrays_in_any_address_order_keep_blocks_bounded():
    """Shuffled addresses: every insert moves at most 2 * LOAD addresses in a block plus one
    per block, which is what keeps recording linear whatever order arrays come in."""
    n = 20_000
    rng = np.random.default_rng(1)
    s = _staging._SortedAddresses()
    for v in rng.permutation(n):
        s.insert(int(v))
    assert len(s) == n
    assert max(len(b) for b in s._blocks) <= 2 * s.LOAD
    assert len(s._blocks) <= 2 * n // s.LOAD + 1
