"""Threads: OpenMP's conventions for the thread count, threadpoolctl, fork,
Ctrl-C during a long launch, and one graph launched from two threads.

Whatever can hang (fork after a parallel region, a missed SIGINT) runs in a
subprocess with a timeout. Time limits here are deadlock guards, not speed
requirements.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import ctrl_c
import numpy as np
import pytest
from ctrl_c import child_env

import eagle
import eagle.kernels as ek
from eagle.graph import native, opaque

# the directory holding the eagle under test, so a subprocess imports the same one
EAGLE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(eagle.__file__)))
posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals and fork")
needs_openmp = pytest.mark.skipif(not eagle.have_openmp(), reason="eagle was built without OpenMP")


def run_python(code, timeout=120, **env):
    """Run code in a fresh interpreter; return its stdout (fails the test on an error or a hang)."""
    try:
        p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=timeout, env=child_env(**env), cwd=EAGLE_ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the subprocess hung (no exit within {timeout} s); output so far: {e.stdout!r} {e.stderr!r}")
    assert p.returncode == 0, f"subprocess failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p.stdout




def axpy_graph(n=100_000, teams="auto"):
    x = np.ones(n)
    y = np.zeros(n)
    g = eagle.Graph()
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    return g, y


# ---- the thread count -------------------------------------------------------------


@needs_openmp
@pytest.mark.parametrize("value", [1, 2, 3, 5])
def test_omp_num_threads_sets_the_count(value):
    out = run_python("""
        import numpy as np, eagle, eagle.kernels as ek
        from eagle.graph import native
        x = np.arange(10_000.0); y = np.zeros(10_000)
        g = eagle.Graph()
        g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"y": y}))
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        g.launch(2)
        assert (y == 2 * x).all()
        plan = g.plan()
        print(eagle.get_num_threads(), plan.num_threads, plan.stages[0].team)
    """, OMP_NUM_THREADS=value)
    assert out.split() == [str(value)] * 3


def test_default_count_is_at_least_one():
    out = run_python("import eagle; print(eagle.get_num_threads())")
    assert int(out) >= 1


def test_set_num_threads(threads):
    for n in (1, 3, 2):
        threads(n)
        assert eagle.get_num_threads() == n
        g, y = axpy_graph(teams="parallel")
        g.launch(3)
        assert (y == 3.0).all()
        plan = g.plan()
        assert plan.num_threads == n
        assert plan.stages[0].team == n
    # a graph built under one count follows a later change
    threads(1)
    g, y = axpy_graph(teams="parallel")
    threads(2)
    g.launch(1)
    assert g.plan().num_threads == 2 and g.plan().stages[0].team == 2


@pytest.mark.parametrize("bad", [0, -1])
def test_set_num_threads_rejects_non_positive(threads, bad):
    before = eagle.get_num_threads()
    with pytest.raises(ValueError):
        eagle.set_num_threads(bad)
    assert eagle.get_num_threads() == before


@pytest.mark.parametrize("bad", ["2", None, 2.5, 1.0, True], ids=["str", "None", "float", "float-int", "bool"])
def test_set_num_threads_rejects_non_integers(threads, bad):
    # like launch() and set_logical_size(): a float is not silently truncated, a bool is not a count
    threads(2)
    with pytest.raises(TypeError):
        eagle.set_num_threads(bad)
    assert eagle.get_num_threads() == 2


def test_set_num_threads_accepts_integer_likes(threads):
    eagle.set_num_threads(np.int64(1))
    assert eagle.get_num_threads() == 1


@needs_openmp
def test_set_num_threads_beats_omp_num_threads():
    out = run_python("""
        import eagle
        a = eagle.get_num_threads()
        eagle.set_num_threads(1)
        print(a, eagle.get_num_threads())
    """, OMP_NUM_THREADS=3)
    assert out.split() == ["3", "1"]


def test_the_thread_functions_are_eagle_cpu_threads():
    import eagle.cpu.threads as policy

    for name in ("get_num_threads", "set_num_threads", "max_threads", "have_openmp"):
        assert getattr(eagle, name) is getattr(policy, name)
    assert sorted(policy.__all__) == ["get_num_threads", "have_openmp", "max_threads", "set_num_threads",
                                      "usable_cpus"]
    assert 1 <= policy.usable_cpus() <= (os.cpu_count() or 1)


@needs_openmp
def test_the_launch_reads_the_runtimes_team_size_capped_to_the_usable_cpus_unless_a_count_was_given():
    # the runtime's inputs set by hand: OpenMP says 3 threads, the process may use 1 CPU
    out = run_python("""
        import numpy as np, eagle, eagle.kernels as ek
        from eagle.cpu import _executor
        from eagle.graph import native
        x = np.arange(5000.0); y = np.zeros(5000)
        g = eagle.Graph()
        g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"y": y}))
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        seen = []
        def launch():
            g.launch(1)
            assert (y == 2 * x).all() and g.plan().num_threads == eagle.get_num_threads()
            seen.append(eagle.get_num_threads())
        for usable, env_set in [(1, False), (1, True), (0, False), (8, False), (1, False)]:
            _executor._configure_team_size(usable, env_set)
            launch()
        eagle.set_num_threads(2)               # a count given: no longer capped
        launch()
        print(*seen)
    """, OMP_NUM_THREADS=3)
    assert out.split() == ["1", "3", "3", "3", "1", "2"]


# ---- threadpoolctl ---------------------------------------------------------------------


@pytest.fixture
def threadpoolctl():
    return pytest.importorskip("threadpoolctl")


def test_threadpoolctl_sees_eagles_openmp(threadpoolctl):
    if not eagle.have_openmp():
        pytest.skip("eagle was built without OpenMP")
    info = threadpoolctl.threadpool_info()
    openmp = [lib for lib in info if lib["user_api"] == "openmp"]
    assert openmp, f"threadpoolctl found no OpenMP runtime after importing eagle: {info}"


def test_threadpoolctl_sees_eagles_openmp_in_a_fresh_process(threadpoolctl):
    out = run_python("""
        import json, eagle, threadpoolctl
        info = threadpoolctl.threadpool_info()
        print(json.dumps([eagle.have_openmp(), [lib["user_api"] for lib in info]]))
    """)
    have_openmp, apis = json.loads(out)
    if not have_openmp:
        pytest.skip("eagle was built without OpenMP")
    assert "openmp" in apis


@pytest.mark.parametrize("user_api", [None, "openmp"])
def test_threadpool_limits_limits_eagle(threadpoolctl, threads, user_api):
    if not eagle.have_openmp():
        pytest.skip("eagle was built without OpenMP")
    threads(2)
    g, y = axpy_graph(teams="parallel")
    with threadpoolctl.threadpool_limits(limits=1, user_api=user_api):
        assert eagle.get_num_threads() == 1
        g.launch(2)
        assert g.plan().num_threads == 1
        assert g.plan().stages[0].team == 1
    assert eagle.get_num_threads() == 2
    g.launch(1)
    assert (y == 3.0).all()
    assert g.plan().stages[0].team == 2


@needs_openmp
def test_threadpool_limits_in_a_fresh_process(threadpoolctl):
    out = run_python("""
        import eagle, threadpoolctl
        with threadpoolctl.threadpool_limits(1):
            inside = eagle.get_num_threads()
        print(inside, eagle.get_num_threads())
    """, OMP_NUM_THREADS=2)
    assert out.split() == ["1", "2"]


@needs_openmp
def test_a_threadpoolctl_limit_above_the_cpus_counts_from_the_start_of_the_process(threadpoolctl):
    """One rule whether or not set_num_threads() was called before: a limit is a count
    given, not capped to the usable CPUs (it was ignored until set_num_threads() ran once)."""
    out = run_python("""
        import eagle, threadpoolctl
        from eagle.cpu.threads import usable_cpus
        usable = usable_cpus()
        # not OpenMP's default (a limit equal to it cannot be told from none)
        default = {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "openmp"}
        limit = min(next(k for k in range(usable + 3, usable + 99) if k not in default), eagle.max_threads())
        seen = [usable, limit, eagle.get_num_threads()]
        with threadpoolctl.threadpool_limits(limits=limit, user_api="openmp"):
            seen.append(eagle.get_num_threads())
        seen.append(eagle.get_num_threads())
        eagle.set_num_threads(1)
        with threadpoolctl.threadpool_limits(limits=limit, user_api="openmp"):
            seen.append(eagle.get_num_threads())
        print(*seen)
    """)
    usable, limit, before, inside, after, inside_after_set = map(int, out.split())
    assert before == after == min(usable, eagle.max_threads())
    assert inside == inside_after_set == limit


# ---- fork -------------------------------------------------------------------------------


@needs_openmp
@posix_only
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_child_forked_after_a_parallel_region_runs_serially():
    out = run_python("""
        import os, json, numpy as np, eagle, eagle.kernels as ek
        from eagle.graph import native
        eagle.set_num_threads(2)
        n = 200_000
        x = np.ones(n); y = np.zeros(n)
        g = eagle.Graph()
        g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}))
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        g.launch(10)                                   # a parallel region ran
        assert g.plan().stages[0].team == 2 and (y == 10).all()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                res = {"threads": eagle.get_num_threads()}
                g.launch(5)                             # the parent's graph
                res["old_team"] = g.plan().stages[0].team
                res["old_ok"] = bool((y == 15).all())
                z = np.zeros(n)
                g2 = eagle.Graph()
                g2.add_node(native(ek.fill(3.0), writes={"z": z}))
                g2.build(cpu=eagle.CpuOptions(teams="parallel"))              # a new graph in the child
                g2.launch(2)
                res["new_team"] = g2.plan().stages[0].team
                res["new_ok"] = bool((z == 3).all())
                os.write(w, json.dumps(res).encode())
            finally:
                os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 4096):
            data += chunk
        _, status = os.waitpid(pid, 0)
        child = json.loads(data)
        g.launch(1)                                     # the parent still runs in parallel
        child["parent_ok"] = bool((y == 11).all())
        child["parent_team"] = g.plan().stages[0].team
        child["status"] = status
        print(json.dumps(child))
    """, timeout=120)
    res = json.loads(out)
    assert res == {"threads": 1, "old_team": 1, "old_ok": True, "new_team": 1, "new_ok": True,
                   "parent_ok": True, "parent_team": 2, "status": 0}


@posix_only
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
@pytest.mark.parametrize("kind", ["opaque", "native"])
def test_a_child_forked_during_another_threads_launch_can_launch_the_graph(kind):
    # the child inherits the graph's lock held by a thread it does not have: its
    # launch must not wait for that thread for ever
    out = run_python("""
        import json, os, sys, threading, time
        import numpy as np, eagle, eagle.kernels as ek
        from eagle.graph import native, opaque
        kind = sys.argv[1] if len(sys.argv) > 1 else %r
        started = threading.Event()
        x = np.ones(1000); y = np.zeros(1000)
        g = eagle.Graph()
        if kind == "opaque":
            def step():
                started.set()
                time.sleep(0.001)
            g.add_node(opaque(step, writes={"y": y}), name="step")
        else:
            g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
        g.build()
        stop = [False]
        def launcher():
            while not stop[0]:
                g.launch(1000)
                started.set()
        t = threading.Thread(target=launcher, daemon=True)
        t.start()
        started.wait(30)
        time.sleep(0.01)
        for attempt in range(20):               # fork while the other thread holds the lock
            if g._holder is not None and g._holder != threading.get_ident():
                break
            time.sleep(0.001)
        held = g._holder is not None
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                before = y.copy()
                g.launch(2)                     # the parent's graph, in the child
                code = 0 if (kind == "opaque" or (y == before + 2).all()) else 4
            finally:
                os._exit(code)
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.01)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            status = "hung"
        stop[0] = True
        t.join(30)
        print(json.dumps({"held": held, "status": status}))
    """ % kind, timeout=120)
    res = json.loads(out)
    assert res["status"] == 0, res
    assert res["held"], "the launching thread did not hold the lock at the fork: nothing tested"


@posix_only
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork")
def test_a_grandchild_forked_from_a_new_thread_of_the_child_can_launch_the_graph():
    # glibc gives a new thread of a forked child the ident of a dead parent thread: a
    # grandchild forked from it must not take the stale lock for its own (re-entry error)
    out = run_python("""
        import json, os, threading, time
        import numpy as np, eagle
        from eagle.graph import opaque
        y = np.zeros(4)
        g = eagle.Graph()
        g.add_node(opaque(lambda: time.sleep(0.5), writes={"y": y}), name="slow")
        g.build()
        holder = {}
        def launcher():
            holder["ident"] = threading.get_ident()
            g.launch(1)
        t = threading.Thread(target=launcher)
        t.start()
        while g._holder is None:
            time.sleep(0.001)

        def wait(pid, seconds=30):
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return os.waitstatus_to_exitcode(status)
                time.sleep(0.01)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "hung"

        pid = os.fork()
        if pid == 0:                                  # the child: its thread forks again
            code = [5]
            def inner():
                gpid = os.fork()
                if gpid == 0:
                    try:
                        g.launch(1)
                        os._exit(0)
                    except BaseException:
                        os._exit(7)
                code[0] = wait(gpid)
            th = threading.Thread(target=inner)
            th.start()
            th.join(60)
            os._exit(code[0] if isinstance(code[0], int) else 9)
        status = wait(pid, 60)
        t.join(30)
        print(json.dumps({"status": status}))
    """, timeout=120)
    assert json.loads(out) == {"status": 0}


# ---- Ctrl-C -----------------------------------------------------------------------------

SIGINT_CHILD = r"""
import itertools, json, os, sys, threading, time
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import native, opaque

kind, n_threads, teams = sys.argv[1], int(sys.argv[2]), sys.argv[3]
eagle.set_num_threads(n_threads)
x = np.ones(1000)
y = np.zeros(1000)
z = np.zeros(1000)
g = eagle.Graph()

def ready():
    sys.stdout.write("ready\n")
    sys.stdout.flush()

if kind == "native":
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.add_node(native(ek.scale(2.0), reads={"y": y}, writes={"z": z}), name="scale")

    def watch():  # runs only because the native launch lets go of the GIL
        while y[0] < 1000:
            time.sleep(0.001)
        ready()
    threading.Thread(target=watch, daemon=True).start()
elif kind == "opaque-builtin":
    # C callables only: no Python frame runs in the node, the executor must see the signal itself.
    say_ready = map(os.write, [1], [b"ready\n"])
    import functools
    g.add_node(opaque(functools.partial(next, say_ready, None), reads={"x": x}), name="say_ready")
    g.add_node(opaque([].clear, reads={"y": y}), name="clear")
elif kind == "opaque-python":
    calls = [0]
    def step():
        calls[0] += 1
        if calls[0] == 1000:
            ready()
    g.add_node(opaque(step, reads={"y": y}), name="step")
else:
    raise SystemExit("unknown kind " + kind)

g.build(cpu=eagle.CpuOptions(teams=teams))
try:
    g.launch(10**9)
except KeyboardInterrupt as e:
    notes = getattr(e, "__notes__", [])
    g.launch(3)                       # still usable
    print(json.dumps({"interrupted": True, "notes": notes}), flush=True)
    sys.exit(0)
print(json.dumps({"interrupted": False}), flush=True)
"""


def interrupt(tmp_path, kind, n_threads, teams):
    script = tmp_path / "sigint_child.py"
    script.write_text(SIGINT_CHILD)
    res = ctrl_c.interrupt([str(script), kind, str(n_threads), teams], after_s=0.05, cwd=EAGLE_ROOT)
    assert res.returncode == 0, f"child failed ({res.returncode}): {res.out!r} {res.err!r}"
    out = json.loads(res.lines[-1])
    assert out["interrupted"], "launch(10**9) finished instead of being interrupted"
    # a correctness bound, stretched by the load: the executor checks signals every few ms
    bound = ctrl_c.scaled(20)
    assert res.waited < bound, f"SIGINT took {res.waited:.1f} s to stop the launch (bound {bound:.0f} s)"
    return out["notes"]


@posix_only
@pytest.mark.parametrize("n_threads, teams", [(1, "serial"), (2, "serial"), (2, "parallel"), (2, "auto")])
def test_ctrl_c_stops_a_nogil_native_launch(tmp_path, n_threads, teams):
    notes = interrupt(tmp_path, "native", n_threads, teams)
    assert len(notes) == 1 and "interrupted" in notes[0], notes
    assert "launch(1000000000)" in notes[0]


@posix_only
@pytest.mark.parametrize("n_threads, teams", [(1, "serial"), (2, "serial"), (2, "parallel"), (2, "auto")])
def test_ctrl_c_stops_an_opaque_launch(tmp_path, n_threads, teams):
    notes = interrupt(tmp_path, "opaque-builtin", n_threads, teams)
    assert len(notes) == 1 and "interrupted" in notes[0], notes


@posix_only
@pytest.mark.parametrize("n_threads, teams", [(1, "serial"), (2, "parallel")])
def test_ctrl_c_stops_a_python_opaque_launch(tmp_path, n_threads, teams):
    # The KeyboardInterrupt may surface inside the node's own Python code (then the
    # note names the node) or at the executor's check (then it says "interrupted").
    notes = interrupt(tmp_path, "opaque-python", n_threads, teams)
    assert len(notes) == 1, notes
    assert "interrupted" in notes[0] or "'step'" in notes[0], notes


# ---- one graph, two launching threads -----------------------------------------------------


def launch_together(g, counts):
    start = threading.Barrier(len(counts))
    errors = []

    def run(n):
        try:
            start.wait()
            g.launch(n)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(n,)) for n in counts]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in ts), "a launching thread hung"
    assert not errors, errors


@pytest.mark.parametrize("teams", ["serial", "parallel", "auto"])
def test_two_threads_launching_a_native_graph(threads, teams):
    threads(2)
    n = 500_000
    x = np.ones(n)
    y = np.zeros(n)
    z = np.zeros(n)
    g = eagle.Graph()
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.add_node(native(ek.axpy(2.0), reads={"y": y}, writes={"z": z}), name="accumulate")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    launch_together(g, [150, 250])
    # sequential oracle: y_k = k, z = 2 * sum(k for k in 1..400)
    assert (y == 400.0).all()
    assert (z == 2.0 * 400 * 401 / 2).all()


@pytest.mark.parametrize("teams", ["serial", "parallel", "auto"])
def test_two_threads_launching_a_mixed_graph_are_serialized(threads, teams):
    threads(2)
    n = 10_000
    x = np.ones(n)
    y = np.zeros(n)
    state = {"active": 0, "overlap": 0, "calls": 0}

    def guarded():
        state["calls"] += 1
        state["active"] += 1
        if state["active"] > 1:
            state["overlap"] += 1
        time.sleep(0)          # lets the other launching thread run, if it could
        state["active"] -= 1

    g = eagle.Graph()
    g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.add_node(opaque(guarded, reads={"y": y}), name="guarded")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    launch_together(g, [300, 200, 100])
    assert state["calls"] == 600
    assert state["overlap"] == 0, "two launches of one graph ran at once"
    assert (y == 600.0).all()


def test_a_node_launching_its_own_graph_is_refused():
    g = eagle.Graph()
    y = np.zeros(3)
    g.add_node(opaque(lambda: g.launch(1), writes={"y": y}), name="again")
    g.build()
    with pytest.raises(RuntimeError, match="inside its own launch"):
        g.launch(1)
    with pytest.raises(RuntimeError):      # and the graph is usable (still raises the same way)
        g.launch(1)


# ---- thread limits -------------------------------------------------------------------------


def test_max_threads_follows_the_documented_rule():
    if not eagle.have_openmp():
        assert eagle.max_threads() == 1
        return
    cpus = os.cpu_count() or 1
    rule = min(1024, max(64, 8 * cpus))
    if os.environ.get("OMP_THREAD_LIMIT", "").isdigit():
        rule = min(rule, int(os.environ["OMP_THREAD_LIMIT"]))
    assert eagle.max_threads() == rule


@pytest.mark.parametrize("bad", [10 ** 6, 2 ** 31, 10 ** 30])
def test_set_num_threads_refuses_more_than_max_threads(threads, bad):
    threads(2)
    with pytest.raises(ValueError, match="at most"):
        eagle.set_num_threads(bad)
    assert eagle.get_num_threads() == 2
    g, y = axpy_graph(teams="parallel")
    g.launch(2)                                    # and the next parallel launch is fine
    assert (y == 2.0).all()


@needs_openmp
def test_set_num_threads_accepts_max_threads(threads):
    eagle.set_num_threads(eagle.max_threads())
    assert eagle.get_num_threads() == eagle.max_threads()


@needs_openmp
@pytest.mark.parametrize("env, expect", [({"OMP_NUM_THREADS": 10 ** 6}, "max"),
                                         ({"OMP_NUM_THREADS": 8, "OMP_THREAD_LIMIT": 3}, "3"),
                                         ({"OMP_NUM_THREADS": 10 ** 6, "OMP_THREAD_LIMIT": 2}, "2")])
def test_a_huge_omp_num_threads_is_capped(env, expect):
    out = run_python("""
        import numpy as np, eagle, eagle.kernels as ek
        from eagle.graph import native
        x = np.arange(5000.0); y = np.zeros(5000)
        g = eagle.Graph()
        g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"y": y}))
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        n = eagle.get_num_threads()
        if n <= 4:                       # a team this machine can run in a test
            g.launch(2)
            assert (y == 2 * x).all()
        print(n, eagle.max_threads())
    """, **env)
    n, most = out.split()
    assert n == (most if expect == "max" else expect)


@needs_openmp
def test_threadpoolctl_beyond_max_threads_is_capped(threadpoolctl, threads):
    threads(2)
    with threadpoolctl.threadpool_limits(limits=10 ** 6, user_api="openmp"):
        assert eagle.get_num_threads() <= eagle.max_threads()


# ---- Hostile threads: the reading calls (str(g), to_dot(), stages, dependencies,
# repr) see a consistent graph while another thread records into it.

def test_the_picture_is_consistent_while_another_thread_records():
    x = np.zeros(4)
    ys = [np.zeros(2) for _ in range(3)]
    g = eagle.Graph()
    done = threading.Event()
    errors = []

    def record():
        try:
            for k in range(1500):
                if k % 100 == 50:
                    g.build()
                g.add_node(opaque(lambda: None, reads={"x": x}, writes={"y": ys[k % 3]}), name=f"n{k}")
        finally:
            done.set()

    def look():
        while not done.is_set():
            try:
                text = str(g)
                dot = g.to_dot()
                deps = g.dependencies
                stages = g.stages   # read after: holds every node deps names
                repr(g)
                assert dot.startswith("digraph") and text.startswith("eagle.Graph")
                recorded = {name for row in stages for name in row}
                assert all(a in recorded and b in recorded for a, b, _ in deps), "an edge to a node not shown"
            except Exception as e:   # noqa: BLE001 - any failure is the finding
                errors.append(repr(e))
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads as often as the interpreter can
    try:
        threads = [threading.Thread(target=record), threading.Thread(target=look)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert len(g.nodes) == 1500


def test_a_retune_applies_to_what_another_thread_recorded_meanwhile():
    # set_logical_size waits for the graph's lock; another thread may record a shorter
    # array (and build) meanwhile: the capacity is the longest extent, so the size stays
    # valid, and the short node runs over its own 10 samples, never past them
    import eagle.kernels as ek
    from eagle.graph import native

    x, y = np.ones(100), np.zeros(100)
    g = eagle.Graph()
    g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"y": y}), name="long")
    g.build()
    g.set_logical_size(50)
    short = np.zeros(10)
    enter = g._exclusive

    def another_thread_got_there_first(what):
        if what == "retune":
            g.add_node(native(ek.fill(1.0), writes={"s": short}), name="short")
            g.build()
        return enter(what)

    g._exclusive = another_thread_got_there_first
    try:
        g.set_logical_size(100)
    finally:
        del g._exclusive
    assert g.capacity == 100 and g.logical_size == 100
    g.launch(1)
    assert (short == 1).all() and (y == 2).all()


# ---- the launching thread's context on the team's threads ---------------------------------


def context_graph(n_nodes=4):
    """One stage of opaque nodes, each noting the thread it ran on, decimal's
    precision, a context variable and whether 1/0 raised under np.errstate."""
    import contextvars
    import decimal

    var = contextvars.ContextVar("eagle_test_var", default="unset")
    seen = []

    def node():
        try:
            np.divide(np.ones(1), np.zeros(1))
            raised = False
        except FloatingPointError:
            raised = True
        seen.append((threading.get_ident(), decimal.getcontext().prec, var.get(), raised))

    g = eagle.Graph()
    for k in range(n_nodes):
        g.add_node(opaque(node, writes={f"a{k}": np.zeros(1)}), name=f"n{k}")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    return g, var, seen


@needs_openmp
def test_opaque_nodes_on_the_team_run_in_the_launching_threads_context(threads):
    import decimal

    threads(2)
    prec_before = decimal.getcontext().prec
    g, var, seen = context_graph()
    assert g.plan().stages[0].team == 2
    token = var.set("caller")
    try:
        with decimal.localcontext(prec=50), np.errstate(divide="raise"):
            for _ in range(3):
                g.launch(2)
            with np.errstate(divide="ignore"):
                g.launch(1)
    finally:
        var.reset(token)
    me = threading.get_ident()
    assert any(t != me for t, *_ in seen), "no node ran on another thread: nothing tested"
    assert len(seen) == 4 * 7
    assert {(p, v) for _, p, v, _ in seen} == {(50, "caller")}, seen
    # every node saw the caller's errstate: raise in the first 6 replays, ignore in the last
    assert [r for *_, r in seen[:24]] == [True] * 24 and [r for *_, r in seen[24:]] == [False] * 4
    # and the caller's context is unchanged afterwards
    assert decimal.getcontext().prec == prec_before and var.get() == "unset"


@needs_openmp
def test_floating_point_errors_raise_on_the_team_as_on_one_thread(threads):
    threads(2)
    x = np.ones(4)
    z = np.zeros(4)

    def divide():
        np.divide(x, z)

    for teams in ["serial", "parallel"]:
        g = eagle.Graph()
        # nodes are dealt out round-robin: on a team of 2 the dividing ones run on the worker
        for k in range(4):
            g.add_node(opaque(divide if k % 2 else (lambda: None), writes={f"a{k}": np.zeros(1)}),
                       name=f"n{k}")
        g.build(cpu=eagle.CpuOptions(teams=teams))
        with np.errstate(divide="raise"):
            with pytest.raises(FloatingPointError):
                g.launch(3)
        with np.errstate(divide="ignore"):
            g.launch(1)                              # the caller ignores it: so does every node
