"""GPU kernel nodes that eagle launches itself: ``cuda_kernel(kernel, args, ...)``.

    import cupy as cp
    from eagle.graph import cuda_kernel, SIZE

    axpy = cp.RawKernel(r'''
    extern "C" __global__ void axpy(double *y, const double *x, double a, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) y[i] += a * x[i];
    }''', "axpy")
    g.add_node(cuda_kernel(axpy, (y, x, 2.0, SIZE), reads={"x": x}, writes={"y": y}))

A ``cuda_kernel`` node is *sized*: it processes samples ``[0, logical_size)``.
``SIZE`` in ``args`` marks the parameter that receives the logical size, and
the grid is ``ceil(logical_size / block)`` blocks of ``block`` threads (at
least one block: with a logical size of 0 one block runs and must see n = 0).
Because eagle launches the kernel itself while it captures the graph, it knows
the kernel's node in the CUDA graph, and ``g.set_logical_size(n)`` patches that
node's grid and size argument in the instantiated graph: no re-capture, no
re-instantiation. (Kernels launched from inside an ``opaque`` node keep the
size they were captured with.)

``SIZE_PTR`` instead of ``SIZE`` passes a ``const long long *`` to the graph's
*device* logical size. Use it in graphs with a compaction node
(``eagle.graph.compact`` on CUDA arrays): the compaction writes the live count
on the device, and the next replay's kernels must see it without a host round
trip, while a kernel node's grid is fixed between host-side patches. So a
``SIZE_PTR`` kernel is launched with a grid for the logical size eagle last
knew on the host (an upper bound: within one ``launch(n)`` compaction only
shrinks it) and exits early::

    extern "C" __global__ void step(double *x, const long long *n_ptr) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i >= *n_ptr) return;
        ...
    }

The cost: one 8-byte load per thread, and blocks past the live count that
start and exit at once (within one ``launch(n)``; eagle patches the grid to
the live count at its end). A ``SIZE`` kernel in such a graph gets the size
eagle knew at the start of the ``launch`` call, so within the call it still
visits finished samples at the back (which it must leave alone anyway).
"""
from __future__ import annotations

import ctypes
import operator
import sys

import numpy as np

from eagle._public import keywords_after
from eagle.cuda.capture import Lowering, Need, register
from eagle.record.memory import array_kind, extent_of
from eagle.record.node import Node, RunsAs

__all__ = ["cuda_kernel", "CudaKernelNode", "SIZE", "SIZE_PTR", "SizePlaceholder", "SizePointer"]

#: C types the size parameter may have (the names GraphExec.add_sized_kernel takes)
_SIZE_TYPES = {"int32": np.int32, "int64": np.int64, "uint32": np.uint32, "uint64": np.uint64}
_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64}


class SizePlaceholder:
    """Marks the kernel argument that receives the graph's logical size.

    ``SIZE`` passes it as a 64-bit signed integer (``long long`` / ``int64_t``,
    what CuPy passes for a Python int). For a kernel whose size parameter has
    another type, use ``SIZE("int32")``, ``SIZE("uint32")`` or ``SIZE("uint64")``.
    """

    __slots__ = ("ctype",)

    def __init__(self, ctype: str = "int64"):
        if ctype not in _SIZE_TYPES:
            raise ValueError(f"the size parameter's type is one of {sorted(_SIZE_TYPES)}, got {ctype!r}")
        self.ctype = ctype

    def __call__(self, ctype: str) -> "SizePlaceholder":
        return SizePlaceholder(ctype)

    def __eq__(self, other):
        return isinstance(other, SizePlaceholder) and other.ctype == self.ctype

    def __hash__(self):
        return hash(("eagle.SIZE", self.ctype))

    def __repr__(self):
        return "eagle.graph.SIZE" if self.ctype == "int64" else f"eagle.graph.SIZE({self.ctype!r})"


#: the logical-size placeholder for ``cuda_kernel`` arguments (int64)
SIZE = SizePlaceholder("int64")


class SizePointer:
    """Marks the kernel argument that receives a pointer (``const long long *``)
    to the graph's device logical size; see the module doc."""

    __slots__ = ()
    ctype = "none"

    def __repr__(self):
        return "eagle.graph.SIZE_PTR"


#: the device logical-size placeholder: a ``const long long *`` argument
SIZE_PTR = SizePointer()


def _function_address(obj):
    """An int address from an int or a ctypes function pointer, else None."""
    if isinstance(obj, bool):
        return None
    if isinstance(obj, int):
        return obj
    if isinstance(obj, ctypes._CFuncPtr):
        return ctypes.cast(obj, ctypes.c_void_p).value
    if isinstance(obj, ctypes.c_void_p):
        return obj.value
    return None


class CudaKernelNode(Node):
    """A GPU kernel that eagle launches itself, over samples [0, logical_size).

    Drawn ``{name}`` in the picture. See :func:`cuda_kernel`.
    """

    kind = "cuda_kernel"
    runs_as = RunsAs.CUDA_KERNEL
    box = ("{", "}")
    dot_shape = "box3d"
    sized = True

    def __init__(self, kernel, args, reads=None, writes=None, *, size_arg=None, block=256,
                 shared_mem=0, nargs=None, updates=None):
        super().__init__(reads, writes, updates=updates)
        if self.family != "cuda":
            if self.family == "numpy":
                raise TypeError("cuda_kernel() runs on the GPU and takes CUDA arrays (CuPy arrays or "
                                "objects with __cuda_array_interface__); for NumPy arrays use "
                                "eagle.graph.native() or opaque()")
            raise TypeError("cuda_kernel() needs the CUDA arrays it reads or writes declared in "
                            "reads= / writes= (eagle orders nodes and sizes the graph by them)")

        # -- the kernel --------------------------------------------------------------
        self._function = None      # a CuPy Function (launched through CuPy), or None
        name = None
        if isinstance(kernel, tuple):
            if len(kernel) != 2:
                raise TypeError("cuda_kernel(kernel=(address, nargs)) needs a pair, got "
                                f"a tuple of {len(kernel)}")
            kernel, kernel_nargs = kernel
            if nargs is not None and nargs != kernel_nargs:
                raise TypeError(f"nargs={nargs} disagrees with the kernel's pair ({kernel_nargs})")
            nargs = kernel_nargs
        address = _function_address(kernel)
        if address is None:
            fn = getattr(kernel, "kernel", None)      # cupy.RawKernel -> its compiled Function
            if fn is not None and hasattr(fn, "ptr") and callable(fn):
                name = getattr(kernel, "name", None)
            elif hasattr(kernel, "ptr") and callable(kernel) and hasattr(kernel, "module"):
                fn = kernel                            # a cupy.cuda.Function itself
            else:
                raise TypeError(
                    "cuda_kernel() needs a CuPy RawKernel (or cupy.cuda.Function), or a CUfunction "
                    f"address as an int, a ctypes pointer or (address, nargs); "
                    f"got {type(kernel).__name__}")
            self._function = fn
            address = int(fn.ptr)
        if not address:
            raise ValueError("cuda_kernel(): the kernel's function address is NULL")
        self.func = address
        self.name = name or getattr(kernel, "__name__", None) or "cuda_kernel"

        # -- the arguments --------------------------------------------------------------
        if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
            raise TypeError(f"cuda_kernel() needs args as a sequence, got {type(args).__name__}")
        args = tuple(args)
        if nargs is None:
            nargs = len(args)
        if isinstance(nargs, bool) or not isinstance(nargs, int) or nargs < 1:
            raise TypeError(f"nargs must be a positive int, got {nargs!r}")
        if len(args) != nargs:
            raise TypeError(f"kernel {self.name!r} takes {nargs} argument(s), got {len(args)}")
        sizes = [i for i, a in enumerate(args) if isinstance(a, (SizePlaceholder, SizePointer))]
        if size_arg is not None:
            if isinstance(size_arg, bool):
                raise TypeError("size_arg must be an argument index, got a bool")
            size_arg = operator.index(size_arg)
            if size_arg < 0:
                size_arg += len(args)
            if not 0 <= size_arg < len(args):
                raise ValueError(f"size_arg={size_arg} is not an index of the {len(args)} arguments")
            if sizes and sizes != [size_arg]:
                raise ValueError(f"size_arg={size_arg} but SIZE stands at argument {sizes[0]}")
            if not sizes:
                a = args[size_arg]
                if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
                    raise TypeError(f"argument {size_arg} (size_arg) must be SIZE or an integer "
                                    f"placeholder, got {type(a).__name__}")
                args = args[:size_arg] + (SIZE,) + args[size_arg + 1:]
                sizes = [size_arg]
        if len(sizes) != 1:
            raise ValueError(
                f"kernel {self.name!r}: mark exactly one argument with eagle.graph.SIZE (the "
                f"logical size goes there) or SIZE_PTR (a pointer to it), found {len(sizes)}")
        self.size_arg = sizes[0]
        #: True when the kernel reads the logical size from device memory (SIZE_PTR): the
        #: graph then keeps it there (``Need.DEVICE_SIZE``)
        self.size_ptr = isinstance(args[self.size_arg], SizePointer)
        self.size_type = args[self.size_arg].ctype

        declared = [extent_of(a) for _, a, _ in self.arrays()]
        for i, a in enumerate(args):
            if isinstance(a, (SizePlaceholder, SizePointer)):
                continue
            kind = array_kind(a)
            if kind == "numpy":
                raise TypeError(f"argument {i} of kernel {self.name!r} is a NumPy array; a GPU "
                                "kernel takes CUDA arrays (CuPy, __cuda_array_interface__)")
            if kind == "cuda":
                ext = extent_of(a)
                if not ext.empty and not any(d.lo <= ext.lo and ext.hi <= d.hi for d in declared):
                    raise TypeError(f"argument {i} of kernel {self.name!r} is an array not declared in "
                                    "reads= or writes=; declare every array the kernel touches "
                                    "(eagle orders nodes by them)")
                continue
            if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float, np.generic)):
                raise TypeError(f"argument {i} of kernel {self.name!r} must be a CUDA array, an int, "
                                f"a float, a NumPy scalar or SIZE, got {type(a).__name__}")
        self.args = args
        self.nargs = nargs

        if isinstance(block, bool):
            raise TypeError("block must be a positive int (threads per block), got a bool")
        try:
            block = operator.index(block)
        except TypeError:
            raise TypeError(f"block must be a positive int (threads per block), got "
                            f"{type(block).__name__}") from None
        if not 1 <= block <= 1024:
            raise ValueError(f"block must be in 1..1024 threads, got {block}")
        self.block = block
        shared_mem = operator.index(shared_mem)
        if shared_mem < 0:
            raise ValueError(f"shared_mem must be >= 0, got {shared_mem}")
        self.shared_mem = shared_mem

    # -- launching (called by its lowering, CudaKernelCapture, while the graph is captured) --

    def arg_sizes(self) -> list:
        """Bytes of each kernel parameter as eagle passes it: 4 for a 32-bit SIZE,
        a NumPy scalar's itemsize, else 8 (pointers, Python ints and floats)."""
        out = []
        for a in self.args:
            if isinstance(a, SizePlaceholder):
                out.append(np.dtype(_SIZE_TYPES[a.ctype]).itemsize)
            elif isinstance(a, np.generic):
                out.append(a.dtype.itemsize)
            else:
                out.append(8)
        return out

    def grid_for(self, size: int) -> int:
        """Blocks for ``size`` samples: ceil(size / block), at least 1."""
        return max(1, -(-size // self.block))

    def launch(self, stream, size: int, size_ptr: int = 0) -> None:
        """Launch the kernel on ``stream`` (an ``eagle.cuda._stream`` stream) for ``size`` samples;
        ``size_ptr`` is the device address a ``SIZE_PTR`` argument receives.

        During capture this adds one kernel node to the graph.
        """
        if self.size_ptr and not size_ptr:
            raise ValueError(f"kernel {self.name!r} takes SIZE_PTR: launching it needs the "
                             "device address of the logical size")
        self._check_widths()
        grid = self.grid_for(size)
        if self._function is not None:
            self._function((grid,), (self.block,), self._cupy_args(size, size_ptr),
                           shared_mem=self.shared_mem, stream=stream)
        else:
            from eagle.cuda._stream import launch_kernel

            launch_kernel(self.func, grid, self.block, self._ctypes_args(size, size_ptr),
                                self.shared_mem, stream)

    def _check_widths(self) -> None:
        """Each argument as wide as the kernel's parameter (cuFuncGetParamInfo, 12.4+
        drivers; nothing to check against before): the launch copies each parameter's
        own width from what eagle passes, so a float32 for a double reads 4 bytes past it
        and an int64 for an int is silently truncated."""
        from eagle.cuda._driver import kernel_param_sizes

        real = kernel_param_sizes(self.func)
        if real is None:
            return
        if len(real) != self.nargs:
            raise TypeError(f"kernel {self.name!r} takes {len(real)} parameter(s) (sizes {real}, "
                            f"cuFuncGetParamInfo), it was given {self.nargs} argument(s)")
        for i, (want, got) in enumerate(zip(real, self.arg_sizes())):
            if want != got:
                a = self.args[i]
                what = (f"SIZE({a.ctype!r})" if isinstance(a, SizePlaceholder) else
                        f"a {type(a).__name__}" if not isinstance(a, np.generic) else f"numpy.{a.dtype}")
                raise TypeError(
                    f"kernel {self.name!r}: argument {i} ({what}) is passed as {got} bytes but the "
                    f"kernel's parameter {i} is {want} bytes wide (cuFuncGetParamInfo); pass a NumPy "
                    f"scalar of the parameter's type (e.g. numpy.float32 / numpy.int32 for 4 bytes)")

    def _cupy_args(self, size, size_ptr=0):
        out = []
        for a in self.args:
            if isinstance(a, SizePointer):
                out.append(np.uint64(size_ptr))
            elif isinstance(a, SizePlaceholder):
                out.append(_SIZE_TYPES[a.ctype](size))
            elif array_kind(a) == "cuda":
                # CuPy arrays pass themselves; other CUDA arrays pass their pointer
                cp = sys.modules.get("cupy")
                out.append(a if cp is not None and isinstance(a, cp.ndarray) else
                           np.uint64(a.__cuda_array_interface__["data"][0]))
            elif isinstance(a, int):
                out.append(np.int64(a))
            elif isinstance(a, float):
                out.append(np.float64(a))
            else:
                out.append(a)
        return tuple(out)

    def _ctypes_args(self, size, size_ptr=0):
        out = []
        for a in self.args:
            if isinstance(a, SizePointer):
                out.append(ctypes.c_void_p(size_ptr))
            elif isinstance(a, SizePlaceholder):
                out.append(_CTYPES[a.ctype](size))
            elif array_kind(a) == "cuda":
                out.append(ctypes.c_void_p(a.__cuda_array_interface__["data"][0]))
            elif isinstance(a, np.generic):
                out.append(np.ctypeslib.as_ctypes_type(a.dtype)(a.item()))
            elif isinstance(a, int):
                out.append(ctypes.c_int64(a))
            else:
                out.append(ctypes.c_double(a))
        return out

    def default_name(self) -> str:
        return self.name

    def __repr__(self):
        return (f"cuda_kernel({self.name!r}, nargs={self.nargs}, size_arg={self.size_arg}, "
                f"block={self.block}, reads={list(self.reads)}, writes={list(self.writes)})")


class CudaKernelCapture(Lowering):
    """A ``cuda_kernel`` node's capture: one kernel node, sized (``set_logical_size``
    patches its grid, and its ``SIZE`` argument; a ``SIZE_PTR`` kernel reads the device
    logical size, and only its grid is patched)."""

    def needs(self, node):
        return frozenset({Need.DEVICE_SIZE}) if node.size_ptr else frozenset()

    def capture(self, node, ctx):
        stream = ctx.stream
        if node.size_ptr:
            node.launch(stream, ctx.size, ctx.size_ptr)
            ctx.add_sized_kernel(stream.last_node(), nargs=node.nargs, size_index=0,
                                 size_type="none", per_block=node.block, arg_sizes=node.arg_sizes())
        else:
            node.launch(stream, ctx.size)
            ctx.add_sized_kernel(stream.last_node(), nargs=node.nargs, size_index=node.size_arg,
                                 size_type=node.size_type, per_block=node.block,
                                 arg_sizes=node.arg_sizes())


register(CudaKernelNode, CudaKernelCapture)


@keywords_after(2, 'cuda_kernel(kernel, [x, y, SIZE], reads={"x": x}, writes={"y": y})')
def cuda_kernel(kernel, args, *, reads=None, writes=None, size_arg: int | None = None,
                block: int = 256, shared_mem: int = 0, nargs: int | None = None,
                updates=None) -> CudaKernelNode:
    """A GPU kernel node that eagle launches itself, sized by the graph's logical size.

    On retune (``g.set_logical_size(n)``) eagle patches this node's grid and size
    argument in the instantiated CUDA graph, without re-capturing.

    Parameters
    ----------
    kernel : cupy.RawKernel, cupy.cuda.Function or CUfunction
        Launched through CuPy; or a ``CUfunction`` (what ``cuLaunchKernel`` takes:
        CuPy's ``Function.ptr``, ``cuModuleGetFunction``, ``cudaGetFuncBySymbol``), as an
        int, a ctypes pointer, or an ``(address, nargs)`` pair. On 12.4+ drivers eagle
        checks ``nargs`` and the size parameter's width against the kernel
        (``cuFuncGetParamInfo``) at ``build()``.
    args : sequence
        The kernel's arguments in order: CUDA arrays (passed by pointer), ints (int64),
        floats (double), NumPy scalars (their own type), and ``eagle.graph.SIZE`` exactly
        once, where the logical size goes (or ``eagle.graph.SIZE_PTR``: a pointer to the
        device logical size).
    reads, writes, updates : dict of name -> array, or an array, optional
        Every CUDA array the kernel reads / writes / updates in place, as for ``opaque``;
        every array in ``args`` must lie inside one of them.
    size_arg : int, optional
        The index of the size parameter: optional when ``SIZE`` marks it; if given,
        ``args[size_arg]`` may be any integer and becomes ``SIZE``.
    block : int, default 256
        Threads per block; the grid is ``ceil(logical_size / block)`` blocks (at least 1),
        so the kernel must check ``i < n`` itself.
    shared_mem : int, default 0
        Dynamic shared memory bytes per block.
    nargs : int, optional
        The kernel's parameter count (defaults to ``len(args)``).

    Returns
    -------
    Node
        The kernel node (cuda backend only).

    Raises
    ------
    TypeError
        An argument eagle cannot pass, a parameter count that does not match, no
        ``SIZE``, arrays positional (``reads``/``writes`` are keywords).
    ValueError
        An array in ``args`` outside the declared arrays, a bad ``block``.

    Examples
    --------
    >>> import cupy as cp  # doctest: +SKIP
    >>> from eagle.graph import SIZE, cuda_kernel
    >>> k = cp.RawKernel('extern "C" __global__ void twice(double *y, long long n) {'
    ...                  ' long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;'
    ...                  ' if (i < n) y[i] *= 2; }', "twice")  # doctest: +SKIP
    >>> y = cp.ones(1000)  # doctest: +SKIP
    >>> node = cuda_kernel(k, [y, SIZE], updates={"y": y})  # doctest: +SKIP
    """
    return CudaKernelNode(kernel, args, reads, writes, size_arg=size_arg, block=block,
                          shared_mem=shared_mem, nargs=nargs, updates=updates)
