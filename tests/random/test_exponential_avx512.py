"""csrc/cpu/exponential_avx512.h gives the portable exponential sampler's bits (the GPU's):
the C check (exponential_check.c) built with the random kernels' own flags and run, on a
CPU with AVX-512 F and DQ. Elsewhere the node runs the portable loop alone, which
tests/random/test_distributions.py checks against the scalar sampler."""
import shutil
import subprocess
from pathlib import Path

import pytest

from programs import program_env

ROOT = Path(__file__).resolve().parents[2]


def _cpu_has(*flags):
    try:
        have = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return all(f in have for f in flags)


def test_the_avx512_exponential_gives_the_portable_bits(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    if not _cpu_has("avx512f", "avx512dq"):
        pytest.skip("this CPU has no AVX-512 F and DQ")
    exe = tmp_path / "check"
    # the flags distribution_kernels.c is built with (setup.py): no FP contraction
    build = subprocess.run([cc, "-O3", "-std=c11", "-Wall", "-Werror", "-ffp-contract=off",
                            f"-I{ROOT / 'csrc' / 'include'}", f"-I{ROOT / 'csrc' / 'cpu'}",
                            str(ROOT / "tests" / "random" / "exponential_check.c"), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=program_env())
    assert run.returncode == 0 and " 0 mismatches" in run.stdout, run.stdout + run.stderr
