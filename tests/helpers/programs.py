"""The environment of a program a test builds and runs itself (a C or C++ program against
eagle's headers, the CUDA example, a ThreadSanitizer harness).

``tests/sanitize.sh`` preloads the ASan runtime (LD_PRELOAD) into every process the
suite starts, for eagle's extensions inside the interpreter. A program built without
ASan must not get it: a TSan program cannot share a process with it, and a program that
was not built for it is no part of what the run checks. Such a program
either runs without the preload (``program_env``), or is built with
``fake_cuda_build.DOUBLES_CFLAGS`` (the sanitizer flags under sanitize.sh, nothing
otherwise) so it carries its runtime itself: a program that loads a test double built
with those flags must be.
"""
from __future__ import annotations

import os


def program_env(env=None, **extra):
    """``env`` (default this process's environment) without LD_PRELOAD, plus ``extra``."""
    out = dict(os.environ if env is None else env)
    out.pop("LD_PRELOAD", None)
    out.update({k: str(v) for k, v in extra.items()})
    return out


def cpu_has(*flags):
    """Whether /proc/cpuinfo lists every one of ``flags`` (False where it cannot be read)."""
    try:
        have = set(open("/proc/cpuinfo").read().split())
    except OSError:
        return False
    return all(f in have for f in flags)


def run_c_check(tmp_path, sources, cflags=(), libs=()):
    """Build a C check of eagle's CPU kernels (``sources`` with csrc/include and csrc/cpu
    on the include path, ``-Wall -Werror``), run it, and return its output; skips without
    a C compiler. The check prints ``N mismatches`` and exits nonzero if N is not 0."""
    import shutil
    import subprocess
    from pathlib import Path

    import pytest

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    root = Path(__file__).resolve().parents[2]
    exe = tmp_path / "check"
    build = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", *cflags, f"-I{root / 'csrc' / 'include'}",
                            f"-I{root / 'csrc' / 'cpu'}", *[str(root / s) for s in sources], "-o", str(exe),
                            *libs], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=program_env())
    assert run.returncode == 0 and " 0 mismatches" in run.stdout, run.stdout + run.stderr
    return run.stdout
