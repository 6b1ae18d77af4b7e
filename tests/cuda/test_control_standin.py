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
    assert b._control.conditional_nodes == 1
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


def branch_graph(ck, tk, flag, flag_c, x, otherwise=True):
    then, other = eagle.Graph(), eagle.Graph()
    then.add_node(add(ck, tk, x, 10.0), name="plus10")
    # `then` clears the flag: `otherwise` must still not run (one read decides)
    then.add_node(dec(ck, tk, flag), name="clear")
    other.add_node(add(ck, tk, x, -1.0), name="minus1")
    g = eagle.Graph()
    g.add_node(if_else({"flag?": flag_c}, then, other if otherwise else None), name="branch")
    return g


@pytest.mark.parametrize("otherwise", [True, False])
def test_branch_chosen_per_replay(fake, ck, tk, otherwise):
    x = DeviceArray(np.zeros(6))
    flag, flag_c = scalar(6, np.int64)
    g = branch_graph(ck, tk, flag, flag_c, x, otherwise)
    g.build()
    assert g._backend._control.conditional_nodes == (2 if otherwise else 1)
    want = np.zeros(6)
    for f in [1, 0, 0, 1, 1, 0]:
        flag.host[0] = f
        g.launch(1)
        if f:
            want += 10.0
        elif otherwise:
            want -= 1.0
        np.testing.assert_array_equal(x.host, want)
        assert flag.host[0] == 0   # `then` cleared it, `otherwise` left it


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
    assert g._backend._control.child_nodes == 2
    # the picture: each body's stages say how they are captured (one stream, in order)
    text = str(g)
    assert text.count("│ subgraph") == 2 and text.count("│ stage 1 stream  ┌────┴────┐ │") == 2
    g.launch(2)
    np.testing.assert_array_equal(x.host, np.arange(5.0) + 2 * (3 + 100 + 3))


def test_nesting(fake, ck, tk):
    """while k: (if flag: x += 1 else: x -= 100); k -= 1; subgraph(x += 0.5) — nested
    conditionals (the inner handles belong to the body graph) and a child inside a body."""
    x = DeviceArray(np.zeros(4))
    k, k_c = scalar(4, np.int64)
    flag = DeviceArray(np.ones(1, np.int32))
    then, other, half = eagle.Graph(), eagle.Graph(), eagle.Graph()
    then.add_node(add(ck, tk, x, 1.0), name="plus")
    other.add_node(add(ck, tk, x, -100.0), name="minus")
    half.add_node(add(ck, tk, x, 0.5), name="half")
    body = eagle.Graph()
    body.add_node(if_else({"flag": flag}, then, other), name="choose")
    body.add_node(subgraph(half), name="halfstep")
    body.add_node(dec(ck, tk, k), name="dec")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k_c}, body), name="loop")
    g.build()
    want = np.zeros(4)
    for kk, f in [(3, 1), (0, 1), (2, 0), (5, 1)]:
        k.host[0], flag.host[0] = kk, f
        g.launch(1)
        for _ in range(kk):
            want += 1.0 if f else -100.0
            want += 0.5
        np.testing.assert_array_equal(x.host, want)
        assert k.host[0] == 0


def test_retune_inside_a_branch(fake, ck, tk):
    """set_logical_size reaches the sized kernels inside a conditional body and a child graph."""
    n = 12
    x = DeviceArray(np.zeros(n))
    flag = DeviceArray(np.ones(1, np.int32))
    then, inner = eagle.Graph(), eagle.Graph()
    then.add_node(add(ck, tk, x, 1.0), name="plus")
    inner.add_node(add(ck, tk, x, 10.0), name="plus10")
    g = eagle.Graph()
    g.add_node(if_else({"flag": flag}, then), name="branch")
    g.add_node(subgraph(inner), name="sub")
    g.build()
    assert g._backend.sized_kernels == 2
    g.launch(1)
    np.testing.assert_array_equal(x.host, np.full(n, 11.0))
    g.set_logical_size(5)
    g.launch(1)
    want = np.full(n, 11.0)
    want[:5] += 11.0
    np.testing.assert_array_equal(x.host, want)
    g.set_logical_size(n)
    flag.host[0] = 0
    g.launch(1)
    want += 10.0
    np.testing.assert_array_equal(x.host, want)


@pytest.mark.parametrize("k0, limit, raises", [(3, 3, False), (4, 3, True), (10, 1, True), (0, 1, False)])
def test_iteration_limit(fake, ck, tk, k0, limit, raises):
    x = DeviceArray(np.zeros(3))
    k, k_c = scalar(3, np.int64)
    body = eagle.Graph()
    body.add_node(add(ck, tk, x, 1.0), name="inc")
    body.add_node(dec(ck, tk, k), name="dec")
    g = eagle.Graph()
    g.add_node(while_loop({"k?": k_c}, body, max_iterations=limit), name="bounded")
    g.build()
    k.host[0] = k0
    if raises:
        with pytest.raises(RuntimeError, match=r"while_loop node 'bounded' reached max_iterations=" + str(limit)):
            g.launch(1)
        np.testing.assert_array_equal(x.host, np.full(3, float(limit)))   # stopped there
        k.host[0] = 0
        g.launch(1)   # the flag was cleared: the next launch is clean
    else:
        g.launch(1)
        np.testing.assert_array_equal(x.host, np.full(3, float(k0)))


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
from eagle.cuda import _shim as _cuda
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
    top = cuda_mod.Graph()
    node, handle, body = top.add_conditional("if", (), 1)
    # a kernel node in the body is fine
    x = DeviceArray(np.zeros(2))
    body.add_kernel(kernel(fake, "add_one"), 1, 2, [ctypes.c_void_p(x.buffer.ptr), ctypes.c_int64(2)])
    ex = top.instantiate()
    s = cuda_mod.Stream()
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
        backend._cuda.launch_kernel(kernel(fake, "add_one"), 3, 4,
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


@pytest.mark.parametrize("what", ["compact", "reorder"])
def test_a_compaction_or_reorder_inside_a_body_is_refused_on_cuda_saying_what_is_missing(fake, ck, what):
    # on the cpu backend they run in bodies (tests/control/test_finished_in_bodies.py);
    # on cuda the refusal names the node, the body and the missing pieces
    from eagle.graph import compact, reorder
    n = 8
    alive, x = DeviceArray(np.ones(n, bool)), DeviceArray(np.zeros(n))
    key = DeviceArray(np.zeros(n, np.int64))
    flag = DeviceArray(np.ones(1, np.int32))
    body = eagle.Graph()
    ids, count = DeviceArray(np.arange(n, dtype=np.int64)), DeviceArray(np.zeros(1, np.int64))
    body.add_node(compact(alive, {"x": x}, ids=ids, count=count) if what == "compact" else
                  reorder(key, {"x": x}, n_keys=2, ids=ids), name="part")
    g = eagle.Graph()
    g.add_node(if_else({"flag": flag}, body), name="maybe")
    word = "compaction" if what == "compact" else "reorder"
    with pytest.raises(TypeError, match=rf"node 'part' in the then of if_else node 'maybe' is a {word} "
                                        r"node.*not captured into conditional bodies"):
        g.build()


CTRL_C_SCRIPT = r"""
import ctypes, os, sys, time
import numpy as np
sys.path[:0] = [os.environ["DOUBLES"]]
from eagle.cuda import _shim as _cuda
assert _cuda.load()
import eagle, eagle.cuda.backend
from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
from eagle.record.control import while_loop
from fake_cuda import DeviceArray
from fake_cuda_build import EmulatedKernels, bind_fake_libcuda
from eagle.cuda.finished import set_kernel_provider
lib = bind_fake_libcuda(ctypes.CDLL(os.environ["EAGLE_LIBCUDA"]))
for so in (os.environ["EMULATED"], os.environ["TEST_KERNELS"]):
    assert lib.fake_cuda_load_module(so.encode()) == 0
set_kernel_provider(lambda: EmulatedKernels(lib))
mode = sys.argv[1]
builtin = lambda name: lib.fake_cuda_kernel(name.encode())
t_dec = lib.fake_cuda_module_function(b"t_dec")
x, y, s = DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4)), DeviceArray(np.zeros(4))
k = DeviceArray(np.zeros(4, np.int64))
slow = lambda us, name: cuda_kernel((builtin("slow_fill"), 4), [s, 0.0, SIZE, us], updates={name: s})
g = eagle.Graph()
if mode == "replays":      # no loop: many short replays, stopped between two of them
    g.add_node(slow(2000, "s"), name="slow")
    g.add_node(cuda_kernel((builtin("add_one"), 2), [y, SIZE], updates={"y": y}), name="count")
else:
    body = eagle.Graph()
    body.add_node(cuda_kernel((builtin("add_one"), 2), [x, SIZE], updates={"x": x}), name="inc")
    body.add_node(cuda_kernel((t_dec, 2), [k, SIZE], updates={"k": k}, block=4), name="dec")
    if mode == "twice":    # a slow iteration: the second Ctrl-C lands while eagle drains
        body.add_node(slow(50000, "s"), name="slow")
    if mode == "before":   # one long kernel before the loop (0.9 s): it cannot be stopped
        g.add_node(cuda_kernel((builtin("slow_fill"), 4), [s, 0.0, SIZE, 900000],
                               updates={"s": s, "k": k}), name="slow")   # "k": the loop follows it
    g.add_node(while_loop({"k": k[:1]}, body), name="spin")
g.build()
k.host[0] = 10 ** 15       # the loop's condition never clears in this launch
print("ready", flush=True)
out = []
try:
    try:
        g.launch(10 ** 6 if mode == "replays" else 1)
        out.append("finished")
    except KeyboardInterrupt as e:
        out.append(f"interrupted {time.monotonic()!r} " + " ".join(getattr(e, "__notes__", [])))
        time.sleep(0.5)    # a second Ctrl-C lands here, or already in the drain
except KeyboardInterrupt:
    out.append("second")
print("\n".join(out), flush=True)
assert g._backend._stop is None or g._backend._stop.get() == 0 or g._backend._stop_pending
if mode == "replays":
    issued = g._backend.last_failure[1]
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

_test_kernels = None


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
@pytest.mark.parametrize("mode", ["mid", "twice", "before", "replays"])
def test_ctrl_c_stops_a_long_launch(fake_libcuda_path, cuda_mod, tmp_path_factory, mode):
    """SIGINT during g.launch: a while_loop whose condition never clears ("mid"; "twice":
    a second Ctrl-C while eagle drains), a slow kernel before the loop ("before": it
    cannot be stopped, the launch raises when it ends and the loop never starts), and a
    launch(10**6) of short replays ("replays": stopped between two). launch raises
    KeyboardInterrupt naming the loop (and its iteration), in a subprocess bounded by a
    timeout; afterwards the graph launches correctly (a 3-iteration loop runs 3, or 3
    replays run 3)."""
    import signal
    import time

    global _emulated, _test_kernels
    if _emulated is None:
        _emulated = build_emulated_module(tmp_path_factory.mktemp("emulated_sub"))
    if _test_kernels is None:
        _test_kernels = build_emulated_module(tmp_path_factory.mktemp("control_kernels_sub"),
                                              sources=[HERE / "control_kernels.cu"], kernels=["t_dec"])
    env = dict(os.environ, EAGLE_LIBCUDA=fake_libcuda_path, DOUBLES=str(HERE.parent / "doubles"),
               EMULATED=_emulated, TEST_KERNELS=_test_kernels)
    p = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(0.2 if mode == "before" else 0.5)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        if mode == "twice":
            time.sleep(0.01)
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    lines = out.strip().splitlines()
    first = lines[0].split(" ", 2)
    assert first[0] == "interrupted", out + err
    took = float(first[1]) - sent
    note = first[2]
    if mode == "twice" and "a second Ctrl-C" in note:   # it landed while eagle drained
        assert lines[1] != "second"
    else:
        assert "Ctrl-C interrupted" in note and "graph can be launched again" in note, note
    after = lines[-1].split(" ", 1)[1]
    if mode == "replays":
        issued, ran, again = map(int, after.split())
        assert 0 < ran == issued < 10 ** 6 and again == 3   # stopped between replays, all drained
        assert "launch(1000000)" in note
    else:
        ran, xs, k_left = after.split(" ", 1)[0], after.split(" ", 1)[1].rsplit(" ", 1)[0], after.rsplit(" ", 1)[1]
        assert xs == "[3.0, 3.0, 3.0, 3.0]" and k_left == "0", after   # the loop runs again
        if mode == "before":
            assert "while_loop node 'spin' before its first iteration" in note, note
            assert int(ran) == 0 and took >= 0.3   # raised once the slow kernel ended
        elif "a second Ctrl-C" not in note:
            it = int(note.split("while_loop node 'spin' after ")[1].split()[0])
            assert int(ran) == it > 0, (ran, note)   # the iteration the note names is the one it stopped at
    assert took < 20, took   # a hang bound, not a timing measurement


@pytest.mark.parametrize("where", ["while", "nested", "then", "subgraph"])
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
    else:
        g.add_node(subgraph(body), name="sub")
        want, top = "node 'halve' in the graph of subgraph node 'sub'", "sub"
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
