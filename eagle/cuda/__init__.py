"""eagle's CUDA backend package.

``eagle/cuda/kernels/*.cu`` holds the CUDA C source eagle ships (compaction,
reorder, the run-until-done condition kernel). CuPy compiles it on a GPU
(``cupy.RawModule``); the tests compile the same files on the CPU with the
emulator in tests/cuda_standin/cuda_emulation.h. The backend itself lives in
``eagle._backend_cuda``, ``eagle._cuda`` (the Cython wrapper of the driver
shim), ``eagle._cuda_kernel`` and ``eagle._finished_cuda``; public names stay
where they were (``eagle.graph.cuda_kernel``, ``SIZE``, ``SIZE_PTR``,
``eagle.CudaError``).
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["kernel_source", "KERNEL_DIR"]

#: the directory of the shipped .cu files
KERNEL_DIR = Path(__file__).resolve().parent / "kernels"


def kernel_source(name: str = "partition") -> str:
    """The text of ``eagle/cuda/kernels/<name>.cu``."""
    return (KERNEL_DIR / f"{name}.cu").read_text()
