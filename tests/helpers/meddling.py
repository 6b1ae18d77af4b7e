"""Another thread meddling with a graph while this one launches it.

    with meddling(g, sizes=(n, n // 2), thread_counts=(1, 2)):
        for _ in range(200):
            g.launch(5)

While the block runs, a thread sets ``g``'s logical size and its own eagle thread count
(cycling through ``sizes`` and ``thread_counts``) and calls ``g.plan()`` and ``str(g)``,
again and again. On the way out it is stopped and joined; if the block ran through, the
thread must have ended and raised nothing.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import eagle


@contextmanager
def meddling(g, sizes, thread_counts):
    stop, errors = threading.Event(), []

    def meddle():
        k = 0
        try:
            while not stop.is_set():
                g.set_logical_size(sizes[k % len(sizes)])
                eagle.set_num_threads(thread_counts[k % len(thread_counts)])
                g.plan()
                str(g)
                k += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=meddle)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive() and not errors, errors


def launched_beside_meddling(g, counted, launches=200, per_launch=5):
    """``g.launch(per_launch)`` ``launches`` times beside ``meddling`` between the full
    logical size n = len(counted) and n // 2 and 1 or 2 threads, where each replay adds 1 to
    every sample of ``counted`` it runs: a retune never lands inside a launch, so the lower
    half counts every replay and the upper half whole launches only, uniformly."""
    n = len(counted)
    total = 0
    with meddling(g, sizes=(n, n // 2), thread_counts=(1, 2)):
        for _ in range(launches):
            g.launch(per_launch)
            total += per_launch
    assert (counted[: n // 2] == total).all()
    upper = counted[n // 2:]
    assert (upper == upper[0]).all() and upper[0] % per_launch == 0 and upper[0] <= total
