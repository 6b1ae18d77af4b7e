"""What a node is, for every backend: the node contract, and the opaque node.

A node is work (a callable, a kernel) plus the arrays it reads and writes, by
name. The names in ``reads`` and ``writes`` are the node's own names for its
arguments; they label the edges in the picture. Dependencies between nodes
come from the memory the arrays cover (see ``eagle.record.memory``), never
from the names.

``Node`` declares, in one place, everything a backend, the picture, the
profile and scale-out ask of a node (how it runs, whether it is sized,
whether it moves samples, whether it is a collective, how it is drawn). Node
kinds override these class attributes; nobody probes a node for attributes
it might not have, and nobody tests its ``kind`` string.
"""
from __future__ import annotations

import enum
from typing import Any, Mapping

from eagle.record.memory import array_family, validate_access_dict


class RunsAs(enum.Enum):
    """How a backend runs a node (``Node.runs_as``)."""

    #: a Python callable with no arguments, under the GIL (cpu: every replay; cuda: once, captured)
    OPAQUE = "opaque"
    #: a nogil C kernel over samples [start, stop) (``node.kernel``, ``node.arrays_in_order``,
    #: ``node.split``): the cpu executor runs it
    NATIVE = "native"
    #: a GPU kernel eagle launches itself during capture (``eagle.cuda.kernel_nodes``)
    CUDA_KERNEL = "cuda_kernel"
    #: a compaction or reorder captured as GPU kernels (``eagle.cuda.finished``)
    CUDA_PARTITION = "cuda_partition"


class Node:
    """Base of every node kind: the node contract.

    ``reads`` and ``writes`` are ordered ``{name: array}`` dicts; a name may not
    appear in both (bind it once, under ``writes``, if the node reads and writes it).
    """

    #: the kind's name, in ``repr`` and messages (``opaque``, ``native``, ``ufunc``...)
    kind = "node"
    #: how a backend runs it (see ``RunsAs``); every node kind sets it
    runs_as: RunsAs | None = None
    #: left and right marks of the node's box in the picture: ``<name>``, ``[name]``...
    box = ("<", ">")
    #: its Graphviz shape in ``g.to_dot()``
    dot_shape = "box"
    #: whether the node processes samples [start, stop) of the graph's logical size
    sized = False
    #: whether the node sets the next replay's logical size (compaction)
    resizes = False
    #: whether the node moves samples between positions (compaction, reorder)
    permutes_samples = False
    #: for a collective (MPI or NCCL), its name (``"allreduce"``...): every rank must record
    #: the same collectives in the same order; None for every other node
    collective = None
    #: cpu: the processes that replay this node's graph together (an MPI collective over
    #: several ranks: its communicator), or None: ``key`` (one per group), ``all_max_address``
    #: and ``context_address`` (a C ``eagle_group``, csrc/cpu/executor.h) and
    #: ``launch_mismatch(...)``, which raises on every rank of a launch the ranks disagree on
    group = None
    #: cpu: the compiled partition of a compaction or reorder node (its live count sets the
    #: next logical size; the keys it met outside [0, n_keys) are reported after the launch)
    partition = None
    #: cpu: the compiled ufunc loop of a ufunc node, whose error is raised after the launch
    loop = None
    #: cuda: whether the kernel reads the logical size from device memory (``SIZE_PTR``)
    size_ptr = False
    #: cuda: the MPI communicator whose ranks replay this node's graph together (an NCCL
    #: collective over several ranks), or None: ``launch_until_done`` stops on all at once
    ranks = None
    #: why a node that asked to be split runs whole (None: it was not refused)
    split_refused_reason = None

    def __init__(self, reads: Mapping[str, Any] | None, writes: Mapping[str, Any] | None,
                 per_sample=True):
        self.reads = validate_access_dict(reads, "reads")
        self.writes = validate_access_dict(writes, "writes")
        both = set(self.reads) & set(self.writes)
        if both:
            name = sorted(both)[0]
            raise ValueError(
                f"the name {name!r} is bound in both reads and writes; a node that reads and "
                f"writes one array declares it once, under writes")
        self.family = array_family(list(self.reads.values()) + list(self.writes.values()))
        #: names of the declared arrays whose axis 0 is not the sample axis (tables,
        #: parameters): they do not bound the graph's capacity
        self.not_per_sample = _not_per_sample(per_sample, list(self.reads) + list(self.writes))

    def arrays(self):
        """(name, array, is_write) for every declared array, reads first, in declaration order."""
        for k, a in self.reads.items():
            yield k, a, False
        for k, a in self.writes.items():
            yield k, a, True

    def default_name(self) -> str:
        return self.kind

    def sample_arrays(self):
        """The arrays whose axis 0 is the sample axis (they bound the capacity)."""
        skip = self.not_per_sample
        return [a for name, a, _ in self.arrays() if name not in skip]

    def named_sample_arrays(self):
        """(name, array) for every array of ``sample_arrays()``, in declaration order."""
        if type(self).sample_arrays is Node.sample_arrays:
            skip = self.not_per_sample
            return [(name, a) for name, a, _ in self.arrays() if name not in skip]
        mine = {id(a) for a in self.sample_arrays()}
        return [(name, a) for name, a, _ in self.arrays() if id(a) in mine]

    def prepare(self, name: str) -> None:
        """Called at ``build()``, in recording order on every rank, before a backend is made
        (an NCCL node creates its communicator here); nothing for most kinds."""


def _not_per_sample(per_sample, names):
    """The declared names ``per_sample=`` leaves out: True (all are per-sample), False
    (none is), or a collection of the names that are."""
    if per_sample is True:
        return frozenset()
    if per_sample is False:
        return frozenset(names)
    if isinstance(per_sample, (str, bytes)) or not hasattr(per_sample, "__iter__"):
        raise TypeError("per_sample= is True, False, or a collection of the declared names whose "
                        f"axis 0 is the sample axis; got {per_sample!r}")
    chosen = set(per_sample)
    unknown = sorted(str(n) for n in chosen - set(names))
    if unknown:
        raise ValueError(f"per_sample= names {unknown[0]!r}, which the node does not declare "
                         f"(it declares {sorted(names)})")
    return frozenset(n for n in names if n not in chosen)


def refuse_object_arrays(node, what):
    """A native kernel writing Python object pointers as raw bytes would corrupt the heap."""
    for name, a, _ in node.arrays():
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.hasobject:
            raise TypeError(f"{what}: {name!r} has dtype {dtype}, which holds Python objects; a native "
                            "kernel cannot take it (use a numeric or plain structured dtype, or an "
                            "opaque node)")


class OpaqueNode(Node):
    """A Python callable with no arguments, run whole on every replay, under the GIL."""

    kind = "opaque"
    runs_as = RunsAs.OPAQUE
    box = ("<", ">")
    dot_shape = "ellipse"

    def __init__(self, fn, reads=None, writes=None, per_sample=True):
        if not callable(fn):
            raise TypeError(f"opaque() needs a callable with no arguments, got {type(fn).__name__}")
        super().__init__(reads, writes, per_sample)
        self.fn = fn

    def default_name(self) -> str:
        name = getattr(self.fn, "__name__", None)
        if not name or name == "<lambda>":
            return "opaque"
        return name

    def __repr__(self):
        return f"opaque({getattr(self.fn, '__qualname__', self.fn)!r}, reads={list(self.reads)}, writes={list(self.writes)})"


def opaque(fn, reads: Mapping[str, Any] | None = None, writes: Mapping[str, Any] | None = None,
           *, per_sample=True) -> OpaqueNode:
    """A node that calls ``fn()`` on every replay.

    ``reads`` and ``writes`` name the arrays ``fn`` reads and writes, e.g.
    ``opaque(step, reads={"x": x}, writes={"y": y})``; eagle orders nodes by the
    memory of these arrays (their bytes, whoever owns them), so declare every
    array the function touches.
    On the CPU the function runs on every replay, under the GIL. On the GPU it
    runs once, while the graph is captured; replays repeat the kernels it launched.
    ``per_sample`` is as for ``native``; an opaque node's arrays bound the capacity
    only in a graph without sized nodes.
    """
    return OpaqueNode(fn, reads, writes, per_sample=per_sample)


