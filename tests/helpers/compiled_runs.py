"""Plain helpers of the generated fused loops' tests (eagle.cpu.codegen): what the plan
says of a graph's fused runs, a fake compiler, and a small graph that compiles."""
from __future__ import annotations

import numpy as np

import eagle
from eagle.graph import ufunc


def compiled_note(g):
    """The plan's lines of g's fused runs (each says whether, and how much, it compiled)."""
    return [ln for ln in str(g.plan()).splitlines() if "fused run" in ln]


def is_compiled(g):
    return any("; compiled:" in ln for ln in compiled_note(g))


def fake_compiler(tmp_path, body):
    """An executable shell script (``body`` after ``#!/bin/sh``) to use as EAGLE_CC."""
    path = tmp_path / "fake-cc"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def small_graph(**options):
    """Three nodes in one fused run (``CpuOptions(fuse=64, **options)``), built and launched
    once: the graph and the bytes of its result (compare with ``reference_bits()``)."""
    x = np.linspace(-2.0, 2.0, 600)
    a, b = np.empty_like(x), np.empty_like(x)
    g = eagle.Graph()
    g.add_node(ufunc(np.multiply, x, 0.1, out=a))
    g.add_node(ufunc(np.add, a, x, out=a))
    g.add_node(ufunc(np.minimum, a, 0.3, out=b))
    g.build(cpu=eagle.CpuOptions(fuse=64, **options))
    g.launch(1)
    return g, b.tobytes()


def reference_bits():
    x = np.linspace(-2.0, 2.0, 600)
    return np.minimum(x * 0.1 + x, 0.3).tobytes()
