"""Hostile failures during a launch: the exception the caller gets is the one
the sequential oracle (the nodes run one by one in recording order) raises."""
import time

import numpy as np
import pytest

import eagle
from eagle.graph import opaque

needs_openmp = pytest.mark.skipif(not eagle.have_openmp(), reason="eagle built without OpenMP")


@needs_openmp
@pytest.mark.parametrize("n_threads", [2, 3])
def test_when_two_nodes_of_a_stage_raise_the_first_recorded_one_is_reported(threads, n_threads):
    # 'first' raises late, 'second' at once on another thread: recording order decides
    threads(n_threads)
    a, b = np.zeros(2), np.zeros(2)

    def first():
        time.sleep(0.003)
        raise ValueError("first")

    def second():
        raise KeyError("second")

    g = eagle.Graph()
    g.add_group([opaque(first, writes={"a": a}), opaque(second, writes={"b": b})],
                names=["first", "second"])
    g.build(teams="parallel")
    for _ in range(5):
        with pytest.raises(ValueError, match="first") as info:
            g.launch(3)
        assert info.value.__notes__[-1] == "eagle: raised by node 'first' (stage 0) in replay 0 of launch(3)"


@needs_openmp
def test_a_later_stage_never_hides_an_earlier_failure(threads):
    threads(2)
    a, b = np.zeros(2), np.zeros(2)
    seen = []

    def early():
        raise ValueError("early")

    def late():
        seen.append(1)

    g = eagle.Graph()
    g.add_group([opaque(early, writes={"a": a}), opaque(lambda: None, writes={"b": b})], names=["early", "idle"])
    g.add_node(opaque(late, reads={"a": a}), name="late")
    g.build(teams="parallel")
    with pytest.raises(ValueError, match="early"):
        g.launch(2)
    assert seen == []   # the stage after a failure never runs
