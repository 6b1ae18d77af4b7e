"""if_else (a branch chosen per replay), subgraph (a child graph used twice), nesting
and retune through them, against the Python control flow on copies of the arrays."""
from __future__ import annotations

import numpy as np
import pytest

import eagle
import eagle.kernels as ek
from eagle.graph import Graph, if_else, native, opaque, subgraph, ufunc, while_loop


@pytest.mark.parametrize("threads", [1, 2])
def test_branch_chosen_per_replay_on_a_counter(threads):
    eagle.set_num_threads(threads)
    n = 5000
    x = np.arange(n, dtype=np.float64)
    count, even = np.zeros(1, np.int64), np.zeros(1, bool)
    then, other = Graph(), Graph()
    then.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    other.add_node(native(ek.scale(0.5), reads={"x": x}, writes={"x": x}), "halve")
    g = Graph()

    def tick():
        count[0] += 1
        even[0] = count[0] % 2 == 0
    g.add_node(opaque(tick, writes={"count": count, "even": even}), "tick")
    g.add_node(if_else({"even": even}, then, other), "branch")
    g.build()
    xo = x.copy()
    g.launch(7)
    for c in range(1, 8):
        if c % 2 == 0:
            xo += 1.0
        else:
            xo *= 0.5
    np.testing.assert_array_equal(x, xo)


def test_if_without_otherwise_does_nothing_when_false():
    x = np.zeros(4)
    flag = np.zeros((), bool)
    then = Graph()
    then.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(if_else({"flag": flag}, then), "maybe")
    g.build().launch(3)
    assert not x.any()
    flag[()] = True
    g.launch(2)
    assert (x == 2).all()


def test_a_child_graph_used_twice():
    n = 100
    x, y = np.ones(n), np.zeros(n)
    child = Graph()
    child.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), "acc")
    g = Graph()
    g.add_node(subgraph(child), "first")
    g.add_node(native(ek.scale(2.0), reads={"y": y}, writes={"x": x}), "double")
    g.add_node(subgraph(child), "second")
    g.build()
    assert g.stages == [["first"], ["double"], ["second"]]
    xo, yo = x.copy(), y.copy()
    g.launch(3)
    for _ in range(3):
        yo += xo
        xo[:] = 2 * yo
        yo += xo
    np.testing.assert_array_equal(y, yo)
    np.testing.assert_array_equal(x, xo)


@pytest.mark.parametrize("threads", [1, 2])
def test_while_inside_if_inside_while(threads):
    eagle.set_num_threads(threads)
    n = 64
    x = np.zeros(n)
    outer, inner = np.zeros(1, np.int64), np.zeros(1, np.int64)
    odd = np.zeros(1, bool)
    inner_body = Graph()
    inner_body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    inner_body.add_node(opaque(lambda: inner.__setitem__(0, inner[0] - 1), writes={"inner": inner}), "dec")
    then = Graph()
    then.add_node(opaque(lambda: inner.__setitem__(0, 3), writes={"inner": inner}), "arm")
    then.add_node(while_loop({"inner": inner}, inner_body), "inner_loop")
    body = Graph()

    def step():
        outer[0] -= 1
        odd[0] = outer[0] % 2 == 1
    body.add_node(opaque(step, writes={"outer": outer, "odd": odd}), "step")
    body.add_node(if_else({"odd": odd}, then), "branch")
    g = Graph()
    g.add_node(opaque(lambda: outer.__setitem__(0, 5), writes={"outer": outer}), "arm")
    g.add_node(while_loop({"outer": outer}, body), "outer_loop")
    g.build()
    g.launch(2)
    expect = 0
    for _ in range(2):
        o = 5
        while o:
            o -= 1
            if o % 2 == 1:
                i = 3
                while i:
                    expect += 1
                    i -= 1
    assert (x == expect).all() and expect == 12


def test_retune_reaches_sized_nodes_inside_a_branch():
    n = 100
    x = np.zeros(n)
    flag = np.ones(1, bool)
    then = Graph()
    then.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(if_else({"flag": flag}, then), "branch")
    g.build()
    assert g.capacity == n
    g.set_logical_size(30)
    g.launch(1)
    assert (x[:30] == 1).all() and not x[30:].any()
    g.set_logical_size(60)
    g.launch(1)
    assert (x[:30] == 2).all() and (x[30:60] == 1).all() and not x[60:].any()


def test_an_opaque_body_node_on_a_sized_array_does_not_hide_the_capacity():
    # the ufunc marks x per-sample; the opaque node reading x (and writing a one-element
    # residual) must not turn x into a not-per-sample array of the control node
    n = 50
    x, resid = np.ones(n), np.zeros(1)
    flag = np.ones(1, bool)
    then = Graph()
    then.add_node(ufunc(np.multiply, {"x": x}, 0.5, out={"x": x}), "halve")

    def measure():
        resid[0] = x.sum()

    then.add_node(opaque(measure, reads={"x": x}, writes={"r": resid}), "resid")
    g = Graph()
    g.add_node(if_else({"flag": flag}, then), "branch")
    assert g.capacity == n
    g.build()
    g.set_logical_size(10)
    g.launch(1)
    assert (x[:10] == 0.5).all() and (x[10:] == 1).all() and resid[0] == 45.0


def test_record_time_errors():
    x = np.zeros(4)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    with pytest.raises(TypeError, match="one-entry dict"):
        while_loop({"a": np.ones(1, bool), "b": np.ones(1, bool)}, body)
    with pytest.raises(ValueError, match="one element"):
        while_loop({"c": np.ones(2, bool)}, body)
    with pytest.raises(TypeError, match="bool or integer"):
        if_else({"c": np.ones(1)}, body)
    with pytest.raises(ValueError, match="empty graph"):
        while_loop({"c": np.ones(1, bool)}, Graph())
    with pytest.raises(TypeError, match="eagle.Graph"):
        subgraph(lambda: None)
    with pytest.raises(ValueError, match="max_iterations"):
        while_loop({"c": np.ones(1, bool)}, body, max_iterations=0)
    # a graph cannot hold its own recording, directly or through a nested body
    with pytest.raises(ValueError, match="its own recording"):
        body.add_node(subgraph(body))
    outer = Graph()
    outer.add_node(subgraph(body), "s")
    with pytest.raises(ValueError, match="through s"):
        body.add_node(subgraph(outer))


@pytest.mark.parametrize("bad,err", [(True, TypeError), (1.5, TypeError), ("3", TypeError),
                                     (0, ValueError), (-1, ValueError), (1 << 63, ValueError)])
def test_max_iterations_of_a_wrong_type_or_value_says_which(bad, err):
    """True is not "one iteration" and 1.5 not a count: a TypeError naming the type; a
    count below 1 (or past int64) a ValueError; a NumPy integer is a count."""
    x = np.zeros(4)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    with pytest.raises(err, match="while_loop\\(\\): max_iterations is a positive int") as info:
        while_loop({"c": np.ones(1, bool)}, body, max_iterations=bad)
    if err is TypeError:
        assert type(bad).__name__ in str(info.value)


def test_max_iterations_takes_a_numpy_integer_and_subgraph_names_its_argument():
    x = np.zeros(4)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(while_loop({"c": np.ones(1, bool)}, body, max_iterations=np.int64(3)), "loop")
    g.build()
    with pytest.raises(RuntimeError, match="'loop' reached max_iterations=3"):
        g.launch(1)
    assert (x == 3).all()
    with pytest.raises(TypeError, match=r"^subgraph\(\): graph must be an eagle.Graph, got int$"):
        subgraph(3)


def test_a_body_being_launched_is_refused():
    x = np.zeros(4)
    made = []
    body = Graph()

    def make():
        try:
            subgraph(body)
        except RuntimeError as e:
            made.append(str(e))
    body.add_node(opaque(make, writes={"x": x}), "make")
    body.build().launch(1)
    assert made and "being launched" in made[0]


def test_body_recording_is_the_public_way_and_refuses_a_running_graph():
    x = np.zeros(4)
    seen = []
    g = Graph()

    def look():
        try:
            g.body_recording("mine")
        except RuntimeError as e:
            seen.append(str(e))
    g.add_node(opaque(look, writes={"x": x}), "look")
    rec = g.body_recording()
    assert list(rec.names) == list(g.recording().names) == ["look"]
    g.build().launch(1)
    assert seen and seen[0].startswith("mine: this graph is being launched")
    assert list(g.body_recording().names) == ["look"]   # idle again after the launch


def test_a_collective_inside_a_body_is_refused():
    pytest.importorskip("mpi4py")
    from eagle.graph import allreduce
    a, b = np.ones(1), np.ones(1)
    body = Graph()
    body.add_node(allreduce(a, b, op="max"), "sum")
    with pytest.raises(ValueError, match="allreduce node 'sum'.*allreduce"):
        while_loop({"c": np.ones(1, bool)}, body)


def test_a_condition_named_as_a_body_array_it_overlaps():
    """The condition {'k': k[:1]} and a body that updates k under the name 'k': two
    arrays under one name, told apart by the control node (the body's gets a suffix)."""
    k = np.array([3, 0, 0], dtype=np.int64)
    body = eagle.Graph()

    def count_down():
        k[0] -= 1

    body.add_node(eagle.graph.opaque(count_down, updates={"k": k}), name="down")
    g = eagle.Graph()
    g.add_node(eagle.graph.while_loop({"k": k[:1]}, body, max_iterations=10), name="loop")
    g.build()
    g.launch(1)
    assert k[0] == 0
    node = g.recording().nodes[0]
    assert set(node.reads) | set(node.writes) >= {"k", "k.2"}
