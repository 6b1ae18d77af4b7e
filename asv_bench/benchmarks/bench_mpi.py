"""An allreduce node beside ``comm.Allreduce`` called from a plain Python loop (the design's
MPI row), on one rank (asv runs one process; ``python -m eagle.bench.mpi`` runs 1, 2 and
4 ranks under mpiexec). Every body makes 1000 replays or calls: divide by 1000.

Skips cleanly, the asv way (``NotImplementedError`` in ``setup``), without mpi4py.
"""
import numpy as np

from . import QUICK, REPLAYS


class Allreduce:
    params = [[8, 65536]]
    param_names = ["float64s"]

    def setup(self, n):
        try:
            from mpi4py import MPI
        except Exception as exc:  # ImportError, or an mpi4py that finds no MPI library
            raise NotImplementedError(f"mpi4py is not importable ({type(exc).__name__}: {exc})") from None
        import eagle
        from eagle.graph import allreduce

        n = min(n, 8) if QUICK else n
        self.comm = MPI.COMM_WORLD
        self.send, self.recv = np.ones(n), np.zeros(n)
        self.g = eagle.Graph()
        self.g.add_node(allreduce(self.send, self.recv, comm=self.comm))
        self.g.build()
        self.g.launch(10)

    def time_allreduce_node_launch_1000(self, n):
        self.g.launch(REPLAYS)

    def time_comm_Allreduce_loop_1000(self, n):
        Allreduce, send, recv = self.comm.Allreduce, self.send, self.recv
        for _ in range(REPLAYS):
            Allreduce(send, recv)
