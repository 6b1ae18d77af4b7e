"""Random nodes on a real GPU with CuPy arrays (marker ``gpu``; skips without CuPy or a
GPU, see conftest.py): eagle_random (eagle/cuda/kernels/random.cu, NVRTC, from
csrc/include/eagle/philox.h) gives the cpu backend's random_bits and uniform bits,
and normal within 2 ulp (equal where the device's fma, sqrt and division round as
the host's, which IEEE requires); the replay counter advances inside the CUDA graph."""
import numpy as np
import pytest

import eagle
from eagle.graph import normal, random_bits, uniform

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def real_runtime(cupy):
    from eagle.cuda import _shim as _cuda
    if _cuda.is_loaded() and "fake_libcuda" in _cuda.library() or "EAGLE_LIBCUDA" in __import__("os").environ:
        pytest.skip("eagle's CUDA shim is bound to the CPU stand-in in this process (tests/cuda "
                    "ran first); run tests/gpu in a process of its own")
    yield
    cupy.cuda.Device().synchronize()


def draw(make, out, start, launches, size=None):
    g = eagle.Graph()
    g.add_node(make(out))
    g.build()
    g.replays = start
    if size is not None:
        g.set_logical_size(size)
    for k in launches:
        g.launch(k)
    return g


@pytest.mark.parametrize("what,dtype", [("bits", np.uint32), ("uniform", np.float64),
                                        ("uniform", np.float32), ("normal", np.float64),
                                        ("normal", np.float32)])
def test_same_numbers_as_the_cpu(cupy, what, dtype):
    n, key = 100_003, 0x0123456789abcdef
    make = {"bits": lambda o: random_bits(o, key=key),
            "uniform": lambda o: uniform(o, key=key, low=-1.0, high=2.0),
            "normal": lambda o: normal(o, key=key, loc=0.5, scale=3.0)}[what]
    shape = (n, 4) if what == "bits" else (n,)
    for start in (0, (1 << 32) - 1):
        host = np.zeros(shape, dtype=dtype)
        dev = cupy.zeros(shape, dtype=dtype)
        gc = draw(make, host, start, [1, 2])
        gg = draw(make, dev, start, [3])            # launch(3) against launch(1) + launch(2)
        assert gg.replays == gc.replays == start + 3
        got = cupy.asnumpy(dev)
        if what == "normal":
            ulps = np.abs(got.view(np.int64 if dtype == np.float64 else np.int32).astype(np.int64)
                          - host.view(np.int64 if dtype == np.float64 else np.int32).astype(np.int64))
            assert ulps.max() <= 2, ulps.max()
        else:
            np.testing.assert_array_equal(got, host)
        # retuned by patching: the first 1000 samples of replay start + 2, the same numbers
        dev[...] = 0
        draw(make, dev, start + 2, [1], size=1000)
        np.testing.assert_array_equal(cupy.asnumpy(dev)[:1000], got[:1000])
        assert not cupy.asnumpy(dev)[1000:].any()
