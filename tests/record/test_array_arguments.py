"""Every array argument of every constructor is an array or a one-entry dict ``{name: array}``,
read by one parser (eagle.record.arrays) with one set of checks and messages."""
import re

import numpy as np
import pytest

import eagle
from eagle.graph import (compact, if_else, native, normal, opaque, random_bits, reorder, subgraph, ufunc,
                         uniform, while_loop)
import eagle.kernels as ek


def _body():
    x = np.zeros(1)
    body = eagle.Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="inc")
    return body


def _cond():
    return np.zeros(1, dtype=bool)


# (what the constructor is given, how the node names it): the bare array takes the default name
ONE_ARRAY = {
    "while_loop cond": (lambda a: while_loop(a, _body()), _cond, "cond", lambda n: n.reads),
    "if_else cond": (lambda a: if_else(a, _body()), _cond, "cond", lambda n: n.reads),
    "compact alive": (lambda a: compact(a, {"x": np.zeros(4)}), lambda: np.ones(4, dtype=bool), "alive",
                      lambda n: n.writes),
    "reorder by": (lambda a: reorder(a, {"x": np.zeros(4)}, n_keys=2), lambda: np.zeros(4, np.int64), "key",
                   lambda n: n.writes),
    "compact ids": (lambda a: compact(np.ones(4, dtype=bool), {"x": np.zeros(4)}, ids=a),
                    lambda: np.arange(4, dtype=np.int64), "ids", lambda n: n.writes),
    "compact count": (lambda a: compact(np.ones(4, dtype=bool), {"x": np.zeros(4)}, count=a),
                      lambda: np.zeros(1, np.int64), "count", lambda n: n.writes),
    "ufunc operand": (lambda a: ufunc(np.negative, a, out=np.zeros(4)), lambda: np.ones(4), "in0",
                      lambda n: n.reads),
    "ufunc out": (lambda a: ufunc(np.negative, np.ones(4), out=a), lambda: np.zeros(4), "out0",
                  lambda n: n.writes),
    "ufunc where": (lambda a: ufunc(np.negative, np.ones(4), out=np.zeros(4), where=a),
                    lambda: np.ones(4, dtype=bool), "where", lambda n: n.reads),
    "normal out": (lambda a: normal(a, key=1), lambda: np.zeros(4), "out", lambda n: n.writes),
    "uniform ids": (lambda a: uniform(np.zeros(4), key=1, ids=a), lambda: np.arange(4, dtype=np.int64), "id",
                    lambda n: n.reads),
    "opaque reads": (lambda a: opaque(lambda: None, reads=a), lambda: np.ones(4), "in", lambda n: n.reads),
    "opaque writes": (lambda a: opaque(lambda: None, writes=a), lambda: np.ones(4), "out", lambda n: n.writes),
    "opaque updates": (lambda a: opaque(lambda: None, updates=a), lambda: np.ones(4), "inout",
                       lambda n: n.writes),
    "native writes": (lambda a: native(ek.fill(1.0), writes=a), lambda: np.zeros(4), "out",
                      lambda n: n.writes),
}


@pytest.mark.parametrize("what", list(ONE_ARRAY))
def test_a_bare_array_and_a_named_one_make_the_same_node_but_for_the_name(what):
    make, array, default, declared = ONE_ARRAY[what]
    a = array()
    bare, named = make(a), make({"mine": a})
    assert default in declared(bare) and declared(bare)[default] is a
    assert "mine" in declared(named) and declared(named)["mine"] is a
    assert default not in declared(named)
    assert type(bare) is type(named)


class _Exported:
    """The memory of ``a`` exported through the array interface, as ``a`` flags it."""

    def __init__(self, a):
        self.__array_interface__ = dict(a.__array_interface__)


@pytest.mark.parametrize("export", [False, True])
@pytest.mark.parametrize("what", list(ONE_ARRAY))
def test_read_only_memory_is_refused_where_the_node_writes_it_with_one_message(what, export):
    make, array, default, declared = ONE_ARRAY[what]
    ro = array()
    ro.flags.writeable = False
    given = _Exported(ro) if export else ro
    if default in make(array()).writes:
        with pytest.raises(ValueError, match=r"is read-only( \(_Exported exports it read-only\))?, and "
                                             r"the node writes it: pass a writable array"):
            make(given)
    else:
        node = make(given)   # a read-only array a node only reads is fine
        assert np.shares_memory(declared(node)[default], ro)


@pytest.mark.parametrize("what", list(ONE_ARRAY))
def test_a_dict_of_two_entries_is_refused_with_one_message(what):
    make, array, default, _ = ONE_ARRAY[what]
    if what.startswith(("opaque", "native")):
        pytest.skip("reads, writes and updates take dicts of several entries")
    with pytest.raises(TypeError, match=re.escape("is an array or a one-entry dict {name: array}, "
                                                  "got a dict of 2 entries")):
        make({"a": array(), "b": array()})
    with pytest.raises(TypeError, match=re.escape("got a dict of 2 entries ('a', 'b'): it takes one array")):
        make({"a": array(), "b": array()})
    with pytest.raises(TypeError, match=re.escape("is an array or a one-entry dict {name: array}, "
                                                  "got an empty dict: no array to take")):
        make({})


@pytest.mark.parametrize("what", list(ONE_ARRAY))
def test_something_that_is_no_array_is_refused_with_one_message(what):
    make, _, _, _ = ONE_ARRAY[what]
    with pytest.raises(TypeError, match=r"must be (an array or a dict \{name: array\} \()?"
                                        r"(an array, a scalar or a one-entry dict \{name: array\}|"
                                        r"a NumPy array, a CUDA array)"):
        make(object())


_NAME_RULE = "must be a non-empty one-line string (no line breaks, control or invisible format characters)"


@pytest.mark.parametrize("bad", [3, "", "y\nSECOND LINE", "y\x1b[31mRED", "a\u200bb", "a\u2028b", "a\x00"])
@pytest.mark.parametrize("what", list(ONE_ARRAY))
def test_a_name_that_is_no_one_line_string_is_refused_with_one_message(what, bad):
    make, array, _, _ = ONE_ARRAY[what]
    with pytest.raises(TypeError, match=re.escape(f"an array name {_NAME_RULE}, got {bad!r}")):
        make({bad: array()})


@pytest.mark.parametrize("bad", ["y\nSECOND LINE", "y\x1b[31mRED", "\u00ad"])
def test_array_names_and_node_names_follow_one_rule(bad):
    # reads/writes/updates dicts name their arrays as one-entry dicts do, and as nodes are named
    x = np.zeros(4)
    for make in (lambda: opaque(print, reads={bad: x}), lambda: opaque(print, writes={"ok": x, bad: np.ones(4)}),
                 lambda: opaque(print, updates={bad: x}),
                 lambda: native(ek.add(), reads={"x": x, bad: x}, writes={"y": np.zeros(4)})):
        with pytest.raises(TypeError, match=re.escape(f"an array name {_NAME_RULE}, got {bad!r}")):
            make()
    g = eagle.Graph()
    with pytest.raises(TypeError, match=re.escape(f"a node name {_NAME_RULE}, got {bad!r}")):
        g.add_node(opaque(print, reads={"x": x}), name=bad)


def test_reads_and_writes_still_take_dicts_of_several_entries():
    x, t, y = np.ones(4), np.ones(2), np.zeros(4)
    node = native(ek.add(), reads={"x": x, "x2": x}, writes={"y": y}, per_sample={"x", "x2", "y"})
    assert list(node.reads) == ["x", "x2"] and list(node.writes) == ["y"]
    node = opaque(lambda: None, reads={"x": x, "table": t}, writes={"y": y})
    assert list(node.reads) == ["x", "table"]


def test_an_array_exporting_the_array_interface_is_adopted_everywhere():
    class Exported:
        def __init__(self, a):
            self.a = a

        @property
        def __array_interface__(self):
            return self.a.__array_interface__

    more = np.zeros(1, dtype=bool)
    node = while_loop(Exported(more), _body())
    assert np.shares_memory(node.reads["cond"], more)
    alive = np.ones(4, dtype=bool)
    node = compact({"alive": Exported(alive)}, {"x": np.zeros(4)})
    assert np.shares_memory(node.writes["alive"], alive)


def test_a_bare_condition_runs_the_loop_as_a_named_one_does():
    x, more = np.zeros(1), np.ones(1, dtype=bool)
    body = eagle.Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="inc")
    body.add_node(ufunc(np.less, {"x": x}, 3.0, out={"more": more}), name="test")
    g = eagle.Graph()
    g.add_node(while_loop(more, body), name="loop")   # was refused: a bare array
    g.build().launch(1)
    assert x[0] == 3.0
    assert subgraph(body).bodies[0].names == ("inc", "test")


def test_random_nodes_take_bare_and_named_outputs_alike():
    a, b = np.zeros((4, 4), np.uint32), np.zeros((4, 4), np.uint32)
    g = eagle.Graph()
    g.add_group([random_bits(a, key=5), random_bits({"b": b}, key=5)], names=["a", "b"])
    g.build().launch(1)
    np.testing.assert_array_equal(a, b)


def test_a_compaction_with_named_ids_and_count_runs_as_with_the_default_names():
    results = []
    for named in (False, True):
        alive = np.array([True, False, True, True, False])
        x = np.arange(5.0)
        ids, count = np.arange(5, dtype=np.int64), np.zeros(1, np.int64)
        node = compact({"live": alive} if named else alive, {"x": x},
                       ids={"order": ids} if named else ids, count={"n_live": count} if named else count)
        g = eagle.Graph()
        g.add_node(node, name="compact")
        assert g.capacity == 5            # a one-element count never bounds the capacity
        g.build().launch(1)
        results.append((g.logical_size, x[:3].tolist(), ids.tolist(), int(count[0]),
                        node.scatter_back(x).tolist()))
    assert results[0] == results[1]
    assert results[0][:4] == (3, [0.0, 2.0, 3.0], [0, 2, 3, 1, 4], 3)


@pytest.mark.parametrize("make, says", [
    # a name of the user's meeting another argument's default name: the message names the
    # constructor's own arguments, not reads=/writes= it does not have
    (lambda o: uniform({"id": o}, key=1, ids=np.arange(4)), "uniform(): out and ids are both named 'id'"),
    (lambda o: normal(o, key=1, ids={"out": np.arange(4)}), "normal(): out and ids are both named 'out'"),
    (lambda o: compact({"ids": np.ones(4, bool)}, {"s": o}, ids=np.arange(4)),
     "compact(): alive and ids are both named 'ids'"),
    (lambda o: compact({"count": np.ones(4, bool)}, {"s": o}), "compact(): alive and count are both named 'count'"),
    (lambda o: reorder({"ids": np.zeros(4, np.int64)}, {"s": o}, n_keys=1, ids=np.arange(4)),
     "reorder(): the sort key by and ids are both named 'ids'"),
    (lambda o: ufunc(np.add, {"a": o}, {"a": np.ones(4)}, out=np.zeros(4)),
     "ufunc(): two different arrays (operands, out= or where=) are both named 'a'"),
])
def test_two_arguments_of_one_name_are_refused_naming_the_arguments(make, says):
    with pytest.raises(ValueError, match=re.escape(says) + "; give one another name"):
        make(np.zeros(4))


def test_reorders_messages_call_the_sort_key_by():
    with pytest.raises(ValueError, match=re.escape("reorder(): the sort key by 'key' must be 1-d")):
        reorder(np.zeros((4, 2), np.int64), {"s": np.zeros(4)}, n_keys=2)
