"""A node that raises on one rank must not leave the others waiting in the next collective.

When a launch of a graph with collectives fails on a rank of a communicator
of more than one rank (or its ``build()`` on the cuda backend, where opaque
nodes run while the graph is captured and the other ranks would wait in their
first replay), eagle prints the exception with what names the rank,
the node, its stage and the replay, and aborts the MPI job
(``MPI.COMM_WORLD.Abort(1)``, then ``os._exit(1)`` should the abort return,
as MPICH's does while its process manager ends the job): the other ranks are blocked in MPI, where only
an abort reaches them. ``set_failure_mode("raise")`` turns this off, for code
that agrees on a stop itself (the exception then reaches the caller as on
one process).
"""
from __future__ import annotations

import os
import sys
import time
import traceback

from eagle.mpi import _runtime
from eagle.mpi._errors import RanksDisagreeError

_mode = ["abort"]
ABORT_DELAY_S = 0.5


def set_failure_mode(mode: str) -> None:
    """``"abort"`` (the default): a launch that raises on one rank aborts the MPI job after
    printing what failed where. ``"raise"``: the exception reaches the caller and the other
    ranks are yours to stop."""
    if mode not in ("abort", "raise"):
        raise ValueError(f"failure mode must be 'abort' or 'raise', got {mode!r}")
    _mode[0] = mode


def get_failure_mode() -> str:
    """The mode ``set_failure_mode`` set: ``"abort"`` (the default) or ``"raise"``."""
    return _mode[0]


def stop_on_failure(recording, exc) -> None:
    """The failure hook of scale-out (``eagle.record.hooks``): called when a launch failed (from
    the backend's ``note_failure``) or a build did (the cuda backend runs opaque nodes at capture),
    after eagle's note is attached."""
    if _mode[0] != "abort" or isinstance(exc, RanksDisagreeError):
        return   # yours to handle, or raised on every rank at once: none is left waiting
    sizes = [n.comm_size for n in recording.nodes if n.collective]
    if max(sizes, default=1) == 1:
        return
    MPI = _runtime.mpi()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    notes = getattr(exc, "__notes__", None) or []
    where = notes[-1] if notes else "eagle: launch() failed"
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # a broken __str__ must not stop the abort
        text = f"{type(exc).__name__}\n"
    try:
        message = f"{exc!s:.500}"
    except Exception:  # nor here: the other ranks would wait forever
        message = "<str() of the exception failed>"
    sys.stderr.write(
        f"{text}eagle: rank {rank} of {size}: {type(exc).__name__}: {message} -- {where.removeprefix('eagle: ')}\n"
        f"eagle: rank {rank} aborts the MPI job (MPI.COMM_WORLD.Abort(1)) so that the other ranks do not wait "
        "forever in the next collective; eagle.mpi.set_failure_mode('raise') hands the exception to you instead\n")
    sys.stderr.flush()
    try:
        sys.stdout.flush()
    except Exception:
        pass
    time.sleep(ABORT_DELAY_S)   # the process manager forwards the message before it ends the job
    world.Abort(1)
    # MPICH's MPI_Abort returns while its process manager ends the job: stop here
    os._exit(1)
