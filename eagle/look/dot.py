"""A graph as Graphviz DOT (``g.to_dot()``) and as HTML for Jupyter (``g._repr_html_()``).

DOT, read top to bottom like ``print(g)``:

* the header line (``eagle.Graph 3 nodes · ...``) is the graph's label;
* each stage is a ``rank=same`` subgraph, with a ``stage N`` label (plus the
  backend's stage note after ``build()``) in a column on the left;
* a node's shape says its kind (``KIND_SHAPES``; a node class can set
  ``dot_shape``), its label is its name;
* an edge carries the names of the arrays it passes (``a,b``); an
  ordering-only edge (write-after-read, write-after-write) is dashed and
  unlabelled. Unlike the text picture, every edge is drawn, also those that
  skip stages;
* a control node's bodies (``Node.bodies``) are drawn beside it, each as a cluster
  ``cluster_<node>_<label>`` (``cluster_n3_body``; ``then`` / ``otherwise``,
  ``graph``) labelled ``<name> · <label>``, holding the body's nodes (ids
  ``<node>_<label>_<k>``) and edges, nested bodies as clusters inside it; a dotted
  edge joins the node to each of its clusters.

The HTML is an SVG drawn by Graphviz's ``dot`` program when it is installed,
else the text picture in a monospace ``<pre>`` block.
"""
from __future__ import annotations

import shutil
import subprocess

from eagle._text import monospace_html
from eagle.record.node import Node

#: the shape of anything that is not an eagle node (nodes say their own: ``Node.dot_shape``)
DEFAULT_SHAPE = "box"
_DOT_TIMEOUT_S = 20


def quote(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def shape_of(node) -> str:
    return node.dot_shape if isinstance(node, Node) else DEFAULT_SHAPE


def to_dot(header: str, nodes, names, stages, edges, stage_notes=None) -> str:
    """DOT text of a staged graph; ``edges`` are ``(src, dst, label or None)`` by index."""
    notes = list(stage_notes or []) + [None] * len(stages)
    out = ["digraph eagle {",
           f"  graph [label={quote(header)}, labelloc=t, labeljust=l, rankdir=TB, "
           'fontname="monospace", newrank=true];',
           '  node [fontname="monospace"];',
           '  edge [fontname="monospace", fontsize=10];']
    for s, row in enumerate(stages):
        stage_label = f"stage {s}" + (f" {notes[s]}" if notes[s] else "")
        out.append(f"  subgraph stage_{s} {{")
        out.append("    rank=same;")
        out.append(f"    stage_{s}_label [label={quote(stage_label)}, shape=plaintext];")
        for i in row:
            node = nodes[i]
            out.append(f"    n{i} [label={quote(names[i])}, shape={shape_of(node)}, "
                       f"tooltip={quote(node.kind)}];")
        out.append("  }")
    # the stage labels in one column, top to bottom
    for s in range(len(stages) - 1):
        out.append(f"  stage_{s}_label -> stage_{s + 1}_label [style=invis];")
    out += _edge_lines([(f"n{a}", f"n{b}", lab) for a, b, lab in edges], "  ")
    if any(node.bodies for node in nodes if isinstance(node, Node)):
        out.append("  graph [compound=true];")   # the edges into clusters (lhead)
        for i, node in enumerate(nodes):
            out += _body_lines(f"n{i}", names[i], node, "  ")
    out.append("}")
    return "\n".join(out) + "\n"


def _edge_lines(edges, indent):
    """DOT edges ``(src id, dst id, label or None)``, one per pair: the labels joined,
    ordering-only pairs dashed."""
    labels: dict[tuple[str, str], list[str]] = {}
    for src, dst, label in edges:
        got = labels.setdefault((src, dst), [])
        if label is not None and label not in got:
            got.append(label)
    out = []
    for (src, dst), arrays in labels.items():
        if arrays:
            out.append(f"{indent}{src} -> {dst} [label={quote(','.join(arrays))}];")
        else:
            out.append(f"{indent}{src} -> {dst} [style=dashed, tooltip=\"ordering only\"];")
    return out


def _body_lines(node_id, name, node, indent):
    """The clusters of control node ``node_id``'s bodies (nested ones inside), and the
    dotted edges that join the node to them."""
    if not isinstance(node, Node) or not node.bodies:
        return []
    out, joins = [], []
    for label, body in zip(node.body_labels, node.bodies):
        cid = f"{node_id}_{label}"
        out.append(f"{indent}subgraph cluster_{cid} {{")
        out.append(f"{indent}  label={quote(f'{name} · {label}')}; style=rounded;")
        for k, (n, nm) in enumerate(zip(body.nodes, body.names)):
            out.append(f"{indent}  {cid}_{k} [label={quote(nm)}, shape={shape_of(n)}, "
                       f"tooltip={quote(n.kind)}];")
        out += _edge_lines([(f"{cid}_{d.src}", f"{cid}_{d.dst}", d.label) for d in body.edges], indent + "  ")
        for k, (n, nm) in enumerate(zip(body.nodes, body.names)):
            out += _body_lines(f"{cid}_{k}", nm, n, indent + "  ")
        out.append(f"{indent}}}")
        if len(body.nodes):
            joins.append(f"{indent}{node_id} -> {cid}_0 [style=dotted, arrowhead=none, "
                         f"lhead=cluster_{cid}];")
    return out + joins


def dot_svg(dot_text: str) -> str | None:
    """The SVG Graphviz draws for ``dot_text``, or None without a working ``dot``."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True,
                              timeout=_DOT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0 or "<svg" not in proc.stdout:
        return None
    return proc.stdout[proc.stdout.index("<svg"):]  # without the XML prolog and doctype


def picture_html(picture: str) -> str:
    return monospace_html(picture)


def repr_html(graph) -> str:
    svg = dot_svg(graph.to_dot())
    if svg is not None:
        return f'<div class="eagle-graph">{svg}</div>'
    return picture_html(str(graph))
