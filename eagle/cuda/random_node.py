"""Random nodes on CUDA arrays: ``eagle.graph.random_bits`` / ``uniform`` / ``normal``
and the distribution nodes (``exponential``, ``poisson``, ``binomial``, ``integers``)
given CuPy (or any ``__cuda_array_interface__``) arrays.

Each node is captured as one kernel node of the CUDA graph, ``eagle_random`` of
eagle/cuda/kernels/random.cu, a kernel built from csrc/include/eagle/philox.h, the
header the CPU kernels are built from: the same ``random_bits`` and ``uniform`` bits
as the CPU, and the same ``normal`` values (the header's log and cos use explicit
fma and no contraction on either side; NVRTC compiles with ``--fmad=false``). The
node is sized: one thread per sample of [0, logical size), its grid and size
argument patched by ``set_logical_size`` like any sized kernel, and with a
compaction it also stops at the device logical size.

**The replay counter.** A graph with random nodes keeps ``g.replays`` in device
memory (a uint64 the kernels read), and a one-thread ``eagle_replay_step`` kernel,
the last node of the captured replay, adds one: so the replays inside one
``cuGraphLaunch`` of a ``launch_until_done`` WHILE node each draw their own
numbers, and ``launch(3)`` draws what three ``launch(1)`` draw. Reading
``g.replays`` copies the counter back (it synchronizes eagle's stream); assigning
it writes it.
"""
from __future__ import annotations

import numpy as np

from eagle.cuda.capture import Lowering, Need, register
from eagle.record.memory import array_kind, overlap
from eagle.record.node import Node, RunsAs
from eagle.record.distributions import DistributionSpec
from eagle.record.random import RandomSpec

__all__ = ["CudaRandomNode", "CudaRandomCapture", "CudaDistributionNode", "CudaDistributionCapture", "BLOCK"]

#: threads per block of eagle_random
BLOCK = 256
#: the index of eagle_random's size parameter (n, the last of 15)
SIZE_INDEX = 14


def _pointer_and_stride(a, name, what):
    cai = a.__cuda_array_interface__
    ptr = cai["data"][0]
    shape = tuple(cai["shape"])
    itemsize = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    if strides is None:
        c = itemsize
        for d in reversed(shape[1:]):
            c *= d
        return int(ptr), int(c)
    strides = tuple(strides)
    if len(shape) == 2 and shape[0] > 0 and strides[1] != itemsize:
        raise ValueError(f"random_bits(): the rows of out {name!r} must be contiguous (the "
                         f"four words of a sample side by side), strides {strides}")
    return int(ptr), int(strides[0])


class CudaRandomNode(Node):
    """A random-number node on CUDA arrays; drawn ``~name~`` (see the module doc)."""

    kind = "random"
    runs_as = RunsAs.CUDA_RANDOM
    box = ("~", "~")
    dot_shape = "parallelogram"
    sized = True
    sample_local = True

    def __init__(self, spec: RandomSpec):
        out, ids = spec.out, spec.ids
        if array_kind(out) != "cuda" or (ids is not None and array_kind(ids) != "cuda"):
            raise TypeError(f"{spec.kind}(): a cuda random node takes CUDA arrays")
        outs = {spec.out_name: out}
        if spec.out2 is not None:
            outs[spec.out2_name] = spec.out2
        if any(array_kind(a) != "cuda" for a in outs.values()):
            raise TypeError(f"{spec.kind}(): a cuda random node takes CUDA arrays")
        for name, a in outs.items():
            if ids is not None and overlap(ids, a):
                raise ValueError(f"{spec.kind}(): ids {spec.ids_name!r} shares memory with out {name!r}")
        if spec.out2 is not None and overlap(out, spec.out2):
            raise ValueError(f"{spec.kind}(): the outputs {spec.out_name!r} and {spec.out2_name!r} share memory")
        reads = {spec.ids_name: ids} if ids is not None else None
        super().__init__(reads, outs)
        self.spec = spec
        self.out_ptr, self.out_stride = _pointer_and_stride(out, spec.out_name, spec.kind)
        self.out2_ptr, self.out2_stride = (0, 0) if spec.out2 is None else \
            _pointer_and_stride(spec.out2, spec.out2_name, spec.kind)
        self.ids_ptr, self.ids_stride = (0, 0) if ids is None else \
            _pointer_and_stride(ids, spec.ids_name, spec.kind)

    def kernel_args(self, size, size_ptr, replay_ptr):
        """eagle_random's 15 arguments as ("i", int) / ("d", float) pairs (random.cu)."""
        s = self.spec
        key = s.key - (1 << 64) if s.key >= 1 << 63 else s.key   # the same 64 bits, as an int64
        i = lambda v: ("i", int(v))  # noqa: E731
        d = lambda v: ("d", float(v))  # noqa: E731
        return [i(self.out_ptr), i(self.out_stride), i(self.ids_ptr), i(self.ids_stride),
                i(s.what), i(s.f32), i(key), d(s.a), d(s.b), d(s.below), i(replay_ptr),
                i(self.out2_ptr), i(self.out2_stride), i(size_ptr), i(size)]

    def default_name(self) -> str:
        return self.spec.kind

    def __repr__(self):
        s = self.spec
        ids = f", ids={s.ids_name!r}" if s.ids is not None else ""
        out = repr(s.out_name) if s.out2 is None else f"({s.out_name!r}, {s.out2_name!r})"
        return f"{s.kind}(out={out}, key={s.key}{ids}, cuda)"


class CudaRandomCapture(Lowering):
    """A random node's capture: one ``eagle_random`` kernel node, sized, reading the
    graph's device replay counter (and its device logical size, when it keeps one)."""

    kernel, size_index = "eagle_random", SIZE_INDEX

    def needs(self, node):
        return frozenset({Need.REPLAY_COUNTER})

    def capture(self, node, ctx):
        size = ctx.size
        ctx.kernels.launch(self.kernel, ctx.stream, max(1, -(-size // BLOCK)), BLOCK,
                           node.kernel_args(size, ctx.size_ptr, ctx.replay_ptr))
        ctx.add_sized_kernel(ctx.stream.last_node(), nargs=self.size_index + 1, size_index=self.size_index,
                             size_type="int64", per_block=BLOCK)


register(CudaRandomNode, CudaRandomCapture)


#: the index of eagle_distribution's size parameter (n, the last of 18)
DIST_SIZE_INDEX = 17


class CudaDistributionNode(Node):
    """A distribution node (``exponential``, ``poisson``, ``binomial``, ``integers``) on
    CUDA arrays: one ``eagle_distribution`` kernel node (random.cu, the samplers of
    csrc/include/eagle/distributions.h); drawn ``~name~``."""

    kind = "random"
    runs_as = RunsAs.CUDA_RANDOM
    box = ("~", "~")
    dot_shape = "parallelogram"
    sized = True
    sample_local = True

    def __init__(self, spec: DistributionSpec):
        out = spec.out
        reads = spec.reads()
        if array_kind(out) != "cuda" or any(array_kind(a) != "cuda" for a in reads.values()):
            raise TypeError(f"{spec.kind}(): a cuda distribution node takes CUDA arrays")
        for name, a in reads.items():
            if overlap(a, out):
                raise ValueError(f"{spec.kind}(): {name!r} shares memory with out {spec.out_name!r}")
        super().__init__(reads or None, {spec.out_name: out})
        self.spec = spec
        self.out_ptr, self.out_stride = _pointer_and_stride(out, spec.out_name, spec.kind)
        self.ids_ptr, self.ids_stride = (0, 0) if spec.ids is None else \
            _pointer_and_stride(spec.ids, spec.ids_name, spec.kind)
        self.param_ptrs = [(0, 0) if not p.per_sample else _pointer_and_stride(p.array, p.name, spec.kind)
                           for p in spec.params] + [(0, 0)] * (2 - len(spec.params))

    def kernel_args(self, size, size_ptr, replay_ptr):
        """eagle_distribution's 18 arguments as ("i", int) / ("d", float) pairs (random.cu)."""
        s = self.spec
        key = s.key - (1 << 64) if s.key >= 1 << 63 else s.key   # the same 64 bits, as an int64
        d0, d1, i0, i1 = s.scalars()
        (q0, q0s), (q1, q1s) = self.param_ptrs
        i = lambda v: ("i", int(v))  # noqa: E731
        d = lambda v: ("d", float(v))  # noqa: E731
        return [i(self.out_ptr), i(self.out_stride), i(self.ids_ptr), i(self.ids_stride),
                i(s.what), i(s.out_type), i(key), i(q0), i(q0s), i(q1), i(q1s), i(i0), i(i1),
                d(d0), d(d1), i(replay_ptr), i(size_ptr), i(size)]

    def default_name(self) -> str:
        return self.spec.kind

    def __repr__(self):
        s = self.spec
        params = ", ".join(f"{p.arg}={p.name!r}" if p.per_sample else f"{p.arg}={p.value!r}" for p in s.params)
        ids = f", ids={s.ids_name!r}" if s.ids is not None else ""
        return f"{s.kind}(out={s.out_name!r}, key={s.key}, {params}{ids}, cuda)"


class CudaDistributionCapture(CudaRandomCapture):
    """A distribution node's capture: one ``eagle_distribution`` kernel node, sized,
    reading the graph's device replay counter (and device logical size, if kept)."""

    kernel, size_index = "eagle_distribution", DIST_SIZE_INDEX


register(CudaDistributionNode, CudaDistributionCapture)
