#!/usr/bin/env bash
# Run eagle's GPU checks on a machine with an NVIDIA GPU.
#
#   tests/gpu/run_on_gpu.sh            # from the repository root
#   EAGLE_SKIP_INSTALL=1 tests/gpu/run_on_gpu.sh   # eagle (and CuPy) already installed
#
# 1. installs eagle with its CUDA and test extras (pip install .[cuda,test]); with
#    CuPy, pytest and Cython already installed it builds eagle alone, offline
#    (pip install --no-deps --no-build-isolation .); EAGLE_WHEEL=path installs a
#    carried wheel instead; EAGLE_WHEELHOUSE=dir lets pip find the extras there;
# 2. prints the setup (driver, eagle.show_config());
# 3. runs the GPU tests: pytest -m gpu tests/gpu, plus the gpu-marked shim
#    test that runs the seed page's C++ example (tests/cuda);
# 4. runs the replay-timing script (tests/gpu/timing.py) if present.
# Exit status: the first failing step's.
set -uo pipefail
cd "$(dirname "$0")/../.."

PY=${PYTHON:-python3}
OUT=${EAGLE_GPU_OUT:-gpu_results}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)

status=0
step() {  # run a step, remember the first failure; pytest's 5 (nothing collected) is fine
    local rc=0
    "$@" || rc=$?
    if [[ $rc -ne 0 && $rc -ne 5 && $status -eq 0 ]]; then status=$rc; fi
}
ROOT=$PWD

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
    echo "nvidia-smi not found: the GPU tests will skip" >&2
fi

if [[ -z "${EAGLE_SKIP_INSTALL:-}" ]]; then
    echo "== install"
    if [[ -n "${EAGLE_WHEEL:-}" ]]; then
        # a wheel built elsewhere and carried here (offline machines)
        step "$PY" -m pip install --quiet --force-reinstall --no-deps "$EAGLE_WHEEL"
    elif "$PY" -c "import cupy, pytest, Cython, setuptools, numpy" 2>/dev/null; then
        # CuPy and the build/test tools are already here: build eagle alone, offline
        step "$PY" -m pip install --quiet --force-reinstall --no-deps --no-build-isolation .
    else
        # the documented install (needs the package index, or EAGLE_WHEELHOUSE=dir of wheels)
        step "$PY" -m pip install --quiet ${EAGLE_WHEELHOUSE:+--find-links "$EAGLE_WHEELHOUSE"} ".[cuda,test]"
    fi
fi

echo "== config"
# run from outside the source tree so the installed eagle is imported
step bash -c "cd /tmp && '$PY' -c 'import eagle; eagle.show_config()' | tee '$OUT/config.txt'"


echo "== pytest -m gpu"
step bash -c "cd /tmp && '$PY' -m pytest -m gpu '$ROOT/tests/gpu' -v -rs --junitxml='$OUT/gpu.xml'"
step "$PY" -m pytest -m gpu tests/cuda -v -rs --junitxml="$OUT/cuda_gpu.xml"

if [[ -f tests/gpu/timing.py ]]; then
    echo "== timing"
    step bash -c "cd /tmp && '$PY' '$ROOT/tests/gpu/timing.py' | tee '$OUT/timing.txt'"
else
    echo "== timing: tests/gpu/timing.py not written yet"
fi
exit "$status"
