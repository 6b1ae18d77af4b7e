"""while_loop: the body runs while cond[0] is true, checked before each iteration, inside
one launch; against the Python ``while`` it stands for, run on copies of the arrays."""
from __future__ import annotations

import os

import numpy as np
import pytest
from ctrl_c import interrupt

import eagle
import eagle.kernels as ek
from eagle.graph import Graph, native, normal, opaque, ufunc, while_loop

def newton_graph(x, y, t, res, more, tol, counter):
    """Per replay: x grows by 1 (a new problem), y := x, then Newton for sqrt(x) until
    every |y*y - x| <= tol. `counter` counts the iterations."""
    body = Graph()
    body.add_node(ufunc(np.divide, {"x": x}, {"y": y}, out={"t": t}), "quot")
    body.add_node(ufunc(np.add, {"y": y}, {"t": t}, out={"y": y}), "sum")
    body.add_node(ufunc(np.multiply, {"y": y}, 0.5, out={"y": y}), "half")
    body.add_node(ufunc(np.multiply, {"y": y}, {"y": y}, out={"r": res}), "square")

    def residual():
        more[0] = bool(np.any(np.abs(res - x) > tol))
        counter[0] += 1
    body.add_node(opaque(residual, reads={"r": res, "x": x}, writes={"more": more, "k": counter}), "more")
    g = Graph()

    def start():
        np.add(x, 1.0, out=x)
        y[:] = x
        more[0] = True
    g.add_node(opaque(start, writes={"x": x, "y": y, "more": more}), "start")
    g.add_node(while_loop({"more": more}, body, max_iterations=200), "newton")
    return g


def newton_python(x, y, tol, replays):
    iters = 0
    for _ in range(replays):
        np.add(x, 1.0, out=x)
        y[:] = x
        more = True
        while more:
            t = x / y
            y[:] = (y + t) * 0.5
            more = bool(np.any(np.abs(y * y - x) > tol))
            iters += 1
    return iters


@pytest.mark.parametrize("threads", [1, 2])
def test_newton_per_replay_matches_python(threads):
    eagle.set_num_threads(threads)
    n = 1000
    x = np.linspace(0.5, 1e4, n)
    y, t, res = np.empty(n), np.empty(n), np.empty(n)
    more, counter = np.ones(1, bool), np.zeros(1, np.int64)
    g = newton_graph(x, y, t, res, more, 1e-9, counter).build()
    xo, yo = x.copy(), y.copy()
    g.launch(3)
    iters = newton_python(xo, yo, 1e-9, 3)
    assert counter[0] == iters > 3
    np.testing.assert_array_equal(y, yo)
    np.testing.assert_allclose(y, np.sqrt(x), rtol=1e-12)


def test_condition_checked_before_the_first_iteration():
    n = 4
    x = np.zeros(n)
    more = np.zeros((), np.int32)    # 0-d integer condition, false: the body never runs
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(while_loop({"more": more}, body), "loop")
    g.build().launch(5)
    assert not x.any()


def test_counter_loop_native_body_nogil_on_two_threads():
    # the condition is a countdown kept by an opaque node; the native body runs nogil
    eagle.set_num_threads(2)
    n = 10_000
    x, y = np.ones(n), np.zeros(n)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(native(ek.axpy(2.0), reads={"x": x}, writes={"y": y}), "axpy")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(native(ek.scale(3.0), reads={"y": y}, writes={"x": x}), "rescale")
    g.add_node(opaque(lambda: left.__setitem__(0, 4), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build()
    xo, yo = x.copy(), y.copy()
    g.launch(3)
    for _ in range(3):
        xo[:] = 3.0 * yo
        for _ in range(4):
            yo += 2.0 * xo
    np.testing.assert_array_equal(x, xo)
    np.testing.assert_array_equal(y, yo)


def test_random_node_in_a_loop_draws_the_replay_of_the_launch():
    # a random node inside a body draws for the replay (g.replays): every iteration of
    # one replay draws the same numbers; the next replay draws the next ones
    eagle.set_num_threads(2)
    n = 256
    z, acc = np.empty(n), np.zeros(n)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(normal({"z": z}, key=7), "draw")
    body.add_node(ufunc(np.add, {"acc": acc}, {"z": z}, out={"acc": acc}), "accumulate")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 3), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build()
    g.launch(2)
    assert g.replays == 2
    ref = Graph()
    zr = np.empty(n)
    ref.add_node(normal({"z": zr}, key=7), "draw")
    ref.build()
    ref.launch(1)
    z0 = zr.copy()
    ref.launch(1)
    np.testing.assert_array_equal(z, zr)             # the last replay's draw
    np.testing.assert_allclose(acc, 3 * z0 + 3 * zr, rtol=1e-12)


def test_max_iterations_names_the_node():
    x = np.zeros(3)
    more = np.ones(1, bool)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(while_loop({"more": more}, body, max_iterations=5), "loop")
    g.build()
    with pytest.raises(RuntimeError, match="'loop' reached max_iterations=5") as ei:
        g.launch(2)
    assert any("replay 0" in n and "'loop'" in n for n in ei.value.__notes__)
    assert (x == 5).all()
    more[0] = False
    g.launch(1)        # usable afterwards
    assert (x == 5).all()


def test_a_loop_ending_at_exactly_max_iterations_is_fine():
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 5), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body, max_iterations=5), "loop")
    g.build().launch(2)
    assert left[0] == 0


def test_an_error_in_a_body_names_the_body_node_and_the_loop():
    left = np.zeros(1, np.int64)
    body = Graph()

    def dec():
        left[0] -= 1
        if left[0] == 1:
            raise ZeroDivisionError("boom")
    body.add_node(opaque(dec, writes={"left": left}), "step")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 3), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    g.build()
    with pytest.raises(ZeroDivisionError) as ei:
        g.launch(1)
    note = " ".join(ei.value.__notes__)
    assert "'step'" in note and "'loop'" in note and "iteration 1" in note


LONG_LOOP = r"""
import sys, time
import numpy as np
import eagle, eagle.kernels as ek
from eagle.graph import Graph, native, opaque, while_loop
eagle.set_num_threads(int(sys.argv[2]))
x, y = np.ones(1000), np.zeros(1000)
more = np.ones(1, bool)
body = Graph()
if sys.argv[1] == "native":
    body.add_node(native(ek.scale(1.0), reads={"x": x}, writes={"y": y}), "step")
else:
    body.add_node(opaque(lambda: None, writes={"y": y}), "step")
g = Graph()
g.add_node(native(ek.copy(), reads={"x": x}, writes={"y": y}), "before")
g.add_node(while_loop({"more": more}, body), "loop")
g.build(cpu=eagle.CpuOptions(teams=sys.argv[3]))
print("ready", flush=True)
try:
    g.launch(1)
except KeyboardInterrupt as e:
    print("interrupted", " ".join(getattr(e, "__notes__", [])), flush=True)
"""


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
@pytest.mark.parametrize("body,threads,teams", [("native", 1, "auto"), ("native", 2, "auto"),
                                                ("opaque", 1, "auto"), ("opaque", 2, "auto"),
                                                ("native", 2, "parallel"), ("opaque", 3, "parallel")])
def test_ctrl_c_stops_an_endless_loop(body, threads, teams):
    # "parallel": the loop runs on the team (every thread in it, thread 0 polling signals)
    res = interrupt(["-c", LONG_LOOP, body, str(threads), teams], after_s=0.3, timeout_s=30)
    assert "interrupted" in res.out, res.err
    assert "'loop'" in res.out
