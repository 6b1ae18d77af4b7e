"""eagle.profile() under hostile use: a launch far larger than max_spans."""
from __future__ import annotations

import json

import numpy as np

import eagle
from eagle import kernels
from eagle.graph import native


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
