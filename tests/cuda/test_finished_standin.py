"""Compaction and reorder on the cuda backend, against the CPU stand-in of the CUDA driver.

No GPU needed. tests/doubles/fake_libcuda.c (a TEST DOUBLE, not CUDA)
runs eagle's own partition kernels (eagle_part_count / scan / scatter /
copyback, eagle_commit: the CUDA C source in eagle/cuda/kernels/, compiled
with the emulator tests/doubles/cuda_emulation.h), and a test-only Monte
Carlo step kernel (its built-in ``life_step``: a live sample moves and ages,
and finishes when its life runs out). The arrays are ``DeviceArray``
(tests/doubles/fake_cuda.py): the stand-in's device memory that presents
``__cuda_array_interface__`` (also a test double).

The oracle: the same step and compaction / reorder on the CPU backend
(NumPy arrays, an opaque step, eagle's CPU partition node). Both are stable
with the same policy, so after any launches every state array, the id map,
the count and the logical size are equal element for element, and scattering
back by ids gives the uncompacted computation.

What is covered here: 2-d state with a SIZE (by value) step kernel, launch_until_done
in chunks and its fallback to the host loop, reorder then compaction in one graph,
record-time validation, and that device memory is released. The scenarios every
backend shares (compaction and its policy against a model, the device count driving
the next replay, launch_until_done, reorder) are tests/finished/test_finished_on_every_backend.py.
"""
import gc

import numpy as np
import pytest

import eagle
from eagle.graph import compact, opaque, reorder
from fake_cuda import DeviceArray, dev, kernel  # noqa: F401


@pytest.fixture
def ck(cuda_mod):
    import eagle.cuda.backend  # noqa: F401  (binds the backend to the stand-in)
    from eagle.cuda.kernel_nodes import SIZE, SIZE_PTR, cuda_kernel
    return cuda_kernel, SIZE, SIZE_PTR


def initial_state(n, seed, max_life=6):
    rng = np.random.default_rng(seed)
    life = rng.integers(0, max_life + 1, size=n).astype(np.int64)
    alive = (life > 0).astype(np.bool_)
    x = np.arange(n) * 0.25
    return alive, life, x


def numpy_step(alive, life, x):
    """The same step as the stand-in's life_step kernel, over every sample (finished ones untouched)."""
    m = alive.copy()
    x[m] += 1.0 + 0.5 * life[m].astype(float)
    life[m] -= 1
    alive[m & (life <= 0)] = False


def cpu_graph(alive, life, x, extra=None, **policy):
    policy.setdefault("min_dead_fraction", 0.0)  # compact whenever a sample finished
    ids = np.arange(len(alive), dtype=np.int64)
    count = np.zeros(1, dtype=np.int64)
    g = eagle.Graph()
    g.add_node(opaque(lambda: numpy_step(alive, life, x),
                      writes={"alive": alive, "life": life, "x": x}), name="step")
    state = {"life": life, "x": x, **({"extra": extra} if extra is not None else {})}
    node = compact(alive, state, ids=ids, count=count, **policy)
    g.add_node(node, name="compact")
    return g.build(), ids, count


def gpu_graph(fake, ck, alive, life, x, extra=None, *, size_ptr=True, touch=None, **policy):
    policy.setdefault("min_dead_fraction", 0.0)  # compact whenever a sample finished
    cuda_kernel, SIZE, SIZE_PTR = ck
    ids = np.arange(len(alive), dtype=np.int64)
    count = np.zeros(1, dtype=np.int64)
    da, dl, dx, di, dc = dev(alive, life, x, ids, count)
    alive, life, x, ids, count = da.host, dl.host, dx.host, di.host, dc.host
    g = eagle.Graph()
    if size_ptr:
        step = cuda_kernel((kernel(fake, "life_step"), 4), (da, dl, dx, SIZE_PTR),
                           writes={"alive": da, "life": dl, "x": dx}, block=4)
    else:
        step = cuda_kernel((kernel(fake, "life_step_n"), 4), (da, dl, dx, SIZE),
                           writes={"alive": da, "life": dl, "x": dx}, block=4)
    g.add_node(step, name="step")
    if touch is not None:
        dt, = dev(touch)
        touch = dt.host
        g.add_node(cuda_kernel((kernel(fake, "add_one_sp"), 2), (dt, SIZE_PTR),
                               writes={"t": dt}, block=4), name="touch")
    de = DeviceArray(extra) if extra is not None else None
    state = {"life": dl, "x": dx, **({"extra": de} if extra is not None else {})}
    node = compact(da, state, ids=di, count=dc, **policy)
    g.add_node(node, name="compact")
    g.build()
    # the arrays' device memory, viewed from the host (the stand-in allows it)
    g.standin_hosts = (alive, life, x) + ((de.host,) if de is not None else ())
    g.standin_touch = touch
    return g, ids, count


def assert_same(cpu, gpu):
    for c, d in zip(cpu, gpu):
        np.testing.assert_array_equal(c, d)


# ---- compaction ------------------------------------------------------------------------

def test_rows_and_size_by_value_kernels(fake, ck):
    """2-d state (a row per sample, odd row sizes) and a SIZE (by value) step kernel."""
    rng = np.random.default_rng(7)
    for extra in (rng.random((50, 3)), rng.integers(0, 9, size=(50, 5)).astype(np.uint8),
                  rng.integers(0, 9, size=(50, 3)).astype(np.int32)):
        check_rows(fake, ck, extra)


def check_rows(fake, ck, extra):
    host_cpu = initial_state(50, 7) + (extra,)
    host_gpu = tuple(a.copy() for a in host_cpu)
    gc_, ids_c, count_c = cpu_graph(*host_cpu)
    gg, ids_g, count_g = gpu_graph(fake, ck, *host_gpu, size_ptr=False)
    host_gpu = gg.standin_hosts
    for k in (2, 1, 4):
        gc_.launch(k)
        gg.launch(k)
        assert gg.logical_size == gc_.logical_size
        assert_same(host_cpu + (ids_c, count_c), host_gpu + (ids_g, count_g))


@pytest.fixture
def cupy_compiled(fake, emulated_kernels, monkeypatch):
    """The kernels taken as on a GPU: compiled by CuPy (``cupy.RawModule``), here the CuPy
    test double (tests/doubles/fake_cupy.py) handing out the stand-in's kernels by name."""
    import sys

    import fake_cupy
    from eagle.cuda import finished

    lib = emulated_kernels
    cp = fake_cupy.make(14, functions=lambda name: lib.fake_cuda_module_function(name.encode()) or 0)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(finished, "_modules", {})
    saved = finished._provider[0]
    finished.set_kernel_provider(None)
    yield cp
    finished.set_kernel_provider(saved)


def test_compaction_with_kernels_compiled_by_cupy(fake, ck, cupy_compiled):
    """The path a GPU takes: RawModule.get_function gives a RawKernel, whose CUfunction is
    ``.kernel.ptr`` (a RawKernel has no ``ptr``: every compaction failed on the first GPU
    run), launched through CuPy with eagle's stream."""
    from eagle.cuda import finished

    kernels = finished.kernel_provider()
    assert isinstance(kernels, finished._CupyKernels)
    assert kernels.function("eagle_part_count") == fake.fake_cuda_module_function(b"eagle_part_count")
    check_rows(fake, ck, np.random.default_rng(3).random((50, 3)))


# ---- running until done ---------------------------------------------------------------

def test_launch_until_done_in_chunks_and_fallback(fake, ck):
    """A WHILE launch runs at most until_done_chunk replays (Ctrl-C is seen between
    launches); if the WHILE node cannot be built, the exact host loop runs instead."""
    host_cpu = initial_state(300, 21, max_life=25)
    gc_, ids_c, count_c = cpu_graph(*(a.copy() for a in host_cpu))
    want = gc_.launch_until_done(1000)
    gg, ids_g, count_g = gpu_graph(fake, ck, *(a.copy() for a in host_cpu))
    gg._backend.until_done_chunk = 7
    assert gg.launch_until_done(1000) == want == 25
    assert fake.fake_cuda_launch_count() == 4  # 7 + 7 + 7 + 4 replays
    assert_same((ids_c, count_c), (ids_g, count_g))

    gg, ids_g, count_g = gpu_graph(fake, ck, *(a.copy() for a in host_cpu))
    fake.fake_cuda_reset()

    def broken(name):
        raise RuntimeError("the condition kernel does not load here")

    gg._backend.kernels.function = broken
    assert gg.launch_until_done(1000) == 25
    assert gg._backend.until_done_mode == "host"
    assert "does not load" in gg._backend.until_done_fallback
    assert fake.fake_cuda_launch_count() == 25


def test_launch_until_done_needs_compaction(fake, ck):
    cuda_kernel, SIZE, SIZE_PTR = ck
    h = np.zeros(4)
    a, = dev(h)
    h = a.host
    g = eagle.Graph()
    g.add_node(cuda_kernel((kernel(fake, "add_one_sp"), 2), (a, SIZE_PTR), writes={"a": a}))
    g.build()
    with pytest.raises(ValueError, match="compaction node"):
        g.launch_until_done(3)
    g.launch(2)  # SIZE_PTR without compaction: the host's size, no copy back
    np.testing.assert_array_equal(h, 2)


# ---- reorder -----------------------------------------------------------------------------

def test_reorder_then_compaction_in_one_graph(fake, ck):
    """step -> reorder by key -> compact: compaction is stable, so the live stay sorted.
    (A reorder recorded after the compaction would sort the replay's old range, finished
    samples included, as on the CPU.)"""
    cuda_kernel, SIZE, SIZE_PTR = ck
    n = 120
    rng = np.random.default_rng(2)
    sets = []
    for _ in range(2):
        alive, life, x = initial_state(n, 6, max_life=8)
        sets.append((alive, life, x, (np.arange(n) % 5).astype(np.int64), np.arange(n, dtype=np.int64),
                     np.zeros(1, dtype=np.int64)))
    (ac, lc, xc, kc, ic, cc), (ag, lg, xg, kg, ig, cg) = sets
    gc_ = eagle.Graph()
    gc_.add_node(opaque(lambda: numpy_step(ac, lc, xc), writes={"alive": ac, "life": lc, "x": xc}),
                 name="step")
    gc_.add_node(reorder(kc, {"alive": ac, "life": lc, "x": xc}, n_keys=5, ids=ic), name="sort")
    gc_.add_node(compact(ac, {"life": lc, "x": xc, "k": kc}, ids=ic, count=cc, min_dead_fraction=0.0), name="compact")
    gc_.build()
    da, dl, dx, dk, di, dc = dev(ag, lg, xg, kg, ig, cg)
    ag, lg, xg, kg, ig, cg = da.host, dl.host, dx.host, dk.host, di.host, dc.host
    sets[1] = (ag, lg, xg, kg, ig, cg)
    gg = eagle.Graph()
    gg.add_node(cuda_kernel((kernel(fake, "life_step"), 4), (da, dl, dx, SIZE_PTR),
                            writes={"alive": da, "life": dl, "x": dx}, block=8), name="step")
    gg.add_node(reorder(dk, {"alive": da, "life": dl, "x": dx}, n_keys=5, ids=di), name="sort")
    gg.add_node(compact(da, {"life": dl, "x": dx, "k": dk}, ids=di, count=dc, min_dead_fraction=0.0), name="compact")
    gg.build()
    for k in (1, 2, 3):
        gc_.launch(k)
        gg.launch(k)
        assert gg.logical_size == gc_.logical_size
        assert_same(sets[0], sets[1])
        live = gg.logical_size
        assert ag[:live].all() and not ag[live:].any()
        assert (np.diff(kg[:live]) >= 0).all()
    del rng


# ---- validation and resources ----------------------------------------------------------------

def test_validation(fake, ck):
    alive, life, x = initial_state(10, 0)
    ids, count = np.arange(10, dtype=np.int64), np.zeros(1, dtype=np.int64)
    da, dl, dx, di, dc = dev(alive, life, x, ids, count)
    alive, life, x, ids, count = da.host, dl.host, dx.host, di.host, dc.host
    with pytest.raises(TypeError, match="CuPy"):
        compact(da, {"life": dl})  # no ids= / count= and no CuPy to make them
    with pytest.raises(TypeError, match="bool or uint8"):
        compact(dl, {"x": dx}, ids=di, count=dc)
    with pytest.raises(ValueError, match="one row per sample"):
        compact(da, {"short": DeviceArray(np.zeros(3))}, ids=di, count=dc)
    with pytest.raises(ValueError, match="every must be"):
        compact(da, {"life": dl}, ids=di, count=dc, every=0)
    with pytest.raises(TypeError, match="ids must be an int64"):
        compact(da, {"life": dl}, ids=DeviceArray(np.zeros(10)), count=dc)
    with pytest.raises(TypeError, match="count must be an int64"):
        compact(da, {"life": dl}, ids=di, count=DeviceArray(np.zeros(2, dtype=np.int64)))
    with pytest.raises(ValueError, match="own"):
        compact(da, {"ids": dl}, ids=di, count=dc)
    with pytest.raises(TypeError, match="int32 or int64"):
        reorder(dx, {"life": dl}, n_keys=3, ids=di)
    with pytest.raises(ValueError, match="n_keys"):
        reorder(dl, {"x": dx}, n_keys=0, ids=di)
    node = compact(da, {"life": dl, "x": dx}, ids=di, count=dc)
    assert node.kind == "cuda_partition" and node.resizes and node.family == "cuda"
    g = eagle.Graph()
    g.add_node(node)
    with pytest.raises(ValueError, match="at most one compaction node"):
        g.add_node(compact(da, {"life": dl}, ids=di, count=dc))


def test_device_memory_is_released(fake, ck):
    gc.collect()
    base = {k: fake.fake_cuda_live(k.encode()) for k in ("devmem", "exec", "graph", "stream")}
    alive, life, x = initial_state(30, 1)
    gg, ids, count = gpu_graph(fake, ck, alive, life, x)
    alive, life, x = gg.standin_hosts[:3]
    gg._backend.close()
    gg.build()
    # the test's own device arrays (DeviceArray) stay; the graph's buffers are counted now
    arrays = fake.fake_cuda_live(b"devmem")
    gg.launch(2)
    gg._backend.close()
    with_graph = arrays
    gg.build().launch(1)  # a rebuild allocates afresh; the old buffers are gone
    assert fake.fake_cuda_live(b"devmem") > with_graph - 1
    gg._backend.close()
    assert fake.fake_cuda_live(b"devmem") < with_graph
    t = DeviceArray(np.zeros(1))
    gg.add_node(opaque(lambda: None, writes={"t": t}), name="unbuild")
    gc.collect()
    now = {k: fake.fake_cuda_live(k.encode()) for k in base}
    assert {k: now[k] for k in ("exec", "graph", "stream")} == {k: base[k] for k in ("exec", "graph", "stream")}


@pytest.mark.parametrize("mode", ["device", "host"])
def test_a_dropped_graph_frees_its_gpu_objects_without_the_cyclic_collector(fake, ck, mode):
    """Nothing refers back from the backend to its graph (no graph <-> backend cycle): with
    the cyclic collector off, dropping the last reference to a built graph, launched with
    launch_until_done (its WHILE node too), destroys its streams, graphs, execs and buffers."""
    gc.collect()
    kinds = ("devmem", "exec", "graph", "stream", "event")
    alive, life, x = initial_state(16, 3)
    gg, ids, count = gpu_graph(fake, ck, alive, life, x)
    gg._backend.until_done_mode = mode
    gg.launch(1)
    gg.launch_until_done(5)
    arrays = [a for n in gg._nodes for _, a, _ in n.arrays()]   # the test's own device arrays stay
    gc.disable()
    try:
        with_graph = {k: fake.fake_cuda_live(k.encode()) for k in kinds}
        del gg
        now = {k: fake.fake_cuda_live(k.encode()) for k in kinds}
    finally:
        gc.enable()
    assert now["exec"] < with_graph["exec"] and now["stream"] < with_graph["stream"], (with_graph, now)
    assert now["graph"] < with_graph["graph"] and now["devmem"] < with_graph["devmem"], (with_graph, now)
    del arrays
