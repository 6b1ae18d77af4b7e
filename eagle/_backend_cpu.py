"""The cpu backend: a graph's stages handed to the C executor (csrc/cpu/executor.c)."""
from __future__ import annotations

from eagle._executor import CpuPlan, get_num_threads, parallel_threshold_ns
from eagle._plan import Plan, StagePlan


class CpuBackend:
    """Runs a recorded graph with the nogil OpenMP executor.

    Every stage shares its work among a team (``work_share``): split native
    nodes divide [0, logical_size) among the threads, other nodes are dealt out
    one per thread. The team is one thread for a stage too cheap to pay for a
    barrier; see ``Graph.plan()``. An auto stage that the cost rule puts on
    the team is timed there on its first replays and keeps the team only if it
    was faster than the stage on one thread; the verdict is re-checked from
    time to time (a busy neighbour process can come or go).
    """

    name = "cpu"

    def __init__(self, graph, policies):
        self._graph = graph
        stages = []
        for idx in graph._stage_indexes():
            specs = []
            for i in idx:
                node = graph._nodes[i]
                if node.kind == "opaque":
                    specs.append((i, "opaque", node.fn, (), False))
                else:
                    specs.append((i, "native", node.kernel, node.arrays_in_order, node.split))
            stages.append(specs)
        self._stage_names = [[graph._names[i] for i in idx] for idx in graph._stage_indexes()]
        self._partitions = [n.partition for n in graph._nodes if getattr(n, "partition", None) is not None]
        # ufunc nodes' loops: an error one reports is raised when the launch ends
        self._loops = [(i, n.loop) for i, n in enumerate(graph._nodes) if getattr(n, "loop", None) is not None]
        resizer = [n for n in graph._nodes if n.resizes]
        self.resizes = bool(resizer)
        self._plan = CpuPlan(stages, policies, graph.logical_size, graph.capacity,
                             resizer[0].partition if resizer else None)

    @property
    def last_failure(self):
        """(graph node index or -1 for an interrupt, replay) of the last failed launch."""
        where = self._plan.last_failure
        if where is None:
            return None
        node, replay = where
        return (self._plan.order[node] if node >= 0 else -1), replay

    def launch(self, n: int, until_empty: bool = False) -> int:
        try:
            done = self._plan.launch(n, until_empty)
        except BaseException:
            self.after_failed_launch(n)
            raise
        self.raise_loop_error(n)
        self.check_partitions()
        return done

    def after_failed_launch(self, n):
        """A launch raised: forget what its partitions met (the next launch reports only
        its own), and raise a ufunc loop's error if one came before the failure."""
        for p in self._partitions:
            p.take_invalid_keys()
        self.raise_loop_error(n)

    def raise_loop_error(self, n):
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
        i, err = first
        g = self._graph
        from eagle.graph import _add_note
        _add_note(err, f"eagle: raised by the inner loop of node {g._names[i]!r} (stage "
                       f"{g._stager.stage_of[i]}) in launch({n}); a ufunc node's error is raised "
                       "when the executor has finished the launch")
        self._plan.forget_failure()
        raise err

    def check_partitions(self):
        """After a launch (Graph's compiled launch calls it when there are partitions)."""
        for p in self._partitions:
            if p.take_invalid_keys():
                raise ValueError(f"reorder: a key outside [0, n_keys) was met in the last launch; the "
                                 "samples were left in place on that replay")

    @property
    def logical_size(self) -> int:
        return self._plan.logical_size

    def set_logical_size(self, n: int) -> None:
        self._plan.logical_size = n

    def stage_notes(self):
        return ["work_share"] * len(self._stage_names)

    def plan(self):
        """Reads the executor's plan only (a launch may be in flight on another thread):
        the teams a launch from this thread would use now."""
        g = self._graph
        n_threads = get_num_threads()
        boxes = {name: f"{node.box[0]}{name}{node.box[1]}" for node, name in zip(g._nodes, g._names)}
        stages = []
        for s, (names, (policy, team, cost, check)) in enumerate(zip(self._stage_names,
                                                                     self._plan.teams(n_threads))):
            sp = StagePlan(s, [boxes[n] for n in names], policy, team, cost)
            if check is not None:
                sp.team_ns, sp.serial_ns = check["team_ns"], check["serial_ns"]
                sp.verdict = _verdict_text(check, team)
            stages.append(sp)
        return Plan("cpu", n_threads, g.logical_size, g.capacity,
                    parallel_threshold_ns(n_threads) if n_threads > 1 else 0.0, stages)


def _us(ns):
    return f"{ns / 1e3:.2f} µs" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def _verdict_text(check, team):
    if not check["candidate"]:
        return ""   # the cost rule alone decides (too cheap for the team at this size)
    if check["verdict"] is None:
        return "team to be timed on the next replays"
    measured = (f"measured: team of {check['verdict_team']} {_us(check['team_ns'])}, "
                f"1 thread {_us(check['serial_ns'])}" if check["serial_ns"] is not None
                else f"measured: team of {check['verdict_team']} {_us(check['team_ns'])}")
    kept = "team kept" if check["verdict"] == "team" else "team slower: 1 thread"
    if not check["current"]:
        return f"{measured}; {kept}; to be timed again (size or threads changed, or re-check)"
    return f"{measured}; {kept}"
