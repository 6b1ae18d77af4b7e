"""Ctrl-C while a step over CUDA arrays is captured and built, on the driver's stand-in:
a KeyboardInterrupt raised inside the step, and one arriving at each point of build()
(raised at the k-th line eagle's Python code runs, or a real SIGINT sent there), leave
no stream capturing and nothing allocated; the same graph builds again, and a second
capture of the step gives the same bits as the step captured on the cpu."""
import gc
import inspect
import os
import signal
import sys
import threading
from contextlib import contextmanager

import numpy as np
import pytest

import eagle
from eagle.stepcapture.standin import recorder

EAGLE_DIR = os.path.dirname(os.path.abspath(eagle.__file__)) + os.sep
KINDS = [b"stream", b"event", b"graph", b"exec", b"devmem"]


def step(x, y, total):
    t = x * 2.0 + 1.0                 # a temporary: device memory the graph owns
    y += t * 0.5
    total[...] = y.sum()


def start():
    return [np.linspace(-1.0, 2.0, 37), np.zeros(37), np.zeros(())]


# the stand-in alone (its driver calls and live handles are counted): no gpu case to skip
pytestmark = pytest.mark.parametrize("cuda_backend", ["cuda-standin"], indirect=True)


@pytest.fixture
def standin(cuda_backend):
    return cuda_backend


def live(fake):
    gc.collect()
    return {k: fake.fake_cuda_live(k) for k in KINDS}


def captures_open(fake):
    return fake.fake_cuda_counter(b"cuStreamBeginCapture") - fake.fake_cuda_counter(b"cuStreamEndCapture")


def check_replays(b, g, mine, replays):
    """g launched `replays` times gives the bits of the step captured on the cpu."""
    host = start()
    g.launch(replays)
    eagle.capture(step, *host).build().launch(replays)
    assert [b.asnumpy(a).tobytes() for a in mine] == [a.tobytes() for a in host]


@contextmanager
def interrupted_at(k, how):
    """Ctrl-C at the k-th point inside the block where Python raises a Ctrl-C's
    KeyboardInterrupt in eagle's code (entering a function, after a call returns: where
    it runs its signal handlers): raised there ("raise"), or a SIGINT sent to this thread
    there, which Python's own handler turns into the KeyboardInterrupt ("sigint").
    ``.points``: how many such points were passed; ``.where``: the k-th."""
    state = type("State", (), {"points": 0, "where": None})()

    def ours(frame):
        return frame is not None and frame.f_code.co_filename.startswith(EAGLE_DIR)

    def profile(frame, event, arg):
        if event in ("c_call", "c_exception") or not (ours(frame) or ours(frame.f_back)):
            return
        if frame.f_code.co_flags & inspect.CO_GENERATOR and (event == "return" or frame.f_code.co_name
                                                            == "<genexpr>"):
            # a generator's yield is not such a point (the caller's is, once next() returns),
            # and a generator expression any() left unfinished is closed when freed, where
            # Python ignores what is raised
            return
        state.points += 1
        if state.points == k:
            state.where = f"{event} {os.path.relpath(frame.f_code.co_filename, EAGLE_DIR)}:{frame.f_lineno}"
            if how == "raise":
                raise KeyboardInterrupt
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    sys.setprofile(profile)
    try:
        yield state
    finally:
        sys.setprofile(None)


def test_ctrl_c_inside_a_step_over_device_arrays_leaves_nothing_behind(standin):
    b, fake = standin, standin.fake
    mine = [b.asarray(a) for a in start()]
    before = live(fake)

    def interrupted(x, y, total):
        step(x, y, total)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        b.capture(interrupted, *mine)
    assert recorder() is None
    assert live(fake) == before                     # the temporaries' device memory freed
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 0
    assert [b.asnumpy(a).tobytes() for a in mine] == [a.tobytes() for a in start()]   # nothing ran
    g = b.capture(step, *mine)
    g.build()
    assert captures_open(fake) == 0
    check_replays(b, g, mine, 3)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
@pytest.mark.parametrize("how", ["raise", "sigint"])
def test_ctrl_c_at_any_point_of_build_ends_the_capture_and_the_graph_builds_again(standin, how):
    b, fake = standin, standin.fake
    mine = [b.asarray(a) for a in start()]
    for _ in range(2):                              # the second build's: the first one's caches are warm
        g = b.capture(step, *mine)
        with interrupted_at(0, how) as whole:       # k = 0: never: counts build()'s points
            g.build()
        del g
    assert whole.points > 50, whole.points
    base = live(fake)
    points = sorted({int(k) for k in np.linspace(1, whole.points, 40)})
    interrupted = 0
    for k in points:
        for a, h in zip(mine, start()):
            a.host[...] = h
        g = b.capture(step, *mine)
        try:
            with interrupted_at(k, how) as at:
                g.build()
        except KeyboardInterrupt:
            interrupted += 1
        assert captures_open(fake) == 0, at.where   # no stream left capturing
        assert gc.isenabled(), at.where             # nor the collector left off
        g.build()                                   # again, whole
        check_replays(b, g, mine, 2)
        del g
        assert live(fake) == base, at.where         # nothing of the interrupted build kept
    assert interrupted >= len(points) - 2           # a SIGINT at the very end lands after build()


def test_ctrl_c_as_the_capture_begins_ends_it(standin):
    # Python raises a Ctrl-C that came during cuStreamBeginCapture as the call returns (a
    # Cython call: no point above sees it); raised at the next line of eagle's code here
    b, fake = standin, standin.fake
    mine = [b.asarray(a) for a in start()]
    base = live(fake)
    g = b.capture(step, *mine)

    def line(frame, event, arg):
        if event == "line" and fake.fake_cuda_counter(b"cuStreamBeginCapture"):
            raise KeyboardInterrupt
        return line

    sys.settrace(lambda frame, event, arg: line if frame.f_code.co_filename.startswith(EAGLE_DIR) else None)
    try:
        with pytest.raises(KeyboardInterrupt):
            g.build()
    finally:
        sys.settrace(None)
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1
    assert captures_open(fake) == 0                 # ended, not left capturing
    b.asarray(np.zeros(3))                          # the legacy stream is usable
    g.build()
    check_replays(b, g, mine, 2)
    del g
    assert live(fake) == base
