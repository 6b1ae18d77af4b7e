"""GPU replay: eagle's cuda backend beside the same kernels launched one by one
from Python and CuPy's own CUDA-graph replay (the design's GPU row).

The graph is the seed graph on CuPy arrays (three elementwise kernels, tiny
arrays): host overhead per replay is what is measured. Every body runs 1000
replays and then synchronizes: divide by 1000 for the time per replay.

Skips cleanly, the asv way (``NotImplementedError`` in ``setup``), without
CuPy, without a usable GPU, or, for the eagle rows, with an eagle built
without its cuda backend.
"""
from . import REPLAYS, seed_arrays, seed_opaque_graph, seed_ufunc_calls


def _cupy():
    """CuPy with a usable GPU, or NotImplementedError saying what is missing."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy that cannot load its CUDA libraries
        raise NotImplementedError(f"CuPy is not importable ({type(exc).__name__}: {exc})") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise NotImplementedError(f"CuPy finds no usable GPU ({type(exc).__name__}: {exc})") from None
    if n < 1:
        raise NotImplementedError("CuPy finds no GPU")
    return cupy


def _seed_functions(cp):
    """The seed graph's arithmetic (eagle.bench.cases) on CuPy arrays, writing in place
    (no temporaries, so nothing is allocated while a graph is captured)."""
    arrays = seed_arrays(xp=cp)
    return arrays, seed_ufunc_calls(arrays, xp=cp)


class CudaReplay:
    """eagle's launch(1000) of the seed graph on CuPy arrays."""

    def setup(self):
        cp = _cupy()
        arrays, fns = _seed_functions(cp)
        g = seed_opaque_graph(fns, arrays)
        g.build()   # NotImplementedError (a skip) when eagle has no cuda backend
        g.launch(1)
        cp.cuda.Device().synchronize()
        self.cp, self.g = cp, g

    def time_launch_1000(self):
        self.g.launch(REPLAYS)
        self.cp.cuda.Device().synchronize()


class CudaReference:
    """What eagle's GPU replay is measured against: the same kernels launched
    one by one, and CuPy's stream-captured CUDA graph replayed."""

    def setup(self):
        cp = _cupy()
        _, fns = _seed_functions(cp)
        self.cp, self.fns = cp, fns
        self.stream = cp.cuda.Stream(non_blocking=True)
        with self.stream:
            for f in fns:
                f()
        self.stream.synchronize()
        try:
            with self.stream:
                self.stream.begin_capture()
                try:
                    for f in fns:
                        f()
                finally:
                    self.graph = self.stream.end_capture()
        except AttributeError as exc:  # a CuPy without stream capture
            raise NotImplementedError(f"this CuPy cannot capture a CUDA graph ({exc})") from None
        self.graph.launch(self.stream)
        self.stream.synchronize()

    def time_kernels_one_by_one_1000(self):
        f1, f2, f3 = self.fns
        with self.stream:
            for _ in range(REPLAYS):
                f1()
                f2()
                f3()
        self.stream.synchronize()

    def time_cupy_graph_replay_1000(self):
        graph, stream = self.graph, self.stream
        for _ in range(REPLAYS):
            graph.launch(stream)
        stream.synchronize()
