"""The cpu backend: a graph's stages handed to the C executor (csrc/cpu/executor.c)."""
from __future__ import annotations

import weakref

from eagle._errors import add_note
from eagle._text import duration
from eagle.cpu._executor import CpuPlan, parallel_threshold_ns
from eagle.cpu.codegen import codegen_mode, compile_run
from eagle.cpu.fusion import fused_runs
from eagle.cpu.lowering import lower
from eagle.cpu.spec import NativeSpec
from eagle.cpu.threads import get_num_threads
from eagle.look.picture import body_lines
from eagle.record import hooks
from eagle.record.backend import Backend, launch_call
from eagle.record.plan import Plan, StagePlan


class CpuBackend(Backend):
    """Runs a recorded graph with the nogil OpenMP executor.

    Every stage shares its work among a team (``work_share``): split native
    nodes divide [0, logical_size) among the threads, other nodes are dealt out
    one per thread. The team is one thread for a stage too cheap to pay for a
    barrier; see ``Graph.plan()``. An auto stage that the cost rule puts on
    the team is timed there on its first replays and keeps the team only if it
    was faster than the stage on one thread; the verdict is re-checked from
    time to time (a busy neighbour process can come or go).

    Consecutive stages of sample-local nodes that meet only through per-sample
    arrays run as one fused run, tile by tile (``eagle.cpu.fusion``; ``fuse=False``:
    never; an int: the tile in samples); the team choice sees a run as one stage.
    """

    name = "cpu"

    def __init__(self, recording, options):   # options: eagle.CpuOptions
        super().__init__(recording)
        policies = options.policies(len(recording.rows))
        nodes = recording.nodes
        # a sized opaque node is handed the replay's logical size, read from the plan when
        # it runs (a compaction changes it inside a launch); through a weak reference, so
        # the plan holding the callable does not keep its backend alive
        me = weakref.ref(self)

        def logical_size():
            return me()._plan.logical_size

        # a control node's bodies run where its stage runs: on the team, every body stage
        # shared by it, or, on the calling thread, each body stage on the team its body's own
        # team choice gives it, pass by pass (csrc/cpu/plan.h, control.c)
        # consecutive stages of sample-local nodes run as one stage, tile by tile (fusion.py)
        self._runs = fused_runs(recording, policies, options.fuse)
        self._fuse = options.fuse
        self._codegen = codegen_mode(options.codegen)   # bodies are compiled as they are lowered
        self._body_runs = {}   # id(body Recording) -> its FusedRuns (plan() shows them)
        self._body_plans = {}  # id(body Recording) -> its CpuPlan (plan() shows its teams)
        self._body_notes = {}  # id(body Recording) -> per run, what of it is compiled
        # what the profile names each timed node: the graph's nodes (plan order), then the
        # bodies' nodes ("loop/step"), numbered on as the bodies are compiled
        self._timed = [None] * len(nodes)
        self._controls = set()   # the span indexes of control nodes (bodies' too)
        # what the specs carry besides the call (bodies' too): partitions (their invalid
        # keys are reported after a launch), ufunc loops (an error one reports is raised
        # when the launch ends), process groups, and the partition of each node
        self._partitions = []
        self._partition_nodes = []   # their nodes (Graph.restart)
        self._loops = []
        self._groups = []
        self._partition_of = {}
        top = LoweringContext(self, recording, logical_size, "", policies=policies)
        stages = [[top.lower(i) for i in idx] for idx in recording.rows]
        # lowered in stage order: the graph's own loops and groups in recording order (the
        # first loop error raised is the earliest node's; every rank calls its groups in
        # one order), before the bodies'
        self._loops = [(w, loop) for _, w, loop in sorted(top.loops, key=lambda x: x[0])] + self._loops
        self._groups = [group for _, group in sorted(top.groups, key=lambda x: x[0])]
        # the compaction, at top level or in a control node's body: the next replay's
        # logical size is the live count of its last run in the replay (unchanged by a
        # replay that does not run it; csrc/cpu/replay.h, eagle_end_of_replay)
        resizer = recording.index_of_resizer()
        self.resizes = resizer is not None
        # the processes replaying this graph together (collectives over several ranks), one
        # per communicator in recording order: launches are compared over them and
        # launch_until_done stops on all at once
        groups = {}
        for group in self._groups:
            groups.setdefault(group.key, group)   # the communicator's first collective
        groups = list(groups.values())
        runs = self._runs
        compiled, self._compiled_notes = _compile_runs(recording, runs, self._codegen)
        self._plan = CpuPlan([[spec for s in run.stages for spec in stages[s]] for run in runs],
                             [policies[run.stages[0]] for run in runs], recording.logical_size,
                             recording.capacity,
                             self._partition_of[id(nodes[resizer].compaction)] if self.resizes else None,
                             groups, [run.tile for run in runs], compiled)
        self.compiled = self._plan
        self.checks_launches = bool(self._partitions or self._loops)
        self.timed_nodes = tuple(self._plan.order)
        for k, i in enumerate(self._plan.order):
            self._timed[k] = (recording.names[i], recording.stage_of[i], False)
        self._controls.update(self._plan.bodies)
        self.timed_controls = frozenset(self._controls)
        #: per timed node (the executor's span index): (name, stage, counted per call); a
        #: body's nodes are named "loop/step" and counted per call (once per iteration)
        self._timed = tuple(self._timed)

    @property
    def timed(self):
        return self._timed

    def control_iterations(self, steps, node):
        plan = self._plan
        for i, b in steps:
            k = plan.order.index(i)
            if b is None:
                return plan.control_iterations(k)[0]
            plan = plan.bodies[k][b]

    @property
    def last_failure(self):
        """(graph node index or -1 for an interrupt, replay) of the last failed launch."""
        where = self._plan.last_failure
        if where is None:
            return None
        node, replay = where
        return (self._plan.order[node] if node >= 0 else -1), replay

    def note_failure(self, exc, n, until_done=False):
        """As Backend's, and through control nodes: which body node raised, in which
        iteration (or that Ctrl-C or the iteration limit stopped a loop)."""
        where = self._plan.last_failure
        if where is None or where[0] < 0 or self._plan.control_failure(where[0]) is None:
            return super().note_failure(exc, n, until_done)
        call = launch_call(n, until_done)
        plan, rec, i = self._plan, self.recording, self._plan.order[where[0]]
        k = where[0]
        path = []
        while True:
            why, b, j, it = plan.control_failure(k)
            node = rec.nodes[i]
            path.append((rec.where(i) if not path else f"node {rec.names[i]!r}", node, b, it))
            if why != "raised":
                break
            plan, rec = plan.bodies[k][b], node.bodies[b]
            k, i = j, plan.order[j]
            if plan.control_failure(k) is None:
                break
        def inside(entries):
            # innermost first: "the body (iteration 3) of node 'inner' in the body of node 'loop' (stage 1)"
            return " in ".join(f"the {nd.body_labels[b]}" + (f" (iteration {it})" if nd.control == "while" else "")
                               + f" of {w}" for w, nd, b, it in reversed(entries))
        if why == "raised":
            text = f"eagle: raised by node {rec.names[i]!r} in {inside(path)}, in replay {where[1]} of {call}"
        else:
            w, nd, _, it = path[-1]
            w = f"{w} in {inside(path[:-1])}" if len(path) > 1 else w
            text = (f"eagle: raised by {w} in replay {where[1]} of {call}" if why == "limit" else
                    f"eagle: {call} interrupted in iteration {it} of {w}, in replay {where[1]}")
        add_note(exc, text)
        hooks.failed(self.recording, exc)

    def launch(self, n: int, until_done: bool = False) -> int:
        try:
            done = self._plan.launch(n, until_done)
        except BaseException:
            self.after_failed_launch(n)
            raise
        self.after_launch(n)
        return done

    def launch_observed(self, n, until_done, progress, record):
        return self._plan.run_observed(n, until_done, progress, record)

    def after_launch(self, n):
        """Raise a ufunc loop's error, then a reorder's invalid keys, met in the launch."""
        self._raise_loop_error(n)
        for p in self._partitions:
            if p.take_invalid_keys():
                raise ValueError("reorder: a key outside [0, n_keys) was met in the last launch; the "
                                 "samples were left in place on that replay")

    def after_failed_launch(self, n):
        """A launch raised: forget what its partitions met (the next launch reports only
        its own), and raise a ufunc loop's error if one came before the failure."""
        for p in self._partitions:
            p.take_invalid_keys()
        self._raise_loop_error(n)

    def _raise_loop_error(self, n):
        """Raise the error a ufunc node's inner loop reported in the last launch, if any
        (the first node in recording order; the others' are dropped). It replaces an
        exception the launch raised later: the sequential oracle stops at the loop."""
        first = None
        for i, loop in self._loops:
            err = loop.take_error()
            if err is not None and first is None:
                first = (i, err)
        if first is None:
            return
        where, err = first
        add_note(err, f"eagle: raised by the inner loop of {where} in launch({n}); a "
                      "ufunc node's error is raised when the executor has finished the launch")
        self._plan.forget_failure()
        raise err

    @property
    def replays(self) -> int:
        """Replays run over all launches (the executor counts them: ``g.replays``)."""
        return self._plan.replays

    @replays.setter
    def replays(self, r: int) -> None:
        self._plan.replays = r

    @property
    def logical_size(self) -> int:
        return self._plan.logical_size

    def set_logical_size(self, n: int) -> None:
        self._plan.logical_size = n

    def restart(self, n: int) -> None:
        for node in self._partition_nodes:
            node.restart()
        self.set_logical_size(n)

    def stage_notes(self):
        notes = []
        for run in self._runs:
            note = "work_share"
            if run.fused:
                note += f" fused {run.stages[0]}-{run.stages[-1]}, tile {run.tile}"
            notes += [note] * len(run.stages)
        return notes

    def plan(self):
        """Reads the executor's plan only (a launch may be in flight on another thread):
        the teams a launch from this thread would use now."""
        rec = self.recording
        n_threads = get_num_threads()
        size = self.logical_size   # read once: a compaction node changes it during a launch
        # every sample finished: the teams and costs where the last launch started, not at 0
        costs_at = self._plan.launch_size if size == 0 and self.resizes else 0
        stages = []
        for run, note, (policy, team, cost, check) in zip(self._runs, self._compiled_notes,
                                                          self._plan.teams(n_threads, costs_at or size)):
            # a fused run is one stage to the executor: its team and cost are the run's,
            # given on its first stage
            for s in run.stages:
                first = s == run.stages[0]
                sp = StagePlan(s, [rec.box(i) for i in rec.rows[s]], policy, team, cost if first else None)
                if run.fused:
                    sp.fused = (run.stages[0], run.stages[-1])
                    sp.tile = run.tile
                    sp.compiled = note
                if check is not None and first:
                    sp.team_ns, sp.serial_ns = check["team_ns"], check["serial_ns"]
                    sp.verdict = _verdict_text(check, team)
                stages.append(sp)
        plan = Plan("cpu", n_threads, size, rec.capacity,
                    parallel_threshold_ns(n_threads) if n_threads > 1 else 0.0, stages)
        plan.costs_at = costs_at or None
        lines = body_lines(rec, "  ", self._body_stage_note)
        if lines:
            # executor.h: a control node's stage is the calling thread's, and so are its bodies'
            plan.bodies = ["bodies (run in place: on their control node's team when its stage is on "
                           "it, else each stage on the team its body's choice gives it, pass by pass):"] + lines
        return plan


    def body_stage_notes(self, body):
        """The picture's note per body stage: each is shared by its control node's team
        (executor.h), fused runs as for the graph's stages; None for a body not compiled."""
        runs = self._body_runs.get(id(body))
        if runs is None:
            return None
        notes = []
        for run in runs:
            note = "work_share"
            if run.fused:
                note += f" fused {run.stages[0]}-{run.stages[-1]}, tile {run.tile}"
            notes += [note] * len(run.stages)
        return notes

    def _body_stage_note(self, body, s):
        """plan()'s note on stage s of a body: the fused run it is part of, if any, and on a
        run's first stage the team its body's choice gives it (a loop's iterations, timed)."""
        plan = self._body_plans.get(id(body))
        teams = plan.teams(get_num_threads(), self.logical_size) if plan is not None else None
        compiled = self._body_notes.get(id(body), ())
        for k, run in enumerate(self._body_runs.get(id(body), ())):
            if s not in run.stages:
                continue
            extra = f", {compiled[k]}" if s == run.stages[0] and k < len(compiled) and compiled[k] else ""
            note = f"  [fused {run.stages[0]}-{run.stages[-1]}, tile {run.tile}{extra}]" if run.fused else ""
            if teams is not None and s == run.stages[0]:
                policy, team, cost, check = teams[k]
                verdict = _verdict_text(check, team) if check is not None else ""
                note += f"  team {team} ({policy})" + (f": {verdict}" if verdict else "")
            return note
        return ""


class LoweringContext:
    """What a node kind's cpu lowering (``eagle.cpu.lowering``) may ask of the backend, for
    the nodes of one recording (a graph's, or a control node's body, whose nodes the
    profile names ``prefix + name``): the replay's logical size, a node's place and name,
    and a control node's bodies compiled. ``lower(i)`` lowers node i and collects what its
    spec carries for the backend (partition, loop, process group)."""

    def __init__(self, backend, rec, logical_size, prefix, outer=None, policies=None):
        self.backend, self.rec, self.logical_size, self.prefix = backend, rec, logical_size, prefix
        self.outer = outer   # a body's: where its control node is, for messages
        self.policies = policies   # the team policy of each stage of rec
        self.loops, self.groups = [], []   # the graph's own (index, ...), ordered by the backend

    def where(self, i):
        return self.rec.where(i)

    def name_of(self, i):
        return self.prefix + self.rec.names[i]

    def lower(self, i):
        spec = lower(self.rec.nodes[i], i, self)
        b = self.backend
        if not isinstance(spec, NativeSpec):
            return spec
        if spec.partition is not None:
            b._partitions.append(spec.partition)
            b._partition_nodes.append(self.rec.nodes[i])
            b._partition_of[id(self.rec.nodes[i])] = spec.partition
        if spec.loop is not None:
            if self.outer is None:
                self.loops.append((i, self.rec.where(i), spec.loop))
            else:
                b._loops.append((f"{self.rec.where(i)} in the body of {self.outer}", spec.loop))
        if spec.group is not None:
            # collectives are refused in bodies (eagle.record.control)
            self.groups.append((i, spec.group))
        return spec

    def compile_bodies(self, node, i):
        """Control node i's bodies compiled, recursively, into plans of their own that run at
        the outer plan's logical size (the executor copies it in when the node is entered:
        the replay's size, which a compaction in a body changes only for the next replay, as
        at top level); returns (the CpuPlans, the profile's span index of each body's node 0)."""
        backend, rec, name = self.backend, self.rec, self.name_of(i)
        bodies, bases = [], []
        for label, body in node.body_nodes():
            where = f"{name}/{label}/" if len(node.bodies) > 1 else f"{name}/"
            # the body's plan nodes are in stage order: their span indexes follow on
            order = [k for row in body.rows for k in row]
            bases.append(len(backend._timed))
            backend._timed.extend([None] * len(order))
            base = bases[-1]
            # a body's stages take the control node's stage's team policy: under "auto" the
            # body's own team choice times its passes (a loop's iterations) and gives them the
            # team when it is faster (csrc/cpu/plan.h)
            policy = self.policies[rec.stage_of[i]]
            inner = LoweringContext(backend, body, self.logical_size, where, rec.where(i),
                                    [policy] * len(body.rows))
            # a body's stages fuse by the top level's rules; its fused runs go tile by tile on
            # the control node's team (each thread its share of [0, logical_size))
            runs = fused_runs(body, [policy] * len(body.rows), backend._fuse)
            stages = [[inner.lower(k) for k in row] for row in body.rows]
            compiled, notes = _compile_runs(body, runs, backend._codegen)
            plan = CpuPlan([[spec for s in run.stages for spec in stages[s]] for run in runs],
                           [policy] * len(runs), body.logical_size, body.capacity,
                           tiles=[run.tile for run in runs], compiled=compiled)
            backend._body_notes[id(body)] = notes
            backend._body_runs[id(body)] = runs
            backend._body_plans[id(body)] = plan
            for j, k in enumerate(plan.order):
                backend._timed[base + j] = (where + body.names[k], rec.stage_of[i], True)
            backend._controls.update(base + j for j in plan.bodies)
            bodies.append(plan)
        return bodies, bases


def _compile_runs(rec, runs, mode):
    """(per run, None or its compiled groups; per run, plan()'s note on it): each fused
    run's nodes in plan order (stage by stage) handed to eagle.cpu.codegen."""
    compiled, notes = [], []
    order = [[rec.nodes[i] for s in run.stages for i in rec.rows[s]] for run in runs]
    for r, run in enumerate(runs):
        groups, note = ([], "")
        if run.fused:
            groups, note = compile_run(order[r], mode, [n for o in order[r + 1:] for n in o])
        compiled.append(groups or None)
        notes.append(note)
    return compiled, notes


def _verdict_text(check, team):
    if not check["candidate"]:
        return ""   # the cost rule alone decides (too cheap for the team at this size)
    if check["verdict"] is None:
        return "team to be timed on the next replays"
    measured = (f"measured: team of {check['verdict_team']} {duration(check['team_ns'])}, "
                f"1 thread {duration(check['serial_ns'])}" if check["serial_ns"] is not None
                else f"measured: team of {check['verdict_team']} {duration(check['team_ns'])}")
    kept = "team kept" if check["verdict"] == "team" else "team slower: 1 thread"
    if not check["current"]:
        return f"{measured}; {kept}; to be timed again (size or threads changed, or re-check)"
    return f"{measured}; {kept}"
