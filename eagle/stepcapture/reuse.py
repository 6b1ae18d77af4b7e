"""A temporary read for the last time gives its memory to the result of the op reading it.

The pool (``eagle.stepcapture.pool``) reuses a buffer once the step dropped every stand-in
of its temporary; a named temporary (``d = np.empty_like(x)``) lives until the step
returns, so ``x += mu * d`` makes ``mu * d`` a temporary of its own, where a graph built by
hand writes the product over ``d`` (``ufunc(np.multiply, mu, d, out=d)``): a pass over
memory fewer. Once the step is over, what reads each temporary last is known:
``reuse_dying_operands`` has an elementwise op that reads a temporary ``d`` for the last
time and makes a temporary ``t`` of the same shape, strides and dtype write ``t`` in
``d``'s memory (and every later op read it there), as NumPy's own elision does for an
unnamed operand.

It keeps them apart, where another could see the difference: ``d`` or ``t`` is returned,
kept by capture, or still held after the step; ``d``'s memory is touched after the op
(``d`` read again, or a later temporary of its buffer while ``t`` is alive); the op reads
``d`` through another view too; ``t`` is reached through another view, or by a node
capture did not make; ``d``'s first write was masked, partial, or by a node other than a
ufunc or random node (what a replay reads of ``d``'s other elements would change); a node
whose accesses are not known (a ``while_loop`` or ``if_else``) runs after ``d`` is made.
Only buffers of ``pool.REUSE_MIN_BYTES`` or more are given (the pool's reason: the order the
shared memory adds costs a stage where it saves little).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import byte_bounds

from eagle.record.node import RunsAs
from eagle.stepcapture import pool

__all__ = ["reuse_dying_operands"]


def _same_layout(a, b) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides and a.dtype == b.dtype)


def _same_form(a, b) -> bool:
    """Shape, strides and dtype alike (element ``i`` of one is element ``i`` of the other)."""
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype


def _random_node_kinds():
    from eagle.cpu.random_node import DistributionNode, RandomNode
    return RandomNode, DistributionNode


def _accesses(op):
    """[(array, is_write, whole)] of ``op``: ``whole``, a write of every element the op runs
    over (not masked, not scattered); None where they are not known (a control node)."""
    arrays = []
    if op.kind == "node":
        if op.node.runs_as is RunsAs.CONTROL:
            return None
        random = isinstance(op.node, _random_node_kinds())
        for _, a, is_write in op.node.accesses():
            arrays.append((a, is_write, is_write and random))
        return arrays
    masked = op.where is not None
    for _, a in op.ins + ([op.where] if masked else []):
        arrays.append((a, False, False))
    for _, a in op.outs:
        if op.kind == "at":
            arrays.append((a, False, False))
        arrays.append((a, True, op.kind == "ufunc" and not masked))
    if op.kind == "at":     # ufunc(uf.at, tally, index, weights): the tally is read and written
        a = op.ins[0][1]
        arrays.append((a, True, False))
    return arrays


class _Access:
    __slots__ = ("op", "array", "write", "whole", "owner", "buffer")

    def __init__(self, op, array, write, whole, owner, buffer):
        self.op, self.array, self.write, self.whole, self.owner, self.buffer = \
            op, array, write, whole, owner, buffer


class _Memory:
    """Which temporary each access of a pool buffer is, by the buffer and the op's serial
    number: the buffer's temporaries follow each other (the pool gives a buffer again only
    once its temporary's stand-ins are gone), each from its ``born`` on."""

    def __init__(self, session):
        self.ranges = {k: byte_bounds(b) for k, b in enumerate(session.pool.buffers) if b.size}
        self.temps = [t for t in session.pool.temporaries if t.plain is not None and t.born is not None]
        tenants = {}
        for t in self.temps:
            tenants.setdefault(t.buffer, []).append(t)
        self.by_buffer = {k: [] for k in self.ranges}     # k -> [_Access], in op order
        self.of = {t.name: [] for t in self.temps}          # name -> [_Access], in op order
        self.unknown = []                                   # seq of ops whose accesses are unknown
        for op in session.ops:
            found = _accesses(op)
            if found is None:
                self.unknown.append(op.seq)
                continue
            for a, write, whole in found:
                if not isinstance(a, np.ndarray) or a.size == 0:
                    continue
                lo, hi = byte_bounds(a)
                for k, (blo, bhi) in self.ranges.items():
                    if lo < bhi and blo < hi:
                        owner = None
                        for t in tenants.get(k, ()):
                            if t.born <= op.seq:
                                owner = t            # the latest made by then
                        acc = _Access(op, a, write, whole, owner, k)
                        self.by_buffer[k].append(acc)
                        if owner is not None:
                            self.of[owner.name].append(acc)

    def first(self, t):
        return self.of[t.name][0].op.seq if self.of[t.name] else None

    def last(self, t):
        return self.of[t.name][-1].op.seq if self.of[t.name] else None

    def at(self, t, seq):
        return [acc for acc in self.of[t.name] if acc.op.seq == seq]


def _held(session, escaping):
    """Names of the temporaries another could see after the step: returned, kept by capture,
    or with a stand-in still alive."""
    kept = {getattr(s, "label", None) for s in session.kept}
    seen = [byte_bounds(e) for e in escaping if isinstance(e, np.ndarray) and e.size]
    held = set()
    for t in session.pool.temporaries:
        if t.name in kept or t.standin_alive() or t.plain is None:
            held.add(t.name)
        elif t.plain.size:
            lo, hi = byte_bounds(t.plain)
            if any(elo < hi and lo < ehi for elo, ehi in seen):
                held.add(t.name)
    return held


def _hands_over(mem, op, old, new_plain, y):
    """Whether ``op`` reads ``old`` for the last time and first writes all of ``y``, element
    for element, where ``old`` is to live in ``new_plain``: ``y``'s memory and layout."""
    if y is None or op.kind != "ufunc" or op.where is not None or op.uf.signature is not None:
        return False
    if mem.first(y) != op.seq or not _same_layout(y.plain, new_plain):
        return False
    if not all(acc.write and acc.whole and _same_layout(acc.array, y.plain) for acc in mem.at(y, op.seq)):
        return False
    return all(not acc.write and _same_layout(acc.array, old.plain) for acc in mem.at(old, op.seq))


def _gives(mem, held, session, op, d, t):
    """Whether ``t``, first written by ``op``, may live in the memory of ``d``, read last by it."""
    if d is t or d.buffer == t.buffer or d.name in held or t.name in held:
        return False
    if not _same_form(d.plain, t.plain) or t.plain.nbytes < pool.REUSE_MIN_BYTES:
        return False
    if any(seq >= d.born for seq in mem.unknown):
        return False
    d_acc, t_acc = mem.of[d.name], mem.of[t.name]
    if mem.last(d) != op.seq or mem.first(t) != op.seq:
        return False
    first = d_acc[0]
    if not (first.write and first.whole and _same_layout(first.array, d.plain)) or any(
            not acc.write for acc in mem.at(d, first.op.seq)):
        return False        # d's first write leaves elements of d a replay reads
    if any(acc.write or not _same_layout(acc.array, d.plain) for acc in mem.at(d, op.seq)):
        return False        # the op reads another view of d (or writes d)
    if not all(acc.write and acc.whole and _same_layout(acc.array, t.plain) for acc in mem.at(t, op.seq)):
        return False
    if any(acc.op.kind not in ("ufunc", "reduce") or not _same_layout(acc.array, t.plain) for acc in t_acc):
        return False        # t through another view, or a node whose arrays are fixed
    end = mem.last(t)
    for acc in mem.by_buffer[d.buffer]:
        seq = acc.op.seq
        if seq < op.seq or seq > end or (acc.owner is d and seq == op.seq):
            continue
        if seq == end and acc.owner is not None and _hands_over(mem, acc.op, t, d.plain, acc.owner):
            continue
        return False        # d's memory is touched while t would live there
    return True


def _move(session, mem, t, d):
    """Have every op that touches ``t`` touch it in ``d``'s memory; False (nothing changed)
    where an op refuses it."""
    old_plain, new_plain = t.plain, d.plain
    changed = []
    for op in dict.fromkeys(acc.op for acc in mem.of[t.name]):
        old = (list(op.ins), list(op.outs), op.where)

        def swap(pair):
            return (pair[0], new_plain) if isinstance(pair[1], np.ndarray) and \
                _same_layout(pair[1], old_plain) else pair

        op.ins, op.outs = [swap(p) for p in op.ins], [swap(p) for p in op.outs]
        op.where = None if op.where is None else swap(op.where)
        changed.append((op, old))
    if not session.remake_ops(changed):
        return False
    for acc in mem.of[t.name]:
        mem.by_buffer[acc.buffer].remove(acc)
        acc.array, acc.buffer = new_plain, d.buffer
    merged = mem.by_buffer[d.buffer] + mem.of[t.name]
    mem.by_buffer[d.buffer] = sorted(merged, key=lambda acc: acc.op.seq)
    t.plain, t.buffer = new_plain, d.buffer
    return True


def reuse_dying_operands(session, escaping=()) -> int:
    """Write each temporary that an elementwise op makes over a temporary that op reads for
    the last time (the module docstring says when not); ``escaping``: the arrays the step
    returned. The number of temporaries moved."""
    mem = _Memory(session)
    held = _held(session, escaping)
    made_by = {}
    for t in mem.temps:
        if mem.of[t.name]:
            made_by.setdefault(mem.first(t), []).append(t)
    last_read = {}
    for t in mem.temps:
        if mem.of[t.name]:
            last_read.setdefault(mem.last(t), []).append(t)
    moved = 0
    for op in list(session.ops):
        if op.kind != "ufunc" or op.where is not None or op.uf.signature is not None:
            continue
        dying = list(last_read.get(op.seq, ()))
        for t in made_by.get(op.seq, ()):
            d = next((d for d in dying if _gives(mem, held, session, op, d, t)), None)
            if d is not None and _move(session, mem, t, d):
                dying.remove(d)
                moved += 1
    return moved
