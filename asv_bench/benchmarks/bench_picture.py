"""The picture: ``str(g)`` for a graph of 100 nodes, before and after build()."""
from . import chain_nodes, make_graph, record


class Picture:
    params = [["chain100", "wide100"], [False, True]]
    param_names = ["graph", "built"]

    def setup(self, graph, built):
        self.g = make_graph(graph)
        if built:
            self.g.build()

    def time_str(self, graph, built):
        str(self.g)


class PictureRecorded:
    """The picture of a chain as it grows (its cost per node should stay flat)."""

    params = [[10, 100, 1000]]
    param_names = ["nodes"]

    def setup(self, n):
        self.g = record(chain_nodes(n))

    def time_str(self, n):
        str(self.g)
