"""Random nodes on the CPU: Philox4x32-10 drawn over samples [start, stop), nogil, split
across the team (the kernels: csrc/cpu/random_kernels.c, csrc/cpu/distribution_kernels.c;
the arguments: ``eagle.record.random``, ``eagle.record.distributions``). A sample's
numbers depend only on the key, its id, the replay (and the node's parameters), never on
the thread, split, tile or launch grouping."""
from __future__ import annotations

import numpy as np

from eagle.cpu.native_node import NativeNode
from eagle.record.memory import overlap
from eagle.record.distributions import DistributionSpec
from eagle.record.random import RandomSpec


class RandomNode(NativeNode):
    """A random-number node (``random_bits``, ``uniform``, ``normal``); drawn ``~name~``."""

    kind = "random"
    box = ("~", "~")
    dot_shape = "parallelogram"

    def __init__(self, spec: RandomSpec):
        from eagle.cpu._random import random_kernel

        out = spec.out
        outs = {spec.out_name: out}
        if spec.out2 is not None:
            outs[spec.out2_name] = spec.out2
        if not all(isinstance(a, np.ndarray) for a in outs.values()) or \
                (spec.ids is not None and not isinstance(spec.ids, np.ndarray)):
            raise TypeError(f"{spec.kind}(): a cpu random node takes NumPy arrays")
        reads = {spec.ids_name: spec.ids} if spec.ids is not None else None
        for name, a in outs.items():
            if spec.ids is not None and overlap(spec.ids, a):
                raise ValueError(f"{spec.kind}(): ids {spec.ids_name!r} shares memory with out {name!r}")
        if spec.out2 is not None and overlap(out, spec.out2):
            raise ValueError(f"{spec.kind}(): the outputs {spec.out_name!r} and {spec.out2_name!r} share memory")
        kernel = random_kernel(spec.kind, spec.what, spec.key, spec.f32, spec.ids is not None,
                               spec.a, spec.b, spec.below, spec.out2 is not None)
        # sample i's numbers are drawn from its own counter into its own row: sample-local,
        # so the node fuses into a run of sample tiles
        super().__init__(kernel, reads, outs, split=True, sample_local=True)
        self.spec = spec

    def default_name(self) -> str:
        return self.spec.kind

    def __repr__(self):
        s = self.spec
        ids = f", ids={s.ids_name!r}" if s.ids is not None else ""
        out = repr(s.out_name) if s.out2 is None else f"({s.out_name!r}, {s.out2_name!r})"
        return f"{s.kind}(out={out}, key={s.key}{ids})"


class DistributionNode(NativeNode):
    """A distribution node (``exponential``, ``poisson``, ``binomial``, ``integers``);
    drawn ``~name~``. It reads its ids and per-sample parameter arrays."""

    kind = "random"
    box = ("~", "~")
    dot_shape = "parallelogram"

    def __init__(self, spec: DistributionSpec):
        from eagle.cpu._random import distribution_kernel

        out = spec.out
        reads = spec.reads()
        if not isinstance(out, np.ndarray) or not all(isinstance(a, np.ndarray) for a in reads.values()):
            raise TypeError(f"{spec.kind}(): a cpu distribution node takes NumPy arrays")
        for name, a in reads.items():
            if overlap(a, out):
                raise ValueError(f"{spec.kind}(): {name!r} shares memory with out {spec.out_name!r}")
        p0, p1 = (list(spec.params) + [None])[:2]
        d0, d1, i0, i1 = spec.scalars()
        kernel = distribution_kernel(spec.kind, spec.what, spec.out_type, spec.key, spec.ids is not None,
                                     p0.per_sample, p1 is not None and p1.per_sample, d0, d1, i0, i1)
        # each sample draws from its own counters into its own row: sample-local
        super().__init__(kernel, reads or None, {spec.out_name: out}, split=True, sample_local=True)
        self.spec = spec

    def default_name(self) -> str:
        return self.spec.kind

    def __repr__(self):
        s = self.spec
        params = ", ".join(f"{p.arg}={p.name!r}" if p.per_sample else f"{p.arg}={p.value!r}" for p in s.params)
        ids = f", ids={s.ids_name!r}" if s.ids is not None else ""
        return f"{s.kind}(out={s.out_name!r}, key={s.key}, {params}{ids})"
