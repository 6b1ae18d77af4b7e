"""``python -m eagle``: the tour of capture, record -> build -> replay -> retune, then where the speed comes from.

It starts with the first way in: a plain NumPy step captured with ``eagle.capture``,
replayed, and checked against the step called eagerly. Then it follows the documentation page "How eagle records and replays a graph":
the seed graph of three opaque nodes drawn before and after build(),
replayed three times, then a graph of native kernels retuned with
set_logical_size(). Last, launch(n) is timed against a plain Python loop
calling the seed page's three functions, on the seed graph's 4 samples: with
the seed graph's opaque nodes (about the loop: each replay calls the same
Python functions) and with the same arithmetic as native C kernels and as ufunc
nodes (many times faster: at 4 samples a replay is all call overhead, which
eagle takes away). Then the same step at a real size (--size, 1,000,000
samples by default), where the arithmetic is the cost: eagle's ufunc and native
forms beside NumPy making the same ufunc calls (out=): eagle runs the same loops,
faster by splitting the samples across threads and by running consecutive ufunc
nodes tile by tile (one pass over memory instead of one per node).
"""
import argparse
import time

import numpy as np

import eagle
from eagle import kernels
from eagle._text import plain
# the seed graph, in all three forms, is defined once in eagle.bench.cases (shared with
# python -m eagle.bench, the asv suite and the tests)
from eagle.bench.cases import (TINY, native_seed_graph, seed_arrays, seed_calls, seed_graph,
                               seed_ufunc_calls, seed_ufunc_graph)
from eagle.bench.timing import fmt_time
from eagle.graph import native


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


# ---- the timing cases -----------------------------------------------------------------
# Each case is one function (replays, repeats) -> (what, seconds per replay with eagle,
# seconds per replay of the plain Python loop calling the seed page's three functions),
# listed in CASES; the table prints one line per case, in that order.

def case_opaque(replays, repeats):
    g, _, fns = seed_graph(calls=seed_calls())
    g.build()
    return ("opaque: 3 Python callables", *time_against_loop(g, fns, replays, repeats))


def _time_against_the_opaque_graph(what, g, out, replays, repeats):
    """Check that g computes what the opaque seed graph does, then time it beside the loop."""
    g.build()
    reference = seed_graph(calls=seed_calls())
    fns = reference.fns
    g.launch(1)
    fns[0](), fns[1](), fns[2]()
    assert np.array_equal(out, reference.out), f"the {what.split(':')[0]} seed graph must compute what the opaque one does"
    return (what, *time_against_loop(g, fns, replays, repeats))


def case_native(replays, repeats):
    seed = native_seed_graph()
    return _time_against_the_opaque_graph("native: 3 nogil C kernels", seed.graph, seed.out, replays, repeats)


def case_ufunc(replays, repeats):
    seed = seed_ufunc_graph()
    return _time_against_the_opaque_graph("ufunc: 3 NumPy ufunc nodes", seed.graph, seed.out, replays, repeats)


CASES = [case_opaque, case_native, case_ufunc]


def timing_table(replays, repeats, cases=None):
    """The lines the tour prints for its timing: one per case."""
    lines = [f"launch({replays}) of the seed graph ({TINY} samples), per replay, beside a plain",
             f"Python loop calling the seed page's 3 functions (best of {repeats}, "
             f"{eagle.get_num_threads()} threads):"]
    for case in cases or CASES:
        what, per_eagle, per_loop = case(replays, repeats)
        ratio = per_eagle / per_loop
        speed = f"{1 / ratio:.0f}x faster than the loop" if ratio < 0.5 else "about the loop"
        lines.append(f"  {what:27} {per_eagle * 1e9:7.0f} ns (loop {per_loop * 1e9:.0f} ns)  "
                     f"ratio eagle/loop {ratio:.3g}: {speed}")
    return lines


#: the seed graph's forms timed at a real size, beside NumPy making the same calls
REAL_SIZE_FORMS = [("ufunc: 3 NumPy ufunc nodes", seed_ufunc_graph),
                   ("native: 3 nogil C kernels", native_seed_graph)]


def real_size_table(size, repeats, replays=None):
    """The lines of the real-size timing: the seed step over `size` samples, eagle's ufunc
    and native forms beside a Python loop making the NumPy calls the ufunc nodes stand for
    (out=, no temporaries), so the comparison is of the same arithmetic."""
    # about 0.1-0.3 s per timed launch at 1e6 samples: a replay is three passes over 8 MB
    replays = replays or max(1, min(200, 20_000_000 // max(size, 1)))
    lines = [f"The same step over {size:,} samples, launch({replays}), per replay, beside NumPy",
             f"making the same 3 ufunc calls (out=) (best of {repeats}, "
             f"{eagle.get_num_threads()} threads):"]
    for what, make in REAL_SIZE_FORMS:
        seed = make(arrays=seed_arrays(size))
        seed.graph.build()
        seed.graph.launch(1)   # the first replays measure the costs that pick the stages' teams
        per_eagle, per_numpy = time_against_loop(seed.graph, seed_ufunc_calls(seed.arrays), replays,
                                                 repeats)
        ratio = float(f"{per_eagle / per_numpy:.2g}")   # as shown: the words agree with it
        speed = (f"{1 / ratio:.1f}x faster than NumPy" if ratio < 0.8 else
                 f"{ratio:.1f}x slower than NumPy" if ratio > 1.25 else "about NumPy")
        lines.append(f"  {what:27} {fmt_time(per_eagle):>9} (NumPy {fmt_time(per_numpy)})  "
                     f"ratio eagle/NumPy {ratio:.2g}: {speed}")
    return lines


def _seed_step(x, out):
    """The seed graph's three functions as the NumPy step a user writes."""
    left = x * 2.0
    right = x + 1.0
    out[...] = left + right


def capture_step():
    """The seed step captured: its picture, three replays, the same as three eager calls."""
    x, out = np.arange(4.0), np.zeros(4)
    g = eagle.capture(_seed_step, x, out)
    print(g)
    g.build().launch(3)
    expected = np.zeros(4)
    for _ in range(3):
        _seed_step(np.arange(4.0), expected)
    print("out =", out, "(three replays; calling the step eagerly gives", expected, ")")
    print("Nodes are named after the step's lines; what NumPy would allocate on every call is a")
    print("temporary the graph owns. What capture cannot see is declared by hand, as below.")


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m eagle", description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="More: python -m eagle.bench (a table against other ways of running a step), "
               "python -m eagle.bench.finished, and the documentation (docs/).")
    p.add_argument("--replays", type=int, default=20_000, help="replays per timed launch (default 20000)")
    p.add_argument("--repeats", type=int, default=15, help="timed launches per case; the best counts (default 15)")
    p.add_argument("--size", type=int, default=1_000_000,
                   help="samples of the real-size timing (default 1000000; 0 skips it)")
    args = p.parse_args(argv)
    if args.replays < 1 or args.repeats < 1:
        p.error("--replays and --repeats must be at least 1")
    if args.size < 0:
        p.error("--size must be at least 0")

    print("== 0. Capture: a NumPy step as it is written ==")
    capture_step()

    print("\n== 1. Record by hand: nothing runs yet ==")
    calls = seed_calls()
    seed = seed_graph(calls=calls)
    g, out = seed.graph, seed.out
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

    print("\n== 5. The same graph as ufunc nodes: same picture, same result ==")
    seed_u = seed_ufunc_graph()
    u, u_out = seed_u.graph, seed_u.out
    u.build()
    u.launch(3)
    print(u)
    print(u_out)

    print("\n== Timing: where the speed comes from ==")
    print("An opaque node is a Python call on every replay, so a graph of them costs about what a")
    print("Python loop calling the same functions costs; native nodes run as C, without the GIL.")
    print(f"At {TINY} samples a replay is almost all call overhead, which is what eagle removes:")
    for line in timing_table(args.replays, args.repeats):
        print(line)
    if args.size:
        print()
        print("At a real size the arithmetic is the cost: eagle runs the loops NumPy runs, faster")
        print("by splitting the samples across threads and by fusing the ufunc nodes into one pass")
        print("over memory, tile by tile (the 'fused' stage rows of the picture above).")
        for line in real_size_table(args.size, min(args.repeats, 5)):
            print(line)


if __name__ == "__main__":
    main()
