/* fake_cudart.c — TEST DOUBLE. NOT CUDA.
 *
 * A CPU stand-in for the subset of the CUDA runtime (libcudart) that eagle's
 * shim (csrc/include/eagle/cuda_shim_impl.h) resolves with dlsym. The tests
 * in tests/cuda build it with `cc -shared -fPIC` and point EAGLE_CUDA_RUNTIME
 * at it, so the shim's capture / fork-join / instantiate / launch / retune
 * paths run in CI on machines without a GPU. It is never shipped and never
 * loaded unless EAGLE_CUDA_RUNTIME names it.
 *
 * What it pretends: one device, runtime and driver version 13000 (override
 * with FAKE_CUDART_VERSION, e.g. 12020 to make the shim take its CUDA 12.0-12.2
 * path), synchronous execution (every "asynchronous" call has finished when
 * it returns).
 *
 * TEST-ONLY KERNEL CONVENTION. A "kernel" is a HOST function
 *
 *     void kernel(void **args, fake_dim3 grid, fake_dim3 block);
 *
 * where args is the kernelParams array (args[i] points at argument i) and
 * grid/block are the launch dimensions; it runs the whole grid itself
 * (typically `for i < grid.x * block.x`). Each kernel must be registered with
 * its argument count (fake_cudart_register_kernel); unregistered function
 * pointers fail with cudaErrorInvalidDeviceFunction, like a real runtime
 * given a pointer that is not a kernel. Every argument is 8 bytes wide
 * (pointer, int64, uint64, double): on capture and on parameter updates the
 * stand-in copies 8 bytes per argument, as the real runtime copies each
 * argument by its declared size. Built-in registered kernels:
 *   fake_kernel_add_one(double *p, int64 n)            p[i] += 1
 *   fake_kernel_scale(double *dst, double *src, double f, int64 n)  dst[i] = f * src[i]
 *   fake_kernel_add(double *out, double *a, double *b, int64 n)     out[i] = a[i] + b[i]
 *   fake_kernel_add_one_sp(double *p, const int64 *n)   p[i] += 1 (n read from "device")
 *   fake_kernel_life_step(u8 *alive, int64 *life, double *x, const int64 *n)  and
 *   fake_kernel_life_step_n(..., int64 n): a Monte Carlo step for compaction tests
 * each for i < min(n, grid.x * block.x).
 *
 * Host versions of eagle's compaction / reorder kernels (eagle/_finished_cuda.py
 * holds the CUDA source they mirror, thread for thread: each "thread" of the
 * grid runs the same body, the single-block scan runs sequentially). eagle
 * finds them by name with fake_cudart_finished_kernel(name) when the bound
 * runtime exports it (only this test double does), instead of compiling the
 * CUDA source with CuPy: eagle_part_count, eagle_part_scan,
 * eagle_part_scatter, eagle_part_copyback, eagle_commit.
 *
 * Device memory: cudaMalloc / cudaFree are calloc / free (counted as live
 * "devmem"), cudaMemcpyAsync is memcpy (refused on a capturing stream).
 *
 * Capture model (mirrors CUDA's): a capture sequence owns one graph; a stream
 * joins it by waiting on an event recorded on a capturing stream (fork); the
 * origin stream must wait on the side streams' last work before
 * cudaStreamEndCapture (join), else cudaErrorStreamCaptureUnjoined. Each
 * capturing stream keeps its current dependency set, which
 * cudaStreamGetCaptureInfo reports. cudaStreamSynchronize on a capturing
 * stream invalidates the capture (cudaErrorStreamCaptureUnsupported), and
 * so does any injected failure during capture.
 *
 * Failure injection (for error-path tests):
 *   fake_cudart_fail_next(api, nth, err)  the nth next call (1 = the next one)
 *                                         of `api` ("cudaGraphLaunch", ...)
 *                                         returns err;
 *   fake_cudart_fail_instantiate_at_node(k)  instantiating a graph with more
 *                                         than k nodes fails with
 *                                         cudaErrorNotSupported, naming its
 *                                         k-th node (creation order) as the
 *                                         error node; -1 disables;
 *   env FAKE_CUDART_FAIL="api:nth:err,..." and FAKE_CUDART_FAIL_INSTANTIATE_AT=k,
 *   read at first use; FAKE_CUDART_DEVICES=0 -> cudaGetDeviceCount returns
 *   cudaErrorNoDevice; FAKE_CUDART_NO_DRIVER=1 -> cudaErrorInsufficientDriver;
 *   FAKE_CUDART_NO_DRIVER_ENTRY=1 -> no driver entry points (the shim then
 *   retunes through the runtime API).
 *
 * Observation: fake_cudart_launch_count() (successful cudaGraphLaunch calls),
 * fake_cudart_counter(name) (calls per API name, plus "kernel_runs",
 * "driver_get_params", "driver_exec_set_params"), fake_cudart_live(kind)
 * (live "stream", "event", "graph", "exec" objects: leak checks),
 * fake_cudart_last_grid_x(), fake_cudart_reset().
 *
 * Not thread-safe (the tests drive it from one thread).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct { unsigned int x, y, z; } fake_dim3;
typedef void (*fake_kernel_fn)(void **args, fake_dim3 grid, fake_dim3 block);

/* cudaError_t values used here */
enum {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35, cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100, cudaErrorInvalidResourceHandle = 400, cudaErrorIllegalState = 401,
    cudaErrorLaunchFailure = 719, cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900, cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903, cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureIsolation = 905, cudaErrorGraphExecUpdateFailure = 910,
    cudaErrorUnknown = 999
};

static const struct { int code; const char *name, *text; } err_table[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {903, "cudaErrorStreamCaptureUnmatched", "capture was not initiated in this stream"},
    {904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {999, "cudaErrorUnknown", "unknown error"},
};

/* ---- bookkeeping ----------------------------------------------------------- */

#define MAXARGS 16
#define NCOUNTERS 64
static struct { char name[64]; long value; } counters[NCOUNTERS];
static long live_stream, live_event, live_graph, live_exec;
static unsigned last_grid_x;

static void count(const char *name) {
    for (int i = 0; i < NCOUNTERS; ++i) {
        if (counters[i].name[0] == 0) {
            snprintf(counters[i].name, sizeof counters[i].name, "%s", name);
            counters[i].value = 1;
            return;
        }
        if (strcmp(counters[i].name, name) == 0) {
            counters[i].value++;
            return;
        }
    }
}

#define NFAIL 16
static struct { char api[64]; int nth; int err; } fails[NFAIL];
static long fail_instantiate_at = -1;
static int env_read;

static void read_env(void) {
    if (env_read) return;
    env_read = 1;
    const char *s = getenv("FAKE_CUDART_FAIL");
    if (s && *s) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", s);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char api[64];
            int nth, err;
            if (sscanf(tok, "%63[^:]:%d:%d", api, &nth, &err) == 3) {
                for (int i = 0; i < NFAIL; ++i)
                    if (fails[i].nth == 0) {
                        snprintf(fails[i].api, sizeof fails[i].api, "%s", api);
                        fails[i].nth = nth;
                        fails[i].err = err;
                        break;
                    }
            }
        }
    }
    s = getenv("FAKE_CUDART_FAIL_INSTANTIATE_AT");
    if (s && *s) fail_instantiate_at = atol(s);
}

/* Count the call; return the injected error for it, or 0. */
static int enter(const char *api) {
    read_env();
    count(api);
    for (int i = 0; i < NFAIL; ++i) {
        if (fails[i].nth > 0 && strcmp(fails[i].api, api) == 0) {
            if (--fails[i].nth == 0) return fails[i].err;
        }
    }
    return 0;
}

/* ---- kernels ----------------------------------------------------------------- */

static struct { void *fn; unsigned nargs; } kernels[64];

EXPORT int fake_cudart_register_kernel(void *fn, unsigned nargs) {
    if (nargs > MAXARGS) return cudaErrorInvalidValue;
    for (int i = 0; i < 64; ++i) {
        if (kernels[i].fn == fn || kernels[i].fn == NULL) {
            kernels[i].fn = fn;
            kernels[i].nargs = nargs;
            return 0;
        }
    }
    return cudaErrorInvalidValue;
}

static int kernel_nargs(const void *fn) {
    for (int i = 0; i < 64 && kernels[i].fn; ++i)
        if (kernels[i].fn == fn) return (int)kernels[i].nargs;
    return -1;
}

static long threads(fake_dim3 g, fake_dim3 b) {
    return (long)g.x * g.y * g.z * (long)b.x * b.y * b.z;
}

EXPORT void fake_kernel_add_one(void **args, fake_dim3 grid, fake_dim3 block) {
    double *p = *(double **)args[0];
    int64_t n = *(int64_t *)args[1];
    long t = threads(grid, block);
    for (long i = 0; i < t && i < n; ++i) p[i] += 1.0;
}
EXPORT void fake_kernel_scale(void **args, fake_dim3 grid, fake_dim3 block) {
    double *dst = *(double **)args[0];
    const double *src = *(double **)args[1];
    double f = *(double *)args[2];
    int64_t n = *(int64_t *)args[3];
    long t = threads(grid, block);
    for (long i = 0; i < t && i < n; ++i) dst[i] = f * src[i];
}
EXPORT void fake_kernel_add(void **args, fake_dim3 grid, fake_dim3 block) {
    double *out = *(double **)args[0];
    const double *a = *(double **)args[1];
    const double *b = *(double **)args[2];
    int64_t n = *(int64_t *)args[3];
    long t = threads(grid, block);
    for (long i = 0; i < t && i < n; ++i) out[i] = a[i] + b[i];
}


/* ---- eagle's compaction / reorder kernels (host versions) --------------------
 * Argument layouts and per-thread bodies as in eagle/_finished_cuda.py's CUDA
 * source. g: the graph's device block [size, next, live_replays, invalid];
 * st: a partition node's state [replay, acts]; table: per permuted array
 * [data, scratch, row_bytes, stride]. */

#define A_PTR(i, T) (*(T *)args[i])
#define A_I64(i) (*(int64_t *)args[i])

static int64_t part_key(const char *key, int64_t stride, int64_t kind, int64_t n_keys, int64_t i) {
    if (kind == 0) return key[i * stride] ? 0 : 1;
    int64_t k = kind == 1 ? (int64_t)*(const int32_t *)(key + i * stride)
                          : *(const int64_t *)(key + i * stride);
    return (k >= 0 && k < n_keys) ? k : n_keys;
}

/* eagle_part_count(key, stride, kind, n_keys, chunk, c_cap, counts, size) */
EXPORT void eagle_part_count(void **args, fake_dim3 grid, fake_dim3 block) {
    const char *key = A_PTR(0, const char *);
    int64_t stride = A_I64(1), kind = A_I64(2), n_keys = A_I64(3), chunk = A_I64(4),
            c_cap = A_I64(5);
    int64_t *counts = A_PTR(6, int64_t *);
    int64_t n = *A_PTR(7, const int64_t *);
    int64_t used = (n + chunk - 1) / chunk;
    long t = threads(grid, block);
    for (int64_t c = 0; c < t; ++c) {
        if (c >= used) continue;
        for (int64_t k = 0; k <= n_keys; ++k) counts[k * c_cap + c] = 0;
        int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        for (int64_t i = lo; i < hi; ++i)
            counts[part_key(key, stride, kind, n_keys, i) * c_cap + c] += 1;
    }
}

/* eagle_part_scan(counts, n_keys, c_cap, chunk, size, g, st, count_out, kind, every, frac)
 * one block: exclusive prefix over (bucket, chunk) in bucket-major order, then
 * thread 0 takes the policy decision. */
EXPORT void eagle_part_scan(void **args, fake_dim3 grid, fake_dim3 block) {
    (void)grid; (void)block;
    int64_t *counts = A_PTR(0, int64_t *);
    int64_t n_keys = A_I64(1), c_cap = A_I64(2), chunk = A_I64(3);
    int64_t n = *A_PTR(4, const int64_t *);
    int64_t *g = A_PTR(5, int64_t *), *st = A_PTR(6, int64_t *), *count_out = A_PTR(7, int64_t *);
    int64_t kind = A_I64(8), every = A_I64(9);
    double frac = *(double *)args[10];
    int64_t used = (n + chunk - 1) / chunk, total = (n_keys + 1) * used, carry = 0;
    for (int64_t j = 0; j < total; ++j) {
        int64_t e = (j / used) * c_cap + (j % used), v = counts[e];
        counts[e] = carry;
        carry += v;
    }
    int64_t r = st[0] + 1, acts = 0;
    st[0] = r;
    int due = every > 0 && r % every == 0;
    if (kind == 0) {
        int64_t live = used ? counts[c_cap] : 0;
        if (due && n > 0 && live != n) acts = live == 0 || (double)(n - live) >= frac * (double)n;
        if (count_out) *count_out = live;
        g[1] = (acts || live == 0) ? live : n;
    } else {
        int64_t bad = used ? carry - counts[n_keys * c_cap] : 0;
        if (due && n > 0) {
            if (bad) g[3] = 1;
            else acts = 1;
        }
    }
    st[1] = acts;
}

static void part_copy_row(char *dst, const char *src, int64_t nb) { memcpy(dst, src, (size_t)nb); }

/* eagle_part_scatter(key, stride, kind, n_keys, chunk, c_cap, counts, size, st, table, n_arrays) */
EXPORT void eagle_part_scatter(void **args, fake_dim3 grid, fake_dim3 block) {
    const char *key = A_PTR(0, const char *);
    int64_t stride = A_I64(1), kind = A_I64(2), n_keys = A_I64(3), chunk = A_I64(4),
            c_cap = A_I64(5);
    int64_t *counts = A_PTR(6, int64_t *);
    int64_t n = *A_PTR(7, const int64_t *);
    const int64_t *st = A_PTR(8, const int64_t *), *table = A_PTR(9, const int64_t *);
    int64_t n_arrays = A_I64(10);
    if (!st[1]) return;
    int64_t used = (n + chunk - 1) / chunk;
    long t = threads(grid, block);
    for (int64_t c = 0; c < t; ++c) {
        if (c >= used) continue;
        int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        for (int64_t i = lo; i < hi; ++i) {
            int64_t pos = counts[part_key(key, stride, kind, n_keys, i) * c_cap + c]++;
            for (int64_t a = 0; a < n_arrays; ++a) {
                const int64_t *d = table + 4 * a;
                part_copy_row((char *)(intptr_t)d[1] + pos * d[2],
                              (const char *)(intptr_t)d[0] + i * d[3], d[2]);
            }
        }
    }
}

/* eagle_part_copyback(size, st, table, n_arrays) */
EXPORT void eagle_part_copyback(void **args, fake_dim3 grid, fake_dim3 block) {
    int64_t n = *A_PTR(0, const int64_t *);
    const int64_t *st = A_PTR(1, const int64_t *), *table = A_PTR(2, const int64_t *);
    int64_t n_arrays = A_I64(3);
    if (!st[1]) return;
    long t = threads(grid, block);
    for (int64_t i = 0; i < t && i < n; ++i)
        for (int64_t a = 0; a < n_arrays; ++a) {
            const int64_t *d = table + 4 * a;
            part_copy_row((char *)(intptr_t)d[0] + i * d[3],
                          (const char *)(intptr_t)d[1] + i * d[2], d[2]);
        }
}

/* eagle_commit(g): the next replay's size is the compaction's count */
EXPORT void eagle_commit(void **args, fake_dim3 grid, fake_dim3 block) {
    (void)grid; (void)block;
    int64_t *g = A_PTR(0, int64_t *);
    g[2] += g[0] > 0;
    g[0] = g[1];
}

/* A test-only "size pointer" kernel: p[i] += 1 for i < *size (SIZE_PTR convention). */
EXPORT void fake_kernel_add_one_sp(void **args, fake_dim3 grid, fake_dim3 block) {
    double *p = A_PTR(0, double *);
    int64_t n = *A_PTR(1, const int64_t *);
    long t = threads(grid, block);
    for (long i = 0; i < t && i < n; ++i) p[i] += 1.0;
}

/* Test-only Monte Carlo step: a live sample ages by one and moves; it finishes
 * when its life runs out. fake_kernel_life_step(alive u8*, life int64*, x double*,
 * const int64 *size) reads the size from the device (SIZE_PTR); _n takes it by
 * value (SIZE). Both leave finished samples alone. */
static void life_step(void **args, int64_t n, fake_dim3 grid, fake_dim3 block) {
    uint8_t *alive = A_PTR(0, uint8_t *);
    int64_t *life = A_PTR(1, int64_t *);
    double *x = A_PTR(2, double *);
    long t = threads(grid, block);
    for (long i = 0; i < t && i < n; ++i) {
        if (!alive[i]) continue;
        x[i] += 1.0 + 0.5 * (double)life[i];
        if (--life[i] <= 0) alive[i] = 0;
    }
}
EXPORT void fake_kernel_life_step(void **args, fake_dim3 grid, fake_dim3 block) {
    life_step(args, *A_PTR(3, const int64_t *), grid, block);
}
EXPORT void fake_kernel_life_step_n(void **args, fake_dim3 grid, fake_dim3 block) {
    life_step(args, A_I64(3), grid, block);
}

static const struct { const char *name; void *fn; unsigned nargs; } finished_kernels[] = {
    {"eagle_part_count", (void *)eagle_part_count, 8},
    {"eagle_part_scan", (void *)eagle_part_scan, 11},
    {"eagle_part_scatter", (void *)eagle_part_scatter, 11},
    {"eagle_part_copyback", (void *)eagle_part_copyback, 4},
    {"eagle_commit", (void *)eagle_commit, 1},
};

/* The address of the host version of one of eagle's kernels, or NULL. */
EXPORT void *fake_cudart_finished_kernel(const char *name) {
    for (size_t i = 0; i < sizeof finished_kernels / sizeof *finished_kernels; ++i)
        if (strcmp(finished_kernels[i].name, name) == 0) return finished_kernels[i].fn;
    return NULL;
}

__attribute__((constructor)) static void register_builtins(void) {
    fake_cudart_register_kernel((void *)fake_kernel_add_one, 2);
    fake_cudart_register_kernel((void *)fake_kernel_scale, 4);
    fake_cudart_register_kernel((void *)fake_kernel_add, 4);
    fake_cudart_register_kernel((void *)fake_kernel_add_one_sp, 2);
    fake_cudart_register_kernel((void *)fake_kernel_life_step, 4);
    fake_cudart_register_kernel((void *)fake_kernel_life_step_n, 4);
    for (size_t i = 0; i < sizeof finished_kernels / sizeof *finished_kernels; ++i)
        fake_cudart_register_kernel(finished_kernels[i].fn, finished_kernels[i].nargs);
}

static void run_kernel(void *fn, fake_dim3 grid, fake_dim3 block, void **args) {
    count("kernel_runs");
    last_grid_x = grid.x;
    ((fake_kernel_fn)fn)(args, grid, block);
}

/* ---- graphs ------------------------------------------------------------------ */

enum { NODE_KERNEL = 0, NODE_CHILD = 1 };
#define GRAPH_MAGIC 0x47524150
#define EXEC_MAGIC 0x45584543
#define STREAM_MAGIC 0x5354524d
#define EVENT_MAGIC 0x4556454e

struct fgraph;
typedef struct fnode {
    int type;
    struct fgraph *owner;
    size_t index;
    void *func;
    fake_dim3 grid, block;
    unsigned shmem, nargs;
    uint64_t argv[MAXARGS];
    void *argp[MAXARGS];
    struct fgraph *child;
    struct fnode **deps;
    size_t ndeps;
} fnode;

typedef struct fgraph {
    int magic;
    fnode **nodes;
    size_t n, cap;
} fgraph;

static fgraph *graph_new(void) {
    fgraph *g = (fgraph *)calloc(1, sizeof *g);
    g->magic = GRAPH_MAGIC;
    live_graph++;
    return g;
}

static void graph_free(fgraph *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n; ++i) {
        graph_free(g->nodes[i]->child);
        free(g->nodes[i]->deps);
        free(g->nodes[i]);
    }
    free(g->nodes);
    g->magic = 0;
    free(g);
    live_graph--;
}

static void node_add_dep(fnode *n, fnode *d) {
    for (size_t i = 0; i < n->ndeps; ++i)
        if (n->deps[i] == d) return;
    n->deps = (fnode **)realloc(n->deps, sizeof(fnode *) * (n->ndeps + 1));
    n->deps[n->ndeps++] = d;
}

static fnode *graph_add(fgraph *g, int type, fnode *const *deps, size_t ndeps) {
    fnode *n = (fnode *)calloc(1, sizeof *n);
    n->type = type;
    n->owner = g;
    n->index = g->n;
    for (int i = 0; i < MAXARGS; ++i) n->argp[i] = &n->argv[i];
    for (size_t i = 0; i < ndeps; ++i) node_add_dep(n, deps[i]);
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->nodes = (fnode **)realloc(g->nodes, sizeof(fnode *) * g->cap);
    }
    g->nodes[g->n++] = n;
    return n;
}

static void node_set_kernel(fnode *n, void *func, fake_dim3 grid, fake_dim3 block,
                            unsigned shmem, void **args, unsigned nargs) {
    n->func = func;
    n->grid = grid;
    n->block = block;
    n->shmem = shmem;
    n->nargs = nargs;
    for (unsigned i = 0; i < nargs; ++i) memcpy(&n->argv[i], args[i], 8);
}

static fgraph *graph_clone(const fgraph *src) {
    fgraph *g = graph_new();
    for (size_t i = 0; i < src->n; ++i) {
        const fnode *s = src->nodes[i];
        fnode *n = graph_add(g, s->type, NULL, 0);
        node_set_kernel(n, s->func, s->grid, s->block, s->shmem, (void **)s->argp, s->nargs);
        n->child = s->child ? graph_clone(s->child) : NULL;
        for (size_t d = 0; d < s->ndeps; ++d) node_add_dep(n, g->nodes[s->deps[d]->index]);
    }
    return g;
}

static int valid_graph(const void *g) { return g && ((const fgraph *)g)->magic == GRAPH_MAGIC; }

/* Topological order, stable by creation index. Returns 0 on a cycle. */
static int topo(const fgraph *g, size_t *order) {
    size_t n = g->n, done = 0;
    char *placed = (char *)calloc(n ? n : 1, 1);
    while (done < n) {
        int progress = 0;
        for (size_t i = 0; i < n; ++i) {
            if (placed[i]) continue;
            int ready = 1;
            for (size_t d = 0; d < g->nodes[i]->ndeps; ++d)
                if (!placed[g->nodes[i]->deps[d]->index]) ready = 0;
            if (ready) {
                placed[i] = 1;
                order[done++] = i;
                progress = 1;
                break;
            }
        }
        if (!progress) {
            free(placed);
            return 0;
        }
    }
    free(placed);
    return 1;
}

/* An executable graph: kernel items in a valid order. origin is the node of
 * the instantiated graph an item came from (for top-level kernel nodes) or
 * the top-level child node that contains it. */
typedef struct {
    fnode *origin;
    int in_child;
    void *func;
    fake_dim3 grid, block;
    unsigned nargs;
    uint64_t argv[MAXARGS];
    void *argp[MAXARGS];
} fitem;

typedef struct {
    int magic;
    fitem *items;
    size_t n, cap;
} fexec;

static int flatten(fexec *e, const fgraph *g, fnode *top_child) {
    size_t *order = (size_t *)malloc(sizeof(size_t) * (g->n ? g->n : 1));
    if (!topo(g, order)) {
        free(order);
        return 0;
    }
    for (size_t k = 0; k < g->n; ++k) {
        fnode *s = g->nodes[order[k]];
        if (s->type == NODE_CHILD) {
            if (!flatten(e, s->child, top_child ? top_child : s)) {
                free(order);
                return 0;
            }
            continue;
        }
        if (e->n == e->cap) {
            e->cap = e->cap ? 2 * e->cap : 8;
            e->items = (fitem *)realloc(e->items, sizeof(fitem) * e->cap);
        }
        fitem *it = &e->items[e->n++];
        memset(it, 0, sizeof *it);
        it->origin = top_child ? top_child : s;
        it->in_child = top_child != NULL;
        it->func = s->func;
        it->grid = s->grid;
        it->block = s->block;
        it->nargs = s->nargs;
        memcpy(it->argv, s->argv, sizeof it->argv);
        for (int i = 0; i < MAXARGS; ++i) it->argp[i] = &it->argv[i];
    }
    free(order);
    return 1;
}

/* ---- streams, events, capture ------------------------------------------------ */

struct fstream;
typedef struct fcapture {
    fgraph *g;
    struct fstream *origin;
    struct fstream *members[64];
    int nmembers;
    int invalidated;
    unsigned long long id;
} fcapture;

typedef struct fstream {
    int magic;
    fcapture *cap;
    fnode **deps;
    size_t ndeps;
} fstream;

typedef struct {
    int magic;
    fcapture *cap; /* non-NULL if recorded during a capture */
    fnode **deps;
    size_t ndeps;
} fevent;

static unsigned long long next_capture_id = 1;

static void set_deps(fnode ***dst, size_t *nd, fnode *const *src, size_t ns) {
    free(*dst);
    *dst = ns ? (fnode **)malloc(sizeof(fnode *) * ns) : NULL;
    if (ns) memcpy(*dst, src, sizeof(fnode *) * ns);
    *nd = ns;
}

static void add_deps(fnode ***dst, size_t *nd, fnode *const *src, size_t ns) {
    for (size_t i = 0; i < ns; ++i) {
        int have = 0;
        for (size_t j = 0; j < *nd; ++j) have |= (*dst)[j] == src[i];
        if (!have) {
            *dst = (fnode **)realloc(*dst, sizeof(fnode *) * (*nd + 1));
            (*dst)[(*nd)++] = src[i];
        }
    }
}

static int valid_stream(const void *s) {
    return s == NULL || ((const fstream *)s)->magic == STREAM_MAGIC;
}

static void invalidate(fstream *s) {
    if (s && s->cap) s->cap->invalidated = 1;
}

/* is `a` an ancestor of (or equal to) `b`? */
static int reaches(const fnode *a, const fnode *b) {
    if (a == b) return 1;
    for (size_t i = 0; i < b->ndeps; ++i)
        if (reaches(a, b->deps[i])) return 1;
    return 0;
}

/* ---- the runtime API --------------------------------------------------------- */

EXPORT const char *cudaGetErrorName(int e) {
    for (size_t i = 0; i < sizeof err_table / sizeof *err_table; ++i)
        if (err_table[i].code == e) return err_table[i].name;
    return "cudaErrorUnknown";
}
EXPORT const char *cudaGetErrorString(int e) {
    for (size_t i = 0; i < sizeof err_table / sizeof *err_table; ++i)
        if (err_table[i].code == e) return err_table[i].text;
    return "unknown error";
}

static int version(void) {
    const char *v = getenv("FAKE_CUDART_VERSION");
    return v && *v ? atoi(v) : 13000;
}
EXPORT int cudaRuntimeGetVersion(int *v) { enter("cudaRuntimeGetVersion"); *v = version(); return 0; }
EXPORT int cudaDriverGetVersion(int *v) { enter("cudaDriverGetVersion"); *v = version(); return 0; }

EXPORT int cudaGetDeviceCount(int *count) {
    int f = enter("cudaGetDeviceCount");
    *count = 0;
    if (f) return f;
    const char *nd = getenv("FAKE_CUDART_NO_DRIVER");
    if (nd && *nd && strcmp(nd, "0") != 0) return cudaErrorInsufficientDriver;
    const char *d = getenv("FAKE_CUDART_DEVICES");
    int n = d && *d ? atoi(d) : 1;
    if (n <= 0) return cudaErrorNoDevice;
    *count = n;
    return 0;
}
static int current_device;
EXPORT int cudaGetDevice(int *d) { *d = current_device; return enter("cudaGetDevice"); }
EXPORT int cudaSetDevice(int d) {
    int f = enter("cudaSetDevice");
    if (f) return f;
    if (d != 0) return cudaErrorInvalidValue;
    current_device = d;
    return 0;
}
EXPORT int cudaDeviceSynchronize(void) { return enter("cudaDeviceSynchronize"); }
EXPORT int cudaGetLastError(void) { return enter("cudaGetLastError"); }

EXPORT int cudaStreamCreateWithFlags(void **ps, unsigned flags) {
    (void)flags;
    int f = enter("cudaStreamCreateWithFlags");
    if (f) return f;
    fstream *s = (fstream *)calloc(1, sizeof *s);
    s->magic = STREAM_MAGIC;
    *ps = s;
    live_stream++;
    return 0;
}
EXPORT int cudaStreamDestroy(void *p) {
    int f = enter("cudaStreamDestroy");
    if (f) return f;
    fstream *s = (fstream *)p;
    if (!s || s->magic != STREAM_MAGIC) return cudaErrorInvalidResourceHandle;
    if (s->cap) invalidate(s); /* destroying a capturing stream invalidates the capture */
    free(s->deps);
    s->magic = 0;
    free(s);
    live_stream--;
    return 0;
}
EXPORT int cudaStreamSynchronize(void *p) {
    int f = enter("cudaStreamSynchronize");
    fstream *s = (fstream *)p;
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (s && s->cap) {
        invalidate(s);
        return cudaErrorStreamCaptureUnsupported;
    }
    return f;
}

EXPORT int cudaEventCreateWithFlags(void **pe, unsigned flags) {
    (void)flags;
    int f = enter("cudaEventCreateWithFlags");
    if (f) return f;
    fevent *e = (fevent *)calloc(1, sizeof *e);
    e->magic = EVENT_MAGIC;
    *pe = e;
    live_event++;
    return 0;
}
EXPORT int cudaEventDestroy(void *p) {
    int f = enter("cudaEventDestroy");
    if (f) return f;
    fevent *e = (fevent *)p;
    if (!e || e->magic != EVENT_MAGIC) return cudaErrorInvalidResourceHandle;
    free(e->deps);
    e->magic = 0;
    free(e);
    live_event--;
    return 0;
}
EXPORT int cudaEventSynchronize(void *p) {
    (void)p;
    return enter("cudaEventSynchronize");
}
EXPORT int cudaEventRecord(void *pe, void *ps) {
    int f = enter("cudaEventRecord");
    fevent *e = (fevent *)pe;
    fstream *s = (fstream *)ps;
    if (!e || e->magic != EVENT_MAGIC || !valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (f) {
        invalidate(s);
        return f;
    }
    if (s && s->cap) {
        e->cap = s->cap;
        set_deps(&e->deps, &e->ndeps, s->deps, s->ndeps);
    } else {
        e->cap = NULL;
        set_deps(&e->deps, &e->ndeps, NULL, 0);
    }
    return 0;
}
EXPORT int cudaStreamWaitEvent(void *ps, void *pe, unsigned flags) {
    (void)flags;
    int f = enter("cudaStreamWaitEvent");
    fevent *e = (fevent *)pe;
    fstream *s = (fstream *)ps;
    if (!e || e->magic != EVENT_MAGIC || !valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (f) {
        invalidate(s);
        return f;
    }
    if (e->cap) {
        if (!s) return cudaErrorStreamCaptureIsolation; /* legacy stream */
        if (s->cap == e->cap) {
            add_deps(&s->deps, &s->ndeps, e->deps, e->ndeps);
        } else if (!s->cap) { /* fork: s joins the capture */
            fcapture *c = e->cap;
            if (c->nmembers == 64) return cudaErrorInvalidValue;
            c->members[c->nmembers++] = s;
            s->cap = c;
            set_deps(&s->deps, &s->ndeps, e->deps, e->ndeps);
        } else {
            invalidate(s);
            return cudaErrorStreamCaptureIsolation;
        }
    } else if (s && s->cap) {
        invalidate(s);
        return cudaErrorStreamCaptureIsolation;
    }
    return 0;
}

EXPORT int cudaStreamBeginCapture(void *ps, int mode) {
    (void)mode;
    int f = enter("cudaStreamBeginCapture");
    fstream *s = (fstream *)ps;
    if (!s) return cudaErrorStreamCaptureUnsupported; /* legacy stream cannot capture */
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (f) return f;
    if (s->cap) return cudaErrorIllegalState;
    fcapture *c = (fcapture *)calloc(1, sizeof *c);
    c->g = graph_new();
    c->origin = s;
    c->members[c->nmembers++] = s;
    c->id = next_capture_id++;
    s->cap = c;
    set_deps(&s->deps, &s->ndeps, NULL, 0);
    return 0;
}

EXPORT int cudaStreamEndCapture(void *ps, void **pg) {
    int f = enter("cudaStreamEndCapture");
    fstream *s = (fstream *)ps;
    *pg = NULL;
    if (!s || !valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (!s->cap) return cudaErrorIllegalState;
    fcapture *c = s->cap;
    if (c->origin != s) {
        invalidate(s);
        return cudaErrorStreamCaptureUnmatched;
    }
    int st = f ? f : 0;
    if (f) c->invalidated = 1;
    /* every side stream's work must be joined into the origin's dependencies */
    for (int m = 0; m < c->nmembers && !st; ++m) {
        fstream *side = c->members[m];
        if (side == s) continue;
        for (size_t i = 0; i < side->ndeps && !st; ++i) {
            int joined = 0;
            for (size_t j = 0; j < s->ndeps && !joined; ++j) joined = reaches(side->deps[i], s->deps[j]);
            if (!joined) st = cudaErrorStreamCaptureUnjoined;
        }
    }
    if (!st && c->invalidated) st = cudaErrorStreamCaptureInvalidated;
    for (int m = 0; m < c->nmembers; ++m) {
        c->members[m]->cap = NULL;
        set_deps(&c->members[m]->deps, &c->members[m]->ndeps, NULL, 0);
    }
    if (st) {
        graph_free(c->g);
    } else {
        *pg = c->g;
    }
    free(c);
    return st;
}

EXPORT int cudaStreamIsCapturing(void *ps, int *status) {
    int f = enter("cudaStreamIsCapturing");
    fstream *s = (fstream *)ps;
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    *status = s && s->cap ? (s->cap->invalidated ? 2 : 1) : 0;
    return f;
}

static int capture_info(void *ps, int *status, unsigned long long *id, void **graph,
                        void *const **deps, size_t *ndeps) {
    fstream *s = (fstream *)ps;
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    *status = s && s->cap ? (s->cap->invalidated ? 2 : 1) : 0;
    if (s && s->cap) {
        if (id) *id = s->cap->id;
        if (graph) *graph = s->cap->g;
        if (deps) *deps = (void *const *)s->deps;
        if (ndeps) *ndeps = s->ndeps;
    } else {
        if (graph) *graph = NULL;
        if (deps) *deps = NULL;
        if (ndeps) *ndeps = 0;
    }
    return 0;
}

/* CUDA 13 form (CUDA 12.3+ _v3): with edge data */
EXPORT int cudaStreamGetCaptureInfo(void *ps, int *status, unsigned long long *id, void **graph,
                                    void *const **deps, const void **edges, size_t *ndeps) {
    int f = enter("cudaStreamGetCaptureInfo");
    if (f) return f;
    if (edges) *edges = NULL;
    return capture_info(ps, status, id, graph, deps, ndeps);
}
/* CUDA 12.0-12.2 form */
EXPORT int cudaStreamGetCaptureInfo_v2(void *ps, int *status, unsigned long long *id,
                                       void **graph, void *const **deps, size_t *ndeps) {
    int f = enter("cudaStreamGetCaptureInfo_v2");
    if (f) return f;
    return capture_info(ps, status, id, graph, deps, ndeps);
}

static int thread_capture_mode;
EXPORT int cudaThreadExchangeStreamCaptureMode(int *mode) {
    int old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return enter("cudaThreadExchangeStreamCaptureMode");
}

EXPORT int cudaLaunchKernel(const void *func, fake_dim3 grid, fake_dim3 block, void **args,
                            size_t shmem, void *ps) {
    int f = enter("cudaLaunchKernel");
    fstream *s = (fstream *)ps;
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (f) {
        invalidate(s);
        return f;
    }
    int nargs = kernel_nargs(func);
    if (nargs < 0) {
        invalidate(s);
        return cudaErrorInvalidDeviceFunction;
    }
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) {
        invalidate(s);
        return cudaErrorInvalidConfiguration;
    }
    if (s && s->cap) {
        if (s->cap->invalidated) return cudaErrorStreamCaptureInvalidated;
        fnode *n = graph_add(s->cap->g, NODE_KERNEL, s->deps, s->ndeps);
        node_set_kernel(n, (void *)func, grid, block, (unsigned)shmem, args, (unsigned)nargs);
        set_deps(&s->deps, &s->ndeps, &n, 1);
        return 0;
    }
    run_kernel((void *)func, grid, block, args);
    return 0;
}

EXPORT int cudaGraphCreate(void **pg, unsigned flags) {
    (void)flags;
    int f = enter("cudaGraphCreate");
    if (f) return f;
    *pg = graph_new();
    return 0;
}
EXPORT int cudaGraphDestroy(void *g) {
    int f = enter("cudaGraphDestroy");
    if (f) return f;
    if (!valid_graph(g)) return cudaErrorInvalidResourceHandle;
    graph_free((fgraph *)g);
    return 0;
}
EXPORT int cudaGraphGetNodes(void *pg, void **nodes, size_t *count) {
    int f = enter("cudaGraphGetNodes");
    if (f) return f;
    if (!valid_graph(pg)) return cudaErrorInvalidResourceHandle;
    fgraph *g = (fgraph *)pg;
    if (nodes) {
        for (size_t i = 0; i < *count; ++i) nodes[i] = i < g->n ? g->nodes[i] : NULL;
    }
    *count = g->n;
    return 0;
}
EXPORT int cudaGraphAddChildGraphNode(void **pnode, void *pg, void *const *deps, size_t ndeps,
                                      void *child) {
    int f = enter("cudaGraphAddChildGraphNode");
    if (f) return f;
    if (!valid_graph(pg) || !valid_graph(child)) return cudaErrorInvalidResourceHandle;
    fnode *n = graph_add((fgraph *)pg, NODE_CHILD, (fnode *const *)deps, ndeps);
    n->child = graph_clone((const fgraph *)child);
    *pnode = n;
    return 0;
}
EXPORT int cudaGraphChildGraphNodeGetGraph(void *pnode, void **pg) {
    int f = enter("cudaGraphChildGraphNodeGetGraph");
    if (f) return f;
    fnode *n = (fnode *)pnode;
    if (!n || n->type != NODE_CHILD) return cudaErrorInvalidValue;
    *pg = n->child;
    return 0;
}
EXPORT int cudaGraphAddDependencies(void *pg, void *const *from, void *const *to,
                                    const void *edges, size_t n) {
    (void)edges;
    int f = enter("cudaGraphAddDependencies");
    if (f) return f;
    if (!valid_graph(pg)) return cudaErrorInvalidResourceHandle;
    for (size_t i = 0; i < n; ++i) {
        fnode *a = (fnode *)from[i], *b = (fnode *)to[i];
        if (a->owner != pg || b->owner != pg) return cudaErrorInvalidValue;
        node_add_dep(b, a);
    }
    return 0;
}

EXPORT int cudaGraphKernelNodeGetParams(void *pnode, void *pp) {
    /* struct cudaKernelNodeParams: func, grid, block, shmem, kernelParams, extra */
    struct kp { void *func; fake_dim3 grid, block; unsigned shmem; void **params; void **extra; };
    int f = enter("cudaGraphKernelNodeGetParams");
    if (f) return f;
    fnode *n = (fnode *)pnode;
    if (!n || n->type != NODE_KERNEL) return cudaErrorInvalidValue;
    struct kp *p = (struct kp *)pp;
    p->func = n->func;
    p->grid = n->grid;
    p->block = n->block;
    p->shmem = n->shmem;
    p->params = n->argp;
    p->extra = NULL;
    return 0;
}
EXPORT int cudaGraphKernelNodeSetParams(void *pnode, const void *pp) {
    struct kp { void *func; fake_dim3 grid, block; unsigned shmem; void **params; void **extra; };
    int f = enter("cudaGraphKernelNodeSetParams");
    if (f) return f;
    fnode *n = (fnode *)pnode;
    const struct kp *p = (const struct kp *)pp;
    if (!n || n->type != NODE_KERNEL || !p->params) return cudaErrorInvalidValue;
    int nargs = kernel_nargs(p->func);
    if (nargs < 0) return cudaErrorInvalidDeviceFunction;
    uint64_t tmp[MAXARGS];
    for (int i = 0; i < nargs; ++i) memcpy(&tmp[i], p->params[i], 8); /* may alias node storage */
    void *tp[MAXARGS];
    for (int i = 0; i < MAXARGS; ++i) tp[i] = &tmp[i];
    node_set_kernel(n, p->func, p->grid, p->block, p->shmem, tp, (unsigned)nargs);
    return 0;
}

EXPORT int cudaGraphInstantiateWithParams(void **pexec, void *pg, void *pparams) {
    /* cudaGraphInstantiateParams: flags, uploadStream, errNode_out, result_out */
    struct ip { unsigned long long flags; void *upload; void *err_node; int result; };
    struct ip *p = (struct ip *)pparams;
    int f = enter("cudaGraphInstantiateWithParams");
    *pexec = NULL;
    p->err_node = NULL;
    p->result = 0;
    if (f) {
        p->result = 1;
        return f;
    }
    if (!valid_graph(pg)) return cudaErrorInvalidResourceHandle;
    fgraph *g = (fgraph *)pg;
    if (fail_instantiate_at >= 0 && (size_t)fail_instantiate_at < g->n) {
        p->err_node = g->nodes[fail_instantiate_at];
        p->result = 1; /* cudaGraphInstantiateError */
        return cudaErrorNotSupported;
    }
    fexec *e = (fexec *)calloc(1, sizeof *e);
    e->magic = EXEC_MAGIC;
    if (!flatten(e, g, NULL)) {
        free(e->items);
        free(e);
        p->result = 2; /* cudaGraphInstantiateInvalidStructure */
        return cudaErrorInvalidValue;
    }
    /* the items' argp point into the (possibly reallocated) array: fix them */
    for (size_t i = 0; i < e->n; ++i)
        for (int a = 0; a < MAXARGS; ++a) e->items[i].argp[a] = &e->items[i].argv[a];
    live_exec++;
    *pexec = e;
    if (p->flags & 2ull) count("upload_on_instantiate");
    return 0;
}
static fexec *as_exec(void *p) {
    fexec *e = (fexec *)p;
    return e && e->magic == EXEC_MAGIC ? e : NULL;
}
EXPORT int cudaGraphExecDestroy(void *pe) {
    int f = enter("cudaGraphExecDestroy");
    if (f) return f;
    fexec *e = as_exec(pe);
    if (!e) return cudaErrorInvalidResourceHandle;
    free(e->items);
    e->magic = 0;
    free(e);
    live_exec--;
    return 0;
}
EXPORT int cudaGraphUpload(void *pe, void *ps) {
    int f = enter("cudaGraphUpload");
    if (f) return f;
    if (!as_exec(pe) || !valid_stream(ps)) return cudaErrorInvalidResourceHandle;
    return 0;
}

static long launches;
EXPORT int cudaGraphLaunch(void *pe, void *ps) {
    int f = enter("cudaGraphLaunch");
    fexec *e = as_exec(pe);
    fstream *s = (fstream *)ps;
    if (!e || !valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (f) return f;
    if (s && s->cap) {
        invalidate(s);
        return cudaErrorStreamCaptureUnsupported; /* child-graph capture: not modelled */
    }
    for (size_t i = 0; i < e->n; ++i)
        run_kernel(e->items[i].func, e->items[i].grid, e->items[i].block, e->items[i].argp);
    launches++;
    return 0;
}

static int exec_set_kernel(fexec *e, fnode *node, void *func, fake_dim3 grid, fake_dim3 block,
                           void **params) {
    if (!node || node->type != NODE_KERNEL || !params) return cudaErrorInvalidValue;
    for (size_t i = 0; i < e->n; ++i) {
        fitem *it = &e->items[i];
        if (it->origin != node || it->in_child) continue;
        if (it->func != func) return cudaErrorInvalidValue;
        it->grid = grid;
        it->block = block;
        for (unsigned a = 0; a < it->nargs; ++a) memcpy(&it->argv[a], params[a], 8);
        return 0;
    }
    return cudaErrorInvalidValue; /* not a node of the graph exec came from */
}

EXPORT int cudaGraphExecKernelNodeSetParams(void *pe, void *pnode, const void *pp) {
    struct kp { void *func; fake_dim3 grid, block; unsigned shmem; void **params; void **extra; };
    int f = enter("cudaGraphExecKernelNodeSetParams");
    if (f) return f;
    fexec *e = as_exec(pe);
    if (!e) return cudaErrorInvalidResourceHandle;
    const struct kp *p = (const struct kp *)pp;
    return exec_set_kernel(e, (fnode *)pnode, p->func, p->grid, p->block, p->params);
}

EXPORT int cudaGraphExecChildGraphNodeSetParams(void *pe, void *pnode, void *pchild) {
    int f = enter("cudaGraphExecChildGraphNodeSetParams");
    if (f) return f;
    fexec *e = as_exec(pe);
    fnode *node = (fnode *)pnode;
    if (!e || !valid_graph(pchild)) return cudaErrorInvalidResourceHandle;
    if (!node || node->type != NODE_CHILD) return cudaErrorInvalidValue;
    fexec tmp;
    memset(&tmp, 0, sizeof tmp);
    if (!flatten(&tmp, (fgraph *)pchild, node)) return cudaErrorInvalidValue;
    size_t k = 0;
    int st = 0;
    for (size_t i = 0; i < e->n && !st; ++i) {
        if (e->items[i].origin != node) continue;
        if (k >= tmp.n || tmp.items[k].func != e->items[i].func) st = cudaErrorGraphExecUpdateFailure;
        else {
            e->items[i].grid = tmp.items[k].grid;
            e->items[i].block = tmp.items[k].block;
            memcpy(e->items[i].argv, tmp.items[k].argv, sizeof tmp.items[k].argv);
        }
        ++k;
    }
    if (!st && k != tmp.n) st = cudaErrorGraphExecUpdateFailure;
    free(tmp.items);
    return st;
}

EXPORT int cudaGraphExecUpdate(void *pe, void *pg, void *pinfo) {
    struct ui { int result; void *err_node; void *err_from; };
    struct ui *info = (struct ui *)pinfo;
    int f = enter("cudaGraphExecUpdate");
    info->result = 0;
    info->err_node = info->err_from = NULL;
    if (f) {
        info->result = 1;
        return f;
    }
    fexec *e = as_exec(pe);
    if (!e || !valid_graph(pg)) return cudaErrorInvalidResourceHandle;
    fexec tmp;
    memset(&tmp, 0, sizeof tmp);
    if (!flatten(&tmp, (fgraph *)pg, NULL) || tmp.n != e->n) {
        free(tmp.items);
        info->result = 2; /* cudaGraphExecUpdateErrorTopologyChanged */
        return cudaErrorGraphExecUpdateFailure;
    }
    for (size_t i = 0; i < e->n; ++i) {
        if (tmp.items[i].func != e->items[i].func) {
            info->result = 7; /* UnsupportedFunctionChange */
            info->err_node = tmp.items[i].origin;
            free(tmp.items);
            return cudaErrorGraphExecUpdateFailure;
        }
    }
    for (size_t i = 0; i < e->n; ++i) {
        e->items[i].origin = tmp.items[i].origin;
        e->items[i].grid = tmp.items[i].grid;
        e->items[i].block = tmp.items[i].block;
        memcpy(e->items[i].argv, tmp.items[i].argv, sizeof tmp.items[i].argv);
    }
    free(tmp.items);
    return 0;
}

/* ---- driver entry points (CUDA_KERNEL_NODE_PARAMS_v2) ----------------------- */

struct cu_kp {
    void *func;
    unsigned gx, gy, gz, bx, by, bz, shmem;
    void **params;
    void **extra;
    void *kern, *ctx;
};

static int cu_kernel_node_get_params(void *pnode, struct cu_kp *p) {
    count("driver_get_params");
    fnode *n = (fnode *)pnode;
    if (!n || n->type != NODE_KERNEL) return 1; /* CUDA_ERROR_INVALID_VALUE */
    memset(p, 0, sizeof *p);
    p->func = n->func;
    p->gx = n->grid.x; p->gy = n->grid.y; p->gz = n->grid.z;
    p->bx = n->block.x; p->by = n->block.y; p->bz = n->block.z;
    p->shmem = n->shmem;
    p->params = n->argp;
    return 0;
}
static int cu_exec_kernel_node_set_params(void *pe, void *pnode, const struct cu_kp *p) {
    count("driver_exec_set_params");
    int f = enter("cuGraphExecKernelNodeSetParams");
    if (f) return f;
    fexec *e = as_exec(pe);
    if (!e) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    fake_dim3 g = {p->gx, p->gy, p->gz}, b = {p->bx, p->by, p->bz};
    return exec_set_kernel(e, (fnode *)pnode, p->func, g, b, p->params);
}

static int driver_entry(const char *sym, void **fn, int *q) {
    const char *no = getenv("FAKE_CUDART_NO_DRIVER_ENTRY");
    *fn = NULL;
    if (q) *q = 1; /* cudaDriverEntryPointSymbolNotFound */
    if (no && *no && strcmp(no, "0") != 0) return 500; /* cudaErrorSymbolNotFound */
    if (strcmp(sym, "cuGraphKernelNodeGetParams") == 0) *fn = (void *)cu_kernel_node_get_params;
    else if (strcmp(sym, "cuGraphExecKernelNodeSetParams") == 0)
        *fn = (void *)cu_exec_kernel_node_set_params;
    if (!*fn) return 500;
    if (q) *q = 0;
    return 0;
}
EXPORT int cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned ver,
                                            unsigned long long flags, int *q) {
    (void)ver; (void)flags;
    enter("cudaGetDriverEntryPointByVersion");
    return driver_entry(sym, fn, q);
}
EXPORT int cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags, int *q) {
    (void)flags;
    enter("cudaGetDriverEntryPoint");
    return driver_entry(sym, fn, q);
}

/* ---- device memory: host memory here ------------------------------------------ */

static long live_devmem;
EXPORT int cudaMalloc(void **p, size_t n) {
    int f = enter("cudaMalloc");
    if (f) return f;
    *p = calloc(1, n ? n : 1);
    if (!*p) return 2; /* cudaErrorMemoryAllocation */
    live_devmem++;
    return 0;
}
EXPORT int cudaFree(void *p) {
    int f = enter("cudaFree");
    if (f) return f;
    if (p) {
        free(p);
        live_devmem--;
    }
    return 0;
}
EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *ps) {
    (void)kind;
    int f = enter("cudaMemcpyAsync");
    fstream *s = (fstream *)ps;
    if (!valid_stream(s)) return cudaErrorInvalidResourceHandle;
    if (f) return f;
    if (s && s->cap) {
        invalidate(s);
        return cudaErrorStreamCaptureUnsupported; /* memcpy nodes: not modelled */
    }
    memmove(dst, src, n);
    return 0;
}

/* ---- test-only observation and control --------------------------------------- */

EXPORT long fake_cudart_launch_count(void) { return launches; }
EXPORT long fake_cudart_counter(const char *name) {
    for (int i = 0; i < NCOUNTERS && counters[i].name[0]; ++i)
        if (strcmp(counters[i].name, name) == 0) return counters[i].value;
    return 0;
}
EXPORT long fake_cudart_live(const char *kind) {
    if (strcmp(kind, "stream") == 0) return live_stream;
    if (strcmp(kind, "event") == 0) return live_event;
    if (strcmp(kind, "graph") == 0) return live_graph;
    if (strcmp(kind, "exec") == 0) return live_exec;
    if (strcmp(kind, "devmem") == 0) return live_devmem;
    return -1;
}
EXPORT unsigned fake_cudart_last_grid_x(void) { return last_grid_x; }
EXPORT void fake_cudart_fail_next(const char *api, int nth, int err) {
    read_env();
    for (int i = 0; i < NFAIL; ++i)
        if (fails[i].nth == 0) {
            snprintf(fails[i].api, sizeof fails[i].api, "%s", api);
            fails[i].nth = nth;
            fails[i].err = err;
            return;
        }
}
EXPORT void fake_cudart_fail_instantiate_at_node(long k) {
    read_env();
    fail_instantiate_at = k;
}
/* Counters and failure plans back to zero (live-object counts are kept). */
EXPORT void fake_cudart_reset(void) {
    read_env();
    memset(counters, 0, sizeof counters);
    memset(fails, 0, sizeof fails);
    fail_instantiate_at = -1;
    launches = 0;
    last_grid_x = 0;
}
