#!/usr/bin/env bash
# Run eagle's GPU checks, unattended, on a machine with an NVIDIA GPU and no network
# (the lent H200 machine: /work/.library/device/KINDS.md — Python 3.12 with
# cupy-cuda13x, numpy, Cython, setuptools, pytest, pytest-timeout, numba, torch,
# mpi4py preinstalled; driver 580; nvcc 13; 16 cores).
#
#   bash tests/gpu/run_on_gpu.sh        # from the repository root (the carried tree)
#
# Steps, each under its own `timeout`, in a 295 s deadline (worst case, every step
# killed at its budget, TERM then KILL after GRACE=3 s):
#   1. preflight          10 s  nvidia-smi line, driver, Python, package versions, build
#                               requirements ([build-system] requires) met or not;
#   2. build              95 s  eagle built in place from the carried tree, offline, in
#                               parallel (cythonize and the C compiles on every core);
#                               wheels carried in .whl/ are installed first when present;
#   3. pytest -m gpu      85 s  every gpu-marked test but the NCCL one (the files
#                               tests/gpu/gpu_test_files.sh lists: tests/gpu, the gpu case of
#                               the scenarios written once for every backend), 30 s per test;
#                               if pytest dies (abort, segfault), a second pytest in the same
#                               budget runs the tests the first had not started;
#   4. NCCL              30 s  tests/gpu/test_gpu_nccl.py in a pytest of its own: a
#                               communicator that hangs at exit costs this step only;
#   5. timing             55 s  tests/gpu/timing.py: the ratio table.
#   10 + 95 + 85 + 30 + 55 = 275 s of budgets, + 5 x 3 s grace = 290 s, + the script's
#   own work (< 5 s) <= 295 s < 300 s. A step never gets more than what is left of the
#   deadline, so the sum holds even if a budget here is raised.
# Results are written as they come, under $OUT (the device tool's folder) when set, else
# ./gpu_results: run_log.txt (everything, unbuffered), progress.txt (one line per test as
# it finishes: a killed pytest keeps the lines of the tests that ran), config.txt,
# gpu.xml / nccl.xml (when pytest finishes), timing.txt, timing.json (rewritten after
# each measurement). The log is flushed before the script exits.
# Exit status: the first failing step's (124 = a step ran out of time).
# Rehearsed offline (no GPU, no nvidia-smi): every step skips or fails fast, see
# tests/gpu/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# LIBC_FATAL_STDERR_: glibc's own abort messages (heap corruption) go to the log, not a tty
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 LIBC_FATAL_STDERR_=1
PY=${PYTHON:-python3}
JOBS=$(nproc 2>/dev/null || echo 4)
RESULTS=${OUT:-$ROOT/gpu_results}
mkdir -p "$RESULTS" && RESULTS=$(cd "$RESULTS" && pwd)
: > "$RESULTS/progress.txt"
START=$(date +%s)
DEADLINE=$(( START + 295 ))
GRACE=3
exec 3>&1 4>&2
exec > >(tee "$RESULTS/run_log.txt") 2>&1
TEE_PID=$!
status=0

finish() {  # flush the log: close our end of the pipe and wait for tee to write it all
    echo "== done in $(( $(date +%s) - START ))s, status $status; results in $RESULTS"
    exec 1>&3 2>&4 3>&- 4>&-
    wait "$TEE_PID" 2>/dev/null || sleep 1
    sync 2>/dev/null || true
}

step() {  # step NAME SECONDS CMD...: run under timeout (at most what is left), keep the first failure
    local name=$1 secs=$2 rc=0 left
    shift 2
    left=$(( DEADLINE - $(date +%s) - GRACE ))
    (( secs > left )) && secs=$left
    if (( secs < 1 )); then
        echo "!! $name: no time left in the 295 s deadline; skipped"
        [[ $status -eq 0 ]] && status=124
        return 124
    fi
    echo "== $name (budget ${secs}s, at +$(( $(date +%s) - START ))s)"
    timeout --kill-after=$GRACE "$secs" "$@" || rc=$?
    if [[ $rc -ne 0 && $rc -ne 5 ]]; then  # pytest's 5: nothing collected
        echo "!! $name failed with status $rc"
        [[ $status -eq 0 ]] && status=$rc
    fi
    return $rc
}

preflight() {
    if command -v nvidia-smi >/dev/null; then
        timeout 4 nvidia-smi -L 2>&1 | head -4
        timeout 4 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
    else
        echo "nvidia-smi: not found"
    fi
    "$PY" - <<'EOF'
import platform, sys
print("python", platform.python_version(), sys.executable)
def version(name):
    try:
        from importlib.metadata import version as v
        return v(name)
    except Exception:
        return None
for name in ("setuptools", "Cython", "numpy", "cupy-cuda13x", "cupy-cuda12x", "torch", "pytest",
             "pytest-timeout", "numba", "mpi4py", "nvidia-nccl-cu13", "nvidia-cuda-nvrtc", "packaging"):
    print(f"  {name:18} {version(name) or '-'}")
EOF
    "$PY" tests/gpu/build_requirements.py pyproject.toml
    command -v cc >/dev/null && cc --version | head -1 || echo "no C compiler (cc) on PATH"
    # the host CPU and the AVX-512 parts eagle's CPU kernels pick at run time: the GPU
    # tests' oracle is the CPU backend's node, so this says which CPU path they compared
    grep -m1 "model name" /proc/cpuinfo 2>/dev/null || echo "model name: unknown"
    echo "cpu avx512: $(grep -m1 -o -w -E 'avx512(f|dq|bw|vl)' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
    command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not on PATH"
}

build() {
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl || return $?
    fi
    # in place, in parallel: EAGLE_BUILD_JOBS cythonizes on every core, -j compiles on them
    EAGLE_BUILD_JOBS=$JOBS "$PY" setup.py -q build_ext --inplace -j "$JOBS" || return $?
    # from outside the source tree, the built eagle on PYTHONPATH
    (cd /tmp && "$PY" -c 'import eagle; eagle.show_config()') | tee "$RESULTS/config.txt"
}

SITE=/tmp/site
export PYTHONPATH=$ROOT:$ROOT/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
[[ -d .whl ]] && export PYTHONPATH=$SITE:$PYTHONPATH

per_test_timeout() {  # pytest-timeout's option when it is installed (it is on the GPU machine)
    "$PY" -c 'import pytest_timeout' 2>/dev/null && echo "--timeout=$1"
}

gpu_tests() {  # the tests import the in-place eagle (rootdir stays the checkout for conftest.py)
    local files=() f rc=0
    while IFS= read -r f; do files+=("$ROOT/$f"); done < <(bash "$ROOT/tests/gpu/gpu_test_files.sh")
    (( ${#files[@]} )) || return 1
    (cd /tmp && EAGLE_GPU_PROGRESS="$RESULTS/progress.txt" "$PY" -m pytest -p no:cacheprovider \
        -p gpu_progress -m gpu -rs -q $(per_test_timeout 30) --junitxml="$RESULTS/gpu.xml" "${files[@]}") || rc=$?
    if (( rc == 134 || rc == 139 )); then
        # the process died (abort, segfault): the tests it had not started run in a second
        # pytest, so one crash hides nothing else; the step keeps the crash's status
        echo "!! pytest died (status $rc) in $(grep '^START' "$RESULTS/progress.txt" | tail -1 | cut -d' ' -f2)"
        (cd /tmp && EAGLE_GPU_PROGRESS="$RESULTS/progress.txt" EAGLE_GPU_SKIP_STARTED=1 "$PY" -m pytest \
            -p no:cacheprovider -p gpu_progress -m gpu -rs -q $(per_test_timeout 30) \
            --junitxml="$RESULTS/gpu_rest.xml" "${files[@]}")
    fi
    return $rc
}

nccl_test() {
    (cd /tmp && EAGLE_GPU_PROGRESS="$RESULTS/progress.txt" "$PY" -m pytest -p no:cacheprovider \
        -p gpu_progress -m gpu -rs -q $(per_test_timeout 20) --junitxml="$RESULTS/nccl.xml" \
        "$ROOT/tests/gpu/test_gpu_nccl.py")
}

timing() {
    (cd /tmp && EAGLE_TIMING_JSON="$RESULTS/timing.json" "$PY" "$ROOT/tests/gpu/timing.py") \
        | tee "$RESULTS/timing.txt"
}

ENVS="PY='$PY' ROOT='$ROOT' RESULTS='$RESULTS' JOBS='$JOBS'"
step preflight 10 bash -c "$(declare -f preflight); $ENVS; preflight"
if ! step build 95 bash -c "$(declare -f build); $ENVS; build"; then
    echo "eagle did not build: skipping the tests and timings"
    finish
    exit "$status"
fi
step "pytest -m gpu" 85 bash -c "$(declare -f per_test_timeout gpu_tests); $ENVS; gpu_tests"
step "NCCL (own process)" 30 bash -c "$(declare -f per_test_timeout nccl_test); $ENVS; nccl_test"
step timing 55 bash -c "$(declare -f timing); $ENVS; timing"
finish
exit "$status"
