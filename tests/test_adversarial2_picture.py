"""The picture (str(g)) with names whose display width is not their length:
wide (CJK, emoji) characters take two terminal columns, combining accents none.
Every box must still close in one column on its three lines."""
from __future__ import annotations

import unicodedata

import numpy as np
import pytest

import eagle
from eagle.graph import opaque


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
