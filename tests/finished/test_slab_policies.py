"""A step that recomputes ``alive`` each replay (the slab of eagle.bench.slab: alive = neither
leaked nor absorbed on this flight) under a compaction that waits for a share of finished
particles: the ones it leaves in the range must be masked with the accumulated flag (the
tallies and the alive update take ``where=alive``), or they fly again, come back to life
and are counted twice. Masked so, every policy gives the same tallies bit for bit: the draws
go by particle id and replay, never by position."""
import pytest

from eagle.bench.slab import SlabGraph


@pytest.mark.parametrize("n", [1, 7, 500, 5000])
def test_every_policy_counts_every_particle_once_and_gives_the_same_tallies(n):
    every_replay = SlabGraph(n).run()
    assert sum(every_replay) == n
    for fraction in (0.1, 0.25, 0.5, 1.0):
        assert SlabGraph(n, min_dead_fraction=fraction).run() == every_replay, fraction
    assert SlabGraph(n, compaction=False).run() == every_replay
