"""Hostile uses of progress=True: a display that fails while closing, no stderr at all.

The delay before a bar shows (eagle._progress.DELAY_S) is set to 0 so the
launches stay short; no time is asserted.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import eagle
from eagle import _progress
from eagle.graph import opaque


class CloseRaises:
    def __init__(self, total, initial=0, **kw):
        self.n = initial

    def update(self, k):
        self.n += k

    def close(self):
        raise OSError("the terminal went away at close")


@pytest.fixture
def close_raises(monkeypatch):
    monkeypatch.setattr(_progress, "_tqdm", lambda: CloseRaises)
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)


def counting_graph(fail_after=None):
    z = np.zeros(1)

    def step():
        time.sleep(0.0005)
        z[0] += 1
        if fail_after is not None and z[0] > fail_after:
            raise ValueError("the node failed")

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"z": z}), name="step")
    return g.build(), z


def test_a_bar_that_fails_to_close_still_leaves_the_launch_in_the_profile(close_raises):
    g, z = counting_graph()
    with eagle.profile() as prof:
        with pytest.raises(OSError, match="at close"):
            g.launch(50, progress=True)
    assert z[0] == 50
    assert prof.replays == 50 and len(prof.launches) == 1


def test_a_bar_that_fails_to_close_does_not_hide_the_nodes_exception(close_raises):
    g, z = counting_graph(fail_after=20)
    with eagle.profile() as prof:
        with pytest.raises(ValueError, match="the node failed") as info:
            g.launch(50, progress=True)
    assert any("step" in note for note in info.value.__notes__)
    assert [r.error for r in prof.launches] == ["ValueError"]
    g.launch(0)


@pytest.mark.parametrize("tqdm", [None, "tqdm"])
def test_no_stderr_shows_nothing_and_the_launch_runs(monkeypatch, tqdm):
    # pythonw, a daemon with stderr closed: sys.stderr is None
    if tqdm is None:
        monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    monkeypatch.setattr(sys, "stderr", None)
    g, z = counting_graph()
    g.launch(30, progress=True)
    assert z[0] == 30
