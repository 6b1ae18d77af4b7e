"""Temporaries as views of one scratch grid (the FDTD step of eagle.bench.stencils): views
that map sample i to row i of the scratch (``s[:-1, :]``, ``s[:, :-1]``, ``s[:-1, :-1]``)
write one array alike, so the nodes writing them share a fused run; views that start
on other rows (``s[1:, :]`` beside ``s[:, 1:]``) meet at other samples and end it. Either
way the results are NumPy's, bit for bit."""
import numpy as np

import eagle
from eagle.bench import stencils
from eagle.graph import ufunc


def fdtd_like(ex, ey, hz, d1, d2):
    """The FDTD step's ey and ex updates, their temporaries d1 and d2 given."""
    g = eagle.Graph()
    g.add_node(ufunc(np.subtract, hz[1:, :], hz[:-1, :], out=d1))
    g.add_node(ufunc(np.multiply, 0.5, d1, out=d1))
    g.add_node(ufunc(np.subtract, ey[1:, :], d1, out=ey[1:, :]))
    g.add_node(ufunc(np.subtract, hz[:, 1:], hz[:, :-1], out=d2))
    g.add_node(ufunc(np.multiply, 0.5, d2, out=d2))
    g.add_node(ufunc(np.subtract, ex[:, 1:], d2, out=ex[:, 1:]))
    return g.build()


def grids(nx=30, ny=34):
    rng = np.random.default_rng(7)
    return [rng.standard_normal((nx, ny)) for _ in range(3)]


def numpy_step(ex, ey, hz):
    ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
    ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])


def run_and_check(take):
    ours, ref = grids(), grids()
    s = np.empty_like(ours[0])
    g = fdtd_like(*ours, *take(s))
    g.launch(3)
    for _ in range(3):
        numpy_step(*ref)
    for x, y in zip(ours, ref):
        assert x.tobytes() == y.tobytes()
    n_stages = sum(line.startswith("stage ") for line in str(g.plan()).splitlines())
    return [stages for stages, _ in g.plan().fused_runs], n_stages


def test_views_from_row_zero_of_one_scratch_fuse():
    runs, n_stages = run_and_check(lambda s: (s[:-1, :], s[:, :-1]))
    assert runs == [(0, n_stages - 1)]


def test_views_from_different_rows_of_one_scratch_end_the_run():
    # d1 = s[1:, :] puts sample i on row i + 1, d2 = s[:, 1:] on row i: the write of d2
    # meets d1's rows at other samples
    runs, n_stages = run_and_check(lambda s: (s[1:, :], s[:, 1:]))
    assert runs != [(0, n_stages - 1)]


def test_the_benchmark_fdtd_step_is_two_fused_runs_on_its_scratch_views():
    st = stencils.Stencil("fdtd_2d", *stencils.QUICK["fdtd_2d"])
    start = st.arrays()
    ours, ref = [a.copy() for a in start], [a.copy() for a in start]
    g = st.graph(ours)
    g.launch(st.replays())
    st.run_numpy(ref)
    for x, y in zip(ours, ref):
        assert x.tobytes() == y.tobytes()
    # the ey and ex updates and the hz update's first part in one run; the rest of the
    # hz update (it reads ey shifted, which the first run writes) in a second
    assert len(g.plan().fused_runs) == 2
