"""eagle's asv benchmarks: the helpers they share; the graphs they time are
``eagle.bench.cases`` (the same graphs ``python -m eagle.bench`` and the tour time,
the seed graph defined once there), re-exported here.

Layout follows numpy's ``benchmarks/``: one ``bench_<area>.py`` per area, classes
with ``params``/``param_names``, ``setup`` and ``time_*`` methods.

Tiny operations are repeated inside one ``time_*`` body so that the timer's
overhead does not swamp them: a replay benchmark calls ``g.launch(REPLAYS)``
once, so the time asv reports divided by ``REPLAYS`` (1000) is the time per
replay; ``set_logical_size`` and friends are called ``CALLS`` (1000) times.
The benchmark names say so (``time_launch_1000``, ``time_set_logical_size_x1000``).

Quick mode: ``tests/test_benchmarks.py`` sets ``QUICK = True`` (or the
environment sets ``EAGLE_ASV_QUICK=1``) before calling ``setup``; classes then
use minimal sizes (a few samples instead of millions), so every benchmark runs
once in well under a second. asv itself never sets it.

Nothing here launches a graph at import time: asv imports this package in a
server process and forks one child per benchmark, and libgomp is not
fork-safe (eagle runs serially in a child forked after a parallel region).
"""
import os

import eagle
# the graphs, defined once for the tour, python -m eagle.bench and this suite
from eagle.bench.cases import (BIG, TINY, big_graph, builtin_kernel_graph, chain_graph,  # noqa: F401
                               chain_nodes, diamond_graph, make_graph, numpy_horner, record,
                               seed_arrays, seed_functions, seed_graph, seed_opaque_graph,
                               seed_ufunc_calls, seed_ufunc_graph, ufunc_chain_graph, ufunc_pair_graph,
                               wide_graph)

#: minimal sizes everywhere (set by tests/test_benchmarks.py); see the module docstring
QUICK = os.environ.get("EAGLE_ASV_QUICK", "") not in ("", "0")

#: replays per timed launch(); asv's number divided by this is the time per replay
REPLAYS = 1000
#: calls per timed body for O(1) operations (set_logical_size, attribute assignment)
CALLS = 1000
#: the thread count "all" means: what eagle would use by default in this process
DEFAULT_THREADS = eagle.get_num_threads()
#: the thread parameter of every replay benchmark
THREADS = ["1", "all"]


def scaled(full, quick):
    """``full`` normally, ``quick`` in quick mode."""
    return quick if QUICK else full


def use_threads(label):
    """Set eagle's threads for the label ``"1"`` or ``"all"``; returns the previous count."""
    previous = eagle.get_num_threads()
    eagle.set_num_threads(1 if label == "1" else DEFAULT_THREADS)
    return previous
