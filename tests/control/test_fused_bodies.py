"""A body's consecutive stages of sample-local nodes fuse by the top level's rules
(eagle/cpu/fusion.py): plan() shows the body's fused run, and it runs tile by tile
(on the control node's team, or on the calling thread) with the unfused plan's and
the sequential oracle's bits, on 1 and 2 threads."""
from __future__ import annotations

import numpy as np
import pytest

import eagle
from eagle.graph import Graph, if_else, opaque, subgraph, ufunc, while_loop


@pytest.fixture(autouse=True)
def _restore_threads():
    before = eagle.get_num_threads()
    yield
    eagle.set_num_threads(before)


N = 5003   # not a multiple of the tile: the last tile is short


def loop_graph(fuse, teams):
    """x <- sqrt(x * 1.0001 + 0.25) - 0.1, k times per replay (a while loop counting k)."""
    x = np.linspace(0.0, 3.0, N)
    t, u = np.empty(N), np.empty(N)
    left, more = np.zeros(1, np.int64), np.ones(1, bool)
    body = Graph()
    body.add_node(ufunc(np.multiply, {"x": x}, 1.0001, out={"t": t}), "scale")
    body.add_node(ufunc(np.add, {"t": t}, 0.25, out={"u": u}), "shift")
    body.add_node(ufunc(np.sqrt, {"u": u}, out={"t": t}), "root")
    body.add_node(ufunc(np.subtract, {"t": t}, 0.1, out={"x": x}), "back")

    def count():
        left[0] -= 1
        more[0] = left[0] > 0
    body.add_node(opaque(count, reads={"x": x}, writes={"left": left, "more": more}), "count")
    g = Graph()

    def start():
        left[0] = 4
        more[0] = True
    g.add_node(opaque(start, writes={"left": left, "more": more}), "start")
    g.add_node(while_loop({"more": more}, body, max_iterations=50), "loop")
    g.build(cpu=eagle.CpuOptions(teams=teams, fuse=fuse))
    return g, x


def oracle_x(replays):
    x = np.linspace(0.0, 3.0, N)
    for _ in range(replays):
        for _ in range(4):
            x = np.sqrt(x * 1.0001 + 0.25) - 0.1
    return x


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("teams", ["auto", "parallel"])
@pytest.mark.parametrize("tile", [True, 256])
def test_a_loop_body_chain_fuses_and_keeps_the_bits(threads, teams, tile):
    eagle.set_num_threads(threads)
    g, x = loop_graph(tile, teams)
    text = str(g.plan())
    body = text.split("bodies")[1]
    assert "stage 0  (scale)  [fused 0-3, tile" in body, body
    assert "(count)  [" not in body
    if tile == 256:
        assert "tile 256]" in body
    g_off, x_off = loop_graph(False, teams)
    assert "fused" not in str(g_off.plan()).split("bodies")[1]
    g.launch(3)
    g_off.launch(3)
    assert np.array_equal(x, x_off)
    assert np.array_equal(x, oracle_x(3))


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_runs_in_if_else_and_nested_subgraph_bodies(threads):
    eagle.set_num_threads(threads)
    n = 4099
    a, b, c = np.linspace(-2, 2, n), np.empty(n), np.empty(n)
    flag = np.ones(1, bool)
    inner = Graph()
    inner.add_node(ufunc(np.multiply, {"a": a}, {"a": a}, out={"b": b}), "sq")
    inner.add_node(ufunc(np.add, {"b": b}, 1.0, out={"c": c}), "inc")
    then = Graph()
    then.add_node(subgraph(inner), "inner")
    then.add_node(ufunc(np.multiply, {"c": c}, 0.5, out={"a": a}), "halve")
    other = Graph()
    other.add_node(ufunc(np.negative, {"a": a}, out={"b": b}), "neg")
    other.add_node(ufunc(np.exp, {"b": b}, out={"a": a}), "exp")
    g = Graph()

    def flip():
        flag[0] = not flag[0]
    g.add_node(opaque(flip, writes={"flag": flag}), "flip")
    g.add_node(if_else({"flag": flag}, then, other), "branch")
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    body = str(g.plan()).split("bodies")[1]
    assert body.count("[fused 0-1, tile") == 4, body   # two rows each: otherwise, and inner in then
    assert "(sq)  [fused" in body and "(neg)  [fused" in body and "(halve)  [" not in body
    ao, fo = a.copy(), True
    g.launch(4)
    for _ in range(4):
        fo = not fo
        if fo:
            ao = (ao * ao + 1.0) * 0.5
        else:
            ao = np.exp(-ao)
    assert np.array_equal(a, ao)
