"""How a built graph runs, as the backends report it: ``Plan`` and ``StagePlan``.

Part of the backend contract (``eagle.record``): below both backends and
``eagle.graph`` (which re-exports them), so no backend imports the module that
imports it.
"""
from __future__ import annotations

from dataclasses import dataclass

from eagle._text import duration, monospace_html, plural

__all__ = ["Plan", "StagePlan"]


@dataclass
class StagePlan:
    stage: int
    nodes: list
    policy: str       # how the team was to be chosen: auto, serial, parallel
    team: int         # threads that run the stage at the current logical size
    cost_ns: float | None
    # auto stages on the cpu backend: the team verifies itself on its first replays
    team_ns: float | None = None   # measured time of the stage on the team, or None
    verdict: str = ""              # why the team is what it is (empty: nothing to say)
    # cpu: (first, last) stage of the fused run the stage is in, or None; and its tile
    fused: tuple | None = None
    tile: int = 0
    # cpu, a fused run's first stage: what of it runs as generated C (eagle.cpu.codegen), or ""
    compiled: str = ""


@dataclass(repr=False)
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
    #: text lines of the control nodes' bodies: their stages, run on the calling thread
    bodies = ()
    #: the logical size the teams and costs are shown at when the live count is 0 (every
    #: sample finished): where the last launch started; None: at ``logical_size``
    costs_at = None

    def _header(self):
        return (f"eagle plan · backend: {self.backend} · {plural(self.num_threads, 'thread')} · "
                f"logical size {self.logical_size} of {self.capacity} · "
                f"{plural(len(self.stages), 'stage')}")

    def __repr__(self):
        return f"<{self._header()}>"

    def _repr_html_(self):
        """Jupyter: the plan's table, as ``print(plan)`` shows it."""
        return monospace_html(str(self))

    def __str__(self):
        lines = [f"eagle plan · backend: {self.backend} · {plural(self.num_threads, 'thread')} · "
                 f"logical size {self.logical_size} of {self.capacity} · "
                 f"stages under {duration(self.threshold_ns)} run on one thread"]
        if self.costs_at is not None:
            lines.append(f"the live count is 0 (every sample finished): teams and costs as at logical "
                         f"size {self.costs_at}, where the last launch started")
        for sp in self.stages:
            if sp.fused is not None and sp.stage != sp.fused[0]:
                cost = f"fused with stage {sp.fused[0]}"   # the run's cost is on its first stage
            else:
                cost = "cost not measured yet" if sp.cost_ns is None else duration(sp.cost_ns)
            line = f"stage {sp.stage}  team {sp.team:<3} ({sp.policy:8}) {cost:>24}   " + " ".join(sp.nodes)
            if sp.fused is not None and sp.stage == sp.fused[0]:
                line += (f"   [fused run: stages {sp.fused[0]}-{sp.fused[1]} tile by tile, "
                         f"tiles of {sp.tile} samples" + (f"; {sp.compiled}" if sp.compiled else "") + "]")
            if sp.verdict:
                line += f"   [{sp.verdict}]"
            lines.append(line)
        if self.capacity_bound_by is not None:
            node, array, length = self.capacity_bound_by
            lines.append(f"capacity {length}: bounded by {array!r} of {node!r}")
        for node, reason in self.split_refused:
            lines.append(f"{node!r} not split: {reason}")
        lines += list(self.bodies)
        return "\n".join(lines)

    @property
    def fused_runs(self):
        """((first stage, last stage), tile) of every fused run, in order."""
        return [(sp.fused, sp.tile) for sp in self.stages
                if sp.fused is not None and sp.stage == sp.fused[0]]
