"""Hostile threads: the reading calls (str(g), to_dot(), stages, dependencies,
repr) see a consistent graph while another thread records into it."""
import sys
import threading

import numpy as np
import pytest

import eagle
from eagle.graph import opaque


def test_the_picture_is_consistent_while_another_thread_records():
    x = np.zeros(4)
    ys = [np.zeros(2) for _ in range(3)]
    g = eagle.Graph()
    done = threading.Event()
    errors = []

    def record():
        try:
            for k in range(1500):
                if k % 100 == 50:
                    g.build()
                g.add_node(opaque(lambda: None, reads={"x": x}, writes={"y": ys[k % 3]}), name=f"n{k}")
        finally:
            done.set()

    def look():
        while not done.is_set():
            try:
                text = str(g)
                dot = g.to_dot()
                deps = g.dependencies
                stages = g.stages   # read after: holds every node deps names
                repr(g)
                assert dot.startswith("digraph") and text.startswith("eagle.Graph")
                recorded = {name for row in stages for name in row}
                assert all(a in recorded and b in recorded for a, b, _ in deps), "an edge to a node not shown"
            except Exception as e:   # noqa: BLE001 - any failure is the finding
                errors.append(repr(e))
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads as often as the interpreter can
    try:
        threads = [threading.Thread(target=record), threading.Thread(target=look)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert len(g.nodes) == 1500


def test_a_retune_checks_the_capacity_it_applies_to():
    # set_logical_size waits for the graph's lock; another thread may record a shorter
    # array (and build) meanwhile: the size is checked again under the lock, or the
    # next launch would run kernels past the end of that array
    import eagle.kernels as ek
    from eagle.graph import native

    x, y = np.ones(100), np.zeros(100)
    g = eagle.Graph()
    g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"y": y}), name="long")
    g.build()
    short = np.zeros(10)
    enter = g._exclusive

    def another_thread_got_there_first(what):
        if what == "retune":
            g.add_node(native(ek.fill(1.0), writes={"s": short}), name="short")
            g.build()
        return enter(what)

    g._exclusive = another_thread_got_there_first
    try:
        with pytest.raises(ValueError, match=r"0\.\.10"):
            g.set_logical_size(100)
    finally:
        del g._exclusive
    assert g.capacity == 10 and g.logical_size == 10
    g.launch(1)
    assert (short == 1).all()
