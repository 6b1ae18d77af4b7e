"""Control-flow nodes on CUDA: ``while_loop`` and ``if_else`` as conditional nodes,
``subgraph`` as a child-graph node, inside the one CUDA graph ``build()`` captures.

The record-level contract is ``eagle.record.control`` (``ControlNode``); its CUDA lowering
(eagle/cuda/capture.py) is ``ControlCapture``, below, which works through the capture
context alone. Captured on stream ``s`` (eagle's stream or a branch's), a control node
adds nodes to the graph ``s`` is capturing into (``cuStreamGetCaptureInfo`` gives the
graph) and then makes ``s``'s next work follow them (``cuStreamUpdateCaptureDependencies``):

- ``while_loop(cond, body)`` becomes a conditional **WHILE** node whose handle the
  one-thread kernel ``eagle_control_condition`` (eagle/cuda/kernels/control.cu) sets
  from ``cond[0]``, read on the device: once before the node (CUDA's WHILE checks its
  handle before each iteration, so a false condition runs no iteration) and again as
  the body's last node, after each iteration. ``max_iterations``: the same kernel
  counts the iterations in a device int64; when the loop has run that many with
  ``cond[0]`` still true it stops it and sets a flag, which ``launch`` reads back at its
  end (one 16-byte copy per such loop per launch) and raises ``RuntimeError`` naming the
  node. The replays already issued in that launch finish first. With ``on_max="stop"``
  the kernel ends the loop there and sets no flag. ``g.iterations(name)`` reads the
  count of the loop's last visit back (one copy, when asked).
- ``if_else(cond, then, otherwise)`` becomes two conditional **IF** nodes, one per body,
  after one condition kernel that reads ``cond[0]`` once and sets the first handle to
  it and the second to its negation (so ``then`` writing the condition does not also
  run ``otherwise``, as in Python's ``if``/``else``). Two IF nodes work on every 12.4+
  driver; the two-body IF of CUDA 12.8 would save one node and is not used.
- ``subgraph(graph)`` becomes a **child-graph** node whose graph the body is captured
  into, unless the body holds a ``while_loop`` / ``if_else`` at any depth: CUDA refuses a
  child graph holding conditional nodes (CUDA_CHILD_GRAPH_NODE_PARAMS: "The graph must
  not contain conditional nodes"), so such a body is captured **in place**, its nodes
  one after another on the capturing stream, into the graph holding the subgraph node
  (``_capture_in_place``). In place rather than inside an IF node whose handle defaults
  to 1: it adds no node, no handle and no condition to evaluate per run, needs nothing
  of the driver beyond what the body's own conditional nodes need, and keeps the sized
  kernels and failed-instantiate names on the paths the other nodes use.

Each body is captured into its graph (the conditional node's body, the child node's
graph) with ``cuStreamBeginCaptureToGraph`` on a stream of its own, its nodes in
recording order, one after another (no side branches inside a body), each through its
kind's lowering (``CaptureContext.capture``); a control node
inside a body does the same one level down (the handle of a nested conditional node
belongs to the body graph holding it).

**Drivers.** Conditional nodes need a CUDA 12.4 driver (``eagle.cuda._driver.has("conditional")``),
capture into a body a 12.3 one; ``build()`` raises ``CudaError`` naming the driver's
version otherwise.

**What a body may hold on CUDA.** Conditional bodies may hold only kernel, memset,
memcpy, empty, child-graph and conditional nodes (the driver refuses host, event and
allocation nodes there at instantiate). So: ``cuda_kernel``, ufunc and random nodes,
opaque nodes whose captured work is kernels and copies, and nested control nodes. A
collective (NCCL) is refused in any body: its captured work is not allowed in a
conditional body, and ranks whose conditions differ would hang. Compaction and reorder
nodes are captured into a body like kernel nodes (their sized kernels registered as the
body's); the device's next size they write is committed at the end of the replay, as
at top level (eagle/cuda/finished.py, "Inside a control-flow body").

**Retune.** Sized kernel nodes inside bodies are registered like the top-level ones;
``set_logical_size`` writes their new grid and size into the body graph
(``cuGraphKernelNodeSetParams``: per-node exec updates name only nodes of the graph
instantiated from, not of its bodies) and carries it into the executable graph with
one whole-graph ``cuGraphExecUpdate``, which updates conditional bodies and child
graphs in place.
"""
from __future__ import annotations

import contextlib

import numpy as np

from eagle._errors import CudaError, add_note
from eagle.cuda._driver import (CAPTURE_MODE_RELAXED, CAPTURE_STATUS_ACTIVE,
                                CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, DriverError)
from eagle.cuda._graph import BorrowedGraph, Graph
from eagle.cuda._memory import DeviceBuffer
from eagle.cuda._stream import Stream
from eagle.cuda.capture import Lowering, register, runs_on_cuda
from eagle.record.control import ControlNode
from eagle.record.node import RunsAs

__all__ = ["ControlCapture", "flat_nodes", "check_bodies", "holds_conditional"]

#: a while loop's device state (int64 each): iterations run in this visit, the limit was
#: reached, the stop flag ended it, the iterations run when it did (kernels/control.cu)
_STATE_WORDS = 4

#: the constructor a control node was made with, for messages
_CONSTRUCTOR = {"while": "while_loop"}

#: what a conditional node needs of the driver, and what capture into a body needs
_CONDITIONAL_VERSION = "12.4"
_CAPTURE_TO_GRAPH_VERSION = "12.3"


def flat_nodes(nodes):
    """The nodes, with every control node's body nodes after it (at any depth)."""
    out = []
    for node in nodes:
        out.append(node)
        if node.runs_as is RunsAs.CONTROL:
            for rec in node.bodies:
                out += flat_nodes(rec.nodes)
    return out


def holds_conditional(rec) -> bool:
    """Whether recording ``rec`` holds a while_loop / if_else node at any depth (inside
    subgraphs too): what CUDA does not allow in a child graph."""
    for node in rec.nodes:
        if node.runs_as is RunsAs.CONTROL:
            if node.control != "subgraph" or any(holds_conditional(b) for b in node.bodies):
                return True
    return False


def _signed(v: int) -> int:
    """An unsigned 64-bit handle as the int64 the kernel launch takes (the same bits)."""
    return v - (1 << 64) if v >= (1 << 63) else v


def check_bodies(recording, cuda_module, path=()):
    """Refuse, before anything is captured, what cannot run in a body on CUDA, and a driver
    without conditional nodes; ``path`` names the control nodes above (messages)."""
    for i, node in enumerate(recording.nodes):
        if node.runs_as is not RunsAs.CONTROL:
            continue
        name = recording.names[i]
        where = " inside ".join([f"{node.control} node {name!r}"] + list(path))
        if node.control == "subgraph":
            # a body captured in place (holding conditional nodes) needs no child graph
            if not holds_conditional(node.bodies[0]) and not cuda_module.has("capture_to_graph"):
                _too_old(cuda_module, where, "child-graph nodes captured into",
                         _CAPTURE_TO_GRAPH_VERSION)
        else:
            if not cuda_module.has("conditional"):
                _too_old(cuda_module, where, "conditional nodes", _CONDITIONAL_VERSION)
        for label, rec in node.body_nodes():
            for j, inner in enumerate(rec.nodes):
                inner_name = rec.names[j]
                if not runs_on_cuda(inner):
                    raise TypeError(f"node {inner_name!r} in the {label} of {where} is "
                                    f"a {inner.kind} node, which the cuda backend cannot capture "
                                    "(a CPU kind, or no CUDA lowering is registered for it: "
                                    "eagle.cuda.capture.register); a body of a "
                                    "graph of CUDA arrays takes opaque(), cuda_kernel(), ufunc(), "
                                    "random and control-flow nodes")
                if inner.collective is not None:
                    raise TypeError(f"node {inner_name!r} in the {label} of {where} is a collective "
                                    f"({inner.collective}): on cuda a collective cannot sit in a "
                                    "control-flow body (its captured NCCL work is not allowed in a "
                                    "conditional body, and ranks whose conditions differ would "
                                    "hang); put it outside, with a condition the ranks agree on")
            check_bodies(rec, cuda_module, (f"the {label} of {where}",) + tuple(path))


def _too_old(cuda_module, where, what, need):
    st = cuda_module.ERROR_TOO_OLD
    version = cuda_module.version_text(cuda_module.driver_version())
    raise CudaError(st, cuda_module.status_name(st), cuda_module.status_text(st),
                    f"{where} needs {what} (a CUDA {need} driver or newer); this driver is "
                    f"CUDA {version}")


class ControlCapture(Lowering):
    """The lowering of the control nodes of one ``build()``: captures them (``capture``),
    owns the device state of the loops (``prepare``) and reads it after a launch
    (``check_limits``, ``stopped``)."""

    def __init__(self):
        #: (node name, max_iterations, DeviceBuffer of the loop's state) per loop with a limit
        #: that raises (on_max="raise"; one that stops just ends the loop, in the kernel)
        self.limits = []
        #: (where, DeviceBuffer of the loop's state) per while loop, at any depth
        self.loops = []
        #: {id(loop node): its DeviceBuffer}, made before the capture (no copy may run then)
        self._state = {}
        self._streams = []
        #: {graph node handle in a body: (what it is, the top-level eagle node holding it)}:
        #: a failed instantiate names the body node (the driver names a body's node)
        self.body_owners = {}
        #: the bodies being captured, outermost first ("the body of while_loop node 'x'")
        self._path = []
        self._top = None
        self.conditional_nodes = 0
        self.child_nodes = 0
        #: subgraph nodes whose body was captured in place (it holds conditional nodes)
        self.in_place = 0

    def forget_capture(self):
        """Forget what a capture recorded (body node owners, node counts), for a second
        capture of the same build; the loops' device state stays (made by ``prepare``)."""
        self.body_owners = {}
        self._path = []
        self._top = None
        self.conditional_nodes = self.child_nodes = self.in_place = 0

    def prepare(self, nodes, names, ctx, path=""):
        """The device state of every while loop (at any depth: iterations, limit reached,
        stopped, iterations when stopped), zeroed on ``ctx.stream`` before the capture
        begins and owned by the graph (``ctx.register_buffer``); ``path`` names the control
        nodes above (messages)."""
        for node, name in zip(nodes, names):
            if node.runs_as is not RunsAs.CONTROL:
                continue
            where = f"{name!r}{path}"
            if node.control == "while" and id(node) not in self._state:
                state = ctx.register_buffer(DeviceBuffer(8 * _STATE_WORDS))
                state.write(np.zeros(_STATE_WORDS, dtype=np.int64), ctx.stream)
                self._state[id(node)] = state
                self.loops.append((where, state))
                if node.max_iterations is not None and node.on_max == "raise":
                    self.limits.append((name, node.max_iterations, state))
            for label, rec in node.body_nodes():
                self.prepare(rec.nodes, rec.names, ctx, f" in the {label} of {where}")

    def _condition(self, ctx, stream, handle, handle2, cond, state, limit, mode):
        cai = cond.__cuda_array_interface__
        width = np.dtype(cai["typestr"]).itemsize
        # a loop's condition also reads the stop flag (Ctrl-C ends the loop there); an IF's not
        stop = ctx.stop_ptr if state is not None else 0
        ctx.kernels.launch(
            "eagle_control_condition", stream, 1, 1,
            [("i", _signed(handle)), ("i", _signed(handle2)), ("i", int(cai["data"][0])),
             ("i", width), ("i", state.ptr if state is not None else 0), ("i", limit or 0),
             ("i", mode), ("i", stop)])

    def capture(self, node, ctx):
        """Capture control node ``node`` on ``ctx.stream``, which is capturing (``ctx.index``:
        its index at the top level, or in its body); its bodies' nodes are captured through
        ``ctx.capture``, their sized kernel nodes marked in_body."""
        stream, name = ctx.stream, ctx.name
        if not self._path:
            self._top = ctx.index
        kind = _CONSTRUCTOR.get(node.control, node.control)
        labels = [f"the {label} of {kind} node {name!r}" for label, _ in node.body_nodes()]
        _cs, _id, gptr, deps = stream.capture_info()
        graph = BorrowedGraph(gptr, stream)
        if node.control == "subgraph" and holds_conditional(node.bodies[0]):
            self.in_place += 1
            self._capture_in_place(ctx, node.bodies[0], graph, labels[0])
            return
        if node.control == "subgraph":
            empty = Graph()
            try:
                child = graph.add_child(empty, deps)
            finally:
                empty.close()
            self.child_nodes += 1
            self._capture_body(ctx, node.bodies[0], graph.child_graph(child), labels[0])
            stream.set_capture_deps([child])
            return
        cond = node.cond[1]
        if node.control == "while":
            state = self._state[id(node)]
            # the node first, with no dependency: the kernel before it needs its handle
            loop, handle, body = graph.add_conditional("while", (), 0)
            self.conditional_nodes += 1
            # the kernel's limit: negative when reaching it stops the loop (on_max="stop")
            limit = node.max_iterations
            if limit is not None and node.on_max == "stop":
                limit = -limit
            self._condition(ctx, stream, handle, 0, cond, state, limit, 0)
            graph.add_dependencies([stream.last_node()], [loop])
            self._capture_body(ctx, node.bodies[0], body, labels[0],
                               after=lambda s: self._condition(ctx, s, handle, 0, cond, state, limit, 1))
            stream.set_capture_deps([loop])
            return
        # if_else: one IF node per body, both decided by one read of the condition
        ifs = [graph.add_conditional("if", (), 0) for _ in node.bodies]
        self.conditional_nodes += len(ifs)
        handles = [h for _, h, _ in ifs] + [0]
        self._condition(ctx, stream, handles[0], handles[1], cond, None, None, 0)
        prev = stream.last_node()
        for (ifnode, _h, body), rec, label in zip(ifs, node.bodies, labels):
            graph.add_dependencies([prev], [ifnode])
            self._capture_body(ctx, rec, body, label)
            prev = ifnode
        stream.set_capture_deps([prev])

    def _own(self, graph, what):
        """Attribute ``graph``'s nodes not attributed yet to ``what`` (a body node)."""
        for h in graph.nodes():
            if h not in self.body_owners:
                self.body_owners[h] = (what, self._top)

    def _capture_body(self, ctx, rec, graph, label, after=None):
        """``rec``'s nodes captured into ``graph`` (``label``: "the body of while_loop node
        'x'") in recording order on a stream of their own, their sized kernels registered
        as a body's (a retune patches them in the graph, then one exec update: module doc);
        ``after(stream)`` captures the body's last node (a loop's condition)."""
        s = Stream()
        self._streams.append(s)
        self._path.append(label)
        where = " in ".join(reversed(self._path))
        s.begin_capture_to_graph(graph, CAPTURE_MODE_RELAXED)
        try:
            for j in range(len(rec.nodes)):
                self._capture_body_node(ctx, rec, j, s, in_body=True)
                self._own(graph, f"node {rec.names[j]!r} in {where}")
            if after is not None:
                after(s)
                self._own(graph, f"the condition check of {where}")
        finally:
            self._path.pop()
            with contextlib.suppress(CudaError):
                s.end_capture_to_graph()

    def _capture_body_node(self, ctx, rec, j, stream, in_body=None):
        """Body node j of ``rec`` captured on ``stream`` (``in_body``: as ``ctx.capture``):
        an exception it raises is noted as a body node's, and a capture it invalidated is
        a CudaError naming it."""
        try:
            ctx.capture(rec.nodes[j], j, rec.names[j], stream, in_body=in_body)
        except BaseException as e:
            add_note(e, f"eagle: raised by node {rec.names[j]!r} of a control-flow body "
                        "while build() captured it")
            raise
        if stream.capture_status() != CAPTURE_STATUS_ACTIVE:
            raise DriverError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                              f"node {rec.names[j]!r} of a control-flow body invalidated its "
                              "capture (a GPU call inside it failed or is not allowed while "
                              "capturing)")

    def _capture_in_place(self, ctx, rec, graph, label):
        """``rec``'s nodes captured in recording order on ``ctx.stream`` itself, into ``graph``
        (the graph that stream captures into): a subgraph body holding conditional nodes,
        which no child graph may hold. Its sized kernels are the holding graph's own (a
        body's when that graph is one); each graph node added is named
        after the body node that added it (``body_owners``, which instantiate consults
        before the top-level owners)."""
        self._path.append(label)
        where = " in ".join(reversed(self._path))
        seen = set(graph.nodes())
        try:
            for j in range(len(rec.nodes)):
                self._capture_body_node(ctx, rec, j, ctx.stream)
                for h in graph.nodes():
                    if h not in seen:
                        seen.add(h)
                        self.body_owners.setdefault(h, (f"node {rec.names[j]!r} in {where}",
                                                        self._top))
        finally:
            self._path.pop()

    def close_streams(self):
        for s in self._streams:
            with contextlib.suppress(CudaError):
                s.close()
        self._streams = []

    def iterations(self, node, stream):
        """The iterations while loop ``node`` ran in its last visit (one 8-byte read of its
        state on ``stream``, eagle's, after a launch)."""
        state = self._state.get(id(node))
        if state is None:
            raise KeyError("on cuda only a while_loop's iterations are counted")
        host = np.zeros(_STATE_WORDS, dtype=np.int64)
        state.read_into(host, stream)
        return int(host[0])

    def check_limits(self, stream):
        """After a launch (eagle's stream synchronized): raise ``RuntimeError`` naming the
        first loop that reached its ``max_iterations``; every flag is cleared."""
        hit = []
        for name, limit, state in self.limits:
            host = np.zeros(2, dtype=np.int64)
            state.read_into(host, stream)
            if host[1]:
                state.write(np.zeros(2, dtype=np.int64), stream)
                hit.append((name, limit))
        if hit:
            name, limit = hit[0]
            raise RuntimeError(f"while_loop node {name!r} reached max_iterations={limit} with its "
                               "condition still true (on cuda the loop was stopped there; the "
                               "other replays of this launch ran)")

    def stopped(self, stream):
        """After the stop flag ended a launch (eagle's stream drained): the loops it
        stopped, as "'inner' in the body of 'outer' after 3 iterations" phrases, first
        met first; every loop's state is cleared (a limit reached in a replay before
        the stop is not reported: the launch raises KeyboardInterrupt)."""
        out = []
        for where, state in self.loops:
            host = np.zeros(_STATE_WORDS, dtype=np.int64)
            state.read_into(host, stream)
            if host.any():
                state.write(np.zeros(_STATE_WORDS, dtype=np.int64), stream)
            if host[2]:
                ran = int(host[3])
                out.append(f"{where} after {ran} iteration{'' if ran == 1 else 's'}"
                           if ran else f"{where} before its first iteration")
        return out


register(ControlNode, ControlCapture)
