"""``python -m eagle.bench.finished``: what compaction of finished samples buys, and when it does not.

The step is a Monte Carlo transport step over particles, a native C kernel
(compiled with ``cc`` at run time, loaded with ctypes) that eagle runs over
samples [0, logical size): every live particle makes ``flights`` random
flights, and is absorbed with probability ``absorb`` per replay -- a steady
absorption rate, so the live count decays geometrically. A finished particle
is skipped (one byte read). Per particle the state is 57 bytes: alive (1),
RNG state (8), position (3 x 8), weight (8), steps (8), and the id map (8).

It times, best of k, each run on fresh particles:

* **to completion** -- with a compaction node, ``g.launch_until_done()``;
  without one, the same step replayed the same number of times over all the
  particles (``g.launch(R)``). Both end with identical particles (checked:
  the compacted state scattered back by the id map equals the other);
* **no particle dies** -- the same replays with and without a compaction node;
* **policies** -- compact every replay, every k-th, or once a fraction of the
  current samples has finished, for steps of several costs: the speedup over
  no compaction, and where compaction stops paying.

The issue's targets: at least 2x faster to completion with compaction, and
under 10% extra when no sample dies.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import platform
import time

import numpy as np

import eagle
from eagle.cpu.threads import have_openmp
from eagle.graph import compact, native, opaque
from eagle.native import CTYPES_KERNEL, Kernel

from .chelpers import compile_helper, find_cc

KERNEL_SOURCE = r"""
#include <stdint.h>

typedef struct { double absorb; int64_t flights; } transport_params;

static inline uint64_t next_u64(uint64_t *s)     /* xorshift64* */
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static inline double uniform(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

/* writes alive (uint8), rng (uint64), pos (3 doubles), weight (double), steps (int64) */
void transport(int64_t start, int64_t stop, char **d, const int64_t *s, void *user_data)
{
    const transport_params *p = (const transport_params *)user_data;
    for (int64_t i = start; i < stop; ++i) {
        uint8_t *alive = (uint8_t *)(d[0] + i * s[0]);
        if (!*alive)
            continue;                               /* finished: leave it alone */
        uint64_t r = *(uint64_t *)(d[1] + i * s[1]);
        double *pos = (double *)(d[2] + i * s[2]);
        double x = pos[0], y = pos[1], z = pos[2];
        for (int64_t k = 0; k < p->flights; ++k) {
            double l = uniform(&r);
            x += l * (uniform(&r) - 0.5);
            y += l * (uniform(&r) - 0.5);
            z += l * (uniform(&r) - 0.5);
        }
        pos[0] = x; pos[1] = y; pos[2] = z;
        *(double *)(d[3] + i * s[3]) *= 0.99;
        *(int64_t *)(d[4] + i * s[4]) += 1;
        if (uniform(&r) < p->absorb)
            *alive = 0;
        *(uint64_t *)(d[1] + i * s[1]) = r;
    }
}
"""

STATE = ("alive", "rng", "pos", "weight", "steps")

_LIB = None


class TransportParams(ctypes.Structure):
    _fields_ = [("absorb", ctypes.c_double), ("flights", ctypes.c_int64)]


def compile_kernel():
    """The transport kernel's library (compiled once per process, by
    ``eagle.bench.chelpers``), or None without a C compiler."""
    global _LIB
    if _LIB is not None:
        return _LIB
    if find_cc() is None:
        return None
    lib, why = compile_helper(KERNEL_SOURCE, "transport", [["-O2"]])
    if lib is None:
        raise RuntimeError(why)
    _LIB = lib
    return _LIB


def particles(n, seed=0):
    """Fresh particles, every page of every array already written (no first-touch in the timings)."""
    rng = np.random.default_rng(seed)
    return {
        "alive": np.ones(n, dtype=bool),
        "rng": rng.integers(1, 2**63, n, dtype=np.uint64),
        "pos": np.full((n, 3), 0.0),
        "weight": np.full(n, 1.0),
        "steps": np.full(n, 0, dtype=np.int64),
    }


def _numpy_transport(s, absorb, flights):
    """The kernel in NumPy, draw for draw (used only where there is no C compiler)."""
    u = np.uint64

    def uniform(r):
        r ^= r >> u(12)
        r ^= r << u(25)
        r ^= r >> u(27)
        return ((r * u(0x2545F4914F6CDD1D)) >> u(11)).astype(np.float64) * 2.0**-53

    def transport():
        idx = np.flatnonzero(s["alive"])
        r = s["rng"][idx]
        pos = s["pos"][idx]
        for _ in range(flights):
            l = uniform(r)
            for c in range(3):
                pos[:, c] += l * (uniform(r) - 0.5)
        s["pos"][idx] = pos
        s["weight"][idx] *= 0.99
        s["steps"][idx] += 1
        s["alive"][idx[uniform(r) < absorb]] = False
        s["rng"][idx] = r
    return transport


def transport_node(s, absorb, flights):
    """The step as a graph node: the native kernel, or a NumPy stand-in without a compiler."""
    lib = compile_kernel()
    if lib is None:
        return opaque(_numpy_transport(s, absorb, flights), writes={k: s[k] for k in STATE})
    params = TransportParams(absorb, flights)
    kern = Kernel(CTYPES_KERNEL(ctypes.cast(lib.transport, ctypes.c_void_p).value), user_data=params,
                  name="transport")
    return native(kern, writes={k: s[k] for k in STATE})


#: policies by name: None (no compaction node) or compact()'s keyword arguments
POLICIES = {
    "none": None,
    "every replay": {"min_dead_fraction": 0.0},
    "every 4": {"every": 4, "min_dead_fraction": 0.0},
    "every 16": {"every": 16, "min_dead_fraction": 0.0},
    "dead >= 10%": {"min_dead_fraction": 0.10},
    "dead >= 25%": {"min_dead_fraction": 0.25},
    "dead >= 50%": {"min_dead_fraction": 0.50},
    "dead >= 75%": {"min_dead_fraction": 0.75},
    "only at the end": {"min_dead_fraction": 1.0},
}


def transport_graph(s, absorb, flights, policy=None):
    """(built graph, compaction node or None): the transport step, then compaction with ``policy``."""
    g = eagle.Graph()
    g.add_node(transport_node(s, absorb, flights), name="transport")
    node = None
    if policy is not None:
        node = compact(s["alive"], {k: s[k] for k in STATE if k != "alive"}, **policy)
        g.add_node(node)
    return g.build(), node


def run(n, absorb, flights, policy, replays=None, seed=0):
    """Fresh particles through the step: with a compaction node until done (or ``replays``
    times), without one ``replays`` times. Returns (seconds, replays, particles, node)."""
    s = particles(n, seed)
    g, node = transport_graph(s, absorb, flights, policy)
    t0 = time.perf_counter()
    if node is not None and replays is None:
        done = g.launch_until_done(10**9)
    else:
        g.launch(replays)
        done = replays
    return time.perf_counter() - t0, done, s, node


def best(n, absorb, flights, policy, replays=None, rounds=3):
    """Best-of-``rounds`` seconds of ``run`` (and the replays of the last one)."""
    times = []
    for _ in range(rounds):
        t, done, _, _ = run(n, absorb, flights, policy, replays)
        times.append(t)
    return min(times), done


def completion_rows(n, absorb, flights, rounds, threads_list):
    """Rows (threads, what, seconds, replays) to completion, and whether the results agree."""
    rows, identical = [], True
    for threads in threads_list:
        eagle.set_num_threads(threads)
        # replays to completion (the same for every policy: absorption follows each particle's RNG)
        _, R, s_c, node = run(n, absorb, flights, POLICIES["every replay"])
        _, _, s_n, _ = run(n, absorb, flights, None, replays=R)
        for k in STATE:
            identical &= bool(np.array_equal(node.scatter_back(s_c[k]), s_n[k]))
        for what in ("none", "every replay", "dead >= 25%"):
            # interleaving would be fairer on a noisy machine; rounds alternate runs anyway
            t, done = best(n, absorb, flights, POLICIES[what], replays=R if what == "none" else None,
                           rounds=rounds)
            rows.append((threads, what, t, done))
    return rows, identical


def no_death_rows(n, flights, replays, rounds, threads_list):
    rows = []
    for threads in threads_list:
        eagle.set_num_threads(threads)
        times = {"none": [], "every replay": []}
        for _ in range(rounds):           # interleaved, best of each
            for what in times:
                times[what].append(run(n, 0.0, flights, POLICIES[what], replays=replays)[0])
        rows.append((threads, {w: min(t) for w, t in times.items()}))
    return rows


def policy_rows(n, absorb, flights_list, rounds):
    """{flights: {policy: seconds}} to completion (no compaction: the same replays)."""
    out = {}
    for flights in flights_list:
        _, R, _, _ = run(n, absorb, flights, POLICIES["every replay"])
        out[flights] = {what: best(n, absorb, flights, pol, replays=R if pol is None else None,
                                   rounds=rounds)[0] for what, pol in POLICIES.items()}
        out[flights]["replays"] = R
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m eagle.bench.finished", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, one round (a few seconds)")
    p.add_argument("-n", "--particles", type=int, help="particles (default 1,000,000; quick 20,000)")
    p.add_argument("--absorb", type=float, default=0.05, help="absorption probability per replay (0.05)")
    p.add_argument("--flights", type=int, default=1, help="flights per live particle per replay (1)")
    p.add_argument("--rounds", type=int, help="timings per row, the best counts (default 3, quick 1)")
    p.add_argument("--threads", type=int, help="threads (default: eagle.get_num_threads())")
    args = p.parse_args(argv)
    n = args.particles or (20_000 if args.quick else 1_000_000)
    rounds = args.rounds or (1 if args.quick else 3)
    threads = args.threads or eagle.get_num_threads()
    initial_threads = eagle.get_num_threads()
    threads_list = sorted({1, threads})
    kernel = "native C kernel (cc)" if compile_kernel() is not None else \
        "NumPy stand-in (no C compiler found: these figures say little)"
    print(f"eagle {eagle.__version__} · Python {platform.python_version()} · numpy {np.__version__} · "
          f"OpenMP {'yes' if have_openmp() else 'no'} · CPUs {os.cpu_count()} · {platform.machine()}")
    print(f"step: {kernel}; {n:,} particles, absorption {args.absorb} per replay, "
          f"{args.flights} flight(s) per live particle per replay; best of {rounds}")
    t_start = time.perf_counter()
    try:
        rows, identical = completion_rows(n, args.absorb, args.flights, rounds, threads_list)
        print()
        print("To completion (the live count decays geometrically)")
        print(f"  {'threads':>7}  {'compaction':<28} {'replays':>8} {'time':>10} {'speedup':>8}")
        base = {}
        for th, what, t, done in rows:
            if what == "none":
                base[th] = t
            label = {"none": "none (launch(R), all samples)", "every replay": "every replay",
                     "dead >= 25%": "dead >= 25% (the default)"}[what]
            print(f"  {th:>7}  {label:<28} {done:>8} {t * 1e3:>8.1f} ms {base[th] / t:>7.2f}x")
        print(f"  results identical with and without compaction (scattered back by the id map): "
              f"{'yes' if identical else 'NO'}")

        replays = 50 if args.quick else 100
        print()
        print(f"No particle dies ({replays} replays)")
        print(f"  {'threads':>7}  {'no compaction node':>18} {'compaction node':>16} {'extra':>8}")
        for th, t in no_death_rows(n, args.flights, replays, rounds, threads_list):
            print(f"  {th:>7}  {t['none'] * 1e3:>15.1f} ms {t['every replay'] * 1e3:>13.1f} ms "
                  f"{t['every replay'] / t['none'] - 1:>+7.1%}")

        eagle.set_num_threads(threads)
        flights_list = [0, 1, 4, 16]
        n_policies = max(1, n // 4)
        table = policy_rows(n_policies, args.absorb, flights_list, rounds)
        print()
        print(f"Policies: speedup to completion over no compaction ({n_policies:,} particles, "
              f"{threads} threads; columns: flights per live particle per replay, replays to completion)")
        header = "".join(f"{'%d fl (%d r)' % (f, table[f]['replays']):>15}" for f in flights_list)
        print(f"  {'policy':<18}{header}")
        for what in POLICIES:
            cells = "".join(f"{table[f]['none'] / table[f][what]:>14.2f}x" for f in flights_list)
            print(f"  {what:<18}{cells}")
        print("  (below 1.00x compaction costs more than the finished samples it saves)")
    finally:
        eagle.set_num_threads(initial_threads)
    print(f"({time.perf_counter() - t_start:.1f} s)")


if __name__ == "__main__":
    main()
