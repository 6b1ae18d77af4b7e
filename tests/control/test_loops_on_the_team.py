"""A control node's body has a team choice of its own: under auto its passes (a while loop's
iterations) are measured on one thread, timed on the team and re-checked, as a launch's
replays are, so a loop inside launch(1) gets the team when the team is faster. And what a
loop says after a launch: its iterations (g.iterations), and on_max="stop"."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import eagle
from eagle.graph import Graph, native, opaque, ufunc, while_loop

SLEEP_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
/* 1 us per sample, asleep: a team of k threads takes 1/k of the time whatever the load */
void sleep_us(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data) {
    int64_t us = stop - start;
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    if (us > 0)
        nanosleep(&ts, NULL);
    for (int64_t i = start; i < stop; ++i)
        *(double *)(data[0] + i * strides[0]) += 1.0;
}
"""


@pytest.fixture(scope="module")
def sleep_kernel(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("sleep")
    (d / "sleep.c").write_text(SLEEP_C)
    lib = d / "libsleep.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(d / "sleep.c")], check=True)
    return eagle.native.CTYPES_KERNEL(("sleep_us", ctypes.CDLL(str(lib))))


@pytest.fixture
def two_threads():
    if not eagle.have_openmp() or eagle.max_threads() < 2:
        pytest.skip("no team of 2 threads here")
    before = eagle.get_num_threads()
    eagle.set_num_threads(2)
    yield
    eagle.set_num_threads(before)


def sleeping_loop(kernel, n_iterations, samples=40_000, teams="auto"):
    x = np.zeros(samples)
    left = np.zeros(1, np.int64)
    body = Graph()
    body.add_node(native(kernel, updates={"x": x}), "nap")
    body.add_node(opaque(lambda: left.__setitem__(0, left[0] - 1), writes={"left": left}), "dec")
    g = Graph()
    g.add_node(opaque(lambda: left.__setitem__(0, n_iterations), writes={"left": left}), "arm")
    g.add_node(while_loop({"left": left}, body), "loop")
    return g.build(cpu=eagle.CpuOptions(teams=teams)), x


def test_a_loop_in_one_launch_gets_the_team_when_it_is_faster(sleep_kernel, two_threads):
    # 40 ms an iteration on one thread, 20 ms on a team of two (asleep: whatever the load):
    # the loop's first iterations are measured and timed on the team, the rest run there.
    # Before, the loop was one replay of launch(1), measured on one thread, never on the team
    g, x = sleeping_loop(sleep_kernel, 30)
    with eagle.profile() as prof:
        g.launch(1)
    assert (x == 30).all() and g.iterations("loop") == 30
    plan = str(g.plan())
    assert "team 1   (auto    )" in plan   # the loop's own stage stays on the calling thread
    assert "team 2 (auto): measured: team of 2" in plan and "team kept" in plan, plan
    rows = {r.node: r for r in prof.stats()}
    naps = rows["loop/nap"]
    assert naps.count == 30 and naps.threads == 2
    # the profile pairs each worker's span with the iteration it ran in (its first
    # iterations ran on thread 0 alone): the body's calls fit inside their loop
    assert naps.total <= rows["loop"].total


def test_under_serial_the_loop_stays_on_one_thread(sleep_kernel, two_threads):
    g, x = sleeping_loop(sleep_kernel, 12, samples=2_000, teams="serial")
    with eagle.profile() as prof:
        g.launch(1)
    assert (x == 12).all()
    assert {r.node: r for r in prof.stats()}["loop/nap"].threads == 1
    assert "team 1 (serial)" in str(g.plan())


def test_on_max_stop_ends_the_loop_and_the_replay_goes_on():
    x = np.zeros(8)
    more = np.ones(1, bool)
    after = np.zeros(1)
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    g = Graph()
    g.add_node(while_loop({"more": more}, body, max_iterations=7, on_max="stop"), "loop")
    g.add_node(opaque(lambda: after.__iadd__(1), reads={"x": x}, updates={"after": after}), "after")
    g.build().launch(3)
    assert (x == 21).all() and after[0] == 3 and g.iterations("loop") == 7
    assert "on_max='stop'" in repr(g.recording().nodes[0])
    assert "at most 7 iterations (then it stops)" in str(g.plan())
    # the default still raises, naming the node and the way out
    g2 = Graph()
    g2.add_node(while_loop({"more": more}, body, max_iterations=7), "loop")
    with pytest.raises(RuntimeError, match=r"'loop' reached max_iterations=7.*on_max=\"stop\""):
        g2.build().launch(1)


@pytest.mark.parametrize("bad", ["Stop", "ignore", None, 1])
def test_on_max_takes_raise_or_stop(bad):
    body = Graph()
    body.add_node(ufunc(np.add, np.zeros(2), 1.0, out=np.zeros(2)), "inc")
    with pytest.raises(ValueError, match="on_max"):
        while_loop(np.ones(1, bool), body, on_max=bad)


def test_iterations_of_nested_loops_and_branches():
    from eagle.graph import if_else
    inner_left, outer_left, flag = np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1, bool)
    inner = Graph()
    inner.add_node(opaque(lambda: inner_left.__setitem__(0, inner_left[0] - 1),
                          writes={"i": inner_left}), "dec")
    then = Graph()
    then.add_node(opaque(lambda: inner_left.__setitem__(0, 5), writes={"i": inner_left}), "arm")
    then.add_node(while_loop({"i": inner_left}, inner), "inner")
    outer = Graph()
    outer.add_node(if_else({"flag": flag}, then), "br")
    outer.add_node(opaque(lambda: outer_left.__setitem__(0, outer_left[0] - 1),
                          writes={"o": outer_left}), "odec")
    g = Graph()
    g.add_node(opaque(lambda: outer_left.__setitem__(0, 3), writes={"o": outer_left}), "arm")
    g.add_node(while_loop({"o": outer_left}, outer), "outer")
    with pytest.raises(eagle.NotBuiltError):
        g.iterations("outer")
    g.build().launch(1)
    assert g.iterations("outer") == 3
    assert g.iterations("outer/br") == 1
    assert g.iterations("outer/br/inner") == 5
    with pytest.raises(KeyError, match="not a control node"):
        g.iterations("arm")
    with pytest.raises(KeyError, match="no node 'nope'"):
        g.iterations("outer/nope")
