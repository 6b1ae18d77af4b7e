"""The cpu backend: a graph's stages handed to the C executor (csrc/executor.c)."""
from __future__ import annotations

from eagle._executor import CpuPlan, get_num_threads


class CpuBackend:
    """Runs a recorded graph with the nogil OpenMP executor.

    Every stage shares its work among a team (``work_share``): split native
    nodes divide [0, logical_size) among the threads, other nodes are dealt out
    one per thread. The team is one thread for a stage too cheap to pay for a
    barrier; see ``Graph.plan()``.
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
        done = self._plan.launch(n, until_empty)
        for p in self._partitions:
            if p.take_invalid_keys():
                raise ValueError(f"reorder: a key outside [0, n_keys) was met in the last launch; the "
                                 "samples were left in place on that replay")
        return done

    @property
    def logical_size(self) -> int:
        return self._plan.logical_size

    def set_logical_size(self, n: int) -> None:
        self._plan.logical_size = n

    def stage_notes(self):
        return ["work_share"] * len(self._stage_names)

    def plan(self):
        from eagle._executor import parallel_threshold_ns
        from eagle.graph import Plan, StagePlan

        g = self._graph
        n_threads = get_num_threads()
        if n_threads != self._plan.num_threads:
            self._plan.set_threads(n_threads)
        boxes = {name: f"{node.box[0]}{name}{node.box[1]}" for node, name in zip(g._nodes, g._names)}
        stages = [StagePlan(s, [boxes[n] for n in names], policy, team, cost)
                  for s, (names, (policy, team, cost)) in enumerate(zip(self._stage_names, self._plan.teams()))]
        return Plan("cpu", n_threads, g.logical_size, g.capacity,
                    parallel_threshold_ns(n_threads) if n_threads > 1 else 0.0, stages)
