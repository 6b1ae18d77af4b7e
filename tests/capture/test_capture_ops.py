"""eagle.capture: each mapped NumPy operation, replayed, gives what the eager call gives (bit
for bit), as the nodes eagle already has, named after the step's line."""
import numpy as np
import pytest

import eagle
from eagle.graph import exponential, normal, opaque, ufunc, while_loop


def replay_equals_eager(step, *arrays, launches=1, exact=True):
    """Capture ``step`` on copies, replay, call ``step`` eagerly on other copies: the same."""
    eager = [a.copy() for a in arrays]
    mine = [a.copy() for a in arrays]
    g = eagle.capture(step, *mine)
    g.build()
    results = []
    for _ in range(launches):
        g.launch(1)
        results.append(step(*eager))
    for a, b in zip(mine, eager):
        if exact:
            np.testing.assert_array_equal(a, b, strict=True)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-13)
    return g, results[-1]


def line_of(fn, k):
    return fn.__code__.co_firstlineno + k


def rng_arrays(*shapes, seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal(s) for s in shapes]


def test_ufuncs_operators_and_in_place():
    def step(x, y, z):
        z[...] = np.exp(x) * 2.0 - y / 3
        y += x ** 2
        np.sin(x, out=x)
        z -= abs(y) + (-x)
    g, _ = replay_equals_eager(step, *rng_arrays(50, 50, 50), launches=3)
    assert g.nodes[0] == f"step:{line_of(step, 1)} np.exp"
    assert all(name.startswith("step:") for name in g.nodes)


def test_assigning_an_expression_writes_the_view_directly():
    def step(u, new):
        c = u[1:-1]
        new[1:-1] = c + 0.25 * (u[2:] + u[:-2] - 2.0 * c)
    g, _ = replay_equals_eager(step, *rng_arrays(40, 40), launches=4)
    # the last add writes new[1:-1] itself: no copy node, its temporary never written
    assert [n.split(" ")[1] for n in g.nodes] == ["np.add", "np.multiply", "np.subtract", "np.multiply",
                                                  "np.add"]
    assert "out=(new[1:-1])" in repr(g.recording().nodes[-1])
    assert all(t.name != "t5" for t in g.temporaries)


def test_an_expression_held_by_a_name_is_copied():
    def step(x, y):
        t = x + 1.0
        y[...] = t
        x[...] = t * 2.0
    g, _ = replay_equals_eager(step, *rng_arrays(20, 20), launches=2)
    assert any(n.endswith(" =") for n in g.nodes)


def test_overlapping_in_place_update_buffers_as_numpy():
    def step(a, b):
        a[1:] += a[:-1]
        b[:-1] = b[1:] * 2.0 + b[:-1]
        b[2:] = b[:-2]
    replay_equals_eager(step, *rng_arrays(30, 30), launches=3)


def test_broadcasting_and_casting():
    def step(m, v, i, out32):
        m[...] = m * v + i              # (n, k) * (k,) + int 0-d -> float64
        out32[...] = m[:, 0] * np.float32(0.5)   # float64 result cast into float32 (same_kind)
    r = np.random.default_rng(1)
    replay_equals_eager(step, r.standard_normal((6, 4)), r.standard_normal(4),
                        np.array(3), np.zeros(6, np.float32), launches=2)


def test_python_bool_scalars_and_any_all_of_numbers():
    # a Python bool is an operand as NumPy takes it (np.bool_), and x.any() / x.all() of a
    # number array reduce x != 0 (NumPy's cast to bool: NaN is True, -0.0 False)
    def step(b, x, i):
        return (b ^ True, b & False, np.logical_and(b, True), b + True, x * True, np.maximum(x, False),
                i * True, x.any(), x.all(), x[:2].any(), i.any(axis=1), i.T.all(axis=0),
                np.any(x, keepdims=True))
    b = np.array([True, False, True, True])
    x = np.array([0.0, -0.0, np.nan, 2.0])
    i = np.array([[0, 3], [0, 0]], np.int8)
    g, eager = replay_equals_eager(step, b, x, i)
    for got, want in zip(g.result, eager):
        np.testing.assert_array_equal(got, want, strict=not np.isscalar(want))
        assert np.asarray(got).dtype == np.asarray(want).dtype


def test_round_is_numpys_multiply_rint_divide():
    def step(x, f, i, o):
        np.round(x, 1, out=o)
        return (np.round(x), np.round(x, 2), x.round(-2), np.around(f, 3), f.round(), np.round(i),
                i.round(1), np.round(x[::-1], 3))
    r = np.random.default_rng(0)
    x = r.standard_normal(50) * 1000
    g, eager = replay_equals_eager(step, x, x.astype(np.float32), np.arange(-20, 30), np.zeros(50))
    for got, want in zip(g.result, eager):
        np.testing.assert_array_equal(got, want, strict=True)
    with pytest.raises(eagle.CaptureError, match="np.round of int64 to -1 decimals"):
        eagle.capture(lambda i: np.round(i, -1), np.arange(4))


def test_an_output_larger_than_the_inputs_takes_them_broadcast():
    def step(row, m):
        np.add(row, 1.0, out=m)            # (k,) into (n, k)
        np.multiply(2.0, 3.0, out=row)     # scalars only
    r = np.random.default_rng(2)
    replay_equals_eager(step, r.standard_normal(4), np.zeros((5, 4)))


def test_a_column_broadcast_within_the_rows_runs_column_by_column():
    def step(m, col):
        m += col                        # (n, k) + (n, 1): a row read with a zero step
        m[...] = m / m.sum(axis=1, keepdims=True)
    r = np.random.default_rng(3)
    g, _ = replay_equals_eager(step, r.random((6, 3)), r.random((6, 1)), launches=2, exact=False)
    assert f"step:{line_of(step, 1)} np.add [:, 2]" in g.nodes


def test_a_transposed_operand_beside_a_c_ordered_output_runs_line_by_line():
    def step(m, n):
        m += n.T                        # rows of n.T are columns of n
        n[:2] = m.T[:2] * 2.0           # two rows: split by row
    r = np.random.default_rng(4)
    g, _ = replay_equals_eager(step, r.random((3, 3)), r.random((3, 3)), launches=2)
    assert any(name.endswith("= [1]") for name in g.nodes)   # the copy into n[:2], row by row


@pytest.mark.parametrize("line", ["Y[...] = X.transpose(1, 0, 2) * 2.0", "Y[...] = X.transpose(2, 1, 0)[:4] + 1.0",
                                  "Y += X[:, :, :1]", "Y[...] = np.moveaxis(X, 2, 0)[:4].copy()"])
def test_3d_operands_laid_out_differently_run_line_by_line(line):
    # the 2-d rule in three dimensions: one node per line of the axes that make rows runs
    def step(X, Y):
        exec(line)
    X = np.random.default_rng(8).standard_normal((6, 6, 6))
    Y = np.random.default_rng(9).standard_normal((4 if "[:4]" in line else 6, 6, 6))
    g, _ = replay_equals_eager(step, X, Y, launches=2)
    assert 1 < len(g.nodes) <= 64 and any(n.endswith(" [0]") or n.endswith(" [0, 0]") for n in g.nodes)


def test_a_wide_broadcast_within_the_rows_is_refused_at_the_line():
    def step(m, col):
        m += col
    with pytest.raises(eagle.CaptureError, match=f"step, line {line_of(step, 1)} of test_capture_ops.py: `m \\+= col"):
        eagle.capture(step, np.ones((100, 100)), np.ones((100, 1)))


def test_where_clip_comparisons_and_masked_ufuncs():
    def step(x, y, flags):
        flags[...] = (x > 0) & ~(y < -0.5)
        y[...] = np.where(flags, x, -y)
        x[...] = np.clip(x, -0.3, 0.3)
        np.multiply(y, 10.0, out=y, where=flags)
        y[x == 0.3] = 7.0
        x[...] = np.where(x > 0.1, 1.0, 0)
    x, y = rng_arrays(64, 64)
    replay_equals_eager(step, x, y, np.zeros(64, bool), launches=2)


def test_reductions_map_to_reduction_nodes():
    def step(x, m, out):
        out[0] = x.max()
        out[1] = np.min(m)
        out[2] = np.count_nonzero(x > 0)
        out[3] = m.max(axis=1)[2]
        out[4] = np.abs(m[1:, :-1]).max()
        out[5] = np.any(x > 3) + np.all(m < 10)
    x, m = rng_arrays(100, (8, 9))
    g, _ = replay_equals_eager(step, x, m, np.zeros(6), launches=2)
    assert any("np.maximum.reduce" in n for n in g.nodes)
    assert any("np.add.reduce" in n for n in g.nodes)


def test_3d_reductions_replay_as_called():
    # an inner axis of a 3-d array keeps axes on both sides: one reduction node per line of
    # the kept axes, each over the reduced axis in NumPy's order (float sums over a strided
    # axis of up to 64 are NumPy's bits too: NumPy adds them one after another)
    def step(A, B, K):
        return (A.sum(axis=1), np.max(A, axis=2), np.min(B, axis=1, keepdims=True),
                K.sum(axis=1), A.transpose(2, 0, 1).max(axis=1), np.max(B, axis=(0, 2)),
                K.prod(axis=(1, 2)), (B > 0).any(axis=1))
    r = np.random.default_rng(3)
    A, B = r.standard_normal((4, 5, 6)), r.standard_normal((3, 40, 7)).astype(np.float32)
    K = r.integers(-9, 9, (6, 3, 4))
    g, eager = replay_equals_eager(step, A, B, K, launches=2)
    for got, want in zip(g.result, eager):
        np.testing.assert_array_equal(got, want, strict=True)
    first = [n for n in g.nodes if n.startswith(f"step:{line_of(step, 1)} np.add.reduce")]
    assert first == [f"step:{line_of(step, 1)} np.add.reduce [{i}]" for i in range(4)]


def test_a_3d_reduction_of_more_than_64_lines_is_refused_with_the_way_out():
    def step(A):
        return A.sum(axis=1)
    with pytest.raises(eagle.CaptureError, match=rf"line {line_of(step, 1)} .*takes 70\): reduce a copy"):
        eagle.capture(step, np.ones((80, 3, 70)))
    g = eagle.capture(step, np.ones((80, 3, 5)))     # the other kept axis: 5 lines
    assert len(g.nodes) == 5

    def moved(A):
        return np.moveaxis(A, 1, 0).copy().sum(axis=0)
    A = np.random.default_rng(1).standard_normal((80, 3, 5))
    g, eager = replay_equals_eager(moved, A)
    line = line_of(moved, 1)
    assert g.nodes == [f"moved:{line} copy [{i}]" for i in range(3)] + [f"moved:{line} np.add.reduce"]
    np.testing.assert_array_equal(g.result, eager, strict=True)
    np.testing.assert_array_equal(g.result, A.sum(axis=1), strict=True)


def test_float_sums_are_the_reduction_nodes_fixed_order():
    # a float sum is the reduction node's pairwise sum over fixed blocks: NumPy's by rounding
    def step(x, s):
        s[...] = x.sum() + x.mean()
    replay_equals_eager(step, *rng_arrays(10_000), np.zeros(()), exact=False)


def test_returned_temporary_is_the_result():
    def step(x):
        return np.sqrt(np.abs(x)).max(), x * 2
    x = rng_arrays(16)[0]
    g = eagle.capture(step, x)
    peak, twice = g.result
    g.build().launch(1)
    assert peak.shape == () and peak == np.sqrt(np.abs(x)).max()
    np.testing.assert_array_equal(twice, x * 2)


def test_an_expression_chain_computes_in_one_temporary():
    # NumPy's temporary elision: a temporary no name holds takes the next result
    def step(x, y):
        t = ((x + 1.0) * 2.0 + 3.0) * 4.0 - 1.0
        y[...] = t * t
    g, _ = replay_equals_eager(step, *rng_arrays(1000, 1000))
    assert len(g.temporaries) == 1 and "out=(y)" in repr(g.recording().nodes[-1])
    assert "temporaries:" in str(g)


def outputs(g):
    return [repr(node).split("out=(", 1)[1].split(")", 1)[0] for node in g.recording().nodes]


def test_an_expression_accumulates_in_its_destination():
    # as a hand-built graph: every node of the right-hand side writes the destination,
    # no temporary (b[1:-1] = ... of a Jacobi sweep; np.exp(vol * z + drift, out=w))
    def step(a, b, w):
        b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        np.exp(0.02 * a + 0.001, out=w)
        b[0:1] = np.where(a[0:1] > 0.0, a[0:1] * 2.0, -1.0)   # a masked write after a whole one
    g, _ = replay_equals_eager(step, *rng_arrays(100, 100, 100), launches=2)
    assert outputs(g)[:6] == ["b[1:-1]"] * 3 + ["w"] * 3
    assert outputs(g)[-2:] == ["b[0:1]"] * 2     # np.where's two writes, no copy after them
    assert [t.dtype for t in g.temporaries] == [bool, np.float64]  # its condition and operand


@pytest.mark.parametrize("line", [
    "y[1:] = (y[:-1] + x[1:]) * 2.0",          # the expression reads the destination's old values
    "y[...] = (x + 1.0) * y",
    "np.add(x * 2.0, y, out=y)",               # the last op reads its own output
    "np.add(x * 2.0, y[::-1], out=y)",         # ... through another view (buffered by NumPy)
    "f[...] = x * 2.0 + 1.0",                  # a cast into float32: computed in float64 first
    "m.T[...] = m * 2.0 + 1.0",                # a transposed destination reading its own array
    "m.T[...] = x[:36].reshape(6, 6) * 2.0 + 1.0",   # laid out the other way round
])
def test_an_expression_stays_in_a_temporary_where_its_destination_would_change_it(line):
    env = {"np": np}
    exec(f"def step(x, y, f, m):\n    {line}\n", env)
    x, y, m = rng_arrays(50, 50, (6, 6), seed=3)
    with np.errstate(all="ignore"):
        g, _ = replay_equals_eager(env["step"], x, y, x.astype(np.float32), m, launches=2)
    assert g.temporaries


def test_temporaries_written_in_their_destination_are_forgotten_alone():
    def step(u, new, z):
        c = u[1:-1]
        new[1:-1] = c + 0.25 * (u[2:] + u[:-2] - 2.0 * c)    # t1 computed in new[1:-1]; t2 = 2.0 * c stays
        z[...] = u * 2.0 + 1.0                               # t3 computed in z: forgotten, not t2
    g, _ = replay_equals_eager(step, *rng_arrays(40, 40, 40))
    assert [t.name for t in g.temporaries] == ["t2"] and g.temporary_bytes >= 38 * 8
    assert outputs(g).count("t2") == 1


def test_a_masked_first_write_is_not_moved_to_the_destination():
    # where x <= 0 the temporary keeps what it held (NumPy: uninitialized memory), not y's values
    def step(x, y):
        y[...] = np.add(x, 1.0, where=x > 0) * 2.0
    g = eagle.capture(step, *rng_arrays(20, 20))
    assert outputs(g) == ["t1", "t2", "y"]


def test_temporaries_are_reused_once_dead():
    # each temporary read last by an in-place op, which makes none: none gives its memory
    # to the next (below); the pool alone puts c in a's buffer and d in b's
    def step(x, y):
        a = x + 1.0
        b = a * 2.0
        b += a
        del a
        c = b + 3.0
        c += b
        del b
        d = c * 4.0
        d += c
        y[...] = d
    g, _ = replay_equals_eager(step, *rng_arrays(10_000, 10_000))   # 80 kB each: worth reusing
    buffers = {t.buffer for t in g.temporaries}
    assert len(buffers) == 2 < len(g.temporaries) == 4
    plan = str(g.plan())
    assert "temporaries: 4 in 2 buffers" in plan and "t4 10000 float64 in buffer" in plan


def test_a_chain_of_dying_temporaries_lives_in_one_buffer():
    # read element for element, each for the last time: every result is written over the
    # temporary it reads (c takes a's buffer from the pool and b's from the op alike)
    def step(x, y):
        a = x + 1.0
        b = a * 2.0
        del a
        c = b + 3.0
        del b
        d = c * 4.0
        y[...] = d
    g, _ = replay_equals_eager(step, *rng_arrays(10_000, 10_000), launches=2)
    assert len(g.temporaries) == 4 and {t.buffer for t in g.temporaries} == {0}
    assert "temporaries: 4 in 1 buffers" in str(g.plan())


#: float64 temporaries of this length are over the pool's REUSE_MIN_BYTES (80 kB)
LONG = 10_000


def buffer_made_at(g, step, k):
    """The pool buffer of the temporary made at line ``k`` of ``step``."""
    (buffer,) = {t.buffer for t in g.temporaries if t.site == f"step:{line_of(step, k)}"}
    return buffer


def test_a_named_temporary_read_for_the_last_time_takes_the_next_result():
    # the slab's x += mu * d: the product written over d, as the hand-built graph's
    # ufunc(np.multiply, mu, d, out=d), not into memory of its own
    def step(x, mu):
        d = np.exp(mu)
        x += mu * d
    g, _ = replay_equals_eager(step, *rng_arrays(LONG, LONG), launches=2)
    assert [t.name for t in g.temporaries] == ["t1", "t2"]
    assert buffer_made_at(g, step, 1) == buffer_made_at(g, step, 2)
    assert "temporaries: 2 in 1 buffers" in str(g.plan()) and g.temporary_bytes < 2 * 8 * LONG
    (mul,) = [n for n in g.recording().nodes if "multiply" in repr(n)]
    (out,) = mul.writes.values()
    assert any(np.shares_memory(out, a) for a in mul.reads.values())


def test_a_random_draw_into_a_named_temporary_gives_it_to_the_product():
    # the slab step's flight: d drawn by a random node (a whole write), then x += mu * d
    def step(x, mu, ids):
        d = np.empty_like(x)
        exponential(d, key=7, scale=0.5, ids=ids)
        x += mu * d
    x, mu = rng_arrays(LONG, LONG)
    ids = np.arange(LONG, dtype=np.int64)
    mine = x.copy()
    g = eagle.capture(step, mine, mu, ids)
    assert len({t.buffer for t in g.temporaries}) == 1 < len(g.temporaries)
    d = np.zeros(LONG)
    h = eagle.Graph()
    h.add_node(exponential({"d": d}, key=7, scale=0.5, ids=ids))
    h.add_node(ufunc(np.multiply, mu, d, out={"d": d}))
    h.add_node(ufunc(np.add, x, d, out=x))
    g.build().launch(2)
    h.build().launch(2)
    assert mine.tobytes() == x.tobytes()


def _read_again(x, mu):
    d = np.exp(mu)
    x += mu * d
    mu[...] = d


def _product_returned(x, mu):
    d = np.exp(mu)
    p = mu * d
    x += 1.0
    return p


def _operand_returned(x, mu):
    d = np.exp(mu)
    x += mu * d
    return d


def _another_view_of_d_read(x, mu):
    d = np.exp(mu)
    x += d[::-1] * d


def _product_through_another_view(x, mu):
    d = np.exp(mu)
    p = mu * d
    x += p[::-1]


def _product_read_broadcast(x, mu):
    d = np.exp(mu)
    p = mu * d
    x += p              # x (2, n): p read with a zero step across x's rows, another view of it


def _buffer_given_on_while_the_product_lives(x, mu):
    d = np.exp(mu)
    p = mu * d
    del d               # the pool gives d's buffer to q, made while p is still to be read
    q = x * 2.0
    x += p + q


def _masked_first_write(x, mu):
    d = np.empty_like(mu)
    np.exp(mu, out=d, where=mu > 0.0)
    with np.errstate(all="ignore"):
        x += np.where(mu > 0.0, mu * d, 0.0)


def _partial_first_write(x, mu):
    d = np.empty_like(mu)
    d[::2] = 1.0
    d[1::2] = 2.0
    x += mu * d


#: (step, the line that makes d, the line that makes the product): d's memory is not given
KEEPS = {
    "d read again": (_read_again, 1, 2),
    "the product returned": (_product_returned, 1, 2),
    "d returned": (_operand_returned, 1, 2),
    "the op reads d through another view": (_another_view_of_d_read, 1, 2),
    "the product read through another view": (_product_through_another_view, 1, 2),
    "the product read broadcast": (_product_read_broadcast, 1, 2),
    "d's buffer taken by another while the product lives": (_buffer_given_on_while_the_product_lives, 1, 2),
    "d's first write masked": (_masked_first_write, 1, 4),
    "d's first write partial": (_partial_first_write, 1, 4),
}


@pytest.mark.parametrize("case", list(KEEPS))
def test_a_temporary_keeps_its_memory_where_another_could_see_it(case):
    step, d_line, p_line = KEEPS[case]
    g, _ = replay_equals_eager(step, *rng_arrays((2, LONG) if "broadcast" in case else LONG, LONG),
                               launches=2)
    def site(k):
        return f"{step.__name__}:{line_of(step, k)}"
    (d,) = [t for t in g.temporaries if t.site == site(d_line)]
    assert d.nbytes >= 64 * 1024
    assert not [t for t in g.temporaries if t.site == site(p_line) and t.buffer == d.buffer]


def test_a_temporary_kept_by_the_step_keeps_its_memory():
    # d is still held once the step is over (in a list the step was given): a replay
    # updates it, so the product may not be written over it
    def step(x, mu, box):
        d = np.exp(mu)
        box.append(d)
        x += mu * d
    x, mu = rng_arrays(LONG, LONG)
    box = []
    g = eagle.capture(step, x, mu, box)
    assert buffer_made_at(g, step, 1) != buffer_made_at(g, step, 3)
    g.build().launch(1)
    assert np.array_equal(np.asarray(box[0]), np.exp(mu))


def test_a_temporary_keeps_its_memory_beside_a_node_of_unknown_accesses():
    # an opaque node writing d first, a while_loop made after d: what they touch is not
    # ufunc operands capture can follow
    def step(x, mu):
        d = np.empty_like(mu)
        opaque(lambda: None, writes={"d": d})
        x += mu * d
    g = eagle.capture(step, *rng_arrays(LONG, LONG))
    assert buffer_made_at(g, step, 1) != buffer_made_at(g, step, 3)

    y, more = np.zeros(3), np.zeros((), bool)

    def body_step(y, more):
        y += 1.0
        return y.max() < 2.0

    body = eagle.capture(body_step, y, more)

    def step(x, mu):
        d = np.exp(mu)
        while_loop(body.result, body, max_iterations=5)
        x += mu * d
    x, mu = rng_arrays(LONG, LONG)
    g = eagle.capture(step, x, mu)
    assert buffer_made_at(g, step, 1) != buffer_made_at(g, step, 3)
    want = x + mu * np.exp(mu)
    body.result[...] = True
    g.build().launch(1)
    assert x.tobytes() == want.tobytes() and y.tolist() == [2.0, 2.0, 2.0]


def test_ops_folded_before_a_temporary_do_not_shift_where_it_was_made():
    # fold_negations removes the ~b node, recorded before d: a position in the list of ops
    # taken before the fold points one op past d's first write, which then looks unwritten
    def step(x, mu, a, b):
        a[...] = a & ~b
        d = np.exp(mu)
        x += mu * d
    r = np.random.default_rng(5)
    g, _ = replay_equals_eager(step, *rng_arrays(LONG, LONG), r.random(LONG) < 0.5, r.random(LONG) < 0.5)
    assert any("(a & ~b)" in name for name in g.nodes)
    assert buffer_made_at(g, step, 2) == buffer_made_at(g, step, 3)


@pytest.mark.parametrize("n", [0, 10])
def test_temporaries_of_no_elements_replay_as_a_no_op(n):
    # a 0-length argument, and empty views of a longer one: every temporary has 0 elements
    # (its pool buffer still holds one, a 0-byte one cannot be viewed as float64)
    def step(x, y, z):
        y[...] = np.exp(x) * 2.0 + 1.0
        t = x[5:5] + 1.0
        y[3:3] = t * 2.0
        z[2:2] += x[7:7] * 3.0
        m = x[4:4] > 0.0
        return (x * 2.0).sum() + 0.0, np.maximum(x[1:1], 0.5), m
    x = np.arange(n, dtype=np.float64)
    g, eager = replay_equals_eager(step, x, np.zeros(n), np.ones(n, np.float32), launches=2)
    assert min(t.nbytes for t in g.temporaries) == 0
    for got, want in zip(g.result, eager):
        np.testing.assert_array_equal(got, want, strict=True)


def test_small_temporaries_are_not_reused():
    # a reused buffer orders its new writer after the old one's readers: for the 0-d counts
    # of two tallies that order cost a stage (each count waited for the other's total)
    def step(x, totals):
        totals[0] += np.count_nonzero(x < 0.0)
        totals[1] += np.count_nonzero(x > 0.5)
    x, totals = np.random.default_rng(2).standard_normal(1000), np.zeros(2, np.int64)
    g, _ = replay_equals_eager(step, x, totals)
    counts = [t for t in g.temporaries if t.shape == ()]
    assert len(counts) == 2 and len({t.buffer for t in counts}) == 2
    g.build()
    stage_of = {}
    for line in str(g.plan()).splitlines():
        if line.startswith("stage "):
            for name in g.nodes:
                if f"({name})" in line:
                    stage_of[name] = int(line.split()[1])
    reduces = [n for n in g.nodes if "reduce" in n]
    assert len(reduces) == 2 and stage_of[reduces[0]] == stage_of[reduces[1]]


def test_random_node_inside_the_step_as_the_issue_writes_it():
    vol, drift = 0.2, 0.01

    def step(S, z, w):
        normal(z, key=7)
        np.exp(vol * z + drift, out=w)
        S *= w

    n = 1000
    S, z, w = np.ones(n), np.zeros(n), np.zeros(n)
    g = eagle.capture(step, S, z, w)
    assert g.nodes[0] == f"step:{line_of(step, 1)} normal"
    g.build().launch(5)
    # the same draws through the hand-built graph
    S2, z2, w2 = np.ones(n), np.zeros(n), np.zeros(n)
    h = eagle.Graph()
    h.add_node(normal(z2, key=7))
    h.add_node(eagle.graph.ufunc(np.multiply, vol, z2, out=w2))
    h.add_node(eagle.graph.ufunc(np.add, w2, drift, out=w2))
    h.add_node(eagle.graph.ufunc(np.exp, w2, out=w2))
    h.add_node(eagle.graph.ufunc(np.multiply, S2, w2, out=S2))
    h.build().launch(5)
    np.testing.assert_array_equal(S, S2)


def test_while_loop_over_a_captured_body():
    def sweep(u, new):
        c = u[1:-1, 1:-1]
        new[1:-1, 1:-1] = c + 0.2 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4.0 * c)
        change = np.abs(new[1:-1, 1:-1] - c).max()
        u[1:-1, 1:-1] = new[1:-1, 1:-1]
        return change > 1e-3

    u = np.random.default_rng(0).random((24, 24))
    u[0], u[-1], u[:, 0], u[:, -1] = 0, 0, 0, 0
    v, new_v = u.copy(), u.copy()
    k = 1
    while sweep(v, new_v):
        k += 1
    body = eagle.capture(sweep, u, u.copy())
    g = eagle.Graph()
    g.add_node(while_loop(body.result, body), name="until_converged")
    body.result[...] = True
    g.build().launch(1)
    np.testing.assert_array_equal(u, v)
    assert g.iterations("until_converged") == k


def test_while_loop_captured_inside_the_step():
    def step(x, more):
        def body(x, more):
            x *= 0.5
            more[...] = x.max() > 1.0
        eagle.graph.while_loop(more, eagle.capture(body, x, more))
        x += 1.0

    x, more = np.full(10, 100.0), np.ones((), bool)
    g = eagle.capture(step, x, more)
    g.build().launch(1)
    np.testing.assert_array_equal(x, np.full(10, 100.0 / 128 + 1))


def test_views_transposes_and_integer_indices():
    def step(m, v):
        m.T[1:] -= m.T[:-1] * v[0]
        m[:, 2] = np.maximum(m[:, 1], m[:, 3])
        v[::2] = m[2, :5][::2]
    m, v = rng_arrays((5, 5), 6)
    replay_equals_eager(step, m, v, launches=2)


@pytest.mark.parametrize("line", [
    "m.T.reshape(-1)", "m.T.ravel()", "m.flatten('F')", "m.T.flatten()", "m.reshape(-1, order='F')",
    "np.ravel(m, order='F')", "m.T.reshape(2, 6)", "m.T.flatten('A')", "m.T.ravel('K')",
    "m[::-1, ::2].ravel('K')", "m.T[::-1].flatten('K')", "m.T.copy()", "np.copy(m.T)",
    "m.copy(order='F')", "m.T.astype(np.float32, order='C')"])
def test_a_reshape_or_copy_that_copies_replays_in_numpys_order_and_layout(line):
    # a reshape NumPy makes by copying is a recorded copy (a copy made at capture would never
    # be updated), in the order the reshape reads the elements; copies keep NumPy's layout
    def step(m):
        r = eval(line)
        return r * 1 if r.ndim == 1 else r
    m = np.arange(12.0).reshape(3, 4)
    g = eagle.capture(step, m).build()
    m *= 3.0              # the values the replay must read
    g.launch(1)
    want = step(m)
    np.testing.assert_array_equal(g.result, want, strict=True)
    assert g.result.strides == want.strides


def test_zeros_like_copy_astype_and_fill():
    def step(x, y):
        t = np.zeros_like(x)
        t += x
        c = x.copy()
        x.fill(2.0)
        y[...] = t.astype(np.float32) + c + np.ones_like(y) + np.full_like(y, 3)
    replay_equals_eager(step, np.arange(8.0), np.zeros(8))


def test_stand_ins_are_plain_arrays_again_after_the_capture():
    kept = []

    def step(x, y):
        eagle.graph.opaque(lambda: np.copyto(y, x[::-1]), reads={"x": x}, writes={"y": y})
        kept.append(1)

    x, y = np.arange(5.0), np.zeros(5)
    eagle.capture(step, x, y).build().launch(1)
    np.testing.assert_array_equal(y, x[::-1])


def test_a_failing_node_in_a_replay_names_its_line():
    def boom():
        raise RuntimeError("boom")

    def step(x):
        x += 1
        eagle.graph.opaque(boom, reads={"x": x})

    g = eagle.capture(step, np.zeros(3))
    g.build()
    with pytest.raises(RuntimeError) as info:
        g.launch(1)
    assert f"step:{line_of(step, 2)} boom" in "".join(getattr(info.value, "__notes__", []))


def test_if_else_over_captured_branches_inside_the_step():
    def halve(x):
        x *= 0.5

    def grow(x):
        x += 1.0

    def step(x, big):
        big[...] = x.max() > 10.0
        eagle.graph.if_else(big, eagle.capture(halve, x), eagle.capture(grow, x))

    def eager(x, big):
        big[...] = x.max() > 10.0
        if big:
            halve(x)
        else:
            grow(x)

    x, big = np.array([3.0, 9.5, 1.0]), np.zeros((), bool)
    g = eagle.capture(step, x, big).build()
    y, flag = x.copy(), big.copy()
    for _ in range(6):
        g.launch(1)
        eager(y, flag)
        np.testing.assert_array_equal(x, y)
    assert any(name.endswith("if_else") for name in g.nodes)


def test_and_not_over_bools_is_one_node():
    # `a & ~b` is `a > b` bit for bit: one pass, as the hand-built slab step has it
    def step(u, leak, out):
        out[...] = (u < 0.3) & ~leak
        return (u > 0.9) & ~leak

    r = np.random.default_rng(3)
    u, leak = r.random(64), r.random(64) < 0.5
    g, result = replay_equals_eager(step, u, leak, np.zeros(64, bool))
    assert [n.split(" ", 1)[1] for n in g.nodes] == ["np.less", "np.greater (a & ~b)", "np.greater",
                                                      "np.greater (a & ~b)"]
    # out[...] = ... is computed in out itself: the one temporary is the returned one
    assert [t.name for t in g.temporaries] == ["t3"] and g.result.tolist() == result.tolist()


def test_and_not_is_kept_where_the_negation_is_read_again_or_b_changes():
    def kept(u, leak, out, other):
        nb = ~leak
        out[...] = (u < 0.3) & nb
        other[...] = nb                # ~b read again: it stays a node of its own

    def written(u, leak, out):
        nb = ~leak
        leak[...] = u > 0.5            # b written between ~b and the &
        out[...] = (u < 0.3) & nb

    r = np.random.default_rng(4)
    u, leak = r.random(64), r.random(64) < 0.5
    g, _ = replay_equals_eager(kept, u, leak, np.zeros(64, bool), np.zeros(64, bool))
    assert any("np.invert" in n for n in g.nodes) and not any("a & ~b" in n for n in g.nodes)
    g, _ = replay_equals_eager(written, u, leak, np.zeros(64, bool))
    assert any("np.invert" in n for n in g.nodes) and not any("a & ~b" in n for n in g.nodes)


def test_a_bool_array_assigned_to_another():
    # the copy node of a bool array (np.logical_or(v, False)) was refused by NumPy's
    # resolve_dtypes for the Python bool
    def step(a, b):
        b[...] = a
    g, _ = replay_equals_eager(step, np.array([True, False, True]), np.zeros(3, bool))
    assert g.nodes == [f"step:{step.__code__.co_firstlineno + 1} ="]


def test_and_not_folds_where_a_later_temporary_takes_the_buffer_of_not_b():
    def step(u, leak, out, alive):
        out[...] = (u < 0.3) & ~leak
        alive[...] = ~(leak | out)     # its temporary takes ~leak's buffer (100 kB: reused)

    r = np.random.default_rng(5)
    n = 100_000
    u, leak = r.random(n), r.random(n) < 0.5
    g, _ = replay_equals_eager(step, u, leak, np.zeros(n, bool), np.zeros(n, bool))
    assert any("np.greater (a & ~b)" in name for name in g.nodes)


@pytest.mark.parametrize("line", [
    "out[...] = (u < 0.3) & ~leak.T",        # ~b laid out as leak.T: the & runs line by line
    "out.T[...] = (u.T < 0.3) & ~leak",      # a transposed output: the & reads ~b turned
    "out[...] = ~leak.T & (u < 0.3)",
])
def test_and_not_over_transposed_views_replays_as_called(line):
    src = "def step(u, leak, out):\n    " + line + "\n"
    env = {"np": np}
    exec(compile(src, "<and_not>", "exec"), env)
    r = np.random.default_rng(6)
    u, leak = r.random((4, 5)), r.random((5, 4)) < 0.5
    replay_equals_eager(env["step"], u, leak, np.zeros((4, 5), bool))
