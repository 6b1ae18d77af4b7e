"""Errors that every rank of a communicator raises together, so that none is left waiting.

They are raised where the ranks have just compared what they are about to do
(the check at ``build()``, the one at every launch of a graph with
collectives): every rank learns the same thing at once and raises, so the
failure hook does not abort the job for them (``eagle.mpi._failure``).
"""


class RanksDisagreeError(ValueError):
    """Raised on every rank at once: the ranks compared what they were about to do and differ."""


class GraphMismatchError(RanksDisagreeError):
    """The ranks recorded different graphs (raised by ``build()`` on every rank)."""


class RankBuildError(RanksDisagreeError):
    """``build()`` failed on another rank (raised by ``build()`` on the ranks where it did not)."""


class LaunchMismatchError(RanksDisagreeError):
    """The ranks launched a graph with collectives with different counts, or some with
    ``launch`` and others with ``launch_until_done`` (raised on every rank, before any replay)."""
