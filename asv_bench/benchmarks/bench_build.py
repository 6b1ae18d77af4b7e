"""Recording and ``build()`` as the graph grows: both should be linear in nodes."""
from . import chain_nodes, record


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
