"""Control-flow nodes (while_loop, if_else, subgraph) on a real GPU, with CuPy arrays
(marker ``gpu``; skips cleanly without CuPy or a GPU, see conftest.py): conditional
WHILE / IF nodes set by eagle's condition kernel (eagle/cuda/kernels/control.cu,
compiled by CuPy's NVRTC), a child-graph node, the iteration limit, and a retune of
kernel nodes inside a body (the graph patch + cuGraphExecUpdate path, which the CPU
stand-in can only model). Run in a process of its own (see test_gpu_backend.py)."""
import numpy as np
import pytest

import eagle
from eagle.record.control import if_else, subgraph, while_loop

pytestmark = pytest.mark.gpu

ADD = r'''
extern "C" __global__ void add(double *x, double v, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}
extern "C" __global__ void dec(long long *k, long long n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) k[0] -= 1;
}
'''


@pytest.fixture(autouse=True)
def real_runtime(cupy):
    import os

    from eagle.cuda import _shim as _cuda
    if (_cuda.is_loaded() and "fake_libcuda" in _cuda.library()) or "EAGLE_LIBCUDA" in os.environ:
        pytest.skip("eagle's CUDA shim is bound to the CPU stand-in in this process")
    if not _cuda.has("conditional"):
        pytest.skip("this driver has no conditional nodes (CUDA 12.4+)")
    yield
    cupy.cuda.Device().synchronize()


def kernels(cupy):
    from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
    mod = cupy.RawModule(code=ADD)
    add_k, dec_k = mod.get_function("add"), mod.get_function("dec")
    add = lambda x, v: cuda_kernel(add_k, [x, float(v), SIZE], updates={"x": x}, block=128)
    dec = lambda k: cuda_kernel(dec_k, [k, SIZE], updates={"k": k}, block=128)
    return add, dec


def test_while_if_subgraph_and_limit_on_a_gpu(cupy):
    add, dec = kernels(cupy)
    n = 1000
    x = cupy.zeros(n)
    k = cupy.zeros(n, dtype=cupy.int64)   # the condition is k[:1] (per-sample arrays elsewhere)
    flag = cupy.ones(1, dtype=cupy.int32)
    then, other, inner, body = eagle.Graph(), eagle.Graph(), eagle.Graph(), eagle.Graph()
    then.add_node(add(x, 1.0), name="plus")
    other.add_node(add(x, -100.0), name="minus")
    inner.add_node(add(x, 0.5), name="half")
    body.add_node(if_else({"flag?": flag}, then, other), name="choose")
    body.add_node(subgraph(inner), name="sub")
    body.add_node(dec(k), name="dec")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k[:1]}, body, max_iterations=5), name="loop")
    g.build()
    assert g.backend == "cuda"
    want = np.zeros(n)
    for kk, f in [(3, 1), (0, 1), (2, 0)]:
        k[0], flag[0] = kk, f
        g.launch(1)
        want += kk * ((1.0 if f else -100.0) + 0.5)
        np.testing.assert_array_equal(cupy.asnumpy(x), want)
    g.set_logical_size(10)          # reaches the kernels inside the bodies
    k[0] = 1
    g.launch(1)
    want[:10] += 1.5
    np.testing.assert_array_equal(cupy.asnumpy(x), want)
    k[0] = 9
    with pytest.raises(RuntimeError, match="while_loop node 'loop' reached max_iterations=5"):
        g.launch(1)
