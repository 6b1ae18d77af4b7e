"""Reductions over the sample axis on CUDA: ``ufunc(np.add.reduce, x, out=s)`` on CUDA arrays.

Two generated kernels (compiled as ``eagle.cuda.ufunc_node``'s are, through CuPy's
``RawKernel``): the first gives each thread one block of ``BLOCK`` samples and
computes the block's partial in the order the cpu kernel does (eight lanes, then a
pairwise tree of the lanes; csrc/cpu/reduce_kernels.c); the second combines the
partials in the cpu's pairwise tree, level by level, in one thread block, and writes
``s``. The same operations in the same order: integer results equal the cpu's, and float
results too where the device rounds as the host does (IEEE add, multiply, compare; no
contraction is possible in a single operation): the documented bound is that of the cpu
node against NumPy (docs/ufunc reductions), and the GPU result equals the cpu's bit for
bit on the CUDA stand-in. Both kernels are sized: a retune patches their size argument
and grids. On CUDA a reduction takes a 1-d operand (a 0-d output); a reduction without
identity (maximum, minimum) over no sample and without ``initial=`` leaves ``s`` as it
was and sets a device error word, which ``launch`` reads once the device is drained and
raises as the cpu does (``ValueError``, after the launch). ``ufunc.at`` tallies run on the
cpu only.
"""
from __future__ import annotations

import numpy as np

from eagle._errors import add_note
from eagle.cuda.capture import Lowering, register
from eagle.record.node import Node, RunsAs
from eagle.record.ufunc_operands import Operand, reduce_identity

__all__ = ["CudaReduceNode", "cuda_reduce", "cuda_at", "reduce_sources"]

BLOCK = 64   # csrc/cpu/reduce_kernels.h EAGLE_REDUCE_BLOCK
THREADS = 256
_C = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int", "int16": "short",
      "int8": "signed char", "uint64": "unsigned long long", "uint32": "unsigned int",
      "uint16": "unsigned short", "uint8": "unsigned char", "bool": "unsigned char"}
_OPS = ("add", "multiply", "maximum", "minimum", "logical_or", "logical_and", "bitwise_or", "bitwise_and",
        "bitwise_xor")


def _combine(op, ct, dtype):
    """The C expression of op on a, v in type ct: the cpu kernel's (reduce_kernels.c)."""
    dtype = np.dtype(dtype)
    f = dtype.kind == "f"
    if dtype == bool:
        op = {"add": "logical_or", "maximum": "logical_or", "multiply": "logical_and",
              "minimum": "logical_and"}.get(op, op)
    if op == "add":
        return "a + v" if f else f"({ct})((unsigned long long)a + (unsigned long long)v)"
    if op == "multiply":
        return "a * v" if f else f"({ct})((unsigned long long)a * (unsigned long long)v)"
    if op == "maximum":
        return "(a >= v || a != a) ? a : v" if f else "a >= v ? a : v"
    if op == "minimum":
        return "(a <= v || a != a) ? a : v" if f else "a <= v ? a : v"
    return {"logical_or": "a || v", "logical_and": "a && v", "bitwise_or": "a | v",
            "bitwise_and": "a & v", "bitwise_xor": "a ^ v"}[op]


def raises_when_empty(op, has_initial):
    """Whether a reduction has no value over no sample: its finish kernel then takes an
    error word's address (``err_ptr``, before ``n``) and sets it instead of writing."""
    return op in ("maximum", "minimum") and not has_initial


def empty_error(what):
    """The cpu's error for a reduction without identity (``what``: "maximum.reduce"...) over
    no sample (eagle/cpu/_reduce.pyx)."""
    return ValueError(f"zero-size array to reduction operation {what} which has no identity "
                      "(the logical size was 0): pass initial= for an empty reduction")


def reduce_sources(op, dtype, src_bool, masked, has_initial):
    """((partials source, name), (finish source, name)) of a reduction's two kernels; both
    take the identity as a parameter ``ident`` (an infinity has no portable literal)."""
    dtype = np.dtype(dtype)
    ct = _C[dtype.name]
    comb = _combine(op, ct, dtype)
    tag = f"{op}_{dtype.name}{'_b' if src_bool else ''}{'_w' if masked else ''}{'_i' if has_initial else ''}"
    pname, fname = f"eagle_reduce_part_{tag}", f"eagle_reduce_fin_{tag}"
    load = f"({ct})(*(const unsigned char *)(x + i * sx) != 0)" if src_bool else f"*(const {ct} *)(x + i * sx)"
    mask_param = ", const unsigned char *w, long long sw" if masked else ""
    if masked or src_bool:
        body = (f"    {ct} r = ident;\n"
                f"    for (long long i = b0; i < b1; ++i) {{\n"
                + ("        if (!w[i * sw]) continue;\n" if masked else "")
                + f"        {ct} a = r, v = {load};\n        r = ({ct})({comb});\n    }}\n")
    else:
        body = (f"    {ct} lane[8];\n"
                f"    for (int l = 0; l < 8; ++l) lane[l] = ident;\n"
                f"    long long i = b0;\n"
                f"    for (; i + 8 <= b1; i += 8)\n"
                f"        for (int l = 0; l < 8; ++l) {{ {ct} a = lane[l], v = *(const {ct} *)(x + (i + l) * sx);"
                f" lane[l] = ({ct})({comb}); }}\n"
                f"    for (; i < b1; ++i) {{ {ct} a = lane[(i - b0) & 7], v = {load};"
                f" lane[(i - b0) & 7] = ({ct})({comb}); }}\n"
                f"    for (int h = 1; h < 8; h *= 2)\n"
                f"        for (int l = 0; l < 8; l += 2 * h) {{ {ct} a = lane[l], v = lane[l + h];"
                f" lane[l] = ({ct})({comb}); }}\n"
                f"    {ct} r = lane[0];\n")
    part = (f'extern "C" __global__ void {pname}(const char *x, long long sx{mask_param}, {ct} ident, '
            f"long long part_ptr, long long n) {{\n"
            f"    long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
            f"    long long b0 = b * {BLOCK};\n"
            f"    if (b0 >= n) return;\n"
            f"    long long b1 = n - b0 < {BLOCK} ? n : b0 + {BLOCK};\n"
            + body +
            f"    (({ct} *)part_ptr)[b] = r;\n}}\n")
    init_param = f", {ct} init" if has_initial else ""
    if raises_when_empty(op, has_initial):
        init_param = ", long long err_ptr"
    if has_initial:
        empty = "*(" + ct + " *)out = init;"
        last = f"{{ {ct} a = init, v = r; r = ({ct})({comb}); }}"
    elif op in ("maximum", "minimum"):
        empty = "*(long long *)err_ptr = 1;   /* no identity: out is left as it was */"
        last = ""
    else:
        empty = f"*({ct} *)out = ident;"
        last = ""
    fin = (f'extern "C" __global__ void {fname}(long long part_ptr, char *out, {ct} ident{init_param}, '
           f'long long n) {{\n'
           f"    if (blockIdx.x != 0) return;\n"
           f"    {ct} *part = ({ct} *)part_ptr;\n"
           f"    long long nb = n / {BLOCK} + (n % {BLOCK} != 0);\n"
           f"    for (long long h = 1; h < nb; h *= 2) {{\n"
           f"        for (long long b = 2 * h * threadIdx.x; b + h < nb; b += 2 * h * blockDim.x) {{\n"
           f"            {ct} a = part[b], v = part[b + h];\n"
           f"            part[b] = ({ct})({comb});\n"
           f"        }}\n"
           f"        __syncthreads();\n"
           f"    }}\n"
           f"    if (threadIdx.x != 0) return;\n"
           f"    if (nb == 0) {{ {empty} return; }}\n"
           f"    {ct} r = part[0];\n"
           f"    {last}\n"
           f"    *({ct} *)out = r;\n}}\n")
    return (part, pname), (fin, fname)


def _cai(a):
    return a.__cuda_array_interface__


def _dtype(a):
    return np.dtype(_cai(a)["typestr"])


def _shape(a):
    return tuple(_cai(a)["shape"])


def _stride(a):
    s = _cai(a).get("strides")
    return s[0] if s else _dtype(a).itemsize


class CudaReduceNode(Node):
    """``uf.reduce`` over the samples of a 1-d CUDA array: two generated kernels."""

    kind = "cuda_reduce"
    runs_as = RunsAs.CUDA_KERNEL
    box = ("(", ")")
    sized = True
    combines = True

    def __init__(self, uf, x, out, mask, init, kernels, dtype, ident):
        self.ufunc = uf
        reads = {x.name: x.array}
        if mask is not None:
            reads[mask.name] = mask.array
        super().__init__(reads, {out.name: out.array}, per_sample=list(reads))
        self.x, self.out, self.mask, self.init = x.array, out.array, None if mask is None else mask.array, init
        self.kernels = kernels
        self.dtype = dtype
        #: the identity as the kernels' parameter (a NumPy scalar of the C type)
        self.ident = ident

    def default_name(self) -> str:
        return f"{self.ufunc.__name__}.reduce"

    def __repr__(self):
        return f"ufunc({self.ufunc.__name__}.reduce, {list(self.reads)[0]}, out={list(self.writes)[0]}, cuda)"


class CudaReduceCapture(Lowering):
    """Allocates the block partials (the graph owns them) and, for a reduction without
    identity, its error word; captures the two kernels, sized; after each launch raises
    the error a reduction over no sample set."""

    def __init__(self):
        self._parts = {}
        #: {id(node): [its name, "maximum.reduce"..., error word]} of reductions without identity
        self._errors = {}

    def allocate(self, node, ctx):
        from eagle.cuda._memory import DeviceBuffer

        n = _shape(node.x)[0]
        nb = n // BLOCK + (n % BLOCK != 0)
        self._parts[id(node)] = ctx.register_buffer(DeviceBuffer(max(1, nb) * node.dtype.itemsize))
        if raises_when_empty(node.ufunc.__name__, node.init is not None):
            err = ctx.register_buffer(DeviceBuffer(8))
            err.write(np.zeros(1, np.int64), ctx.stream)
            self._errors[id(node)] = [None, node.default_name(), err]

    def after_launch(self, stream):
        """Raise the first reduction's error over no sample (in capture order), as the cpu
        does after the launch; every error word is cleared."""
        first = None
        word = np.zeros(1, np.int64)
        for name, what, err in self._errors.values():
            if err.read_into(word, stream)[0]:
                err.write(np.zeros(1, np.int64), stream)
                if first is None:
                    first = empty_error(what)
                    add_note(first, f"eagle: raised by node {name!r} (a reduction over no sample, on "
                                    "the device) in the last launch")
        if first is not None:
            raise first

    def capture(self, node, ctx):
        from eagle.cuda.kernel_nodes import SIZE, cuda_kernel

        part = self._parts[id(node)].ptr
        (pk, fk) = node.kernels
        args = [node.x, np.int64(_stride(node.x))]
        if node.mask is not None:
            args += [node.mask, np.int64(_stride(node.mask))]
        kernels = [cuda_kernel(pk, args + [node.ident, np.int64(part), SIZE], reads=dict(node.reads),
                               block=THREADS)]
        err = self._errors.get(id(node))
        if err is not None:
            err[0] = ctx.name
        fargs = ([np.int64(part), node.out, node.ident] + ([node.init] if node.init is not None else [])
                 + ([np.int64(err[2].ptr)] if err is not None else []) + [SIZE])
        kernels.append(cuda_kernel(fk, fargs, writes=dict(node.writes), block=THREADS))
        for k in kernels:
            k.launch(ctx.stream, ctx.size)
            ctx.add_sized_kernel(ctx.stream.last_node(), nargs=k.nargs, size_index=k.size_arg,
                                 size_type=k.size_type, per_block=k.block, arg_sizes=k.arg_sizes())


register(CudaReduceNode, CudaReduceCapture)


def cuda_reduce(uf, x, out, where=True, initial=None) -> CudaReduceNode:
    """``ufunc(uf.reduce, x, out=s)`` on CUDA arrays (``eagle.graph.ufunc`` dispatches here)."""
    name = uf.__name__
    what = f"ufunc({name}.reduce) on CUDA arrays"
    if name not in _OPS:
        raise TypeError(f"{what}: a reduction node takes the .reduce of {', '.join(_OPS)}")
    if not x.is_array:
        raise TypeError(f"{what}: the operand must be an array with a sample axis")
    if len(_shape(x.array)) != 1 or _shape(out.array) != ():
        raise ValueError(f"{what}: on CUDA a reduction takes a 1-d operand and a 0-d out= (got "
                         f"{_shape(x.array)} into {_shape(out.array)}); reduce rows on the cpu, or "
                         "flatten the operand")
    dt, xd = _dtype(out.array), _dtype(x.array)
    char = dt.char
    if dt.name not in _C or f"{char}{char}->{char}" not in uf.types:
        raise TypeError(f"{what}: out= is {dt}; a reduction node accumulates in its output's dtype, which "
                        f"must be bool, an integer, float32 or float64 with a {name} loop of its own")
    src_bool = xd == bool and dt != bool
    if xd != dt and not src_bool:
        raise TypeError(f"{what}: the operand is {xd} and out= {dt}; give out= the operand's dtype (or "
                        "reduce a bool operand, a count)")
    mask = where if isinstance(where, Operand) else None
    if where is False:
        raise ValueError(f"{what}: where=False reduces no sample; leave the node out")
    if mask is not None:
        if _shape(mask.array) != _shape(x.array):
            raise ValueError(f"{what}: the mask {mask.name!r} has shape {_shape(mask.array)}; a reduction "
                             f"takes a per-sample mask of the operand's shape {_shape(x.array)}")
        if name in ("maximum", "minimum") and initial is None:
            raise ValueError(f"{what}: reduction operation '{name}' does not have an identity, so to use "
                             "a where mask one has to specify 'initial' (NumPy's rule)")
    init = None
    if initial is not None:
        init = np.asarray(initial).astype(dt, casting="same_kind")[()]
        if dt == bool:
            init = np.uint8(init)
    srcs = reduce_sources(name, dt, src_bool, mask is not None, init is not None)
    ident = np.asarray(reduce_identity(name, dt)).astype(np.uint8 if dt == bool else dt)[()]
    import cupy

    kernels = tuple(cupy.RawKernel(src, kname) for src, kname in srcs)
    return CudaReduceNode(uf, x, out, mask, init, kernels, dt, ident)


def cuda_at(uf, tally, index, weights):
    raise TypeError(f"ufunc({uf.__name__}.at) on CUDA arrays: tallies run on the cpu backend only (for "
                    "now); on CUDA reduce a per-sample mask per cell with ufunc(np.add.reduce, ...)")
