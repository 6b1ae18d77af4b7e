"""The device memory one CUDA build owns, under one owner that releases it in one place.

A built graph keeps, as its nodes need (``eagle.cuda.capture.Need``):

* the **size block** (``G_WORDS`` int64 words, eagle/cuda/finished.py): the logical size a
  ``SIZE_PTR`` kernel reads, the next one a compaction writes, the live replays of
  ``launch_until_done``, a reorder's invalid-key flag, the until-done stop count; with its
  host copy as last read back;
* the **replay counter** (uint64) random nodes read as ``g.replays``, advanced on the device
  by each replay's last node;
* the **stop flag** (host-mapped int32) the device loops' condition kernels read, which
  Ctrl-C sets;
* every buffer a lowering hands the graph (``CaptureContext.register_buffer``).

``close()`` releases them all, whatever was made before a failed build stopped.
"""
from __future__ import annotations

import contextlib

import numpy as np

from eagle._errors import CudaError
from eagle.cuda._memory import DeviceBuffer, HostFlag
from eagle.cuda.finished import G_INVALID, G_NEXT, G_SIZE, G_WORDS

__all__ = ["DeviceState"]


class DeviceState:
    """The device memory of one build, written and read on ``stream`` (eagle's)."""

    def __init__(self, stream):
        self.stream = stream
        self._owned = []
        #: the size block (a DeviceBuffer) and its host copy, or None
        self.block = None
        self.host_block = None
        #: the replay counter (a DeviceBuffer), or None
        self.counter = None
        #: the stop flag (a HostFlag), or None
        self.stop = None
        #: the replays counted on the host (graphs without a replay counter)
        self.host_replays = 0

    def own(self, buffer):
        """Take ``buffer`` (a DeviceBuffer, HostFlag...) to release with the rest; returns it."""
        self._owned.append(buffer)
        return buffer

    def make_size_block(self, size: int) -> None:
        """The size block, its logical size and next size ``size``."""
        self.block = self.own(DeviceBuffer(G_WORDS * 8))
        self.host_block = np.zeros(G_WORDS, dtype=np.int64)
        self.host_block[G_SIZE] = self.host_block[G_NEXT] = size
        self.block.write(self.host_block, self.stream)

    def make_replay_counter(self) -> None:
        """The device replay counter, at 0."""
        self.counter = self.own(DeviceBuffer(8))
        self.counter.write(np.zeros(1, dtype=np.uint64), self.stream)

    def make_stop_flag(self) -> None:
        self.stop = self.own(HostFlag())

    @property
    def size_ptr(self) -> int:
        """Device address of the logical size (int64), 0 if there is no size block."""
        return self.block.ptr if self.block is not None else 0

    @property
    def replay_ptr(self) -> int:
        return self.counter.ptr if self.counter is not None else 0

    @property
    def stop_ptr(self) -> int:
        return self.stop.device_ptr if self.stop is not None else 0

    @property
    def replays(self) -> int:
        """The replays run: the device counter (copied back: synchronizes the stream), or
        the host's count."""
        if self.counter is None:
            return self.host_replays
        host = np.zeros(1, dtype=np.uint64)
        self.counter.read_into(host, self.stream)
        return int(host[0])

    @replays.setter
    def replays(self, r: int) -> None:
        self.host_replays = int(r)
        if self.counter is not None:
            self.counter.write(np.array([r], dtype=np.uint64), self.stream)

    def read_block(self):
        """The size block copied to its host copy (synchronizes the stream); returns it."""
        return self.block.read_into(self.host_block, self.stream)

    def write_sizes(self, n: int) -> None:
        """Logical size and next size ``n``, on the device and in the host copy."""
        self.block.write(np.array([n, n], dtype=np.int64), self.stream)
        self.host_block[G_SIZE] = self.host_block[G_NEXT] = n

    def write_word(self, index: int, value: int) -> None:
        """Word ``index`` of the size block (``G_STOP``, ``G_INVALID``...) set to ``value``."""
        self.host_block[index] = value
        self.block.write(self.host_block[index:index + 1], self.stream, offset=8 * index)

    def take_invalid(self) -> bool:
        """Whether the last read block flags an invalid reorder key; clears the flag."""
        if not self.host_block[G_INVALID]:
            return False
        self.write_word(G_INVALID, 0)
        return True

    def close(self) -> None:
        """Release everything (a failure to free one does not keep the others)."""
        for b in self._owned:
            with contextlib.suppress(CudaError):
                b.close()
        self._owned.clear()
        self.block = self.counter = self.stop = None
