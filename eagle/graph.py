"""Recording: ``eagle.Graph`` and the node constructors.

    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    g.build()
    g.launch(3)

Recording runs nothing. Each node is staged as it is recorded (see
``eagle._staging``), so ``print(g)`` shows the stages at any time.

Rules a user can rely on:

* Recording after ``build()`` is allowed and un-builds the graph: the picture
  says ``(not built)`` again and ``launch`` raises ``NotBuiltError`` until
  ``build()`` is called again. Nothing is rebuilt behind your back.
* Launching one graph from two threads at once is serialized: the second call
  waits for the first. Recording into a graph while another thread launches it
  waits too. A node that launches or records into its own graph gets a
  ``RuntimeError`` (it would deadlock).
* Every bad input raises before anything changes.
"""
from __future__ import annotations

import operator
import shutil
import threading
from dataclasses import dataclass

from eagle import _dot
from eagle._cuda_kernel import SIZE, SIZE_PTR, CudaKernelNode, cuda_kernel
from eagle._finished import compact, reorder
from eagle._memory import leading_length
from eagle._nodes import NativeNode, Node, OpaqueNode, native, opaque
from eagle._picture import render
from eagle._staging import GroupConflict, Stager
from eagle._ufunc_node import UfuncNode, ufunc
from eagle.mpi import allgather, allreduce, bcast, sendrecv  # collective nodes (mpi4py on first use)

__all__ = ["Graph", "Node", "opaque", "native", "ufunc", "cuda_kernel", "SIZE", "SIZE_PTR", "compact", "reorder",
           "NotBuiltError", "GroupConflict", "Plan", "allreduce", "allgather", "bcast", "sendrecv"]


class NotBuiltError(RuntimeError):
    """launch() on a graph that was never built or was recorded into since build()."""


def _plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _count(n, what):
    if isinstance(n, bool):
        raise TypeError(f"{what} needs an integer count, got a bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{what} needs an integer count, got {type(n).__name__}") from None
    if n < 0:
        raise ValueError(f"{what} needs a count >= 0, got {n}")
    return n


@dataclass
class StagePlan:
    stage: int
    nodes: list
    policy: str       # how the team was to be chosen: auto, serial, parallel
    team: int         # threads that run the stage at the current logical size
    cost_ns: float | None


@dataclass
class Plan:
    """How a built graph runs: per stage, the team chosen and why. ``print`` it."""

    backend: str
    num_threads: int
    logical_size: int
    capacity: int
    threshold_ns: float
    stages: list
    #: (node, array, length) of the array that bounds the capacity (set by Graph.plan)
    capacity_bound_by = None
    #: (node, reason) for each native node run whole although it asked to be split
    split_refused = ()

    def __str__(self):
        lines = [f"eagle plan · backend: {self.backend} · {_plural(self.num_threads, 'thread')} · "
                 f"logical size {self.logical_size} of {self.capacity} · "
                 f"stages under {self.threshold_ns / 1e3:.1f} µs run on one thread"]
        for sp in self.stages:
            cost = "cost not measured yet" if sp.cost_ns is None else f"{sp.cost_ns / 1e3:.2f} µs"
            lines.append(f"stage {sp.stage}  team {sp.team:<3} ({sp.policy:8}) {cost:>24}   "
                         + " ".join(sp.nodes))
        if self.capacity_bound_by is not None:
            node, array, length = self.capacity_bound_by
            lines.append(f"capacity {length}: bounded by {array!r} of {node!r}")
        for node, reason in self.split_refused:
            lines.append(f"{node!r} not split: {reason}")
        return "\n".join(lines)


class Graph:
    """A recorded compute step: nodes staged by the memory they read and write.

    Record with ``add_node``/``add_group``, then ``build()`` once, ``launch(n)``
    many times, and ``set_logical_size(n)`` to change how many samples the
    native nodes process, without re-recording.
    """

    def __init__(self):
        self._nodes: list[Node] = []
        self._names: list[str] = []
        self._name_set: set[str] = set()
        self._next_suffix: dict[str, int] = {}   # default name -> next "_k" suffix to try
        self._n_groups = 0
        self._stager = Stager()
        self._family: str | None = None
        self._backend = None
        self._logical_size: int | None = None   # None: follow the capacity
        self._lock = threading.Lock()
        self._holder: int | None = None
        self._ever_built = False
        # shortest axis 0 among the arrays of sized nodes / of all nodes (None: no such array)
        self._cap_sized: int | None = None
        self._cap_all: int | None = None
        # (node name, array name, length) of the array that set each of them
        self._cap_sized_by: tuple | None = None
        self._cap_all_by: tuple | None = None
        self._has_sized = False
        self._has_resizer = False   # a compaction node sets the logical size as samples finish

    # ---- recording ------------------------------------------------------

    def add_node(self, node: Node, name: str | None = None) -> None:
        """Record one node. ``name`` defaults to the function's or kernel's name."""
        self._add([node], [name], group=False)

    def add_group(self, nodes, names=None) -> None:
        """Record nodes that are independent of each other and share one stage.

        A group whose members conflict (one writes memory another reads or
        writes) is rejected, naming both nodes and the array.
        """
        nodes = list(nodes)
        if not nodes:
            raise ValueError("add_group() needs at least one node")
        if names is None:
            names = [None] * len(nodes)
        else:
            names = list(names)
            if len(names) != len(nodes):
                raise ValueError(f"add_group() got {len(nodes)} nodes but {len(names)} names")
        self._add(nodes, names, group=True)

    def _add(self, nodes, names, group):
        with self._exclusive("record into"):
            for node in nodes:
                if not isinstance(node, Node):
                    raise TypeError(
                        "a graph records nodes made by eagle.graph.opaque(fn, reads=..., writes=...), "
                        "native(kernel, ...), cuda_kernel(...), compact(...) or reorder(...), "
                        f"got {type(node).__name__}")
            families = {n.family for n in nodes if n.family} | ({self._family} if self._family else set())
            if len(families) > 1:
                raise TypeError("this graph would mix NumPy and CUDA arrays; a graph runs on one "
                                "device: NumPy arrays build for the cpu backend, CuPy arrays for cuda")
            if sum(n.resizes for n in nodes) + self._has_resizer > 1:
                raise ValueError("a graph has at most one compaction node: it alone sets the next "
                                 "replay's logical size")
            if self._has_resizer and any(n.permutes_samples for n in nodes):
                # it would sort the old range, finished samples included, and push live
                # samples past the new logical size
                raise ValueError("record reorder() before compact(): a partition after the compaction "
                                 "would still see the replay's old range")
            final, suffixes = self._assign_names(nodes, names)
            accesses = [Stager.accesses(n) for n in nodes]
            if group:
                self._stager.check_group(final, accesses)
            # validated: from here on nothing can fail
            first = len(self._nodes)
            self._stager.add(first, accesses)
            self._n_groups += group
            self._next_suffix.update(suffixes)
            for node, name in zip(nodes, final):
                for array_name, a in node.named_sample_arrays():
                    m = leading_length(a)
                    if m is not None:
                        if self._cap_all is None or m < self._cap_all:
                            self._cap_all, self._cap_all_by = m, (name, array_name, m)
                        if node.sized and (self._cap_sized is None or m < self._cap_sized):
                            self._cap_sized, self._cap_sized_by = m, (name, array_name, m)
                self._has_sized |= node.sized
                self._has_resizer |= node.resizes
                self._nodes.append(node)
                self._names.append(name)
                self._name_set.add(name)
            self._family = families.pop() if families else None
            self._backend = None

    def _assign_names(self, nodes, names):
        """The nodes' final names, and the default-name counters to keep once they are recorded."""
        new = set()   # names given in this call, beside the graph's own
        suffixes = {}  # base -> next suffix to try, for this call (committed by _add)

        def taken(name):
            return name in self._name_set or name in new

        final = []
        for node, name in zip(nodes, names):
            if name is None:
                # a counter per base name: many nodes of one default name probe O(1) each
                base = node.default_name()
                k = suffixes.get(base) or self._next_suffix.get(base, 2)
                name = base
                if taken(name):
                    name = f"{base}_{k}"
                    while taken(name):
                        k += 1
                        name = f"{base}_{k}"
                    k += 1
                suffixes[base] = k
            elif not isinstance(name, str) or not name or any(c in name for c in "\n\r\t"):
                raise TypeError(f"a node name must be a non-empty one-line string, got {name!r}")
            elif taken(name):
                raise ValueError(f"the graph already has a node named {name!r}; node names are unique")
            new.add(name)
            final.append(name)
        return final, suffixes

    # ---- what was recorded -------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        """Node names in recording order."""
        return list(self._names)

    @property
    def stages(self) -> list[list[str]]:
        """Node names per stage, in recording order within a stage."""
        return [[self._names[i] for i in idx] for idx in self._stage_indexes()]

    def stage_of(self, name: str) -> int:
        return self._stager.stage_of[self._names.index(name)]

    def _stage_indexes(self):
        rows = [[] for _ in range(self._stager.n_stages)]
        for i, s in enumerate(self._stager.stage_of):
            rows[s].append(i)
        return rows

    @property
    def dependencies(self) -> list[tuple[str, str, str | None]]:
        """(before, after, array name or None for an ordering-only hazard)."""
        return [(self._names[d.src], self._names[d.dst], d.label) for d in self._stager.edges]

    @property
    def backend(self) -> str | None:
        """'cpu' or 'cuda' once built, else None."""
        return self._backend.name if self._backend is not None else None

    @property
    def capacity(self) -> int:
        """The largest logical size the arrays can hold: the shortest axis 0 among
        the arrays of sized (native) nodes, or of all arrays if there are none."""
        return (self._cap_sized if self._has_sized else self._cap_all) or 0

    @property
    def capacity_bound_by(self) -> tuple[str, str, int] | None:
        """(node name, array name, length) of the array that bounds ``capacity``: the
        first recorded of the shortest per-sample arrays; None when no array bounds it.
        Arrays a node marks as not per-sample (``per_sample=``) never do."""
        return self._cap_sized_by if self._has_sized else self._cap_all_by

    @property
    def split_refused(self) -> list[tuple[str, str]]:
        """(node name, reason) for every native node eagle runs whole although it asked to
        be split: its own reads and writes overlap at other samples."""
        return [(name, node.split_refused_reason) for node, name in zip(self._nodes, self._names)
                if getattr(node, "split_refused_reason", None)]

    @property
    def logical_size(self) -> int:
        """How many samples the sized nodes process on the next replay (a compaction
        node changes it as samples finish, also during a launch)."""
        backend = self._backend
        if backend is not None and backend.resizes:
            return backend.logical_size
        return self.capacity if self._logical_size is None else self._logical_size

    @logical_size.setter
    def logical_size(self, n):
        self.set_logical_size(n)

    # ---- build, launch, retune ------------------------------------------------

    def build(self, *, teams="auto") -> "Graph":
        """Make the recording launchable on the backend its arrays call for.

        NumPy arrays build for ``cpu``, CuPy (``__cuda_array_interface__``)
        arrays for ``cuda``. ``teams`` sets how each CPU stage's work is
        shared: ``"auto"`` (a stage runs on the whole team only when its
        measured cost pays for a barrier), ``"serial"``, ``"parallel"``, or a
        list with one of these per stage. Returns the graph.
        """
        with self._exclusive("build"):
            n_stages = self._stager.n_stages
            if isinstance(teams, str):
                policies = [teams] * n_stages
            else:
                policies = list(teams)
                if len(policies) != n_stages:
                    raise ValueError(f"teams= needs one policy per stage ({n_stages}), got {len(policies)}")
            bad = [p for p in policies if p not in ("auto", "serial", "parallel")]
            if bad:
                raise ValueError(f"a team policy is 'auto', 'serial' or 'parallel', got {bad[0]!r}")
            if self._logical_size is not None and self._logical_size > self.capacity:
                raise ValueError(f"logical size {self._logical_size} exceeds the capacity {self.capacity} "
                                 "of the arrays recorded since; call set_logical_size() first")
            if any(getattr(node, "collective", None) for node in self._nodes):
                from eagle.mpi._check import check_same_graph
                check_same_graph(self)   # every rank recorded the same graph, or all raise
            if self._family == "cuda":
                try:
                    from eagle._backend_cuda import CudaBackend
                except ImportError as e:
                    raise NotImplementedError(
                        "this graph holds CUDA arrays, and this eagle was built without the cuda "
                        f"backend ({e}); use NumPy arrays for the cpu backend") from e
                self._backend = CudaBackend(self, policies)
            else:
                from eagle._backend_cpu import CpuBackend
                self._backend = CpuBackend(self, policies)
            self._ever_built = True
        return self

    def launch(self, n: int = 1) -> None:
        """Replay the built graph ``n`` times.

        If a node raises, the replay stops there and the exception reaches you
        with a note naming the node, its stage and the replay; the graph stays
        usable. Ctrl-C stops a long launch at the next replay.
        """
        if type(n) is not int or n < 0:
            n = _count(n, "launch()")
        self._run(n, False)

    def launch_until_done(self, max_replays: int) -> int:
        """Replay until no sample is left (a compaction node's live count reaches 0),
        at most ``max_replays`` times, without returning to Python in between.
        Returns the replays run."""
        max_replays = _count(max_replays, "launch_until_done()")
        if not self._has_resizer:
            raise ValueError("launch_until_done() needs a compaction node (eagle.graph.compact) "
                             "to know when the samples are done")
        return self._run(max_replays, True)

    def _run(self, n, until_done):
        with self._exclusive("launch"):
            backend = self._backend
            if backend is None:
                raise NotBuiltError(
                    "the graph was recorded into since build(); call g.build() again"
                    if self._ever_built else "launch() needs a built graph: call g.build() first")
            try:
                done = backend.launch(n, until_done) if until_done else backend.launch(n)
            except BaseException as e:
                self._note_failure(e, n)
                if any(getattr(node, "collective", None) for node in self._nodes):
                    from eagle.mpi._failure import stop_on_failure
                    stop_on_failure(self, e)   # the other ranks must not wait in a collective
                raise
            finally:
                if backend.resizes:
                    self._logical_size = backend.logical_size
            return done

    def _note_failure(self, exc, n):
        where = getattr(self._backend, "last_failure", None)
        if where is None:
            return
        node, replay = where
        if node is None or node < 0:
            note = f"eagle: launch({n}) interrupted in replay {replay}"
        else:
            note = (f"eagle: raised by node {self._names[node]!r} (stage {self._stager.stage_of[node]}) "
                    f"in replay {replay} of launch({n})")
        _add_note(exc, note)

    def set_logical_size(self, n: int) -> None:
        """Process samples [0, n) on the next replays: 0 <= n <= capacity. No rebuild."""
        if type(n) is not int:
            if isinstance(n, bool):
                raise TypeError("set_logical_size() needs an integer, got a bool")
            try:
                n = operator.index(n)
            except TypeError:
                raise TypeError(f"set_logical_size() needs an integer, got {type(n).__name__}") from None
        cap = (self._cap_sized if self._has_sized else self._cap_all) or 0
        if not 0 <= n <= cap:
            raise ValueError(f"logical size must be in 0..{cap} (the capacity of the arrays), got {n}")
        lock = self._lock
        if not lock.acquire(False):   # busy (or called from inside a launch): the general path
            with self._exclusive("retune"):
                self._retune(n)
            return
        try:
            self._retune(n)
        finally:
            lock.release()

    def _retune(self, n):
        if self._backend is not None:
            self._backend.set_logical_size(n)
        self._logical_size = n

    def plan(self) -> Plan:
        """How the built graph runs: per stage, the team chosen and the cost it was chosen from."""
        if self._backend is None:
            raise NotBuiltError("plan() needs a built graph: call g.build() first")
        plan = self._backend.plan()
        plan.capacity_bound_by = self.capacity_bound_by
        plan.split_refused = self.split_refused
        return plan

    # ---- thread-safety ---------------------------------------------------------

    def _exclusive(self, what):
        return _Held(self, what)

    # ---- the picture ------------------------------------------------------------

    def _header(self):
        backend = self.backend or "(not built)"
        text = (f"eagle.Graph {_plural(len(self._nodes), 'node')} · "
                f"{_plural(self._n_groups, 'group')} · backend: {backend}")
        if self._has_sized:
            text += f" · logical size {self.logical_size} of {self.capacity}"
            bound = self.capacity_bound_by
            if bound is not None:
                text += f" (bounded by {bound[1]!r} of {bound[0]!r})"
        return text

    def __str__(self):
        boxes = [f"{n.box[0]}{name}{n.box[1]}" for n, name in zip(self._nodes, self._names)]
        edges = [(d.src, d.dst, d.label) for d in self._stager.edges]
        notes = self._backend.stage_notes() if self._backend is not None else None
        # a stage wider than the terminal (80 columns when unknown) wraps onto continuation rows
        width = shutil.get_terminal_size((80, 24)).columns
        return render(self._header(), self._stage_indexes(), boxes, edges, notes, width=width)

    def __repr__(self):
        return f"<{self._header()}>"

    def to_dot(self) -> str:
        """The graph as Graphviz DOT: stages as ranks, node kinds as shapes, edges labelled
        with the arrays they carry, ordering-only edges dashed (see ``eagle._dot``)."""
        notes = self._backend.stage_notes() if self._backend is not None else None
        edges = [(d.src, d.dst, d.label) for d in self._stager.edges]
        return _dot.to_dot(self._header(), self._nodes, self._names, self._stage_indexes(), edges, notes)

    def _repr_html_(self):
        """Jupyter: an SVG when Graphviz's ``dot`` is installed, else the picture."""
        return _dot.repr_html(self)


def _add_note(exc, note):
    """Attach ``note`` to ``exc`` whatever its ``__notes__`` holds (a tuple, a string,
    something odd); never raise: the node's exception must reach the caller as it is."""
    try:
        if hasattr(exc, "add_note"):
            try:
                exc.add_note(note)
                return
            except TypeError:   # __notes__ is not a list
                pass
        notes = getattr(exc, "__notes__", None)
        kept = list(notes) if isinstance(notes, (list, tuple)) else ([] if notes is None else [notes])
        # as text: tools that print notes (traceback, pytest) expect strings
        exc.__notes__ = [n if isinstance(n, str) else str(n) for n in kept] + [note]
    except Exception:
        pass


class _Held:
    """The graph's lock, held by one thread at a time; blocking, so launches serialize.
    The holder's own thread asking again is refused: it would wait for itself."""

    __slots__ = ("g", "what")

    def __init__(self, g, what):
        self.g, self.what = g, what

    def __enter__(self):
        g = self.g
        me = threading.get_ident()
        if not g._lock.acquire(False):
            if g._holder == me:
                raise RuntimeError(f"cannot {self.what} this graph from inside its own launch (a node "
                                   "of the graph called back into it)")
            g._lock.acquire()
        g._holder = me

    def __exit__(self, *exc):
        self.g._holder = None
        self.g._lock.release()
