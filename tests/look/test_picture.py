"""Golden-output tests for the text picture of a graph (``eagle.look.picture``).

Each test pins the exact picture, character for character.  The module is
pure Python; it is loaded from its file when the ``eagle`` package itself
cannot be imported (e.g. while the compiled parts are not built).
"""

import importlib.util
import pathlib

import pytest


def _load_picture():
    try:
        from eagle.look import picture as _picture
        return _picture
    except Exception:  # package not importable yet: load the file directly
        path = pathlib.Path(__file__).resolve().parents[2] / "eagle" / "look" / "picture.py"
        spec = importlib.util.spec_from_file_location("_eagle_picture_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


picture = _load_picture()
render = picture.render

SEED_ARGS = ([[0, 1], [2]], ["<l>", "<r>", "<join>"], [(0, 2, "a"), (1, 2, "b")])


# -- the seed page (the spec) ------------------------------------------------

def test_seed_before_build():
    got = render("eagle.Graph 3 nodes · 1 group · backend: (not built)", *SEED_ARGS)
    assert got == (
        "eagle.Graph 3 nodes · 1 group · backend: (not built)\n"
        "stage 0  ┌─────┐   ┌─────┐\n"
        "         │ <l> │   │ <r> │\n"
        "         └──┬──┘   └──┬──┘\n"
        "            a         b\n"
        "            └────┬────┘\n"
        "stage 1     ┌────┴────┐\n"
        "            │ <join>  │\n"
        "            └─────────┘"
    )


def test_seed_after_build():
    got = render("eagle.Graph 3 nodes · 1 group · backend: cpu", *SEED_ARGS,
                 stage_notes=["work_share", "work_share"])
    assert got == (
        "eagle.Graph 3 nodes · 1 group · backend: cpu\n"
        "stage 0 work_share  ┌─────┐   ┌─────┐\n"
        "                    │ <l> │   │ <r> │\n"
        "                    └──┬──┘   └──┬──┘\n"
        "                       a         b\n"
        "                       └────┬────┘\n"
        "stage 1 work_share     ┌────┴────┐\n"
        "                       │ <join>  │\n"
        "                       └─────────┘"
    )


def test_stage_notes_none_same_as_absent():
    header = "eagle.Graph 3 nodes · 1 group · backend: (not built)"
    assert render(header, *SEED_ARGS, stage_notes=None) == render(header, *SEED_ARGS)


# -- general rules --------------------------------------------------------------

def test_empty_graph():
    assert render("eagle.Graph 0 nodes · 0 groups · backend: (not built)", [], [], []) == (
        "eagle.Graph 0 nodes · 0 groups · backend: (not built)\n(empty)")
    assert render("H", [[]], [], []) == "H\n(empty)"


@pytest.mark.parametrize("text", ["x", "<l>", "<join>", "[axpy]", "<" + "y" * 40 + ">"])
def test_boxes_have_odd_width_and_a_center(text):
    lines = render("H", [[0]], [text], []).split("\n")
    top, middle, bottom = lines[1][9:], lines[2][9:], lines[3][9:]
    assert len(top) == len(middle) == len(bottom)
    assert len(top) % 2 == 1
    assert middle == "│ " + text + " " * (len(top) - len(text) - 4) + " │"


def test_no_trailing_whitespace_and_no_final_newline():
    got = render("H", [[0, 1, 2], [3, 4], [5]], ["<a>", "<b>", "<c>", "<d>", "<e>", "<f>"],
                 [(0, 3, "a"), (1, 3, None), (2, 4, "c"), (3, 5, "d"), (0, 5, "e")])
    assert not got.endswith("\n")
    for line in got.split("\n"):
        assert line == line.rstrip()


def test_duplicate_edges_are_shown_once():
    once = render("H", [[0], [1]], ["<p>", "<c>"], [(0, 1, "a")])
    twice = render("H", [[0], [1]], ["<p>", "<c>"], [(0, 1, "a"), (0, 1, "a")])
    assert once == twice


def test_data_wins_over_ordering_on_the_same_edge():
    data = render("H", [[0], [1]], ["<p>", "<c>"], [(0, 1, "a")])
    both = render("H", [[0], [1]], ["<p>", "<c>"], [(0, 1, None), (0, 1, "a")])
    assert both == data


@pytest.mark.parametrize("stages, boxes, edges", [
    ([[0], [1]], ["<a>", "<b>"], [(1, 0, "x")]),       # goes backwards
    ([[0, 1]], ["<a>", "<b>"], [(0, 1, "x")]),          # same stage
    ([[0]], ["<a>", "<b>"], []),                        # node 1 in no stage
    ([[0, 0]], ["<a>"], []),                            # node twice
])
def test_invalid_input_is_rejected(stages, boxes, edges):
    with pytest.raises(ValueError):
        render("H", stages, boxes, edges)


# -- shapes ------------------------------------------------------------------------

def test_chain_of_four():
    """One node per stage: straight lines, label under each producer."""
    got = render('eagle.Graph 4 nodes · 0 groups · backend: (not built)',
                 [[0], [1], [2], [3]],
                 ['[load]', '<scale>', '[axpy]', '<store>'],
                 [(0, 1, 'x'), (1, 2, 'y'), (2, 3, 'z')])
    assert got == """\
eagle.Graph 4 nodes · 0 groups · backend: (not built)
stage 0  ┌─────────┐
         │ [load]  │
         └────┬────┘
              x
              │
stage 1  ┌────┴────┐
         │ <scale> │
         └────┬────┘
              y
              │
stage 2  ┌────┴────┐
         │ [axpy]  │
         └────┬────┘
              z
              │
stage 3  ┌────┴────┐
         │ <store> │
         └─────────┘"""


def test_fan_out_same_array():
    """One producer, three consumers reading the same array: one split line, label once."""
    got = render('eagle.Graph 4 nodes · 1 group · backend: (not built)',
                 [[0], [1, 2, 3]],
                 ['<src>', '<a>', '<b>', '<c>'],
                 [(0, 1, 'x'), (0, 2, 'x'), (0, 3, 'x')])
    assert got == """\
eagle.Graph 4 nodes · 1 group · backend: (not built)
stage 0           ┌───────┐
                  │ <src> │
                  └───┬───┘
                      x
            ┌─────────┼─────────┐
stage 1  ┌──┴──┐   ┌──┴──┐   ┌──┴──┐
         │ <a> │   │ <b> │   │ <c> │
         └─────┘   └─────┘   └─────┘"""


def test_fan_out_different_arrays():
    """A split whose branches differ: labels sit above each consumer;
    the ordering-only branch is dotted."""
    got = render('eagle.Graph 4 nodes · 1 group · backend: (not built)',
                 [[0], [1, 2, 3]],
                 ['<src>', '<a>', '<b>', '<c>'],
                 [(0, 1, 'x'), (0, 2, 'y'), (0, 3, None)])
    assert got == """\
eagle.Graph 4 nodes · 1 group · backend: (not built)
stage 0           ┌───────┐
                  │ <src> │
                  └───┬───┘
                      │
            ┌─────────┼┄┄┄┄┄┄┄┄┄┐
            x         y         ┆
stage 1  ┌──┴──┐   ┌──┴──┐   ┌──┴──┐
         │ <a> │   │ <b> │   │ <c> │
         └─────┘   └─────┘   └─────┘"""


def test_fan_in_three():
    """Three producers merge into one consumer centered under the merge point."""
    got = render('eagle.Graph 4 nodes · 1 group · backend: (not built)',
                 [[0, 1, 2], [3]],
                 ['<a>', '<b>', '<c>', '<sum>'],
                 [(0, 3, 'a'), (1, 3, 'b'), (2, 3, 'c')])
    assert got == """\
eagle.Graph 4 nodes · 1 group · backend: (not built)
stage 0  ┌─────┐   ┌─────┐   ┌─────┐
         │ <a> │   │ <b> │   │ <c> │
         └──┬──┘   └──┬──┘   └──┬──┘
            a         b         c
            └─────────┼─────────┘
stage 1           ┌───┴───┐
                  │ <sum> │
                  └───────┘"""


def test_wide_stage():
    """Nine nodes in one stage: the row is never wrapped."""
    got = render('eagle.Graph 10 nodes · 1 group · backend: cpu',
                 [[0, 1, 2, 3, 4, 5, 6, 7, 8], [9]],
                 ['<n0>', '<n1>', '<n2>', '<n3>', '<n4>', '<n5>', '<n6>', '<n7>', '<n8>', '<all>'],
                 [(0, 9, 'v0'), (1, 9, 'v1'), (2, 9, 'v2'), (3, 9, 'v3'), (4, 9, 'v4'), (5, 9, 'v5'), (6, 9, 'v6'), (7, 9, 'v7'), (8, 9, 'v8')],
                 stage_notes=['work_share', 'serial'])
    assert got == """\
eagle.Graph 10 nodes · 1 group · backend: cpu
stage 0 work_share  ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐   ┌───────┐
                    │ <n0>  │   │ <n1>  │   │ <n2>  │   │ <n3>  │   │ <n4>  │   │ <n5>  │   │ <n6>  │   │ <n7>  │   │ <n8>  │
                    └───┬───┘   └───┬───┘   └───┬───┘   └───┬───┘   └───┬───┘   └───┬───┘   └───┬───┘   └───┬───┘   └───┬───┘
                        v0          v1          v2          v3          v4          v5          v6          v7          v8
                        └───────────┴───────────┴───────────┴───────────┼───────────┴───────────┴───────────┴───────────┘
stage 1 serial                                                      ┌───┴───┐
                                                                    │ <all> │
                                                                    └───────┘"""


def test_long_names():
    """40-character names: boxes grow, the label is centered on the edge."""
    got = render('eagle.Graph 2 nodes · 0 groups · backend: (not built)',
                 [[0], [1]],
                 ['<xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx>', '[kernel_with_a_rather_long_name_for_test]'],
                 [(0, 1, 'a_long_array_name')])
    assert got == """\
eagle.Graph 2 nodes · 0 groups · backend: (not built)
stage 0  ┌─────────────────────────────────────────────┐
         │ <xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx>  │
         └──────────────────────┬──────────────────────┘
                        a_long_array_name
                                │
stage 1   ┌─────────────────────┴─────────────────────┐
          │ [kernel_with_a_rather_long_name_for_test] │
          └───────────────────────────────────────────┘"""


def test_skip_stage():
    """Stage 0 -> stage 2 beside a stage-1 node: written as a note beside the consumer's row."""
    got = render('eagle.Graph 4 nodes · 0 groups · backend: (not built)',
                 [[0], [1, 2], [3]],
                 ['<a>', '<b>', '<m>', '<c>'],
                 [(0, 1, 'p'), (0, 2, 'x'), (1, 3, 'q'), (0, 3, 'r')])
    assert got == """\
eagle.Graph 4 nodes · 0 groups · backend: (not built)
stage 0       ┌─────┐
              │ <a> │
              └──┬──┘
                 │
            ┌────┴────┐
            p         x
stage 1  ┌──┴──┐   ┌──┴──┐
         │ <b> │   │ <m> │
         └──┬──┘   └─────┘
            q
            │
stage 2  ┌──┴──┐
         │ <c> │   <c> ◀ r from <a>
         └─────┘"""


def test_order_and_multi_label():
    """Two arrays on one edge are joined with a comma; an ordering-only edge is dotted."""
    got = render('eagle.Graph 3 nodes · 0 groups · backend: (not built)',
                 [[0, 1], [2]],
                 ['<w>', '<r>', '<j>'],
                 [(0, 2, 'a'), (0, 2, 'b'), (1, 2, None)])
    assert got == """\
eagle.Graph 3 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐   ┌─────┐
         │ <w> │   │ <r> │
         └──┬──┘   └──┬──┘
           a,b        ┆
            └────┬┄┄┄┄┘
stage 1       ┌──┴──┐
              │ <j> │
              └─────┘"""


def test_diamond():
    """1 -> 2 -> 1: a split, then a merge."""
    got = render('eagle.Graph 4 nodes · 1 group · backend: (not built)',
                 [[0], [1, 2], [3]],
                 ['<top>', '<left>', '<right>', '<bottom>'],
                 [(0, 1, 'x'), (0, 2, 'x'), (1, 3, 'y'), (2, 3, 'z')])
    assert got == """\
eagle.Graph 4 nodes · 1 group · backend: (not built)
stage 0          ┌───────┐
                 │ <top> │
                 └───┬───┘
                     x
              ┌──────┴──────┐
stage 1  ┌────┴────┐   ┌────┴────┐
         │ <left>  │   │ <right> │
         └────┬────┘   └────┬────┘
              y             z
              └──────┬──────┘
stage 2        ┌─────┴─────┐
               │ <bottom>  │
               └───────────┘"""


def test_independent_and_ordering_only():
    """Stages that exist only because of ordering edges; <b> has no edges at all."""
    got = render('eagle.Graph 4 nodes · 0 groups · backend: (not built)',
                 [[0, 1], [2], [3]],
                 ['<a>', '<b>', '<c>', '<d>'],
                 [(0, 2, None), (2, 3, None)])
    assert got == """\
eagle.Graph 4 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐   ┌─────┐
         │ <a> │   │ <b> │
         └──┬──┘   └─────┘
            ┆
            ┆
stage 1  ┌──┴──┐
         │ <c> │
         └──┬──┘
            ┆
            ┆
stage 2  ┌──┴──┐
         │ <d> │
         └─────┘"""


def test_fan_out_into_merge_falls_back():
    """p1 fans out and c2 merges: p1 -> c2 cannot be drawn without ambiguity, so it is a note."""
    got = render('eagle.Graph 4 nodes · 0 groups · backend: (not built)',
                 [[0, 1], [2, 3]],
                 ['<p1>', '<p2>', '<c1>', '<c2>'],
                 [(0, 2, 'a'), (0, 3, 'a'), (1, 3, 'b')])
    assert got == """\
eagle.Graph 4 nodes · 0 groups · backend: (not built)
stage 0  ┌───────┐   ┌───────┐
         │ <p1>  │   │ <p2>  │
         └───┬───┘   └───┬───┘
             a           b
             │           │
stage 1  ┌───┴───┐   ┌───┴───┐
         │ <c1>  │   │ <c2>  │   <c2> ◀ a from <p1>
         └───────┘   └───────┘"""


def test_crossing_falls_back():
    """p2 -> c2 would cross the merge p1,p3 -> c1: it becomes a note, <p2> has no outgoing line."""
    got = render('eagle.Graph 5 nodes · 0 groups · backend: (not built)',
                 [[0, 1, 2], [3, 4]],
                 ['<p1>', '<p2>', '<p3>', '<c1>', '<c2>'],
                 [(0, 3, 'a'), (2, 3, 'c'), (1, 4, 'b')])
    assert got == """\
eagle.Graph 5 nodes · 0 groups · backend: (not built)
stage 0  ┌───────┐   ┌───────┐   ┌───────┐
         │ <p1>  │   │ <p2>  │   │ <p3>  │
         └───┬───┘   └───────┘   └───┬───┘
             a                       c
             └───────────┬───────────┘
stage 1              ┌───┴───┐   ┌───────┐
                     │ <c1>  │   │ <c2>  │   <c2> ◀ b from <p2>
                     └───────┘   └───────┘"""


def test_stacked_labels():
    """Labels that would touch are put on separate lines."""
    got = render('eagle.Graph 3 nodes · 0 groups · backend: (not built)',
                 [[0, 1], [2]],
                 ['<l>', '<r>', '<j>'],
                 [(0, 2, 'alpha_beta'), (1, 2, 'gamma_delta')])
    assert got == """\
eagle.Graph 3 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐   ┌─────┐
         │ <l> │   │ <r> │
         └──┬──┘   └──┬──┘
        alpha_beta    │
            │    gamma_delta
            └────┬────┘
stage 1       ┌──┴──┐
              │ <j> │
              └─────┘"""


def test_label_without_room():
    """A label wider than the gap between the lines: the line stays, the label becomes a note."""
    got = render('eagle.Graph 3 nodes · 0 groups · backend: (not built)',
                 [[0, 1], [2]],
                 ['<l>', '<r>', '<j>'],
                 [(0, 2, 'a_very_long_array_name_here'), (1, 2, 'b')])
    assert got == """\
eagle.Graph 3 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐   ┌─────┐
         │ <l> │   │ <r> │
         └──┬──┘   └──┬──┘
            │         b
            └────┬────┘
stage 1       ┌──┴──┐
              │ <j> │   <j> ◀ a_very_long_array_name_here from <l>
              └─────┘"""


def test_pushed_consumer_jogs():
    """A consumer pushed right by an unconnected box is reached with a jog."""
    got = render('eagle.Graph 3 nodes · 0 groups · backend: (not built)',
                 [[0], [1, 2]],
                 ['<p>', '<u>', '<c>'],
                 [(0, 2, 'a')])
    assert got == """\
eagle.Graph 3 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐
         │ <p> │
         └──┬──┘
            a
            └─────────┐
stage 1  ┌─────┐   ┌──┴──┐
         │ <u> │   │ <c> │
         └─────┘   └─────┘"""


def test_several_notes_in_a_row():
    """More notes than box lines: the row grows, outgoing lines continue through it."""
    got = render('eagle.Graph 6 nodes · 0 groups · backend: (not built)',
                 [[0], [1], [2, 3, 4], [5]],
                 ['<a>', '<b>', '<c>', '<d>', '<e>', '<f>'],
                 [(0, 1, 'x'), (0, 2, 'p'), (0, 3, 'q'), (0, 4, 'r'), (1, 3, 's'), (3, 5, 't')])
    assert got == """\
eagle.Graph 6 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐
         │ <a> │
         └──┬──┘
            x
            │
stage 1  ┌──┴──┐
         │ <b> │
         └──┬──┘
            s
            └─────────┐
stage 2  ┌─────┐   ┌──┴──┐   ┌─────┐
         │ <c> │   │ <d> │   │ <e> │   <c> ◀ p from <a>
         └─────┘   └──┬──┘   └─────┘   <d> ◀ q from <a>
                      │                <e> ◀ r from <a>
                      t
                      │
stage 3            ┌──┴──┐
                   │ <f> │
                   └─────┘"""


def test_duplicate_box_text():
    """Boxes with the same text are told apart by index in notes."""
    got = render('eagle.Graph 3 nodes · 0 groups · backend: (not built)',
                 [[0], [1], [2]],
                 ['<f>', '<f>', '<f>'],
                 [(0, 1, None), (0, 2, 'a')])
    assert got == """\
eagle.Graph 3 nodes · 0 groups · backend: (not built)
stage 0  ┌─────┐
         │ <f> │
         └──┬──┘
            ┆
            ┆
stage 1  ┌──┴──┐
         │ <f> │
         └─────┘
stage 2  ┌─────┐
         │ <f> │   <f>#2 ◀ a from <f>#0
         └─────┘"""


def test_an_in_place_update_is_drawn_with_its_array_name():
    """The graph's own picture: the edge into a node that updates ``w`` is solid and says ``w``."""
    import numpy as np

    import eagle
    from eagle.graph import opaque, ufunc

    z, vol, drift, w = np.ones(4), np.full(4, 2.0), np.ones(4), np.zeros(4)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"z": z}, vol, out={"w": w}), name="diffuse")
    g.add_node(ufunc(np.add, {"w": w}, drift, out={"w": w}), name="drift")
    g.add_node(opaque(lambda: None, updates={"w": w}), name="clip")
    body = str(g).splitlines()[1:]
    assert body == [
        "stage 0  ┌───────────┐",
        "         │ (diffuse) │",
        "         └─────┬─────┘",
        "               w",
        "               │",
        "stage 1   ┌────┴────┐",
        "          │ (drift) │",
        "          └────┬────┘",
        "               w",
        "               │",
        "stage 2   ┌────┴────┐",
        "          │ <clip>  │",
        "          └─────────┘",
    ]
