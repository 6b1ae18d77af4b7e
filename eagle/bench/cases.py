"""The graphs eagle is timed on: defined once, shared by ``python -m eagle.bench``, the tour
(``python -m eagle``), the asv suite (``asv_bench/``) and the tests.

**The seed graph** (the documentation page "How eagle records and replays a graph"):
x = arange(4); l: left = 2x and r: right = x + 1 side by side, then join: out = left +
right, so out = [1, 4, 7, 10]. It is defined once, here, in three forms:

* :func:`seed_functions` -- the page's three functions (counting their calls into a
  ``calls`` dict, as the page's do, when one is given): what a plain Python loop calls,
  the reference every eagle form is timed against;
* :func:`seed_graph` -- those functions as opaque nodes (:func:`seed_opaque_graph`
  records the shape for any three functions and arrays, e.g. device arrays);
* :func:`seed_ufunc_graph` -- the same arithmetic as ufunc nodes (:func:`seed_ufunc_calls`:
  the NumPy calls they stand for), and :func:`native_seed_graph` -- as built-in native
  kernels (nogil C).

**Other graphs**: the native diamond (a = 2x, b = 3x, out = a + b), a chain of native
nodes, a wide stage, one native node over millions of doubles, a compute-bound
polynomial node, a chain of ufunc nodes, the built-in kernels alone, and the
recording shapes (:data:`RECORDING_SHAPES`).

**Cases** (:class:`Case`) pair a graph with what ``python -m eagle.bench``'s peers need
to run the same work (:func:`bench_cases` lists them in the table's order).

Nothing here runs or times anything when imported.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

import eagle
from eagle import kernels
from eagle.graph import native, opaque, ufunc

from .chelpers import PLAIN_LOOP_NAME, ctypes_call
from .timing import Runner, python_loop_runner

#: samples of a "tiny" array (the seed graph's four)
TINY = 4
#: samples of the large single-node graphs (4 million doubles: 32 MB per array)
BIG = 4_000_000
#: what the seed graph computes into ``out`` (for x = arange(4))
SEED_OUT = (1.0, 4.0, 7.0, 10.0)


def _amount(size):
    return f"{size / 1e6:g}M" if size >= 1_000_000 else f"{size:,}"


# ---- the seed graph, defined once ----------------------------------------------------

class SeedGraph(NamedTuple):
    """A form of the seed graph: the graph, its arrays (x, left, right, out) and the page's
    three functions on those arrays (run_l, run_r, run_join)."""

    graph: eagle.Graph
    arrays: tuple
    fns: tuple

    @property
    def out(self):
        return self.arrays[3]


def seed_arrays(size=TINY, xp=np):
    """The seed page's arrays (x, left, right, out): x = arange(size), the others zeros;
    ``xp``: the array module (NumPy, or e.g. CuPy)."""
    return xp.arange(float(size)), xp.zeros(size), xp.zeros(size), xp.zeros(size)


def seed_calls():
    """A fresh call counter, as the seed page's ``calls``."""
    return {"l": 0, "r": 0, "join": 0}


def seed_functions(arrays=None, calls=None):
    """The seed page's three functions, as a plain loop would call them:
    ((x, left, right, out), (run_l, run_r, run_join)).

    ``arrays``: the arrays they work on (default: fresh :func:`seed_arrays`); ``calls``: a
    dict the functions count their calls into, as the page's do (None: no counting, the
    bare arithmetic)."""
    x, left, right, out = seed_arrays() if arrays is None else arrays
    if calls is None:
        def run_l():
            left[:] = 2 * x

        def run_r():
            right[:] = x + 1

        def run_join():
            out[:] = left + right
    else:
        def run_l():
            calls["l"] += 1
            left[:] = 2 * x

        def run_r():
            calls["r"] += 1
            right[:] = x + 1

        def run_join():
            calls["join"] += 1
            out[:] = left + right

    return (x, left, right, out), (run_l, run_r, run_join)


def seed_opaque_graph(fns, arrays):
    """The seed graph's shape with three opaque nodes: ``fns`` (run_l, run_r, run_join)
    declared on ``arrays`` (x, left, right, out) -- l and r side by side, then join."""
    run_l, run_r, run_join = fns
    x, left, right, out = arrays
    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return g


def seed_graph(arrays=None, calls=None):
    """The seed page's graph: its three functions (see :func:`seed_functions`) as opaque nodes."""
    arrays, fns = seed_functions(arrays, calls)
    return SeedGraph(seed_opaque_graph(fns, arrays), arrays, fns)


def seed_ufunc_calls(arrays, xp=np):
    """The seed graph's arithmetic as the ufunc calls a ufunc node makes (writing in place,
    ``out=``: no temporaries): [left = 2x, right = x + 1, out = left + right]."""
    x, left, right, out = arrays
    return [lambda: xp.multiply(x, 2.0, out=left), lambda: xp.add(x, 1.0, out=right),
            lambda: xp.add(left, right, out=out)]


def seed_ufunc_graph(arrays=None, calls=None):
    """The seed graph as ufunc nodes: NumPy's own inner loops, run nogil by eagle.
    ``fns`` are the page's functions on the same arrays (the loop it is timed against)."""
    arrays, fns = seed_functions(arrays, calls)
    x, left, right, out = arrays
    g = eagle.Graph()
    g.add_group([ufunc(np.multiply, {"x": x}, 2.0, out={"a": left}),
                 ufunc(np.add, {"x": x}, 1.0, out={"b": right})], names=["l", "r"])
    g.add_node(ufunc(np.add, {"a": left}, {"b": right}, out={"out": out}), name="join")
    return SeedGraph(g, arrays, fns)


def native_seed_graph(arrays=None, calls=None):
    """The seed graph's arithmetic as nogil C kernels: left = 2x, right = 1 + x, out = left + right.
    ``fns`` are the page's functions on the same arrays."""
    arrays, fns = seed_functions(arrays, calls)
    x, left, right, out = arrays
    g = eagle.Graph()
    g.add_group([native(kernels.scale(2.0), reads={"x": x}, writes={"a": left}),
                 native(kernels.polynomial([1.0, 1.0]), reads={"x": x}, writes={"b": right})],
                names=["l", "r"])
    g.add_node(native(kernels.add(), reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return SeedGraph(g, arrays, fns)


# ---- other graphs -------------------------------------------------------------------

def record_named(named_nodes, groups):
    """A graph of ``named_nodes`` (name -> node), recorded ``groups`` (lists of names) in order:
    a list of one name is add_node, of several one add_group."""
    g = eagle.Graph()
    for names in groups:
        nodes = [named_nodes[n] for n in names]
        if len(nodes) == 1:
            g.add_node(nodes[0], name=names[0])
        else:
            g.add_group(nodes, names=names)
    return g


def record(nodes):
    """A graph with ``nodes`` recorded one by one, named n0, n1, ..."""
    return record_named({f"n{i}": node for i, node in enumerate(nodes)},
                        [[f"n{i}"] for i in range(len(nodes))])


DIAMOND_GROUPS = [["l", "r"], ["join"]]


def diamond_nodes(size=TINY):
    """The native diamond's nodes by name: a = 2x and b = 3x side by side, then out = a + b."""
    x, a, b, out = np.arange(float(size)), np.zeros(size), np.zeros(size), np.zeros(size)
    return {"l": native(kernels.scale(2.0), reads={"x": x}, writes={"a": a}),
            "r": native(kernels.scale(3.0), reads={"x": x}, writes={"b": b}),
            "join": native(kernels.add(), reads={"a": a, "b": b}, writes={"out": out})}


def diamond_graph(size=TINY):
    return record_named(diamond_nodes(size), DIAMOND_GROUPS)


def chain_nodes(n, size=TINY):
    """n native nodes, each reading what the one before wrote: n stages."""
    bufs = [np.arange(float(size))] + [np.zeros(size) for _ in range(n)]
    return [native(kernels.scale(1.0), reads={"x": bufs[i]}, writes={"y": bufs[i + 1]})
            for i in range(n)]


def chain_graph(n, size=TINY):
    return record(chain_nodes(n, size))


def wide_graph(n=8, size=TINY):
    """One stage of n native nodes, each scaling the same x into its own array."""
    x = np.arange(float(size))
    g = eagle.Graph()
    g.add_group([native(kernels.scale(float(i + 1)), reads={"x": x}, writes={"y": np.zeros(size)})
                 for i in range(n)], names=[f"w{i}" for i in range(n)])
    return g


def big_nodes(size):
    """One native node, y = 2x, over ``size`` doubles."""
    x, y = np.ones(size), np.zeros(size)
    return {"scale": native(kernels.scale(2.0), reads={"x": x}, writes={"y": y})}


def big_graph(size):
    return record_named(big_nodes(size), [["scale"]])


def polynomial_coefficients(degree=31):
    return np.linspace(0.1, 0.01, degree + 1)


def big_compute_nodes(size, degree=31):
    """One compute-bound node: a polynomial of degree 31 per sample."""
    x, y = np.random.default_rng(0).random(size), np.zeros(size)
    return {"poly": native(kernels.polynomial(polynomial_coefficients(degree)), reads={"x": x},
                           writes={"y": y})}


def ufunc_chain_graph(size):
    """y = ((x * 1.5 + 0.25) * 0.5) + x: four ufunc nodes. Returns (graph, (x, t, y), the four
    NumPy calls they stand for)."""
    x, t, y = np.random.default_rng(0).random(size), np.zeros(size), np.zeros(size)
    steps = [(np.multiply, {"x": x}, 1.5, {"t": t}), (np.add, {"t": t}, 0.25, {"t": t}),
             (np.multiply, {"t": t}, 0.5, {"t": t}), (np.add, {"t": t}, {"x": x}, {"y": y})]
    g = eagle.Graph()
    for k, (uf, a, b, o) in enumerate(steps):
        g.add_node(ufunc(uf, a, b, out=o), name=f"{uf.__name__}{k}")
    calls = [lambda: np.multiply(x, 1.5, out=t), lambda: np.add(t, 0.25, out=t),
             lambda: np.multiply(t, 0.5, out=t), lambda: np.add(t, x, out=y)]
    return g, (x, t, y), calls


def ufunc_pair_graph(size):
    """y = 1.0000001 x, z = y + x: two ufunc nodes, each its own stage, so each stage's team
    is chosen (and verified) on its own. Returns (graph, (x, y, z), the two NumPy calls)."""
    x, y, z = np.random.default_rng(0).random(size), np.zeros(size), np.zeros(size)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, {"x": x}, 1.0000001, out={"y": y}), name="scale")
    g.add_node(ufunc(np.add, {"y": y}, {"x": x}, out={"z": z}), name="sum")
    calls = [lambda: np.multiply(x, 1.0000001, out=y), lambda: np.add(y, x, out=z)]
    return g, (x, y, z), calls


def builtin_kernel_graph(kernel, size, degree=31):
    """One built-in kernel, ``"scale"`` (y = 2x) or ``"polynomial"`` (degree 31), on random x.
    Returns (graph, x, y, coefficients)."""
    x, y = np.random.default_rng(0).random(size), np.zeros(size)
    coefficients = polynomial_coefficients(degree)
    g = eagle.Graph()
    if kernel == "scale":
        g.add_node(native(kernels.scale(2.0), reads={"x": x}, writes={"y": y}), name="scale")
    elif kernel == "polynomial":
        g.add_node(native(kernels.polynomial(coefficients), reads={"x": x}, writes={"y": y}), name="poly")
    else:
        raise ValueError(f"unknown built-in kernel {kernel!r}")
    return g, x, y, coefficients


def numpy_horner(x, coefficients, acc):
    """A callable evaluating the polynomial into ``acc`` with NumPy (Horner, out=)."""
    def horner():
        acc.fill(coefficients[-1])
        for ck in coefficients[-2::-1]:
            np.multiply(acc, x, out=acc)
            np.add(acc, ck, out=acc)
    return horner


def make_graph(kind):
    """Small graphs by name: seed, diamond, chain<n>, wide<n>."""
    if kind == "seed":
        return seed_graph().graph
    if kind == "diamond":
        return diamond_graph()
    if kind.startswith("chain"):
        return chain_graph(int(kind[len("chain"):]))
    if kind.startswith("wide"):
        return wide_graph(int(kind[len("wide"):]))
    raise ValueError(f"unknown graph {kind!r}")


# ---- recording: shapes of graph that must record in linear time ---------------------

#: what the recording rows time; every shape records n native nodes that read one shared x
RECORDING_SHAPES = {
    "separate": "n nodes on separate arrays, add_node one by one",
    "group": "one add_group of the n nodes on separate arrays",
    "slices": "n nodes writing disjoint slices of one buffer",
}
RECORDING_SIZES = (4_000, 40_000)


def recording_nodes(shape, n, size=TINY):
    """The n nodes of a recording shape (see RECORDING_SHAPES), made before any timing."""
    x = np.arange(float(size))
    if shape == "slices":
        buf = np.zeros(size * n)
        outs = [buf[i * size:(i + 1) * size] for i in range(n)]
    elif shape in ("separate", "group"):
        outs = [np.zeros(size) for _ in range(n)]
    else:
        raise ValueError(f"unknown recording shape {shape!r}")
    k = kernels.scale(2.0)
    return [native(k, reads={"x": x}, writes={"y": y}) for y in outs]


def record_shape(shape, nodes):
    """A fresh graph with ``nodes`` recorded as the shape says (one group, or one by one)."""
    g = eagle.Graph()
    names = [f"n{i}" for i in range(len(nodes))]
    if shape == "group":
        g.add_group(nodes, names=names)
    else:
        for node, name in zip(nodes, names):
            g.add_node(node, name=name)
    return g


# ---- the cases of python -m eagle.bench ----------------------------------------------

@dataclass
class Case:
    """A graph and what the peers need to run the same work."""

    title: str
    samples: int
    graph: eagle.Graph
    fns: dict            # node name -> a no-argument callable doing the node's work
    kernel_nodes: dict = field(default_factory=dict)   # node name -> NativeNode (native graphs)
    big: bool = False
    #: peers(threads, tools) -> the runners to time beside eagle, for cases that bring their own
    peers: object = None

    @property
    def stages(self):
        return self.graph.stages

    @property
    def deps(self):
        """node name -> the names it must wait for."""
        out = {name: [] for name in self.graph.nodes}
        for before, after, _ in self.graph.dependencies:
            if before not in out[after]:
                out[after].append(before)
        return out


def seed_case():
    seed = seed_graph()
    run_l, run_r, run_join = seed.fns
    return Case("seed graph: 3 opaque nodes", TINY, seed.graph, {"l": run_l, "r": run_r, "join": run_join})


def _native_case(title, samples, named_nodes, groups, big=False):
    g = record_named(named_nodes, groups)
    fns = {name: ctypes_call(node, samples) for name, node in named_nodes.items()}
    return Case(title, samples, g, fns, kernel_nodes=dict(named_nodes), big=big)


def diamond_case():
    return _native_case("native diamond: 3 nodes", TINY, diamond_nodes(), DIAMOND_GROUPS)


def chain_case(n=10):
    nodes = {f"n{i}": node for i, node in enumerate(chain_nodes(n))}
    return _native_case(f"native chain: {n} nodes", TINY, nodes, [[k] for k in nodes])


def big_case(size):
    return _native_case(f"1 native node, {_amount(size)} doubles", size, big_nodes(size), [["scale"]],
                        big=True)


def big_compute_case(size, degree=31):
    """One compute-bound node (a polynomial of degree 31 per sample): how replays
    scale with threads when memory bandwidth does not cap them."""
    return _native_case(f"1 compute-bound node, {_amount(size)}", size, big_compute_nodes(size, degree),
                        [["poly"]], big=True)


def seed_ufunc_case():
    """The seed graph with ufunc nodes: the loops NumPy would run, without a Python call."""
    seed = seed_ufunc_graph()
    run_l, run_r, run_join = seed.fns
    fns = {"l": run_l, "r": run_r, "join": run_join}
    calls = seed_ufunc_calls(seed.arrays)

    def peers(threads, tools):
        loop = python_loop_runner([run_l, run_r, run_join], "Python loop, the seed's functions")
        loop.note = "goal: eagle <= 0.05x this"
        return [loop, python_loop_runner(calls, "Python loop, the same ufunc calls (out=)")]

    return Case("seed graph: 3 ufunc nodes", TINY, seed.graph, fns, peers=peers)


def ufunc_chain_case(size):
    """y = ((x * 1.5 + 0.25) * 0.5) + x: four ufunc nodes over millions of doubles."""
    g, _, calls = ufunc_chain_graph(size)

    def peers(threads, tools):
        r = python_loop_runner(calls, "NumPy, the same ufunc calls (out=)")
        r.note = "goal: eagle on 2 threads >= 1.5x faster than this"
        return [r]

    return Case(f"multiply-add chain: 4 ufunc nodes, {_amount(size)} doubles", size, g,
                dict(zip(g.nodes, calls)), big=True, peers=peers)


def ufunc_pair_case(size):
    """The pair of ufunc nodes the team choice was fooled on (issue 18): two stages over
    millions of doubles, each on the team only when the team's own timing says so."""
    g, _, calls = ufunc_pair_graph(size)

    def peers(threads, tools):
        r = python_loop_runner(calls, "NumPy, the same ufunc calls (out=)")
        r.note = "goal: eagle on 2 threads >= 1.5x faster than this"
        return [r]

    return Case(f"ufunc pair, team chosen per stage: 2 ufunc nodes, {_amount(size)} doubles", size, g,
                dict(zip(g.nodes, calls)), big=True, peers=peers)


def builtin_scale_case(size):
    """eagle.kernels.scale against the plain OpenMP C loop of y = a x."""
    g, x, y, _ = builtin_kernel_graph("scale", size)

    def peers(threads, tools):
        rs = []
        plain = tools.get("plain")
        if plain is not None:
            for t in sorted({threads, 1}, reverse=True):
                rs.append(Runner(PLAIN_LOOP_NAME, t,
                                 lambda n, t=t: plain.eagle_bench_plain_scale(
                                     n, t, size, 2.0, x.ctypes.data, y.ctypes.data)))
            rs[-1].note = "goal: eagle on 1 thread <= 1.05x this"
        rs.append(python_loop_runner([lambda: np.multiply(x, 2.0, out=y)], "NumPy np.multiply(out=)"))
        return rs

    return Case(f"built-in kernel scale, {_amount(size)} doubles", size, g, {}, big=True, peers=peers)


def builtin_polynomial_case(size, degree=31):
    """eagle.kernels.polynomial against the plain C loop and NumPy's Horner loop."""
    g, x, y, coefficients = builtin_kernel_graph("polynomial", size, degree)
    horner = numpy_horner(x, coefficients, np.zeros(size))

    def peers(threads, tools):
        rs = []
        plain = tools.get("plain")
        if plain is not None:
            for t in sorted({threads, 1}, reverse=True):
                rs.append(Runner(PLAIN_LOOP_NAME + ", scalar", t,
                                 lambda n, t=t: plain.eagle_bench_plain_polynomial(
                                     n, t, size, coefficients.ctypes.data, degree, x.ctypes.data,
                                     y.ctypes.data)))
            rs[-1].note = ("the same Horner code and flags, not vectorised: eagle's kernel is "
                           "blocked for the vectoriser, gcc leaves this loop scalar")
        rs.append(python_loop_runner([horner], "NumPy Horner loop (out=)"))
        rs.append(python_loop_runner([lambda: np.polynomial.polynomial.polyval(x, coefficients)],
                                     "np.polynomial.polynomial.polyval"))
        return rs

    return Case(f"built-in kernel polynomial (degree {degree}), {_amount(size)}", size, g, {}, big=True,
                peers=peers)


def bench_cases(big=BIG):
    """The cases of ``python -m eagle.bench``, in the table's order."""
    return [seed_case(), diamond_case(), chain_case(10), big_case(big), big_compute_case(big // 4),
            seed_ufunc_case(), ufunc_chain_case(big), ufunc_pair_case(big), builtin_scale_case(big),
            builtin_polynomial_case(big // 4)]


def measure_recording(sizes=None, rounds=3):
    """{(shape, n): best seconds} of recording the shapes of ``eagle.bench.cases.RECORDING_SHAPES``,
    interleaved round by round, the garbage collector paused while a recording is timed
    (as ``timeit`` does). ``sizes``: node counts (default ``RECORDING_SIZES``)."""
    best = {}
    for n in (RECORDING_SIZES if sizes is None else sizes):
        for _ in range(rounds):
            for shape in RECORDING_SHAPES:
                nodes = recording_nodes(shape, n)
                gc.collect()
                gc.disable()
                try:
                    t0 = time.perf_counter()
                    record_shape(shape, nodes)
                    dt = time.perf_counter() - t0
                finally:
                    gc.enable()
                best[shape, n] = min(best.get((shape, n), dt), dt)
    return best


def normal_graph(size, key=2024):
    """One ``normal`` node over ``size`` doubles (Philox4x32-10 + Box-Muller), and its
    output; the reference is NumPy's ``default_rng().standard_normal(out=)``."""
    from eagle.graph import normal

    z = np.empty(size)
    g = eagle.Graph()
    g.add_node(normal({"z": z}, key=key), name="normal")
    return g, z


#: the distribution nodes ``python -m eagle.bench`` and asv time, each beside NumPy's
#: ``Generator`` drawing the same distribution: (name, node arguments, output dtype,
#: the NumPy call on a Generator ``rng`` for ``size`` samples)
DISTRIBUTIONS = {
    "exponential": (dict(scale=1.0), np.float64, lambda rng, out: rng.standard_exponential(out=out)),
    "integers [0, 100)": (dict(low=0, high=100), np.int64, lambda rng, out: rng.integers(0, 100, out.size)),
    "poisson lam=5": (dict(lam=5.0), np.int64, lambda rng, out: rng.poisson(5.0, out.size)),
    "poisson lam=100": (dict(lam=100.0), np.int64, lambda rng, out: rng.poisson(100.0, out.size)),
    "binomial n=100 p=0.05": (dict(n=100, p=0.05), np.int64, lambda rng, out: rng.binomial(100, 0.05, out.size)),
    "binomial n=1000 p=0.3": (dict(n=1000, p=0.3), np.int64, lambda rng, out: rng.binomial(1000, 0.3, out.size)),
}


def distribution_graph(name, size, key=2024):
    """One distribution node (``DISTRIBUTIONS[name]``) over ``size`` samples, its output
    and its NumPy reference, a callable ``ref(rng, out)``."""
    from eagle import graph

    kw, dtype, ref = DISTRIBUTIONS[name]
    out = np.empty(size, dtype=dtype)
    g = eagle.Graph()
    g.add_node(getattr(graph, name.split()[0])({"out": out}, key=key, **kw), name=name.split()[0])
    return g, out, ref
