"""Text picture of a staged graph: what ``print(g)`` shows.

``render(header, stages, boxes, edges, stage_notes)`` returns the header line,
then one row of boxes per stage, with the dependencies drawn between rows.
Pure Python, no other eagle module is imported.

Conventions
-----------
Rows
    Each stage is one row.  A left column holds ``stage N`` (plus the stage
    note after build, e.g. ``stage 0 work_share``), padded to the widest label
    plus two spaces.  Text is measured in terminal columns: a wide (CJK,
    emoji) character takes two, a combining accent none (``text_width``).

Wrapping (only when ``render`` is given a ``width``; ``print(g)`` passes the
terminal's, 80 columns when unknown)
    A stage whose row would end past ``width`` is *wrapped*: its boxes are
    packed from the left onto as many rows as needed (continuation rows carry
    no stage label).  Edges cannot be drawn between box lines without
    crossings, so every edge into or out of a wrapped stage becomes a note,
    written in a block under the wrapped stage's rows, consumers that read the
    same things from the same producers listed together, the lines broken at
    ``", "`` to fit ``width``.  Stages that fit are drawn exactly as without a
    width.  The header stays one line: tools and tests read it as the first line.

Boxes
    ``┌─┐ │ │ └─┘`` with one space of padding around the text; the total width
    is odd (the inner part is widened by one space on the right when needed)
    so every box has a center column, where its edges attach.  Boxes in a row
    are at least 3 spaces apart.  A box that has drawn outgoing edges has ``┬``
    at the center of its bottom border, one with drawn incoming edges ``┴`` at
    the center of its top border.  A box may hold more lines under its text
    (``render(..., inner=)``: a control node's captions and bodies, drawn by
    ``eagle.look.bodies``); it is then as wide as its widest line and as tall as
    its lines, top-aligned in its row, and the edge out of a shorter box in the
    same row keeps going down (``│``) to the row's last line.

Edges between adjacent stages ("bands")
    The lines between two rows are: one or more *label lines*, one *routing
    line*, then (only when needed) label lines on the consumer side.  Every
    drawn edge belongs to exactly one *star*, drawn with its own stretch of the
    routing line:

    * a merge: n >= 1 producers -> one consumer, e.g. ``└────┬────┘``; the
      labels are written under the producers.  A single producer is a straight
      ``│`` (or a jog ``└───┐`` when the consumer could not sit right below).
    * a split (fan-out): one producer -> n >= 2 consumers, e.g.
      ``┌────┴────┐``.  When every branch carries the same arrays the label is
      written once under the producer, otherwise each branch's label is written
      just above its consumer.

    Layout: the first row is packed from the left; a consumer is centered under
    its merge point (the middle of its producers' columns), the consumers of a
    split are packed as a group centered under the producer, everything else is
    packed left to right.  Boxes are only ever pushed right, never reordered.

Labels
    A label is the array name an edge carries (read-after-write); several
    arrays on one edge are joined with commas (``a,b``).  Labels that would
    touch each other are stacked on extra label lines.

Ordering-only edges (label ``None``: write-after-read / write-after-write)
    Drawn dotted (``┆`` and ``┄``) and carry no label; junctions and corners
    stay solid because box drawing has no dotted corners.  When an edge carries
    both data and ``None``, the data wins (it orders the nodes as well).

Notes (the fall-back, never a wrong picture)
    An edge that cannot be drawn cleanly is written as a note to the right of
    its consumer's row: ``<z> ◀ a from <x>, after <y>`` means node ``<z>``
    reads ``a`` written by ``<x>`` and must run after ``<y>`` (ordering only).
    This is used for edges that skip a stage, for edges between a node that
    fans out and a node that merges (they cannot be one star), for a star whose
    routing line would overlap another star's (a crossing), and for a label
    that has no room.  When two boxes have the same text, notes add ``#index``.

An empty graph renders as the header plus ``(empty)``.
"""

from __future__ import annotations

import unicodedata

GAP = 3  # spaces between neighbouring boxes in a row

DOT_V, DOT_H = "┆", "┄"

# Routing-line character from which sides a cell connects: (up, down, left, right).
_JUNCTION = {
    (True, True, False, False): "│",
    (False, False, True, True): "─",
    (True, False, False, True): "└",
    (True, False, True, False): "┘",
    (True, False, True, True): "┴",
    (False, True, False, True): "┌",
    (False, True, True, False): "┐",
    (False, True, True, True): "┬",
    (True, True, False, True): "├",
    (True, True, True, False): "┤",
    (True, True, True, True): "┼",
}


def render(header: str, stages: list[list[int]], boxes: list[str],
           edges: list[tuple[int, int, str | None]],
           stage_notes: list[str] | None = None, width: int | None = None,
           inner: dict[int, list[str]] | None = None) -> str:
    """Draw the graph; see the module docstring for the conventions. ``width``:
    wrap the stages whose row would be wider (None: never wrap). ``inner``: lines
    drawn inside box i, under its text (a control node's bodies, ``eagle.look.bodies``)."""
    if not boxes:
        return f"{header}\n(empty)"
    return _Picture(stages, boxes, edges, stage_notes, width, inner).draw(header)


def stage_labels(notes: list[str | None] | None, n: int) -> list[str]:
    """The left column's text of n stage rows (``stage 0 work_share``)."""
    notes = list(notes or [])
    notes += [None] * (n - len(notes))
    return [f"stage {s}" + (f" {note}" if note else "") for s, note in enumerate(notes[:n])]


def margin_of(labels: list[str]) -> int:
    """Column where a picture's boxes may start: past the widest stage label, plus two
    (an empty graph has no stage row)."""
    return max(map(len, labels), default=0) + 2


def box_lines(lines: list[str]) -> list[str]:
    """A box around ``lines`` (the first is the node's text), as drawn in a row."""
    w = box_width(max(lines, key=text_width))
    return (["┌" + "─" * (w - 2) + "┐"] + ["│ " + pad(t, w - 4) + " │" for t in lines]
            + ["└" + "─" * (w - 2) + "┘"])


def char_width(ch: str) -> int:
    """Terminal columns of one character: 0 (combining), 2 (East Asian wide/full) or 1."""
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def text_width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(char_width(c) for c in text)


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` columns (str.ljust counts characters)."""
    return text + " " * (width - text_width(text))


def box_width(text: str) -> int:
    """Odd total width of the box around ``text`` (borders and padding)."""
    width = text_width(text) + 4
    return width if width % 2 else width + 1


class _Star:
    """Edges of one band drawn on one stretch of the routing line."""

    def __init__(self, kind: str, edges: list[tuple[int, int]]):
        self.kind = kind  # "merge" (n -> 1) or "split" (1 -> n, n >= 2)
        self.edges = edges


class _Item:
    """Something crossing a label line at ``col``: a vertical, maybe a label."""

    def __init__(self, col: int, text: str, data: bool, edges):
        self.col, self.text, self.data, self.edges = col, text, data, edges
        self.line = None  # index of the label line holding the text
        self.start = 0


class _Canvas:
    """Lines of sparse characters; rendered with trailing spaces stripped."""

    def __init__(self):
        self.lines: list[dict[int, str]] = []

    def add_line(self) -> int:
        self.lines.append({})
        return len(self.lines) - 1

    def put(self, y: int, x: int, text: str) -> None:
        line = self.lines[y]
        if text.isascii():
            for k, ch in enumerate(text):
                line[x + k] = ch
            return
        for ch in text:
            w = char_width(ch)
            if w == 0 and x > 0:   # a combining accent joins the cell before
                line[x - 1] = line.get(x - 1, " ") + ch
                continue
            line[x] = ch
            if w == 2:
                line[x + 1] = ""   # the second column of a wide character
            x += max(w, 1)

    def text(self) -> str:
        out = []
        for cells in self.lines:
            row = [" "] * (max(cells) + 1 if cells else 0)
            for x, ch in cells.items():
                row[x] = ch
            out.append("".join(row).rstrip())
        return "\n".join(out)


class _Picture:
    def __init__(self, stages, boxes, edges, stage_notes, width=None, inner=None):
        self.stages = [list(row) for row in stages]
        self.boxes = list(boxes)
        # every box's lines: its text, then what it holds (a control node's bodies)
        self.box_text = {i: [t] + list((inner or {}).get(i, ())) for i, t in enumerate(self.boxes)}
        self.height = {i: len(t) + 2 for i, t in self.box_text.items()}
        n = len(self.boxes)
        self.stage_of: dict[int, int] = {}
        self.pos: dict[int, int] = {}
        for s, row in enumerate(self.stages):
            for k, i in enumerate(row):
                if not 0 <= i < n or i in self.stage_of:
                    raise ValueError(f"node {i} is out of range or in two stages")
                self.stage_of[i], self.pos[i] = s, k
        if len(self.stage_of) != n:
            raise ValueError("every node must be in exactly one stage")
        self.labels: dict[tuple[int, int], list[str]] = {}  # [] = ordering only
        for src, dst, label in edges:
            if self.stage_of[src] >= self.stage_of[dst]:
                raise ValueError(f"edge {src}->{dst} does not go to a later stage")
            labels = self.labels.setdefault((src, dst), [])
            if label is not None and label not in labels:
                labels.append(label)
        self.row_labels = stage_labels(stage_notes, len(self.stages))
        self.width = {i: box_width(max(t, key=text_width)) for i, t in self.box_text.items()}
        self.limit = width
        self.wrapped: set[int] = set()  # stages drawn on continuation rows
        while True:  # wrapping a stage drops its edges, which can narrow other rows
            self.notes: dict[int, set[int]] = {}  # consumer -> producers of noted edges
            self.left: dict[int, int] = {}
            self._plan_bands()
            self._layout()
            too_wide = self._too_wide()
            if not too_wide:
                break
            # one at a time, a row too wide by itself first, top down: a row pushed right by
            # another row's edges may fit once that one wraps
            packed = [r for r in sorted(too_wide) if self._packed_end(r) > self.limit]
            self.wrapped.add(packed[0] if packed else min(too_wide))
        self.band_items = [self._label_items(b) for b in range(len(self.bands))]

    # -- helpers --------------------------------------------------------------

    def center(self, i: int) -> int:
        return self.left[i] + self.width[i] // 2

    def is_data(self, edge) -> bool:
        return bool(self.labels[edge])

    def note(self, edge) -> None:
        self.notes.setdefault(edge[1], set()).add(edge[0])

    def order_key(self, i: int):
        return self.stage_of[i], self.pos[i]

    # -- planning: which edges are drawn, as which star -----------------------

    def _plan_bands(self) -> None:
        nbands = max(len(self.stages) - 1, 0)
        band_edges: list[list[tuple[int, int]]] = [[] for _ in range(nbands)]
        for src, dst in self.labels:
            if self.stage_of[src] in self.wrapped or self.stage_of[dst] in self.wrapped:
                self.note((src, dst))  # a wrapped stage's edges are all notes
            elif self.stage_of[dst] == self.stage_of[src] + 1:
                band_edges[self.stage_of[src]].append((src, dst))
            else:
                self.note((src, dst))  # skips a stage
        self.bands = [self._stars(es) for es in band_edges]

    def _stars(self, edges) -> list[_Star]:
        def degrees(es):
            out, inn = {}, {}
            for s, d in es:
                out[s] = out.get(s, 0) + 1
                inn[d] = inn.get(d, 0) + 1
            return out, inn

        # An edge from a fanning-out node into a merging node belongs to no
        # star; removing all of those leaves only stars (a path p-c-p'-c'
        # would need such an edge in the middle).
        out, inn = degrees(edges)
        kept = []
        for e in edges:
            if out[e[0]] > 1 and inn[e[1]] > 1:
                self.note(e)
            else:
                kept.append(e)
        out, _ = degrees(kept)
        splits: dict[int, list] = {}
        merges: dict[int, list] = {}
        for s, d in kept:
            if out[s] > 1:
                splits.setdefault(s, []).append((s, d))
            else:
                merges.setdefault(d, []).append((s, d))
        key = lambda e: (self.pos[e[0]], self.pos[e[1]])  # noqa: E731
        return ([_Star("split", sorted(es, key=key)) for es in splits.values()]
                + [_Star("merge", sorted(es, key=key)) for es in merges.values()])

    # -- layout: left column of every box -------------------------------------

    def _layout(self) -> None:
        self.margin = margin_of(self.row_labels)
        for r, row in enumerate(self.stages):
            if r in self.wrapped:
                continue
            want = self._wanted_lefts(r - 1) if r else {}
            x_min = None  # no floor yet: a split may want to start left of it
            for i in row:
                x = want.get(i, self.margin)  # unconnected boxes are packed
                self.left[i] = x if x_min is None else max(x, x_min)
                x_min = self.left[i] + self.width[i] + GAP
        # Translate the whole picture right so nothing sits in the stage
        # column; clamping instead would make splits lopsided.
        shift = self.margin - min(self.left.values(), default=self.margin)
        for i in self.left:
            self.left[i] += max(shift, 0)
        for band in range(len(self.bands)):
            self._drop_crossings(band)
        self.sub_rows = {r: self._wrap_row(r) for r in self.wrapped}

    def _too_wide(self) -> set[int]:
        if self.limit is None:
            return set()
        return {r for r, row in enumerate(self.stages)
                if r not in self.wrapped and row
                and max(self.left[i] + self.width[i] for i in row) > self.limit}

    def _packed_end(self, r: int) -> int:
        row = self.stages[r]
        return self.margin + sum(self.width[i] for i in row) + GAP * (len(row) - 1)

    def _wrap_row(self, r: int) -> list[list[int]]:
        """Pack stage ``r``'s boxes from the margin onto rows no wider than the limit."""
        rows, x = [[]], self.margin
        for i in self.stages[r]:
            if rows[-1] and x + self.width[i] > self.limit:
                rows.append([])
                x = self.margin
            self.left[i] = x
            rows[-1].append(i)
            x += self.width[i] + GAP
        return rows

    def _wanted_lefts(self, band: int) -> dict[int, int]:
        want = {}
        for star in self.bands[band]:
            if star.kind == "merge":
                cols = [self.center(p) for p, _ in star.edges]
                dst = star.edges[0][1]
                want[dst] = (min(cols) + max(cols)) // 2 - self.width[dst] // 2
            else:  # children packed as a group centered under the producer
                kids = [d for _, d in star.edges]
                total = sum(self.width[k] for k in kids) + GAP * (len(kids) - 1)
                x = self.center(star.edges[0][0]) - total // 2
                for k in kids:
                    want[k] = x
                    x += self.width[k] + GAP
        return want

    def span(self, star: _Star) -> tuple[int, int]:
        cols = [self.center(i) for e in star.edges for i in e]
        return min(cols), max(cols)

    def _drop_crossings(self, band: int) -> None:
        # Stars share one routing line, so their stretches must not overlap
        # (nor touch); an overlapping star becomes notes.
        kept, spans = [], []
        for star in sorted(self.bands[band], key=self.span):
            lo, hi = self.span(star)
            if any(lo <= h + 1 and l <= hi + 1 for l, h in spans):
                for e in star.edges:
                    self.note(e)
            else:
                kept.append(star)
                spans.append((lo, hi))
        self.bands[band] = kept

    # -- labels ---------------------------------------------------------------

    def _label_items(self, band: int):
        """Items on the producer-side and consumer-side label lines."""
        above, below = [], []
        for star in self.bands[band]:
            texts = [",".join(self.labels[e]) for e in star.edges]
            if star.kind == "merge":
                for e, t in zip(star.edges, texts):
                    above.append(_Item(self.center(e[0]), t, self.is_data(e), [e]))
                below.append(_Item(self.center(star.edges[0][1]), "",
                                   any(map(self.is_data, star.edges)), []))
            else:
                shared = len(set(texts)) == 1
                above.append(_Item(self.center(star.edges[0][0]),
                                   texts[0] if shared else "",
                                   any(map(self.is_data, star.edges)),
                                   star.edges if shared else []))
                for e, t in zip(star.edges, texts):
                    below.append(_Item(self.center(e[1]), "" if shared else t,
                                       self.is_data(e), [e]))
        return above, self._place_labels(above), below, self._place_labels(below)

    def _place_labels(self, items: list[_Item]) -> int:
        """Give each labelled item a line and start column; return line count."""
        lines: list[list[tuple[int, int]]] = []  # per line: occupied [a, b]
        cols = [it.col for it in items]
        for it in sorted(items, key=lambda it: it.col):
            if not it.text:
                continue
            n = text_width(it.text)
            # Starts that keep the text clear of every other vertical, most
            # centered first.
            starts = sorted(range(it.col - n + 1, it.col + 1),
                            key=lambda s: abs(s - (it.col - (n - 1) // 2)))
            starts = [s for s in starts if s >= 0 and not any(
                c != it.col and s - 1 <= c <= s + n for c in cols)]
            if not starts:  # no room at all: the line is drawn bare, with a note
                for e in it.edges:
                    self.note(e)
                it.text = ""
                continue
            s = starts[0]
            for k, used in enumerate(lines):
                if all(s + n < a or b < s - 1 for a, b in used):
                    break
            else:
                k = len(lines)
                lines.append([])
            lines[k].append((s, s + n - 1))
            it.line, it.start = k, s
        return len(lines)

    # -- drawing --------------------------------------------------------------

    def draw(self, header: str) -> str:
        cv = _Canvas()
        cv.put(cv.add_line(), 0, header)
        drawn = {e for band in self.bands for star in band for e in star.edges}
        has_in = {d for _, d in drawn}
        out_data: dict[int, bool] = {}
        for e in drawn:
            out_data[e[0]] = out_data.get(e[0], False) or self.is_data(e)
        for r, row in enumerate(self.stages):
            self._draw_row(cv, r, row, has_in, out_data)
            if r < len(self.bands):
                self._draw_band(cv, r)
        return cv.text()

    def _draw_row(self, cv, r, row, has_in, out_data) -> None:
        if r in self.wrapped:
            self._draw_wrapped(cv, r)
            return
        notes = [self._note_text(i, self._side_notes(i)) for i in row if self._side_notes(i)]
        tall = max((self.height[i] for i in row), default=1)
        ys = [cv.add_line() for _ in range(max(tall, 1 + len(notes)))]
        cv.put(ys[0], 0, self.row_labels[r])
        for i in row:
            self._draw_box(cv, ys, i)
            c, h = self.center(i), self.height[i]
            if i in has_in:
                cv.put(ys[0], c, "┴")
            if i in out_data:
                cv.put(ys[h - 1], c, "┬")
                for y in ys[h:]:  # a taller box or note lines beside: the edge keeps going down
                    cv.put(y, c, "│" if out_data[i] else DOT_V)
        if notes:
            x = max(self.left[i] + self.width[i] for i in row) + GAP
            for y, text in zip(ys[1:], notes):
                cv.put(y, x, text)

    def _draw_box(self, cv, ys, i) -> None:
        """Box i from line ys[0] down (top-aligned in its row)."""
        for y, text in zip(ys, box_lines(self.box_text[i])):
            cv.put(y, self.left[i], text)

    def _draw_band(self, cv, band: int) -> None:
        above, n_above, below, n_below = self.band_items[band]
        if not self.bands[band]:
            return  # nothing drawn between these rows: stack them directly
        self._draw_label_lines(cv, above, max(n_above, 1))
        y = cv.add_line()
        for star in self.bands[band]:
            ups = {self.center(s) for s, _ in star.edges}
            downs = {self.center(d) for _, d in star.edges}
            lo, hi = self.span(star)
            for x in range(lo, hi + 1):
                ch = _JUNCTION[(x in ups, x in downs, x > lo, x < hi)]
                solid = any(self.is_data(e) and min(map(self.center, e)) <= x
                            <= max(map(self.center, e)) for e in star.edges)
                if not solid:
                    ch = {"─": DOT_H, "│": DOT_V}.get(ch, ch)
                cv.put(y, x, ch)
        self._draw_label_lines(cv, below, n_below)

    @staticmethod
    def _draw_label_lines(cv, items, count) -> None:
        for k in range(count):
            y = cv.add_line()
            for it in items:
                if it.text and it.line == k:
                    cv.put(y, it.start, it.text)
                else:
                    cv.put(y, it.col, "│" if it.data else DOT_V)

    def _block_of(self, edge) -> int | None:
        """The wrapped stage whose note block lists a noted edge (None: beside its consumer)."""
        src, dst = edge
        for s in (self.stage_of[dst], self.stage_of[src]):
            if s in self.wrapped:
                return s
        return None

    def _side_notes(self, dst: int) -> list[int]:
        return [src for src in self.notes.get(dst, ()) if self._block_of((src, dst)) is None]

    def _note_parts(self, dst: int, srcs) -> list[str]:
        parts = []
        for src in sorted(srcs, key=self.order_key):
            labels = self.labels[(src, dst)]
            parts.append(f"{','.join(labels)} from {self._name(src)}" if labels
                         else f"after {self._name(src)}")
        return parts

    def _note_text(self, dst: int, srcs) -> str:
        return f"{self._name(dst)} ◀ " + ", ".join(self._note_parts(dst, srcs))

    def _draw_wrapped(self, cv, r: int) -> None:
        for k, sub in enumerate(self.sub_rows[r]):
            ys = [cv.add_line() for _ in range(max(self.height[i] for i in sub))]
            if k == 0:
                cv.put(ys[0], 0, self.row_labels[r])
            for i in sub:
                self._draw_box(cv, ys, i)
        # the block of notes: consumers with the same producers and arrays share a line
        srcs_of: dict[int, list[int]] = {}
        for dst, srcs in self.notes.items():
            mine = [s for s in srcs if self._block_of((s, dst)) == r]
            if mine:
                srcs_of[dst] = mine
        groups: dict[tuple, list[int]] = {}
        for dst in sorted(srcs_of, key=self.order_key):
            groups.setdefault(tuple(self._note_parts(dst, srcs_of[dst])), []).append(dst)
        for parts, dsts in groups.items():
            tokens = [self._name(d) for d in dsts]
            tokens[-1] += " ◀ " + parts[0]
            tokens += parts[1:]
            for line in self._break(tokens, self.margin):
                cv.put(cv.add_line(), self.margin if not line.startswith(" ") else 0, line)

    def _break(self, tokens: list[str], indent: int) -> list[str]:
        """Join ``tokens`` with ", " into lines that end by the limit; continuation
        lines are indented four more columns (and returned with that indentation)."""
        lines, line = [], ""
        for k, t in enumerate(tokens):
            piece = t + ("," if k < len(tokens) - 1 else "")
            start = indent if not lines else indent + 4
            if line and start + text_width(line) + 1 + text_width(piece) > self.limit:
                lines.append(line)
                line = piece
            else:
                line = f"{line} {piece}" if line else piece
        lines.append(line)
        return [lines[0]] + [" " * (indent + 4) + ln for ln in lines[1:]]

    def _name(self, i: int) -> str:
        text = self.boxes[i]
        return text if self.boxes.count(text) == 1 else f"{text}#{i}"


def body_lines(rec, indent: str = "", stage_note=None) -> list[str]:
    """``plan()``'s bodies section (the picture draws bodies in their boxes instead,
    ``eagle.look.bodies``): text lines of the bodies of every control node of ``rec``, nested
    bodies indented further: a header naming the node and what it runs, then the body's
    own stage rows (``    stage 0  (quot) <more>``). Empty without control nodes.
    ``stage_note(body, s)``: text appended to body stage s's row (a backend's plan: fusion)."""
    lines = []
    for i, node in enumerate(rec.nodes):
        if not node.bodies:
            continue
        head = f"{indent}{rec.box(i)} {node.control}"
        if node.cond is not None:
            head += f" on {node.cond[0]!r}"
        if node.max_iterations is not None:
            head += f", at most {node.max_iterations} iterations"
            if getattr(node, "on_max", "raise") == "stop":
                head += " (then it stops)"
        lines.append(head)
        for label, body in node.body_nodes():
            lines.append(f"{indent}  {label}:")
            for s, row in enumerate(body.rows):
                note = stage_note(body, s) if stage_note is not None else ""
                lines.append(f"{indent}    stage {s}  " + " ".join(body.box(k) for k in row) + note)
            lines += body_lines(body, indent + "      ", stage_note)
    return lines
