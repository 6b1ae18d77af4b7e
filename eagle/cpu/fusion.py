"""Fused sample tiles: which consecutive stages of a cpu plan run tile by tile.

A *fused run* is two or more consecutive stages that the executor runs as one
(csrc/cpu/plan.h, ``eagle_stage.tile``; csrc/cpu/tiles.c): each thread takes its share of
[0, logical_size) and runs every node of the run over one tile of it, in
recording order, before the next tile, with no barrier between those stages.
The arrays the run passes from node to node then stay in cache between one
node and the next instead of going through memory once per node.

That is the sequential oracle's result, bit for bit, when the work a node of
the run does at sample i meets what another node of the run writes only at
sample i. So a stage joins the run only if

- every node of it is *fusable*: a split native node (ufunc, native kernel; not a
  team kernel: no compaction, reorder or collective) that declares
  ``sample_local`` (``eagle.record.node.Node``) and writes only per-sample arrays
  whose samples do not share bytes (no 0-d or zero-stride output, no array marked
  not per-sample); and the same team policy as the run;
- every pair of its accesses and the run's earlier accesses that meet in memory
  with a write among them (a dependency of staging, ``Recording.edges``) maps
  samples to memory alike: the same axis-0 stride ``s``, and sample 0 of both inside
  one window of ``|s|`` bytes, so that sample i of both lies in the i-th such window and
  no other sample of either does (``x`` and ``x[:]`` fuse, and so do ``e[:, 1:]`` and
  ``e[:, :-1]``, the same row of each sample; ``x[1:]`` and ``x[:-1]`` or ``x`` and
  ``x[::-1]`` do not: they meet at other samples). Reads never conflict: a run may
  read an array at neighbouring samples (``a[2:]``, ``a[:-2]``, ``a[1:-1, 2:]``)
  as long as no node of the run writes it. Staging's dependencies are all the
  overlapping pairs up to a write that covers a view whole, and what such a write
  covers maps samples as the write does, so checking the edges into the stage suffices.

Anything else ends the run: the stage starts the next candidate run, or runs
alone. A Jacobi sweep, ``b[1:-1] = f(a[:-2], a[1:-1], a[2:])`` then
``a[1:-1] = f(b[:-2], b[1:-1], b[2:])``, is two runs: the read of ``b[:-2]``
meets the write of ``b[1:-1]`` at other samples. A run holds at most ``MAX_NODES`` nodes.

The tile is sized by bytes: ``TILE_BUDGET_FRACTION`` of the per-core L2 cache
(``os.sysconf``, else /sys, else 1 MiB), less the halo the run reads beyond its
samples, divided by the bytes one sample of the run touches. Views that meet in
memory with one axis-0 stride (``a[:-2]``, ``a[1:-1]``, ``a[2:]``) count once: one
sample's bytes of the group (its stride, at most the span of its rows rounded up to
cache lines), plus, as halo, what the group's rows span beyond one stride. The
quotient is rounded down to a multiple of 64 samples when it is 64 or more, else
kept (rows of a few KiB get tiles of a few rows; at least 1); then (a tile given as
``fuse=`` too) rounded up to a multiple of the run's nodes' ``align`` (a
reduction's block), so that every tile starts on a block.

A reduction or tally (``Node.combines``) joins a run: it writes its output, which is
not per-sample, once every share of the run is done; a node reading that output meets
it at no sample alike, so it starts the next run.
"""
from __future__ import annotations

import os

from eagle.record.memory import data_pointer, extent_of, overlap, sample_extent
from eagle.record.node import RunsAs

__all__ = ["FusedRun", "fused_runs", "l2_cache_bytes"]

#: most nodes in one fused run (EAGLE_FUSED_MAX_NODES in csrc/cpu/plan.h)
MAX_NODES = 64
#: share of the per-core L2 cache a tile's working set may fill
TILE_BUDGET_FRACTION = 0.5
_CACHE_LINE = 64


class FusedRun:
    """Recording stages ``stages`` (consecutive), run tile by tile in tiles of ``tile``
    samples (``tile`` 0: one stage, not fused)."""

    __slots__ = ("stages", "tile")

    def __init__(self, stages, tile):
        self.stages, self.tile = tuple(stages), tile

    @property
    def fused(self) -> bool:
        return self.tile > 0

    def __repr__(self):
        return f"FusedRun(stages={list(self.stages)}, tile={self.tile})"


def l2_cache_bytes() -> int:
    """The per-core L2 cache size in bytes (1 MiB when the system does not say)."""
    try:
        n = os.sysconf("SC_LEVEL2_CACHE_SIZE")
        if n > 0:
            return n
    except (ValueError, OSError, AttributeError):
        pass
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            text = f.read().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return 1 << 20


def _sample_window(node, name, a):
    """(axis-0 stride s, lo, hi): sample 0 of ``a`` is the bytes [lo, hi) and sample i
    lies inside [lo + i * s, lo + i * s + |s|) for every i (so different samples never
    share a byte); or None (0-d, zero stride, not per-sample, rows wider than the stride)."""
    if name in node.not_per_sample or a.ndim == 0:
        return None
    s0 = a.strides[0]
    if s0 == 0:
        return None
    lo, hi = sample_extent(a)
    if hi - lo > abs(s0):
        return None
    p = data_pointer(a)
    return s0, p + lo, p + hi


def _alike(x, y) -> bool:
    """Whether two sample windows map every sample to one window of |stride| bytes."""
    return (x is not None and y is not None and x[0] == y[0]
            and max(x[2], y[2]) - min(x[1], y[1]) <= abs(x[0]))


def _fusable(node) -> bool:
    if not (node.sample_local and node.sized and node.runs_as is RunsAs.NATIVE and node.split
            and node.kernel.phases == 0 and not node.resizes
            and not node.permutes_samples and node.collective is None):
        return False
    # a reduction writes its output once the run is over (csrc/cpu/plan.h, finish)
    return all(_sample_window(node, name, a) is not None for name, a, w in node.arrays()
               if w and not (node.combines and name in node.not_per_sample))


def _meets_alike(src, dst) -> bool:
    """Whether every pair of accesses of nodes ``src`` and ``dst`` that meets in memory
    (one of them a write) maps each sample to the same window of bytes."""
    for na, a, wa in src.arrays():
        for nb, b, wb in dst.arrays():
            if not (wa or wb) or not overlap(a, b):
                continue
            if not _alike(_sample_window(src, na, a), _sample_window(dst, nb, b)):
                return False
    return True


def _round_lines(n: int) -> int:
    return -(-max(n, 1) // _CACHE_LINE) * _CACHE_LINE


def _tile(nodes, budget) -> int:
    """Samples per tile: see the module's docstring."""
    groups = []   # [stride, lo, hi, first lo, first hi]: views meeting in memory, one stride
    for node in nodes:
        for name, a, _ in node.arrays():
            win = _sample_window(node, name, a)
            if win is None:
                continue   # a 0-d or broadcast operand: read, a few bytes for every tile
            s0, lo, hi = win
            ext = extent_of(a)
            for g in groups:
                if g[0] == s0 and ext.lo < g[2] and g[1] < ext.hi:
                    g[1], g[2] = min(g[1], ext.lo), max(g[2], ext.hi)
                    g[3], g[4] = min(g[3], lo), max(g[4], hi)
                    break
            else:
                groups.append([s0, ext.lo, ext.hi, lo, hi])
    per_sample = halo = 0
    for s0, _, _, lo, hi in groups:
        span = hi - lo
        per_sample += min(abs(s0), _round_lines(span))
        if span > abs(s0):
            halo += _round_lines(span - abs(s0))
    tile = int(max(budget - halo, budget / 4) // max(per_sample, 1))
    return tile // 64 * 64 if tile >= 64 else max(tile, 1)


def fused_runs(recording, policies, fuse=True) -> list:
    """The recording's stages cut into ``FusedRun`` s, in order, covering every stage
    once. ``fuse``: True (tiles sized from the cache), False (no run is fused), or a
    tile size in samples."""
    rows = recording.rows
    if fuse is False:
        return [FusedRun([s], 0) for s in range(len(rows))]
    nodes, stage_of = recording.nodes, recording.stage_of
    into = [[] for _ in rows]            # stage -> edges into it
    for d in recording.edges:
        into[stage_of[d.dst]].append(d)
    stage_ok = [all(_fusable(nodes[i]) for i in row) for row in rows]
    budget = l2_cache_bytes() * TILE_BUDGET_FRACTION
    runs, current = [], []

    def close():
        if len(current) >= 2:
            members = [nodes[i] for s in current for i in rows[s]]
            tile = fuse if fuse is not True else _tile(members, budget)
            align = max(n.align for n in members)
            runs.append(FusedRun(current, -(-tile // align) * align))
        else:
            runs.extend(FusedRun([s], 0) for s in current)

    count = 0
    for s, row in enumerate(rows):
        joins = (bool(current) and stage_ok[s] and policies[s] == policies[current[0]]
                 and count + len(row) <= MAX_NODES
                 and all(stage_of[d.src] < current[0] or _meets_alike(nodes[d.src], nodes[d.dst])
                         for d in into[s]))
        if joins:
            current.append(s)
            count += len(row)
            continue
        close()
        current, count = ([s], len(row)) if stage_ok[s] and len(row) <= MAX_NODES else ([], 0)
        if not current:
            runs.append(FusedRun([s], 0))
    close()
    return runs
