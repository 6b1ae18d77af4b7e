"""A step given CUDA arrays is captured as a CUDA graph: one node whose GPU work the cuda
backend captures on eagle's stream at build (on the driver's stand-in and on a GPU)."""
import numpy as np
import pytest

import eagle


def test_a_step_on_cuda_arrays_runs_its_python_once_at_build(cuda_backend):
    b = cuda_backend
    x, y = b.asarray(np.arange(4.0)), b.asarray(np.zeros(4))
    calls = []

    def step(x, y):
        calls.append(1)

    g = eagle.capture(step, x, y)
    assert calls == [] and g.nodes == [f"step:{step.__code__.co_firstlineno} step (CUDA stream capture)"]
    node = g.recording().nodes[0]
    assert set(node.writes) == {"x", "y"} and node.updated == {"x", "y"}
    g.build()
    g.launch(3)
    assert calls == [1]   # captured once; the CUDA graph replays what it launched


def test_numpy_and_cuda_arrays_in_one_step_are_refused(cuda_backend):
    with pytest.raises(TypeError, match="mix NumPy and CUDA arrays"):
        eagle.capture(lambda x, y: None, cuda_backend.asarray(np.zeros(3)), np.zeros(3))
