"""The fused masked loop (csrc/cpu/masked_arith.h) walks the mask chunk by chunk of 256
elements: a chunk none set is skipped, all set computed straight, few runs computed run
by run, scattered computed and selected. Every op and dtype it takes, under masks of
every density and runs of every length across chunk boundaries, on views (offsets,
unaligned memory, negative strides), gives NumPy's own ``uf(a, b, out=o, where=m)`` bit
for bit. One exception, as NumPy allows: where both inputs are NaN the result may carry
either input's payload (NumPy's add and multiply loops do not promise which)."""
import numpy as np
import pytest

import eagle
from eagle.graph import ufunc

OPS = [np.add, np.subtract, np.multiply, np.divide]
FLOATS = [np.float64, np.float32]
INTS = [np.int64, np.int32, np.uint64, np.uint32]
FUSED = [(uf, dt) for uf in OPS for dt in FLOATS] + [(uf, dt) for uf in OPS[:3] for dt in INTS]
CHUNK = 256


def run(node):
    g = eagle.Graph()
    g.add_node(node, name="u")
    g.build()
    g.launch(1)
    return node


def operands(dt, n, rng):
    dt = np.dtype(dt)
    if dt.kind == "f":
        # NaNs of distinct payloads, infinities, zeros of both signs, subnormals, huge
        bits = np.array([0x7FF8000000000001, 0x7FF00000000000A5, 0xFFF8000000000BAD], np.uint64)
        nans = bits.view(np.float64).astype(dt) if dt == np.float64 else \
            np.array([0x7FC00001, 0x7F8000A5, 0xFFC00BAD], np.uint32).view(np.float32)
        with np.errstate(over="ignore", under="ignore"):   # float32: the huge ones round to inf
            specials = np.concatenate([nans, np.array([0.0, -0.0, np.inf, -np.inf, 5e-324, 1e-300, 1e300]).astype(dt)])
            pool = np.concatenate([specials, (rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)).astype(dt)])
        return [rng.choice(pool, n) for _ in range(3)]
    info = np.iinfo(dt)
    pool = np.concatenate([np.array([0, 1, 2, info.max, info.min, info.max - 1], dt),
                           rng.integers(info.min, info.max, 200, dtype=dt, endpoint=True)])
    return [rng.choice(pool, n) for _ in range(3)]


def quiet(x):
    """x's bits with its NaN quieted (as an operation returns an input NaN)."""
    u = x.view(f"u{x.itemsize}").copy()
    quiet_bit = 1 << (51 if x.itemsize == 8 else 22)
    nan = np.isnan(x)
    u[nan] |= np.array(quiet_bit, u.dtype)
    return u


def assert_numpys_bits(got, want, a, b, what=""):
    """got == want bit for bit, except where both inputs are NaN: there got is either
    input's NaN, quieted."""
    gu, wu = got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")
    differ = gu != wu
    if not differ.any():
        return
    assert got.dtype.kind == "f", what
    a = np.broadcast_to(a, got.shape)
    b = np.broadcast_to(b, got.shape)
    both = np.isnan(a) & np.isnan(b)
    assert both[differ].all(), f"{what}: {np.flatnonzero(differ & ~both)[:10]} differ"
    qa, qb = quiet(np.ascontiguousarray(a)), quiet(np.ascontiguousarray(b))
    ok = (gu == qa) | (gu == qb)
    bad = np.flatnonzero(differ & ~ok)
    assert not bad.size, f"{what}: at {bad[:5]} {[hex(v) for v in gu[bad[:5]]]} from {[hex(v) for v in qa[bad[:5]]]}, {[hex(v) for v in qb[bad[:5]]]}"


def check(uf, a, b, out, mask, what=""):
    """The node's result against NumPy's on copies, bit for bit; the node."""
    want = out.copy()
    with np.errstate(all="ignore"):
        uf(a, b, out=want, where=mask)
    a0, b0 = (x.copy() if isinstance(x, np.ndarray) else x for x in (a, b))
    with np.errstate(all="ignore"):
        node = run(ufunc(uf, a, b, out=out, where=mask))
    assert_numpys_bits(out, want, a0, b0, what)
    return node


def random_mask(n, density, rng):
    return rng.random(n) < density if 0 < density < 1 else np.full(n, bool(density))


@pytest.mark.parametrize("uf,dt", FUSED, ids=lambda x: getattr(x, "__name__", str(x)))
def test_random_masks_of_every_density_give_numpys_bits(threads, uf, dt):
    threads(1)
    n = 5 * CHUNK + 77
    rng = np.random.default_rng(10)
    for density in (0, 1e-3, 0.5, 1):
        a, b, out = operands(dt, n, rng)
        mask = random_mask(n, density, rng)
        node = check(uf, a, b, out, mask, f"density {density}")
        assert node.loop.fused_op != 0


def test_the_chunks_go_the_way_their_mask_says(threads):
    threads(1)
    n = 40 * CHUNK
    rng = np.random.default_rng(11)
    a, b, out = operands(np.float64, n, rng)
    ways = {"none": (np.zeros(n, bool), 0), "all": (np.ones(n, bool), 1),
            "scattered": (rng.random(n) < 0.5, 2), "sparse": (rng.random(n) < 1e-3, 3)}
    for name, (mask, way) in ways.items():
        node = check(np.add, a, b, out, mask, name)
        chunks = node.loop.masked_chunks
        # a sparse mask leaves some chunks none set: skipped, the rest by runs
        assert chunks[way] > 0 and sum(chunks) - chunks[way] == (chunks[0] if way == 3 else 0), (name, chunks)
        assert node.loop.masked_blocks == (0, 0)


def runs_mask(lengths, gaps, offset=0):
    """Runs of set elements of the given lengths, the given gaps apart, from offset."""
    n = offset + int(np.sum(lengths) + np.sum(gaps)) + 3
    mask = np.zeros(n, bool)
    i = offset
    for length, gap in zip(lengths, gaps):
        mask[i:i + length] = True
        i += length + gap
    return mask


def run_masks():
    """Runs (and, complemented, gaps) of every length 1..300 starting at every offset
    of a chunk, and single runs across a chunk's edges."""
    lengths = np.arange(1, 301)
    out = {"runs up, gaps down": runs_mask(lengths, lengths[::-1]),
           "runs up, gap 1": runs_mask(lengths, np.ones(300, int), offset=5),
           "runs up, gap 255": runs_mask(lengths, np.full(300, 255), offset=63)}
    for name in list(out):
        out["not " + name] = ~out[name]
    for length in (1, 2, 7, 8, 9, 63, 64, 65, 255, 256, 257, 300):
        for at in (0, 1, 63, 64, 191, 255, 256, 257):
            mask = np.zeros(3 * CHUNK + 11, bool)
            mask[at:at + length] = True
            out[f"one run of {length} at {at}"] = mask
    return out


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int32])
def test_runs_of_every_length_around_chunk_boundaries(threads, dt):
    threads(1)
    rng = np.random.default_rng(12)
    for name, mask in run_masks().items():
        n = mask.size
        a, b, out = operands(dt, n, rng)
        check(np.add, a, b, out, mask, name)
        # the same mask under a loop that is not fused: the block path's counts and run finds
        a2 = a.astype(np.float64) if dt != np.float64 else a
        check(np.maximum, a2, a2[::-1].copy(), np.full(n, 7.0), mask, f"maximum, {name}")


@pytest.mark.parametrize("uf,dt", FUSED, ids=lambda x: getattr(x, "__name__", str(x)))
@pytest.mark.parametrize("how", ["offset views", "unaligned", "negative strides", "scalar first",
                                 "scalar second", "in place", "strided"])
def test_views_scalars_and_in_place(threads, uf, dt, how):
    threads(2)
    n = 3 * CHUNK + 45
    rng = np.random.default_rng(13)
    a, b, out = operands(dt, n + 8, rng)
    mask = rng.random(n + 8) < 0.5
    mask[100:400] = True
    mask[500:700] = False
    if how == "offset views":
        check(uf, a[3:n + 3], b[5:n + 5], out[1:n + 1], mask[7:n + 7], how)
    elif how == "unaligned":
        item = np.dtype(dt).itemsize

        def unaligned(x):
            raw = np.zeros(x.nbytes + 1, np.uint8)
            view = raw[1:].view(x.dtype)
            view[...] = x
            return view
        a_u, b_u, out_u = unaligned(a[:n]), unaligned(b[:n]), unaligned(out[:n])
        assert a_u.ctypes.data % item != 0
        # the node refuses memory its loop may not read; the mask has no alignment
        with pytest.raises(ValueError, match="not aligned"):
            ufunc(uf, a_u, b[:n], out=out[:n], where=mask[:n])
        raw = np.zeros(n + 1, np.uint8)
        mask_u = raw[1:].view(np.bool_)
        mask_u[...] = mask[:n]
        check(uf, a[:n], b[:n], out[:n], mask_u, how)
    elif how == "negative strides":
        check(uf, a[n - 1::-1], b[::-1][:n], out[::-1][:n], mask[n - 1::-1], how)
        check(uf, a[:n], b[::-1][:n], out[:n], mask[::-1][:n], how + ", mask reversed")
    elif how == "scalar first":
        check(uf, dt(3), b[:n], out[:n], mask[:n], how)
    elif how == "scalar second":
        check(uf, a[:n], dt(2), out[:n], mask[:n], how)
    elif how == "in place":
        check(uf, out[:n], b[:n], out[:n], mask[:n], how)
        check(uf, a[:n], out[:n], out[:n], mask[:n], how + ", second")
    else:
        a, b, out = operands(dt, 2 * n, rng)
        mask = rng.random(2 * n) < 0.5
        check(uf, a[::2], b[1::2], out[::2], mask[1::2], how)


def test_mask_bytes_other_than_one_count_as_set(threads):
    # a bool view of bytes: NumPy takes any nonzero byte as set, and so does the scan
    threads(1)
    n = 4 * CHUNK + 9
    rng = np.random.default_rng(14)
    raw = rng.choice(np.array([0, 1, 2, 127, 128, 255], np.uint8), n)
    raw[:CHUNK] = 128   # a chunk all set by bytes that are not 1
    mask = raw.view(np.bool_)
    a, b, out = operands(np.float64, n, rng)
    check(np.add, a, b, out, mask, "add")
    check(np.maximum, a, b, out, mask, "maximum")


def test_ints_wrap_as_numpys(threads):
    threads(1)
    n = 2 * CHUNK
    mask = np.arange(n) % 3 != 0
    for dt in INTS:
        info = np.iinfo(dt)
        a = np.full(n, info.max, dt)
        b = np.full(n, 3, dt)
        for uf in OPS[:3]:
            check(uf, a, b, np.zeros(n, dt), mask, f"{uf.__name__} {dt.__name__}")
