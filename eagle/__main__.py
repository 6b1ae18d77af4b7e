"""``python -m eagle``: the tour of record -> build -> replay -> retune, with a timing line.

It follows the documentation page "How eagle records and replays a graph":
the seed graph of three opaque nodes drawn before and after build(),
replayed three times, then a graph of native kernels retuned with
set_logical_size(), and launch(n) timed against a plain Python loop calling
the same three functions; last, the same graph as ufunc nodes, timed too.
"""
import argparse
import time

import numpy as np

import eagle
from eagle import kernels
from eagle.graph import native, opaque


def seed_graph():
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    calls = {"l": 0, "r": 0, "join": 0}

    def run_l():
        calls["l"] += 1
        left[:] = 2 * x

    def run_r():
        calls["r"] += 1
        right[:] = x + 1

    def run_join():
        calls["join"] += 1
        out[:] = left + right

    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    return g, calls, out, (run_l, run_r, run_join)


def time_against_loop(g, fns, n, repeats):
    """Best-of-`repeats` seconds per replay: eagle's launch(n) and a plain Python loop, interleaved."""
    f1, f2, f3 = fns

    def python_loop(n):
        for _ in range(n):
            f1()
            f2()
            f3()

    t_loop, t_eagle = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        python_loop(n)
        t1 = time.perf_counter()
        g.launch(n)
        t2 = time.perf_counter()
        t_loop.append(t1 - t0)
        t_eagle.append(t2 - t1)
    return min(t_eagle) / n, min(t_loop) / n


def tour_ufunc_nodes(g_opaque, fns, replays, repeats):
    """The seed graph again, as ufunc nodes: NumPy's own loops run nogil, no Python call per replay."""
    from eagle.graph import ufunc

    print("\n== The same graph as ufunc nodes ==")
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    u = eagle.Graph()
    u.add_group([ufunc(np.multiply, {"x": x}, 2.0, out={"a": left}),
                 ufunc(np.add, {"x": x}, 1.0, out={"b": right})], names=["l", "r"])
    u.add_node(ufunc(np.add, {"a": left}, {"b": right}, out={"out": out}), name="join")
    u.build()
    u.launch(3)
    print(u)
    print(out)
    per_ufunc, per_loop = time_against_loop(u, fns, replays, repeats)
    print(f"launch({replays}) with ufunc nodes: {per_ufunc * 1e9:.0f} ns per replay; ratio "
          f"ufunc graph/loop {per_ufunc / per_loop:.3f} (the plain loop of the seed's functions)")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m eagle", description=__doc__.splitlines()[0])
    p.add_argument("--replays", type=int, default=20_000, help="replays per timed launch")
    p.add_argument("--repeats", type=int, default=15, help="timed launches (the best counts)")
    args = p.parse_args(argv)

    print("== 1. Record: nothing runs yet ==")
    g, calls, out, fns = seed_graph()
    print(g)
    print("\n== 2. Instantiate ==")
    g.build()
    print(g)
    print("\n== 3. Replay ==")
    g.launch(3)
    print(calls)
    print(out)

    print("\n== 4. Retune: native kernels over 8 samples, then only the first 3 ==")
    x = np.arange(8.0)
    y, z = np.zeros(8), np.zeros(8)
    k = eagle.Graph()
    k.add_node(native(kernels.scale(2.0), reads={"x": x}, writes={"y": y}), name="scale")
    k.add_node(native(kernels.axpy(1.0), reads={"y": y}, writes={"z": z}), name="axpy")
    k.build()
    k.launch(1)
    print(k)
    print("z =", z)
    k.set_logical_size(3)
    z[:] = 0
    k.launch(1)
    print(k._header())
    print("z =", z, " (samples 3.. untouched: no re-recording, no rebuild)")

    print("\n== Timing: the seed graph ==")
    per_eagle, per_loop = time_against_loop(g, fns, args.replays, args.repeats)
    print(f"launch({args.replays}): {per_eagle * 1e9:.0f} ns per replay; plain Python loop calling "
          f"the same 3 functions: {per_loop * 1e9:.0f} ns per replay; ratio eagle/loop "
          f"{per_eagle / per_loop:.2f} (best of {args.repeats}, {eagle.get_num_threads()} threads)")
    tour_ufunc_nodes(g, fns, args.replays, args.repeats)


if __name__ == "__main__":
    main()
