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

from eagle._public import keywords_after
from eagle.record.arrays import named_arrays
from eagle.record.memory import array_family, same_view

__all__ = ["Node", "RunsAs", "OpaqueNode", "opaque"]


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
    #: a random node on CUDA arrays, captured as a generated kernel reading the graph's
    #: device replay counter (``eagle.cuda.random_node``)
    CUDA_RANDOM = "cuda_random"
    #: a control-flow node (``while_loop``, ``if_else``, ``subgraph``: ``eagle.record.control``)
    #: whose bodies' nodes the backend compiles into the graph's own plan
    CONTROL = "control"


class Node:
    """Base of every node kind: the node contract.

    ``reads`` and ``writes`` are ordered ``{name: array}`` dicts. An array the node
    both reads and writes (an in-place update) is declared in ``updates`` (it joins
    ``writes``, after the other writes, and ``updated`` names it), or under one name
    bound to the same array in both ``reads`` and ``writes``: either way staging sees a
    read and a write, so the edge into the node carries the array's name (data flows in).
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
    #: whether the node moves samples between positions (compaction, reorder), itself or
    #: in its bodies (a control node)
    permutes_samples = False
    #: the compaction node this node is, or holds in its bodies (a control node), or None:
    #: a graph has at most one, the source of its next replay's logical size
    compaction = None
    #: whether the node is, or holds in its bodies, a reorder (a partition that leaves the
    #: logical size alone): a graph refuses one recorded after its compaction
    reorders = False
    #: for a collective (MPI or NCCL), its name (``"allreduce"``...): every rank must record
    #: the same collectives in the same order; None for every other node
    collective = None
    #: control-flow nodes (``eagle.record.control``): the recordings the node runs in place,
    #: and weak references to the graphs they were taken from; () for every other node
    bodies = ()
    body_graphs = ()
    #: why a node that asked to be split runs whole (None: it was not refused)
    split_refused_reason = None
    #: whether the node touches its per-sample arrays only at its own samples [start, stop)
    #: and writes nothing else (ufunc nodes, eagle's built-in kernels; a native kernel that
    #: declares it): the cpu backend may run it in a fused run of sample tiles
    sample_local = False

    #: whether the node writes its arrays that are not per-sample only once all its shares of
    #: a run are done (a reduction's output, a tally): it may join a fused run all the same
    combines = False
    #: a split node's shares (and a fused run's tiles) start at multiples of this many
    #: samples (a reduction's fixed blocks: its results do not depend on the split)
    align = 1

    #: names in ``writes`` that the node also reads without declaring them in ``reads``
    #: (``updates=``, a ufunc's output that is also its input): staging gives each a read too
    updated = frozenset()

    def __init__(self, reads: Mapping[str, Any] | None, writes: Mapping[str, Any] | None,
                 per_sample=True, updates: Mapping[str, Any] | None = None):
        self.reads = named_arrays(reads, "reads", "in")
        self.writes = named_arrays(writes, "writes", "out", write=True)
        for name in [n for n in self.reads if n in self.writes]:   # the first clash in order
            if not same_view(self.reads[name], self.writes[name]):
                raise ValueError(
                    f"the name {name!r} is bound to two different arrays in reads and writes; a "
                    f"node that reads and writes one array binds it to that array in both (or "
                    f"declares it in updates=)")
        updates = named_arrays(updates, "updates", "inout", write=True)
        for name in updates:
            if name in self.reads or name in self.writes:
                where = "reads" if name in self.reads else "writes"
                raise ValueError(f"the name {name!r} is declared in both updates and {where}; "
                                 f"updates= already means a read and a write")
        if updates:
            self.writes.update(updates)
            self.updated = frozenset(updates)
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

    def accesses(self):
        """(name, array, is_write) for every access staging orders: ``arrays()``, with a
        read before the write of each ``updated`` name (an update carries data in)."""
        updated = self.updated
        for name, a, is_write in self.arrays():
            if is_write and name in updated:
                yield name, a, False
            yield name, a, is_write

    def read_too(self, names) -> None:
        """Mark ``names`` (of ``writes``) as read by the node too, before it is recorded
        (a ufunc node whose output is also an input)."""
        names = frozenset(names)
        unknown = names - set(self.writes)
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]!r} is not a name the node writes")
        self.updated = self.updated | names

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

    def extent(self):
        """The node's own sample extent: the shortest axis 0 among its per-sample arrays
        (None: it has none). A sized node runs over samples [0, min(logical size, extent)):
        the graph's capacity is the longest extent, so no node's work is cut short and
        none runs past its arrays (docs/graph.md, "Extents")."""
        by = self.extent_by()
        return None if by is None else by[1]

    def extent_by(self):
        """(array name, length) of the first of the shortest per-sample arrays, which sets
        ``extent()``; None when the node has no per-sample array."""
        from eagle.record.memory import leading_length

        best = None
        for name, a in self.named_sample_arrays():
            m = leading_length(a)
            if m is not None and (best is None or m < best[1]):
                best = (name, m)
        return best

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


def _check_callable(fn, args, what):
    """Refuse, when the node is made, a callable that cannot take ``args`` (``opaque(lambda a:
    None)`` would fail only at launch). Builtins and C callables without a signature pass."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):   # no signature to read (some builtins, C callables)
        return
    try:
        sig.bind(*args)
    except TypeError as e:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        takes = "no arguments" if not args else "two positional arguments (start, stop)"
        raise TypeError(f"{what}: {name}{sig} cannot be called with {takes} ({e}); the node calls "
                        f"it as fn({', '.join(('start', 'stop')[:len(args)])}) on every replay") from None


class OpaqueNode(Node):
    """A Python callable with no arguments, run whole on every replay, under the GIL."""

    kind = "opaque"
    runs_as = RunsAs.OPAQUE
    box = ("<", ">")
    dot_shape = "ellipse"
    def __init__(self, fn, reads=None, writes=None, per_sample=True, updates=None):
        what = "opaque(fn, sized=True)" if self.sized else "opaque()"
        if not callable(fn):
            raise TypeError(f"{what} needs a callable, got {type(fn).__name__}")
        _check_callable(fn, (0, 0) if self.sized else (), what)
        super().__init__(reads, writes, per_sample, updates)
        self.fn = fn

    def callable_for(self, logical_size):
        """The no-argument callable a cpu backend runs on each replay; ``logical_size()``
        gives the replay's logical size (a sized node is handed it)."""
        return self.fn

    def default_name(self) -> str:
        name = getattr(self.fn, "__name__", None)
        if not name or name == "<lambda>":
            return "opaque"
        return name

    def __repr__(self):
        sized = ", sized=True" if self.sized else ""
        return (f"opaque({getattr(self.fn, '__qualname__', self.fn)!r}, reads={list(self.reads)}, "
                f"writes={list(self.writes)}{sized})")


class SizedOpaqueNode(OpaqueNode):
    """An opaque node handed its samples: ``fn(start, stop)`` with [0, min(logical size,
    its extent)), whole,
    under the GIL (not split across threads: the GIL would serialize the pieces)."""

    sized = True

    def callable_for(self, logical_size):
        fn = self.fn
        extent = self.extent()
        if extent is None:
            def call():
                fn(0, logical_size())
        else:
            def call():
                fn(0, min(logical_size(), extent))

        return call


@keywords_after(1, 'opaque(fn, reads={"x": x}, writes={"y": y})')
def opaque(fn, *, reads=None, writes=None, updates=None, per_sample=True, sized=False) -> OpaqueNode:
    """A node that calls ``fn()`` on every replay.

    eagle orders nodes by the memory of the arrays they declare (their bytes, whoever
    owns them), so declare every array the function touches. On the CPU the function
    runs on every replay, under the GIL. On the GPU it runs once, while the graph is
    captured; replays repeat the kernels it launched.

    Parameters
    ----------
    fn : callable
        Called as ``fn()`` on every replay (``fn(start, stop)`` when ``sized``); checked
        here, where its signature can be read.
    reads, writes : dict of name -> array, or an array, optional
        The arrays ``fn`` reads and writes, named for the picture's edges, e.g.
        ``reads={"x": x}, writes={"y": y}`` (a bare array is named ``in`` / ``out``).
    updates : dict of name -> array, or an array, optional
        Arrays it updates in place (reads, then writes; a bare one is named ``inout``):
        the edge into the node then carries them. A name bound to the same array in both
        ``reads`` and ``writes`` means the same.
    per_sample : bool or collection of names, default True
        As for ``native``; an opaque node's arrays bound the capacity only in a graph
        without sized nodes.
    sized : bool, default False
        Make a sized node: ``fn(start, stop)`` is called on every replay with the samples
        to process, ``[0, g.logical_size)`` (after ``set_logical_size``, or a compaction,
        the new size), and should touch only those samples of its per-sample arrays,
        which bound the graph's capacity like a native node's. It runs whole, under the
        GIL, on one thread. On the GPU a sized opaque node is refused at ``build()``: it
        would run once, at capture, and its kernels would keep the size of that call.

    Returns
    -------
    Node
        The opaque node.

    Raises
    ------
    TypeError
        ``fn`` not callable or not callable with those arguments, an array that is no
        array, arrays positional (``opaque(fn, {"x": x})``: they are keywords).
    ValueError
        One name bound to two different arrays, a name in both ``updates`` and
        ``reads``/``writes``.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import opaque
    >>> x, y = np.ones(3), np.zeros(3)
    >>> def step():
    ...     np.add(x, y, out=y)
    >>> g = eagle.Graph()
    >>> g.add_node(opaque(step, reads={"x": x}, updates={"y": y}), name="step")
    >>> g.build().launch(2)
    >>> y
    array([2., 2., 2.])
    """
    if not isinstance(sized, bool):
        raise TypeError(f"opaque(): sized= takes True or False, got {sized!r}")
    kind = SizedOpaqueNode if sized else OpaqueNode
    return kind(fn, reads, writes, per_sample=per_sample, updates=updates)
