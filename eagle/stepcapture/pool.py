"""The temporaries of a captured step: memory allocated once, owned by the graph.

What NumPy allocates fresh on every call (``a + b`` without ``out=``) a captured graph
allocates once, at capture, and reuses on every replay: the CPU counterpart of the
private memory pool a CUDA graph captures with. A buffer whose last stand-in is gone
(the step dropped every reference to the temporary and its views) returns to the pool
and a later temporary of the capture may take it: the order of the nodes (hazards from
bytes) keeps the reuse exact. Reuse orders the node that writes the new temporary after
every reader of the old one; for a small buffer (a reduction's 0-d result, a count) that
order costs a stage and saves nothing, so only buffers of ``REUSE_MIN_BYTES`` or more are
reused.
"""
from __future__ import annotations

import weakref

import numpy as np

__all__ = ["Temporary", "TemporaryPool"]

_ALIGN = 64
#: the smallest temporary whose buffer a later one may take
REUSE_MIN_BYTES = 64 * 1024


class Temporary:
    """One temporary: its name, shape and dtype, and the pool buffer it lives in; ``plain``,
    the ndarray over its memory the nodes are given; ``born``, the serial number of the first
    op recorded after it was made (ops are numbered in their session); ``standin_alive()``,
    whether the stand-in the step was given for it is still held (by the step's result, or
    by anything else that outlived the step)."""

    __slots__ = ("name", "shape", "dtype", "buffer", "site", "plain", "born", "_finalizer")

    def __init__(self, name, shape, dtype, buffer, site, plain=None):
        self.name, self.shape, self.dtype, self.buffer, self.site = name, shape, dtype, buffer, site
        self.plain, self.born, self._finalizer = plain, None, None

    def standin_alive(self) -> bool:
        return self._finalizer is not None and self._finalizer.alive

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __repr__(self):
        shape = "x".join(map(str, self.shape)) or "0-d"
        return f"{self.name} {shape} {self.dtype} in buffer {self.buffer} (from {self.site})"


class TemporaryPool:
    """Buffers of raw bytes, 64-byte aligned; a freed one is reused for a temporary that fits
    it (best fit, no more than twice the bytes it needs, ``REUSE_MIN_BYTES`` at least)."""

    def __init__(self, shadow=False):
        #: the buffers only stand for device memory (eagle.stepcapture.device): left untouched
        self.shadow = shadow
        self.buffers: list[np.ndarray] = []
        self._free: list[int] = []
        self._closed = False
        self.temporaries: list[Temporary] = []
        self._made = 0      # names count every temporary made, forgotten ones too: no name twice

    def take(self, shape, dtype, site, owner_cb, order=None):
        """A new temporary of ``shape`` and ``dtype``: (plain ndarray over pool memory, Temporary).
        ``owner_cb(plain)`` makes the stand-in whose death frees the buffer; ``order``: its
        axes from the slowest to the fastest in memory (C order when None)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        count = int(np.prod(shape, dtype=np.int64))
        # at least one element: a 0-element temporary (``a[5:5] + 1``) still needs a buffer
        # to view as ``dtype`` (a 0-byte one cannot be), and a data pointer of its own
        nbytes = max(count, 1) * dtype.itemsize
        fits = [b for b in self._free if REUSE_MIN_BYTES <= nbytes <= self.buffers[b].nbytes - _ALIGN
                <= 2 * nbytes + _ALIGN]
        if fits:
            k = min(fits, key=lambda b: self.buffers[b].nbytes)
            self._free.remove(k)
        else:
            k = len(self.buffers)
            # zeros: what a replay reads of a temporary it never wrote (where= left it) is fixed
            self.buffers.append((np.empty if self.shadow else np.zeros)(nbytes + _ALIGN, dtype=np.uint8))
        raw = self.buffers[k]
        start = (-raw.ctypes.data) % _ALIGN
        order = tuple(range(len(shape))) if order is None else tuple(order)
        flat = raw[start:start + nbytes].view(dtype)[:count]
        plain = flat.reshape(tuple(shape[k] for k in order)).transpose(np.argsort(order))
        self._made += 1
        temp = Temporary(f"t{self._made}", shape, dtype, k, site, plain)
        self.temporaries.append(temp)
        standin = owner_cb(plain, temp)
        temp._finalizer = weakref.finalize(standin, self._release, k)
        return standin, temp

    def forget(self, name) -> None:
        """The temporary ``name`` was never written (its node writes the user's array instead)."""
        self.temporaries = [t for t in self.temporaries if t.name != name]

    def _release(self, k):
        if not self._closed:
            self._free.append(k)

    def keep(self) -> None:
        """Stop reusing: the capture is over (stand-ins that die later free nothing); a buffer
        no temporary kept (its node came to write the user's array instead) is let go."""
        self._closed = True
        used = {t.buffer for t in self.temporaries}
        self.buffers = [b if k in used else b[:0] for k, b in enumerate(self.buffers)]

    @property
    def buffers_in_use(self) -> int:
        return sum(1 for b in self.buffers if b.size)

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)
