"""The sequential oracle: a replay equals running the nodes one by one in recording order.

Hypothesis records random graphs -- random reads and writes over a pool of
arrays and overlapping views, random groups where they are valid, opaque and
native nodes mixed -- replays them with 1 and 2 threads, several team policies
and logical sizes, and compares every array with the recording-order run.
It also checks that every conflicting pair of nodes lands in stages in order.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle import kernels
from eagle.graph import GroupConflict, native, opaque

N = 12  # samples per array

# Views over two buffers of 2N doubles: whole, halves, overlapping windows, strided.
VIEWS = [
    lambda b: b[:N], lambda b: b[N:], lambda b: b[N // 2: N // 2 + N], lambda b: b[::2],
    lambda b: b[1::2], lambda b: b[3: 3 + N], lambda b: b,
]


def make_pool():
    bufs = [np.arange(2 * N, dtype=np.float64) * (k + 1) / 7 for k in range(2)]
    views = [(b, v(b)) for b in bufs for v in VIEWS]
    return bufs, [v for _, v in views]


def opaque_work(k, reads, writes):
    """A deterministic function of the node's reads, written to its writes."""
    def work():
        acc = float(k)
        for r in reads:
            acc += float(r.sum()) * 0.25
        for j, w in enumerate(writes):
            w[...] = np.sin(acc + j + np.arange(w.shape[0]))
    return work


# native kernels and what they do to the first L samples, in NumPy
NATIVE = {
    "scale": (1, 1, lambda: kernels.scale(1.5), lambda r, w, L: np.multiply(r[0][:L], 1.5, out=w[0][:L])),
    "axpy": (1, 1, lambda: kernels.axpy(0.5), lambda r, w, L: np.add(w[0][:L], 0.5 * r[0][:L], out=w[0][:L])),
    "add": (2, 1, kernels.add, lambda r, w, L: np.add(r[0][:L], r[1][:L], out=w[0][:L])),
    "fill": (0, 1, lambda: kernels.fill(3.25), lambda r, w, L: w[0][:L].fill(3.25)),
}


node_spec = st.one_of(
    st.tuples(st.just("opaque"), st.lists(st.integers(0, 13), max_size=3, unique=True),
              st.lists(st.integers(0, 13), max_size=2, unique=True)),
    st.tuples(st.sampled_from(sorted(NATIVE)), st.lists(st.integers(0, 13), min_size=3, max_size=3)),
)
graph_spec = st.lists(st.tuples(st.booleans(), st.lists(node_spec, min_size=1, max_size=3)),
                      min_size=1, max_size=7)


def realize(spec, views):
    """(name, kind, reads, writes, node) for every node; groups kept as lists."""
    out = []
    k = 0
    for as_group, members in spec:
        group = []
        for m in members:
            if m[0] == "opaque":
                _, r, w = m
                w = [i for i in w if i not in r]
                reads, writes = [views[i] for i in r], [views[i] for i in w]
                node = opaque(opaque_work(k, reads, writes), reads={f"r{i}": views[i] for i in r},
                              writes={f"w{i}": views[i] for i in w})
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


def conflicts(a, b):
    (ra, wa), (rb, wb) = a, b
    return (any(np.shares_memory(x, y) for x in wa for y in rb + wb)
            or any(np.shares_memory(x, y) for x in ra for y in wb))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=graph_spec, threads=st.sampled_from([1, 2]), teams=st.sampled_from(["auto", "serial", "parallel"]),
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
    recorded = []
    for as_group, members in realize(spec, views):
        if as_group and len(members) > 1:
            try:
                g.add_group([m[4] for m in members], names=[m[0] for m in members])
                recorded.extend(members)
                continue
            except GroupConflict:
                assert any(conflicts((a[2], a[3]), (b[2], b[3]))
                           for i, a in enumerate(members) for b in members[i + 1:])
        for m in members:
            g.add_node(m[4], name=m[0])
            recorded.append(m)
    assert [m[0] for m in recorded] == [m[0] for m in order]

    # every conflicting pair is staged in recording order
    for i, a in enumerate(recorded):
        for b in recorded[i + 1:]:
            if conflicts((a[2], a[3]), (b[2], b[3])):
                assert g.stage_of(a[0]) < g.stage_of(b[0]), (a[0], b[0])

    before = eagle.get_num_threads()
    eagle.set_num_threads(threads)
    try:
        g.build(teams=teams)
        if g.capacity:
            g.set_logical_size(min(size, g.capacity))
        g.launch(replays)
    finally:
        eagle.set_num_threads(before)
    for got, want in zip(bufs, expected):
        np.testing.assert_array_equal(got, want)
