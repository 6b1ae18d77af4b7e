"""CUDA ufunc nodes on the stand-in: what only a generated kernel refuses (an operand not in
the device's byte order; CuPy has none, so only the stand-in's arrays can show it). The
scenarios every backend shares (casting and where= as NumPy, 0-d masks, refusals, in
place) are tests/ufunc/test_ufunc_on_every_backend.py."""

import numpy as np
import pytest
from fake_cuda import DeviceArray


@pytest.mark.parametrize("which", ["input", "output"])
def test_a_byte_swapped_operand_is_refused(emulating_cupy, which):
    # a generated kernel reads the bytes in the device's order: a '>f8' operand gave
    # swapped-byte results, silently (CuPy itself has no byte-swapped arrays)
    x = DeviceArray(np.arange(4.0).astype(">f8" if which == "input" else "f8"))
    out = DeviceArray(np.zeros(4, ">f8" if which == "output" else "f8"))
    name = "in0" if which == "input" else "out0"
    with pytest.raises(TypeError, match=f"'{name}' is >f8, not in the device's byte order"):
        emulating_cupy(np.add, x, 1.0, out=out, where={"m": DeviceArray(np.ones(4, bool))})


def test_float32_kernels_flush_subnormals_as_cupy_compiles_them(emulating_cupy):
    # CuPy compiles the generated kernel with -ftz=true (the emulator models it, as a GPU):
    # a float32 subnormal product is 0 there, NumPy keeps it; float64 is not flushed
    import eagle

    a = np.full(4, 1e-20, np.float32)
    for dtype, flushed in ((np.float32, True), (np.float64, False)):
        x, out = DeviceArray(a.astype(dtype)), DeviceArray(np.ones(4, dtype))
        g = eagle.Graph()
        g.add_node(emulating_cupy(np.multiply, x, x, out=out), name="square")
        g.build()
        g.launch(1)
        want = np.multiply(a.astype(dtype), a.astype(dtype))
        assert (want != 0).all()
        np.testing.assert_array_equal(out.host, np.zeros(4, dtype) if flushed else want)
