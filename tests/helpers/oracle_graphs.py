"""The sequential oracle's shared parts (tests/cpu/test_oracle.py with opaque and native
nodes, tests/ufunc/test_oracle_ufunc.py with ufunc nodes): a pool of arrays and
overlapping views, the Hypothesis strategies that draw graphs over it, recording the
drawn groups (a refused group recorded node by node), and the staging check.

A realized node is a tuple ``(name, kind, reads, writes, node, call)``: reads and
writes the arrays it touches, ``call(L)`` its run in the oracle (None where the test
runs it otherwise).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

try:
    from eagle import GroupConflictError
except ImportError:   # before the rename
    from eagle.graph import GroupConflict as GroupConflictError


def make_pool(views, n, shift=0.0):
    """Two buffers of 2n doubles and every view of `views` over each."""
    bufs = [np.arange(2 * n, dtype=np.float64) * (k + 1) / 7 - shift for k in range(2)]
    return bufs, [v(b) for b in bufs for v in views]


def opaque_work(k, reads, writes, wave=np.sin):
    """A deterministic function of the node's reads, written to its writes."""
    def work():
        acc = float(k)
        for r in reads:
            acc += float(r.sum()) * 0.25
        for j, w in enumerate(writes):
            w[...] = wave(acc + j + np.arange(w.shape[0]))
    return work


def opaque_node(m, k, views, wave=np.sin):
    """The drawn opaque node ``m`` (``opaque_spec``), the k-th, over ``views``: (reads,
    writes, the function it runs, the node); a view it reads is not written too."""
    from eagle.graph import opaque

    _, r, w = m
    w = [i for i in w if i not in r]
    reads, writes = [views[i] for i in r], [views[i] for i in w]
    fn = opaque_work(k, reads, writes, wave=wave)
    node = opaque(fn, reads={f"r{i}": views[i] for i in r}, writes={f"w{i}": views[i] for i in w})
    return reads, writes, fn, node


def opaque_spec(n_views):
    """An opaque node: up to 3 views read, up to 2 written."""
    return st.tuples(st.just("opaque"), st.lists(st.integers(0, n_views - 1), max_size=3, unique=True),
                     st.lists(st.integers(0, n_views - 1), max_size=2, unique=True))


def graph_spec(node_spec):
    """Up to 7 steps, each a group (when the flag says so) of 1 to 3 drawn nodes."""
    return st.lists(st.tuples(st.booleans(), st.lists(node_spec, min_size=1, max_size=3)),
                    min_size=1, max_size=7)


def conflicts(a, b):
    """Whether two (reads, writes) pairs touch the same memory with one of them writing."""
    (ra, wa), (rb, wb) = a, b
    return (any(np.shares_memory(x, y) for x in wa for y in rb + wb)
            or any(np.shares_memory(x, y) for x in ra for y in wb))


def record(g, realized):
    """Add realized groups to g: a group is refused exactly when two of its nodes
    conflict (then recorded node by node); returns the nodes in recording order."""
    recorded = []
    for as_group, members in realized:
        if as_group and len(members) > 1:
            clash = any(conflicts((a[2], a[3]), (b[2], b[3])) for i, a in enumerate(members) for b in members[i + 1:])
            try:
                g.add_group([m[4] for m in members], names=[m[0] for m in members])
            except GroupConflictError:
                assert clash
            else:
                assert not clash
                recorded.extend(members)
                continue
        for m in members:
            g.add_node(m[4], name=m[0])
            recorded.append(m)
    return recorded


def assert_conflicts_staged_in_order(g, recorded):
    """Every conflicting pair of nodes lands in stages in recording order."""
    for i, a in enumerate(recorded):
        for b in recorded[i + 1:]:
            if conflicts((a[2], a[3]), (b[2], b[3])):
                assert g.stage_of(a[0]) < g.stage_of(b[0]), (a[0], b[0])
