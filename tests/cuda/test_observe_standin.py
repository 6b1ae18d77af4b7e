"""Observing a cuda launch on the driver stand-in (no GPU): NVTX ranges around
captures and launches, eagle.profile's whole-graph rows, progress= in chunks."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import eagle
from eagle.graph import opaque
from fake_cuda import dev  # noqa: F401


@pytest.fixture
def backend_mod(cuda_mod):
    import eagle.cuda.backend as b
    return b


@pytest.fixture
def ranges(backend_mod, monkeypatch):
    """NVTX replaced by a recorder of the ranges pushed and popped."""
    from eagle.cuda import _nvtx
    log = []
    monkeypatch.setattr(_nvtx, "_fns", (lambda name: log.append(("push", name.decode())),
                                        lambda: log.append(("pop", None))))
    return log


def tiny_graph():
    (x,) = dev(np.arange(4.0))
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"x": x}), name="n")
    return g


def test_nvtx_ranges_around_capture_and_launch(ranges, fake):
    g = tiny_graph().build()
    assert ranges == [("push", "eagle capture"), ("pop", None)]
    ranges.clear()
    g.launch(3)
    assert ranges == [("push", "eagle launch(3)"), ("pop", None)]


def test_without_nvtx_everything_runs(backend_mod, fake, monkeypatch):
    from eagle.cuda import _nvtx
    monkeypatch.setattr(_nvtx, "_fns", None)
    g = tiny_graph().build()
    g.launch(2)
    _nvtx.push("x")
    _nvtx.pop()


def test_profile_of_a_cuda_launch_is_a_whole_graph_row(ranges, fake):
    g = tiny_graph().build()
    with eagle.profile() as prof:
        g.launch(5)
    (row,) = prof.stats()
    assert row.node == "(whole graph, cuda)" and row.count == 5 and row.share == 1.0
    assert "nsys profile --cuda-graph-trace=node" in prof.table()
    trace = json.loads(json.dumps(prof.chrome_trace()))
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"] == ["launch(5)"]


def test_progress_on_cuda_launches_in_chunks(ranges, fake, monkeypatch):
    from eagle.observe import progress as _progress
    seen = []

    class Bar:
        def __init__(self, total, initial=0, **kw):
            self.n = initial

        def update(self, k):
            self.n += k
            seen.append(self.n)

        def close(self):
            seen.append("closed")

    monkeypatch.setattr(_progress, "_tqdm", lambda: Bar)
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    g = tiny_graph().build()
    before = fake.fake_cuda_launch_count()
    g.launch(2000, progress=True)
    assert fake.fake_cuda_launch_count() - before == 2000
    assert seen[-1] == "closed" and seen[-2] == 2000 and len(seen) > 2
