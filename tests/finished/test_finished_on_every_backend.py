"""Compaction, reorder and launch_until_done, one scenario per test run on every backend
(the ``backend`` fixture: cpu, the cuda stand-in, a GPU when present).

The step: a live sample moves by 1 + life/2 and ages; it finishes when its life runs
out (``backend.life_step``: an opaque NumPy node on the cpu, backend_kernels.cu's
b_life_step on cuda, which reads the device's logical size). The oracle is ``Model``,
the positional form of what eagle must do (the step, the stable partition and its
policy, the logical size, the live count), and scattering back by the id map must give
the same step run without compaction.
"""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, reorder


def initial_state(n, seed, max_life=6):
    rng = np.random.default_rng(seed)
    life = rng.integers(0, max_life + 1, size=n).astype(np.int64)
    return (life > 0), life, np.arange(n) * 0.25


def numpy_step(alive, life, x):
    """The step over every sample (finished ones untouched)."""
    m = alive.copy()
    x[m] += 1.0 + 0.5 * life[m].astype(float)
    life[m] -= 1
    alive[m & (life <= 0)] = False


class Model:
    """Step then compact, sample by position, with compact's policy (every,
    min_dead_fraction: its defaults as compact's)."""

    def __init__(self, alive, life, x, every=1, min_dead_fraction=0.25):
        n = alive.shape[0]
        self.s = {"alive": alive.copy(), "life": life.copy(), "x": x.copy(), "ids": np.arange(n, dtype=np.int64)}
        self.every, self.f = every, min_dead_fraction
        self.size, self.count, self.runs = n, 0, 0

    def replay(self):
        L = self.size
        numpy_step(self.s["alive"], self.s["life"], self.s["x"])
        self.runs += 1
        alive = self.s["alive"][:L]
        live = int(alive.sum())
        moved = (self.runs % self.every == 0 and L > 0 and live != L
                 and (live == 0 or L - live >= self.f * L))
        if moved:
            order = np.argsort(~alive, kind="stable")
            for a in self.s.values():
                a[:L] = a[:L][order]
        self.count = live
        self.size = live if (moved or live == 0) else L

    def launch(self, k):
        for _ in range(k):
            self.replay()

    def launch_until_done(self, k):
        done = 0
        while done < k and self.size > 0:
            self.replay()
            done += 1
        return done


class Compaction:
    """step -> compact on `backend`, over copies of the initial state."""

    def __init__(self, backend, alive, life, x, touch=False, **policy):
        b = backend
        n = alive.shape[0]
        self.backend = b
        self.alive, self.life, self.x = b.asarray(alive), b.asarray(life), b.asarray(x)
        self.ids, self.count = b.asarray(np.arange(n, dtype=np.int64)), b.zeros(1, np.int64)
        self.t = b.zeros(n) if touch else None
        g = eagle.Graph()
        g.add_node(b.life_step(self.alive, self.life, self.x), name="step")
        if touch:
            g.add_node(b.touch(self.t), name="touch")
        self.node = compact(self.alive, {"life": self.life, "x": self.x}, ids=self.ids, count=self.count, **policy)
        g.add_node(self.node, name="compact")
        self.g = g.build()
        assert self.g.backend == b.graph_backend

    def state(self):
        b = self.backend
        return {"alive": b.asnumpy(self.alive), "life": b.asnumpy(self.life), "x": b.asnumpy(self.x),
                "ids": b.asnumpy(self.ids)}

    def assert_as(self, model):
        for k, got in self.state().items():
            np.testing.assert_array_equal(got, model.s[k], err_msg=k)
        assert self.g.logical_size == model.size
        assert int(self.backend.asnumpy(self.count)[0]) == model.count


def assert_scatter_back(run, host, replays):
    """Scattered back by ids, the state is the step run `replays` times without compaction."""
    ref = tuple(a.copy() for a in host)
    for _ in range(replays):
        numpy_step(*ref)
    got = run.state()
    for name, want in zip(("alive", "life", "x"), ref):
        back = np.empty_like(got[name])
        back[got["ids"]] = got[name]
        np.testing.assert_array_equal(back, want, err_msg=name)


# ---- compaction --------------------------------------------------------------------------

@pytest.mark.parametrize("n,seed", [(1, 0), (7, 1), (37, 2), (130, 3), (1000, 4), (100_003, 5)])
@pytest.mark.parametrize("launches", [[1, 1, 1], [3, 2], [10]])
def test_compaction_equals_the_model(backend, n, seed, launches):
    if n > 1000 and not backend.big:
        pytest.skip("a size for a GPU")
    host = initial_state(n, seed)
    run = Compaction(backend, *host, min_dead_fraction=0.0)
    model = Model(*host, min_dead_fraction=0.0)
    for k in launches:
        run.g.launch(k)
        model.launch(k)
        run.assert_as(model)
    assert_scatter_back(run, host, sum(launches))
    assert run.g.logical_size == int(model.s["alive"].sum())
    if backend.fake:   # one capture, one instantiate, whatever the launches
        assert backend.fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1
        assert backend.fake.fake_cuda_counter(b"cuGraphInstantiateWithParams") == 1


@pytest.mark.parametrize("policy", [{}, dict(every=2), dict(every=3), dict(min_dead_fraction=0.3),
                                    dict(min_dead_fraction=0.25), dict(every=2, min_dead_fraction=0.5)])
def test_compaction_policy_equals_the_model(backend, policy):
    host = initial_state(5000 if backend.big else 200, 11, max_life=9)
    run = Compaction(backend, *host, **policy)
    model = Model(*host, **policy)
    for k in (1, 1, 2, 3, 1, 5):
        run.g.launch(k)
        model.launch(k)
        run.assert_as(model)
    assert_scatter_back(run, host, 13)


@pytest.mark.parametrize("alive_pattern", ["none", "all", "one"])
def test_compaction_edge_cases(backend, alive_pattern):
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
    run = Compaction(backend, alive, life, x, min_dead_fraction=0.0)
    model = Model(alive, life, x, min_dead_fraction=0.0)
    for _ in range(4):
        run.g.launch(1)
        model.launch(1)
        run.assert_as(model)


# ---- the live count drives the next replay -----------------------------------------------

def test_the_next_replay_runs_at_the_live_count(backend):
    """A node after the step counts, per sample, the replays whose logical size covered
    it: capacity, then the live count after each replay, within one launch (on cuda read
    from the device each replay, with one device-to-host copy for the whole launch)."""
    n = 4096 if backend.big else 64
    host = initial_state(n, 3)
    run = Compaction(backend, *host, touch=True, min_dead_fraction=0.0)
    ref = tuple(a.copy() for a in host)
    sizes = [n]
    for _ in range(5):
        numpy_step(*ref)
        sizes.append(int(ref[0].sum()))
    fake = backend.fake
    copies = fake.fake_cuda_counter(b"cuMemcpyAsync") if fake else 0
    run.g.launch(5)
    want = np.zeros(n)
    for s in sizes[:5]:
        want[:s] += 1
    np.testing.assert_array_equal(backend.asnumpy(run.t), want)
    assert run.g.logical_size == sizes[5] == int(backend.asnumpy(run.count)[0])
    if fake:
        assert fake.fake_cuda_counter(b"cuMemcpyAsync") - copies == 1   # none per replay
        assert fake.fake_cuda_launch_count() == 5
        assert fake.fake_cuda_counter(b"cuGraphExecKernelNodeSetParams") > 0   # grids patched down
        run.g.launch(1)
        assert run.g._backend.sized_kernels == 1 + 1 + 3   # step, touch, count/scatter/copyback
    assert "{step}" in str(run.g) or "<step>" in str(run.g)
    assert "[compact]" in str(run.g)


def test_set_logical_size_sets_the_size_the_next_replays_run_at(backend):
    n = 40
    alive, life, x = initial_state(n, 9, max_life=30)
    life[:] = np.maximum(life, 20)
    alive[:] = True
    run = Compaction(backend, alive, life, x, touch=True)
    run.g.set_logical_size(10)
    run.g.launch(2)
    np.testing.assert_array_equal(backend.asnumpy(run.t), np.where(np.arange(n) < 10, 2, 0))
    assert run.g.logical_size == 10
    if backend.fake:
        assert backend.fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1


@pytest.mark.parametrize("every", [1, 3])
def test_restart_runs_the_graph_from_its_start_again(backend, every):
    """g.restart(): the id map back to the identity, the logical size to the capacity,
    g.replays and the compaction's every= count to 0; with the initial state put back,
    the second run equals the first (and the model's) replay for replay."""
    n = 37
    host = initial_state(n, 11)
    run = Compaction(backend, *host, every=every)
    model = Model(*host, every=every)
    run.g.launch(4)                   # not a multiple of every=: its count is not 0 now
    model.launch(4)
    run.assert_as(model)
    assert run.g.replays == 4 and run.g.logical_size < n
    for name, a in zip(("alive", "life", "x"), host):   # the initial state again, in original order
        backend.put(getattr(run, name), slice(None), a)
    run.g.restart()
    assert (run.g.replays, run.g.logical_size) == (0, n)
    np.testing.assert_array_equal(backend.asnumpy(run.ids), np.arange(n))
    model = Model(*host, every=every)
    for k in (1, 1, 1, 1000):         # the first replays one by one: the every= count restarted
        if k == 1000:
            assert run.g.launch_until_done(k) == model.launch_until_done(k)
        else:
            run.g.launch(k)
            model.launch(k)
        run.assert_as(model)
    assert run.g.replays == model.runs and run.g.logical_size == 0
    run.g.restart(5)
    assert (run.g.replays, run.g.logical_size) == (0, 5)


# ---- running until done -------------------------------------------------------------------

@pytest.mark.parametrize("max_replays", [3, 50, 1000])
@pytest.mark.parametrize("mode", ["device", "host"])
def test_launch_until_done_equals_the_model(cuda_backend, max_replays, mode):
    """On cuda: "device" runs every replay inside one launch of a WHILE node (no
    overshoot, no round trip), "host" checks the count after each replay."""
    b = cuda_backend
    from eagle.cuda import _driver
    if mode == "device" and not _driver.has("conditional"):
        pytest.skip(f"conditional nodes need a 12.4 driver, this one is {_driver.driver_version()}")
    host = initial_state(50_000 if b.big else 300, 21, max_life=25)
    run = Compaction(b, *host, min_dead_fraction=0.0)
    model = Model(*host, min_dead_fraction=0.0)
    run.g._backend.until_done_mode = mode
    fake = b.fake
    copies = fake.fake_cuda_counter(b"cuMemcpyAsync") if fake else 0
    done = run.g.launch_until_done(max_replays)
    assert done == model.launch_until_done(max_replays)
    run.assert_as(model)
    if fake:
        issued = fake.fake_cuda_launch_count()
        copies = fake.fake_cuda_counter(b"cuMemcpyAsync") - copies
        if mode == "device":
            assert issued == 1 and copies == 2   # the stop count in, the device block out
        else:
            assert issued == done and copies == issued   # exactly the replays that began live
    if max_replays >= 50:
        assert run.g.logical_size == 0 and done == 25
        assert run.g.launch_until_done(10) == 0   # nothing left: no replay
    assert run.g._backend.until_done_fallback is None


# ---- reorder ------------------------------------------------------------------------------

class Reorder:
    """A reorder node on `backend`; given no ids, eagle makes the id map (with CuPy on cuda)."""

    def __init__(self, backend, n, n_keys, seed, key_dtype=np.int32, given_ids=True):
        b = self.backend = backend
        rng = np.random.default_rng(seed)
        self.host = {"key": rng.integers(0, n_keys, size=n).astype(key_dtype), "v": rng.random((n, 2)),
                     "ids": np.arange(n, dtype=np.int64)}
        self.d = {k: b.asarray(a) for k, a in self.host.items() if given_ids or k != "ids"}
        node = reorder(self.d["key"], {"v": self.d["v"]}, n_keys=n_keys, ids=self.d.get("ids"))
        self.d["ids"] = node.ids
        self.g = eagle.Graph()
        self.g.add_node(node, name="sort")
        self.g.build()

    def model(self, L):
        order = np.argsort(self.host["key"][:L], kind="stable")
        for a in self.host.values():
            a[:L] = a[:L][order]

    def assert_same(self):
        for k, a in self.host.items():
            np.testing.assert_array_equal(self.backend.asnumpy(self.d[k]), a, err_msg=k)


@pytest.mark.parametrize("n,n_keys,key_dtype,given_ids", [(1, 1, np.int32, True), (50, 3, np.int32, True),
                                                          (500, 17, np.int64, True), (100, 1, np.int64, True),
                                                          (10_000, 37, np.int32, False)])
def test_reorder_equals_a_stable_sort(backend, n, n_keys, key_dtype, given_ids):
    if not given_ids and backend.name == "cuda-standin":
        pytest.skip("the stand-in has no CuPy to make the id map with")
    r = Reorder(backend, n, n_keys, 4, key_dtype, given_ids)
    key0 = r.host["key"].copy()
    r.g.launch(1)
    r.model(n)
    r.assert_same()
    np.testing.assert_array_equal(backend.asnumpy(r.d["ids"]), np.argsort(key0, kind="stable"))
    # a smaller logical size, its keys reversed: only [0, n // 2) is sorted, on each replay
    half = n // 2
    r.g.set_logical_size(half)
    rev = r.host["key"][:half][::-1].copy()
    r.host["key"][:half] = rev
    backend.put(r.d["key"], slice(0, half), rev)
    r.g.launch(2)
    r.model(half)
    r.assert_same()


def test_reorder_with_an_invalid_key_raises_and_moves_nothing(backend):
    r = Reorder(backend, 30, 4, 8)
    r.host["key"][5] = 9
    backend.put(r.d["key"], 5, 9)
    with pytest.raises(ValueError, match="outside"):
        r.g.launch(1)
    r.assert_same()
    r.host["key"][5] = 1
    backend.put(r.d["key"], 5, 1)
    r.g.launch(1)   # the graph stays usable; the flag was cleared
    r.model(30)
    r.assert_same()


def _address(a):
    face = getattr(a, "__cuda_array_interface__", None) or a.__array_interface__
    return face["data"][0], tuple(face["shape"])


def test_a_compaction_and_a_reorder_node_say_what_they_hold(backend):
    """Their arrays and names read back: the key (.alive or .by), the id map, the state."""
    n = 8
    alive, life = backend.asarray(np.ones(n, bool)), backend.zeros(n, np.int64)
    ids, count = backend.asarray(np.arange(n, dtype=np.int64)), backend.zeros(1, np.int64)
    node = compact({"on": alive}, {"life": life}, ids={"where": ids}, count=count)
    assert _address(node.alive) == _address(node.key) == _address(alive)
    assert _address(node.ids) == _address(ids)
    assert (node.key_name, node.ids_name, node.state_names) == ("on", "where", ("life",))
    assert {k: _address(a) for k, a in node.state.items()} == {"life": _address(life)}
    with pytest.raises(AttributeError, match=r"a compact node has no sort key; its alive flags are \.alive \('on'\)"):
        node.by
    key = backend.zeros(n, np.int64)
    node = reorder({"cell": key}, {"life": life}, n_keys=3, ids=ids)
    assert _address(node.by) == _address(key) and node.key_name == "cell"
    with pytest.raises(AttributeError, match=r"a reorder node has no alive flags; its sort key is \.by \('cell'\)"):
        node.alive
