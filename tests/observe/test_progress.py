"""progress=True on launch / launch_until_done: a bar for long launches, nothing for short ones.

The bar is driven from the executor's signal checks (at most every 100 ms); the
delay before it shows (eagle.observe.progress.DELAY_S, 1 s) is shortened here so the
tests stay short. Times below are only there to make a launch long enough to
be seen, never asserted as speeds.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from ctrl_c import interrupt

import eagle
from eagle import kernels
from eagle.observe import progress as _progress
from eagle.graph import compact, native, opaque

EAGLE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(eagle.__file__)))


class FakeTqdm:
    made = []

    def __init__(self, total, initial=0, **kw):
        self.total, self.n, self.kw, self.updates, self.closed = total, initial, kw, [], False
        FakeTqdm.made.append(self)

    def update(self, k):
        self.n += k
        self.updates.append(self.n)

    def set_postfix_str(self, s, refresh=True):
        self.postfix = s

    def close(self):
        self.closed = True


@pytest.fixture
def fake_tqdm(monkeypatch):
    FakeTqdm.made = []
    monkeypatch.setattr(_progress, "_tqdm", lambda: FakeTqdm)
    monkeypatch.setattr(_progress, "DELAY_S", 0.05)
    return FakeTqdm.made


def sleepy_graph(ms=1.0):
    z = np.zeros(1)

    def step():
        time.sleep(ms / 1e3)
        z[0] += 1

    g = eagle.Graph()
    g.add_node(opaque(step, writes={"z": z}), name="step")
    return g.build(), z


def test_a_long_launch_writes_a_plain_line(monkeypatch, capsys):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    monkeypatch.setattr(_progress, "DELAY_S", 0.05)
    g, z = sleepy_graph()
    g.launch(300, progress=True)
    assert z[0] == 300
    err = capsys.readouterr().err
    lines = err.split("\r")
    assert len([ln for ln in lines if ln.startswith("eagle launch: ")]) >= 2   # updated, then finished
    assert "300/300 replays (100%)" in lines[-1] and err.endswith("\n")


@pytest.mark.parametrize("n_threads,teams", [(1, "auto"), (2, "parallel")])
def test_a_long_native_launch_updates_a_tqdm_bar(fake_tqdm, threads, n_threads, teams):
    """nogil paths: the serial one and the team's, whose calling thread reports."""
    threads(n_threads)
    x, y = np.ones(400_000), np.zeros(400_000)
    g = eagle.Graph()
    g.add_node(native(kernels.axpy(1.0), reads={"x": x}, writes={"y": y}), name="axpy")
    g.build(cpu=eagle.CpuOptions(teams=teams))
    n, total, t0 = 50, 0, time.monotonic()
    while time.monotonic() - t0 < 0.4:   # long enough for a few 100 ms updates
        n *= 2
        total += n
        fake_tqdm.clear()
        t0 = time.monotonic()
        g.launch(n, progress=True)
    (bar,) = fake_tqdm
    assert bar.total == n and bar.closed and bar.n == n
    assert len(bar.updates) >= 2 and bar.updates == sorted(bar.updates)
    assert y[0] == total


def test_launch_until_done_shows_progress_and_stops_early(fake_tqdm):
    n = 40
    alive = np.ones(n, bool)
    age = np.zeros(n, np.int64)
    node = compact(alive, {"age": age})
    ids = node.ids

    def step():
        time.sleep(0.005)
        m = alive.copy()
        age[m] += 1
        alive[m & (age >= ids + 1)] = False    # sample i dies after i + 1 replays

    g = eagle.Graph()
    g.add_node(opaque(step, reads={"ids": ids}, writes={"alive": alive, "age": age}), name="step")
    g.add_node(node)
    g.build()
    done = g.launch_until_done(1000, progress=True)
    assert done == n and g.logical_size == 0
    (bar,) = fake_tqdm
    # the bar counts the samples finished out of the live ones, not the replay cap
    assert bar.total == n and bar.n == n and bar.closed and bar.kw["unit"] == "sample"
    assert bar.updates == sorted(bar.updates) and bar.postfix == f"{n} replays"


def test_a_short_launch_shows_nothing(capsys, monkeypatch):
    made = []
    monkeypatch.setattr(_progress, "_tqdm", lambda: made.append(1) or FakeTqdm)
    g, z = sleepy_graph(0)
    for n in (0, 1, 1000):
        g.launch(n, progress=True)
    assert made == [] and capsys.readouterr().err == ""


def test_progress_off_and_bad_input(fake_tqdm):
    g, z = sleepy_graph(0)
    g.launch(3, progress=False)
    assert fake_tqdm == [] and z[0] == 3
    with pytest.raises(ValueError):
        g.launch(-1, progress=True)
    with pytest.raises(ValueError, match="compaction"):
        g.launch_until_done(3, progress=True)
    # True or False only, for launch and launch_until_done alike
    alive = np.ones(4, dtype=bool)
    done = eagle.Graph()
    done.add_node(eagle.graph.ufunc(np.logical_and, alive, False, out=alive), name="finish")
    done.add_node(eagle.graph.compact(alive, {}), name="compact")
    done.build()
    for bad in ("yes", 2, 0.5, print, None, 0, 1):
        with pytest.raises(TypeError, match="progress= takes True or False"):
            g.launch(3, progress=bad)
        with pytest.raises(TypeError, match="progress= takes True or False"):
            done.launch_until_done(3, progress=bad)
    assert alive.all()
    with pytest.raises(TypeError, match=r"launch\(\) takes 1 positional argument \(n\), got 2: progress "
                                        r"is a keyword, e.g. launch\(10, progress=True\)"):
        g.launch(1, True)
    with pytest.raises(TypeError, match=r"launch_until_done\(\) takes 1 positional argument \(n\), got 2"):
        g.launch_until_done(1, True)
    assert fake_tqdm == [] and z[0] == 3   # refused before anything ran
    g.launch(1)                            # and the graph is not left locked
    h = eagle.Graph()
    h.add_node(opaque(lambda: None), name="n")
    with pytest.raises(eagle.NotBuiltError):
        h.launch(1, progress=True)


def test_a_display_that_raises_is_dropped_and_the_launch_runs_to_the_end(monkeypatch):
    class Broken(FakeTqdm):
        def update(self, k):
            raise OSError("the terminal went away")

    monkeypatch.setattr(_progress, "_tqdm", lambda: Broken)
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    FakeTqdm.made = []
    g, z = sleepy_graph()
    g.launch(300, progress=True)
    assert z[0] == 300
    (bar,) = FakeTqdm.made
    assert bar.closed        # the failed bar is closed once and not made again
    g.launch(2)
    assert z[0] == 302


CTRL_C_CHILD = r"""
import sys, time
import numpy as np
import eagle
from eagle.observe import progress as _progress
from eagle.graph import opaque
_progress.DELAY_S = 0.0
z = np.zeros(1)
g = eagle.Graph()
g.add_node(opaque(lambda: time.sleep(0.001), writes={"z": z}), name="step")
g.build()
print("ready", flush=True)
try:
    g.launch(10**9, progress=True)
except KeyboardInterrupt as e:
    # the signal lands in the node (time.sleep raises) or at the executor's check
    print("interrupted", any(n.startswith("eagle: ") for n in e.__notes__), flush=True)
g.launch(3)
print("usable", flush=True)
"""


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
def test_ctrl_c_stops_a_progress_launch():
    res = interrupt(["-c", CTRL_C_CHILD])
    assert res.out.split("\n")[:2] == ["interrupted True", "usable"], res.err[-2000:]
    assert "eagle launch" in res.err     # the bar was shown, and closed


def test_progress_and_a_profile_together(fake_tqdm):
    g, z = sleepy_graph()
    with eagle.profile() as prof:
        g.launch(200, progress=True)
    (bar,) = fake_tqdm
    assert bar.n == 200 and bar.closed
    assert {s.node: s.count for s in prof.stats()}["step"] == 200


# ---- Hostile uses of progress=True: a display that fails while closing, no stderr at all.
#
# The delay before a bar shows (eagle.observe.progress.DELAY_S) is set to 0 so the
# launches stay short; no time is asserted.

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
        assert g.launch(50, progress=True) is None   # the display's failure is not the launch's
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


# ---- A stderr that cannot be written: the bar is dropped (silently), the launch keeps going.

class Unwritable:
    """A sys.stderr whose writes raise ``exc``; counts the tries."""

    def __init__(self, exc):
        self.exc, self.tries = exc, 0

    def write(self, text):
        self.tries += 1
        raise self.exc

    def flush(self):
        raise self.exc


def closed_file():
    import io
    f = io.StringIO()
    f.close()
    return f


@pytest.mark.parametrize("stderr", [
    lambda: Unwritable(BrokenPipeError(32, "Broken pipe")),
    lambda: Unwritable(OSError(5, "Input/output error")),
    closed_file,
], ids=["broken-pipe", "oserror", "closed"])
def test_an_unwritable_stderr_drops_the_plain_line_and_the_launch_completes(monkeypatch, stderr):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    err = stderr()
    monkeypatch.setattr(sys, "stderr", err)
    g, z = counting_graph()
    with eagle.profile() as prof:
        assert g.launch(400, progress=True) is None
    assert z[0] == 400
    assert [r.error for r in prof.launches] == [None] and prof.replays == 400
    if isinstance(err, Unwritable):
        assert err.tries == 1    # shown once, failed, dropped: no retry at every check
    g.launch(3, progress=True)
    assert z[0] == 403


BROKEN_PIPE_CHILD = r"""
import sys, time
import numpy as np
import eagle
from eagle.observe import progress as _progress
from eagle.graph import opaque
_progress.DELAY_S = 0.0
_progress._tqdm = lambda: None
z = np.zeros(1)
def step():
    time.sleep(0.0005)
    z[0] += 1
g = eagle.Graph()
g.add_node(opaque(step, writes={"z": z}), name="step")
g.build()
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()           # the parent has closed our stderr's reading end
g.launch(2000, progress=True)
sys.stdout.write(f"done {int(z[0])}\n"); sys.stdout.flush()
"""


@pytest.mark.skipif(os.name != "posix", reason="needs a POSIX pipe")
def test_a_progress_launch_survives_stderr_a_broken_pipe():
    env = dict(os.environ, PYTHONPATH=EAGLE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", BROKEN_PIPE_CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.stderr.close()               # every write to stderr is now EPIPE
        p.stdin.write("go\n")
        p.stdin.close()
        out = p.stdout.read()
        p.wait(timeout=120)            # a deadlock guard, not a speed requirement
    finally:
        p.kill()
    assert out.strip() == "done 2000"


# ---- an until-done bar, line by line: a fake clock and a fake live count ----

class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Lines:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def lines(self):
        return [ln.rstrip() for ln in self.text.split("\r") if ln]


def test_an_until_done_line_shows_samples_finished_and_the_time_left_from_their_rate(monkeypatch):
    """The user's launch_until_done(100_000): 10,138 replays finished every sample in 10 s;
    the bar said ~1021 s left and ended at 10%. Now: samples, their rate, 100% at the end."""
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    clock, out, live = Clock(), Lines(), [1000]
    bar = _progress.Progress(100_000, "launch_until_done", delay=1.0, file=out,
                             live=lambda: live[0], clock=clock)
    clock.t, live[0] = 0.5, 900
    bar(100)                                 # before the delay: nothing shown
    assert out.text == ""
    clock.t, live[0] = 2.0, 750
    bar(2_000)
    clock.t, live[0] = 5.0, 100
    bar(6_000)
    clock.t, live[0] = 10.0, 0
    bar.close(10_138)
    assert out.lines() == [
        "eagle launch_until_done: 250/1,000 samples finished, 2,000 replays (25%), 2.0 s, ~6 s left",
        "eagle launch_until_done: 900/1,000 samples finished, 6,000 replays (90%), 5.0 s, ~1 s left",
        "eagle launch_until_done: 1,000/1,000 samples finished, 10,138 replays (100%), 10.0 s",
    ]
    assert out.text.endswith("\n")


def test_an_until_done_line_stopped_by_the_cap_says_how_many_finished(monkeypatch):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    clock, out, live = Clock(), Lines(), [40]
    bar = _progress.Progress(50, "launch_until_done", delay=0.0, file=out, live=lambda: live[0], clock=clock)
    clock.t, live[0] = 4.0, 30
    bar.close(50)
    assert out.lines() == []                 # never shown during the launch: nothing at its end
    bar = _progress.Progress(50, "launch_until_done", delay=0.0, file=out, live=lambda: live[0], clock=clock)
    clock.t, live[0] = 6.0, 10
    bar(20)
    bar.close(50)
    assert out.lines()[-1] == "eagle launch_until_done: 20/30 samples finished, 50 replays (67%), 2.0 s"


def test_an_until_done_launch_from_zero_live_samples_reads_100_percent(monkeypatch):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    clock, out = Clock(), Lines()
    bar = _progress.Progress(10, "launch_until_done", delay=0.0, file=out, live=lambda: 0, clock=clock)
    bar(0)
    bar.close(0)
    assert out.lines()[-1] == "eagle launch_until_done: 0/0 samples finished, 0 replays (100%), 0.0 s"


def test_a_plain_launch_line_still_counts_replays(monkeypatch):
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    clock, out = Clock(), Lines()
    bar = _progress.Progress(400, "launch", delay=0.0, file=out, clock=clock)
    clock.t = 1.0
    bar(100)
    clock.t = 4.0
    bar.close(400)
    assert out.lines() == ["eagle launch: 100/400 replays (25%), 1.0 s, ~3 s left",
                           "eagle launch: 400/400 replays (100%), 4.0 s"]


def test_a_launch_that_is_one_long_loop_shows_its_iterations(monkeypatch):
    # "0/1 replays" for the whole of a loop until converged said nothing of how far it was
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    clock, out = Clock(), Lines()
    bar = _progress.Progress(1, "launch", delay=1.0, file=out, clock=clock)
    clock.t = 2.0
    bar(0, 1_234)
    clock.t = 4.0
    bar(0, 2_500)
    clock.t = 5.0
    bar.close(1)
    assert out.lines() == [
        "eagle launch: 0/1 replays, 1,234 loop iterations (0%), 2.0 s",
        "eagle launch: 0/1 replays, 2,500 loop iterations (0%), 4.0 s",
        "eagle launch: 1/1 replays, 2,500 loop iterations (100%), 5.0 s",
    ]


def test_the_executor_gives_a_long_loop_s_iterations_to_the_bar(fake_tqdm):
    from eagle.graph import while_loop
    left = np.zeros(1, np.int64)
    body = eagle.Graph()

    def step():
        time.sleep(0.002)
        left[0] -= 1
    body.add_node(opaque(step, writes={"left": left}), name="step")
    g = eagle.Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, 150), writes={"left": left}), name="arm")
    g.add_node(while_loop({"left": left}, body), name="loop")
    g.build().launch(1, progress=True)
    (bar,) = fake_tqdm
    assert bar.total == 1 and bar.postfix.endswith("loop iterations")
    assert 0 < int(bar.postfix.split()[0].replace(",", "")) <= 150


def _screen(text):
    """What a terminal shows of ``text``'s last line: each carriage return goes back to
    column 0 and the next characters overwrite the ones there."""
    shown = []
    for part in text.rstrip("\n").split("\n")[-1].split("\r"):
        shown[:len(part)] = part
    return "".join(shown).rstrip()


def test_a_shorter_line_leaves_no_characters_of_the_longer_one_before_it(monkeypatch):
    """The user's line ended as "… 6.5 s    s left": the last line, without the time
    left, was written over a longer one and left its tail on the terminal."""
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)
    clock, out = Clock(), Lines()
    bar = _progress.Progress(100_000, "launch", delay=0.0, file=out, clock=clock)
    clock.t = 0.1
    bar(1)                                   # a long time left: a long line
    clock.t = 6.5
    bar.close(100_000)
    assert "s left" in out.lines()[0]
    assert _screen(out.text) == "eagle launch: 100,000/100,000 replays (100%), 6.5 s"
