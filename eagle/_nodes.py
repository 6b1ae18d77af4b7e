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

from eagle._public import keywords_after, renamed_keyword
from eagle.cpu.finished import PartitionNode, compact_cpu, reorder_cpu
from eagle.cpu.native_node import NativeNode, native
from eagle.cpu.reduce_node import ReduceNode, TallyNode, cpu_at, cpu_reduce
from eagle.cpu.ufunc_node import UfuncNode, cpu_ufunc
from eagle.cuda.kernel_nodes import SIZE, SIZE_PTR, CudaKernelNode, cuda_kernel
from eagle.mpi._nodes import allgather, allreduce, bcast, sendrecv  # collective nodes (mpi4py on first use)
from eagle.record import hooks
from eagle.record.arrays import named_array
from eagle.record.control import ControlNode, if_else, subgraph, while_loop
from eagle.record.memory import array_kind
from eagle.record.node import Node, OpaqueNode, opaque
from eagle.record.distributions import BINOMIAL, EXPONENTIAL, INTEGERS, POISSON, distribution_spec
from eagle.record.random import BITS, NORMAL, UNIFORM, random_spec
from eagle.record.ufunc_operands import parse_operands, parse_where, real_ufunc, updated_names

__all__ = ["Node", "OpaqueNode", "NativeNode", "UfuncNode", "ReduceNode", "TallyNode", "PartitionNode", "CudaKernelNode",
           "ControlNode", "opaque", "native", "ufunc", "cuda_kernel", "SIZE", "SIZE_PTR", "compact", "reorder",
           "random_bits", "uniform", "normal", "exponential", "poisson", "binomial", "integers", "allreduce", "allgather", "bcast", "sendrecv",
           "while_loop", "if_else", "subgraph"]


def _on_cuda(a) -> bool:
    return array_kind(a) == "cuda"


def ufunc(uf, *operands, out=None, where=None, initial=None, per_sample=True):
    """A node that runs ufunc ``uf``'s own compiled inner loop on ``operands`` into ``out``.

    ``ufunc(np.multiply, {"x": x}, 2.0, out={"a": left})`` computes
    ``np.multiply(x, 2.0, out=left)`` over samples [0, logical_size) on every
    replay, without the GIL, split across the team like a native kernel; it
    is drawn ``(multiply)``. Axis 0 is the sample axis: array operands share one
    shape ``(n, *row)``, rows of any strides on the CPU (an interior view
    ``a[1:-1, 1:-1, 1:-1]`` as it is; a gufunc takes ``(n, *core)``); a 0-d array
    broadcasts and is read on every replay.

    The loop is the one NumPy picks for these dtypes under its default
    ``casting="same_kind"``; operands of other dtypes are cast as NumPy casts
    them (inputs to the loop's dtypes, the results into ``out``), per call,
    through bounded buffers (NumPy's iterator), without the GIL.
    Floating-point errors are not reported (as under ``np.errstate(all="ignore")``).
    With CuPy arrays it returns a GPU node (see ``eagle.cuda.ufunc_node``).

    Reductions and tallies: ``ufunc(np.add.reduce, x, out=s)`` (and the ``.reduce`` of
    ``multiply``, ``maximum``, ``minimum``, ``logical_or``, ``logical_and`` and the bitwise
    ufuncs) is ``np.add.reduce(x[:n], axis=0, out=s)`` over the logical size's samples, into
    ``s`` of shape ``x.shape[1:]``, with ``where=`` and ``initial=``;
    ``ufunc(np.add.at, tally, index, weights)`` (also ``multiply``, ``maximum``,
    ``minimum``) is ``np.add.at(tally, index[:n], weights[:n])``. Both are split and fused
    like any sized node and deterministic: the same bits for every thread count, tile,
    fusion setting and launch grouping (``eagle.cpu.reduce_node``; on CUDA arrays,
    ``eagle.cuda.reduce_node``).

    Parameters
    ----------
    uf : numpy.ufunc, or its reduce or at method
        Any real ufunc: NumPy's, scipy.special's, a numba ``@vectorize`` or
        ``@guvectorize`` function; or ``np.add.reduce``, ``np.add.at`` (above).
    *operands : array, scalar or {name: array}
        One per input of ``uf``: an array (named ``in0``, ``in1``... in the picture), a
        scalar (copied at record time, broadcast), or a one-entry dict naming the array.
    out : array or {name: array}, or a tuple of them
        The output(s) (default names ``out0``...); required.
    where : bool array or {name: mask} or scalar, optional
        NumPy's mask (a read of the node): of the operands' shape, or broadcastable to it
        with its sample axis (``(n,)`` for 1-d operands, ``(n, 1)`` for rows), a 0-d bool
        array (read on every replay), or a scalar. Where it is False the outputs keep
        their values.
    initial : scalar, optional
        A reduction's ``initial=``, as NumPy's reduce takes it (required with ``where=``
        for ``maximum`` and ``minimum``, which have no identity).
    per_sample : bool, default True
        ``False``: the operands are not per-sample (a parameter vector): the node runs once
        per replay over their whole axis 0, whatever the logical size, and does not bound
        the capacity. Operands that are all 0-d are never per-sample.

    Returns
    -------
    Node
        The ufunc node, to record with ``Graph.add_node``.

    Raises
    ------
    TypeError
        What NumPy refuses (no loop, a cast 'same_kind' forbids, a non-bool mask), a ufunc
        method other than ``.reduce`` / ``.at`` or a ufunc whose reduction is not a node, object
        loops and ``np.frompyfunc`` (they need the GIL), a cast for a generalized ufunc,
        a ufunc numba built with ``target="parallel"`` (its loop runs numba's own threads),
        the wrong number of operands or outputs, an operand that is no array nor scalar.
    ValueError
        Mismatched shapes, core shapes NumPy refuses for a gufunc, non-contiguous rows, an
        output partly overlapping another operand (or, for a gufunc, being one of its
        inputs), an output whose elements share memory.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import ufunc
    >>> x, y = np.arange(4.0), np.zeros(4)
    >>> g = eagle.Graph()
    >>> g.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"y": y}), name="double")
    >>> total = np.zeros(())
    >>> g.add_node(ufunc(np.add.reduce, {"y": y}, out={"total": total}), name="sum")
    >>> g.build().launch(1)
    >>> y
    array([0., 2., 4., 6.])
    >>> total
    array(12.)
    """
    method = _ufunc_method(uf)
    if method is not None:
        if per_sample is not True:
            raise TypeError("per_sample= is for elementwise ufunc nodes; a reduction reads its operand "
                            "per sample and writes an output that is not per-sample")
        return _reduce_or_at(method, uf.__self__, operands, out, where, initial)
    if initial is not None:
        raise TypeError("initial= is for a reduction (ufunc(np.add.reduce, x, out=s, initial=...))")
    if method is None and per_sample is not True and not isinstance(per_sample, bool):
        raise TypeError(f"ufunc(): per_sample= is True or False, got {per_sample!r}")
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
        if per_sample is not True:
            raise TypeError("per_sample=False is a cpu ufunc node's (CUDA ufunc nodes run over the "
                            "logical size)")
        node = cuda_ufunc(uf, ins, outs, where=mask)
    else:
        node = cpu_ufunc(uf, dufunc, ins, outs, where=mask, per_sample=per_sample)
    # an output that is also an input is declared once, under writes: the node reads it
    # too, so the edge into it carries the array (the operands carry their declared names now)
    node.read_too(updated_names(ins, outs, mask))
    return node


def _ufunc_method(f):
    """'reduce' or 'at' for ``np.add.reduce`` / ``np.add.at`` (a ufunc's bound method); None
    for anything else; TypeError for a ufunc method a node does not run."""
    owner = getattr(f, "__self__", None)
    if not isinstance(owner, np.ufunc) or isinstance(f, np.ufunc):
        return None
    name = getattr(f, "__name__", "")
    if name not in ("reduce", "at"):
        raise TypeError(f"ufunc() takes a ufunc, its .reduce (over the sample axis) or its .at (a "
                        f"tally); {owner.__name__}.{name} is not a node: use an opaque node")
    return name


def _reduce_or_at(method, uf, operands, out, where, initial):
    """``ufunc(uf.reduce, x, out=s)`` and ``ufunc(uf.at, tally, index, weights)``."""
    from eagle.record.ufunc_operands import Operand, reduce_operands

    if method == "reduce":
        x, s, mask = reduce_operands(uf, operands, out, where)
        arrays = [op.array for op in (x, s, mask) if isinstance(op, Operand) and op.is_array]
        if any(_on_cuda(a) for a in arrays):
            if not all(_on_cuda(a) for a in arrays):
                raise TypeError("a node mixes NumPy arrays and CUDA arrays")
            from eagle.cuda.reduce_node import cuda_reduce
            return cuda_reduce(uf, x, s, mask, initial)
        return cpu_reduce(uf, x, s, mask, initial)
    if out is not None or where is not None or initial is not None:
        raise TypeError(f"ufunc({uf.__name__}.at, tally, index, weights) updates the tally in place, as "
                        "NumPy's; it takes no out=, where= or initial=")
    from eagle.record.ufunc_operands import at_operands

    tally, index, weights = at_operands(uf, operands)
    arrays = [op.array for op in (tally, index, weights) if op.is_array]
    if any(_on_cuda(a) for a in arrays):
        if not all(_on_cuda(a) for a in arrays):
            raise TypeError("a node mixes NumPy arrays and CUDA arrays")
        from eagle.cuda.reduce_node import cuda_at
        return cuda_at(uf, tally, index, weights)
    return cpu_at(uf, tally, index, weights)


@keywords_after(2, 'compact({"alive": alive}, {"x": x}, ids=ids)')
def compact(alive, state, *, ids=None, count=None, every=1, min_dead_fraction=0.25) -> Node:
    """A node that moves the live samples to the front and shrinks the logical size to them.

    The live samples keep their order, and so do the finished ones behind them. The
    policy: act on every ``every``-th replay, and only once at least
    ``min_dead_fraction`` of the current samples have finished (always when none is
    left). A replay that does not act costs one counting pass. The default, a quarter
    finished, paid best in ``python -m eagle.bench.finished`` (compacting on every
    replay moves the state more often than it saves work). A graph has at most one
    compaction node; ``Graph.launch_until_done`` replays until it leaves no sample.

    A replay where it does not act leaves the finished samples in ``[0, logical size)``:
    the next replays run over them. The step must leave them alone: test the flag
    (``where=alive`` on ufunc nodes, the tallies among them) and only ever clear it
    (``ufunc(np.equal, leak, absorbed, out=alive, where=alive)``, not an unmasked
    recomputation, which would bring a finished sample back and count it again). A
    step that cannot mask takes ``min_dead_fraction=0.0`` and records the compaction
    last: then no finished sample outlives the replay it finished in.

    Parameters
    ----------
    alive : array or {name: array}
        1-d bool (or uint8), nonzero for a live sample; permuted too (default name
        ``alive``).
    state : dict of name -> array
        The per-sample arrays (axis 0 is the sample) permuted with ``alive``.
    ids : int64 array or {name: array}, optional
        Maps compacted position to original sample id (default: a new ``arange``,
        named ``ids``); permuted too. ``node.scatter_back(values)`` uses it.
    count : int64 array of one element or {name: array}, optional
        Receives the live count (default: a new one, named ``count``).
    every : int, default 1
        Act on every ``every``-th replay.
    min_dead_fraction : float in [0, 1], default 0.25
        Act only once this fraction of the current samples finished; ``0`` compacts
        whenever any sample finished.

    Returns
    -------
    Node
        The compaction node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        ``alive`` not bool or uint8, ``state`` not a dict, ``ids``/``count`` of the wrong
        dtype or shape, an argument that is no array.
    ValueError
        Arrays of another length than ``alive``, rows that are not contiguous, read-only
        arrays, a bad policy, arrays sharing memory with each other (or samples of one
        array sharing memory): every array it moves needs bytes of its own.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import compact
    >>> alive = np.array([True, False, True, False])
    >>> x = np.array([10.0, 11.0, 12.0, 13.0])
    >>> g = eagle.Graph()
    >>> g.add_node(compact({"alive": alive}, {"x": x}), name="compact")
    >>> g.build().launch(1)
    >>> x[:g.logical_size], g.logical_size
    (array([10., 12.]), 2)
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


@keywords_after(2, 'reorder({"cell": cell}, {"x": x}, n_keys=3)')
def reorder(by=None, state=None, *, n_keys, ids=None, every=1, **old) -> Node:
    """A node that sorts samples [0, logical size) stably by the integer sort key ``by``.

    ``by`` and every ``state`` array (and the ``ids`` map) are permuted, so that
    neighbouring samples do similar work (a material, a cell). A key outside
    [0, n_keys) stops the reorder on that replay and ``launch`` raises.

    Parameters
    ----------
    by : int32 or int64 array, or {name: array}
        The sort key, one per sample, in [0, n_keys) (default name ``key``).
    state : dict of name -> array
        The per-sample arrays permuted with it.
    n_keys : int
        The number of key values, >= 1.
    ids : int64 array or {name: array}, optional
        The id map, permuted too (default: a new ``arange``, named ``ids``).
    every : int, default 1
        Act on every ``every``-th replay.

    Returns
    -------
    Node
        The reorder node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        A sort key that is not int32/int64, ``state`` not a dict, an argument that is
        no array.
    ValueError
        ``n_keys`` below 1 or not an integer, and the shape and memory checks of
        ``compact``.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import reorder
    >>> cell = np.array([2, 0, 1, 0])
    >>> x = np.array([20.0, 0.0, 10.0, 1.0])
    >>> g = eagle.Graph()
    >>> g.add_node(reorder({"cell": cell}, {"x": x}, n_keys=3), name="sort")
    >>> g.build().launch(1)
    >>> x
    array([ 0.,  1., 10., 20.])

    ``reorder(key=...)`` still works, with a ``DeprecationWarning`` (``key=`` is the random
    nodes' key).
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


@keywords_after(1, "random_bits(out, key=1)")
def random_bits(out, *, key, ids=None) -> Node:
    """A node that writes Philox4x32-10's four 32-bit words of every sample to ``out``.

    Sample ``i`` at replay ``r`` gets ``philox4x32_10(counter, key)`` with the counter
    ``(id & 0xffffffff, id >> 32, r & 0xffffffff, r >> 32)`` and the key words
    ``(key & 0xffffffff, key >> 32)``; ``id`` is ``i``, or ``ids[i]`` when ``ids``
    is given, and ``r`` is ``g.replays`` when the replay starts. A sized node: it
    draws samples [0, logical size), split across the team; its numbers do not depend
    on threads, tiles, launch grouping, logical size or backend (the same bits on CPU
    and GPU). Drawn ``~random_bits~``.

    Parameters
    ----------
    out : array or {name: array}
        A uint32 array of shape ``(n, 4)``, rows contiguous (default name ``out``).
    key : int
        The Philox key, an integer in [0, 2**64).
    ids : int64 array or {name: array}, optional
        Per-sample ids (the ids compaction carries; default name ``id``): sample ``i``
        draws as id ``ids[i]`` instead of ``i``.

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        ``out`` or ``ids`` of the wrong dtype, a ``key`` that is not an integer, an
        argument that is no array.
    ValueError
        Rows of ``out`` that are not contiguous, ``ids`` not one per sample, ``key`` outside [0, 2**64).

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import random_bits
    >>> words = np.zeros((3, 4), dtype=np.uint32)
    >>> g = eagle.Graph()
    >>> g.add_node(random_bits({"words": words}, key=7), name="bits")
    >>> g.build().launch(1)
    >>> bool(words.any())
    True
    """
    return _random_node(random_spec(BITS, out, key, ids))


@keywords_after(1, "uniform(out, key=1, low=0.0, high=1.0)")
def uniform(out, *, key, low=0.0, high=1.0, ids=None) -> Node:
    """A node that draws uniform numbers in ``[low, high)`` into a float32 or float64 ``out``.

    From the words of ``random_bits`` (same counter, key and ids): float64 uses
    ``u = ((w1 << 32 | w0) >> 11) * 2**-53``, float32 ``u = (w0 >> 8) * 2**-24``;
    the value is ``low + (high - low) * u`` in the output's type (a value that rounds
    up to ``high`` becomes the largest one below it). One number per sample per replay,
    or two: a second output takes the block's other words, float64
    ``((w3 << 32 | w2) >> 11) * 2**-53``, float32 ``(w2 >> 8) * 2**-24`` (the first output
    is the one-output node's), so a step that needs two uniforms a sample (a collision's
    absorption test and its new direction) pays one Philox call for both.

    Parameters
    ----------
    out : array or {name: array}
        A 1-d float32 or float64 array, one number per sample (default name ``out``);
        or a dict of two named arrays of one shape and dtype, the first drawn from words
        0 and 1, the second from words 2 and 3 of the same block.
    key : int
        The Philox key, an integer in [0, 2**64).
    low, high : float, default 0.0, 1.0
        The interval; ``low < high``, both finite in the output's type, and
        ``high - low`` finite in it.
    ids : int64 array or {name: array}, optional
        Per-sample ids (the ids compaction carries; default name ``id``): sample ``i``
        draws as id ``ids[i]`` instead of ``i``.

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        ``out`` or ``ids`` of the wrong dtype, a ``key`` that is not an integer, an
        argument that is no array.
    ValueError
        ``low``/``high`` outside those rules, ``out`` not 1-d, ``key`` outside [0, 2**64).

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import uniform
    >>> u = np.zeros(1000)
    >>> g = eagle.Graph()
    >>> g.add_node(uniform(u, key=1, low=2.0, high=3.0), name="draw")
    >>> g.build().launch(1)
    >>> bool((u >= 2.0).all() and (u < 3.0).all())
    True

    Two numbers a sample from one Philox block:

    >>> absorb, mu = np.zeros(1000), np.zeros(1000)
    >>> g = eagle.Graph()
    >>> g.add_node(uniform({"absorb": absorb, "mu": mu}, key=1, low=-1.0, high=1.0), name="collide")
    >>> g.build().launch(1)
    >>> bool((mu >= -1.0).all() and (mu < 1.0).all() and (absorb != mu).all())
    True
    """
    return _random_node(random_spec(UNIFORM, out, key, ids, low, high))


@keywords_after(1, "normal(out, key=1, loc=0.0, scale=1.0)")
def normal(out, *, key, loc=0.0, scale=1.0, ids=None) -> Node:
    """A node that draws normal numbers (mean ``loc``, standard deviation ``scale``).

    Box-Muller on the words of ``random_bits`` (same counter, key and ids):
    ``z = sqrt(-2 log u1) cos(2 pi u2)`` with ``u1 = ((w1 << 32 | w0) >> 11) + 1) * 2**-53``
    in (0, 1] and ``u2 = ((w3 << 32 | w2) >> 11) * 2**-53``, computed in double with
    eagle's own polynomial log and cos (csrc/include/eagle/philox.h: within ~2 ulp, the
    same on CPU and GPU), then ``loc + scale * z`` in double rounded once to ``out``'s
    type. One normal per sample per replay; no sample is ever inf.

    Parameters
    ----------
    out : array or {name: array}
        A 1-d float32 or float64 array, one number per sample (default name ``out``).
    key : int
        The Philox key, an integer in [0, 2**64).
    loc, scale : float, default 0.0, 1.0
        ``scale >= 0``; ``loc`` and ``scale`` finite in the output's type, and
        ``loc ± scale * 8.5717`` (the largest ``|z|`` the transform draws,
        ``eagle.record.random.NORMAL_Z_MAX``, at ``u1 = 2**-53``) too.
    ids : int64 array or {name: array}, optional
        Per-sample ids (the ids compaction carries; default name ``id``): sample ``i``
        draws as id ``ids[i]`` instead of ``i``.

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        ``out`` or ``ids`` of the wrong dtype, a ``key`` that is not an integer, an
        argument that is no array.
    ValueError
        ``loc``/``scale`` outside those rules, ``out`` not 1-d, ``key`` outside [0, 2**64).

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import normal
    >>> z = np.zeros(100_000)
    >>> g = eagle.Graph()
    >>> g.add_node(normal({"z": z}, key=2026), name="draw")
    >>> g.build().launch(1)
    >>> bool(abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02)
    True
    """
    return _random_node(random_spec(NORMAL, out, key, ids, loc, scale))


def _distribution_node(spec) -> Node:
    if _on_cuda(spec.out):
        from eagle.cuda.random_node import CudaDistributionNode
        return CudaDistributionNode(spec)
    from eagle.cpu.random_node import DistributionNode
    return DistributionNode(spec)


_COUNTERS = """A sample's numbers come from Philox4x32-10 blocks: block ``(c, j)`` at replay ``r``
    is the counter ``(c & 0xffffffff, c >> 32, r & 0xffffffff, (r >> 32) ^ (j << 16))`` under
    ``key``; sample ``id``'s own blocks are ``(id, 0), (id, 1), ...`` (``(id, 0)`` is what
    ``random_bits`` draws), and the samplers that need few bits take their part of a block
    consecutive samples share, so they depend only on the key, the id, the replay and the
    parameters, never on threads, tiles, fusion, launch grouping, logical size, compaction or
    backend (the same numbers on CPU and GPU)."""


@keywords_after(1, "exponential(out, key=1, scale=1.0)")
def exponential(out, *, key, scale=1.0, ids=None) -> Node:
    """A node that draws exponential numbers (mean ``scale``) into a float32 or float64 ``out``.

    ``scale * -log(u)`` with ``u = ((x >> 11) + 1) * 2**-53`` in (0, 1], ``x`` the sample's 64
    bits of block ``(id >> 1, 0)`` (``w1 << 32 | w0`` for an even id, ``w3 << 32 | w2`` for an
    odd one; eagle's own log, the same bits on CPU and GPU), computed in double and rounded
    once to ``out``'s type; the largest standard value is ``53 ln 2 = 36.74``.
    {counters}

    Parameters
    ----------
    out : array or {{name: array}}
        A 1-d float32 or float64 array, one number per sample (default name ``out``).
    key : int
        The Philox key, an integer in [0, 2**64).
    scale : float, or float64 array or {{name: array}}
        The mean: a scalar (finite, >= 0, and ``36.74 * scale`` finite in ``out``'s type),
        or one per sample (a sample whose scale is negative or not finite gets nan).
    ids : int64 array or {{name: array}}, optional
        Per-sample ids (the ids compaction carries; default name ``id``).

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        An array of the wrong dtype, a ``key`` that is not an integer.
    ValueError
        ``scale`` outside those rules, an array that is not one entry per sample.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import exponential
    >>> t = np.zeros(100_000)
    >>> g = eagle.Graph()
    >>> g.add_node(exponential({{"t": t}}, key=3, scale=2.0), name="flight")
    >>> g.build().launch(1)
    >>> bool(abs(t.mean() - 2.0) < 0.05 and t.min() >= 0)
    True
    """
    return _distribution_node(distribution_spec(EXPONENTIAL, out, key, ids, scale=scale))


@keywords_after(1, "poisson(out, key=1, lam=1.0)")
def poisson(out, *, key, lam, ids=None) -> Node:
    """A node that draws Poisson counts (mean ``lam``) into an int64 ``out``.

    ``lam < 10``: inversion (the CDF searched in order) with the uniform of block 0;
    ``lam >= 10``: Hormann's PTRS transformed rejection, one attempt per block (about 1.1
    blocks a sample). {counters}

    Parameters
    ----------
    out : array or {{name: array}}
        A 1-d int64 array, one count per sample (default name ``out``).
    key : int
        The Philox key, an integer in [0, 2**64).
    lam : float, or float64 array or {{name: array}}
        The mean, in [0, 1e15]: a scalar, or one per sample (a sample whose lam is
        negative, nan or above 1e15 gets -1).
    ids : int64 array or {{name: array}}, optional
        Per-sample ids (the ids compaction carries; default name ``id``).

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        An array of the wrong dtype, a ``key`` that is not an integer.
    ValueError
        ``lam`` outside [0, 1e15] or nan, an array that is not one entry per sample.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import poisson
    >>> k = np.zeros(100_000, dtype=np.int64)
    >>> g = eagle.Graph()
    >>> g.add_node(poisson({{"k": k}}, key=5, lam=4.0), name="arrivals")
    >>> g.build().launch(1)
    >>> bool(abs(k.mean() - 4.0) < 0.05)
    True
    """
    return _distribution_node(distribution_spec(POISSON, out, key, ids, lam=lam))


@keywords_after(1, "binomial(out, key=1, n=10, p=0.5)")
def binomial(out, *, key, n, p, ids=None) -> Node:
    """A node that draws binomial counts (``n`` trials of probability ``p``) into an int64 ``out``.

    With ``p' = min(p, 1 - p)`` (the count is ``n - k`` when ``p > 1/2``): ``n p' < 10``:
    inversion with the uniform of block 0; else Hormann's BTRS transformed rejection, one
    attempt per block. {counters}

    Parameters
    ----------
    out : array or {{name: array}}
        A 1-d int64 array, one count per sample (default name ``out``).
    key : int
        The Philox key, an integer in [0, 2**64).
    n : int, or int64 array or {{name: array}}
        The trials, in [0, 2**52 - 1]: a scalar, or one per sample.
    p : float, or float64 array or {{name: array}}
        The probability, in [0, 1]: a scalar, or one per sample. A sample whose own ``n``
        or ``p`` is out of range (or nan) gets -1.
    ids : int64 array or {{name: array}}, optional
        Per-sample ids (the ids compaction carries; default name ``id``).

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        An array of the wrong dtype, a ``key`` that is not an integer, an ``n`` that is
        not an integer.
    ValueError
        ``n`` or ``p`` out of range, an array that is not one entry per sample.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import binomial
    >>> susceptible = np.full(100_000, 1000, dtype=np.int64)
    >>> infected = np.zeros(100_000, dtype=np.int64)
    >>> g = eagle.Graph()
    >>> g.add_node(binomial({{"new": infected}}, key=9, n={{"S": susceptible}}, p=0.01), name="infect")
    >>> g.build().launch(1)
    >>> bool(abs(infected.mean() - 10.0) < 0.1)
    True
    """
    return _distribution_node(distribution_spec(BINOMIAL, out, key, ids, n=n, p=p))


@keywords_after(1, "integers(out, key=1, low=0, high=10)")
def integers(out, *, key, low, high, ids=None) -> Node:
    """A node that draws integers uniformly from ``[low, high)`` into an int64 or int32 ``out``.

    Lemire's nearly divisionless method, first on the sample's word ``w[id & 3]`` of block
    ``(id >> 2, 0)`` (``high - low <= 2**32``) or its 64 bits of block ``(id >> 1, 0xffff)``,
    then on the 32-bit words w0, w1, w2, w3 (or the 64-bit ``w1 << 32 | w0``, ``w3 << 32 |
    w2``) of its own blocks 1, 2, ...: unbiased, a second word needed with probability below
    ``(high - low) / 2**32``. {counters}

    Parameters
    ----------
    out : array or {{name: array}}
        A 1-d int64 or int32 array, one number per sample (default name ``out``).
    key : int
        The Philox key, an integer in [0, 2**64).
    low, high : int, or int64 array or {{name: array}}
        The range, ``high`` excluded: scalars with ``low < high`` (inside int32 for an
        int32 ``out``), or one per sample (a sample with ``high <= low``, or a range
        outside an int32 ``out``, gets the output type's smallest value).
    ids : int64 array or {{name: array}}, optional
        Per-sample ids (the ids compaction carries; default name ``id``).

    Returns
    -------
    Node
        The random node (cpu for NumPy arrays, cuda for CuPy arrays).

    Raises
    ------
    TypeError
        An array of the wrong dtype, a ``key``, ``low`` or ``high`` that is not an integer.
    ValueError
        ``low >= high``, a bound outside ``out``'s type, an array that is not one entry
        per sample.

    Examples
    --------
    >>> import numpy as np, eagle
    >>> from eagle.graph import integers
    >>> die = np.zeros(60_000, dtype=np.int64)
    >>> g = eagle.Graph()
    >>> g.add_node(integers({{"die": die}}, key=6, low=1, high=7), name="roll")
    >>> g.build().launch(1)
    >>> sorted(set(die.tolist()))
    [1, 2, 3, 4, 5, 6]
    """
    return _distribution_node(distribution_spec(INTEGERS, out, key, ids, low=low, high=high))


for _f in (exponential, poisson, binomial, integers):
    _f.__doc__ = _f.__doc__.format(counters=_COUNTERS)
del _f


# the constructors of eagle.record and eagle.cpu announce the nodes they make (the
# collectives announce themselves in eagle.mpi._nodes)
for _name in ("opaque", "native", "ufunc", "cuda_kernel", "compact", "reorder", "random_bits", "uniform", "normal",
              "exponential", "poisson", "binomial", "integers", "while_loop", "if_else", "subgraph"):
    globals()[_name] = hooks.announced(globals()[_name])
del _name
