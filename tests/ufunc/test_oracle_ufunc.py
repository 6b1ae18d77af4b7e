"""The sequential oracle with ufunc nodes: a replay equals running the nodes one by
one in recording order.

Hypothesis records random graphs of ufunc nodes (unary, binary, scalar operands,
two outputs, in place) and opaque nodes over a pool of arrays and overlapping,
strided views, in random groups where they are valid, replays them with 1 and 2
threads, several team policies and logical sizes, and compares every array with
NumPy running the same ufuncs over [0, logical size) in recording order.
Operand sets eagle refuses (shapes that differ, an output partly overlapping an
input) are refused at record time, before anything is recorded, and dropped.
"""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle.graph import ufunc
from oracle_graphs import assert_conflicts_staged_in_order, graph_spec, opaque_node, opaque_spec, record
from oracle_graphs import make_pool as pool

N = 12

VIEWS = [
    lambda b: b[:N], lambda b: b[N:], lambda b: b[N // 2: N // 2 + N], lambda b: b[::2],
    lambda b: b[1::2], lambda b: b[3: 3 + N], lambda b: b, lambda b: b[2 * N - 1::-2],
]
N_VIEWS = 2 * len(VIEWS)

# name -> (ufunc, inputs, outputs); an input index of -1 stands for a scalar
UFUNCS = {
    "multiply": (np.multiply, 2, 1), "add": (np.add, 2, 1), "subtract": (np.subtract, 2, 1),
    "maximum": (np.maximum, 2, 1), "negative": (np.negative, 1, 1), "sin": (np.sin, 1, 1),
    "divmod": (np.divmod, 2, 2), "modf": (np.modf, 1, 2),
}
SCALARS = [0.5, -1.25, 3, np.float64(0.75)]


def make_pool():
    return pool(VIEWS, N, shift=1.0)


operand = st.one_of(st.integers(0, N_VIEWS - 1), st.integers(0, 3).map(lambda i: -1 - i))
ufunc_spec = st.tuples(st.sampled_from(sorted(UFUNCS)), st.lists(operand, min_size=2, max_size=2),
                       st.lists(st.integers(0, N_VIEWS - 1), min_size=2, max_size=2), st.booleans())
node_spec = st.one_of(opaque_spec(N_VIEWS), ufunc_spec, ufunc_spec, ufunc_spec)
graphs = graph_spec(node_spec)


def realize(spec, views):
    """Groups of (name, kind, reads, writes, node, call) with call(L) the oracle's run."""
    out = []
    k = 0
    for as_group, members in spec:
        group = []
        for m in members:
            if m[0] == "opaque":
                reads, writes, fn, node = opaque_node(m, k, views, wave=np.cos)
                group.append((f"n{k}", "opaque", reads, writes, node, lambda L, fn=fn: fn()))
            else:
                name, ins, outs, named = m
                uf, nin, nout = UFUNCS[name]
                operands = [views[i] if i >= 0 else SCALARS[-1 - i] for i in ins[:nin]]
                out_arrays = [views[i] for i in outs[:nout]]
                if named:
                    given = [{f"v{i}": views[i]} if i >= 0 else SCALARS[-1 - i] for i in ins[:nin]]
                    given_out = tuple({f"v{i}": views[i]} for i in outs[:nout])
                else:
                    given, given_out = operands, tuple(out_arrays)
                try:
                    node = ufunc(uf, *given, out=given_out if nout > 1 else given_out[0])
                except (ValueError, TypeError):
                    continue   # refused before anything was recorded
                arrays_in = [a for a in operands if isinstance(a, np.ndarray)]

                def call(L, uf=uf, operands=operands, out_arrays=out_arrays):
                    uf(*[a[:L] if isinstance(a, np.ndarray) else a for a in operands],
                       out=tuple(o[:L] for o in out_arrays))

                group.append((f"n{k}", name, arrays_in, out_arrays, node, call))
            k += 1
        if group:
            out.append((as_group, group))
    return out


def record_graph(spec, views):
    g = eagle.Graph()
    return g, record(g, realize(spec, views))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=graphs, threads=st.sampled_from([1, 2]), teams=st.sampled_from(["auto", "serial", "parallel"]),
       size=st.sampled_from([0, 1, 5, N, 2 * N]), replays=st.integers(1, 3))
def test_replay_with_ufunc_nodes_equals_recording_order(spec, threads, teams, size, replays):
    # eagle's graph first, to learn the logical size its arrays allow
    bufs, views = make_pool()
    start = [b.copy() for b in bufs]
    g, recorded = record_graph(spec, views)
    logical = min(size, g.capacity)

    assert_conflicts_staged_in_order(g, recorded)

    before = eagle.get_num_threads()
    if threads > 1 and not eagle.have_openmp():
        threads = 1
    eagle.set_num_threads(threads)
    try:
        g.build(cpu=eagle.CpuOptions(teams=teams))
        g.set_logical_size(logical)
        g.launch(replays)
    finally:
        eagle.set_num_threads(before)

    # the oracle: the same nodes over fresh arrays, one by one in recording order
    obufs, oviews = make_pool()
    for b, s in zip(obufs, start):
        b[...] = s
    _, oracle = record_graph(spec, oviews)
    assert [m[0] for m in oracle] == [m[0] for m in recorded]
    with np.errstate(all="ignore"):
        for _ in range(replays):
            for m in oracle:
                m[5](logical)
    for got, want in zip(bufs, obufs):
        np.testing.assert_array_equal(got, want)
