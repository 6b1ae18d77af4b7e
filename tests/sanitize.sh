#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer, in one command.
#
#   bash tests/sanitize.sh                        # the whole suite (tests/)
#   bash tests/sanitize.sh tests/cuda tests/ufunc -x   # any pytest arguments (paths from the root)
#   bash tests/sanitize.sh --keep-going tests/cpu # UBSan goes on after a finding (ASan never does)
#
# What it does: copies the tree (git's tracked and untracked, not ignored, files) into a
# scratch directory, so the in-place build is never touched; builds eagle's extensions
# there in place with EAGLE_SANITIZE=1 (setup.py: -fsanitize=address,undefined
# -fno-omit-frame-pointer -g on every extension); has the tests build every test double
# with the same flags (EAGLE_DOUBLES_CFLAGS, read by tests/doubles/fake_cuda_build.py),
# and eagle compile the loops it generates (eagle.cpu.codegen) with them (EAGLE_CC);
# runs pytest there with the ASan runtime preloaded into the interpreter (which is not
# sanitized itself) and PYTHONMALLOC=malloc (so ASan sees Python's allocations too).
# Subprocesses the tests start inherit all of it. ASan reports, from any process, are
# written to files under the scratch directory's reports/ (log_path), so a report in a
# subprocess whose output a test swallows still counts; UBSan reports are found in
# pytest's log there (reports/pytest.log).
#
# Pass: pytest passed and no sanitizer report was written. Exit status: pytest's, or 1
# when it passed but there were reports (they are printed at the end).
#
# Env: PYTHON (the interpreter with eagle's build and test dependencies; default python3),
# CC / CXX (default gcc / g++: the ASan runtime is found with `$CC -print-file-name`),
# EAGLE_SANITIZE_DIR (the scratch directory; default one per checkout under $TMPDIR or
# /tmp, kept between runs so a rerun rebuilds only what changed),
# EAGLE_SANITIZE_NO_PRELOAD (tools the tests run that crash with the ASan runtime
# preloaded, run without it through a wrapper put first on PATH; default: nvcc, whose
# cicc and ptxas segfault under it, and Graphviz's dot). Programs the tests build and
# run themselves drop the preload too (tests/helpers/programs.py).
# Leak checking is off (detect_leaks=0): CPython keeps its own allocations to the end,
# and the CUDA stand-in keeps destroyed handles as shells on purpose. Under ASan
# everything runs some times slower: a timing-sensitive test may flake.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export CC="${CC:-gcc}" CXX="${CXX:-g++}"
KEEP_GOING=0
if [[ "${1:-}" == "--keep-going" ]]; then KEEP_GOING=1; shift; fi
[[ $# -gt 0 ]] || set -- tests

SCRATCH="${EAGLE_SANITIZE_DIR:-${TMPDIR:-/tmp}/eagle-sanitize-$(printf %s "$ROOT" | cksum | cut -d' ' -f1)}"
TREE="$SCRATCH/tree"
REPORTS="$SCRATCH/reports"
mkdir -p "$TREE"

ASAN_RT="$("$CC" -print-file-name=libasan.so)"
if [[ "$ASAN_RT" != /* || ! -e "$ASAN_RT" ]]; then
    echo "sanitize.sh: $CC has no ASan runtime (libasan.so); set CC to a compiler with one" >&2
    exit 2
fi
# the C++ runtime preloaded beside it: ASan looks up __cxa_throw when it starts, and in a
# process that loads C++ later (the interpreter, then a C++ extension: matplotlib's
# ft2font in the docs' cells) it found none, and the first exception thrown there ended
# the process ("CHECK failed: asan_interceptors.cpp ... real___cxa_throw")
CXX_RT="$("$CXX" -print-file-name=libstdc++.so.6)"
[[ "$CXX_RT" == /* && -e "$CXX_RT" ]] && ASAN_RT="$ASAN_RT:$CXX_RT"

# 1. the tree into the scratch copy: changed files copied (mtimes kept, so the build
#    below redoes only what changed), files gone from the tree removed from the copy
echo "sanitize.sh: syncing $ROOT -> $TREE"
git -C "$ROOT" ls-files -z --cached --others --exclude-standard | "$PYTHON" -c '
import os, shutil, sys
root, tree = sys.argv[1], sys.argv[2]
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n and os.path.isfile(os.path.join(root, n))]
manifest = os.path.join(tree, ".sanitize-manifest")
old = set(open(manifest).read().split("\0")) if os.path.exists(manifest) else set()
for n in old - set(names):
    if n and os.path.exists(os.path.join(tree, n)):
        os.remove(os.path.join(tree, n))
for n in names:
    src, dst = os.path.join(root, n), os.path.join(tree, n)
    s = os.stat(src)
    try:
        d = os.stat(dst)
        if d.st_mtime_ns == s.st_mtime_ns and d.st_size == s.st_size:
            continue
    except FileNotFoundError:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(src, dst)
open(manifest, "w").write("\0".join(names))
' "$ROOT" "$TREE"

# 2. eagle's extensions, sanitized, in place in the copy (forced when the sanitizers asked changed)
export EAGLE_SANITIZE="${EAGLE_SANITIZE:-1}"
FORCE=()
if [[ "$(cat "$SCRATCH/.sanitize-flags" 2>/dev/null || true)" != "$EAGLE_SANITIZE" ]]; then FORCE=(--force); fi
echo "sanitize.sh: building eagle with EAGLE_SANITIZE=$EAGLE_SANITIZE in $TREE"
(cd "$TREE" && "$PYTHON" setup.py -q build_ext --inplace -j 2 "${FORCE[@]}")
echo "$EAGLE_SANITIZE" > "$SCRATCH/.sanitize-flags"

# 3. the tests, with the runtime preloaded (not into the tools that cannot take it);
#    reports to files
rm -rf "$REPORTS" "$SCRATCH/bin"
mkdir -p "$REPORTS" "$SCRATCH/bin"
for tool in ${EAGLE_SANITIZE_NO_PRELOAD-nvcc dot}; do
    real="$(command -v "$tool" || true)"
    [[ -n "$real" ]] || continue
    printf '#!/bin/sh\nunset LD_PRELOAD\nexec %q "$@"\n' "$real" > "$SCRATCH/bin/$tool"
    chmod +x "$SCRATCH/bin/$tool"
done
export PATH="$SCRATCH/bin:$PATH"
UBSAN_HALT=1
[[ $KEEP_GOING == 1 ]] && UBSAN_HALT=0
export EAGLE_DOUBLES_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -g"
# the loops eagle.cpu.codegen generates and compiles at build() (with EAGLE_CC), sanitized too
export EAGLE_CC="${EAGLE_CC:-$CC $EAGLE_DOUBLES_CFLAGS}"
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:log_path=$REPORTS/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=$UBSAN_HALT:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export PYTHONMALLOC=malloc
echo "sanitize.sh: pytest $* (in $TREE; reports to $REPORTS)"
set +e
# --capture=sys: pytest captures Python's sys.stdout/err only, so what the sanitizers
# write to fd 2 in the pytest process reaches the log even for a test that passes
(cd "$TREE" && LD_PRELOAD="$ASAN_RT${LD_PRELOAD:+:$LD_PRELOAD}" PYTHONPATH="$TREE" \
    "$PYTHON" -m pytest -p no:cacheprovider --capture=sys "$@") 2>&1 | tee "$REPORTS/pytest.log"
rc=${PIPESTATUS[0]}
set -e

# ASan writes its reports to files (log_path), from every process; UBSan (a runtime of
# its own beside the preloaded ASan) ignores log_path and writes to stderr: its reports
# are found in the log (in a subprocess whose stderr a test swallows, halt_on_error=1
# makes the process fail instead; with --keep-going such a report can be missed)
shopt -s nullglob
asan=("$REPORTS"/asan.*)
ubsan=$(grep -c "runtime error:" "$REPORTS/pytest.log" || true)
if [[ ${#asan[@]} -gt 0 || $ubsan -gt 0 ]]; then
    echo
    echo "sanitize.sh: ${#asan[@]} ASan report file(s), $ubsan UBSan report(s):"
    for f in "${asan[@]}"; do
        echo "---- $f"
        head -n 40 "$f"
    done
    if [[ $ubsan -gt 0 ]]; then
        echo "---- UBSan ($REPORTS/pytest.log):"
        grep "runtime error:" "$REPORTS/pytest.log" | sort | uniq -c | sort -rn | head -n 40
    fi
    echo "sanitize.sh: FAIL (sanitizer reports; pytest exit status $rc)"
    [[ $rc -ne 0 ]] || rc=1
elif [[ $rc -ne 0 ]]; then
    echo "sanitize.sh: FAIL (pytest exit status $rc, no sanitizer report)"
else
    echo "sanitize.sh: PASS (pytest passed, no sanitizer report)"
fi
exit $rc
