#!/usr/bin/env bash
# The test files holding gpu-marked tests, one a line (paths from the repository root),
# for run_on_gpu.sh's `pytest -m gpu`: tests/gpu but its NCCL test (run in a pytest of
# its own), the files whose tests take the `backend` / `cuda_backend` fixture (its gpu
# case: tests/conftest.py), and those marking a test `gpu`. A list, not `pytest -m gpu
# tests`, so the GPU machine never collects a module that needs what it lacks (Hypothesis).
# tests/test_gpu_runner.py checks that it covers every gpu-marked test.
cd "$(dirname "$0")/../.." || exit 1
{
    ls tests/gpu/test_*.py
    grep -rlE --include='test_*.py' 'pytest\.mark\.gpu|def test_[A-Za-z0-9_]+\([^)]*\b(cuda_)?backend\b' tests
} | grep -v '^tests/gpu/test_gpu_nccl\.py$' | sort -u
