"""Collectives on CUDA arrays: NCCL calls captured in eagle's CUDA graph.

``allreduce``, ``allgather``, ``bcast`` and ``sendrecv`` given CUDA arrays (CuPy,
or anything with ``__cuda_array_interface__``) make an ``NcclNode``: an opaque
node whose function calls NCCL on the stream it is captured on. The cuda
backend runs an opaque node once, while it captures the graph on eagle's
stream (``eagle.cuda.backend.capture_stream()``, also CuPy's current stream
then); NCCL (2.9 and newer) records the collective into the graph, and every
replay repeats it without Python. No CuPy is needed: the warm-up's scratch
memory then comes from eagle's own binding of the CUDA driver.

NCCL is ``libnccl.so.2``, opened at run time: ``EAGLE_NCCL_LIBRARY`` if set,
else the ``nvidia-nccl-cu12``/``-cu13`` wheel's, else the system's. At
``build()``, before the capture, eagle creates one NCCL communicator per MPI
communicator (rank 0's ``ncclGetUniqueId`` broadcast over MPI,
``ncclCommInitRank`` on every rank, each on its current device: the ranks of
one node must each have made a different GPU current, else ``ValueError`` on
every rank) and runs a warm-up collective on scratch
memory, as NCCL asks before a capture. The communicators live until the
process ends: at exit eagle first closes its graphs that captured collectives
(NCCL 2.14+ ``ncclCommDestroy`` waits for every graph that captured the
communicator to be destroyed), then calls ``ncclCommDestroy``. A graph used after
that raises.
"""
from __future__ import annotations

import atexit
import ctypes
import glob
import os
import sys

import numpy as np

from eagle._errors import CudaError
from eagle.cuda.capture import OpaqueCapture, register
from eagle.record.node import OpaqueNode
from eagle.mpi import _runtime
from eagle.mpi._order import ORDER_NAME

#: NCCL's ncclDataType_t by NumPy type code
DTYPES = {"b": 0, "B": 1, "i": 2, "I": 3, "l": 4, "q": 4, "L": 5, "Q": 5, "e": 6, "f": 7, "d": 8}
#: NCCL's ncclRedOp_t by eagle's op name (NCCL has no logical or bitwise ops)
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}
UNIQUE_ID_BYTES = 128


class NcclError(RuntimeError):
    """An NCCL call made by eagle failed (``status`` is NCCL's ncclResult_t)."""

    def __init__(self, status, text, detail):
        self.status, self.text, self.detail = status, text, detail
        super().__init__(f"{detail}: NCCL error {status}: {text}")


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


def _candidates():
    env = os.environ.get("EAGLE_NCCL_LIBRARY")
    if env:
        return [env]
    found = []
    for root in [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]:
        found += sorted(glob.glob(os.path.join(root, "nvidia", "nccl", "lib", "libnccl.so.2*")))
    return found + ["libnccl.so.2"]


_lib = {}


def library():
    """The NCCL library (ctypes), loaded once; ImportError says where eagle looked."""
    if "lib" in _lib:
        return _lib["lib"]
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        c_int, vp, sz = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        for name, args in {
            "ncclGetVersion": [ctypes.POINTER(c_int)],
            "ncclGetUniqueId": [ctypes.POINTER(_UniqueId)],
            "ncclCommInitRank": [ctypes.POINTER(vp), c_int, _UniqueId, c_int],
            "ncclCommDestroy": [vp],
            "ncclAllReduce": [vp, vp, sz, c_int, c_int, vp, vp],
            "ncclAllGather": [vp, vp, sz, c_int, vp, vp],
            "ncclBroadcast": [vp, vp, sz, c_int, c_int, vp, vp],
            "ncclSend": [vp, sz, c_int, c_int, vp, vp],
            "ncclRecv": [vp, sz, c_int, c_int, vp, vp],
            "ncclGroupStart": [],
            "ncclGroupEnd": [],
        }.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, c_int
        lib.ncclGetErrorString.argtypes, lib.ncclGetErrorString.restype = [c_int], ctypes.c_char_p
        _lib["lib"], _lib["path"] = lib, path
        return lib
    raise ImportError("eagle's collectives on CUDA arrays need NCCL (libnccl.so.2): pip install "
                      "nvidia-nccl-cu12 (or -cu13), or set EAGLE_NCCL_LIBRARY; tried " + "; ".join(tried))


def check(status, detail):
    if status != 0:
        text = library().ncclGetErrorString(status)
        raise NcclError(status, text.decode() if text else "unknown", detail)


def version() -> int:
    v = ctypes.c_int()
    check(library().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    return v.value


_comms = {}   # MPI communicator handle -> (NCCL communicator, the MPI communicator)


def communicator(comm):
    """The NCCL communicator over the ranks of an MPI communicator (made once, collectively)."""
    key = _runtime.handle(comm)
    got = _comms.get(key)
    if got is not None:
        return got[0]
    lib = library()
    _check_devices(comm)
    uid = _UniqueId()
    buf = np.zeros(UNIQUE_ID_BYTES, dtype=np.uint8)
    if comm.Get_rank() == 0:
        check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        buf[:] = np.frombuffer(bytes(uid), dtype=np.uint8)
    comm.Bcast(buf, root=0)
    ctypes.memmove(ctypes.byref(uid), buf.ctypes.data, UNIQUE_ID_BYTES)
    handle = ctypes.c_void_p()
    check(lib.ncclCommInitRank(ctypes.byref(handle), comm.Get_size(), uid, comm.Get_rank()),
          f"ncclCommInitRank (rank {comm.Get_rank()} of {comm.Get_size()})")
    _comms[key] = (handle, comm)
    return handle


def _check_devices(comm):
    """NCCL puts each rank on the device current when its communicator is made: the
    ranks of one node must each have their own, or NCCL refuses ("Duplicate GPU
    detected"). Raises on every rank (they all see the same devices) naming them."""
    try:
        from eagle.cuda._driver import current_device
        device = current_device()
    except (ImportError, CudaError):   # no cuda backend or no driver: nothing to check here
        return
    MPI = _runtime.mpi()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        devices = node.allgather(device)
    finally:
        node.Free()
    shared = sorted({d for d in devices if devices.count(d) > 1})
    if shared:
        d = shared[0]
        local = [r for r, x in enumerate(devices) if x == d]
        raise ValueError(f"NCCL needs one GPU per rank: local ranks {', '.join(map(str, local))} "
                         f"on this node all use GPU {d}. Pick the device by local rank before making "
                         "any CUDA array, e.g. local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank(); "
                         "cupy.cuda.Device(local % cupy.cuda.runtime.getDeviceCount()).use()")


@atexit.register
def _destroy_all():
    """At exit: close eagle's live graphs that captured collectives, then destroy the
    communicators. NCCL 2.14+ ``ncclCommDestroy`` waits until every CUDA graph that
    captured the communicator is destroyed, so destroying first would never return.
    If such a graph cannot be closed (a sticky CUDA error), the communicators are left
    to the end of the process rather than waited on."""
    lib = _lib.get("lib")
    backend = sys.modules.get("eagle.cuda.backend")
    if backend is not None and _comms:
        if backend.close_all(lambda b: b.recording.has_collectives):
            _comms.clear()
            return
    for handle, _ in _comms.values():
        if lib is not None:
            lib.ncclCommDestroy(handle)
    _comms.clear()


def _interface(a, what):
    try:
        ai = a.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"{what} must be a CUDA array (CuPy, or __cuda_array_interface__), "
                        f"got {type(a).__name__}") from None
    dt = np.dtype(ai["typestr"])
    shape = tuple(ai["shape"])
    strides = ai.get("strides")
    if strides is not None:
        expected, step = [], dt.itemsize
        for d in reversed(shape):
            expected.insert(0, step)
            step *= d
        if tuple(strides) != tuple(expected) and int(np.prod(shape)) > 1:
            raise ValueError(f"{what} must be C-contiguous: NCCL reads and writes it as one block")
    if dt.char not in DTYPES or not dt.isnative:
        raise TypeError(f"{what}: NCCL cannot carry {dt}; use int8/uint8/int32/uint32/int64/uint64/"
                        "float16/float32/float64")
    return ai["data"][0], int(np.prod(shape)) if shape else 1, dt


def _stream_ptr():
    """The stream the node is being captured on (eagle's, ``eagle.cuda.backend.capture_stream()``),
    else CuPy's current stream, else 0 (the legacy stream)."""
    backend = sys.modules.get("eagle.cuda.backend")
    stream = backend.capture_stream() if backend is not None else None
    if stream is not None:
        return stream.ptr
    cp = sys.modules.get("cupy")
    if cp is not None:
        return cp.cuda.get_current_stream().ptr
    return 0


_order_token = []


class _HostToken:
    """Without CuPy: one host byte presented as a CUDA array. eagle only compares its
    address with other arrays' to stage the nodes; nothing reads or writes it."""

    def __init__(self):
        self.byte = np.zeros(1, dtype=np.uint8)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (1,), "typestr": "|u1", "data": (self.byte.ctypes.data, False), "version": 3,
                "strides": None}


def _token():
    """A one-byte CUDA array every NCCL node writes, so they run in recording order."""
    if not _order_token:
        cp = sys.modules.get("cupy")
        _order_token.append(cp.zeros(1, dtype=cp.uint8) if cp is not None else _HostToken())
    return _order_token[0]


class NcclNode(OpaqueNode):
    """An NCCL collective, captured once into the CUDA graph and replayed with it."""

    dot_shape = "hexagon"    # g.to_dot(): a collective, though it runs as an opaque node

    def __init__(self, what, reads, writes, comm, call, *, op=None, root=None, tag=None):
        super().__init__(self._capture, reads, {**writes, ORDER_NAME: _token()})
        self.collective = what
        self.comm = comm
        self.comm_size, self.rank = comm.Get_size(), comm.Get_rank()
        self.op, self.root, self.tag = op, root, tag
        self.box = ("{", f" ×{self.comm_size} nccl}}")
        self._call = call
        self.nccl_comm = None
        self.warmed_up = False
        self.graph_name = what

    @property
    def ranks(self):
        """The MPI communicator whose ranks replay this node's graph together when the
        collective spans several ranks (``launch_until_done`` stops on all at once), or None."""
        return self.comm if self.comm_size > 1 else None

    def default_name(self) -> str:
        return self.collective

    def signature(self) -> str:
        parts = [f"{self.collective} (nccl)", f"comm size {self.comm_size}"]
        for k in ("op", "root", "tag"):
            v = getattr(self, k)
            if v is not None:
                parts.append(f"{k}={v}")
        return " ".join(parts)

    def sample_arrays(self):
        return []

    def prepare(self, name):
        """At build, before the capture: the communicator and a warm-up (collective on every rank)."""
        self.graph_name = name
        self.nccl_comm = communicator(self.comm)
        if not self.warmed_up:
            self._call(self.nccl_comm, _stream_ptr(), warm_up=True)
            self.warmed_up = True

    def _capture(self):
        if self.nccl_comm is None:
            self.prepare(self.graph_name)
        self._call(self.nccl_comm, _stream_ptr(), warm_up=False)

    def __repr__(self):
        return f"{self.signature()}"


class NcclCapture(OpaqueCapture):
    """An NCCL node is captured as an opaque node (its call, on the capturing stream),
    and hands the backend its communicator when it spans several ranks."""

    def capture(self, node, ctx):
        if node.ranks is not None:
            ctx.add_communicator(node.ranks)
        super().capture(node, ctx)


register(NcclNode, NcclCapture)


class _Scratch:
    """Scratch device memory for a warm-up: CuPy's if the program uses CuPy, else a buffer of
    eagle's own binding of the CUDA driver (the cuda backend needs no CuPy). ``ptr`` is None
    when no driver can be bound: the warm-up is then a call of count 0 on the node's own
    buffers, which touches nothing (and ``build()`` then stops at the driver anyway)."""

    def __init__(self, dt, n):
        self.ptr, self._owner = None, None
        nbytes = max(n, 1) * dt.itemsize
        cp = sys.modules.get("cupy")
        if cp is not None:
            self._owner = cp.zeros(max(n, 1), dtype=dt)
            self.ptr = self._owner.data.ptr
            return
        try:
            from eagle.cuda._memory import DeviceBuffer
            from eagle.cuda.backend import ensure_driver
            ensure_driver()
            self._owner = DeviceBuffer(nbytes)
            self._owner.write(np.zeros(nbytes, dtype=np.uint8))
        except (ImportError, CudaError):   # no cuda backend built, or no driver / GPU
            self._owner = None
            return
        self.ptr = self._owner.ptr

    def done(self, stream):
        """Wait for the warm-up on ``stream``, then free the scratch."""
        cp = sys.modules.get("cupy")
        if cp is not None:
            if stream:
                from eagle.cuda._stream import BorrowedStream
                from eagle.cuda.interop import cupy_stream
                cupy_stream(cp, BorrowedStream(stream)).synchronize()
            else:
                cp.cuda.Device().synchronize()
        elif self._owner is not None:
            from eagle.cuda._stream import BorrowedStream
            BorrowedStream(stream).synchronize()
            self._owner.close()
        self._owner = None


def allreduce(send, recv, op, comm, names=("send", "recv", "buf")):
    if op not in OPS:
        raise ValueError(f"allreduce() on CUDA arrays: NCCL's ops are {', '.join(OPS)}, got {op!r}")
    sp, sn, sdt = _interface(send, "allreduce(): send")
    rp, rn, rdt = _interface(recv, "allreduce(): recv")
    if sdt != rdt or sn != rn:
        raise ValueError(f"allreduce(): send ({sdt}, {sn} elements) and recv ({rdt}, {rn} elements) "
                         "must have one dtype and one size")
    in_place = sp == rp
    if not in_place and sp < rp + rn * rdt.itemsize and rp < sp + sn * sdt.itemsize:
        raise ValueError("allreduce(): send and recv overlap (give the same array for in place)")
    lib = library()

    def call(nccl_comm, stream, warm_up):
        if warm_up:
            a = _Scratch(sdt, 1)
            p = a.ptr if a.ptr is not None else rp
            check(lib.ncclAllReduce(p, p, 1 if a.ptr is not None else 0, DTYPES[sdt.char], OPS[op],
                                    nccl_comm, stream), "ncclAllReduce (warm-up)")
            a.done(stream)
            return
        check(lib.ncclAllReduce(sp, rp, sn, DTYPES[sdt.char], OPS[op], nccl_comm, stream),
              f"ncclAllReduce in node {node.graph_name!r}")

    reads, writes = ({}, {names[2]: recv}) if in_place else ({names[0]: send}, {names[1]: recv})
    node = NcclNode("allreduce", reads, writes, comm, call, op=op)
    return node


def allgather(send, recv, comm, names=("send", "recv")):
    sp, sn, sdt = _interface(send, "allgather(): send")
    rp, rn, rdt = _interface(recv, "allgather(): recv")
    size = comm.Get_size()
    if sdt != rdt or rn != sn * size:
        raise ValueError(f"allgather(): recv must hold comm size ({size}) x send ({sn}) elements of "
                         f"{sdt}; it holds {rn} of {rdt}")
    lib = library()
    rank = comm.Get_rank()

    def call(nccl_comm, stream, warm_up):
        if warm_up:
            a = _Scratch(sdt, size)
            p, q = (a.ptr, a.ptr + rank * sdt.itemsize) if a.ptr is not None else (rp, sp)
            check(lib.ncclAllGather(q, p, 1 if a.ptr is not None else 0, DTYPES[sdt.char], nccl_comm,
                                    stream), "ncclAllGather (warm-up)")
            a.done(stream)
            return
        check(lib.ncclAllGather(sp, rp, sn, DTYPES[sdt.char], nccl_comm, stream),
              f"ncclAllGather in node {node.graph_name!r}")

    node = NcclNode("allgather", {names[0]: send}, {names[1]: recv}, comm, call)
    return node


def bcast(buf, root, comm, name="buf"):
    bp, bn, bdt = _interface(buf, "bcast(): buf")
    lib = library()

    def call(nccl_comm, stream, warm_up):
        if warm_up:
            a = _Scratch(bdt, 1)
            p = a.ptr if a.ptr is not None else bp
            check(lib.ncclBroadcast(p, p, 1 if a.ptr is not None else 0, DTYPES[bdt.char], root,
                                    nccl_comm, stream), "ncclBroadcast (warm-up)")
            a.done(stream)
            return
        check(lib.ncclBroadcast(bp, bp, bn, DTYPES[bdt.char], root, nccl_comm, stream),
              f"ncclBroadcast in node {node.graph_name!r}")

    node = NcclNode("bcast", {}, {name: buf}, comm, call, root=root)
    return node


def sendrecv(send, recv, dest, source, tag, comm, names=("send", "recv")):
    MPI = _runtime.mpi()
    sp, sn, sdt = _interface(send, "sendrecv(): send")
    rp, rn, rdt = _interface(recv, "sendrecv(): recv")
    if sdt != rdt:
        raise ValueError(f"sendrecv(): send ({sdt}) and recv ({rdt}) must have one dtype")
    lib = library()

    def call(nccl_comm, stream, warm_up):
        if warm_up:
            return   # point-to-point connections are made at the first capture's group end
        what = f"ncclSend/ncclRecv in node {node.graph_name!r}"
        check(lib.ncclGroupStart(), what)
        if dest != MPI.PROC_NULL:
            check(lib.ncclSend(sp, sn, DTYPES[sdt.char], dest, nccl_comm, stream), what)
        if source != MPI.PROC_NULL:
            check(lib.ncclRecv(rp, rn, DTYPES[rdt.char], source, nccl_comm, stream), what)
        check(lib.ncclGroupEnd(), what)

    node = NcclNode("sendrecv", {names[0]: send}, {names[1]: recv}, comm, call, tag=tag)
    return node
