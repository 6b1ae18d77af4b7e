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
