"""eagle's CUDA C under the compilers a GPU run hands it to.

The stand-in compiles eagle's kernels with the host's C++ compiler (C++17, GNU
extensions), which accepts what NVRTC refuses under the options eagle gives CuPy.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

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
