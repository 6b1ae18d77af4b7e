"""eagle's cuda backend on a real GPU, with CuPy arrays (marker ``gpu``; skips cleanly
without CuPy or a GPU, see conftest.py). Run: ``pytest -m gpu tests/gpu -v`` or
``tests/gpu/run_on_gpu.sh``, in a process of its own (not after tests/cuda, which
binds eagle's shim to the CPU stand-in).

On a GPU an opaque node's Python code runs ONCE, while ``build()`` captures the
graph; every replay repeats the GPU work it launched then. So the seed page's
``print(calls)`` after ``build()`` and ``launch(3)`` shows
``{'l': 1, 'r': 1, 'join': 1}`` here (on the CPU: 3 each), while ``out`` is the
same ``[ 1.  4.  7. 10.]``.
"""
import contextlib
import io
import textwrap

import numpy as np
import pytest

import eagle
from eagle.graph import opaque

pytestmark = pytest.mark.gpu


def kernel_api():
    try:
        from eagle.graph import SIZE, cuda_kernel
    except ImportError:
        from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
    return cuda_kernel, SIZE


# ---- the seed page, cell by cell, with CuPy arrays --------------------------------------

SEED_CELLS = [
    """
    import cupy as cp
    import eagle
    from eagle.graph import opaque
    """,
    """
    x, left, right, out = cp.arange(4.0), cp.zeros(4), cp.zeros(4), cp.zeros(4)
    calls = {"l": 0, "r": 0, "join": 0}
    def run_l():
        calls["l"] += 1
        left[:] = 2 * x
    def run_r():
        calls["r"] += 1
        right[:] = x + 1
    def run_join():
        calls["join"] += 1
        out[:] = left + right
    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    print(g)
    """,
    """
    g.build()
    print(g)
    """,
    """
    g.launch(3)
    print(calls)
    print(out)
    """,
]

SEED_OUTPUTS = [
    "",
    """\
eagle.Graph 3 nodes · 1 group · backend: (not built)
stage 0  ┌─────┐   ┌─────┐
         │ <l> │   │ <r> │
         └──┬──┘   └──┬──┘
            a         b
            └────┬────┘
stage 1     ┌────┴────┐
            │ <join>  │
            └─────────┘
""",
    """\
eagle.Graph 3 nodes · 1 group · backend: cuda
stage 0 branches  ┌─────┐   ┌─────┐
                  │ <l> │   │ <r> │
                  └──┬──┘   └──┬──┘
                     a         b
                     └────┬────┘
stage 1 stream       ┌────┴────┐
                     │ <join>  │
                     └─────────┘
""",
    # opaque Python code ran once, at capture; the three replays re-ran its kernels
    """\
{'l': 1, 'r': 1, 'join': 1}
[ 1.  4.  7. 10.]
""",
]


def run_seed_cells():
    ns = {}
    for cell, expected in zip(SEED_CELLS, SEED_OUTPUTS):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(textwrap.dedent(cell), ns)
        assert buf.getvalue() == expected
    return ns


def test_seed_page_cells_with_cupy_arrays():
    ns = run_seed_cells()
    g, calls, out = ns["g"], ns["calls"], ns["out"]
    assert calls == {"l": 1, "r": 1, "join": 1}   # GPU: opaque code runs once, at capture
    g.launch(2)
    assert calls == {"l": 1, "r": 1, "join": 1}
    np.testing.assert_array_equal(out.get(), [1, 4, 7, 10])
    assert g._backend.replays == 5
    assert g.plan().backend == "cuda"


def test_temporaries_captured_in_the_graph_survive_other_allocations(cupy):
    """``2 * x`` inside a node makes a temporary that the graph keeps using; it lives in
    the graph's own pool, so later CuPy allocations cannot reuse (and corrupt) it."""
    ns = run_seed_cells()
    g, out = ns["g"], ns["out"]
    junk = [cupy.full(4, 1e30) for _ in range(64)] + [cupy.full(1 << 16, -7.0) for _ in range(16)]
    out[:] = 0
    g.launch(10)
    np.testing.assert_array_equal(out.get(), [1, 4, 7, 10])
    del junk


# ---- a RawKernel node, retuned ----------------------------------------------------------

AXPY = r"""
extern "C" __global__ void axpy(double *y, const double *x, double a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""

COUNT = r"""
extern "C" __global__ void count(unsigned long long *c) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(c, 1ULL);
}
"""


def test_rawkernel_node_replays_and_retunes_without_recapture(cupy):
    cuda_kernel, SIZE = kernel_api()
    axpy = cupy.RawKernel(AXPY, "axpy")
    n = 1000
    x = cupy.arange(n, dtype=cupy.float64)
    y = cupy.zeros(n)
    g = eagle.Graph()
    g.add_node(cuda_kernel(axpy, (y, x, 2.0, SIZE), reads={"x": x}, writes={"y": y}, block=128))
    assert g.nodes == ["axpy"]
    g.build()
    assert "{axpy}" in str(g) and "backend: cuda" in str(g)
    assert not y.any()                     # captured, not run
    g.launch(2)
    xs = np.arange(n, dtype=np.float64)
    np.testing.assert_array_equal(y.get(), 4 * xs)
    backend, exec_ = g._backend, g._backend.exec
    g.set_logical_size(300)
    y[:] = 0                               # on CuPy's stream: launch() orders after it
    g.launch(1)
    expect = np.where(np.arange(n) < 300, 2 * xs, 0)
    np.testing.assert_array_equal(y.get(), expect)
    g.set_logical_size(0)
    g.launch(5)
    np.testing.assert_array_equal(y.get(), expect)
    g.set_logical_size(n)
    g.launch(1)
    np.testing.assert_array_equal(y.get(), expect + 2 * xs)
    assert g._backend is backend and g._backend.exec is exec_   # patched, never rebuilt
    assert backend.sized_kernels == 1


def test_graph_launches_counted_on_the_device(cupy):
    """An opaque node that launches a counter kernel: the kernel, not the Python, replays."""
    count = cupy.RawKernel(COUNT, "count")
    counter = cupy.zeros(1, dtype=cupy.uint64)
    pycalls = []

    def bump():
        pycalls.append(1)
        count((1,), (1,), (counter,))

    g = eagle.Graph()
    g.add_node(opaque(bump, writes={"c": counter}), name="bump")
    g.build()
    assert int(counter.get()[0]) == 0 and pycalls == [1]
    g.launch(5)
    assert int(counter.get()[0]) == 5
    g.launch(10_000)                        # more than one chunk of launches
    assert int(counter.get()[0]) == 10_005
    assert pycalls == [1] and g._backend.replays == 10_005


def _step_graph(xp, kernel_node=None):
    """A 3-stage step; returns (graph, arrays). On cupy the join may be a RawKernel node."""
    n = 257
    x = xp.arange(n, dtype=xp.float64)
    a, b, c = xp.zeros(n), xp.zeros(n), xp.zeros(n)

    def make_a():
        a[:] = 2 * x + 1

    def accumulate_b():
        b[:] += x * x               # accumulates: every replay must run

    def join():
        c[:] = a + b

    def scale():
        c[:] *= 0.5

    g = eagle.Graph()
    g.add_group([opaque(make_a, reads={"x": x}, writes={"a": a}),
                 opaque(accumulate_b, reads={"x": x}, writes={"b": b})], names=["a", "b"])
    g.add_node(kernel_node(c, a, b) if kernel_node else
               opaque(join, reads={"a": a, "b": b}, writes={"c": c}), name="join")
    g.add_node(opaque(scale, writes={"c": c}), name="scale")
    return g, (x, a, b, c)


ADD = r"""
extern "C" __global__ void add(double *c, const double *a, const double *b, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.mark.parametrize("join_kind", ["opaque", "cuda_kernel"])
def test_same_results_as_the_cpu_backend(cupy, join_kind):
    cuda_kernel, SIZE = kernel_api()
    g_cpu, cpu = _step_graph(np)
    g_cpu.build()
    assert g_cpu.backend == "cpu"
    node = None
    if join_kind == "cuda_kernel":
        add = cupy.RawKernel(ADD, "add")
        node = lambda c, a, b: cuda_kernel(add, (c, a, b, SIZE), reads={"a": a, "b": b},  # noqa: E731
                                           writes={"c": c}, block=64)
    g_gpu, gpu = _step_graph(cupy, node)
    g_gpu.build()
    assert g_gpu.backend == "cuda"
    assert g_gpu.stages == g_cpu.stages
    for n in (1, 3, 4):
        g_cpu.launch(n)
        g_gpu.launch(n)
        for name, h, d in zip("xabc", cpu, gpu):
            np.testing.assert_allclose(d.get(), h, rtol=0, atol=0, err_msg=name)


def test_capture_failure_names_the_node_and_cupy_keeps_working(cupy):
    x = cupy.arange(4.0)
    y = cupy.zeros(4)

    def bad():
        y[:] = 2 * x
        cupy.cuda.get_current_stream().synchronize()   # not allowed while capturing

    g = eagle.Graph()
    g.add_node(opaque(lambda: None, reads={"x": x}, writes={"y": y}), name="fine")
    g.add_node(opaque(bad, reads={"x": x}, writes={"y": y}), name="bad")
    with pytest.raises(Exception) as info:
        g.build()
    notes = getattr(info.value, "__notes__", [])
    assert any("node 'bad' (stage 1)" in n for n in notes), (info.value, notes)
    assert g.backend is None
    # CuPy's current stream and allocator are back to normal
    assert float(cupy.arange(5.0).sum()) == 10.0
    g2 = eagle.Graph()
    g2.add_node(opaque(lambda: y.fill(3.0), writes={"y": y}), name="fill")
    g2.build().launch(1)
    assert float(y.sum()) == 12.0


def test_launch_orders_after_work_on_a_cupy_stream(cupy):
    cuda_kernel, SIZE = kernel_api()
    axpy = cupy.RawKernel(AXPY, "axpy")
    n = 1 << 20
    x = cupy.ones(n)
    y = cupy.zeros(n)
    g = eagle.Graph()
    g.add_node(cuda_kernel(axpy, (y, x, 1.0, SIZE), reads={"x": x}, writes={"y": y}))
    g.build()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(20):
            x *= 2.0                    # queued on s; the graph must see the final x
        g.launch(1)
    np.testing.assert_array_equal(y.get()[:4], [2.0 ** 20] * 4)
