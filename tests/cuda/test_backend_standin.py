"""eagle.Graph end to end on the cuda backend, against the CPU stand-in of the CUDA driver.

No GPU needed. tests/doubles/fake_libcuda.c (a TEST DOUBLE, not CUDA)
records captures and replays them on host threads; its "kernels" are host
functions that write into its device memory. The arrays here are ``DeviceArray``
(tests/doubles/fake_cuda.py): the stand-in's device memory exposing
``__cuda_array_interface__`` (a test-only stand-in for device arrays), so eagle
picks the cuda backend for them; ``.host`` views that memory from NumPy, so
the results are checked with NumPy.

What is covered: opaque nodes run once at capture and never on replay;
``cuda_kernel`` nodes replay with correct results; groups become fork/join
branches; launch counts; retune patches grid and size argument without
re-capture; instantiate and capture failures name the eagle node and leave
streams usable; no runtime / no GPU gives a clear error; mixing NumPy and CUDA
arrays is refused; the picture says ``backend: cuda``. A fake ``cupy`` module
(also a test double) checks the CuPy-facing paths: current stream and
graph-owned memory pool during capture, ordering after CuPy's current stream
on launch, and the RawKernel launch path of ``cuda_kernel``.
"""
import contextlib
import ctypes
import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from eagle.cuda import _stream

from eagle.record.node import RunsAs

import eagle
from eagle.graph import opaque
from fake_cuda import DeviceArray, dev, kernel  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


# ---- test doubles -------------------------------------------------------------------





@pytest.fixture
def backend_mod(cuda_mod):
    """eagle's cuda backend with the shim bound to the stand-in."""
    import eagle.cuda.backend as b
    return b


@pytest.fixture
def ck(backend_mod):
    from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
    return cuda_kernel, SIZE




def seed_opaque_graph():
    """The seed page's graph over DeviceArrays: opaque nodes doing host NumPy work (the
    page's functions from eagle.bench.cases on the .host views, declared on the DeviceArrays)."""
    from eagle.bench import cases

    hx, hl, hr, ho = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    arrays = dev(hx, hl, hr, ho)
    calls = cases.seed_calls()
    (_, _, _, ho), fns = cases.seed_functions(tuple(a.host for a in arrays), calls)
    return cases.seed_opaque_graph(fns, arrays), calls, ho


def kernel_graph(fake, ck, n=4, block=4):
    """The seed shape with cuda_kernel nodes: left = 2x, right = 3x, out = left + right."""
    cuda_kernel, SIZE = ck
    hx, hl, hr, ho = np.arange(float(n)), np.zeros(n), np.zeros(n), np.zeros(n)
    x, left, right, out = dev(hx, hl, hr, ho)
    hx, hl, hr, ho = x.host, left.host, right.host, out.host
    scale, add = (kernel(fake, "scale"), 4), kernel(fake, "add")
    g = eagle.Graph()
    g.add_group([cuda_kernel(scale, (left, x, 2.0, SIZE), reads={"x": x}, writes={"a": left}, block=block),
                 cuda_kernel(scale, (right, x, 3.0, SIZE), reads={"x": x}, writes={"b": right}, block=block)],
                names=["l", "r"])
    g.add_node(cuda_kernel(add, (out, left, right, SIZE), reads={"a": left, "b": right},
                           writes={"out": out}, block=block), name="join")
    return g, (hx, hl, hr, ho)


# ---- the seed page ------------------------------------------------------------------

SEED_CUDA_PICTURE = """\
eagle.Graph 3 nodes · 1 group · backend: cuda
stage 0 branches  ┌─────┐   ┌─────┐
                  │ <l> │   │ <r> │
                  └──┬──┘   └──┬──┘
                     a         b
                     └────┬────┘
stage 1 stream       ┌────┴────┐
                     │ <join>  │
                     └─────────┘"""


def test_seed_graph_opaque_nodes_run_once_at_capture(backend_mod, fake):
    g, calls, out = seed_opaque_graph()
    assert "backend: (not built)" in str(g)
    g.build()
    assert g.backend == "cuda"
    assert str(g) == SEED_CUDA_PICTURE
    # opaque Python code ran exactly once, while build() captured the graph ...
    assert calls == {"l": 1, "r": 1, "join": 1}
    g.launch(3)
    # ... and never on replay (the GPU work it launched is what replays)
    assert calls == {"l": 1, "r": 1, "join": 1}
    np.testing.assert_array_equal(out, [1, 4, 7, 10])
    assert fake.fake_cuda_launch_count() == 3
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1
    assert fake.fake_cuda_counter(b"cuGraphInstantiateWithParams") == 1


def test_opaque_node_kernels_replay_but_python_does_not(backend_mod, fake):
    b = backend_mod
    h = np.zeros(6)
    a, = dev(h)
    h = a.host
    calls = []

    def step():
        calls.append(1)
        s = b.capture_stream()
        assert s is not None and s.is_capturing()
        _stream.launch_kernel(kernel(fake, "add_one"), 2, 4,
                              [ctypes.c_void_p(h.ctypes.data), ctypes.c_int64(6)], stream=s)

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"a": a}), name="step")
    g.build()
    assert b.capture_stream() is None
    assert calls == [1] and not h.any(), "captured work does not run during capture"
    g.launch(5)
    np.testing.assert_array_equal(h, 5.0)
    assert calls == [1]
    assert fake.fake_cuda_counter(b"kernel_runs") == 5
    # a kernel launched inside an opaque node keeps its captured size: retune leaves it alone
    assert g._backend.sized_kernels == 0
    g.set_logical_size(2)
    g.launch(1)
    np.testing.assert_array_equal(h, 6.0)


def test_a_sized_opaque_node_is_refused_on_cuda_by_name(backend_mod, fake):
    """It would run once, at capture: its kernels could not follow set_logical_size."""
    a, = dev(np.zeros(6))
    g = eagle.Graph()
    g.add_node(opaque(lambda start, stop: None, updates={"a": a}, sized=True), name="sized_step")
    with pytest.raises(TypeError, match="'sized_step' is a sized opaque node .* runs once, at capture"):
        g.build()
    assert g.backend is None


# ---- cuda_kernel nodes ------------------------------------------------------------------

def test_kernel_nodes_replay_with_correct_results(ck, fake):
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck)
    g.build()
    assert not ho.any()
    g.launch(3)
    np.testing.assert_array_equal(hl, 2 * hx)
    np.testing.assert_array_equal(ho, 5 * hx)
    assert fake.fake_cuda_counter(b"kernel_runs") == 9
    assert fake.fake_cuda_launch_count() == 3
    assert g._backend.graph_nodes == 3 and g._backend.sized_kernels == 3
    assert "{l}" in str(g) and "logical size 4 of 4" in g._header()


def test_group_is_captured_as_fork_join_branches(ck, fake, backend_mod):
    cuda_kernel, SIZE = ck
    add_one = (kernel(fake, "add_one"), 2)
    hosts = [np.zeros(4) for _ in range(3)]
    arrays = dev(*hosts)
    hosts = [a.host for a in arrays]
    g = eagle.Graph()
    g.add_group([cuda_kernel(add_one, (a, SIZE), writes={"a": a}, block=4) for a in arrays],
                names=["p", "q", "r"])
    g.build()
    assert g.stages == [["p", "q", "r"]] and g._backend.stage_notes() == ["branches"]
    # fork: one event recorded on eagle's stream, two side streams wait on it;
    # join: one event per side stream, eagle's stream waits on each
    assert fake.fake_cuda_counter(b"cuEventRecord") == 3
    assert fake.fake_cuda_counter(b"cuStreamWaitEvent") == 4
    assert len(g._backend._sides) == 2
    g.launch(2)
    for h in hosts:
        np.testing.assert_array_equal(h, 2.0)
    # CudaOptions(branches=False): the same stage captured in order on one stream; the cpu's
    # options are not the cuda backend's
    fake.fake_cuda_reset()
    g.build(cpu=eagle.CpuOptions(teams="parallel"), cuda=eagle.CudaOptions(branches=False))
    assert g._backend.stage_notes() == ["stream"]
    assert fake.fake_cuda_counter(b"cuStreamWaitEvent") == 0
    assert "stage 0 stream" in str(g)
    g.launch(1)
    for h in hosts:
        np.testing.assert_array_equal(h, 3.0)
    g.build(cpu=eagle.CpuOptions(teams="serial"))
    assert g._backend.stage_notes() == ["branches"]
    # one policy per stage is the cpu's count, not checked for a cuda graph
    g.build(cpu=eagle.CpuOptions(teams=("serial", "serial")))
    assert g.backend == "cuda"


def test_launch_count_is_n_per_launch(ck, fake):
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck)
    g.build()
    for n, total in ((0, 0), (1, 1), (7, 8), (5000, 5008)):  # 5000 crosses a chunk boundary
        g.launch(n)
        assert fake.fake_cuda_launch_count() == total
    assert g._backend.replays == 5008
    with pytest.raises(ValueError):
        g.launch(-1)
    assert fake.fake_cuda_launch_count() == 5008


def test_set_logical_size_patches_grid_and_size_without_recapture(ck, fake):
    cuda_kernel, SIZE = ck
    h = np.zeros(10)
    a, = dev(h)
    h = a.host
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (a, SIZE), writes={"a": a}, block=4),
               name="inc")
    g.build()
    assert fake.fake_cuda_last_grid_x() == 0  # nothing ran yet
    g.set_logical_size(3)
    g.launch(1)
    assert fake.fake_cuda_last_grid_x() == 1
    np.testing.assert_array_equal(h, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    g.set_logical_size(10)
    g.launch(2)
    assert fake.fake_cuda_last_grid_x() == 3
    np.testing.assert_array_equal(h, [3, 3, 3, 2, 2, 2, 2, 2, 2, 2])
    g.set_logical_size(0)
    g.launch(1)
    np.testing.assert_array_equal(h, [3, 3, 3, 2, 2, 2, 2, 2, 2, 2])
    # no re-capture, no re-instantiation: patched in place
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1
    assert fake.fake_cuda_counter(b"cuGraphInstantiateWithParams") == 1
    assert fake.fake_cuda_counter(b"cuGraphExecKernelNodeSetParams") == 3
    for bad in (11, -1):
        with pytest.raises(ValueError, match="0..10"):
            g.set_logical_size(bad)
    assert g.logical_size == 0
    assert "logical size 0 of 10" in str(g.plan())


def test_logical_size_set_before_build_is_captured(ck, fake):
    cuda_kernel, SIZE = ck
    h = np.zeros(8)
    a, = dev(h)
    h = a.host
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (a, SIZE), writes={"a": a}, block=2),
               name="inc")
    g.set_logical_size(5)
    g.build().launch(1)
    assert fake.fake_cuda_last_grid_x() == 3
    np.testing.assert_array_equal(h, [1, 1, 1, 1, 1, 0, 0, 0])


def test_retune_with_kernels_on_side_streams(ck, fake):
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck, n=10, block=4)
    g.build()
    g.set_logical_size(6)
    g.launch(1)
    np.testing.assert_array_equal(ho, np.where(np.arange(10) < 6, 5 * hx, 0))
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1


# ---- failures ------------------------------------------------------------------------

def test_failed_instantiate_names_the_eagle_node(ck, fake):
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck)
    fake.fake_cuda_fail_instantiate_at_node(1)
    with pytest.raises(eagle.CudaError) as info:
        g.build()
    e = info.value
    assert (e.node_index, e.node_name) == (1, "r")
    assert "'r'" in str(e)
    assert any("'r' (stage 0)" in n for n in e.__notes__)
    assert g.backend is None
    fake.fake_cuda_fail_instantiate_at_node(-1)
    g.build().launch(1)
    np.testing.assert_array_equal(ho, 5 * hx)


@pytest.fixture
def created_streams(monkeypatch, backend_mod):
    """Every eagle.cuda._stream.Stream the backend creates (to check none is left capturing)."""
    import eagle.cuda.control as control

    made = []

    class Recorded(_stream.Stream):
        def __init__(self, *a, **k):
            made.append(self)

    monkeypatch.setattr(backend_mod, "Stream", Recorded)
    monkeypatch.setattr(control, "Stream", Recorded)
    return made


def test_capture_failure_names_the_node_and_leaves_streams_usable(backend_mod, fake, created_streams):
    g, calls, out = seed_opaque_graph()
    boom = {"on": True}
    r = g._nodes[1].fn

    def flaky_r():
        r()
        if boom["on"]:
            raise ZeroDivisionError("r failed")

    g._nodes[1].fn = flaky_r
    with pytest.raises(ZeroDivisionError) as info:
        g.build()
    assert any("node 'r' (stage 0)" in n and "captur" in n for n in info.value.__notes__)
    assert g.backend is None
    assert len(created_streams) == 2  # eagle's stream and one side stream
    for s in created_streams:
        assert not s.is_capturing()
        s.synchronize()  # raises if the stream were left in a capture
    assert fake.fake_cuda_counter(b"cuStreamEndCapture") == 1
    # the graph stays usable: fix the node and build again
    boom["on"] = False
    g.build().launch(2)
    assert g.backend == "cuda"


def test_node_that_invalidates_the_capture_is_named(backend_mod, fake, created_streams):
    h = np.zeros(4)
    a, = dev(h)
    h = a.host

    def syncs():
        backend_mod.capture_stream().synchronize()  # not allowed while capturing

    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"a": a}), name="fine")
    g.add_node(opaque(syncs, writes={"a": a}), name="syncs")
    with pytest.raises(eagle.CudaError) as info:
        g.build()
    e = info.value
    assert e.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert e.node_name == "syncs" and e.node_index == 1
    assert any("node 'syncs' (stage 1)" in n for n in e.__notes__)
    for s in created_streams:
        assert not s.is_capturing()


def test_a_node_working_on_the_legacy_stream_fails_the_capture_naming_it(backend_mod, fake,
                                                                        created_streams, cuda_mod):
    """PyTorch's default stream and ``cupy.cuda.Stream.null`` are the legacy stream. eagle
    captures from a blocking stream, so legacy-stream work inside a node makes the driver
    answer CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (were the capture stream non-blocking, the
    kernel would run once, eagerly, and be absent from every replay)."""
    a = DeviceArray(np.zeros(4))

    def on_legacy():
        _stream.launch_kernel(kernel(fake, "add_one"), 1, 4, [_p(a), ctypes.c_int64(4)], stream=None)

    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"a": a}), name="fine")
    g.add_node(opaque(on_legacy, writes={"a": a}), name="eager")
    with pytest.raises(eagle.CudaError) as info:
        g.build()
    e = info.value
    assert e.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", e
    assert e.node_name == "eager" and e.node_index == 1
    assert any("node 'eager' (stage 1)" in n for n in e.__notes__)
    for s in created_streams:
        assert not s.is_capturing()
        s.synchronize()
    # the per-thread default stream (CU_STREAM_PER_THREAD) is not the legacy stream: work
    # there is simply not captured (it runs now), as on a GPU
    s = _stream.Stream(non_blocking=False)
    s.begin_capture(cuda_mod.CAPTURE_MODE_RELAXED)
    before = a.host.copy()
    _stream.launch_kernel(kernel(fake, "add_one"), 1, 4, [_p(a), ctypes.c_int64(4)],
                           stream=_stream.BorrowedStream(2))
    _stream.BorrowedStream(2).synchronize()
    assert (a.host == before + 1).all()
    assert s.capture_status() == cuda_mod.CAPTURE_STATUS_ACTIVE
    s.end_capture().close()
    s.close()


def test_build_lists_the_capture_graph_a_bounded_number_of_times(ck, fake, cuda_mod, backend_mod):
    """Attributing graph nodes to eagle nodes costs a few driver calls per node, not a
    listing of the whole capture graph after each (quadratic in the nodes)."""
    cuda_kernel, SIZE = ck

    def listed(n):
        x = DeviceArray(np.zeros(4))
        g = eagle.Graph()
        for k in range(n):
            if k % 2:
                g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (x, SIZE), writes={"x": x}, block=4),
                           name=f"k{k}")
            else:   # an opaque node launching a kernel itself, on the capture stream
                g.add_node(opaque(lambda: _stream.launch_kernel(
                    kernel(fake, "add_one"), 1, 4, [_p(x), ctypes.c_int64(4)],
                    stream=backend_mod.capture_stream()), writes={"x": x}), name=f"o{k}")
        before = fake.fake_cuda_nodes_listed()
        g.build()
        assert g._backend.graph_nodes == n
        return fake.fake_cuda_nodes_listed() - before

    small, big = listed(40), listed(160)
    assert big <= 4 * small + 8 and big <= 3 * 160, (small, big)


def test_a_graph_runs_on_its_builds_device_whatever_device_is_current(ck, fake, monkeypatch):
    """Two devices. Built while device 0 is current, the graph's streams and events are
    device 0's; a launch, a retune and close() made while device 1 is current (the
    program moved on to it) run on device 0 and leave device 1 current."""
    monkeypatch.setenv("FAKE_CUDA_DEVICES", "2")
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck)
    g.build()
    assert fake.fake_cuda_use_device(1) == 0
    try:
        g.launch(1)     # before: cuEventRecord on device 0's stream: CUDA_ERROR_INVALID_CONTEXT
        assert fake.fake_cuda_current_device() == 1
        np.testing.assert_array_equal(ho, 5 * hx)
        g.set_logical_size(2)
        ho[:] = 0
        g.launch(1)
        np.testing.assert_array_equal(ho, np.where(np.arange(4) < 2, 5 * hx, 0))
        assert fake.fake_cuda_current_device() == 1
        g._backend.close()
        assert fake.fake_cuda_current_device() == 1
    finally:
        fake.fake_cuda_use_device(0)


def test_failed_launch_raises_and_graph_stays_usable(ck, fake):
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck)
    g.build()
    fake.fake_cuda_fail_next(b"cuGraphLaunch", 2, 719)
    with pytest.raises(eagle.CudaError, match="CUDA_ERROR_LAUNCH_FAILED"):
        g.launch(4)
    assert fake.fake_cuda_launch_count() == 1
    g.launch(1)
    assert fake.fake_cuda_launch_count() == 2


def test_non_cuda_node_kind_is_refused(backend_mod, fake):
    g, calls, out = seed_opaque_graph()

    class Odd(type(g._nodes[0])):
        kind = "native"
        runs_as = RunsAs.NATIVE   # the node contract: how a backend runs it

    g._nodes[2].__class__ = Odd
    with pytest.raises(TypeError, match="'join' is a native node"):
        g.build()
    assert calls == {"l": 0, "r": 0, "join": 0}


# ---- no runtime --------------------------------------------------------------------------

BUILD_SCRIPT = r"""
import numpy as np, eagle
from eagle.graph import opaque
class A:
    def __init__(self, h): self.h = h
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.h.shape, "typestr": "<f8", "data": (self.h.ctypes.data, False), "version": 3}
a = A(np.zeros(4))
g = eagle.Graph()
g.add_node(opaque(lambda: None, writes={"a": a}), name="n")
try:
    g.build()
    print("BUILT", g.backend)
except eagle.CudaError as e:
    print("STATUS", e.status)
    print("MESSAGE", e)
print("PICTURE", str(g).splitlines()[0])
"""


def run_python(code, env_extra):
    env = dict(os.environ)
    env.pop("EAGLE_LIBCUDA", None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, cwd=str(ROOT))


def test_no_driver_is_a_clear_error(tmp_path, cuda_mod):
    missing = tmp_path / "libcuda.so.1"
    r = run_python(BUILD_SCRIPT, {"EAGLE_LIBCUDA": str(missing)})
    assert r.returncode == 0, r.stderr
    assert "STATUS -1" in r.stdout
    assert "the cuda backend (this graph holds CUDA arrays) found no CUDA driver" in r.stdout
    assert f"no CUDA driver found (tried EAGLE_LIBCUDA={missing}" in r.stdout
    assert "PICTURE eagle.Graph 1 node · 0 groups · backend: (not built)" in r.stdout


def test_driver_without_gpu_is_a_clear_error(fake_libcuda_path, cuda_mod):
    r = run_python(BUILD_SCRIPT, {"EAGLE_LIBCUDA": fake_libcuda_path, "FAKE_CUDA_DEVICES": "0"})
    assert r.returncode == 0, r.stderr
    assert "STATUS 100" in r.stdout, r.stdout
    assert "found a CUDA driver but no usable GPU" in r.stdout
    assert "no GPU is usable (CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)" in r.stdout


def test_standin_runtime_builds_in_a_fresh_process(fake_libcuda_path, cuda_mod):
    r = run_python(BUILD_SCRIPT, {"EAGLE_LIBCUDA": fake_libcuda_path})
    assert r.returncode == 0, r.stderr
    assert "BUILT cuda" in r.stdout
    assert "backend: cuda" in r.stdout


# ---- bad input ------------------------------------------------------------------------------

def test_mixing_numpy_and_cuda_arrays_is_refused(backend_mod, fake):
    h = np.zeros(4)
    a, = dev(np.zeros(4))
    with pytest.raises(TypeError, match="mixes NumPy arrays and CUDA arrays"):
        opaque(lambda: None, reads={"h": h}, writes={"a": a})
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"a": a}), name="gpu")
    with pytest.raises(TypeError, match="mix NumPy and CUDA arrays"):
        g.add_node(opaque(lambda: None, writes={"h": h}), name="cpu")
    assert g.nodes == ["gpu"]


def test_cuda_kernel_validation(ck, fake):
    cuda_kernel, SIZE = ck
    add_one = kernel(fake, "add_one")
    h = np.zeros(4)
    a, = dev(h)
    h = a.host
    other, = dev(np.zeros(4))
    with pytest.raises(TypeError, match="takes CUDA arrays"):
        cuda_kernel(add_one, (h, SIZE), writes={"a": h})
    with pytest.raises(TypeError, match="NumPy array"):
        cuda_kernel(add_one, (h, SIZE), writes={"a": a})
    with pytest.raises(TypeError, match="declared"):
        cuda_kernel(add_one, (SIZE,))
    with pytest.raises(ValueError, match="exactly one argument with eagle.graph.SIZE"):
        cuda_kernel(add_one, (a, 4), writes={"a": a})
    with pytest.raises(ValueError, match="found 2"):
        cuda_kernel(add_one, (SIZE, SIZE), writes={"a": a})
    with pytest.raises(TypeError, match="takes 3 argument"):
        cuda_kernel((add_one, 3), (a, SIZE), writes={"a": a})
    with pytest.raises(TypeError, match="not declared in reads= or writes="):
        cuda_kernel(add_one, (other, SIZE), writes={"a": a})
    with pytest.raises(TypeError, match="CuPy RawKernel"):
        cuda_kernel("add_one", (a, SIZE), writes={"a": a})
    with pytest.raises(ValueError, match="1..1024"):
        cuda_kernel(add_one, (a, SIZE), writes={"a": a}, block=0)
    with pytest.raises(TypeError, match="must be a CUDA array, an int"):
        cuda_kernel(add_one, (a, SIZE, "x"), writes={"a": a})
    with pytest.raises(ValueError, match="type is one of"):
        SIZE("int16")
    # size_arg: the index instead of the placeholder (any integer there becomes SIZE)
    node = cuda_kernel(add_one, (a, 0), writes={"a": a}, size_arg=1)
    assert node.size_arg == 1 and node.args[1] is SIZE and node.size_type == "int64"
    node = cuda_kernel(add_one, (a, SIZE("int32")), writes={"a": a}, size_arg=-1)
    assert node.size_arg == 1 and node.size_type == "int32"
    with pytest.raises(ValueError, match="SIZE stands at argument 1"):
        cuda_kernel(add_one, (a, SIZE), writes={"a": a}, size_arg=0)
    # a view inside a declared array is fine
    node = cuda_kernel(add_one, (a[1:3], SIZE), writes={"a": a})
    assert node.kind == "cuda_kernel" and node.box == ("{", "}") and node.sized
    assert repr(SIZE) == "eagle.graph.SIZE" and repr(SIZE("uint32")) == "eagle.graph.SIZE('uint32')"


def test_launch_from_two_threads_is_serialized(ck, fake):
    g, (hx, hl, hr, ho) = kernel_graph(fake, ck)
    g.build()
    errors = []

    def work():
        try:
            for _ in range(100):
                g.launch(1)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    ts = [threading.Thread(target=work) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and fake.fake_cuda_launch_count() == 200


def test_plan_and_objects_are_released(ck, fake):
    g, _ = kernel_graph(fake, ck)
    gc.collect()
    base = {k: fake.fake_cuda_live(k.encode()) for k in ("stream", "event", "graph", "exec")}
    g.build()
    plan = g.plan()
    assert isinstance(plan, eagle.graph.Plan) and plan.backend == "cuda"
    assert [sp.policy for sp in plan.stages] == ["branches", "stream"]
    assert [sp.team for sp in plan.stages] == [2, 1]
    text = str(plan)
    assert text.startswith("eagle plan · backend: cuda") and "3 CUDA graph nodes, 3 retuned" in text
    g.add_node(opaque(lambda: None, writes={"o": g._nodes[2].writes["out"]}), name="more")  # un-builds
    gc.collect()
    assert {k: fake.fake_cuda_live(k.encode()) for k in base} == base


# ---- the CuPy-facing paths, with a fake cupy -------------------------------------------

class FakeRawKernel:
    """TEST DOUBLE of cupy.RawKernel: ``.kernel`` is a Function that launches
    through eagle's shim, checking the argument types CuPy would get."""

    def __init__(self, address, name, seen):
        self.name = name

        class Function:
            ptr = address

            def __call__(self, grid, block, args, shared_mem=0, stream=None):
                seen.append((grid, block, args, shared_mem, stream.ptr))
                conv = []
                for a in args:
                    assert isinstance(a, np.generic), f"CuPy gets NumPy scalars here, not {type(a)}"
                    conv.append(np.ctypeslib.as_ctypes_type(a.dtype)(a.item()))
                _stream.launch_kernel(address, grid, block, conv, shared_mem, stream)

        self.kernel = Function()


@pytest.fixture
def fake_cupy(monkeypatch):
    """CuPy 13 (tests/doubles/fake_cupy.py, a test double): ExternalStream, no from_external."""
    import fake_cupy as double

    cp = double.make(13)
    cp.state.stack = double._stack()   # the current-stream stack of this thread
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


def test_cupy_current_stream_and_graph_pool_during_capture(backend_mod, fake, fake_cupy):
    st = fake_cupy.state
    g, calls, out = seed_opaque_graph()
    seen = {}
    for node, name in zip(g._nodes, g._names):
        fn = node.fn

        def wrapped(fn=fn, name=name):
            seen[name] = (fake_cupy.cuda.get_current_stream().ptr, backend_mod.capture_stream().ptr,
                          st.allocator)
            fn()

        node.fn = wrapped
    g.build()
    b = g._backend
    pool = st.pools[-1]
    assert b.pools.cupy is pool
    for name, (cur, cap, alloc) in seen.items():
        assert cur == cap, f"{name}: CuPy's current stream is the capture stream"
        assert alloc == pool.malloc, f"{name}: allocations go to the graph's own pool"
    assert seen["l"][1] == b.stream.ptr and seen["join"][1] == b.stream.ptr
    assert seen["r"][1] == b._sides[0].ptr  # side by side: its own stream
    assert st.allocator is None and st.stack == []  # both restored after capture
    # launch waits for CuPy's current stream: one event record + one wait per launch()
    before = (fake.fake_cuda_counter(b"cuEventRecord"), fake.fake_cuda_counter(b"cuStreamWaitEvent"))
    g.launch(3)
    after = (fake.fake_cuda_counter(b"cuEventRecord"), fake.fake_cuda_counter(b"cuStreamWaitEvent"))
    # (and the first launch of a graph issues its replays in windows of 1, 1, 1: two more
    # event records between them, eagle/cuda/backend.py _replay)
    assert (after[0] - before[0], after[1] - before[1]) == (3, 1)
    assert calls == {"l": 1, "r": 1, "join": 1}
    np.testing.assert_array_equal(out, [1, 4, 7, 10])
    b.close()
    assert pool.freed_all


@pytest.fixture
def cupy14(monkeypatch):
    """tests/doubles/fake_cupy.py: CuPy 14's streams and array interface (a test double)."""
    import fake_cupy
    cp = fake_cupy.make(14)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


def test_cupy14_gets_eagles_stream_through_the_stream_protocol(backend_mod, fake, cupy14, cuda_mod):
    """CuPy 14 deprecates ExternalStream (a DeprecationWarning each time): under -W error
    build() would fail mid-capture. eagle hands its stream over by ``__cuda_stream__``."""
    import warnings
    a = DeviceArray(np.zeros(4))
    seen = []
    g = eagle.Graph()
    g.add_node(opaque(lambda: seen.append(cupy14.cuda.get_current_stream().ptr), writes={"a": a}),
               name="look")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g.build()
        g.launch(1)
    assert seen == [g._backend.stream.ptr] and cupy14.state.ext == []
    assert _stream.Stream().__cuda_stream__()[0] == 0


def test_cupy13_still_gets_an_external_stream(backend_mod, fake, monkeypatch):
    import fake_cupy
    cp = fake_cupy.make(13)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    a = DeviceArray(np.zeros(4))
    seen = []
    g = eagle.Graph()
    g.add_node(opaque(lambda: seen.append(cp.cuda.get_current_stream().ptr), writes={"a": a}), name="look")
    g.build()
    assert seen == [g._backend.stream.ptr] and cp.state.ext == [g._backend.stream.ptr]


def test_a_cupy_arrays_stream_is_not_kept_from_build(backend_mod, fake, cupy14, cuda_mod):
    """A CuPy array's __cuda_array_interface__ names CuPy's *current* stream when it is read.
    Built under a stream since destroyed, launches must not record on that dead handle."""
    x = cupy14.ndarray(DeviceArray(np.zeros(4)))
    producer = _stream.Stream()
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"x": x}), name="touch")
    with pytest.warns(DeprecationWarning):
        current = cupy14.cuda.ExternalStream(producer.ptr)   # the user's code, on CuPy 14
    with current:
        assert x.__cuda_array_interface__["stream"] == producer.ptr
        g.build()
    producer.close()
    g.launch(2)     # recorded an event on the destroyed stream before: CUDA_ERROR_INVALID_HANDLE
    assert g._backend.replays == 2
    # a non-CuPy array's stream is read again at each launch, too
    y = DeviceArray(np.zeros(4))
    s1, s2 = _stream.Stream(), _stream.Stream()
    y.stream = s1.ptr
    g2 = eagle.Graph()
    g2.add_node(opaque(lambda: None, writes={"y": y}), name="touch")
    g2.build()
    y.stream = s2.ptr
    s1.close()
    g2.launch(1)
    s2.close()


@pytest.fixture
def fake_torch_mod(monkeypatch):
    """tests/doubles/fake_torch.py: torch's streams, tensors and memory pools (a test double)."""
    import fake_torch
    torch = fake_torch.make()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_launch_waits_for_torchs_current_stream(ck, fake, cuda_mod, backend_mod, fake_torch_mod):
    """A torch tensor names no stream (array interface v2), and one that requires grad
    refuses __dlpack__ before ordering anything: eagle waits for torch's current stream.
    The producer fills x slowly on torch's stream; without the wait the replay reads 1s."""
    cuda_kernel, SIZE = ck
    torch = fake_torch_mod
    x = DeviceArray(np.ones(4))
    y = DeviceArray(np.zeros(4))
    t = torch.Tensor(x)
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "scale"), 4), (y, t, 2.0, SIZE), reads={"x": t},
                           writes={"y": y}, block=4), name="scale")
    g.build()
    t.requires_grad = True        # a leaf of an autograd graph: __dlpack__ raises BufferError
    producer = _stream.Stream()
    with torch.cuda.stream(torch.cuda.ExternalStream(producer.ptr)):
        _stream.launch_kernel(kernel(fake, "slow_fill"), 1, 4,
                               [_p(x), ctypes.c_double(5.0), ctypes.c_int64(4), ctypes.c_int64(50000)],
                               stream=producer)
        g.launch(1)
    assert y.host.tolist() == [10.0] * 4
    producer.close()


def test_torch_allocations_during_capture_go_to_a_pool_of_the_graph(backend_mod, fake, fake_torch_mod):
    torch = fake_torch_mod
    a = DeviceArray(np.zeros(4))
    seen = []
    g = eagle.Graph()
    g.add_node(opaque(lambda: seen.append(torch.state.pool), writes={"a": a}), name="temps")
    g.build()
    assert seen == [g._backend.pools.torch] and seen[0] is not None
    assert torch.state.pool is None   # restored after the capture


def test_torch_first_used_inside_the_capture_allocates_from_the_graph_s_pool(backend_mod, fake, fake_torch_mod):
    """The documented pattern, with torch's CUDA first touched inside the node: torch's
    temporaries must still come from the graph's pool (from torch's global cache they would
    be handed to unrelated tensors while replays still write them)."""
    torch = fake_torch_mod
    assert not torch.cuda.is_initialized()
    a = DeviceArray(np.zeros(4))
    seen = []

    def temps():
        with torch.cuda.stream(torch.cuda.ExternalStream(backend_mod.capture_stream().ptr)):
            seen.append(torch.state.pool)

    g = eagle.Graph()
    g.add_node(opaque(temps, writes={"a": a}), name="temps")
    g.build()
    assert torch.cuda.is_initialized()
    assert seen == [g._backend.pools.torch] and seen[0] is not None


def test_rawkernel_path_of_cuda_kernel(ck, fake, fake_cupy):
    cuda_kernel, SIZE = ck
    seen = []
    k = FakeRawKernel(kernel(fake, "scale"), "scale", seen)
    hx, hy = np.arange(10.0), np.zeros(10)
    x, y = dev(hx, hy)
    hx, hy = x.host, y.host
    g = eagle.Graph()
    g.add_node(cuda_kernel(k, (y, x, 2.0, SIZE), reads={"x": x}, writes={"y": y}, block=4))
    assert g.nodes == ["scale"]
    g.build()
    (grid, block, args, shmem, sptr), = seen
    assert grid == (3,) and block == (4,) and sptr == g._backend.stream.ptr
    assert [type(a) for a in args] == [np.uint64, np.uint64, np.float64, np.int64]
    assert int(args[0]) == hy.ctypes.data and int(args[3]) == 10
    g.launch(1)
    np.testing.assert_array_equal(hy, 2 * hx)
    g.set_logical_size(5)
    hy[:] = 0
    g.launch(1)
    np.testing.assert_array_equal(hy, np.where(np.arange(10) < 5, 2 * hx, 0))
    assert len(seen) == 1  # retune never re-launches through CuPy (no re-capture)


# ---- ordering: other streams, branches ---------------------------------------------------

def _p(a):
    return ctypes.c_uint64(a.__cuda_array_interface__["data"][0])


def test_launch_waits_for_the_stream_the_arrays_name(ck, fake, cuda_mod, backend_mod):
    """``__cuda_array_interface__['stream']``: eagle orders its replays after the work
    queued there (an event on that stream, waited on by eagle's stream). The stand-in
    runs streams asynchronously, so without that wait the graph reads stale x."""
    cuda_kernel, SIZE = ck
    producer = _stream.Stream()
    x = DeviceArray(np.ones(4), stream=producer.ptr)
    y = DeviceArray(np.zeros(4))
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "scale"), 4), (y, x, 2.0, SIZE), reads={"x": x},
                           writes={"y": y}, block=4), name="scale")
    g.build()
    from eagle.cuda.interop import producer_streams
    assert producer_streams(g._backend.producers.arrays) == [producer.ptr]  # read at each launch
    _stream.launch_kernel(kernel(fake, "slow_fill"), 1, 4,
                           [_p(x), ctypes.c_double(5.0), ctypes.c_int64(4), ctypes.c_int64(50000)],
                           stream=producer)
    g.launch(1)
    assert y.host.tolist() == [10.0] * 4


def test_branches_wait_for_the_stage_before(ck, fake, cuda_mod):
    """Stage 0 writes a late (a slow kernel); stage 1 is two branches reading it.
    Each side branch waits on the fork event recorded after stage 0; graph branches
    run concurrently in the stand-in, so a missing wait or edge reads stale a."""
    cuda_kernel, SIZE = ck
    a, b, c = DeviceArray(np.ones(4)), DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4))
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "slow_fill"), 4), (a, 5.0, SIZE, 30000), writes={"a": a},
                           block=4, size_arg=2), name="late")
    g.add_group([cuda_kernel((kernel(fake, "scale"), 4), (b, a, 2.0, SIZE), reads={"a": a},
                             writes={"b": b}, block=4),
                 cuda_kernel((kernel(fake, "scale"), 4), (c, a, 3.0, SIZE), reads={"a": a},
                             writes={"c": c}, block=4)], names=["twice", "thrice"])
    g.build()
    assert g.stages == [["late"], ["twice", "thrice"]]
    assert g._backend.stage_notes() == ["stream", "branches"]
    assert b.host.tolist() == c.host.tolist() == [0.0] * 4, "captured work ran at build"
    g.launch(1)
    assert b.host.tolist() == [10.0] * 4
    assert c.host.tolist() == [15.0] * 4


def _library_group(fake, cuda_mod, backend_mod, kinds, kernel=kernel):
    """A stage of opaque nodes launching kernels on the capture stream ("sgemm_like"
    is named like a cuBLAS kernel), then a join; returns (graph, calls, arrays).
    ``kernel``: how a kernel's handle is had (a CUfunction; library_kernel: a CUkernel)."""
    arrays = [DeviceArray(np.zeros(4)) for _ in kinds]
    calls = {}

    def make(k, a, name):
        def run():
            calls[name] = calls.get(name, 0) + 1
            _stream.launch_kernel(kernel(fake, k), 1, 4, [_p(a), ctypes.c_int64(4)],
                                   stream=backend_mod.capture_stream())
        return run

    names = [f"n{j}" for j in range(len(kinds))]
    g = eagle.Graph()
    g.add_group([opaque(make(k, a, nm), writes={nm: a}) for k, a, nm in zip(kinds, arrays, names)],
                names=names)
    return g, calls, arrays


NVJET = "nvjet_hsh_256x128_64x4_1x2_h_bz_coopB_TNT"   # a cuBLAS GEMM on Hopper (12.8+)


@pytest.mark.parametrize("lib_kernel", ["sgemm_like", NVJET])
def test_branches_calling_library_kernels_are_captured_in_order(ck, fake, cuda_mod, backend_mod, lib_kernel):
    """Two side-by-side nodes whose captures add cuBLAS-like kernels would share the
    library's per-thread handle and workspace on replay: eagle captures that stage again
    in order (the opaque nodes run a second time at build) and says so."""
    g, calls, arrays = _library_group(fake, cuda_mod, backend_mod, [lib_kernel, lib_kernel])
    g.build()
    assert g._backend.stage_notes() == ["stream"]
    assert g._backend.library_serial_stages == {0: {"n0": [lib_kernel], "n1": [lib_kernel]}}
    assert g.plan().library_serial_stages == {0: {"n0": [lib_kernel], "n1": [lib_kernel]}}   # the public face
    assert calls == {"n0": 2, "n1": 2}
    if lib_kernel == NVJET:
        return
    g.launch(2)
    for a in arrays:
        assert a.host.tolist() == [2.0] * 4
    # one library node beside a plain kernel: nothing is shared, branches stay
    g2, calls2, _ = _library_group(fake, cuda_mod, backend_mod, ["sgemm_like", "add_one"])
    g2.build()
    assert g2._backend.stage_notes() == ["branches"] and calls2 == {"n0": 1, "n1": 1}
    # the user's choice: keep the branches
    g3, calls3, _ = _library_group(fake, cuda_mod, backend_mod, ["sgemm_like", "sgemm_like"])
    g3.build(cuda=eagle.CudaOptions(library_branches="branches"))
    assert g3._backend.stage_notes() == ["branches"] and calls3 == {"n0": 1, "n1": 1}
    # the option is a value given to build(), not a class attribute to set
    with pytest.raises(AttributeError, match=r"build\(cuda=eagle.CudaOptions\(library_branches="):
        backend_mod.CudaBackend.library_branches = "branches"


@pytest.mark.parametrize("factor,what", [(np.float32(2.0), "numpy.float32"), (np.int32(2), "numpy.int32")])
def test_a_kernel_argument_narrower_than_its_parameter_is_refused(fake, ck, factor, what):
    """cuda_kernel arguments are checked against the kernel's parameter widths
    (cuFuncGetParamInfo): a float32 passed for a double would be copied 8 bytes wide
    from a 4-byte value. The error names the node, the argument and both widths."""
    cuda_kernel, SIZE = ck
    x, y = dev(np.arange(4.0), np.zeros(4))
    g = eagle.Graph()
    g.add_node(cuda_kernel(kernel(fake, "scale"), (y, x, factor, SIZE), reads={"x": x},
                           writes={"y": y}, block=4), name="twice")
    with pytest.raises(TypeError, match=rf"kernel 'cuda_kernel': argument 2 \({what}\) is passed as 4 "
                                        r"bytes but the kernel's parameter 2 is 8 bytes wide") as err:
        g.build()
    assert "node 'twice'" in "".join(getattr(err.value, "__notes__", []))
    g2 = eagle.Graph()   # the right width builds and runs
    g2.add_node(cuda_kernel(kernel(fake, "scale"), (y, x, np.float64(2.0), SIZE), reads={"x": x},
                            writes={"y": y}, block=4), name="twice")
    g2.build()
    g2.launch(1)
    assert y.host.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_launch_past_the_devices_limits_fails_build_naming_the_node(fake, ck):
    """More than 48 KiB of dynamic shared memory (without the kernel's opt-in) is refused
    by the driver at launch, as on a GPU: build() raises naming the node."""
    cuda_kernel, SIZE = ck
    x = dev(np.zeros(4))[0]
    g = eagle.Graph()
    g.add_node(cuda_kernel(kernel(fake, "add_one"), (x, SIZE), writes={"x": x}, block=4,
                           shared_mem=64 * 1024), name="big_shared")
    with pytest.raises(eagle.CudaError, match="CUDA_ERROR_INVALID_VALUE") as err:
        g.build()
    assert err.value.node_name == "big_shared"


UNNAMED_SCRIPT = r"""
import ctypes, sys
import numpy as np
sys.path.insert(0, "tests/doubles")
import eagle
from eagle.cuda import _driver as c, _stream, backend as b
from eagle.graph import opaque
from fake_cuda import DeviceArray
lib = ctypes.CDLL(c.load())
lib.fake_cuda_kernel.restype = ctypes.c_void_p
k = lib.fake_cuda_kernel(b"add_one")
arrays = [DeviceArray(np.zeros(4)) for _ in range(2)]
def make(a):
    def run():
        _stream.launch_kernel(k, 1, 4, [ctypes.c_uint64(a.__cuda_array_interface__["data"][0]),
                                  ctypes.c_int64(4)], stream=b.capture_stream())
    return run
g = eagle.Graph()
g.add_group([opaque(make(a), writes={f"n{j}": a}) for j, a in enumerate(arrays)], names=["n0", "n1"])
g.build()
g.launch(2)
print("API", c.api_version(), "NOTES", g._backend.stage_notes(), "SERIAL", sorted(g._backend.library_serial_stages),
      "A", [a.host.tolist() for a in arrays])
"""


@pytest.mark.parametrize("version,serial", [("12020", True), ("12030", False)])
def test_branches_launching_kernels_the_driver_cannot_name_are_captured_in_order(
        fake_libcuda_path, cuda_mod, version, serial):
    """A 12.0-12.2 driver has no cuFuncGetName: eagle cannot tell a cuBLAS kernel from
    any other, so a stage whose side-by-side opaque nodes launched kernels is captured in
    order (they might share a library's per-thread handle and workspace); from 12.3 the
    names say these are no library's and the branches stay."""
    r = run_python(UNNAMED_SCRIPT, {"EAGLE_LIBCUDA": fake_libcuda_path, "FAKE_CUDA_VERSION": version})
    assert r.returncode == 0, r.stdout + r.stderr
    want = "NOTES ['stream'] SERIAL [0]" if serial else "NOTES ['branches'] SERIAL []"
    assert f"API {version} {want} A [[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]" in r.stdout, r.stdout


def test_library_kernels_launched_as_cukernels_are_detected(ck, fake, cuda_mod, backend_mod):
    """cuBLAS / cuFFT kernels captured through the runtime may leave a CUkernel in the
    node (cuFuncGetName refuses it): eagle names them through cuKernelGetName, so the
    branches sharing the library's state are still captured in order."""
    from fake_cuda import library_kernel

    g, calls, arrays = _library_group(fake, cuda_mod, backend_mod, ["sgemm_like", "sgemm_like"],
                                      kernel=library_kernel)
    g.build()
    assert g._backend.library_serial_stages == {0: {"n0": ["sgemm_like"], "n1": ["sgemm_like"]}}
    assert g._backend.stage_notes() == ["stream"]
    g.launch(2)
    for a in arrays:
        assert a.host.tolist() == [2.0] * 4


class DLPackArray(DeviceArray):
    """TEST-ONLY: a device array that orders itself the DLPack way: ``__dlpack__(stream=s)``
    makes ``s`` wait for its producer stream (what torch / JAX do)."""

    def __init__(self, init, producer, cuda_mod):
        super().__init__(init)
        self.producer, self.cuda_mod, self.asked = producer, cuda_mod, []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        self.asked.append(stream)
        ev = _stream.Event()
        ev.record(self.producer)
        _stream.BorrowedStream(stream).wait_event(ev)
        return None  # the capsule itself is not needed for ordering


def test_launch_asks_dlpack_producers_to_order_on_its_stream(ck, fake, cuda_mod):
    cuda_kernel, SIZE = ck
    producer = _stream.Stream()
    x = DLPackArray(np.ones(4), producer, cuda_mod)
    y = DeviceArray(np.zeros(4))
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "scale"), 4), (y, x, 3.0, SIZE), reads={"x": x},
                           writes={"y": y}, block=4), name="scale")
    g.build()
    _stream.launch_kernel(kernel(fake, "slow_fill"), 1, 4,
                           [_p(x), ctypes.c_double(2.0), ctypes.c_int64(4), ctypes.c_int64(50000)],
                           stream=producer)
    g.launch(1)
    assert x.asked[-1] == g._backend.stream.ptr and len(x.asked) == 2  # at build, at launch
    assert y.host.tolist() == [6.0] * 4


def test_a_failed_end_of_capture_still_ends_every_capture(ck, fake, cuda_mod):
    """cuStreamEndCapture failing (here an injected error) leaves streams capturing in
    the driver; eagle ends them (the abandon path), so nothing leaks and a rebuild works."""
    cuda_kernel, SIZE = ck
    arrays = [DeviceArray(np.zeros(4)) for _ in range(2)]
    g = eagle.Graph()
    g.add_group([cuda_kernel((kernel(fake, "add_one"), 2), (a, SIZE), writes={"a": a}, block=4)
                 for a in arrays], names=["p", "q"])
    gc.collect()
    base = fake.fake_cuda_live(b"stream")
    fake.fake_cuda_fail_next(b"cuStreamEndCapture", 1, 999)
    with pytest.raises(eagle.CudaError, match="CUDA_ERROR_UNKNOWN") as info:
        g.build()
    assert any("ending the CUDA graph capture failed" in n for n in info.value.__notes__)
    assert fake.fake_cuda_counter(b"cuStreamEndCapture") == 2  # the failed one, then the abandon
    del info
    gc.collect()
    assert fake.fake_cuda_live(b"stream") == base
    g.build().launch(1)
    assert [a.host.tolist() for a in arrays] == [[1.0] * 4] * 2


def test_launch_through_a_full_launch_queue_neither_drops_nor_reorders(fake, ck):
    """eagle's replay loop issues faster than the device drains: with the device held
    (a gated kernel) and a queue of 2 launches, g.launch(12) waits in cuGraphLaunch
    (without the GIL: this thread polls meanwhile) instead of failing; once the device
    goes on, every replay ran, in order (x -> 2 (x + 1), twelve times, from 0)."""
    import time
    cuda_kernel, SIZE = ck
    fake.fake_cuda_set_queue_depth.argtypes = [ctypes.c_long]
    fake.fake_cuda_set_gate.argtypes = [ctypes.c_int]
    fake.fake_cuda_launch_queue_max.restype = ctypes.c_long
    x = dev(np.zeros(4))[0]
    g = eagle.Graph()
    g.add_node(cuda_kernel(kernel(fake, "gated_add_one"), (x, SIZE), writes={"x": x}, block=4), name="inc")
    g.add_node(cuda_kernel(kernel(fake, "scale"), (x, x, 2.0, SIZE), writes={"x": x}, block=4), name="dbl")
    g.build()
    x.host[:] = 0
    fake.fake_cuda_set_queue_depth(2)
    fake.fake_cuda_set_gate(1)
    errors = []

    def run():
        try:
            g.launch(12)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 30
    while fake.fake_cuda_counter(b"launch_queue_full") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    full = fake.fake_cuda_counter(b"launch_queue_full")
    alive = t.is_alive()
    fake.fake_cuda_set_gate(0)
    t.join(timeout=60)
    assert full >= 1 and alive, "g.launch never waited for the launch queue"
    assert not t.is_alive() and not errors
    # launch() returned after its synchronize: every replay had run
    assert x.host.tolist() == [2.0 ** 13 - 2] * 4
    assert fake.fake_cuda_launch_queue_max() <= 2


def test_the_launch_window_stays_short_after_a_retune_to_a_larger_size(ck, fake):
    """Replays go out in windows of about 10 ms of device time, learned as launches go;
    a window learned at a small size and kept after set_logical_size to a larger one
    would queue that many longer replays (Ctrl-C drains two windows). A kernel whose
    duration grows with the size (10 us a sample here): the window shrinks with the size."""
    cuda_kernel, SIZE = ck
    a = DeviceArray(np.zeros(1000))
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "sized_wait"), 3), (a, 10_000, SIZE), writes={"a": a}, block=4),
               name="grows")
    g.set_logical_size(2)
    g.build()
    g.launch(400)                     # 20 us replays: the window grows past 1
    learned = g._backend._window
    assert learned > 1
    g.set_logical_size(1000)          # 10 ms replays
    assert g._backend._window == max(1, learned * 2 // 1000) == 1
    g.launch(3)
    assert a.host[:2].tolist() == [403.0] * 2 and a.host[2] == 3.0


def test_captured_dependencies_with_edge_data_are_read(ck, fake, cuda_mod):
    """A library that launches with programmatic dependent launch leaves edge data on the
    capture's dependencies: cuStreamGetCaptureInfo (12.3+) then refuses a query that drops
    it (CUDA_ERROR_LOSSY_QUERY). eagle asks for the edge data, so the build goes on."""
    cuda_kernel, SIZE = ck
    lib = fake
    lib.fake_cuda_set_edge_data.argtypes = [ctypes.c_int]
    a, b, c = DeviceArray(np.ones(4)), DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4))
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (a, SIZE), writes={"a": a}, block=4), name="first")
    g.add_group([cuda_kernel((kernel(fake, "scale"), 4), (b, a, 2.0, SIZE), reads={"a": a},
                             writes={"b": b}, block=4),
                 cuda_kernel((kernel(fake, "scale"), 4), (c, a, 3.0, SIZE), reads={"a": a},
                             writes={"c": c}, block=4)], names=["twice", "thrice"])
    lib.fake_cuda_set_edge_data(1)
    try:
        g.build()
    finally:
        lib.fake_cuda_set_edge_data(0)
    g.launch(1)
    assert b.host.tolist() == [4.0] * 4 and c.host.tolist() == [6.0] * 4


def test_no_garbage_collection_inside_a_capture(backend_mod, fake):
    """A collection inside a capture runs GPU objects' finalizers there (it aborted pytest
    on an H200: tests/gpu/RESULTS.md): the collector is off while build() captures, on
    again after it, also after a capture that failed, and left off if it was off."""
    assert gc.isenabled()
    seen = []

    def graph(step):
        g = eagle.Graph()
        g.add_node(opaque(step, writes={"a": dev(np.zeros(4))[0]}), name="step")
        return g

    graph(lambda: seen.append(gc.isenabled())).build()
    assert seen == [False] and gc.isenabled()

    def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        graph(fails).build()
    assert gc.isenabled()
    gc.disable()
    try:
        graph(lambda: seen.append(gc.isenabled())).build()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_no_garbage_collection_until_the_capture_pools_scope_is_left(backend_mod, fake,
                                                                     monkeypatch):
    """The collection a capture puts off must not run as the capture's memory-pool scope
    is left (CuPy's allocator, torch's use_mem_pool still in use): on an H200 it aborted
    pytest there, after end_capture had turned the collector back on."""
    from eagle.cuda import interop
    scope = interop.CapturePools.scope
    seen = []

    @contextlib.contextmanager
    def watched(self):
        with scope(self):
            seen.append(("enter", gc.isenabled()))
            yield
            seen.append(("leave", gc.isenabled()))

    monkeypatch.setattr(interop.CapturePools, "scope", watched)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"a": dev(np.zeros(4))[0]}), name="step")
    g.build()
    assert seen == [("enter", False), ("leave", False)]
    assert gc.isenabled() and _stream.captures_pausing_collection() == 0


def test_collection_paused_scopes_count_with_captures(backend_mod, fake):
    """collection_paused() and a capture hold the pause together: whichever ends last turns
    the collector back on; a scope entered again inside itself counts the nesting (the
    outer ``with`` keeps its pause); one dropped while held lets its pauses go."""
    from eagle.cuda._stream import Stream, collection_paused, captures_pausing_collection
    s = Stream()
    with collection_paused() as held:
        assert not gc.isenabled() and captures_pausing_collection() == 1
        s.begin_capture()
        assert captures_pausing_collection() == 2
        with held:                          # the same scope, entered again
            assert captures_pausing_collection() == 3
        assert captures_pausing_collection() == 2
        s.end_capture()
        assert not gc.isenabled() and captures_pausing_collection() == 1
    assert gc.isenabled() and captures_pausing_collection() == 0
    held = collection_paused()
    held.__enter__()
    held.__enter__()
    assert not gc.isenabled() and captures_pausing_collection() == 2
    del held                                # dropped while held: both resumed
    assert gc.isenabled() and captures_pausing_collection() == 0
    with pytest.raises(KeyError):
        with collection_paused():
            raise KeyError("inside")
    assert gc.isenabled() and captures_pausing_collection() == 0
    s.close()


def test_a_capture_ended_through_another_wrapper_of_its_stream_ends_its_pause(backend_mod, fake):
    """The pause belongs to the stream, not to the wrapper that began the capture: ending
    it through a BorrowedStream of the same ptr turns the collector back on, and a borrowed
    wrapper dropped while the stream still captures does not."""
    from eagle.cuda._stream import BorrowedStream, Stream, captures_pausing_collection
    s = Stream()
    s.begin_capture()
    other = BorrowedStream(s.ptr)
    del other                               # dropped mid-capture: not its pause
    assert not gc.isenabled() and captures_pausing_collection() == 1
    BorrowedStream(s.ptr).end_capture().close()
    assert not s.is_capturing()
    assert gc.isenabled() and captures_pausing_collection() == 0
    s.close()                               # nothing left to resume
    assert gc.isenabled() and captures_pausing_collection() == 0
    s2 = Stream()
    b = BorrowedStream(s2.ptr)
    b.begin_capture()                       # begun through the borrowed wrapper
    s2.end_capture().close()                # ended through the owner
    assert gc.isenabled() and captures_pausing_collection() == 0
    b.close()
    s2.close()


def test_overlapping_captures_keep_the_collector_off_until_the_last_ends(backend_mod, fake):
    """Two streams capture at once, ended in the other order (from two threads); the
    collector comes back when the last ends, once: ending a stream twice does not count
    it again, and a stream dropped while it captures is no longer counted."""
    from eagle.cuda._stream import Stream, captures_pausing_collection
    assert gc.isenabled() and captures_pausing_collection() == 0
    s1, s2 = Stream(), Stream()
    s1.begin_capture()
    assert not gc.isenabled() and captures_pausing_collection() == 1
    t = threading.Thread(target=s2.begin_capture)
    t.start()
    t.join(10)
    assert captures_pausing_collection() == 2
    s1.end_capture()
    assert not gc.isenabled() and captures_pausing_collection() == 1
    with pytest.raises(eagle.CudaError):
        s1.end_capture()                    # not capturing any more: the driver refuses
    assert not gc.isenabled() and captures_pausing_collection() == 1
    t = threading.Thread(target=s2.end_capture)
    t.start()
    t.join(10)
    assert gc.isenabled() and captures_pausing_collection() == 0
    s3 = Stream()
    s3.begin_capture()
    assert not gc.isenabled()
    del s3                                  # dropped mid-capture: no longer counted
    assert gc.isenabled() and captures_pausing_collection() == 0
    s1.close()
    s2.close()
