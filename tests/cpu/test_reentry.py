"""Re-entry and other threads: a node that calls back into its own graph gets
RuntimeError on whichever thread it runs (the calling thread or an OpenMP
worker), and nothing another thread does changes a launch in flight.

Whatever could hang runs in a subprocess with a timeout.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from meddling import launched_beside_meddling

import eagle
import eagle.kernels as ek
from eagle.graph import native, opaque

EAGLE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(eagle.__file__)))
needs_openmp = pytest.mark.skipif(not eagle.have_openmp(), reason="eagle was built without OpenMP")


def run_python(code, timeout=120, **env):
    full = dict(os.environ)
    full.pop("OMP_NUM_THREADS", None)
    full["PYTHONPATH"] = EAGLE_ROOT + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    full.update({k: str(v) for k, v in env.items()})
    try:
        p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=timeout, env=full, cwd=EAGLE_ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the subprocess hung (no exit within {timeout} s): {e.stdout!r} {e.stderr!r}")
    assert p.returncode == 0, f"subprocess failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


CALLS = ["launch", "launch_until_done", "add_node", "add_group", "set_logical_size", "build"]

REENTRY_CHILD = """
import json, threading
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import native, opaque
eagle.set_num_threads(2)
call = {call!r}
main = threading.get_ident()
x = np.ones(1000); y = np.zeros(1000); a = np.zeros(4); b = np.zeros(4); c = np.zeros(4)
seen = {{}}

def calls_back():
    seen["worker"] = threading.get_ident() != main
    extra = np.zeros(4)
    try:
        if call == "launch": g.launch(1)
        elif call == "launch_until_done": g.launch_until_done(1)
        elif call == "add_node": g.add_node(opaque(lambda: None, writes={{"e": extra}}))
        elif call == "add_group": g.add_group([opaque(lambda: None, writes={{"e": extra}})])
        elif call == "set_logical_size": g.set_logical_size(10)
        elif call == "build": g.build()
        seen["raised"] = None
    except RuntimeError as e:
        seen["raised"] = str(e)
    # reading is allowed from a node, on any thread
    seen["read"] = [len(str(g)) > 0, g.nodes, g.logical_size, len(g.plan().stages)]

g = eagle.Graph()
g.add_node(native(ek.axpy(1.0), reads={{"x": x}}, writes={{"y": y}}), name="axpy")
# one stage of two opaque nodes on the team: the second is dealt to worker 1
g.add_group([opaque(lambda: a.fill(1), reads={{"y": y}}, writes={{"a": a}}),
             opaque(calls_back, reads={{"y": y}}, writes={{"b": b}})],
            names=["first", "calls_back"])
g.build(cpu=eagle.CpuOptions(teams=["serial", {teams!r}]))
g.launch(1)
out = dict(seen)
g.launch(2)                     # the graph is still usable
out["y"] = float(y[0])
print(json.dumps(out))
"""


@needs_openmp
@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("teams", ["parallel", "serial"])
def test_a_node_calling_back_into_its_graph_is_refused_on_any_thread(call, teams):
    res = run_python(REENTRY_CHILD.format(call=call, teams=teams), timeout=60)
    assert res["worker"] is (teams == "parallel")
    assert res["raised"] is not None and "inside its own launch" in res["raised"], res
    assert res["read"][0] and res["read"][1] == ["axpy", "first", "calls_back"], res
    assert res["y"] == 3.0


@needs_openmp
def test_a_worker_calling_an_enclosing_graph_is_refused():
    # outer's worker launches inner, whose node calls back into outer: refused, not a deadlock
    res = run_python("""
        import json
        import numpy as np
        import eagle, eagle.kernels as ek
        from eagle.graph import native, opaque
        eagle.set_num_threads(2)
        seen = {}
        z = np.zeros(8); w = np.zeros(8); u = np.zeros(8); v = np.zeros(8)
        def back_to_outer():
            try:
                outer.launch(1); seen["raised"] = None
            except RuntimeError as e:
                seen["raised"] = str(e)
        inner = eagle.Graph()
        inner.add_node(opaque(back_to_outer, writes={"z": z}), name="back")
        inner.build()
        outer = eagle.Graph()
        outer.add_group([opaque(lambda: w.fill(1), writes={"w": w}),
                         opaque(lambda: inner.launch(1), writes={"u": u})], names=["w", "inner"])
        outer.build(cpu=eagle.CpuOptions(teams="parallel"))
        outer.launch(1)
        print(json.dumps(seen))
    """, timeout=60)
    assert res["raised"] and "inside its own launch" in res["raised"]


@needs_openmp
def test_a_team_smaller_than_asked_splits_correctly():
    # a graph launched from an OpenMP worker gets a team of 1 (no nested parallelism)
    # though its plan asks for 2: the split must follow the team OpenMP gave
    res = run_python("""
        import json
        import numpy as np
        import eagle, eagle.kernels as ek
        from eagle.graph import native, opaque
        eagle.set_num_threads(2)
        n = 10_001
        x = np.arange(n, dtype=float); y = np.zeros(n); w = np.zeros(4); u = np.zeros(4)
        inner = eagle.Graph()
        inner.add_node(native(ek.axpy(2.0), reads={"x": x}, writes={"y": y}), name="axpy")
        inner.build(cpu=eagle.CpuOptions(teams="parallel"))
        outer = eagle.Graph()
        outer.add_group([opaque(lambda: w.fill(1), writes={"w": w}),
                         opaque(lambda: inner.launch(3), writes={"u": u})], names=["w", "inner"])
        outer.build(cpu=eagle.CpuOptions(teams="parallel"))
        outer.launch(2)
        print(json.dumps({"ok": bool((y == 12 * x).all())}))
    """, timeout=60)
    assert res["ok"]


# ---- other threads during launches ------------------------------------------------------


@needs_openmp
def test_plan_from_another_thread_after_set_num_threads_1_does_not_hang_a_launch():
    res = run_python("""
        import json, threading
        import numpy as np
        import eagle, eagle.kernels as ek
        from eagle.graph import native
        eagle.set_num_threads(2)
        n = 20_000
        x = np.ones(n); y = np.zeros(n); z = np.zeros(n)
        g = eagle.Graph()
        g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
        g.add_node(native(ek.axpy(1.0), reads={"y": y}, writes={"z": z}), name="acc")
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        stop = threading.Event(); reports = []
        def meddle():
            eagle.set_num_threads(1)          # this thread's setting only
            while not stop.is_set():
                p = g.plan(); reports.append(p.stages[0].team); str(g); g.logical_size
        t = threading.Thread(target=meddle); t.start()
        total = 0
        for _ in range(300):
            g.launch(7); total += 7
        stop.set(); t.join(30)
        main_team = g.plan().stages[0].team
        print(json.dumps({"y": bool((y == total).all()), "z": bool((z == total * (total + 1) / 2).all()),
                          "other_sees": sorted(set(reports)), "main_team": main_team}))
    """, timeout=120)
    assert res["y"] and res["z"], res
    assert res["other_sees"] == [1] and res["main_team"] == 2, res


@pytest.mark.parametrize("teams", ["serial", "parallel", "auto"])
def test_retune_and_thread_changes_from_another_thread_apply_between_launches(threads, teams):
    threads(2)
    n = 40_000
    x = np.ones(n)
    y = np.zeros(n)
    g = eagle.Graph()
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    launched_beside_meddling(g, y)


def test_the_lock_is_free_after_every_kind_of_failure():
    y = np.zeros(4)

    def boom():
        raise ZeroDivisionError("boom")

    g = eagle.Graph()
    g.add_node(opaque(boom, writes={"y": y}), name="boom")
    g.build()
    for _ in range(3):
        with pytest.raises(ZeroDivisionError):
            g.launch(2)
        assert g._holder is None
    for bad, exc in [(-1, ValueError), (2 ** 63, OverflowError), (1.5, TypeError), (True, TypeError)]:
        with pytest.raises(exc):
            g.launch(bad)
        assert g._holder is None
    t = threading.Thread(target=lambda: pytest.raises(ZeroDivisionError, g.launch, 1))
    t.start()
    t.join(30)
    assert not t.is_alive()


def test_a_huge_count_right_after_a_failed_launch_gets_its_own_error():
    calls = [0]
    y = np.zeros(4)

    def fails_once():
        calls[0] += 1
        if calls[0] == 1:
            raise KeyError("first")

    g = eagle.Graph()
    g.add_node(opaque(fails_once, writes={"y": y}), name="once")
    g.build()
    with pytest.raises(KeyError):
        g.launch(1)
    with pytest.raises(OverflowError, match="2\\*\\*63") as info:
        g.launch(2 ** 63)
    assert not getattr(info.value, "__notes__", None)   # not the previous failure's note
    with pytest.raises(OverflowError) as info:
        g.launch_until_done(2 ** 64)
    assert not getattr(info.value, "__notes__", None)
    g.launch(2)
    assert calls[0] == 3
