"""Ufunc nodes cast as NumPy casts (its default casting) and take NumPy's where=:
every result is NumPy's own ``uf(*operands, out=out, where=mask)`` over the same arrays."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle.graph import ufunc

# (ufunc, input dtypes, output dtype): pairs NumPy's default casting accepts with a cast
PAIRS = [
    (np.add, ("i8", "?"), "i8"),            # age + alive: bool cast to the int64 loop
    (np.add, ("i4", "f4"), "f8"),           # loop f8 (int32 + float32), inputs cast
    (np.add, ("f4", "f8"), "f8"),
    (np.multiply, ("u1", "i1"), "i2"),      # uint8 * int8: the int16 loop
    (np.bitwise_and, ("?", "?"), "?"),      # no cast: the bool loop through the plain path
    (np.logical_and, ("?", "?"), "f8"),     # bool result widened into float64
    (np.add, ("i2", "i2"), "i8"),           # out wider than the loop
    (np.add, ("f8", "f8"), "f4"),           # out needs a same_kind (narrowing) cast
    (np.add, ("i8", "i8"), "i1"),           # wraps as NumPy's cast does
    (np.multiply, ("c8", "f8"), "c16"),     # complex
    (np.subtract, ("f2", "f4"), "f2"),      # half
    (np.sqrt, ("i4",), "f8"),               # unary: the int input cast to a float loop
    (np.add, (">f8", "<i4"), ">f8"),        # byte order: swapped in and out
    (np.add, ("m8[s]", "m8[ms]"), "m8[us]"),  # datetime units converted as NumPy does
]


def values(dt, n, rng):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -100, 100, n).astype(dt)
    if dt.kind == "m":
        return rng.integers(-1000, 1000, n).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    x = rng.standard_normal(n) * 10
    return x.astype(dt)


def run(node, size=None, replays=1):
    g = eagle.Graph()
    g.add_node(node, name="u")
    if size is not None:
        g.set_logical_size(size)
    g.build()
    g.launch(replays)
    return g


def layout(a, how):
    """The same values in another memory layout: a strided view, a reversed view."""
    if how == "plain":
        return a
    if how == "strided":
        buf = np.zeros(2 * len(a), a.dtype)
        buf[::2] = a
        return buf[::2]
    buf = a[::-1].copy()
    return buf[::-1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(PAIRS), n=st.sampled_from([0, 1, 7, 1001, 20_011]),
       nthreads=st.sampled_from([1, 2]), how=st.sampled_from(["plain", "strided", "reversed"]),
       masked=st.sampled_from([None, "array", "named", "0d", True, False]), seed=st.integers(0, 3))
def test_casts_and_masks_give_numpys_result(threads, case, n, nthreads, how, masked, seed):
    threads(nthreads)
    uf, ins, out_dt = case
    rng = np.random.default_rng(seed)
    operands = [layout(values(d, n, rng), how) for d in ins]
    out = layout(values(out_dt, n, rng), how)
    want = out.copy()
    kw = {}
    if masked in ("array", "named", "0d"):
        m = rng.integers(0, 2, n).astype(bool) if masked != "0d" else np.array(bool(seed % 2))
        kw["where"] = {"mask": m} if masked == "named" else m
        mask = m
    elif masked is not None:
        kw["where"] = mask = masked
    else:
        mask = True
    with np.errstate(all="ignore"):
        uf(*operands, out=want, where=mask)
        run(ufunc(uf, *operands, out=out, **kw))
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("uf", [np.logical_and, np.logical_or, np.logical_xor])
def test_logical_ufuncs_take_any_input_dtype_as_numpy_does(uf):
    """A logical ufunc's bool loop takes float, complex and datetime inputs (its own casting
    rule; a 'same_kind' iterator refuses a float into bool): every pair NumPy accepts."""
    rng = np.random.default_rng(5)
    kinds = ["?", "i1", "u8", "f2", ">f8", "c8", "m8[s]"]
    for a in kinds:
        for b in kinds:
            x, y = values(a, 301, rng), values(b, 301, rng)
            m = rng.integers(0, 2, 301).astype(bool)
            out, want = np.zeros(301, "f4"), np.zeros(301, "f4")
            uf(x, y, out=want, where=m)
            run(ufunc(uf, {"x": x}, {"y": y}, out={"out": out}, where={"m": m}))
            np.testing.assert_array_equal(out, want, err_msg=f"{uf.__name__}({a}, {b})")


def test_the_issue_case_age_plus_alive(threads):
    threads(2)
    age, alive = np.arange(10_001, dtype=np.int64), np.arange(10_001) % 3 == 0
    out = np.zeros(10_001, np.int64)
    node = ufunc(np.add, {"age": age}, {"alive": alive}, out={"age_next": out})
    assert node.loop_dtypes == (np.dtype("i8"),) * 3 and node.loop.through_iterator
    g = run(node, replays=3)
    np.testing.assert_array_equal(out, age + alive)
    assert list(node.reads) == ["age", "alive"]
    # the plain path stays for operands of the loop's dtypes
    assert not ufunc(np.add, age, age, out=out).loop.through_iterator
    assert "age" in str(g)


def test_scalar_operands_and_0d_arrays_with_a_cast():
    x = np.arange(-5, 6, dtype=np.int16)
    out = np.zeros(11)
    p = np.array(2, np.int8)                 # a 0-d operand, read on every replay
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, p, out=out))
    g.add_node(ufunc(np.add, out, 0.5, out=out))
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(out, x * 2 + 0.5)
    p[()] = 3
    g.launch(1)
    np.testing.assert_array_equal(out, x * 3 + 0.5)


def test_in_place_with_a_cast_and_a_mask(threads):
    threads(2)
    x = np.linspace(-3, 3, 9001).astype(np.float32)
    want = x.copy()
    m = x > 0
    np.add(want, 1, out=want, where=m)
    run(ufunc(np.add, {"x": x}, np.int64(1), out={"x": x}, where=m))
    np.testing.assert_array_equal(x, want)        # float32 + int64 scalar: float64 loop, cast back


def test_logical_size_limits_the_cast_range():
    x = np.arange(100, dtype=np.int32)
    out = np.full(100, -1.0)
    run(ufunc(np.add, x, 0.5, out=out), size=37, replays=2)
    np.testing.assert_array_equal(out[:37], x[:37] + 0.5)
    assert (out[37:] == -1.0).all()


def test_nd_rows_with_a_per_sample_mask(threads):
    threads(2)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((501, 4)).astype(np.float32)
    out = np.zeros((501, 4))
    m = rng.integers(0, 2, (501, 1)).astype(bool)
    want = out.copy()
    np.multiply(a, 3, out=want, where=m)
    run(ufunc(np.multiply, a, 3, out=out, where=m))
    np.testing.assert_array_equal(out, want)
    full = rng.integers(0, 2, (501, 4)).astype(bool)
    want2 = out.copy()
    np.negative(a, out=want2, where=full)
    run(ufunc(np.negative, a, out=out, where=full))
    np.testing.assert_array_equal(out, want2)


def test_the_mask_is_a_read_of_the_node():
    x, y, m = np.ones(8), np.zeros(8), np.zeros(8, bool)
    g = eagle.Graph()
    g.add_node(eagle.graph.opaque(lambda: m.__setitem__(slice(None, None, 2), True),
                                  writes={"m": m}), name="flags")
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"y": y}, where={"m": m}), name="add")
    assert ("flags", "add", "m") in g.dependencies
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(y, [2, 0] * 4)


def test_what_numpy_refuses_is_refused_at_record_time():
    x, out = np.zeros(4), np.zeros(4)
    for bad in (np.array([1, 0, 1, 0]), np.zeros(4), np.array([True, False] * 2, dtype=object)):
        with pytest.raises(TypeError):
            np.add(x, 1, out=out, where=bad)                         # NumPy refuses it ...
        with pytest.raises(TypeError, match="mask .* casting='safe'"):
            ufunc(np.add, x, 1, out=out, where=bad)                  # ... and so does eagle
    with pytest.raises(ValueError, match="mask 'where' has shape \\(5,\\)"):
        ufunc(np.add, x, 1, out=out, where=np.ones(5, bool))
    with pytest.raises(ValueError, match="mask 'w' has shape \\(4,\\)"):
        ufunc(np.add, np.zeros((4, 3)), 1, out=np.zeros((4, 3)), where={"w": np.ones(4, bool)})
    with pytest.raises(TypeError, match="casting='same_kind'"):
        ufunc(np.add, np.zeros(4), 1, out=np.zeros(4, np.int64))     # float into int
    with pytest.raises(TypeError, match="casting='same_kind'"):
        ufunc(np.add, np.zeros(4, np.complex128), 1, out=np.zeros(4))   # complex into float
    with pytest.raises(TypeError, match="generalized ufunc"):
        ufunc(np.matmul, np.zeros((4, 2, 2)), np.zeros((4, 2, 2)), out=np.zeros((4, 2, 2)),
              where=np.ones(4, bool))
    with pytest.raises(TypeError, match="casts the operands of an elementwise ufunc"):
        ufunc(np.matmul, np.zeros((4, 2, 2), np.float32), np.zeros((4, 2, 2)), out=np.zeros((4, 2, 2)))


def test_numpy_accepts_a_scalar_mask_of_any_type():
    out = np.zeros(4)
    run(ufunc(np.add, np.ones(4), 1, out=out, where=0))
    np.testing.assert_array_equal(out, 0)
    run(ufunc(np.add, np.ones(4), 1, out=out, where=np.int64(2)))
    np.testing.assert_array_equal(out, 2)


_MANY_THREADS = """
import ctypes
import numba, numpy as np, eagle
usleep = ctypes.CDLL(None).usleep
usleep.argtypes, usleep.restype = [ctypes.c_uint], ctypes.c_int

@numba.vectorize(["int64(int64, int64)"])
def slow_add(a, b):
    usleep(20000)   # every thread holds its iterator while the others start theirs
    return a + b

eagle.set_num_threads(300)
n = 300 * 2
age, alive = np.arange(n, dtype=np.int64), np.arange(n) % 3 == 0
out = np.zeros(n, np.int64)
m = np.arange(n) % 5 != 0
g = eagle.Graph()
g.add_node(eagle.graph.ufunc(slow_add, {"age": age}, {"alive": alive}, out={"out": out},
                             where={"m": m}), name="age")
g.build(cpu=eagle.CpuOptions(teams="parallel"))
g.launch(2)
want = np.zeros(n, np.int64)
np.add(age, alive, out=want, where=m)
assert eagle.get_num_threads() == 300
assert np.array_equal(out, want)
print("ok")
"""


def test_a_cast_node_runs_on_a_team_of_more_than_256_threads(tmp_path):
    """On a machine of 38+ CPUs eagle allows teams past 256 threads (8 per CPU, up to 1024);
    every thread of the team may run a casting node at once, each with its own iterator."""
    lib = tmp_path / "many_cpus.so"
    src = Path(__file__).parents[1] / "doubles" / "many_cpus.c"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), "-ldl"], check=True)
    # after what is preloaded already (tests/sanitize.sh: the ASan runtime, which comes first)
    preload = f"{os.environ['LD_PRELOAD']}:{lib}" if os.environ.get("LD_PRELOAD") else str(lib)
    env = dict(os.environ, LD_PRELOAD=preload, EAGLE_FAKE_CPUS="64", PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("OMP_THREAD_LIMIT", None)
    r = subprocess.run([sys.executable, "-c", _MANY_THREADS], env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
