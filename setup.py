"""Build eagle's compiled parts: the Cython modules in eagle/ and the C layer in csrc/.

OpenMP is used where the compiler supports it; without it the executor is built
serial and says so (at build time here, and at run time in eagle.show_config()).
Nothing here needs a CUDA toolkit: eagle reaches CUDA through the driver
(libcuda.so.1), which is opened at run time.
"""
import glob
import os
import shutil
import sys
import sysconfig
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join("csrc")
CPU_SRC = os.path.join(CSRC, "cpu")            # the OpenMP executor and its team choice
PUBLIC_HEADERS = os.path.join(CSRC, "include")  # eagle/*.h, eagle/*.hpp, eagle/detail/*.h


def compiler_supports_openmp():
    """Compile and link a tiny OpenMP program with the compiler Python was built with."""
    if os.environ.get("EAGLE_DISABLE_OPENMP"):
        return False
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    cc = new_compiler()
    customize_compiler(cc)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "omp_check.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){int n=0;\n#pragma omp parallel\n{n=omp_get_num_threads();}\nreturn n>0?0:1;}\n")
        try:
            objs = cc.compile([src], output_dir=tmp, extra_postargs=["-fopenmp"])
            cc.link_executable(objs, os.path.join(tmp, "omp_check"), extra_postargs=["-fopenmp"])
        except Exception:
            return False
    return True


HAVE_OPENMP = compiler_supports_openmp()
if HAVE_OPENMP:
    print("eagle: building the CPU executor with OpenMP")
    omp_compile, omp_link = ["-fopenmp"], ["-fopenmp"]
else:
    print("eagle: WARNING: the compiler has no OpenMP; the CPU executor is built serial "
          "(eagle.show_config() says so)", file=sys.stderr)
    omp_compile, omp_link = [], []

# EAGLE_SANITIZE=1 (or a -fsanitize= list, e.g. "address"): every extension is compiled and
# linked with the sanitizers (default address,undefined), for tests/sanitize.sh, which builds
# this way in a scratch copy of the tree; env CFLAGS would not reach the link step as reliably
SANITIZE = os.environ.get("EAGLE_SANITIZE", "").strip()
if SANITIZE and sys.platform != "win32":
    _sanitizers = "address,undefined" if SANITIZE == "1" else SANITIZE
    print(f"eagle: building with -fsanitize={_sanitizers}")
    san_compile = [f"-fsanitize={_sanitizers}", "-fno-omit-frame-pointer", "-g"]
    san_link = [f"-fsanitize={_sanitizers}"]
else:
    san_compile, san_link = [], []

common = dict(
    include_dirs=[np.get_include(), CPU_SRC, PUBLIC_HEADERS],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION"),
                   ("EAGLE_HAVE_OPENMP", "1" if HAVE_OPENMP else "0")],
    # -Werror=...: what GCC 14 and clang 16 refuse by default, refused by older compilers
    # too, so a build that passes here passes there (the GPU machine's compiler is newer)
    extra_compile_args=["-O2", "-std=c11", "-Werror=incompatible-pointer-types",
                        "-Werror=implicit-function-declaration", "-Werror=int-conversion"]
    if sys.platform != "win32" else [],
)


def ext(name, sources, openmp=False, libraries=(), extra_compile_args=()):
    kw = dict(common)
    # a header change must rebuild the module (setuptools only tracks sources)
    kw["depends"] = sorted(glob.glob("csrc/cpu/*.h") + glob.glob("csrc/include/eagle/*.h*")
                           + glob.glob("csrc/include/eagle/detail/*.h") + glob.glob("eagle/*.pxd")
                           + glob.glob("eagle/*/*.pxd"))
    kw["extra_compile_args"] = (list(common["extra_compile_args"]) + (omp_compile if openmp else [])
                                + list(extra_compile_args) + san_compile)
    kw["extra_link_args"] = (omp_link if openmp else []) + san_link
    kw["libraries"] = list(libraries)
    return Extension(name, sources, **kw)


# the C executor, one unit per concern (csrc/cpu/executor.h lists them in dependency order)
CPU_EXECUTOR_SOURCES = [os.path.join(CPU_SRC, f + ".c") for f in (
    "runtime", "ticker", "team_choice", "launch", "observe", "replay", "tiles", "control", "serial",
    "team", "executor")]

EXTENSIONS = [
    # the graph's lock and launch path (the backend contract's compiled half)
    ext("eagle._core", ["eagle/_core.pyx"]),
    # hidden: the executor's C functions are called only from inside the module, so the
    # calls between its files (on every launch) bind directly, not through the PLT
    ext("eagle.cpu._executor", ["eagle/cpu/_executor.pyx"] + CPU_EXECUTOR_SOURCES,
        openmp=True, extra_compile_args=["-fvisibility=hidden"] if sys.platform != "win32" else []),
    ext("eagle.native", ["eagle/native.pyx"]),
    # the built-in kernels' contiguous paths (csrc/cpu/builtin_kernels.h) are written for the
    # vectoriser; no FMA contraction keeps their results bitwise NumPy's
    ext("eagle.kernels", ["eagle/kernels.pyx"],
        extra_compile_args=["-O3", "-fopenmp-simd", "-ffp-contract=off"] if sys.platform != "win32" else []),
    # -O3: the compaction's counts vectorised
    ext("eagle.cpu._partition", ["eagle/cpu/_partition.pyx"],
        extra_compile_args=["-O3"] if sys.platform != "win32" else []),
    # -O3: the masked loop's mask counts and selects are vectorised
    ext("eagle.cpu._ufunc", ["eagle/cpu/_ufunc.pyx"],
        extra_compile_args=["-O3"] if sys.platform != "win32" else []),
    # random nodes: Philox vectorised over samples (target_clones picks AVX-512 / AVX2 / baseline
    # at load time); no FP contraction, so the bits match csrc/include/eagle/philox.h on the GPU;
    # no trapping math, so the samplers' selects (a ? x : y on compares) vectorise (values unchanged)
    ext("eagle.cpu._random", ["eagle/cpu/_random.pyx", "csrc/cpu/random_kernels.c",
                              "csrc/cpu/distribution_kernels.c", "csrc/cpu/philox_block.c"],
        extra_compile_args=["-O3", "-fopenmp-simd", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math"]
        if sys.platform != "win32" else []),
    # reductions and tallies over fixed sample blocks (deterministic whatever the split)
    ext("eagle.cpu._reduce", ["eagle/cpu/_reduce.pyx", "csrc/cpu/reduce_kernels.c"],
        extra_compile_args=["-O3", "-ffp-contract=off"] if sys.platform != "win32" else []),
    # MPI collectives: the MPI entry points are looked up at run time, no mpi.h needed
    ext("eagle.mpi._collectives", ["eagle/mpi/_collectives.pyx"], libraries=["dl"]),
]
if os.path.exists(os.path.join(HERE, "eagle", "cuda", "_driver.pyx")):
    # the C shim is linked into eagle.cuda._driver alone (one place resolves the driver);
    # the other modules call it through _driver's cimported wrappers
    EXTENSIONS += [
        ext("eagle.cuda._driver", ["eagle/cuda/_driver.pyx", "csrc/cuda/cuda_shim.c"], libraries=["dl"]),
        ext("eagle.cuda._stream", ["eagle/cuda/_stream.pyx"]),
        ext("eagle.cuda._graph", ["eagle/cuda/_graph.pyx"]),
        ext("eagle.cuda._retune", ["eagle/cuda/_retune.pyx"]),
        ext("eagle.cuda._memory", ["eagle/cuda/_memory.pyx"]),
    ]


class build_py_with_headers(build_py):
    """Install csrc/include (the C and C++ faces, eagle/detail/ with them) as eagle/include,
    for eagle.get_include()."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "eagle", "include")
        if os.path.isdir(dst):
            shutil.rmtree(dst)
        shutil.copytree(os.path.join(HERE, PUBLIC_HEADERS), dst)


def build_jobs():
    """How many extensions to compile at once: EAGLE_BUILD_JOBS, else every core (`pip install .`
    passes no -j; the extensions are independent, compiled in threads)."""
    jobs = os.environ.get("EAGLE_BUILD_JOBS", "").strip()
    return int(jobs) if jobs else (os.cpu_count() or 1)


class build_ext_parallel(build_ext):
    """build_ext compiling the extensions side by side unless -j says otherwise."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = build_jobs()


def license_metadata():
    """BSD-3-Clause as an SPDX expression (License-Expression) from setuptools 77 on, as the
    legacy License field before (pyproject.toml declares the license dynamic: an SPDX
    string there fails the build with setuptools < 77)."""
    import setuptools

    spdx = int(setuptools.__version__.split(".")[0]) >= 77
    return {"license_expression" if spdx else "license": "BSD-3-Clause", "license_files": ["LICENSE"]}


setup(
    **license_metadata(),
    ext_modules=cythonize(
        EXTENSIONS,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "embedsignature": True,
                             # no __reduce_cython__/__setstate_cython__ in help(): eagle objects do not pickle
                             "auto_pickle": False, "autotestdict": False},
        compile_time_env={"EAGLE_HAVE_OPENMP": HAVE_OPENMP},
        # EAGLE_BUILD_JOBS=N: cythonize N modules at a time in processes (tests/gpu/run_on_gpu.sh).
        # Not by default: where multiprocessing spawns (macOS, Windows, forkserver), a worker
        # would run this file again.
        nthreads=int(os.environ.get("EAGLE_BUILD_JOBS", "0") or 0),
    ),
    cmdclass={"build_py": build_py_with_headers, "build_ext": build_ext_parallel},
)
