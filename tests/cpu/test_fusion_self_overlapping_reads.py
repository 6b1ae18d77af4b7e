"""Fused runs (eagle.cpu.fusion) beside reads whose samples share memory: ``as_strided``
views with a zero sample stride, rows that overlap the next sample's, rows read
backwards or half a sample off. A node of a run writing an array that a later node reads
through such a view meets it at other samples: the two never share a run, and the
result is the nodes run one by one (NumPy's, bit for bit), on a team of 2 and 3. A view
that reads each sample's own row backwards meets the write at that sample alone, and may
share the run."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import eagle
from eagle.graph import ufunc

N = 301


def fused_stages(g):
    """(first stage, last stage) of each fused run."""
    return [stages for stages, _ in g.plan().fused_runs]


# views of a buffer of N + 1 rows whose first N the run writes: (view, whether it meets
# the write at other samples than its own)
READS = {
    "zero sample stride": (lambda x: as_strided(x, (N, 2), (0, 8)), True),
    "overlapping rows": (lambda x: as_strided(x, (N, 2), (8, 8)), True),
    "half a sample off": (lambda x: as_strided(x.reshape(-1)[1:], (N, 2), (16, 8)), True),
    "samples backwards": (lambda x: x[N - 1::-1], True),
    "a column repeated": (lambda x: as_strided(x[1:], (N, 2), (16, 0)), True),
    "its own row backwards": (lambda x: as_strided(x.reshape(-1)[1:], (N, 2), (16, -8)), False),
}


@pytest.mark.parametrize("nthreads", [2, 3])
@pytest.mark.parametrize("read", sorted(READS))
def test_a_run_never_reads_what_it_writes_through_a_self_overlapping_view(threads, nthreads, read):
    threads(nthreads)
    rng = np.random.default_rng(7)
    a0, x0 = rng.random((N, 2)), rng.random((N + 1, 2))
    view_of, elsewhere = READS[read]

    def nodes(a, x, t, s):
        view = view_of(x)
        return [(np.multiply, a, 2.0, x[:N]),   # writes x sample by sample
                (np.add, view, a, t),           # reads x at other samples than its own
                (np.subtract, t, view, s)]

    for fuse in (True, 1, 7):
        a, x, t, s = a0.copy(), x0.copy(), np.zeros((N, 2)), np.zeros((N, 2))
        g = eagle.Graph()
        for k, (uf, i, j, o) in enumerate(nodes(a, x, t, s)):
            g.add_node(ufunc(uf, i, j, out=o), name=f"n{k}")
        g.build(cpu=eagle.CpuOptions(fuse=fuse, teams="parallel"))
        if elsewhere:
            assert not any(a <= 0 and 1 <= b for a, b in fused_stages(g)), (read, fused_stages(g))
        elif fuse is not True:
            assert fused_stages(g) == [(0, 2)], (read, fuse)
        g.launch(2)
        ra, rx, rt, rs = a0.copy(), x0.copy(), np.zeros((N, 2)), np.zeros((N, 2))
        for _ in range(2):
            for uf, i, j, o in nodes(ra, rx, rt, rs):
                uf(i, j, out=o)
        for got, want in zip((x, t, s), (rx, rt, rs)):
            assert got.tobytes() == want.tobytes(), (read, fuse)
