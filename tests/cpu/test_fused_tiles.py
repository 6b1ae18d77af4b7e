"""Fused sample tiles (eagle.cpu.fusion, csrc/cpu/tiles.c eagle_run_tiles): consecutive
stages of sample-local nodes run tile by tile give the sequential oracle's result bit
for bit, and every hazard that is not sample-local ends a fused run."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle import kernels
from eagle.graph import native, opaque, ufunc
from eagle.native import Kernel


def bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


# ---- drawn chains: fused, unfused and the oracle, bit for bit ----------------------

# views of one buffer of 3 * n doubles (a few overlap each other at other samples), and
# two separate arrays: index -> view
def make_views(n):
    buf = np.linspace(0.5, 2.5, 3 * n + 2)
    a = np.linspace(-1.0, 1.0, n) if n else np.empty(0)
    c = np.cos(np.arange(n, dtype=np.float64))
    return buf, [buf[:n], buf[n:2 * n], buf[1:n + 1], buf[n - 1::-1] if n else buf[:0],
                 buf[2 * n:3 * n], buf[:2 * n:2], a, c, a[:], c.reshape(-1, 1)[:, 0]]


N_VIEWS = 10

UFUNCS = {"add": np.add, "multiply": np.multiply, "subtract": np.subtract, "maximum": np.maximum,
          "hypot": np.hypot}
NATIVE = {
    "scale": (1, lambda: kernels.scale(1.25), lambda r, w: np.multiply(r[0], 1.25, out=w)),
    "add": (2, kernels.add, lambda r, w: np.add(r[0], r[1], out=w)),
    "copy": (1, kernels.copy, lambda r, w: np.copyto(w, r[0])),
    "axpy": (1, lambda: kernels.axpy(0.5), lambda r, w: np.add(w, 0.5 * r[0], out=w)),
}

op_spec = st.one_of(
    st.tuples(st.just("ufunc"), st.sampled_from(sorted(UFUNCS)), st.integers(0, N_VIEWS - 1),
              st.one_of(st.integers(0, N_VIEWS - 1), st.just("scalar")), st.integers(0, N_VIEWS - 1)),
    st.tuples(st.just("sqrt"), st.integers(0, N_VIEWS - 1), st.integers(0, N_VIEWS - 1)),
    st.tuples(st.just("native"), st.sampled_from(sorted(NATIVE)), st.integers(0, N_VIEWS - 1),
              st.integers(0, N_VIEWS - 1), st.integers(0, N_VIEWS - 1)),
    st.tuples(st.just("opaque"), st.integers(0, N_VIEWS - 1)),
)


def record(spec, views):
    """(node, oracle step) for each op of spec that eagle accepts (ops it refuses at
    record time, e.g. a partly overlapping ufunc output, are left out)."""
    out = []
    for op in spec:
        try:
            if op[0] == "ufunc":
                _, name, i, j, k = op
                uf = UFUNCS[name]
                b = 0.75 if j == "scalar" else {f"v{j}": views[j]}
                node = ufunc(uf, {f"v{i}": views[i]}, b, out={f"v{k}": views[k]})
                step = (lambda uf=uf, i=i, j=j, k=k, vs=views, L=None:
                        uf(vs[i][:L], 0.75 if j == "scalar" else vs[j][:L], out=vs[k][:L]))
            elif op[0] == "sqrt":
                _, i, k = op
                node = ufunc(np.sqrt, {f"v{i}": views[i]}, out={f"v{k}": views[k]})
                step = lambda i=i, k=k, vs=views, L=None: np.sqrt(vs[i][:L], out=vs[k][:L])
            elif op[0] == "native":
                _, name, i, j, k = op
                n_reads, make, numpy_step = NATIVE[name]
                reads = {f"r{i}": views[i]} if n_reads == 1 else {"r0": views[i], "r1": views[j]}
                if name == "axpy" and k in (i, j):
                    continue
                node = native(make(), reads=reads, writes={f"w{k}": views[k]})
                if not node.split:
                    continue   # a split refused: the oracle below splits nothing either
                rs = [i] if n_reads == 1 else [i, j]
                step = (lambda rs=rs, k=k, vs=views, f=numpy_step, L=None:
                        f([vs[r][:L].copy() for r in rs], vs[k][:L]))
            else:
                _, k = op
                v = views[k]
                node = opaque(lambda v=v: np.multiply(v, 0.5, out=v), writes={f"v{k}": v})
                step = lambda k=k, vs=views, L=None: np.multiply(vs[k], 0.5, out=vs[k])
        except ValueError:
            continue
        out.append((node, step))
    return out


def run(n, spec, fuse, threads, teams, size, replays):
    buf, views = make_views(n)
    recorded = record(spec, views)
    g = eagle.Graph()
    for k, (node, _) in enumerate(recorded):
        g.add_node(node, name=f"n{k}")
    if not recorded:
        return None, None, None
    if size is not None:
        g.set_logical_size(min(size, g.capacity))
    g.build(cpu=eagle.CpuOptions(fuse=fuse, teams=teams))
    before = eagle.get_num_threads()
    eagle.set_num_threads(threads)
    try:
        g.launch(replays)
    finally:
        eagle.set_num_threads(before)
    return buf, views, g


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.sampled_from([0, 1, 2, 7, 64, 129, 1000]), spec=st.lists(op_spec, min_size=1, max_size=7),
       tile=st.sampled_from([1, 3, 64, 100, True]), threads=st.sampled_from([1, 2, 3]),
       teams=st.sampled_from(["auto", "serial", "parallel"]),
       size=st.one_of(st.none(), st.integers(0, 1000)), replays=st.integers(1, 3))
def test_fused_equals_unfused_equals_the_oracle(n, spec, tile, threads, teams, size, replays):
    fused = run(n, spec, tile, threads, teams, size, replays)
    if fused[0] is None:
        return
    unfused = run(n, spec, False, threads, teams, size, replays)
    # the oracle: the same ops, in recording order, in NumPy, over the first L samples
    buf, views = make_views(n)
    recorded = record(spec, views)
    g = fused[2]
    L = g.logical_size
    for _ in range(replays):
        for node, step in recorded:
            with np.errstate(all="ignore"):
                step(L=L) if node.sized else step()
    assert bits(fused[0]).tobytes() == bits(buf).tobytes(), g.plan()
    assert bits(unfused[0]).tobytes() == bits(buf).tobytes()
    for k in (6, 7):   # the separate arrays
        assert bits(fused[1][k]).tobytes() == bits(views[k]).tobytes()
        assert bits(unfused[1][k]).tobytes() == bits(views[k]).tobytes()


# ---- which stages fuse --------------------------------------------------------------

def chain(n=1000, **cpu):
    x = np.linspace(0, 1, n)
    y, z, w = np.empty(n), np.empty(n), np.empty(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 1.0000001, out={"y": y}), name="a")
    g.add_node(ufunc(np.add, {"y": y}, {"x": x}, out={"z": z}), name="b")
    g.add_node(native(kernels.scale(0.5), reads={"z": z}, writes={"w": w}), name="c")
    g.add_node(ufunc(np.sqrt, {"w": w}, out={"w": w}), name="d")
    return g.build(cpu=eagle.CpuOptions(**cpu)), x, w


def test_a_chain_of_ufunc_and_builtin_kernel_nodes_is_one_fused_run():
    g, x, w = chain()
    plan = g.plan()
    ((first, last), tile), = plan.fused_runs
    assert (first, last) == (0, 3) and tile >= 256 and tile % 64 == 0
    text = str(plan)
    assert f"fused run: stages 0-3 tile by tile, tiles of {tile} samples" in text
    assert text.count("fused with stage 0") == 3
    assert f"stage 2 work_share fused 0-3, tile {tile}" in str(g)
    g.launch(2)
    assert bits(w).tobytes() == bits(np.sqrt((x * 1.0000001 + x) * 0.5)).tobytes()


def test_fuse_false_and_a_tile_size():
    g, _, _ = chain(fuse=False)
    assert g.plan().fused_runs == []
    assert "fused" not in str(g.plan()) and "fused" not in str(g)
    g, _, _ = chain(fuse=7)
    assert g.plan().fused_runs == [((0, 3), 7)]
    for bad in (0, -3, 2.5, "yes", None, np.True_, np.int64(0)):
        with pytest.raises(ValueError, match=r"CpuOptions\(fuse=\.\.\.\) is True, False or a tile size"):
            chain(fuse=bad)


def test_a_numpy_integer_tile_and_one_past_int64():
    g, x, w = chain(fuse=np.int64(7))
    assert g.plan().fused_runs == [((0, 3), 7)]
    # a tile larger than any capacity is one tile, not an OverflowError from the plan's C int64
    g, x, w = chain(fuse=1 << 100)
    assert g.plan().fused_runs == [((0, 3), (1 << 63) - 1)]
    g.launch(2)
    assert bits(w).tobytes() == bits(np.sqrt((x * 1.0000001 + x) * 0.5)).tobytes()


def test_the_tile_comes_from_the_cache_and_the_bytes_per_sample():
    from eagle.cpu import fusion
    g, _, _ = chain()
    (_, tile), = g.plan().fused_runs
    # x, y, z, w: 4 doubles per sample
    assert tile == int(fusion.l2_cache_bytes() * fusion.TILE_BUDGET_FRACTION) // 32 // 64 * 64


def test_wide_rows_get_tiles_of_a_few_rows_by_bytes():
    from eagle.cpu import fusion
    budget = int(fusion.l2_cache_bytes() * fusion.TILE_BUDGET_FRACTION)
    side = 1024
    a, b, t = np.zeros((side, side)), np.zeros((side, side)), np.zeros((side - 2, side - 2))
    g = eagle.Graph()
    g.add_node(ufunc(np.add, a[2:, 1:-1], a[:-2, 1:-1], out=t), name="ns")
    g.add_node(ufunc(np.add, t, a[1:-1, 2:], out=t), name="e")
    g.add_node(ufunc(np.multiply, t, 0.25, out=b[1:-1, 1:-1]), name="b")
    g.build()
    (_, tile), = g.plan().fused_runs
    # a sample: a row of a (its three views are one group), of t and of b; the halo: what
    # the group's sample 0 spans (rows 0 to 2, less a column each side) beyond one row
    row = side * 8
    halo = -(-(row + (side - 2) * 8) // 64) * 64
    per_sample = 2 * row + (side - 2) * 8
    want = (budget - halo) // per_sample
    assert tile == (want // 64 * 64 if want >= 64 else max(want, 1))
    assert 1 <= tile < 64


def fused_stages(g):
    return [stages for stages, _ in g.plan().fused_runs]


def test_shifted_views_of_one_buffer_are_not_fused_and_stay_correct():
    n = 5000
    b = np.arange(n + 1, dtype=np.float64)
    z = np.empty(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": np.ones(n)}, 2.0, out={"hi": b[1:]}), name="w")
    g.add_node(ufunc(np.add, {"lo": b[:-1]}, 1.0, out={"z": z}), name="r")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert fused_stages(g) == []
    g.launch(1)
    ref = np.arange(n + 1, dtype=np.float64)
    ref[1:] = 2.0
    assert np.array_equal(z, ref[:-1] + 1.0)


def test_a_reversed_view_is_not_fused():
    n = 999
    x, y = np.arange(n, dtype=np.float64), np.empty(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 3.0, out={"x": x}), name="w")
    g.add_node(ufunc(np.add, {"rx": x[::-1]}, 1.0, out={"y": y}), name="r")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert fused_stages(g) == []
    g.launch(1)
    assert np.array_equal(y, (np.arange(n) * 3.0)[::-1] + 1.0)


def test_the_same_samples_through_another_view_fuse():
    n = 999
    x, y = np.arange(n, dtype=np.float64), np.empty(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 3.0, out={"x": x}), name="w")
    g.add_node(ufunc(np.add, {"x2": x[:]}, 1.0, out={"y": y[:n]}), name="r")   # x[:] is x again
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert fused_stages(g) == [(0, 1)]
    g.launch(1)
    assert np.array_equal(y, np.arange(n) * 3.0 + 1.0)


def test_a_write_that_is_not_per_sample_ends_the_run():
    n = 300
    x, y, t = np.ones(n), np.empty(n), np.zeros(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
    # t is marked not per-sample: a kernel writing it is no sample-local node
    g.add_node(native(kernels.scale(2.0), reads={"y": y}, writes={"t": t}, per_sample={"y"}), name="b")
    g.add_node(ufunc(np.add, {"y": y}, 1.0, out={"x": x}), name="c")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert 1 not in [s for run in fused_stages(g) for s in range(run[0], run[1] + 1)]


def test_a_zero_stride_write_is_not_fused():
    n = 300
    x = np.ones(n)
    cell = np.zeros(1)
    y0 = np.lib.stride_tricks.as_strided(cell, shape=(n,), strides=(0,))
    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="a")
    g.add_node(native(kernels.copy(), reads={"x": x}, writes={"y0": y0}), name="b")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert fused_stages(g) == []
    g.launch(1)
    assert cell[0] == 2.0


def test_opaque_nodes_and_team_policies_end_a_run():
    n = 400
    x, y, z = np.ones(n), np.empty(n), np.empty(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
    g.add_node(opaque(lambda: None, reads={"y": y}, writes={"x": x}), name="o")
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"z": z}), name="b")   # after o
    g.add_node(ufunc(np.multiply, {"z": z}, 2.0, out={"z": z}), name="c")
    g.add_node(ufunc(np.multiply, {"z": z}, 2.0, out={"y": y}), name="d")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert [st for st, _ in g.plan().fused_runs] == [(2, 4)]
    g.build(cpu=eagle.CpuOptions(fuse=64, teams=["auto", "auto", "auto", "serial", "serial"]))
    assert [st for st, _ in g.plan().fused_runs] == [(3, 4)]


def test_a_user_kernel_fuses_only_when_it_declares_sample_local():
    n = 256
    x, y, z = np.ones(n), np.empty(n), np.empty(n)

    def build(local):
        g = eagle.Graph()
        g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
        g.add_node(native(Kernel(kernels.scale(2.0), sample_local=local), reads={"y": y},
                          writes={"z": z}), name="k")
        return g.build(cpu=eagle.CpuOptions(fuse=64))

    assert fused_stages(build(False)) == []
    assert fused_stages(build(True)) == [(0, 1)]
    assert Kernel(kernels.scale(2.0)).sample_local and kernels.add().sample_local
    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
    g.add_node(native(Kernel(kernels.scale(2.0), sample_local=False), reads={"y": y}, writes={"z": z},
                      sample_local=True), name="k")
    assert fused_stages(g.build(cpu=eagle.CpuOptions(fuse=64))) == [(0, 1)]
    with pytest.raises(TypeError, match="sample_local"):
        native(kernels.scale(2.0), reads={"y": y}, writes={"z": z}, sample_local=1)


def test_compaction_ends_a_run():
    n = 500
    keep = np.ones(n, dtype=np.bool_)
    x, y = np.arange(n, dtype=np.float64), np.empty(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
    g.add_node(ufunc(np.greater, {"y": y}, 100.0, out={"keep": keep}), name="b")
    g.add_node(eagle.graph.compact(keep, {"y": y}, min_dead_fraction=0), name="c")
    g.add_node(ufunc(np.add, {"y": y}, 1.0, out={"y": y}), name="d")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    runs = fused_stages(g)
    assert runs == [(0, 1)]
    g.launch(1)
    assert g.logical_size == n - 100


def test_logical_size_changes_keep_the_samples_beyond_untouched(threads):
    g, x, w = chain(n=3001, fuse=100)
    for size in (3001, 1, 0, 777, 2999):
        g.set_logical_size(size)
        for t in (1, 2, 3):
            w[:] = -1.0
            threads(t)
            g.launch(1)
            ref = np.full(3001, -1.0)
            ref[:size] = np.sqrt((x[:size] * 1.0000001 + x[:size]) * 0.5)
            assert bits(w).tobytes() == bits(ref).tobytes()


def test_the_profile_times_each_node_of_a_fused_run():
    g, _, _ = chain(n=20000, fuse=1000)
    with eagle.profile() as prof:
        g.launch(3)
    rows = {s.node: s for s in prof.stats() if s.stage is not None}
    assert set(rows) == {"a", "b", "c", "d"}
    assert all(r.count == 3 and r.total > 0 for r in rows.values())
    assert [rows[k].stage for k in "abcd"] == [0, 1, 2, 3]


def test_a_failure_after_a_fused_run_names_its_node_and_the_graph_stays_usable():
    n = 1000
    x, y = np.ones(n), np.empty(n)
    calls = []

    def boom():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")

    g = eagle.Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
    g.add_node(ufunc(np.multiply, {"y": y}, 2.0, out={"y": y}), name="b")
    g.add_node(opaque(boom, reads={"y": y}), name="boom")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert fused_stages(g) == [(0, 1)]
    with pytest.raises(RuntimeError, match="boom") as info:
        g.launch(5, progress=True)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "'boom'" in notes and "replay 1" in notes
    g.launch(1)
    assert np.array_equal(y, np.full(n, 4.0))


def test_ctrl_c_stops_a_long_fused_launch():
    code = textwrap.dedent("""
        import os, signal, threading, time
        import numpy as np, eagle
        from eagle.graph import ufunc
        n = 200_000
        x, y = np.ones(n), np.empty(n)
        g = eagle.Graph()
        g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}), name="a")
        g.add_node(ufunc(np.multiply, {"y": y}, 2.0, out={"x": x}), name="b")
        g.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), name="c")
        g.build()
        assert g.plan().fused_runs
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        try:
            g.launch(10**9)
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - t, 1))
    """)
    from ctrl_c import default_sigint, scaled

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120),
                         preexec_fn=default_sigint)
    assert out.returncode == 0, out.stderr
    assert "interrupted" in out.stdout
