"""What a node is: the work (a callable or a kernel) plus the arrays it reads and writes.

The names in ``reads`` and ``writes`` are the node's own names for its arguments;
they label the edges in the picture. Dependencies between nodes come from the
memory the arrays cover (see ``eagle._memory``), never from the names.
"""
from __future__ import annotations

from typing import Any, Mapping

from eagle._memory import array_family, validate_access_dict


class Node:
    """Base of every node kind. Subclasses set ``kind`` and ``box`` (the picture's marks).

    ``reads`` and ``writes`` are ordered ``{name: array}`` dicts; a name may not
    appear in both (bind it once, under ``writes``, if the node reads and writes it).
    """

    kind = "node"
    #: left and right marks of the node's box in the picture: ``<name>``, ``[name]``...
    box = ("<", ">")
    #: whether the node processes samples [start, stop) of the graph's logical size
    sized = False

    def __init__(self, reads: Mapping[str, Any] | None, writes: Mapping[str, Any] | None):
        self.reads = validate_access_dict(reads, "reads")
        self.writes = validate_access_dict(writes, "writes")
        both = set(self.reads) & set(self.writes)
        if both:
            name = sorted(both)[0]
            raise ValueError(
                f"the name {name!r} is bound in both reads and writes; a node that reads and "
                f"writes one array declares it once, under writes")
        self.family = array_family(list(self.reads.values()) + list(self.writes.values()))

    def arrays(self):
        """(name, array, is_write) for every declared array, reads first, in declaration order."""
        for k, a in self.reads.items():
            yield k, a, False
        for k, a in self.writes.items():
            yield k, a, True

    def default_name(self) -> str:
        return self.kind

    def sample_arrays(self):
        """The arrays whose axis 0 is the sample axis (they bound the capacity)."""
        return [a for _, a, _ in self.arrays()]

    #: whether the node sets the next replay's logical size (compaction)
    resizes = False
    #: whether the node moves samples between positions (compaction, reorder)
    permutes_samples = False


class OpaqueNode(Node):
    """A Python callable with no arguments, run whole on every replay, under the GIL."""

    kind = "opaque"
    box = ("<", ">")

    def __init__(self, fn, reads=None, writes=None):
        if not callable(fn):
            raise TypeError(f"opaque() needs a callable with no arguments, got {type(fn).__name__}")
        super().__init__(reads, writes)
        self.fn = fn

    def default_name(self) -> str:
        name = getattr(self.fn, "__name__", None)
        if not name or name == "<lambda>":
            return "opaque"
        return name

    def __repr__(self):
        return f"opaque({getattr(self.fn, '__qualname__', self.fn)!r}, reads={list(self.reads)}, writes={list(self.writes)})"


def opaque(fn, reads: Mapping[str, Any] | None = None, writes: Mapping[str, Any] | None = None) -> OpaqueNode:
    """A node that calls ``fn()`` on every replay.

    ``reads`` and ``writes`` name the arrays ``fn`` reads and writes, e.g.
    ``opaque(step, reads={"x": x}, writes={"y": y})``; eagle orders nodes by the
    memory of these arrays, so declare every array the function touches.
    On the CPU the function runs on every replay, under the GIL. On the GPU it
    runs once, while the graph is captured; replays repeat the kernels it launched.
    """
    return OpaqueNode(fn, reads, writes)


class NativeNode(Node):
    """A nogil C kernel run over samples [start, stop) of the graph's logical size."""

    kind = "native"
    box = ("[", "]")
    sized = True

    def __init__(self, kernel, reads=None, writes=None, user_data=None, split=True):
        from eagle.native import Kernel

        k = kernel if isinstance(kernel, Kernel) and user_data is None else Kernel(kernel, user_data=user_data)
        super().__init__(reads, writes)
        if self.family == "cuda":
            raise TypeError("native() kernels run on the CPU and take NumPy arrays; "
                            "for CuPy arrays use a CUDA kernel node")
        arrays = [a for _, a, _ in self.arrays()]
        if k.n_reads is not None and len(self.reads) != k.n_reads:
            raise TypeError(f"kernel {k.name!r} reads {k.n_reads} array(s), the node declares {len(self.reads)}")
        if k.n_writes is not None and len(self.writes) != k.n_writes:
            raise TypeError(f"kernel {k.name!r} writes {k.n_writes} array(s), the node declares {len(self.writes)}")
        if k.dtype is not None:
            for name, a, _ in self.arrays():
                if a.dtype != k.dtype or a.ndim != 1:
                    raise TypeError(f"kernel {k.name!r} takes 1-d {k.dtype} arrays; {name!r} is "
                                    f"{a.ndim}-d {a.dtype}")
        for name, a, is_write in self.arrays():
            if is_write and not a.flags.writeable:
                raise ValueError(f"{name!r} is written by kernel {k.name!r} but is read-only")
        self.kernel = k
        self.split = bool(split)
        self.arrays_in_order = arrays

    def default_name(self) -> str:
        return self.kernel.name

    def __repr__(self):
        return f"native({self.kernel.name!r}, reads={list(self.reads)}, writes={list(self.writes)})"


def native(kernel, reads=None, writes=None, *, user_data=None, split=True) -> NativeNode:
    """A node that runs a nogil C kernel over samples [start, stop).

    ``kernel`` is an ``eagle.native.Kernel`` or anything it accepts: a Cython
    function wrapped with ``eagle.native.wrap_kernel``, a PyCapsule named
    ``eagle.native.SIGNATURE``, a ctypes or cffi function pointer, a numba
    ``cfunc``. The kernel gets the data pointers of ``reads`` then ``writes``
    (declaration order) and the byte stride of each array's axis 0. With
    ``split=True`` (the default) the CPU executor divides [0, logical_size)
    among its threads; ``split=False`` calls it once per replay on the whole range.
    """
    return NativeNode(kernel, reads, writes, user_data=user_data, split=split)
