"""Native nodes: a nogil C kernel over samples [start, stop), split across the cpu team."""
from __future__ import annotations

from eagle._public import keywords_after
from eagle.cpu.kernel_arrays import check_kernel_arrays
from eagle.cpu.lowering import cpu_lowering
from eagle.cpu.spec import NativeSpec
from eagle.record.memory import data_pointer, overlap, samples_may_overlap
from eagle.record.node import Node, RunsAs


class NativeNode(Node):
    """A nogil C kernel run over samples [start, stop) of the graph's logical size."""

    kind = "native"
    runs_as = RunsAs.NATIVE
    box = ("[", "]")
    sized = True

    def __init__(self, kernel, reads=None, writes=None, user_data=None, split=True, per_sample=True,
                 dtypes=None, ndim=None, updates=None, sample_local=None):
        from eagle.native import Kernel

        if isinstance(kernel, Kernel) and user_data is None and dtypes is None and ndim is None:
            k = kernel
        else:
            k = Kernel(kernel, user_data=user_data, dtypes=dtypes, ndim=ndim)
        super().__init__(reads, writes, per_sample, updates)
        if self.family == "cuda":
            raise TypeError("native() kernels run on the CPU and take NumPy arrays; "
                            "for CuPy arrays use a CUDA kernel node")
        arrays = [a for _, a, _ in self.arrays()]
        check_kernel_arrays(k, [(name, a) for name, a, _ in self.arrays()], len(self.reads))
        self.kernel = k
        if sample_local is not None and not isinstance(sample_local, bool):
            raise TypeError(f"sample_local= is True, False or None (the kernel's own declaration), "
                            f"got {sample_local!r}")
        self.sample_local = k.sample_local if sample_local is None else sample_local
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


@cpu_lowering(NativeNode)
def _lower_native(node, index, ctx):
    return NativeSpec(index, node.kernel, tuple(node.arrays_in_order), node.split)


def _rows_coincide(a, b) -> bool:
    """Whether sample i of ``a`` and sample i of ``b`` are the same bytes for every i
    (an in-place update: splitting the range cannot make two threads meet)."""
    return (data_pointer(a) == data_pointer(b)
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


@keywords_after(1, 'native(kernel, reads={"x": x}, writes={"y": y})')
def native(kernel, *, reads=None, writes=None, updates=None, user_data=None, split=True, per_sample=True,
           dtypes=None, ndim=None, sample_local=None) -> NativeNode:
    """A node that runs a nogil C kernel over samples [start, stop).

    The kernel gets the data pointers of ``reads`` then ``writes`` (declaration order;
    ``updates`` after the other writes) and the byte stride of each array's axis 0. A
    name bound to the same array in both ``reads`` and ``writes`` is an update too, and
    the kernel gets that pointer twice, once in each place. A node whose write overlaps
    another of its arrays at other samples (reads ``a[:-1]``, writes ``a[1:]``), or that
    writes an array whose own samples share memory (a zero stride, overlapping
    ``as_strided`` rows), is never split: it runs whole, and
    ``node.split_refused_reason`` (and ``g.plan()``) says why.

    Parameters
    ----------
    kernel : eagle.native.Kernel or what it accepts
        A Cython function wrapped with ``eagle.native.wrap_kernel``, a PyCapsule named
        ``eagle.native.SIGNATURE``, a ctypes or cffi function pointer, a numba ``cfunc``.
    reads, writes, updates : dict of name -> array, or an array, optional
        As for ``opaque``.
    user_data : optional
        What the kernel's last argument points to (see ``eagle.native.Kernel``).
    split : bool, default True
        ``True``: the CPU executor divides [0, logical_size) among its threads;
        ``False``: one call per replay on the whole range.
    per_sample : bool or collection of names, default True
        Which arrays have the sample on axis 0 and so bound the graph's capacity:
        ``True`` (all), ``False`` (none), or the names of those that do; a lookup table or
        a parameter array is left out, e.g. ``per_sample={"x", "y"}``.
    dtypes, ndim : optional
        What an untyped kernel (ctypes, cffi, numba, capsule) takes, checked here as
        eagle's own typed kernels are: one dtype (or ndim) for every array, or a sequence
        with one per declared array, reads then writes (``None``: any).
    sample_local : bool, optional
        ``True`` declares that the kernel touches sample ``i`` of its per-sample arrays
        only when ``i`` is in its ``[start, stop)`` and writes no other array (``None``:
        what the ``Kernel`` declares; eagle's built-in kernels do). The cpu backend may
        then run the node in a fused run of sample tiles with its neighbours
        (``CpuOptions(fuse=...)``); a kernel that reads a neighbouring sample, or sums
        into a total, must not declare it.

    Returns
    -------
    Node
        The native node (cpu backend only).

    Raises
    ------
    TypeError
        A kernel eagle cannot call, arrays whose dtype holds Python objects, dtypes or
        ndims the kernel does not take, arrays positional (they are keywords).
    ValueError
        As for ``opaque``; a ``per_sample`` name the node does not declare.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> import eagle.kernels as ek
    >>> from eagle.graph import native
    >>> x, y = np.ones(4), np.zeros(4)
    >>> g = eagle.Graph()
    >>> g.add_node(native(ek.axpy(2.0), reads={"x": x}, writes={"y": y}), name="axpy")
    >>> g.build().launch(1)
    >>> y
    array([2., 2., 2., 2.])
    """
    return NativeNode(kernel, reads, writes, user_data=user_data, split=split, per_sample=per_sample,
                      dtypes=dtypes, ndim=ndim, updates=updates, sample_local=sample_local)
