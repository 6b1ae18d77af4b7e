"""Control-flow nodes (while_loop, if_else, subgraph: eagle.record.control) on the cuda
backend, against the CPU stand-in of the CUDA driver (tests/doubles/fake_libcuda.c, a
TEST DOUBLE), which models conditional IF / WHILE nodes, their handles (default at each
launch, set from a kernel), child-graph nodes, capture into a body graph and the
driver's version.

The kernels (tests/cuda/control_kernels.cu and eagle's condition kernel,
eagle/cuda/kernels/control.cu) run through the CUDA C emulator; the oracle is the same
control flow written in Python on NumPy copies.
"""
import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eagle.cuda import _graph, _stream

from backends import StandinBackend
from ctrl_c import child_env, interrupt, scaled

import eagle
from eagle.record.control import if_else, subgraph, while_loop
from fake_cuda import DeviceArray
from fake_cuda_build import build_emulated_module

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def tk(emulated_kernels, tmp_path_factory):
    """The test kernels, loaded into the stand-in: {name: (CUfunction, nargs)}."""
    so = build_emulated_module(tmp_path_factory.mktemp("control_kernels"),
                               sources=[HERE / "control_kernels.cu"],
                               kernels=["t_newton", "t_residual", "t_add", "t_dec"])
    assert emulated_kernels.fake_cuda_load_module(so.encode()) == 0
    nargs = {"t_newton": 3, "t_residual": 5, "t_add": 3, "t_dec": 2}
    return {k: (emulated_kernels.fake_cuda_module_function(k.encode()), n) for k, n in nargs.items()}


@pytest.fixture
def ck(cuda_mod):
    import eagle.cuda.backend  # noqa: F401  (binds the backend to the stand-in)
    from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
    return cuda_kernel, SIZE


def scalar(n, dtype, value=0):
    """A one-element condition that kernels write: the first element of an n-element array
    (a cuda_kernel node's arrays are per-sample, so a one-element one would make the
    graph's capacity 1); the view overlaps it, so the dependency is seen."""
    full = DeviceArray(np.full(n, value, dtype=dtype))
    return full, full[:1]


def newton(ck, tk, x, a, more, tol):
    cuda_kernel, SIZE = ck
    return cuda_kernel(tk["t_newton"], [x, a, SIZE], reads={"a": a}, updates={"x": x}, block=4)


def residual(ck, tk, x, a, more, tol):
    cuda_kernel, SIZE = ck
    return cuda_kernel(tk["t_residual"], [x, a, float(tol), more, SIZE], reads={"x": x, "a": a},
                       writes={"more": more}, block=4)


def add(ck, tk, x, v):
    cuda_kernel, SIZE = ck
    return cuda_kernel(tk["t_add"], [x, float(v), SIZE], updates={"x": x}, block=4)


def dec(ck, tk, k):
    cuda_kernel, SIZE = ck
    return cuda_kernel(tk["t_dec"], [k, SIZE], updates={"k": k}, block=4)


def test_newton_iterations_per_replay(fake, ck, tk):
    """while more: x = (x + a/x)/2; more = |x^2 - a| > tol — per replay, from a fresh x."""
    rng = np.random.default_rng(1)
    n, tol = 10, 1e-9
    a_h = rng.uniform(1.0, 50.0, n)
    x, a = DeviceArray(np.ones(n)), DeviceArray(a_h)
    more, more_c = scalar(n, np.int32)
    body = eagle.Graph()
    body.add_node(newton(ck, tk, x, a, more, tol), name="step")
    body.add_node(residual(ck, tk, x, a, more, tol), name="check")
    g = eagle.Graph()
    g.add_node(residual(ck, tk, x, a, more, tol), name="check0")
    g.add_node(while_loop({"more?": more_c}, body), name="newton")
    g.add_node(add(ck, tk, x, 0.0), name="touch")
    g.build()
    assert g.backend == "cuda"
    b = g._backend
    assert b.control.conditional_nodes == 1
    for replay in range(3):
        start = rng.uniform(0.5, 3.0, n)
        x.host[:] = start
        g.launch(1)
        xs, iters = start.copy(), 0
        while np.any(np.abs(xs * xs - a_h) > tol):
            xs = 0.5 * (xs + a_h / xs)
            iters += 1
        assert iters > 2
        np.testing.assert_array_equal(x.host, xs)
        assert more.host[0] == 0
    # a condition false from the start runs no iteration (checked before each one)
    x.host[:] = np.sqrt(a_h)
    before = x.host.copy()
    g.launch(2)
    np.testing.assert_allclose(x.host, before, rtol=1e-15)


def test_child_graph_used_twice(fake, ck, tk):
    x = DeviceArray(np.arange(5.0))
    inner = eagle.Graph()
    inner.add_node(add(ck, tk, x, 1.0), name="inc")
    inner.add_node(add(ck, tk, x, 2.0), name="inc2")
    g = eagle.Graph()
    g.add_node(subgraph(inner), name="first")
    g.add_node(add(ck, tk, x, 100.0), name="mid")
    g.add_node(subgraph(inner), name="second")
    g.build()
    assert g._backend.control.child_nodes == 2
    # the picture: each body's stages say how they are captured (one stream, in order)
    text = str(g)
    assert text.count("│ subgraph") == 2 and text.count("│ stage 1 stream  ┌────┴────┐ │") == 2
    g.launch(2)
    np.testing.assert_array_equal(x.host, np.arange(5.0) + 2 * (3 + 100 + 3))


def test_a_stage_of_70_nodes_then_a_subgraph(fake, ck, tk):
    # the subgraph's child-graph node follows every node of the wide stage: 70 dependencies
    # (eagle's shim once took at most 64)
    xs = [DeviceArray(np.zeros(4)) for _ in range(70)]
    inner = eagle.Graph()
    inner.add_node(add(ck, tk, xs[0], 1.0), name="inc")
    g = eagle.Graph()
    g.add_group([add(ck, tk, x, 2.0) for x in xs], names=[f"w{j}" for j in range(70)])
    g.add_node(subgraph(inner), name="sub")
    g.build()
    assert len(g.stages[0]) == 70
    g.launch(2)
    assert xs[0].host.tolist() == [6.0] * 4
    assert all(x.host.tolist() == [4.0] * 4 for x in xs[1:])


def test_a_collective_inside_a_body_is_refused(fake, ck, tk):
    from eagle.record.node import Node, RunsAs

    class FakeAllreduce(Node):   # what a NCCL collective node declares
        kind = "nccl"
        runs_as = RunsAs.OPAQUE
        collective = "allreduce"

        def __init__(self, x):
            super().__init__({"x": x}, {"x": x})
            self.fn = lambda: None

    x = DeviceArray(np.zeros(3))
    flag = DeviceArray(np.ones(1, np.int32))
    then = eagle.Graph()
    then.add_node(FakeAllreduce(x), name="sum")
    # refused when the control node is made, on every backend (eagle/record/control.py):
    # on CUDA a conditional body could not hold an NCCL call anyway
    with pytest.raises(ValueError, match=r"if_else\(\): then holds the collective .*allreduce"):
        if_else({"flag": flag}, then)


DRIVER_SCRIPT = r"""
import os, sys
import numpy as np
sys.path[:0] = [os.environ["DOUBLES"]]
from eagle.cuda import _driver as _cuda, _graph, _stream
assert _cuda.load()
import eagle, eagle.cuda.backend
from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
from eagle.record.control import while_loop, subgraph
from fake_cuda import DeviceArray, kernel
import ctypes
from fake_cuda_build import EmulatedKernels, bind_fake_libcuda
from eagle.cuda.finished import set_kernel_provider
lib = bind_fake_libcuda(ctypes.CDLL(os.environ["EAGLE_LIBCUDA"]))
assert lib.fake_cuda_load_module(os.environ["EMULATED"].encode()) == 0
set_kernel_provider(lambda: EmulatedKernels(lib))
x = DeviceArray(np.zeros(4)); k = DeviceArray(np.zeros(1, np.int64))
node = lambda: cuda_kernel((lib.fake_cuda_kernel(b"add_one"), 2), [x, SIZE], updates={"x": x})
body = eagle.Graph(); body.add_node(node(), name="inc")
g = eagle.Graph()
g.add_node(while_loop({"k": k}, body) if sys.argv[1] == "while" else subgraph(body), name="ctl")
try:
    g.build()
except eagle.CudaError as e:
    print("ERR", e)
else:
    g.launch(1)
    print("OK", x.host.tolist())
"""


_emulated = None


@pytest.mark.parametrize("version, kind, want", [
    ("12030", "while", "ERR"), ("12040", "while", "OK"), ("12020", "subgraph", "ERR"),
    ("12030", "subgraph", "OK")])
def test_driver_version_error_at_build(fake_libcuda_path, cuda_mod, tmp_path_factory, version, kind, want):
    """A driver without conditional nodes (before 12.4) or capture into a graph (before
    12.3): build() raises naming the node, the version needed and the driver's."""
    global _emulated
    if _emulated is None:
        _emulated = build_emulated_module(tmp_path_factory.mktemp("emulated_sub"))
    env = dict(os.environ, FAKE_CUDA_VERSION=version, EAGLE_LIBCUDA=fake_libcuda_path,
               DOUBLES=str(HERE.parent / "doubles"), EMULATED=_emulated)
    out = subprocess.run([sys.executable, "-c", DRIVER_SCRIPT, kind], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith(want), line
    if want == "ERR":
        v = f"{int(version) // 1000}.{int(version) % 1000 // 10}"
        need = "12.4" if kind == "while" else "12.3"
        assert f"ctl" in line and f"CUDA {need} driver" in line and f"this driver is CUDA {v}" in line
    else:
        assert line == "OK [0.0, 0.0, 0.0, 0.0]" if kind == "while" else line == "OK [1.0, 1.0, 1.0, 1.0]"


def test_stand_in_refuses_event_nodes_in_a_conditional_body(fake, cuda_mod):
    """The driver's rule, modelled: a conditional body holds only kernel, memcpy, memset,
    empty, child and conditional nodes. (eagle adds none of the others; this checks the
    stand-in would refuse them at instantiate, through a body a capture filled with an
    event wait across captures, which the stand-in records as a node only outside
    fork/join — so here by the instantiate rule on a hand-built child.)"""
    from fake_cuda import kernel
    top = _graph.Graph()
    node, handle, body = top.add_conditional("if", (), 1)
    # a kernel node in the body is fine
    x = DeviceArray(np.zeros(2))
    body.add_kernel(kernel(fake, "add_one"), 1, 2, [ctypes.c_void_p(x.buffer.ptr), ctypes.c_int64(2)])
    ex = top.instantiate()
    s = _stream.Stream()
    ex.launch(s, 1)
    s.synchronize()
    np.testing.assert_array_equal(x.host, [1.0, 1.0])   # default 1 at launch: the IF ran
    ex.close()
    top.close()
    s.close()


def test_ufunc_random_and_opaque_nodes_inside_bodies(fake, ck, tk, emulating_cupy, cuda_mod):
    """while k: z = normal(); x = x + z (a generated ufunc kernel); y += 1 (an opaque node's
    kernel); k -= 1 — then if flag: w = uniform(); x = x * w. Every iteration of one replay
    draws that replay's numbers (g.replays, as on the CPU); the opaque node's Python ran
    once, at build(), and its captured kernel runs each iteration."""
    import eagle.cuda.backend as backend
    from eagle.graph import normal, opaque, uniform
    from fake_cuda import kernel

    n, key = 9, 0x1234
    x = DeviceArray(np.zeros(n))
    z, w = DeviceArray(np.zeros(n)), DeviceArray(np.zeros(n))
    y = DeviceArray(np.zeros(n))
    k, k_c = scalar(n, np.int64)
    flag = DeviceArray(np.zeros(1, np.int32))
    calls = []

    def bump():
        calls.append(1)
        _stream.launch_kernel(kernel(fake, "add_one"), 3, 4,
                                    [ctypes.c_void_p(y.buffer.ptr), ctypes.c_int64(n)],
                                    stream=backend.capture_stream())

    body, then = eagle.Graph(), eagle.Graph()
    body.add_node(normal({"z": z}, key=key), name="draw")
    body.add_node(emulating_cupy(np.add, x, z, out=x), name="acc")
    body.add_node(opaque(bump, updates={"y": y}), name="bump")
    body.add_node(dec(ck, tk, k), name="dec")
    then.add_node(uniform({"w": w}, key=key + 1), name="draw_w")
    then.add_node(emulating_cupy(np.multiply, x, w, out=x), name="scale")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k_c}, body), name="loop")
    g.add_node(if_else({"flag": flag}, then), name="maybe")
    g.build()
    assert calls == [1] and not y.host.any()   # captured, not run

    def drawn(maker, r, key):
        """replay r's numbers, from a one-node graph on the cpu backend"""
        out = np.zeros(n)
        c = eagle.Graph()
        c.add_node(maker({"o": out}, key=key), name="d")
        c.build()
        c.replays = r
        c.launch(1)
        return out

    xs, ys = np.zeros(n), np.zeros(n)
    for r, (kk, f) in enumerate([(3, 1), (0, 0), (4, 0), (2, 1)]):
        k.host[0], flag.host[0] = kk, f
        g.launch(1)
        zr = drawn(normal, r, key)
        for _ in range(kk):
            xs = xs + zr
            ys += 1
        if f:
            xs = xs * drawn(uniform, r, key + 1)
        np.testing.assert_array_equal(x.host, xs)
        np.testing.assert_array_equal(y.host, ys)
        if kk:
            np.testing.assert_array_equal(z.host, zr)
        assert k.host[0] == 0 and g.replays == r + 1
    assert calls == [1]


# ---- compaction and reorder inside bodies ------------------------------------------------
# The cases of tests/control/test_finished_in_bodies.py (the cpu backend) on the stand-in,
# against the same plain-Python form: a body's compaction partitions [0, the replay's
# size) each time it runs; the next replay starts at the live count of its last run; the
# rest of the replay runs at the replay's size; a replay that does not run it keeps the
# size. The step and condition kernels are tests/cuda/partition_body_kernels.cu (SIZE_PTR:
# they see the device's size, the replay's); `log` records the size each condition
# kernel saw, as the cpu test's sized condition nodes record their (start, stop).


@pytest.fixture(scope="session")
def pk(emulated_kernels, tmp_path_factory):
    """The kernels of partition_body_kernels.cu, loaded into the stand-in."""
    nargs = {"t_absorb": 6, "t_tick": 8, "t_add_where": 4, "t_scale_all": 3, "t_next_key": 3,
             "t_kill_all": 2}
    so = build_emulated_module(tmp_path_factory.mktemp("partition_body_kernels"),
                               sources=[HERE / "partition_body_kernels.cu"], kernels=list(nargs))
    assert emulated_kernels.fake_cuda_load_module(so.encode()) == 0
    return {k: (emulated_kernels.fake_cuda_module_function(k.encode()), n) for k, n in nargs.items()}


CTRL_C_SCRIPT = r"""
import sys, time
import numpy as np
import eagle
from eagle.graph import SIZE, cuda_kernel, subgraph, while_loop
from backends import child_backend
from fake_cuda import DeviceArray
b = child_backend()              # the stand-in, eagle's kernels and backend_kernels.cu loaded
lib = b.fake
mode = sys.argv[1]
builtin = lambda name: lib.fake_cuda_kernel(name.encode())
x, y, s = DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4))
k = DeviceArray(np.zeros(4, np.int64))
slow = lambda us, name: cuda_kernel((builtin("slow_fill"), 4), [s, 0.0, SIZE, us], updates={name: s})
g = eagle.Graph()
if mode in ("replays", "until_done"):   # no loop: many short replays, stopped between two
    g.add_node(slow(2000, "s"), name="slow")
    g.add_node(cuda_kernel((builtin("add_one"), 2), [y, SIZE], updates={"y": y}), name="count")
    if mode == "until_done":   # a compaction whose samples never finish: the device path
        from eagle.graph import compact
        alive = DeviceArray(np.ones(4, bool))
        g.add_node(compact(alive, {"x": x}, ids=DeviceArray(np.arange(4, dtype=np.int64)),
                           count=DeviceArray(np.zeros(1, np.int64))), name="compact")
else:
    body = eagle.Graph()
    body.add_node(cuda_kernel((builtin("add_one"), 2), [x, SIZE], updates={"x": x}), name="inc")
    body.add_node(b.dec(k), name="dec")
    if mode == "twice":    # a slow iteration: the second Ctrl-C lands while eagle drains
        body.add_node(slow(50000, "s"), name="slow")
    if mode == "before":   # one long kernel before the loop (0.9 s): it cannot be stopped
        g.add_node(cuda_kernel((builtin("slow_fill"), 4), [s, 0.0, SIZE, 900000],
                               updates={"s": s, "k": k}), name="slow")   # "k": the loop follows it
    if mode == "subgraph":  # the loop in a subgraph, captured in place
        held = eagle.Graph()
        held.add_node(while_loop({"k": k[:1]}, body), name="spin")
        g.add_node(subgraph(held), name="sub")
    else:
        g.add_node(while_loop({"k": k[:1]}, body), name="spin")
g.build()
k.host[0] = 10 ** 15       # the loop's condition never clears in this launch
print("ready", flush=True)
out = []
try:
    try:
        if mode == "until_done":
            g.launch_until_done(10 ** 6)
        else:
            g.launch(10 ** 6 if mode == "replays" else 1)
        out.append("finished")
    except KeyboardInterrupt as e:
        out.append(f"interrupted {time.monotonic()!r} " + " ".join(getattr(e, "__notes__", [])))
        time.sleep(0.5)    # a second Ctrl-C lands here, or already in the drain
except KeyboardInterrupt:
    out.append("second")
print("\n".join(out), flush=True)
assert g._backend.state.stop is None or g._backend.state.stop.get() == 0 or g._backend._stop_pending
if mode in ("replays", "until_done"):
    issued = g._backend.last_failure[1] + 1   # the replay interrupted, counted from 0
    ran = int(y.host[0])
    before = ran
    g.launch(3)
    print("after", issued, ran, int(y.host[0]) - before)
else:
    ran = int(x.host[0])
    k.host[0], x.host[:] = 3, 0
    g.launch(1)
    print("after", ran, x.host.tolist(), int(k.host[0]))
"""

@pytest.fixture
def standin(fake, standin_backend_kernels):
    kernels, modules = standin_backend_kernels
    return StandinBackend(fake, kernels, None, modules)


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
@pytest.mark.parametrize("mode", ["twice", "before", "replays", "until_done", "subgraph"])
def test_ctrl_c_stops_a_long_launch(standin, mode):
    """SIGINT during g.launch: a while_loop whose condition never clears, with a second
    Ctrl-C while eagle drains ("twice"; one Ctrl-C is tests/control's scenario on every
    backend) or inside a subgraph ("subgraph"), a slow kernel before the loop ("before":
    it cannot be stopped, the launch raises when it ends and the loop never starts), and
    a launch(10**6) of short replays ("replays": stopped between two). launch raises
    KeyboardInterrupt naming the loop (and its iteration), in a subprocess bounded by a
    timeout; afterwards the graph launches correctly (a 3-iteration loop runs 3, or 3
    replays run 3)."""
    res = interrupt(["-c", CTRL_C_SCRIPT, mode], env=child_env(**standin.child_env()),
                    after_s=0.2 if mode == "before" else 0.5, signals=2 if mode == "twice" else 1)
    sent, out, err = res.sent, res.out, res.err
    assert res.returncode == 0, err
    lines = res.lines
    first = lines[0].split(" ", 2)
    assert first[0] == "interrupted" and len(first) == 3, out + err
    took = float(first[1]) - sent
    note = first[2]
    if mode == "twice" and "a second Ctrl-C" in note:   # it landed while eagle drained
        assert lines[1] != "second"
    else:
        assert "Ctrl-C interrupted" in note and "graph can be launched again" in note, note
    after = lines[-1].split(" ", 1)[1]
    if mode in ("replays", "until_done"):
        issued, ran, again = map(int, after.split())
        assert 0 < ran == issued < 10 ** 6 and again == 3   # stopped between replays, all drained
        call = "launch_until_done(1000000)" if mode == "until_done" else "launch(1000000)"
        # both notes count what ran (launch_until_done's device path counts on the device)
        assert f"interrupted {call} on cuda after {ran} replays" in note, note
        assert f"eagle: {call} interrupted in replay {ran - 1}" in note, note   # counted from 0
    else:
        ran, xs, k_left = after.split(" ", 1)[0], after.split(" ", 1)[1].rsplit(" ", 1)[0], after.rsplit(" ", 1)[1]
        assert xs == "[3.0, 3.0, 3.0, 3.0]" and k_left == "0", after   # the loop runs again
        if mode != "twice":   # the only replay of launch(1), counted from 0 (as on the cpu)
            assert "eagle: launch(1) interrupted in replay 0" in note, note
        if mode == "before":
            assert "while_loop node 'spin' before its first iteration" in note, note
            assert int(ran) == 0 and took >= 0.3   # raised once the slow kernel ended
        elif "a second Ctrl-C" not in note:
            spin = ("while_loop node 'spin' in the graph of 'sub' after "
                    if mode == "subgraph" else "while_loop node 'spin' after ")
            assert spin in note, note
            it = int(note.split(spin)[1].split()[0])
            assert int(ran) == it > 0, (ran, note)   # the iteration the note names is the one it stopped at
    assert took < scaled(20), took   # a hang bound (stretched by the load), not a timing measurement


@pytest.mark.parametrize("where", ["while", "nested", "then", "subgraph", "in place", "in place, nested"])
def test_failed_instantiate_names_the_body_node(fake, ck, tk, where):
    """The driver names the failing node of cuGraphInstantiateWithParams also when it sits
    in a conditional body or child graph: build() names that body node and the control
    nodes around it (and sets node_index / node_name to the top-level node holding it)."""
    x = DeviceArray(np.ones(4))
    k, k_c = scalar(4, np.int64)
    flag = DeviceArray(np.ones(1, np.int32))
    body = eagle.Graph()
    body.add_node(add(ck, tk, x, 1.0), name="step")
    body.add_node(newton(ck, tk, x, x, None, None), name="halve")   # t_newton: fails below
    body.add_node(dec(ck, tk, k), name="dec")
    g = eagle.Graph()
    g.add_node(add(ck, tk, x, 1.0), name="first")
    if where == "while":
        g.add_node(while_loop({"k": k_c}, body), name="newton")
        want, top = "node 'halve' in the body of while_loop node 'newton'", "newton"
    elif where == "nested":
        outer = eagle.Graph()
        outer.add_node(while_loop({"k": k_c}, body), name="inner")
        g.add_node(if_else({"flag": flag}, outer), name="maybe")
        want, top = ("node 'halve' in the body of while_loop node 'inner' in the then of if_else "
                     "node 'maybe'", "maybe")
    elif where == "then":
        g.add_node(if_else({"flag": flag}, body), name="maybe")
        want, top = "node 'halve' in the then of if_else node 'maybe'", "maybe"
    elif where == "subgraph":
        g.add_node(subgraph(body), name="sub")
        want, top = "node 'halve' in the graph of subgraph node 'sub'", "sub"
    elif where == "in place":   # a subgraph holding a loop: its nodes sit in the top-level graph
        spin = eagle.Graph()
        spin.add_node(dec(ck, tk, k), name="dec")
        held = eagle.Graph()
        held.add_node(while_loop({"k": k_c}, spin), name="loop")
        held.add_node(add(ck, tk, x, 1.0), name="step")
        held.add_node(newton(ck, tk, x, x, None, None), name="halve")
        g.add_node(subgraph(held), name="sub")
        want, top = "node 'halve' in the graph of subgraph node 'sub'", "sub"
    else:                       # a loop in a subgraph captured in place inside a branch
        held = eagle.Graph()
        held.add_node(while_loop({"k": k_c}, body), name="inner")
        then = eagle.Graph()
        then.add_node(subgraph(held), name="sub")
        g.add_node(if_else({"flag": flag}, then), name="maybe")
        want, top = ("node 'halve' in the body of while_loop node 'inner' in the graph of subgraph "
                     "node 'sub' in the then of if_else node 'maybe'", "maybe")
    fake.fake_cuda_fail_instantiate_at_kernel(tk["t_newton"][0])
    with pytest.raises(eagle.CudaError) as info:
        g.build()
    e = info.value
    assert want in str(e), str(e)
    assert (e.node_index, e.node_name) == (1, top)
    assert any(f"'{top}'" in n for n in e.__notes__)
    assert g.backend is None
    fake.fake_cuda_fail_instantiate_at_kernel(None)
    g.build()   # nothing left behind: it builds once the driver takes the node
    g.launch(1)


class Model:
    """The plain-Python form of a compaction node (as in tests/control/test_finished_in_bodies.py):
    the stable partition of [0, L) with its policies, counted per run (``every``)."""

    def __init__(self, state, every=1, min_dead_fraction=0.0):
        self.state, self.every, self.f = state, every, min_dead_fraction
        self.runs = 0
        self.count = 0

    def run(self, L):
        """Returns the next replay's size if this run were the replay's last."""
        self.runs += 1
        alive = self.state["alive"][:L].astype(bool)
        live = int(alive.sum()) if L > 0 else 0
        acts = (self.runs % self.every == 0 and L > 0 and live != L
                and (live == 0 or L - live >= self.f * L))
        if acts:
            order = np.argsort(~alive, kind="stable")
            for a in self.state.values():
                a[:L] = a[:L][order]
        self.count = live
        return live if acts or live == 0 else L


def tick(pk, it, more, limit, log, *, alive=None, odd=None, reset=0):
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    arrays = {"it": it, "more": more, "log": log, **({"odd": odd} if odd is not None else {})}
    return cuda_kernel(pk["t_tick"], [it, more, odd if odd is not None else 0, int(limit),
                                      alive if alive is not None else 0, log, int(reset), SIZE_PTR],
                       reads={"alive": alive} if alive is not None else None, updates=arrays, block=1)


def sizes_seen(log):
    return log.host[1:1 + log.host[0]].tolist()


def body_particles(n, seed):
    rng = np.random.default_rng(seed)
    return {"alive": DeviceArray(np.ones(n, bool)), "x": DeviceArray(rng.standard_normal(n)),
            "age": DeviceArray(np.zeros(n, np.int64)), "ids": DeviceArray(np.arange(n, dtype=np.int64))}


def host_copies(s):
    return {k: v.host.copy() for k, v in s.items()}


def assert_same_as(s, m):
    for k in m:
        np.testing.assert_array_equal(s[k].host, m[k], err_msg=k)


@pytest.mark.parametrize("policy", [{"min_dead_fraction": 0.0}, {"min_dead_fraction": 0.25},
                                    {"every": 2, "min_dead_fraction": 0.0}])
@pytest.mark.parametrize("path", ["device", "host"])
def test_absorbing_samples_in_a_while_loop_compacted_in_its_body(fake, pk, policy, path):
    """reset: it = 0, more = any live; while more: (age += 1, x += 0.5, the too old
    finish); compact; it += 1, more = it < 3 and any live — per replay, then to the end
    with launch_until_done (a WHILE node whose body holds the loop's WHILE node)."""
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import compact
    n, iterations = 300, 3
    life_h = np.random.default_rng(5).integers(1, 40, n)
    s = body_particles(n, 1)
    m = host_copies(s)
    life = DeviceArray(life_h)
    it, more, log = (DeviceArray(np.zeros(n, np.int64)), DeviceArray(np.zeros(n, bool)),
                     DeviceArray(np.zeros(n, np.int64)))
    count = DeviceArray(np.zeros(1, np.int64))
    body = eagle.Graph()
    body.add_node(cuda_kernel(pk["t_absorb"], [s["alive"], s["age"], s["x"], s["ids"], life, SIZE_PTR],
                              reads={"ids": s["ids"], "life": life},
                              updates={k: s[k] for k in ("alive", "age", "x")}, block=32), "absorb")
    node = compact(s["alive"], {"x": s["x"], "age": s["age"]}, ids=s["ids"], count=count, **policy)
    body.add_node(node, "compact")
    body.add_node(tick(pk, it, more, iterations, log, alive=s["alive"]), "tick")
    g = eagle.Graph()
    g.add_node(tick(pk, it, more, iterations, log, alive=s["alive"], reset=1), "reset")
    g.add_node(while_loop({"more": more[:1]}, body, max_iterations=iterations + 1), "loop")
    g.build()
    assert g.backend == "cuda"
    model = Model({k: m[k] for k in ("alive", "x", "age", "ids")}, **policy)
    L, seen = n, []

    def replays(k):
        nonlocal L
        for _ in range(k):
            nxt = L
            i = 0
            seen.append(L)
            while i < iterations and m["alive"][:L].any():
                live = m["alive"][:L].copy()
                m["age"][:L][live] += 1
                m["x"][:L][live] += 0.5
                m["alive"][:L] &= m["age"][:L] < life_h[m["ids"][:L]]
                nxt = model.run(L)
                i += 1
                seen.append(L)
            L = nxt

    for k in (1, 2, 4):
        g.launch(k)
        replays(k)
        assert_same_as(s, m)
        assert g.logical_size == L
        assert int(count.host[0]) == model.count
    assert L < n
    # the loop's later iterations and the outer graph ran at the replay's size
    assert sizes_seen(log) == seen
    assert not s["alive"].host[L:].any()
    log.host[0] = 0
    g._backend.until_done_mode = path   # asked for the WHILE node, or replay by replay
    calls = fake.fake_cuda_counter(b"cuGraphAddChildGraphNode")
    done = g.launch_until_done(1000)
    # the WHILE node would hold the replay, a graph with conditional nodes, as a child
    # graph, which CUDA refuses: the host loop runs, decided up front (no driver call fails)
    assert (g._backend.until_done_fallback is None) == (path == "host")
    if path == "device":
        assert "conditional" in g._backend.until_done_fallback
        assert g._backend.until_done_path() == "host"
        assert fake.fake_cuda_counter(b"cuGraphAddChildGraphNode") == calls
    r = 7 + done
    assert g.logical_size == 0 and not s["alive"].host.any()
    back = {k: np.empty_like(s[k].host) for k in ("age", "x")}
    for k in back:
        back[k][s["ids"].host] = s[k].host
    np.testing.assert_array_equal(back["age"], np.minimum(life_h, 3 * r))
    np.testing.assert_allclose(back["x"], np.random.default_rng(1).standard_normal(n) + 0.5 * np.minimum(life_h, 3 * r),
                               rtol=0, atol=1e-12)


def test_a_compaction_in_a_branch_taken_on_some_replays(fake, pk):
    """Replays that take the other branch keep the logical size, also one retuned by
    set_logical_size; a retune back up reaches the partition kernels inside the body
    (their grids, patched in the body graph)."""
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import compact
    n = 2000
    s = body_particles(n, 2)
    alive, x = s["alive"], s["x"]
    alive.host[::3] = False
    m = host_copies(s)
    when, when_c = scalar(n, np.int32)
    then, other = eagle.Graph(), eagle.Graph()
    then.add_node(compact(alive, {"x": x}, ids=s["ids"], count=DeviceArray(np.zeros(1, np.int64))), "compact")
    other.add_node(cuda_kernel(pk["t_scale_all"], [x, 2.0, SIZE_PTR], updates={"x": x}, block=64), "double")
    g = eagle.Graph()
    g.add_node(cuda_kernel(pk["t_add_where"], [x, alive, 1.0, SIZE_PTR], reads={"alive": alive},
                           updates={"x": x}, block=64), "step")
    g.add_node(if_else({"when": when_c}, then, other), "maybe")
    g.build()
    model = Model({k: m[k] for k in ("alive", "x", "ids")})
    L = n

    def replay(take):
        nonlocal L
        when.host[0] = take
        live = m["alive"][:L].copy()
        m["x"][:L][live] += 1.0
        if take:
            L = model.run(L)
        else:
            m["x"][:L] *= 2.0
        g.launch(1)
        assert_same_as(s, m)
        assert g.logical_size == L

    for take in (False, True, False, False):
        replay(take)
    assert L == n - len(range(0, n, 3))
    g.set_logical_size(100)       # retune: the untaken branch keeps it
    L = 100
    replay(False)
    m["alive"][50:100] = alive.host[50:100] = False
    replay(True)
    assert L == 50
    replay(False)
    g.set_logical_size(n)         # back to all of them (the finished are behind)
    L = n
    replay(False)
    alive.host[1500:] = m["alive"][1500:] = False
    replay(True)                  # the copy-back covers the samples up to n again
    assert L == int(m["alive"].sum()) and L < 1500


def test_a_reorder_in_a_body_moves_the_arrays_it_names(fake, pk):
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import reorder
    n, size = 1500, 1000
    rng = np.random.default_rng(4)
    key, x = DeviceArray(rng.integers(0, 4, n)), DeviceArray(rng.standard_normal(n))
    tag, ids = DeviceArray(np.arange(n) * 3), DeviceArray(np.arange(n, dtype=np.int64))
    m = {"key": key.host.copy(), "x": x.host.copy(), "tag": tag.host.copy(), "ids": ids.host.copy()}
    it, more, log = (DeviceArray(np.zeros(n, np.int64)), DeviceArray(np.zeros(n, bool)),
                     DeviceArray(np.zeros(n, np.int64)))
    body = eagle.Graph()
    body.add_node(cuda_kernel(pk["t_add_where"], [x, 0, 1.0, SIZE_PTR], updates={"x": x}, block=64), "inc")
    body.add_node(reorder(key, {"x": x, "tag": tag}, n_keys=4, ids=ids), "sort")
    # a new key per sample after the sort, so the next iteration sorts again
    body.add_node(cuda_kernel(pk["t_next_key"], [key, 4, SIZE_PTR], updates={"key": key}, block=64), "bump")
    body.add_node(tick(pk, it, more, 3, log), "tick")
    g = eagle.Graph()
    g.add_node(tick(pk, it, more, 3, log, reset=1), "reset")
    g.add_node(while_loop({"more": more[:1]}, body), "loop")
    g.build()
    g.set_logical_size(size)      # the samples past it stay where they are
    for _ in range(2):
        g.launch(1)
        for _ in range(3):
            m["x"][:size] += 1.0
            order = np.argsort(m["key"][:size], kind="stable")
            for a in m.values():
                a[:size] = a[:size][order]
            m["key"][:size] = (m["key"][:size] + 1) % 4
    for k, a in m.items():
        np.testing.assert_array_equal({"key": key, "x": x, "tag": tag, "ids": ids}[k].host, a, err_msg=k)
    assert g.logical_size == size
    assert sizes_seen(log) == [size] * 8   # reset and three ticks per replay
    # a key outside [0, n_keys) met inside the body: the samples stay, launch raises
    # on that run (the next runs see it wrapped into range by `bump`, and sort)
    key.host[3] = m["key"][3] = 9
    with pytest.raises(ValueError, match="reorder: a key outside"):
        g.launch(1)
    for _ in range(3):
        m["x"][:size] += 1.0
        if m["key"][:size].max() < 4:
            order = np.argsort(m["key"][:size], kind="stable")
            for a in m.values():
                a[:size] = a[:size][order]
        m["key"][:size] = (m["key"][:size] + 1) % 4
    for k, a in m.items():
        np.testing.assert_array_equal({"key": key, "x": x, "tag": tag, "ids": ids}[k].host, a, err_msg=k)
    g.launch(1)                   # the flag was cleared


def test_compaction_to_zero_live_samples_inside_a_loop(fake, pk):
    """Every sample finishes in the first iteration: the loop still runs until its own
    condition ends it (at the replay's size), the next replay runs at 0, and
    launch_until_done stops; a retune back up finds 0 live again."""
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import compact
    n = 777
    s = body_particles(n, 3)
    alive, x, ids = s["alive"], s["x"], s["ids"]
    it, more, log = (DeviceArray(np.zeros(n, np.int64)), DeviceArray(np.zeros(n, bool)),
                     DeviceArray(np.zeros(n, np.int64)))
    body = eagle.Graph()
    body.add_node(cuda_kernel(pk["t_kill_all"], [alive, SIZE_PTR], updates={"alive": alive}, block=64), "die")
    body.add_node(compact(alive, {"x": x}, ids=ids, count=DeviceArray(np.zeros(1, np.int64))), "compact")
    body.add_node(tick(pk, it, more, 4, log), "count")
    g = eagle.Graph()
    g.add_node(tick(pk, it, more, 4, log, reset=1), "reset")
    g.add_node(while_loop({"more": more[:1]}, body, max_iterations=10), "loop")
    g.build()
    g.launch(1)
    assert sizes_seen(log) == [n] * 5 and g.logical_size == 0 and not alive.host.any()
    g.launch(2)
    assert sizes_seen(log)[5:] == [0] * 10 and g.logical_size == 0
    assert g.launch_until_done(5) == 0
    g.set_logical_size(10)
    assert g.launch_until_done(5) == 1
    assert sizes_seen(log)[-5:] == [10] * 5 and g.logical_size == 0


def test_nested_bodies_and_a_subgraph_used_twice_that_compacts(fake, pk):
    """while -> if_else -> subgraph(compacting body), the same subgraph also at top level:
    one compaction node captured three times (one run counter, one set of buffers), run
    several times a replay; the next size is its last run's."""
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import compact
    n = 500
    life_h = np.random.default_rng(8).integers(1, 30, n)
    s = body_particles(n, 4)
    m = host_copies(s)
    life = DeviceArray(life_h)
    it, more, odd, log = (DeviceArray(np.zeros(n, np.int64)), DeviceArray(np.zeros(n, bool)),
                          DeviceArray(np.zeros(n, bool)), DeviceArray(np.zeros(n, np.int64)))
    step = eagle.Graph()
    step.add_node(cuda_kernel(pk["t_absorb"], [s["alive"], s["age"], s["x"], s["ids"], life, SIZE_PTR],
                              reads={"ids": s["ids"], "life": life},
                              updates={k: s[k] for k in ("alive", "age", "x")}, block=32), "absorb")
    step.add_node(compact(s["alive"], {"x": s["x"], "age": s["age"]}, ids=s["ids"],
                          count=DeviceArray(np.zeros(1, np.int64)), every=2,
                          min_dead_fraction=0.05), "compact")
    inner = eagle.Graph()
    inner.add_node(subgraph(step), "step")
    branch = eagle.Graph()
    branch.add_node(tick(pk, it, more, 4, log, odd=odd), "tick")
    branch.add_node(if_else({"odd": odd[:1]}, inner), "maybe")
    g = eagle.Graph()
    g.add_node(tick(pk, it, more, 4, log, odd=odd, reset=1), "reset")
    g.add_node(while_loop({"more": more[:1]}, branch), "loop")
    g.add_node(subgraph(step), "again")
    g.build()
    model = Model({k: m[k] for k in ("alive", "x", "age", "ids")}, every=2, min_dead_fraction=0.05)

    def run_step(L):
        live = m["alive"][:L].copy()
        m["age"][:L][live] += 1
        m["x"][:L][live] += 0.5
        m["alive"][:L] &= m["age"][:L] < life_h[m["ids"][:L]]
        return model.run(L)

    L = n
    for k in (1, 1, 3, 2):
        g.launch(k)
        for _ in range(k):
            for i in range(1, 5):     # tick: it = 1..4, odd on 1 and 3
                if i % 2 == 1:
                    run_step(L)
            L = run_step(L)           # "again": the replay's last run
        assert_same_as(s, m)
        assert g.logical_size == L
    assert L < n


def test_a_compaction_in_a_branch_not_taken_keeps_every_size(fake, pk):
    """Replays that skip the body keep the size: the build's, a retuned one (0 too), one a
    taken replay set; launch_until_done then runs every replay allowed."""
    from eagle.graph import compact
    n = 50
    s = body_particles(n, 1)
    s["alive"].host[::2] = False
    flag = DeviceArray(np.zeros(1, np.int32))
    body = eagle.Graph()
    body.add_node(compact(s["alive"], {"x": s["x"]}, ids=s["ids"], count=DeviceArray(np.zeros(1, np.int64))), "c")
    g = eagle.Graph()
    g.add_node(if_else({"f": flag}, body), "maybe")
    g.build()
    g.launch(5)
    assert g.logical_size == n
    assert g.launch_until_done(7) == 7
    g.set_logical_size(0)
    g.launch(2)
    assert g.logical_size == 0
    g.set_logical_size(n)
    flag.host[0] = 1
    g.launch(1)
    assert g.logical_size == 25
    assert (s["ids"].host[:25] == np.arange(1, 50, 2)).all()
    flag.host[0] = 0
    g.launch(3)
    assert g.logical_size == 25
    g.set_logical_size(0)
    flag.host[0] = 1
    g.launch(1)
    assert g.logical_size == 0


def test_the_same_compaction_node_at_top_level_and_in_a_body(fake, pk):
    """One node, captured twice in one replay: one run counter (every=2 counts both
    runs), one set of buffers; the next size is the body's run, the replay's last."""
    from eagle.graph import compact
    n = 64
    s = body_particles(n, 1)
    c = compact(s["alive"], {"x": s["x"]}, ids=s["ids"], count=DeviceArray(np.zeros(1, np.int64)), every=2, min_dead_fraction=0.0)
    body = eagle.Graph()
    body.add_node(c, "c")
    g = eagle.Graph()
    g.add_node(c, "top")
    g.add_node(subgraph(body), "sub")
    g.build()
    m = host_copies(s)
    model = Model({k: m[k] for k in ("alive", "x", "ids")}, every=2)
    L = n
    for r in range(4):
        s["alive"].host[r * 3] = m["alive"][r * 3] = False
        g.launch(1)
        model.run(L); L = model.run(L)
        assert_same_as(s, m)
        assert g.logical_size == L


# ---- a child graph must not hold conditional nodes -----------------------------------
# CUDA refuses a child-graph node whose graph holds a conditional node at any depth
# (CUDA_CHILD_GRAPH_NODE_PARAMS, cuGraphAddChildGraphNode); the stand-in models it. A
# subgraph whose body holds a while_loop / if_else is captured in place instead
# (eagle/cuda/control.py), and launch_until_done, whose WHILE node would hold the replay
# as a child graph, replays one at a time for a graph with conditional nodes.


def test_stand_in_refuses_a_child_graph_holding_a_conditional_node(fake, cuda_mod):
    """cuGraphAddChildGraphNode with a graph holding a conditional node (also one level
    down, in a child of a conditional body), and a conditional node added into a child
    node's own graph (cuGraphChildGraphNodeGetGraph), are refused; a conditional body may
    hold a child graph and conditional nodes."""
    holder = _graph.Graph()
    holder.add_conditional("while", (), 0)
    deep = _graph.Graph()
    _n, _h, body = deep.add_conditional("if", (), 1)
    body.add_conditional("if", (), 0)           # allowed: a conditional inside a body
    plain = _graph.Graph()
    body.add_child(plain)                        # allowed: a child graph inside a body
    top = _graph.Graph()
    for g in (holder, deep):
        with pytest.raises(eagle.CudaError, match="cuGraphAddChildGraphNode: CUDA_ERROR_INVALID_VALUE"):
            top.add_child(g)
    child = top.add_child(plain)                 # a child graph without conditionals: fine
    with pytest.raises(eagle.CudaError, match="CUDA_ERROR_INVALID_VALUE"):
        top.child_graph(child).add_conditional("if", (), 1)
    ex = top.instantiate()
    ex.close()
    for g in (top, plain, deep, holder):
        g.close()


def _counting_loop(ck, tk, x, k):
    """while k: x += 1; k -= 1"""
    body = eagle.Graph()
    body.add_node(add(ck, tk, x, 1.0), name="inc")
    body.add_node(dec(ck, tk, k), name="dec")
    return body


def test_a_subgraph_holding_a_while_loop_used_twice(fake, ck, tk):
    """sub = (check; while more: newton step; check; iterations += 1), used twice with
    x += 3 between: per replay, against the same Python; the body is captured in place
    (no child-graph node holds the WHILE node), which the stand-in would refuse."""
    rng = np.random.default_rng(3)
    n, tol = 8, 1e-10
    a_h = rng.uniform(1.0, 30.0, n)
    x, a = DeviceArray(np.ones(n)), DeviceArray(a_h)
    more, more_c = scalar(n, np.int32)
    count = DeviceArray(np.zeros(n))
    step = eagle.Graph()
    step.add_node(newton(ck, tk, x, a, more, tol), name="step")
    step.add_node(residual(ck, tk, x, a, more, tol), name="check")
    step.add_node(add(ck, tk, count, 1.0), name="count")
    sub = eagle.Graph()
    sub.add_node(residual(ck, tk, x, a, more, tol), name="check0")
    sub.add_node(while_loop({"more?": more_c}, step), name="newton")
    g = eagle.Graph()
    g.add_node(subgraph(sub), name="first")
    g.add_node(add(ck, tk, x, 3.0), name="kick")
    g.add_node(subgraph(sub), name="second")
    g.build()
    b = g._backend
    assert (b.control.in_place, b.control.child_nodes, b.control.conditional_nodes) == (2, 0, 2)
    assert fake.fake_cuda_counter(b"cuGraphAddChildGraphNode") == 0
    want_count = 0.0
    for replay in range(3):
        start = rng.uniform(0.5, 3.0, n)
        x.host[:] = start
        g.launch(1)
        xs = start.copy()
        for use in range(2):
            if use:
                xs += 3.0
            while np.any(np.abs(xs * xs - a_h) > tol):
                xs = 0.5 * (xs + a_h / xs)
                want_count += 1
        np.testing.assert_array_equal(x.host, xs)
        np.testing.assert_array_equal(count.host, np.full(n, want_count))
    assert want_count > 6


def test_nesting_subgraph_if_else_while(fake, ck, tk):
    """subgraph(if flag: (while k: x += 1; k -= 1) else: x -= 100; y += 1) next to a
    subgraph without conditionals (still a child-graph node), inside a while loop too;
    set_logical_size reaches the kernels captured in place (top-level graph: per-node
    update; inside the loop's body: the whole-graph update)."""
    n = 6
    x, y = DeviceArray(np.zeros(n)), DeviceArray(np.zeros(n))
    k, k_c = scalar(n, np.int64)
    j, j_c = scalar(n, np.int64)
    flag = DeviceArray(np.ones(1, np.int32))
    other = eagle.Graph()
    other.add_node(add(ck, tk, x, -100.0), name="minus")
    then = eagle.Graph()
    then.add_node(while_loop({"k?": k_c}, _counting_loop(ck, tk, x, k)), name="count")
    sub = eagle.Graph()
    sub.add_node(if_else({"flag": flag}, then, other), name="choose")
    sub.add_node(add(ck, tk, y, 1.0), name="tally")
    plain = eagle.Graph()
    plain.add_node(add(ck, tk, y, 10.0), name="ten")
    outer = eagle.Graph()
    outer.add_node(subgraph(sub), name="inner_sub")
    outer.add_node(dec(ck, tk, j), name="jdec")
    g = eagle.Graph()
    g.add_node(subgraph(sub), name="sub")
    g.add_node(subgraph(plain), name="plain")
    g.add_node(while_loop({"j?": j_c}, outer), name="outer")
    g.build()
    b = g._backend
    assert (b.control.in_place, b.control.child_nodes) == (2, 1)
    assert b.sized_kernels == 10   # 4 per capture of sub, ten, jdec

    def python(L, kk, f, jj):
        """x, y as Python's control flow leaves them (the first L samples of each kernel)."""
        for _ in range(1 + jj):           # sub at top level, then once per outer iteration
            if f:
                want_x[:L] += kk          # the loop counts k down to 0 ...
                kk = 0                    # ... so a later use runs no iteration
            else:
                want_x[:L] -= 100.0
            want_y[:L] += 1.0
            if _ == 0:
                want_y[:L] += 10.0

    want_x, want_y = np.zeros(n), np.zeros(n)
    for L, kk, f, jj in [(n, 3, 1, 2), (n, 0, 1, 1), (n, 2, 0, 3), (2, 4, 1, 2), (4, 1, 0, 0), (n, 5, 1, 1)]:
        if L != g.logical_size:
            g.set_logical_size(L)
        k.host[0], flag.host[0], j.host[0] = kk, f, jj
        g.launch(1)
        python(L, kk, f, jj)
        np.testing.assert_array_equal(x.host, want_x)
        np.testing.assert_array_equal(y.host, want_y)
        assert k.host[0] == (0 if f else kk) and j.host[0] == 0


def test_launch_until_done_of_a_graph_with_control_nodes(fake, pk):
    """launch_until_done asked for the device path: a graph whose subgraph holds a while
    loop around a compaction replays one at a time (until_done_fallback says why, no
    driver call fails); one whose subgraph holds no conditional keeps the WHILE node."""
    from eagle.cuda.kernel_nodes import SIZE_PTR, cuda_kernel
    from eagle.graph import compact
    n = 120
    life_h = np.random.default_rng(2).integers(1, 25, n)
    results = {}
    for looped in (True, False):
        s = body_particles(n, 6)
        life = DeviceArray(life_h)
        it, more, log = (DeviceArray(np.zeros(n, np.int64)), DeviceArray(np.zeros(n, bool)),
                         DeviceArray(np.zeros(n, np.int64)))
        step = eagle.Graph()
        step.add_node(cuda_kernel(pk["t_absorb"], [s["alive"], s["age"], s["x"], s["ids"], life, SIZE_PTR],
                                  reads={"ids": s["ids"], "life": life},
                                  updates={k: s[k] for k in ("alive", "age", "x")}, block=32), "absorb")
        step.add_node(compact(s["alive"], {"x": s["x"], "age": s["age"]}, ids=s["ids"],
                              count=DeviceArray(np.zeros(1, np.int64))), "compact")
        sub = eagle.Graph()
        if looped:   # two steps per replay, as a loop: it = 0; while it < 2: step; it += 1
            step.add_node(tick(pk, it, more, 2, log, alive=s["alive"]), "tick")
            sub.add_node(tick(pk, it, more, 2, log, alive=s["alive"], reset=1), "reset")
            sub.add_node(while_loop({"more": more[:1]}, step), "loop")
        else:        # two steps per replay, written out
            sub.add_node(subgraph(step), "one")
            sub.add_node(subgraph(step), "two")
        g = eagle.Graph()
        g.add_node(subgraph(sub), "sub")
        g.build()
        b = g._backend
        b.until_done_mode = "device"
        calls = fake.fake_cuda_counter(b"cuGraphAddChildGraphNode")
        done = g.launch_until_done(1000)
        if looped:
            assert b.control.in_place == 1 and b.control.conditional_nodes == 1
            assert "conditional" in b.until_done_fallback and b.until_done_path() == "host"
            assert fake.fake_cuda_counter(b"cuGraphAddChildGraphNode") == calls
            assert b.until_done.while_graph is None
        else:
            assert b.control.in_place == 0 and b.control.child_nodes == 3
            assert b.until_done_fallback is None and b.until_done.while_graph is not None
        assert g.logical_size == 0 and not s["alive"].host.any()
        back = np.empty(n, np.int64)
        back[s["ids"].host] = s["age"].host
        results[looped] = (done, back)
    # the same work either way: every sample aged to its life, in the same replays
    assert results[True][0] == results[False][0] == int(np.ceil(life_h.max() / 2))
    np.testing.assert_array_equal(results[True][1], life_h)
    np.testing.assert_array_equal(results[False][1], life_h)


SETTLE_SCRIPT = r"""
import numpy as np
import eagle
from eagle.graph import SIZE, cuda_kernel, while_loop
from backends import child_backend
from fake_cuda import DeviceArray
b = child_backend()
lib = b.fake
x, k = DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4, np.int64))
body = eagle.Graph()
body.add_node(cuda_kernel((lib.fake_cuda_kernel(b"add_one"), 2), [x, SIZE], updates={"x": x}), name="inc")
body.add_node(b.dec(k), name="dec")
g = eagle.Graph()
g.add_node(while_loop({"k": k[:1]}, body), name="spin")
g.build()
k.host[0] = 10 ** 15                               # the first replay's loop never ends
lib.fake_cuda_fail_next(b"cuGraphLaunch", 2, 2)    # the second replay's launch fails
print("ready", flush=True)
try:
    g.launch(2)
    print("finished")
except KeyboardInterrupt as e:
    what = "CudaError" if isinstance(e.__context__, eagle.CudaError) else type(e.__context__).__name__
    print("interrupted", what, " ".join(getattr(e, "__notes__", [])), flush=True)
k.host[0] = 3
x.host[:] = 0
g.launch(1)
print("again", x.host[0])
"""


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
def test_ctrl_c_stops_the_drain_after_a_failed_launch(standin):
    """A launch fails (here the second replay's cuGraphLaunch) while the first replay's loop
    never ends: eagle drains its stream before raising. Ctrl-C during that drain sets the stop
    flag, which ends the loop (an uninterruptible cuStreamSynchronize waited forever); the
    graph launches correctly afterwards."""
    res = interrupt(["-c", SETTLE_SCRIPT], env=child_env(**standin.child_env()), after_s=0.5, timeout_s=30)
    assert res.returncode == 0, res.err
    lines = res.lines
    assert lines[0].startswith("interrupted CudaError "), res.out + res.err
    assert "the stop flag ended while_loop node 'spin'" in lines[0], lines[0]
    assert lines[-1] == "again 3.0", res.out


def test_a_library_serial_recapture_starts_the_control_state_afresh(fake, ck, tk, cuda_mod):
    """Two side-by-side nodes calling a cuBLAS-like kernel make build() capture again, in
    order: the control nodes' capture state (body node owners, node counts) is the second
    capture's only, so a failed instantiate names the body node of the graph it built."""
    import eagle.cuda.backend as backend_mod
    from fake_cuda import kernel

    x, a, b = DeviceArray(np.ones(4)), DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4))
    k, k_c = scalar(4, np.int64)

    def gemm(arr):
        def run():
            _stream.launch_kernel(kernel(fake, "sgemm_like"), 1, 4,
                                   [ctypes.c_uint64(arr.__cuda_array_interface__["data"][0]),
                                    ctypes.c_int64(4)], stream=backend_mod.capture_stream())
        return run

    body = eagle.Graph()
    body.add_node(add(ck, tk, x, 1.0), name="step")
    body.add_node(newton(ck, tk, x, x, None, None), name="halve")
    body.add_node(dec(ck, tk, k), name="dec")

    def graph():
        g = eagle.Graph()
        g.add_group([eagle.graph.opaque(gemm(a), writes={"a": a}), eagle.graph.opaque(gemm(b), writes={"b": b})],
                    names=["ga", "gb"])
        g.add_node(while_loop({"k": k_c}, body), name="newton")
        return g

    g = graph()
    g.build()
    assert g._backend.library_serial_stages   # captured twice
    assert (g._backend.control.conditional_nodes, len(g._backend.control.body_owners)) == (1, 4)
    fake.fake_cuda_fail_instantiate_at_kernel(tk["t_newton"][0])
    g2 = graph()
    with pytest.raises(eagle.CudaError) as info:
        g2.build()
    fake.fake_cuda_fail_instantiate_at_kernel(None)
    assert "node 'halve' in the body of while_loop node 'newton'" in str(info.value), str(info.value)
