"""DLPack CUDA tensors on a real GPU (marker ``gpu``; skips cleanly without CuPy or a GPU):
objects that export CUDA memory only through DLPack (as a PyTorch CUDA tensor does) are
scheduled like CuPy arrays, by the memory they cover."""
import numpy as np
import pytest

import eagle
from eagle.record import foreign as _foreign
from eagle.graph import opaque

pytestmark = pytest.mark.gpu


class DLPackOnly:
    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_a_dlpack_cuda_tensor_shares_the_producers_memory(cupy):
    a = cupy.arange(8.0)
    node = opaque(lambda: None, writes={"t": DLPackOnly(a[2:6])})
    assert node.family == "cuda"
    view = node.writes["t"]
    assert isinstance(view, _foreign.CudaView)
    assert view.__cuda_array_interface__["data"][0] == a[2:6].data.ptr


def test_dlpack_views_are_ordered_with_the_cupy_array_they_view(cupy):
    a = cupy.zeros(16)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"a": a}), name="w")
    g.add_node(opaque(lambda: None, reads={"lo": DLPackOnly(a[:4])}), name="r_lo")
    g.add_node(opaque(lambda: None, writes={"hi": DLPackOnly(a[8:])}), name="w_hi")
    assert g.stages == [["w"], ["r_lo", "w_hi"]]


def test_the_seed_graph_on_dlpack_cuda_tensors(cupy):
    x, left, right, out = cupy.arange(4.0), cupy.zeros(4), cupy.zeros(4), cupy.zeros(4)
    g = eagle.Graph()
    g.add_group([opaque(lambda: cupy.multiply(x, 2, out=left), reads={"x": DLPackOnly(x)},
                        writes={"a": DLPackOnly(left)}),
                 opaque(lambda: cupy.add(x, 1, out=right), reads={"x": DLPackOnly(x)},
                        writes={"b": DLPackOnly(right)})], names=["l", "r"])
    g.add_node(opaque(lambda: cupy.add(left, right, out=out), reads={"a": DLPackOnly(left), "b": DLPackOnly(right)},
                      writes={"out": DLPackOnly(out)}), name="join")
    g.build()
    assert g.backend == "cuda"
    g.launch(3)
    np.testing.assert_array_equal(cupy.asnumpy(out), [1.0, 4.0, 7.0, 10.0])
