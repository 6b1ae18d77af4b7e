"""The slab-transport row of ``python -m eagle.bench``: particles enter a slab (total cross
section 1, absorption 0.3, thickness 2) along its normal, fly exponential distances, are
absorbed, scatter isotropically, or leave through a face, until none is left. As the
vectorised NumPy loop that removes finished particles, and as one graph (an exponential
node for the flights, uniform nodes, ufunc nodes, the tallies of reflected / transmitted /
absorbed particles as ``add.reduce`` nodes accumulated by 0-d nodes, a compaction) run by
``launch_until_done``; or, without the compaction, with the step masked by ``where=alive``. The tallies
agree within Monte Carlo error (different random streams). Shared with asv
(asv_bench/benchmarks/bench_slab.py)."""
from __future__ import annotations

import numpy as np

import eagle
from eagle.graph import compact, exponential, ufunc, uniform

SIGMA_T, SIGMA_A, THICKNESS = 1.0, 0.3, 2.0
PARTICLES = 1_000_000
ABSORB_BELOW = -1.0 + 2.0 * (SIGMA_A / SIGMA_T)


def numpy_slab(n, seed=0):
    """(reflected, transmitted, absorbed): the NumPy loop."""
    rng = np.random.default_rng(seed)
    x, mu = np.zeros(n), np.ones(n)
    tallies = np.zeros(3, np.int64)
    while x.size:
        x = x + mu * (-np.log1p(-rng.random(x.size)) / SIGMA_T)
        refl, trans = x < 0.0, x > THICKNESS
        leak = refl | trans
        absorbed = (rng.random(x.size) < SIGMA_A / SIGMA_T) & ~leak
        tallies += (np.count_nonzero(refl), np.count_nonzero(trans), np.count_nonzero(absorbed))
        keep = ~(leak | absorbed)
        x = x[keep]
        mu = 2.0 * rng.random(x.size) - 1.0
    return tuple(int(t) for t in tallies)


class SlabGraph:
    """The same transport as a graph; ``run()`` starts the particles again and returns the
    tallies (reflected, transmitted, absorbed). As in the NumPy loop, a flight's direction
    is drawn for the particles still alive, at the start of the step (``max(mu, first)``:
    ``first`` is 1.0 on the first replay, so entering particles fly along the normal, and
    -1.0 after it), so the direction is no state and the compaction moves the depth and the
    ids only; it comes from the Philox block the absorption test's number comes from (a
    uniform node with two outputs), so a particle's step costs two Philox calls, not three. ``compaction=False``: no compaction node;
    finished particles stay in place and keep being moved, and ``where=alive`` keeps them
    out of the tallies and dead (replays until none is alive, counted by a reduction).
    ``min_dead_fraction`` above 0: the compaction waits for that share of finished
    particles, so the ones it leaves in the range are masked the same way (the step
    recomputes ``alive`` from the flight: unmasked, a finished particle would come back)."""

    def __init__(self, n, key=7, compaction=True, min_dead_fraction=0.0):
        self.n, self.compaction = n, compaction
        self.x, self.mu = np.zeros(n), np.zeros(n)
        self.first = np.ones(())
        self.ids = np.arange(n, dtype=np.int64)
        d, u = np.zeros(n), np.zeros(n)
        refl, trans, leak, absorbed = (np.zeros(n, bool) for _ in range(4))
        self.alive = np.ones(n, bool)
        self.live = np.zeros((), np.int64)
        step = [np.zeros((), np.int64) for _ in range(3)]
        self.totals = [np.zeros((), np.int64) for _ in range(3)]
        x, mu, ids, first = {"x": self.x}, {"mu": self.mu}, {"id": self.ids}, {"first": self.first}
        # without a compaction, or with one that leaves finished particles in the range, the
        # tallies and the alive update see live particles only
        masked = {} if compaction and min_dead_fraction == 0.0 else {"where": {"alive": self.alive}}
        g = eagle.Graph()
        # the absorption test's number and the direction, from one Philox block a particle
        g.add_node(uniform({"u": u, **mu}, key=key + 1, low=-1.0, high=1.0, ids=ids), name="collide")
        g.add_node(ufunc(np.maximum, mu, first, out=mu), name="entering")
        g.add_node(exponential({"d": d}, key=key, scale=1.0 / SIGMA_T, ids=ids), name="flight")
        g.add_node(ufunc(np.multiply, mu, d, out={"d": d}), name="dx")
        g.add_node(ufunc(np.add, x, d, out=x), name="move")
        g.add_node(ufunc(np.less, x, 0.0, out={"refl": refl}), name="reflected")
        g.add_node(ufunc(np.greater, x, THICKNESS, out={"trans": trans}), name="transmitted")
        g.add_node(ufunc(np.logical_or, refl, trans, out={"leak": leak}), name="leaked")
        # u uniform in [-1, 1): absorbed with probability SIGMA_A / SIGMA_T
        g.add_node(ufunc(np.less, {"u": u}, ABSORB_BELOW, out={"absorbed": absorbed}), name="absorb")
        g.add_node(ufunc(np.greater, absorbed, leak, out={"absorbed": absorbed}), name="inside")
        for name, flags, s, total in zip(("n_refl", "n_trans", "n_abs"), (refl, trans, absorbed), step,
                                         self.totals):
            g.add_node(ufunc(np.add.reduce, flags, out=s, **masked), name=name)
            g.add_node(ufunc(np.add, total, s, out=total), name="sum_" + name[2:])
        # alive: neither leaked nor absorbed (the two exclude each other)
        g.add_node(ufunc(np.equal, leak, absorbed, out={"alive": self.alive}, **masked), name="alive")
        g.add_node(ufunc(np.minimum, first, -1.0, out=first), name="entered")   # once a replay (0-d)
        if compaction:
            # 0.0: on every replay that finished one, so the step needs no mask (a finished
            # particle left in the range, unmasked, would fly again and be counted twice)
            g.add_node(compact({"alive": self.alive}, x, ids=ids,
                               min_dead_fraction=min_dead_fraction), name="compact")
        else:
            g.add_node(ufunc(np.add.reduce, {"alive": self.alive}, out={"live": self.live}), name="live")
        self.g = g.build()

    def run(self, max_replays=10_000):
        self.x[:], self.alive[:], self.first[...] = 0.0, True, 1.0
        self.ids[:] = np.arange(self.n)
        for t in self.totals:
            t[...] = 0
        self.g.restart(self.n)
        if self.compaction:
            self.g.launch_until_done(max_replays)
        else:
            self.live[...] = self.n
            while self.live and self.g.replays < max_replays:
                self.g.launch(1)
        return tuple(int(t) for t in self.totals)


def agree(a, b, n):
    """Whether two tallies agree within Monte Carlo error (6 standard deviations)."""
    return all(abs(x - y) <= 6 * np.sqrt(2 * n * (x / n) * (1 - x / n)) + 1 for x, y in zip(a, b))


def rows_slab(rounds, n=PARTICLES):
    """[(what, eagle s, reference name, reference s)], interleaved, best of ``rounds``."""
    import time

    graph = SlabGraph(n)
    best = {"eagle": float("inf"), "numpy": float("inf")}
    for _ in range(rounds):
        t = time.perf_counter()
        mine = graph.run()
        best["eagle"] = min(best["eagle"], time.perf_counter() - t)
        t = time.perf_counter()
        ref = numpy_slab(n)
        best["numpy"] = min(best["numpy"], time.perf_counter() - t)
        if sum(mine) != n or not agree(mine, ref, n):
            raise AssertionError(f"slab tallies disagree: eagle {mine}, NumPy {ref}")
    what = f"slab transport, {n:,} particles until done, tallies as reduction nodes"
    return [(what, best["eagle"], "NumPy loop, finished removed", best["numpy"])]
