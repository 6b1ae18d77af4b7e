"""Recording and ``build()`` as the graph grows: both should be linear in nodes."""
from eagle.bench.cases import record_shape, recording_nodes

from . import chain_nodes, record, scaled


class Build:
    """``build()`` of a recorded chain of n native nodes (n stages)."""

    params = [[10, 100, 1000]]
    param_names = ["nodes"]

    def setup(self, n):
        self.g = record(chain_nodes(n))

    def time_build(self, n):
        self.g.build()


class Record:
    """Recording a chain of n native nodes into a fresh graph (staging included)."""

    params = [[10, 100, 1000]]
    param_names = ["nodes"]

    def setup(self, n):
        self.nodes = chain_nodes(n)

    def time_record(self, n):
        record(self.nodes)


class RecordShapes:
    """Recording n nodes in the shapes that must stay linear (see ``eagle.bench.cases.RECORDING_SHAPES``):
    on separate arrays one by one (the reference), as one ``add_group``, and as nodes
    writing disjoint slices of one buffer. The goal: both others within 3x of the reference."""

    params = [["separate", "group", "slices"], [4000, 40000]]
    param_names = ["shape", "nodes"]
    timeout = 240
    # one recording per sample (40,000 nodes take seconds); a few samples suffice
    number = 1
    repeat = (2, 5, 30.0)
    warmup_time = 0

    def setup(self, shape, n):
        self.nodes = recording_nodes(shape, scaled(n, 40))

    def time_record(self, shape, n):
        record_shape(shape, self.nodes)
