"""Stages from memory hazards, computed incrementally as nodes are recorded.

A node's stage is one past the latest stage of any earlier node it conflicts
with (read-after-write, write-after-read, write-after-write on overlapping
memory); 0 if none. Nodes in one stage may run side by side.

Every view of an allocation that some node touched gets an *entry* holding
the nodes that wrote it and read it since it was last overwritten whole. A new
access consults only the entries of its own allocation that overlap it, so
staging costs O(accesses x views per allocation), not O(nodes^2) (a view whose
allocation eagle cannot tell, such as a DLPack import, is compared with every
allocation's views, and they with it). A write
that covers an entry clears it: every later access that overlaps the entry
also overlaps the write, and so is ordered after everything the entry held.
The dependencies found this way are exactly the pairs whose views overlap,
which is also what the picture draws.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from eagle._memory import SHARED_BUCKET, extent_of


@dataclass
class _Entry:
    extent: object
    writers: list = field(default_factory=list)   # (node, the writer's name for the array)
    readers: list = field(default_factory=list)


@dataclass
class Dependency:
    """``dst`` must run after ``src``. ``label`` is the array name carried (RAW), else None."""

    src: int
    dst: int
    label: str | None


def _covers(w, e) -> bool:
    """Whether the write extent w contains every byte of the entry extent e."""
    if w.key() == e.key():
        return True
    return w.contiguous and w.lo <= e.lo and e.hi <= w.hi


class GroupConflict(ValueError):
    pass


class Stager:
    """Incremental staging state of one graph."""

    def __init__(self):
        self._buckets: dict = {}   # allocation -> {view key: _Entry}
        self.stage_of: list[int] = []
        self.edges: list[Dependency] = []

    @property
    def n_stages(self) -> int:
        return max(self.stage_of, default=-1) + 1

    def _overlapping(self, ext):
        # memory whose owner is unknown (SHARED_BUCKET: a DLPack import, a foreign buffer) may be
        # any allocation's: compare it with every bucket, and every bucket with it
        if ext.bucket == SHARED_BUCKET:
            buckets = list(self._buckets.values())
        else:
            buckets = [self._buckets.get(ext.bucket), self._buckets.get(SHARED_BUCKET)]
        for views in buckets:
            for entry in (views or {}).values():
                if entry.extent.overlaps(ext):
                    yield entry

    def _dependencies(self, index, accesses):
        """Earlier nodes that ``accesses`` (list of (name, extent, is_write)) must follow."""
        deps = {}  # (src, label) -> Dependency, in discovery order
        for name, ext, is_write in accesses:
            for entry in self._overlapping(ext):
                for w, w_name in entry.writers:
                    # RAW carries data; WAW only orders
                    label = None if is_write else w_name
                    deps.setdefault((w, label), Dependency(w, index, label))
                if is_write:
                    for r in entry.readers:
                        deps.setdefault((r, None), Dependency(r, index, None))
        # an ordering edge is redundant beside a data edge from the same node
        data_srcs = {d.src for d in deps.values() if d.label is not None}
        return [d for d in deps.values() if d.label is not None or d.src not in data_srcs]

    def _record(self, index, accesses):
        for name, ext, is_write in accesses:
            if ext.empty:
                continue
            views = self._buckets.setdefault(ext.bucket, {})
            key = ext.key()
            own = views.get(key)
            if own is None:
                own = views[key] = _Entry(ext)
            if is_write:
                for entry in self._overlapping(ext):
                    if _covers(ext, entry.extent):
                        entry.writers, entry.readers = [], []
                own.writers.append((index, name))
            else:
                own.readers.append(index)

    @staticmethod
    def accesses(node):
        return [(name, extent_of(a), is_write) for name, a, is_write in node.arrays()]

    def check_group(self, names, access_lists):
        """Reject a group whose members conflict, naming both nodes and the array."""
        for i in range(len(access_lists)):
            for j in range(i + 1, len(access_lists)):
                for name_i, ext_i, w_i in access_lists[i]:
                    for name_j, ext_j, w_j in access_lists[j]:
                        if (w_i or w_j) and ext_i.overlaps(ext_j):
                            what = ("both write" if w_i and w_j else
                                    f"{names[i] if w_i else names[j]!r} writes what "
                                    f"{names[j] if w_i else names[i]!r} reads")
                            raise GroupConflict(
                                f"group members {names[i]!r} and {names[j]!r} conflict on the "
                                f"array {name_i!r} of {names[i]!r} / {name_j!r} of {names[j]!r} "
                                f"({what}); a group must hold independent nodes")

    def add(self, first_index, access_lists):
        """Stage nodes ``first_index ...``; several nodes form a group sharing one stage."""
        deps = [self._dependencies(first_index + k, acc) for k, acc in enumerate(access_lists)]
        stage = max((self.stage_of[d.src] + 1 for ds in deps for d in ds), default=0)
        for k, acc in enumerate(access_lists):
            self.stage_of.append(stage)
            self.edges.extend(deps[k])
            self._record(first_index + k, acc)
        return stage
