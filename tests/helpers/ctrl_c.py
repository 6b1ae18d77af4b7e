"""Ctrl-C in a subprocess: a child Python runs eagle from this tree, says a line once
its launch is under way, and gets SIGINT; whatever can hang is bounded by a timeout,
and the child is killed and reaped on the way out whatever happens.

    res = interrupt(["-c", SCRIPT, arg])            # "ready", 0.5 s, SIGINT, wait
    assert res.returncode == 0, res.err

and, inside the child's SCRIPT (``child_env`` puts this folder on its path):

    e = ctrl_c.launch_until_interrupted(g, lambda: y[0] >= 50)   # says "ready", launches

Time limits here are deadlock guards, not speed requirements, and they stretch with the
machine's load: ``scaled(s)`` is ``s`` times how much slower than an idle core this
machine runs a fixed piece of Python right now (``slowness()``), so a test that waits
for a child, or bounds how long SIGINT took, does not fail on a loaded machine.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

# the probe's time on an idle x86-64 core (CPython 3.11): a slower or busier machine
# only stretches the deadlines
_IDLE_PROBE_S = 0.01


def _probe():
    t0 = time.perf_counter()
    s = 0
    for i in range(200_000):
        s += i
    return time.perf_counter() - t0


def slowness():
    """How many times slower than an idle core this machine runs a fixed piece of Python
    now (the median of 3 probes, from 1 to 10: a real hang still ends): measured at each
    call, as the load changes."""
    return min(10.0, max(1.0, sorted(_probe() for _ in range(3))[1] / _IDLE_PROBE_S))


def scaled(seconds):
    """A deadline of ``seconds`` on an idle machine, stretched by ``slowness()``."""
    return seconds * slowness()


def eagle_root():
    """The directory holding the eagle under test, so a child imports the same one."""
    import eagle
    return str(Path(eagle.__file__).resolve().parents[1])


def child_env(**extra):
    """This process's environment for a child: eagle under test, tests/doubles and
    tests/helpers importable; OMP_NUM_THREADS dropped (the child sets its threads)."""
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    paths = [eagle_root(), str(TESTS / "doubles"), str(TESTS / "helpers")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def default_sigint():
    """For ``preexec_fn``: SIGINT back to its default action in the child. A suite run as
    a background job (``pytest &``, ``nohup``) has SIGINT ignored, an ignored signal stays
    ignored across exec, and Python then installs no KeyboardInterrupt handler: every
    Ctrl-C test would wait for its deadline."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def child(args, env=None, **popen):
    """``python *args`` with text pipes (env: child_env() unless given), SIGINT at its
    default (``default_sigint``); killed and reaped on the way out if it still runs."""
    popen.setdefault("preexec_fn", default_sigint)
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=child_env() if env is None else env, **popen)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def read_line(p, deadline_s):
    """The child's next stdout line, or fail (killing it) after deadline_s of silence
    (stretched by the load: ``scaled``)."""
    deadline_s = scaled(deadline_s)
    ready, _, _ = select.select([p.stdout], [], [], deadline_s)
    if not ready:
        p.kill()
        _, err = p.communicate()
        pytest.fail(f"the child said nothing for {deadline_s} s (hung?); stderr: {err[-2000:]!r}")
    return p.stdout.readline().strip()


def wait_for(p, line, deadline_s=120):
    """Read the child's next line; it must be `line` (else fail with its stderr)."""
    got = read_line(p, deadline_s)
    if got != line:
        p.kill()
        _, err = p.communicate()
        pytest.fail(f"the child said {got!r}, not {line!r}; stderr: {err[-3000:]!r}")


@dataclass
class Interrupted:
    returncode: int
    out: str
    err: str
    sent: float       # time.monotonic() of the first SIGINT
    waited: float     # seconds from it until the child exited

    @property
    def lines(self):
        return self.out.strip().splitlines()


def interrupt(args, *, env=None, ready="ready", after_s=0.5, signals=1, gap_s=0.01, timeout_s=60, **popen):
    """Run ``python *args``; once it printed `ready`, wait after_s, send SIGINT `signals`
    times (gap_s apart), and wait at most timeout_s (stretched by the load) for it to exit."""
    with child(args, env, **popen) as p:
        wait_for(p, ready)
        time.sleep(after_s)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        for _ in range(signals - 1):
            time.sleep(gap_s)
            p.send_signal(signal.SIGINT)
        timeout_s = scaled(timeout_s)
        try:
            out, err = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the child did not exit within {timeout_s:.0f} s of SIGINT")
        return Interrupted(p.returncode, out, err, sent, time.monotonic() - sent)


def launch_until_interrupted(g, started, replays=10**12):
    """In the child: ``g.launch(replays)``, saying "ready" once ``started()`` is true (a
    daemon thread watches: the launch lets go of the GIL); the KeyboardInterrupt that
    ended the launch. A launch that ends without one raises AssertionError."""
    def watch():
        while not started():
            pass
        print("ready", flush=True)
    threading.Thread(target=watch, daemon=True).start()
    try:
        g.launch(replays)
    except KeyboardInterrupt as e:
        return e
    raise AssertionError(f"launch({replays}) ended without an interrupt")
