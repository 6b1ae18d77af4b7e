"""The picture of a graph with its control nodes' bodies drawn inside their boxes.

``picture(rec, header, ...)`` is what ``print(g)`` shows: the graph drawn by
``eagle.look.picture.render``, where the box of a control node (``{name}``) also
holds a caption and a picture of each of its bodies, drawn by the same rules
(stage rows, boxes, edge labels, merges), recursively for nested control nodes::

    stage 1  ┌───────────┴───────────┐
             │ {newton}              │
             │ while c, ≤ 10 iterations │
             │ stage 0  ┌─────────┐  │
             │          │ (halve) │  │
             ...

Captions: ``while c`` (``, ≤ N iterations`` with ``max_iterations``) above a loop's body;
``if c`` above ``then`` and ``else`` above ``otherwise`` (stacked); ``subgraph``
above a child graph. A body's stage rows carry the backend's note for that body's
stages (``work_share`` on the cpu, as the top level's), none before ``build()``.

Width: with a ``width`` (``print(g)`` passes the terminal's), each body is drawn
for the columns left inside a box that starts at its picture's margin, and wraps by
the top level's rule (``render``). A control node whose bodies still do not fit (a
box wider than that, or nesting too deep for the columns left) holds only its
captions and ``(drawn below: too wide)``; the box is then drawn again under the whole
picture, headed ``{inner} in {outer}:``, with its bodies drawn at the full width
(nested ones by the same rule). Nothing is ever cut.

Pure Python: ``rec`` is anything shaped like ``eagle.record.recording.Recording``
(``nodes``, ``rows``, ``edges``, ``box(i)``); a node with ``bodies`` is a control node
(``control``, ``cond``, ``max_iterations``, ``body_nodes()``).
"""
from __future__ import annotations

from eagle.look.picture import box_lines, margin_of, render, stage_labels, text_width

#: the caption above each body of a control node, by the label ``body_nodes()`` gives it
_CAPTIONS = {"then": "if {cond}", "otherwise": "else", "body": None}

TOO_WIDE = "(drawn below: too wide)"


def picture(rec, header: str, stage_notes=None, width: int | None = None, body_notes=None) -> str:
    """The graph's picture, bodies inside their control nodes' boxes (module docstring).
    ``stage_notes``: one note per top-level stage, or None; ``body_notes(body)``: the same
    for a body's stages (None: no notes)."""
    below: list[str] = []
    text = _Bodies(width, body_notes, below).draw(rec, header, stage_notes, width, None)
    return "\n".join([text] + below)


def caption(node, label: str) -> str:
    """The line drawn above body ``label`` of control node ``node``."""
    cond = node.cond[0] if node.cond is not None else "?"
    if node.control == "while":
        limit = f", ≤ {node.max_iterations} iterations" if node.max_iterations is not None else ""
        return f"while {cond}{limit}"
    if node.control == "subgraph":
        return "subgraph"
    return _CAPTIONS.get(label, label).format(cond=cond)


class _Bodies:
    def __init__(self, width, body_notes, below):
        self.width = width            # the whole picture's (None: no limit)
        self.body_notes = body_notes
        self.below = below            # boxes drawn under the picture, as text blocks

    def draw(self, rec, header, notes, width, outer) -> str:
        """Picture of ``rec`` (a graph's or a body's) in ``width`` columns."""
        rows = [list(r) for r in rec.rows]
        boxes = [rec.box(i) for i in range(len(rec.nodes))]
        edges = [(d.src, d.dst, d.label) for d in rec.edges]
        # columns left inside a box that starts at this picture's margin
        room = None if width is None else width - margin_of(stage_labels(notes, len(rows))) - 4
        inner = {i: self.inside(rec, i, room, outer) for i, node in enumerate(rec.nodes) if node.bodies}
        return render(header, rows, boxes, edges, notes, width, inner)

    def inside(self, rec, i, room, outer) -> list[str]:
        """The lines inside control node i's box: each body's caption and picture, drawn
        in ``room`` columns; when they do not fit, the captions only, and the box goes below."""
        node, name = rec.nodes[i], rec.box(i)
        mark = len(self.below)
        lines = self.bodies(node, name, room)
        if room is None or max(map(text_width, lines)) <= room:
            return lines
        # too wide even wrapped: drop what the narrow drawing put below, and draw the box
        # there, its bodies in the whole picture's width (nested boxes below it, after it)
        del self.below[mark:]
        slot = len(self.below)
        self.below.append("")
        head = f"{name} in {outer}:" if outer is not None else f"{name}:"
        full = self.bodies(node, name, self.width - 4)
        self.below[slot] = "\n".join([head] + box_lines([name] + full))
        return [caption(node, label) for label, _ in node.body_nodes()] + [TOO_WIDE]

    def bodies(self, node, name, room) -> list[str]:
        lines = []
        for label, body in node.body_nodes():
            lines.append(caption(node, label))
            notes = self.body_notes(body) if self.body_notes is not None else None
            drawn = self.draw(body, "", notes, room, name)
            lines += drawn.split("\n")[1:]   # no header line inside a box
        return lines
