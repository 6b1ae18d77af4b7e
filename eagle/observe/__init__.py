"""Watching launches: ``eagle.profile()`` (per-node counts and times, a Chrome trace) and
``launch(n, progress=True)`` (a progress bar). Both register with the graph's compiled
launch path (``eagle._core``) when imported, which ``import eagle`` does; with neither
in use a launch pays one test of a counter.

* ``eagle.observe.profiler`` — ``eagle.profile`` and ``Profile``;
* ``eagle.observe.progress`` — the bar.
"""
from eagle.observe import progress  # noqa: F401  (registers progress=)
from eagle.observe.profiler import Profile, profile

__all__ = ["Profile", "profile"]


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals())
