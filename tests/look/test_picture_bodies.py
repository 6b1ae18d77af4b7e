"""print(g) draws a control node's bodies inside its box (eagle.look.bodies): exact pictures
for small graphs, structural checks for nesting and for the width rule."""
from __future__ import annotations

import re

import numpy as np
import pytest

import eagle
from eagle.graph import if_else, opaque, subgraph, ufunc, while_loop
from eagle.look.bodies import TOO_WIDE
from eagle.look.picture import text_width


@pytest.fixture(autouse=True)
def columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")   # print(g) wraps at the terminal's width


def op(**arrays):
    return opaque(lambda: None, **arrays)


def newton():
    x, r, c = np.zeros(4), np.ones(1), np.ones(1, bool)
    body = eagle.Graph()
    body.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), name="halve")
    body.add_node(op(reads={"x": x}, writes={"r": r}), name="resid")
    g = eagle.Graph()
    g.add_node(op(reads={"x": x}, writes={"x": x}), name="init")
    g.add_node(while_loop({"c": c}, body, max_iterations=10), name="newton")
    g.add_node(op(reads={"x": x}), name="use")
    return g


def test_a_loop_body_is_drawn_inside_its_box():
    assert str(newton()) == """\
eagle.Graph 3 nodes · 0 groups · backend: (not built) · logical size 4 of 4 (bounded by 'x' of 'newton')
stage 0           ┌─────────┐
                  │ <init>  │
                  └────┬────┘
                       x
                       │
stage 1  ┌─────────────┴─────────────┐
         │ {newton}                  │
         │ while c, ≤ 10 iterations  │
         │ stage 0  ┌─────────┐      │
         │          │ (halve) │      │
         │          └────┬────┘      │
         │               x           │
         │               │           │
         │ stage 1  ┌────┴────┐      │
         │          │ <resid> │      │
         │          └─────────┘      │
         └─────────────┬─────────────┘
                       x
                       │
stage 2            ┌───┴───┐
                   │ <use> │
                   └───────┘"""


def test_after_build_the_body_stages_say_how_their_work_is_shared():
    g = newton().build()
    assert str(g) == """\
eagle.Graph 3 nodes · 0 groups · backend: cpu · logical size 4 of 4 (bounded by 'x' of 'newton')
stage 0 work_share              ┌─────────┐
                                │ <init>  │
                                └────┬────┘
                                     x
                                     │
stage 1 work_share  ┌────────────────┴────────────────┐
                    │ {newton}                        │
                    │ while c, ≤ 10 iterations        │
                    │ stage 0 work_share  ┌─────────┐ │
                    │                     │ (halve) │ │
                    │                     └────┬────┘ │
                    │                          x      │
                    │                          │      │
                    │ stage 1 work_share  ┌────┴────┐ │
                    │                     │ <resid> │ │
                    │                     └─────────┘ │
                    └────────────────┬────────────────┘
                                     x
                                     │
stage 2 work_share               ┌───┴───┐
                                 │ <use> │
                                 └───────┘"""


def test_if_else_draws_both_branches_labelled_a_group_and_its_merge_included():
    x, a, b, s, f = np.zeros(4), np.zeros(1), np.zeros(1), np.zeros(1), np.ones(1, bool)
    then = eagle.Graph()
    then.add_group([op(reads={"x": x}, writes={"a": a}), op(reads={"x": x}, writes={"b": b})],
                   names=["p", "q"])
    then.add_node(op(reads={"a": a, "b": b}, writes={"s": s}), name="join")
    otherwise = eagle.Graph()
    otherwise.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), name="halve")
    g = eagle.Graph()
    g.add_node(op(writes={"f": f}), name="tick")
    g.add_node(if_else({"f": f}, then, otherwise), name="branch")
    assert str(g) == """\
eagle.Graph 2 nodes · 0 groups · backend: (not built) · logical size 4 of 4 (bounded by 'x' of 'branch')
stage 0            ┌─────────┐
                   │ <tick>  │
                   └────┬────┘
                        f
                        │
stage 1  ┌──────────────┴──────────────┐
         │ {branch}                    │
         │ if f                        │
         │ stage 0  ┌─────┐   ┌─────┐  │
         │          │ <p> │   │ <q> │  │
         │          └──┬──┘   └──┬──┘  │
         │             a         b     │
         │             └────┬────┘     │
         │ stage 1     ┌────┴────┐     │
         │             │ <join>  │     │
         │             └─────────┘     │
         │ else                        │
         │ stage 0  ┌─────────┐        │
         │          │ (halve) │        │
         │          └─────────┘        │
         └─────────────────────────────┘"""


def test_a_tall_box_beside_a_short_one_both_feeding_a_merge():
    # the short box's edge keeps going down beside the tall one to the routing line
    x, y, out, c = np.zeros(4), np.zeros(4), np.zeros(4), np.ones(1, bool)
    body = eagle.Graph()
    body.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), name="halve")
    body.add_node(op(reads={"x": x}, writes={"c": c}), name="test")
    g = eagle.Graph()
    g.add_group([while_loop({"c": c}, body, max_iterations=5), op(writes={"y": y})], names=["loop", "side"])
    g.add_node(op(reads={"x": x, "y": y}, writes={"out": out}), name="join")
    assert str(g).split("\n", 1)[1] == """\
stage 0  ┌─────────────────────────┐   ┌─────────┐
         │ {loop}                  │   │ <side>  │
         │ while c, ≤ 5 iterations │   └────┬────┘
         │ stage 0  ┌─────────┐    │        │
         │          │ (halve) │    │        │
         │          └────┬────┘    │        │
         │               x         │        │
         │               │         │        │
         │ stage 1  ┌────┴────┐    │        │
         │          │ <test>  │    │        │
         │          └─────────┘    │        │
         └────────────┬────────────┘        │
                      x                     y
                      └──────────┬──────────┘
stage 1                     ┌────┴────┐
                            │ <join>  │
                            └─────────┘"""


def test_a_subgraph_is_captioned_and_a_fused_body_says_so_as_plan_does():
    x = np.zeros(64)
    child = eagle.Graph()
    child.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="inc")
    child.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"x": x}), name="dbl")
    g = eagle.Graph()
    g.add_node(subgraph(child), name="again")
    assert str(g).split("\n", 1)[1] == """\
stage 0  ┌─────────────────────┐
         │ {again}             │
         │ subgraph            │
         │ stage 0  ┌───────┐  │
         │          │ (inc) │  │
         │          └───┬───┘  │
         │              x      │
         │              │      │
         │ stage 1  ┌───┴───┐  │
         │          │ (dbl) │  │
         │          └───────┘  │
         └─────────────────────┘"""
    g.build()
    tile = re.search(r"\[fused 0-1, tile (\d+)\]", "\n".join(g.plan().bodies)).group(1)
    after = str(g)
    assert f"│ stage 0 work_share fused 0-1, tile {tile}  ┌───────┐" in after
    assert f"│ stage 1 work_share fused 0-1, tile {tile}  ┌───┴───┐ │" in after


def nested(depth):
    """A loop in a branch in a loop ...: depth control nodes, the innermost a loop."""
    x = np.zeros(4)
    conds = [np.ones(1, bool) for _ in range(depth)]
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), name="halve")
    g.add_node(op(reads={"x": x}, writes={"c0": conds[0]}), name="check")
    for d in range(depth):
        outer = eagle.Graph()
        outer.add_node(op(writes={f"c{d}": conds[d]}), name=f"arm{d}")
        if d % 2 == 0:
            outer.add_node(while_loop({f"c{d}": conds[d]}, g, max_iterations=3), name=f"loop{d}")
        else:
            outer.add_node(if_else({f"c{d}": conds[d]}, g), name=f"if{d}")
        g = outer
    return g


def depth_of(text, box):
    """How many boxes hold ``box``: the borders left of its text on its line, its own included."""
    lines = [ln for ln in text.split("\n") if f"│ {box}" in ln]
    assert len(lines) == 1, (box, lines)
    return lines[0][:lines[0].index(f"│ {box}")].count("│") + 1


def test_nesting_four_deep_is_drawn_box_in_box():
    text = str(nested(4))
    assert TOO_WIDE not in text
    assert [depth_of(text, b) for b in ("<arm3>", "{if3}", "<arm2>", "{loop2}", "<arm1>", "{if1}",
                                        "<arm0>", "{loop0}", "(halve)", "<check>")] == \
        [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    # each line closes every box it opens: as many borders right of a body node as left
    line = next(ln for ln in text.split("\n") if "│ (halve)" in ln)
    assert line.count("│") == 2 * 5
    assert max(map(text_width, text.split("\n")[1:])) <= 80   # the header stays one line


def test_a_box_whose_bodies_do_not_fit_is_drawn_below_at_full_width():
    g = nested(4).build()   # the stage notes widen every body's margin
    text = str(g)
    lines = text.split("\n")
    assert max(map(text_width, lines[1:])) <= 80
    # {loop2} holds its caption only; it is drawn again under the picture, and so is
    # {loop0}, which does not fit inside that drawing
    assert lines.index("{loop2} in {if3}:") < lines.index("{loop0} in {if1}:")
    assert text.count(TOO_WIDE) == 2
    assert "│ while c2, ≤ 3 iterations" in text
    for box in ("<arm3>", "<arm2>", "<arm1>", "<arm0>", "(halve)", "<check>", "{if1}"):
        assert text.count(f"│ {box}") == 1, box   # every node drawn once, nothing lost
    assert text.count("│ {loop2}") == 2 and text.count("│ {loop0}") == 2   # captioned, then drawn


def test_with_room_nothing_goes_below(monkeypatch):
    g = nested(4).build()
    monkeypatch.setenv("COLUMNS", "200")
    text = str(g)
    assert TOO_WIDE not in text and " in {" not in text
    assert depth_of(text, "(halve)") == 5


def test_a_50_node_body_with_wide_characters_wraps_inside_its_box():
    x, c = np.zeros(4), np.ones(1, bool)
    outs = [np.zeros(1) for _ in range(50)]
    body = eagle.Graph()
    body.add_group([op(reads={"x": x}, writes={f"o{k}": outs[k]}) for k in range(25)],
                   names=[f"n{k}" for k in range(25)])
    for k in range(25, 50):
        body.add_node(op(reads={f"o{k - 25}": outs[k - 25]}, writes={f"o{k}": outs[k]}), name=f"名前{k}")
    g = eagle.Graph()
    g.add_node(op(writes={"x": x, "c": c}), name="起動")
    g.add_node(while_loop({"c": c}, body), name="ループ")
    for build in (False, True):
        if build:
            g.build()
        text = str(g)
        lines = text.split("\n")
        assert max(map(text_width, lines[1:])) <= 80, build
        assert TOO_WIDE not in text
        for k in range(25):
            assert text.count(f"│ <n{k}>") == 1 and text.count(f"│ <名前{k + 25}>") == 1
        # the wrapped body stage's edges are notes, inside the loop's box
        note = next(ln for ln in lines if "<名前25> ◀ o0 from <n0>" in ln)
        assert note.lstrip().startswith("│") and note.rstrip().endswith("│")
        assert "│ {ループ}" in text and "│ while c" in text


def test_a_narrow_terminal_keeps_every_line_inside_it(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    text = str(newton())
    assert max(map(text_width, text.split("\n")[1:])) <= 40   # the header stays one line
    assert TOO_WIDE not in text and "│ (halve)" in text


def test_an_empty_graph_draws_as_empty():
    # the bodies' picture computes its margin before render: no stage row at all
    assert str(eagle.Graph()) == "eagle.Graph 0 nodes · 0 groups · backend: (not built)\n(empty)"
