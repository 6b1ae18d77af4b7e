"""Finished samples: compaction and reorder of the live set, as graph nodes.

In a sample-parallel step samples finish at different replays. ``compact``
moves the live samples to the front of every state array (stably: the live
keep their order, and so do the finished behind them), writes the live count,
and makes the next replay's logical size that count, so later replays touch
only live work. ``reorder`` sorts the samples by an integer key (a material,
a cell) so that neighbouring samples do similar work. Both permute an id map
along with the state, so ``scatter_back`` can put results in original order.

The step's own nodes must leave finished samples alone (test the alive flag);
then compaction changes only where samples sit, never what they hold.
On the CPU both are team kernels (eagle/cpu/_partition.pyx): a stable parallel
counting sort without the GIL. On CUDA arrays ``compact``/``reorder`` return
captured GPU kernels with the live count kept on the device
(eagle/cuda/finished.py).
"""
from __future__ import annotations

import numpy as np

from eagle.cpu.lowering import cpu_lowering
from eagle.cpu.spec import NativeSpec
from eagle.cpu.threads import get_num_threads
from eagle.record.memory import overlap, samples_may_overlap
from eagle.record.finished import FinishedSamplesNode, check_names, check_policy, check_state, key_label
from eagle.record.node import RunsAs, refuse_object_arrays

# Chunks a partition's range is cut into (independent of the thread count, so
# results never depend on it); fewer when there are many keys to count per chunk.
_MAX_CHUNKS = 64
_COUNTS_BUDGET = 1 << 16


class PartitionNode(FinishedSamplesNode):
    """A compaction or reorder node on NumPy arrays (see ``compact`` and ``reorder``)."""

    kind = "partition"
    runs_as = RunsAs.NATIVE
    split = False

    def __init__(self, mode, key, state, ids, count, n_keys, every, min_dead_fraction):
        """``key``: ``(name, array)``; ``ids``, ``count``: ``(name, array)`` or None."""
        from eagle.cpu._partition import Partition

        (key_name, key), (ids_name, ids) = key, ids or ("ids", None)
        count_name, count = count or ("count", None)
        state = check_state(mode, (key_name, ids_name, count_name), state)
        writes = {key_name: key, **state}
        super().__init__(None, writes)
        if self.family == "cuda":
            raise TypeError(f"{mode}() on CuPy arrays belongs to the cuda backend, which does not offer it yet")
        capacity = key.shape[0] if key.ndim == 1 else -1
        if capacity < 0:
            raise ValueError(f"{mode}(): {key_label(mode, key_name)} must be 1-d, one entry per sample")
        for name, a in writes.items():
            if a.ndim == 0 or a.shape[0] != capacity:
                raise ValueError(f"{mode}(): every state array holds one row per sample ({capacity}); "
                                 f"{name!r} has shape {a.shape}")
            if a.ndim > 1 and not _rows_contiguous(a):
                raise ValueError(f"{mode}(): a sample's row of {name!r} must be contiguous")
        if ids is None:
            ids = np.arange(capacity, dtype=np.int64)
        if not (isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.shape == (capacity,)):
            raise TypeError(f"{mode}(): ids must be an int64 array of shape ({capacity},)")
        if count is None:
            count = np.zeros(1, dtype=np.int64)
        if not (isinstance(count, np.ndarray) and count.dtype == np.int64 and count.size == 1):
            raise TypeError(f"{mode}(): count must be an int64 array of one element")
        check_policy(mode, every, min_dead_fraction)
        check_names(mode, key_name, ids_name, count_name)
        self.writes = {**writes, ids_name: ids, count_name: count}
        self.count_name = count_name
        self.key_name, self.ids_name, self.state_names = key_name, ids_name, tuple(state)
        self.read_too([key_name, *state, ids_name])   # it moves their samples: data flows in
        refuse_object_arrays(self, f"{mode}()")
        _refuse_shared_memory(mode, self.writes)
        self.ids, self.count = ids, count
        self.mode = mode
        permuted = [key, *state.values(), ids]
        chunks = max(1, min(_MAX_CHUNKS, _COUNTS_BUDGET // (n_keys + 1)))
        chunks = max(chunks, get_num_threads())
        self.partition = Partition(mode, key, permuted, capacity, n_keys, int(every),
                                   float(min_dead_fraction), count if mode == "compact" else None, chunks)
        self.kernel = self.partition.kernel
        self.arrays_in_order = permuted + [count]

    def restart(self):
        """``Graph.restart``: the id map back to the identity, the ``every`` count to 0."""
        self.ids[:] = np.arange(self.ids.shape[0], dtype=np.int64)
        self.partition.restart()

    def scatter_back(self, compacted, out=None):
        """Put per-sample values held in compacted order back in original sample order."""
        out = np.empty_like(compacted) if out is None else out
        out[self.ids] = compacted
        return out


@cpu_lowering(PartitionNode)
def _lower_partition(node, index, ctx):
    # a team kernel; the partition rides on the spec: its live count sets the next logical
    # size, and the keys it met outside [0, n_keys) are reported after the launch
    return NativeSpec(index, node.kernel, tuple(node.arrays_in_order), False, partition=node.partition)


def _refuse_shared_memory(mode, arrays):
    """Every array a partition moves samples of must own its bytes: moving one array's
    samples would move another's (or, within one array, other samples')."""
    items = list(arrays.items())
    for i, (name, a) in enumerate(items):
        if samples_may_overlap(a):
            raise ValueError(f"{mode}(): the samples of {name!r} share memory (strides {a.strides}); "
                             "each sample it moves needs bytes of its own")
        for other, b in items[i + 1:]:
            if overlap(a, b):
                raise ValueError(f"{mode}(): {name!r} and {other!r} share memory; every array it "
                                 "moves (the key, the state, ids, count) needs bytes of its own")


def _rows_contiguous(a) -> bool:
    """Whether each sample's row of ``a`` is C-contiguous (an empty array has nothing to copy)."""
    if a.size == 0:
        return True
    step = a.itemsize
    for n, s in zip(reversed(a.shape[1:]), reversed(a.strides[1:])):
        if n > 1 and s != step:
            return False
        step *= n
    return True


def compact_cpu(alive, state, *, ids=None, count=None, every=1, min_dead_fraction=0.25) -> PartitionNode:
    """``eagle.graph.compact`` for NumPy arrays (it dispatches here, with ``(name, array)`` pairs)."""
    if alive[1].dtype not in (np.bool_, np.uint8):
        raise TypeError(f"compact(): alive {alive[0]!r} must be a bool or uint8 array, got {alive[1].dtype}")
    return PartitionNode("compact", alive, state, ids, count, 2, every, min_dead_fraction)


def reorder_cpu(by, state, *, n_keys, ids=None, every=1) -> PartitionNode:
    """``eagle.graph.reorder`` for NumPy arrays (it dispatches here, with ``(name, array)`` pairs)."""
    if by[1].dtype not in (np.int32, np.int64):
        raise TypeError(f"reorder(): the sort key {by[0]!r} must be an int32 or int64 array, got {by[1].dtype}")
    return PartitionNode("reorder", by, state, ids, None, n_keys, every, 0.0)
