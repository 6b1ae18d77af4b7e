"""Ctrl-C between two replays stops a launch after a replay that ran whole: g.replays
counts it on every team (one thread or a team), the note names it (counted from 0, as
serially and on the CUDA stand-in), and the next launch's random nodes draw the next
replay's numbers, not the interrupted launch's last ones again. In a subprocess
(tests/helpers/ctrl_c.py)."""
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
from eagle.graph import native, random_bits

threads, teams = int(sys.argv[1]), sys.argv[2]
eagle.set_num_threads(threads)
x, y = np.ones(1 << 13), np.zeros(1 << 13)
r = np.zeros((1 << 13, 4), np.uint32)
g = eagle.Graph()
g.add_node(native(ek.axpy(1.0), reads={"x": x}, updates={"y": y}), name="axpy")
g.add_node(random_bits(r, key=1), name="bits")
g.build(cpu=eagle.CpuOptions(teams=teams))
e = ctrl_c.launch_until_interrupted(g, lambda: y[0] >= 50)
replays, ran, same = g.replays, float(y[0]), bool((y == y[0]).all())
last = r.copy()
g.launch(1)
# the replay after the interrupted launch's last, drawn alone in a fresh graph
r2 = np.zeros_like(r)
h = eagle.Graph()
h.add_node(random_bits(r2, key=1), name="bits")
h.build()
h.launch(replays + 1)
print(json.dumps({"notes": e.__notes__, "replays": replays, "ran": ran, "same": same,
                  "redrawn": bool(np.array_equal(last, r)), "next": bool(np.array_equal(r2, r))}))
"""


@pytest.mark.parametrize("threads, teams", [(1, "serial"), (2, "parallel"), (3, "parallel")])
def test_an_interrupted_launch_counts_every_replay_that_ran(tmp_path, threads, teams):
    res = ctrl_c.interrupt(["-c", CHILD, str(threads), teams], after_s=0.2)
    assert res.returncode == 0, res.err
    out = json.loads(res.lines[-1])
    assert out["same"], out                         # every sample had as many replays
    assert out["replays"] == out["ran"] > 0, out    # each replay that ran is counted
    note = [n for n in out["notes"] if "interrupted" in n]
    assert note == [f"eagle: launch({10 ** 12}) interrupted in replay {out['replays'] - 1}"], out
    assert not out["redrawn"] and out["next"], out  # the next launch draws the next replay's numbers
