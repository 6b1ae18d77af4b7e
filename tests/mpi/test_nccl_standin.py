"""Collective nodes on CUDA arrays (NCCL), against a stand-in NCCL.

``nccl_standin/fake_nccl.c`` is a TEST DOUBLE of libnccl.so.2 for a one-rank
communicator on host memory, compiled by these tests; ``HostCudaArray`` is NumPy
memory presented as a CUDA array. The tests drive what the cuda backend does with
an NCCL node: ``build()``'s hook (the communicator from an id broadcast over MPI,
the warm-up), then the node's function once, as at capture. No GPU is used.
"""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import eagle
from eagle.graph import allgather, allreduce, bcast, opaque, sendrecv

MPI = pytest.importorskip("mpi4py.MPI")
from eagle.mpi import _check, _nccl  # noqa: E402

HERE = Path(__file__).resolve().parent


class HostCudaArray:
    """TEST-ONLY: host (NumPy) memory that presents itself as a CUDA array."""

    def __init__(self, host, readonly=False):
        self.host, self.readonly = host, readonly

    @property
    def __cuda_array_interface__(self):
        h = self.host
        return {"shape": h.shape, "typestr": h.dtype.str, "data": (h.ctypes.data, self.readonly),
                "version": 3, "strides": None if h.flags.c_contiguous else h.strides}


def dev(h):
    return HostCudaArray(h)


@pytest.fixture(scope="module")
def fake_path(tmp_path_factory):
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler to build the NCCL stand-in")
    out = tmp_path_factory.mktemp("fake_nccl") / "libfake_nccl.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(HERE / "nccl_standin" / "fake_nccl.c"), "-o", str(out)],
                   check=True)
    return str(out)


@pytest.fixture
def fake(fake_path, monkeypatch):
    """eagle's NCCL bound to the stand-in, with fresh communicators; the stand-in's handle."""
    monkeypatch.setenv("EAGLE_NCCL_LIBRARY", fake_path)
    saved = dict(_nccl._lib), dict(_nccl._comms), list(_nccl._order_token)
    _nccl._lib.clear(), _nccl._comms.clear(), _nccl._order_token.clear()
    lib = ctypes.CDLL(fake_path)
    for name, res in (("fake_nccl_counter", ctypes.c_long), ("fake_nccl_last_count", ctypes.c_size_t),
                      ("fake_nccl_last_send", ctypes.c_void_p), ("fake_nccl_last_recv", ctypes.c_void_p),
                      ("fake_nccl_last_stream", ctypes.c_void_p)):
        getattr(lib, name).restype = res
    lib.fake_nccl_counter.argtypes = [ctypes.c_char_p]
    lib.fake_nccl_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.fake_nccl_reset()
    yield lib
    _nccl._destroy_all()
    _nccl._lib.clear(), _nccl._comms.clear(), _nccl._order_token.clear()
    _nccl._lib.update(saved[0]), _nccl._comms.update(saved[1]), _nccl._order_token.extend(saved[2])


def count(lib, name):
    return lib.fake_nccl_counter(name.encode())


def test_collectives_on_cuda_arrays_are_nccl_nodes(fake):
    x, y = np.arange(4.0), np.zeros(4)
    node = allreduce(dev(x), dev(y), op="max")
    assert isinstance(node, _nccl.NcclNode) and node.kind == "opaque" and node.family == "cuda"
    assert list(node.reads) == ["send"] and "recv" in node.writes
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"x": dev(x)}), name="step")
    g.add_node(node, name="peak")
    g.add_node(bcast(dev(y)), name="share")
    assert g.stages == [["step"], ["peak"], ["share"]]    # collectives in recording order
    assert "{peak ×1 nccl}" in str(g)
    assert "allreduce (nccl) comm size 1 op=max" in repr(node)


def test_build_makes_one_communicator_from_a_broadcast_id_and_warms_up(fake):
    a, b, c = np.ones(3), np.zeros(3), np.zeros(3)
    g = eagle.Graph()
    g.add_node(allreduce(dev(a), dev(b)), name="one")
    g.add_node(allreduce(dev(b), dev(c), op="sum"), name="two")
    assert count(fake, "ncclCommInitRank") == 0      # nothing happens while recording
    _check.check_same_graph(g)                       # what build() runs before the backend captures
    assert count(fake, "ncclGetUniqueId") == 1 and count(fake, "ncclCommInitRank") == 1
    assert count(fake, "ncclAllReduce") == 2         # one warm-up per node, before any capture
    np.testing.assert_array_equal(b, 0)              # the warm-up touches no buffer
    _check.check_same_graph(g)                       # a rebuild makes nothing again
    assert count(fake, "ncclCommInitRank") == 1 and count(fake, "ncclAllReduce") == 2


def test_the_capture_call_issues_the_collective_with_the_node_buffers(fake):
    x, y = np.arange(5, dtype=np.float32), np.zeros(5, dtype=np.float32)
    node = allreduce(dev(x), dev(y), op="min")
    node.fn()   # what the cuda backend does while it captures the graph
    assert count(fake, "ncclAllReduce") == 2         # the warm-up (made on first use), then the call
    assert fake.fake_nccl_last_count() == 5
    assert fake.fake_nccl_last_dtype() == 7 and fake.fake_nccl_last_op() == 3   # ncclFloat32, ncclMin
    assert fake.fake_nccl_last_send() == x.ctypes.data and fake.fake_nccl_last_recv() == y.ctypes.data
    assert fake.fake_nccl_last_stream() in (None, 0)  # no CuPy here: the legacy stream
    np.testing.assert_array_equal(y, x)


def test_in_place_allgather_bcast_and_sendrecv(fake):
    z = np.arange(4, dtype=np.int64)
    node = allreduce(dev(z), dev(z))
    assert list(node.reads) == [] and "buf" in node.writes
    node.fn()
    assert fake.fake_nccl_last_send() == fake.fake_nccl_last_recv() == z.ctypes.data
    assert fake.fake_nccl_last_dtype() == 4
    s, r = np.arange(3, dtype=np.int32), np.zeros(3, dtype=np.int32)
    allgather(dev(s), dev(r)).fn()
    np.testing.assert_array_equal(r, s)
    b = np.arange(2.0)
    bcast(dev(b), root=0).fn()
    assert fake.fake_nccl_last_root() == 0
    halo_out, halo_in = np.array([7.0, 8.0]), np.zeros(2)
    sendrecv(dev(halo_out), dev(halo_in), dest=0, source=0).fn()
    np.testing.assert_array_equal(halo_in, [7.0, 8.0])
    assert count(fake, "ncclGroupStart") == count(fake, "ncclGroupEnd") == 1
    edge_in = np.full(2, 5.0)
    sendrecv(dev(halo_out), dev(edge_in), dest=MPI.PROC_NULL, source=MPI.PROC_NULL).fn()
    np.testing.assert_array_equal(edge_in, 5.0)      # no neighbour: nothing sent or received


def test_an_nccl_error_names_the_call_and_the_node(fake):
    x = np.zeros(2)
    g = eagle.Graph()
    node = allreduce(dev(x), dev(x))
    g.add_node(node, name="tally")
    _check.check_same_graph(g)
    fake.fake_nccl_fail_next(b"ncclAllReduce", 5)
    with pytest.raises(_nccl.NcclError, match=r"ncclAllReduce in node 'tally': NCCL error 5: invalid usage"):
        node.fn()
    node.fn()   # the next capture works


def test_bad_cuda_buffers_are_refused(fake):
    x = np.zeros(4)
    with pytest.raises(ValueError, match="NCCL's ops are sum, prod, max, min"):
        allreduce(dev(x), dev(np.zeros(4)), op="land")
    with pytest.raises(TypeError, match="NCCL cannot carry complex128"):
        allreduce(dev(np.zeros(2, complex)), dev(np.zeros(2, complex)))
    with pytest.raises(ValueError, match="one dtype and one size"):
        allreduce(dev(x), dev(np.zeros(3)))
    with pytest.raises(ValueError, match="C-contiguous"):
        allreduce(dev(np.zeros(8)[::2]), dev(np.zeros(4)))
    with pytest.raises(ValueError, match="read-only"):
        allreduce(dev(x), HostCudaArray(np.zeros(4), readonly=True))
    with pytest.raises(ValueError, match="overlap"):
        allreduce(dev(x[:3]), dev(x[1:]))
    with pytest.raises(ValueError, match="comm size"):
        allgather(dev(x), dev(np.zeros(3)))
    with pytest.raises(ValueError, match="root must be a rank"):
        bcast(dev(x), root=1)


def test_no_nccl_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE_NCCL_LIBRARY", str(tmp_path / "libnccl.so.2"))
    saved = dict(_nccl._lib)
    _nccl._lib.clear()
    try:
        with pytest.raises(ImportError, match="need NCCL .*nvidia-nccl-cu12"):
            allreduce(dev(np.zeros(2)), dev(np.zeros(2)))
    finally:
        _nccl._lib.clear()
        _nccl._lib.update(saved)


END_TO_END = """
import os, sys
import numpy as np
import eagle
from eagle.graph import allreduce, opaque

class HostCudaArray:
    def __init__(self, host):
        self.host = host
    @property
    def __cuda_array_interface__(self):
        h = self.host
        return {"shape": h.shape, "typestr": h.dtype.str, "data": (h.ctypes.data, False), "version": 3,
                "strides": None}

x, y = np.zeros(4), np.zeros(4)
calls = []
def step():
    calls.append(1)
    x[:] = 3.0
g = eagle.Graph()
g.add_node(opaque(step, writes={"x": HostCudaArray(x)}), name="step")
g.add_node(allreduce(HostCudaArray(x), HostCudaArray(y)), name="tally")
g.build()
g.launch(3)
assert g.backend == "cuda", g.backend
assert calls == [1], calls          # opaque nodes, the NCCL one too, run once: at capture
assert (y == 3.0).all(), y
assert "{tally ×1 nccl}" in str(g)
print("END TO END OK")
"""


def test_an_nccl_node_is_captured_by_the_cuda_backend(fake_path, tmp_path):
    """Through eagle's cuda backend bound to the CUDA runtime stand-in of tests/cuda_standin
    (another test double), in a process of its own: the backend binds one runtime per process."""
    standin = HERE.parent / "cuda_standin" / "fake_cudart.c"
    if not standin.exists():
        pytest.skip(f"no CUDA runtime stand-in at {standin}")
    cudart = tmp_path / "libfake_cudart.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(standin), "-o", str(cudart)], check=True)
    env = dict(os.environ, EAGLE_CUDA_RUNTIME=str(cudart), EAGLE_NCCL_LIBRARY=fake_path,
               PYTHONPATH=os.pathsep.join([str(HERE.parents[1])] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    import sys
    proc = subprocess.run([sys.executable, "-c", END_TO_END], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "END TO END OK" in proc.stdout
