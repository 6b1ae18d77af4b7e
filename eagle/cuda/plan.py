"""The plan report of a graph built for cuda (``g.plan()``): per stage, captured on one stream
or as side-by-side branches, with the CUDA graph's size and what a retune patches."""
from __future__ import annotations

from dataclasses import dataclass, field

from eagle.cuda._driver import driver_version, version_text
from eagle.record.plan import Plan, StagePlan

__all__ = ["CudaPlan", "cuda_plan"]


@dataclass
class CudaPlan(Plan):
    """How a graph built for cuda runs: per stage, captured on one stream or as branches."""

    runtime: str = ""
    graph_nodes: int = 0
    sized_kernels: int = 0
    #: {stage: {node name: [kernel names]}} of the stages captured in order because two of
    #: their branches called a library that keeps per-thread state (see ``CudaOptions.library_branches``)
    library_serial_stages: dict = field(default_factory=dict)

    def __str__(self):
        lines = [f"eagle plan · backend: cuda · {self.runtime} · logical size {self.logical_size} of "
                 f"{self.capacity} · {self.graph_nodes} CUDA graph nodes, {self.sized_kernels} "
                 "retuned by set_logical_size · one cudaGraphLaunch per replay"]
        for sp in self.stages:
            streams = "1 stream " if sp.team == 1 else f"{sp.team} streams"
            lines.append(f"stage {sp.stage}  {sp.policy:8} on {streams}   " + " ".join(sp.nodes))
        return "\n".join(lines)


def cuda_plan(recording, branches, logical_size, graph_nodes, sized_kernels,
              library_serial_stages) -> CudaPlan:
    """The plan of ``recording`` built for cuda: ``branches[s]`` whether stage s was captured
    as branches; the rest as the backend knows it."""
    stages = [StagePlan(s, [recording.box(i) for i in idx], "branches" if b else "stream",
                        len(idx) if b else 1, None)
              for s, (idx, b) in enumerate(zip(recording.rows, branches))]
    return CudaPlan("cuda", 1, logical_size, recording.capacity, 0.0, stages,
                    runtime=f"driver {version_text(driver_version())}",
                    graph_nodes=graph_nodes, sized_kernels=sized_kernels,
                    library_serial_stages=dict(library_serial_stages))
