"""Generated fused loops (eagle.cpu.codegen) under hostile inputs and surroundings: IEEE
corner values, NumPy's scalar promotion, aliased and odd layouts, a broken cache, a hung or
chatty compiler, threads, fork. Every result is compared bit for bit with NumPy's eager
call and with the same graph built with ``codegen=False``."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from compiled_runs import fake_compiler, is_compiled, reference_bits, small_graph

import eagle
from eagle.cpu import c_compiler, codegen
from eagle.graph import ufunc

pytestmark = [pytest.mark.skipif(c_compiler.compiler() is None, reason="no C compiler"),
              pytest.mark.usefixtures("own_cache")]


def run_both(make, launches=1, fuse=16, expect_compiled=True, numpy_too=True):
    """``make()`` returns (nodes' argument tuples, the arrays to compare, a NumPy function
    doing the same to its own fresh arrays); the graph is run compiled and not compiled."""
    results = []
    for codegen_on in (True, False):
        specs, arrays, _ = make()
        g = eagle.Graph()
        for uf, args, kw in specs:
            g.add_node(ufunc(uf, *args, **kw))
        g.build(cpu=eagle.CpuOptions(codegen=codegen_on, fuse=fuse))
        if codegen_on:
            assert is_compiled(g) == expect_compiled, str(g.plan())
        with np.errstate(all="ignore"):
            g.launch(launches)
        results.append([a.tobytes() for a in arrays])
    _, ref, numpy_fn = make()
    with np.errstate(all="ignore"):
        for _ in range(launches):
            numpy_fn(ref)
    assert results[0] == results[1]
    assert not numpy_too or results[0] == [a.tobytes() for a in ref]


def f64(bits):
    return np.array([bits], dtype=np.uint64).view(np.float64)[0]


def f32(bits):
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


# ---- bits -------------------------------------------------------------------------------------

def corner_values(dtype):
    if dtype == np.float64:
        nan_a, nan_b = f64(0x7FF0000000000123), f64(0xFFF8000000000456)   # signalling-ish, negative quiet
        tiny = np.finfo(np.float64).smallest_subnormal
    else:
        nan_a, nan_b = f32(0x7F800123), f32(0xFFC00456)
        tiny = np.finfo(np.float32).smallest_subnormal
    big = np.finfo(dtype).max
    vals = [nan_a, nan_b, np.nan, -np.nan, 0.0, -0.0, tiny, -tiny, tiny * 3, big, -big, np.inf, -np.inf,
            1.0, -1.0, 0.5]
    return np.array(vals, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_payloads_signed_zeros_subnormals_and_infinities(dtype):
    v = corner_values(dtype)
    x = np.repeat(v, len(v))     # every pair of corner values
    y = np.tile(v, len(v))

    def make():
        xs, ys = x.copy(), y.copy()
        outs = [np.zeros_like(x) for _ in range(8)]
        s0, s1, s2, s3, s4, s5, s6, s7 = outs
        specs = [(np.minimum, (xs, ys), dict(out=s0)), (np.maximum, (xs, ys), dict(out=s1)),
                 (np.negative, (s0,), dict(out=s2)), (np.absolute, (s1,), dict(out=s3)),
                 (np.add, (xs, ys), dict(out=s4)), (np.true_divide, (xs, ys), dict(out=s5)),
                 (np.multiply, (s4, ys), dict(out=s6)), (np.subtract, (s5, s6), dict(out=s7))]

        def ref(arrs):
            r = arrs
            np.minimum(xs, ys, out=r[0]), np.maximum(xs, ys, out=r[1])
            np.negative(r[0], out=r[2]), np.absolute(r[1], out=r[3])
            np.add(xs, ys, out=r[4]), np.true_divide(xs, ys, out=r[5])
            np.multiply(r[4], ys, out=r[6]), np.subtract(r[5], r[6], out=r[7])
        return specs, outs, ref
    run_both(make)


FOLDS = {   # what a C compiler folds where only a NaN's sign or payload tells the difference
    "abs(square(x))": [(np.square, ("x",), "t"), (np.absolute, ("t",), "t")],
    "(-x) * (-y)": [(np.negative, ("x",), "t"), (np.negative, ("y",), "u"), (np.multiply, ("t", "u"), "t")],
    "(-x) * (-x)": [(np.negative, ("x",), "t"), (np.multiply, ("t", "t"), "u")],
    "x - (-y)": [(np.negative, ("y",), "t"), (np.subtract, ("x", "t"), "u")],
    "x + (-y)": [(np.negative, ("y",), "t"), (np.add, ("x", "t"), "u")],
    "(-x) + y": [(np.negative, ("x",), "t"), (np.add, ("t", "y"), "u")],
    "-(x - y)": [(np.subtract, ("x", "y"), "t"), (np.negative, ("t",), "u")],
    "x * -1": [(np.multiply, ("x", -1.0), "t"), (np.add, ("t", "y"), "u")],
    "x / -1": [(np.true_divide, ("x", -1.0), "t"), (np.add, ("t", "y"), "u")],
    "(x * 2) * -1": [(np.multiply, ("x", 2.0), "t"), (np.multiply, ("t", -1.0), "u")],
    "(x - y) * -1": [(np.subtract, ("x", "y"), "t"), (np.multiply, ("t", -1.0), "u")],
    "abs(-x) * 1": [(np.negative, ("x",), "t"), (np.absolute, ("t",), "t"), (np.multiply, ("t", 1.0), "u")],
    "+x then * y": [(np.positive, ("x",), "t"), (np.multiply, ("t", "y"), "u")],
    "y * x (both NaNs)": [(np.multiply, ("y", "x"), "t"), (np.add, ("t", "x"), "u")],
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fold", sorted(FOLDS))
def test_nan_signs_and_payloads_survive_what_compilers_fold(fold, dtype):
    v = corner_values(dtype)
    x0, y0 = np.repeat(v, len(v)), np.tile(v, len(v))

    def make():
        arrays = {"x": x0.copy(), "y": y0.copy(), "t": np.zeros_like(x0), "u": np.zeros_like(x0)}
        specs = [(uf, tuple(arrays.get(a, a) if isinstance(a, str) else a for a in args),
                  dict(out=arrays[out])) for uf, args, out in FOLDS[fold]]

        def ref(r):
            named = dict(zip("xytu", r))
            for uf, args, out in FOLDS[fold]:
                uf(*(named[a] if isinstance(a, str) else a for a in args), out=named[out])
        return specs, [arrays[k] for k in "xytu"], ref
    run_both(make)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_subnormal_results_are_not_flushed_to_zero(dtype):
    # -march=native with -O3 and no fast-math must leave MXCSR's FTZ/DAZ alone: a subnormal
    # read (DAZ) or made (FTZ) stays subnormal
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.full(4096, tiny * 8, dtype=dtype)
    a, b = np.empty_like(x), np.empty_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 0.5, out=a))    # subnormal in, subnormal out
    g.add_node(ufunc(np.add, a, x, out=b))
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=256))
    assert is_compiled(g)
    g.launch(1)
    assert (a == tiny * 4).all() and (b == tiny * 12).all()
    # and loading the library did not set FTZ/DAZ for the rest of the process
    assert np.multiply(np.array([tiny * 8], dtype=dtype), dtype(0.5))[0] == tiny * 4


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_extremes_wrap_and_min_max_abs_as_numpy(dtype):
    info = np.iinfo(dtype)
    v = np.array(sorted({info.min, info.min + 1, -1 if info.min else 0, 0, 1, info.max - 1, info.max}),
                 dtype=dtype)
    x, y = np.repeat(v, len(v)), np.tile(v, len(v))

    def make():
        outs = [np.zeros_like(x) for _ in range(5)]
        specs = [(np.multiply, (x, y), dict(out=outs[0])), (np.subtract, (outs[0], y), dict(out=outs[1])),
                 (np.absolute, (outs[1],), dict(out=outs[2])), (np.negative, (outs[2],), dict(out=outs[3])),
                 (np.minimum, (outs[3], x), dict(out=outs[4]))]

        def ref(r):
            np.multiply(x, y, out=r[0]), np.subtract(r[0], y, out=r[1]), np.absolute(r[1], out=r[2])
            np.negative(r[2], out=r[3]), np.minimum(r[3], x, out=r[4])
        return specs, outs, ref
    run_both(make)


def test_integer_division_and_bool_stay_out_of_the_compiled_set():
    i = np.arange(1, 65, dtype=np.int64)
    f = np.empty(64)
    b = np.ones(64, dtype=bool)
    bo = np.empty(64, dtype=bool)
    nodes = [ufunc(np.true_divide, i, i, out=f), ufunc(np.floor_divide, i, 0, out=i),
             ufunc(np.add, b, b, out=bo), ufunc(np.maximum, b, b, out=bo)]
    for dt in (np.float16, np.complex128, np.longdouble):
        z = np.ones(64, dtype=dt)
        nodes.append(ufunc(np.add, z, z, out=np.empty_like(z)))
    assert all(codegen.why_not(n) is not None for n in nodes), [codegen.why_not(n) for n in nodes]


@pytest.mark.parametrize("uf", [np.add, np.multiply])
def test_a_nan_constant_in_add_or_multiply_is_left_to_numpys_loop(uf):
    # NumPy's loop returns the scalar's NaN in its vector body, the array's in the remainder
    x = np.array([0x7FF8000000000123] * 67, dtype=np.uint64).view(np.float64)

    def make():
        a, b = np.zeros_like(x), np.zeros_like(x)
        specs = [(uf, (x, np.nan), dict(out=a)), (np.negative, (a,), dict(out=b)), (np.add, (b, x), dict(out=b))]

        def ref(r):
            uf(x, np.nan, out=r[0]), np.negative(r[0], out=r[1]), np.add(r[1], x, out=r[1])
        return specs, [a, b], ref
    # the other two nodes still compile; NumPy's loop over tiles and over the whole array
    # differ here (vector body and remainder fall elsewhere), so only the two builds compare
    run_both(make, fuse=16, expect_compiled=True, numpy_too=False)
    assert codegen.why_not(ufunc(uf, x, np.nan, out=np.empty_like(x))) == "a NaN constant"


def test_float_division_by_zero_gives_numpys_infinities_and_nans():
    x = np.array([1.0, -1.0, 0.0, -0.0, np.nan, np.inf] * 16)
    z = np.array([0.0, -0.0] * 48)

    def make():
        a, b = np.zeros_like(x), np.zeros_like(x)
        specs = [(np.true_divide, (x, z), dict(out=a)), (np.true_divide, (a, 0.0), dict(out=b))]

        def ref(r):
            np.true_divide(x, z, out=r[0]), np.true_divide(r[0], 0.0, out=r[1])
        return specs, [a, b], ref
    run_both(make)


SCALARS = [
    (np.float32, 3),                  # a Python int with float32: float32
    (np.float32, 0.1),                # a Python float: weak, float32 arithmetic
    (np.float64, np.float32(0.1)),    # an np.float32 scalar with float64: float64
    (np.int8, 100),                   # a Python int that fits
    (np.uint8, 255),
    (np.int64, -(2 ** 63)),
]


@pytest.mark.parametrize("dtype, scalar", SCALARS)
def test_mixed_scalars_follow_numpys_promotion(dtype, scalar):
    x = np.arange(-40, 40).astype(dtype)

    def make():
        a, b = np.zeros_like(x), np.zeros_like(x)
        specs = [(np.multiply, (x, scalar), dict(out=a)), (np.add, (scalar, a), dict(out=b)),
                 (np.subtract, (b, scalar), dict(out=b))]

        def ref(r):
            np.multiply(x, scalar, out=r[0]), np.add(scalar, r[0], out=r[1])
            np.subtract(r[1], scalar, out=r[1])
        return specs, [a, b], ref
    run_both(make)


def test_an_int8_array_with_a_python_int_out_of_its_range_is_refused_as_numpy_does():
    x = np.arange(10, dtype=np.int8)
    with pytest.raises(OverflowError):
        np.add(x, 1000, out=np.empty_like(x))
    with pytest.raises(OverflowError):
        ufunc(np.add, x, 1000, out=np.empty_like(x))


# ---- aliasing and layouts -------------------------------------------------------------------------

def test_in_place_chains_and_an_output_that_is_an_input():
    rng = np.random.default_rng(0)
    a0, b, c = rng.standard_normal(500), rng.standard_normal(500), rng.standard_normal(500)

    def make():
        a = a0.copy()
        specs = [(np.multiply, (a, b), dict(out=a)), (np.add, (a, c), dict(out=a)),
                 (np.subtract, (a, a), dict(out=c.copy())), (np.maximum, (a, a), dict(out=a))]
        d = specs[2][2]["out"]

        def ref(r):
            np.multiply(r[0], b, out=r[0]), np.add(r[0], c, out=r[0])
            np.subtract(r[0], r[0], out=r[1]), np.maximum(r[0], r[0], out=r[0])
        return specs, [a, d], ref
    run_both(make, launches=3)


def test_two_nodes_writing_overlapping_views_of_one_array():
    def make():
        e = np.arange(60.0).reshape(6, 10)
        src = np.linspace(0.0, 1.0, 54).reshape(6, 9)
        specs = [(np.add, (src, 1.0), dict(out=e[:, 1:])),      # writes columns 1..9
                 (np.multiply, (src, 3.0), dict(out=e[:, :-1])),  # then 0..8: overlap, shifted
                 (np.subtract, (e[:, 1:], e[:, :-1]), dict(out=src))]

        def ref(r):
            (ee, s) = r
            np.add(s, 1.0, out=ee[:, 1:]), np.multiply(s, 3.0, out=ee[:, :-1])
            np.subtract(ee[:, 1:], ee[:, :-1], out=s)
        return specs, [e, src], ref
    run_both(make, launches=2)


def test_a_node_reads_a_view_that_a_later_node_writes_shifted():
    def make():
        e = np.arange(48.0).reshape(4, 12) * 0.5
        t = np.zeros((4, 11))
        specs = [(np.multiply, (e[:, 1:], 2.0), dict(out=t)),          # reads e[:, 1:]
                 (np.add, (t, 1.0), dict(out=e[:, :-1])),            # then writes e[:, :-1]
                 (np.negative, (e[:, :-1],), dict(out=t))]

        def ref(r):
            ee, tt = r
            np.multiply(ee[:, 1:], 2.0, out=tt), np.add(tt, 1.0, out=ee[:, :-1])
            np.negative(ee[:, :-1], out=tt)
        return specs, [e, t], ref
    run_both(make, launches=2)


LAYOUTS = {
    "negative strides": lambda base: base[::-1, ::-1],
    "non-contiguous rows": lambda base: base[:, ::3],
    "fortran": lambda base: np.asfortranarray(base),
    "view of a view": lambda base: base[1:, :][:, 2:][::2],
    "frombuffer": lambda base: np.frombuffer(bytearray(base.tobytes()), dtype=base.dtype).reshape(base.shape),
    "one element": lambda base: base[:1, :1],
    "one row": lambda base: base[:1],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_odd_layouts_of_written_and_read_arrays(layout):
    def make():
        base = np.random.default_rng(7).standard_normal((20, 15))
        x = LAYOUTS[layout](base.copy())
        w = LAYOUTS[layout](base.copy() * 2)
        r = np.broadcast_to(np.float64(0.25), x.shape)          # a zero-stride read
        specs = [(np.multiply, (x, r), dict(out=w)), (np.add, (w, x), dict(out=w)),
                 (np.square, (w,), dict(out=x))]

        def ref(rr):
            xx, ww = rr
            np.multiply(xx, r, out=ww), np.add(ww, xx, out=ww), np.square(ww, out=xx)
        return specs, [x, w], ref
    # a Fortran-ordered array's samples interleave with one another's rows: no fused run forms
    run_both(make, launches=2, fuse=4, expect_compiled=layout != "fortran")


def test_a_row_read_at_every_sample_with_a_zero_stride_and_a_0d_operand_first():
    def make():
        x = np.random.default_rng(1).standard_normal((30, 7))
        row = np.broadcast_to(np.linspace(-1.0, 1.0, 7), x.shape)   # sample stride 0
        zero_d = np.array(1.5)
        a, b = np.zeros_like(x), np.zeros_like(x)
        specs = [(np.add, (row, x), dict(out=a)), (np.multiply, (zero_d, a), dict(out=b)),
                 (np.maximum, (b, row), dict(out=b)), (np.subtract, (zero_d, b), dict(out=a))]

        def ref(r):
            np.add(row, x, out=r[0]), np.multiply(zero_d, r[0], out=r[1])
            np.maximum(r[1], row, out=r[1]), np.subtract(zero_d, r[1], out=r[0])
        return specs, [a, b], ref
    run_both(make, launches=1, fuse=4)


def test_a_byte_swapped_array_stays_out():
    x = np.arange(64.0).astype(">f8")
    node = ufunc(np.add, x, 1.0, out=np.empty(64))
    assert codegen.why_not(node) is not None


# ---- the cache and the compiler ---------------------------------------------------------------------

def small(**options):
    g, bits = small_graph(**options)
    assert bits == reference_bits()
    return g


def test_a_cache_folder_that_cannot_be_written_runs_the_nodes(tmp_path, monkeypatch):
    # (root ignores a folder's mode bits: the refusal is made by the temporary file's creation)
    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied", str(tmp_path))
    monkeypatch.setattr(c_compiler.tempfile, "mkstemp", refuse)
    with pytest.warns(RuntimeWarning, match="Permission denied"):
        g = small(codegen=True)
    assert "not compiled: " in str(g.plan())


def test_a_cache_folder_that_is_a_file_runs_the_nodes(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("EAGLE_CACHE_DIR", str(tmp_path / "afile"))
    with pytest.warns(RuntimeWarning, match="cache folder"):
        g = small(codegen=True)
    assert "not compiled: " in str(g.plan())


def build_in_a_child(tmp_path, folder):
    env = dict(os.environ, EAGLE_CACHE_DIR=str(folder))
    done = subprocess.run([sys.executable, "-c", THREE], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def replace_file(path, data):
    # a new file renamed over the cached one: a library loaded from the old one stays whole
    with open(path + ".new", "wb") as f:
        f.write(data)
    os.replace(path + ".new", path)


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "foreign"])
def test_a_damaged_cached_library_is_compiled_again(tmp_path, damage):
    folder = tmp_path / "shared-cache"
    build_in_a_child(tmp_path, folder)
    [name] = os.listdir(folder / "codegen")
    path = str(folder / "codegen" / name)
    data = open(path, "rb").read()
    if damage == "foreign":   # a library that loads, without the generated function
        other = tmp_path / "other.c"
        other.write_text("int something_else(void) { return 1; }\n")
        subprocess.run(c_compiler.compiler() + ["-shared", "-fPIC", "-o", str(tmp_path / "other.so"),
                                                str(other)], check=True)
        bad = (tmp_path / "other.so").read_bytes()
    else:
        bad = {"truncated": data[:len(data) // 3], "empty": b"", "garbage": os.urandom(4096)}[damage]
    replace_file(path, bad)
    build_in_a_child(tmp_path, folder)   # compiled again (THREE asserts the plan says so)
    assert os.listdir(folder / "codegen") == [name]
    assert open(path, "rb").read() != bad


def test_a_hung_compiler_is_given_up_and_its_children_are_ended(tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    cc = fake_compiler(tmp_path, f'sleep 300 &\necho $! > "{pid_file}"\nwait')
    monkeypatch.setenv("EAGLE_CC", cc)
    monkeypatch.setattr(c_compiler, "TIMEOUT_S", 1)
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match="could not run"):
        g = small(codegen=True)
    assert time.monotonic() - start < 60
    assert "not compiled: " in str(g.plan())
    pid = int(pid_file.read_text())
    if not pid_ended(pid):
        os.kill(pid, 9)
        pytest.fail("the hung compiler's child still runs")


def test_a_compiler_that_prints_warnings_still_compiles(tmp_path, monkeypatch):
    real = c_compiler.compiler()[0]
    cc = fake_compiler(tmp_path, f'echo "warning: this is only a warning" >&2\nexec "{real}" "$@"')
    monkeypatch.setenv("EAGLE_CC", cc)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = small(codegen=True)
    assert "; compiled:" in str(g.plan())


def test_eagle_cc_with_arguments(tmp_path, monkeypatch):
    real = c_compiler.compiler()[0]
    log = tmp_path / "args"
    wrapper = fake_compiler(tmp_path, f'echo "$1" > "{log}"\nshift\nexec "{real}" "$@"')
    monkeypatch.setenv("EAGLE_CC", f"{wrapper} --first-arg")   # as "ccache gcc" is
    g = small(codegen=True)
    assert "; compiled:" in str(g.plan())
    assert log.read_text().strip() == "--first-arg"


def test_identical_graphs_built_from_two_threads_at_once():
    errors, plans = [], []

    def build():
        try:
            plans.append(str(small(codegen=True).plan()))
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=build) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(plans) == 2 and all("; compiled:" in p for p in plans)
    assert len(os.listdir(c_compiler.cache_dir())) == 1


THREE = r"""
import numpy as np, eagle
from eagle.graph import ufunc
x = np.linspace(-2.0, 2.0, 600)
a = np.empty_like(x)
g = eagle.Graph()
g.add_node(ufunc(np.multiply, x, 0.1, out=a))
g.add_node(ufunc(np.add, a, x, out=a))
g.build(cpu=eagle.CpuOptions(fuse=64, codegen=True))
g.launch(1)
assert "; compiled:" in str(g.plan()) and a.tobytes() == (x * 0.1 + x).tobytes()
"""


def test_three_processes_build_the_same_graph_at_once(tmp_path):
    env = dict(os.environ, EAGLE_CACHE_DIR=str(tmp_path / "cache3"))
    procs = [subprocess.Popen([sys.executable, "-c", THREE], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    assert len(os.listdir(tmp_path / "cache3" / "codegen")) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_after_a_compiled_launch(threads):
    threads(1)   # a forked child of an OpenMP process may only use one thread
    x = np.linspace(-2.0, 2.0, 600)
    a = np.zeros_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 0.1, out=a))
    g.add_node(ufunc(np.add, a, x, out=a))
    g.build(cpu=eagle.CpuOptions(fuse=64, codegen=True))
    assert is_compiled(g)
    g.launch(1)
    pid = os.fork()
    if pid == 0:
        try:
            a[:] = 0
            g.launch(1)
            os._exit(0 if a.tobytes() == (x * 0.1 + x).tobytes() else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_graph_freed_while_another_shares_its_library():
    import gc
    g1, g2 = small(codegen=True), small(codegen=True)   # one library, loaded once
    del g1
    gc.collect()
    for _ in range(2):
        small(codegen=True)
    gc.collect()
    g2.launch(2)   # small() checked the bits of each; g2 still calls the shared function
    assert "; compiled:" in str(g2.plan())


# ---- sizes -----------------------------------------------------------------------------------

def test_logical_size_zero_one_capacity_and_back():
    x = np.linspace(-1.0, 1.0, 3000).reshape(1000, 3)
    t, y = np.zeros_like(x), np.zeros_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 3.0, out=t))
    g.add_node(ufunc(np.add, t, x, out=t))
    g.add_node(ufunc(np.absolute, t, out=y))
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=16))
    assert is_compiled(g)
    ref = np.abs(x * 3.0 + x)
    for n in [0, 1, 1000, 0, 999, 1, 1000]:
        y[:] = 0
        g.set_logical_size(n)
        g.launch(1)
        assert y[:n].tobytes() == ref[:n].tobytes() and not y[n:].any(), n


def pid_ended(pid, tries=200):
    for _ in range(tries):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1][0] == "Z":   # a zombie awaiting init: ended
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


COMPILING = r"""
import os, sys, threading, time
import numpy as np, eagle
from eagle.graph import ufunc
x = np.linspace(-2.0, 2.0, 600)
a = np.empty_like(x)
g = eagle.Graph()
g.add_node(ufunc(np.multiply, x, 0.1, out=a))
g.add_node(ufunc(np.add, a, x, out=a))
def watch():   # ready once the compiler's child runs
    while not (os.path.exists(sys.argv[1]) and os.path.getsize(sys.argv[1])):
        time.sleep(0.01)
    print("ready", flush=True)
threading.Thread(target=watch, daemon=True).start()
try:
    g.build(cpu=eagle.CpuOptions(fuse=64, codegen=True))
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_ctrl_c_while_the_compiler_runs_ends_the_compiler(tmp_path):
    import ctrl_c
    pid_file = tmp_path / "child.pid"
    cc = fake_compiler(tmp_path, f'sleep 300 &\necho $! > "{pid_file}"\nwait')
    env = ctrl_c.child_env(EAGLE_CC=cc, EAGLE_CACHE_DIR=str(tmp_path / "cache"))
    res = ctrl_c.interrupt(["-c", COMPILING, str(pid_file)], env=env, after_s=0.2)
    assert res.returncode == 0, res.err
    assert res.lines[-1] == "interrupted", res.lines
    pid = int(pid_file.read_text())
    if not pid_ended(pid):
        os.kill(pid, 9)
        pytest.fail("the compiler's child outlived Ctrl-C")
    assert [f for f in os.listdir(tmp_path / "cache" / "codegen")] == []


def test_rebuilt_and_resized_from_another_thread_between_launches():
    x = np.linspace(-1.0, 1.0, 6000).reshape(2000, 3)
    t, y = np.zeros_like(x), np.zeros_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 3.0, out=t))
    g.add_node(ufunc(np.add, t, x, out=t))
    g.add_node(ufunc(np.absolute, t, out=y))
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=16))
    errors, stop = [], threading.Event()

    def launcher():
        try:
            while not stop.is_set():
                g.launch(2)
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)
    th = threading.Thread(target=launcher)
    th.start()
    try:
        for k in range(12):
            if k % 3 == 2:
                g.set_logical_size([0, 1, 2000, 999][k % 4])
            else:
                g.build(cpu=eagle.CpuOptions(codegen=[True, False][k % 2], fuse=[16, 64, 1][k % 3]))
            time.sleep(0.005)
    finally:
        stop.set()
        th.join()
    assert not errors
    g.set_logical_size(2000)
    g.launch(1)
    assert y.tobytes() == np.abs(x * 3.0 + x).tobytes() and t.tobytes() == (x * 3.0 + x).tobytes()


def test_launch_until_done_with_compaction_around_a_compiled_run():
    from eagle.graph import compact

    def run(codegen_on):
        rng = np.random.default_rng(11)
        n = 5000
        x = rng.random(n)
        v = rng.random(n) * 0.3
        alive = np.ones(n, dtype=bool)
        g = eagle.Graph()
        g.add_node(ufunc(np.multiply, x, 1.1, out=x))
        g.add_node(ufunc(np.add, x, v, out=x))
        g.add_node(ufunc(np.less, x, 5.0, out=alive))   # not compiled: ends the group
        node = compact(alive, {"x": x, "v": v})
        g.add_node(node)
        g.build(cpu=eagle.CpuOptions(codegen=codegen_on, fuse=64))
        assert is_compiled(g) == codegen_on, str(g.plan())
        done = [g.launch_until_done(7) for _ in range(6)]
        return done, g.logical_size, x.tobytes(), v.tobytes(), node.ids.tobytes()
    assert run(True) == run(False)


@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_a_compiled_run_launched_beside_a_thread_reading_its_plan_and_resizing_it(threads, teams):
    from meddling import launched_beside_meddling
    threads(2)
    n = 40_000
    x, y, z = np.ones(n), np.zeros(n), np.zeros(n)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, y, x, out=y))
    g.add_node(ufunc(np.multiply, y, 2.0, out=z))
    g.build(cpu=eagle.CpuOptions(codegen=True, fuse=256, teams=teams))
    assert is_compiled(g)
    launched_beside_meddling(g, y)
    assert z.tobytes() == (y * 2.0).tobytes()


def test_a_new_compiler_behind_a_launcher_is_not_served_the_old_library(tmp_path, monkeypatch):
    # EAGLE_CC="ccache gcc": the library cached for the old gcc must not be loaded for a new one
    real = c_compiler.compiler()[0]
    calls = tmp_path / "calls"
    launcher = tmp_path / "launcher"
    launcher.write_text(f'#!/bin/sh\necho x >> "{calls}"\nexec "$@"\n')
    launcher.chmod(0o755)
    behind = tmp_path / "bin" / "the-cc"
    behind.parent.mkdir()
    behind.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
    behind.chmod(0o755)
    monkeypatch.setenv("PATH", f"{behind.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EAGLE_CC", f"{launcher} the-cc")
    small(codegen=True)
    monkeypatch.setattr(c_compiler, "_loaded", {})   # as in a new process
    small(codegen=True)
    assert len(calls.read_text().split()) == 1       # the same compiler: served from the cache
    behind.write_text(f'#!/bin/sh\n# upgraded\nexec "{real}" "$@"\n')
    monkeypatch.setattr(c_compiler, "_loaded", {})
    g = small(codegen=True)
    assert "; compiled:" in str(g.plan())
    assert len(calls.read_text().split()) == 2       # compiled again, by the new one
