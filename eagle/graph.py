"""Recording: ``eagle.Graph`` and the node constructors.

    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    g.build()
    g.launch(3)

Recording runs nothing. Each node is staged as it is recorded (see
``eagle.record.staging``), so ``print(g)`` shows the stages at any time.

Rules a user can rely on:

* Recording after ``build()`` is allowed and un-builds the graph: the picture
  says ``(not built)`` again and ``launch`` raises ``NotBuiltError`` until
  ``build()`` is called again. Nothing is rebuilt behind your back.
* Launching one graph from two threads at once is serialized: the second call
  waits for the first. Recording into a graph or ``set_logical_size`` while
  another thread launches it waits too (so a retune applies from the next
  launch on). A node that launches, records into, builds or retunes its own
  graph gets a ``RuntimeError`` (it would deadlock), on whichever thread it
  runs, OpenMP workers included. ``plan()``, ``str(g)`` and the properties only
  read: they never change a launch in flight, and while another thread records
  they show the graph as it was between two recorded nodes.
* The lock and the launch path are compiled (``eagle._core.GraphCore``):
  no signal can leave a graph locked.
* Every bad input raises before anything changes.

Backends see a graph only through its ``Recording`` (``eagle.record``), made
at ``build()``; scale-out joins in through ``eagle.record.hooks``.
"""
from __future__ import annotations

import operator
import shutil
import types

from eagle._core import GraphCore
from eagle._errors import GroupConflictError, NotBuiltError
from eagle._nodes import (SIZE, SIZE_PTR, Node, allgather, allreduce, bcast, binomial, compact, cuda_kernel,
                          exponential, if_else, integers, native, normal, opaque, poisson, random_bits, reorder,
                          sendrecv, subgraph, ufunc, uniform, while_loop)
from eagle._public import public_dir, warn_renamed
from eagle._text import check_name, plural, with_article
from eagle.cpu.backend import CpuBackend
from eagle.look import dot
from eagle.look import bodies
from eagle.record import hooks
from eagle.record.options import CpuOptions, CudaOptions
from eagle.record.plan import Plan, StagePlan
from eagle.record.random import as_uint64
from eagle.record.recording import Recording
from eagle.record.staging import Stager

__all__ = ["Graph", "opaque", "native", "ufunc", "cuda_kernel", "compact", "reorder", "random_bits", "uniform",
           "normal", "exponential", "poisson", "binomial", "integers", "while_loop", "if_else", "subgraph", "allreduce", "allgather", "bcast", "sendrecv", "SIZE",
           "SIZE_PTR", "Node", "CpuOptions", "CudaOptions", "NotBuiltError", "GroupConflictError", "Plan",
           "StagePlan", "Recording"]


def __dir__():
    # what eagle.graph offers, not the names its implementation imports (CpuBackend, shutil...)
    return public_dir(globals())


def __getattr__(name):
    if name == "GroupConflict":
        warn_renamed("eagle.graph.GroupConflict", "eagle.graph.GroupConflictError")
        return GroupConflictError
    raise AttributeError(f"module 'eagle.graph' has no attribute {name!r}")


def _constructors():
    """``opaque(), native(), ...``: every node constructor eagle.graph offers (the functions
    of its ``__all__``, so a new kind is listed as soon as it is exported)."""
    names = [n for n in __all__ if isinstance(globals()[n], types.FunctionType)]
    return ", ".join(f"{n}()" for n in names[:-1]) + f" and {names[-1]}()"


def _not_a_node_hint(obj) -> str:
    """What to do with something given as a node that is not one: a ufunc wants ufunc(),
    a graph subgraph(), any other callable opaque()."""
    import numpy as np

    uf = obj if isinstance(obj, np.ufunc) else getattr(obj, "ufunc", None)
    if isinstance(uf, np.ufunc):
        name = f"np.{uf.__name__}" if getattr(np, uf.__name__, None) is obj else uf.__name__
        operands = ", ".join("xyuvw"[k] for k in range(min(uf.nin, 5)))
        return f" (a ufunc node: ufunc({name}, {operands}, out=z))"
    if isinstance(obj, Graph):
        return " (run a graph in place: subgraph(child))"
    if callable(obj):
        return " (wrap a callable: opaque(fn, reads=..., writes=...))"
    return ""


def _cpu_options(cpu, old):
    """build()'s ``cpu=``, or the CpuOptions of the deprecated ``teams=``/``fuse=``."""
    unknown = sorted(set(old) - {"teams", "fuse"})
    if unknown:
        raise TypeError(f"build() got an unexpected keyword argument {unknown[0]!r}")
    if old:
        if cpu is not None:
            raise TypeError("build() got cpu= and the old spelling teams=/fuse=; pass "
                            "cpu=eagle.CpuOptions(teams=..., fuse=...) only")
        given = ", ".join(f"{k}=..." for k in old)
        warn_renamed(f"build({given})", f"build(cpu=eagle.CpuOptions({given}))", stacklevel=4)
        return CpuOptions(**old)
    if cpu is None:
        return CpuOptions()
    if not isinstance(cpu, CpuOptions):
        raise TypeError(f"build(cpu=...) takes an eagle.CpuOptions, got {type(cpu).__name__}")
    return cpu


class Graph(GraphCore):
    """A recorded compute step: nodes staged by the memory they read and write.

    Record with ``add_node``/``add_group``, then ``build()`` once, ``launch(n)``
    many times, and ``set_logical_size(n)`` to change how many samples the
    sized nodes process, without re-recording.

    Thread-safety: every method may be called from any thread. ``launch``,
    ``launch_until_done``, ``add_node``, ``add_group``, ``build`` and
    ``set_logical_size`` take the graph's lock: a second thread waits for the
    first (a retune applies from the next launch on, never inside one). A node
    calling one of them on its own graph, or on a graph whose launch encloses
    it, gets ``RuntimeError`` on whichever thread it runs. ``plan()``,
    ``recording()``, ``str(g)``, ``to_dot()`` and the properties take no lock and
    change nothing: during another thread's recording they show the graph as it
    was between two recorded nodes.

    Ownership: the graph keeps alive every node recorded into it, and so each
    node's callable or kernel and every array it declared (also views and the
    buffers they view), until the graph is collected. A built graph also keeps
    its backend: the cpu backend's plan (C arrays of data pointers into those
    arrays), or the cuda backend's captured CUDA graph, its executable graph,
    streams, events and the memory pool that holds the capture's temporaries.
    Nothing eagle hands out (``plan()``, ``recording()``) keeps the graph alive.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import ufunc
    >>> x, y = np.arange(4.0), np.zeros(4)
    >>> g = eagle.Graph()
    >>> g.add_node(ufunc(np.multiply, x, 2.0, out=y), name="double")
    >>> g.add_node(ufunc(np.add, y, 1.0, out={"y": y}), name="inc")
    >>> g.stages
    [['double'], ['inc']]
    >>> g.build().launch(1)
    >>> y
    array([1., 3., 5., 7.])
    >>> g.set_logical_size(2)      # the next replays process samples [0, 2)
    >>> y[:] = 0.0
    >>> g.launch(1)
    >>> y
    array([1., 3., 0., 0.])
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
        self._replays = 0           # g.replays while no backend holds the count
        self._logical_size = None   # None: follow the capacity
        self._ever_built = False
        # the longest node extent (Node.extent) among sized nodes / all nodes (None: no such array)
        self._cap_sized: int | None = None
        self._cap_all: int | None = None
        # (node name, array name, length) of the array that set each of them
        self._cap_sized_by: tuple | None = None
        self._cap_all_by: tuple | None = None
        self._has_sized = False
        self._has_resizer = False   # a compaction node sets the logical size as samples finish (GraphCore's)
        self._compaction = None     # that node (in a control node's body, maybe)
        # (capacity, capacity_bound_by) once node i was recorded: a reader's snapshot of the
        # first n nodes takes entry n - 1, consistent with those nodes
        self._capacity_at: list[tuple] = []

    # ---- recording ------------------------------------------------------

    def add_node(self, node: Node, name: str | None = None) -> None:
        """Record one node, after the nodes recorded so far.

        Parameters
        ----------
        node : Node
            A node made by one of ``eagle.graph``'s constructors (``opaque``, ``ufunc``...).
        name : str, optional
            Its name in the picture, the profile and messages; defaults to the function's or
            kernel's name (``_2``, ``_3``... appended to keep names unique).

        Returns
        -------
        None

        Raises
        ------
        TypeError
            Not a node (the message says which constructor wraps it), or a node whose arrays
            are on another device than the graph's.
        ValueError
            A name already taken, empty, or not on one line; a second compaction node; a
            control node running this very graph.
        RuntimeError
            Called by a node of this graph while it runs.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"x": x}), name="double")
        >>> g.stages
        [['double']]
        """
        self._add([node], [name], group=False)

    def add_group(self, nodes, names=None) -> None:
        """Record nodes that are independent of each other and share one stage.

        Parameters
        ----------
        nodes : iterable of Node
            At least one node; no member may write memory another reads or writes.
        names : iterable of str, optional
            One name per node (default: each node's default name).

        Returns
        -------
        None

        Raises
        ------
        GroupConflictError
            Two members conflict: the message names both nodes and the array.
        ValueError
            No nodes, or not one name per node; the checks of ``add_node``.
        TypeError, RuntimeError
            As for ``add_node``.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> y = np.ones(4)
        >>> g.add_group([ufunc(np.negative, x, out=x), ufunc(np.negative, y, out=y)], names=["x", "y"])
        >>> g.stages
        [['x', 'y']]
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
                    hint = _not_a_node_hint(node)
                    raise TypeError(f"a graph records nodes made by eagle.graph's {_constructors()}, "
                                    f"got {with_article(type(node).__name__)}{hint}")
            families = {n.family for n in nodes if n.family} | ({self._family} if self._family else set())
            if len(families) > 1:
                raise TypeError("this graph would mix NumPy and CUDA arrays; a graph runs on one "
                                "device: NumPy arrays build for the cpu backend, CuPy arrays for cuda")
            self._check_partitions(nodes)
            for node in nodes:
                if node.bodies:
                    path = self._control_cycle(node)
                    if path is not None:
                        raise ValueError(f"this {node.kind} node{' (through ' + path[1:] + ')' if path else ''} "
                                         "runs a body recorded from this very graph; a graph cannot "
                                         "hold its own recording: record the body into a graph of its own")
            final, suffixes = self._assign_names(nodes, names)
            accesses = [Stager.accesses(n) for n in nodes]
            if group:
                self._stager.check_group(final, accesses)
            # validated: from here on nothing can fail. A reader on another thread sees
            # the first len(self._names) nodes (see recording()): stages and edges are
            # published before the nodes, each node before its name
            if self._backend is not None:
                self._replays = self._backend.replays
            self._backend = None
            first = len(self._nodes)
            self._stager.add(first, accesses)
            self._n_groups += group
            self._next_suffix.update(suffixes)
            for node, name in zip(nodes, final):
                by = node.extent_by()
                if by is not None:
                    array_name, m = by
                    if self._cap_all is None or m > self._cap_all:
                        self._cap_all, self._cap_all_by = m, (name, array_name, m)
                    if node.sized and (self._cap_sized is None or m > self._cap_sized):
                        self._cap_sized, self._cap_sized_by = m, (name, array_name, m)
                self._has_sized |= node.sized
                self._has_resizer |= node.resizes
                if node.compaction is not None:
                    self._compaction = node.compaction
                self._nodes.append(node)
                self._capacity_at.append((self.capacity, self.capacity_bound_by))
                self._names.append(name)
                self._name_set.add(name)
            self._family = families.pop() if families else None

    def _check_partitions(self, nodes):
        """At most one compaction node, bodies included (the same node twice, a body used
        twice, is one: one source of the next logical size), and no reorder after it."""
        held = [n.compaction for n in nodes if n.compaction is not None]
        if self._compaction is not None:
            held.append(self._compaction)
        if len({id(c) for c in held}) > 1:
            raise ValueError("a graph has at most one compaction node, control-flow bodies "
                             "included: it alone sets the next replay's logical size")
        if self._compaction is not None and any(n.reorders and n.compaction is not self._compaction
                                                for n in nodes):
            # it would sort the old range, finished samples included, and push live
            # samples past the new logical size (a control node holding the compaction
            # too had its body's order checked when that body was recorded)
            raise ValueError("record reorder() before compact(): a partition after the compaction "
                             "would still see the replay's old range")

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
            else:
                check_name(name, "a node name")
                if taken(name):
                    raise ValueError(f"the graph already has a node named {name!r}; node names are unique")
            new.add(name)
            final.append(name)
        return final, suffixes

    # ---- what was recorded -------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        """Node names in recording order."""
        return list(self._names)

    def recording(self) -> Recording:
        """A read-only view of the nodes recorded so far.

        Nodes, names, stages, edges and capacity (``eagle.record.recording.Recording``). It
        is consistent while another thread records (takes no lock: it works inside a
        launch) and never changes.

        Returns
        -------
        Recording
            The snapshot.

        Raises
        ------
        None
            It only reads.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.sqrt, x, out=x), name="root")
        >>> g.recording().names
        ('root',)
        """
        names = self._names[:]
        n = len(names)
        edges = [d for d in self._stager.edges if d.dst < n]
        capacity, bound_by = self._capacity_at[n - 1] if n else (0, None)
        return Recording(self._nodes[:n], names, self._stager.stage_of[:n], edges, n_groups=self._n_groups,
                         capacity=capacity, capacity_bound_by=bound_by,
                         logical_size=self._logical_size_for(capacity))

    def body_recording(self, what: str = "body_recording()") -> Recording:
        """``recording()``, for use as a control-flow body.

        What ``while_loop``, ``if_else`` and ``subgraph`` (``eagle.record.control``) take
        from their graphs.

        Parameters
        ----------
        what : str, default "body_recording()"
            How the error names the caller.

        Returns
        -------
        Recording
            The snapshot.

        Raises
        ------
        RuntimeError
            (Starting with ``what``) while this graph is being launched (or built, retuned,
            recorded into), on any thread: its nodes are mid-run.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.sqrt, x, out=x), name="root")
        >>> len(g.body_recording())
        1
        """
        if self._holder is not None:
            raise RuntimeError(f"{what}: this graph is being launched (or built or recorded into) right "
                               "now; a body is a recorded graph that is not itself running: make the "
                               "control node before or after its launch")
        return self.recording()

    def _control_cycle(self, node, depth=0):
        """The name path of a body of ``node`` (or of a body nested in one) taken from this
        graph, or None: a graph cannot run its own recording inside itself."""
        for ref, rec in zip(node.body_graphs, node.bodies):
            if ref() is self:
                return ""
            for inner, name in zip(rec.nodes, rec.names):
                if inner.bodies:
                    path = self._control_cycle(inner, depth + 1)
                    if path is not None:
                        return f"/{name}{path}"
        return None

    @property
    def stages(self) -> list[list[str]]:
        """Node names per stage, in recording order within a stage."""
        rec = self.recording()
        return [[rec.names[i] for i in idx] for idx in rec.rows]

    def stage_of(self, name: str) -> int:
        """The stage a node runs in.

        Parameters
        ----------
        name : str
            The node's name.

        Returns
        -------
        int
            Its stage, counted from 0.

        Raises
        ------
        ValueError
            No node has that name.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.sqrt, x, out=x), name="root")
        >>> g.add_node(ufunc(np.exp, x, out=x), name="grow")
        >>> g.stage_of("grow")
        1
        """
        try:
            return self._stager.stage_of[self._names.index(name)]
        except ValueError:
            raise ValueError(f"no node of this graph is named {name!r}") from None

    @property
    def dependencies(self) -> list[tuple[str, str, str | None]]:
        """(before, after, array name or None for an ordering-only hazard)."""
        rec = self.recording()
        return [(rec.names[d.src], rec.names[d.dst], d.label) for d in rec.edges]

    @property
    def backend(self) -> str | None:
        """'cpu' or 'cuda' once built, else None."""
        return self._backend.name if self._backend is not None else None

    @property
    def capacity(self) -> int:
        """The largest logical size: the longest extent among the sized nodes (or among
        all nodes if none is sized). A node's extent is the shortest axis 0 of its
        per-sample arrays; each sized node runs over [0, min(logical size, its extent)),
        so a node on a shorter view processes all of it and no more (docs/graph.md,
        "Extents")."""
        return (self._cap_sized if self._has_sized else self._cap_all) or 0

    @property
    def capacity_bound_by(self) -> tuple[str, str, int] | None:
        """(node name, array name, length) of the array that sets ``capacity``: the
        extent of the first recorded node of the longest extent (its shortest per-sample
        array); None when no array sets it. Arrays a node marks as not per-sample
        (``per_sample=``) never do."""
        return self._cap_sized_by if self._has_sized else self._cap_all_by

    @property
    def split_refused(self) -> list[tuple[str, str]]:
        """(node name, reason) for every native node eagle runs whole although it asked to
        be split: its own reads and writes overlap at other samples."""
        return [(name, node.split_refused_reason) for node, name in zip(self._nodes, self._names)
                if node.split_refused_reason]

    @property
    def logical_size(self) -> int:
        """How many samples the sized nodes process on the next replay (a compaction
        node changes it as samples finish, also during a launch)."""
        return self._logical_size_for(self.capacity)

    def _logical_size_for(self, capacity):
        backend = self._backend
        if backend is not None and backend.resizes:
            return backend.logical_size
        return capacity if self._logical_size is None else self._logical_size

    @logical_size.setter
    def logical_size(self, n):
        self.set_logical_size(n)

    @property
    def replays(self) -> int:
        """The replays this graph has run over all its launches (``launch``,
        ``launch_until_done``, and the replays a failed launch completed before it
        failed), on either backend. The random nodes draw replay ``r`` when
        ``g.replays == r``: assign it to rewind (``g.replays = 0`` draws the same
        numbers again) or skip ahead; an integer in [0, 2**64). It survives
        re-recording and ``build()``."""
        backend = self._backend
        return backend.replays if backend is not None else self._replays

    @replays.setter
    def replays(self, r):
        r = as_uint64(r, "g.replays is")
        with self._exclusive("set replays of"):
            if self._backend is not None:
                self._backend.replays = r
            self._replays = r

    # ---- build, launch, retune ------------------------------------------------

    def build(self, *, cpu: CpuOptions | None = None, cuda: CudaOptions | None = None, **old) -> Graph:
        """Make the recording launchable on the backend its arrays call for.

        NumPy arrays build for the ``cpu`` backend, CuPy (``__cuda_array_interface__``)
        arrays for ``cuda``; each takes its own options, and the other's are not used.

        Parameters
        ----------
        cpu : CpuOptions, optional
            How the cpu backend shares each stage's work among its team and fuses
            stages into tiles (default ``CpuOptions()``: ``teams="auto"``, ``fuse=True``).
        cuda : CudaOptions, optional
            How the cuda backend captures stages whose branches call CUDA libraries
            (default ``CudaOptions()``).

        Returns
        -------
        Graph
            The graph itself, built: ``g.build().launch(10)`` reads well.

        Raises
        ------
        TypeError
            ``cpu=``/``cuda=`` not an options object, or the deprecated ``teams=``/``fuse=``
            together with ``cpu=``.
        ValueError
            ``CpuOptions(teams=...)`` without one policy per stage, or a logical size set
            beyond the capacity of arrays recorded since.
        NotImplementedError
            A graph of CUDA arrays in an eagle built without the cuda backend.
        RuntimeError
            Called by a node of this graph while it runs.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.multiply, x, 2.0, out=x), name="double")
        >>> g.build(cpu=eagle.CpuOptions(teams="serial")).backend
        'cpu'

        ``build(teams=..., fuse=...)`` still works, with a ``DeprecationWarning``: it is
        ``build(cpu=CpuOptions(teams=..., fuse=...))``.
        """
        cpu = _cpu_options(cpu, old)
        if cuda is None:
            cuda = CudaOptions()
        elif not isinstance(cuda, CudaOptions):
            raise TypeError(f"build(cuda=...) takes an eagle.CudaOptions, got {type(cuda).__name__}")
        with self._exclusive("build"):
            recording = self.recording()
            try:
                self._build_checks(cpu if self._family != "cuda" else None)
            except Exception as exc:
                # scale-out: the other ranks wait for this one in their graph check; tell them
                hooks.before_build(recording, exc)
                raise
            hooks.before_build(recording)   # scale-out: every rank recorded the same graph, or all raise
            backend_type = CpuBackend
            if self._family == "cuda":
                try:
                    from eagle.cuda.backend import CudaBackend as backend_type
                except ImportError as e:
                    raise NotImplementedError(
                        "this graph holds CUDA arrays, and this eagle was built without the cuda "
                        f"backend ({e}); use NumPy arrays for the cpu backend") from e
            if self._backend is not None:
                self._replays = self._backend.replays
            try:
                backend = backend_type(recording, cuda if self._family == "cuda" else cpu)
                backend.replays = self._replays
                self._backend = backend
            except BaseException as exc:
                # opaque nodes run here on cuda (at capture): scale-out must not leave other ranks waiting
                hooks.failed(recording, exc)
                raise
            self._ever_built = True
        return self

    def _build_checks(self, cpu):
        """build()'s checks against the recording, before the ranks of a scale-out build
        agree to go on: ``cpu``'s team policies, one per stage (None: the graph builds for
        another backend, which does not read them)."""
        if cpu is not None:
            cpu.policies(self._stager.n_stages)
        if self._logical_size is not None and self._logical_size > self.capacity:
            raise ValueError(f"logical size {self._logical_size} exceeds the capacity {self.capacity} "
                             "of the arrays recorded since; call set_logical_size() first")

    # launch(n) and launch_until_done(n) are GraphCore's (compiled)

    def set_logical_size(self, n: int) -> None:
        """Process samples [0, n) on the next replays, without a rebuild.

        While another thread launches the graph this waits for that launch to end: a
        retune applies from the next launch on, never inside one.

        Parameters
        ----------
        n : int
            The logical size, ``0 <= n <= g.capacity``.

        Returns
        -------
        None

        Raises
        ------
        TypeError
            ``n`` is not an integer.
        ValueError
            ``n`` outside ``0..capacity``.
        RuntimeError
            Called by a node of this graph while it runs.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.negative, x, out=x), name="flip")
        >>> g.build().set_logical_size(2)
        >>> g.launch(1)
        >>> x
        array([-1., -1.,  1.,  1.])
        """
        if type(n) is not int:
            if isinstance(n, bool):
                raise TypeError("set_logical_size() needs an integer, got a bool")
            try:
                n = operator.index(n)
            except TypeError:
                raise TypeError(f"set_logical_size() needs an integer, got {type(n).__name__}") from None
        self._check_logical_size(n)
        with self._exclusive("retune"):   # waits for a launch in flight: applies from the next one
            self._check_logical_size(n)   # again: another thread may have recorded meanwhile
            self._retune(n)

    def restart(self, logical_size: int | None = None) -> None:
        """Make the next launch run the graph from its start again: ``g.replays = 0``
        (random nodes draw the first replay's numbers again), the logical size back to
        ``logical_size`` (default: the capacity), and every compaction and reorder node
        as it was made: its id map the identity (position ``i`` holds sample ``i``) and its
        ``every=`` count at 0.

        The state arrays are yours: put the new run's initial state in them (in original
        sample order, every sample alive) before the next launch. Bodies' compaction and
        reorder nodes are restarted too. Waits for a launch in flight on another thread.

        Parameters
        ----------
        logical_size : int, optional
            The logical size of the first replay, ``0 <= logical_size <= g.capacity``.

        Returns
        -------
        None

        Raises
        ------
        NotBuiltError
            The graph is not built.
        TypeError, ValueError
            A bad ``logical_size`` (as ``set_logical_size``).
        RuntimeError
            Called by a node of this graph while it runs.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import compact, opaque
        >>> alive = np.ones(4, dtype=bool)
        >>> node = compact(alive, {})
        >>> def finish_one():
        ...     alive[np.flatnonzero(alive)[:1]] = False
        >>> g = eagle.Graph()
        >>> g.add_node(opaque(finish_one, writes={"alive": alive}), name="step")
        >>> g.add_node(node, name="compact")
        >>> g.build().launch_until_done(10), g.logical_size
        (4, 0)
        >>> alive[:] = True
        >>> g.restart()
        >>> g.replays, g.logical_size, node.ids
        (0, 4, array([0, 1, 2, 3]))
        """
        if self._backend is None:
            raise NotBuiltError("restart() needs a built graph: call g.build() first")
        n = self.capacity if logical_size is None else logical_size
        if type(n) is not int:
            if isinstance(n, bool):
                raise TypeError("restart() needs an integer logical size, got a bool")
            try:
                n = operator.index(n)
            except TypeError:
                raise TypeError(f"restart() needs an integer logical size, got {type(n).__name__}") from None
        self._check_logical_size(n)
        with self._exclusive("restart"):
            self._check_logical_size(n)
            self._backend.restart(n)
            self._logical_size = logical_size if logical_size is None else n
            self._backend.replays = 0
            self._replays = 0

    def _check_logical_size(self, n):
        cap = self.capacity
        if not 0 <= n <= cap:
            raise ValueError(f"logical size must be in 0..{cap} (the capacity of the arrays), got {n}")

    def _retune(self, n):
        if self._backend is not None:
            self._backend.set_logical_size(n)
        self._logical_size = n

    def plan(self) -> Plan:
        """How the built graph runs: per stage, the team chosen and the cost it was chosen from.

        Returns
        -------
        Plan
            The plan (``print(g.plan())`` shows it as a table).

        Raises
        ------
        NotBuiltError
            The graph is not built.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.sqrt, x, out=x), name="root")
        >>> len(g.build().plan().stages)
        1
        """
        if self._backend is None:
            raise NotBuiltError("plan() needs a built graph: call g.build() first")
        plan = self._backend.plan()
        plan.capacity_bound_by = self.capacity_bound_by
        plan.split_refused = self.split_refused
        return plan

    def iterations(self, name: str) -> int:
        """The iterations ``while_loop`` node ``name`` ran in its last run (in the last
        replay that ran it), read after a launch.

        Parameters
        ----------
        name : str
            The control node's name; a node inside a control node's body is named by its
            path, as the profile names it: ``"outer/inner"`` (``"branch/then/inner"``
            through an ``if_else``).

        Returns
        -------
        int
            The loop's iterations. For an ``if_else`` or ``subgraph`` node: 1, or 0 when
            its last run ran no body. With ``on_max="stop"``, a loop that ran
            ``max_iterations`` with its condition still true stopped there.

        Raises
        ------
        NotBuiltError
            The graph is not built.
        KeyError
            No such node, or it is not a control node.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc, while_loop
        >>> x, more = np.zeros(1), np.ones(1, dtype=bool)
        >>> body = eagle.Graph()
        >>> body.add_node(ufunc(np.add, {"x": x}, 1.0, out={"x": x}), name="inc")
        >>> body.add_node(ufunc(np.less, {"x": x}, 5.0, out={"more": more}), name="test")
        >>> g = eagle.Graph()
        >>> g.add_node(while_loop(more, body, max_iterations=3, on_max="stop"), name="loop")
        >>> g.build().launch(1)
        >>> g.iterations("loop"), x
        (3, array([3.]))
        """
        if self._backend is None:
            raise NotBuiltError("iterations() needs a built graph: call g.build() first")
        rec, steps, node, parts = self._backend.recording, [], None, name.split("/")
        while parts:
            part = parts.pop(0)
            if part not in rec.names:
                raise KeyError(f"iterations(): no node {part!r} in {name!r}"
                               + (f" (nodes: {', '.join(rec.names)})" if len(rec.names) <= 12 else ""))
            i = rec.names.index(part)
            node = rec.nodes[i]
            bodies = getattr(node, "body_nodes", None)
            if bodies is None:
                raise KeyError(f"iterations(): node {part!r} is not a control node (while_loop, "
                               "if_else, subgraph)")
            b = None
            if parts:
                labels = [label for label, _ in bodies()]
                b = 0
                if len(labels) > 1:
                    label = parts.pop(0)
                    if label not in labels or not parts:
                        raise KeyError(f"iterations(): after {part!r} name its body ({' or '.join(labels)}) "
                                       "and a node in it")
                    b = labels.index(label)
                rec = node.bodies[b]
            steps.append((i, b))
        return self._backend.control_iterations(steps, node)

    # ---- the picture ------------------------------------------------------------

    def _header(self, rec=None):
        """The picture's first line, of ``rec`` (a snapshot) or of the graph as it is now."""
        rec = self.recording() if rec is None else rec
        backend = self.backend or "(not built)"
        text = (f"eagle.Graph {plural(len(rec), 'node')} · "
                f"{plural(rec.n_groups, 'group')} · backend: {backend}")
        if any(n.sized for n in rec.nodes):
            text += f" · logical size {rec.logical_size} of {rec.capacity}"
            bound = rec.capacity_bound_by
            if bound is not None:
                text += f" (bounded by {bound[1]!r} of {bound[0]!r})"
        return text

    def _stage_notes(self, rows):
        backend = self._backend
        notes = backend.stage_notes() if backend is not None else None
        return notes if notes is None or len(notes) == len(rows) else None

    def _body_stage_notes(self, body):
        backend = self._backend
        notes = backend.body_stage_notes(body) if backend is not None else None
        return notes if notes is None or len(notes) == len(body.rows) else None

    def __str__(self):
        rec = self.recording()
        rows = [list(r) for r in rec.rows]
        # a stage wider than the terminal (80 columns when unknown) wraps onto continuation rows
        width = shutil.get_terminal_size((80, 24)).columns
        # control nodes' bodies drawn inside their boxes (eagle.look.bodies)
        return bodies.picture(rec, self._header(rec), self._stage_notes(rows), width, self._body_stage_notes)

    def __repr__(self):
        return f"<{self._header()}>"

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text.

        Stages as ranks, node kinds as shapes, edges labelled with the arrays they carry,
        ordering-only edges dashed (see ``eagle.look.dot``).

        Returns
        -------
        str
            The DOT source (``dot -Tsvg`` draws it).

        Raises
        ------
        None
            It only reads.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(4)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.sqrt, x, out=x), name="root")
        >>> g.to_dot().startswith("digraph")
        True
        """
        rec = self.recording()
        rows = [list(r) for r in rec.rows]
        edges = [(d.src, d.dst, d.label) for d in rec.edges]
        return dot.to_dot(self._header(rec), rec.nodes, rec.names, rows, edges, self._stage_notes(rows))

    def _repr_html_(self):
        """Jupyter: an SVG when Graphviz's ``dot`` is installed, else the picture."""
        return dot.repr_html(self)

