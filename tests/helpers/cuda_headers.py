"""Where the real CUDA driver headers (cuda.h, cudaTypedefs.h) are, for the tests that
check eagle's shim against them (no GPU needed: they are compiled, never run on a device).

Looked for in order: ``$CUDA_HOME/include`` (default /usr/local/cuda), then NVIDIA's
runtime wheel (``nvidia-cuda-runtime``, a test extra on Linux: ``nvidia/cu13/include`` in
CUDA 13 wheels, ``nvidia/cuda_runtime/include`` in CUDA 12 ones). ``include_dir()`` is
None when neither has cuda.h; ``SKIP_REASON`` then says where it looked.
"""
import glob
import os
from pathlib import Path

_TOOLKIT = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"


def _wheel_dirs():
    try:
        import nvidia
    except ImportError:
        return []
    dirs = []
    for base in getattr(nvidia, "__path__", []):
        dirs += sorted(Path(p).parent for p in glob.glob(os.path.join(base, "*", "include", "cuda.h")))
    return dirs


def include_dir():
    """The first directory holding cuda.h and cudaTypedefs.h, or None."""
    for d in [_TOOLKIT] + _wheel_dirs():
        if (d / "cuda.h").is_file() and (d / "cudaTypedefs.h").is_file():
            return d
    return None


SKIP_REASON = (f"no CUDA driver headers (cuda.h, cudaTypedefs.h) at {_TOOLKIT} nor in an "
               "nvidia-cuda-runtime wheel (pip install nvidia-cuda-runtime)")
