"""A loop body on the team, attacked: Ctrl-C in the middle of a long loop of one replay
stops it at an iteration boundary on every team (every sample saw the same iterations,
the note names the loop and the iteration, ``g.replays`` does not count the unfinished
replay, the graph runs again), and a body node dealt to a worker thread that calls back
into its own graph gets RuntimeError there, on every iteration, without deadlocking the
team. In subprocesses (tests/helpers/ctrl_c.py) since whatever goes wrong here hangs."""
import json
import os
import re
import subprocess
import sys

import ctrl_c
import pytest

import eagle

pytestmark = [pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals"),
              pytest.mark.skipif(not eagle.have_openmp(), reason="eagle was built without OpenMP")]

LONG_LOOP = r"""
import json, sys
import ctrl_c
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import Graph, native, ufunc, while_loop

threads, teams = int(sys.argv[1]), sys.argv[2]
eagle.set_num_threads(threads)
n = 1 << 14
x, y = np.ones(n), np.zeros(n)
more = np.ones(1, bool)
body = Graph()
body.add_node(native(ek.axpy(1.0), reads={"x": x}, updates={"y": y}), "axpy")
body.add_node(ufunc(np.multiply, {"y": y}, 1.0, out={"y": y}), "keep")
g = Graph()
g.add_node(while_loop({"more": more}, body, max_iterations=10**15), "loop")
g.build(cpu=eagle.CpuOptions(teams=teams))
e = ctrl_c.launch_until_interrupted(g, lambda: y[0] >= 200, replays=1)   # the loop runs without the GIL
out = {"notes": e.__notes__, "replays": g.replays, "y0": float(y[0]),
       "same": bool((y == y[0]).all()), "iterations": g.iterations("loop")}
more[0] = False                       # the condition is checked first: no iteration
g.launch(2)
out.update(after=g.replays, y_after=float(y[0]), iterations_after=g.iterations("loop"))
print(json.dumps(out))
"""


@pytest.mark.parametrize("threads, teams", [(1, "serial"), (2, "parallel"), (3, "parallel")])
def test_ctrl_c_inside_a_long_loop_stops_at_an_iteration(threads, teams):
    res = ctrl_c.interrupt(["-c", LONG_LOOP, str(threads), teams], after_s=0.2)
    assert res.returncode == 0, res.err
    out = json.loads(res.lines[-1])
    assert out["same"], out                                 # no sample ran an extra iteration
    assert out["iterations"] == out["y0"] >= 200, out       # the iterations that ran are counted
    assert out["replays"] == 0, out                         # the replay did not finish
    notes = [s for s in out["notes"] if "interrupted" in s]
    assert len(notes) == 1 and re.fullmatch(
        rf"eagle: launch\(1\) interrupted in iteration {out['iterations']} of node 'loop' \(stage 0\), "
        r"in replay 0", notes[0]), out
    # the graph runs again: two whole replays, the loop's condition false before its body
    assert out["after"] == 2 and out["y_after"] == out["y0"] and out["iterations_after"] == 0, out


CALLS_BACK = r"""
import json, sys, threading
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import Graph, native, opaque, while_loop

call = sys.argv[1]
eagle.set_num_threads(2)
main = threading.get_ident()
x, y = np.ones(1000), np.zeros(1000)
a, b = np.zeros(4), np.zeros(4)
more, k = np.ones(1, bool), np.zeros(1, np.int64)
seen = {"worker": [], "raised": []}

def calls_back():
    seen["worker"].append(threading.get_ident() != main)
    try:
        if call == "launch": g.launch(1)
        elif call == "launch_until_done": g.launch_until_done(1)
        elif call == "set_logical_size": g.set_logical_size(10)
        elif call == "build": g.build()
        seen["raised"].append(None)
    except RuntimeError as e:
        seen["raised"].append(str(e))

def count():
    k[0] += 1
    more[0] = k[0] < 3

body = Graph()
body.add_node(native(ek.axpy(1.0), reads={"x": x}, updates={"y": y}), "axpy")
# two opaque nodes in one stage of the body: the second is dealt to worker 1
body.add_group([opaque(lambda: a.fill(1), reads={"y": y}, writes={"a": a}),
                opaque(calls_back, reads={"y": y}, writes={"b": b})], names=["first", "calls_back"])
body.add_node(opaque(count, reads={"a": a, "b": b}, writes={"more": more, "k": k}), "count")
g = Graph()
g.add_node(opaque(lambda: (k.fill(0), more.fill(True)), writes={"more": more, "k": k}), "start")
g.add_node(while_loop({"more": more}, body, max_iterations=100), "loop")
g.build(cpu=eagle.CpuOptions(teams="parallel"))
g.launch(2)
print(json.dumps({"seen": seen, "y": float(y[0]), "replays": g.replays}))
"""


@pytest.mark.parametrize("call", ["launch", "launch_until_done", "set_logical_size", "build"])
def test_a_body_node_on_a_worker_calling_back_is_refused(call):
    env = ctrl_c.child_env()
    try:
        p = subprocess.run([sys.executable, "-c", CALLS_BACK, call], capture_output=True, text=True,
                           env=env, timeout=ctrl_c.scaled(60))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"deadlock: the child did not finish ({e.stderr!r})")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["seen"]["worker"] == [True] * 6, out         # 3 iterations x 2 launches, on worker 1
    assert len(out["seen"]["raised"]) == 6, out
    assert all(r is not None and "inside its own launch" in r for r in out["seen"]["raised"]), out
    assert out["y"] == 6.0 and out["replays"] == 2, out
