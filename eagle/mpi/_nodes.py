"""Collective nodes: allreduce, allgather, bcast and sendrecv over an mpi4py communicator.

A collective is a native node like any other: the arrays it reads and writes
are declared from its buffers (send read, recv written; in place, one buffer
written), so its dependencies come from memory. Every collective also writes
one shared token, so the collectives of a graph run in recording order, one
after the other, on every rank (MPI needs every rank to call them in the
same order). Its kernel calls MPI without the GIL from the launching thread
(eagle/mpi/_collectives.pyx), on every replay whatever the logical size.
"""
from __future__ import annotations

import operator
import os

import numpy as np

from eagle._public import keywords_after
from eagle.record.arrays import named_array
from eagle.record.hooks import announced
from eagle.cpu.lowering import cpu_lowering
from eagle.cpu.spec import NativeSpec
from eagle.record.memory import data_pointer, same_view
from eagle.record.node import Node, RunsAs
from eagle.mpi import _runtime
from eagle.mpi._order import ORDER_NAME, ORDER_TOKEN


def _int(x, what):
    if isinstance(x, bool):
        raise TypeError(f"{what} must be an integer, got a bool")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(x).__name__}") from None


def _on_gpu(*arrays):
    """Whether a collective's buffers are CUDA arrays (then it is an NCCL node)."""
    return any(not isinstance(a, np.ndarray) and hasattr(a, "__cuda_array_interface__") for a in arrays)


def _same_memory(a, b):
    """Whether two C-contiguous arrays are the same memory (then the call is in place)."""
    return a is b or (data_pointer(a) == data_pointer(b)
                      and a.nbytes == b.nbytes and a.dtype == b.dtype)


def _apart(send, recv, what):
    if np.shares_memory(send, recv):
        raise ValueError(f"{what}: send and recv overlap; MPI forbids aliased buffers "
                         "(give the same array as send and recv for an in-place allreduce)")


class CollectiveNode(Node):
    """A collective call over an mpi4py communicator, run whole on every replay."""

    kind = "collective"
    runs_as = RunsAs.NATIVE  # the cpu backend runs it as a native (team) kernel
    dot_shape = "hexagon"
    sized = False
    split = False

    def __init__(self, what, reads, writes, comm, *, op=None, root=None, dest=None, source=None, tag=None,
                 count, recv_count=0, in_place=False, dtype_array):
        from eagle.mpi._collectives import CollectiveCall

        arrays_in_order = list(reads.values()) + list(writes.values())
        super().__init__(reads, {**writes, ORDER_NAME: ORDER_TOKEN})
        MPI = _runtime.mpi()
        self.collective = what
        self.comm = comm
        self.comm_size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.op, self.root, self.dest, self.source, self.tag = op, root, dest, source, tag
        self.box = ("{", f" ×{self.comm_size}}}")
        op_handle = _runtime.handle(getattr(MPI, _runtime.OPS[op][0])) if op else 0
        self.call = CollectiveCall(
            what, what, count, recv_count, in_place, _runtime.handle(_runtime.datatype(dtype_array, what)),
            op_handle, _runtime.handle(comm), root or 0,
            MPI.PROC_NULL if dest is None else dest, MPI.PROC_NULL if source is None else source,
            tag or 0, tag or 0, self.rank, self.comm_size, _runtime.handle(MPI.INT64_T), _runtime.handle(MPI.MAX))
        self.kernel = self.call.kernel
        #: a sendrecv's (dest, source, elements sent, elements it can receive): the build
        #: check pairs every rank's dest with that rank's source; None for the others
        self.peers = (dest, source, count, recv_count) if what == "sendrecv" else None
        # over several ranks, the ranks replay this graph together: launches are compared
        # and launch_until_done stops on all at once (csrc/cpu/plan.h, eagle_group)
        self.group = self.call if self.comm_size > 1 else None
        self.arrays_in_order = arrays_in_order

    def sample_arrays(self):
        # a collective's buffers do not bound the logical size
        return []

    def prepare(self, name):
        """At build: the node's name, for MPI error messages from its kernel, and how long a
        launch waits at its start for the other ranks (``EAGLE_MPI_LAUNCH_TIMEOUT``, default 300 s)."""
        self.call.set_name(name)
        self.call.set_launch_timeout(float(os.environ.get("EAGLE_MPI_LAUNCH_TIMEOUT", "300")))

    def default_name(self) -> str:
        return self.collective

    def signature(self) -> str:
        """What every rank must agree on (ranks differ in dest and source, not in these)."""
        parts = [self.collective, f"comm size {self.comm_size}"]
        if self.op is not None:
            parts.append(f"op={self.op}")
        if self.root is not None:
            parts.append(f"root={self.root}")
        if self.tag is not None:
            parts.append(f"tag={self.tag}")
        return " ".join(parts)

    def __repr__(self):
        return (f"{self.collective}(reads={list(self.reads)}, writes={[k for k in self.writes if k != ORDER_NAME]}, "
                f"{self.signature()})")


@cpu_lowering(CollectiveNode)
def _lower_collective(node, index, ctx):
    # over several ranks the group rides on the spec: the ranks replay the graph together
    return NativeSpec(index, node.kernel, tuple(node.arrays_in_order), False, group=node.group)


def _buffers(what, send, recv):
    """``(send name, send), (recv name, recv)``: each an array or ``{name: array}``."""
    send, recv = (named_array(send, f"{what}(): send", "send"),
                  named_array(recv, f"{what}(): recv", "recv", write=True))
    if send[0] == recv[0] and not same_view(send[1], recv[1]):
        raise ValueError(f"{what}(): send and recv are both named {send[0]!r} but are different arrays; give "
                         "one another name")
    return send, recv


@announced
@keywords_after(2, 'allreduce(send, recv, op="sum")')
def allreduce(send, recv, *, op="sum", comm=None) -> CollectiveNode:
    """A node that combines ``send`` of every rank with ``op`` into ``recv`` on every rank.

    ``MPI_Allreduce`` (``ncclAllReduce`` on CUDA arrays), on every replay. ``send is recv``
    reduces in place (``MPI_IN_PLACE``; the buffer takes ``recv``'s name, else ``buf``).

    Parameters
    ----------
    send : array or {name: array}
        C-contiguous, read (default name ``send``).
    recv : array or {name: array}
        C-contiguous, written: one dtype and size with ``send`` (default name ``recv``).
    op : str, default "sum"
        One of ``sum``, ``prod``, ``max``, ``min``, ``land``, ``lor``, ``lxor``, ``band``,
        ``bor``, ``bxor``.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator (default ``MPI.COMM_WORLD``).
    Returns
    -------
    Node
        The collective node (an MPI node for NumPy arrays, NCCL for CuPy arrays).

    Raises
    ------
    TypeError
        An argument that is no array, an ``op`` MPI does not apply to the dtype.
    ValueError
        An unknown ``op``, buffers not C-contiguous, of different dtypes or sizes, or
        overlapping without being one array.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import allreduce
    >>> tally, total = np.ones(3), np.zeros(3)
    >>> g = eagle.Graph()
    >>> g.add_node(allreduce({"tally": tally}, {"total": total}, op="sum"), name="combine")
    >>> g.build().launch(1)   # one process: the sum is its own tally
    >>> total
    array([1., 1., 1.])
    """
    if not isinstance(op, str) or op not in _runtime.OPS:
        raise ValueError(f"allreduce(): op must be one of {', '.join(_runtime.OPS)}, got {op!r}")
    # in place, the one buffer takes the name given to recv (else send's, else "buf")
    buf_name = next((next(iter(a)) for a in (recv, send) if isinstance(a, dict) and len(a) == 1), "buf")
    (send_name, send), (recv_name, recv) = _buffers("allreduce", send, recv)
    comm = _runtime.default_comm(comm)
    if _on_gpu(send, recv):
        from eagle.mpi import _nccl
        return _nccl.allreduce(send, recv, op, comm, (send_name, recv_name, buf_name))
    _runtime.buffer(send, "allreduce(): send")
    _runtime.buffer(recv, "allreduce(): recv")
    in_place = _same_memory(send, recv)
    if send.dtype != recv.dtype or send.size != recv.size:
        raise ValueError(f"allreduce(): send ({send.dtype}, {send.size} elements) and recv ({recv.dtype}, "
                         f"{recv.size} elements) must have one dtype and one size")
    if not in_place:
        _apart(send, recv, "allreduce()")
    _runtime.datatype(send, "allreduce()")
    kinds = _runtime.OPS[op][1]
    if send.dtype.kind not in kinds:
        raise TypeError(f"allreduce(): op {op!r} does not apply to {send.dtype} in MPI")
    if in_place:
        return CollectiveNode("allreduce", {}, {buf_name: recv}, comm, op=op, count=recv.size, in_place=True,
                              dtype_array=recv)
    return CollectiveNode("allreduce", {send_name: send}, {recv_name: recv}, comm, op=op, count=send.size,
                          dtype_array=send)


@announced
@keywords_after(2, "allgather(send, recv, comm=comm)")
def allgather(send, recv, *, comm=None) -> CollectiveNode:
    """A node that gathers ``send`` of every rank, in rank order, into ``recv`` on every rank.

    ``MPI_Allgather``: ``recv`` holds ``comm.size`` times ``send``'s elements, rank
    r's at ``recv.reshape(comm.size, -1)[r]``.

    Parameters
    ----------
    send : array or {name: array}
        C-contiguous, read (default name ``send``).
    recv : array or {name: array}
        C-contiguous, written, of ``send``'s dtype (default name ``recv``).
    comm : mpi4py.MPI.Intracomm, optional
        The communicator (default ``MPI.COMM_WORLD``).
    Returns
    -------
    Node
        The collective node (an MPI node for NumPy arrays, NCCL for CuPy arrays).

    Raises
    ------
    TypeError
        An argument that is no array.
    ValueError
        Different dtypes, ``recv`` not ``comm.size`` times ``send``, buffers that overlap.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import allgather
    >>> mine, everyone = np.arange(2.0), np.zeros(2)
    >>> g = eagle.Graph()
    >>> g.add_node(allgather(mine, everyone), name="gather")
    >>> g.build().launch(1)
    >>> everyone
    array([0., 1.])
    """
    (send_name, send), (recv_name, recv) = _buffers("allgather", send, recv)
    comm = _runtime.default_comm(comm)
    if _on_gpu(send, recv):
        from eagle.mpi import _nccl
        return _nccl.allgather(send, recv, comm, (send_name, recv_name))
    _runtime.buffer(send, "allgather(): send")
    _runtime.buffer(recv, "allgather(): recv")
    size = comm.Get_size()
    if send.dtype != recv.dtype:
        raise ValueError(f"allgather(): send ({send.dtype}) and recv ({recv.dtype}) must have one dtype")
    if recv.size != send.size * size:
        raise ValueError(f"allgather(): recv must hold comm size ({size}) x send ({send.size}) = "
                         f"{send.size * size} elements, it holds {recv.size}")
    _apart(send, recv, "allgather()")
    _runtime.datatype(send, "allgather()")
    return CollectiveNode("allgather", {send_name: send}, {recv_name: recv}, comm, count=send.size,
                          recv_count=send.size, dtype_array=send)


@announced
@keywords_after(1, "bcast(buf, root=0)")
def bcast(buf, *, root=0, comm=None) -> CollectiveNode:
    """A node that copies ``buf`` of rank ``root`` into ``buf`` on every rank (``MPI_Bcast``).

    Parameters
    ----------
    buf : array or {name: array}
        C-contiguous, written on every rank but ``root`` (default name ``buf``).
    root : int, default 0
        The rank whose buffer is copied.
    comm : mpi4py.MPI.Intracomm, optional
        The communicator (default ``MPI.COMM_WORLD``).
    Returns
    -------
    Node
        The collective node (an MPI node for NumPy arrays, NCCL for CuPy arrays).

    Raises
    ------
    TypeError
        An argument that is no array, a ``root`` that is not an integer.
    ValueError
        ``root`` not a rank of the communicator, ``buf`` not C-contiguous or read-only.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import bcast
    >>> params = np.arange(3.0)
    >>> g = eagle.Graph()
    >>> g.add_node(bcast({"params": params}, root=0), name="share")
    >>> g.build().launch(1)
    >>> params
    array([0., 1., 2.])
    """
    buf_name, buf = named_array(buf, "bcast(): buf", "buf", write=True)
    comm = _runtime.default_comm(comm)
    root = _int(root, "bcast(): root")
    size = comm.Get_size()
    if not 0 <= root < size:
        raise ValueError(f"bcast(): root must be a rank of the communicator, 0..{size - 1}, got {root}")
    if _on_gpu(buf):
        from eagle.mpi import _nccl
        return _nccl.bcast(buf, root, comm, buf_name)
    _runtime.buffer(buf, "bcast(): buf")
    _runtime.datatype(buf, "bcast()")
    return CollectiveNode("bcast", {}, {buf_name: buf}, comm, root=root, count=buf.size, dtype_array=buf)


@announced
@keywords_after(2, "sendrecv(send, recv, dest=right, source=left, tag=0)")
def sendrecv(send, recv, *, dest, source, tag=0, comm=None) -> CollectiveNode:
    """A node that sends ``send`` to rank ``dest`` and receives ``recv`` from rank ``source``.

    ``MPI_Sendrecv``: a halo or boundary exchange. ``MPI.PROC_NULL`` as ``dest`` or
    ``source`` skips that side (the edge of a non-periodic grid); on a cartesian
    communicator ``source, dest = comm.Shift(direction, 1)`` names the neighbours.

    Parameters
    ----------
    send : array or {name: array}
        C-contiguous, read (default name ``send``).
    recv : array or {name: array}
        C-contiguous, written: at least the elements the source sends (default name
        ``recv``).
    dest, source : int
        Ranks of the communicator, or ``MPI.PROC_NULL``.
    tag : int, default 0
        The message tag, in [0, the communicator's ``TAG_UB``].
    comm : mpi4py.MPI.Intracomm, optional
        The communicator (default ``MPI.COMM_WORLD``).
    Returns
    -------
    Node
        The collective node (an MPI node for NumPy arrays, NCCL for CuPy arrays).

    Raises
    ------
    TypeError
        An argument that is no array, ranks or tag that are not integers.
    ValueError
        Ranks or tag out of range, different dtypes, buffers that overlap.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from mpi4py import MPI
    >>> from eagle.graph import sendrecv
    >>> edge, halo = np.ones(2), np.zeros(2)
    >>> g = eagle.Graph()
    >>> g.add_node(sendrecv(edge, {"halo": halo}, dest=MPI.PROC_NULL, source=MPI.PROC_NULL), name="halo")
    >>> g.build().launch(1)   # no neighbours: nothing moves
    >>> halo
    array([0., 0.])
    """
    (send_name, send), (recv_name, recv) = _buffers("sendrecv", send, recv)
    comm = _runtime.default_comm(comm)
    MPI = _runtime.mpi()
    size = comm.Get_size()
    dest = _int(dest, "sendrecv(): dest")
    source = _int(source, "sendrecv(): source")
    for what, r in (("dest", dest), ("source", source)):
        if r != MPI.PROC_NULL and not 0 <= r < size:
            raise ValueError(f"sendrecv(): {what} must be a rank 0..{size - 1} or MPI.PROC_NULL, got {r}")
    tag = _int(tag, "sendrecv(): tag")
    tag_ub = comm.Get_attr(MPI.TAG_UB)
    if not 0 <= tag <= (tag_ub if tag_ub is not None else 32767):
        raise ValueError(f"sendrecv(): tag must be in 0..{tag_ub}, got {tag}")
    if _on_gpu(send, recv):
        from eagle.mpi import _nccl
        return _nccl.sendrecv(send, recv, dest, source, tag, comm, (send_name, recv_name))
    _runtime.buffer(send, "sendrecv(): send")
    _runtime.buffer(recv, "sendrecv(): recv")
    if send.dtype != recv.dtype:
        raise ValueError(f"sendrecv(): send ({send.dtype}) and recv ({recv.dtype}) must have one dtype")
    _apart(send, recv, "sendrecv()")
    _runtime.datatype(send, "sendrecv()")
    return CollectiveNode("sendrecv", {send_name: send}, {recv_name: recv}, comm, dest=dest, source=source, tag=tag,
                          count=send.size, recv_count=recv.size, dtype_array=send)
