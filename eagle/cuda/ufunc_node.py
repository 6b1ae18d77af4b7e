"""Ufunc nodes on the GPU: ``eagle.graph.ufunc`` given CuPy arrays.

For the ufuncs in ``CUDA_EXPRESSIONS`` on 1-d operands, a sized ``cuda_kernel``
node running an elementwise kernel eagle generates (retuned by patching, like
any sized kernel); for any other ufunc an opaque node that calls the CuPy ufunc
during capture, which keeps the size it was captured with. A generated kernel's
output may be one of its inputs exactly (in place) but not overlap one otherwise:
its threads and blocks run at once, so that is refused with ``ValueError``.
"""
from __future__ import annotations

import numpy as np

from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
from eagle.record.node import opaque
from eagle.record.ufunc_operands import declare, weak_dtype

__all__ = ["CUDA_EXPRESSIONS", "cuda_source", "cuda_ufunc"]

#: ufuncs eagle writes an elementwise CUDA kernel for: name -> C expression of a, b
CUDA_EXPRESSIONS = {
    "add": "a + b", "subtract": "a - b", "multiply": "a * b", "divide": "a / b",
    "true_divide": "a / b", "negative": "-a", "positive": "a", "square": "a * a",
    "maximum": "(a > b || a != a) ? a : b", "minimum": "(a < b || a != a) ? a : b",
    "sqrt": "sqrt(a)", "exp": "exp(a)", "log": "log(a)", "sin": "sin(a)", "cos": "cos(a)",
    "tanh": "tanh(a)", "absolute": "fabs(a)", "fabs": "fabs(a)", "reciprocal": "1 / a",
}
_FLOAT_ONLY = {"sqrt", "exp", "log", "sin", "cos", "tanh", "fabs"}
_C_TYPES = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int",
            "uint64": "unsigned long long", "uint32": "unsigned int"}


def cuda_source(name, loop_dtypes, scalar_args):
    """(CUDA source, kernel name) of an elementwise kernel for ufunc ``name`` over 1-d
    operands, or None when eagle does not generate one for these dtypes.

    ``scalar_args[k]`` says whether input k is a scalar passed by value. The
    kernel takes, per operand, a pointer and a byte stride (or, for a scalar
    input, its value), then the logical size ``n`` (``long long``).
    """
    expr = CUDA_EXPRESSIONS.get(name)
    nin = len(scalar_args)
    if expr is None or len(loop_dtypes) != nin + 1 or nin not in (1, 2):
        return None
    ctypes_ = [_C_TYPES.get(np.dtype(d).name) for d in loop_dtypes]
    if None in ctypes_ or len(set(ctypes_)) != 1:
        return None
    t = ctypes_[0]
    if name in _FLOAT_ONLY and t not in ("double", "float"):
        return None
    if name == "absolute" and t not in ("double", "float"):
        expr = "(a < 0 ? -a : a)"
    kname = f"eagle_ufunc_{name}_{np.dtype(loop_dtypes[0]).name}_" + \
        "".join("s" if s else "a" for s in scalar_args)
    params, loads = [], []
    for k, (var, scalar) in enumerate(zip("ab", scalar_args)):
        if scalar:
            params.append(f"{t} {var}")
        else:
            params.append(f"const char *in{k}, long long s{k}")
            loads.append(f"    {t} {var} = *(const {t} *)(in{k} + i * s{k});")
    src = (f'extern "C" __global__ void {kname}({", ".join(params)}, char *out0, long long so, '
           f"long long n) {{\n"
           f"    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
           f"    if (i >= n) return;\n" + "\n".join(loads) + "\n"
           f"    *({t} *)(out0 + i * so) = ({t})({expr});\n}}\n")
    return src, kname


def _cuda_strides(a):
    cai = a.__cuda_array_interface__
    strides = cai.get("strides")
    itemsize = np.dtype(cai["typestr"]).itemsize
    return strides[0] if strides else itemsize


def _check_overlap(uf, ins, outs):
    """Refuse an output that overlaps an operand other than element for element.

    The generated kernel's threads, in blocks the GPU runs in any order and at once,
    each read their inputs and write their output element: exact in-place (the same
    pointer, shape, strides and dtype) is safe, any other overlap is a race between
    threads and blocks (NumPy would buffer it). As the CPU ufunc node refuses it."""
    from eagle.record.memory import overlap

    def layout(a):
        cai = a.__cuda_array_interface__
        return cai["data"][0], tuple(cai["shape"]), _cuda_strides(a), cai["typestr"]

    for o in outs:
        if 0 in o.array.__cuda_array_interface__["shape"]:
            continue
        if _cuda_strides(o.array) == 0 and o.array.__cuda_array_interface__["shape"][0] > 1:
            raise ValueError(f"{uf.__name__}: elements of output {o.name!r} share memory (stride 0); "
                             "a ufunc node's threads would race writing them (give an output whose "
                             "elements are distinct)")
        for op in ins + outs:
            if op is o or not op.is_array or 0 in op.array.__cuda_array_interface__["shape"]:
                continue
            if layout(op.array) == layout(o.array) and any(op is x for x in ins):
                continue   # exact in-place: thread i reads and writes element i
            if overlap(o.array, op.array):
                raise ValueError(f"{uf.__name__}: output {o.name!r} overlaps {op.name!r} other than "
                                 "element for element; the GPU's threads and blocks would race (NumPy "
                                 "would buffer it, a ufunc node does not: give a separate output array)")


def cuda_ufunc(uf, ins, outs):
    """``eagle.graph.ufunc`` on CUDA arrays (it dispatches here): a sized ``cuda_kernel`` node
    running a generated kernel, or an opaque node calling CuPy's ufunc during capture."""
    reads, writes, _ = declare(ins, outs)
    dtypes = [np.dtype(op.array.__cuda_array_interface__["typestr"]) if op.is_array
              else weak_dtype(op.value) for op in ins + outs]
    loop_dtypes = uf.resolve_dtypes(tuple(dtypes), casting="same_kind")
    one_d = all(len(op.array.__cuda_array_interface__["shape"]) == 1 for op in ins + outs if op.is_array)
    exact = all(not op.is_array or d == want for op, d, want in zip(ins + outs, dtypes, loop_dtypes))
    made = None
    if one_d and exact and uf.nout == 1:
        made = cuda_source(uf.__name__, loop_dtypes, [not op.is_array for op in ins])
    if made is not None:
        _check_overlap(uf, ins, outs)
        import cupy

        src, kname = made
        kernel = cupy.RawKernel(src, kname)
        args = []
        for op, want in zip(ins, loop_dtypes):
            if op.is_array:
                args += [op.array, np.int64(_cuda_strides(op.array))]
            else:
                args.append(np.asarray(op.value).astype(want, casting="same_kind")[()])
        args += [outs[0].array, np.int64(_cuda_strides(outs[0].array)), SIZE]
        return cuda_kernel(kernel, args, reads=reads, writes=writes)
    # any other ufunc: CuPy's own, called while the graph is captured (keeps its captured size)
    import cupy

    cp_uf = getattr(cupy, uf.__name__, None)
    if cp_uf is None:
        raise TypeError(f"CuPy has no ufunc {uf.__name__!r}, and eagle generates no CUDA kernel for it")
    args = [op.array if op.is_array else op.value for op in ins]
    out_arrays = tuple(o.array for o in outs)

    def run():
        cp_uf(*args, out=out_arrays if len(out_arrays) > 1 else out_arrays[0])

    run.__name__ = uf.__name__
    return opaque(run, reads=reads, writes=writes)
