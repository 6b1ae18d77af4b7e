"""What the cpu backend hands the C executor for one recorded node: a typed spec per way
of running (``CpuPlan`` reads them; csrc/cpu/plan.h's ``eagle_node`` is their C side).

A node kind's cpu lowering (``eagle.cpu.lowering``) returns one of these. What the backend
must keep or watch for a node besides its call rides on the spec: a compaction or
reorder's compiled ``partition``, a ufunc node's ``loop``, an MPI collective's process
``group`` (the backend collects them from the specs, not from the recorded node).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OpaqueSpec", "NativeSpec", "ControlSpec"]


@dataclass(frozen=True, slots=True)
class OpaqueSpec:
    """A Python callable with no arguments, called under the GIL on every replay."""

    index: int        # the node's index in its recording
    call: Any


@dataclass(frozen=True, slots=True)
class NativeSpec:
    """A nogil C kernel (an ``eagle.native.Kernel``) over samples [start, stop), or run by
    the whole team in phases (a kernel with ``phases``)."""

    index: int
    kernel: Any
    arrays: tuple       # the declared arrays in kernel order
    split: bool         # divide [0, logical_size) among the team
    partition: Any = None   # a compaction or reorder's compiled partition (eagle.cpu._partition)
    loop: Any = None        # a ufunc node's compiled loop (its error is raised after the launch)
    group: Any = None       # an MPI collective's process group (csrc/cpu/plan.h, eagle_group)
    # the node's own sample extent (None: no per-sample array): it runs over
    # [0, min(logical size, extent)) (eagle.cpu.lowering sets it from the node)
    extent: Any = None
    align: int = 1          # split: each thread's share starts at a multiple of this many samples
    # None, or what runs once per run of the node after all its shares (csrc/cpu/plan.h):
    # an object with ``finish_address`` and ``finish_data_address`` (a reduction's combine)
    finish: Any = None


@dataclass(frozen=True, slots=True)
class ControlSpec:
    """A control-flow node: its bodies compiled into CpuPlans of their own, run in place."""

    index: int
    control: str              # "while", "if_else" or "subgraph"
    cond: Any                 # the one-element condition array, or None (subgraph)
    bodies: tuple             # the CpuPlan of each body
    max_iterations: Any       # an int, or None
    name: str                 # for the iteration-limit error
    span_bases: tuple         # the profile's node index of each body's first node
    on_max: str = "raise"     # while: at max_iterations, "raise" or "stop"
