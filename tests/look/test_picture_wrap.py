"""A stage wider than the terminal wraps onto continuation rows (``render(..., width=)``,
``print(g)`` with the terminal's width, 80 columns when unknown), and a picture that fits
is drawn exactly as without a width."""
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eagle
import eagle.kernels as ek
from eagle.look.picture import render
from eagle.graph import native, opaque

TWELVE_BOXES = ["<src>"] + [f"[n{k}]" for k in range(12)] + ["<sum>"]
TWELVE_EDGES = [(0, k + 1, "x") for k in range(12)] + [(k + 1, 13, f"y{k}") for k in range(12)]
TWELVE_STAGES = [[0], list(range(1, 13)), [13]]
TWELVE_HEADER = "eagle.Graph 14 nodes · 1 group · backend: cpu"
TWELVE_NOTES = ["serial", "work_share", "serial"]


def test_a_twelve_node_stage_wraps_at_80_columns():
    got = render(TWELVE_HEADER, TWELVE_STAGES, TWELVE_BOXES, TWELVE_EDGES, TWELVE_NOTES, width=80)
    assert got == """\
eagle.Graph 14 nodes · 1 group · backend: cpu
stage 0 serial      ┌───────┐
                    │ <src> │
                    └───────┘
stage 1 work_share  ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐
                    │ [n0]  │   │ [n1]  │   │ [n2]  │   │ [n3]  │   │ [n4]  │
                    └───────┘   └───────┘   └───────┘   └───────┘   └───────┘
                    ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐
                    │ [n5]  │   │ [n6]  │   │ [n7]  │   │ [n8]  │   │ [n9]  │
                    └───────┘   └───────┘   └───────┘   └───────┘   └───────┘
                    ┌───────┐   ┌───────┐
                    │ [n10] │   │ [n11] │
                    └───────┘   └───────┘
                    [n0], [n1], [n2], [n3], [n4], [n5], [n6], [n7], [n8], [n9],
                        [n10], [n11] ◀ x from <src>
                    <sum> ◀ y0 from [n0], y1 from [n1], y2 from [n2],
                        y3 from [n3], y4 from [n4], y5 from [n5], y6 from [n6],
                        y7 from [n7], y8 from [n8], y9 from [n9],
                        y10 from [n10], y11 from [n11]
stage 2 serial      ┌───────┐
                    │ <sum> │
                    └───────┘"""
    assert max(map(len, got.splitlines())) <= 80


def test_without_a_width_the_stage_stays_one_row():
    got = render(TWELVE_HEADER, TWELVE_STAGES, TWELVE_BOXES, TWELVE_EDGES, TWELVE_NOTES)
    (row,) = [line for line in got.splitlines() if line.startswith("stage 1")]
    assert row.count("┌───┴───┐") == 12  # one row, the edges drawn
    assert render(TWELVE_HEADER, TWELVE_STAGES, TWELVE_BOXES, TWELVE_EDGES, TWELVE_NOTES,
                  width=1000) == got


def test_the_seed_pictures_do_not_change_at_80_columns():
    args = ([[0, 1], [2]], ["<l>", "<r>", "<join>"], [(0, 2, "a"), (1, 2, "b")])
    for notes in (None, ["work_share", "work_share"]):
        assert render("H", *args, notes, width=80) == render("H", *args, notes)


def test_only_the_wide_stage_wraps_and_the_others_keep_their_edges():
    # a chain above and below the wide stage still draws its edges
    boxes = ["<a>", "<b>"] + [f"[w{k}]" for k in range(12)] + ["<c>", "<d>"]
    edges = [(0, 1, "p")] + [(1, 2 + k, None) for k in range(12)] + [(14, 15, "q")]
    stages = [[0], [1], list(range(2, 14)), [14], [15]]
    got = render("H", stages, boxes, edges, width=60)
    lines = got.splitlines()
    assert max(map(len, lines)) <= 60
    stripped = [line.strip() for line in lines]
    assert "p" in stripped and "q" in stripped   # the drawn edges' labels
    assert "[w0], [w1]," in got and "◀ after <b>" in got
    assert sum(line.count("┌───────┐") for line in lines) == 12


def test_a_box_wider_than_the_width_gets_its_own_row():
    boxes = ["<" + "n" * 90 + ">", "<b>", "<c>"]
    got = render("H", [[0, 1, 2]], boxes, [], width=80)
    tops = [line for line in got.splitlines() if "┌" in line]
    assert len(tops) == 2 and tops[1].count("┐") == 2


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_graph_wraps_without_losing_a_node_or_an_edge(data):
    n = data.draw(st.integers(1, 14))
    stage_of = [0]
    for _ in range(n - 1):
        stage_of.append(data.draw(st.integers(0, stage_of[-1] + 1)))
    stages = [[i for i in range(n) if stage_of[i] == s] for s in range(max(stage_of) + 1)]
    boxes = [f"<{'x' * data.draw(st.integers(1, 12))}{i}>" for i in range(n)]
    edges = [(i, j, data.draw(st.sampled_from(["a", "b", None])))
             for i in range(n) for j in range(n) if stage_of[i] < stage_of[j] and data.draw(st.booleans())]
    width = data.draw(st.integers(30, 120))
    got = render("H", stages, boxes, edges, width=width)
    for text in boxes:
        assert got.count(f"│ {text} ") == 1
    assert render("H", stages, boxes, edges, width=10**6) == render("H", stages, boxes, edges)


def test_print_g_wraps_at_the_terminal_width(monkeypatch):
    x = np.arange(12.0)
    outs = [np.zeros(12) for _ in range(12)]
    g = eagle.Graph()
    g.add_group([native(ek.scale(float(k)), reads={"x": x}, writes={f"y{k}": outs[k]})
                 for k in range(12)], names=[f"node{k}" for k in range(12)])
    g.add_node(opaque(lambda: None, reads={f"y{k}": outs[k] for k in range(12)}), name="sum")
    monkeypatch.setenv("COLUMNS", "80")
    narrow = str(g)
    # the header is one line whatever its length; the stage rows fit the terminal
    assert max(map(len, narrow.splitlines()[1:])) <= 80 and "│ [node11]  │" in narrow
    monkeypatch.setenv("COLUMNS", "400")
    wide = str(g)
    assert wide.splitlines()[1].count("┌─") == 12 and narrow.splitlines()[1].count("┌─") < 12


# ---- The picture (str(g)) with names whose display width is not their length:
# wide (CJK, emoji) characters take two terminal columns, combining accents none.
# Every box must still close in one column on its three lines.

def columns(line: str) -> int:
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in line)


def box_edges(line: str, corner: str) -> list[int]:
    """Display columns of each box's right border on a line ('┐', '│' or '┘')."""
    out, col = [], 0
    for c in line:
        if c == corner:
            out.append(col)
        col += 0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
    return out


@pytest.mark.parametrize("name", ["節点節点", "e\u0301te\u0301", "🦅 eagle", "ｆｕｌｌ"])
def test_boxes_close_in_one_column_whatever_the_display_width_of_the_names(name):
    g = eagle.Graph()
    x = np.zeros(2)
    g.add_node(opaque(lambda: None, writes={"x": x}), name=name)
    g.add_node(opaque(lambda: None, writes={"y": np.zeros(1)}), name="ab")
    g.add_node(opaque(lambda: None, reads={"x": x}), name="reader")
    lines = str(g).split("\n")
    tops = [k for k, ln in enumerate(lines) if "┌" in ln]
    assert tops
    for k in tops:
        top, mid, bottom = lines[k], lines[k + 1], lines[k + 2]
        rights_top = [c for c in box_edges(top, "┐")]
        rights_bottom = [c for c in box_edges(bottom, "┘")]
        rights_mid = [c for c in box_edges(mid, "│")][1::2]   # each box's second '│'
        assert rights_top == rights_bottom == rights_mid, "\n".join(lines[k:k + 3])
    assert name in str(g)
