#!/usr/bin/env bash
# Run eagle's GPU checks, unattended, on a machine with an NVIDIA GPU and no network
# (the lent H200 machine: /work/.library/device/KINDS.md — Python 3.12 with
# cupy-cuda13x, numpy, Cython, setuptools, pytest, pytest-timeout, numba, torch,
# mpi4py preinstalled; driver 580; nvcc 13).
#
#   bash tests/gpu/run_on_gpu.sh        # from the repository root
#
# Steps, each under its own `timeout`, the whole about 8 minutes at most:
#   1. preflight (< 15 s): nvidia-smi line, driver, Python, package versions, and
#      whether eagle's build requirements ([build-system] requires) are met;
#   2. build + install eagle offline: pip install --no-build-isolation --no-index
#      --no-deps . (wheels carried in .whl/ are installed first when present);
#   3. pytest -m gpu (tests/gpu and the gpu-marked tests of tests/cuda), per-test timeout;
#   4. tests/gpu/timing.py: the ratio table.
# Output is unbuffered; everything is also written under $OUT (the device tool's
# folder) when set, else ./gpu_results: run_log.txt, config.txt, gpu.xml, timing.txt,
# timing.json. Exit status: the first failing step's (124 = a step ran out of time).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
PY=${PYTHON:-python3}
RESULTS=${OUT:-$ROOT/gpu_results}
mkdir -p "$RESULTS" && RESULTS=$(cd "$RESULTS" && pwd)
exec > >(tee "$RESULTS/run_log.txt") 2>&1
START=$(date +%s)
status=0
step() {  # step NAME SECONDS CMD...: run under timeout, keep the first failure
    local name=$1 secs=$2 rc=0
    shift 2
    echo "== $name (budget ${secs}s, at +$(( $(date +%s) - START ))s)"
    timeout --kill-after=10 "$secs" "$@" || rc=$?
    if [[ $rc -ne 0 && $rc -ne 5 ]]; then  # pytest's 5: nothing collected
        echo "!! $name failed with status $rc"
        [[ $status -eq 0 ]] && status=$rc
    fi
    return $rc
}

preflight() {
    nvidia-smi -L 2>&1 | head -4 || echo "nvidia-smi: not found"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
    "$PY" - <<'EOF'
import importlib, platform, re, sys
print("python", platform.python_version(), sys.executable)
def version(name):
    try:
        from importlib.metadata import version as v
        return v(name)
    except Exception:
        return None
for name in ("setuptools", "Cython", "numpy", "cupy-cuda13x", "cupy-cuda12x", "torch", "pytest",
             "pytest-timeout", "numba", "nvidia-cuda-nvrtc", "packaging"):
    print(f"  {name:18} {version(name) or '-'}")
# eagle's build requirements, read from pyproject.toml
text = open("pyproject.toml").read()
reqs = re.search(r"\[build-system\]\s*requires\s*=\s*\[(.*?)\]", text, re.S).group(1)
reqs = [r.strip().strip('"') for r in reqs.split(",") if r.strip()]
ok = True
try:
    from packaging.requirements import Requirement
except ImportError:
    Requirement = None
for r in reqs:
    if Requirement is None:
        name, have = re.split(r"[<>=!~ ]", r, 1)[0], None
        have = version(name)
        good = have is not None
    else:
        req = Requirement(r)
        have = version(req.name)
        good = have is not None and req.specifier.contains(have, prereleases=True)
    ok &= good
    print(f"  build requirement {r:22} have {have or 'nothing'}: {'ok' if good else 'NOT MET'}")
print("build requirements met" if ok else "BUILD REQUIREMENTS NOT MET: carry wheels in .whl/")
EOF
    command -v cc >/dev/null && cc --version | head -1 || echo "no C compiler (cc) on PATH"
    command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not on PATH"
}

install() {
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl || return $?
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    "$PY" -m pip install -q --no-build-isolation --no-index --no-deps --force-reinstall . || return $?
    # run from outside the source tree so the installed eagle is imported
    (cd /tmp && "$PY" -c 'import eagle; eagle.show_config()') | tee "$RESULTS/config.txt"
}

gpu_tests() {
    # the tests import eagle from site-packages (rootdir stays the checkout for conftest.py)
    (cd /tmp && "$PY" -m pytest -p no:cacheprovider -m gpu -rs -q --timeout=90 \
        --junitxml="$RESULTS/gpu.xml" "$ROOT/tests/gpu" "$ROOT/tests/cuda/test_shim_standin.py")
}

timing() {
    (cd /tmp && EAGLE_TIMING_JSON="$RESULTS/timing.json" "$PY" "$ROOT/tests/gpu/timing.py") \
        | tee "$RESULTS/timing.txt"
}

step preflight 15 bash -c "$(declare -f preflight); PY='$PY'; preflight"
step "build + install (offline)" 240 bash -c "$(declare -f install); PY='$PY' RESULTS='$RESULTS'; install" \
    || { echo "eagle did not install: skipping the tests and timings"; exit "$status"; }
step "pytest -m gpu" 150 bash -c "$(declare -f gpu_tests); PY='$PY' ROOT='$ROOT' RESULTS='$RESULTS'; gpu_tests"
step timing 120 bash -c "$(declare -f timing); PY='$PY' ROOT='$ROOT' RESULTS='$RESULTS'; timing"
echo "== done in $(( $(date +%s) - START ))s, status $status; results in $RESULTS"
exit "$status"
