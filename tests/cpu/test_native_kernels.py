"""Native kernels: every way of handing eagle a nogil C function, eagle's own
kernels, native and opaque nodes side by side, the logical size, results that
do not depend on threads or teams, and the GIL released during a native launch.

C kernels are compiled at test time with the system C compiler (``cc -shared
-fPIC``) into a temporary directory; a ctypes CFUNCTYPE *callback* is never used
as a kernel: it would need the GIL, and native kernels run without it.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import threading

import numpy as np
import pytest

import eagle
import eagle.kernels as ek
import eagle.native as en
from eagle.cpu import backend as _backend_cpu
from eagle.graph import native, opaque

KERNEL_C = r"""
#include <stdint.h>
#include <time.h>

/* y[i] = 2 * x[i]  (reads x, writes y) */
void twice(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data)
{
    (void)user_data;
    for (int64_t i = start; i < stop; ++i)
        *(double *)(data[1] + i * strides[1]) = 2.0 * *(double *)(data[0] + i * strides[0]);
}

/* y[i] = a * x[i] + b[i], a = *(double *)user_data  (reads x, b, writes y) */
void axpb(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data)
{
    double a = *(const double *)user_data;
    for (int64_t i = start; i < stop; ++i)
        *(double *)(data[2] + i * strides[2]) =
            a * *(double *)(data[0] + i * strides[0]) + *(double *)(data[1] + i * strides[1]);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Handshake with a Python thread (reads flag, writes state; int64 arrays):
 * state[0] = 1 says the kernel runs; then wait until the Python thread sets
 * flag[0] (possible only if the launch released the GIL). state[1] = 1 if the
 * flag came, 2 if the kernel gave up after a deadlock guard of 30 s. */
void handshake(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data)
{
    (void)strides; (void)user_data;
    if (start != 0 || stop <= start)
        return;
    volatile int64_t *flag = (volatile int64_t *)data[0];
    volatile int64_t *state = (volatile int64_t *)data[1];
    state[0] = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    double t0 = seconds();
    while (flag[0] == 0) {
        if (seconds() - t0 > 30.0) {
            state[1] = 2;
            return;
        }
    }
    state[1] = 1;
}
"""

CFFI_KERNEL_TYPE = "void(*)(int64_t, int64_t, char **, const int64_t *, void *)"


@pytest.fixture(scope="module")
def clib(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the test kernels")
    d = tmp_path_factory.mktemp("kernels")
    src = d / "kernels.c"
    src.write_text(KERNEL_C)
    so = d / "libeagle_test_kernels.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(so), str(src)], check=True)
    return ctypes.CDLL(str(so))


def address(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def ctypes_kernel(lib, name):
    """The library's function with eagle's ctypes prototype (a function pointer, not a callback)."""
    return en.CTYPES_KERNEL(address(lib, name))


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# capsule names must outlive the capsules: keep the buffers here
_CAPSULE_NAMES = {}


def capsule(addr, name=en.SIGNATURE):
    if name is None:
        return _PyCapsule_New(addr, None, None)
    buf = _CAPSULE_NAMES.setdefault(name, ctypes.create_string_buffer(name.encode()))
    return _PyCapsule_New(addr, ctypes.cast(buf, ctypes.c_char_p), None)


def cffi_kernel(addr, ctype=CFFI_KERNEL_TYPE):
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    return ffi.cast(ctype, addr)


def numba_twice():
    try:
        import numba
        from numba import types
    except Exception as e:  # not installed, or not usable with this numpy
        pytest.skip(f"numba not importable: {e}")
    sig = types.void(types.int64, types.int64, types.CPointer(types.voidptr),
                     types.CPointer(types.int64), types.voidptr)

    @numba.cfunc(sig, nopython=True)
    def twice_nb(start, stop, data, strides, user_data):
        x = numba.carray(data[0], stop, dtype=np.float64)
        y = numba.carray(data[1], stop, dtype=np.float64)
        for i in range(start, stop):
            y[i] = 2.0 * x[i]

    return twice_nb




def run_twice(kernel, n=1001, teams="auto", replays=2):
    x = np.arange(n, dtype=np.float64) - 7.5
    y = np.full(n, -1.0)
    g = eagle.Graph()
    g.add_node(native(kernel, reads={"x": x}, writes={"y": y}), name="twice")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(replays)
    np.testing.assert_array_equal(y, 2.0 * x)
    return g


# ---- every way of making a kernel -------------------------------------------


def test_ctypes_function_pointer_from_library(clib):
    f = clib.twice
    f.argtypes = list(en.CTYPES_KERNEL._argtypes_)
    f.restype = None
    k = en.Kernel(f)
    assert k.address == address(clib, "twice")
    assert k.name == "twice"
    run_twice(f)


def test_ctypes_prototype_instance(clib):
    f = ctypes_kernel(clib, "twice")
    assert en.Kernel(f).address == address(clib, "twice")
    run_twice(f)


def test_ctypes_void_pointer_data_is_accepted(clib):
    proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                             ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)
    run_twice(proto(address(clib, "twice")))


def test_capsule(clib):
    cap = capsule(address(clib, "twice"))
    k = en.Kernel(cap)
    assert k.address == address(clib, "twice")
    run_twice(cap)


def test_cffi_function_pointer(clib):
    f = cffi_kernel(address(clib, "twice"))
    k = en.Kernel(f)
    assert k.address == address(clib, "twice")
    run_twice(f)


def test_cffi_function_pointer_without_const(clib):
    f = cffi_kernel(address(clib, "twice"), "void(*)(int64_t, int64_t, char **, int64_t *, void *)")
    run_twice(f)


def test_numba_cfunc():
    f = numba_twice()
    k = en.Kernel(f)
    assert k.address == f.address
    run_twice(f)


def test_kernel_of_kernel_and_name(clib):
    k = en.Kernel(ctypes_kernel(clib, "twice"), name="dbl")
    k2 = en.Kernel(k)
    assert k2.address == k.address and k2.name == "dbl"
    g = run_twice(k2)
    assert g.nodes == ["twice"]
    g = eagle.Graph()
    x, y = np.ones(4), np.zeros(4)
    g.add_node(native(k2, reads={"x": x}, writes={"y": y}))
    assert g.nodes == ["dbl"]


def test_user_data_ctypes_object(clib):
    a = ctypes.c_double(3.0)
    n = 257
    x = np.arange(n, dtype=np.float64)
    b = np.full(n, 0.5)
    y = np.zeros(n)
    g = eagle.Graph()
    g.add_node(native(ctypes_kernel(clib, "axpb"), reads={"x": x, "b": b}, writes={"y": y},
                      user_data=a), name="axpb")
    g.build()
    g.launch(1)
    np.testing.assert_array_equal(y, 3.0 * x + 0.5)
    a.value = -1.0            # user_data is the object's address: a change shows on the next replay
    g.launch(1)
    np.testing.assert_array_equal(y, -x + 0.5)


def test_user_data_integer_address(clib):
    a = ctypes.c_double(2.0)
    x, b, y = np.arange(5.0), np.ones(5), np.zeros(5)
    k = en.Kernel(ctypes_kernel(clib, "axpb"), user_data=ctypes.addressof(a))
    assert k.user_data_address == ctypes.addressof(a)
    g = eagle.Graph()
    g.add_node(native(k, reads={"x": x, "b": b}, writes={"y": y}))
    g.build().launch(1)
    np.testing.assert_array_equal(y, 2.0 * x + 1.0)


def test_user_data_of_wrong_type_is_refused(clib):
    with pytest.raises(TypeError, match="user_data"):
        en.Kernel(ctypes_kernel(clib, "twice"), user_data=1.5)


# ---- wrong signatures are refused ----------------------------------------------


@pytest.mark.parametrize("name", ["void (int, int)", "eagle.kernel", ""])
def test_capsule_with_wrong_name_is_refused(clib, name):
    with pytest.raises(TypeError, match="capsule"):
        en.Kernel(capsule(address(clib, "twice"), name))


def test_capsule_without_name_is_refused(clib):
    with pytest.raises(TypeError, match="capsule"):
        en.Kernel(capsule(address(clib, "twice"), None))


@pytest.mark.parametrize("restype, argtypes", [
    (None, (ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)),
    (None, (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p))),
    (None, (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_int)),
    (ctypes.c_int, (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p),
                    ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)),
    (None, (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_double), ctypes.c_void_p)),
], ids=["int32-range", "too-few", "too-many", "returns-int", "double-strides"])
def test_ctypes_with_wrong_prototype_is_refused(clib, restype, argtypes):
    f = ctypes.CFUNCTYPE(restype, *argtypes)(address(clib, "twice"))
    with pytest.raises(TypeError, match="ctypes"):
        en.Kernel(f)


def test_ctypes_library_function_without_argtypes_is_refused(clib):
    f = ctypes.CDLL(clib._name).twice      # restype int, no argtypes: unchecked
    with pytest.raises(TypeError, match="ctypes"):
        en.Kernel(f)


@pytest.mark.parametrize("ctype", [
    "void(*)(int, int)",
    "int(*)(int64_t, int64_t, char **, const int64_t *, void *)",
    "void(*)(int64_t, int64_t, char **, const double *, void *)",
    "void *",
    "int64_t *",
])
def test_cffi_with_wrong_type_is_refused(clib, ctype):
    f = cffi_kernel(address(clib, "twice"), ctype)
    with pytest.raises(TypeError, match="cffi"):
        en.Kernel(f)


def test_numba_cfunc_with_wrong_signature_is_refused():
    try:
        import numba
        from numba import types
    except Exception as e:
        pytest.skip(f"numba not importable: {e}")

    @numba.cfunc(types.void(types.int32, types.int32, types.CPointer(types.voidptr),
                            types.CPointer(types.int64), types.voidptr))
    def bad(start, stop, data, strides, user_data):
        pass

    with pytest.raises(TypeError):
        en.Kernel(bad)


@pytest.mark.parametrize("obj", [42, "twice", None, 1.5, b"\x00" * 8, object(), lambda *a: None, len,
                                 np.zeros(3)], ids=["int", "str", "None", "float", "bytes", "object",
                                                     "lambda", "builtin", "ndarray"])
def test_arbitrary_object_is_refused(obj):
    with pytest.raises(TypeError, match="cannot make an eagle kernel"):
        en.Kernel(obj)
    with pytest.raises(TypeError):
        native(obj, reads={"x": np.zeros(3)}, writes={"y": np.zeros(3)})


# ---- eagle's own kernels ----------------------------------------------------------


def kernel_graph(kernel, reads, writes, teams="auto", replays=1):
    g = eagle.Graph()
    g.add_node(native(kernel, reads=reads, writes=writes))
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(replays)
    return g


@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_eagle_kernels_give_correct_results(threads, teams):
    threads(2)
    n = 10_007
    x = np.linspace(-3, 5, n)
    b = np.cos(np.arange(n, dtype=np.float64))

    out = np.zeros(n)
    kernel_graph(ek.fill(2.5), {}, {"out": out}, teams)
    np.testing.assert_array_equal(out, 2.5)

    out = np.zeros(n)
    kernel_graph(ek.copy(), {"x": x}, {"out": out}, teams)
    np.testing.assert_array_equal(out, x)

    out = np.zeros(n)
    kernel_graph(ek.scale(-1.25), {"x": x}, {"out": out}, teams)
    np.testing.assert_array_equal(out, -1.25 * x)

    y = b.copy()
    kernel_graph(ek.axpy(0.5), {"x": x}, {"y": y}, teams, replays=3)
    expected = b.copy()
    for _ in range(3):
        expected += 0.5 * x
    np.testing.assert_array_equal(y, expected)

    out = np.zeros(n)
    kernel_graph(ek.add(), {"a": x, "b": b}, {"out": out}, teams)
    np.testing.assert_array_equal(out, x + b)

    out = np.full(n, 7.0)
    kernel_graph(ek.nothing(), {"x": x}, {"out": out}, teams, replays=5)
    np.testing.assert_array_equal(out, 7.0)


def test_eagle_kernels_follow_strides():
    base_x = np.arange(40, dtype=np.float64)
    base_out = np.full(60, -1.0)
    x = base_x[::2]          # 20 samples, stride 16 bytes
    out = base_out[::3]      # 20 samples, stride 24 bytes
    kernel_graph(ek.scale(3.0), {"x": x}, {"out": out})
    np.testing.assert_array_equal(out, 3.0 * x)
    untouched = np.ones(60, dtype=bool)
    untouched[::3] = False
    assert (base_out[untouched] == -1.0).all()


def test_nothing_takes_any_arrays():
    a = np.zeros((3, 4), dtype=np.float32)
    b = np.zeros(5, dtype=np.int8)
    kernel_graph(ek.nothing(), {"a": a}, {"b": b})
    kernel_graph(ek.nothing(), {}, {})


def test_eagle_kernels_declare_arity_and_dtype():
    assert (ek.add().n_reads, ek.add().n_writes, ek.add().dtype) == (2, 1, "float64")
    assert (ek.fill(1.0).n_reads, ek.fill(1.0).n_writes) == (0, 1)
    assert (ek.axpy(1.0).n_reads, ek.axpy(1.0).n_writes) == (1, 1)
    nothing = ek.nothing()
    assert (nothing.n_reads, nothing.n_writes, nothing.dtype) == (None, None, None)
    assert [k.name for k in (ek.fill(0.0), ek.copy(), ek.scale(1.0), ek.axpy(1.0), ek.add(), ek.nothing())] \
        == ["fill", "copy", "scale", "axpy", "add", "nothing"]


@pytest.mark.parametrize("make, reads, writes, match", [
    (lambda: ek.add(), {"a": np.zeros(3)}, {"out": np.zeros(3)}, "reads 2"),
    (lambda: ek.add(), {"a": np.zeros(3), "b": np.zeros(3), "c": np.zeros(3)}, {"out": np.zeros(3)}, "reads 2"),
    (lambda: ek.fill(1.0), {"x": np.zeros(3)}, {"out": np.zeros(3)}, "reads 0"),
    (lambda: ek.copy(), {"x": np.zeros(3)}, {}, "writes 1"),
    (lambda: ek.copy(), {"x": np.zeros(3)}, {"a": np.zeros(3), "b": np.zeros(3)}, "writes 1"),
    (lambda: ek.scale(2.0), {"x": np.zeros(3, dtype=np.float32)}, {"out": np.zeros(3)}, "float64"),
    (lambda: ek.scale(2.0), {"x": np.zeros(3)}, {"out": np.zeros(3, dtype=np.int64)}, "float64"),
    (lambda: ek.axpy(2.0), {"x": np.zeros((3, 2))}, {"y": np.zeros((3, 2))}, "1-d"),
    (lambda: ek.fill(2.0), {}, {"out": np.zeros(3, dtype=np.complex128)}, "float64"),
], ids=["add-1-read", "add-3-reads", "fill-with-read", "copy-no-write", "copy-2-writes",
        "float32-read", "int64-write", "2-d", "complex"])
def test_eagle_kernels_check_arrays(make, reads, writes, match):
    with pytest.raises(TypeError, match=match):
        native(make(), reads=reads, writes=writes)


def test_writing_a_read_only_array_is_refused():
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        native(ek.fill(1.0), writes={"out": ro})
    native(ek.copy(), reads={"x": ro}, writes={"out": np.zeros(3)})   # reading it is fine


def test_failed_node_construction_changes_no_graph():
    g = eagle.Graph()
    with pytest.raises(TypeError):
        g.add_node(native(ek.add(), reads={"a": np.zeros(3)}, writes={"out": np.zeros(3)}))
    assert g.nodes == []


# ---- native and opaque in one graph ----------------------------------------------------


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("teams", ["auto", "serial", "parallel"])
def test_native_and_opaque_mixed(clib, threads, n_threads, teams):
    threads(n_threads)
    n = 5000
    x = np.arange(n, dtype=np.float64)
    y = np.zeros(n)
    z = np.zeros(n)
    w = np.zeros(n)
    calls = []

    def post():
        calls.append(1)
        np.add(y, 1.0, out=z)

    g = eagle.Graph()
    g.add_node(native(ctypes_kernel(clib, "twice"), reads={"x": x}, writes={"y": y}), name="twice")
    g.add_node(opaque(post, reads={"y": y}, writes={"z": z}), name="post")
    g.add_node(native(ek.scale(0.5), reads={"z": z}, writes={"w": w}), name="half")
    assert g.stages == [["twice"], ["post"], ["half"]]
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(4)
    assert len(calls) == 4
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(z, 2 * x + 1)
    np.testing.assert_array_equal(w, x + 0.5)


def test_picture_tells_native_from_opaque(clib):
    x, y, z = np.zeros(8), np.zeros(8), np.zeros(8)
    g = eagle.Graph()
    g.add_node(native(ctypes_kernel(clib, "twice"), reads={"x": x}, writes={"y": y}), name="twice")
    g.add_node(opaque(lambda: None, reads={"y": y}, writes={"z": z}), name="post")
    g.add_node(native(ek.copy(), reads={"z": z}, writes={"x": x}))
    for text in (str(g), str(g.build())):
        assert "[twice]" in text and "<twice>" not in text
        assert "<post>" in text and "[post]" not in text
        assert "[copy]" in text
    plan = str(g.plan())
    assert "[twice]" in plan and "<post>" in plan and "[copy]" in plan


# ---- logical size ------------------------------------------------------------------------


def sized_graph(clib, n=1000):
    x = np.arange(n, dtype=np.float64) + 1
    y = np.full(n, -1.0)
    g = eagle.Graph()
    g.add_node(native(ctypes_kernel(clib, "twice"), reads={"x": x}, writes={"y": y}), name="twice")
    return g, x, y


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_logical_size_limits_the_range(clib, threads, n_threads, teams):
    threads(n_threads)
    g, x, y = sized_graph(clib)
    assert g.capacity == 1000 and g.logical_size == 1000
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.set_logical_size(123)
    assert g.logical_size == 123
    g.launch(2)
    np.testing.assert_array_equal(y[:123], 2 * x[:123])
    assert (y[123:] == -1.0).all()
    g.set_logical_size(1000)
    g.launch(1)
    np.testing.assert_array_equal(y, 2 * x)


def test_logical_size_zero_touches_nothing(clib):
    g, x, y = sized_graph(clib)
    g.build()
    g.set_logical_size(0)
    g.launch(3)
    assert (y == -1.0).all()
    assert "logical size 0 of 1000" in str(g)


def test_logical_size_set_before_build(clib):
    g, x, y = sized_graph(clib)
    g.set_logical_size(10)
    g.build()
    assert g.logical_size == 10
    g.launch(1)
    np.testing.assert_array_equal(y[:10], 2 * x[:10])
    assert (y[10:] == -1.0).all()


def test_logical_size_accepts_integer_likes(clib):
    g, x, y = sized_graph(clib)
    g.build()
    g.set_logical_size(np.int64(7))
    assert g.logical_size == 7 and type(g.logical_size) is int
    g.logical_size = np.uint8(9)
    assert g.logical_size == 9


@pytest.mark.parametrize("bad, exc, match", [
    (-1, ValueError, r"0\.\.1000"),
    (1001, ValueError, r"0\.\.1000"),
    (10**30, ValueError, r"0\.\.1000"),
    (True, TypeError, "bool"),
    (False, TypeError, "bool"),
    (np.True_, TypeError, "integer"),
    (5.0, TypeError, "float"),
    ("5", TypeError, "str"),
    (None, TypeError, "NoneType"),
    (np.float64(3), TypeError, "integer"),
])
def test_logical_size_rejects_bad_values(clib, bad, exc, match):
    g, x, y = sized_graph(clib)
    g.build()
    g.set_logical_size(50)
    with pytest.raises(exc, match=match):
        g.set_logical_size(bad)
    assert g.logical_size == 50          # nothing changed
    g.launch(1)
    assert (y[50:] == -1.0).all()
    np.testing.assert_array_equal(y[:50], 2 * x[:50])


def test_logical_size_is_not_a_rebuild(clib, monkeypatch):
    g, x, y = sized_graph(clib)
    g.build()
    g.launch(1)
    backend, cpu_plan = g._backend, g._backend._plan

    def no_build(*a, **k):
        raise AssertionError("set_logical_size() must not rebuild the graph")

    monkeypatch.setattr(eagle.Graph, "build", no_build)
    monkeypatch.setattr(_backend_cpu.CpuBackend, "__init__", no_build)
    for n in (0, 1, 500, 999, 1000, 3):
        g.set_logical_size(n)
        assert g._backend is backend and g._backend._plan is cpu_plan
        assert cpu_plan.logical_size == n
        assert g.plan().logical_size == n
        assert g.backend == "cpu"
    y[:] = -1.0
    g.launch(1)                 # still built: no NotBuiltError
    np.testing.assert_array_equal(y[:3], 2 * x[:3])
    assert (y[3:] == -1.0).all()


def test_a_later_shorter_node_runs_over_its_own_extent(clib):
    # the capacity is the longest extent: a shorter node recorded later leaves it, and the
    # logical size set before, alone (docs/graph.md, "Extents")
    g, x, y = sized_graph(clib, n=100)
    g.set_logical_size(100)
    small = np.zeros(10)
    g.add_node(native(ek.fill(1.0), writes={"s": small}))
    assert g.capacity == 100
    y[:] = -1.0
    g.build().launch(1)
    assert (small == 1.0).all()
    np.testing.assert_array_equal(y, 2 * x)


# ---- results do not depend on threads or teams ------------------------------------------------


def big_graph(clib, n):
    x = np.arange(n, dtype=np.float64) % 1000.0
    a = np.zeros(n)
    b = np.zeros(n)
    c = np.zeros(n)
    acc = np.zeros(n)
    d = np.zeros(n)
    g = eagle.Graph()
    g.add_group([native(ek.scale(1.5), reads={"x": x}, writes={"a": a}),
                 native(ek.copy(), reads={"x": x}, writes={"b": b})], names=["scale", "copy"])
    g.add_node(native(ek.axpy(0.25), reads={"a": a}, writes={"b": b}), name="axpy")
    g.add_node(native(ek.add(), reads={"a": a, "b": b}, writes={"c": c}), name="add")
    g.add_node(native(ek.axpy(0.5), reads={"x": x}, writes={"acc": acc}), name="accumulate")
    g.add_node(native(ctypes_kernel(clib, "twice"), reads={"c": c}, writes={"d": d}), name="twice")
    assert g.stages == [["scale", "copy", "accumulate"], ["axpy"], ["add"], ["twice"]]
    return g, dict(x=x, a=a, b=b, c=c, acc=acc, d=d)


BIG = 2_000_000


@pytest.fixture(scope="module")
def big_reference(clib):
    before = eagle.get_num_threads()
    eagle.set_num_threads(1)
    try:
        g, arrays = big_graph(clib, BIG)
        g.build(cpu=eagle.CpuOptions(teams="serial"))
        g.launch(3)
    finally:
        eagle.set_num_threads(before)
    x = arrays["x"]
    a = 1.5 * x
    b = x + 0.25 * a
    c = a + b
    np.testing.assert_array_equal(arrays["a"], a)
    np.testing.assert_array_equal(arrays["b"], b)
    np.testing.assert_array_equal(arrays["c"], c)
    np.testing.assert_array_equal(arrays["acc"], 1.5 * x)
    np.testing.assert_array_equal(arrays["d"], 2 * c)
    return arrays


@pytest.mark.parametrize("n_threads, teams", [(1, "serial"), (1, "parallel"), (2, "serial"),
                                              (2, "parallel"), (2, "auto"),
                                              (2, ["parallel", "serial", "parallel", "auto"])])
def test_big_array_same_for_any_threads_and_teams(clib, threads, big_reference, n_threads, teams):
    threads(n_threads)
    g, arrays = big_graph(clib, BIG)
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(3)
    if n_threads == 2 and teams == "parallel":
        assert all(st.team == 2 for st in g.plan().stages)
    if teams == "serial":
        assert all(st.team == 1 for st in g.plan().stages)
    for name, ref in big_reference.items():
        assert np.array_equal(arrays[name], ref), name


def small_chain(n_nodes=60, n=97):
    rng = np.random.default_rng(5)
    arrays = [rng.integers(-8, 8, n).astype(np.float64) for _ in range(n_nodes + 1)]
    g = eagle.Graph()
    for k in range(n_nodes):
        if k % 3 == 2:
            g.add_node(native(ek.add(), reads={"a": arrays[k], "b": arrays[k - 1]},
                              writes={"out": arrays[k + 1]}), name=f"n{k}")
        else:
            g.add_node(native(ek.axpy(0.5), reads={"x": arrays[k]}, writes={"y": arrays[k + 1]}),
                       name=f"n{k}")
    return g, arrays


def small_chain_oracle(arrays, replays, n_nodes=60):
    arrays = [a.copy() for a in arrays]
    for _ in range(replays):
        for k in range(n_nodes):
            if k % 3 == 2:
                arrays[k + 1][:] = arrays[k] + arrays[k - 1]
            else:
                arrays[k + 1] += 0.5 * arrays[k]
    return arrays


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("teams", ["auto", "serial", "parallel"])
def test_many_small_stages_same_for_any_threads_and_teams(threads, n_threads, teams):
    threads(n_threads)
    g, arrays = small_chain()
    expected = small_chain_oracle(arrays, 5)
    assert len(g.stages) == 60
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(5)
    for got, want in zip(arrays, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("teams", ["auto", "serial", "parallel"])
def test_many_small_stages_with_logical_size(threads, teams):
    threads(2)
    g, arrays = small_chain()
    cut = 40
    expected = small_chain_oracle([a[:cut] for a in arrays], 4)
    tails = [a[cut:].copy() for a in arrays]
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.set_logical_size(cut)
    g.launch(4)
    for got, want, tail in zip(arrays, expected, tails):
        np.testing.assert_array_equal(got[:cut], want)
        np.testing.assert_array_equal(got[cut:], tail)


# ---- the GIL ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n_threads, teams", [(1, "auto"), (2, "serial"), (2, "parallel"), (2, "auto")])
def test_native_launch_releases_the_gil(clib, threads, n_threads, teams):
    """The kernel waits for a Python thread; that thread can only run if launch let go of the GIL."""
    threads(n_threads)
    flag = np.zeros(1, dtype=np.int64)
    state = np.zeros(2, dtype=np.int64)
    g = eagle.Graph()
    g.add_node(native(ctypes_kernel(clib, "handshake"), reads={"flag": flag}, writes={"state": state},
                      split=False), name="handshake")
    g.build(cpu=eagle.CpuOptions(teams=teams))

    def answer():
        while state[0] == 0:
            pass                 # pure Python spin: needs the GIL to make progress
        flag[0] = 1

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    g.launch(1)
    t.join(timeout=60)
    assert state[1] == 1, "the launch held the GIL: the Python thread could not answer the kernel"
    assert not t.is_alive()


def test_python_thread_progresses_during_a_long_native_launch(threads):
    threads(2)
    n = BIG
    x = np.ones(n)
    y = np.zeros(n)
    z = np.zeros(n)
    g = eagle.Graph()
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.add_node(native(ek.scale(2.0), reads={"y": y}, writes={"z": z}), name="scale")
    g.build()
    g.launch(1)

    counter = [0]
    running = threading.Event()
    stop = threading.Event()

    def count():
        running.set()
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=count, daemon=True)
    t.start()
    running.wait()
    before = counter[0]
    g.launch(60)
    during = counter[0] - before
    stop.set()
    t.join()
    assert (y == 61.0).all() and (z == 122.0).all()
    assert during > 0, "no Python thread ran while the native graph replayed"


def test_polynomial_kernel_evaluates_by_horner_and_checks_its_coefficients():
    x = np.linspace(-1.5, 1.5, 1001)
    y = np.zeros_like(x)
    coefficients = [0.5, -1.0, 0.25, 2.0]
    g = eagle.Graph()
    g.add_node(native(ek.polynomial(coefficients), reads={"x": x}, writes={"y": y}), name="poly")
    g.build(cpu=eagle.CpuOptions(teams="parallel")).launch(2)
    np.testing.assert_allclose(y, np.polynomial.polynomial.polyval(x, coefficients), rtol=1e-13)
    with pytest.raises(ValueError, match="1 to 64"):
        ek.polynomial([])
    with pytest.raises(ValueError, match="1 to 64"):
        ek.polynomial(np.ones(65))
