"""Generated fused loops skip a dead store (eagle.cpu.codegen.dead_stores): a view a
compiled segment writes is not stored when a later node of the replay overwrites it whole,
through the same view, before anything reads it (the Jacobi step's scratch `t`, written
in both half-steps). The replay's results stay NumPy's bit for bit, the scratch's final
value included; anything that may read the view in between keeps the store."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eagle
from eagle.cpu import c_compiler, codegen
from eagle.graph import opaque, ufunc

pytestmark = pytest.mark.skipif(c_compiler.compiler() is None, reason="no C compiler")

ON = eagle.CpuOptions(codegen=True)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EAGLE_CODEGEN", raising=False)
    monkeypatch.setattr(c_compiler, "_loaded", {})
    monkeypatch.setattr(codegen, "_warned", False)


def fused_notes(g):
    return [ln[ln.index("[fused run"):] for ln in str(g.plan()).splitlines() if "[fused run" in ln]


def jacobi_1d(n=200):
    A = np.linspace(0.0, 1.0, n) ** 2
    B = np.cos(np.arange(n, dtype=np.float64))
    return A, B, np.empty(n - 2)


def jacobi_nodes(g, A, B, t, between=None):
    """The Jacobi 1-D step, t the scratch of both halves; between(g): nodes added between them."""
    for k, (src, dst) in enumerate(((A, B), (B, A))):
        if k == 1 and between is not None:
            between(g)
        g.add_node(ufunc(np.add, src[:-2], src[1:-1], out=t))
        g.add_node(ufunc(np.add, t, src[2:], out=t))
        g.add_node(ufunc(np.multiply, 0.33333, t, out=dst[1:-1]))


def jacobi_numpy(A, B, t, steps):
    for _ in range(steps):
        for src, dst in ((A, B), (B, A)):
            np.add(src[:-2], src[1:-1], out=t)
            np.add(t, src[2:], out=t)
            np.multiply(0.33333, t, out=dst[1:-1])


def test_jacobi_scratch_store_of_the_first_half_is_skipped_and_results_are_numpys():
    A, B, t = jacobi_1d()
    ref = [x.copy() for x in (A, B, t)]
    g = eagle.Graph()
    jacobi_nodes(g, A, B, t)
    g = g.build(cpu=ON)
    notes = fused_notes(g)
    assert "1 store skipped (overwritten later in the replay)" in notes[0], notes
    assert "skipped" not in notes[1], notes   # the replay's last write of t is stored
    g.launch(7)
    jacobi_numpy(*ref, 7)
    for got, want in zip((A, B, t), ref):
        assert got.tobytes() == want.tobytes()


def test_generated_source_has_no_store_for_the_dead_view():
    A, B, t = jacobi_1d()
    g = eagle.Graph()
    jacobi_nodes(g, A, B, t)
    seen = []
    real = c_compiler.load

    def load(source, symbol):
        seen.append(source)
        return real(source, symbol=symbol)

    c_compiler.load, saved = load, c_compiler.load
    try:
        g.build(cpu=ON)
    finally:
        c_compiler.load = saved
    stores = [sum(1 for ln in src.splitlines() if "[j] = x" in ln) for src in seen]
    assert stores == [1, 2], seen   # first half: B only; second half: t and A


def reader_of_t(t, seen):
    def look():
        seen.append(t.copy())
    return lambda g: g.add_node(opaque(look, reads={"t": t}), name="look")


@pytest.mark.parametrize("case", ["opaque reader", "ufunc reader"])
def test_a_possible_read_between_the_writes_keeps_the_store(case):
    A, B, t = jacobi_1d()
    ref = [x.copy() for x in (A, B, t)]
    g = eagle.Graph()
    seen, other = [], np.zeros_like(t)
    if case == "opaque reader":
        jacobi_nodes(g, A, B, t, reader_of_t(t, seen))
    else:
        # reads B shifted, which the first half writes: it starts the second half's run
        jacobi_nodes(g, A, B, t, lambda g: g.add_node(ufunc(np.add, t, B[2:], out=other)))
    g = g.build(cpu=ON)
    assert not any("skipped" in n for n in fused_notes(g)), fused_notes(g)
    g.launch(3)
    halves, sums = [], []   # t after each replay's first half, as the node between them reads it
    for _ in range(3):
        a, b, tt = ref
        np.add(a[:-2], a[1:-1], out=tt)
        np.add(tt, a[2:], out=tt)
        np.multiply(0.33333, tt, out=b[1:-1])
        halves.append(tt.copy())
        sums.append(tt + b[2:])
        np.add(b[:-2], b[1:-1], out=tt)
        np.add(tt, b[2:], out=tt)
        np.multiply(0.33333, tt, out=a[1:-1])
    for got, want in zip((A, B, t), ref):
        assert got.tobytes() == want.tobytes(), case
    if case == "opaque reader":
        assert [x.tobytes() for x in seen] == [x.tobytes() for x in halves]
    else:
        assert other.tobytes() == sums[-1].tobytes()


@pytest.mark.parametrize("case", ["reads t", "masked", "shorter view", "shifted view"])
def test_a_last_node_that_reads_or_partly_writes_t_keeps_the_second_halfs_store(case):
    A, B, t = jacobi_1d()
    ref = [x.copy() for x in (A, B, t)]
    mask = A[2:] > 0.5
    last = {"reads t": lambda a, t: dict(args=(t, a[:-2]), out=t),
            "masked": lambda a, t: dict(args=(a[:-2], 1.0), out=t, where=mask),
            "shorter view": lambda a, t: dict(args=(a[:-4], 1.0), out=t[:-2]),
            "shifted view": lambda a, t: dict(args=(a[2:-1], 1.0), out=t[1:])}[case]
    g = eagle.Graph()
    jacobi_nodes(g, A, B, t)
    kw = last(A, t)
    g.add_node(ufunc(np.add, *kw.pop("args"), **kw))
    g = g.build(cpu=ON)
    notes = fused_notes(g)
    assert "1 store skipped" in notes[0], notes   # the second half overwrites the first's t
    assert not any("skipped" in n for n in notes[1:]), notes
    g.launch(3)
    for _ in range(3):
        jacobi_numpy(*ref, 1)
        kw = last(ref[0], ref[2])
        np.add(*kw.pop("args"), **kw)
    for got, want in zip((A, B, t), ref):
        assert got.tobytes() == want.tobytes(), case


def test_a_full_overwrite_at_the_end_of_the_replay_makes_both_halves_stores_dead():
    A, B, t = jacobi_1d()
    ref = [x.copy() for x in (A, B, t)]
    g = eagle.Graph()
    jacobi_nodes(g, A, B, t)
    # reads A shifted, which the second half writes: a run of its own, after it
    g.add_node(ufunc(np.subtract, A[2:], A[:-2], out=t))
    g = g.build(cpu=ON)
    notes = fused_notes(g)
    assert "1 store skipped" in notes[0] and "1 store skipped" in notes[1], notes
    g.launch(4)
    for _ in range(4):
        jacobi_numpy(*ref, 1)
        np.subtract(ref[0][2:], ref[0][:-2], out=ref[2])
    for got, want in zip((A, B, t), ref):
        assert got.tobytes() == want.tobytes()


# ---- drawn chains over scratch arrays written several times a replay, against NumPy ----

N = 40
VIEWS = [(0, slice(1, -1)), (0, slice(2, None)), (0, slice(None, -2)),
         (1, slice(1, -1)), (1, slice(2, None)), (1, slice(None, -2))]
OPS = [np.add, np.subtract, np.multiply, np.maximum]


@st.composite
def chains(draw):
    """Nodes (ufunc, input a, input b, output): inputs are grid views (0, 1: two grids of
    N + 2) or scratches (2, 3, 4: N long); outputs are a scratch or a grid's interior."""
    steps = []
    for _ in range(draw(st.integers(3, 14))):
        uf = draw(st.sampled_from(OPS))
        ins = [draw(st.one_of(st.sampled_from(VIEWS), st.sampled_from([2, 3, 4]))) for _ in range(2)]
        out = draw(st.sampled_from([2, 3, 4, (0, slice(1, -1)), (1, slice(1, -1))]))
        steps.append((uf, ins, out))
    return steps


def arrays_for(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N + 2), rng.standard_normal(N + 2)] + [rng.standard_normal(N) for _ in range(3)]


def view(arrays, v):
    return arrays[v] if isinstance(v, int) else arrays[v[0]][v[1]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=chains(), seed=st.integers(0, 2**16))
def test_drawn_chains_with_rewritten_scratches_equal_numpy(chain, seed):
    ours, ref = arrays_for(seed), arrays_for(seed)
    g = eagle.Graph()
    for uf, ins, out in chain:
        o = view(ours, out)
        a, b = (view(ours, v) for v in ins)
        if any(x is not o and np.shares_memory(x, o) and not (x.ctypes.data == o.ctypes.data
                                                              and x.shape == o.shape) for x in (a, b)):
            continue   # NumPy would buffer it: a ufunc node refuses it
        g.add_node(ufunc(uf, a, b, out=o))
        uf(view(ref, ins[0]), view(ref, ins[1]), out=view(ref, out))
    if not g.nodes:
        return
    built = g.build(cpu=ON)
    built.launch(1)
    for got, want in zip(ours, ref):
        assert got.tobytes() == want.tobytes()


def test_an_overwrite_by_a_loop_outside_the_compiled_set_keeps_the_store():
    # np.power's integer loop stops short on a negative exponent (an error the launch
    # raises at its end): only loops of the compiled set count as overwriting whole
    A, B, t = jacobi_1d()
    ref = [x.copy() for x in (A, B, t)]
    g = eagle.Graph()
    jacobi_nodes(g, A, B, t)
    g.add_node(ufunc(np.sin, A[2:], out=t))   # reads A shifted: a run of its own
    g = g.build(cpu=ON)
    notes = fused_notes(g)
    assert "1 store skipped" in notes[0] and "skipped" not in notes[1], notes
    g.launch(2)
    for _ in range(2):
        jacobi_numpy(*ref, 1)
        np.sin(ref[0][2:], out=ref[2])
    for got, want in zip((A, B, t), ref):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("case", ["mask reads the view", "masked write of the view"])
def test_a_where_mask_counts_as_a_read_and_a_masked_write_kills_no_store(case):
    # m, written by a compiled segment, is read next only as a where= mask (a view of its
    # bytes as bool), then overwritten whole: the mask must see the segment's values. A later
    # masked write of the segment's own output leaves its values where the mask is False.
    n = 100
    a = np.linspace(-1.0, 1.0, n)
    b = np.cos(np.arange(n, dtype=np.float64))
    src = (np.arange(n) % 3 == 0).astype(np.uint8)
    one, zero = np.ones(n, np.uint8), np.zeros(n, np.uint8)
    m, z, out = np.zeros(n, np.uint8), np.zeros(n), np.zeros(n)
    mask = a > 0
    g = eagle.Graph()
    if case == "mask reads the view":
        g.add_node(ufunc(np.add, src, zero, out=m))
        g.add_node(ufunc(np.multiply, m, one, out=m))
        g.add_node(ufunc(np.add, a, 1.0, out=z, where=m.view(bool)))
        g.add_node(ufunc(np.add, zero, zero, out=m))
    else:
        g.add_node(ufunc(np.add, a, b, out=out))
        g.add_node(ufunc(np.multiply, out, b, out=out))
        g.add_node(ufunc(np.subtract, a, b, out=out, where=mask))
    g = g.build(cpu=ON)
    assert any("compiled" in n for n in fused_notes(g)), fused_notes(g)
    assert not any("skipped" in n for n in fused_notes(g)), fused_notes(g)
    g.launch(2)
    rm, rz, rout = np.zeros(n, np.uint8), np.zeros(n), np.zeros(n)
    for _ in range(2):
        if case == "mask reads the view":
            np.add(src, zero, out=rm)
            np.multiply(rm, one, out=rm)
            np.add(a, 1.0, out=rz, where=rm.view(bool))
            np.add(zero, zero, out=rm)
        else:
            np.add(a, b, out=rout)
            np.multiply(rout, b, out=rout)
            np.subtract(a, b, out=rout, where=mask)
    for got, want in ((m, rm), (z, rz), (out, rout)):
        assert got.tobytes() == want.tobytes(), case
