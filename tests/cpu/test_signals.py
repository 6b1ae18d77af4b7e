"""Ctrl-C: whenever a SIGINT lands, the graph is never left locked, and a launch
stops soon after it even when its replays become slow in the middle.

Everything runs in a subprocess with a timeout, so a hang fails instead of
hanging the suite. Time limits here are deadlock guards, not speed
requirements (the latency is measured in ``python -m eagle.bench``).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest
from ctrl_c import child, read_line

import eagle

EAGLE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(eagle.__file__)))
pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")


# ---- many single Ctrl-Cs into launch(1) loops ------------------------------------------

LOOP_CHILD = r"""
import sys, threading
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import native, opaque

kind = sys.argv[1]
eagle.set_num_threads(2 if kind == "parallel" else 1)
x = np.ones(64); y = np.zeros(64); z = np.zeros(64)
g = eagle.Graph()
if kind == "opaque":
    g.add_node(opaque(lambda: np.add(y, 1, out=y), writes={"y": y}), name="py")
    g.add_node(opaque([].clear, reads={"y": y}), name="c")
else:
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.add_node(native(ek.scale(2.0), reads={"y": y}, writes={"z": z}), name="scale")
g.build(cpu=eagle.CpuOptions(teams="parallel" if kind == "parallel" else "auto"))

def elsewhere():
    out = []
    t = threading.Thread(target=lambda: (g.launch(1), out.append(1)), daemon=True)
    t.start()
    t.join(20)
    return bool(out)

status = "ready"
for trial in range(int(sys.argv[2]) + 1):
    try:
        # the parent's next SIGINT may land while the line goes out: the same try catches it
        sys.stdout.write(status + "\n"); sys.stdout.flush()
        while True:
            g.launch(1)
    except KeyboardInterrupt:
        pass
    try:
        before = float(y[0])
        g.launch(1)                       # the same thread
        same = float(y[0]) == before + 1
        other = elsewhere()               # another thread: would block forever on a held lock
        status = "ok" if same and other else f"broken same={same} other={other}"
    except RuntimeError as e:             # "inside its own launch": the lock was left held
        status = f"locked: {e}"
    if status != "ok":
        sys.stdout.write(status + "\n"); sys.stdout.flush()
        sys.exit(1)
"""


@pytest.mark.parametrize("kind", ["native", "opaque", "parallel"])
def test_single_ctrl_c_into_launch_loops_never_leaves_the_graph_locked(tmp_path, kind):
    if kind == "parallel" and not eagle.have_openmp():
        pytest.skip("eagle was built without OpenMP")
    trials = 70
    script = tmp_path / "loop_child.py"
    script.write_text(LOOP_CHILD)
    rng = random.Random(kind)
    with child([str(script), kind, str(trials)], cwd=EAGLE_ROOT) as p:
        assert read_line(p, 60) == "ready"
        for trial in range(trials):
            time.sleep(rng.uniform(0, 0.004))   # anywhere in the loop: inside launch or between
            p.send_signal(signal.SIGINT)
            status = read_line(p, 30)
            if status != "ok":
                p.kill()
                pytest.fail(f"after SIGINT {trial + 1}: {status!r}; stderr: {p.communicate()[1][-3000:]}")


# ---- Ctrl-C into a launch whose replays turn slow ----------------------------------------

SLOWING_C = r"""
#include <stdint.h>
#include <time.h>
/* Cheap for the first `cheap` calls (data[0][0]), then about 2 ms a call. */
void slowing(int64_t start, int64_t stop, char **data, const int64_t *strides, void *ud)
{
    (void)strides; (void)ud;
    int64_t *state = (int64_t *)data[0];
    int64_t calls = __atomic_add_fetch(&state[1], 1, __ATOMIC_RELAXED);
    double *y = (double *)data[1];
    for (int64_t i = start; i < stop; ++i)
        y[i] += 1.0;
    if (calls <= state[0])
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1e9 + (t.tv_nsec - t0.tv_nsec) < 2e6);
}
"""

SLOWING_CHILD = r"""
import ctypes, json, sys, threading, time
import numpy as np
import eagle, eagle.native as en
from eagle.graph import native, opaque

lib = ctypes.CDLL(sys.argv[1])
n_threads, teams, with_gil = int(sys.argv[2]), sys.argv[3], sys.argv[4] == "gil"
cheap = int(sys.argv[5])
eagle.set_num_threads(n_threads)
state = np.array([cheap, 0], dtype=np.int64)
y = np.zeros(64)
g = eagle.Graph()
kernel = en.CTYPES_KERNEL(ctypes.cast(lib.slowing, ctypes.c_void_p).value)
g.add_node(native(kernel, reads={"state": state}, writes={"y": y}), name="slowing")
if with_gil:
    g.add_node(opaque([].clear, reads={"y": y}), name="c")   # the GIL path
g.build(cpu=eagle.CpuOptions(teams=teams))

def watch():   # tell the parent once the replays are slow
    while state[1] <= cheap + 5:
        time.sleep(0.001)
    sys.stdout.write("slow\n"); sys.stdout.flush()
threading.Thread(target=watch, daemon=True).start()
try:
    g.launch(10**12)
except KeyboardInterrupt as e:
    stopped = time.monotonic()
    g.launch(2)                           # usable, from this thread and another
    t = threading.Thread(target=g.launch, args=(2,)); t.start(); t.join(20)
    print(json.dumps({"interrupted": True, "stopped": stopped, "other_ok": not t.is_alive(),
                      "notes": getattr(e, "__notes__", [])}), flush=True)
    sys.exit(0)
print(json.dumps({"interrupted": False}), flush=True)
"""


@pytest.fixture(scope="module")
def slowing_lib(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the test kernel")
    d = tmp_path_factory.mktemp("slowing")
    (d / "slowing.c").write_text(SLOWING_C)
    so = d / "libslowing.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(so), str(d / "slowing.c")], check=True)
    return str(so)


@pytest.mark.parametrize("n_threads, teams, gil", [(1, "serial", "nogil"), (2, "parallel", "nogil"),
                                                  (2, "auto", "nogil"), (1, "serial", "gil"),
                                                  (2, "parallel", "gil")])
def test_ctrl_c_stops_a_launch_whose_replays_turn_slow(tmp_path, slowing_lib, n_threads, teams, gil):
    if n_threads > 1 and not eagle.have_openmp():
        pytest.skip("eagle was built without OpenMP")
    script = tmp_path / "slowing_child.py"
    script.write_text(SLOWING_CHILD)
    # a million cheap calls first: an adaptive stride grown on them would overshoot by minutes
    with child([str(script), slowing_lib, str(n_threads), teams, gil, "1000000"], cwd=EAGLE_ROOT) as p:
        assert read_line(p, 120) == "slow"
        p.send_signal(signal.SIGINT)
        res = json.loads(read_line(p, 20))   # generous: the executor checks every few ms
        p.wait(30)
    assert res["interrupted"] and res["other_ok"], res
    assert len(res["notes"]) == 1 and ("interrupted" in res["notes"][0] or "'c'" in res["notes"][0]), res


WAITER_CHILD = r"""
import ctypes, json, sys, threading, time
import numpy as np
import eagle, eagle.native as en
from eagle.graph import native

lib = ctypes.CDLL(sys.argv[1])
eagle.set_num_threads(1)
state = np.array([0, 0], dtype=np.int64)      # every call slow (2 ms)
y = np.zeros(8)
g = eagle.Graph()
kernel = en.CTYPES_KERNEL(ctypes.cast(lib.slowing, ctypes.c_void_p).value)
g.add_node(native(kernel, reads={"state": state}, writes={"y": y}), name="slowing")
g.build()
# holds the lock until told (every call 2 ms until state[0] lets them be cheap): however
# late the SIGINT comes on a loaded machine, it finds this launch still running
busy = threading.Thread(target=g.launch, args=(10**6,))
busy.start()
while state[1] == 0:
    time.sleep(0.001)
sys.stdout.write("waiting\n"); sys.stdout.flush()
try:
    g.launch(1)                  # waits for the other thread's launch
    out = {"interrupted": False}
except KeyboardInterrupt:
    out = {"interrupted": True, "busy_still": busy.is_alive()}
state[0] = 2**62                 # the rest of the busy launch is cheap calls
busy.join()
before = y[0]                    # replays (each adds 1 to every sample), not kernel calls: the
g.launch(2)                      # new thread runs with OpenMP's default team, which may split
t = threading.Thread(target=g.launch, args=(2,)); t.start(); t.join(20)
out["after"] = int(y[0] - before)   # the lock works for this thread and another
out["holder"] = g._holder
print(json.dumps(out), flush=True)
"""


def test_ctrl_c_while_waiting_for_another_threads_launch(tmp_path, slowing_lib):
    script = tmp_path / "waiter_child.py"
    script.write_text(WAITER_CHILD)
    with child([str(script), slowing_lib], cwd=EAGLE_ROOT) as p:
        assert read_line(p, 60) == "waiting"
        time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        res = json.loads(read_line(p, 60))
    # the wait gave up while the other launch still ran, and nothing was left held
    assert res == {"interrupted": True, "busy_still": True, "after": 4, "holder": None}, res
