"""Generated fused loops (eagle.cpu.codegen): a fused run's elementwise ufunc nodes as one
compiled C function give NumPy's results bit for bit, and every way of not compiling
(no compiler, a failing one, EAGLE_CODEGEN=0, codegen=False) gives the same bits.
Each test compiles into its own cache folder (EAGLE_CACHE_DIR)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import ctrl_c
import numpy as np
import pytest
from compiled_runs import compiled_note, fake_compiler, is_compiled, reference_bits, small_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import eagle
from eagle.cpu import c_compiler, codegen
from eagle.graph import opaque, ufunc

pytestmark = [pytest.mark.skipif(c_compiler.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("own_cache")]


# ---- drawn stencil chains, every ufunc of the set, against NumPy ----------------------

N, M = 13, 9
SHIFTS = [(slice(1, -1), slice(1, -1)), (slice(2, None), slice(1, -1)), (slice(None, -2), slice(1, -1)),
          (slice(1, -1), slice(2, None)), (slice(1, -1), slice(None, -2)), (slice(2, None), slice(2, None))]
BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "true_divide": np.true_divide,
          "minimum": np.minimum, "maximum": np.maximum}
UNARY = {"negative": np.negative, "positive": np.positive, "absolute": np.absolute, "square": np.square}
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0]


def make_arrays(seed, dtype):
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal((N + 2, M + 2)), rng.standard_normal((N + 2, M + 2)),
           rng.standard_normal((N, M)), rng.standard_normal((N, M))]
    for a in out:   # NaNs of both signs, infinities and signed zeros: NumPy's min/max rules
        a.flat[rng.integers(0, a.size, 6)] = SPECIAL
    return [a.astype(dtype) for a in out]


def views(arrays):
    a, b, s, t = arrays
    return [a[i] for i in SHIFTS] + [b[i] for i in SHIFTS] + [s, t]


N_VIEWS = 2 * len(SHIFTS) + 2
op_spec = st.tuples(st.sampled_from(sorted(BINARY) + sorted(UNARY)), st.integers(0, N_VIEWS - 1),
                    st.one_of(st.integers(0, N_VIEWS - 1), st.sampled_from([0.2, -1.5, 3.0])),
                    st.integers(0, N_VIEWS - 1), st.booleans())


def chain(spec, arrays, g=None):
    """Add the chain's nodes to g (recording), or run it with NumPy (g None)."""
    vs = views(arrays)
    kept = []
    for name, i, j, k, scalar_first in spec:
        b = j if isinstance(j, float) else vs[j]
        args = (vs[i],) if name in UNARY else ((b, vs[i]) if scalar_first else (vs[i], b))
        uf = UNARY.get(name) or BINARY[name]
        if g is None:
            with np.errstate(all="ignore"):
                uf(*args, out=vs[k])
            continue
        try:
            g.add_node(ufunc(uf, *args, out=vs[k]))
        except ValueError:
            continue   # an output partly overlapping an input: refused, NumPy would buffer
        kept.append((name, i, j, k, scalar_first))
    return kept


def check_chain(spec, seed, dtype, options):
    arrays = make_arrays(seed, dtype)
    ref = [a.copy() for a in arrays]
    g = eagle.Graph()
    kept = chain(spec, arrays, g)
    if not kept:
        return None
    g.build(cpu=eagle.CpuOptions(codegen=True, **options))
    g.launch(2)
    for _ in range(2):
        chain(kept, ref)
    for x, y in zip(arrays, ref):
        assert x.tobytes() == y.tobytes()
    return g


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(op_spec, min_size=2, max_size=8), seed=st.integers(0, 3),
       fuse=st.sampled_from([True, 1, 5]), teams=st.sampled_from(["serial", "parallel"]))
def test_drawn_chains_compiled_equal_numpy_bit_for_bit(spec, seed, fuse, teams):
    check_chain(spec, seed, np.float64, dict(fuse=fuse, teams=teams))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(op_spec, min_size=2, max_size=6), seed=st.integers(0, 3))
def test_float32_chains_with_python_scalars_stay_float32(spec, seed):
    # 0.2 * x in float32 is float32 arithmetic (NumPy's weak scalars), not double
    check_chain(spec, seed, np.float32, dict(fuse=True))


def test_the_jacobi_step_compiles_and_equals_numpy():
    from eagle.bench import stencils

    st_ = stencils.Stencil("jacobi_2d", *stencils.QUICK["jacobi_2d"])
    start = st_.arrays()
    ours, ref = [a.copy() for a in start], [a.copy() for a in start]
    g = st_.graph(ours, cpu=eagle.CpuOptions(codegen=True))
    assert is_compiled(g), compiled_note(g)
    g.launch(st_.replays())
    st_.run_numpy(ref)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(ours, ref))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16, np.int32, np.int64, np.uint64])
def test_integer_loops_wrap_as_numpy(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    x = rng.integers(info.min, info.max, (64, 5), dtype=dtype, endpoint=True)
    x[0, :3] = [info.min, info.max, 0]
    y = rng.integers(info.min, info.max, (64, 5), dtype=dtype, endpoint=True)
    t, u = np.empty_like(x), np.empty_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, y, out=t))
    g.add_node(ufunc(np.add, t, 7, out=t))
    g.add_node(ufunc(np.negative, t, out=u))
    g.add_node(ufunc(np.absolute, u, out=u))
    g.add_node(ufunc(np.square, u, out=u))
    g.add_node(ufunc(np.maximum, u, x, out=u))
    g.add_node(ufunc(np.subtract, u, y, out=u))
    g.build(cpu=eagle.CpuOptions(codegen=True))
    assert is_compiled(g), compiled_note(g)
    g.launch(1)
    with np.errstate(all="ignore"):
        rt = x * y + dtype(7)
        ru = np.maximum(np.square(np.absolute(np.negative(rt))), x) - y
    assert t.tobytes() == rt.tobytes() and u.tobytes() == ru.tobytes()


# ---- what ends a compiled group, and what stays out of one ----------------------------

def test_nodes_outside_the_set_split_the_run_into_groups():
    x = np.linspace(0.0, 1.0, 4000)
    a, b = np.empty_like(x), np.empty_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, x, 1.0, out=a))
    g.add_node(ufunc(np.multiply, a, 2.0, out=a))
    g.add_node(ufunc(np.sin, a, out=b))            # not in the set: runs as NumPy's loop
    g.add_node(ufunc(np.subtract, b, x, out=b))
    g.add_node(ufunc(np.square, b, out=b))
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=256))
    assert "compiled: 4 of 5 nodes in 2 generated loops" in compiled_note(g)[0]
    g.launch(1)
    assert b.tobytes() == np.square(np.sin((x + 1.0) * 2.0) - x).tobytes()


def test_a_cast_or_a_mask_keeps_a_node_out():
    x = np.linspace(0.0, 1.0, 64).astype(np.float32)
    a = np.empty(64)
    m = x > 0.5
    nodes = [ufunc(np.add, x, 1.0, out=a),            # float32 cast to float64: NumPy's iterator
             ufunc(np.multiply, a, 2.0, out=a, where=m)]
    g = eagle.Graph()
    for node in nodes:
        g.add_node(node)
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=16))
    assert not is_compiled(g)
    assert [codegen.why_not(n) for n in nodes] == ["a cast", "where="]


def test_views_shifted_within_a_row_written_and_read_make_separate_loops():
    e = np.arange(40.0).reshape(5, 8)
    d = np.empty((5, 7))
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, e[:, 1:], 2.0, out=e[:, 1:]))
    g.add_node(ufunc(np.subtract, e[:, 1:], e[:, :-1], out=d))   # e[:, :-1] meets e[:, 1:] shifted
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=2))
    assert "compiled: 2 of 2 nodes in 2 generated loops" in compiled_note(g)[0]
    ref = np.arange(40.0).reshape(5, 8)
    ref[:, 1:] *= 2.0
    g.launch(1)
    assert d.tobytes() == (ref[:, 1:] - ref[:, :-1]).tobytes() and e.tobytes() == ref.tobytes()


def test_aliased_views_in_place_updates_and_outputs_read_later():
    base = np.random.default_rng(3).random(40)
    w = as_strided(base, shape=(37, 4), strides=(8, 8))          # rows overlap one another
    acc = np.random.default_rng(4).random((37, 4))
    b = np.random.default_rng(5).random((37, 4))
    out = np.empty((37, 4))
    g = eagle.Graph()
    g.add_node(ufunc(np.add, acc, w, out=acc))                   # A = A + w, in place
    g.add_node(ufunc(np.multiply, acc, b, out=out))              # an output read by the next node
    g.add_node(ufunc(np.subtract, out, w, out=out))
    g.add_node(ufunc(np.maximum, acc[:, ::-1], out, out=b))      # acc read reversed in its row
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=8))
    assert is_compiled(g), compiled_note(g)
    ra, rb = acc.copy(), b.copy()
    wr = w.copy()
    g.launch(3)
    for _ in range(3):
        ra = ra + wr
        ro = ra * rb - wr
        rb = np.maximum(ra[:, ::-1], ro)
    assert acc.tobytes() == ra.tobytes() and out.tobytes() == ro.tobytes() and b.tobytes() == rb.tobytes()


# ---- sizes that change ------------------------------------------------------------------

def test_zero_samples_and_a_smaller_size_between_launches():
    x = np.linspace(-1.0, 1.0, 300).reshape(100, 3)
    t, y = np.zeros_like(x), np.zeros_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 3.0, out=t))
    g.add_node(ufunc(np.add, t, x, out=t))
    g.add_node(ufunc(np.absolute, t, out=y))
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=16))
    assert is_compiled(g)
    g.set_logical_size(0)
    g.launch(2)
    assert not y.any() and not t.any()
    g.set_logical_size(37)
    g.launch(1)
    ref = np.abs(x * 3.0 + x)
    assert y[:37].tobytes() == ref[:37].tobytes() and not y[37:].any()
    g.set_logical_size(100)
    g.launch(1)
    assert y.tobytes() == ref.tobytes()


# ---- not compiling: the same bits ---------------------------------------------------------

def test_a_failing_compiler_warns_once_with_its_message_and_runs_the_nodes(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_CC", fake_compiler(tmp_path, 'echo "fake: no such luck" >&2; exit 3'))
    with pytest.warns(RuntimeWarning, match="fake: no such luck"):
        g, bits = small_graph(codegen=True)
    assert bits == reference_bits()
    assert "not compiled: " in compiled_note(g)[0] and "exit 3" in compiled_note(g)[0]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, bits = small_graph(codegen=True)   # once a process
    assert bits == reference_bits()


def test_no_compiler_on_path_runs_the_nodes(tmp_path, monkeypatch):
    monkeypatch.delenv("EAGLE_CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sysconfig.get_config_var", lambda name: "gcc" if name == "CC" else None)
    assert c_compiler.compiler() is None
    g, bits = small_graph(codegen=True)
    assert bits == reference_bits()
    assert "not compiled: no C compiler" in compiled_note(g)[0]


@pytest.mark.parametrize("how", ["env", "option"])
def test_codegen_turned_off_runs_the_nodes(monkeypatch, how):
    if how == "env":
        monkeypatch.setenv("EAGLE_CODEGEN", "0")
    g, bits = small_graph(**({} if how == "env" else {"codegen": False}))
    assert bits == reference_bits()
    assert not is_compiled(g) and "not compiled" not in compiled_note(g)[0]
    assert not os.path.exists(c_compiler.cache_dir())


def test_the_default_compiles_only_runs_that_write_enough(monkeypatch):
    g, _ = small_graph()   # 1,200 elements a replay
    assert not is_compiled(g)
    monkeypatch.setenv("EAGLE_CODEGEN", "1")
    g, bits = small_graph()
    assert is_compiled(g) and bits == reference_bits()


def counting_compiler(tmp_path, sleep_s=0):
    log = tmp_path / "calls"
    real = shutil.which("cc") or shutil.which("gcc")
    return fake_compiler(tmp_path, f'echo x >> "{log}"\nsleep {sleep_s}\nexec "{real}" "$@"'), log


def test_the_cache_is_reused_without_calling_the_compiler(tmp_path, monkeypatch):
    cc, log = counting_compiler(tmp_path)
    monkeypatch.setenv("EAGLE_CC", cc)
    g, bits = small_graph(codegen=True)
    assert is_compiled(g) and bits == reference_bits()
    assert log.read_text().count("x") == 1
    monkeypatch.setattr(c_compiler, "_loaded", {})   # as in a new process
    g, bits = small_graph(codegen=True)
    assert is_compiled(g) and bits == reference_bits()
    assert log.read_text().count("x") == 1
    assert [f for f in os.listdir(c_compiler.cache_dir()) if not f.endswith(".so")] == []


CHILD = r"""
import json
from compiled_runs import is_compiled, reference_bits, small_graph
g, bits = small_graph(codegen=True)
print(json.dumps({"compiled": is_compiled(g), "same": bits == reference_bits()}))
"""


def test_two_processes_compiling_the_same_kernel_at_once(tmp_path, monkeypatch):
    cc, log = counting_compiler(tmp_path, sleep_s=1)   # both are inside the compiler together
    env = ctrl_c.child_env(EAGLE_CC=cc, EAGLE_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=ctrl_c.scaled(120)) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"compiled": True, "same": True}, err
    assert log.read_text().count("x") == 2
    assert len(os.listdir(tmp_path / "cache" / "codegen")) == 1


# ---- failures and Ctrl-C --------------------------------------------------------------------

def test_an_error_after_a_compiled_run_names_its_node():
    x = np.linspace(0.0, 1.0, 64)
    a = np.empty_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, x, 1.0, out=a), name="first")
    g.add_node(ufunc(np.multiply, a, 2.0, out=a), name="second")

    def fail():
        raise ArithmeticError("late")
    g.add_node(opaque(fail, reads={"a": a}), name="bad")
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=16))
    assert is_compiled(g)
    with pytest.raises(ArithmeticError) as info:
        g.launch(2)
    assert info.value.__notes__[-1] == "eagle: raised by node 'bad' (stage 2) in replay 0 of launch(2)"
    assert a.tobytes() == ((x + 1.0) * 2.0).tobytes()


INTERRUPTED = r"""
import json, sys
import ctrl_c
import numpy as np
import eagle
from eagle.graph import ufunc
eagle.set_num_threads(int(sys.argv[1]))
x = np.linspace(0.0, 1.0, 1 << 14)
a, n = np.zeros_like(x), np.zeros(1 << 14)
g = eagle.Graph()
g.add_node(ufunc(np.add, n, 1.0, out=n))
g.add_node(ufunc(np.multiply, n, 0.5, out=a))
g.add_node(ufunc(np.add, a, x, out=a))
g.build(cpu=eagle.CpuOptions(codegen=True, teams=sys.argv[2]))
assert "; compiled:" in str(g.plan())
ctrl_c.launch_until_interrupted(g, lambda: n[0] >= 50)
print(json.dumps({"replays": g.replays, "ran": float(n[0]), "same": bool((n == n[0]).all())}))
"""


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
@pytest.mark.parametrize("threads, teams", [(1, "serial"), (2, "parallel")])
def test_ctrl_c_stops_a_long_launch_of_a_compiled_run(tmp_path, threads, teams):
    env = ctrl_c.child_env(EAGLE_CACHE_DIR=str(tmp_path / "cache"))
    res = ctrl_c.interrupt(["-c", textwrap.dedent(INTERRUPTED), str(threads), teams], env=env, after_s=0.2)
    assert res.returncode == 0, res.err
    out = json.loads(res.lines[-1])
    assert out["same"] and out["replays"] == out["ran"] > 0, out


@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_a_loop_body_s_fused_run_is_compiled_too(teams):
    from eagle.graph import while_loop

    x = np.linspace(0.0, 1.0, 3000)
    a = np.zeros_like(x)
    count = np.array([4], dtype=np.int64)
    body = eagle.Graph()
    body.add_node(ufunc(np.multiply, a, 0.5, out=a), name="half")
    body.add_node(ufunc(np.add, a, x, out=a), name="plus_x")

    def tick():
        count[0] -= 1
    body.add_node(opaque(tick, reads={"a": a}, updates={"count": count}), name="tick")
    g = eagle.Graph()
    g.add_node(while_loop({"count": count}, body, max_iterations=10), name="loop")
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=256, teams=teams))
    assert "compiled: 2 of 2 nodes in 1 generated loop" in str(g.plan())
    g.launch(1)
    ref = np.zeros_like(x)
    for _ in range(4):
        ref = ref * 0.5 + x
    assert a.tobytes() == ref.tobytes()
