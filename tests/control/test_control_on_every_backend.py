"""Control-flow nodes (while_loop, if_else, subgraph), one scenario per test run on every
backend (the ``backend`` fixture: cpu, the cuda stand-in, a GPU when present), against
the Python control flow they stand for.

``backend.add(x, v)`` is x += v over the logical size, ``backend.dec(k)`` k[0] -= 1
(tests/helpers/backends.py: ufunc / opaque nodes on the cpu, backend_kernels.cu on
cuda, where the conditions are set by eagle's condition kernel into conditional
WHILE / IF nodes and a subgraph is a child-graph node, or captured in place when it
holds control flow: CUDA refuses a child graph holding a conditional node).
"""
import os
import re

import numpy as np
import pytest
from ctrl_c import child_env, interrupt

import eagle
from eagle.graph import if_else, subgraph, while_loop


@pytest.fixture(autouse=True)
def conditional_nodes(backend):
    if backend.name == "gpu":
        from eagle.cuda import _driver
        if not _driver.has("conditional"):
            pytest.skip(f"conditional nodes need a 12.4 driver, this one is {_driver.driver_version()}")


def condition(backend, n, dtype, value=0):
    """A one-element condition that nodes write: the first element of an n-element array
    (a cuda kernel's arrays are per-sample: a one-element one would make the capacity 1);
    the view overlaps it, so the dependency is seen."""
    full = backend.asarray(np.full(n, value, dtype=dtype))
    return full, full[:1]


def test_while_if_subgraph_and_the_iteration_limit(backend):
    """while k: (if flag: x += 1 else: x -= 100); subgraph(x += 0.5); k -= 1 — nested
    conditionals (the inner ones belong to the body) and a subgraph inside a body; a retune
    reaches the nodes inside the bodies; max_iterations stops the loop, naming it."""
    b = backend
    n = 1000
    x = b.zeros(n)
    k, k_c = condition(b, n, np.int64)
    flag = b.asarray(np.ones(1, np.int32))
    then, other, inner, body = eagle.Graph(), eagle.Graph(), eagle.Graph(), eagle.Graph()
    then.add_node(b.add(x, 1.0), name="plus")
    other.add_node(b.add(x, -100.0), name="minus")
    inner.add_node(b.add(x, 0.5), name="half")
    body.add_node(if_else({"flag?": flag}, then, other), name="choose")
    body.add_node(subgraph(inner), name="sub")
    body.add_node(b.dec(k), name="dec")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k_c}, body, max_iterations=5), name="loop")
    g.build()
    assert g.backend == b.graph_backend
    want = np.zeros(n)
    for kk, f in [(3, 1), (0, 1), (2, 0), (5, 1)]:
        b.put(k, 0, kk)
        b.put(flag, 0, f)
        g.launch(1)
        want += kk * ((1.0 if f else -100.0) + 0.5)
        np.testing.assert_array_equal(b.asnumpy(x), want)
        assert b.asnumpy(k)[0] == 0
    g.set_logical_size(10)          # reaches the nodes inside the bodies
    b.put(k, 0, 1)
    g.launch(1)
    want[:10] += 1.5
    np.testing.assert_array_equal(b.asnumpy(x), want)
    b.put(k, 0, 9)
    with pytest.raises(RuntimeError, match="while_loop node 'loop' reached max_iterations=5"):
        g.launch(1)


@pytest.mark.parametrize("k0, limit, raises", [(3, 3, False), (4, 3, True), (10, 1, True), (0, 1, False)])
def test_iteration_limit(backend, k0, limit, raises):
    b = backend
    x = b.zeros(3)
    k, k_c = condition(b, 3, np.int64)
    body = eagle.Graph()
    body.add_node(b.add(x, 1.0), name="inc")
    body.add_node(b.dec(k), name="dec")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k_c}, body, max_iterations=limit), name="bounded")
    g.build()
    b.put(k, 0, k0)
    if raises:
        with pytest.raises(RuntimeError, match=r"while_loop node 'bounded' reached max_iterations=" + str(limit)):
            g.launch(1)
        np.testing.assert_array_equal(b.asnumpy(x), np.full(3, float(limit)))   # stopped there
        b.put(k, 0, 0)
        g.launch(1)   # the flag was cleared: the next launch is clean
    else:
        g.launch(1)
    np.testing.assert_array_equal(b.asnumpy(x), np.full(3, float(min(k0, limit))))


@pytest.mark.parametrize("k0, limit", [(3, 5), (9, 4), (0, 2)])
def test_on_max_stop_and_the_iterations_run(backend, k0, limit):
    # on_max="stop": the loop ends at max_iterations, the launch goes on (its next replays
    # too), and g.iterations says what the last run ran
    b = backend
    x = b.zeros(3)
    k, k_c = condition(b, 3, np.int64)
    body = eagle.Graph()
    body.add_node(b.add(x, 1.0), name="inc")
    body.add_node(b.dec(k), name="dec")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k_c}, body, max_iterations=limit, on_max="stop"), name="bounded")
    g.build()
    b.put(k, 0, k0)
    g.launch(1)
    ran = min(k0, limit)
    np.testing.assert_array_equal(b.asnumpy(x), np.full(3, float(ran)))
    assert g.iterations("bounded") == ran
    b.put(k, 0, 1)
    g.launch(2)   # 1 iteration, then none (k is 0)
    assert g.iterations("bounded") == 0
    np.testing.assert_array_equal(b.asnumpy(x), np.full(3, float(ran + 1)))


@pytest.mark.parametrize("otherwise", [True, False])
def test_branch_chosen_per_replay(backend, otherwise):
    b = backend
    x = b.zeros(6)
    flag, flag_c = condition(b, 6, np.int64)
    then, other = eagle.Graph(), eagle.Graph()
    then.add_node(b.add(x, 10.0), name="plus10")
    # `then` clears the flag: `otherwise` must still not run (one read decides)
    then.add_node(b.dec(flag), name="clear")
    other.add_node(b.add(x, -1.0), name="minus1")
    g = eagle.Graph()
    g.add_node(if_else({"flag?": flag_c}, then, other if otherwise else None), name="branch")
    g.build()
    if b.graph_backend == "cuda":
        assert g._backend.control.conditional_nodes == (2 if otherwise else 1)
    want = np.zeros(6)
    for f in [1, 0, 0, 1, 1, 0]:
        b.put(flag, 0, f)
        g.launch(1)
        if f:
            want += 10.0
        elif otherwise:
            want -= 1.0
        np.testing.assert_array_equal(b.asnumpy(x), want)
        assert b.asnumpy(flag)[0] == 0   # `then` cleared it, `otherwise` left it


def test_retune_inside_a_branch_and_a_subgraph(backend):
    """set_logical_size reaches the sized nodes inside a conditional body and a subgraph."""
    b = backend
    n = 12
    x = b.zeros(n)
    flag = b.asarray(np.ones(1, np.int32))
    then, inner = eagle.Graph(), eagle.Graph()
    then.add_node(b.add(x, 1.0), name="plus")
    inner.add_node(b.add(x, 10.0), name="plus10")
    g = eagle.Graph()
    g.add_node(if_else({"flag": flag}, then), name="branch")
    g.add_node(subgraph(inner), name="sub")
    g.build()
    if b.graph_backend == "cuda":
        assert g._backend.sized_kernels == 2
    g.launch(1)
    np.testing.assert_array_equal(b.asnumpy(x), np.full(n, 11.0))
    g.set_logical_size(5)
    g.launch(1)
    want = np.full(n, 11.0)
    want[:5] += 11.0
    np.testing.assert_array_equal(b.asnumpy(x), want)
    g.set_logical_size(n)
    b.put(flag, 0, 0)
    g.launch(1)
    want += 10.0
    np.testing.assert_array_equal(b.asnumpy(x), want)


def test_a_subgraph_holding_control_flow_used_twice(backend):
    """subgraph(if flag: (while k: x += 1; k -= 1) else: x -= 100), used twice, against
    the Python form; a retune reaching the nodes inside. On cuda the body is captured in
    place (no child graph may hold a conditional node), and launch_until_done of a graph
    with conditional nodes takes the host path, decided up front."""
    b = backend
    n = 1000
    x = b.zeros(n)
    k, k_c = condition(b, n, np.int64)
    flag = b.asarray(np.ones(1, np.int32))
    loop, then, other, sub = eagle.Graph(), eagle.Graph(), eagle.Graph(), eagle.Graph()
    loop.add_node(b.add(x, 1.0), name="inc")
    loop.add_node(b.dec(k), name="dec")
    then.add_node(while_loop({"k?": k_c}, loop), name="count")
    other.add_node(b.add(x, -100.0), name="minus")
    sub.add_node(if_else({"flag?": flag}, then, other), name="choose")
    g = eagle.Graph()
    g.add_node(subgraph(sub), name="first")
    g.add_node(b.add(x, 0.5), name="half")
    g.add_node(subgraph(sub), name="second")
    g.build()
    if b.graph_backend == "cuda":
        assert g._backend.control.in_place == 2 and g._backend.control.child_nodes == 0
    want = np.zeros(n)
    for kk, f in [(3, 1), (0, 1), (2, 0)]:
        b.put(k, 0, kk)
        b.put(flag, 0, f)
        g.launch(1)
        want += (kk if f else -200.0) + 0.5    # the second use finds k == 0 (or subtracts again)
        np.testing.assert_array_equal(b.asnumpy(x), want)
    g.set_logical_size(10)
    b.put(k, 0, 2)
    b.put(flag, 0, 1)
    g.launch(1)
    want[:10] += 2.5
    np.testing.assert_array_equal(b.asnumpy(x), want)
    if b.graph_backend == "cuda":
        assert g._backend.until_done_path() == "host" and "conditional" in g._backend.until_done_fallback


# ---- Ctrl-C -------------------------------------------------------------------------------

CTRL_C_SCRIPT = r'''
import numpy as np
import eagle
from eagle.graph import while_loop
from backends import child_backend
b = child_backend()
x, k = b.zeros(1000), b.zeros(1000, np.int64)
body = eagle.Graph()
body.add_node(b.add(x, 1.0), name="inc")
body.add_node(b.dec(k), name="dec")
g = eagle.Graph()
g.add_node(while_loop({"k?": k[:1]}, body), name="spin")
g.build()
b.put(k, 0, 10 ** 15)             # never clears in this launch
b.sync()
print("ready", flush=True)
try:
    g.launch(1)
    print("finished", flush=True)
except KeyboardInterrupt as e:
    print("interrupted", " ".join(getattr(e, "__notes__", [])), flush=True)
ran = float(b.asnumpy(x)[0])
b.put(k, 0, 3)
b.put(x, slice(None), 0)
g.launch(1)
print("after", ran, float(b.asnumpy(x)[0]), int(b.asnumpy(k)[0]), flush=True)
'''


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
def test_ctrl_c_stops_an_endless_while_loop(backend):
    """SIGINT during launch(1) of a while_loop whose condition never clears (in a
    subprocess, bounded by a timeout): launch raises KeyboardInterrupt naming the loop and
    the iteration it stopped in, and the graph then runs a 3-iteration loop exactly. On
    cuda the stop flag (host-mapped memory the condition kernel reads) ends the loop on
    the device; on the cpu the interrupt surfaces in the loop's Python node."""
    res = interrupt(["-c", CTRL_C_SCRIPT], env=child_env(**backend.child_env()))
    assert res.returncode == 0, res.err
    first, last = res.lines[0], res.lines[-1]
    assert first.startswith("interrupted") and "'spin'" in first, res.out + res.err
    _, ran, again, k_left = last.split()
    assert (float(again), int(k_left)) == (3.0, 0)     # launched again: exactly 3 iterations
    if backend.graph_backend == "cuda":
        assert "Ctrl-C interrupted" in first and "graph can be launched again" in first, first
        assert "eagle: launch(1) interrupted in replay 0" in first, first   # counted from 0, as on the cpu
        assert "while_loop node 'spin' after " in first, first
        it = int(first.split("while_loop node 'spin' after ")[1].split()[0])
        assert float(ran) == it > 0   # the iteration named is the one the loop stopped at
    else:
        # the executor saw it between nodes, or the loop's Python node raised it
        it = int(re.search(r"iteration (\d+)", first).group(1))
        assert it <= float(ran) <= it + 1   # stopped in iteration `it` (its x += 1 done or not)
