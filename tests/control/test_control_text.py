"""The picture, plan() and the profile through control nodes."""
from __future__ import annotations

import numpy as np
import pytest

import eagle
from eagle.graph import Graph, opaque, ufunc, while_loop


def loop_graph():
    x = np.zeros(16)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "step")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 4), writes={"left": left}), "arm")
    g.add_node(while_loop({"left": left}, body, max_iterations=10), "loop")
    return g.build(), x


def test_picture_and_plan_show_the_body_stages():
    g, _ = loop_graph()
    text = str(g)
    assert "{loop}" in text
    # the body is drawn inside the loop's box (tests/look/test_picture_bodies.py)
    assert ("│ {loop}                                      │\n"
            "                    │ while left, ≤ 10 iterations                 │\n"
            "                    │ stage 0 work_share  ┌─────────┐   ┌───────┐ │\n"
            "                    │                     │ (step)  │   │ <dec> │ │\n") in text
    plan = str(g.plan())
    # the loop's stage has its own team choice (auto): its bodies run on its team
    assert "team 1   (auto    )    cost not measured yet   {loop}" in plan
    assert "      stage 0  (step)" in plan


def test_profile_counts_body_nodes_per_iteration():
    g, x = loop_graph()
    with eagle.profile() as prof:
        g.launch(3)
    rows = {r.node: r for r in prof.stats()}
    assert rows["loop"].count == 3 and rows["arm"].count == 3
    assert rows["loop/step"].count == 12 and rows["loop/dec"].count == 12
    assert (x == 12).all()


def hundred_iterations():
    y = np.zeros(64)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(ufunc(np.add, {"y": y}, 1.0, out={"y": y}), "u")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 100), writes={"left": left}), "set")
    g.add_node(while_loop({"left": left}, body), "loop")
    return g.build(), y


def test_a_profile_keeps_every_call_of_a_long_loop():
    # the lanes grow as a loop runs: none of the 600 body calls is dropped (they were sized
    # for 16 iterations, and the table blamed a max_spans far from reached)
    g, y = hundred_iterations()
    with eagle.profile(max_spans=10**7) as prof:
        g.launch(3)
    rows = {r.node: r for r in prof.stats()}
    assert prof.dropped == 0 and (y == 300).all()
    assert rows["set"].count == rows["loop"].count == 3
    assert rows["loop/u"].count == rows["loop/dec"].count == 300
    assert rows["loop/u"].in_body and not rows["loop"].in_body
    # the shares of the rows outside bodies add up; a body's are shown inside its loop's
    assert sum(r.share for r in rows.values() if not r.in_body) == pytest.approx(1.0)
    text = str(prof)
    assert f"({100 * rows['loop/u'].share:.1f}%)" in text and "add up to 100%" in text
    assert "not kept" not in text


def test_a_loop_past_max_spans_keeps_its_own_row():
    g, _ = hundred_iterations()
    with eagle.profile(max_spans=50) as prof:
        g.launch(3)
    rows = {r.node: r for r in prof.stats()}
    assert rows["loop"].count == 3   # its own calls are kept past the limit
    assert rows["loop/u"].count + rows["loop/dec"].count + rows["set"].count == 50 - 3 + 3
    assert prof.dropped == 600 + 3 - 50
    assert "node calls not kept (max_spans=50" in str(prof)


def test_nested_profiles_keep_their_own_max_spans():
    g, _ = hundred_iterations()
    with eagle.profile(max_spans=20) as outer:
        with eagle.profile() as inner:
            g.launch(2)
    assert inner.dropped == 0 and {r.node: r.count for r in inner.stats()}["loop/u"] == 200
    assert outer.dropped == 400 + 2 - 20
    assert {r.node: r.count for r in outer.stats()}["loop"] == 2


def test_a_team_node_in_a_body_counts_once_per_call():
    # a reorder is timed once per phase: in a body its phases are one call, not four
    from eagle.graph import reorder, subgraph
    n = 64
    key, s = np.arange(n) % 3, np.arange(n, dtype=float)
    body = Graph()
    body.add_node(reorder(key, {"s": s}, n_keys=3), name="k")
    g = Graph()
    g.add_node(subgraph(body), name="body")
    g.build()
    with eagle.profile() as prof:
        g.launch(5)
    rows = {r.node: r.count for r in prof.stats()}
    assert rows["body"] == rows["body/k"] == 5
