"""The C the benchmarks compile at run time, and eagle's kernels called from outside eagle.

Every C helper of ``eagle.bench`` is built here, by :func:`compile_helper` (``cc``,
or ``$CC``, into a temporary shared library loaded with ctypes): the C loop that
replays a graph's kernels (:func:`compile_c_loop`), the plain OpenMP loops of the
built-in kernels (:func:`compile_plain_loops`), the no-op and slowing kernel of the
rows below the table (:func:`compile_extra`) and ``eagle.bench.finished``'s
transport kernel (its source lives there; it is compiled here).

:class:`KernelArgs` and :func:`ctypes_range_call` call a native node's kernel
through ctypes (which releases the GIL), as a Python loop or a thread pool would.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

from eagle.native import CTYPES_KERNEL


# ---- compiling --------------------------------------------------------------------------

def find_cc():
    """The C compiler command: ``$CC``, else the first of cc, gcc, clang on PATH; or None."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def compile_helper(source, name, flag_sets):
    """(ctypes library, None) for C ``source`` built with the first of ``flag_sets`` that
    compiles, or (None, why it is skipped). The library stays mapped after its files go."""
    cc = find_cc()
    if not cc:
        return None, "no C compiler (cc) found"
    tmp = tempfile.mkdtemp(prefix="eagle_bench_")
    src, lib = os.path.join(tmp, f"{name}.c"), os.path.join(tmp, f"{name}.so")
    with open(src, "w") as f:
        f.write(source)
    try:
        for k, flags in enumerate(flag_sets):
            try:
                subprocess.run(cc.split() + flags + ["-shared", "-fPIC", "-o", lib, src],
                               check=True, capture_output=True, timeout=60)
                break
            except subprocess.CalledProcessError:
                if k == len(flag_sets) - 1:
                    raise
        return ctypes.CDLL(lib), None
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"{cc} could not build the {name} helper ({exc}; {detail.decode(errors='replace').strip()[:200]})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_C_LOOP = r"""
#include <stdint.h>
typedef void (*kernel_t)(int64_t, int64_t, char **, const int64_t *, void *);
void eagle_bench_c_loop(int64_t n_replays, int32_t n_nodes, void **fns, char ***data,
                        const int64_t **strides, void **user_data, int64_t size)
{
    for (int64_t r = 0; r < n_replays; ++r)
        for (int32_t i = 0; i < n_nodes; ++i)
            ((kernel_t)fns[i])(0, size, data[i], strides[i], user_data[i]);
}
"""


_PLAIN_LOOPS = r"""
#include <stdint.h>
void eagle_bench_plain_scale(int64_t reps, int32_t threads, int64_t n, double a,
                             const double *x, double *y)
{
    for (int64_t r = 0; r < reps; ++r) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t i = 0; i < n; ++i)
            y[i] = a * x[i];
    }
}
/* Horner per sample, as one would write it. gcc leaves it scalar even with `omp for simd`
   (it does not vectorise an outer loop around a variable-length inner one), where
   eagle's kernel (csrc/cpu/builtin_kernels.h) is blocked for the vectoriser: the table
   says so beside the row */
void eagle_bench_plain_polynomial(int64_t reps, int32_t threads, int64_t n, const double *c,
                                  int64_t degree, const double *x, double *y)
{
    for (int64_t r = 0; r < reps; ++r) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            double acc = c[degree];
            for (int64_t k = degree - 1; k >= 0; --k)
                acc = acc * x[i] + c[k];
            y[i] = acc;
        }
    }
}
"""


_C_EXTRA = r"""
#include <stdint.h>
#include <time.h>
void eagle_bench_noop(void) {}
/* cheap for the first state[0] calls, then about 2 ms a call */
void eagle_bench_slowing(int64_t start, int64_t stop, char **data, const int64_t *strides, void *ud)
{
    (void)start; (void)stop; (void)strides; (void)ud;
    int64_t *state = (int64_t *)data[0];
    if (__atomic_add_fetch(&state[1], 1, __ATOMIC_RELAXED) <= state[0])
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1e9 + (t.tv_nsec - t0.tv_nsec) < 2e6);
}
"""


#: the flags eagle.kernels is compiled with (setup.py), so that the plain loops are compared
#: like with like: -O3, OpenMP's simd pragmas honoured, no FMA contraction
KERNEL_FLAGS = ["-O3", "-ffp-contract=off"]
#: how the tables name the plain loops
PLAIN_LOOP_NAME = "plain C loop, eagle's cc flags"


def compile_plain_loops():
    """(ctypes library, None) of plain C loops doing what eagle's built-in kernels do,
    compiled with eagle.kernels' flags (:data:`KERNEL_FLAGS`) and ``-fopenmp`` (else
    ``-fopenmp-simd``: serial, still vectorised), or (None, why not)."""
    dll, why = compile_helper(_PLAIN_LOOPS, "plain", [KERNEL_FLAGS + ["-fopenmp"],
                                                      KERNEL_FLAGS + ["-fopenmp-simd"], KERNEL_FLAGS])
    if dll is None:
        return None, why
    i64, i32, dbl, ptr = ctypes.c_int64, ctypes.c_int32, ctypes.c_double, ctypes.c_void_p
    dll.eagle_bench_plain_scale.argtypes = [i64, i32, i64, dbl, ptr, ptr]
    dll.eagle_bench_plain_scale.restype = None
    dll.eagle_bench_plain_polynomial.argtypes = [i64, i32, i64, ptr, i64, ptr, ptr]
    dll.eagle_bench_plain_polynomial.restype = None
    return dll, None


def compile_c_loop():
    """(ctypes function, None) for the C loop helper, or (None, why it is skipped)."""
    dll, why = compile_helper(_C_LOOP, "loop", [["-O2"]])
    if dll is None:
        return None, why
    fn = dll.eagle_bench_c_loop
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, ctypes.c_int32] + [ctypes.c_void_p] * 4 + [ctypes.c_int64]
    return fn, None


def compile_extra():
    """The ctypes library of the rows below the table, or (None, why)."""
    return compile_helper(_C_EXTRA, "extra", [["-O2"]])


# ---- calling the kernels from outside eagle ------------------------------------------

class KernelArgs:
    """A native node's kernel and its arguments as C values, kept alive together."""

    def __init__(self, node):
        arrays = node.arrays_in_order
        self.fn_address = node.kernel.address
        self.user_data = node.kernel.user_data_address
        self.data = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        self.strides = (ctypes.c_int64 * len(arrays))(*[a.strides[0] for a in arrays])
        self.arrays = arrays


def ctypes_call(node, samples):
    """A no-argument callable running ``node``'s kernel over [0, samples) through ctypes
    (which releases the GIL for the call, so threads run it in parallel)."""
    return ctypes_range_call(node)(0, samples)


def ctypes_range_call(node):
    """make(start, stop) -> a no-argument callable running ``node``'s kernel over [start, stop)."""
    args = KernelArgs(node)
    fn = CTYPES_KERNEL(args.fn_address)
    data = ctypes.cast(args.data, ctypes.POINTER(ctypes.c_char_p))
    strides = ctypes.cast(args.strides, ctypes.POINTER(ctypes.c_int64))
    ud = args.user_data

    def make(start, stop):
        def call(_keep=args):
            fn(start, stop, data, strides, ud)
        return call
    return make
