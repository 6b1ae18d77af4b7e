"""Random nodes (random_bits, uniform, normal) on the cuda backend, against the CPU
stand-in of the CUDA driver (tests/doubles/fake_libcuda.c, a TEST DOUBLE).

The stand-in runs eagle's own kernel, eagle_random of eagle/cuda/kernels/random.cu,
compiled by the CUDA C emulator (tests/doubles/cuda_emulation.h) from the same
csrc/include/eagle/philox.h the CPU kernels are built from. The oracle is the cpu
backend in the same process. What only the stand-in can show is here (the nodes the
capture adds, g.replays across a rebuild, record-time errors of device arrays); the
scenarios every backend shares (with the stand-in's counters where it has them: a
logical size patched into the kernel node, not rebuilt) are
tests/random/test_random_on_every_backend.py.
"""
import numpy as np
import pytest

import eagle
from eagle.graph import normal, random_bits, uniform
from fake_cuda import dev


@pytest.fixture
def ck(cuda_mod):
    import eagle.cuda.backend  # noqa: F401  (binds the backend to the stand-in)
    from eagle.cuda.kernel_nodes import SIZE, SIZE_PTR, cuda_kernel
    return cuda_kernel, SIZE, SIZE_PTR


def test_two_random_nodes_and_the_graph_s_replay_node(fake, ck):
    """Two nodes of one graph read one counter; the capture adds one eagle_random per
    node and one eagle_replay_step per graph."""
    a, b = dev(np.zeros(100), np.zeros(100, dtype=np.float32))
    g = eagle.Graph()
    g.add_node(uniform(a, key=1), name="u")
    g.add_node(normal(b, key=1), name="z")
    g.build()
    assert g._backend.graph_nodes == 3 and g._backend.sized_kernels == 2
    g.replays = 41
    g.launch(2)
    ca, cb = np.zeros(100), np.zeros(100, dtype=np.float32)
    gc = eagle.Graph()
    gc.add_node(uniform(ca, key=1), name="u")
    gc.add_node(normal(cb, key=1), name="z")
    gc.build()
    gc.replays = 41
    gc.launch(2)
    np.testing.assert_array_equal(a.host, ca)
    np.testing.assert_array_equal(b.host, cb)
    assert g.replays == 43


def test_replays_survive_a_rebuild(fake, ck):
    a, = dev(np.zeros(10))
    g = eagle.Graph()
    g.add_node(uniform(a, key=1))
    g.build()
    g.launch(4)
    g.build()                      # a new CUDA graph, the same g.replays
    assert g.replays == 4
    g.launch(1)
    assert g.replays == 5


# ---- record-time errors -----------------------------------------------------------------

def test_cuda_record_time_errors(fake, ck):
    a, ids32, ro = dev(np.zeros(10), np.zeros(10, dtype=np.int32), np.zeros(10))
    with pytest.raises(TypeError, match="int64"):
        uniform(a, key=1, ids={"id": ids32})
    with pytest.raises(TypeError, match="one device"):
        uniform(a, key=1, ids={"id": np.zeros(10, dtype=np.int64)})
    bad, = dev(np.zeros((4, 8), dtype=np.uint32))
    with pytest.raises(ValueError, match="contiguous"):
        random_bits(bad[:, ::2], key=1)
    same, = dev(np.zeros(10, dtype=np.int64))
    with pytest.raises(TypeError):
        uniform(same, key=1)      # int64 out
    node = normal({"z": a}, key=2)
    assert node.kind == "random" and node.sized and repr(node) == "normal(out='z', key=2, cuda)"
