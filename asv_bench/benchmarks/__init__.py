"""eagle's asv benchmarks: the graphs they time and the helpers they share.

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

import numpy as np

import eagle
from eagle import kernels
from eagle.graph import native, opaque

#: minimal sizes everywhere (set by tests/test_benchmarks.py); see the module docstring
QUICK = os.environ.get("EAGLE_ASV_QUICK", "") not in ("", "0")

#: replays per timed launch(); asv's number divided by this is the time per replay
REPLAYS = 1000
#: calls per timed body for O(1) operations (set_logical_size, attribute assignment)
CALLS = 1000
#: samples of a "tiny" array
TINY = 4
#: samples of the large single-node graph (4 million doubles: 32 MB per array)
BIG = 4_000_000

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


# ---- the graphs ---------------------------------------------------------------

def seed_graph(size=TINY):
    """The seed page's graph: three opaque NumPy nodes, l and r side by side, then join.

    Returns (graph, (run_l, run_r, run_join), out)."""
    x, left, right, out = np.arange(float(size)), np.zeros(size), np.zeros(size), np.zeros(size)

    def run_l():
        left[:] = 2 * x

    def run_r():
        right[:] = x + 1

    def run_join():
        out[:] = left + right

    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return g, (run_l, run_r, run_join), out


def diamond_graph(size=TINY):
    """Three native nodes: a = 2x and b = 3x side by side, then out = a + b."""
    x, a, b, out = np.arange(float(size)), np.zeros(size), np.zeros(size), np.zeros(size)
    g = eagle.Graph()
    g.add_group([native(kernels.scale(2.0), reads={"x": x}, writes={"a": a}),
                 native(kernels.scale(3.0), reads={"x": x}, writes={"b": b})], names=["l", "r"])
    g.add_node(native(kernels.add(), reads={"a": a, "b": b}, writes={"out": out}), name="join")
    return g


def chain_nodes(n, size=TINY):
    """n native nodes, each reading what the one before wrote: n stages."""
    bufs = [np.arange(float(size))] + [np.zeros(size) for _ in range(n)]
    return [native(kernels.scale(1.0), reads={"x": bufs[i]}, writes={"y": bufs[i + 1]})
            for i in range(n)]


def record(nodes):
    """A graph with ``nodes`` recorded one by one."""
    g = eagle.Graph()
    for i, node in enumerate(nodes):
        g.add_node(node, name=f"n{i}")
    return g


def chain_graph(n, size=TINY):
    return record(chain_nodes(n, size))


def wide_graph(n=8, size=TINY):
    """One stage of n native nodes, each scaling the same x into its own array."""
    x = np.arange(float(size))
    g = eagle.Graph()
    g.add_group([native(kernels.scale(float(i + 1)), reads={"x": x}, writes={"y": np.zeros(size)})
                 for i in range(n)], names=[f"w{i}" for i in range(n)])
    return g


def big_graph(size):
    """One native node, y = 2x, over ``size`` doubles."""
    x, y = np.ones(size), np.zeros(size)
    g = eagle.Graph()
    g.add_node(native(kernels.scale(2.0), reads={"x": x}, writes={"y": y}), name="scale")
    return g


def make_graph(kind):
    """The replay benchmarks' graphs by name: seed, diamond, chain10, chain100, wide8."""
    if kind == "seed":
        return seed_graph()[0]
    if kind == "diamond":
        return diamond_graph()
    if kind.startswith("chain"):
        return chain_graph(int(kind[len("chain"):]))
    if kind.startswith("wide"):
        return wide_graph(int(kind[len("wide"):]))
    raise ValueError(f"unknown graph {kind!r}")
