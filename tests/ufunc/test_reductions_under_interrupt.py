"""Ctrl-C in the middle of a launch of reductions and tallies (``np.add.reduce``,
``np.add.at``) on one thread and on teams of 2 and 3: the launch stops after a replay
that ran whole, ``g.replays`` counts exactly the replays whose tallies were applied,
the reduction's output is the last completed replay's, and the next launch goes on from
there with the same bits as an uninterrupted run. In a subprocess (tests/helpers/ctrl_c.py)."""
import json
import os

import ctrl_c
import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")

CHILD = r"""
import json, sys
import ctrl_c
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import native, ufunc

threads, teams = int(sys.argv[1]), sys.argv[2]
eagle.set_num_threads(threads)
n, cells = 1 << 14, 97
rng = np.random.default_rng(3)
idx = rng.integers(0, cells, n)
w = rng.random(n)
x, y = np.ones(n), np.zeros(n)
tally, hits, total = np.zeros(cells), np.zeros(cells, np.int64), np.zeros(())

def build(y, tally, hits, total):
    g = eagle.Graph()
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, updates={"y": y}), name="count")
    g.add_node(ufunc(np.add.at, {"tally": tally}, {"idx": idx}, {"w": w}), name="tally")
    g.add_node(ufunc(np.add.at, {"hits": hits}, {"idx": idx}, 1), name="hits")
    g.add_node(ufunc(np.add.reduce, {"y": y}, out={"total": total}), name="total")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    return g

g = build(y, tally, hits, total)
ctrl_c.launch_until_interrupted(g, lambda: y[0] >= 50)
k = g.replays
state = dict(k=k, y=float(y[0]), hits=int(hits.sum()), total=float(total))
g.launch(1)
# the same graph run k + 1 replays uninterrupted, in fresh arrays
y2, t2, h2, s2 = np.zeros(n), np.zeros(cells), np.zeros(cells, np.int64), np.zeros(())
build(y2, t2, h2, s2).launch(k + 1)
state.update(next=g.replays, same_tally=t2.tobytes() == tally.tobytes(),
             same_hits=bool((h2 == hits).all()), same_total=float(s2) == float(total),
             total_after=float(total), y_after=float(y[0]))
print(json.dumps(state))
"""


@pytest.mark.parametrize("threads, teams", [(1, "serial"), (2, "parallel"), (3, "parallel"),
                                            (2, "serial")])
def test_an_interrupted_launch_of_tallies_counts_the_replays_they_hold(threads, teams):
    res = ctrl_c.interrupt(["-c", CHILD, str(threads), teams], after_s=0.2)
    assert res.returncode == 0, res.err
    out = json.loads(res.lines[-1])
    k = out["k"]
    assert k > 0 and out["y"] == k, out               # every sample ran k replays
    assert out["hits"] == k * (1 << 14), out          # each tally holds k whole replays
    assert out["total"] == k * (1 << 14), out         # the reduction is the k-th replay's
    assert out["next"] == k + 1 and out["y_after"] == k + 1, out
    assert out["same_tally"] and out["same_hits"] and out["same_total"], out
