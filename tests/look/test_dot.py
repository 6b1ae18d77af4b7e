"""Looking at a graph outside a terminal: ``g.to_dot()`` (Graphviz DOT) and
``g._repr_html_()`` (Jupyter). The DOT text's structure is tested everywhere; that
Graphviz accepts it, and the SVG, only where its ``dot`` program is installed."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import eagle
import eagle.kernels as ek
from eagle.look import dot as _dot
from eagle.graph import native, opaque
from eagle.record.node import OpaqueNode

HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot program is not installed")


def seed_graph():
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_group([opaque(lambda: None, reads={"x": x}, writes={"a": left}),
                 opaque(lambda: None, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(lambda: None, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return g, x, out


def mixed_graph():
    """Opaque and native nodes, a two-array edge, ordering-only edges, an edge that skips a stage."""
    g, x, out = seed_graph()
    y = np.zeros(4)
    g.add_node(native(ek.add(), reads={"a": out, "b": x}, writes={"y": y}), name="sum")
    g.add_node(opaque(lambda: None, reads={"y": y, "o": out}, writes={"x": x}), name="last")
    return g


def stage_blocks(dot):
    return dict(re.findall(r"subgraph (stage_\d+) \{\n    rank=same;\n((?:    .*\n)*?)  \}", dot))


def test_each_stage_is_one_rank_with_its_label_and_nodes():
    g, _, _ = seed_graph()
    dot = g.to_dot()
    assert dot.startswith("digraph eagle {\n") and dot.endswith("}\n")
    blocks = stage_blocks(dot)
    assert sorted(blocks) == ["stage_0", "stage_1"]
    assert 'label="stage 0", shape=plaintext' in blocks["stage_0"]
    assert re.search(r'n0 \[label="l", shape=ellipse', blocks["stage_0"])
    assert re.search(r'n1 \[label="r", shape=ellipse', blocks["stage_0"])
    assert re.search(r'n2 \[label="join", shape=ellipse', blocks["stage_1"])
    assert "stage_0_label -> stage_1_label [style=invis];" in dot
    assert 'graph [label="eagle.Graph 3 nodes · 1 group · backend: (not built)"' in dot


def test_edges_carry_array_names_and_ordering_only_edges_are_dashed():
    dot = mixed_graph().to_dot()
    edges = dict(re.findall(r"  (n\d+ -> n\d+) \[(.*)\];", dot))
    assert edges["n0 -> n2"] == 'label="a"' and edges["n1 -> n2"] == 'label="b"'
    assert edges["n2 -> n3"] == 'label="out"'
    assert edges["n3 -> n4"] == 'label="y"'
    assert edges["n2 -> n4"] == 'label="out"'           # skips a stage: still drawn
    assert edges["n0 -> n4"].startswith("style=dashed")   # write-after-read on x
    assert "label" not in edges["n0 -> n4"]
    blocks = stage_blocks(dot)
    assert re.search(r'n3 \[label="sum", shape=box, tooltip="native"\]', blocks["stage_2"])


def test_after_build_the_stage_labels_say_how_work_is_shared():
    g, _, _ = seed_graph()
    g.build()
    dot = g.to_dot()
    assert "backend: cpu" in dot
    notes = re.findall(r'stage_\d+_label \[label="stage \d+ (\w+)"', dot)
    assert len(notes) == 2 and all(notes)


def test_names_are_quoted_for_dot():
    x = np.zeros(3)
    g = eagle.Graph()
    # (a line break in a name is refused, as in a node name: eagle/_text.py check_name)
    g.add_node(opaque(lambda: None, writes={'say "hi" there\\': x}), name='a "quoted" \\ name')
    g.add_node(opaque(lambda: None, reads={"x": x}), name="reader")
    dot = g.to_dot()
    assert r'label="a \"quoted\" \\ name"' in dot
    assert r'n0 -> n1 [label="say \"hi\" there\\"];' in dot  # the edge: the array's name


def test_an_empty_graph_is_a_valid_empty_digraph():
    dot = eagle.Graph().to_dot()
    assert "subgraph" not in dot and "->" not in dot and dot.endswith("}\n")


def test_kinds_map_to_shapes_and_a_node_class_can_choose_its_own():
    class Custom(OpaqueNode):
        dot_shape = "octagon"

    g = eagle.Graph()
    g.add_node(Custom(lambda: None, writes={"x": np.zeros(2)}), name="c")
    assert 'shape=octagon' in g.to_dot()
    assert _dot.shape_of(type("N", (), {"kind": "something new"})()) == _dot.DEFAULT_SHAPE


@needs_dot
@pytest.mark.parametrize("make", [lambda: seed_graph()[0], mixed_graph, eagle.Graph])
def test_graphviz_accepts_the_dot_text(make):
    g = make()
    proc = subprocess.run(["dot", "-Tsvg"], input=g.to_dot(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "<svg" in proc.stdout and not proc.stderr.strip()


@needs_dot
def test_graphviz_accepts_awkward_names():
    x = np.zeros(3)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={'"{x}"': x}), name='n"1\\')
    g.add_node(opaque(lambda: None, reads={"<x>": x}), name="n{2}; -> n3 [color=red]")
    proc = subprocess.run(["dot", "-Tplain"], input=g.to_dot(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sum(line.startswith("node ") for line in proc.stdout.splitlines()) == 4  # 2 nodes + 2 stage labels
    assert sum(line.startswith("edge ") for line in proc.stdout.splitlines()) == 2  # 1 edge + 1 invisible


@needs_dot
def test_the_rich_repr_is_an_svg_when_graphviz_is_installed():
    g, _, _ = seed_graph()
    out = g._repr_html_()
    assert out.startswith('<div class="eagle-graph"><svg') and out.rstrip().endswith("</div>")
    assert "<?xml" not in out and "join" in out


def test_the_rich_repr_is_the_picture_in_a_monospace_block_without_graphviz(monkeypatch):
    monkeypatch.setattr(_dot.shutil, "which", lambda name: None)
    g, _, _ = seed_graph()
    out = g._repr_html_()
    assert out.startswith("<pre") and "monospace" in out and out.endswith("</pre>")
    body = out[out.index(">") + 1:-len("</pre>")]
    assert "&lt;join&gt;" in body and "<join>" not in body
    import html
    assert html.unescape(body) == str(g)


def test_a_failing_dot_program_falls_back_to_the_picture(monkeypatch, tmp_path):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'Error: broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    g, _, _ = seed_graph()
    assert g._repr_html_().startswith("<pre")


@needs_dot
def test_graphviz_puts_each_stage_on_one_rank_top_down():
    g = mixed_graph()
    proc = subprocess.run(["dot", "-Tplain"], input=g.to_dot(), capture_output=True, text=True, timeout=60)
    y = {f[1]: float(f[3]) for f in (line.split() for line in proc.stdout.splitlines()) if f[0] == "node"}
    for s, row in enumerate(g.stages):
        idx = [g.nodes.index(name) for name in row]
        assert {y[f"n{i}"] for i in idx} == {y[f"stage_{s}_label"]}
    heights = [y[f"stage_{s}_label"] for s in range(len(g.stages))]
    assert heights == sorted(heights, reverse=True)  # dot's y grows upwards


def test_an_in_place_update_is_a_labelled_edge_not_a_dashed_one():
    """``w = z * vol`` then ``w += drift``: data flows from the first node into the second."""
    z, vol, drift, w, y = np.ones(4), np.full(4, 2.0), np.ones(4), np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_node(eagle.graph.ufunc(np.multiply, {"z": z}, vol, out={"w": w}), name="diffuse")
    g.add_node(eagle.graph.ufunc(np.add, {"w": w}, drift, out={"w": w}), name="drift")
    g.add_node(opaque(lambda: None, updates={"w": w}), name="clip")
    g.add_node(opaque(lambda: None, reads={"w": w, "y": y}, writes={"w": w}), name="mix")
    edges = dict(re.findall(r"  (n\d+ -> n\d+) \[(.*)\];", g.to_dot()))
    assert edges == {"n0 -> n1": 'label="w"', "n1 -> n2": 'label="w"', "n2 -> n3": 'label="w"'}


def control_graph():
    """A while loop whose body holds an if_else (then: a nested while; otherwise: two nodes
    joined by an edge)."""
    from eagle.graph import Graph, if_else, ufunc, while_loop
    x, y = np.zeros(4), np.zeros(4)
    left, inner, flag = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, bool)
    inner_body = Graph()
    inner_body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    inner_body.add_node(opaque(lambda: None, writes={"inner": inner}), "tick")
    then = Graph()
    then.add_node(while_loop({"inner": inner}, inner_body), "spin")
    otherwise = Graph()
    otherwise.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"y": y}), "double")
    otherwise.add_node(native(ek.copy(), reads={"y": y}, writes={"x": x}), "back")
    body = Graph()
    body.add_node(opaque(lambda: None, reads={"left": left}, writes={"flag": flag}), "test")
    body.add_node(if_else({"flag": flag}, then, otherwise), "branch")
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"left": left}), "arm")
    g.add_node(while_loop({"left": left}, body), "loop")
    return g


def clusters(dot):
    """cluster id -> its own lines (nested clusters' lines included)."""
    found, stack = {}, []
    for line in dot.splitlines():
        m = re.match(r"\s*subgraph (cluster_\w+) \{", line)
        if m:
            stack.append(m.group(1))
            found[m.group(1)] = []
            continue
        if line.strip() == "}" and stack:
            stack.pop()
            continue
        for c in stack:
            found[c].append(line.strip())
    return found


def test_each_body_is_a_cluster_beside_its_node_with_its_edges():
    dot = control_graph().to_dot()
    cl = clusters(dot)
    assert sorted(cl) == ["cluster_n1_body", "cluster_n1_body_1_otherwise", "cluster_n1_body_1_then",
                          "cluster_n1_body_1_then_0_body"]
    body = cl["cluster_n1_body"]
    assert 'label="loop · body"; style=rounded;' in body
    assert 'n1_body_0 [label="test", shape=ellipse, tooltip="opaque"];' in body
    assert 'n1_body_1 [label="branch", shape=component, tooltip="control"];' in body
    assert 'n1_body_0 -> n1_body_1 [label="flag"];' in body          # the body's own edge
    other = cl["cluster_n1_body_1_otherwise"]
    assert 'label="branch · otherwise"; style=rounded;' in other
    assert 'n1_body_1_otherwise_0 -> n1_body_1_otherwise_1 [label="y"];' in other
    spin = cl["cluster_n1_body_1_then_0_body"]
    assert 'n1_body_1_then_0_body_0 [label="inc", shape=box, tooltip="ufunc"];' in spin
    # nested clusters sit inside their parent's, and a dotted edge joins each node to its bodies
    assert all(line in body for line in spin)
    assert "n1 -> n1_body_0 [style=dotted, arrowhead=none, lhead=cluster_n1_body];" in dot
    assert ("n1_body_1 -> n1_body_1_then_0 [style=dotted, arrowhead=none, "
            "lhead=cluster_n1_body_1_then];") in dot
    assert "graph [compound=true];" in dot
    assert "cluster" not in mixed_graph().to_dot() and "compound" not in mixed_graph().to_dot()


@needs_dot
def test_graphviz_accepts_the_bodies_clusters():
    proc = subprocess.run(["dot", "-Tsvg"], input=control_graph().to_dot(), capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('class="cluster"') == 4
