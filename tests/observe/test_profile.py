"""eagle.profile(): per-node counts and times of a replay, its table and its Chrome trace."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import eagle
from eagle import kernels
from eagle.graph import native, opaque


def two_node_graph():
    x, y, z = np.ones(256), np.zeros(256), np.zeros(1)
    g = eagle.Graph()
    g.add_node(native(kernels.axpy(2.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.add_node(opaque(lambda: z.__iadd__(1), reads={"y": y}, writes={"z": z}), name="tally")
    return g.build(), z


def node_spans(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "node"]


def test_counts_equal_replays_and_the_trace_names_every_node(tmp_path):
    g, z = two_node_graph()
    with eagle.profile() as prof:
        g.launch(7)
        g.launch(5)
    assert z[0] == 12
    rows = {s.node: s for s in prof.stats()}
    assert rows["axpy"].count == rows["tally"].count == 12
    assert rows["axpy"].stage == 0 and rows["tally"].stage == 1
    for s in (rows["axpy"], rows["tally"]):
        assert 0 < s.min <= s.mean and s.total == pytest.approx(s.mean * s.count)
    assert sum(s.share for s in prof.stats()) == pytest.approx(1.0)
    assert prof.replays == 12 and prof.dropped == 0
    text = str(prof)
    assert text == prof.table()
    assert "axpy" in text and "tally" in text and "2 launches, 12 replays" in text
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    spans = node_spans(trace)
    assert len(spans) == 12 * 2
    assert {e["name"] for e in spans} == {"axpy", "tally"}
    assert sorted(e["args"]["replay"] for e in spans if e["name"] == "axpy") == sorted(list(range(7)) + list(range(5)))
    assert all(e["dur"] >= 0 and e["pid"] == trace["traceEvents"][0]["pid"] for e in spans)
    launches = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "launch"]
    assert [e["name"] for e in launches] == ["launch(7)", "launch(5)"]
    for e in spans:   # each node call lies inside its launch
        assert any(l["ts"] <= e["ts"] and e["ts"] + e["dur"] <= l["ts"] + l["dur"] + 1e-3 for l in launches)
    named = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in spans} <= named


@pytest.mark.parametrize("teams", ["parallel", "auto"])
def test_one_lane_per_thread(threads, teams):
    threads(2)
    x, y = np.ones(100_000), np.zeros(100_000)
    g = eagle.Graph()
    g.add_node(native(kernels.axpy(2.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    with eagle.profile() as prof:
        g.launch(20)
    trace = prof.chrome_trace()
    spans = node_spans(trace)
    by_replay = {}
    for e in spans:
        by_replay.setdefault(e["args"]["replay"], set()).add(e["tid"])
    assert sorted(by_replay) == list(range(20))
    assert (s := prof.stats()[0]).node == "axpy" and s.count == 20
    if teams == "parallel":
        # every replay's slice ran on both threads, each its own lane
        assert all(len(t) == 2 for t in by_replay.values())
        assert len({e["tid"] for e in spans}) == 2 and s.threads == 2
        assert 0 < s.thread_total <= 2 * s.total   # each thread's part lies within the node's span
        per_thread = prof.stats(per_thread=True)
        assert sorted(r.count for r in per_thread) == [20, 20]
        assert "2 threads" in prof.table()


def test_a_failing_launch_is_recorded_up_to_the_failure():
    calls = [0]
    z = np.zeros(1)

    def fail_on_fourth():
        calls[0] += 1
        if calls[0] == 4:
            raise ZeroDivisionError("boom")

    g = eagle.Graph()
    g.add_node(opaque(lambda: z.__iadd__(1), writes={"z": z}), name="before")
    g.add_node(opaque(fail_on_fourth, reads={"z": z}), name="fails")
    g.build()
    with eagle.profile() as prof:
        with pytest.raises(ZeroDivisionError) as info:
            g.launch(10)
    assert any("'fails'" in n and "replay 3" in n for n in info.value.__notes__)
    (rec,) = prof.launches
    assert rec.error == "ZeroDivisionError" and rec.replays == 3
    rows = {s.node: s for s in prof.stats()}
    assert rows["before"].count == 4 and rows["fails"].count == 4   # the failing call is timed too
    assert "raised (ZeroDivisionError)" in prof.table()
    assert json.loads(json.dumps(prof.chrome_trace()))   # still a valid trace
    g.launch(2)   # the graph stays usable, outside the profile nothing is recorded
    assert len(prof.launches) == 1


def _power_error_graph():
    x = np.arange(1, 11, dtype=np.int64)
    e = np.full(10, 2, np.int64)
    e[7] = -1      # NumPy's integer power refuses it, in the inner loop: raised after the executor ran
    out = np.zeros(10, np.int64)
    g = eagle.Graph()
    g.add_node(eagle.graph.ufunc(np.power, x, e, out=out), name="pow")
    return g.build(), ValueError, "negative integer powers"


def _bad_key_graph():
    key = np.array([0, 1, 5, 1], np.int64)       # 5: outside [0, n_keys), met by the reorder in the launch
    rows = np.arange(4.0)
    g = eagle.Graph()
    g.add_node(eagle.graph.reorder(key, {"rows": rows}, n_keys=3))
    return g.build(), ValueError, "outside"


@pytest.mark.parametrize("make", [_power_error_graph, _bad_key_graph], ids=["ufunc-loop", "reorder-key"])
@pytest.mark.parametrize("progress", [False, True])
def test_an_error_raised_after_the_executor_finished_is_recorded(make, progress):
    g, exc, match = make()
    with eagle.profile() as prof:
        with pytest.raises(exc, match=match):
            g.launch(2, progress=progress)
    (rec,) = prof.launches
    assert rec.error == exc.__name__
    assert f"raised ({exc.__name__})" in prof.table()


def test_nested_profiles_both_record_the_inner_launches():
    g, _ = two_node_graph()
    with eagle.profile() as outer:
        g.launch(2)
        with eagle.profile() as inner:
            g.launch(3)
        g.launch(1)
    assert [r.requested for r in outer.launches] == [2, 3, 1]
    assert [r.requested for r in inner.launches] == [3]
    assert {s.node: s.count for s in inner.stats()}["axpy"] == 3
    assert {s.node: s.count for s in outer.stats()}["axpy"] == 6
    with pytest.raises(RuntimeError, match="already open"):
        with outer:
            with outer:
                pass
    with inner:   # reopened later: it accumulates
        g.launch(1)
    assert [r.requested for r in inner.launches] == [3, 1]


def test_no_profile_records_nothing_and_another_threads_profile_sees_nothing():
    g, _ = two_node_graph()
    prof = eagle.profile()
    g.launch(3)                 # not open yet
    with prof:
        pass
    g.launch(3)                 # closed again
    assert prof.launches == [] and str(prof) == "eagle.profile: no launch recorded"
    opened, release = threading.Event(), threading.Event()
    theirs = []

    def other():
        with eagle.profile() as p:
            theirs.append(p)
            opened.set()
            release.wait(10)

    t = threading.Thread(target=other)
    t.start()
    opened.wait(10)
    try:
        g.launch(4)             # this thread has no profile open
    finally:
        release.set()
        t.join()
    assert theirs[0].launches == []


def test_a_full_buffer_is_counted_and_said():
    g, _ = two_node_graph()
    with eagle.profile(max_spans=5) as prof:
        g.launch(10)
    assert prof.dropped == 2 * 10 - 5
    assert sum(s.count for s in prof.stats() if s.stage is not None) == 5
    assert "15 node calls not kept" in prof.table()
    for bad in (0, -1, 2.5, True, "5"):
        with pytest.raises(ValueError, match="max_spans"):
            eagle.profile(max_spans=bad)


def test_zero_replays_and_a_team_node():
    g, _ = two_node_graph()
    with eagle.profile() as prof:
        g.launch(0)
    assert prof.replays == 0 and len(prof.launches) == 1
    assert len(node_spans(prof.chrome_trace())) == 0
    assert "(whole graph" not in prof.table()


def test_a_graph_rebuilt_with_other_nodes_keeps_its_builds_apart():
    g, _ = two_node_graph()
    w = np.zeros(1)
    with eagle.profile() as prof:
        g.launch(2)
        g.add_node(opaque(lambda: w.__iadd__(1), writes={"w": w}), name="late")
        g.build()
        g.launch(3)
    rows = [(s.graph, s.node, s.count) for s in prof.stats() if s.stage is not None]
    assert ("graph 1", "axpy", 2) in rows and ("graph 1 (build 2)", "late", 3) in rows
    assert ("graph 1 (build 2)", "axpy", 3) in rows


def test_a_launch_from_inside_a_node_is_recorded_with_its_own_nodes():
    inner, _ = two_node_graph()
    z = np.zeros(1)
    outer = eagle.Graph()
    outer.add_node(opaque(lambda: inner.launch(2), writes={"z": z}), name="calls_inner")
    outer.build()
    with eagle.profile() as prof:
        outer.launch(3)
    assert [r.requested for r in prof.launches] == [2, 2, 2, 3]   # each recorded when it ends
    counts = {(s.graph, s.node): s.count for s in prof.stats() if s.stage is not None}
    assert counts == {("graph 1", "axpy"): 6, ("graph 1", "tally"): 6, ("graph 2", "calls_inner"): 3}
    names = {e["name"] for e in node_spans(prof.chrome_trace())}
    assert names == {"axpy", "tally", "calls_inner"}


# ---- eagle.profile() under hostile use: a launch far larger than max_spans.

def test_a_launch_past_max_spans_does_not_call_the_untimed_calls_time_between_nodes(tmp_path):
    x, y = np.ones(64), np.zeros(64)
    g = eagle.Graph()
    g.add_node(native(kernels.axpy(2.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build()
    with eagle.profile(max_spans=10) as prof:
        g.launch(5000)
    assert prof.replays == 5000 and prof.dropped > 0
    names = [s.node for s in prof.stats()]
    assert "(between nodes)" not in names
    assert names[-1] == "(between nodes, and node calls not kept)"
    assert {s.node: s.count for s in prof.stats()}["axpy"] <= 10 * eagle.get_num_threads()
    assert "not kept" in prof.table()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    assert trace["otherData"]["dropped_node_calls"] == prof.dropped
    for e in trace["traceEvents"]:
        assert {"ph", "pid", "tid", "name"} <= set(e)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and "ts" in e


def test_the_profile_repr_counts_in_english_and_jupyter_shows_the_table():
    g, _ = two_node_graph()
    with eagle.profile() as prof:
        g.launch(1)
    assert repr(prof) == "<eagle.profile: 1 launch, 1 replay>"
    with eagle.profile() as prof:
        g.launch(4)
        g.launch(6)
    assert repr(prof) == "<eagle.profile: 2 launches, 10 replays>"
    html = prof._repr_html_()
    assert html.startswith("<pre") and "eagle.profile: 2 launches, 10 replays" in html
    assert "axpy" in html and "tally" in html
