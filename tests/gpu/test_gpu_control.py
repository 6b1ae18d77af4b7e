"""Control-flow nodes (while_loop, if_else, subgraph) on a real GPU, with CuPy arrays
(marker ``gpu``; skips cleanly without CuPy or a GPU, see conftest.py): conditional
WHILE / IF nodes set by eagle's condition kernel (eagle/cuda/kernels/control.cu,
compiled by CuPy's NVRTC), a child-graph node, the iteration limit, and a retune of
kernel nodes inside a body (the graph patch + cuGraphExecUpdate path, which the CPU
stand-in can only model), and a subgraph holding control flow (captured in place: no
child graph may hold a conditional node). Run in a process of its own (see
test_gpu_backend.py)."""
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


CTRL_C_SCRIPT = r'''
import sys, time
import cupy, numpy as np
import eagle
from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
from eagle.record.control import while_loop
mod = cupy.RawModule(code=sys.argv[1])
add_k, dec_k = mod.get_function("add"), mod.get_function("dec")
x, k = cupy.zeros(1000), cupy.zeros(1000, dtype=cupy.int64)
body = eagle.Graph()
body.add_node(cuda_kernel(add_k, [x, 1.0, SIZE], updates={"x": x}, block=128), name="inc")
body.add_node(cuda_kernel(dec_k, [k, SIZE], updates={"k": k}, block=128), name="dec")
g = eagle.Graph()
g.add_node(while_loop({"k?": k[:1]}, body), name="spin")
g.build()
k[0] = 10 ** 15                     # never clears in this launch
cupy.cuda.Device().synchronize()
print("ready", flush=True)
try:
    g.launch(1)
    print("finished", flush=True)
except KeyboardInterrupt as e:
    print("interrupted", " ".join(getattr(e, "__notes__", [])), flush=True)
ran = float(x[0])
k[0], x[:] = 3, 0
g.launch(1)
print("after", ran, float(x[0]), int(k[0]), flush=True)
'''


def test_ctrl_c_stops_an_endless_while_loop_on_a_gpu(cupy):
    """SIGINT during launch(1) of a while_loop whose condition never clears: the stop flag
    (host-mapped memory the condition kernel reads) ends the loop on the device, launch
    raises KeyboardInterrupt naming the loop and its iteration, and the graph then runs a
    3-iteration loop exactly (in a subprocess, bounded by a timeout)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, ADD], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("interrupted") and "while_loop node 'spin' after" in lines[0], out
    it = int(lines[0].split("while_loop node 'spin' after ")[1].split()[0])
    _, ran, again, k_left = lines[-1].split()
    assert float(ran) == it > 0   # the iteration named is the one the loop stopped at
    assert (float(again), int(k_left)) == (3.0, 0)


BODY_SRC = r'''
extern "C" __global__ void absorb(bool *alive, long long *age, double *x, const long long *ids,
                                  const long long *life, const long long *size) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= *size || !alive[i]) return;
    age[i] += 1;
    x[i] += 0.5;
    if (age[i] >= life[ids[i]]) alive[i] = false;
}
extern "C" __global__ void tick(long long *it, bool *more, long long limit, const bool *alive,
                                long long *log, long long reset, const long long *size) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    long long n = *size;
    it[0] = reset ? 0 : it[0] + 1;
    bool any = false;
    for (long long i = 0; i < n && !any; ++i) any = alive[i];
    more[0] = it[0] < limit && any;
    log[1 + log[0]] = n;
    log[0] += 1;
}
'''


def test_a_compaction_inside_a_while_loop_body_on_a_gpu(cupy):
    """A while loop whose body steps, compacts and decides (it < 3 and any live): the
    partition kernels inside the conditional body (their grids patched by a retune
    through cuGraphExecUpdate), the next size read back after the launch, and
    launch_until_done around it, against the plain-Python form."""
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import compact
    mod = cupy.RawModule(code=BODY_SRC)
    absorb_k, tick_k = mod.get_function("absorb"), mod.get_function("tick")
    n, iterations = 20_000, 3
    rng = np.random.default_rng(3)
    life_h, x_h = rng.integers(1, 40, n), rng.standard_normal(n)
    alive, age, x = cupy.ones(n, dtype=bool), cupy.zeros(n, dtype=cupy.int64), cupy.asarray(x_h)
    ids, life = cupy.arange(n, dtype=cupy.int64), cupy.asarray(life_h)
    it, more, log = cupy.zeros(n, cupy.int64), cupy.zeros(n, bool), cupy.zeros(n, cupy.int64)
    count = cupy.zeros(1, cupy.int64)

    def tick(reset):
        return cuda_kernel(tick_k, [it, more, iterations, alive, log, reset, SIZE_PTR], reads={"alive": alive},
                           updates={"it": it, "more": more, "log": log}, block=1)
    body = eagle.Graph()
    body.add_node(cuda_kernel(absorb_k, [alive, age, x, ids, life, SIZE_PTR], reads={"ids": ids, "life": life},
                              updates={"alive": alive, "age": age, "x": x}, block=128), "absorb")
    body.add_node(compact(alive, {"x": x, "age": age}, ids=ids, count=count, min_dead_fraction=0.0), "compact")
    body.add_node(tick(0), "tick")
    g = eagle.Graph()
    g.add_node(tick(1), "reset")
    g.add_node(while_loop({"more": more[:1]}, body, max_iterations=iterations + 1), "loop")
    g.build()
    m = {"alive": np.ones(n, bool), "age": np.zeros(n, np.int64), "x": x_h.copy(), "ids": np.arange(n)}
    L, seen = n, []

    def replays(k):
        nonlocal L
        for _ in range(k):
            nxt, i = L, 0
            seen.append(L)
            while i < iterations and m["alive"][:L].any():
                live = m["alive"][:L].copy()
                m["age"][:L][live] += 1
                m["x"][:L][live] += 0.5
                m["alive"][:L] &= m["age"][:L] < life_h[m["ids"][:L]]
                a = m["alive"][:L]
                nxt = int(a.sum())
                if nxt != L:
                    order = np.argsort(~a, kind="stable")
                    for v in m.values():
                        v[:L] = v[:L][order]
                i += 1
                seen.append(L)
            L = nxt

    for k in (1, 3):
        g.launch(k)
        replays(k)
        for name, arr in (("alive", alive), ("age", age), ("x", x), ("ids", ids)):
            np.testing.assert_array_equal(cupy.asnumpy(arr), m[name], err_msg=name)
        assert g.logical_size == L < n and int(count[0]) == L
    got = cupy.asnumpy(log)
    assert got[1:1 + got[0]].tolist() == seen
    g.set_logical_size(n)       # back up: the body's partition grids cover n again
    L = n
    g.launch(1)
    replays(1)
    np.testing.assert_array_equal(cupy.asnumpy(ids), m["ids"])
    g.launch_until_done(1000)
    assert g.logical_size == 0 and not bool(alive.any())
    back = cupy.asnumpy(age).copy()
    back[cupy.asnumpy(ids)] = cupy.asnumpy(age)
    np.testing.assert_array_equal(back, life_h)


def test_a_subgraph_holding_control_flow_on_a_gpu(cupy):
    """subgraph(if flag: (while k: x += 1; k -= 1) else: x -= 100), used twice: CUDA
    refuses a child graph holding conditional nodes (CUDA_CHILD_GRAPH_NODE_PARAMS), so
    eagle captures the body in place; the result against the plain-Python form, a retune
    reaching the kernels captured in place, and launch_until_done of a graph with
    conditional nodes (the host path, decided up front, no refused driver call)."""
    add, dec = kernels(cupy)
    n = 1000
    x = cupy.zeros(n)
    k = cupy.zeros(n, dtype=cupy.int64)
    flag = cupy.ones(1, dtype=cupy.int32)
    loop, then, other, sub = eagle.Graph(), eagle.Graph(), eagle.Graph(), eagle.Graph()
    loop.add_node(add(x, 1.0), name="inc")
    loop.add_node(dec(k), name="dec")
    then.add_node(while_loop({"k?": k[:1]}, loop), name="count")
    other.add_node(add(x, -100.0), name="minus")
    sub.add_node(if_else({"flag?": flag}, then, other), name="choose")
    g = eagle.Graph()
    g.add_node(subgraph(sub), name="first")
    g.add_node(add(x, 0.5), name="half")
    g.add_node(subgraph(sub), name="second")
    g.build()
    assert g._backend._control.in_place == 2 and g._backend._control.child_nodes == 0
    want = np.zeros(n)
    for kk, f in [(3, 1), (0, 1), (2, 0)]:
        k[0], flag[0] = kk, f
        g.launch(1)
        want += (kk if f else -200.0) + 0.5    # the second use finds k == 0 (or subtracts again)
        np.testing.assert_array_equal(cupy.asnumpy(x), want)
    g.set_logical_size(10)
    k[0], flag[0] = 2, 1
    g.launch(1)
    want[:10] += 2.5
    np.testing.assert_array_equal(cupy.asnumpy(x), want)
    assert g._backend.until_done_path() == "host" and "conditional" in g._backend.until_done_fallback
