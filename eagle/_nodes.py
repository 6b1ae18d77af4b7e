"""What a node is: the work (a callable or a kernel) plus the arrays it reads and writes.

The names in ``reads`` and ``writes`` are the node's own names for its arguments;
they label the edges in the picture. Dependencies between nodes come from the
memory the arrays cover (see ``eagle._memory``), never from the names.
"""
from __future__ import annotations

from typing import Any, Mapping

from eagle._memory import array_family, overlap, samples_may_overlap, validate_access_dict


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

    def __init__(self, reads: Mapping[str, Any] | None, writes: Mapping[str, Any] | None,
                 per_sample=True):
        self.reads = validate_access_dict(reads, "reads")
        self.writes = validate_access_dict(writes, "writes")
        both = set(self.reads) & set(self.writes)
        if both:
            name = sorted(both)[0]
            raise ValueError(
                f"the name {name!r} is bound in both reads and writes; a node that reads and "
                f"writes one array declares it once, under writes")
        self.family = array_family(list(self.reads.values()) + list(self.writes.values()))
        #: names of the declared arrays whose axis 0 is not the sample axis (tables,
        #: parameters): they do not bound the graph's capacity
        self.not_per_sample = _not_per_sample(per_sample, list(self.reads) + list(self.writes))

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
        skip = self.not_per_sample
        return [a for name, a, _ in self.arrays() if name not in skip]

    def named_sample_arrays(self):
        """(name, array) for every array of ``sample_arrays()``, in declaration order."""
        if type(self).sample_arrays is Node.sample_arrays:
            skip = self.not_per_sample
            return [(name, a) for name, a, _ in self.arrays() if name not in skip]
        mine = {id(a) for a in self.sample_arrays()}
        return [(name, a) for name, a, _ in self.arrays() if id(a) in mine]

    #: whether the node sets the next replay's logical size (compaction)
    resizes = False
    #: whether the node moves samples between positions (compaction, reorder)
    permutes_samples = False


def _not_per_sample(per_sample, names):
    """The declared names ``per_sample=`` leaves out: True (all are per-sample), False
    (none is), or a collection of the names that are."""
    if per_sample is True:
        return frozenset()
    if per_sample is False:
        return frozenset(names)
    if isinstance(per_sample, (str, bytes)) or not hasattr(per_sample, "__iter__"):
        raise TypeError("per_sample= is True, False, or a collection of the declared names whose "
                        f"axis 0 is the sample axis; got {per_sample!r}")
    chosen = set(per_sample)
    unknown = sorted(str(n) for n in chosen - set(names))
    if unknown:
        raise ValueError(f"per_sample= names {unknown[0]!r}, which the node does not declare "
                         f"(it declares {sorted(names)})")
    return frozenset(n for n in names if n not in chosen)


def refuse_object_arrays(node, what):
    """A native kernel writing Python object pointers as raw bytes would corrupt the heap."""
    for name, a, _ in node.arrays():
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.hasobject:
            raise TypeError(f"{what}: {name!r} has dtype {dtype}, which holds Python objects; a native "
                            "kernel cannot take it (use a numeric or plain structured dtype, or an "
                            "opaque node)")


class OpaqueNode(Node):
    """A Python callable with no arguments, run whole on every replay, under the GIL."""

    kind = "opaque"
    box = ("<", ">")

    def __init__(self, fn, reads=None, writes=None, per_sample=True):
        if not callable(fn):
            raise TypeError(f"opaque() needs a callable with no arguments, got {type(fn).__name__}")
        super().__init__(reads, writes, per_sample)
        self.fn = fn

    def default_name(self) -> str:
        name = getattr(self.fn, "__name__", None)
        if not name or name == "<lambda>":
            return "opaque"
        return name

    def __repr__(self):
        return f"opaque({getattr(self.fn, '__qualname__', self.fn)!r}, reads={list(self.reads)}, writes={list(self.writes)})"


def opaque(fn, reads: Mapping[str, Any] | None = None, writes: Mapping[str, Any] | None = None,
           *, per_sample=True) -> OpaqueNode:
    """A node that calls ``fn()`` on every replay.

    ``reads`` and ``writes`` name the arrays ``fn`` reads and writes, e.g.
    ``opaque(step, reads={"x": x}, writes={"y": y})``; eagle orders nodes by the
    memory of these arrays (their bytes, whoever owns them), so declare every
    array the function touches.
    On the CPU the function runs on every replay, under the GIL. On the GPU it
    runs once, while the graph is captured; replays repeat the kernels it launched.
    ``per_sample`` is as for ``native``; an opaque node's arrays bound the capacity
    only in a graph without sized nodes.
    """
    return OpaqueNode(fn, reads, writes, per_sample=per_sample)


class NativeNode(Node):
    """A nogil C kernel run over samples [start, stop) of the graph's logical size."""

    kind = "native"
    box = ("[", "]")
    sized = True

    def __init__(self, kernel, reads=None, writes=None, user_data=None, split=True, per_sample=True,
                 dtypes=None, ndim=None):
        from eagle.native import Kernel

        if isinstance(kernel, Kernel) and user_data is None and dtypes is None and ndim is None:
            k = kernel
        else:
            k = Kernel(kernel, user_data=user_data, dtypes=dtypes, ndim=ndim)
        super().__init__(reads, writes, per_sample)
        if self.family == "cuda":
            raise TypeError("native() kernels run on the CPU and take NumPy arrays; "
                            "for CuPy arrays use a CUDA kernel node")
        arrays = [a for _, a, _ in self.arrays()]
        if k.n_reads is not None and len(self.reads) != k.n_reads:
            raise TypeError(f"kernel {k.name!r} reads {k.n_reads} array(s), the node declares {len(self.reads)}")
        if k.n_writes is not None and len(self.writes) != k.n_writes:
            raise TypeError(f"kernel {k.name!r} writes {k.n_writes} array(s), the node declares {len(self.writes)}")
        refuse_object_arrays(self, f"kernel {k.name!r}")
        if k.dtype is not None:
            for name, a, _ in self.arrays():
                if a.dtype != k.dtype or a.ndim != 1:
                    raise TypeError(f"kernel {k.name!r} takes 1-d {k.dtype} arrays; {name!r} is "
                                    f"{a.ndim}-d {a.dtype}")
        k.check_arrays([(name, a) for name, a, _ in self.arrays()])
        for name, a, is_write in self.arrays():
            if is_write and not a.flags.writeable:
                raise ValueError(f"{name!r} is written by kernel {k.name!r} but is read-only")
        self.kernel = k
        self.split = bool(split)
        #: why eagle runs a node whole that was asked to be split (None if it was not refused)
        self.split_refused_reason = None
        if self.split and not k.phases:
            self.split_refused_reason = self_overlap(self)
            if self.split_refused_reason is not None:
                self.split = False
        self.arrays_in_order = arrays

    def default_name(self) -> str:
        return self.kernel.name

    def __repr__(self):
        return f"native({self.kernel.name!r}, reads={list(self.reads)}, writes={list(self.writes)})"


def _rows_coincide(a, b) -> bool:
    """Whether sample i of ``a`` and sample i of ``b`` are the same bytes for every i
    (an in-place update: splitting the range cannot make two threads meet)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.itemsize == b.itemsize)


def self_overlap(node):
    """Why a split of ``node`` could race, or None: one of its writes shares memory with
    another of its arrays at other samples (reads ``a[:-1]``, writes ``a[1:]``).
    The overlap rule is the one staging uses. A written array whose own samples share
    bytes (a zero stride, overlapping ``as_strided`` rows) races the same way."""
    arrays = list(node.arrays())
    for name, a, is_write in arrays:
        if is_write and samples_may_overlap(a):
            return (f"it writes {name!r}, whose samples share memory (strides {a.strides}); threads "
                    "splitting its range would race, so it runs whole")
    for i, (name_i, a_i, w_i) in enumerate(arrays):
        for name_j, a_j, w_j in arrays[i + 1:]:
            if (w_i or w_j) and overlap(a_i, a_j) and not _rows_coincide(a_i, a_j):
                (name_w, name_o, o_write) = (name_j, name_i, w_i) if w_j else (name_i, name_j, w_j)
                how = "writes" if o_write else "reads"
                return (f"it writes {name_w!r} and {how} {name_o!r}, which overlap at other samples; "
                        "threads splitting its range would race, so it runs whole")
    return None


def native(kernel, reads=None, writes=None, *, user_data=None, split=True, per_sample=True,
           dtypes=None, ndim=None) -> NativeNode:
    """A node that runs a nogil C kernel over samples [start, stop).

    ``kernel`` is an ``eagle.native.Kernel`` or anything it accepts: a Cython
    function wrapped with ``eagle.native.wrap_kernel``, a PyCapsule named
    ``eagle.native.SIGNATURE``, a ctypes or cffi function pointer, a numba
    ``cfunc``. The kernel gets the data pointers of ``reads`` then ``writes``
    (declaration order) and the byte stride of each array's axis 0. With
    ``split=True`` (the default) the CPU executor divides [0, logical_size)
    among its threads; ``split=False`` calls it once per replay on the whole range.
    A node whose write overlaps another of its arrays at other samples (reads
    ``a[:-1]``, writes ``a[1:]``), or that writes an array whose own samples share
    memory (a zero stride, overlapping ``as_strided`` rows), is never split: it runs whole, and
    ``node.split_refused_reason`` (and ``g.plan()``) says why.

    Arrays whose dtype holds Python objects are refused. ``dtypes`` and ``ndim``
    declare what an untyped kernel (ctypes, cffi, numba, capsule) takes, checked
    here as eagle's own typed kernels are: one dtype (or ndim) for every array,
    or a sequence with one per declared array, reads then writes (``None``:
    any); see ``eagle.native.Kernel``.

    ``per_sample`` says which arrays have the sample on axis 0 and so bound the
    graph's capacity: ``True`` (all, the default), ``False`` (none), or the
    names of those that do; a lookup table or a parameter array is left out,
    e.g. ``native(k, reads={"x": x, "table": t}, writes={"y": y}, per_sample={"x", "y"})``.
    """
    return NativeNode(kernel, reads, writes, user_data=user_data, split=split, per_sample=per_sample,
                      dtypes=dtypes, ndim=ndim)
