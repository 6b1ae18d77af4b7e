"""A hostile user against capture: Ctrl-C inside the step, stand-ins kept past the capture,
the same step captured from two threads at once."""
import threading

import numpy as np
import pytest

import eagle
from eagle.stepcapture.standin import StandIn, recorder


def test_ctrl_c_inside_the_step_leaves_no_capture_behind():
    kept = []

    def step(x, y):
        t = x * 2.0
        y[...] = t + 1.0
        eagle.graph.normal(x, key=3)
        kept.append((y, t))          # what a debugger or a log would keep
        raise KeyboardInterrupt

    x, y = np.arange(4.0), np.zeros(4)
    with pytest.raises(KeyboardInterrupt):
        eagle.capture(step, x, y)
    assert recorder() is None
    # the step still works eagerly, and a capture after it records only its own nodes
    g = eagle.capture(lambda x, y: np.add(x, 1.0, out=y), x, y)
    assert len(g.nodes) == 1
    g.build().launch(1)
    assert y.tolist() == [1.0, 2.0, 3.0, 4.0]
    # the stand-ins the interrupted step left are dead: no later capture writes or reads through them
    y_left, t_left = kept[0]
    assert isinstance(y_left, StandIn)

    def writes_the_old_one(x):
        y_left[...] = x
    with pytest.raises(eagle.CaptureError, match="neither an argument of the step nor made inside it"):
        eagle.capture(writes_the_old_one, x)

    def reads_its_temporary(x):
        x += t_left
    with pytest.raises(eagle.CaptureError, match="stand-in for t1 escapes"):
        eagle.capture(reads_its_temporary, x)


def test_ctrl_c_while_a_node_is_made_leaves_nothing_recorded(monkeypatch):
    # the interrupt arrives inside capture's own recording of an operation
    import eagle.stepcapture.session as session_mod
    real = session_mod.eg.ufunc
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    def step(x, y):
        y[...] = x * 2.0 + 1.0

    x, y = np.arange(3.0), np.zeros(3)
    monkeypatch.setattr(session_mod.eg, "ufunc", interrupted)
    with pytest.raises(KeyboardInterrupt):
        eagle.capture(step, x, y)
    monkeypatch.setattr(session_mod.eg, "ufunc", real)
    assert recorder() is None
    g = eagle.capture(step, x, y).build()
    g.launch(1)
    assert y.tolist() == [1.0, 3.0, 5.0]


def test_one_step_captured_from_two_threads_at_once_gives_two_graphs():
    both_inside = threading.Barrier(2, timeout=30)

    def step(x, y):
        t = x * 2.0
        both_inside.wait()           # the two captures are in the step together
        y[...] = t + np.sqrt(x)
        return y.max()

    arrays = {k: (np.arange(1.0, 6.0) * (k + 1), np.zeros(5)) for k in range(2)}
    graphs, errors = {}, []

    def capture(k):
        try:
            graphs[k] = eagle.capture(step, *arrays[k])
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=capture, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert graphs[0].nodes == graphs[1].nodes and len(graphs[0].nodes) == 4
    for k, g in graphs.items():
        x, y = arrays[k]
        g.build().launch(1)
        expected = x * 2.0 + np.sqrt(x)
        assert y.tolist() == expected.tolist() and float(g.result) == expected.max()
        # each graph runs on its own thread's arrays and temporaries only
        assert g.temporaries and all(t.name.startswith("t") for t in g.temporaries)


def test_a_stand_in_handed_to_another_threads_capture_is_refused():
    handed, done = [], threading.Event()

    def first(x):
        handed.append(x * 2.0)       # a temporary of this capture, handed across threads
        assert done.wait(30)

    def second(y):
        y += handed[0]

    def capture_first():
        with pytest.raises(eagle.CaptureError, match="escapes the step"):   # its own refusal
            eagle.capture(first, np.ones(3))

    t = threading.Thread(target=capture_first)
    t.start()
    try:
        while not handed:
            pass
        with pytest.raises(eagle.CaptureError, match="escapes"):
            eagle.capture(second, np.ones(3))
    finally:
        done.set()
        t.join(30)


def test_leaving_a_capture_drops_one_whose_exit_was_skipped():
    # an interrupt between an inner capture's start and its `with` body skips its exit
    from eagle.stepcapture.session import Session
    from eagle.stepcapture.standin import recording
    outer, inner = recording(Session("outer")), recording(Session("inner"))
    outer.__enter__()
    inner.__enter__()            # never left
    outer.__exit__(None, None, None)
    assert recorder() is None
