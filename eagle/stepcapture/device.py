"""A step captured over CUDA arrays (CuPy's, anything with ``__cuda_array_interface__``).

Capture records on host stand-ins (``eagle.stepcapture.standin``): views, overlaps and
temporaries are worked out on NumPy arrays. Over CUDA arrays each argument gets a *shadow*,
host memory of the same layout that nothing reads or writes (``np.empty``: its pages are
never touched), and ``DeviceMemory.view`` turns a view of a shadow, or of a temporary of
the pool, into the same view of device memory: the argument's own, or a device buffer
eagle allocates once per pool buffer (zeroed, as the pool's are) and the graph owns. The
nodes are then made by ``eagle.graph`` from those device views: the CUDA backend's
generated ufunc and reduction kernels, the nodes a step over NumPy arrays gets on the cpu.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DeviceMemory", "DeviceView", "device_operands", "refuse_opaque"]


class DeviceView:
    """A view of device memory (``__cuda_array_interface__`` v3), keeping its owner alive."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "owner")

    def __init__(self, ptr, shape, strides, dtype, owner):
        self.ptr, self.shape, self.strides, self.dtype, self.owner = ptr, shape, strides, dtype, owner

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": self.strides}

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"<device view 0x{self.ptr:x} {self.shape} {self.dtype}>"


def _layout(a):
    """(device pointer, shape, strides, dtype) of a CUDA array."""
    cai = a.__cuda_array_interface__
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    if strides is None:     # C-contiguous
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    if cai.get("mask") is not None:
        raise TypeError("capture(): a CUDA array with a mask (__cuda_array_interface__['mask']) has no "
                        "ufunc form")
    return int(cai["data"][0]), shape, tuple(int(s) for s in strides), dtype


class DeviceMemory:
    """Host shadows of the step's CUDA arrays and device twins of the pool's buffers."""

    def __init__(self, pool):
        self.pool = pool
        self._regions = []     # (host lo, host hi, device address of host lo, owner)
        self._twins = {}       # pool buffer index -> DeviceBuffer
        self.cupy = None

    def shadow(self, a) -> np.ndarray:
        """A host array of ``a``'s shape, strides and dtype standing for its device memory."""
        ptr, shape, strides, dtype = _layout(a)
        if type(a).__module__.split(".")[0] == "cupy":
            import cupy
            self.cupy = cupy
        empty = 0 in shape
        lo = 0 if empty else sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
        hi = 0 if empty else sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + dtype.itemsize
        raw = np.empty(max(hi - lo, 1), np.uint8)
        self._regions.append((raw.ctypes.data, raw.ctypes.data + raw.nbytes, ptr + lo, a))
        return np.ndarray(shape, dtype, buffer=raw, offset=-lo, strides=strides)

    def _region(self, address):
        for lo, hi, dev, owner in self._regions:
            if lo <= address < hi:
                return lo, dev, owner
        for k, raw in enumerate(self.pool.buffers):
            lo = raw.ctypes.data
            if raw.size and lo <= address < lo + raw.nbytes:
                return lo, self._twin(k, raw).ptr, self._twins[k]
        return None

    def _twin(self, k, raw):
        if k not in self._twins:
            from eagle.cuda._memory import DeviceBuffer
            buf = DeviceBuffer(raw.nbytes)
            buf.write(np.zeros(raw.nbytes, np.uint8))
            self._twins[k] = buf
        return self._twins[k]

    def forget_unused(self) -> None:
        """Let go of the device twins of pool buffers no temporary kept (``TemporaryPool.keep``:
        a temporary that came to live in another's memory left its buffer empty)."""
        self._twins = {k: buf for k, buf in self._twins.items() if self.pool.buffers[k].size}

    def view(self, a):
        """The device view of ``a``, a view of a shadow or of a pool buffer; None when ``a``
        is neither (a NumPy array the step did not get)."""
        address = a.__array_interface__["data"][0]
        found = self._region(address)
        if found is None:
            return None
        lo, dev, owner = found
        v = DeviceView(dev + (address - lo), a.shape, a.strides, a.dtype, owner)
        return self.cupy.asarray(v) if self.cupy is not None else v


#: what a step over CUDA arrays is told to do with what capture cannot record on the device
_ON_DEVICE = ("{what}: on CUDA arrays, capture records the CUDA backend's generated kernels, which "
              "run elementwise over one axis (whole contiguous arrays of more are read as one) and "
              "reduce a 1-d operand to a 0-d result; write it that way, or run the step "
              "as one node whose CuPy kernels the cuda backend captures on its stream: "
              "g.add_node(eagle.graph.opaque(lambda: step(*arrays), updates=...))")


def _flat(a, n):
    """``a`` over one axis of ``n`` elements: a 0-d operand broadcast, a whole contiguous
    array read in C order; None when its elements are not one run in that order."""
    if a.ndim == 0:
        return np.broadcast_to(a, (n,))
    if a.ndim == 1:
        return a
    try:
        return np.reshape(a, (-1,), copy=False)
    except ValueError:
        return None


def device_operands(memory, kind, uf, ins, outs, where, label):
    """``ins``, ``outs``, ``where`` (scalars, or {name: host view}) as the CUDA node takes
    them: device views, over one axis; CaptureError for what has no device form."""
    from eagle.stepcapture.refusals import refuse

    def arrays(items):
        return [next(iter(d.values())) for d in items if isinstance(d, dict)]

    def no(what):
        return refuse(_ON_DEVICE, what=what)

    every = arrays(ins + outs + ([where] if where is not None else []))
    if kind == "at":
        raise no(f"{label} (np.{uf.__name__}.at, a tally) runs on the cpu only")
    if kind == "reduce":
        x, o = arrays(ins)[0], arrays(outs)[0]
        if x.ndim != 1 or o.ndim != 0:
            raise no(f"{label} reduces {x.shape} into {o.shape}")
        shaped = {}
    else:
        out_shape = arrays(outs)[0].shape
        n = int(np.prod(out_shape, dtype=np.int64))
        shaped = {}
        if len(out_shape) != 1 and any(a.ndim for a in every):
            for a in every:
                f = _flat(a, n)
                if f is None or f.shape != (n,):
                    if memory.cupy is not None:   # CuPy's own ufunc, called while the graph is captured
                        shaped = {}
                        break
                    raise no(f"{label} runs over {out_shape} views that are not whole contiguous arrays")
                shaped[id(a)] = f
        elif len(out_shape) == 1:
            shaped = {id(a): np.broadcast_to(a, out_shape) for a in every if a.ndim == 0}

    moved = {}   # one device view per name: an operand that is also the output is one array

    def move(item):
        if not isinstance(item, dict):
            return item
        (name, a), = item.items()
        if name not in moved:
            moved[name] = memory.view(shaped.get(id(a), a))
            if moved[name] is None:
                raise TypeError(f"{label}: {name!r} is a NumPy array among the step's CUDA arrays; a "
                                "graph runs on one device")
        return {name: moved[name]}

    ins, outs, where = [move(d) for d in ins], [move(d) for d in outs], None if where is None else move(where)
    if kind == "ufunc" and memory.cupy is None and not _has_kernel(uf, ins, outs, where):
        raise no(f"{label} has no generated kernel for these dtypes")
    return ins, outs, where


def _has_kernel(uf, ins, outs, where):
    """Whether the cuda backend generates a kernel for this op (eagle.cuda.ufunc_node), rather
    than call CuPy's ufunc."""
    from eagle.cuda.ufunc_node import cuda_source
    from eagle.record.ufunc_operands import weak_dtype

    def dtype(v):
        return np.dtype(next(iter(v.values())).__cuda_array_interface__["typestr"]) if isinstance(v, dict) \
            else None

    if uf.nout != 1 or not all(len(next(iter(v.values())).__cuda_array_interface__["shape"]) <= 1
                               for v in ins + outs if isinstance(v, dict)):
        return False
    arrays = [dtype(v) for v in ins + outs]
    try:
        loop = uf.resolve_dtypes(tuple(d if d is not None else weak_dtype(v) for d, v in zip(arrays, ins + outs)),
                                 casting="same_kind")
    except TypeError:
        return True      # eagle.graph.ufunc says what NumPy refuses
    mask = True if where is None else ("array" if isinstance(where, dict) else where)
    return cuda_source(uf.__name__, loop, [d is None for d in arrays[:uf.nin]], arrays, mask) is not None


def refuse_opaque(memory, node, label):
    """Where it generates no kernel the CUDA backend calls CuPy's ufunc while the graph is
    captured: kept for CuPy arrays, refused for others (CuPy's ufuncs take CuPy arrays)."""
    from eagle.record.node import OpaqueNode
    from eagle.stepcapture.refusals import refuse

    if isinstance(node, OpaqueNode) and memory.cupy is None:
        raise refuse(_ON_DEVICE, what=f"{label} has no generated kernel for these dtypes")
