"""NCCL collective nodes on a real GPU (marker ``gpu``): a one-rank communicator still
captures and replays. Skips cleanly without CuPy, a GPU, mpi4py or NCCL (libnccl.so.2:
the ``nvidia-nccl-cu12``/``-cu13`` wheel, or ``EAGLE_NCCL_LIBRARY``)."""
import numpy as np
import pytest

import eagle
from eagle.graph import allgather, allreduce, bcast, opaque, sendrecv

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def nccl():
    pytest.importorskip("mpi4py.MPI", reason="the collective nodes need mpi4py")
    from eagle.mpi import _nccl
    try:
        _nccl.library()
    except ImportError as e:
        pytest.skip(str(e))


def test_one_rank_nccl_collectives_are_captured_and_replayed(cupy):
    x, y, z = cupy.zeros(4), cupy.zeros(4), cupy.zeros(4)
    h = cupy.zeros(4)
    calls = []

    def step():
        calls.append(1)
        x[...] += 1.0        # a CuPy kernel, captured once and replayed

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"x": x}), name="step")
    g.add_node(allreduce(x, y), name="tally")
    g.add_node(allgather(y, z), name="gather")
    g.add_node(bcast(z, root=0), name="share")
    g.add_node(sendrecv(z, h, dest=0, source=0), name="halo")
    g.add_node(allreduce(h, h, op="max"), name="peak")
    g.build()
    assert g.backend == "cuda" and calls == [1]
    assert "{tally ×1 nccl}" in str(g)
    g.launch(3)
    assert calls == [1]
    for a in (x, y, z, h):
        np.testing.assert_array_equal(cupy.asnumpy(a), 3.0)
    g.launch(2)
    np.testing.assert_array_equal(cupy.asnumpy(h), 5.0)
