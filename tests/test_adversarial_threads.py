"""Hostile threads: the reading calls (str(g), to_dot(), stages, dependencies,
repr) see a consistent graph while another thread records into it."""
import sys
import threading

import numpy as np

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
                stages, deps = g.stages, g.dependencies
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
