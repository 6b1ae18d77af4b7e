"""Replay latency: ``g.launch(n)`` on built graphs, for 1 thread and all threads.

Each ``time_launch_1000`` body runs ``g.launch(1000)``: divide by 1000 for the
time per replay. The large single-node graph is timed one replay per call.
"""
import eagle

from . import BIG, REPLAYS, THREADS, big_graph, make_graph, scaled, use_threads


class Replay:
    """Per-replay latency of small graphs (tiny arrays: eagle's own overhead)."""

    params = [["seed", "diamond", "chain10", "chain100", "wide8"], THREADS]
    param_names = ["graph", "threads"]

    def setup(self, graph, threads):
        self.previous_threads = use_threads(threads)
        self.g = make_graph(graph).build()
        # the first replays measure the nodes' costs and choose each stage's team
        self.g.launch(10)

    def teardown(self, graph, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch_1000(self, graph, threads):
        self.g.launch(REPLAYS)


class ReplayForced:
    """The wide stage with its team forced: the cost of a barrier per replay
    (``teams="parallel"``) beside the one-thread walk (``teams="serial"``)."""

    params = [["serial", "parallel"], THREADS]
    param_names = ["teams", "threads"]

    def setup(self, teams, threads):
        self.previous_threads = use_threads(threads)
        self.g = make_graph("wide8").build(cpu=eagle.CpuOptions(teams=teams))
        self.g.launch(10)

    def teardown(self, teams, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch_1000(self, teams, threads):
        self.g.launch(REPLAYS)


class ReplayLarge:
    """One native node (y = 2x) over 4 million doubles: the speedup from threads."""

    params = [THREADS]
    param_names = ["threads"]

    def setup(self, threads):
        self.previous_threads = use_threads(threads)
        self.g = big_graph(scaled(BIG, 4096)).build()
        self.g.launch(3)

    def teardown(self, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch(self, threads):
        self.g.launch(1)


class ReplayOneByOne:
    """``g.launch(1)`` called 1000 times from a Python loop: a step loop that
    replays once per step pays launch()'s per-call overhead on every replay."""

    params = [["seed", "diamond"], THREADS]
    param_names = ["graph", "threads"]

    def setup(self, graph, threads):
        self.previous_threads = use_threads(threads)
        self.g = make_graph(graph).build()
        self.g.launch(10)

    def teardown(self, graph, threads):
        eagle.set_num_threads(self.previous_threads)

    def time_launch_1_x1000(self, graph, threads):
        launch = self.g.launch
        for _ in range(REPLAYS):
            launch(1)


class LaunchOneVsCtypes:
    """``g.launch(1)`` of a one-node native graph on 1 sample beside one ctypes call
    of a C function that does nothing worth timing (libc's ``labs``), 1000 of each
    from a Python loop: eagle's fixed cost per launch against the cheapest call
    into C that Python offers."""

    def setup(self):
        import ctypes
        import ctypes.util

        import numpy as np

        from eagle import kernels
        from eagle.graph import native

        self.x, self.y = np.ones(1), np.zeros(1)
        self.g = eagle.Graph()
        self.g.add_node(native(kernels.axpy(1.0), reads={"x": self.x}, writes={"y": self.y}), name="axpy")
        self.g.build()
        self.g.launch(10)
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        self.c_call = libc.labs
        self.c_call.restype, self.c_call.argtypes = ctypes.c_long, [ctypes.c_long]

    def time_launch_1_x1000(self):
        launch = self.g.launch
        for _ in range(REPLAYS):
            launch(1)

    def time_ctypes_call_x1000(self):
        call = self.c_call
        for _ in range(REPLAYS):
            call(1)
