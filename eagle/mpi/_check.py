"""At build(): every rank must have recorded the same graph.

MPI needs every rank to call the same collectives in the same order; a rank
whose graph differs would hang the others in a collective. ``build()`` hashes
each node (kind, name, collective, and the name, shape, dtype and access of
each array) and compares the hash across the ranks of every communicator the
graph's collectives use (axis 0 of an array only where MPI needs equal
sizes: ranks may own different numbers of samples). On a mismatch every rank raises ``GraphMismatchError``
naming the first node that differs and what it is on each rank. Each
``sendrecv`` must pair up: every rank's dest receives from it (gathered over
the communicator, only for graphs with sendrecvs).

A ``build()`` that fails on one rank before the check (a bad ``teams=``, a
logical size over the capacity) still takes part in it, saying so: every
other rank's ``build()`` raises ``RankBuildError`` naming that rank and the
reason, within the check's time rather than after the timeout.

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

from eagle._errors import add_note
from eagle.mpi import _runtime
from eagle.mpi._errors import GraphMismatchError, RankBuildError
from eagle.mpi._nodes import CollectiveNode
from eagle.mpi._order import ORDER_NAME


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


def check_same_graph(recording, failure=None) -> None:
    """Raise GraphMismatchError on every rank if the ranks' graphs differ; name collectives.
    The build hook of scale-out (``eagle.record.hooks``): a graph without collectives passes.

    ``failure``: the exception this rank's ``build()`` met before the check (a bad
    ``teams=``, a logical size over the capacity). The check then tells the other ranks,
    whose ``build()`` raise ``RankBuildError`` naming this rank and the reason; here it
    returns and ``build()`` raises ``failure``."""
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
    _compare(nodes, names, [c for c in comms.values() if c.Get_size() > 1], failure)
    if failure is not None:
        return
    # then, in recording order on every rank, what must exist before a capture (NCCL communicators;
    # an MPI collective takes its name for its error messages)
    for node, name in zip(nodes, names):
        if node.collective:
            node.prepare(name)


def _reason(exc):
    world = _runtime.mpi().COMM_WORLD
    try:
        text = f"{exc!s:.300}"
    except Exception:  # a broken __str__ must not keep the others from hearing of it
        text = "<str() of the exception failed>"
    return f"rank {world.Get_rank()} of {world.Get_size()}: {type(exc).__name__}: {text}"


def _compare(nodes, names, comms, failure=None):
    if not comms:
        return
    lines = [describe(n, name) for n, name in zip(nodes, names)]
    digests = [hashlib.blake2b(line.encode(), digest_size=16).digest() for line in lines]
    total = hashlib.blake2b(b"".join(digests), digest_size=16).digest()
    # the digest, the node count, and whether this rank's build() failed before the check
    head = total + np.int64(len(lines)).tobytes()
    failed_elsewhere = None   # what a rank that failed said, as heard over the communicators so far
    for comm in comms:
        failed = failure is not None or failed_elsewhere is not None
        mine = np.frombuffer(head + bytes([failed]), dtype=np.uint8).copy()
        size = comm.Get_size()
        every = np.empty((size, mine.size), dtype=np.uint8)
        _wait(comm.Iallgather(mine, every), comm, "build()")
        if every[:, -1].any():
            # a rank failed to build (every rank of this communicator is here: a blocking
            # exchange is safe); go on over the other communicators, passing it on, so that
            # their ranks are told too rather than left waiting in this check
            said = comm.allgather(_reason(failure) if failure is not None else failed_elsewhere)
            failed_elsewhere = failed_elsewhere or next(text for text in said if text is not None)
            continue
        if not (every == every[0]).all():
            _mismatch(comm, lines, digests)
        _pair_sendrecvs(comm, nodes, names)
    if failed_elsewhere is not None and failure is None:
        raise RankBuildError(
            f"build() failed on another rank ({failed_elsewhere}); this rank's build() raises too, "
            "so that no rank waits for it in a collective")
    if failure is not None:
        add_note(failure, "eagle: the other ranks were told: their build() raises eagle.mpi.RankBuildError")


def _mismatch(comm, lines, digests):
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


def _pair_sendrecvs(comm, nodes, names):
    """Every rank's dest must receive from that rank, and its source send to it, in each
    sendrecv on ``comm``, else a rank would wait in MPI_Sendrecv forever: raise on every rank,
    naming node and ranks. (A recv too small for what is sent is MPI's error, reported by the
    kernel.)"""
    key = _runtime.handle(comm)
    mine = [(name, node.peers) for node, name in zip(nodes, names)
            if isinstance(node, CollectiveNode) and node.peers is not None and _runtime.handle(node.comm) == key]
    if not mine:
        return   # the graphs matched: no rank has a sendrecv on this communicator
    # the graphs matched, so every rank is here with as many sendrecvs on it
    every = comm.allgather([p for _, p in mine])
    null = _runtime.mpi().PROC_NULL
    for k, (name, _) in enumerate(mine):
        for r, peers in enumerate(every):
            dest, source = peers[k][:2]
            if dest != null:
                theirs = every[dest][k]
                if theirs[1] != r:
                    got = "no rank (MPI.PROC_NULL)" if theirs[1] == null else f"rank {theirs[1]}"
                    raise GraphMismatchError(
                        f"sendrecv {name!r} does not pair up: rank {r} sends to rank {dest}, which receives "
                        f"from {got}; every rank's dest must name it as its source (and its source as "
                        "dest), or a rank would wait in MPI_Sendrecv forever")
            if source != null and every[source][k][0] != r:
                theirs = every[source][k]
                sent = "no rank (MPI.PROC_NULL)" if theirs[0] == null else f"rank {theirs[0]}"
                raise GraphMismatchError(
                    f"sendrecv {name!r} does not pair up: rank {r} receives from rank {source}, which sends "
                    f"to {sent}; every rank's source must name it as its dest, or a rank would wait in "
                    "MPI_Sendrecv forever")
