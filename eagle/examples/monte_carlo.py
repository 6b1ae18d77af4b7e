"""A Monte Carlo particle-transport tally on many ranks, as one eagle graph per rank.

    mpiexec -n 4 python -m eagle.examples.monte_carlo          # 4 ranks
    python -m eagle.examples.monte_carlo                       # one process: the same tallies

Particles random-walk on a 1-d lattice of cells (a slab): each step a live
particle is absorbed in its cell, or moves one cell left or right, or leaks
out at either face. The random numbers of particle ``i`` at step ``s`` come from
a counter-based hash of ``(seed, i, s)``: the set of per-particle streams is
fixed, and the ranks only share it out (rank r transports particles
``[r*N/size, (r+1)*N/size)``). Every decision is an integer comparison and every
tally an integer count, so the tallies are the same on 1, 2 or 4 ranks, bit
for bit.

Each replay of the graph is one step: ``transport`` (an opaque node over this
rank's particles) counts the step's absorptions per cell and the leaks,
``combine`` (an allreduce node) sums the counts over the ranks, ``accumulate``
adds them to the tally every rank holds.
"""
from __future__ import annotations

import argparse

import numpy as np

import eagle
from eagle._text import plain
from eagle.graph import allreduce, opaque

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STEP = np.uint64(0xD1B54A32D192ED03)


def _mix(z):
    """splitmix64's finalizer: a well-mixed 64-bit hash of each element of a uint64 array."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def random_bits(seed, ids, step):
    """64 random bits for each particle id at this step (independent of how ids are shared out)."""
    with np.errstate(over="ignore"):   # arithmetic modulo 2**64 is the point
        return _mix(ids * _GOLDEN + np.uint64(step) * _STEP + np.uint64(seed))


class Slab:
    """One rank's share of the particles and the graph that transports them."""

    def __init__(self, n_particles, n_cells=32, absorb=0.05, seed=2026, comm=None):
        from mpi4py import MPI

        self.comm = comm if comm is not None else MPI.COMM_WORLD
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        lo, hi = n_particles * rank // size, n_particles * (rank + 1) // size
        self.n_particles, self.n_cells, self.seed = n_particles, n_cells, seed
        # absorbed with probability `absorb`, else a step left or right
        self._absorb = np.uint64(int(absorb * 2**32))
        self.ids = np.arange(lo, hi, dtype=np.uint64)
        self.cell = np.full(hi - lo, n_cells // 2, dtype=np.int64)   # every particle starts mid-slab
        self.alive = np.ones(hi - lo, dtype=bool)
        self.step = np.zeros(1, dtype=np.int64)
        # per step: absorptions per cell, then leaks left, leaks right, particles still alive
        self.counts = np.zeros(n_cells + 3, dtype=np.int64)
        self.step_total = np.zeros_like(self.counts)
        self.tally = np.zeros_like(self.counts)

        g = eagle.Graph()
        g.add_node(opaque(self.transport, updates={"cell": self.cell, "alive": self.alive, "step": self.step},
                          writes={"counts": self.counts}), name="transport")
        g.add_node(allreduce(self.counts, self.step_total, op="sum", comm=self.comm), name="combine")
        g.add_node(opaque(self.accumulate, reads={"step_total": self.step_total},
                          updates={"tally": self.tally}), name="accumulate")
        self.graph = g.build()

    def transport(self):
        bits = random_bits(self.seed, self.ids, int(self.step[0]))
        self.step += 1
        live = self.alive
        absorbed = live & ((bits & np.uint64(0xFFFFFFFF)) < self._absorb)
        moving = live & ~absorbed
        left = (bits >> np.uint64(32)) & np.uint64(1)
        self.cell[moving] += np.where(left[moving] == 1, -1, 1)
        leak_left = moving & (self.cell < 0)
        leak_right = moving & (self.cell >= self.n_cells)
        c = self.counts
        c[:self.n_cells] = np.bincount(self.cell[absorbed], minlength=self.n_cells)
        c[self.n_cells] = leak_left.sum()
        c[self.n_cells + 1] = leak_right.sum()
        live &= ~(absorbed | leak_left | leak_right)
        c[self.n_cells + 2] = live.sum()

    def accumulate(self):
        self.tally[:-1] += self.step_total[:-1]
        self.tally[-1] = self.step_total[-1]   # still alive after the last step

    def run(self, n_steps):
        self.graph.launch(n_steps)
        return self.tally.copy()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m eagle.examples.monte_carlo",
                                description=plain(__doc__.split("\n\n", 2)[2]),
                                epilog="Run under mpiexec -n 4 for 4 ranks: the tallies are the same.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--particles", type=int, default=100_000,
                   help="particles over all ranks, shared out between them (default %(default)s)")
    p.add_argument("--steps", type=int, default=200,
                   help="steps to transport them: replays of the graph (default %(default)s)")
    p.add_argument("--cells", type=int, default=32,
                   help="cells of the slab; every particle starts in the middle one (default %(default)s)")
    p.add_argument("--seed", type=int, default=2026,
                   help="seed of the per-particle random streams (default %(default)s)")
    p.add_argument("--show", action="store_true", help="print the graph")
    args = p.parse_args(argv)
    slab = Slab(args.particles, args.cells, seed=args.seed)
    tally = slab.run(args.steps)
    comm = slab.comm
    if comm.Get_rank() == 0:
        n = args.cells
        print(f"ranks: {comm.Get_size()} · particles {args.particles} · steps {args.steps} · seed {args.seed}")
        if args.show:
            print(slab.graph)
        print("absorbed per cell:", " ".join(map(str, tally[:n])))
        print(f"absorbed {tally[:n].sum()} · leaked left {tally[n]} · leaked right {tally[n + 1]} · "
              f"alive {tally[n + 2]}")
        assert tally.sum() == args.particles   # every particle is counted once
    return tally


if __name__ == "__main__":
    main()
