"""Past one machine: collective nodes over MPI, so a graph replays on many ranks.

Every rank (an MPI process, started by ``mpiexec``/Slurm) records the same
graph; collectives combine the ranks' arrays on every replay::

    from mpi4py import MPI
    from eagle.graph import allreduce

    g.add_node(allreduce(tally, total, op="sum"), name="combine")

The collective nodes are ``eagle.graph``'s: ``allreduce``, ``allgather``, ``bcast``
and ``sendrecv`` take NumPy arrays and an mpi4py communicator (default ``MPI.COMM_WORLD``). The replay calls MPI without
the GIL and without Python, from the launching thread, in recording order.
``build()`` checks that every rank recorded the same graph
(``GraphMismatchError`` otherwise, also for a ``sendrecv`` whose ranks do not
pair up; ``RankBuildError`` where another rank's build failed); a launch that
raises on one rank aborts the job (``set_failure_mode``). Every launch compares
its count over the ranks (replay 0's first collective; a bounded wait,
``EAGLE_MPI_LAUNCH_TIMEOUT``), and ``launch_until_done`` stops every rank at one
replay (one allreduce per replay). Importing this module does not import mpi4py; making
the first collective does (and so initializes MPI).

Given CUDA arrays, the same constructors make NCCL nodes, captured into the
cuda backend's graph (``eagle/mpi/_nccl.py``).

Two threads must not launch graphs with collectives on one communicator at
once (MPI needs one order of collectives per communicator): give each thread
its own, ``comm.Dup()``.
"""
from eagle.mpi._check import check_same_graph
from eagle.mpi._errors import GraphMismatchError, LaunchMismatchError, RankBuildError, RanksDisagreeError
from eagle.mpi._failure import get_failure_mode, set_failure_mode, stop_on_failure
from eagle.mpi._nccl import NcclError
from eagle.mpi._nodes import CollectiveNode
from eagle._public import public_dir
from eagle.record import hooks

# build() checks that every rank recorded the same graph; a failed launch or build stops the job
hooks.register(before_build=check_same_graph, on_failure=stop_on_failure)

__all__ = ["CollectiveNode", "GraphMismatchError", "NcclError", "RankBuildError", "LaunchMismatchError",
           "RanksDisagreeError", "set_failure_mode", "get_failure_mode"]

_CONSTRUCTORS = ("allreduce", "allgather", "bcast", "sendrecv")


def __getattr__(name):
    # the collective constructors' one public home is eagle.graph
    if name in _CONSTRUCTORS:
        from eagle._public import probed_by_import, warn_renamed
        from eagle.mpi import _nodes

        if not probed_by_import():
            warn_renamed(f"eagle.mpi.{name}", f"eagle.graph.{name}")
        return getattr(_nodes, name)
    raise AttributeError(f"module 'eagle.mpi' has no attribute {name!r}")


def __dir__():
    return public_dir(globals())
