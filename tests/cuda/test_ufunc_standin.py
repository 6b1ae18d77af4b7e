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
