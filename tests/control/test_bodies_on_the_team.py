"""A control node whose stage is on the team runs its bodies on that team: every thread
enters the node, thread 0 decides each iteration, split body nodes are divided among the
threads (csrc/cpu/plan.h, control.c). Against the Python control flow they stand for, on 2 and 3
threads (teams="parallel" puts every stage on the team)."""
from __future__ import annotations

import numpy as np
import pytest

import eagle
import eagle.kernels as ek
from eagle.graph import Graph, if_else, native, normal, opaque, ufunc, while_loop
from eagle.observe import progress as _progress


@pytest.fixture(autouse=True)
def _restore_threads():
    before = eagle.get_num_threads()
    yield
    eagle.set_num_threads(before)


def newton(n):
    x = np.linspace(0.5, 1e4, n)
    y, t, res = np.empty(n), np.empty(n), np.empty(n)
    more, counter = np.ones(1, bool), np.zeros(1, np.int64)
    body = Graph()
    body.add_node(ufunc(np.divide, {"x": x}, {"y": y}, out={"t": t}), "quot")
    body.add_node(ufunc(np.add, {"y": y}, {"t": t}, out={"y": y}), "sum")
    body.add_node(ufunc(np.multiply, {"y": y}, 0.5, out={"y": y}), "half")
    body.add_node(ufunc(np.multiply, {"y": y}, {"y": y}, out={"r": res}), "square")

    def residual():
        more[0] = bool(np.any(np.abs(res - x) > 1e-9))
        counter[0] += 1
    body.add_node(opaque(residual, reads={"r": res, "x": x}, writes={"more": more, "k": counter}), "more")
    g = Graph()

    def start():
        np.add(x, 1.0, out=x)
        y[:] = x
        more[0] = True
    g.add_node(opaque(start, writes={"x": x, "y": y, "more": more}), "start")
    g.add_node(while_loop({"more": more}, body, max_iterations=200), "newton")
    return g, x, y, counter


@pytest.mark.parametrize("threads", [2, 3])
def test_newton_on_the_team_matches_python(threads):
    eagle.set_num_threads(threads)
    g, x, y, counter = newton(1001)
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    assert "team 1 " not in str(g.plan()).split("capacity")[0]
    xo, yo = x.copy(), y.copy()
    g.launch(3)
    iters = 0
    for _ in range(3):
        np.add(xo, 1.0, out=xo)
        yo[:] = xo
        more = True
        while more:
            t = xo / yo
            yo[:] = (yo + t) * 0.5
            more = bool(np.any(np.abs(yo * yo - xo) > 1e-9))
            iters += 1
    assert counter[0] == iters > 3
    np.testing.assert_array_equal(y, yo)


def test_a_split_body_node_runs_on_several_threads():
    eagle.set_num_threads(2)
    n = 4096
    x, y = np.ones(n), np.zeros(n)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(native(ek.axpy(2.0), reads={"x": x}, writes={"y": y}), "axpy")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 5), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    with eagle.profile() as prof:
        g.launch(2)
    np.testing.assert_array_equal(y, 20.0)
    per_thread = {r.node for r in prof.stats(per_thread=True)}
    assert {"loop/axpy [thread 0]", "loop/axpy [thread 1]"} <= per_thread
    rows = {r.node: r for r in prof.stats()}
    # one call per iteration, however many threads took part in it
    assert rows["loop/axpy"].count == 10 and rows["loop/axpy"].threads == 2
    assert rows["loop/dec"].count == 10 and rows["loop/dec"].threads == 1


def nested(threads, teams):
    """while outer: flag := outer is odd; if flag: (while inner: x += 1; y += 2x; inner -= 1)
    else: y *= 0.5 (a ufunc) and x := y (a native copy); outer -= 1."""
    eagle.set_num_threads(threads)
    n = 3001
    x, y = np.arange(n, dtype=float), np.zeros(n)
    outer, inner, flag = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, bool)
    inner_body = Graph()
    inner_body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    inner_body.add_node(native(ek.axpy(2.0), reads={"x": x}, writes={"y": y}), "axpy")
    inner_body.add_node(opaque(lambda: inner.__setitem__(0, inner[0] - 1), writes={"inner": inner}), "dec")
    then = Graph()
    then.add_node(opaque(lambda: inner.__setitem__(0, 3), writes={"inner": inner}), "arm")
    then.add_node(while_loop({"inner": inner}, inner_body), "inner")
    otherwise = Graph()
    otherwise.add_node(ufunc(np.multiply, {"y": y}, 0.5, out={"y": y}), "halve")
    otherwise.add_node(native(ek.copy(), reads={"y": y}, writes={"x": x}), "copy")
    body = Graph()
    body.add_node(opaque(lambda: flag.__setitem__(0, outer[0] % 2 == 1), reads={"outer": outer},
                         writes={"flag": flag}), "test")
    body.add_node(if_else({"flag": flag}, then, otherwise), "branch")
    body.add_node(opaque(lambda: outer.__setitem__(0, outer[0] - 1), writes={"outer": outer}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: outer.__setitem__(0, 4), writes={"outer": outer}), "arm")
    g.add_node(while_loop({"outer": outer}, body, max_iterations=10), "outer")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(2)
    xo, yo = np.arange(n, dtype=float), np.zeros(n)
    for _ in range(2):
        o = 4
        while o:
            if o % 2 == 1:
                for _ in range(3):
                    xo += 1.0
                    yo += 2.0 * xo
            else:
                yo *= 0.5
                xo[:] = yo
            o -= 1
    return (x, y), (xo, yo)


@pytest.mark.parametrize("threads", [2, 3])
def test_nested_while_if_while_on_the_team_matches_python(threads):
    (x, y), (xo, yo) = nested(threads, "parallel")
    np.testing.assert_array_equal(x, xo)
    np.testing.assert_array_equal(y, yo)


def test_nested_on_one_thread_and_on_the_team_agree():
    serial = nested(2, "serial")[0]
    team = nested(2, "parallel")[0]
    for a, b in zip(serial, team):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("threads", [2, 3])
def test_an_error_on_a_worker_names_body_node_loop_and_iteration(threads):
    # three opaque nodes in one body stage are dealt out one per thread; the last raises
    # in iteration 2 (and, with 3 threads, the one before it too: the earlier is reported)
    eagle.set_num_threads(threads)
    left = np.zeros(1, np.int64)
    a, b, c = np.zeros(1), np.zeros(1), np.zeros(1)
    it = [0]

    def boom(what):
        def f():
            if it[0] == 2:
                raise ValueError(what)
        return f
    body = Graph()
    body.add_node(opaque(lambda: None, writes={"a": a}), "quiet")
    body.add_node(opaque(boom("first"), writes={"b": b}), "first")
    body.add_node(opaque(boom("second"), writes={"c": c}), "second")

    def dec():
        left[0] -= 1
        it[0] += 1
    body.add_node(opaque(dec, reads={"a": a, "b": b, "c": c}, writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 5), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    with pytest.raises(ValueError, match="first") as ei:
        g.launch(1)
    note = " ".join(ei.value.__notes__)
    assert "'first'" in note and "'loop'" in note and "iteration 2" in note, note
    assert left[0] == 3
    it[0] = 10
    g.launch(1)          # usable afterwards
    assert left[0] == 0


def test_max_iterations_on_the_team():
    eagle.set_num_threads(2)
    x = np.zeros(1000)
    more = np.ones(1, bool)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(while_loop({"more": more}, body, max_iterations=5), "loop")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    with pytest.raises(RuntimeError, match="'loop' reached max_iterations=5") as ei:
        g.launch(2)
    assert any("replay 0" in n and "'loop'" in n for n in ei.value.__notes__)
    assert (x == 5).all()


def test_random_node_on_the_team_draws_the_replay():
    eagle.set_num_threads(3)
    n = 1000
    z, acc = np.empty(n), np.zeros(n)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(normal({"z": z}, key=7), "draw")
    body.add_node(ufunc(np.add, {"acc": acc}, {"z": z}, out={"acc": acc}), "accumulate")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 3), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    g.launch(2)
    ref = Graph()
    zr = np.empty(n)
    ref.add_node(normal({"z": zr}, key=7), "draw")
    ref.build()
    ref.launch(1)
    z0 = zr.copy()
    ref.launch(1)
    np.testing.assert_array_equal(z, zr)
    np.testing.assert_allclose(acc, 3 * z0 + 3 * zr, rtol=1e-12)


@pytest.mark.parametrize("threads,teams", [(1, "serial"), (2, "parallel")])
def test_progress_is_called_inside_a_long_loop(monkeypatch, threads, teams):
    # one replay whose loop runs ~0.5 s: the executor's signal checks inside the loop call
    # the progress callback (with 0 replays completed, so not from the replay loop)
    import time
    eagle.set_num_threads(threads)
    seen, iterations = [], []

    def call(self, done, its=None):
        seen.append(done)
        iterations.append(its)
    monkeypatch.setattr(_progress.Progress, "__call__", call)
    left = np.zeros(1, np.int64)
    body = Graph()

    def step():
        time.sleep(0.01)
        left[0] -= 1
    body.add_node(opaque(step, writes={"left": left}), "step")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 50), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    # a launch of several replays, then a pause: the signal ticker is asleep (it sleeps
    # ~200 ms after the last launch); the loop's launch(1) must wake it
    warm = Graph()
    warm.add_node(opaque(lambda: None), "nop")
    warm.build().launch(3)
    time.sleep(0.4)
    g.launch(1, progress=True)
    assert left[0] == 0
    assert seen.count(0) >= 2, seen
    # ... with the iterations run so far: a launch that is one long loop moves by them
    its = [k for k in iterations if k is not None]
    assert len(its) >= 2 and its == sorted(its) and 0 < its[-1] <= 50, iterations


RACE = r"""
import numpy as np, eagle
from eagle.graph import Graph, subgraph, while_loop, opaque
eagle.set_num_threads(2)
left = np.zeros(1, np.int64)
for t in range(1500):
    # a body whose last stage is one unsplit node: thread 0 runs it and decides again at once
    b = Graph(); b.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(subgraph(b), "s")
    g.add_node(opaque(lambda: left.__setitem__(0, 2), writes={"left": left}), "arm")
    g.add_node(while_loop({"left": left}, b), "loop")
    g.build(cpu=eagle.CpuOptions(teams="parallel")).launch(1)
print("done", flush=True)
"""


def test_a_body_ending_in_a_node_thread_0_runs_alone_does_not_hang():
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(eagle.__file__))))
    env.pop("OMP_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip() == "done", out.stderr
