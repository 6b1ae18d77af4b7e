"""Arrays from other libraries: objects that export DLPack or the array interface are
accepted wherever a NumPy array is, and ordered by the memory they cover like any view.

The producers here are small wrappers around NumPy arrays that export only DLPack
(``__dlpack__``/``__dlpack_device__``, as PyTorch and JAX CPU tensors do) or only
``__array_interface__``, so no framework enters the test extra.
"""
from __future__ import annotations

import gc
import importlib.util
import weakref

import numpy as np
import pytest

import eagle
import eagle.kernels as ek
from eagle.record import foreign as _foreign
from eagle.graph import GroupConflictError, native, opaque


class DLPackOnly:
    """Exports its array through DLPack and nothing else (no __array__, no buffer)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class InterfaceOnly:
    """Exports its array through ``__array_interface__`` only."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


class OnDevice:
    """A DLPack exporter on another device (device_type from dlpack.h)."""

    def __init__(self, device_type, device_id=0):
        self.device = (device_type, device_id)

    def __dlpack__(self, **kw):
        raise AssertionError("eagle must refuse by device before importing")

    def __dlpack_device__(self):
        return self.device


WRAPPERS = [DLPackOnly, InterfaceOnly]


@pytest.fixture(params=WRAPPERS, ids=lambda w: w.__name__)
def wrap(request):
    return request.param


def staging(g):
    return g.stages, sorted(g.dependencies, key=str)


def test_a_native_kernel_writes_through_the_foreign_view_into_the_original(wrap):
    x, y = np.arange(8.0), np.zeros(8)
    g = eagle.Graph()
    g.add_node(native(ek.scale(3.0), reads={"x": wrap(x)}, writes={"y": wrap(y)}), name="scale")
    g.build()
    g.launch(2)
    assert g.backend == "cpu"
    np.testing.assert_array_equal(y, 3.0 * x)
    g.set_logical_size(3)
    y[:] = -1
    g.launch(1)
    np.testing.assert_array_equal(y, [0.0, 3.0, 6.0, -1, -1, -1, -1, -1])


def test_strided_foreign_views_reach_the_kernel_with_their_strides(wrap):
    x = np.arange(12.0)
    out = np.zeros((6, 2))
    g = eagle.Graph()
    g.add_node(native(ek.copy(), reads={"x": wrap(x[::2])}, writes={"out": wrap(out[:, 1])}), name="c")
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(out[:, 1], x[::2])
    np.testing.assert_array_equal(out[:, 0], 0)


def test_overlapping_foreign_views_are_ordered_like_numpy_views(wrap):
    def record(view):
        a = np.zeros(16)
        g = eagle.Graph()
        g.add_node(opaque(lambda: None, writes={"all": view(a)}), name="w")
        g.add_node(opaque(lambda: None, reads={"lo": view(a[2:6])}), name="r_lo")
        g.add_node(opaque(lambda: None, reads={"even": view(a[::2])}), name="r_even")
        g.add_node(opaque(lambda: None, writes={"odd": view(a[1::2])}), name="w_odd")   # WAR on r_lo only
        g.add_node(opaque(lambda: None, reads={"hi": view(a[8:])}), name="r_hi")       # RAW from w_odd
        g.add_node(opaque(lambda: None, writes={"t": view(a[14:15])}), name="w_t")     # even element
        return staging(g)

    numpy_views = record(lambda v: v)
    assert record(wrap) == numpy_views
    stages, deps = numpy_views
    assert ("r_lo", "w_odd", None) in deps and ("r_even", "w_odd", None) not in deps
    assert ("w_odd", "r_hi", "odd") in deps


def test_a_foreign_view_and_the_numpy_array_it_views_are_ordered(wrap):
    a = np.zeros(8)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"a": a}), name="w")
    g.add_node(opaque(lambda: None, reads={"v": wrap(a[2:4])}), name="r")        # RAW
    g.add_node(opaque(lambda: None, writes={"u": wrap(a[6:8])}), name="w2")      # WAW with w only
    g.add_node(opaque(lambda: None, reads={"b": a[7:]}), name="r2")              # RAW from w2
    assert g.stages == [["w"], ["r", "w2"], ["r2"]]
    assert ("w", "r", "a") in g.dependencies and ("w2", "r2", "u") in g.dependencies


def test_a_group_of_overlapping_foreign_views_is_rejected_and_changes_nothing(wrap):
    a = np.zeros(8)
    g = eagle.Graph()
    with pytest.raises(GroupConflictError, match="'p' and 'q'"):
        g.add_group([opaque(lambda: None, writes={"x": wrap(a[:5])}),
                     opaque(lambda: None, reads={"y": wrap(a[4:])})], names=["p", "q"])
    assert g.nodes == []
    g.add_group([opaque(lambda: None, writes={"x": wrap(a[::2])}),
                 opaque(lambda: None, writes={"y": wrap(a[1::2])})], names=["p", "q"])
    assert g.stages == [["p", "q"]]


def test_opaque_and_native_nodes_share_foreign_memory_in_recording_order(wrap):
    x, y, z = np.arange(6.0), np.zeros(6), np.zeros(6)
    xw, yw, zw = wrap(x), wrap(y), wrap(z)

    def bump():  # an opaque node writing the producer's memory, as a framework's in-place op would
        yw._a += 1.0

    g = eagle.Graph()
    g.add_node(native(ek.copy(), reads={"x": xw}, writes={"y": yw}), name="copy")
    g.add_node(opaque(bump, writes={"y": yw}), name="bump")
    g.add_node(native(ek.scale(2.0), reads={"y": yw}, writes={"z": zw}), name="scale")
    assert g.stages == [["copy"], ["bump"], ["scale"]]
    g.build()
    g.launch(3)
    np.testing.assert_array_equal(y, x + 1)
    np.testing.assert_array_equal(z, 2 * (x + 1))


def test_the_producer_lives_as_long_as_the_node(wrap):
    y = np.zeros(4)
    source = np.arange(4.0)
    alive = weakref.ref(source)
    node = native(ek.copy(), reads={"x": wrap(source)}, writes={"y": y})
    del source
    gc.collect()
    assert alive() is not None
    g = eagle.Graph()
    g.add_node(node, name="copy")
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(y, np.arange(4.0))


def test_empty_foreign_arrays_are_accepted(wrap):
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, reads={"e": wrap(np.zeros(0))}, writes={"f": wrap(np.zeros((0, 3)))}),
               name="empty")
    g.build()
    g.launch(2)


def test_read_only_memory_is_refused_under_writes_only(wrap):
    ro = np.arange(4.0)
    ro.flags.writeable = False
    out = np.zeros(4)
    with pytest.raises(ValueError, match=r"writes\['ro'\] is read-only.*and the node writes it"):
        opaque(lambda: None, writes={"ro": wrap(ro)})
    g = eagle.Graph()
    g.add_node(native(ek.copy(), reads={"ro": wrap(ro)}, writes={"out": out}), name="copy")
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(out, ro)


def test_dlpack_devices_decide_the_family_before_anything_is_imported():
    assert _foreign.foreign_family(DLPackOnly(np.zeros(2))) == "numpy"
    assert _foreign.foreign_family(OnDevice(1)) == "numpy"            # kDLCPU
    assert _foreign.foreign_family(OnDevice(3)) == "numpy"            # kDLCUDAHost: pinned host memory
    assert _foreign.foreign_family(OnDevice(2)) == "cuda"             # kDLCUDA
    assert _foreign.foreign_family(OnDevice(13)) == "cuda"            # kDLCUDAManaged
    assert _foreign.foreign_family(OnDevice(8)) is None               # kDLMetal
    assert _foreign.foreign_family(InterfaceOnly(np.zeros(2))) == "numpy"
    assert _foreign.foreign_family(object()) is None


def test_devices_eagle_has_no_backend_for_are_refused_by_name():
    with pytest.raises(TypeError, match=r"reads\['m'\] is a DLPack tensor on Metal memory"):
        opaque(lambda: None, reads={"m": OnDevice(8)})
    with pytest.raises(TypeError, match="on ROCm memory"):
        opaque(lambda: None, reads={"m": OnDevice(10)})
    with pytest.raises(TypeError, match="device type 99"):
        opaque(lambda: None, reads={"m": OnDevice(99)})
    with pytest.raises(TypeError, match="not host memory"):
        _foreign.host_view(OnDevice(2), "x")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_a_dlpack_cuda_tensor_without_cupy_says_what_to_install():
    with pytest.raises(TypeError, match=r"CUDA memory \(device 1\).*CuPy, which is not installed"):
        opaque(lambda: None, writes={"t": OnDevice(2, 1)})


def test_a_broken_exporter_gets_a_clear_error():
    class BadDevice(DLPackOnly):
        def __dlpack_device__(self):
            raise RuntimeError("boom")

    class BadExport(DLPackOnly):
        def __dlpack__(self, **kw):
            raise BufferError("cannot export")

    with pytest.raises(TypeError, match="__dlpack_device__"):
        opaque(lambda: None, reads={"x": BadDevice(np.zeros(2))})
    with pytest.raises(TypeError, match="NumPy cannot import this BadExport through DLPack"):
        opaque(lambda: None, reads={"x": BadExport(np.zeros(2))})

    bad_iface = InterfaceOnly(np.zeros(2))
    bad_iface.__array_interface__ = {"shape": (2,)}  # no typestr, no data
    with pytest.raises(TypeError, match="array interface"):
        opaque(lambda: None, reads={"x": bad_iface})


def test_objects_that_are_no_array_are_still_refused():
    with pytest.raises(TypeError, match="exporting DLPack or the array interface, got list"):
        opaque(lambda: None, reads={"x": [1.0, 2.0]})


def test_a_node_mixing_host_and_foreign_host_arrays_is_one_family(wrap):
    x, y = np.arange(3.0), np.zeros(3)
    node = native(ek.copy(), reads={"x": wrap(x)}, writes={"y": y})
    assert node.family == "numpy"


# ---- DLPack CUDA tensors, without a GPU: a stand-in for cupy.from_dlpack -------------------

class FakeCudaArray:
    """A __cuda_array_interface__ object over a host array's addresses (staging only
    compares addresses; nothing here is launched)."""

    def __init__(self, a):
        self._a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str, "version": 3,
                                         "data": (a.__array_interface__["data"][0], False),
                                         "strides": None if a.flags.c_contiguous else a.strides}


class CudaTensor(DLPackOnly):
    """A DLPack exporter on CUDA device 0 (kDLCUDA)."""

    def __dlpack_device__(self):
        return (2, 0)


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    import types
    imported = []

    def from_dlpack(obj):
        imported.append(obj)
        if getattr(obj, "broken", False):
            raise RuntimeError("unsupported dtype")
        return FakeCudaArray(obj._a)

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(from_dlpack=from_dlpack))
    return imported


def test_a_dlpack_cuda_tensor_is_the_cuda_family_imported_through_cupy(fake_cupy):
    a = np.zeros(8)
    t = CudaTensor(a)
    node = opaque(lambda: None, writes={"t": t})
    assert node.family == "cuda" and fake_cupy == [t]
    view = node.writes["t"]
    assert isinstance(view, _foreign.CudaView) and view.source is t
    assert view.__cuda_array_interface__["data"][0] == a.__array_interface__["data"][0]
    assert view.shape == (8,) and "CudaTensor" in repr(view)


def test_dlpack_cuda_views_are_ordered_with_other_cuda_arrays_by_address(fake_cupy):
    a = np.zeros(16)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"all": FakeCudaArray(a)}), name="w")
    g.add_node(opaque(lambda: None, reads={"lo": CudaTensor(a[:4])}), name="r_lo")     # RAW
    g.add_node(opaque(lambda: None, writes={"hi": CudaTensor(a[8:])}), name="w_hi")    # WAW with w
    g.add_node(opaque(lambda: None, reads={"mid": FakeCudaArray(a[4:8])}), name="r_mid")  # RAW from w only
    assert g.stages == [["w"], ["r_lo", "w_hi", "r_mid"]]
    assert ("w", "r_lo", "all") in g.dependencies and ("w", "w_hi", None) in g.dependencies


def test_a_node_mixing_a_dlpack_cuda_tensor_and_a_numpy_array_is_refused(fake_cupy):
    with pytest.raises(TypeError, match="mixes NumPy arrays and CUDA arrays"):
        opaque(lambda: None, reads={"x": np.zeros(2)}, writes={"t": CudaTensor(np.zeros(2))})


def test_a_dlpack_cuda_tensor_cupy_cannot_import_gets_a_clear_error(fake_cupy):
    t = CudaTensor(np.zeros(2))
    t.broken = True
    with pytest.raises(TypeError, match=r"reads\['t'\]: CuPy cannot import this CudaTensor through DLPack"):
        opaque(lambda: None, reads={"t": t})


# ---- DLPack exporters that speak the old protocol or lie about themselves.

class LegacyExporter:
    """An exporter of the unversioned protocol: __dlpack__ takes no max_version."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


def test_writing_an_unversioned_dlpack_export_is_refused_with_the_real_reason():
    g = eagle.Graph()
    with pytest.raises(ValueError, match="unversioned DLPack protocol") as info:
        g.add_node(opaque(lambda: None, writes={"a": LegacyExporter(np.zeros(3))}), name="w")
    assert "and the node writes it: pass a writable array" in str(info.value)
    assert list(g.nodes) == []
    g.add_node(opaque(lambda: None, reads={"a": LegacyExporter(np.zeros(3))}), name="r")
    g.build().launch(2)


class ConsumedCapsule:
    def __init__(self):
        self.capsule = np.zeros(3).__dlpack__()

    def __dlpack__(self, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_a_capsule_handed_out_twice_is_refused_cleanly_the_second_time():
    obj = ConsumedCapsule()
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, reads={"a": obj}), name="first")
    with pytest.raises(TypeError, match="NumPy cannot import"):
        g.add_node(opaque(lambda: None, reads={"a": obj}), name="second")
    assert [n for n in g._names] == ["first"]
