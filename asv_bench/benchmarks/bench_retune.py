"""Retuning: ``set_logical_size(n)`` beside a rebuild, and beside a plain Python
attribute assignment (the floor for anything called from Python).

Each ``*_x1000`` body makes 1000 calls: divide by 1000 for the time per call.
"""
from . import CALLS, chain_graph


class _Reference:
    __slots__ = ("logical_size",)


class Retune:
    """On a built chain of n native nodes over 1024 samples."""

    params = [[1, 10, 100]]
    param_names = ["nodes"]

    def setup(self, n):
        self.g = chain_graph(n, size=1024).build()
        self.g.launch(1)
        self.sizes = [512 + (i % 2) for i in range(CALLS)]
        self.ref = _Reference()

    def time_set_logical_size_x1000(self, n):
        set_size = self.g.set_logical_size
        for m in self.sizes:
            set_size(m)

    def time_rebuild(self, n):
        self.g.build()

    def time_attribute_assignment_x1000(self, n):
        ref = self.ref
        for m in self.sizes:
            ref.logical_size = m
