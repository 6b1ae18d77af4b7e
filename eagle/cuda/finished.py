"""Compaction and reorder on the GPU: captured kernels inside the CUDA graph.

``eagle.graph.compact(alive, state)`` and ``reorder(by, state, n_keys=...)``
on CUDA arrays (CuPy, or any ``__cuda_array_interface__`` array) make a
:class:`CudaPartitionNode`. ``build()`` captures it as four kernel nodes of the
graph (no host work on replay, no host round trip):

1. ``eagle_part_count`` — one thread per chunk of ``chunk`` samples counts the
   chunk's keys per bucket (compaction: bucket 0 live, 1 finished; reorder:
   the key, and one extra bucket for keys outside [0, n_keys));
2. ``eagle_part_scan`` — one block: exclusive prefix sum of the counts in
   bucket-major order (bucket, then chunk), which is where each chunk's
   samples of each bucket go; then thread 0 takes the policy decision (the
   same as the CPU's: every ``every``-th replay, once ``min_dead_fraction``
   of the samples finished, always when none is left), writes the live count
   to ``count`` and the next logical size to the graph's device block;
3. ``eagle_part_scatter`` — one thread per chunk walks its chunk in order and
   copies each sample's row of every permuted array (the key, every state
   array, the id map) to its place in scratch memory: stable, because chunks
   are ordered within a bucket and a chunk is walked in order;
4. ``eagle_part_copyback`` — one thread per sample copies scratch back.

Steps 3 and 4 do nothing on a replay where the policy says no.

**The device logical size.** The graph keeps its logical size in device
memory (an int64, ``CudaBackend.size_ptr``), beside the next size the
compaction computed, the count of replays that started with live samples,
and a flag for invalid reorder keys. A one-thread ``eagle_commit`` kernel at
the end of the captured graph makes the compaction's count the next replay's
size, so every node of one replay sees the same size, as on the CPU. Kernel
node grids are fixed between host-side patches, so every sized kernel of such
a graph reads the size from the device: the partition kernels above, and
``cuda_kernel`` nodes that take ``SIZE_PTR`` (``if (i >= *n) return;``). They
are launched with a grid for the size eagle last knew on the host (an upper
bound within one ``launch``: compaction only shrinks it) and exit early past
the live count. Cost: one 8-byte load per thread, and at most one
``launch`` call's worth of blocks that start and exit at once; at the end of
``launch`` eagle copies the device block back (**one 32-byte D2H copy per
launch, not per replay**), sets ``g.logical_size`` and patches the grids down.

**Running until done** (``g.launch_until_done(n)``), with no
overshoot. On a CUDA 12.4+ driver: one conditional WHILE node whose body is
the captured replay (a child graph) followed by the one-thread
``eagle_until_done_condition`` kernel, which sets the condition from the
device live count and the replay counter (``g[0] > 0 and g[2] < g[4]``), so
one ``cuGraphLaunch`` runs every replay with no host round trip; the node is
built for the logical size the host knows and rebuilt when it changed (one
instantiate per ``launch_until_done`` call of a new size). On older drivers:
one replay at a time and the device count read back after each (exact, one
small D2H copy per replay). Either way no replay starts once the count is 0,
so kernels captured inside opaque nodes never run on finished work.

**Inside a control-flow body** (``while_loop``, ``if_else``, ``subgraph``,
eagle/cuda/control.py) the four kernels are captured into the body graph like any
kernel node, and their sized kernels are registered as the body's (a retune patches
them in the graph, then one whole-graph exec update). Each run reads the replay's
size (``g[0]``, unchanged until ``eagle_commit`` at the end of the replay) and writes
its next size (``g[1]``): the last run in a replay wins, as on the CPU. ``eagle_commit``
leaves ``g[1] == g[0]`` and ``set_logical_size`` writes both, so a replay that does not
run the body commits the size it ran at. A node captured several times (a body used
twice) shares one set of buffers: one run counter for ``every``, as the node is one.

**Where the kernels come from.** The source is eagle/cuda/kernels/partition.cu.
On a GPU it is compiled once per process and device with ``cupy.RawModule``
(NVRTC) at ``build()``; the program must have imported CuPy. A program that
compiles the source itself registers its kernels with ``set_kernel_provider``
(eagle's tests do, for their CPU test double of the driver).

Performance note: the per-chunk threads of count and scatter read their
chunk sequentially (uncoalesced across a warp), and the scan is one block;
this is simple and stable, not yet the fastest GPU partition (a decoupled
look-back block scan would be).
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from eagle.cuda.capture import Lowering, Need, register
from eagle.cuda.kernel_nodes import SIZE_PTR  # noqa: F401  (re-exported for users of compaction)
from eagle.record.memory import array_kind
from eagle.record.finished import FinishedSamplesNode, check_names, check_policy, check_state, key_label
from eagle.record.node import RunsAs

__all__ = ["CudaPartitionNode", "CudaPartitionCapture", "compact_cuda", "reorder_cuda", "CUDA_SOURCE", "SIZE_PTR"]

from eagle.cuda import kernel_source

#: the CUDA C source of the kernels (eagle/cuda/kernels/partition.cu)
CUDA_SOURCE = kernel_source("partition")

#: (kernel, parameter count); every parameter is 8 bytes (pointer, long long, double)
KERNELS = {"eagle_part_count": 8, "eagle_part_scan": 11, "eagle_part_scatter": 11,
           "eagle_part_copyback": 4, "eagle_commit": 1}
#: the kernels of eagle/cuda/kernels/until_done.cu (a module of its own, see there)
UNTIL_DONE_KERNELS = {"eagle_until_done_condition": 3}
#: the kernels of eagle/cuda/kernels/control.cu (control-flow nodes, eagle/cuda/control.py)
CONTROL_KERNELS = {"eagle_control_condition": 8}
#: the kernels of eagle/cuda/kernels/random.cu (the random nodes, eagle/cuda/random_node.py)
RANDOM_KERNELS = {"eagle_random": 15, "eagle_distribution": 18, "eagle_replay_step": 1}

#: the device block of a graph (int64 each): logical size, next size, live replays, bad keys,
#: the live-replay count at which launch_until_done stops
G_SIZE, G_NEXT, G_LIVE_REPLAYS, G_INVALID, G_STOP = 0, 1, 2, 3, 4
G_WORDS = 5

COUNT_BLOCK = 128      # threads per block of count / scatter (one per chunk)
COPY_BLOCK = 256       # threads per block of copyback (one per sample)
SCAN_BLOCK = 1024      # the scan's single block at most (a power of two)
_MAX_COUNTS = 1 << 20  # (n_keys + 1) * chunks stays under this: picks the chunk length


# ---- where the kernels come from -------------------------------------------------------

class _CupyKernels:
    """The CUDA source compiled by CuPy's NVRTC (``cupy.RawModule``), once per device."""

    def __init__(self, cp):
        self._cp = cp
        self._fn = {name: _cupy_module(cp).get_function(name) for name in KERNELS}

    def function(self, name):
        """The CUfunction of one of eagle's kernels; the until-done condition kernel is
        compiled on first use (its own module: it needs a 12.4+ driver to load)."""
        fn = self._fn.get(name)
        if fn is None and name in UNTIL_DONE_KERNELS:
            fn = self._fn[name] = _cupy_module(self._cp, "until_done").get_function(name)
        elif fn is None and name in CONTROL_KERNELS:
            fn = self._fn[name] = _cupy_module(self._cp, "control").get_function(name)
        elif fn is None and name in RANDOM_KERNELS:
            fn = self._fn[name] = _cupy_module(self._cp, "random").get_function(name)
        return int(fn.kernel.ptr)      # a cupy.RawKernel: its compiled cupy.cuda.Function

    def launch(self, name, stream, grid, block, args):
        self.function(name)
        conv = tuple(np.float64(v) if t == "d" else np.int64(v) for t, v in args)
        self._fn[name]((grid,), (block,), conv, stream=stream)


_modules = {}
_modules_lock = threading.Lock()


def _cupy_module(cp, name="partition"):
    dev = cp.cuda.runtime.getDevice()
    with _modules_lock:
        mod = _modules.get((dev, name))
        if mod is None:
            code = CUDA_SOURCE if name == "partition" else kernel_source(name)
            mod = _modules[(dev, name)] = cp.RawModule(code=code, options=module_options(name))
        return mod


def module_options(name: str) -> tuple:
    """The NVRTC options eagle gives CuPy for its module ``name`` (CuPy appends
    ``-ftz=true`` and the architecture)."""
    options = ("--std=c++11",)
    if name == "random":
        # philox.h from eagle's headers; no contraction, so the bits are the CPU's
        options += ("-I" + philox_include_dir(), "--fmad=false")
    return options


def philox_include_dir() -> str:
    """The directory holding eagle/philox.h: eagle's installed headers
    (``eagle.get_include()``), else the source tree's csrc/include (an in-place build)."""
    import os

    import eagle

    for d in (eagle.get_include(),
              os.path.join(os.path.dirname(os.path.dirname(eagle.__file__)), "csrc", "include")):
        if os.path.isfile(os.path.join(d, "eagle", "philox.h")):
            return d
    raise FileNotFoundError("eagle/philox.h is in neither eagle.get_include() nor csrc/include")


_provider = [None]


def set_kernel_provider(provider) -> None:
    """Take the partition kernels from ``provider()`` instead of compiling them with CuPy.

    ``provider()`` returns an object with ``function(name)`` (the ``CUfunction`` of
    one of eagle's kernels, by its name in ``eagle/cuda/kernels/*.cu``, as an int) and
    ``launch(name, stream, grid, block, args)`` (``args``: ``("i", int)`` or
    ``("d", float)`` pairs). For a program that compiles eagle's CUDA source itself,
    and for test doubles of the driver; ``None`` goes back to CuPy."""
    if provider is not None and not callable(provider):
        raise TypeError(f"set_kernel_provider() needs a callable or None, got {type(provider).__name__}")
    _provider[0] = provider


def kernel_provider():
    """The kernels of compaction and reorder: the registered provider's, else the CUDA
    source compiled with CuPy. Raises TypeError when neither is there."""
    if _provider[0] is not None:
        return _provider[0]()
    cp = sys.modules.get("cupy")
    if cp is None:
        raise TypeError("compaction and reorder on the GPU compile their kernels with CuPy "
                        "(cupy.RawModule); import cupy before build()")
    return _CupyKernels(cp)


# ---- the node ----------------------------------------------------------------------------

def _layout(a, name, mode):
    """(data pointer, sample stride in bytes, row bytes, shape, typestr) of a CUDA array."""
    cai = a.__cuda_array_interface__
    shape = tuple(cai["shape"])
    dt = np.dtype(cai["typestr"])
    if not shape:
        raise ValueError(f"{mode}(): {name!r} must hold one row per sample, it is 0-d")
    row = dt.itemsize * int(np.prod(shape[1:], dtype=np.int64))
    c_strides = [dt.itemsize]
    for d in reversed(shape[1:]):
        c_strides.insert(0, c_strides[0] * d)
    strides = cai.get("strides")
    if strides is None:
        stride0 = row
    else:
        strides = tuple(strides)
        if len(shape) > 1 and list(strides[1:]) != c_strides[:-1] and row:
            raise ValueError(f"{mode}(): a sample's row of {name!r} must be contiguous")
        stride0 = strides[0]
    return int(cai["data"][0]), int(stride0), int(row), shape, dt


def _cupy():
    return sys.modules.get("cupy")


class CudaPartitionNode(FinishedSamplesNode):
    """A compaction or reorder node on CUDA arrays (see the module doc)."""

    kind = "cuda_partition"
    runs_as = RunsAs.CUDA_PARTITION
    dot_shape = "box3d"

    def __init__(self, mode, key, state, ids, count, n_keys, every, min_dead_fraction):
        """``key``: ``(name, array)``; ``ids``, ``count``: ``(name, array)`` or None."""
        (key_name, key), (ids_name, ids) = key, ids or ("ids", None)
        count_name, count = count or ("count", None)
        state = check_state(mode, (key_name, ids_name, count_name), state)
        capacity = int(tuple(key.__cuda_array_interface__["shape"])[0]) \
            if len(key.__cuda_array_interface__["shape"]) == 1 else -1
        if capacity < 0:
            raise ValueError(f"{mode}(): {key_label(mode, key_name)} must be 1-d, one entry per sample")
        cp = _cupy()
        if ids is None:
            if cp is None:
                raise TypeError(f"{mode}(): pass ids= (a CUDA int64 array of shape ({capacity},)) "
                                "when CuPy is not imported")
            ids = cp.arange(capacity, dtype=cp.int64)
        if count is None and mode == "compact":
            if cp is None:
                raise TypeError(f"{mode}(): pass count= (a CUDA int64 array of one element) when "
                                "CuPy is not imported")
            count = cp.zeros(1, dtype=cp.int64)
        check_names(mode, key_name, ids_name, count_name)
        writes = {key_name: key, **state, ids_name: ids}
        if count is not None:
            writes[count_name] = count
        super().__init__(None, writes)
        self.count_name = count_name
        self.key_name, self.ids_name, self.state_names = key_name, ids_name, tuple(state)
        self.read_too([key_name, *state, ids_name])   # it moves their samples: data flows in
        if self.family != "cuda":
            raise TypeError(f"{mode}(): every array must be a CUDA array, like {key_label(mode, key_name)}")
        self._layouts = []
        for name, a in [(key_name, key), *state.items(), (ids_name, ids)]:
            lay = _layout(a, name, mode)
            if lay[3][0] != capacity:
                raise ValueError(f"{mode}(): every state array holds one row per sample ({capacity}); "
                                 f"{name!r} has shape {lay[3]}")
            self._layouts.append(lay)
        if self._layouts[-1][4] != np.int64 or len(self._layouts[-1][3]) != 1:
            raise TypeError(f"{mode}(): ids must be an int64 array of shape ({capacity},)")
        self.count_ptr = 0
        if count is not None:
            cptr, _, _, cshape, cdt = _layout(count, count_name, mode)
            if cdt != np.int64 or int(np.prod(cshape)) != 1:
                raise TypeError(f"{mode}(): count must be an int64 array of one element")
            self.count_ptr = cptr
        check_policy(mode, every, min_dead_fraction)
        self.mode = mode
        self.ids, self.count = ids, count
        self.capacity = capacity
        self.n_keys = 1 if mode == "compact" else int(n_keys)   # buckets besides the extra one
        self.key_kind = 0 if mode == "compact" else (1 if self._layouts[0][4].itemsize == 4 else 2)
        self.every = int(every)
        self.min_dead_fraction = float(min_dead_fraction)
        buckets = self.n_keys + 1
        self.chunk = max(32, -(-buckets * max(capacity, 1) // _MAX_COUNTS))
        self.c_cap = max(1, -(-capacity // self.chunk))

    # -- results --------------------------------------------------------------------------

    def scatter_back(self, compacted, out=None):
        """Put per-sample values held in compacted order back in original sample order
        (``out[ids] = compacted``; CuPy arrays)."""
        cp = _cupy()
        if cp is None:
            raise TypeError("scatter_back() on CUDA arrays needs CuPy")
        out = cp.empty_like(compacted) if out is None else out
        out[self.ids] = compacted
        return out


class CudaPartitionCapture(Lowering):
    """A compaction or reorder node's capture: its four kernels (the module doc), on this
    build's device memory. A node captured several times (a body used twice, a stage
    captured again for ``library_serial_stages``) uses one set of buffers: one run
    counter, as the node is one."""

    def __init__(self):
        #: {id(node): (counts, array table, state)} of this build, made by ``allocate``
        self._buffers = {}
        self._nodes = []

    def needs(self, node):
        return frozenset({Need.READ_BACK})

    def allocate(self, node, ctx):
        """This build's scratch, counts, array table and state on the device (the graph
        owns them, ``ctx.register_buffer``)."""
        from eagle.cuda._memory import DeviceBuffer

        stream = ctx.stream
        scratch = []
        for ptr, stride, row, shape, dt in node._layouts:
            scratch.append(ctx.register_buffer(DeviceBuffer(max(1, row * node.capacity))).ptr)
        counts = ctx.register_buffer(DeviceBuffer((node.n_keys + 1) * node.c_cap * 8))
        table = np.array([[lay[0], s, lay[2], lay[1]] for lay, s in zip(node._layouts, scratch)],
                         dtype=np.int64)
        tbuf = ctx.register_buffer(DeviceBuffer(table.nbytes))
        tbuf.write(table, stream)
        st = ctx.register_buffer(DeviceBuffer(16))
        st.write(np.zeros(2, dtype=np.int64), stream)
        self._buffers[id(node)] = (counts, tbuf, st)
        self._nodes.append(node)

    def restart(self, stream):
        """Each node's run counter (``every``) back to 0 and its id map to the identity."""
        from eagle.cuda._memory import copy_to_device

        for node in self._nodes:
            self._buffers[id(node)][2].write(np.zeros(2, dtype=np.int64), stream)
            ptr, stride = node._layouts[-1][0], node._layouts[-1][1]
            ids = np.arange(node.capacity, dtype=np.int64)
            if stride == ids.itemsize:
                copy_to_device(ptr, ids, stream)
            else:
                for i in range(node.capacity):
                    copy_to_device(ptr + i * stride, ids[i:i + 1], stream)

    def capture(self, node, ctx):
        """Launch the four kernels on ``ctx.stream``; the ones whose grid follows the
        logical size are sized (grid only: they read the device size)."""
        counts, table, st = self._buffers[id(node)]
        stream, size, g_ptr = ctx.stream, ctx.size, ctx.size_ptr
        key_ptr, key_stride = node._layouts[0][0], node._layouts[0][1]
        p = lambda v: ("i", int(v))  # noqa: E731  pointers and ints are both 8-byte words
        common = [p(key_ptr), p(key_stride), p(node.key_kind), p(node.n_keys), p(node.chunk),
                  p(node.c_cap), p(counts.ptr), p(g_ptr)]
        per_chunk_block = COUNT_BLOCK * node.chunk
        grid = max(1, -(-size // per_chunk_block))
        kernels = ctx.kernels

        def sized(name, per_block):
            ctx.add_sized_kernel(stream.last_node(), nargs=KERNELS[name], size_index=0,
                                 size_type="none", per_block=per_block)

        kernels.launch("eagle_part_count", stream, grid, COUNT_BLOCK, common)
        sized("eagle_part_count", per_chunk_block)
        # the scan's block: a power of two covering the counts at capacity (at most 1024)
        scan_block = min(SCAN_BLOCK, max(32, 1 << ((node.n_keys + 1) * node.c_cap - 1).bit_length()))
        kernels.launch("eagle_part_scan", stream, 1, scan_block,
                       [p(counts.ptr), p(node.n_keys), p(node.c_cap), p(node.chunk), p(g_ptr),
                        p(g_ptr), p(st.ptr), p(node.count_ptr), p(node.key_kind), p(node.every),
                        ("d", node.min_dead_fraction)])
        kernels.launch("eagle_part_scatter", stream, grid, COUNT_BLOCK,
                       common + [p(st.ptr), p(table.ptr), p(len(node._layouts))])
        sized("eagle_part_scatter", per_chunk_block)
        kernels.launch("eagle_part_copyback", stream, max(1, -(-size // COPY_BLOCK)), COPY_BLOCK,
                       [p(g_ptr), p(st.ptr), p(table.ptr), p(len(node._layouts))])
        sized("eagle_part_copyback", COPY_BLOCK)


register(CudaPartitionNode, CudaPartitionCapture)


def compact_cuda(alive, state, *, ids=None, count=None, every=1, min_dead_fraction=0.25):
    """``eagle.graph.compact`` for CUDA arrays (it dispatches here, with ``(name, array)`` pairs)."""
    dt = np.dtype(alive[1].__cuda_array_interface__["typestr"])
    if dt not in (np.bool_, np.uint8):
        raise TypeError(f"compact(): alive {alive[0]!r} must be a bool or uint8 array, got {dt}")
    return CudaPartitionNode("compact", alive, state, ids, count, 1, every, min_dead_fraction)


def reorder_cuda(by, state, *, n_keys, ids=None, every=1):
    """``eagle.graph.reorder`` for CUDA arrays (it dispatches here, with ``(name, array)`` pairs)."""
    dt = np.dtype(by[1].__cuda_array_interface__["typestr"])
    if dt not in (np.int32, np.int64):
        raise TypeError(f"reorder(): the sort key {by[0]!r} must be an int32 or int64 array, got {dt}")
    return CudaPartitionNode("reorder", by, state, ids, None, n_keys, every, 0.0)


def is_cuda_array(a) -> bool:
    return array_kind(a) == "cuda"
