"""CUDA ufunc nodes on the stand-in: the elementwise kernels eagle generates, with NumPy's
casting and where=, compiled by the CUDA C emulator (tests/doubles/cuda_emulation.h), run by
the driver stand-in inside a replayed graph, and compared with NumPy's own results."""

import numpy as np
import pytest
from fake_cuda import DeviceArray

import eagle


def values(dt, n, rng):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -100, 100, n).astype(dt)
    return (rng.standard_normal(n) * 10).astype(dt)


CASES = [
    (np.add, ("i8", "?"), "i8"),          # the age + alive
    (np.add, ("i4", "f4"), "f8"),         # both inputs cast to the float64 loop
    (np.multiply, ("u1", "i1"), "i2"),
    (np.add, ("f8", "f8"), "f4"),         # a same_kind cast of the result
    (np.add, ("i8", "i8"), "i1"),         # wraps as NumPy's cast does
    (np.sqrt, ("i4",), "f8"),
]


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}-{'-'.join(c[1])}-{c[2]}")
def test_generated_kernels_cast_and_mask_as_numpy(emulating_cupy, case, masked):
    uf, ins, out_dt = case
    rng = np.random.default_rng(1)
    n = 37
    hosts = [values(d, n, rng) for d in ins]
    hout = values(out_dt, 2 * n, rng)[::2]            # a strided output
    hmask = rng.integers(0, 2, n).astype(bool)
    want = hout.copy()
    with np.errstate(all="ignore"):
        uf(*hosts, out=want, where=hmask if masked else True)
    ins_d = [DeviceArray(h) for h in hosts]
    out_base = DeviceArray(np.zeros(2 * n, out_dt))
    out_base.host[::2] = hout
    out_d = out_base[::2]
    kw = {"where": {"alive": DeviceArray(hmask)}} if masked else {}
    node = emulating_cupy(uf, *ins_d, out=out_d, **kw)
    assert node.kind == "cuda_kernel" and node.sized
    if masked:
        assert "alive" in node.reads
    g = eagle.Graph()
    g.add_node(node, name="u")
    g.build()
    g.launch(2)
    np.testing.assert_array_equal(out_d.host, want)


def test_scalar_operand_a_0d_mask_and_where_false(emulating_cupy):
    h = np.arange(-5, 5, dtype=np.int32)
    x = DeviceArray(h)
    out = DeviceArray(np.full(10, -1.0))
    flag = DeviceArray(np.array(False))
    g = eagle.Graph()
    g.add_node(emulating_cupy(np.multiply, {"x": x}, 0.5, out={"y": out}, where={"flag": flag}), name="m")
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(out.host, -1.0)           # the 0-d mask is false
    flag.host[()] = True
    g.launch(1)                                              # read on every replay
    np.testing.assert_array_equal(out.host, h * 0.5)
    never = DeviceArray(np.full(10, 7.0))
    g2 = eagle.Graph()
    g2.add_node(emulating_cupy(np.add, x, 1.0, out=never, where=False), name="never")
    g2.build()
    g2.launch(1)
    np.testing.assert_array_equal(never.host, 7.0)


def test_numpys_refusals_on_cuda_arrays(emulating_cupy):
    x, xi = DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4, np.int64))
    with pytest.raises(TypeError, match="casting='same_kind'"):
        emulating_cupy(np.add, x, 1.0, out=xi)
    with pytest.raises(TypeError, match="mask .* casting='safe'"):
        emulating_cupy(np.add, x, 1.0, out=x, where=DeviceArray(np.ones(4, np.int8)))
    with pytest.raises(ValueError, match="mask 'where' has shape \\(5,\\)"):
        emulating_cupy(np.add, x, 1.0, out=x, where=DeviceArray(np.ones(5, bool)))



@pytest.mark.parametrize("which", ["input", "output"])
def test_a_byte_swapped_operand_is_refused(emulating_cupy, which):
    # a generated kernel reads the bytes in the device's order: a '>f8' operand gave
    # swapped-byte results, silently (CuPy itself has no byte-swapped arrays)
    x = DeviceArray(np.arange(4.0).astype(">f8" if which == "input" else "f8"))
    out = DeviceArray(np.zeros(4, ">f8" if which == "output" else "f8"))
    name = "in0" if which == "input" else "out0"
    with pytest.raises(TypeError, match=f"'{name}' is >f8, not in the device's byte order"):
        emulating_cupy(np.add, x, 1.0, out=out, where={"m": DeviceArray(np.ones(4, bool))})


def test_in_place_under_two_names_and_a_partial_overlap(emulating_cupy):
    """One array named as the input and, differently, as the output is NumPy's in-place
    np.multiply(w, 2.0, out=w): run in place on the stand-in. An output overlapping an
    input other than element for element (out=w[1:], input w[:-1]) would race between
    the GPU's threads and blocks: refused at record time, naming both operands."""
    w = DeviceArray(np.arange(8.0))
    node = emulating_cupy(np.multiply, {"v": w}, 2.0, out={"w2": w})
    assert node.kind == "cuda_kernel" and list(node.writes) == ["w2"] and node.updated == {"w2"}
    g = eagle.Graph()
    g.add_node(node, name="m")
    g.build()
    g.launch(2)
    np.testing.assert_array_equal(w.host, 4 * np.arange(8.0))
    with pytest.raises(ValueError, match="output 'w1' overlaps 'w0' other than element for element"):
        emulating_cupy(np.add, {"w0": w[:-1]}, 1.0, out={"w1": w[1:]})
