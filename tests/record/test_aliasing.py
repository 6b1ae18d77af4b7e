"""Hazards come from bytes, whoever owns them: aliases of one buffer are ordered.

Every way NumPy lets two arrays share memory without one being a view of the
other (``as_strided``, ``sliding_window_view``, ``np.frombuffer``,
memoryviews, ctypes-backed arrays, ``.view(dtype)``, structured fields,
negative strides, views of views) must give a dependency exactly when the
bytes meet (``np.shares_memory``), in staging and in the group check alike.
Hypothesis then records random graphs over a pool of such aliases, native and
opaque nodes mixed, and replays them at 1 and 2 threads under every team policy
against the sequential oracle (the nodes run one by one in recording order).
"""
import ctypes

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import eagle
from eagle import kernels
from eagle.graph import GroupConflictError, native, opaque
from oracle_graphs import assert_conflicts_staged_in_order, conflicts, record


def nop():
    pass


def ctypes_alias(b):
    """A second ndarray over b's bytes, through a ctypes array at its address."""
    c = (ctypes.c_byte * b.nbytes).from_address(b.__array_interface__["data"][0])
    return np.ctypeslib.as_array(c).view(b.dtype)


# (label, make the pair (writer's array, reader's array) from a fresh float64 buffer of 16)
ALIASES = [
    ("as_strided over the base", lambda b: (b, as_strided(b[4:], shape=(3,), strides=(8,)))),
    ("as_strided, disjoint", lambda b: (b[:4], as_strided(b[4:], shape=(3,), strides=(16,)))),
    ("as_strided, zero stride", lambda b: (b[5:6], as_strided(b[5:], shape=(4,), strides=(0,)))),
    ("sliding window", lambda b: (b[7:8], sliding_window_view(b, 3, writeable=True))),
    ("sliding window, disjoint", lambda b: (b[12:], sliding_window_view(b[:10], 3, writeable=True))),
    ("memoryview", lambda b: (b[2:5], np.asarray(memoryview(b))[4:])),
    ("memoryview, disjoint", lambda b: (b[:4], np.asarray(memoryview(b))[4:])),
    ("frombuffer", lambda b: (b, np.frombuffer(b, dtype=np.float64)[10:])),
    ("frombuffer of a slice", lambda b: (b[:8], np.frombuffer(memoryview(b)[8:], dtype=np.float64))),
    ("ctypes-backed", lambda b: (b[3:4], ctypes_alias(b)[3:])),
    ("ctypes-backed, disjoint", lambda b: (b[:3], ctypes_alias(b)[3:])),
    ("view of a view of a view", lambda b: (b[9:10], b[2:][::2][1:])),
    ("view of a view, disjoint", lambda b: (b[8:9], b[2:][::2][1:])),
    ("negative strides", lambda b: (b[::-1][:2], b[14:])),
    ("negative strides, disjoint", lambda b: (b[::-1][:2], b[:14])),
    ("zero-size", lambda b: (b[3:3], b)),
    ("dtype view, bytes", lambda b: (b.view(np.uint8)[8:9], b[1:2])),
    ("dtype view, int64", lambda b: (b.view(np.int64)[5:], b[:6])),
    ("dtype view, disjoint", lambda b: (b.view(np.int32)[:8], b[4:])),
    ("structured field and record", lambda b: (b.view([("a", "<f8"), ("b", "<f8")])["a"], b[1:2])),
    ("two structured fields", lambda b: (b.view([("a", "<f8"), ("b", "<f8")])["a"],
                                         b.view([("a", "<f8"), ("b", "<f8")])["b"])),
    ("records and a field", lambda b: (b.view([("a", "<f8"), ("b", "<f8")])[2:3],
                                       b.view([("a", "<f8"), ("b", "<f8")])["b"][3:])),
    ("DLPack import", lambda b: (b[4:6], np.from_dlpack(b)[5:])),
    ("DLPack import, disjoint", lambda b: (b[:4], np.from_dlpack(b[4:]))),
    ("interleaved strides", lambda b: (b[::3], b[1::3])),
    ("interleaved strides that meet", lambda b: (b[::3], b[::2])),
]


@pytest.mark.parametrize("label, make", ALIASES, ids=[a[0] for a in ALIASES])
def test_aliases_are_ordered_exactly_when_bytes_meet(label, make):
    b = np.zeros(16)
    w, r = make(b)
    meet = bool(np.shares_memory(w, r))
    for first, second in ((w, r), (r, w)):
        for reads_first in (False, True):
            g = eagle.Graph()
            if reads_first:   # write after read
                g.add_node(opaque(nop, reads={"r": second}), name="a")
                g.add_node(opaque(nop, writes={"w": first}), name="b")
            else:             # read after write
                g.add_node(opaque(nop, writes={"w": first}), name="a")
                g.add_node(opaque(nop, reads={"r": second}), name="b")
            assert (g.stages == [["a"], ["b"]]) == meet, (label, g.stages)
            assert bool(g.dependencies) == meet
            if meet and not reads_first:
                assert g.dependencies == [("a", "b", "w")]


@pytest.mark.parametrize("label, make", ALIASES, ids=[a[0] for a in ALIASES])
def test_group_check_uses_the_same_rule(label, make):
    b = np.zeros(16)
    w, r = make(b)
    meet = bool(np.shares_memory(w, r))
    g = eagle.Graph()
    members = [opaque(nop, writes={"w": w}), opaque(nop, reads={"r": r})]
    if meet:
        with pytest.raises(GroupConflictError, match="'p' and 'q' conflict on the array 'w' of 'p' / 'r' of 'q'"):
            g.add_group(members, names=["p", "q"])
        assert g.nodes == []
    else:
        g.add_group(members, names=["p", "q"])
        assert g.stages == [["p", "q"]]


def test_an_overlap_too_hard_to_decide_counts_as_a_conflict(monkeypatch):
    from eagle.record import memory as _memory

    x = np.zeros(10)
    monkeypatch.setattr(_memory, "_SHARES_MEMORY_MAX_WORK", 0)   # NumPy gives up at once
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"even": x[::2]}), name="even")
    g.add_node(opaque(nop, reads={"odd": np.frombuffer(x)[1::2]}), name="odd")
    assert g.stages == [["even"], ["odd"]]   # ordered: safe, though they share no byte
    with pytest.raises(GroupConflictError):
        eagle.Graph().add_group([opaque(nop, writes={"even": x[::2]}), opaque(nop, writes={"odd": x[1::2]})])
    monkeypatch.undo()
    g = eagle.Graph()
    g.add_group([opaque(nop, writes={"even": x[::2]}), opaque(nop, writes={"odd": x[1::2]})])


def test_an_alias_write_clears_only_what_it_covers():
    b = np.zeros(8)
    whole = np.frombuffer(b, dtype=np.float64)          # covers every byte of b, other owner
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"b": b}), name="w0")
    g.add_node(opaque(nop, reads={"h": b[:4]}), name="r0")
    g.add_node(opaque(nop, writes={"all": whole}), name="w1")   # after w0 (WAW) and r0 (WAR)
    g.add_node(opaque(nop, reads={"t": ctypes_alias(b)[6:]}), name="r1")   # reads what w1 wrote
    assert ("w0", "w1", None) in g.dependencies and ("r0", "w1", None) in g.dependencies
    assert [d for d in g.dependencies if d[1] == "r1"] == [("w1", "r1", "all")]


def test_group_members_over_disjoint_aliases_are_accepted_and_a_third_alias_is_not():
    raw = bytearray(64)
    lo = np.frombuffer(raw, dtype=np.float64, count=4)
    hi = np.asarray(memoryview(raw)[32:]).view(np.float64)
    g = eagle.Graph()
    g.add_group([opaque(nop, writes={"lo": lo}), opaque(nop, writes={"hi": hi})], names=["a", "b"])
    across = as_strided(lo[3:], shape=(2,), strides=(8,))       # the last of lo, the first of hi
    with pytest.raises(GroupConflictError, match="'d' and 'e' conflict on the array 'across' of 'd' / 'hi' of 'e'"):
        g.add_group([opaque(nop, reads={"x": np.zeros(2)}), opaque(nop, writes={"lo": lo[:1]}),
                     opaque(nop, writes={"across": across}), opaque(nop, reads={"hi": hi})],
                    names=["z", "c", "d", "e"])
    assert g.nodes == ["a", "b"]


# ---- the sequential oracle over random graphs of aliases ------------------------------

N = 8          # samples of a native node's 1-d views
SPAN = 2 * N + 4


def _bases():
    """Three buffers of SPAN doubles, each owned differently: NumPy, ctypes, a bytearray."""
    own = np.zeros(SPAN)
    cbuf = (ctypes.c_double * SPAN)()
    from_ctypes = np.ctypeslib.as_array(cbuf)
    raw = bytearray(8 * SPAN)
    from_bytes = np.frombuffer(raw, dtype=np.float64)
    return [own, from_ctypes, from_bytes], (cbuf, raw)


# views of a base b; "native" ones are 1-d float64 (eagle's kernels take those)
VIEWS = [
    ("native", lambda b: b[:N]),
    ("native", lambda b: b[N:2 * N]),
    ("native", lambda b: b[N // 2: N // 2 + N]),
    ("native", lambda b: b[::2]),
    ("native", lambda b: b[1::2]),
    ("native", lambda b: b[::-1][:N]),
    ("native", lambda b: as_strided(b[3:], shape=(N,), strides=(8,))),
    ("native", lambda b: as_strided(b[1:], shape=(N,), strides=(16,))),
    ("native", lambda b: np.asarray(memoryview(b))[2:2 + N]),
    ("native", lambda b: np.frombuffer(b, dtype=np.float64)[5:5 + N]),
    ("native", lambda b: ctypes_alias(b)[1:1 + N]),
    ("native", lambda b: b.view([("a", "<f8"), ("b", "<f8")])["b"][:N]),
    ("native", lambda b: b[2:][::2][1:1 + N]),
    ("any", lambda b: sliding_window_view(b, 3, writeable=True)[:N]),
    ("any", lambda b: b.view(np.int64)[4:4 + N]),
    ("any", lambda b: b.reshape(-1, 2)),
    ("any", lambda b: b[6:6]),
]


def make_pool():
    bases, keep = _bases()
    pool = [(kind, v(b)) for b in bases for kind, v in VIEWS]
    return bases, keep, pool


def opaque_work(k, reads, writes):
    def work():
        acc = float(k)
        for r in reads:
            acc += float(np.asarray(r, dtype=np.float64).sum() % 1000.0) * 0.25
        for j, w in enumerate(writes):
            w[...] = (np.abs(np.sin(acc + j + np.arange(w.size))) * 4).reshape(w.shape)
    return work


def _loop(fn):
    """The kernel's own loop, one sample after another (what a node run whole does)."""
    def run(r, w, L):
        for i in range(L):
            fn(r, w, i)
    return run


def _scale(r, w, i): w[0][i] = r[0][i] * 1.5
def _axpy(r, w, i): w[0][i] = w[0][i] + 0.5 * r[0][i]
def _add(r, w, i): w[0][i] = r[0][i] + r[1][i]
def _fill(r, w, i): w[0][i] = 3.25


NATIVE = {
    "scale": (1, lambda: kernels.scale(1.5), _loop(_scale)),
    "axpy": (1, lambda: kernels.axpy(0.5), _loop(_axpy)),
    "add": (2, kernels.add, _loop(_add)),
    "fill": (0, lambda: kernels.fill(3.25), _loop(_fill)),
}
POOL = 3 * len(VIEWS)

node_spec = st.one_of(
    st.tuples(st.just("opaque"), st.lists(st.integers(0, POOL - 1), max_size=3, unique=True),
              st.lists(st.integers(0, POOL - 1), max_size=2, unique=True)),
    st.tuples(st.sampled_from(sorted(NATIVE)), st.lists(st.integers(0, POOL - 1), min_size=3, max_size=3)),
)
graph_spec = st.lists(st.tuples(st.booleans(), st.lists(node_spec, min_size=1, max_size=3)),
                      min_size=1, max_size=7)


def realize(spec, pool):
    """[(as_group, [(name, kind, reads, writes, node)])]; native nodes only over 1-d float64 views."""
    out, k = [], 0
    for as_group, members in spec:
        group = []
        for m in members:
            if m[0] == "opaque":
                _, r, w = m
                w = [i for i in w if i not in r]
                reads, writes = [pool[i][1] for i in r], [pool[i][1] for i in w]
                node = opaque(opaque_work(k, reads, writes), reads={f"r{i}": pool[i][1] for i in r},
                              writes={f"w{i}": pool[i][1] for i in w})
                group.append((f"n{k}", "opaque", reads, writes, node))
            else:
                n_r, make, _ = NATIVE[m[0]]
                idx = [i for i in m[1] if pool[i][0] == "native"]
                if len(idx) < n_r + 1:
                    continue
                reads, write = [pool[i][1] for i in idx[:n_r]], pool[idx[n_r]][1]
                node = native(make(), reads={f"r{j}": r for j, r in enumerate(reads)}, writes={"w": write})
                group.append((f"n{k}", m[0], reads, [write], node))
            k += 1
        if group:
            out.append((as_group, group))
    return out


def node_extent(m):
    """A native node's extent: the shortest of its arrays (it runs min(logical size, extent))."""
    return min(len(a) for a in m[2] + m[3])


def native_capacity(recorded):
    """The longest extent among the native nodes (docs/graph.md, "Extents")."""
    extents = [node_extent(m) for m in recorded if m[1] != "opaque"]
    return max(extents) if extents else None


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=graph_spec, n_threads=st.sampled_from([1, 2]),
       teams=st.sampled_from(["auto", "serial", "parallel"]), size=st.sampled_from([0, 1, 3, N]),
       replays=st.integers(1, 2))
def test_random_graphs_of_aliases_replay_as_recorded(threads, spec, n_threads, teams, size, replays):
    start = [np.random.default_rng(len(spec)).standard_normal(SPAN) for _ in range(3)]

    bases, keep, pool = make_pool()
    for b, s in zip(bases, start):
        b[...] = s
    order = [m for _, members in realize(spec, pool) for m in members]
    cap = native_capacity(order)
    L = min(size, cap) if cap is not None else 0
    for _ in range(replays):
        for name, kind, reads, writes, node in order:
            if kind == "opaque":
                node.fn()
            else:
                NATIVE[kind][2](reads, writes, min(L, node_extent((name, kind, reads, writes))))
    expected = [b.copy() for b in bases]

    bases, keep, pool = make_pool()
    for b, s in zip(bases, start):
        b[...] = s
    g = eagle.Graph()
    recorded = record(g, realize(spec, pool))
    assert [m[0] for m in recorded] == [m[0] for m in order]
    assert_conflicts_staged_in_order(g, recorded)
    # every edge joins two nodes whose bytes meet (the rule is exact, not conservative)
    by_name = {m[0]: m for m in recorded}
    for before, after, _ in g.dependencies:
        a, b = by_name[before], by_name[after]
        assert conflicts((a[2], a[3]), (b[2], b[3])), (before, after)
    if cap is not None:
        assert g.capacity == cap

    threads(n_threads)
    g.build(cpu=eagle.CpuOptions(teams=teams))
    if cap is not None:
        g.set_logical_size(L)
    g.launch(replays)
    for got, want in zip(bases, expected):
        np.testing.assert_array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(members=st.lists(st.tuples(st.lists(st.integers(0, POOL - 1), max_size=2, unique=True),
                                  st.lists(st.integers(0, POOL - 1), max_size=2, unique=True)),
                        min_size=2, max_size=6))
def test_the_group_check_names_a_pair_that_conflicts(members):
    bases, keep, pool = make_pool()
    specs = [([pool[i][1] for i in r], [pool[i][1] for i in w if i not in r]) for r, w in members]
    nodes = [opaque(nop, reads={f"r{j}": a for j, a in enumerate(r)},
                    writes={f"w{j}": a for j, a in enumerate(w)}) for r, w in specs]
    names = [f"m{k}" for k in range(len(nodes))]
    pairs = [(i, j) for i in range(len(specs)) for j in range(i + 1, len(specs))
             if conflicts(specs[i], specs[j])]
    g = eagle.Graph()
    try:
        g.add_group(nodes, names=names)
    except GroupConflictError as e:
        named = tuple(int(n[1:]) for n in str(e).split("'")[1:4:2])
        assert named in pairs, (str(e), pairs)
        assert g.nodes == []
    else:
        assert pairs == []
        assert g.stages == [names]


# ---- An ndarray subclass whose __array_interface__ names another buffer: eagle reads the
# array's own data pointer (eagle.record.memory.data_pointer), never what the subclass says.

class Decoyed(np.ndarray):
    """Says (through __array_interface__ and so ctypes) that its data is the decoy's."""
    decoy = None

    @property
    def __array_interface__(self):
        return Decoyed.decoy.__array_interface__


@pytest.fixture
def decoyed():
    real, decoy = np.zeros(64), np.full(64, -7.0)
    Decoyed.decoy = decoy
    x = real.view(Decoyed)
    assert x.__array_interface__["data"][0] == decoy.__array_interface__["data"][0]   # the lie
    yield x, real, decoy
    Decoyed.decoy = None


def test_a_subclass_naming_another_buffer_is_written_itself(decoyed):
    x, real, decoy = decoyed
    g = eagle.Graph()
    g.add_node(native(kernels.fill(3.0), writes={"x": x}), name="fill")
    g.add_node(eagle.graph.ufunc(np.add, x, 1.0, out=x), name="add")
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(real, 4.0)
    np.testing.assert_array_equal(decoy, -7.0)


def test_staging_compares_a_subclass_by_its_real_bytes(decoyed):
    x, real, decoy = decoyed
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"x": x}), name="a")
    g.add_node(opaque(nop, reads={"r": real[10:20]}), name="b")     # the same bytes: ordered
    g.add_node(opaque(nop, reads={"d": decoy}), name="c")           # other bytes: no edge
    assert g.dependencies == [("a", "b", "x")]
    assert eagle.record.memory.overlap(x, real) and not eagle.record.memory.overlap(x, decoy)
