"""A compaction inside a while loop's body on a real GPU, with CuPy arrays (marker ``gpu``;
skips cleanly without CuPy or a GPU, see conftest.py): the partition kernels inside a
conditional body, their grids patched by a retune through cuGraphExecUpdate (which the
CPU stand-in can only model). Run in a process of its own (see test_gpu_backend.py).
The control-flow scenarios every backend shares (the GPU among them: while / if_else /
subgraph, the iteration limit, retunes inside bodies, Ctrl-C) are
tests/control/test_control_on_every_backend.py."""
import numpy as np
import pytest

import eagle
from eagle.graph import while_loop

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def conditional_nodes():
    from eagle.cuda import _driver as _cuda
    if not _cuda.has("conditional"):
        pytest.skip("this driver has no conditional nodes (CUDA 12.4+)")


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

