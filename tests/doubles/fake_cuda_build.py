"""How the tests build and bind the CUDA test doubles (nothing here is eagle's).

``build_fake_libcuda`` compiles the CPU stand-in of the CUDA driver
(tests/doubles/fake_libcuda.c, a TEST DOUBLE) into ``out_dir`` as ``libcuda.so.1``;
``build_emulated_module`` compiles eagle's own CUDA C source (eagle/cuda/kernels/)
with the CUDA C emulator (tests/doubles/cuda_emulation.h) into a shared object the
stand-in loads; ``bind_fake_libcuda`` declares the ctypes signatures of the
stand-in's test-only controls (fake_cuda_*). Used by tests/helpers/standin_fixtures.py,
tests/helpers/backends.py and tests/mpi/test_nccl_standin.py.

``DOUBLES_CFLAGS``: extra compiler flags for every test double the tests compile,
from env EAGLE_DOUBLES_CFLAGS (tests/sanitize.sh sets the sanitizer flags there, so
the doubles are checked with eagle; tests/mpi builds fake_mpi.c and fake_nccl.c
with them too).
"""
import ctypes
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

DOUBLES = Path(__file__).resolve().parent
ROOT = DOUBLES.parents[1]
FAKE_LIBCUDA_SRC = DOUBLES / "fake_libcuda.c"
KERNELS_DIR = ROOT / "eagle" / "cuda" / "kernels"
PUBLIC_HEADERS = ROOT / "csrc" / "include"   # random.cu includes eagle/philox.h
DOUBLES_CFLAGS = shlex.split(os.environ.get("EAGLE_DOUBLES_CFLAGS", ""))


def _compiler(names):
    for cc in names:
        if cc and shutil.which(cc):
            return cc
    return None


def build_fake_libcuda(out_dir, extra=()):
    cc = _compiler((os.environ.get("CC"), "cc", "gcc", "clang"))
    if cc is None:
        pytest.skip("no C compiler to build the CUDA driver stand-in")
    out = Path(out_dir) / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *DOUBLES_CFLAGS, *extra, str(FAKE_LIBCUDA_SRC), "-o", str(out),
                    "-lpthread", "-ldl"], check=True)
    return str(out)


def build_emulated_module(out_dir, sources=None, kernels=None, ftz=None):
    """Compile CUDA C `sources` with the emulator into one shared object (kernels: names).
    ``ftz``: model CuPy's -ftz=true (float32 flushes subnormals, cuda_emulation.h); by
    default on for eagle's own modules (sources None), which CuPy compiles on a GPU."""
    cxx = _compiler((os.environ.get("CXX"), "c++", "g++", "clang++"))
    if cxx is None:
        pytest.skip("no C++ compiler for the CUDA C emulator")
    if ftz is None:
        ftz = sources is None
    if sources is None:
        sources = [KERNELS_DIR / "partition.cu", KERNELS_DIR / "until_done.cu", KERNELS_DIR / "random.cu",
                   KERNELS_DIR / "control.cu"]
    if kernels is None:
        from eagle.cuda.finished import CONTROL_KERNELS, KERNELS, RANDOM_KERNELS, UNTIL_DONE_KERNELS
        kernels = list(KERNELS) + list(UNTIL_DONE_KERNELS) + list(RANDOM_KERNELS) + list(CONTROL_KERNELS)
    unit = Path(out_dir) / "kernels_emulated.cpp"
    # each .cu in a namespace of its own would hide extern "C" names; they share one unit
    unit.write_text('#include "cuda_emulation.h"\n' + "".join(f'#include "{s}"\n' for s in sources)
                    + "EAGLE_EMU_MODULE(" + ", ".join(f"EAGLE_EMU_KERNEL({k})" for k in kernels) + ")\n")
    out = Path(out_dir) / "kernels_emulated.so"
    # -fno-gnu-unique (g++): the emulator's function-local statics (its thread pool) would
    # otherwise be one per process (STB_GNU_UNIQUE, even under RTLD_LOCAL), and a second
    # module loaded would run its kernels on the first one's pool, with the first's threadIdx;
    # -ffp-contract=off: philox.h's host path, as the CPU kernels are built (the same bits)
    unique = ["-fno-gnu-unique"] if "clang" not in Path(cxx).name else []
    subprocess.run([cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-shared", "-fPIC", *unique, *DOUBLES_CFLAGS,
                    *(["-DEAGLE_EMU_FTZ"] if ftz else []),
                    "-I", str(DOUBLES), "-I", str(PUBLIC_HEADERS), str(unit),
                    "-o", str(out), "-lpthread"], check=True)
    return str(out)


def bind_fake_libcuda(lib):
    lib.fake_cuda_counter.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_counter.restype = ctypes.c_long
    lib.fake_cuda_live.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_live.restype = ctypes.c_long
    lib.fake_cuda_launch_count.restype = ctypes.c_long
    lib.fake_cuda_nodes_listed.restype = ctypes.c_long
    lib.fake_cuda_last_grid_x.restype = ctypes.c_uint
    lib.fake_cuda_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.fake_cuda_fail_instantiate_at_node.argtypes = [ctypes.c_long]
    lib.fake_cuda_fail_instantiate_at_kernel.argtypes = [ctypes.c_void_p]
    lib.fake_cuda_kernel.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_kernel.restype = ctypes.c_void_p
    lib.fake_cuda_module_function.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_module_function.restype = ctypes.c_void_p
    lib.fake_cuda_load_module.argtypes = [ctypes.c_char_p]
    lib.fake_cuda_is_device.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
    lib.fake_cuda_library_kernel.argtypes = [ctypes.c_void_p]
    lib.fake_cuda_library_kernel.restype = ctypes.c_void_p
    lib.fake_cuda_set_kernel_node_form.argtypes = [ctypes.c_int]
    lib.fake_cuda_dead_handle_uses.restype = ctypes.c_long
    return lib


class EmulatedKernels:
    """TEST DOUBLE of eagle's partition kernels on a GPU: the same CUDA source run by the
    stand-in driver's CUDA C emulator (``build_emulated_module`` loaded into it).
    Registered with ``eagle.cuda.finished.set_kernel_provider`` by the ``emulated_kernels``
    fixture; production code never looks for it."""

    def __init__(self, lib):
        from eagle.cuda.finished import KERNELS

        self._lookup = lib.fake_cuda_module_function
        self._addr = {}
        for name in KERNELS:
            self._addr[name] = self.function(name)

    def function(self, name):
        addr = self._addr.get(name) or self._lookup(name.encode())
        if not addr:
            raise RuntimeError(f"the CUDA driver stand-in has no emulated kernel {name} "
                               "(load eagle/cuda/kernels/*.cu into it first)")
        self._addr[name] = addr
        return addr

    def launch(self, name, stream, grid, block, args):
        from eagle.cuda import _stream

        conv = [ctypes.c_double(v) if t == "d" else ctypes.c_int64(v) for t, v in args]
        _stream.launch_kernel(self.function(name), grid, block, conv, 0, stream)

