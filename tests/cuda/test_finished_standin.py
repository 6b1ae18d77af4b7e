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

What is covered: capture (the partition kernels become graph nodes, one
capture, one instantiate), replays whose logical size comes from the device
count (SIZE_PTR kernels see it on the very next replay, no host copy per
replay: one device-to-host copy per launch), the host-visible logical size
after launch and the grids patched down to it, the policy (every,
min_dead_fraction), reorder and its invalid-key error, launch_until_done's
check-every-round control flow and its replay count, set_logical_size
writing the device size, and that device memory is released.
"""
import ctypes
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

@pytest.mark.parametrize("n,seed", [(1, 0), (7, 1), (37, 2), (130, 3), (1000, 4)])
@pytest.mark.parametrize("launches", [[1, 1, 1], [3, 2], [10]])
def test_compaction_equals_the_cpu_backend(fake, ck, n, seed, launches):
    host_cpu = initial_state(n, seed)
    host_gpu = tuple(a.copy() for a in host_cpu)
    gc_, ids_c, count_c = cpu_graph(*host_cpu)
    gg, ids_g, count_g = gpu_graph(fake, ck, *host_gpu)
    host_gpu = gg.standin_hosts
    assert gg.backend == "cuda" and gc_.backend == "cpu"
    for k in launches:
        gc_.launch(k)
        gg.launch(k)
        assert gg.logical_size == gc_.logical_size
        assert_same(host_cpu + (ids_c, count_c), host_gpu + (ids_g, count_g))
    # scattering back by ids gives the uncompacted computation
    ref = initial_state(n, seed)
    for _ in range(sum(launches)):
        numpy_step(*ref)
    for compacted, want in zip(host_gpu, ref):
        back = np.empty_like(compacted)
        back[ids_g] = compacted
        np.testing.assert_array_equal(back, want)
    assert gg.logical_size == int(ref[0].sum())
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1
    assert fake.fake_cuda_counter(b"cuGraphInstantiateWithParams") == 1


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


@pytest.mark.parametrize("alive_pattern", ["none", "all", "one"])
def test_edge_cases(fake, ck, alive_pattern):
    n = 20
    alive, life, x = initial_state(n, 5)
    if alive_pattern == "none":
        life[:] = 0
    elif alive_pattern == "all":
        life[:] = 50
    else:
        life[:] = 0
        life[13] = 3
    alive[:] = life > 0
    host_cpu = (alive, life, x)
    host_gpu = tuple(a.copy() for a in host_cpu)
    gc_, ids_c, count_c = cpu_graph(*host_cpu)
    gg, ids_g, count_g = gpu_graph(fake, ck, *host_gpu)
    host_gpu = gg.standin_hosts
    for _ in range(4):
        gc_.launch(1)
        gg.launch(1)
        assert gg.logical_size == gc_.logical_size
        assert_same(host_cpu + (ids_c, count_c), host_gpu + (ids_g, count_g))


@pytest.mark.parametrize("policy", [dict(every=2), dict(every=3), dict(min_dead_fraction=0.3),
                                    dict(every=2, min_dead_fraction=0.5)])
def test_policy_equals_the_cpu_backend(fake, ck, policy):
    host_cpu = initial_state(200, 11, max_life=9)
    host_gpu = tuple(a.copy() for a in host_cpu)
    gc_, ids_c, count_c = cpu_graph(*host_cpu, **policy)
    gg, ids_g, count_g = gpu_graph(fake, ck, *host_gpu, **policy)
    host_gpu = gg.standin_hosts
    for k in (1, 1, 2, 3, 1, 5):
        gc_.launch(k)
        gg.launch(k)
        assert gg.logical_size == gc_.logical_size
        assert_same(host_cpu + (ids_c, count_c), host_gpu + (ids_g, count_g))


# ---- the device count drives the next replay, with one host copy per launch ----------------

def test_size_comes_from_the_device_within_a_launch(fake, ck):
    n = 64
    alive, life, x = initial_state(n, 3)
    touch = np.zeros(n)
    gg, ids, count = gpu_graph(fake, ck, alive, life, x, touch=touch)
    alive, life, x = gg.standin_hosts[:3]
    touch = gg.standin_touch
    # the sizes the replays should see: capacity, then the live count after each replay
    ref = initial_state(n, 3)
    sizes = [n]
    for _ in range(5):
        numpy_step(*ref)
        sizes.append(int(ref[0].sum()))
    copies = fake.fake_cuda_counter(b"cuMemcpyAsync")
    gg.launch(5)
    # touch[i] counts the replays whose logical size exceeded i: read from the device each replay
    want = np.zeros(n)
    for s in sizes[:5]:
        want[:s] += 1
    np.testing.assert_array_equal(touch, want)
    # one device-to-host copy for the whole launch, none per replay
    assert fake.fake_cuda_counter(b"cuMemcpyAsync") - copies == 1
    assert fake.fake_cuda_launch_count() == 5
    assert gg.logical_size == sizes[5] == int(count[0])
    # after the launch the sized grids are patched down to the live count
    launches_before = fake.fake_cuda_counter(b"cuGraphExecKernelNodeSetParams")
    assert launches_before > 0
    gg.launch(1)
    node = gg._backend
    assert node.sized_kernels == 1 + 1 + 3  # step, touch, count/scatter/copyback
    assert "{step}" in str(gg) and "[compact]" in str(gg)


def test_set_logical_size_writes_the_device_size(fake, ck):
    n = 40
    alive, life, x = initial_state(n, 9, max_life=30)
    life[:] = np.maximum(life, 20)
    alive[:] = True
    touch = np.zeros(n)
    gg, ids, count = gpu_graph(fake, ck, alive, life, x, touch=touch)
    alive, life, x = gg.standin_hosts[:3]
    touch = gg.standin_touch
    gg.set_logical_size(10)
    gg.launch(2)
    np.testing.assert_array_equal(touch, np.where(np.arange(n) < 10, 2, 0))
    assert gg.logical_size == 10
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1


# ---- running until done ---------------------------------------------------------------

@pytest.mark.parametrize("max_replays", [3, 50, 1000])
@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done_equals_the_cpu_backend(fake, ck, max_replays, mode):
    host_cpu = initial_state(300, 21, max_life=25)
    host_gpu = tuple(a.copy() for a in host_cpu)
    gc_, ids_c, count_c = cpu_graph(*host_cpu)
    gg, ids_g, count_g = gpu_graph(fake, ck, *host_gpu)
    host_gpu = gg.standin_hosts
    gg._backend.until_done_mode = mode
    copies = fake.fake_cuda_counter(b"cuMemcpyAsync")
    done_c = gc_.launch_until_done(max_replays)
    done_g = gg.launch_until_done(max_replays)
    assert done_g == done_c
    assert gg.logical_size == gc_.logical_size
    assert_same(host_cpu + (ids_c, count_c), host_gpu + (ids_g, count_g))
    issued = fake.fake_cuda_launch_count()
    copies = fake.fake_cuda_counter(b"cuMemcpyAsync") - copies
    if mode == "device":
        # one cuGraphLaunch of the WHILE node ran every replay: no overshoot, no round trip
        assert issued == 1 and copies == 2  # the stop count in, the device block out
    else:
        # one replay per check: exactly the replays that started with live samples
        assert issued == done_g and copies == issued
    if max_replays >= 50:
        assert gg.logical_size == 0 and done_g == 25
        assert gg.launch_until_done(10) == 0  # nothing left: no replay


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

    gg._backend._kernels.function = broken
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

def reorder_graphs(fake, ck, n, n_keys, seed, key_dtype=np.int32):
    rng = np.random.default_rng(seed)
    key = rng.integers(0, n_keys, size=n).astype(key_dtype)
    val = rng.random((n, 2))
    hosts = [(key.copy(), val.copy(), np.arange(n, dtype=np.int64)) for _ in range(2)]
    (kc, vc, ic), (kg, vg, ig) = hosts
    gc_ = eagle.Graph()
    gc_.add_node(reorder(kc, {"v": vc}, n_keys=n_keys, ids=ic))
    gc_.build()
    dk, dv, di = dev(kg, vg, ig)
    kg, vg, ig = dk.host, dv.host, di.host
    gg = eagle.Graph()
    gg.add_node(reorder(dk, {"v": dv}, n_keys=n_keys, ids=di))
    gg.build()
    return gc_, gg, ((kc, vc, ic), (kg, vg, ig))


@pytest.mark.parametrize("n,n_keys,key_dtype", [(1, 1, np.int32), (50, 3, np.int32),
                                                (500, 17, np.int64), (100, 1, np.int64)])
def test_reorder_equals_the_cpu_backend(fake, ck, n, n_keys, key_dtype):
    gc_, gg, ((kc, vc, ic), (kg, vg, ig)) = reorder_graphs(fake, ck, n, n_keys, 4, key_dtype)
    key0 = kc.copy()
    gc_.launch(1)
    gg.launch(1)
    assert_same((kc, vc, ic), (kg, vg, ig))
    np.testing.assert_array_equal(kg, np.sort(key0, kind="stable"))
    np.testing.assert_array_equal(ig, np.argsort(key0, kind="stable"))
    gg.set_logical_size(n // 2)
    gc_.set_logical_size(n // 2)
    kg[: n // 2] = kc[: n // 2] = kc[: n // 2][::-1].copy()
    gc_.launch(2)
    gg.launch(2)
    assert_same((kc, vc, ic), (kg, vg, ig))


def test_reorder_with_an_invalid_key_raises_and_moves_nothing(fake, ck):
    gc_, gg, ((kc, vc, ic), (kg, vg, ig)) = reorder_graphs(fake, ck, 30, 4, 8)
    kc[5] = kg[5] = 9
    before = kg.copy()
    with pytest.raises(ValueError, match="outside"):
        gc_.launch(1)
    with pytest.raises(ValueError, match="outside"):
        gg.launch(1)
    np.testing.assert_array_equal(kg, before)
    assert_same((kc, vc, ic), (kg, vg, ig))
    kc[5] = kg[5] = 1
    gc_.launch(1)
    gg.launch(1)  # the graph stays usable; the flag was cleared
    assert_same((kc, vc, ic), (kg, vg, ig))


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
