"""Hostile inputs to the split of a native node's range across threads.

A split native node processes samples [start, stop) on each thread; the
result must be the sequential oracle's. Two ways to break that: a written
array whose samples share bytes (threads would race on them), and a logical
size so large that the split's index arithmetic overflows.
"""
import ctypes
import threading

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import eagle
import eagle.kernels as ek
from eagle.graph import native

needs_openmp = pytest.mark.skipif(not eagle.have_openmp(), reason="eagle built without OpenMP")

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)


def _self_overlapping_writes():
    n = 1000
    return {
        "zero stride": as_strided(np.zeros(1), shape=(n,), strides=(0,)),
        "overlapping rows": as_strided(np.zeros(n + 1), shape=(n, 2), strides=(8, 8)),
        "rows sharing their last element": as_strided(np.zeros(3 * n), shape=(n, 4), strides=(24, 8)),
    }


@pytest.mark.parametrize("label", list(_self_overlapping_writes()))
def test_a_write_whose_samples_share_bytes_is_never_split(label):
    y = _self_overlapping_writes()[label]
    node = native(ek.nothing(), writes={"y": y})
    assert not node.split
    assert "'y'" in node.split_refused_reason


@pytest.mark.parametrize("make", [
    lambda n: np.zeros(n),
    lambda n: np.zeros((n, 3))[:, 1],                        # strided, disjoint samples
    lambda n: np.zeros((3, n)).T,                            # samples interleaved, disjoint
    lambda n: np.zeros(2 * n)[::-2],                         # negative stride
    lambda n: as_strided(np.zeros(1), shape=(1,), strides=(0,)) if n == 1 else np.zeros(n),
], ids=["dense", "column", "transposed", "reversed", "one sample"])
def test_a_write_with_disjoint_samples_is_still_split(make):
    node = native(ek.nothing(), writes={"y": make(1000)})
    assert node.split and node.split_refused_reason is None


@needs_openmp
def test_a_split_zero_stride_write_gives_the_sequential_result(threads):
    # copy into one element per sample: sequentially the last sample's value stays
    threads(2)
    n = 200_001
    x = np.arange(n, dtype=float)
    cell = np.zeros(1)
    y = as_strided(cell, shape=(n,), strides=(0,))
    g = eagle.Graph()
    g.add_node(native(ek.copy(), reads={"x": x}, writes={"y": y}), name="last")
    g.build(teams="parallel")
    g.launch(1)
    assert cell[0] == x[-1]


@needs_openmp
@pytest.mark.parametrize("n_threads", [2, 3, 4, 7])
def test_the_split_of_a_huge_logical_size_covers_it_exactly(threads, n_threads):
    # a zero-stride read lets the logical size reach 2**62 without memory: every sample
    # of [0, n) goes to exactly one thread, and no range is negative (n * tid overflows)
    threads(n_threads)
    ranges, lock = [], threading.Lock()

    @KERNEL
    def record(start, stop, data, strides, user_data):
        with lock:
            ranges.append((start, stop))

    n = 2 ** 62
    x = as_strided(np.zeros(1, np.uint8), shape=(n,), strides=(0,))
    g = eagle.Graph()
    g.add_node(native(record, reads={"x": x}), name="record")
    g.build(teams="parallel")
    g.launch(1)
    ranges.sort()
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(0 <= start < stop for start, stop in ranges)
    # the same cut as for any size: thread t starts at floor(n * t / nt)
    assert [s for s, _ in ranges] == [n * t // len(ranges) for t in range(len(ranges))]
