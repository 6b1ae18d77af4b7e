"""The ``where=`` rows of ``python -m eagle.bench``: a ufunc node under a mask beside the
same node without one (one thread, in one process, alternated), for a random half, a
sparse mask (1%) and long runs of set elements, on a cheap loop (``add``) and a costly one
(``exp``). Goal: a random 50% mask at most 1.3x the unmasked node. Shared with asv
(asv_bench/benchmarks/bench_ufunc.py, ``MaskedUfunc``)."""
from __future__ import annotations

import time

import numpy as np

import eagle
from eagle.graph import ufunc

#: the masks: name -> f(n, rng) giving a bool array
MASKS = {
    "random 50%": lambda n, rng: rng.random(n) < 0.5,
    "random 1%": lambda n, rng: rng.random(n) < 0.01,
    "runs of 300": lambda n, rng: (np.arange(n) // 300) % 2 == 0,
}


def masked_pair(uf, n, mask_name, seed=0):
    """(graph with the masked node, graph with the unmasked one), built, over n doubles."""
    rng = np.random.default_rng(seed)
    operands = [rng.random(n) for _ in range(uf.nin)]
    mask = MASKS[mask_name](n, rng)
    graphs = []
    for where in (mask, True):
        g = eagle.Graph()
        g.add_node(ufunc(uf, *operands, out=np.zeros(n), where=where), name=uf.__name__)
        g.build()
        graphs.append(g)
    return graphs


def masked_ratio(uf, n, mask_name, rounds=5, replays=10):
    """Best time of the masked node over the unmasked one's, alternated."""
    masked, plain = masked_pair(uf, n, mask_name)
    best = [float("inf"), float("inf")]
    for g in (masked, plain):
        g.launch(2)
    for _ in range(rounds):
        for k, g in enumerate((masked, plain)):
            t = time.perf_counter()
            g.launch(replays)
            best[k] = min(best[k], (time.perf_counter() - t) / replays)
    return best[0], best[1]


def rows_masked(rounds, n=1_000_000):
    """[(what, eagle s, reference name, reference s)]: the masked node against the unmasked."""
    before = eagle.get_num_threads()
    eagle.set_num_threads(1)
    rows = []
    try:
        for uf in (np.add, np.exp):
            for name in MASKS:
                t_masked, t_plain = masked_ratio(uf, n, name, rounds)
                rows.append((f"{uf.__name__} where= {name}, {n:,}, 1 thread", t_masked,
                             f"{uf.__name__} unmasked", t_plain))
    finally:
        eagle.set_num_threads(before)
    return rows
