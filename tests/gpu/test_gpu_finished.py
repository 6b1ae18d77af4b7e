"""launch_until_done on a real GPU, with CuPy arrays (marker ``gpu``; skips cleanly without
CuPy or a GPU, see conftest.py): a kernel that an opaque node launched at capture counts
the replays that ran. Run in a process of its own: ``pytest -m gpu tests/gpu -v``.
The compaction and reorder scenarios every backend shares (the GPU among them) are
tests/finished/test_finished_on_every_backend.py.
"""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, opaque

pytestmark = pytest.mark.gpu


@pytest.fixture
def kernels(cupy):
    from backends import gpu_kernels
    return gpu_kernels(cupy)


def initial_state(n, seed, max_life=6):
    rng = np.random.default_rng(seed)
    life = rng.integers(0, max_life + 1, size=n).astype(np.int64)
    return (life > 0), life, np.arange(n) * 0.25


def gpu_graph(cupy, kernels, alive, life, x, **policy):
    from eagle.graph import SIZE_PTR, cuda_kernel
    da, dl, dx = cupy.asarray(alive), cupy.asarray(life), cupy.asarray(x)
    g = eagle.Graph()
    g.add_node(cuda_kernel(kernels["b_life_step"], (da, dl, dx, SIZE_PTR),
                           writes={"alive": da, "life": dl, "x": dx}), name="step")
    node = compact(da, {"life": dl, "x": dx}, **policy)   # ids / count made with CuPy
    g.add_node(node, name="compact")
    return g.build(), (da, dl, dx, node.ids, node.count), node


COUNT_SRC = r"""
extern "C" __global__ void bump(unsigned long long *c) { if (threadIdx.x == 0) c[0] += 1; }
"""


@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done_runs_no_replay_past_the_end(cupy, kernels, mode):
    """A kernel captured inside an opaque node counts the replays that ran: exactly the
    ones that started with live samples (no overshoot), on the WHILE node and the host loop."""
    from eagle.cuda import _driver as _cuda
    if mode == "device" and not _cuda.has("conditional"):
        pytest.skip(f"conditional nodes need a 12.4 driver, this one is {_cuda.driver_version()}")
    bump = cupy.RawKernel(COUNT_SRC, "bump")
    counter = cupy.zeros(1, dtype=cupy.uint64)
    host = initial_state(20_000, 4, max_life=30)
    gg, gpu, node = gpu_graph(cupy, kernels, *host)
    gg.add_node(opaque(lambda: bump((1,), (32,), (counter,)), writes={"c": counter}), name="bump")
    gg.build()
    gg._backend.until_done_mode = mode
    done = gg.launch_until_done(10_000)
    assert done == 30 == int(counter.get()[0])
    assert gg.launch_until_done(10) == 0 and int(counter.get()[0]) == 30
    assert gg._backend.until_done_fallback is None
