"""Ufunc nodes on the GPU: ``eagle.graph.ufunc`` given CuPy arrays.

For the ufuncs in ``CUDA_EXPRESSIONS`` on 1-d operands, a sized ``cuda_kernel``
node running an elementwise kernel eagle generates (retuned by patching, like
any sized kernel); for any other ufunc an opaque node that calls the CuPy ufunc
during capture, which keeps the size it was captured with.

Casting and ``where=`` are NumPy's, as on the CPU: the loop is the one NumPy
resolves under its default casting (``uf.resolve_dtypes``, which refuses what
NumPy refuses); the generated kernel loads each array in its own dtype and
converts it to the loop's C type, converts the result to the output's dtype,
and with a mask returns early for a sample whose mask is false (the output
keeps its value). The opaque fallback computes CuPy's ufunc into a scratch
array of the loop's result dtype (allocated when the node is made) and copies
it into ``out`` where the mask is set (``cupy.copyto``, casting 'same_kind'). A generated kernel's
output may be one of its inputs exactly (in place) but not overlap one otherwise:
its threads and blocks run at once, so that is refused with ``ValueError``.
Arrays must be in the device's byte order (a byte-swapped ``__cuda_array_interface__``
dtype is refused with ``TypeError``: CuPy has none, and the kernel would read swapped bytes).
"""
from __future__ import annotations

import numpy as np

from eagle.cuda.kernel_nodes import SIZE, cuda_kernel
from eagle.record.node import opaque
from eagle.record.ufunc_operands import Operand, declare, weak_dtype

__all__ = ["CUDA_EXPRESSIONS", "cuda_source", "cuda_ufunc"]

#: ufuncs eagle writes an elementwise CUDA kernel for: name -> C expression of a, b
CUDA_EXPRESSIONS = {
    "add": "a + b", "subtract": "a - b", "multiply": "a * b", "divide": "a / b",
    "true_divide": "a / b", "negative": "-a", "positive": "a", "square": "a * a",
    "maximum": "(a > b || a != a) ? a : b", "minimum": "(a < b || a != a) ? a : b",
    "sqrt": "sqrt(a)", "exp": "exp(a)", "log": "log(a)", "sin": "sin(a)", "cos": "cos(a)",
    "tanh": "tanh(a)", "absolute": "fabs(a)", "fabs": "fabs(a)", "reciprocal": "1 / a",
}
#: comparisons: two operands of one type, a bool result
_COMPARISONS = {"greater": "a > b", "greater_equal": "a >= b", "less": "a < b", "less_equal": "a <= b",
                "equal": "a == b", "not_equal": "a != b"}
CUDA_EXPRESSIONS.update(_COMPARISONS)
_FLOAT_ONLY = {"sqrt", "exp", "log", "sin", "cos", "tanh", "fabs"}
_C_TYPES = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int",
            "uint64": "unsigned long long", "uint32": "unsigned int", "int16": "short",
            "uint16": "unsigned short", "int8": "signed char", "uint8": "unsigned char"}
#: C types an array operand may have besides the loop's (loaded, then converted as NumPy casts)
_ARRAY_C_TYPES = dict(_C_TYPES, bool="unsigned char")


def cuda_source(name, loop_dtypes, scalar_args, array_dtypes=None, where=True):
    """(CUDA source, kernel name) of an elementwise kernel for ufunc ``name`` over 1-d
    operands, or None when eagle does not generate one for these dtypes.

    ``scalar_args[k]`` says whether input k is a scalar passed by value. The
    kernel takes, per operand, a pointer and a byte stride (or, for a scalar
    input, its value), then, with ``where="array"``, the mask's pointer and byte
    stride (``const unsigned char *``, a sample with a zero byte is left alone),
    then the logical size ``n`` (``long long``). ``array_dtypes`` (inputs then
    the output; None for a scalar) are the arrays' own dtypes where they differ
    from the loop's: the kernel converts them to and from the loop's C type as
    NumPy's casts do. ``where=False`` makes a kernel that writes nothing.
    """
    expr = CUDA_EXPRESSIONS.get(name)
    nin = len(scalar_args)
    if expr is None or len(loop_dtypes) != nin + 1 or nin not in (1, 2):
        return None
    if array_dtypes is None:
        array_dtypes = [None if sc else d for sc, d in zip(scalar_args, loop_dtypes)] + [loop_dtypes[-1]]
    array_ct = [None if d is None else _ARRAY_C_TYPES.get(np.dtype(d).name) for d in array_dtypes]
    if any(c is None for c, d in zip(array_ct, array_dtypes) if d is not None):
        return None
    compare = name in _COMPARISONS
    if compare and np.dtype(loop_dtypes[-1]) != np.bool_:
        return None
    ctypes_ = [_C_TYPES.get(np.dtype(d).name) for d in (loop_dtypes[:-1] if compare else loop_dtypes)]
    if None in ctypes_ or len(set(ctypes_)) != 1:
        return None
    t = ctypes_[0]
    if name in _FLOAT_ONLY and t not in ("double", "float"):
        return None
    if name == "absolute" and t not in ("double", "float"):
        expr = "(a < 0 ? -a : a)"
    loop_name = np.dtype(loop_dtypes[0]).name
    kname = f"eagle_ufunc_{name}_{loop_name}_" + "".join("s" if s else "a" for s in scalar_args)
    if any(d is not None and np.dtype(d).name != loop_name for d in array_dtypes):
        kname += "_" + "_".join(np.dtype(d).name for d in array_dtypes if d is not None)
    if where is not True:
        kname += "_where" if where == "array" else "_nowhere"
    params, loads = [], []
    for k, (var, scalar) in enumerate(zip("ab", scalar_args)):
        if scalar:
            params.append(f"{t} {var}")
        else:
            params.append(f"const char *in{k}, long long s{k}")
            # a C conversion is NumPy's cast for these types: int widening and wrapping,
            # int to float and float rounding; a bool is its 0/1 byte
            conv = "" if array_ct[k] == t else f"({t})"
            loads.append(f"    {t} {var} = {conv}*(const {array_ct[k]} *)(in{k} + i * s{k});")
    mask = ""
    if where == "array":
        params.append("const unsigned char *wm, long long sw")
        mask = "    if (!wm[i * sw]) return;\n"
    elif where is False:
        mask = "    return;   /* where=False: no sample is written */\n"
    out_t = array_ct[-1]
    value = f"({t})({expr})"
    if np.dtype(array_dtypes[-1]) == np.bool_:
        store = f"({out_t})({value} != 0)"
    else:
        store = value if out_t == t else f"({out_t}){value}"
    src = (f'extern "C" __global__ void {kname}({", ".join(params)}, char *out0, long long so, '
           f"long long n) {{\n"
           f"    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
           f"    if (i >= n) return;\n" + mask + "\n".join(loads) + "\n"
           f"    *({out_t} *)(out0 + i * so) = {store};\n}}\n")
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


def _cuda_dtype(a):
    return np.dtype(a.__cuda_array_interface__["typestr"])


def _cuda_shape(a):
    return tuple(a.__cuda_array_interface__["shape"])


def cuda_ufunc(uf, ins, outs, where=True):
    """``eagle.graph.ufunc`` on CUDA arrays (it dispatches here): a sized ``cuda_kernel`` node
    running a generated kernel, or an opaque node calling CuPy's ufunc during capture.
    ``where``: True, False or the mask's ``Operand`` (``parse_where``)."""
    mask = where if isinstance(where, Operand) else None
    reads, writes, _ = declare(ins, outs, where)
    dtypes = [_cuda_dtype(op.array) if op.is_array else weak_dtype(op.value) for op in ins + outs]
    for op in ins + outs + ([mask] if mask is not None else []):
        if op.is_array and not _cuda_dtype(op.array).isnative:
            # a generated kernel loads the bytes in the device's order (CuPy has no
            # byte-swapped arrays to fall back on): it would compute on swapped bytes
            raise TypeError(f"{uf.__name__}: {op.name!r} is {_cuda_dtype(op.array).str}, not in the "
                            "device's byte order; a CUDA ufunc node takes native-order arrays "
                            "(CuPy has no byte-swapped ones)")
    try:
        loop_dtypes = uf.resolve_dtypes(tuple(dtypes), casting="same_kind")
    except TypeError as e:
        shown = ", ".join(d.__name__ if isinstance(d, type) else str(d) for d in dtypes)
        raise TypeError(f"{uf.__name__} has no loop NumPy would run for ({shown}) under "
                        f"casting='same_kind': {e}") from None
    shapes = [_cuda_shape(op.array) for op in ins + outs if op.is_array and _cuda_shape(op.array)]
    if mask is not None:
        mshape = _cuda_shape(mask.array)
        if mshape and (not shapes or mshape[0] != shapes[0][0] or
                       any(m not in (1, s) for m, s in zip(mshape[1:], shapes[0][1:]))
                       or len(mshape) != len(shapes[0])):
            raise ValueError(f"{uf.__name__}: the mask {mask.name!r} has shape {mshape}; a ufunc node "
                             f"takes a per-sample mask of the operands' shape {shapes[0] if shapes else ()}"
                             " (or a 0-d mask or a scalar)")
    whole = all(len(op.array.__cuda_array_interface__["shape"]) == 0 for op in ins + outs if op.is_array)
    if whole and mask is not None and _cuda_shape(mask.array):
        raise ValueError(f"{uf.__name__}: the operands are 0-d, so the mask {mask.name!r} is too")
    one_d = whole or all(len(op.array.__cuda_array_interface__["shape"]) == 1
                         for op in ins + outs if op.is_array)
    if mask is not None:
        one_d = one_d and len(_cuda_shape(mask.array)) <= 1
    made = None
    if one_d and uf.nout == 1:
        arrays = [_cuda_dtype(op.array) if op.is_array else None for op in ins + outs]
        made = cuda_source(uf.__name__, loop_dtypes, [not op.is_array for op in ins], arrays,
                           "array" if mask is not None else where)
    if made is not None:
        _check_overlap(uf, ins + ([mask] if mask is not None else []), outs)   # the mask is read too
        import cupy

        src, kname = made
        kernel = cupy.RawKernel(src, kname)
        args = []
        for op, want in zip(ins, loop_dtypes):
            if op.is_array:
                args += [op.array, np.int64(_cuda_strides(op.array))]
            else:
                args.append(np.asarray(op.value).astype(want, casting="same_kind")[()])
        if mask is not None:
            stride = _cuda_strides(mask.array) if _cuda_shape(mask.array) else 0
            args += [mask.array, np.int64(stride)]
        args += [outs[0].array, np.int64(_cuda_strides(outs[0].array)), SIZE]
        node = cuda_kernel(kernel, args, reads=reads, writes=writes)
        if whole:
            # 0-d operands: not per-sample; one element on every replay (eagle.cuda.whole_node)
            from eagle.cuda.whole_node import CudaWholeNode

            return CudaWholeNode(uf.__name__, node)
        return node
    # any other ufunc: CuPy's own, called while the graph is captured (keeps its captured size)
    import cupy

    cp_uf = getattr(cupy, uf.__name__, None)
    if cp_uf is None:
        raise TypeError(f"CuPy has no ufunc {uf.__name__!r}, and eagle generates no CUDA kernel for it")
    args = [op.array if op.is_array else op.value for op in ins]
    out_arrays = tuple(o.array for o in outs)
    if where is False:
        def run():
            pass
    elif mask is None:
        def run():
            cp_uf(*args, out=out_arrays if len(out_arrays) > 1 else out_arrays[0])
    else:
        # NumPy's masked call: the loop's results, cast into out where the mask is set;
        # the scratch is allocated now, not while the graph is captured
        scratch = tuple(cupy.empty(_cuda_shape(o), dtype=d) for o, d in
                        zip(out_arrays, loop_dtypes[uf.nin:]))

        def run():
            cp_uf(*args, out=scratch if len(scratch) > 1 else scratch[0])
            for o, t in zip(out_arrays, scratch):
                cupy.copyto(o, t, casting="same_kind", where=mask.array)

    run.__name__ = uf.__name__
    return opaque(run, reads=reads, writes=writes)
