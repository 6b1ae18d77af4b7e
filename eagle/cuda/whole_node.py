"""A CUDA ufunc node on arrays that are not per-sample (0-d operands): its generated
kernel runs once per replay over its one element, whatever the logical size (so a
``while_loop`` condition computed from a reduction, ``ufunc(np.greater, residual, tol,
out=more)``, is a kernel node of the graph). The cpu face: ``eagle.cpu.ufunc_node``."""
from __future__ import annotations

from eagle.cuda.capture import Lowering, register
from eagle.record.node import Node, RunsAs

__all__ = ["CudaWholeNode"]


class CudaWholeNode(Node):
    """A generated ufunc kernel (a ``cuda_kernel`` node, not recorded itself) over one element."""

    kind = "cuda_ufunc_whole"
    runs_as = RunsAs.CUDA_KERNEL
    box = ("(", ")")

    def __init__(self, name, kernel_node):
        super().__init__(dict(kernel_node.reads), dict(kernel_node.writes), per_sample=False)
        self.updated = kernel_node.updated
        self.name = name
        self.kernel_node = kernel_node

    def default_name(self) -> str:
        return self.name

    def __repr__(self):
        return f"ufunc({self.name}, 0-d, cuda)"


class CudaWholeCapture(Lowering):
    """One launch over one element; not sized (a retune leaves it alone)."""

    def capture(self, node, ctx):
        node.kernel_node.launch(ctx.stream, 1)


register(CudaWholeNode, CudaWholeCapture)
