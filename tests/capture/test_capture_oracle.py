"""The random-program oracle of capture: hypothesis draws small NumPy programs over
overlapping views, empty ones among them (ufuncs with and without out=, in-place operators,
where=, np.where, np.clip, casts, exact reductions, assignments between overlapping slices)
and checks that capturing and replaying a program gives, bit for bit, what calling it eagerly
gives.

Some statements name temporaries (``d = ...``), read again, through other views, or for
the last time by an op that makes another (which then takes their memory:
``eagle.stepcapture.reuse``); the programs' arrays are small, so the pool's threshold for
reusing a buffer is lifted while they are captured (``small_buffers_reused``): every dead
temporary's buffer is reused, and the order that adds is exercised."""
import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import eagle
from eagle.stepcapture import pool

N = 12
FLOATS = ["x", "y", "z"]

# A zero tie: a float max or min over +0.0 and -0.0 returns either zero in NumPy, by length,
# stride and the CPU's vector width (here np.array([0.0, -0.0]).max() is -0.0, and reversed
# 0.0), and eagle's reduction over fixed blocks may return the other: the values are NumPy's,
# not that sign. The programs drawn here add 0.0 to each such result (-0.0 + 0.0 is 0.0,
# anything else stays as it is), so that what they compare bit for bit is defined.


@st.composite
def view(draw, length, name=None):
    name = name or draw(st.sampled_from(FLOATS))
    step = draw(st.sampled_from([1, 1, 2, -1]))
    if length == 0:                  # an empty view: x[5:5], x[5:5:-1], x[5:5:2]
        a = draw(st.integers(0, N))
        return f"{name}[{a}:{a}{'' if step == 1 else f':{step}'}]"
    if step == 1:
        a = draw(st.integers(0, N - length))
        return f"{name}[{a}:{a + length}]"
    if step == -1:
        a = draw(st.integers(length - 1, N - 1))
        stop = a - length
        return f"{name}[{a}:{'' if stop < 0 else stop}:-1]"
    a = draw(st.integers(0, N - 2 * length + 1)) if 2 * length - 1 <= N else 0
    return f"{name}[{a}:{a + 2 * length - 1}:2]" if 2 * length - 1 <= N else f"{name}[0:{length}]"


@st.composite
def statement(draw):
    n = draw(st.integers(0, 6))
    t, u, v = draw(view(n)), draw(view(n)), draw(view(n))
    c = draw(st.sampled_from(["0.5", "-2.0", "3", "1e300", "np.float32(1.5)"]))
    binop = draw(st.sampled_from(["+", "-", "*", "/"]))
    ufunc2 = draw(st.sampled_from(["np.add", "np.maximum", "np.minimum", "np.hypot", "np.copysign",
                                   "np.subtract"]))
    # correctly rounded ufuncs only: NumPy's own exp and sin differ by an ulp between their
    # SIMD loop and the strided one (np.exp(x[3:0:-1]) against np.exp of a contiguous copy,
    # 47 of 1000 values with AVX-512), so NumPy's buffered eager call and the replay's
    # unbuffered one could not be compared bit for bit
    ufunc1 = draw(st.sampled_from(["np.reciprocal", "np.ceil", "np.abs", "np.negative", "np.sqrt",
                                   "np.floor", "np.square"]))
    m = draw(view(n, "mask"))
    w = draw(view(n, "w"))
    kind = draw(st.integers(0, 21))
    return [
        f"{t}[...] = {u} {binop} {v}",
        f"{t} {binop}= {u}",
        f"{ufunc1}({u}, out={t})",
        f"{ufunc2}({u}, {v}, out={t})",
        f"{t}[...] = np.where({u} > {v}, {u}, {c})",
        f"{t}[...] = np.clip({u}, -0.5, 0.5)",
        f"{t} += {u}.max() - np.min({v}) + 0.0" if n else   # + 0.0: a zero tie (above)
        f"{t} += np.max({u}, initial=-1.0) - {v}.sum()",   # no max of an empty view: NumPy raises
        f"{t}[...] = {u} * {c} + {ufunc1}({v})",
        f"np.add({u}, {v}, out={t}, where={m})",
        f"{w}[...] = {u} * {c}",
        f"{t}[...] = {u}",
        f"{m}[...] = ({u} < {v}) | {m}",
        f"{t}[...] = {t} + np.count_nonzero({u} > 0)",
        f"{m}[...] = ({u} < {v}) & ~{m}",
        f"{ufunc1}({u} {binop} {v} * {c}, out={t})",   # the expression computed in t, unless it reads t
        # named temporaries: d read for the last time by the op that makes the next one, or not
        f"d = {u} {binop} {v}; {t} {binop}= {c} * d",
        f"d = {ufunc1}({u}); e = d * {v}; {t}[...] = e - d",                    # d read again
        f"d = np.zeros_like({u}); np.add({u}, {v}, out=d, where={m}); e = d * {c}; {t}[...] = {ufunc1}(e) + e",
        f"d = {u} * {c}; {t}[...] = d[::-1] {binop} d",                       # d through another view
        f"d = {ufunc1}({u}); e = {v} {binop} d; {t}[...] = e[::-1] + e",       # e through another view
        f"d = {u} + {v}; e = d * d; f = e {binop} {c}; {t}[...] = f * f",      # a chain of them
        f"e = {t} * {c}; f = e + {u}; {t}[...] = {ufunc1}(f) - f; {u} += e",   # e read after f is made
    ][kind]


@contextlib.contextmanager
def small_buffers_reused():
    """The pool reuses (and a dying temporary gives) buffers of any size, as it does those of
    ``REUSE_MIN_BYTES`` or more: the oracle's arrays are 12 elements."""
    saved, pool.REUSE_MIN_BYTES = pool.REUSE_MIN_BYTES, 0
    try:
        yield
    finally:
        pool.REUSE_MIN_BYTES = saved


def program_of(params, lines):
    """(source, function) of ``def program(<params>): <lines>``."""
    src = f"def program({', '.join(params)}):\n" + "".join(f"    {ln}\n" for ln in lines)
    env = {"np": np}
    exec(compile(src, "<program>", "exec"), env)
    return src, env["program"]


def run_program(params, lines, start, launches=2):
    """Capture ``def program(<params>): <lines>`` on copies of ``start`` and replay it
    ``launches`` times beside as many eager calls: (source, eager arrays, replayed arrays)."""
    src, program = program_of(params, lines)
    eager, mine = [a.copy() for a in start], [a.copy() for a in start]
    try:
        with small_buffers_reused():
            g = eagle.capture(program, *mine)
    except eagle.CaptureError as e:
        # NumPy's in-order 1-d copy between overlapping views of different steps, and exp, log...
        # from a view partly overlapping the output (NumPy's loop over the views): refused
        assert "element by element, in order" in str(e) or "last bits differ" in str(e), str(e)
        assume(False)
    g.build()
    with np.errstate(all="ignore"):
        for _ in range(launches):
            program(*eager)
            g.launch(1)
    return src, eager, mine


def run_eager_and_captured(lines, launches=2):
    r = np.random.default_rng(len("".join(lines)))
    start = [r.standard_normal(N), r.standard_normal(N), r.standard_normal(N),
             r.standard_normal(N).astype(np.float32), r.random(N) < 0.5]
    return run_program(["x", "y", "z", "w", "mask"], lines, start, launches)


def assert_replays_as_called(names, src, eager, mine):
    """Every array of the program the same, bit for bit, eager and replayed."""
    for name, a, b in zip(names, eager, mine):
        assert same_bits(a, b), f"{name} differs after\n{src}\neager {a}\nreplay {b}"


def same_bits(a, b):
    """Equal bit for bit, NaNs aside: a NaN's sign and payload are not NumPy's contract (the
    reduction node keeps NumPy's value, not which of several NaNs it was)."""
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        if not np.array_equal(nan, np.isnan(b)):
            return False
        a, b = np.where(nan, 0, a), np.where(nan, 0, b)
    return a.tobytes() == b.tobytes()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statement(), min_size=1, max_size=6))
def test_replay_is_the_eager_call_bit_for_bit(lines):
    assert_replays_as_called(["x", "y", "z", "w", "mask"], *run_eager_and_captured(lines))


def test_the_reuse_variant_reuses():
    lines = ["x[...] = y * 2.0 + np.exp(z)", "y[0:4] = np.where(x[0:4] > z[2:6], x[4:8], 0.5)",
             "z[3:3] = x[1:1] * 2.0", "z[0:6] = y[0:6] * 3 + np.sin(x[0:6])"]
    with small_buffers_reused():
        src, eager, mine = run_eager_and_captured(lines)
        g = eagle.capture(program_of(["x", "y", "z", "w", "mask"], lines)[1], *[a.copy() for a in mine])
    assert len({t.buffer for t in g.temporaries}) < len(g.temporaries)
    assert_replays_as_called("xyz", src, eager, mine)


@pytest.mark.parametrize("line", [
    "np.exp(y[0:2] + x[0:2] * 0.5, out=x[10:8:-1])",      # found by the oracle
    "np.exp(x[2:3] * x[4:5] * np.float32(1.5), out=x[1:0:-1])",
    "x[3:2:-1] = np.exp(y[5:4:-1])", "y[::-1] = np.exp(x * 0.25)", "y[...] = np.exp(x[::-1]) * 2",
    "x[8:2:-2] = np.log(np.abs(y[::2][:3]) + 1.0)", "np.exp(y[::-1], out=y[::-1])"])
def test_exp_and_log_get_the_steps_of_the_eager_call(line):
    # NumPy's float64 exp and log take a vector code path by the steps they are handed (the
    # output's above all): a captured op over other views than the eager call's, or handed
    # other steps, gave other last bits
    for seed in range(40):
        r = np.random.default_rng(seed)
        start = [r.standard_normal(N) * 5, r.standard_normal(N) * 5]
        assert_replays_as_called("xy", *run_program(["x", "y"], [line], start))


def test_exp_from_a_view_overlapping_its_output_is_refused_with_the_way_out():
    # found by the oracle with every temporary reused: NumPy runs exp over the overlapping views
    # (its scalar path), a node ran it over a copy of the input (the vector path)
    def step(z):
        np.exp(z[0:9:2], out=z[0:5])
    with pytest.raises(eagle.CaptureError, match=r"np.exp: the input z\[0:9:2\] overlaps .*"
                                                 r"\(z\[0:9:2\].copy\(\)\)"):
        eagle.capture(step, np.arange(12.0))
    for seed in range(40):
        start = [np.random.default_rng(seed).standard_normal(N) * 5]
        assert_replays_as_called("z", *run_program(["z"], ["np.exp(z[0:9:2].copy(), out=z[0:5])"], start))
        # where NumPy copies the output, both contiguous, a copy of the input gives its steps
        assert_replays_as_called("z", *run_program(["z"], ["np.exp(z[0:5], out=z[2:7])"], start))


def test_an_in_order_numpy_copy_is_refused():
    def step(x):
        x[0:5:2] = x[0:3]          # NumPy: x[4] gets the x[2] it just wrote
    with pytest.raises(eagle.CaptureError, match=r"copy the source first \(x\[0:5:2\] = x\[0:3\].copy\(\)\)"):
        eagle.capture(step, np.arange(12.0))

    def fixed(x):
        x[0:5:2] = x[0:3].copy()
    a, b = np.arange(12.0), np.arange(12.0)
    eagle.capture(fixed, a).build().launch(1)
    fixed(b)
    assert same_bits(a, b)


def test_the_oracle_sees_buffering():
    # an overlapping in-place update that a replay without NumPy's buffering would get wrong
    assert_replays_as_called("xy", *run_eager_and_captured(["x[1:7] += x[0:6]", "y[0:6] = y[3:9] * 2.0"]))


# ---- 2-d programs: views of two matrices, transposed views, rows and columns broadcast ----

R, C = 5, 6


@st.composite
def view2(draw, h, w, name=None):
    name = name or draw(st.sampled_from(["P", "Q"]))
    if draw(st.booleans()):          # a transposed view: rows of the transpose are columns
        a, b = draw(st.integers(0, C - h)), draw(st.integers(0, R - w))
        return f"{name}.T[{a}:{a + h}, {b}:{b + w}]"
    a, b = draw(st.integers(0, R - h)), draw(st.integers(0, C - w))
    return f"{name}[{a}:{a + h}, {b}:{b + w}]"


@st.composite
def statement2(draw):
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    t, u, v = draw(view2(h, w)), draw(view2(h, w)), draw(view2(h, w))
    col = draw(view2(h, 1))
    row = f"{draw(st.sampled_from(['P', 'Q']))}[{draw(st.integers(0, R - 1))}, 0:{w}]"
    op = draw(st.sampled_from(["+", "-", "*"]))
    kind = draw(st.integers(0, 10))
    return [
        f"{t}[...] = {u} {op} {v}",
        f"{t} {op}= {u}",
        f"{t}[...] = {u} * 0.5 + {col}",
        f"{t}[...] = np.where({u} > {v}, {row}, {u})",
        f"{t} += {u}.max(axis=0) + 0.0",            # + 0.0: a zero tie (above)
        f"{t} -= {u}.max(axis=1, keepdims=True) + 0.0",
        f"{t}[...] = np.maximum({u}, {v}.min() + 0.0)",
        f"np.add(({u} {op} {v}) * 0.5, {u}, out={t})",
        # named temporaries (laid out as their operands, transposed ones too)
        f"D = {u} {op} {v}; {t} {op}= D * 0.5",
        f"D = {u} * 0.5; E = D {op} {v}; {t}[...] = E * E",
        f"D = {u} * 0.5; E = D {op} {col}; {t}[...] = E + E",    # E made by columns: D's memory kept
    ][kind]


def run_2d(lines, launches=2):
    r = np.random.default_rng(len("".join(lines)))
    return run_program(["P", "Q"], lines, [r.standard_normal((R, C)), r.standard_normal((R, C))], launches)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statement2(), min_size=1, max_size=5))
def test_2d_programs_replay_as_called(lines):
    assert_replays_as_called("PQ", *run_2d(lines))


def test_a_zero_tie_of_a_float_min_is_either_zero():
    # found drawing 2-d programs without the + 0.0: P[0, 0] becomes 0.0 and P[0, 2] -0.0, so the
    # min of P[0, 0:3] is a zero tie (above), which np.maximum passes on to Q[0, 0]
    P, Q = np.random.default_rng(4).standard_normal((2, R, C))
    P[0, 1], P[0, 2] = 0.7, -0.4
    lines = ["P[0:1, 0:1] -= P[0:1, 0:1].max(axis=1, keepdims=True)",
             "P[0:1, 2:3] *= P[0:1, 0:1]",
             "Q[0:1, 0:3][...] = np.maximum(P[0:1, 0:3], P[0:1, 0:3].min(){})"]
    src, eager, mine = run_program(["P", "Q"], [ln.format("") for ln in lines], [P, Q])
    assert eager[0][0, 2] == 0.0 and np.signbit(eager[0][0, 2]) and not np.signbit(eager[0][0, 0])
    for a, b in zip(eager, mine):
        assert np.array_equal(a, b), src          # the same values (a zero's sign aside)
    assert_replays_as_called("PQ", *run_program(["P", "Q"], [ln.format(" + 0.0") for ln in lines], [P, Q]))


# ---- 3-d programs: views of two cubes, any transpose, reductions over any axis ----

S = 4


@st.composite
def view3(draw, dims, name=None):
    name = name or draw(st.sampled_from(["A", "B"]))
    perm = draw(st.permutations(range(3)))
    starts = [draw(st.integers(0, S - d)) for d in dims]
    steps = [draw(st.sampled_from([1, 1, -1])) for _ in dims]
    key = ", ".join(f"{a}:{a + d}" if s == 1 else f"{a + d - 1}:{'' if a == 0 else a - 1}:-1"
                    for a, d, s in zip(starts, dims, steps))
    return f"{name}.transpose({', '.join(map(str, perm))})[{key}]"


@st.composite
def statement3(draw):
    dims = [draw(st.integers(1, S)) for _ in range(3)]
    t, u, v = draw(view3(dims)), draw(view3(dims)), draw(view3(dims))
    ax = draw(st.sampled_from(["0", "1", "2", "(0, 2)", "(1, 2)"]))
    one = draw(st.sampled_from(["0", "1", "2"]))
    op = draw(st.sampled_from(["+", "-", "*"]))
    kind = draw(st.integers(0, 5))
    return [
        f"{t}[...] = {u} {op} {v} * 0.5",
        f"{t} += {u}.max(axis={ax}, keepdims=True) + 0.0",           # + 0.0: a zero tie (above)
        f"{t} -= np.min({u}, axis={ax}, keepdims=True) + 0.0",
        # a sum of whole numbers: exact in any order (NumPy adds a reduced inner axis as its first
        # element plus the sum of the others, an outer one element after element: a float sum's
        # last bit is not compared, see test_float_sums_are_the_reduction_nodes_fixed_order)
        f"{t}[...] = np.floor({u} * 8.0).sum(axis={ax}, keepdims=True) {op} {v}",
        f"{t}[...] = np.where({u} > {v}, {u}.max(axis={ax}, keepdims=True) + 0.0, {v})",
        f"{t} *= ({u}.min(axis={one}, keepdims=True) > 0) + 0.5",
    ][kind]


def run_3d(lines, launches=2):
    r = np.random.default_rng(len("".join(lines)))
    return run_program(["A", "B"], lines, [r.standard_normal((S, S, S)), r.standard_normal((S, S, S))], launches)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statement3(), min_size=1, max_size=4))
def test_3d_programs_replay_as_called(lines):
    assert_replays_as_called("AB", *run_3d(lines))
