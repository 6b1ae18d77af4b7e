"""Stencils in fused runs (eagle.cpu.fusion): a run reads arrays at neighbouring samples
(shifted views) that no node of it writes, maps written arrays sample by sample (windows
of one stride: ``e[:, 1:]`` and ``e[:, :-1]`` are one row), and ufunc nodes take rows of
any strides (``a[1:-1, 1:-1, 1:-1]``). Every result is NumPy's, bit for bit."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle.bench import stencils
from eagle.graph import ufunc


def fused_stages(g):
    return [stages for stages, _ in g.plan().fused_runs]


# ---- drawn stencil chains over shifted views, against NumPy ----------------------------

N, M = 13, 9

# index -> a view of one of two padded grids (shifted by one along either axis) or of
# two interior-sized scratch arrays
SHIFTS = [(slice(1, -1), slice(1, -1)), (slice(2, None), slice(1, -1)), (slice(None, -2), slice(1, -1)),
          (slice(1, -1), slice(2, None)), (slice(1, -1), slice(None, -2)), (slice(2, None), slice(2, None))]


def make_arrays(seed):
    rng = np.random.default_rng(seed)
    return [rng.random((N + 2, M + 2)), rng.random((N + 2, M + 2)), rng.random((N, M)), rng.random((N, M))]


def views(arrays):
    a, b, s, t = arrays
    return [a[i] for i in SHIFTS] + [b[i] for i in SHIFTS] + [s, t]


N_VIEWS = 2 * len(SHIFTS) + 2
UFUNCS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum}

op_spec = st.tuples(st.sampled_from(sorted(UFUNCS)), st.integers(0, N_VIEWS - 1),
                    st.one_of(st.integers(0, N_VIEWS - 1), st.just("scalar")), st.integers(0, N_VIEWS - 1))


def run_chain(spec, arrays, build, replays):
    vs = views(arrays)
    g = eagle.Graph()
    kept = []
    for name, i, j, k in spec:
        b = 0.5 if j == "scalar" else vs[j]
        try:
            g.add_node(ufunc(UFUNCS[name], vs[i], b, out=vs[k]))
        except ValueError:
            continue   # an output partly overlapping an input: refused, NumPy would buffer
        kept.append((name, i, j, k))
    if not kept:
        return g, kept
    g.build(**build)
    g.launch(replays)
    return g, kept


def numpy_chain(kept, arrays, replays):
    vs = views(arrays)
    for _ in range(replays):
        for name, i, j, k in kept:
            UFUNCS[name](vs[i], 0.5 if j == "scalar" else vs[j], out=vs[k])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(op_spec, min_size=1, max_size=8), seed=st.integers(0, 3),
       fuse=st.sampled_from([True, 1, 2, 5]), teams=st.sampled_from(["serial", "parallel"]))
def test_drawn_stencil_chains_equal_numpy_bit_for_bit(spec, seed, fuse, teams):
    arrays = make_arrays(seed)
    ref = [a.copy() for a in arrays]
    _, kept = run_chain(spec, arrays, dict(cpu=eagle.CpuOptions(fuse=fuse, teams=teams)), 2)
    numpy_chain(kept, ref, 2 if kept else 0)
    for x, y in zip(arrays, ref):
        assert x.tobytes() == y.tobytes()


# ---- what fuses and what ends a run -------------------------------------------------------

def test_a_shifted_read_of_an_array_the_run_writes_ends_the_run():
    a, b = np.linspace(0, 1, 50), np.zeros(50)
    t = np.empty(48)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, a[:-2], a[2:], out=t), name="sum_a")     # a is read shifted, not written
    g.add_node(ufunc(np.multiply, 0.5, t, out=b[1:-1]), name="b")
    g.add_node(ufunc(np.add, b[:-2], b[2:], out=t), name="sum_b")     # b[:-2] meets b[1:-1] at sample i+1
    g.add_node(ufunc(np.multiply, 0.5, t, out=a[1:-1]), name="a")
    g.build(cpu=eagle.CpuOptions(fuse=4))
    assert fused_stages(g) == [(0, 1), (2, 3)]
    ra, rb = a.copy(), b.copy()
    g.launch(3)
    for _ in range(3):
        rb[1:-1] = 0.5 * (ra[:-2] + ra[2:])
        ra[1:-1] = 0.5 * (rb[:-2] + rb[2:])
    assert a.tobytes() == ra.tobytes() and b.tobytes() == rb.tobytes()


def test_a_write_after_a_shifted_read_in_the_run_ends_the_run():
    a = np.linspace(0, 1, 50)
    t = np.empty(48)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, a[:-2], a[2:], out=t), name="sum")
    g.add_node(ufunc(np.multiply, 0.5, t, out=t), name="half")
    g.add_node(ufunc(np.add, t, 0.0, out=a[1:-1]), name="store")   # a[1:-1] meets a[2:] at sample i+1
    g.build(cpu=eagle.CpuOptions(fuse=4))
    assert fused_stages(g) == [(0, 1)]
    ra = a.copy()
    g.launch(2)
    for _ in range(2):
        ra[1:-1] = 0.5 * (ra[:-2] + ra[2:]) + 0.0
    assert a.tobytes() == ra.tobytes()


def test_columns_shifted_within_a_row_map_samples_alike_and_fuse():
    e = np.arange(40.0).reshape(5, 8)
    d = np.empty((5, 7))
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, e[:, 1:], 2.0, out=e[:, 1:]), name="w")
    g.add_node(ufunc(np.subtract, e[:, 1:], e[:, :-1], out=d), name="r")   # row i of e, both
    g.build(cpu=eagle.CpuOptions(fuse=2))
    assert fused_stages(g) == [(0, 1)]
    ref = np.arange(40.0).reshape(5, 8)
    ref[:, 1:] *= 2.0
    g.launch(1)
    assert d.tobytes() == (ref[:, 1:] - ref[:, :-1]).tobytes()


def test_rows_shifted_down_do_not_map_alike():
    e = np.arange(40.0).reshape(5, 8)
    d = np.empty((4, 8))
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, e[1:], 2.0, out=e[1:]), name="w")
    g.add_node(ufunc(np.subtract, e[1:], e[:-1], out=d), name="r")
    g.build(cpu=eagle.CpuOptions(fuse=2))
    assert fused_stages(g) == []


@pytest.mark.parametrize("name", list(stencils.SIZES))
@pytest.mark.parametrize("options", [dict(), dict(fuse=False), dict(fuse=1, teams="parallel"),
                                     dict(fuse=3, teams="serial")])
def test_the_benchmark_stencils_equal_numpy_bit_for_bit(name, options):
    st = stencils.Stencil(name, *stencils.QUICK[name])
    start = st.arrays()
    ours, ref = [a.copy() for a in start], [a.copy() for a in start]
    g = st.graph(ours, cpu=eagle.CpuOptions(**options))
    g.launch(st.replays())
    st.run_numpy(ref)
    for x, y in zip(ours, ref):
        assert x.tobytes() == y.tobytes()
    if options.get("fuse", True) is not False:
        assert g.plan().fused_runs


def test_the_heat_3d_sweep_is_two_fused_runs_on_interior_views():
    st = stencils.Stencil("heat_3d", *stencils.QUICK["heat_3d"])
    g = st.graph(st.arrays())
    # a half step is one run: its reads of A shifted along every axis, A not written in it
    n_stages = sum(line.startswith("stage ") for line in str(g.plan()).splitlines())
    (first, mid), (after, last) = fused_stages(g)
    assert (first, after, last) == (0, mid + 1, n_stages - 1)


# ---- rows of any strides --------------------------------------------------------------------

def interior(a):
    return a[1:-1, 1:-1, 1:-1]


@pytest.mark.parametrize("view", [interior, lambda a: a[::-1, ::2, 1:], lambda a: a.transpose(1, 2, 0),
                                  lambda a: a[:, 3, :][:, None, :], lambda a: a[1:, :1, ::-3]])
def test_rows_of_any_strides_run_as_numpy(view):
    rng = np.random.default_rng(3)
    a, b = rng.random((9, 8, 7)), rng.random((9, 8, 7))
    out = np.zeros((9, 8, 7))
    x, y, o = view(a), view(b), view(out)
    g = eagle.Graph()
    g.add_node(ufunc(np.hypot, x, y, out=o))
    g.build(cpu=eagle.CpuOptions(teams="parallel", fuse=False))
    g.launch(1)
    ref = np.zeros((9, 8, 7))
    np.hypot(x, y, out=view(ref))
    assert out.tobytes() == ref.tobytes()


def test_strided_rows_with_a_cast_and_a_mask_run_as_numpy():
    rng = np.random.default_rng(4)
    a = rng.random((6, 7, 8)).astype(np.float32)
    out, ref = np.zeros((6, 7, 8)), np.zeros((6, 7, 8))
    mask = rng.random((4, 5, 6)) < 0.5
    g = eagle.Graph()
    g.add_node(ufunc(np.sqrt, interior(a), out=interior(out), where=mask))
    g.build()
    g.launch(1)
    np.sqrt(interior(a), out=interior(ref), where=mask)
    assert out.tobytes() == ref.tobytes()
