"""A node's exception reaches the caller as it was raised, with eagle's note added
where it can be: whatever ``__notes__`` holds, the note never replaces the exception."""
import time

import numpy as np
import pytest

import eagle
from eagle.graph import opaque


class Odd(Exception):
    pass


class ReadOnlyNotes(Exception):
    @property
    def __notes__(self):
        return ("kept",)


class RefusesAttributes(Exception):
    def __setattr__(self, name, value):
        raise AttributeError("no attributes here")


def raiser(make):
    def fail():
        raise make()
    return fail


def with_notes(notes):
    def make():
        e = Odd("boom")
        e.__notes__ = notes
        return e
    return make


@pytest.mark.parametrize("notes, expected_first", [
    (("a", "b"), ["a", "b"]),
    ("a string", ["a string"]),
    (42, ["42"]),
    ((1, "b"), ["1", "b"]),
    ([], []),
    (["x"], ["x"]),
])
def test_odd_notes_keep_the_exception_and_gain_the_note(notes, expected_first):
    g = eagle.Graph()
    g.add_node(opaque(raiser(with_notes(notes)), writes={"x": np.zeros(2)}), name="bad")
    g.build()
    with pytest.raises(Odd, match="boom") as info:
        g.launch(1)
    got = list(info.value.__notes__)
    assert got[:-1] == expected_first
    assert "raised by node 'bad' (stage 0) in replay 0 of launch(1)" in got[-1]


@pytest.mark.parametrize("exc_type", [ReadOnlyNotes, RefusesAttributes])
def test_an_exception_that_takes_no_note_still_reaches_the_caller(exc_type):
    g = eagle.Graph()
    g.add_node(opaque(raiser(lambda: exc_type("deep")), writes={"x": np.zeros(2)}), name="bad")
    g.build()
    for _ in range(2):   # the graph stays usable
        with pytest.raises(exc_type, match="deep"):
            g.launch(1)


# ---- Hostile failures during a launch: the exception the caller gets is the one
# the sequential oracle (the nodes run one by one in recording order) raises.

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
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
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
    g.build(cpu=eagle.CpuOptions(teams="parallel"))
    with pytest.raises(ValueError, match="early"):
        g.launch(2)
    assert seen == []   # the stage after a failure never runs


# ---- a ufunc node whose inner loop raises (NumPy's integer power of a negative exponent) ----

def _power_graph(teams):
    x = np.arange(1, 11, dtype=np.int64)
    e = np.full(10, 2, np.int64)
    out = np.zeros(10, np.int64)
    g = eagle.Graph()
    g.add_node(eagle.graph.ufunc(np.power, {"x": x}, {"e": e}, out={"out": out}), name="pow")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    return g, x, e, out


@pytest.mark.parametrize("n_threads, teams", [(1, "serial"), (2, "serial"), (2, "parallel")])
def test_a_ufunc_loop_error_reaches_the_caller_with_the_node_named(threads, n_threads, teams):
    if n_threads > 1 and not eagle.have_openmp():
        pytest.skip("eagle built without OpenMP")
    threads(n_threads)
    g, x, e, out = _power_graph(teams)
    e[7] = -1
    with pytest.raises(ValueError, match="negative integer powers") as info:
        np.power(x, e)
    with pytest.raises(ValueError, match="negative integer powers") as info:
        g.launch(3)
    assert any("'pow' (stage 0)" in note for note in info.value.__notes__)
    # the graph stays usable, and the error does not come back once the input is fixed
    e[7] = 2
    g.launch(2)
    np.testing.assert_array_equal(out, x ** 2)


def test_a_ufunc_loop_error_beside_a_failing_opaque_node_is_noted():
    x = np.arange(1, 5, dtype=np.int64)
    e = np.full(4, -1, np.int64)
    out = np.zeros(4, np.int64)
    g = eagle.Graph()
    g.add_node(eagle.graph.ufunc(np.power, x, e, out=out), name="pow")

    def fails():
        raise KeyError("opaque")

    g.add_node(opaque(fails, reads={"out": out}), name="fails")
    g.build()
    with pytest.raises(ValueError, match="negative integer powers") as info:
        g.launch(1)
    g2_notes = info.value.__notes__
    assert any("'pow'" in n for n in g2_notes)
    e[:] = 1
    with pytest.raises(KeyError):   # nothing stale left over from the first launch
        g.launch(1)


def test_a_failed_launch_leaves_no_stale_reorder_error_for_the_next():
    key = np.array([0, 5, 1, 0], dtype=np.int64)   # 5 is outside [0, 2)
    x = np.arange(4.0)
    fail = [True]

    def node():
        if fail[0]:
            raise KeyError("boom")

    g = eagle.Graph()
    g.add_node(eagle.graph.reorder(key, {"x": x}, n_keys=2), name="sort")
    g.add_node(opaque(node, reads={"x": x}), name="fails")
    g.build()
    with pytest.raises(KeyError):
        g.launch(1)
    key[:] = [0, 1, 1, 0]
    fail[0] = False
    g.launch(1)   # a clean launch: nothing of the failed one is reported now
    np.testing.assert_array_equal(key, [0, 0, 1, 1])
