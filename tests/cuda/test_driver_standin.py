"""The CUDA driver stand-in itself (tests/doubles/fake_libcuda.c, a TEST DOUBLE) is free
of undefined behaviour: a double with UB of its own can hide failures or invent them.

The stand-in is built with AddressSanitizer and UndefinedBehaviorSanitizer, every report
fatal (-fno-sanitize-recover=all), and driven by a small C program (no Python in the
process, so no sanitizer runtime has to be preloaded) through the cases the suite
exercises: kernel arguments read by the built-in kernels and by graph replays (they were
read misaligned), a copy of zero bytes with NULL pointers and an event recorded at the
start of a capture (memcpy from NULL), and deliberately bogus handles of every kind,
and real handles of the wrong kind, which must be CUDA's error codes, not reads through
memory the stand-in never made.
The whole suite under the sanitizers: tests/sanitize.sh.
"""
import os
import shutil
import subprocess
import textwrap

import pytest

from fake_cuda_build import build_fake_libcuda

SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]

DRIVER_PROGRAM = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long u64;
typedef int (*gpa_t)(const char *, void **, int, u64, int *);
static gpa_t gpa;
static int failures;
static void *fn(const char *name) {
    void *f = NULL;
    int st = -1;
    if (gpa(name, &f, 13000, 0, &st) || !f) { printf("no %s\n", name); exit(3); }
    return f;
}
#define EXPECT(call, want) do { int got_ = (call); if (got_ != (want)) { \
    printf("FAIL %s: %d, expected %d\n", #call, got_, (want)); failures++; } } while (0)

typedef struct { void *func; unsigned gx, gy, gz, bx, by, bz, shmem; void **params; void **extra;
                 void *kern; void *ctx; } kparams;
typedef struct { u64 flags; void *upload; void *err_node; int result; } iparams;

int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("dlopen: %s\n", dlerror()); return 3; }
    gpa = (gpa_t)dlsym(lib, "cuGetProcAddress_v2");
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    void *(*builtin)(const char *) = (void *(*)(const char *))dlsym(lib, "fake_cuda_kernel");
    int (*retain)(void **, int) = fn("cuDevicePrimaryCtxRetain");
    int (*set_ctx)(void *) = fn("cuCtxSetCurrent");
    int (*stream_create)(void **, unsigned) = fn("cuStreamCreate");
    int (*stream_sync)(void *) = fn("cuStreamSynchronize");
    int (*stream_destroy)(void *) = fn("cuStreamDestroy");
    int (*mem_alloc)(u64 *, size_t) = fn("cuMemAlloc");
    int (*memcpy_async)(u64, u64, size_t, void *) = fn("cuMemcpyAsync");
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                  void **, void **) = fn("cuLaunchKernel");
    int (*param_info)(void *, size_t, size_t *, size_t *) = fn("cuFuncGetParamInfo");
    int (*func_name)(const char **, void *) = fn("cuFuncGetName");
    int (*event_create)(void **, unsigned) = fn("cuEventCreate");
    int (*event_record)(void *, void *) = fn("cuEventRecord");
    int (*event_sync)(void *) = fn("cuEventSynchronize");
    int (*begin)(void *, int) = fn("cuStreamBeginCapture");
    int (*end)(void *, void **) = fn("cuStreamEndCapture");
    int (*graph_destroy)(void *) = fn("cuGraphDestroy");
    int (*graph_nodes)(void *, void **, size_t *) = fn("cuGraphGetNodes");
    int (*instantiate)(void **, void *, iparams *) = fn("cuGraphInstantiateWithParams");
    int (*graph_launch)(void *, void *) = fn("cuGraphLaunch");
    int (*exec_destroy)(void *) = fn("cuGraphExecDestroy");
    int (*node_params)(void *, kparams *) = fn("cuGraphKernelNodeGetParams");

    void *ctx;
    EXPECT(init(0), 0);
    EXPECT(retain(&ctx, 0), 0);
    EXPECT(set_ctx(ctx), 0);
    void *s;
    EXPECT(stream_create(&s, 1), 0);

    /* kernel arguments: 8-byte pointers and counts, a 4-byte count, a double */
    u64 x, y;
    EXPECT(mem_alloc(&x, 4 * sizeof(double)), 0);
    EXPECT(mem_alloc(&y, 4 * sizeof(double)), 0);
    double *hx = (double *)(uintptr_t)x, *hy = (double *)(uintptr_t)y;
    for (int i = 0; i < 4; ++i) hx[i] = i;
    int64_t n = 4;
    int32_t n32 = 4;
    double f = 2.0;
    void *a1[] = {&x, &n}, *a2[] = {&x, &n32}, *a3[] = {&y, &x, &f, &n};
    EXPECT(launch(builtin("add_one"), 1, 1, 1, 4, 1, 1, 0, s, a1, NULL), 0);
    EXPECT(launch(builtin("add_one_i32"), 1, 1, 1, 4, 1, 1, 0, s, a2, NULL), 0);
    EXPECT(launch(builtin("scale"), 1, 1, 1, 4, 1, 1, 0, s, a3, NULL), 0);
    EXPECT(stream_sync(s), 0);
    if (hy[3] != 10.0) { printf("FAIL scale: %g\n", hy[3]); failures++; }
    size_t off = 0, size = 0;
    EXPECT(param_info(builtin("scale"), 3, &off, &size), 0);

    /* zero bytes between NULL pointers (cudaMemcpyAsync allows it) */
    EXPECT(memcpy_async(0, 0, 0, s), 0);
    EXPECT(stream_sync(s), 0);

    /* a capture: an event recorded before any work, two kernels, replayed twice */
    void *ev, *g, *exec;
    EXPECT(event_create(&ev, 0), 0);
    EXPECT(begin(s, 2), 0);
    EXPECT(event_record(ev, s), 0);
    EXPECT(launch(builtin("add_one"), 1, 1, 1, 4, 1, 1, 0, s, a1, NULL), 0);
    EXPECT(launch(builtin("scale"), 1, 1, 1, 4, 1, 1, 0, s, a3, NULL), 0);
    EXPECT(end(s, &g), 0);
    void *nodes[2];
    size_t nn = 2;
    EXPECT(graph_nodes(g, nodes, &nn), 0);
    kparams kp;
    EXPECT(node_params(nodes[1], &kp), 0);
    iparams ip = {0, NULL, NULL, 0};
    EXPECT(instantiate(&exec, g, &ip), 0);
    EXPECT(graph_launch(exec, s), 0);
    EXPECT(graph_launch(exec, s), 0);
    EXPECT(stream_sync(s), 0);
    if (hy[3] != 2.0 * 7.0) { printf("FAIL replay: %g\n", hy[3]); failures++; }  /* x[3] 5 -> 7 */
    EXPECT(event_sync(ev), 0);

    /* bogus handles: memory the stand-in did not make (too small to hold any of its
     * objects, and misaligned), a function's address, a destroyed stream */
    char *tiny = (char *)malloc(2);
    int64_t words[4] = {0, 0, 0, 0};
    void *bogus[] = {tiny, (char *)words + 1, (void *)&printf};
    for (int i = 0; i < 3; ++i) {
        void *h = bogus[i], *out;
        const char *name;
        EXPECT(launch(h, 1, 1, 1, 1, 1, 1, 0, s, a1, NULL), 400);
        EXPECT(param_info(h, 0, &off, &size), 400);
        EXPECT(func_name(&name, h), 1);
        EXPECT(stream_sync(h), 400);
        EXPECT(event_record(h, s), 400);
        EXPECT(event_record(ev, h), 400);
        EXPECT(graph_destroy(h), 1);
        EXPECT(instantiate(&out, h, &ip), 1);
        EXPECT(graph_launch(h, s), 1);
        EXPECT(exec_destroy(h), 1);
        EXPECT(node_params(h, &kp), 1);
    }
    /* a real handle of another kind */
    EXPECT(stream_sync(ev), 400);
    EXPECT(graph_destroy(s), 1);
    EXPECT(graph_launch(g, s), 1);
    EXPECT(launch(s, 1, 1, 1, 1, 1, 1, 0, s, a1, NULL), 400);
    void *gone;
    EXPECT(stream_create(&gone, 1), 0);
    EXPECT(stream_destroy(gone), 0);
    EXPECT(stream_sync(gone), 400);
    EXPECT(exec_destroy(exec), 0);
    EXPECT(graph_launch(exec, s), 1);
    EXPECT(graph_destroy(g), 0);
    EXPECT(graph_destroy(g), 1);
    free(tiny);
    printf(failures ? "FAILED\n" : "CLEAN\n");
    return failures ? 1 : 0;
}
"""


def _sanitizers_work(cc, tmp_path):
    """Can this compiler build and run a sanitized program here? (not every toolchain ships
    the runtimes, and ASan cannot run under every kind of tracing)"""
    src = tmp_path / "probe.c"
    src.write_text("#include <stdlib.h>\nint main(void){char *p = malloc(4); p[0] = 0; int r = p[0]; free(p); return r;}\n")
    exe = tmp_path / "probe"
    try:
        built = subprocess.run([cc, *SANITIZE, str(src), "-o", str(exe)], capture_output=True, timeout=60)
        return built.returncode == 0 and subprocess.run([str(exe)], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_the_driver_standin_is_clean_under_asan_and_ubsan(tmp_path):
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler to build the CUDA driver stand-in")
    if not _sanitizers_work(cc, tmp_path):
        pytest.skip(f"{cc} cannot build and run a program with -fsanitize=address,undefined here")
    lib = build_fake_libcuda(tmp_path, extra=SANITIZE)
    src = tmp_path / "drive.c"
    src.write_text(textwrap.dedent(DRIVER_PROGRAM))
    exe = tmp_path / "drive"
    subprocess.run([cc, *SANITIZE, str(src), "-o", str(exe), "-ldl"], check=True, timeout=120)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",   # destroyed handles stay as shells
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    env.pop("LD_PRELOAD", None)   # the program links its own sanitizer runtimes
    r = subprocess.run([str(exe), lib], capture_output=True, text=True, env=env, timeout=120)
    report = r.stdout + r.stderr
    assert "runtime error" not in report and "AddressSanitizer" not in report, report
    assert r.returncode == 0 and r.stdout.rstrip().endswith("CLEAN"), report
