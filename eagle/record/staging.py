"""Stages from memory hazards, computed incrementally as nodes are recorded.

A node's stage is one past the latest stage of any earlier node it conflicts
with (read-after-write, write-after-read, write-after-write on overlapping
memory); 0 if none. Nodes in one stage may run side by side.

Every view some node touched gets an *entry* holding the nodes that wrote it
and read it since it was last overwritten whole. Entries are indexed by their
bytes (``AddressIndex``), whoever owns the memory, so a new access meets only
the entries whose extents it overlaps: recording costs O(accesses x entries
each overlaps), not O(nodes^2). A write that covers an entry clears it (it
leaves the index): every later access that overlaps the entry also overlaps
the write, and so is ordered after everything the entry held. The
dependencies found this way are exactly the pairs whose views overlap, which
is also what the picture draws.

The group check uses the same index and the same overlap rule
(``Extent.overlaps``), so a group is refused exactly when staging its members
one by one would have ordered two of them.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from eagle._errors import GroupConflictError
from eagle.record.memory import extent_of


#: the index's work so far in this process: segments walked plus the entries met in
#: them, repeats included (the recording-scale tests count work with it, beside
#: ``eagle.record.memory.overlap_tests``)
index_steps = 0


class _Entry:
    """One view's accesses since it was last overwritten whole."""

    __slots__ = ("extent", "key", "seq", "writers", "readers")

    def __init__(self, extent, key, seq):
        self.extent, self.key, self.seq = extent, key, seq
        self.writers = []   # (node, the writer's name for the array)
        self.readers = []   # node (staging) or (node, name) (the group check)


class _SortedAddresses:
    """A sorted set of integers kept in blocks of at most 2 * LOAD, so that an insert
    moves O(LOAD + n / LOAD) items whatever the order addresses come in (one flat
    sorted list would move O(n) each time: quadratic for arrays recorded in a
    shuffled address order)."""

    LOAD = 512

    def __init__(self):
        self._blocks: list[list[int]] = []
        self._firsts: list[int] = []   # the first address of each block

    def __len__(self):
        return sum(len(b) for b in self._blocks)

    def insert(self, a):
        blocks, firsts = self._blocks, self._firsts
        if not blocks:
            blocks.append([a])
            firsts.append(a)
            return
        b = bisect_right(firsts, a) - 1
        if b < 0:
            b = 0
            firsts[0] = a
        block = blocks[b]
        block.insert(bisect_right(block, a), a)
        if len(block) > 2 * self.LOAD:
            half = block[self.LOAD:]
            del block[self.LOAD:]
            blocks.insert(b + 1, half)
            firsts.insert(b + 1, half[0])

    def from_floor(self, a, below) -> list:
        """The addresses from the greatest one <= ``a`` (or the first) up to, not
        including, ``below``, in order."""
        blocks, firsts = self._blocks, self._firsts
        if not blocks:
            return []
        b = bisect_right(firsts, a) - 1
        if b < 0:
            b, i = 0, 0
        else:
            i = bisect_right(blocks[b], a) - 1
        block = blocks[b]
        end = bisect_left(block, below, i)
        if end < len(block) or b + 1 == len(blocks):
            return block[i:end]
        out = block[i:]
        for block in blocks[b + 1:]:
            end = bisect_left(block, below)
            out += block[:end]
            if end < len(block):
                break
        return out

    def remove(self, a):
        blocks, firsts = self._blocks, self._firsts
        b = bisect_right(firsts, a) - 1
        block = blocks[b]
        i = bisect_right(block, a) - 1
        assert block[i] == a, "removing an address that is not there"
        del block[i]
        if not block:
            del blocks[b], firsts[b]
        elif i == 0:
            firsts[b] = block[0]

    def floor(self, a):
        """The greatest address <= ``a``, or None."""
        b = bisect_right(self._firsts, a) - 1
        if b < 0:
            return None
        block = self._blocks[b]
        return block[bisect_right(block, a) - 1]


class AddressIndex:
    """Entries indexed by the byte ranges [lo, hi) of their views.

    The address line is cut at both ends of every entry into segments; each
    segment holds the entries covering it. An access looks up the segments its
    own range spans (bisect) and tests only the entries found there, each once,
    with the exact overlap rule. Entries come back in the order they were made,
    so dependencies are listed deterministically. Removing an entry (a write
    covered it) merges the segments it separated where they are covered alike.
    """

    def __init__(self):
        self._starts = _SortedAddresses()   # segment starts
        self._cover: dict[int, dict] = {}   # segment start -> entries covering the segment (dict keys)
        self._by_key: dict = {}             # view identity -> its entry
        self._made = 0

    def __len__(self):
        return len(self._by_key)

    def get(self, key):
        return self._by_key.get(key)

    def _cut(self, a):
        """Make ``a`` a segment start: the new segment is covered as the one it was cut from."""
        cover = self._cover
        if a in cover:
            return
        prev = self._starts.floor(a)
        cover[a] = dict(cover[prev]) if prev is not None else {}
        self._starts.insert(a)

    def add(self, ext, key) -> _Entry:
        entry = _Entry(ext, key, self._made)
        self._made += 1
        self._by_key[key] = entry
        self._cut(ext.lo)
        self._cut(ext.hi)
        cover = self._cover
        for start in self._starts.from_floor(ext.lo, ext.hi):
            cover[start][entry] = None
        return entry

    def remove(self, entry) -> None:
        del self._by_key[entry.key]
        cover, starts = self._cover, self._starts
        lo, hi = entry.extent.lo, entry.extent.hi
        cuts = list(starts.from_floor(lo, hi + 1))   # the entry's segments, and the cut at hi
        for start in cuts:
            if start < hi:
                del cover[start][entry]
        # a cut between two segments covered alike is no cut any more: merge them, so
        # that what a covering write cleared costs nothing to later accesses
        before = starts.floor(lo - 1)
        prev = cover[before].keys() if before is not None else {}.keys()
        for start in cuts:
            here = cover[start].keys()
            if here == prev:
                del cover[start]
                starts.remove(start)
            else:
                prev = here

    def overlapping(self, ext) -> list:
        """The entries whose views share a byte with ``ext``, oldest first."""
        if ext.hi <= ext.lo:
            return []
        global index_steps
        cover = self._cover
        starts = self._starts.from_floor(ext.lo, ext.hi)
        if len(starts) == 1:   # the common case; a segment lists its entries oldest first
            covering = cover[starts[0]]
            index_steps += 1 + len(covering)
            return [entry for entry in covering if entry.extent.overlaps(ext)]
        seen = set()
        found = []
        for start in starts:
            covering = cover[start]
            index_steps += 1 + len(covering)
            for entry in covering:
                if entry.seq not in seen:
                    seen.add(entry.seq)
                    if entry.extent.overlaps(ext):
                        found.append(entry)
        if len(found) > 1:
            found.sort(key=_made_order)
        return found


def _made_order(entry):
    return entry.seq


@dataclass
class Dependency:
    """``dst`` must run after ``src``. ``label`` is the array name carried (RAW), else None."""

    src: int
    dst: int
    label: str | None


def _covers(w, w_key, e) -> bool:
    """Whether the write extent w contains every byte of the entry e's view."""
    if w_key == e.key:
        return True
    return w.contiguous and w.lo <= e.extent.lo and e.extent.hi <= w.hi


class Stager:
    """Incremental staging state of one graph."""

    def __init__(self):
        self._index = AddressIndex()
        self.stage_of: list[int] = []
        self.edges: list[Dependency] = []

    @property
    def n_stages(self) -> int:
        return max(self.stage_of, default=-1) + 1

    def _dependencies(self, index, accesses):
        """Earlier nodes that ``accesses`` (list of (name, extent, is_write)) must follow."""
        deps = {}  # (src, label) -> Dependency, in discovery order
        for name, ext, is_write in accesses:
            for entry in self._index.overlapping(ext):
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
        views = self._index
        for name, ext, is_write in accesses:
            if ext.empty:
                continue
            key = ext.key()
            own = views.get(key)
            if is_write:
                for entry in views.overlapping(ext):
                    if entry is not own and _covers(ext, key, entry):
                        views.remove(entry)
                if own is None:
                    own = views.add(ext, key)
                else:
                    own.writers, own.readers = [], []
                own.writers.append((index, name))
            else:
                if own is None:
                    own = views.add(ext, key)
                own.readers.append(index)

    @staticmethod
    def accesses(node):
        return [(name, extent_of(a), is_write) for name, a, is_write in node.accesses()]

    def check_group(self, names, access_lists):
        """Reject a group whose members conflict, naming both nodes and the array.

        The members' accesses go into an index of their own, member by member;
        each access meets only the earlier members' views it overlaps."""
        views = AddressIndex()
        for j, accesses in enumerate(access_lists):
            for name_j, ext_j, w_j in accesses:
                for entry in views.overlapping(ext_j):
                    clash = entry.writers + (entry.readers if w_j else [])
                    if clash:
                        i, name_i = min(clash)
                        w_i = (i, name_i) in entry.writers
                        what = ("both write" if w_i and w_j else
                                f"{names[i] if w_i else names[j]!r} writes what "
                                f"{names[j] if w_i else names[i]!r} reads")
                        raise GroupConflictError(
                            f"group members {names[i]!r} and {names[j]!r} conflict on the "
                            f"array {name_i!r} of {names[i]!r} / {name_j!r} of {names[j]!r} "
                            f"({what}); a group must hold independent nodes")
            for name_j, ext_j, w_j in accesses:
                if ext_j.empty:
                    continue
                key = ext_j.key()
                entry = views.get(key) or views.add(ext_j, key)
                (entry.writers if w_j else entry.readers).append((j, name_j))

    def add(self, first_index, access_lists):
        """Stage nodes ``first_index ...``; several nodes form a group sharing one stage."""
        deps = [self._dependencies(first_index + k, acc) for k, acc in enumerate(access_lists)]
        stage = max((self.stage_of[d.src] + 1 for ds in deps for d in ds), default=0)
        for k, acc in enumerate(access_lists):
            self.stage_of.append(stage)
            self.edges.extend(deps[k])
            self._record(first_index + k, acc)
        return stage
