"""No silent truncation: each sized node runs over [0, min(logical size, its extent)),
its extent being the shortest axis 0 of its per-sample arrays, and the capacity is the
longest extent (docs/graph.md, "Extents"). On every backend (the ``backend`` fixture)."""
import numpy as np
import pytest

import eagle
from eagle.graph import compact, native, ufunc


def test_a_node_on_a_longer_view_gets_its_last_row(backend):
    """The FDTD step: ex[:, 1:] is one row longer than hy's rows; NumPy's result."""
    b = backend
    rng = np.random.default_rng(3)
    nx, ny = 6, 5
    ex0, ey0, hz0 = rng.random((nx, ny + 1)), rng.random((nx + 1, ny)), rng.random((nx, ny))
    # NumPy: ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :]); ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
    ey_w, ex_w = ey0.copy(), ex0.copy()
    ey_w[1:-1, :] -= 0.5 * (hz0[1:, :] - hz0[:-1, :])
    ex_w[:, 1:-1] -= 0.5 * (hz0[:, 1:] - hz0[:, :-1])
    if b.name != "cpu":
        pytest.skip("2-d ufunc operands run as CuPy opaque nodes on CUDA; the cpu scenario holds")
    ey, ex, hz = ey0.copy(), ex0.copy(), hz0.copy()
    dy, dx = np.zeros((nx - 1, ny)), np.zeros((nx, ny - 1))
    g = eagle.Graph()
    g.add_node(ufunc(np.subtract, hz[1:, :], hz[:-1, :], out=dy), name="dy")            # nx - 1 rows
    g.add_node(ufunc(np.multiply, dy, 0.5, out=dy), name="hy")
    g.add_node(ufunc(np.subtract, ey[1:-1, :], dy, out=ey[1:-1, :]), name="ey")
    g.add_node(ufunc(np.subtract, hz[:, 1:], hz[:, :-1], out=dx), name="dx")            # nx rows
    g.add_node(ufunc(np.multiply, dx, 0.5, out=dx), name="hx")
    g.add_node(ufunc(np.subtract, ex[:, 1:-1], dx, out=ex[:, 1:-1]), name="ex")
    assert g.capacity == nx and g.capacity_bound_by[2] == nx
    g.build().launch(1)
    np.testing.assert_array_equal(ey, ey_w)
    np.testing.assert_array_equal(ex, ex_w)


def test_a_one_element_counter_beside_eight_sample_nodes(backend):
    b = backend
    x = b.asarray(np.arange(8.0))
    y = b.zeros(8)
    count = b.zeros(1)
    g = eagle.Graph()
    g.add_node(b.ufunc(np.multiply, x, 2.0, out=y), name="y")
    g.add_node(b.ufunc(np.add, count, 1.0, out=count), name="count")
    assert g.capacity == 8 and g.capacity_bound_by[0] == "y"
    g.build().launch(3)
    np.testing.assert_array_equal(b.asnumpy(y), 2 * np.arange(8.0))   # all 8, not y[0] alone
    np.testing.assert_array_equal(b.asnumpy(count), [3.0])
    # a retune is O(1) and each node keeps its extent: 5 samples for y, the counter its 1
    g.set_logical_size(5)
    g.launch(1)
    np.testing.assert_array_equal(b.asnumpy(count), [4.0])
    g.set_logical_size(0)
    g.launch(1)
    np.testing.assert_array_equal(b.asnumpy(count), [4.0])           # 0 samples: min(0, 1)
    with pytest.raises(ValueError, match=r"0\.\.8"):
        g.set_logical_size(9)


def test_the_retune_clamps_without_rebuilding(backend):
    b = backend
    short, long = b.zeros(3), b.zeros(10)
    g = eagle.Graph()
    g.add_node(b.ufunc(np.add, short, 1.0, out=short), name="short")
    g.add_node(b.ufunc(np.add, long, 1.0, out=long), name="long")
    g.build()
    for n, want_short, want_long in ((10, 1, 1), (2, 1, 1), (7, 1, 1)):
        g.set_logical_size(n)
        before_s, before_l = b.asnumpy(short).copy(), b.asnumpy(long).copy()
        g.launch(1)
        ds, dl = b.asnumpy(short) - before_s, b.asnumpy(long) - before_l
        np.testing.assert_array_equal(ds, [1.0] * min(n, 3) + [0.0] * (3 - min(n, 3)))
        np.testing.assert_array_equal(dl, [1.0] * n + [0.0] * (10 - n))


def test_a_per_sample_false_parameter_vector_runs_whole_once_per_replay():
    params, x = np.zeros(3), np.zeros(8)
    g = eagle.Graph()
    g.add_node(ufunc(np.add, params, 1.0, out=params, per_sample=False), name="p")
    g.add_node(ufunc(np.add, x, 1.0, out=x), name="x")
    assert g.capacity == 8
    g.build().launch(2)
    np.testing.assert_array_equal(params, [2, 2, 2])
    g.set_logical_size(0)
    g.launch(1)
    np.testing.assert_array_equal(params, [3, 3, 3])
    np.testing.assert_array_equal(x, [2] * 8)
    with pytest.raises(TypeError, match="per_sample= is True or False"):
        ufunc(np.add, params, 1.0, out=params, per_sample={"x"})


def test_a_native_node_runs_over_its_own_extent_with_threads(threads):
    import eagle.kernels as ek

    for nt in (1, 2, 3):
        threads(nt)
        x, y, short = np.ones(1000), np.zeros(1000), np.zeros(37)
        g = eagle.Graph()
        g.add_node(native(ek.scale(2.0), reads={"x": x}, writes={"y": y}), name="long")
        g.add_node(native(ek.fill(5.0), writes={"s": short}), name="short")
        g.build(cpu=eagle.CpuOptions(teams="parallel")).launch(1)
        assert (y == 2).all() and (short == 5).all()


def test_on_cuda_a_device_size_graph_refuses_short_extents(cuda_backend):
    b = cuda_backend
    alive = b.asarray(np.ones(8, bool))
    x, short = b.zeros(8), b.zeros(3)
    g = eagle.Graph()
    g.add_node(b.ufunc(np.add, short, 1.0, out=short), name="short")
    g.add_node(compact({"alive": alive}, {"x": x}, ids=b.asarray(np.arange(8)),
                       count=b.asarray(np.zeros(1, np.int64))), name="c")
    with pytest.raises(ValueError, match="node 'short': its array .* holds 3 samples, fewer than the "
                                         "graph's capacity 8.*per_sample="):
        g.build()
