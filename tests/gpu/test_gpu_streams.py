"""What only a GPU confirms of the stream, context and library fixes of issue 20 (marker
``gpu``; skips without CuPy or a GPU, see conftest.py). The CPU stand-in tests of the same
behaviour are in tests/cuda/test_backend_standin.py and tests/mpi/test_nccl_standin.py; here
the real driver, CuPy (and torch / NCCL when installed) answer."""
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import eagle
from eagle.graph import opaque

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def test_legacy_stream_work_in_a_node_fails_the_capture_naming_it(cupy):
    x = cupy.zeros(4)

    def on_legacy():
        with cupy.cuda.Stream.null:
            x[...] += 1

    g = eagle.Graph()
    g.add_node(opaque(on_legacy, writes={"x": x}), name="eager")
    with pytest.raises(Exception) as info:
        g.build()
    text = str(info.value) + " ".join(getattr(info.value, "__notes__", []))
    assert "eager" in text and ("IMPLICIT" in text or "Implicit" in text or "invalidated" in text), text


def test_cupy_gets_eagles_stream_without_a_deprecation_warning(cupy):
    x = cupy.zeros(4)
    seen = []
    g = eagle.Graph()
    g.add_node(opaque(lambda: (seen.append(cupy.cuda.get_current_stream().ptr), x.__iadd__(1)),
                      writes={"x": x}), name="step")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        g.build()
        g.launch(3)
    assert seen == [g._backend.stream.ptr]
    assert x.get().tolist() == [3.0] * 4


def test_a_cupy_arrays_build_stream_may_be_destroyed_before_launch(cupy):
    x = cupy.zeros(4)
    s = cupy.cuda.Stream(non_blocking=True)
    g = eagle.Graph()
    g.add_node(opaque(lambda: x.__iadd__(1), writes={"x": x}), name="step")
    with s:
        g.build()
    s.synchronize()
    del s
    import gc
    gc.collect()
    g.launch(2)
    assert x.get().tolist() == [2.0] * 4


def test_a_graph_launched_while_another_device_is_current(cupy):
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(0):
        x = cupy.zeros(4)
        g = eagle.Graph()
        g.add_node(opaque(lambda: x.__iadd__(1), writes={"x": x}), name="step")
        g.build()
    with cupy.cuda.Device(1):
        g.launch(2)
        assert cupy.cuda.Device().id == 1
    assert x.get().tolist() == [2.0] * 4


def test_torch_allocations_during_capture_and_requires_grad_ordering(cupy):
    torch = pytest.importorskip("torch")
    t = torch.ones(1 << 20, device="cuda")
    out = cupy.zeros(1 << 20, dtype=cupy.float32)
    t.requires_grad_(True)

    def step():
        with torch.cuda.stream(torch.cuda.ExternalStream(eagle.cuda.backend.capture_stream().ptr)):
            tmp = (t.detach() * 2).contiguous()          # a temporary from torch's allocator
            out[...] = cupy.asarray(tmp.detach()) + 1

    g = eagle.Graph()
    g.add_node(opaque(step, reads={"t": t.detach()}, writes={"out": out}), name="torch_step")
    g.build()
    junk = torch.zeros(1 << 22, device="cuda")   # would reuse a recycled capture temporary
    junk += 5
    with torch.no_grad():
        t.mul_(3)                                  # on torch's current stream
    g.launch(1)
    assert float(out[0]) == 7.0


def test_an_nccl_program_exits(cupy, tmp_path):
    pytest.importorskip("mpi4py")
    try:
        from eagle.mpi import _nccl
        _nccl.library()
    except ImportError as e:
        pytest.skip(str(e))
    prog = textwrap.dedent("""
        import cupy, eagle
        from eagle.graph import allreduce
        x, y = cupy.ones(4), cupy.zeros(4)
        g = eagle.Graph()
        g.add_node(allreduce(x, y), name="tally")
        g.build()
        g.launch(2)
        print("LEAVING", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0 and "LEAVING" in proc.stdout, proc.stdout + proc.stderr
