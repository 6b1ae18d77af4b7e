"""The built-in kernels' contiguous fast paths (csrc/cpu/builtin_kernels.h) give exactly
the results of their strided loops and of NumPy, in place, on disjoint arrays,
on odd lengths and sub-ranges, and fall back to the in-order loop where the
output partly overlaps an input."""
import numpy as np
import pytest

import eagle
from eagle import kernels
from eagle.graph import native

COEFFS = np.linspace(0.3, -0.2, 32)


def horner(x, c=COEFFS):
    acc = np.full_like(x, c[-1])
    for ck in c[-2::-1]:
        acc = acc * x + ck
    return acc


def launch(kernel, reads, writes, size=None, teams="auto"):
    g = eagle.Graph()
    g.add_node(native(kernel, reads=reads, writes=writes))
    if size is not None:
        g.set_logical_size(size)
    g.build(cpu=eagle.CpuOptions(teams=teams))
    g.launch(1)
    return g


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 1000, 4099])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_contiguous_equals_strided_and_numpy(n, n_threads, threads):
    threads(n_threads)
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n)
    xs = np.zeros(2 * n)
    xs[::2] = x                       # the same values through a strided view
    for make, want in [(lambda: kernels.scale(1.7), 1.7 * x), (lambda: kernels.polynomial(COEFFS), horner(x)),
                       (kernels.copy, x)]:
        y, ys = np.zeros(n), np.zeros(2 * n)
        launch(make(), {"x": x}, {"y": y}, teams="parallel")
        launch(make(), {"x": xs[::2]}, {"y": ys[::2]}, teams="parallel")
        np.testing.assert_array_equal(y, want)
        np.testing.assert_array_equal(ys[::2], want)
    b = rng.standard_normal(n)
    out = np.zeros(n)
    launch(kernels.add(), {"a": x, "b": b}, {"out": out}, teams="parallel")
    np.testing.assert_array_equal(out, x + b)
    y = b.copy()
    launch(kernels.axpy(0.5), {"x": x}, {"y": y}, teams="parallel")
    np.testing.assert_array_equal(y, b + 0.5 * x)
    y = np.zeros(n)
    launch(kernels.fill(2.5), {}, {"y": y}, teams="parallel")
    assert (y == 2.5).all()


def test_polynomial_is_bitwise_numpys_horner():
    x = np.random.default_rng(1).random(10_000)
    y = np.zeros_like(x)
    launch(kernels.polynomial(COEFFS), {"x": x}, {"y": y})
    acc = np.full_like(x, COEFFS[-1])
    for ck in COEFFS[-2::-1]:
        np.multiply(acc, x, out=acc)
        np.add(acc, ck, out=acc)
    np.testing.assert_array_equal(y, acc)


def test_in_place():
    x = np.arange(100.0)
    launch(kernels.scale(3.0), {"x": x}, {"y": x[:]})
    np.testing.assert_array_equal(x, 3 * np.arange(100.0))
    x = np.arange(100.0)
    launch(kernels.axpy(2.0), {"x": x}, {"y": x[:]})
    np.testing.assert_array_equal(x, 3 * np.arange(100.0))
    x = np.arange(100.0)
    b = np.ones(100)
    launch(kernels.add(), {"a": x, "b": b}, {"out": x[:]})
    np.testing.assert_array_equal(x, np.arange(100.0) + 1)
    x = np.linspace(0, 1, 100)
    want = horner(x)
    launch(kernels.polynomial(COEFFS), {"x": x}, {"y": x[:]})
    np.testing.assert_array_equal(x, want)


def test_partial_overlap_runs_in_order():
    """y = x shifted by one element: the sequential loop's result (each sample sees the
    value an earlier sample wrote), not a vectorised one."""
    buf = np.arange(20.0)
    want = buf.copy()
    for i in range(19):
        want[i + 1] = 2 * want[i]
    launch(kernels.scale(2.0), {"x": buf[:19]}, {"y": buf[1:]}, teams="serial")
    np.testing.assert_array_equal(buf, want)
    buf = np.arange(20.0)
    want = buf.copy()
    for i in range(19):
        want[i + 1] = want[i]
    launch(kernels.copy(), {"x": buf[:19]}, {"y": buf[1:]}, teams="serial")
    np.testing.assert_array_equal(buf, want)


def test_sub_range_after_retune():
    x = np.arange(1000.0)
    y = np.full(1000, -1.0)
    g = launch(kernels.scale(2.0), {"x": x}, {"y": y}, size=333)
    np.testing.assert_array_equal(y[:333], 2 * x[:333])
    assert (y[333:] == -1).all()
    g.set_logical_size(1000)
    g.launch(1)
    np.testing.assert_array_equal(y, 2 * x)
