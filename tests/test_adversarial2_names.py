"""Hostile node names: anything that breaks a line or drives a terminal is refused.

str(g) (the picture), to_dot() and _repr_html_ lay names out one per line; a
name holding a line break other than \\n (\\v, \\f, \\x85, U+2028, U+2029), a
NUL (Graphviz cannot draw it) or an escape sequence (ESC) would break them.
"""
from __future__ import annotations

import numpy as np
import pytest

import eagle
from eagle import _dot
from eagle.graph import opaque


@pytest.mark.parametrize("name", ["a\x0bb", "a\x0cb", "a\x85b", "a\u2028b", "a\u2029b", "a\x00b",
                                  "a\x1b[31mred", "a\x7fb", "a\x1cb"])
def test_a_name_with_a_line_break_or_control_character_is_refused_and_nothing_is_recorded(name):
    g = eagle.Graph()
    x = np.zeros(2)
    with pytest.raises(TypeError, match="one-line"):
        g.add_node(opaque(lambda: None, writes={"x": x}), name=name)
    assert list(g.nodes) == []


@pytest.mark.parametrize("name", ['a"b', "a\\", "<b>&amp;</b>", "} -> n0 [", "naïve · 節点 🦅", "with space"])
def test_hostile_but_printable_names_are_kept_and_every_view_draws_them(name):
    g = eagle.Graph()
    x = np.zeros(2)
    g.add_node(opaque(lambda: None, writes={"x": x}), name=name)
    g.add_node(opaque(lambda: None, reads={"x": x}), name="second")
    text = str(g)
    assert name in text and len(text.splitlines()) == len(text.split("\n"))
    if _dot.dot_svg("digraph { a }") is not None:       # Graphviz installed: the DOT text parses
        assert _dot.dot_svg(g.to_dot()) is not None
    html = g._repr_html_()
    assert "<b>" not in html
