"""csrc/cpu/philox_block.c's vector paths give the portable Philox's words: the C check
(philox_block_check.c) built at each path level the machine can run and run."""
import shutil
import subprocess
from pathlib import Path

import pytest

from programs import program_env

ROOT = Path(__file__).resolve().parents[2]
CPU_FLAG = {0: None, 1: "avx2", 2: "avx512f"}


def _cpu_has(flag):
    if flag is None:
        return True
    try:
        return flag in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


@pytest.mark.parametrize("level", [0, 1, 2], ids=["portable", "avx2", "avx512"])
def test_every_path_gives_the_portable_words(tmp_path, level):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    if not _cpu_has(CPU_FLAG[level]):
        pytest.skip(f"this CPU has no {CPU_FLAG[level]}")
    exe = tmp_path / "check"
    build = subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Werror", f"-DEAGLE_PHILOX_MAX_LEVEL={level}",
                            f"-I{ROOT / 'csrc' / 'include'}", f"-I{ROOT / 'csrc' / 'cpu'}",
                            str(ROOT / "tests" / "random" / "philox_block_check.c"),
                            str(ROOT / "csrc" / "cpu" / "philox_block.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=program_env())
    assert run.returncode == 0 and "0 mismatches" in run.stdout, run.stdout + run.stderr
