"""The sequential oracle: a replay equals running the nodes one by one in recording order.

Hypothesis records random graphs -- random reads and writes over a pool of
arrays and overlapping views, random groups where they are valid, opaque and
native nodes mixed -- replays them with 1 and 2 threads, several team policies
and logical sizes, and compares every array with the recording-order run.
It also checks that every conflicting pair of nodes lands in stages in order.
Drawn control nodes (a while loop on a countdown, an if_else on a flag flipped every
replay, a subgraph) with bodies of ufunc, native and opaque nodes over the same arrays
are compared with the Python while / if / call they stand for (ORACLE_N: examples).
"""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle import kernels
from eagle.graph import native, opaque
from oracle_graphs import assert_conflicts_staged_in_order, graph_spec, opaque_node, opaque_spec, record
from oracle_graphs import make_pool as pool

N = 12  # samples per array

# Views over two buffers of 2N doubles: whole, halves, overlapping windows, strided.
VIEWS = [
    lambda b: b[:N], lambda b: b[N:], lambda b: b[N // 2: N // 2 + N], lambda b: b[::2],
    lambda b: b[1::2], lambda b: b[3: 3 + N], lambda b: b,
]


def make_pool():
    return pool(VIEWS, N)


# native kernels and what they do to the first L samples, in NumPy
NATIVE = {
    "scale": (1, 1, lambda: kernels.scale(1.5), lambda r, w, L: np.multiply(r[0][:L], 1.5, out=w[0][:L])),
    "axpy": (1, 1, lambda: kernels.axpy(0.5), lambda r, w, L: np.add(w[0][:L], 0.5 * r[0][:L], out=w[0][:L])),
    "add": (2, 1, kernels.add, lambda r, w, L: np.add(r[0][:L], r[1][:L], out=w[0][:L])),
    "fill": (0, 1, lambda: kernels.fill(3.25), lambda r, w, L: w[0][:L].fill(3.25)),
}


node_spec = st.one_of(
    opaque_spec(2 * len(VIEWS)),
    st.tuples(st.sampled_from(sorted(NATIVE)), st.lists(st.integers(0, 13), min_size=3, max_size=3)),
)
graphs = graph_spec(node_spec)


def realize(spec, views):
    """(name, kind, reads, writes, node) for every node; groups kept as lists."""
    out = []
    k = 0
    for as_group, members in spec:
        group = []
        for m in members:
            if m[0] == "opaque":
                reads, writes, _, node = opaque_node(m, k, views)
                group.append((f"n{k}", "opaque", reads, writes, node, None))
            else:
                kind = m[0]
                n_r, n_w, make, _ = NATIVE[kind]
                # a native kernel must not read memory it writes at another offset: the
                # threads splitting its range would race; only the in-place axpy may
                idx = m[1]
                reads = [views[i] for i in idx[:n_r]]
                write = views[idx[2]]
                if any(np.shares_memory(r, write) for r in reads):
                    continue
                node = native(make(), reads={f"r{j}": r for j, r in enumerate(reads)}, writes={"w": write})
                group.append((f"n{k}", kind, reads, [write], node, None))
            k += 1
        if group:
            out.append((as_group, group))
    return out


def run_oracle(recorded, logical_size, replays):
    for _ in range(replays):
        for name, kind, reads, writes, node, _ in recorded:
            if kind == "opaque":
                node.fn()
            else:
                NATIVE[kind][3](reads, writes, logical_size)


def replay_and_compare(g, threads, teams, size, replays, bufs, expected):
    """Build g on `threads` threads, run `replays` replays at `size` (at most the
    capacity), and compare every buffer with the oracle's."""
    before = eagle.get_num_threads()
    eagle.set_num_threads(threads)
    try:
        g.build(cpu=eagle.CpuOptions(teams=teams))
        if g.capacity:
            g.set_logical_size(min(size, g.capacity))
        g.launch(replays)
    finally:
        eagle.set_num_threads(before)
    for got, want in zip(bufs, expected):
        np.testing.assert_array_equal(got, want)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=graphs, threads=st.sampled_from([1, 2]), teams=st.sampled_from(["auto", "serial", "parallel"]),
       size=st.sampled_from([0, 1, 5, N]), replays=st.integers(1, 3))
def test_replay_equals_recording_order(spec, threads, teams, size, replays):
    # oracle run
    bufs, views = make_pool()
    start = [b.copy() for b in bufs]
    order = [n for _, members in realize(spec, views) for n in members]
    run_oracle(order, min(size, N), replays)
    expected = [b.copy() for b in bufs]

    # eagle run over fresh arrays, same recording
    bufs, views = make_pool()
    for b, s in zip(bufs, start):
        b[...] = s
    g = eagle.Graph()
    recorded = record(g, realize(spec, views))
    assert [m[0] for m in recorded] == [m[0] for m in order]
    assert_conflicts_staged_in_order(g, recorded)

    replay_and_compare(g, threads, teams, size, replays, bufs, expected)


# ---- control-flow nodes against the Python control flow they stand for ---------------

from eagle.graph import Graph, if_else, subgraph, ufunc, while_loop  # noqa: E402

leaf_spec = st.one_of(node_spec, st.tuples(st.just("ufunc"), st.lists(st.integers(0, 11), min_size=2,
                                                                      max_size=2)))
body_spec = st.lists(leaf_spec, min_size=1, max_size=3)
control_spec = st.one_of(
    st.tuples(st.just("while"), st.integers(0, 3), body_spec),
    st.tuples(st.just("if_else"), st.booleans(), body_spec, st.one_of(st.none(), body_spec)),
    st.tuples(st.just("subgraph"), body_spec),
)
item_spec = st.one_of(leaf_spec, control_spec)


class Realized:
    """Drawn items made into nodes over `views`: add(g) records them, run(L) is their
    Python form (recording order, the Python while / if / call for control nodes)."""

    def __init__(self, views):
        self.views, self.k = views, 0

    def leaf(self, m):
        k, self.k = self.k, self.k + 1
        views = self.views
        if m[0] == "ufunc":
            r, w = (views[i if i < 6 else i + 1] for i in m[1])   # the N-sample views
            if np.shares_memory(r, w):
                return None
            node = ufunc(np.multiply, {"r": r}, 0.75, out={"w": w})
            return f"n{k}", node, lambda L: np.multiply(r[:L], 0.75, out=w[:L])
        got = realize([(False, [m])], views)
        if not got:
            return None
        name, kind, reads, writes, node, _ = got[0][1][0]
        if kind == "opaque":
            return f"n{k}", node, lambda L: node.fn()
        return f"n{k}", node, lambda L: NATIVE[kind][3](reads, writes, L)

    def items(self, specs):
        """[(name, node, python form)] of the drawn items, arm nodes of the conditions included."""
        out = []
        for spec in specs:
            if spec[0] not in ("while", "if_else", "subgraph"):
                got = self.leaf(spec)
                if got is not None:
                    out.append(got)
                continue
            k, self.k = self.k, self.k + 1
            if spec[0] == "subgraph":
                body = self.items(spec[1])
                if body:
                    out.append((f"c{k}", subgraph(self.graph(body)), lambda L, b=body: [f(L) for *_, f in b]))
            elif spec[0] == "while":
                left = np.zeros(1, np.int64)
                body = self.items(spec[2])
                if not body:
                    continue
                # (each closure binds its own counter and flag: default arguments)
                dec = (f"c{k}dec", opaque(lambda c=left: c.__setitem__(0, c[0] - 1), writes={"left": left}),
                       lambda L, c=left: c.__setitem__(0, c[0] - 1))
                body = body + [dec]
                out.append((f"c{k}arm", opaque(lambda n=spec[1], c=left: c.__setitem__(0, n), writes={"left": left}),
                            lambda L, n=spec[1], c=left: c.__setitem__(0, n)))

                def py_while(L, b=body, c=left):
                    while c[0]:
                        for *_, f in b:
                            f(L)
                out.append((f"c{k}", while_loop({"left": left}, self.graph(body), max_iterations=4), py_while))
            else:
                flag = np.array([spec[1]])
                then = self.items(spec[2])
                other = self.items(spec[3]) if spec[3] is not None else []
                if not then:
                    continue
                # the flag flips every replay: both branches run
                out.append((f"c{k}flip", opaque(lambda c=flag: c.__setitem__(0, not c[0]), writes={"flag": flag}),
                            lambda L, c=flag: c.__setitem__(0, not c[0])))

                def py_if(L, t=then, o=other, c=flag):
                    for *_, f in (t if c[0] else o):
                        f(L)
                out.append((f"c{k}", if_else({"flag": flag}, self.graph(then), self.graph(other) if other else None),
                            py_if))
        return out

    @staticmethod
    def graph(items):
        g = Graph()
        for name, node, _ in items:
            g.add_node(node, name=name)
        return g


@settings(max_examples=int(__import__("os").environ.get("ORACLE_N", 150)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(item_spec, min_size=1, max_size=4), threads=st.sampled_from([1, 2]),
       teams=st.sampled_from(["auto", "serial", "parallel"]), size=st.sampled_from([0, 1, 5, N]),
       replays=st.integers(1, 3))
def test_control_nodes_equal_their_python_form(spec, threads, teams, size, replays):
    bufs, views = make_pool()
    start = [b.copy() for b in bufs]
    items = Realized(views).items(spec)
    if not items:
        return
    for _ in range(replays):
        for *_, f in items:
            f(min(size, N))
    expected = [b.copy() for b in bufs]

    bufs, views = make_pool()
    for b, s in zip(bufs, start):
        b[...] = s
    items = Realized(views).items(spec)
    g = Realized.graph(items)
    replay_and_compare(g, threads, teams, size, replays, bufs, expected)
