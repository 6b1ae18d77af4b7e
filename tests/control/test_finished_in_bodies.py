"""Compaction and reorder nodes inside control-flow bodies, against the plain-Python form
(the sequential oracle: recording order, with the Python ``while`` / ``if`` each control
node stands for) on copies of the arrays.

A compaction means in a body what it means at top level at that point of the program:
it partitions [0, the replay's logical size) and the *next replay* starts at the live
count of its last run (the rest of the replay, the loop's later iterations and the outer
graph's later nodes included, runs at the replay's size); a replay that does not run it
keeps the size. ``Model`` below is that rule, position by position."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import eagle
from eagle.graph import Graph, compact, if_else, opaque, reorder, subgraph, ufunc, while_loop


class Model:
    """The plain-Python form of a compaction node: the stable partition of [0, L) with its
    policies, counted per run of the node (``every``), the live count, the next size."""

    def __init__(self, state, every=1, min_dead_fraction=0.0):
        self.state, self.every, self.f = state, every, min_dead_fraction
        self.runs = 0
        self.count = 0

    def run(self, L):
        """Returns the next replay's size if this run were the replay's last."""
        self.runs += 1
        alive = self.state["alive"][:L]
        live = int(alive.sum()) if L > 0 else 0
        acts = (self.runs % self.every == 0 and L > 0 and live != L
                and (live == 0 or L - live >= self.f * L))
        if acts:
            order = np.argsort(~alive, kind="stable")
            for a in self.state.values():
                a[:L] = a[:L][order]
        self.count = live
        return live if acts or live == 0 else L


def particles(n, seed):
    rng = np.random.default_rng(seed)
    return {"alive": np.ones(n, bool), "x": rng.standard_normal(n), "age": np.zeros(n, np.int64),
            "ids": np.arange(n, dtype=np.int64)}


def copies(s):
    return {k: v.copy() for k, v in s.items()}


def absorbing_loop(s, life, iterations, **policy):
    """A graph whose replay is ``it = 0; while it < iterations and any alive: age += 1;
    x += 0.5 (live samples); the too old die; compact; it += 1``; returns (graph, seen),
    seen: the (start, stop) the sized condition node was handed per iteration."""
    alive, x, age, ids = s["alive"], s["x"], s["age"], s["ids"]
    it, more = np.zeros(1, np.int64), np.zeros(1, bool)
    seen = []

    def decide(start, stop):
        seen.append((start, stop))
        more[0] = it[0] < iterations and alive[start:stop].any()

    def kill(start, stop):
        alive[start:stop] &= age[start:stop] < life[ids[start:stop]]

    def reset(start, stop):
        it[0] = 0
        decide(start, stop)

    def tick(start, stop):
        it[0] += 1
        decide(start, stop)

    body = Graph()
    body.add_node(ufunc(np.add, {"age": age}, 1, out={"age": age}, where={"alive": alive}), "older")
    body.add_node(ufunc(np.add, {"x": x}, 0.5, out={"x": x}, where={"alive": alive}), "move")
    body.add_node(opaque(kill, reads={"age": age, "ids": ids}, updates={"alive": alive}, sized=True), "kill")
    body.add_node(compact(alive, {"x": x, "age": age}, ids=ids, **policy), "compact")
    body.add_node(opaque(tick, reads={"alive": alive}, updates={"it": it, "more": more}, sized=True,
                         per_sample=["alive"]), "tick")
    g = Graph()
    g.add_node(opaque(reset, reads={"alive": alive}, writes={"it": it, "more": more}, sized=True,
                      per_sample=["alive"]), "reset")
    g.add_node(while_loop({"more": more}, body, max_iterations=iterations + 1), "loop")
    return g, seen


def absorbing_model(m, life, iterations, replays, L, model, seen):
    """The same replays in plain Python on the copies ``m``; returns the final size."""
    for _ in range(replays):
        nxt = L
        it = 0
        seen.append((0, L))
        while it < iterations and m["alive"][:L].any():
            live = m["alive"][:L].copy()
            m["age"][:L][live] += 1
            m["x"][:L][live] += 0.5
            m["alive"][:L] &= m["age"][:L] < life[m["ids"][:L]]
            nxt = model.run(L)
            it += 1
            seen.append((0, L))
        L = nxt
    return L


def assert_same(s, m):
    for k in s:
        np.testing.assert_array_equal(s[k], m[k], err_msg=k)


@pytest.mark.parametrize("n_threads,teams", [(1, "auto"), (2, "auto"), (2, "parallel")])
@pytest.mark.parametrize("policy", [{"min_dead_fraction": 0.0}, {"min_dead_fraction": 0.25},
                                    {"every": 2, "min_dead_fraction": 0.0}])
def test_absorbing_samples_in_a_while_loop_compacted_in_its_body(threads, n_threads, teams, policy):
    threads(n_threads)
    n = 3001
    rng = np.random.default_rng(5)
    life = rng.integers(1, 40, n)
    s = particles(n, 1)
    m = copies(s)
    g, seen = absorbing_loop(s, life, 3, **policy)
    g.build(cpu=eagle.CpuOptions(teams=teams))
    node = g.recording().nodes[1].bodies[0].nodes[3]
    model = Model({k: m[k] for k in ("alive", "x", "age", "ids")}, **policy)
    L, expect_seen = n, []
    for k in (1, 2, 4):
        g.launch(k)
        L = absorbing_model(m, life, 3, k, L, model, expect_seen)
        assert_same(s, m)
        assert g.logical_size == L
        assert int(node.count[0]) == model.count
    assert L < n   # samples finished and were compacted away
    # the loop's later iterations and the outer graph ran at the replay's size
    assert seen == expect_seen
    assert not s["alive"][g.logical_size:].any()
    # to completion in one call, then the contract: in original order, the same as
    # the step without compaction
    done = g.launch_until_done(1000)
    r = 7 + done
    assert g.logical_size == 0 and not s["alive"].any()
    ref = {"age": np.minimum(life, 3 * r), "x": particles(n, 1)["x"] + 0.5 * np.minimum(life, 3 * r)}
    np.testing.assert_array_equal(node.scatter_back(s["age"]), ref["age"])
    np.testing.assert_allclose(node.scatter_back(s["x"]), ref["x"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_compaction_in_a_branch_taken_on_some_replays(threads, n_threads):
    """Replays that take the other branch keep the logical size, also one retuned by
    set_logical_size (the size source is seeded with the size before every replay)."""
    threads(n_threads)
    n = 2000
    s = particles(n, 2)
    alive, x = s["alive"], s["x"]
    alive[::3] = False
    m = copies(s)
    when = np.zeros(1, bool)
    then = Graph()
    then.add_node(compact(alive, {"x": x}, ids=s["ids"]), "compact")
    other = Graph()
    other.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"x": x}), "double")
    g = Graph()
    g.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}, where={"alive": alive}), "step")
    g.add_node(if_else({"when": when}, then, other), "maybe")
    g.build()
    model = Model({k: m[k] for k in ("alive", "x", "ids")})
    L = n

    def replay(take):
        nonlocal L
        when[0] = take
        live = m["alive"][:L].copy()
        m["x"][:L][live] += 1.0
        if take:
            L = model.run(L)
        else:
            m["x"][:L] *= 2.0
        g.launch(1)
        assert_same(s, m)
        assert g.logical_size == L

    for take in (False, True, False, False):
        replay(take)
    assert L == n - len(range(0, n, 3))
    g.set_logical_size(100)       # retune: the untaken branch keeps it
    L = 100
    replay(False)
    m["alive"][50:100] = alive[50:100] = False
    replay(True)
    assert L == 50
    replay(False)
    g.set_logical_size(n)         # back to all of them (the finished are behind)
    L = n
    replay(False)
    replay(True)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_reorder_in_a_body_moves_the_arrays_it_names(threads, n_threads):
    threads(n_threads)
    n = 1500
    rng = np.random.default_rng(4)
    key = rng.integers(0, 4, n)
    x = rng.standard_normal(n)
    tag = np.arange(n) * 3
    ids = np.arange(n, dtype=np.int64)
    m = {"key": key.copy(), "x": x.copy(), "tag": tag.copy(), "ids": ids.copy()}
    rounds, more = np.zeros(1, np.int64), np.zeros(1, bool)

    def tick():
        rounds[0] += 1
        more[0] = rounds[0] < 3
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), "inc")
    body.add_node(reorder(key, {"x": x, "tag": tag}, n_keys=4, ids=ids), "sort")
    # a new key per sample after the sort, so the next iteration sorts again
    body.add_node(ufunc(np.add, {"key": key}, 1, out={"key": key}), "bump")
    body.add_node(ufunc(np.remainder, {"key": key}, 4, out={"key": key}), "wrap")
    body.add_node(opaque(tick, updates={"rounds": rounds, "more": more}), "tick")
    g = Graph()
    g.add_node(opaque(lambda: (rounds.fill(0), more.fill(True)) and None,
                      writes={"rounds": rounds, "more": more}), "reset")
    g.add_node(while_loop({"more": more}, body), "loop")
    g.build()
    g.set_logical_size(1000)      # the samples past it stay where they are
    for _ in range(2):
        g.launch(1)
        for _ in range(3):
            m["x"][:1000] += 1.0
            order = np.argsort(m["key"][:1000], kind="stable")
            for a in m.values():
                a[:1000] = a[:1000][order]
            m["key"][:1000] = (m["key"][:1000] + 1) % 4
    for k, a in m.items():
        np.testing.assert_array_equal({"key": key, "x": x, "tag": tag, "ids": ids}[k], a, err_msg=k)
    assert g.logical_size == 1000


@pytest.mark.parametrize("n_threads", [1, 2])
def test_compaction_to_zero_live_samples_inside_a_loop(threads, n_threads):
    """Every sample dies in the first iteration: the loop still runs until its own
    condition ends it (at the replay's size), the next replay runs at 0, and
    launch_until_done stops."""
    threads(n_threads)
    n = 777
    s = particles(n, 3)
    alive, x, ids = s["alive"], s["x"], s["ids"]
    k, more = np.zeros(1, np.int64), np.zeros(1, bool)
    seen = []

    def count(start, stop):
        seen.append(stop)
        k[0] += 1
        more[0] = k[0] < 4
    body = Graph()
    body.add_node(ufunc(np.logical_and, {"alive": alive}, False, out={"alive": alive}), "die")
    body.add_node(compact(alive, {"x": x}, ids=ids), "compact")
    body.add_node(opaque(count, updates={"k": k, "more": more}, sized=True,
                         per_sample=[]), "count")
    g = Graph()
    g.add_node(opaque(lambda: (k.fill(0), more.fill(True)) and None, writes={"k": k, "more": more}), "reset")
    g.add_node(while_loop({"more": more}, body, max_iterations=10), "loop")
    g.build()
    g.launch(1)
    assert seen == [n] * 4 and g.logical_size == 0 and not alive.any()
    g.launch(2)
    assert seen[4:] == [0] * 8 and g.logical_size == 0
    assert g.launch_until_done(5) == 0
    g.set_logical_size(10)        # retune: all finished, the next compaction finds 0 live
    assert g.launch_until_done(5) == 1
    assert seen[-4:] == [10] * 4 and g.logical_size == 0


@pytest.mark.parametrize("n_threads", [1, 2])
def test_nested_bodies_and_a_subgraph_used_twice_that_compacts(threads, n_threads):
    """while -> if_else -> subgraph(compacting body), the same subgraph also at top level:
    one compaction node, run several times a replay; the next size is its last run's."""
    threads(n_threads)
    n = 1200
    rng = np.random.default_rng(8)
    life = rng.integers(1, 30, n)
    s = particles(n, 4)
    alive, x, age, ids = s["alive"], s["x"], s["age"], s["ids"]
    m = copies(s)
    it, more, odd = np.zeros(1, np.int64), np.zeros(1, bool), np.zeros(1, bool)

    def kill(start, stop):
        alive[start:stop] &= age[start:stop] < life[ids[start:stop]]
    step = Graph()
    step.add_node(ufunc(np.add, {"age": age}, 1, out={"age": age}, where={"alive": alive}), "older")
    step.add_node(opaque(kill, reads={"age": age, "ids": ids}, updates={"alive": alive}, sized=True), "kill")
    step.add_node(compact(alive, {"x": x, "age": age}, ids=ids, min_dead_fraction=0.1), "compact")

    def tick():
        it[0] += 1
        more[0] = it[0] < 3
        odd[0] = it[0] % 2 == 1
    inner = Graph()
    inner.add_node(subgraph(step), "step")
    branch = Graph()
    branch.add_node(opaque(tick, updates={"it": it, "more": more, "odd": odd}), "tick")
    branch.add_node(if_else({"odd": odd}, inner), "maybe")
    g = Graph()
    g.add_node(opaque(lambda: (it.fill(0), more.fill(True)) and None, writes={"it": it, "more": more}), "reset")
    g.add_node(while_loop({"more": more}, branch), "loop")
    g.add_node(subgraph(step), "again")
    g.build()
    model = Model({k: m[k] for k in ("alive", "x", "age", "ids")}, min_dead_fraction=0.1)

    def run_step(L):
        live = m["alive"][:L].copy()
        m["age"][:L][live] += 1
        m["alive"][:L] &= m["age"][:L] < life[m["ids"][:L]]
        return model.run(L)

    L = n
    for _ in range(12):
        g.launch(1)
        nxt = L
        for i in range(1, 4):         # tick: it = 1, 2, 3; odd on 1 and 3
            if i % 2 == 1:
                nxt = run_step(L)
        L = run_step(L)               # "again": the replay's last run
        assert_same(s, m)
        assert g.logical_size == L
    assert L < n


def test_two_compactions_and_a_reorder_after_one_in_a_body_are_refused():
    n = 8
    alive, x, key = np.ones(n, bool), np.zeros(n), np.zeros(n, np.int64)
    body = Graph()
    body.add_node(compact(alive, {"x": x, "key": key}), "c")
    g = Graph()
    g.add_node(compact(alive, {"x": x}), "top")
    with pytest.raises(ValueError, match="at most one compaction node, control-flow bodies included"):
        g.add_node(subgraph(body), "sub")
    assert g.nodes == ["top"]
    other = Graph()
    other.add_node(compact(alive, {"x": x}), "c2")
    with pytest.raises(ValueError, match=r"two compaction nodes, node 'c' \(stage 0\) and node 'c2'"):
        if_else({"w": np.ones(1, bool)}, body, other)
    # a reorder after the body's compaction, at top level or in a later body
    g = Graph()
    g.add_node(subgraph(body), "sub")
    with pytest.raises(ValueError, match="before compact"):
        g.add_node(reorder(key, {"alive": alive, "x": x}, n_keys=2), "sort")
    sorts = Graph()
    sorts.add_node(reorder(key, {"alive": alive, "x": x}, n_keys=2), "sort")
    with pytest.raises(ValueError, match="before compact"):
        g.add_node(subgraph(sorts), "later")
    with pytest.raises(ValueError, match="compaction in one branch and a reorder in another"):
        if_else({"w": np.ones(1, bool)}, body, sorts)
    # the reorder before the compaction: in the same body, or before the control node
    both = Graph()
    ids = np.arange(n, dtype=np.int64)
    both.add_node(reorder(key, {"alive": alive, "x": x}, n_keys=2, ids=ids), "sort")
    both.add_node(compact(alive, {"x": x, "key": key}, ids=ids), "c")
    g = Graph()
    g.add_node(while_loop({"w": np.zeros(1, bool)}, both), "loop")
    g.add_node(subgraph(both), "again")     # the same compaction node: one
    g.build().launch(1)
    h = Graph()
    h.add_node(subgraph(sorts), "first")
    h.add_node(subgraph(body), "then")
    h.build().launch(1)


def test_a_fused_run_in_a_body_ends_at_the_compaction(threads):
    threads(2)
    n = 4096
    s = particles(n, 6)
    alive, x, ids = s["alive"], s["x"], s["ids"]
    alive[1::2] = False
    y = np.zeros(n)
    m = copies(s)
    my = y.copy()
    body = Graph()
    body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}, where={"alive": alive}), "a")
    body.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"x": x}, where={"alive": alive}), "b")
    body.add_node(compact(alive, {"x": x, "y": y}, ids=ids), "compact")
    body.add_node(ufunc(np.add, {"x": x}, 3.0, out={"y": y}), "c")
    body.add_node(ufunc(np.multiply, {"y": y}, 0.5, out={"y": y}), "d")
    g = Graph()
    g.add_node(subgraph(body), "sub")
    g.build(cpu=eagle.CpuOptions(fuse=64))
    notes = "\n".join(g.plan().bodies)
    assert "[fused 0-1, tile 64]" in notes and "[fused 3-4, tile 64]" in notes
    model = Model({"alive": m["alive"], "x": m["x"], "y": my, "ids": m["ids"]})
    L = n
    for _ in range(3):
        g.launch(1)
        live = m["alive"][:L].copy()
        m["x"][:L][live] += 1.0
        m["x"][:L][live] *= 2.0
        nxt = model.run(L)
        my[:L] = (m["x"][:L] + 3.0) * 0.5   # at the replay's size, finished samples too
        L = nxt
        assert_same(s, m)
        np.testing.assert_array_equal(y, my)
        assert g.logical_size == L == n // 2


def test_a_compacting_loop_on_the_team_of_two_terminates():
    """A hang guard: a while loop whose body compacts, on 2 threads on the team, run in a
    subprocess with a timeout."""
    code = textwrap.dedent("""
        import numpy as np, eagle
        from eagle.graph import Graph, compact, opaque, ufunc, while_loop
        eagle.set_num_threads(2)
        n = 200_000
        alive, x = np.ones(n, bool), np.zeros(n)
        k, more = np.zeros(1, np.int64), np.ones(1, bool)
        def tick(start, stop):
            k[0] += 1
            alive[start + k[0] - 1::50] = False
            more[0] = k[0] < 20
        body = Graph()
        body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}, where={"alive": alive}), "inc")
        body.add_node(opaque(tick, updates={"k": k, "more": more, "alive": alive}, sized=True,
                             per_sample=["alive"]), "tick")
        body.add_node(compact(alive, {"x": x}, min_dead_fraction=0.0), "compact")
        g = Graph()
        g.add_node(opaque(lambda: (k.fill(0), more.fill(True)) and None, writes={"k": k, "more": more}), "reset")
        g.add_node(while_loop({"more": more}, body, max_iterations=100), "loop")
        g.build(cpu=eagle.CpuOptions(teams="parallel"))
        for _ in range(3):
            g.launch(1)
        print(g.logical_size, int(alive.sum()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    size, live = map(int, out.stdout.split())
    assert size == live > 0
