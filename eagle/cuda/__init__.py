"""eagle's CUDA backend.

* ``eagle.cuda.backend`` — the cuda backend of ``eagle.Graph`` (capture, instantiate,
  launch, retune, run until done);
* ``eagle.cuda.kernel_nodes`` — ``cuda_kernel`` nodes and ``SIZE`` / ``SIZE_PTR``
  (public as ``eagle.graph.cuda_kernel``, ``eagle.graph.SIZE``, ``eagle.graph.SIZE_PTR``);
* ``eagle.cuda.finished`` — compaction and reorder as captured kernels;
* ``eagle.cuda.ufunc_node`` — ``eagle.graph.ufunc`` on CUDA arrays (generated kernels);
* ``eagle.cuda._driver`` — the thin Cython layer over the C shim of the CUDA driver
  (csrc/include/eagle/cuda_shim.h), and over it ``_stream`` (streams, events),
  ``_graph`` (graphs, executable graphs), ``_retune`` (sized kernel nodes) and
  ``_memory`` (device and mapped host memory): docs/architecture.md;
* ``eagle/cuda/kernels/*.cu`` — the CUDA C source eagle ships. CuPy compiles it on a
  GPU (``cupy.RawModule``); the tests compile the same files on the CPU with the
  CUDA C emulator of the test doubles (tests/).

``eagle.CudaError`` is in ``eagle``.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["kernel_source", "KERNEL_DIR"]

#: the directory of the shipped .cu files
KERNEL_DIR = Path(__file__).resolve().parent / "kernels"


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals())


def kernel_source(name: str = "partition") -> str:
    """The text of ``eagle/cuda/kernels/<name>.cu``."""
    return (KERNEL_DIR / f"{name}.cu").read_text()
