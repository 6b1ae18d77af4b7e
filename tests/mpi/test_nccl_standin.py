"""Collective nodes on CUDA arrays (NCCL), against a stand-in NCCL.

``tests/doubles/fake_nccl.c`` is a TEST DOUBLE of libnccl.so.2 for a one-rank
communicator, compiled by these tests. The unit tests give it host memory
(``HostCudaArray``: NumPy memory presented as a CUDA array) and drive what the
cuda backend does with an NCCL node: ``build()``'s hook (the communicator from an
id broadcast over MPI, the warm-up), then the node's function once, as at capture.
The end-to-end test builds a graph on eagle's cuda backend bound to the CUDA
driver stand-in (tests/doubles/fake_libcuda.c, another test double, built as
tests/cuda builds it) with the ``DeviceArray`` of tests/doubles/fake_cuda.py; the stand-in NCCL then
enqueues its copies on the stream it is given, so the collectives are captured on
eagle's stream and replayed by ``launch``. No GPU is used.
"""
import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import eagle
from eagle.graph import allgather, allreduce, bcast, opaque, sendrecv

MPI = pytest.importorskip("mpi4py.MPI")
from eagle.mpi import _check, _nccl  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DOUBLES = ROOT / "tests" / "doubles"


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
    from fake_cuda_build import DOUBLES_CFLAGS   # the sanitizer job's flags, if any (tests/sanitize.sh)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *DOUBLES_CFLAGS, str(DOUBLES / "fake_nccl.c"), "-o", str(out),
                    "-ldl"], check=True)
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
    dot = g.to_dot()   # a collective is a hexagon in DOT, though it runs as an opaque node
    assert 'label="peak", shape=hexagon' in dot and 'label="share", shape=hexagon' in dot
    assert 'label="step", shape=ellipse' in dot


def test_build_makes_one_communicator_from_a_broadcast_id_and_warms_up(fake):
    a, b, c = np.ones(3), np.zeros(3), np.zeros(3)
    g = eagle.Graph()
    g.add_node(allreduce(dev(a), dev(b)), name="one")
    g.add_node(allreduce(dev(b), dev(c), op="sum"), name="two")
    assert count(fake, "ncclCommInitRank") == 0      # nothing happens while recording
    _check.check_same_graph(g.recording())                       # what build() runs before the backend captures
    assert count(fake, "ncclGetUniqueId") == 1 and count(fake, "ncclCommInitRank") == 1
    assert count(fake, "ncclAllReduce") == 2         # one warm-up per node, before any capture
    np.testing.assert_array_equal(b, 0)              # the warm-up touches no buffer
    _check.check_same_graph(g.recording())                       # a rebuild makes nothing again
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
    _check.check_same_graph(g.recording())
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


@pytest.fixture(scope="module")
def fake_libcuda_path(tmp_path_factory):
    """The driver stand-in, built as the CUDA tests build it (tests/doubles/fake_cuda_build.py)."""
    from fake_cuda_build import build_fake_libcuda
    return build_fake_libcuda(tmp_path_factory.mktemp("fake_libcuda"))


# Runs in a process of its own (the shim binds one driver per process): eagle's cuda backend
# bound to the driver stand-in (tests/doubles/fake_libcuda.c), the arrays tests/doubles/fake_cuda.py's
# DeviceArray (the stand-in's device memory), NCCL the stand-in tests/doubles/fake_nccl.c in its driver
# mode: each collective is a copy enqueued on the stream NCCL is given.
END_TO_END = r"""
import ctypes, os
import numpy as np
import eagle
from eagle.cuda import backend
from eagle.graph import SIZE, allgather, allreduce, bcast, cuda_kernel, sendrecv
from eagle.mpi import _nccl
from fake_cuda import DeviceArray, kernel

backend.ensure_driver()
fake = ctypes.CDLL(os.environ["EAGLE_LIBCUDA"])
fake.fake_cuda_kernel.argtypes, fake.fake_cuda_kernel.restype = [ctypes.c_char_p], ctypes.c_void_p
fake.fake_cuda_counter.argtypes, fake.fake_cuda_counter.restype = [ctypes.c_char_p], ctypes.c_long
fake.fake_cuda_live.argtypes, fake.fake_cuda_live.restype = [ctypes.c_char_p], ctypes.c_long
nccl = ctypes.CDLL(os.environ["EAGLE_NCCL_LIBRARY"])
nccl.fake_nccl_counter.argtypes, nccl.fake_nccl_counter.restype = [ctypes.c_char_p], ctypes.c_long
nccl.fake_nccl_last_stream.restype = ctypes.c_void_p
nccl.fake_nccl_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]
calls = lambda name: nccl.fake_nccl_counter(name.encode())

x, y, z, h = (DeviceArray(np.zeros(4)) for _ in range(4))
g = eagle.Graph()
g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (x, SIZE), writes={"x": x}, block=4), name="step")
g.add_node(allreduce(x, y), name="tally")
g.add_node(allgather(y, z), name="gather")
g.add_node(bcast(z, root=0), name="share")
g.add_node(sendrecv(z, h, dest=0, source=0), name="halo")
g.add_node(allreduce(h, h, op="max"), name="peak")
assert calls("ncclCommInitRank") == 0 and calls("ncclAllReduce") == 0   # nothing while recording
allocs, live = fake.fake_cuda_counter(b"cuMemAlloc"), fake.fake_cuda_live(b"devmem")
g.build()
# without CuPy the warm-ups' scratch is device memory from eagle's driver binding, freed after
assert fake.fake_cuda_counter(b"cuMemAlloc") - allocs == 4, fake.fake_cuda_counter(b"cuMemAlloc") - allocs
assert fake.fake_cuda_live(b"devmem") == live
assert g.backend == "cuda", g.backend
assert calls("ncclGetUniqueId") == 1 and calls("ncclCommInitRank") == 1
# a warm-up per collective before the capture (sendrecv's connections are made at its group end),
# then the capture call of each
assert calls("ncclAllReduce") == 4 and calls("ncclAllGather") == 2 and calls("ncclBroadcast") == 2
assert calls("ncclGroupEnd") == 1
assert nccl.fake_nccl_last_stream() == g._backend.stream.ptr   # NCCL was given eagle's capture stream
assert nccl.fake_nccl_last_cuda_error() == 0
# the kernel node and the three copies one rank's collectives make (in place ones copy nothing)
assert g._backend.graph_nodes == 4, g._backend.graph_nodes
assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1
for a in (x, y, z, h):
    assert (a.host == 0).all(), a.host                 # captured, not run
picture = str(g)
assert "backend: cuda" in picture and "{tally ×1 nccl}" in picture and "{halo ×1 nccl}" in picture, picture

g.launch(3)
for a in (x, y, z, h):
    np.testing.assert_array_equal(a.host, 3.0)         # every replay reduced the step's new values
assert calls("ncclAllReduce") == 4 and calls("ncclGroupEnd") == 1   # no NCCL call on replay
g.set_logical_size(2)                                 # the kernel node is retuned, the collectives replay
g.launch(1)
for a in (x, y, z, h):
    np.testing.assert_array_equal(a.host, [4.0, 4.0, 3.0, 3.0])

# an NCCL error while the graph is captured names the node, ends the capture; a rebuild works
nccl.fake_nccl_fail_next(b"ncclAllGather", 5)
try:
    g.build()
except _nccl.NcclError as e:
    notes = " | ".join(getattr(e, "__notes__", []))
    assert "ncclAllGather in node 'gather': NCCL error 5" in str(e), e
    assert "raised by node 'gather'" in notes and "the capture was ended" in notes, notes
else:
    raise AssertionError("the failed NCCL call did not fail build()")
g.build()
g.launch(1)
np.testing.assert_array_equal(h.host, [5.0, 5.0, 3.0, 3.0])
print("END TO END OK")
"""


def test_an_nccl_node_is_captured_by_the_cuda_backend_and_replays(fake_path, fake_libcuda_path):
    """The collectives captured on eagle's stream during build(), replayed by every launch."""
    env = dict(os.environ, EAGLE_LIBCUDA=fake_libcuda_path, FAKE_NCCL_LIBCUDA=fake_libcuda_path,
               EAGLE_NCCL_LIBRARY=fake_path,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(DOUBLES)]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, "-c", END_TO_END], capture_output=True, text=True, env=env,
                          timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "END TO END OK" in proc.stdout


# A failure on one rank of a cuda graph with NCCL nodes must end the job: at build (opaque nodes
# run while the graph is captured, and the other ranks would wait in their first replay) and at
# launch. The one-rank stand-in NCCL cannot make a communicator of two ranks, so the node's
# comm_size is set to 2 after it is made: eagle.mpi then takes the job for a multi-rank one.
FAILURE = r"""
import ctypes, os, sys
import numpy as np
import eagle
from eagle.cuda import backend
from eagle.graph import SIZE, allreduce, cuda_kernel, opaque
from fake_cuda import DeviceArray, kernel

backend.ensure_driver()
fake = ctypes.CDLL(os.environ["EAGLE_LIBCUDA"])
fake.fake_cuda_kernel.argtypes, fake.fake_cuda_kernel.restype = [ctypes.c_char_p], ctypes.c_void_p
fake.fake_cuda_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
where = sys.argv[1]
x, y = DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4))

def step():
    if where == "build":
        raise ZeroDivisionError("tally of an empty bin")

g = eagle.Graph()
g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (x, SIZE), writes={"x": x}, block=4), name="move")
g.add_node(opaque(step, writes={"x": x}), name="score")
node = allreduce(x, y)
g.add_node(node, name="tally")
node.comm_size = 2
if where == "launch":
    g.build()
    g.launch(1)
    fake.fake_cuda_fail_next(b"cuGraphLaunch", 1, 999)
g.build() if where == "build" else g.launch(2)
print("NOT ABORTED")
"""


@pytest.mark.parametrize("where", ["build", "launch"])
def test_a_failure_on_one_rank_of_an_nccl_graph_aborts_the_job(fake_path, fake_libcuda_path, where):
    env = dict(os.environ, EAGLE_LIBCUDA=fake_libcuda_path, FAKE_NCCL_LIBCUDA=fake_libcuda_path,
               EAGLE_NCCL_LIBRARY=fake_path,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(DOUBLES)]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, "-c", FAILURE, where], capture_output=True, text=True, env=env,
                          timeout=120, cwd=str(ROOT))
    assert proc.returncode != 0 and "NOT ABORTED" not in proc.stdout, proc.stdout + proc.stderr
    assert "aborts the MPI job" in proc.stderr, proc.stderr
    if where == "build":
        assert "eagle: rank 0 of 1: ZeroDivisionError: tally of an empty bin -- raised by node 'score'" \
               in proc.stderr, proc.stderr
        assert "while build() captured the CUDA graph" in proc.stderr
    else:
        # eagle.cuda._driver.DriverError, an eagle.CudaError
        assert "eagle: rank 0 of 1: DriverError: cuGraphLaunch (replay 0 of 2)" in proc.stderr, proc.stderr


# Exit with graphs that captured NCCL collectives still alive (NCCL 2.14+: ncclCommDestroy waits
# until every graph that captured the communicator is destroyed; the stand-in NCCL models that
# with a CUDA user object per capture, as NCCL does). The first atexit handler registered runs
# last: it reports whether the communicators were destroyed.
EXIT = r"""
import atexit, ctypes, gc, os, sys
nccl = ctypes.CDLL(os.environ["EAGLE_NCCL_LIBRARY"])
nccl.fake_nccl_graph_refs.restype = ctypes.c_long
atexit.register(lambda: print("AT EXIT live comms", nccl.fake_nccl_live_comms(), "graph refs",
                              nccl.fake_nccl_graph_refs(), flush=True))
import numpy as np
import eagle
from eagle.cuda import backend
from eagle.graph import SIZE, allreduce, cuda_kernel, opaque, sendrecv
from fake_cuda import DeviceArray, kernel

backend.ensure_driver()
fake = ctypes.CDLL(os.environ["EAGLE_LIBCUDA"])
fake.fake_cuda_kernel.argtypes, fake.fake_cuda_kernel.restype = [ctypes.c_char_p], ctypes.c_void_p
how = sys.argv[1]
if how == "cycle":
    gc.disable()
x, y, h = (DeviceArray(np.zeros(4)) for _ in range(3))
graphs = []
for k in range(2):
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "add_one"), 2), (x, SIZE), writes={"x": x}, block=4), name="step")
    g.add_node(allreduce(x, y), name="tally")
    g.add_node(sendrecv(y, h, dest=0, source=0), name="halo")
    if how == "cycle":   # the graph reachable from its own node: freed by the cyclic collector only
        g.add_node(opaque(lambda g=g: None, writes={"h": h}), name="look")
    g.build()
    g.launch(2)
    graphs.append(g)
if how == "until_done":
    graphs[0].launch(1)
print("graph refs", nccl.fake_nccl_graph_refs(), flush=True)
if how == "cycle":
    del g, graphs
print("LEAVING", flush=True)
"""


@pytest.mark.parametrize("how", ["kept", "cycle"])
def test_a_program_with_nccl_graphs_exits(fake_path, fake_libcuda_path, how):
    """eagle closes its live graphs that captured collectives before it destroys the
    communicators at exit; destroying them first waits forever (a subprocess timeout here)."""
    env = dict(os.environ, EAGLE_LIBCUDA=fake_libcuda_path, FAKE_NCCL_LIBCUDA=fake_libcuda_path,
               EAGLE_NCCL_LIBRARY=fake_path,
               PYTHONPATH=os.pathsep.join([str(ROOT), str(DOUBLES)]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    try:
        proc = subprocess.run([sys.executable, "-c", EXIT, how], capture_output=True, text=True, env=env,
                              timeout=30, cwd=str(ROOT))
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the program hung at exit (30 s): {out}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the stand-in saw the captures (two graphs, a collective and a send/recv each)
    assert "graph refs 4" in proc.stdout, proc.stdout
    assert "LEAVING" in proc.stdout
    assert "AT EXIT live comms 0 graph refs 0" in proc.stdout, proc.stdout + proc.stderr


# launch_until_done on ranks whose samples finish at different replays, with an NCCL collective
# in the graph: the stand-in NCCL in its ranks mode (FAKE_NCCL_RANKS_DIR) makes every captured
# collective meet the other ranks at each replay, so a rank that stops replaying first leaves
# the others waiting in their next collective forever, as on NCCL.
DIVERGE = r"""
import ctypes, os, sys
import numpy as np
from mpi4py import MPI
import eagle
from eagle.cuda import backend
from eagle.cuda.finished import set_kernel_provider
from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
from eagle.graph import allreduce, compact, uniform
from fake_cuda import DeviceArray, kernel
from fake_cuda_build import EmulatedKernels, bind_fake_libcuda

backend.ensure_driver()
lib = bind_fake_libcuda(ctypes.CDLL(os.environ["EAGLE_LIBCUDA"]))
assert lib.fake_cuda_load_module(os.environ["EMULATED_KERNELS"].encode()) == 0
set_kernel_provider(lambda: EmulatedKernels(lib))
rank = MPI.COMM_WORLD.Get_rank()
lib.fake_cuda_use_device.argtypes = [ctypes.c_int]
assert lib.fake_cuda_use_device(rank) == 0   # one GPU per rank (NCCL needs it)
n = 8
life = np.full(n, 2 if rank == 0 else 6, dtype=np.int64)     # rank 0's samples finish first
da, dl, dx = DeviceArray(np.ones(n, dtype=np.bool_)), DeviceArray(life), DeviceArray(np.zeros(n))
di, dc = DeviceArray(np.arange(n, dtype=np.int64)), DeviceArray(np.zeros(1, dtype=np.int64))
s, r = DeviceArray(np.ones(2)), DeviceArray(np.zeros(2))
g = eagle.Graph()
g.add_node(cuda_kernel((kernel(lib, "life_step"), 4), (da, dl, dx, SIZE_PTR),
                       writes={"alive": da, "life": dl, "x": dx}, block=4), name="step")
g.add_node(compact(da, {"life": dl, "x": dx}, ids=di, count=dc, min_dead_fraction=0.0), name="compact")
g.add_node(allreduce(s, r), name="tally")
if sys.argv[1] == "random":   # the device replay counter of random nodes
    g.add_node(uniform(DeviceArray(np.zeros(n)), key=7), name="draw")
g.build()
g.replays = 1000
print("PATH", rank, g._backend.until_done_path(), flush=True)
done = g.launch_until_done(20)
print(f"OK rank {rank} replays {done} graph launches {lib.fake_cuda_launch_count()} size {g.logical_size} "
      f"g.replays {g.replays}", flush=True)
"""


@pytest.mark.parametrize("random", ["plain", "random"])
def test_launch_until_done_with_collectives_stops_on_every_rank_together(fake_path, fake_libcuda_path,
                                                                          tmp_path, mpirun, random):
    from fake_cuda_build import build_emulated_module
    import signal
    launcher = mpirun.launcher
    so = build_emulated_module(tmp_path)
    rdv = tmp_path / "rendezvous"
    rdv.mkdir()
    env = dict(os.environ, EAGLE_LIBCUDA=fake_libcuda_path, FAKE_NCCL_LIBCUDA=fake_libcuda_path,
               EAGLE_NCCL_LIBRARY=fake_path, FAKE_NCCL_RANKS_DIR=str(rdv), EMULATED_KERNELS=so,
               FAKE_CUDA_DEVICES="2", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(DOUBLES)]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.Popen([launcher, "-n", "2", sys.executable, "-c", DIVERGE, random], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # mpiexec and both ranks
        out, err = proc.communicate()
        pytest.fail(f"the ranks hung (90 s): one stopped replaying, the other waits in its collective\n{out}")
    assert proc.returncode == 0, out + err
    import re   # the ranks' lines may come interleaved through mpiexec
    got = sorted(re.findall(r"OK rank (\d) replays (\d+) graph launches (\d+) size (\d+) g.replays (\d+)", out))
    # both replayed until the slower rank's samples finished: 6 replays each (rank 0's last 4
    # at logical size 0: its collective pairs with rank 1's), returned and counted once in
    # g.replays as on the CPU (a random node's device counter advanced on each replay already)
    assert got == [("0", "6", "6", "0", "1006"), ("1", "6", "6", "0", "1006")], out + err


# Two ranks on one node with two GPUs (the driver stand-in's FAKE_CUDA_DEVICES=2): NCCL takes
# each rank's current device, so both on device 0 is refused with a clear message on every rank;
# each on its local rank's device builds and replays.
DEVICES = r"""
import ctypes, os, sys
import numpy as np
from mpi4py import MPI
import eagle
from eagle.cuda import backend
from eagle.graph import allreduce
from fake_cuda import DeviceArray
from fake_cuda_build import bind_fake_libcuda

backend.ensure_driver()
lib = bind_fake_libcuda(ctypes.CDLL(os.environ["EAGLE_LIBCUDA"]))
lib.fake_cuda_use_device.argtypes = [ctypes.c_int]
local = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
if sys.argv[1] == "local":
    assert lib.fake_cuda_use_device(local) == 0
s, r = DeviceArray(np.ones(2)), DeviceArray(np.zeros(2))
g = eagle.Graph()
g.add_node(allreduce(s, r), name="tally")
try:
    g.build()
except ValueError as e:
    print(f"REFUSED rank {local}: {e}", flush=True)
else:
    g.launch(2)
    print(f"OK rank {local} on device {lib.fake_cuda_current_device()}", flush=True)
"""


@pytest.mark.parametrize("how", ["same", "local"])
def test_ranks_of_one_node_each_need_their_own_gpu(fake_path, fake_libcuda_path, tmp_path, how, mpirun):
    import signal
    launcher = mpirun.launcher
    rdv = tmp_path / "rendezvous"
    rdv.mkdir()
    env = dict(os.environ, EAGLE_LIBCUDA=fake_libcuda_path, FAKE_NCCL_LIBCUDA=fake_libcuda_path,
               EAGLE_NCCL_LIBRARY=fake_path, FAKE_NCCL_RANKS_DIR=str(rdv), FAKE_CUDA_DEVICES="2",
               OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(DOUBLES)]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.Popen([launcher, "-n", "2", sys.executable, "-c", DEVICES, how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the ranks hung (90 s)\n{out}")
    assert proc.returncode == 0, out + err
    if how == "same":
        import re
        assert sorted(re.findall(r"REFUSED rank (\d)", out)) == ["0", "1"], out + err
        assert out.count("local ranks 0, 1 on this node all use GPU 0") == 2, out
    else:
        import re
        assert sorted(re.findall(r"OK rank (\d) on device (\d)", out)) == [("0", "0"), ("1", "1")], out + err
