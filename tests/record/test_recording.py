"""Recording: names, groups, and every bad input gets a clear error and changes nothing."""
import threading

import numpy as np
import pytest

import eagle
from eagle.look import dot as _dot
from eagle.graph import GroupConflictError, NotBuiltError, native, opaque


def nop():
    pass


class FakeCudaArray:
    """An object with __cuda_array_interface__ over host memory (no GPU needed)."""

    def __init__(self, n):
        self._host = np.zeros(n)
        self.__cuda_array_interface__ = {
            "shape": (n,), "typestr": "<f8", "data": (self._host.ctypes.data, False),
            "version": 3, "strides": None}


def snapshot(g):
    return (str(g), g.nodes, g.stages, g.dependencies, g.backend)


@pytest.fixture
def seed():
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_group([opaque(nop, reads={"x": x}, writes={"a": left}),
                 opaque(nop, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(nop, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return g, (x, left, right, out)


def test_default_names_follow_the_function_and_stay_unique():
    a = np.zeros(3)

    def step():
        pass

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"a": a}))
    g.add_node(opaque(step, writes={"a": a}))
    g.add_node(opaque(lambda: None, reads={"a": a}))
    assert g.nodes == ["step", "step_2", "opaque"]


@pytest.mark.parametrize("make, exc, words", [
    (lambda a: opaque(42, writes={"a": a}), TypeError, "callable"),
    (lambda a: opaque(nop, reads=[a]), TypeError, "dict"),
    (lambda a: opaque(nop, reads={"a": [1, 2, 3]}), TypeError, "NumPy array"),
    (lambda a: opaque(nop, writes={"a": 3.0}), TypeError, "NumPy array"),
    (lambda a: opaque(nop, reads={1: a}), TypeError, "an array name must be a non-empty one-line string"),
    (lambda a: opaque(nop, reads={"a": a}, writes={"a": a.copy()}), ValueError, "two different arrays"),
    (lambda a: opaque(nop, writes={"a": a}, updates={"a": a}), ValueError, "both updates and writes"),
    (lambda a: opaque(nop, updates={"a": 3.0}), TypeError, "NumPy array"),
    (lambda a: opaque(lambda b: None), TypeError, "cannot be called with no arguments"),
    (lambda a: opaque(nop, sized=True), TypeError, "two positional arguments"),
    (lambda a: opaque(nop, sized=1), TypeError, "sized= takes True or False"),
    (lambda a: opaque(nop, reads={"a": a}, writes={"b": FakeCudaArray(3)}), TypeError, "mixes NumPy"),
])
def test_bad_nodes_are_refused(make, exc, words):
    with pytest.raises(exc, match=words):
        make(np.zeros(3))


def test_bad_recordings_change_nothing(seed):
    g, (x, left, right, out) = seed
    before = snapshot(g)
    cases = [
        (lambda: g.add_node(nop), TypeError, "opaque"),
        (lambda: g.add_node(opaque(nop, reads={"x": x}), name="join"), ValueError, "already has a node named 'join'"),
        (lambda: g.add_node(opaque(nop, reads={"x": x}), name=""), TypeError, "name"),
        (lambda: g.add_group([opaque(nop, reads={"x": x}), opaque(nop)], names=["p", "p"]), ValueError, "'p'"),
        (lambda: g.add_group([opaque(nop, writes={"o": out}), opaque(nop, reads={"v": out[1:]})],
                             names=["w", "r2"]), GroupConflictError, "'w' and 'r2'"),
        (lambda: g.add_group([opaque(nop)], names=["a", "b"]), ValueError, "1 nodes but 2 names"),
        (lambda: g.add_group([]), ValueError, "at least one"),
        (lambda: g.add_node(opaque(nop, writes={"c": FakeCudaArray(4)})), TypeError, "mix NumPy and CUDA"),
        (lambda: g.launch(-1), ValueError, ">= 0"),
        (lambda: g.launch(1.5), TypeError, "integer"),
        (lambda: g.launch("3"), TypeError, "integer"),
        (lambda: g.launch(True), TypeError, "bool"),
        (lambda: g.set_logical_size(5), ValueError, r"0\.\.4"),
        (lambda: g.set_logical_size(-1), ValueError, r"0\.\.4"),
        (lambda: g.set_logical_size(2.0), TypeError, "integer"),
        (lambda: g.build(cpu=eagle.CpuOptions(teams="fast")), ValueError, "auto"),
        (lambda: g.build(cpu=eagle.CpuOptions(teams=["auto"])), ValueError, "one policy per stage"),
    ]
    for call, exc, words in cases:
        with pytest.raises(exc, match=words):
            call()
        assert snapshot(g) == before



class Count(int):
    """An int subclass: not an exact int, so launch() takes its general conversion."""


@pytest.mark.parametrize("kind", ["native", "ufunc"])
def test_bad_launch_counts_on_a_built_graph_change_nothing(kind):
    """On a built graph too (the native one takes launch()'s plain path, the ufunc one,
    whose launches are checked after, the general one): a bad count raises before any
    replay, and every integer form counts as its value."""
    import eagle.kernels as ek
    from eagle.graph import ufunc

    x, y = np.ones(3), np.zeros(3)
    g = eagle.Graph()
    if kind == "native":
        g.add_node(native(ek.axpy(1.0), reads={"x": x}, writes={"y": y}), name="step")
    else:
        g.add_node(ufunc(np.add, y, x, out=y), name="step")
    g.build()
    cases = [(-1, ValueError, ">= 0"), (-2 ** 70, ValueError, ">= 0"), (True, TypeError, "bool"),
             (np.bool_(True), TypeError, "integer"), (1.0, TypeError, "float"), (None, TypeError, "NoneType"),
             (2 ** 63, OverflowError, "2\\*\\*63"), (2 ** 64 + 1, OverflowError, "2\\*\\*63")]
    for n, exc, words in cases:
        with pytest.raises(exc, match=words) as info:
            g.launch(n)
        assert not getattr(info.value, "__notes__", None)   # raised before the launch
        assert g.replays == 0 and y.tolist() == [0.0, 0.0, 0.0]
    for n in (0, Count(2), np.int64(1), np.uint8(1), 1):
        g.launch(n)
    assert g.replays == 5 and y.tolist() == [5.0, 5.0, 5.0]

def test_a_conflicting_group_names_both_nodes_and_the_array():
    buf = np.zeros(10)
    g = eagle.Graph()
    with pytest.raises(GroupConflictError) as info:
        g.add_group([opaque(nop, writes={"head": buf[:6]}), opaque(nop, reads={"tail": buf[4:]})],
                    names=["writer", "reader"])
    msg = str(info.value)
    assert "'writer'" in msg and "'reader'" in msg and "'head'" in msg and "'tail'" in msg
    assert g.nodes == []


def test_launch_needs_a_build_and_recording_after_build_unbuilds(seed):
    g, (x, left, right, out) = seed
    with pytest.raises(NotBuiltError, match="build"):
        g.launch()
    g.build()
    assert g.backend == "cpu"
    g.add_node(opaque(nop, reads={"out": out}), name="after")
    assert g.backend is None and "backend: (not built)" in str(g)
    with pytest.raises(NotBuiltError, match="again"):
        g.launch()
    g.build().launch(2)


def test_cuda_arrays_are_not_the_cpu_backend():
    g = eagle.Graph()
    g.add_node(opaque(nop, writes={"a": FakeCudaArray(4)}), name="gpu")
    # the cuda backend either captures (with a runtime) or says clearly why it cannot
    try:
        g.build()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        assert "cuda" in str(e).lower() or "CUDA" in str(e)
        assert g.backend is None
    else:
        assert g.backend == "cuda"


def test_launch_from_two_threads_is_serialized():
    count = np.zeros(1)
    inside = []

    def step():
        inside.append(1)
        assert len(inside) == 1, "two launches of one graph overlapped"
        count[0] += 1
        inside.pop()

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"c": count}), name="step")
    g.build()
    threads = [threading.Thread(target=g.launch, args=(2000,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count[0] == 8000


def test_a_node_that_calls_back_into_its_graph_is_refused():
    a = np.zeros(2)
    g = eagle.Graph()
    g.add_node(opaque(lambda: g.launch(1), writes={"a": a}), name="recurse")
    g.build()
    with pytest.raises(RuntimeError, match="inside its own launch"):
        g.launch(1)
    g.add_node  # the graph is still usable
    with pytest.raises(RuntimeError, match="inside its own launch"):
        g.launch(1)


def test_a_node_that_raises_stops_the_replay_with_a_note_and_the_graph_stays_usable():
    a, b = np.zeros(2), np.zeros(2)
    calls = {"first": 0, "second": 0}
    fail_at = {"call": 3}

    def first():
        calls["first"] += 1

    def second():
        calls["second"] += 1
        if calls["second"] == fail_at["call"]:
            raise ValueError("boom")

    g = eagle.Graph()
    g.add_node(opaque(first, writes={"a": a}), name="first")
    g.add_node(opaque(second, reads={"a": a}, writes={"b": b}), name="second")
    g.build()
    with pytest.raises(ValueError, match="boom") as info:
        g.launch(10)
    notes = getattr(info.value, "__notes__", [])
    assert notes == ["eagle: raised by node 'second' (stage 1) in replay 2 of launch(10)"]
    assert calls == {"first": 3, "second": 3}
    fail_at["call"] = -1
    g.launch(4)
    assert calls == {"first": 7, "second": 7}


@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_a_raising_node_in_a_team_stage_reports_where(teams):
    arrays = [np.zeros(2) for _ in range(4)]
    seen = []

    def make(k):
        def fn():
            seen.append(k)
            if k == 2 and len(seen) > 8:
                raise KeyError("bad sample")
        return fn

    g = eagle.Graph()
    g.add_group([opaque(make(k), writes={"a": arrays[k]}) for k in range(4)], names=list("pqrs"))
    g.build(cpu=eagle.CpuOptions(teams=teams))
    with pytest.raises(KeyError) as info:
        g.launch(100)
    (note,) = info.value.__notes__
    assert note.startswith("eagle: raised by node 'r' (stage 0) in replay ")
    g.launch(0)


def test_logical_size_follows_capacity_and_is_kept():
    x, y = np.arange(10.0), np.zeros(10)
    g = eagle.Graph()
    g.add_node(native(eagle.kernels.copy(), reads={"x": x}, writes={"y": y}), name="copy")
    assert (g.capacity, g.logical_size) == (10, 10)
    g.set_logical_size(4)
    g.build().launch()
    assert list(y) == [0, 1, 2, 3, 0, 0, 0, 0, 0, 0]
    assert "logical size 4 of 10" in str(g)
    g.logical_size = 10
    g.launch()
    assert list(y) == list(x)


# ---- Hostile node names: anything that breaks a line or drives a terminal is refused.
#
# str(g) (the picture), to_dot() and _repr_html_ lay names out one per line; a
# name holding a line break other than \n (\v, \f, \x85, U+2028, U+2029), a
# NUL (Graphviz cannot draw it), an escape sequence (ESC) or an invisible format
# character (U+200B, U+202E) would break them.

@pytest.mark.parametrize("name", ["a\x0bb", "a\x0cb", "a\x85b", "a\u2028b", "a\u2029b", "a\x00b",
                                  "a\x1b[31mred", "a\x7fb", "a\x1cb",
                                  # invisible format characters: drawn 0 columns wide (or
                                  # reversing the line), they would throw the box borders out
                                  "a\u200bb", "a\u2060b", "a\u00adb", "a\u202eb", "\ufeffa"])
def test_a_name_with_a_line_break_or_control_character_is_refused_and_nothing_is_recorded(name):
    g = eagle.Graph()
    x = np.zeros(2)
    with pytest.raises(TypeError, match="one-line"):
        g.add_node(opaque(lambda: None, writes={"x": x}), name=name)
    assert list(g.nodes) == []


@pytest.mark.parametrize("name", ['a"b', "a\\", "<b>&amp;</b>", "} -> n0 [", "naïve · 節点 🦅", "with space"])
def test_hostile_but_printable_names_are_kept_and_every_view_draws_them(name):
    g = eagle.Graph()
    x = np.zeros(2)
    g.add_node(opaque(lambda: None, writes={"x": x}), name=name)
    g.add_node(opaque(lambda: None, reads={"x": x}), name="second")
    text = str(g)
    assert name in text and len(text.splitlines()) == len(text.split("\n"))
    if _dot.dot_svg("digraph { a }") is not None:       # Graphviz installed: the DOT text parses
        assert _dot.dot_svg(g.to_dot()) is not None
    html = g._repr_html_()
    assert "<b>" not in html


def test_a_recording_taken_while_another_thread_records_is_consistent():
    """g.recording() (and so str(g) and build's view) holds the capacity of the nodes it
    holds, never that of a node another thread is still recording."""
    n = 3000
    arrays = [np.zeros(2000 + i) for i in range(n)]   # each node's extent longer than the last
    g = eagle.Graph()
    done = threading.Event()
    bad = []

    def record():
        try:
            for i, a in enumerate(arrays):
                g.add_node(opaque(lambda: None, writes={"y": a}), name=f"n{i}")
        finally:
            done.set()

    t = threading.Thread(target=record)
    t.start()
    snapshots = 0
    while not done.is_set():
        rec = g.recording()
        k = len(rec)
        snapshots += 1
        if k and (rec.capacity != 2000 + (k - 1) or rec.capacity_bound_by[0] != f"n{k - 1}"):
            bad.append((k, rec.capacity, rec.capacity_bound_by))
    t.join()
    assert not bad, f"snapshots whose capacity is not their nodes' ({len(bad)} of {snapshots}): {bad[:3]}"
    assert g.recording().capacity == 2000 + (n - 1)


# ---- the public face: messages, reprs, dir() ----

def test_add_node_of_a_non_node_lists_every_constructor_of_eagle_graph():
    import inspect

    import eagle.graph as eg

    g = eagle.Graph()
    with pytest.raises(TypeError) as info:
        g.add_node(print)
    text = str(info.value)
    constructors = [n for n in eg.__all__ if inspect.isfunction(getattr(eg, n))]
    assert {"opaque", "native", "ufunc", "compact", "reorder", "allreduce", "cuda_kernel"} <= set(constructors)
    for name in constructors:
        assert f"{name}()" in text and hasattr(eg, name)
    assert "a builtin_function_or_method" in text and "wrap a callable" in text
    with pytest.raises(TypeError, match="got an int$"):
        g.add_node(3)
    assert g.nodes == []


@pytest.mark.parametrize("word,expected", [
    ("int8", "an int8"), ("int64", "an int64"), ("uint8", "a uint8"), ("float64", "a float64"),
    ("object", "an object"), ("opaque", "an opaque"), ("ufunc", "a ufunc"), ("ndarray", "an ndarray"),
    ("bool", "a bool"), (1, "a 1"), (8, "an 8"), (11, "an 11"), (18, "an 18"), (80, "an 80"), (100, "a 100"),
    # what reaches it: node kinds, type names of what a user passed, dtypes and their codes
    ("cuda_kernel", "a cuda_kernel"), ("collective", "a collective"), ("control", "a control"),
    ("_ArrayFunctionDispatcher", "an _ArrayFunctionDispatcher"), ("_FuncPtr", "a _FuncPtr"),
    ("MaskedArray", "a MaskedArray"), ("NDArray", "an NDArray"), ("DLPack", "a DLPack"),
    ("ElementwiseKernel", "an ElementwiseKernel"), ("Intracomm", "an Intracomm"), ("DUFunc", "a DUFunc"),
    ("f8", "an f8"), ("u1", "a u1"), ("S1", "an S1"), ("U8", "a U8"), ("<M8[s]", "an <M8[s]"),
    ("i8", "an i8"), ("c16", "a c16"), ("ubyte", "a ubyte"), ("ulonglong", "a ulonglong"),
    # acronyms: letter by letter unless read as a word
    ("MPI", "an MPI"), ("SVD", "an SVD"), ("LLVM", "an LLVM"), ("HDF5", "an HDF5"), ("NVRTC", "an NVRTC"),
    ("HTTPError", "an HTTPError"), ("URLError", "a URLError"), ("NCCL", "a NCCL"), ("NUMA", "a NUMA"),
    ("X", "an X"), ("uninitialized", "an uninitialized"), ("unit", "a unit"), ("once", "a once"),
])
def test_one_helper_picks_a_or_an(word, expected):
    from eagle._text import with_article
    assert with_article(word) == expected


def test_a_numpy_function_given_as_a_node_reads_an_article_and_a_hint():
    """NumPy 2's functions are _ArrayFunctionDispatcher objects: "got an _Array...", and a
    ufunc or a Graph given as a node gets the constructor it wants."""
    g = eagle.Graph()
    with pytest.raises(TypeError) as info:
        g.add_node(np.sum)
    name = type(np.sum).__name__
    assert f"got {'an' if name.lstrip('_')[0] in 'aeiouAEIOU' else 'a'} {name}" in str(info.value)
    with pytest.raises(TypeError, match=r"got a ufunc \(a ufunc node: ufunc\(np.add, x, y, out=z\)\)"):
        g.add_node(np.add)
    with pytest.raises(TypeError, match=r"got a Graph \(run a graph in place: subgraph\(child\)\)"):
        g.add_node(eagle.Graph())
    assert g.nodes == []


def test_a_cast_message_reads_an_int8():
    """A message naming a dtype picks its article: "an int8 loop", not "a int8 loop"."""
    a = np.zeros((4, 2, 2), np.int8)
    with pytest.raises(TypeError, match="pass an int8 array") as info:   # a gufunc's operands are not cast
        eagle.graph.ufunc(np.matmul, a, a, out=np.zeros((4, 2, 2), np.int64))
    assert " a int" not in str(info.value)


def test_dir_lists_what_eagle_offers_not_what_it_imports():
    import eagle.graph as eg

    assert "os" not in dir(eagle)
    public = [n for n in dir(eg) if not n.startswith("_")]
    assert public == sorted(eg.__all__)
    for stray in ("shutil", "operator", "unicodedata", "annotations", "CpuBackend", "Stager", "GraphCore"):
        assert stray not in dir(eg)
    assert "__doc__" in dir(eg) and "__name__" in dir(eg)


def test_a_plan_shows_itself_in_one_line_and_as_a_table_in_jupyter():
    x, y = np.ones(8), np.zeros(8)
    g = eagle.Graph()
    g.add_node(eagle.graph.native(eagle.kernels.scale(2.0), reads={"x": x}, writes={"y": y}), name="k")
    plan = g.build().plan()
    text = repr(plan)
    assert text.startswith("<eagle plan · backend: cpu · ") and text.endswith(" · logical size 8 of 8 · 1 stage>")
    assert "\n" not in text and "StagePlan" not in text
    html = plan._repr_html_()
    assert html.startswith("<pre") and "stage 0" in html and "capacity 8: bounded by &#x27;x&#x27; of &#x27;k&#x27;" in html
