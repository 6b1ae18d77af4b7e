"""At build(): every rank must have recorded the same graph.

MPI needs every rank to call the same collectives in the same order; a rank
whose graph differs would hang the others in a collective. ``build()`` hashes
each node (kind, name, collective, and the name, shape, dtype and access of
each array) and compares the hash across the ranks of every communicator the
graph's collectives use (axis 0 of an array only where MPI needs equal
sizes: ranks may own different numbers of samples). On a mismatch every rank raises ``GraphMismatchError``
naming the first node that differs and what it is on each rank.

The comparison is itself a collective: a rank that never reaches it (its graph
has no collective at all on that communicator) would leave the others waiting.
They wait at most ``EAGLE_MPI_BUILD_TIMEOUT`` seconds (default 300), then abort
the job, saying so.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time

import numpy as np

from eagle.mpi import _runtime
from eagle.mpi._order import ORDER_NAME


class GraphMismatchError(ValueError):
    """The ranks recorded different graphs (raised by ``build()`` on every rank)."""


def _meta(a):
    """(dtype string, shape) of a NumPy or CUDA array."""
    if isinstance(a, np.ndarray):
        return a.dtype.str, tuple(a.shape)
    ai = a.__cuda_array_interface__
    return np.dtype(ai["typestr"]).str, tuple(ai["shape"])


def _shape(shape, exact):
    if exact or not shape:
        return str(shape)
    return "(*" + "".join(f", {d}" for d in shape[1:]) + ")"


def describe(node, name) -> str:
    """One line that two ranks agree on when they recorded the same node.

    Ranks may own different numbers of samples, so axis 0 of an array is left
    out, except in the buffers of allreduce, allgather and bcast, whose sizes
    MPI needs equal on every rank (a sendrecv's may differ: edges of a grid).
    """
    what = node.collective
    head = f"{name!r}: {node.signature() if what else node.kind}"
    exact = what in ("allreduce", "allgather", "bcast")
    arrays = ", ".join(f"{'w' if w else 'r'} {k} {_meta(a)[0]}{_shape(_meta(a)[1], exact)}"
                       for k, a, w in node.arrays() if k != ORDER_NAME or not what)
    return f"{head} [{arrays}]"


def _wait(request, comm, what):
    timeout = float(os.environ.get("EAGLE_MPI_BUILD_TIMEOUT", "300"))
    deadline = time.monotonic() + timeout
    pause = 1e-5
    while not request.Test():
        if time.monotonic() > deadline:
            print(f"eagle: rank {comm.Get_rank()} of {comm.Get_size()}: {what} waited {timeout:g} s for the "
                  "other ranks' graph check; a rank built a graph without collectives on this communicator "
                  "(every rank must record the same graph); aborting the MPI job", file=sys.stderr, flush=True)
            time.sleep(0.5)   # the process manager forwards the message before it ends the job
            _runtime.mpi().COMM_WORLD.Abort(1)
            os._exit(1)   # MPICH's MPI_Abort returns while the process manager ends the job
        time.sleep(pause)
        pause = min(pause * 2, 1e-2)


def check_same_graph(recording) -> None:
    """Raise GraphMismatchError on every rank if the ranks' graphs differ; name collectives.
    The build hook of scale-out (``eagle.record.hooks``): a graph without collectives passes."""
    if not recording.has_collectives:
        return
    nodes, names = recording.nodes, recording.names
    comms = {}
    null = _runtime.handle(_runtime.mpi().COMM_NULL)
    for node, name in zip(nodes, names):
        if node.collective and _runtime.handle(node.comm) == null:
            raise ValueError(f"the communicator of node {name!r} was freed since the node was made")
    for node in nodes:
        if node.collective:
            comms.setdefault(_runtime.handle(node.comm), node.comm)
    _compare(nodes, names, [c for c in comms.values() if c.Get_size() > 1])
    # then, in recording order on every rank, what must exist before a capture (NCCL communicators;
    # an MPI collective takes its name for its error messages)
    for node, name in zip(nodes, names):
        if node.collective:
            node.prepare(name)


def _compare(nodes, names, comms):
    if not comms:
        return
    lines = [describe(n, name) for n, name in zip(nodes, names)]
    digests = [hashlib.blake2b(line.encode(), digest_size=16).digest() for line in lines]
    total = hashlib.blake2b(b"".join(digests), digest_size=16).digest()
    mine = np.frombuffer(total + np.int64(len(lines)).tobytes(), dtype=np.uint8).copy()
    for comm in comms:
        size = comm.Get_size()
        every = np.empty((size, mine.size), dtype=np.uint8)
        _wait(comm.Iallgather(mine, every), comm, "build()")
        if (every == every[0]).all():
            continue
        # they differ: all ranks are here, so a blocking exchange of the details is safe
        all_digests = comm.allgather(digests)
        n_max = max(len(d) for d in all_digests)
        first = next(k for k in range(n_max + 1)
                     if len({d[k] if k < len(d) else None for d in all_digests}) > 1)
        here = lines[first] if first < len(lines) else f"(no node: the graph ends after {len(lines)} nodes)"
        seen = comm.allgather(here)
        variants = {}
        for r, text in enumerate(seen):
            variants.setdefault(text, []).append(r)
        detail = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {','.join(map(str, rs))}: {text}"
                           for text, rs in variants.items())
        raise GraphMismatchError(
            f"the ranks recorded different graphs: node #{first} differs ({detail}). Every rank must record "
            "the same nodes (kinds, names, dtypes, shapes past axis 0, collectives and their buffers' sizes) "
            "in the same order, or the collectives "
            "would wait for each other forever")
