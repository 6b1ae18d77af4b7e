"""Control-flow nodes: a node that runs recorded graphs (its *bodies*) in place.

``while_loop(cond, body)`` runs ``body`` while ``cond[0]`` is true, checked before each
iteration; ``if_else(cond, then, otherwise)`` runs ``then`` when ``cond[0]`` is true, else
``otherwise``; ``subgraph(graph)`` runs ``graph`` once. In the sequential oracle each
stands for the Python ``while`` / ``if`` / call it reads as, with the body's nodes run in
their recording order.

A control node is an ordinary node to the recording rules: it reads its condition and
everything its bodies read, and writes everything its bodies write, so staging, groups,
the capacity and the picture treat it as one node. A body is the graph's recording when
the control node is made (``Graph.recording()``: a snapshot; nodes recorded into that
graph later are not part of it). The body graph itself is never launched by the control
node: a backend compiles the body's nodes into the plan of the graph that holds the
control node, so one ``launch`` runs everything, on one team, with the logical size of the
outer graph (``set_logical_size`` reaches the sized nodes inside bodies).

The contract a backend relies on (``ControlNode``): ``control`` (``"while"``, ``"if_else"``,
``"subgraph"``), ``cond`` (``(name, array)`` of the one-element condition, or None),
``bodies`` (a tuple of ``Recording``; ``if_else`` has two, the second possibly empty),
``body_labels`` (``("body",)``, ``("then", "otherwise")``, ``("graph",)``),
``max_iterations`` (an int, or None: no limit) and ``on_max`` (``"raise"`` or ``"stop"``:
what reaching it with the condition still true does).
"""
from __future__ import annotations

import operator

import weakref
from typing import Any

import numpy as np

from eagle._core import GraphCore
from eagle._public import keywords_after
from eagle.record.arrays import named_array
from eagle.record.memory import array_kind, same_view
from eagle.record.node import Node, RunsAs
from eagle.record.recording import Recording

__all__ = ["ControlNode", "while_loop", "if_else", "subgraph"]


def _condition(cond, what):
    """``(name, array)`` of a condition: a one-element bool or integer array (0-d or shape
    (1,)), on the CPU or a GPU, or a one-entry dict naming it (default name ``cond``)."""
    name, a = named_array(cond, f"{what}: cond", "cond")
    if array_kind(a) == "cuda":
        cai = a.__cuda_array_interface__
        shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
    else:
        shape, dtype = a.shape, a.dtype
    if int(np.prod(shape, dtype=np.int64)) != 1 or len(shape) > 1:
        raise ValueError(f"{what}: the condition {name!r} must hold one element (shape () or (1,)), "
                         f"got shape {shape}")
    if dtype.kind not in "biu":
        raise TypeError(f"{what}: the condition {name!r} must be bool or integer (nonzero: true), "
                        f"got {dtype}")
    return name, a


def _body(graph, what):
    if not isinstance(graph, GraphCore):   # eagle.Graph's compiled base (eagle.graph imports this module)
        raise TypeError(f"{what} must be an eagle.Graph, got {type(graph).__name__}")
    rec = graph.body_recording(what)   # refused while the graph is being launched
    if not len(rec):
        raise ValueError(f"{what} is an empty graph: record its nodes before making the control node")
    found = _collective_in(rec)
    if found is not None:
        # ranks whose conditions differ would wait for ever in the collective: refused
        # (docs/scale_out.md, "Control flow and collectives")
        raise ValueError(
            f"{what} holds the collective {found}; a collective inside a control-flow body would hang "
            "when the ranks' conditions differ. Record collectives outside the body, and make the "
            "condition agree over the ranks: an allreduce (op='max' or 'min') of the condition array, "
            "recorded before the control node, gives every rank the same cond[0]")
    return rec, weakref.ref(graph)


def _collective_in(rec, prefix=""):
    """``'allreduce' node 'sum'`` (with its body path) of the first collective in rec, its
    nested bodies included; or None."""
    for node, name in zip(rec.nodes, rec.names):
        if node.collective:
            return f"{node.collective} node {prefix + name!r}"
        for body in node.bodies:
            found = _collective_in(body, f"{prefix}{name}/")
            if found is not None:
                return found
    return None


class ControlNode(Node):
    """A node that runs recorded graphs in place (the module docstring is its contract)."""

    kind = "control"
    runs_as = RunsAs.CONTROL
    box = ("{", "}")
    dot_shape = "component"

    def __init__(self, control: str, cond, bodies: tuple[Recording, ...], labels: tuple[str, ...],
                 max_iterations=None, body_graphs=(), on_max="raise"):
        self.control = control
        self.on_max = on_max
        self.cond = cond
        self.bodies = tuple(bodies)
        # weak references to the graphs the bodies were taken from: a graph refuses a
        # control node whose bodies (or nested ones) are its own recording
        self.body_graphs = tuple(body_graphs)
        self.body_labels = tuple(labels)
        self.max_iterations = max_iterations
        reads: dict[str, Any] = {}
        writes: dict[str, Any] = {}
        not_per_sample: set[str] = set()
        if cond is not None:
            reads[cond[0]] = cond[1]
            not_per_sample.add(cond[0])

        def put(into, name, a):
            # a body's names are its nodes' own: the same name may mean two arrays in two
            # body nodes (or the condition and a body array), so a clash in reads or writes
            # gets the next free suffix (the picture's edge labels)
            key, k = name, 1
            while any(key in d and not same_view(d[key], a) for d in (reads, writes)):
                k += 1
                key = f"{name}.{k}"
            into[key] = a
            return key

        # as for a graph's capacity: when a body node is sized, only sized nodes' arrays are
        # the control node's per-sample ones (an opaque node's flag or counter does not
        # bound the capacity); an array is per-sample when any such node says so, whatever
        # other body nodes that touch it say
        any_sized = any(node.sized for rec in self.bodies for node in rec.nodes)
        per_sample_keys: set[str] = set()
        for rec in self.bodies:
            for node in rec.nodes:
                per_sample = ({name for name, _ in node.named_sample_arrays()}
                              if node.sized or not any_sized else set())
                for name, a, is_write in node.accesses():   # an update: a read and a write
                    key = put(writes if is_write else reads, name, a)
                    (per_sample_keys if name in per_sample else not_per_sample).add(key)
        not_per_sample -= per_sample_keys
        # what the bodies both read and write is an update of the control node (in the
        # bodies' order, never a set's: the order reaches the cross-rank check, the
        # picture, the plan and DOT, and a set's follows the process's string hashing)
        both = [k for k in reads if k in writes and same_view(reads[k], writes[k])]
        updates = {k: writes.pop(k) for k in both}
        for k in both:
            del reads[k]
        names = list(reads) + list(writes) + list(updates)
        super().__init__(reads, writes, per_sample=[n for n in names if n not in not_per_sample],
                         updates=updates)
        self.sized = any(node.sized for rec in self.bodies for node in rec.nodes)
        self._take_partitions()

    def extent_by(self):
        """The longest extent among the bodies' nodes (sized ones, when any is): each body
        node runs over its own, the control node's share of the capacity is the longest."""
        any_sized = any(node.sized for rec in self.bodies for node in rec.nodes)
        best = None
        for rec in self.bodies:
            for node in rec.nodes:
                if node.sized or not any_sized:
                    by = node.extent_by()
                    if by is not None and (best is None or by[1] > best[1]):
                        best = by
        return best

    def _take_partitions(self):
        """What the bodies' compaction and reorder nodes make of this node: it holds
        their compaction (a graph has one, bodies included: its one source of the next
        replay's logical size; the same node met twice, a body used twice, is one) and
        permutes samples as they do."""
        inner = [node for rec in self.bodies for node in rec.nodes]
        found = {id(n.compaction): (n.compaction, rec, k) for rec in self.bodies
                 for k, n in enumerate(rec.nodes) if n.compaction is not None}
        if len(found) > 1:
            (_, ra, ka), (_, rb, kb) = list(found.values())[:2]
            raise ValueError(f"this {self.control} node's bodies hold two compaction nodes, "
                             f"{ra.where(ka)} and {rb.where(kb)}; a graph has at most one "
                             "compaction node, bodies included: it alone sets the next replay's "
                             "logical size")
        self.compaction = next(iter(found.values()))[0] if found else None
        self.resizes = self.compaction is not None
        self.permutes_samples = any(n.permutes_samples for n in inner)
        self.reorders = any(n.reorders for n in inner)
        if self.resizes and self.reorders and len(self.bodies) > 1:
            # each body graph checked its own order; across two branches (the compaction in
            # one, a reorder in the other) a loop around this node would run the reorder
            # after the compaction
            holds = [b for b, rec in enumerate(self.bodies)
                     if any(n.compaction is not None for n in rec.nodes)]
            if any(n.reorders for b, rec in enumerate(self.bodies) if b not in holds for n in rec.nodes):
                raise ValueError(f"this {self.control} node holds the compaction in one branch and a "
                                 "reorder in another; record reorder() before compact(), in the "
                                 "same body or before the control node")

    def default_name(self) -> str:
        return self.control

    def body_nodes(self):
        """(label, Recording) of each body, in order."""
        return tuple(zip(self.body_labels, self.bodies))

    def __repr__(self):
        cond = f"{{{self.cond[0]!r}}}, " if self.cond is not None else ""
        sizes = ", ".join(f"{lab}: {len(rec)} nodes" for lab, rec in self.body_nodes())
        limit = f", max_iterations={self.max_iterations}" if self.max_iterations is not None else ""
        if self.max_iterations is not None and self.on_max != "raise":
            limit += f", on_max={self.on_max!r}"
        return f"{self.control}({cond}{sizes}{limit})"


def _max_iterations(n):
    """None or a positive integer (a NumPy integer too) below 2**63: a bool, a float, a str is
    a TypeError (True is not "one iteration"), 0 or less a ValueError."""
    if n is None:
        return None
    if isinstance(n, bool) or not hasattr(type(n), "__index__"):
        raise TypeError(f"while_loop(): max_iterations is a positive int or None, got "
                        f"{type(n).__name__} {n!r}")
    n = operator.index(n)
    if not 1 <= n < 1 << 63:
        raise ValueError(f"while_loop(): max_iterations is a positive int below 2**63 or None "
                         f"(no limit), got {n}")
    return n


@keywords_after(2, "while_loop(more, body, max_iterations=100)")
def while_loop(cond, body, *, max_iterations: int | None = None, on_max: str = "raise") -> ControlNode:
    """A node that runs ``body`` while ``cond[0]`` is true, checked before each iteration.

    As CUDA's WHILE node does: ``while cond[0]: body``. The body's nodes are compiled
    into the plan of the graph that records this node: one ``launch`` runs everything,
    on one team, with the logical size of the outer graph.

    Parameters
    ----------
    cond : array or {name: array}
        A one-element (shape ``()`` or ``(1,)``) bool or integer array, nonzero: true, on
        the CPU or a GPU, which the body (or a node before this one) sets (default name
        ``cond``).
    body : Graph
        The recorded graph to run (its recording now: nodes recorded into it later are
        not part of the loop).
    max_iterations : int, optional
        At most this many iterations (None: no limit; Ctrl-C stops a long loop either
        way). What reaching it with ``cond[0]`` still true does is ``on_max``'s.
    on_max : {"raise", "stop"}, default "raise"
        ``"raise"``: the launch stops with ``RuntimeError`` naming the node.
        ``"stop"``: the loop ends there and the replay goes on, as a solver's ``maxiter``
        does (``g.iterations(name)`` says how many it ran, and whether it stopped there).

    Returns
    -------
    Node
        The control node.

    Raises
    ------
    TypeError
        ``cond`` not a one-element bool or integer array, ``body`` not a Graph, a bad
        ``max_iterations``.
    ValueError
        An empty body, a body holding a collective, ``max_iterations`` < 1, ``on_max``
        not ``"raise"`` or ``"stop"``.
    RuntimeError
        ``body`` is being launched right now.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import ufunc, while_loop
    >>> x, more = np.zeros(1), np.ones(1, dtype=bool)
    >>> body = eagle.Graph()
    >>> body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="inc")
    >>> body.add_node(ufunc(np.less, {"x": x}, 5.0, out={"more": more}), name="test")
    >>> g = eagle.Graph()
    >>> g.add_node(while_loop(more, body), name="loop")
    >>> g.build().launch(1)
    >>> x
    array([5.])
    """
    c = _condition(cond, "while_loop()")
    max_iterations = _max_iterations(max_iterations)
    if not isinstance(on_max, str) or on_max not in ("raise", "stop"):
        raise ValueError(f"while_loop(): on_max is \"raise\" or \"stop\", got {on_max!r}")
    rec, src = _body(body, "while_loop(): body")
    return ControlNode("while", c, (rec,), ("body",), max_iterations, (src,), on_max)


@keywords_after(3, "if_else(cond, then, otherwise)")
def if_else(cond, then, otherwise=None) -> ControlNode:
    """A node that runs ``then`` when ``cond[0]`` is true, else ``otherwise``.

    ``if cond[0]: then else: otherwise``; nothing runs for a false condition when
    ``otherwise`` is None.

    Parameters
    ----------
    cond : array or {name: array}
        A one-element (shape ``()`` or ``(1,)``) bool or integer array, nonzero: true, on
        the CPU or a GPU, which the body (or a node before this one) sets (default name
        ``cond``).
    then : Graph
        The recorded graph run when the condition is true.
    otherwise : Graph, optional
        The recorded graph run when it is false.

    Returns
    -------
    Node
        The control node.

    Raises
    ------
    TypeError
        ``cond`` not a one-element bool or integer array, a body that is not a Graph.
    ValueError
        An empty body, a body holding a collective.
    RuntimeError
        A body is being launched right now.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import if_else, ufunc
    >>> x, big = np.ones(3), np.array(True)
    >>> halve = eagle.Graph()
    >>> halve.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), name="halve")
    >>> g = eagle.Graph()
    >>> g.add_node(if_else({"big": big}, halve), name="maybe")
    >>> g.build().launch(2)
    >>> x
    array([0.25, 0.25, 0.25])
    """
    c = _condition(cond, "if_else()")
    made = [_body(then, "if_else(): then")]
    labels = ["then"]
    if otherwise is not None:
        made.append(_body(otherwise, "if_else(): otherwise"))
        labels.append("otherwise")
    return ControlNode("if_else", c, tuple(r for r, _ in made), tuple(labels),
                       body_graphs=tuple(g for _, g in made))


def subgraph(graph) -> ControlNode:
    """A node that runs the recorded ``graph`` in place, once per replay.

    Its nodes run in their order, on the outer graph's team and logical size.

    Parameters
    ----------
    graph : Graph
        The recorded graph (its recording now).

    Returns
    -------
    Node
        The control node.

    Raises
    ------
    TypeError
        ``graph`` is not a Graph.
    ValueError
        An empty graph, a graph holding a collective.
    RuntimeError
        ``graph`` is being launched right now.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import subgraph, ufunc
    >>> x = np.ones(2)
    >>> inner = eagle.Graph()
    >>> inner.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="inc")
    >>> g = eagle.Graph()
    >>> g.add_node(subgraph(inner), name="inner")
    >>> g.build().launch(3)
    >>> x
    array([4., 4.])
    """
    rec, src = _body(graph, "subgraph(): graph")
    return ControlNode("subgraph", None, (rec,), ("graph",), body_graphs=(src,))
