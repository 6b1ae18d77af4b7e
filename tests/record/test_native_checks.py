"""What a native node refuses or changes at record time: object dtypes, arrays an
untyped kernel did not declare it takes, and a split that would race on the node's
own overlapping arrays (such a node runs whole, and says why)."""
import ctypes
import threading

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import eagle
import eagle.kernels as ek
import eagle.native as en
from eagle.graph import compact, native, opaque, reorder


def untyped_copy():
    """eagle's copy kernel (y[i] = x[i]) as a bare ctypes function pointer: no declared types."""
    return en.CTYPES_KERNEL(ek.copy().address)


OBJECT_DTYPES = [np.dtype(object), np.dtype([("x", "f8"), ("o", object)]),
                 np.dtype([("inner", [("o", object)])]), np.dtype((object, 2))]


@pytest.mark.parametrize("dtype", OBJECT_DTYPES, ids=str)
@pytest.mark.parametrize("where", ["reads", "writes"])
def test_object_dtypes_are_refused_by_native_nodes(dtype, where):
    bad = np.empty(4, dtype=dtype)
    ok = np.zeros(4)
    arrays = {"reads": {"x": bad}, "writes": {"y": ok}} if where == "reads" else \
        {"reads": {"x": ok}, "writes": {"y": bad}}
    for kernel in (untyped_copy(), en.Kernel(untyped_copy()), ek.copy()):
        with pytest.raises(TypeError, match="holds Python objects"):
            native(kernel, **arrays)


@pytest.mark.parametrize("dtype", OBJECT_DTYPES, ids=str)
def test_object_dtypes_are_refused_by_compact_and_reorder(dtype):
    state = {"s": np.empty(5, dtype=dtype)}
    with pytest.raises(TypeError, match="holds Python objects"):
        compact(np.ones(5, bool), state)
    with pytest.raises(TypeError, match="holds Python objects"):
        reorder(np.zeros(5, np.int64), state, n_keys=2)


def test_opaque_nodes_may_hold_objects():
    objs = np.empty(3, dtype=object)

    def fill():
        objs[:] = ["a", "b", "c"]

    g = eagle.Graph()
    g.add_node(opaque(fill, writes={"o": objs}))
    g.build().launch(1)
    assert list(objs) == ["a", "b", "c"]


def test_a_kernel_cannot_declare_an_object_dtype():
    with pytest.raises(TypeError, match="holds Python objects"):
        en.Kernel(untyped_copy(), dtypes=object)
    with pytest.raises(TypeError, match="holds Python objects"):
        en.Kernel(untyped_copy(), dtypes=(np.float64, [("o", object)]))


def test_declared_dtypes_and_ndim_are_checked_when_the_node_is_made():
    x, y = np.arange(6.0), np.zeros(6)
    k = en.Kernel(untyped_copy(), dtypes=np.float64, ndim=1)
    assert k.dtypes == np.dtype(np.float64) and k.ndim == 1
    native(k, reads={"x": x}, writes={"y": y})
    with pytest.raises(TypeError, match=r"takes float64 for array 1 \('y'\), got float32"):
        native(k, reads={"x": x}, writes={"y": np.zeros(6, np.float32)})
    with pytest.raises(TypeError, match=r"takes a 1-d array for array 0 \('x'\), got 2-d"):
        native(k, reads={"x": x.reshape(3, 2)}, writes={"y": y})


def test_declared_dtypes_per_array_with_none_for_any():
    x, y = np.arange(6, dtype=np.int64), np.zeros(6)
    k = en.Kernel(untyped_copy(), dtypes=(None, np.float64), ndim=(None, 1))
    native(k, reads={"x": x}, writes={"y": y})
    native(k, reads={"x": x.astype(np.float32).reshape(2, 3)}, writes={"y": y})
    with pytest.raises(TypeError, match="array 1"):
        native(k, reads={"x": x}, writes={"y": x.copy()})
    with pytest.raises(TypeError, match="declares dtypes for 2 array"):
        native(k, reads={"x": x, "z": x}, writes={"y": y})


def test_native_takes_the_declarations_and_a_kernel_of_a_kernel_keeps_them():
    x, y = np.arange(4.0), np.zeros(4)
    node = native(untyped_copy(), reads={"x": x}, writes={"y": y}, dtypes=np.float64, ndim=1)
    assert node.kernel.dtypes == np.dtype(np.float64)
    with pytest.raises(TypeError, match="int32"):
        native(untyped_copy(), reads={"x": x}, writes={"y": np.zeros(4, np.int32)}, dtypes="f8")
    k = en.Kernel(untyped_copy(), dtypes=np.float64)
    assert en.Kernel(k).dtypes == np.dtype(np.float64)
    assert en.Kernel(k, dtypes=np.int32).dtypes == np.dtype(np.int32)
    assert en.Kernel(k, ndim=2).ndim == 2 and en.Kernel(k, ndim=2).dtypes == np.dtype(np.float64)


@pytest.mark.parametrize("kwargs, match", [
    ({"dtypes": "not a dtype"}, "dtypes="),
    ({"dtypes": 3.5}, "dtypes="),
    ({"ndim": -1}, "ndim="),
    ({"ndim": True}, "ndim="),
    ({"ndim": 1.0}, "ndim="),
    ({"ndim": (1, "a")}, "ndim="),
])
def test_bad_declarations_are_refused(kwargs, match):
    with pytest.raises(TypeError, match=match):
        en.Kernel(untyped_copy(), **kwargs)


def test_undeclared_kernels_still_take_anything_numeric():
    x, y = np.arange(4, dtype=np.int64), np.zeros((4, 2))
    native(untyped_copy(), reads={"x": x}, writes={"y": y})


# ---- arrays not aligned for the dtype a kernel declares are refused ----------------------

def _packed_field(n):
    """A float64 field of a packed structured array: at byte 1 of 9-byte records."""
    return np.zeros(n, np.dtype([("tag", "u1"), ("v", "<f8")]))["v"]


def _byte_offset_view(n):
    """float64 elements starting 4 bytes into a buffer."""
    return np.zeros(8 * n + 8, np.uint8)[4:4 + 8 * n].view(np.float64)


def _aligned_pointer_odd_stride(n):
    """A first element at an aligned address, the others 9 bytes apart."""
    return np.zeros(n, np.dtype([("v", "<f8"), ("tag", "u1")]))["v"]


UNALIGNED = [_packed_field, _byte_offset_view, _aligned_pointer_odd_stride]
BUILTIN_NODES = {
    "fill": lambda bad, ok: native(ek.fill(1.0), writes={"out": bad}),
    "copy-reads": lambda bad, ok: native(ek.copy(), reads={"x": bad}, writes={"out": ok}),
    "copy-writes": lambda bad, ok: native(ek.copy(), reads={"x": ok}, writes={"out": bad}),
    "scale": lambda bad, ok: native(ek.scale(2.0), reads={"x": bad}, writes={"out": ok}),
    "axpy": lambda bad, ok: native(ek.axpy(2.0), reads={"x": ok}, writes={"y": bad}),
    "add": lambda bad, ok: native(ek.add(), reads={"a": ok, "b": bad}, writes={"out": ok.copy()}),
    "polynomial": lambda bad, ok: native(ek.polynomial([1.0, 2.0]), reads={"x": bad}, writes={"out": ok}),
}


@pytest.mark.parametrize("make", UNALIGNED, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("node", BUILTIN_NODES, ids=str)
def test_eagles_kernels_refuse_arrays_not_aligned_for_float64(make, node):
    bad, ok = make(16), np.zeros(16)
    assert not bad.flags.aligned
    with pytest.raises(ValueError, match="not aligned for its dtype float64"):
        BUILTIN_NODES[node](bad, ok)
    BUILTIN_NODES[node](ok.copy(), ok)    # the same node over aligned arrays is made


def test_a_declared_dtype_refuses_unaligned_arrays_and_an_undeclared_one_takes_them():
    bad, ok = _byte_offset_view(8), np.zeros(8)
    k = en.Kernel(untyped_copy(), dtypes=np.float64)
    with pytest.raises(ValueError, match=r"array 1 \('y'\) is not aligned"):
        native(k, reads={"x": ok}, writes={"y": bad})
    # (None: any dtype) declares nothing about the C type, nor does an untyped kernel
    native(en.Kernel(untyped_copy(), dtypes=(np.float64, None)), reads={"x": ok}, writes={"y": bad})
    native(untyped_copy(), reads={"x": ok}, writes={"y": bad})


def test_aligned_views_of_a_byte_buffer_and_empty_ones_are_taken():
    raw = np.zeros(8 * 9, np.uint8)
    g = eagle.Graph()
    g.add_node(native(ek.fill(2.5), writes={"out": raw[8:].view(np.float64)}), name="fill")
    g.build()
    g.launch(1)
    assert (raw[8:].view(np.float64) == 2.5).all() and (raw[:8] == 0).all()
    native(ek.fill(1.0), writes={"e": raw[4:4].view(np.float64)})   # no element to misalign


# ---- a node whose own arrays overlap is not split ---------------------------------------

def shift_graph(a, teams):
    """y[i] = x[i] over x = a[:-1], y = a[1:]: each sample reads what the one before wrote."""
    g = eagle.Graph()
    g.add_node(native(ek.copy(), reads={"x": a[:-1]}, writes={"y": a[1:]}), name="shift")
    return g.build(cpu=eagle.CpuOptions(teams=teams))


@pytest.mark.parametrize("teams", ["auto", "serial", "parallel"])
def test_a_node_reading_what_it_writes_elsewhere_runs_whole(threads, teams):
    n = 2_000_001
    results = []
    for n_threads in (1, 2):
        threads(n_threads)
        a = np.arange(float(n))
        shift_graph(a, teams).launch(1)
        results.append(a)
    # run whole, sample after sample: every sample becomes a[0]
    np.testing.assert_array_equal(results[0], np.zeros(n))
    np.testing.assert_array_equal(results[1], results[0])


def test_the_refusal_is_on_the_node_and_in_the_plan():
    a = np.arange(10.0)
    node = native(ek.copy(), reads={"x": a[:-1]}, writes={"y": a[1:]})
    assert node.split is False
    assert "'y'" in node.split_refused_reason and "'x'" in node.split_refused_reason
    g = eagle.Graph()
    g.add_node(node, name="shift")
    assert g.split_refused == [("shift", node.split_refused_reason)]
    assert "'shift' not split: it writes 'y' and reads 'x', which overlap" in str(g.build().plan())


def test_two_overlapping_writes_are_not_split_and_in_place_is():
    a = np.zeros(12)
    two = native(untyped_copy(), writes={"u": a[:6], "v": a[3:9]})
    assert not two.split and "writes 'v' and writes 'u'" in two.split_refused_reason
    both = native(ek.add(), reads={"p": np.zeros(6), "q": np.zeros(6)}, writes={"y": a[:6]})
    assert both.split  # control: nothing overlaps
    in_place = native(ek.scale(2.0), reads={"x": a[:6]}, writes={"y": a[:6]})
    assert in_place.split and in_place.split_refused_reason is None
    same_bytes = native(ek.scale(2.0), reads={"x": a[:6]}, writes={"y": np.frombuffer(a, count=6)})
    assert same_bytes.split  # other owner, same samples
    wild = native(ek.add(), reads={"p": a[:6], "q": a[::2]}, writes={"y": a[1:7]})
    assert not wild.split and "'y'" in wild.split_refused_reason
    asked = native(ek.copy(), reads={"x": a[:-1]}, writes={"y": a[1:]}, split=False)
    assert not asked.split and asked.split_refused_reason is None
    disjoint = native(ek.copy(), reads={"x": a[::2]}, writes={"y": a[1::2]})
    assert disjoint.split


# ---- Hostile inputs to the split of a native node's range across threads.
#
# A split native node processes samples [start, stop) on each thread; the
# result must be the sequential oracle's. Two ways to break that: a written
# array whose samples share bytes (threads would race on them), and a logical
# size so large that the split's index arithmetic overflows.

needs_openmp = pytest.mark.skipif(not eagle.have_openmp(), reason="eagle built without OpenMP")

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)


def _self_overlapping_writes():
    n = 1000
    return {
        "zero stride": as_strided(np.zeros(1), shape=(n,), strides=(0,)),
        "overlapping rows": as_strided(np.zeros(n + 1), shape=(n, 2), strides=(8, 8)),
        "rows sharing their last element": as_strided(np.zeros(3 * n), shape=(n, 4), strides=(24, 8)),
    }


@pytest.mark.parametrize("label", list(_self_overlapping_writes()))
def test_a_write_whose_samples_share_bytes_is_never_split(label):
    y = _self_overlapping_writes()[label]
    node = native(ek.nothing(), writes={"y": y})
    assert not node.split
    assert "'y'" in node.split_refused_reason


@pytest.mark.parametrize("make", [
    lambda n: np.zeros(n),
    lambda n: np.zeros((n, 3))[:, 1],                        # strided, disjoint samples
    lambda n: np.zeros((3, n)).T,                            # samples interleaved, disjoint
    lambda n: np.zeros(2 * n)[::-2],                         # negative stride
    lambda n: as_strided(np.zeros(1), shape=(1,), strides=(0,)) if n == 1 else np.zeros(n),
], ids=["dense", "column", "transposed", "reversed", "one sample"])
def test_a_write_with_disjoint_samples_is_still_split(make):
    node = native(ek.nothing(), writes={"y": make(1000)})
    assert node.split and node.split_refused_reason is None


@needs_openmp
def test_a_split_zero_stride_write_gives_the_sequential_result(threads):
    # copy into one element per sample: sequentially the last sample's value stays
    threads(2)
    n = 200_001
    x = np.arange(n, dtype=float)
    cell = np.zeros(1)
    y = as_strided(cell, shape=(n,), strides=(0,))
    g = eagle.Graph()
    g.add_node(native(ek.copy(), reads={"x": x}, writes={"y": y}), name="last")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    g.launch(1)
    assert cell[0] == x[-1]


@needs_openmp
@pytest.mark.parametrize("n_threads", [2, 3, 4, 7])
def test_the_split_of_a_huge_logical_size_covers_it_exactly(threads, n_threads):
    # a zero-stride read lets the logical size reach 2**62 without memory: every sample
    # of [0, n) goes to exactly one thread, and no range is negative (n * tid overflows)
    threads(n_threads)
    ranges, lock = [], threading.Lock()

    @KERNEL
    def record(start, stop, data, strides, user_data):
        with lock:
            ranges.append((start, stop))

    n = 2 ** 62
    x = as_strided(np.zeros(1, np.uint8), shape=(n,), strides=(0,))
    g = eagle.Graph()
    g.add_node(native(record, reads={"x": x}), name="record")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    g.launch(1)
    ranges.sort()
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(0 <= start < stop for start, stop in ranges)
    # the same cut as for any size: thread t starts at floor(n * t / nt)
    assert [s for s, _ in ranges] == [n * t // len(ranges) for t in range(len(ranges))]


def test_a_ctypes_kernel_is_named_after_its_function_in_errors(tmp_path):
    """CTYPES_KERNEL(("plus_c", lib)) keeps no __name__: its name comes from the library's symbol."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "k.c"
    src.write_text("#include <stdint.h>\n"
                   "void plus_c(int64_t a, int64_t b, char **d, const int64_t *s, void *u) {}\n")
    lib_path = tmp_path / "k.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib_path), str(src)], check=True, timeout=120)
    lib = ctypes.CDLL(str(lib_path))
    k = en.CTYPES_KERNEL(("plus_c", lib))
    assert en.Kernel(k).name == "plus_c"
    with pytest.raises(TypeError, match="kernel 'plus_c' takes float32"):
        native(k, reads={"x": np.zeros(3)}, dtypes=np.float32)
    g = eagle.Graph()
    g.add_node(native(k, reads={"x": np.zeros(3)}))
    assert g.nodes == ["plus_c"]
    by_attr = lib.plus_c                        # a ctypes function of the library: its own __name__
    by_attr.argtypes, by_attr.restype = en.CTYPES_KERNEL._argtypes_, None
    assert en.Kernel(by_attr).name == "plus_c"
    assert en.Kernel(en.CTYPES_KERNEL(lambda *a: None)).name == "ctypes"   # a Python callback: no symbol
