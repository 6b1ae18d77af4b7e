"""The node constructors a user calls; ``eagle.graph`` is their public home.

Most make one node kind whatever the arrays (``opaque``), or take one device's
arrays only (``native``: NumPy; ``cuda_kernel``: CUDA). ``ufunc``, ``compact``
and ``reorder`` pick the node kind of the device their arrays are on: the cpu
kind (``eagle.cpu``) for NumPy arrays, the cuda kind (``eagle.cuda``) for CuPy
and other ``__cuda_array_interface__`` arrays. Collectives (``allreduce``...)
are ``eagle.mpi``'s; control flow (``while_loop``, ``if_else``, ``subgraph``) is
``eagle.record.control``'s. The cuda modules are imported only when CUDA arrays are
given.
"""
from __future__ import annotations

import numpy as np

from eagle.cpu.finished import PartitionNode, compact_cpu, reorder_cpu
from eagle.cpu.native_node import NativeNode, native
from eagle.cpu.ufunc_node import UfuncNode, cpu_ufunc
from eagle.cuda.kernel_nodes import SIZE, SIZE_PTR, CudaKernelNode, cuda_kernel
from eagle._public import renamed_keyword
from eagle.mpi._nodes import allgather, allreduce, bcast, sendrecv  # collective nodes (mpi4py on first use)
from eagle.record.arrays import named_array
from eagle.record.control import ControlNode, if_else, subgraph, while_loop
from eagle.record.memory import array_kind
from eagle.record.node import Node, OpaqueNode, opaque
from eagle.record.random import BITS, NORMAL, UNIFORM, random_spec
from eagle.record.ufunc_operands import parse_operands, parse_where, real_ufunc, updated_names

__all__ = ["Node", "OpaqueNode", "NativeNode", "UfuncNode", "PartitionNode", "CudaKernelNode",
           "ControlNode", "opaque", "native", "ufunc", "cuda_kernel", "SIZE", "SIZE_PTR", "compact", "reorder",
           "random_bits", "uniform", "normal", "allreduce", "allgather", "bcast", "sendrecv",
           "while_loop", "if_else", "subgraph"]


def _on_cuda(a) -> bool:
    return array_kind(a) == "cuda"


def ufunc(uf, *operands, out=None, where=None):
    """A node that runs ufunc ``uf``'s own compiled inner loop on ``operands`` into ``out``.

    ``ufunc(np.multiply, {"x": x}, 2.0, out={"a": left})`` computes
    ``np.multiply(x, 2.0, out=left)`` over samples [0, logical_size) on every
    replay, without the GIL, split across the team like a native kernel; it
    is drawn ``(multiply)``. ``uf`` is any real ufunc: NumPy's, scipy.special's,
    a numba ``@vectorize`` or ``@guvectorize`` function.

    Each operand is an array, a scalar (copied at record time, broadcast), or
    a one-entry dict ``{"name": array}`` naming the array for the picture;
    ``out`` is an array or such a dict, a tuple of them for several outputs.
    Axis 0 is the sample axis: array operands share one shape ``(n, *row)``
    with C-contiguous rows (a gufunc takes ``(n, *core)``); a 0-d array
    broadcasts and is read on every replay.

    ``where=`` is NumPy's: a bool array (or ``{"name": mask}``, a read of the
    node) of the operands' shape, or broadcastable to it with its sample axis
    (``(n,)`` for 1-d operands, ``(n, 1)`` for rows), or a 0-d bool array (read on
    every replay), or a scalar; where it is False the outputs keep their values.

    The loop is the one NumPy picks for these dtypes under its default
    ``casting="same_kind"``; operands of other dtypes are cast as NumPy casts
    them (inputs to the loop's dtypes, the results into ``out``), per call,
    through bounded buffers (NumPy's iterator), without the GIL. Refused with
    ``TypeError``: what NumPy refuses (no loop, a cast 'same_kind' forbids, a
    non-bool mask), object loops and ``np.frompyfunc`` (they need the GIL), a
    cast for a generalized ufunc, and a ufunc numba built with ``target="parallel"`` (its
    loop runs numba's own threads; use numba's default target). Refused with
    ``ValueError``: mismatched shapes, core shapes NumPy refuses for a gufunc (NumPy
    checks them when the node is made), non-contiguous rows, an output partly overlapping another operand (or, for a gufunc,
    being one of its inputs), an output whose elements share memory.
    Floating-point errors are not reported (as under ``np.errstate(all="ignore")``).
    With CuPy arrays it returns a GPU node (see ``eagle.cuda.ufunc_node``).
    """
    uf, dufunc = real_ufunc(uf)
    ins, outs = parse_operands(uf, operands, out)
    mask = parse_where(uf, where)
    arrays = [op.array for op in ins + outs if op.is_array] + ([] if isinstance(mask, bool) else [mask.array])
    kinds = {array_kind(a) for a in arrays}
    if len(kinds) > 1:
        raise TypeError("a node mixes NumPy arrays and CUDA arrays; eagle runs a graph on one "
                        "device: use NumPy arrays for the cpu backend or CuPy arrays for cuda")
    if kinds == {"cuda"}:
        from eagle.cuda.ufunc_node import cuda_ufunc
        node = cuda_ufunc(uf, ins, outs, where=mask)
    else:
        node = cpu_ufunc(uf, dufunc, ins, outs, where=mask)
    # an output that is also an input is declared once, under writes: the node reads it
    # too, so the edge into it carries the array (the operands carry their declared names now)
    node.read_too(updated_names(ins, outs, mask))
    return node


def compact(alive, state, *, ids=None, count=None, every=1, min_dead_fraction=0.25) -> Node:
    """A node that moves the live samples to the front and shrinks the logical size to them.

    ``alive`` is a 1-d bool (or uint8) array, nonzero for a live sample;
    ``state`` a dict of per-sample arrays (axis 0 is the sample) permuted with
    it. ``ids`` (int64, default ``arange``) maps compacted position to original
    sample id and is permuted too; ``count`` (int64, one element) receives the
    live count. The policy: act on every ``every``-th replay, and only once at
    least ``min_dead_fraction`` of the current samples have finished (always
    when none is left). A replay that does not act costs one counting pass.
    The default, a quarter finished, paid best in ``python -m eagle.bench.finished``
    (compacting on every replay moves the state more often than it saves work);
    ``min_dead_fraction=0`` compacts whenever any sample finished.
    Every array it moves needs bytes of its own: arrays sharing memory with each
    other (or samples of one array sharing memory) are refused with ``ValueError``.
    """
    alive = named_array(alive, "compact(): alive", "alive", write=True)
    ids, count = _ids(ids, "compact()"), _count(count)
    if _on_cuda(alive[1]):
        from eagle.cuda.finished import compact_cuda
        return compact_cuda(alive, state, ids=ids, count=count, every=every,
                            min_dead_fraction=min_dead_fraction)
    return compact_cpu(alive, state, ids=ids, count=count, every=every, min_dead_fraction=min_dead_fraction)


def _ids(ids, what):
    return None if ids is None else named_array(ids, f"{what}: ids", "ids", write=True)


def _count(count):
    return None if count is None else named_array(count, "compact(): count", "count", write=True)


def _n_keys(n_keys):
    if isinstance(n_keys, bool) or not isinstance(n_keys, (int, np.integer)) or n_keys < 1:
        raise ValueError(f"reorder(): n_keys must be an integer >= 1, got {n_keys!r}")
    return int(n_keys)


def reorder(by=None, state=None, *, n_keys, ids=None, every=1, **old) -> Node:
    """A node that sorts samples [0, logical size) stably by ``key`` (int32/int64 in [0, n_keys)).

    ``key`` and every ``state`` array (and the ``ids`` map) are permuted. A key
    outside [0, n_keys) stops the reorder on that replay and ``launch`` raises.
    """
    by = renamed_keyword(old, "key", "by", by, "reorder()")
    if by is None or state is None:
        raise TypeError(f"reorder() needs {'by, the sort key' if by is None else 'state'}: "
                        "reorder(by, state, n_keys=...)")
    by = named_array(by, "reorder(): the sort key by", "key", write=True)
    ids, n_keys = _ids(ids, "reorder()"), _n_keys(n_keys)
    if _on_cuda(by[1]):
        from eagle.cuda.finished import reorder_cuda
        return reorder_cuda(by, state, n_keys=n_keys, ids=ids, every=every)
    return reorder_cpu(by, state, n_keys=n_keys, ids=ids, every=every)


def _random_node(spec) -> Node:
    if _on_cuda(spec.out):
        from eagle.cuda.random_node import CudaRandomNode
        return CudaRandomNode(spec)
    from eagle.cpu.random_node import RandomNode
    return RandomNode(spec)


def random_bits(out, *, key, ids=None) -> Node:
    """A node that writes Philox4x32-10's four 32-bit words of every sample to ``out``.

    ``out`` is a uint32 array of shape ``(n, 4)`` (or a one-entry dict naming it).
    Sample ``i`` at replay ``r`` gets ``philox4x32_10(counter, key)`` with the counter
    ``(id & 0xffffffff, id >> 32, r & 0xffffffff, r >> 32)`` and the key words
    ``(key & 0xffffffff, key >> 32)``; ``id`` is ``i``, or ``ids[i]`` when ``ids``
    (``{"id": ids}``, an int64 per-sample array: the ids compaction carries) is given,
    and ``r`` is ``g.replays`` when the replay starts. ``key`` is an integer in
    [0, 2**64). A sized node: it draws samples [0, logical size), split across the
    team; its numbers do not depend on threads, tiles, launch grouping, logical size
    or backend (the same bits on CPU and GPU). Drawn ``~random_bits~``.
    """
    return _random_node(random_spec(BITS, out, key, ids))


def uniform(out, *, key, low=0.0, high=1.0, ids=None) -> Node:
    """A node that draws uniform numbers in ``[low, high)`` into a float32 or float64 ``out``.

    From the words of ``random_bits`` (same counter, key and ids): float64 uses
    ``u = ((w1 << 32 | w0) >> 11) * 2**-53``, float32 ``u = (w0 >> 8) * 2**-24``;
    the value is ``low + (high - low) * u`` in the output's type (a value that rounds
    up to ``high`` becomes the largest one below it). ``out`` is 1-d, one number per
    sample. ``low < high``, both finite in the output's type, and ``high - low`` finite in
    it, or ``ValueError``.
    """
    return _random_node(random_spec(UNIFORM, out, key, ids, low, high))


def normal(out, *, key, loc=0.0, scale=1.0, ids=None) -> Node:
    """A node that draws normal numbers (mean ``loc``, standard deviation ``scale``).

    Box-Muller on the words of ``random_bits`` (same counter, key and ids):
    ``z = sqrt(-2 log u1) cos(2 pi u2)`` with ``u1 = ((w1 << 32 | w0) >> 11) + 1) * 2**-53``
    in (0, 1] and ``u2 = ((w3 << 32 | w2) >> 11) * 2**-53``, computed in double with
    eagle's own polynomial log and cos (csrc/include/eagle/philox.h: within ~2 ulp, the
    same on CPU and GPU), then ``loc + scale * z`` in double rounded once to ``out``'s
    type (float32 or float64, 1-d). One normal per sample per replay. ``scale >= 0``;
    ``loc`` and ``scale`` finite in the output's type, and ``loc ± scale * 8.5717`` (the
    largest ``|z|`` the transform draws, ``eagle.record.random.NORMAL_Z_MAX``, at
    ``u1 = 2**-53``) too, or ``ValueError``: no sample is ever inf."""
    return _random_node(random_spec(NORMAL, out, key, ids, loc, scale))
