"""NVTX ranges around eagle's CUDA captures and launches, for Nsight Systems.

NVTX is resolved at run time, never linked: ``libnvToolsExt.so.1`` (CUDA 12 and
before) or ``libnvtx3interop.so.1`` (CUDA 13), found by the dynamic loader or in
``$CUDA_HOME/lib64``. Without it (or with ``EAGLE_NVTX=0``) ``push``/``pop``
do nothing. With it and no tool attached, NVTX's own calls return at once.

Per-node GPU time: ``nsys profile --cuda-graph-trace=node python script.py``
shows every kernel of a replayed graph under eagle's ``eagle launch(n)`` range.
"""
from __future__ import annotations

import ctypes
import os


def _load():
    if os.environ.get("EAGLE_NVTX", "1") == "0":
        return None, None
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    dirs = [""] + [os.path.join(h, "lib64") for h in homes if h]
    for name in ("libnvToolsExt.so.1", "libnvtx3interop.so.1", "libnvToolsExt.so"):
        for d in dirs:
            try:
                lib = ctypes.CDLL(os.path.join(d, name) if d else name)
                push, pop = lib.nvtxRangePushA, lib.nvtxRangePop
            except (OSError, AttributeError):
                continue
            push.argtypes, push.restype = [ctypes.c_char_p], ctypes.c_int
            pop.argtypes, pop.restype = [], ctypes.c_int
            return lib, (push, pop)
    return None, None


library, _fns = _load()
#: whether NVTX was found (ranges are recorded when a tool such as nsys listens)
available = _fns is not None


def push(name: str) -> None:
    """Open a range named ``name`` on this thread (nothing without NVTX)."""
    if _fns is not None:
        _fns[0](name.encode())


def pop() -> None:
    """Close this thread's innermost range (nothing without NVTX)."""
    if _fns is not None:
        _fns[1]()
