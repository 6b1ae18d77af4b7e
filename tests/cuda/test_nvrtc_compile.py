"""eagle's CUDA C under the compilers a GPU run hands it to: every module eagle ships and
every kernel it generates, through the real NVRTC (tests/helpers/real_nvrtc.py, NVIDIA's
pip wheel; skipped with the reason where it is not installed) with the options eagle
gives CuPy plus those CuPy appends, for sm_90 and an older architecture.

The stand-in compiles eagle's kernels with the host's C++ compiler (C++17, GNU
extensions), which accepts what NVRTC refuses under those options.
"""
import shutil
import subprocess
from pathlib import Path

import pytest
import real_nvrtc

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "csrc" / "include"


def test_philox_header_is_strict_cplusplus11(tmp_path):
    # random.cu is compiled with --std=c++11: no C++17 feature (hexadecimal floats) in philox.h
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "use_philox.cpp"
    src.write_text('#include "eagle/philox.h"\n'
                   "double f(void) { return eagle_normal_from_words(eagle_philox4x32_10(1, 2, 3, 4, 5, 6))"
                   " + eagle_u01_24(7) + eagle_scale_uniform(0.5, 0, 1, 0.9); }\n")
    r = subprocess.run([cxx, "-std=c++11", "-pedantic-errors", "-fsyntax-only", "-I", str(INCLUDE), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---- the real NVRTC (NVIDIA's pip wheel: no GPU needed) ------------------------------------
# CuPy appends these to every compile (cupy/cuda/compiler.py, 13.x and 14.x: "-ftz=true",
# then the architecture of the device; an H200 is sm_90, sm_75 the oldest CUDA 13 targets)
ARCHES = ("sm_90", "sm_75")


def cupy_appends(arch):
    return ("-ftz=true", f"-arch={arch}")


@pytest.fixture(scope="module")
def nvrtc():
    try:
        return real_nvrtc.load()
    except real_nvrtc.Unavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("module", ["partition", "until_done", "control", "random"])
def test_every_shipped_module_compiles_with_cupy_s_options(nvrtc, module, arch):
    from eagle.cuda import kernel_source
    from eagle.cuda.finished import CONTROL_KERNELS, KERNELS, RANDOM_KERNELS, UNTIL_DONE_KERNELS, module_options

    ptx, log = nvrtc.compile(kernel_source(module), module_options(module) + cupy_appends(arch), f"{module}.cu")
    assert "warning" not in log, log
    names = {"partition": KERNELS, "until_done": UNTIL_DONE_KERNELS, "control": CONTROL_KERNELS,
             "random": RANDOM_KERNELS}[module]
    for k in names:   # each kernel eagle looks up by name, with the parameter count it launches with
        body = real_nvrtc.ptx_function(ptx, k)
        assert body.split(")", 1)[0].count(".param") == names[k], (k, body[:400])



def generated_ufunc_kernels():
    """{kernel name: source} of the kernels eagle.cuda.ufunc_node generates: each ufunc of
    CUDA_EXPRESSIONS and each of NumPy's loops for it, with arrays or scalars and each where=
    form; and all-array kernels whose arrays have another dtype than the loop's (bool, int8 or
    float32 inputs; a float64 or bool output) where NumPy casts them under 'same_kind'."""
    import numpy as np

    from eagle.cuda.ufunc_node import CUDA_EXPRESSIONS, cuda_source

    made = {}

    def add(*args):
        got = cuda_source(*args)
        if got is not None:
            made[got[1]] = got[0]

    for name in CUDA_EXPRESSIONS:
        uf = getattr(np, name)
        for loop in uf.types:
            ins, out = loop.split("->")
            dts = [np.dtype(c) for c in ins + out]
            for scalars in [(False,) * uf.nin] + ([(True, False), (False, True)] if uf.nin == 2 else []):
                for where in (True, "array", False):
                    add(name, dts, list(scalars), None, where)
            for other in (np.bool_, np.int8, np.float32):
                if np.dtype(other) != dts[0] and np.can_cast(other, dts[0], "same_kind"):
                    add(name, dts, [False] * uf.nin, [np.dtype(other)] * uf.nin + [dts[-1]], True)
            for od in (np.float64, np.bool_):
                if np.dtype(od) != dts[-1] and np.can_cast(dts[-1], od, "same_kind"):
                    add(name, dts, [False] * uf.nin, dts[:-1] + [np.dtype(od)], True)
    return made


@pytest.mark.parametrize("arch", ARCHES)
def test_every_generated_ufunc_kernel_compiles(nvrtc, arch):
    kernels = generated_ufunc_kernels()
    assert len(kernels) > 500
    # cuda_ufunc compiles each with cupy.RawKernel(source, name): no options of eagle's
    ptx, _ = nvrtc.compile("".join(kernels.values()), cupy_appends(arch), "ufuncs.cu")
    for k in kernels:
        real_nvrtc.ptx_function(ptx, k)


@pytest.mark.parametrize("kernel", ["eagle_random", "eagle_distribution"])
@pytest.mark.parametrize("arch", ARCHES)
def test_random_kernel_has_no_flush_to_zero_instruction(nvrtc, arch, kernel):
    # CuPy appends -ftz=true: a float32 instruction the compiler picks gets .ftz and flushes
    # subnormal parameters and results to 0, where the CPU keeps them; eagle_random must
    # and eagle_distribution give the CPU's bits, so their float32 work is explicit PTX (philox.h)
    from eagle.cuda import kernel_source
    from eagle.cuda.finished import module_options

    ptx, _ = nvrtc.compile(kernel_source("random"), module_options("random") + cupy_appends(arch), "random.cu")
    body = real_nvrtc.ptx_function(ptx, kernel)
    assert ".f32" in body                       # the float32 paths are there ...
    flushing = [ln.strip() for ln in body.splitlines() if ".ftz" in ln]
    assert not flushing, flushing               # ... and none flushes
    contracted = [ln.strip() for ln in body.splitlines() if ln.strip().startswith("fma.") and ".f32" in ln]
    assert not contracted, contracted


def generated_reduction_kernels():
    """{kernel name: source} of the two kernels eagle.cuda.reduce_node generates for each
    reduction it accepts: each op, each dtype with a loop of its own, a bool operand counted
    into an integer, with and without a mask and initial=."""
    import numpy as np

    from eagle.cuda.reduce_node import _C, _OPS, reduce_sources

    made = {}
    for op in _OPS:
        uf = getattr(np, op)
        for name in _C:
            dt = np.dtype(name)
            if f"{dt.char}{dt.char}->{dt.char}" not in uf.types:
                continue
            for src_bool in ((False, True) if dt != bool else (False,)):
                for masked in (False, True):
                    for has_initial in (False, True):
                        for src, kname in reduce_sources(op, dt, src_bool, masked, has_initial):
                            made[kname] = src
    return made


def test_every_generated_reduction_kernel_compiles(nvrtc):
    # sm_90 only (the H200's): 1,096 kernels of unrolled lanes take NVRTC a minute per
    # architecture on these cores, and the older one is covered by the tests above
    arch = "sm_90"
    kernels = generated_reduction_kernels()
    assert len(kernels) > 100
    # cuda_reduce compiles each with cupy.RawKernel(source, name): no options of eagle's
    ptx, _ = nvrtc.compile("".join(kernels.values()), cupy_appends(arch), "reductions.cu")
    for k in kernels:
        real_nvrtc.ptx_function(ptx, k)
