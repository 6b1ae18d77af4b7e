"""The picture, plan() and the profile through control nodes."""
from __future__ import annotations

import numpy as np

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
