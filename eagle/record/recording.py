"""``Recording``: a read-only view of what a graph recorded, handed to backends.

A backend, the profile and scale-out read a graph through this view only
(nodes, names, stages, edges, capacity): never through the graph's private
state. ``eagle.Graph.recording()`` makes one; it is a snapshot, consistent
while another thread records (the nodes recorded so far, each with its name,
stage and edges), and it never changes afterwards.
"""
from __future__ import annotations

from eagle.record.node import Node

__all__ = ["Recording"]


def stage_rows(stage_of):
    """Node indexes per stage, in recording order within a stage."""
    rows = [[] for _ in range(max(stage_of, default=-1) + 1)]
    for i, s in enumerate(stage_of):
        rows[s].append(i)
    return rows


class Recording:
    """Nodes in recording order, with their names, stages and edges.

    Attributes (tuples, read-only by convention): ``nodes``, ``names``,
    ``stage_of`` (the stage of each node), ``edges`` (``eagle.record.staging``
    dependencies: ``src``, ``dst``, ``label``), and ``rows`` (node indexes per
    stage); ``n_groups``; ``capacity``, ``capacity_bound_by`` and
    ``logical_size`` as the graph had them when the view was made.
    """

    __slots__ = ("nodes", "names", "stage_of", "edges", "rows", "n_groups", "capacity",
                 "capacity_bound_by", "logical_size")

    def __init__(self, nodes, names, stage_of, edges, *, n_groups=0, capacity=0, capacity_bound_by=None,
                 logical_size=0):
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.names: tuple[str, ...] = tuple(names)
        self.stage_of: tuple[int, ...] = tuple(stage_of)
        self.edges = tuple(edges)
        self.rows = tuple(tuple(r) for r in stage_rows(self.stage_of))
        self.n_groups = n_groups
        self.capacity = capacity
        self.capacity_bound_by = capacity_bound_by
        self.logical_size = logical_size

    def __len__(self):
        return len(self.nodes)

    def box(self, i) -> str:
        """Node ``i``'s name between its kind's marks, as the picture draws it: ``<join>``."""
        left, right = self.nodes[i].box
        return f"{left}{self.names[i]}{right}"

    def where(self, i) -> str:
        """``node 'join' (stage 1)``: how eagle names node ``i`` in a note."""
        return f"node {self.names[i]!r} (stage {self.stage_of[i]})"

    @property
    def has_collectives(self) -> bool:
        return any(n.collective for n in self.nodes)

    def index_of_resizer(self):
        """The index of the compaction node (the one that sets the logical size), or None."""
        return next((i for i, n in enumerate(self.nodes) if n.resizes), None)
