"""The counts of a where= mask's block (csrc/cpu/mask_scan.h) that decide how the masked
loop runs it: a count that says "all set" for a block that is not would write the unset
elements. The C check (mask_counts_check.c) built as the extension builds it (AVX-512 BW
where the CPU has it) and with the portable form alone, and run."""
import shutil
import subprocess
from pathlib import Path

import pytest

from programs import program_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("portable", [False, True], ids=["as-built", "portable"])
def test_mask_counts_equal_a_byte_by_byte_count(tmp_path, portable):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "check"
    flags = ["-DEAGLE_NO_AVX512_MASKS"] if portable else []
    build = subprocess.run([cc, "-O3", "-std=c11", "-Wall", "-Werror", *flags, f"-I{ROOT / 'csrc' / 'cpu'}",
                            str(ROOT / "tests" / "ufunc" / "mask_counts_check.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=program_env())
    assert run.returncode == 0 and " 0 mismatches" in run.stdout, run.stdout + run.stderr
