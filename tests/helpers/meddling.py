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
