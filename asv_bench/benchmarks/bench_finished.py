"""Finished samples: a Monte Carlo transport step run to completion, with and
without a compaction node, and the cost of a compaction node when no sample dies.

The step is ``eagle.bench.finished``'s transport kernel (a C kernel compiled
with ``cc`` at run time; a NumPy stand-in without a compiler): every live
particle makes random flights and is absorbed with probability 0.05 per
replay. ``python -m eagle.bench.finished`` prints the same comparison as a
table with ratios and a policy sweep.

A timed body consumes its particles (they finish), so each sample is one call
on fresh particles made in ``setup`` (``number = 1``, no warm-up calls).
"""
import eagle

from . import THREADS, scaled, use_threads

#: particles (quick mode: a few hundred)
PARTICLES = 1_000_000
ABSORB = 0.05
#: replays of the no-death benchmark
NO_DEATH_REPLAYS = 100


class _Fresh:
    number = 1
    repeat = 5
    warmup_time = 0.0
    timeout = 300


class ToCompletion(_Fresh):
    """Time to completion: ``launch_until_done`` with a compaction policy, or (``none``)
    ``launch(R)`` over all particles, R being the replays to completion."""

    params = [["none", "every replay", "every 4", "dead >= 25%", "dead >= 50%"], THREADS]
    param_names = ["compaction", "threads"]

    def setup(self, policy, threads):
        from eagle.bench import finished as bf

        self.previous_threads = use_threads(threads)
        n = scaled(PARTICLES, 300)
        # the replays to completion do not depend on the policy: each particle's own RNG decides
        _, self.replays, _, _ = bf.run(n, ABSORB, 1, bf.POLICIES["every replay"])
        self.s = bf.particles(n)
        self.g, self.node = bf.transport_graph(self.s, ABSORB, 1, bf.POLICIES[policy])

    def teardown(self, policy, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_to_completion(self, policy, threads):
        if self.node is None:
            self.g.launch(self.replays)
        else:
            self.g.launch_until_done(10 * self.replays)


class NoDeath(_Fresh):
    """No particle dies: ``NO_DEATH_REPLAYS`` replays with and without a compaction node
    (its counting pass is the whole cost; nothing moves)."""

    params = [["without", "with"], THREADS]
    param_names = ["compaction node", "threads"]

    def setup(self, which, threads):
        from eagle.bench import finished as bf

        self.previous_threads = use_threads(threads)
        self.s = bf.particles(scaled(PARTICLES, 300))
        self.g, _ = bf.transport_graph(self.s, 0.0, 1, bf.POLICIES["every replay" if which == "with" else "none"])

    def teardown(self, which, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_replays_100(self, which, threads):
        self.g.launch(NO_DEATH_REPLAYS)
