/* fake_libcuda.c — TEST DOUBLE. NOT CUDA.
 *
 * A CPU stand-in for the part of the CUDA driver (libcuda.so.1) that eagle's
 * shim (csrc/include/eagle/detail/cuda_shim_impl.h) uses. The tests in tests/cuda
 * build it into a temporary directory as libcuda.so.1 and point EAGLE_LIBCUDA
 * at it. It is never shipped and never loaded unless EAGLE_LIBCUDA names it.
 *
 * How it behaves like CUDA (what the tests rely on):
 * - entry points come only through cuGetProcAddress_v2(symbol, &fn, version,
 *   flags, &status) (plus cuInit, cuDriverGetVersion, cuGetProcAddress_v2
 *   themselves by dlsym), with the signatures of the CUDA version asked for:
 *   cuStreamGetCaptureInfo is the 6-argument form below 12.3 and the
 *   7-argument one from 12.3 and in 13.x; cuGraphAddDependencies likewise;
 *   features newer than the fake driver (FAKE_CUDA_VERSION, default 13000)
 *   are CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT; cuFuncGetParamInfo and
 *   conditional nodes need 12.4.
 * - cuInit first, and a current context per thread (cuDevicePrimaryCtxRetain
 *   + cuCtxSetCurrent), else CUDA_ERROR_NOT_INITIALIZED / INVALID_CONTEXT.
 * - every stream runs its work asynchronously on its own host thread; an
 *   instantiated graph runs each node on its own host thread once its
 *   dependencies finished, so independent branches run concurrently and a
 *   missing event wait or edge is a race the tests can see.
 * - cuStreamQuery / cuEventQuery say CUDA_ERROR_NOT_READY while the work is queued or
 *   running on the stream's thread (a polling wait sees it, and a signal can land
 *   meanwhile); host-mapped pinned memory (cuMemHostAlloc DEVICEMAP,
 *   cuMemHostGetDevicePointer) is host memory kernels may read while they run.
 * - device memory (cuMemAlloc) is its own address range; a kernel given a
 *   non-NULL pointer argument outside a live allocation faults with
 *   CUDA_ERROR_ILLEGAL_ADDRESS, and that error is sticky: every later call
 *   returns it, as after a real fault.
 * - capture: a capture sequence owns a graph; a stream joins it by waiting
 *   on an event recorded in it; cuStreamEndCapture needs every joined
 *   stream's work joined back (CUDA_ERROR_STREAM_CAPTURE_UNJOINED), and only
 *   the origin may end it (UNMATCHED); waiting on an event recorded outside
 *   the capture is CUDA_ERROR_STREAM_CAPTURE_ISOLATION; synchronizing a
 *   capturing stream, and unsafe calls (cuMemAlloc, cuCtxSynchronize,
 *   cuStreamSynchronize) while a GLOBAL-mode capture is active (or a
 *   THREAD_LOCAL one of this thread, unless this thread exchanged to RELAXED)
 *   fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the
 *   capture; work on the legacy stream while a blocking stream captures is
 *   CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates it.
 * - kernels have real parameter lists: each kernel declares its parameter
 *   sizes (cuFuncGetParamInfo reports them) and launches copy each argument
 *   by its size.
 * - graph nodes: kernel, memcpy and memset (captured, device memory only),
 *   child graph, conditional (IF/WHILE, with cuGraphConditionalHandleCreate
 *   and a device-side fake_cuda_set_conditional that emulated kernels call
 *   as cudaGraphSetConditional). A child graph must not hold a conditional
 *   node at any depth (the driver's rule, modelled at cuGraphAddChildGraphNode,
 *   cuGraphAddNode and instantiate: see graph_holds_cond). Events during capture are fork/join edges,
 *   as in CUDA; no entry point adds event record / wait nodes (eagle uses
 *   none), though the executor knows the node types.
 *
 * Kernels. A CUfunction here is a fake_kernel: a name, its parameter sizes
 * and which parameters are pointers, and a host entry
 *     void entry(void **args, fake_dim3 grid, fake_dim3 block, unsigned shmem);
 * that runs the whole grid. Built-in test kernels: fake_cuda_kernel(name)
 * (see the table below). Kernels from CUDA C source: the tests compile a .cu
 * file with the emulation prelude tests/doubles/cuda_emulation.h (a block's
 * CUDA threads are fibers on its slot's host thread, __syncthreads a barrier
 * of them, __shared__ per block) into a shared object and load it with
 * fake_cuda_load_module(path); fake_cuda_module_function(name) returns the
 * CUfunction.
 *
 * Concurrency and limits, as on a GPU: the blocks of an emulated kernel's launch run
 * concurrently (FAKE_CUDA_CONCURRENT_BLOCKS slots, default 4; "concurrent blocks"
 * below), each with its own __shared__; a launch past a block's resources (1024
 * threads, 48 KiB of static + dynamic shared memory, 64 K registers) fails with
 * CUDA_ERROR_INVALID_VALUE / LAUNCH_OUT_OF_RESOURCES; a stream's launch queue has a
 * depth (FAKE_CUDA_QUEUE_DEPTH, default 2048; "the launch queue" below) and a launch
 * onto a full one waits for the device instead of failing.
 *
 * Failure injection: fake_cuda_fail_next(api, nth, err) (the nth next call of
 * `api`, e.g. "cuGraphLaunch", returns err), fake_cuda_fail_instantiate_at_node(k)
 * (instantiating a graph of more than k nodes fails naming its k-th node),
 * fake_cuda_fail_instantiate_at_kernel(func) (fails naming the first node, at any depth,
 * that launches kernel func), fake_cuda_set_edge_data(1) (captured dependencies carry
 * edge data: cuStreamGetCaptureInfo_v3 without edgeData_out is CUDA_ERROR_LOSSY_QUERY; an
 * edgeData_out without dependencies_out is CUDA_ERROR_INVALID_VALUE, as on a real 13.0 driver),
 * env FAKE_CUDA_DEVICES=N (0: no device; N > 1: N devices, each its own context), FAKE_CUDA_VERSION,
 * FAKE_CUDA_NO_INIT=1 (cuInit fails with CUDA_ERROR_NO_DEVICE), FAKE_CUDA_ARENA_ANYWHERE=1 (device
 * memory wherever mmap puts it, not at its fixed address: for ThreadSanitizer).
 * Observation: fake_cuda_counter(api or "kernel_runs"), fake_cuda_live(kind:
 * stream event graph exec devmem hostmem), fake_cuda_launch_count(), fake_cuda_last_grid_x(),
 * fake_cuda_sticky(), fake_cuda_reset() (waits for all work, clears counters,
 * injections and the sticky error).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct { unsigned int x, y, z; } fake_dim3;
typedef void (*fake_entry)(void **args, fake_dim3 grid, fake_dim3 block, unsigned shmem);
/* one block of an emulated kernel (cuda_emulation.h's run_block) */
typedef void (*fake_block_entry)(void **args, fake_dim3 grid, fake_dim3 block, fake_dim3 block_idx);

enum {
    OK = 0, E_INVALID_VALUE = 1, E_OUT_OF_MEMORY = 2, E_NOT_INITIALIZED = 3,
    E_NO_DEVICE = 100, E_INVALID_CONTEXT = 201, E_INVALID_HANDLE = 400, E_ILLEGAL_STATE = 401, E_NOT_FOUND = 500,
    E_NOT_READY = 600, E_ILLEGAL_ADDRESS = 700, E_LAUNCH_OUT_OF_RESOURCES = 701, E_LAUNCH_FAILED = 719, E_NOT_SUPPORTED = 801,
    E_CAPTURE_UNSUPPORTED = 900, E_CAPTURE_INVALIDATED = 901, E_CAPTURE_MERGE = 902,
    E_CAPTURE_UNMATCHED = 903, E_CAPTURE_UNJOINED = 904, E_CAPTURE_ISOLATION = 905,
    E_CAPTURE_IMPLICIT = 906, E_CAPTURE_WRONG_THREAD = 908, E_GRAPH_EXEC_UPDATE = 910,
    E_UNKNOWN = 999
};

static const struct { int code; const char *name, *text; } err_table[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in the current state"},
    {402, "CUDA_ERROR_LOSSY_QUERY", "attempted introspection would be lossy"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* ---- global state ------------------------------------------------------------- */

static pthread_mutex_t G = PTHREAD_MUTEX_INITIALIZER; /* guards every API call's bookkeeping */
static int initialized, sticky, driver_version_env;
static __thread void *tls_ctx;
static __thread int tls_capture_mode = 0; /* cuThreadExchangeStreamCaptureMode */
static int primary_ctx_marker;
#define PRIMARY_CTX ((void *)&primary_ctx_marker)

/* ---- devices and their primary contexts -------------------------------------------
 * FAKE_CUDA_DEVICES=N devices (default 1), each with its own primary context (device 0's
 * is PRIMARY_CTX). Streams and events belong to the context current when they were made;
 * as on CUDA, work on a stream needs that stream's context current, and an event is
 * recorded only on a stream of its own context (else CUDA_ERROR_INVALID_CONTEXT /
 * CUDA_ERROR_INVALID_HANDLE). Waiting on an event of another context is allowed. */
#define NDEV 16
static int ctx_markers[NDEV];
static int n_devices(void) {
    const char *d = getenv("FAKE_CUDA_DEVICES");
    int n = d && *d ? atoi(d) : 1;
    return n < 0 ? 0 : n > NDEV ? NDEV : n;
}
static void *ctx_of_device(int dev) { return dev == 0 ? PRIMARY_CTX : (void *)&ctx_markers[dev]; }
static int device_of_ctx(const void *ctx) {
    for (int d = 0; d < NDEV; ++d)
        if (ctx == ctx_of_device(d)) return d;
    return -1;
}

#define NCOUNTERS 96
static struct { char name[64]; long value; } counters[NCOUNTERS];
static long live_stream, live_event, live_graph, live_exec, live_devmem, live_hostmem, launches;
static unsigned last_grid_x;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void count(const char *name) {
    pthread_mutex_lock(&count_lock);
    for (int i = 0; i < NCOUNTERS; ++i) {
        if (counters[i].name[0] == 0) {
            snprintf(counters[i].name, sizeof counters[i].name, "%s", name);
            counters[i].value = 1;
            break;
        }
        if (strcmp(counters[i].name, name) == 0) {
            counters[i].value++;
            break;
        }
    }
    pthread_mutex_unlock(&count_lock);
}

#define NFAIL 16
static struct { char api[64]; int nth; int err; } fails[NFAIL];
static long fail_instantiate_at = -1;
static const void *fail_instantiate_kernel; /* fake_cuda_fail_instantiate_at_kernel */

static int version(void) {
    if (!driver_version_env) {
        const char *v = getenv("FAKE_CUDA_VERSION");
        driver_version_env = v && *v ? atoi(v) : 13000;
    }
    return driver_version_env;
}

/* Every API call: count it, the sticky error, injected failures. Locks G. */
static int enter_nolock(const char *api, int need_ctx) {
    count(api);
    if (sticky) return sticky;
    for (int i = 0; i < NFAIL; ++i)
        if (fails[i].nth > 0 && strcmp(fails[i].api, api) == 0 && --fails[i].nth == 0)
            return fails[i].err;
    if (need_ctx && !initialized) return E_NOT_INITIALIZED;
    if (need_ctx && !tls_ctx) return E_INVALID_CONTEXT;
    return OK;
}
#define ENTER(api)                                                                 \
    pthread_mutex_lock(&G);                                                        \
    int rc_ = enter_nolock(api, 1);                                                \
    if (rc_) { pthread_mutex_unlock(&G); return rc_; }
#define LEAVE(v) do { int v_ = (v); pthread_mutex_unlock(&G); return v_; } while (0)

/* ---- handles ------------------------------------------------------------------ */

/* Every object the stand-in hands out as a handle (kernel, stream, event, graph, node,
 * exec) is entered here with its kind when it is made, and never removed: no handle's
 * object is ever freed (destroyed ones stay as dead shells, DEAD_MAGIC), so a stale
 * handle is an error code. A handle is looked up here BEFORE anything reads through
 * it: the tests pass deliberately bogus handles (a function's address as a CUfunction),
 * and reading a magic number through one of those is undefined behaviour (under ASan a
 * report, on a real fault a crash of the test instead of the error CUDA returns).
 * An open-addressing set keyed by address, behind its own lock (some callers hold G,
 * some do not). */
#define KERNEL_MAGIC 0x4b45524e
#define EVENT_MAGIC 0x4556454e
#define STREAM_MAGIC 0x5354524d
#define GRAPH_MAGIC 0x47524150
#define NODE_MAGIC 0x4e4f4445
#define EXEC_MAGIC 0x45584543
#define DEAD_MAGIC 0x44454144

typedef struct { const void *p; int kind; } handle_slot;
static handle_slot *handles;
static size_t handles_cap, handles_n;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t handle_home(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}
/* 1 if p was not in the table yet */
static int handle_put(handle_slot *t, size_t cap, const void *p, int kind) {
    size_t i = handle_home(p, cap);
    while (t[i].p && t[i].p != p) i = (i + 1) & (cap - 1);
    int fresh = t[i].p == NULL;
    t[i].p = p;
    t[i].kind = kind;
    return fresh;
}
static void handle_add(const void *p, int kind) {
    pthread_mutex_lock(&handles_lock);
    if (2 * (handles_n + 1) > handles_cap) {
        size_t cap = handles_cap ? 2 * handles_cap : 1024;
        handle_slot *t = (handle_slot *)calloc(cap, sizeof *t);
        if (!t) abort();
        for (size_t i = 0; i < handles_cap; ++i)
            if (handles[i].p) handle_put(t, cap, handles[i].p, handles[i].kind);
        free(handles);
        handles = t;
        handles_cap = cap;
    }
    handles_n += (size_t)handle_put(handles, handles_cap, p, kind);
    pthread_mutex_unlock(&handles_lock);
}
/* 1 if p is a handle of this kind the stand-in made (alive or not: check the magic after) */
static int handle_is(const void *p, int kind) {
    int found = 0;
    if (!p) return 0;
    pthread_mutex_lock(&handles_lock);
    if (handles_cap) {
        size_t i = handle_home(p, handles_cap);
        while (handles[i].p && handles[i].p != p) i = (i + 1) & (handles_cap - 1);
        found = handles[i].p == p && handles[i].kind == kind;
    }
    pthread_mutex_unlock(&handles_lock);
    return found;
}

/* A handle the stand-in made, of `kind`, whose object is now a dead shell (destroyed):
 * a use after destroy. The driver answers an error code (or crashes: the handle's memory
 * may be reused by then); the stand-in answers one too, and counts the use, so a test
 * can show that eagle never passes a destroyed graph, exec, stream, event or module
 * handle: fake_cuda_dead_handle_uses(). */
static long dead_uses;
static int is_alive(const void *p, int kind, int magic) {
    if (!handle_is(p, kind)) return 0;
    if (magic == kind) return 1;
    if (magic == DEAD_MAGIC) __atomic_fetch_add(&dead_uses, 1, __ATOMIC_RELAXED);
    return 0;
}
EXPORT long fake_cuda_dead_handle_uses(void) { return __atomic_load_n(&dead_uses, __ATOMIC_RELAXED); }

/* Copy n bytes; n == 0 reads nothing (memcpy with a NULL pointer is undefined even then). */
static void copy_bytes(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

/* ---- device memory ------------------------------------------------------------ */

#define ARENA_BASE ((uintptr_t)0x200000000000ull)
#define ARENA_SIZE ((size_t)1 << 32)
static char *arena;
static size_t arena_used;
#define NALLOC 65536
static struct { uintptr_t lo, hi; int live, host; } allocs[NALLOC];
static int nallocs;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

static int arena_init(void) {
    if (arena) return 0;
    /* FAKE_CUDA_ARENA_ANYWHERE=1: where the kernel puts it (ThreadSanitizer keeps its
     * shadow memory at the fixed address) */
    const char *anywhere = getenv("FAKE_CUDA_ARENA_ANYWHERE");
    void *p = anywhere && *anywhere == '1' ? MAP_FAILED :
              mmap((void *)ARENA_BASE, ARENA_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        p = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return E_OUT_OF_MEMORY;
    arena = (char *)p;
    return 0;
}

/* 1 if [p, p+n) lies in a live allocation (n may be 0: p may be one past the end). */
static int is_device(uintptr_t p, size_t n) {
    int ok = 0;
    pthread_mutex_lock(&mem_lock);
    for (int i = nallocs - 1; i >= 0; --i)
        if (allocs[i].live && p >= allocs[i].lo && p + n <= allocs[i].hi &&
            (n || p <= allocs[i].hi)) {
            ok = 1;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    return ok;
}
static int in_arena(uintptr_t p) {
    return arena && p >= (uintptr_t)arena && p < (uintptr_t)arena + ARENA_SIZE;
}

/* ---- kernels -------------------------------------------------------------------- */

#define MAXARGS 24
typedef struct fake_kernel {
    int magic;
    char name[128];
    unsigned nparams;
    unsigned sizes[MAXARGS];
    unsigned pointer_mask; /* bit i: parameter i is a pointer */
    fake_entry entry;
    /* what a GPU compiler reports (0: not declared): checked at launch (klaunch_set) */
    unsigned static_shared, registers;
    /* emulated CUDA C: one block entry per concurrent block slot (nslots copies of
     * the module, see "concurrent blocks" below); 0 slots: entry runs the grid */
    unsigned nslots;
    fake_block_entry slot_entry[16];
} fake_kernel;

static unsigned grid_threads(fake_dim3 g, fake_dim3 b) {
    return g.x * g.y * g.z * b.x * b.y * b.z;
}
/* parameter i's value, copied out: reading it through a T * would assume its bytes
 * are aligned for T (they are, in klaunch.bytes, but a kernel need not rely on it) */
#define ARG(i, T) __extension__({ T arg_; memcpy(&arg_, args[i], sizeof arg_); arg_; })

static void k_add_one(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *p = ARG(0, double *);
    int64_t n = ARG(1, int64_t);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) p[i] += 1.0;
}
static void k_add_one_i32(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *p = ARG(0, double *);
    int32_t n = ARG(1, int32_t);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) p[i] += 1.0;
}
static void k_scale(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *dst = ARG(0, double *);
    const double *src = ARG(1, double *);
    double f = ARG(2, double);
    int64_t n = ARG(3, int64_t);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) dst[i] = f * src[i];
}
static void k_add(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *out = ARG(0, double *);
    const double *x = ARG(1, double *), *y = ARG(2, double *);
    int64_t n = ARG(3, int64_t);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) out[i] = x[i] + y[i];
}
static void k_add_one_sp(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *p = ARG(0, double *);
    const int64_t *np = ARG(1, const int64_t *);
    int64_t n = *np;
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) p[i] += 1.0;
}
/* slow_fill(double *p, double v, int64 n, int64 micros): sleeps, then p[i] = v:
 * a producer whose result is late, for ordering tests */
static void k_slow_fill(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *p = ARG(0, double *);
    double v = ARG(1, double);
    int64_t n = ARG(2, int64_t), us = ARG(3, int64_t);
    usleep((useconds_t)us);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) p[i] = v;
}
/* sized_wait(double *p, int64 ns_per_sample, int64 n): a kernel whose duration grows with
 * the size, n * ns_per_sample ns (a retune to a larger size makes each replay longer) */
static void k_sized_wait(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    double *p = ARG(0, double *);
    int64_t ns = ARG(1, int64_t) * ARG(2, int64_t), n = ARG(2, int64_t);
    struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    if (ns > 0)
        nanosleep(&t, NULL);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) p[i] += 1.0;
}
/* stamp(int64 *t, int64 n): t[0] = start time, t[1] = end time (ns), sleeping 30 ms
 * between: two stamps that overlap ran concurrently (n is ignored) */
static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static void k_stamp(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)g; (void)b; (void)sh;
    int64_t *t = ARG(0, int64_t *);
    t[0] = now_ns();
    usleep(30000);
    t[1] = now_ns();
}
/* life_step(u8 *alive, int64 *life, double *x, const int64 *n) / _n(..., int64 n):
 * a Monte Carlo step for compaction tests; finished samples are left alone */
static void life(void **args, int64_t n, fake_dim3 g, fake_dim3 b) {
    uint8_t *alive = ARG(0, uint8_t *);
    int64_t *lf = ARG(1, int64_t *);
    double *x = ARG(2, double *);
    for (int64_t i = 0; i < (int64_t)grid_threads(g, b) && i < n; ++i) {
        if (!alive[i]) continue;
        x[i] += 1.0 + 0.5 * (double)lf[i];
        if (--lf[i] <= 0) alive[i] = 0;
    }
}
static void k_life_step(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    const int64_t *n = ARG(3, const int64_t *);
    life(args, *n, g, b);
}
static void k_life_step_n(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)sh;
    life(args, ARG(3, int64_t), g, b);
}

/* built-in test kernels: name, parameters ('p' pointer, 'l' int64, 'i' int32, 'd' double) */
static void k_gated_add_one(void **args, fake_dim3 g, fake_dim3 b, unsigned sh);
static struct { const char *name, *sig; fake_entry entry; fake_kernel k; unsigned static_shared, registers; } builtins[] = {
    {"add_one", "pl", k_add_one, {0}},
    {"add_one_i32", "pi", k_add_one_i32, {0}},
    {"scale", "ppdl", k_scale, {0}},
    {"add", "pppl", k_add, {0}},
    {"add_one_sp", "pp", k_add_one_sp, {0}},
    {"slow_fill", "pdll", k_slow_fill, {0}},
    {"sized_wait", "pll", k_sized_wait, {0}},
    {"stamp", "pl", k_stamp, {0}},
    {"life_step", "pppp", k_life_step, {0}},
    /* named like a cuBLAS kernel: what eagle's library detection looks for */
    {"sgemm_like", "pl", k_add_one, {0}},
    /* named as recent cuBLAS names its GEMMs on Hopper (nvjet_*: no "gemm" in the name) */
    {"nvjet_hsh_256x128_64x4_1x2_h_bz_coopB_TNT", "pl", k_add_one, {0}},
    {"life_step_n", "pppl", k_life_step_n, {0}},
    /* add_one as compiled with heavy resource use: 128 registers a thread (more than
     * 512 threads a block exceed the 64 K registers of an SM: LAUNCH_OUT_OF_RESOURCES),
     * and 40 KiB of static __shared__ (with more than 8 KiB dynamic: past 48 KiB) */
    {"add_one_128regs", "pl", k_add_one, {0}, 0, 128},
    {"add_one_40k_static", "pl", k_add_one, {0}, 40 * 1024, 0},
    /* add_one once the launch queue's test gate opens (fake_cuda_set_gate) */
    {"gated_add_one", "pl", k_gated_add_one, {0}, 0, 0},
};

static void kernel_from_sig(fake_kernel *k, const char *name, const char *sig, fake_entry e) {
    k->magic = KERNEL_MAGIC;
    snprintf(k->name, sizeof k->name, "%s", name);
    k->nparams = (unsigned)strlen(sig);
    k->pointer_mask = 0;
    for (unsigned i = 0; i < k->nparams; ++i) {
        k->sizes[i] = sig[i] == 'i' ? 4 : 8;
        if (sig[i] == 'p') k->pointer_mask |= 1u << i;
    }
    k->entry = e;
    handle_add(k, KERNEL_MAGIC);
}

EXPORT void *fake_cuda_kernel(const char *name) {
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; ++i)
        if (!strcmp(builtins[i].name, name)) {
            if (!builtins[i].k.magic)
            {
                kernel_from_sig(&builtins[i].k, builtins[i].name, builtins[i].sig,
                                builtins[i].entry);
                builtins[i].k.static_shared = builtins[i].static_shared;
                builtins[i].k.registers = builtins[i].registers;
            }
            return &builtins[i].k;
        }
    return NULL;
}

/* Modules of emulated CUDA C kernels (built with cuda_emulation.h): each exports
 * fake_cuda_module_table(&n) -> array of {name, nparams, sizes*, pointer_mask, entry}. */
typedef struct { const char *name; unsigned nparams; const unsigned *sizes; unsigned pointer_mask;
                 fake_entry entry; fake_block_entry block_entry; unsigned static_shared, registers;
} fake_module_entry;
/* every module the tests load stays loaded (CuPy keeps its modules too): room for a whole suite's */
#define NMODK 4096
static fake_kernel module_kernels[NMODK];
static int n_module_kernels;
/* the device-side conditional setter emulated kernels call */
EXPORT void fake_cuda_set_conditional(unsigned long long handle, unsigned value);

static int concurrent_block_slots(void);
static int load_module_slots(const char *path, int first, int n);

EXPORT int fake_cuda_load_module(const char *path) {
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "fake_cuda_load_module: %s\n", dlerror());
        return E_NOT_FOUND;
    }
    const fake_module_entry *(*table)(int *) =
        (const fake_module_entry *(*)(int *))dlsym(dl, "fake_cuda_module_table");
    void (**setter)(unsigned long long, unsigned) =
        (void (**)(unsigned long long, unsigned))dlsym(dl, "fake_cuda_emulation_set_conditional");
    if (!table) return E_NOT_FOUND;
    if (setter) *setter = fake_cuda_set_conditional;
    int n = 0;
    const fake_module_entry *e = table(&n);
    int first = n_module_kernels;
    if (n_module_kernels + n > NMODK) {   /* a lookup of a dropped kernel would fail far from here */
        fprintf(stderr, "fake_cuda_load_module: %s: the stand-in holds %d module kernels; raise NMODK\n",
                path, NMODK);
        return E_NOT_FOUND;
    }
    for (int i = 0; i < n; ++i) {
        /* a launch copies the arguments into klaunch.bytes/argv: refuse what would not fit */
        size_t need = 0;
        for (unsigned j = 0; j < e[i].nparams && j < MAXARGS; ++j) need += (e[i].sizes[j] + 7) / 8 * 8;
        if (e[i].nparams > MAXARGS || need > MAXARGS * 16) {
            fprintf(stderr, "fake_cuda_load_module: kernel %s has more parameters than the stand-in "
                    "holds (%u, %zu bytes); not loaded\n", e[i].name, e[i].nparams, need);
            continue;
        }
        fake_kernel *k = &module_kernels[n_module_kernels++];
        k->magic = KERNEL_MAGIC;
        snprintf(k->name, sizeof k->name, "%s", e[i].name);
        k->nparams = e[i].nparams;
        for (unsigned j = 0; j < e[i].nparams && j < MAXARGS; ++j) k->sizes[j] = e[i].sizes[j];
        k->pointer_mask = e[i].pointer_mask;
        k->entry = e[i].entry;
        k->static_shared = e[i].static_shared;
        k->registers = e[i].registers;
        k->nslots = 0;
        k->slot_entry[0] = e[i].block_entry;
        handle_add(k, KERNEL_MAGIC);
    }
    return load_module_slots(path, first, n_module_kernels - first);
}
EXPORT void *fake_cuda_module_function(const char *name) {
    for (int i = n_module_kernels - 1; i >= 0; --i)
        if (!strcmp(module_kernels[i].name, name)) return &module_kernels[i];
    return NULL;
}

static int valid_kernel(const void *f) {
    return handle_is(f, KERNEL_MAGIC) && ((const fake_kernel *)f)->magic == KERNEL_MAGIC;
}

/* ---- library kernels (CUkernel) ------------------------------------------------------
 * A CUkernel (cuLibraryGetKernel; what the CUDA 12+ runtime launches under lazy loading,
 * and what cuBLAS / cuFFT kernels captured through the runtime may carry) is a handle of
 * its own: the cuFunc* calls refuse it (an error code), cuKernelGetName and
 * cuKernelGetFunction take it, cuLaunchKernel and kernel nodes take it in place of a
 * CUfunction. A kernel node made from one reports it back (cuGraphKernelNodeGetParams)
 * in `func` (form 0, the default: the handle as it was launched) or in `kern` with func
 * NULL (form 1), fake_cuda_set_kernel_node_form(). fake_cuda_library_kernel(f) is the
 * CUkernel of CUfunction f (one per function). */
#define LIBKERNEL_MAGIC 0x4c49424b
typedef struct fake_libkernel { int magic; fake_kernel *fn; } fake_libkernel;
#define NLIBK 128
static fake_libkernel *libkernels[NLIBK];
static int kernel_node_form;
static pthread_mutex_t libk_lock = PTHREAD_MUTEX_INITIALIZER;

static fake_kernel *libkernel_function(const void *h) {
    if (!handle_is(h, LIBKERNEL_MAGIC)) return NULL;
    const fake_libkernel *k = (const fake_libkernel *)h;
    return k->magic == LIBKERNEL_MAGIC ? k->fn : NULL;
}
EXPORT void *fake_cuda_library_kernel(void *func) {
    if (!valid_kernel(func)) return NULL;
    void *out = NULL;
    pthread_mutex_lock(&libk_lock);
    for (int i = 0; i < NLIBK && !out; ++i) {
        if (libkernels[i] && libkernels[i]->fn == func) out = libkernels[i];
        else if (!libkernels[i]) {
            fake_libkernel *k = (fake_libkernel *)calloc(1, sizeof *k);
            if (!k) abort();
            k->magic = LIBKERNEL_MAGIC;
            k->fn = (fake_kernel *)func;
            handle_add(k, LIBKERNEL_MAGIC);
            out = libkernels[i] = k;
        }
    }
    pthread_mutex_unlock(&libk_lock);
    return out;
}
EXPORT void fake_cuda_set_kernel_node_form(int form) { kernel_node_form = form; }

/* a kernel launch with its own copy of the arguments */
typedef struct klaunch {
    fake_kernel *k;
    void *kern; /* the CUkernel it was launched with (NULL: a CUfunction) */
    fake_dim3 grid, block;
    unsigned shmem;
    /* the arguments, each at a multiple of 8 (as cuFuncGetParamInfo reports), aligned
     * as on a device, so a kernel that reads a parameter through its own type (the
     * CUDA C emulator does) reads aligned memory (unaligned, this array followed
     * `shmem` at offset 36: every 8-byte argument was misaligned) */
    _Alignas(16) unsigned char bytes[MAXARGS * 16];
    void *argv[MAXARGS];
} klaunch;

static fake_kernel *libkernel_function(const void *h);

/* A device's per-block resources (compute capability 7.0-9.0 without opt-in): static
 * plus dynamic shared memory at most 48 KiB (past it: CUDA_ERROR_INVALID_VALUE, as the
 * dynamic size alone above); registers: a block's threads x the kernel's registers a
 * thread (rounded up to 8, a warp's allocation granularity) at most 64 K, the registers
 * of an SM, else CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ("too many resources requested
 * for launch"), the error a real launch of a register-heavy kernel with large blocks
 * gets. A kernel that declares nothing (0) is not checked. */
static int launch_resources_check(const fake_kernel *k, fake_dim3 block, unsigned shmem) {
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if ((unsigned long long)k->static_shared + shmem > 48 * 1024) return E_INVALID_VALUE;
    unsigned long long warps = (threads + 31) / 32;
    if (k->registers && warps * 32 * ((k->registers + 7) / 8 * 8) > 65536) return E_LAUNCH_OUT_OF_RESOURCES;
    return 0;
}

static int klaunch_set(klaunch *l, void *func, fake_dim3 grid, fake_dim3 block, unsigned shmem,
                       void **params) {
    l->kern = NULL;
    if (libkernel_function(func)) { /* cuLaunchKernel takes a CUkernel cast to a CUfunction */
        l->kern = func;
        func = libkernel_function(func);
    }
    if (!valid_kernel(func)) return E_INVALID_HANDLE;
    /* a device's limits (compute capability 7.0+): grid.x < 2^31, grid.y/z <= 65535,
     * block.z <= 64, 1024 threads a block, 48 KiB of dynamic shared memory a block
     * unless the kernel opted in to more (cuFuncSetAttribute, which no kernel here did) */
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
        grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || block.z > 64 ||
        (unsigned long long)block.x * block.y * block.z > 1024 || shmem > 48 * 1024)
        return E_INVALID_VALUE;
    fake_kernel *k = (fake_kernel *)func;
    int rc = launch_resources_check(k, block, shmem);
    if (rc) return rc;
    if (k->nparams && !params) return E_INVALID_VALUE;
    l->k = k;
    l->grid = grid;
    l->block = block;
    l->shmem = shmem;
    size_t off = 0;
    for (unsigned i = 0; i < k->nparams; ++i) {
        memcpy(l->bytes + off, params[i], k->sizes[i]);
        l->argv[i] = l->bytes + off;
        off += (k->sizes[i] + 7) / 8 * 8;
    }
    return 0;
}
static void klaunch_copy(klaunch *dst, const klaunch *src) {
    *dst = *src;
    size_t off = 0;
    for (unsigned i = 0; src->k && i < src->k->nparams; ++i) {
        dst->argv[i] = dst->bytes + off;
        off += (src->k->sizes[i] + 7) / 8 * 8;
    }
}

/* ---- concurrent blocks ----------------------------------------------------------------
 * The blocks of a launch of emulated CUDA C run at once, as on a GPU. A module's
 * __shared__ variables are statics of its shared object, so each concurrent block
 * slot gets a copy of its own: fake_cuda_load_module loads the module once per slot
 * (FAKE_CUDA_CONCURRENT_BLOCKS, default 4, at most 16; 1: blocks one after another,
 * in order), slot s from a copy of the file (dlopen of one path twice would share
 * the statics). A launch of g blocks runs block b (linear, x fastest) in slot b % s,
 * each slot on a host thread of its own, so up to s blocks are in flight together
 * and a kernel whose blocks wait for one another (a handshake) completes when its
 * grid fits the slots, as when a grid fits the SMs of a GPU. */
static int concurrent_block_slots(void) {
    const char *e = getenv("FAKE_CUDA_CONCURRENT_BLOCKS");
    int n = e && *e ? atoi(e) : 4;
    return n < 1 ? 1 : n > 16 ? 16 : n;
}

static int load_module_slots(const char *path, int first, int n) {
    int blocks = 0;   /* a module of host-side kernels only (no block entry) runs them whole */
    for (int i = 0; i < n; ++i) blocks |= module_kernels[first + i].slot_entry[0] != NULL;
    if (!blocks) return 0;
    int slots = concurrent_block_slots();
    for (int s = 1; s < slots; ++s) {
        char copy[4096];
        /* a copy of this process's own (processes of one job load one module), removed once
         * mapped: rewriting a copy another process has mapped would change its code under it */
        snprintf(copy, sizeof copy, "%s.block-slot-%d.%ld.so", path, s, (long)getpid());
        FILE *in = fopen(path, "rb"), *out = fopen(copy, "wb");
        if (!in || !out) {
            if (in) fclose(in);
            if (out) fclose(out);
            fprintf(stderr, "fake_cuda_load_module: cannot copy %s to %s\n", path, copy);
            return E_NOT_FOUND;
        }
        char buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, got, out);
        fclose(in);
        fclose(out);
        void *dl = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
        unlink(copy);
        if (!dl) {
            fprintf(stderr, "fake_cuda_load_module: %s\n", dlerror());
            return E_NOT_FOUND;
        }
        void (**setter)(unsigned long long, unsigned) =
            (void (**)(unsigned long long, unsigned))dlsym(dl, "fake_cuda_emulation_set_conditional");
        if (setter) *setter = fake_cuda_set_conditional;
        const fake_module_entry *(*table)(int *) =
            (const fake_module_entry *(*)(int *))dlsym(dl, "fake_cuda_module_table");
        int m = 0;
        const fake_module_entry *e = table ? table(&m) : NULL;
        for (int i = 0; i < n; ++i) {
            fake_kernel *k = &module_kernels[first + i];
            for (int j = 0; j < m; ++j)
                if (!strcmp(e[j].name, k->name)) k->slot_entry[s] = e[j].block_entry;
        }
    }
    for (int i = 0; i < n; ++i) module_kernels[first + i].nslots = (unsigned)slots;
    return 0;
}

typedef struct {
    const klaunch *l;
    unsigned slot;
    pthread_t t;
} block_slot_run;

static void *block_slot_thread(void *p) {
    block_slot_run *r = (block_slot_run *)p;
    const klaunch *l = r->l;
    const fake_kernel *k = l->k;
    unsigned long long nblocks = (unsigned long long)l->grid.x * l->grid.y * l->grid.z;
    for (unsigned long long b = r->slot; b < nblocks; b += k->nslots) {
        fake_dim3 idx = {(unsigned)(b % l->grid.x), (unsigned)(b / l->grid.x % l->grid.y),
                         (unsigned)(b / ((unsigned long long)l->grid.x * l->grid.y))};
        k->slot_entry[r->slot]((void **)l->argv, l->grid, l->block, idx);
    }
    return NULL;
}

static void run_blocks_concurrently(const klaunch *l) {
    unsigned long long nblocks = (unsigned long long)l->grid.x * l->grid.y * l->grid.z;
    unsigned n = nblocks < l->k->nslots ? (unsigned)nblocks : l->k->nslots;
    block_slot_run runs[16];
    for (unsigned s = 0; s < n; ++s) {
        runs[s].l = l;
        runs[s].slot = s;
        if (s) pthread_create(&runs[s].t, NULL, block_slot_thread, &runs[s]);
    }
    block_slot_thread(&runs[0]); /* slot 0 on the calling (stream or node) thread */
    for (unsigned s = 1; s < n; ++s) pthread_join(runs[s].t, NULL);
}

/* Run a kernel (on a worker thread). A pointer argument outside device memory faults. */
static void klaunch_run(const klaunch *l) {
    for (unsigned i = 0; i < l->k->nparams; ++i) {
        if (!(l->k->pointer_mask & (1u << i))) continue;
        uintptr_t p;
        memcpy(&p, l->argv[i], sizeof p);
        if (p && !is_device(p, 0)) {
            pthread_mutex_lock(&G);
            if (!sticky) sticky = E_ILLEGAL_ADDRESS;
            pthread_mutex_unlock(&G);
            fprintf(stderr, "fake_libcuda: kernel %s argument %u = %p is not device memory "
                    "(CUDA_ERROR_ILLEGAL_ADDRESS, sticky)\n", l->k->name, i, (void *)p);
            return;
        }
    }
    count("kernel_runs");
    last_grid_x = l->grid.x;
    if (l->k->nslots > 1) run_blocks_concurrently(l);
    else l->k->entry((void **)l->argv, l->grid, l->block, l->shmem);
}

/* ---- events ------------------------------------------------------------------- */

struct fnode;
struct fcapture;
typedef struct fevent {
    int magic;
    pthread_mutex_t m;
    pthread_cond_t c;
    long issued, completed;    /* record generations */
    struct fcapture *cap;      /* recorded during this capture (else NULL) */
    struct fnode **cdeps;      /* the capturing stream's dependencies then */
    size_t ncdeps;
    void *ctx;                 /* the context current at creation */
} fevent;

static int valid_event(const void *e) {
    return handle_is(e, EVENT_MAGIC) && is_alive(e, EVENT_MAGIC, ((const fevent *)e)->magic);
}

static void event_complete(fevent *e, long gen) {
    pthread_mutex_lock(&e->m);
    if (gen > e->completed) e->completed = gen;
    pthread_cond_broadcast(&e->c);
    pthread_mutex_unlock(&e->m);
}
static void event_wait_gen(fevent *e, long gen) {
    pthread_mutex_lock(&e->m);
    while (e->completed < gen) pthread_cond_wait(&e->c, &e->m);
    pthread_mutex_unlock(&e->m);
}

/* ---- graphs --------------------------------------------------------------------- */

static long nodes_listed;   /* fake_cuda_nodes_listed */

enum { N_KERNEL = 0, N_MEMCPY = 1, N_MEMSET = 2, N_CHILD = 4, N_EMPTY = 5, N_WAIT = 6,
       N_RECORD = 7, N_COND = 13 };

struct fgraph;
typedef struct fnode {
    int magic;
    int type;
    struct fgraph *owner;
    struct fnode **deps;
    size_t ndeps;
    klaunch kl;                    /* N_KERNEL */
    uintptr_t dst, src; size_t bytes; unsigned char value; /* N_MEMCPY / N_MEMSET */
    fevent *event;                 /* N_WAIT / N_RECORD */
    struct fgraph *child;          /* N_CHILD (owned clone), N_COND (owned body) */
    unsigned long long handle;     /* N_COND */
    int cond_type;
    struct fgraph *body_out[1];
} fnode;

typedef struct fgraph {
    int magic;
    fnode **nodes;
    size_t n, cap;
    struct fgraph *cond_parent;    /* a conditional body: its node's graph */
    int in_child;                  /* the graph a child-graph node owns */
    struct uref *urefs;            /* user objects the graph holds references to */
    size_t nurefs;
} fgraph;

/* ---- user objects (cuUserObjectCreate, cuGraphRetainUserObject) -------------------
 * What NCCL hangs its captured work's lifetime on: a graph holds references to user
 * objects; clones (an instantiated exec, a child graph node) hold their own; the
 * destructor runs when the last reference goes, i.e. when every graph and exec made
 * from the capture is destroyed. (CUDA runs it on an internal thread later; here it
 * runs in the releasing call, with no driver lock held by the destructor's code.) */
#define USEROBJ_MAGIC 0x55534f42
typedef struct fuserobj {
    int magic;
    void *ptr;
    void (*destroy)(void *);
    long refs;                     /* atomic */
} fuserobj;
struct uref { fuserobj *o; unsigned n; };
static void userobj_release(fuserobj *o, unsigned n) {
    if (__atomic_sub_fetch(&o->refs, (long)n, __ATOMIC_ACQ_REL) == 0) {
        o->magic = DEAD_MAGIC;     /* a dead shell: later handles to it are invalid */
        if (o->destroy) o->destroy(o->ptr);
    }
}
static void graph_urefs_add(struct fgraph *g, fuserobj *o, unsigned n) {
    for (size_t i = 0; i < g->nurefs; ++i)
        if (g->urefs[i].o == o) { g->urefs[i].n += n; return; }
    g->urefs = (struct uref *)realloc(g->urefs, (g->nurefs + 1) * sizeof *g->urefs);
    g->urefs[g->nurefs++] = (struct uref){o, n};
}
static void graph_urefs_release(struct fgraph *g) {
    for (size_t i = 0; i < g->nurefs; ++i) userobj_release(g->urefs[i].o, g->urefs[i].n);
    free(g->urefs);
    g->urefs = NULL;
    g->nurefs = 0;
}
static void graph_urefs_copy(struct fgraph *dst, const struct fgraph *src) {
    for (size_t i = 0; i < src->nurefs; ++i) {
        __atomic_add_fetch(&src->urefs[i].o->refs, (long)src->urefs[i].n, __ATOMIC_ACQ_REL);
        graph_urefs_add(dst, src->urefs[i].o, src->urefs[i].n);
    }
}

static int valid_graph(const void *g) {
    return handle_is(g, GRAPH_MAGIC) && is_alive(g, GRAPH_MAGIC, ((const fgraph *)g)->magic);
}
static int valid_node(const void *n) {
    return handle_is(n, NODE_MAGIC) && is_alive(n, NODE_MAGIC, ((const fnode *)n)->magic);
}

static fgraph *graph_new(void) {
    fgraph *g = (fgraph *)calloc(1, sizeof *g);
    g->magic = GRAPH_MAGIC;
    handle_add(g, GRAPH_MAGIC);
    return g;
}
static void graph_free(fgraph *g);
static void node_free_contents(fnode *n) {
    if ((n->type == N_CHILD || n->type == N_COND) && n->child) graph_free(n->child);
    n->child = NULL;
}
/* Destroyed graphs' nodes stay as dead shells, so a later use of their
 * handles is caught (CUDA_ERROR_INVALID_VALUE) instead of reading freed memory. */
static void graph_free(fgraph *g) {
    for (size_t i = 0; i < g->n; ++i) {
        node_free_contents(g->nodes[i]);
        free(g->nodes[i]->deps);
        g->nodes[i]->deps = NULL;
        g->nodes[i]->magic = DEAD_MAGIC;
    }
    free(g->nodes);
    g->nodes = NULL;
    g->magic = DEAD_MAGIC;
    graph_urefs_release(g);
}
static void node_add_dep(fnode *n, fnode *d) {
    for (size_t i = 0; i < n->ndeps; ++i)
        if (n->deps[i] == d) return;
    n->deps = (fnode **)realloc(n->deps, (n->ndeps + 1) * sizeof *n->deps);
    n->deps[n->ndeps++] = d;
}
static fnode *graph_add(fgraph *g, int type, fnode *const *deps, size_t ndeps) {
    fnode *n = (fnode *)calloc(1, sizeof *n);
    n->magic = NODE_MAGIC;
    handle_add(n, NODE_MAGIC);
    n->type = type;
    n->owner = g;
    for (size_t i = 0; i < ndeps; ++i) node_add_dep(n, deps[i]);
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->nodes = (fnode **)realloc(g->nodes, g->cap * sizeof *g->nodes);
    }
    g->nodes[g->n++] = n;
    return n;
}
static long node_index(const fgraph *g, const fnode *n) {
    for (size_t i = 0; i < g->n; ++i)
        if (g->nodes[i] == n) return (long)i;
    return -1;
}
static fgraph *graph_clone(const fgraph *src);
static void node_copy_params(fnode *d, const fnode *s) {
    d->type = s->type;
    klaunch_copy(&d->kl, &s->kl);
    d->dst = s->dst, d->src = s->src, d->bytes = s->bytes, d->value = s->value;
    d->event = s->event;
    d->handle = s->handle;
    d->cond_type = s->cond_type;
    d->child = s->child ? graph_clone(s->child) : NULL;
    if (d->child) d->child->in_child = s->type == N_CHILD;
}
static fgraph *graph_clone(const fgraph *src) {
    fgraph *g = graph_new();
    for (size_t i = 0; i < src->n; ++i) node_copy_params(graph_add(g, src->nodes[i]->type, NULL, 0), src->nodes[i]);
    /* then the edges: a node may depend on one added after it (an edge added by hand) */
    for (size_t i = 0; i < src->n; ++i)
        for (size_t j = 0; j < src->nodes[i]->ndeps; ++j)
            node_add_dep(g->nodes[i], g->nodes[node_index(src, src->nodes[i]->deps[j])]);
    graph_urefs_copy(g, src);
    return g;
}
/* 1 if b is reachable from a (a == b counts) */
static int reaches(const fnode *a, const fnode *b) {
    if (a == b) return 1;
    for (size_t i = 0; i < a->ndeps; ++i)
        if (reaches(a->deps[i], b)) return 1;
    return 0;
}

/* conditional handles: the graph each belongs to, its default, its current value */
#define NCOND 256
static struct { fgraph *graph; unsigned dflt, flags; volatile unsigned value; } conds[NCOND];
static int nconds;

EXPORT void fake_cuda_set_conditional(unsigned long long handle, unsigned value) {
    if (handle >= 1 && handle <= (unsigned long long)nconds) conds[handle - 1].value = value;
}

/* CU_GRAPH_COND_ASSIGN_DEFAULT: every handle a graph's conditional nodes use (also in
 * nested bodies and child graphs) takes its default when the graph is launched (not
 * each time its node runs: a kernel before the node sets it for that run) */
static void cond_defaults_at_launch(const fgraph *g) {
    for (size_t i = 0; i < g->n; ++i) {
        const fnode *n = g->nodes[i];
        if (n->type == N_COND && n->handle >= 1 && n->handle <= (unsigned long long)nconds &&
            (conds[n->handle - 1].flags & 1u))
            conds[n->handle - 1].value = conds[n->handle - 1].dflt;
        if ((n->type == N_COND || n->type == N_CHILD) && n->child) cond_defaults_at_launch(n->child);
    }
}

/* The child-graph rule (CUDA_CHILD_GRAPH_NODE_PARAMS: "The graph must not contain
 * conditional nodes"; cuGraphAddChildGraphNode: "If childGraph contains allocation
 * nodes, free nodes, or conditional nodes, this call will return an error"), whereas a
 * conditional body may hold conditional and child-graph nodes. Whether g holds a
 * conditional node at any depth (in its child graphs and conditional bodies too). */
static int graph_holds_cond(const fgraph *g) {
    for (size_t i = 0; i < g->n; ++i) {
        const fnode *n = g->nodes[i];
        if (n->type == N_COND) return 1;
        if (n->type == N_CHILD && n->child && graph_holds_cond(n->child)) return 1;
    }
    return 0;
}
/* Whether g is a child-graph node's graph, or a conditional body inside one (at any
 * depth): a conditional node may not be added there (the graph cuGraphChildGraphNodeGetGraph
 * returns is the node's own, so adding one would break the rule above). */
static int graph_in_child(const fgraph *g) {
    for (; g; g = g->cond_parent)
        if (g->in_child) return 1;
    return 0;
}

/* What a conditional body may hold (CUDA 12.4+): kernel, memcpy, memset, empty, child
 * graph and conditional nodes, the same holding for child graphs and nested bodies
 * inside it; host, event and memory-allocation nodes are refused at instantiate
 * (CUDA_ERROR_NOT_SUPPORTED). The first node refused, or NULL. */
static fnode *cond_body_refused(const fgraph *g) {
    for (size_t i = 0; i < g->n; ++i) {
        fnode *n = g->nodes[i];
        if (n->type != N_KERNEL && n->type != N_MEMCPY && n->type != N_MEMSET &&
            n->type != N_EMPTY && n->type != N_CHILD && n->type != N_COND)
            return n;
        if (n->type == N_CHILD && n->child && graph_holds_cond(n->child)) return n;
        if ((n->type == N_COND || n->type == N_CHILD) && n->child) {
            fnode *bad = cond_body_refused(n->child);
            if (bad) return bad;
        }
    }
    return NULL;
}
static fnode *graph_cond_refused(const fgraph *g) {
    for (size_t i = 0; i < g->n; ++i) {
        const fnode *n = g->nodes[i];
        fnode *bad = NULL;
        if (n->type == N_CHILD && n->child && graph_holds_cond(n->child)) return (fnode *)n;
        if (n->type == N_COND && n->child) bad = cond_body_refused(n->child);
        else if (n->type == N_CHILD && n->child) bad = graph_cond_refused(n->child);
        if (bad) return bad;
    }
    return NULL;
}

/* ---- executing a graph ------------------------------------------------------------- */

static int exec_graph(fgraph *g);

typedef struct { fnode *n; fgraph *g; int done; pthread_t t; } nrun;
typedef struct {
    nrun *runs;
    size_t n;
    pthread_mutex_t m;
    pthread_cond_t c;
} grun;
typedef struct { grun *gr; size_t i; } nrun_arg;

static void run_node(fnode *n) {
    if (sticky) return; /* after a fault nothing runs */
    switch (n->type) {
    case N_KERNEL: klaunch_run(&n->kl); break;
    case N_MEMCPY: copy_bytes((void *)n->dst, (const void *)n->src, n->bytes); break;
    case N_MEMSET: memset((void *)n->dst, n->value, n->bytes); break;
    case N_RECORD: {
        pthread_mutex_lock(&n->event->m);
        long gen = ++n->event->issued;
        pthread_mutex_unlock(&n->event->m);
        event_complete(n->event, gen);
        break;
    }
    case N_WAIT: {
        pthread_mutex_lock(&n->event->m);
        long gen = n->event->issued;
        pthread_mutex_unlock(&n->event->m);
        event_wait_gen(n->event, gen);
        break;
    }
    case N_CHILD: exec_graph(n->child); break;
    case N_COND: {
        /* the handle's value as last set: its default at the launch's start
         * (CU_GRAPH_COND_ASSIGN_DEFAULT, cond_defaults_at_launch), then whatever a
         * kernel set with cudaGraphSetConditional (fake_cuda_set_conditional) */
        unsigned long long h = n->handle;
        if (n->cond_type == 1) {
            long guard = 0;
            while (conds[h - 1].value && !sticky && guard++ < 100000000) exec_graph(n->child);
        } else if (conds[h - 1].value) {
            exec_graph(n->child);
        }
        break;
    }
    default: break;
    }
}

static void *node_thread(void *p) {
    nrun_arg *a = (nrun_arg *)p;
    grun *gr = a->gr;
    nrun *r = &gr->runs[a->i];
    pthread_mutex_lock(&gr->m);
    for (;;) {
        int ready = 1;
        for (size_t d = 0; d < r->n->ndeps && ready; ++d) {
            long k = node_index(r->g, r->n->deps[d]);
            if (!gr->runs[k].done) ready = 0;
        }
        if (ready) break;
        pthread_cond_wait(&gr->c, &gr->m);
    }
    pthread_mutex_unlock(&gr->m);
    run_node(r->n);
    pthread_mutex_lock(&gr->m);
    r->done = 1;
    pthread_cond_broadcast(&gr->c);
    pthread_mutex_unlock(&gr->m);
    free(a);
    return NULL;
}

/* Each node on its own thread, started when its dependencies are done. */
static int exec_graph(fgraph *g) {
    if (g->n == 0) return 0;
    if (g->n == 1) {
        run_node(g->nodes[0]);
        return 0;
    }
    grun gr;
    gr.n = g->n;
    gr.runs = (nrun *)calloc(g->n, sizeof *gr.runs);
    pthread_mutex_init(&gr.m, NULL);
    pthread_cond_init(&gr.c, NULL);
    for (size_t i = 0; i < g->n; ++i) {
        gr.runs[i].n = g->nodes[i];
        gr.runs[i].g = g;
        nrun_arg *a = (nrun_arg *)malloc(sizeof *a);
        a->gr = &gr;
        a->i = i;
        pthread_create(&gr.runs[i].t, NULL, node_thread, a);
    }
    for (size_t i = 0; i < g->n; ++i) pthread_join(gr.runs[i].t, NULL);
    pthread_mutex_destroy(&gr.m);
    pthread_cond_destroy(&gr.c);
    free(gr.runs);
    return 0;
}

/* ---- streams ------------------------------------------------------------------------ */

enum { OP_KERNEL, OP_MEMCPY, OP_MEMSET, OP_RECORD, OP_WAIT, OP_GRAPH };
typedef struct op {
    int type;
    klaunch kl;
    uintptr_t dst, src; size_t bytes; unsigned char value;
    fevent *event; long gen;
    struct fexec *exec;
    struct op *next;
} op;

typedef struct fcapture {
    fgraph *graph;
    int mode;
    int invalidated;
    unsigned long long id;
    struct fstream *origin;
    pthread_t thread;
    int active;
} fcapture;

typedef struct fstream {
    int magic;
    unsigned flags;
    int legacy;
    pthread_t thread;
    pthread_mutex_t m;
    pthread_cond_t c;
    op *head, *tail;
    int busy, quit;
    long npending; /* ops pushed and not yet finished (the launch queue, below) */
    fcapture *cap;
    fnode **deps;
    size_t ndeps;
    void *ctx;                     /* the context current at creation */
} fstream;

typedef struct fexec {
    int magic;
    fgraph *src;   /* the graph instantiated from (its node handles identify nodes) */
    fgraph *copy;  /* the executable copy */
    long pending;
    pthread_mutex_t m;
    pthread_cond_t c;
} fexec;

static void *stream_worker(void *p) {
    fstream *s = (fstream *)p;
    pthread_mutex_lock(&s->m);
    for (;;) {
        while (!s->head && !s->quit) pthread_cond_wait(&s->c, &s->m);
        if (!s->head && s->quit) break;
        op *o = s->head;
        s->busy = 1;
        pthread_mutex_unlock(&s->m);
        if (!sticky || o->type == OP_RECORD) {
            switch (o->type) {
            case OP_KERNEL: klaunch_run(&o->kl); break;
            case OP_MEMCPY: copy_bytes((void *)o->dst, (const void *)o->src, o->bytes); break;
            case OP_MEMSET: memset((void *)o->dst, o->value, o->bytes); break;
            case OP_RECORD: break;
            case OP_WAIT: event_wait_gen(o->event, o->gen); break;
            case OP_GRAPH: cond_defaults_at_launch(o->exec->copy); exec_graph(o->exec->copy); break;
            }
        }
        if (o->type == OP_RECORD) event_complete(o->event, o->gen);
        if (o->type == OP_GRAPH) {
            pthread_mutex_lock(&o->exec->m);
            o->exec->pending--;
            pthread_cond_broadcast(&o->exec->c);
            pthread_mutex_unlock(&o->exec->m);
        }
        pthread_mutex_lock(&s->m);
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        s->busy = 0;
        s->npending--;
        free(o);
        pthread_cond_broadcast(&s->c);
    }
    pthread_mutex_unlock(&s->m);
    return NULL;
}

static fstream *stream_new(unsigned flags, int legacy) {
    fstream *s = (fstream *)calloc(1, sizeof *s);
    s->magic = STREAM_MAGIC;
    handle_add(s, STREAM_MAGIC);
    s->flags = flags;
    s->legacy = legacy;
    s->ctx = tls_ctx;
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->c, NULL);
    pthread_create(&s->thread, NULL, stream_worker, s);
    return s;
}
static void launch_queue_note(long pending);
static void stream_push(fstream *s, op *o) {
    pthread_mutex_lock(&s->m);
    launch_queue_note(++s->npending);
    if (s->tail) s->tail->next = o;
    else s->head = o;
    s->tail = o;
    pthread_cond_broadcast(&s->c);
    pthread_mutex_unlock(&s->m);
}
static void stream_drain(fstream *s) {
    pthread_mutex_lock(&s->m);
    while (s->head || s->busy) pthread_cond_wait(&s->c, &s->m);
    pthread_mutex_unlock(&s->m);
}

/* ---- the launch queue ---------------------------------------------------------------------
 * A GPU takes launches into a queue of fixed depth (a few thousand); a host that issues
 * faster than the device drains waits in cuLaunchKernel / cuGraphLaunch for a slot (it
 * does not fail). Here each stream's pending work is its queue: a kernel or graph launch
 * (or an event record) onto a stream with FAKE_CUDA_QUEUE_DEPTH (default 2048; fake_cuda_set_queue_depth)
 * ops pending blocks, without the API lock, until its worker finishes one. Observed:
 * counter "launch_queue_full" (launches that waited), fake_cuda_launch_queue_max() (the
 * most ops pending on one stream since the depth was last set). Test kernel
 * gated_add_one waits while fake_cuda_set_gate(1) holds the gate closed (at most 30 s),
 * so a test fills the queue by construction. */
static long queue_depth_set; /* 0: FAKE_CUDA_QUEUE_DEPTH or 2048 */
static long queue_max_pending;
static volatile int gate_closed;

static long launch_queue_depth(void) {
    long d = __atomic_load_n(&queue_depth_set, __ATOMIC_RELAXED);
    if (d > 0) return d;
    const char *e = getenv("FAKE_CUDA_QUEUE_DEPTH");
    d = e && *e ? atol(e) : 2048;
    return d > 0 ? d : 2048;
}
static void launch_queue_note(long pending) {
    long m = __atomic_load_n(&queue_max_pending, __ATOMIC_RELAXED);
    while (pending > m && !__atomic_compare_exchange_n(&queue_max_pending, &m, pending, 0,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}
/* Called with G held, before a launch pushes onto s: waits (G released, so other
 * streams and threads go on) while s's queue is full. A pusher checks and pushes under
 * G, so no two fill the last slot. */
static void launch_queue_wait_room(fstream *s) {
    long depth = launch_queue_depth();
    pthread_mutex_lock(&s->m);
    if (s->npending < depth) {
        pthread_mutex_unlock(&s->m);
        return;
    }
    count("launch_queue_full");
    pthread_mutex_unlock(&G);
    for (;;) {
        while (s->npending >= depth) pthread_cond_wait(&s->c, &s->m);
        pthread_mutex_unlock(&s->m);
        pthread_mutex_lock(&G);
        pthread_mutex_lock(&s->m);
        if (s->npending < depth) break;
        pthread_mutex_unlock(&G);
    }
    pthread_mutex_unlock(&s->m);
}
EXPORT void fake_cuda_set_queue_depth(long depth) {
    __atomic_store_n(&queue_depth_set, depth, __ATOMIC_RELAXED);
    __atomic_store_n(&queue_max_pending, 0, __ATOMIC_RELAXED);
}
EXPORT long fake_cuda_launch_queue_max(void) { return __atomic_load_n(&queue_max_pending, __ATOMIC_RELAXED); }
EXPORT void fake_cuda_set_gate(int closed) { __atomic_store_n(&gate_closed, closed, __ATOMIC_SEQ_CST); }
static void k_gated_add_one(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    for (int i = 0; i < 150000 && __atomic_load_n(&gate_closed, __ATOMIC_SEQ_CST); ++i) usleep(200);
    k_add_one(args, g, b, sh);
}

#define NSTREAMS 512
static fstream *streams[NSTREAMS];
static fstream *legacy_stream;

static void all_drain(void) {
    for (int i = 0; i < NSTREAMS; ++i)
        if (streams[i]) stream_drain(streams[i]);
    if (legacy_stream) stream_drain(legacy_stream);
}

static int valid_stream(const void *s) {
    return handle_is(s, STREAM_MAGIC) && is_alive(s, STREAM_MAGIC, ((const fstream *)s)->magic);
}

/* ---- the per-thread default stream ---------------------------------------------------
 * CU_STREAM_PER_THREAD (2): each host thread's own default stream, an ordinary blocking
 * stream (flags 0; it synchronizes with the legacy stream, and legacy work does not make
 * it capture), created on first use, never destroyed. Kept in streams[] (not counted as
 * a live stream) so draining and the capture checks see it. */
static __thread fstream *tls_per_thread_stream;
static fstream *per_thread_stream(int *err) {
    if (tls_per_thread_stream) return tls_per_thread_stream;
    int i = 0;
    while (i < NSTREAMS && streams[i]) ++i;
    if (i == NSTREAMS) { *err = E_OUT_OF_MEMORY; return NULL; }
    return tls_per_thread_stream = streams[i] = stream_new(0, 0);
}

/* the stream for a handle: NULL and CU_STREAM_LEGACY (1) are the legacy stream,
 * CU_STREAM_PER_THREAD (2) the calling thread's default stream */
static fstream *as_stream(void *h, int *err) {
    *err = 0;
    if (h == (void *)2) return per_thread_stream(err);
    if (h == NULL || h == (void *)1) {
        if (!legacy_stream) legacy_stream = stream_new(0, 1);
        return legacy_stream;
    }
    if (!valid_stream(h)) {
        *err = E_INVALID_HANDLE;
        return NULL;
    }
    return (fstream *)h;
}

static void capture_invalidate(fcapture *c) {
    if (c) c->invalidated = 1;
}
/* Is an unsafe call (sync, alloc) illegal now? Invalidates the offending captures. */
static int unsafe_call_check(void) {
    int bad = 0;
    if (tls_capture_mode == 2) return 0;
    for (int i = 0; i < NSTREAMS; ++i) {
        fstream *s = streams[i];
        if (!s || !s->cap || !s->cap->active || s->cap->origin != s) continue;
        if (s->cap->mode == 0 ||
            (s->cap->mode == 1 && pthread_equal(s->cap->thread, pthread_self()))) {
            capture_invalidate(s->cap);
            bad = 1;
        }
    }
    return bad ? E_CAPTURE_UNSUPPORTED : 0;
}
/* Legacy-stream work while a blocking stream captures: implicit dependency. */
static int legacy_check(void) {
    int bad = 0;
    for (int i = 0; i < NSTREAMS; ++i) {
        fstream *s = streams[i];
        if (s && s->cap && s->cap->active && !(s->flags & 1u)) {
            capture_invalidate(s->cap);
            bad = 1;
        }
    }
    return bad ? E_CAPTURE_IMPLICIT : 0;
}

/* Add a node to the stream's capture; *added = 1 when the stream captures. */
static int capture_add(fstream *s, int type, fnode **out) {
    *out = NULL;
    if (!s->cap) return 0;
    if (s->cap->invalidated) return E_CAPTURE_INVALIDATED;
    fnode *n = graph_add(s->cap->graph, type, s->deps, s->ndeps);
    free(s->deps);
    s->deps = (fnode **)malloc(sizeof *s->deps);
    s->deps[0] = n;
    s->ndeps = 1;
    *out = n;
    return 0;
}

/* Common start of work submitted to a stream; returns the stream or sets *err. */
static fstream *submit(void *h, int *err) {
    fstream *s = as_stream(h, err);
    if (!s) return NULL;
    /* a stream of another context than the current one (the legacy and per-thread
     * streams are every context's) */
    if (!s->legacy && s != tls_per_thread_stream && s->ctx && s->ctx != tls_ctx) {
        *err = E_INVALID_CONTEXT;
        return NULL;
    }
    if (s->legacy && (*err = legacy_check()) != 0) return NULL;
    return s;
}

/* ---- the API ------------------------------------------------------------------------- */

EXPORT int cuInit(unsigned flags) {
    pthread_mutex_lock(&G);
    int rc = enter_nolock("cuInit", 0);
    if (!rc && flags) rc = E_INVALID_VALUE;
    const char *no = getenv("FAKE_CUDA_NO_INIT");
    if (!rc && no && *no == '1') rc = E_NO_DEVICE;
    if (!rc) rc = arena_init();
    if (!rc) initialized = 1;
    LEAVE(rc);
}
EXPORT int cuDriverGetVersion(int *v) {
    if (!v) return E_INVALID_VALUE;
    *v = version();
    return 0;
}
static int get_error_name(int e, const char **s) {
    if (!s) return E_INVALID_VALUE;
    for (size_t i = 0; i < sizeof err_table / sizeof *err_table; ++i)
        if (err_table[i].code == e) { *s = err_table[i].name; return 0; }
    *s = NULL;
    return E_INVALID_VALUE;
}
static int get_error_string(int e, const char **s) {
    if (!s) return E_INVALID_VALUE;
    for (size_t i = 0; i < sizeof err_table / sizeof *err_table; ++i)
        if (err_table[i].code == e) { *s = err_table[i].text; return 0; }
    *s = NULL;
    return E_INVALID_VALUE;
}
static int device_get_count(int *n) {
    if (!n) return E_INVALID_VALUE;
    pthread_mutex_lock(&G);
    int rc = enter_nolock("cuDeviceGetCount", 0);
    if (!rc && !initialized) rc = E_NOT_INITIALIZED;
    const char *d = getenv("FAKE_CUDA_DEVICES");
    if (!rc) *n = d && *d ? atoi(d) : 1;
    LEAVE(rc);
}
static int device_get(int *dev, int ordinal) {
    int n = 0, rc = device_get_count(&n);
    if (rc) return rc;
    if (!dev || ordinal < 0 || ordinal >= n) return E_INVALID_VALUE;
    *dev = ordinal;
    return 0;
}
static int device_get_name(char *buf, int len, int dev) {
    if (!buf || len <= 0 || dev != 0) return E_INVALID_VALUE;
    snprintf(buf, (size_t)len, "eagle fake_libcuda (TEST DOUBLE, CPU)");
    return 0;
}
static int primary_retain(void **ctx, int dev) {
    if (!initialized) return E_NOT_INITIALIZED;
    if (!ctx || dev < 0 || dev >= n_devices()) return E_INVALID_VALUE;
    count("cuDevicePrimaryCtxRetain");
    *ctx = ctx_of_device(dev);
    return 0;
}
static int ctx_get_current(void **ctx) {
    if (!initialized) return E_NOT_INITIALIZED;
    if (!ctx) return E_INVALID_VALUE;
    *ctx = tls_ctx;
    return 0;
}
static int ctx_set_current(void *ctx) {
    if (!initialized) return E_NOT_INITIALIZED;
    if (ctx && (device_of_ctx(ctx) < 0 || device_of_ctx(ctx) >= n_devices())) return E_INVALID_CONTEXT;
    count("cuCtxSetCurrent");
    tls_ctx = ctx;
    return 0;
}
static int ctx_get_device(int *dev) {
    ENTER("cuCtxGetDevice");
    if (!dev) LEAVE(E_INVALID_VALUE);
    *dev = device_of_ctx(tls_ctx);
    LEAVE(0);
}
/* The CUDA 13.0 forms (cudaTypedefs.h PFN_cuCtxGetDevice_v13000 / PFN_cuCtxSynchronize_v13000)
 * take the context (NULL: the current one). A caller that asks for them but calls the
 * 12.x form passes whatever its register held as ctx: anything but NULL or a context
 * the stand-in made is CUDA_ERROR_INVALID_CONTEXT (as a real driver would, at best). */
static int ctx_valid_or_current(void *ctx) { return ctx == NULL || ctx == PRIMARY_CTX; }
static int ctx_get_device(int *dev);
static int ctx_synchronize(void);
static int ctx_get_device_v2(int *dev, void *ctx) {
    if (!ctx_valid_or_current(ctx)) { count("cuCtxGetDevice_v2 bad context"); return E_INVALID_CONTEXT; }
    return ctx_get_device(dev);
}
static int ctx_synchronize_v2(void *ctx) {
    if (!ctx_valid_or_current(ctx)) { count("cuCtxSynchronize_v2 bad context"); return E_INVALID_CONTEXT; }
    return ctx_synchronize();
}
static int ctx_synchronize(void) {
    ENTER("cuCtxSynchronize");
    int rc = unsafe_call_check();
    pthread_mutex_unlock(&G);
    if (rc) return rc;
    all_drain();
    return sticky;
}

static int stream_create(void **out, unsigned flags) {
    ENTER("cuStreamCreate");
    if (!out || flags > 1) LEAVE(E_INVALID_VALUE);
    int i = 0;
    while (i < NSTREAMS && streams[i]) ++i;
    if (i == NSTREAMS) LEAVE(E_OUT_OF_MEMORY);
    streams[i] = stream_new(flags, 0);
    *out = streams[i];
    live_stream++;
    LEAVE(0);
}
static int stream_destroy(void *h) {
    ENTER("cuStreamDestroy");
    if (!valid_stream(h) || ((fstream *)h)->legacy) LEAVE(E_INVALID_HANDLE);
    fstream *s = (fstream *)h;
    if (s->cap) LEAVE(E_CAPTURE_UNSUPPORTED);
    for (int i = 0; i < NSTREAMS; ++i)
        if (streams[i] == s) streams[i] = NULL;
    s->magic = DEAD_MAGIC;
    live_stream--;
    pthread_mutex_unlock(&G);
    /* like CUDA: work already queued finishes; the worker ends after it */
    pthread_mutex_lock(&s->m);
    s->quit = 1;
    pthread_cond_broadcast(&s->c);
    pthread_mutex_unlock(&s->m);
    pthread_join(s->thread, NULL);
    return 0;
}
static int stream_synchronize(void *h) {
    ENTER("cuStreamSynchronize");
    int err;
    fstream *s = as_stream(h, &err);
    if (!s) LEAVE(err);
    if (s->cap) {
        capture_invalidate(s->cap);
        LEAVE(E_CAPTURE_UNSUPPORTED);
    }
    if ((err = unsafe_call_check()) != 0) LEAVE(err);
    if (s->legacy && (err = legacy_check()) != 0) LEAVE(err);
    pthread_mutex_unlock(&G);
    stream_drain(s);
    if (s->legacy) all_drain();
    return sticky;
}

/* cuStreamQuery: CUDA_SUCCESS once every operation queued on the stream finished,
 * CUDA_ERROR_NOT_READY while one is queued or running (the stream's worker thread runs
 * them, so a caller polling sees NOT_READY for as long as the work takes); the sticky
 * error after a fault; on a capturing stream the capture is invalidated
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), as for cuStreamSynchronize. The legacy
 * stream is ready when every blocking stream is (it waits for them). */
static int stream_busy(fstream *s) {
    pthread_mutex_lock(&s->m);
    int busy = s->head || s->busy;
    pthread_mutex_unlock(&s->m);
    return busy;
}
static int stream_query(void *h) {
    ENTER("cuStreamQuery");
    int err;
    fstream *s = as_stream(h, &err);
    if (!s) LEAVE(err);
    if (s->cap) {
        capture_invalidate(s->cap);
        LEAVE(E_CAPTURE_UNSUPPORTED);
    }
    if (sticky) LEAVE(sticky);
    int busy = stream_busy(s);
    if (s->legacy)
        for (int i = 0; i < NSTREAMS && !busy; ++i)
            if (streams[i] && !(streams[i]->flags & 1u)) busy = stream_busy(streams[i]);
    LEAVE(busy ? E_NOT_READY : 0);
}
/* cuEventQuery: CUDA_SUCCESS once the work before the event's last record finished (or
 * it was never recorded), CUDA_ERROR_NOT_READY before. */
static int event_query(void *h) {
    ENTER("cuEventQuery");
    if (!valid_event(h)) LEAVE(E_INVALID_HANDLE);
    fevent *e = (fevent *)h;
    if (sticky) LEAVE(sticky);
    pthread_mutex_lock(&e->m);
    int ready = e->completed >= e->issued;
    pthread_mutex_unlock(&e->m);
    LEAVE(ready ? 0 : E_NOT_READY);
}

static int event_create(void **out, unsigned flags) {
    ENTER("cuEventCreate");
    if (!out || (flags & ~0xfu)) LEAVE(E_INVALID_VALUE);
    fevent *e = (fevent *)calloc(1, sizeof *e);
    e->magic = EVENT_MAGIC;
    handle_add(e, EVENT_MAGIC);
    e->ctx = tls_ctx;
    pthread_mutex_init(&e->m, NULL);
    pthread_cond_init(&e->c, NULL);
    *out = e;
    live_event++;
    LEAVE(0);
}
static int event_destroy(void *h) {
    ENTER("cuEventDestroy");
    if (!valid_event(h)) LEAVE(E_INVALID_HANDLE);
    fevent *e = (fevent *)h;
    e->magic = DEAD_MAGIC; /* kept: queued waits may still read it */
    free(e->cdeps);
    e->cdeps = NULL;
    live_event--;
    LEAVE(0);
}
static int event_record(void *h, void *sh) {
    ENTER("cuEventRecord");
    if (!valid_event(h)) LEAVE(E_INVALID_HANDLE);
    fevent *e = (fevent *)h;
    int err;
    fstream *s = submit(sh, &err);
    if (!s) LEAVE(err);
    if (e->ctx && e->ctx != tls_ctx) LEAVE(E_INVALID_HANDLE);   /* an event of another context */
    if (s->cap) {
        if (s->cap->invalidated) LEAVE(E_CAPTURE_INVALIDATED);
        e->cap = s->cap;
        free(e->cdeps);
        e->cdeps = (fnode **)malloc((s->ndeps ? s->ndeps : 1) * sizeof(fnode *));
        copy_bytes(e->cdeps, s->deps, s->ndeps * sizeof(fnode *)); /* no deps yet: s->deps is NULL */
        e->ncdeps = s->ndeps;
        LEAVE(0);
    }
    e->cap = NULL;
    launch_queue_wait_room(s); /* an event record takes a queue slot too */
    if (!valid_event(h) || (!s->legacy && !valid_stream(s))) LEAVE(E_INVALID_HANDLE);
    op *o = (op *)calloc(1, sizeof *o);
    o->type = OP_RECORD;
    o->event = e;
    pthread_mutex_lock(&e->m);
    o->gen = ++e->issued;
    pthread_mutex_unlock(&e->m);
    stream_push(s, o);
    LEAVE(0);
}
static int event_synchronize(void *h) {
    ENTER("cuEventSynchronize");
    if (!valid_event(h)) LEAVE(E_INVALID_HANDLE);
    fevent *e = (fevent *)h;
    pthread_mutex_lock(&e->m);
    long gen = e->issued;
    pthread_mutex_unlock(&e->m);
    pthread_mutex_unlock(&G);
    event_wait_gen(e, gen);
    return sticky;
}
static int stream_wait_event(void *sh, void *h, unsigned flags) {
    ENTER("cuStreamWaitEvent");
    if (!valid_event(h) || flags > 1) LEAVE(valid_event(h) ? E_INVALID_VALUE : E_INVALID_HANDLE);
    fevent *e = (fevent *)h;
    int err;
    fstream *s = submit(sh, &err);
    if (!s) LEAVE(err);
    /* CU_EVENT_WAIT_EXTERNAL: "This flag is invalid outside of stream capture" */
    if (flags && !s->cap) LEAVE(E_INVALID_VALUE);
    if (e->cap && e->cap->active) {
        fcapture *c = e->cap;
        if (s->cap && s->cap != c) LEAVE(E_CAPTURE_MERGE);
        if (c->invalidated) LEAVE(E_CAPTURE_INVALIDATED);
        if (!s->cap) { /* fork: the stream joins the capture */
            s->cap = c;
            free(s->deps);
            s->deps = NULL;
            s->ndeps = 0;
        }
        for (size_t i = 0; i < e->ncdeps; ++i) {
            size_t j = 0;
            while (j < s->ndeps && s->deps[j] != e->cdeps[i]) ++j;
            if (j == s->ndeps) {
                s->deps = (fnode **)realloc(s->deps, (s->ndeps + 1) * sizeof(fnode *));
                s->deps[s->ndeps++] = e->cdeps[i];
            }
        }
        LEAVE(0);
    }
    if (s->cap) { /* a capturing stream waiting on uncaptured work */
        long pending;
        pthread_mutex_lock(&e->m);
        pending = e->issued - e->completed;
        pthread_mutex_unlock(&e->m);
        if (pending > 0 || e->issued > 0) {
            capture_invalidate(s->cap);
            LEAVE(E_CAPTURE_ISOLATION);
        }
        LEAVE(0);
    }
    op *o = (op *)calloc(1, sizeof *o);
    o->type = OP_WAIT;
    o->event = e;
    pthread_mutex_lock(&e->m);
    o->gen = e->issued;
    pthread_mutex_unlock(&e->m);
    stream_push(s, o);
    LEAVE(0);
}

/* capture */
static int check_deps(fgraph *g, const void *const *deps, size_t n);
static unsigned long long capture_ids;
static int begin_capture_common(void *sh, fgraph *into, int mode, const char *api) {
    ENTER(api);
    int err;
    if (mode < 0 || mode > 2) LEAVE(E_INVALID_VALUE);
    fstream *s = as_stream(sh, &err);
    if (!s) LEAVE(err);
    if (s->legacy) LEAVE(E_CAPTURE_UNSUPPORTED);
    if (s->cap) LEAVE(E_INVALID_VALUE); /* CUDA: cudaErrorIllegalState, driver: INVALID_VALUE */
    fcapture *c = (fcapture *)calloc(1, sizeof *c);
    c->graph = into ? into : graph_new();
    c->mode = mode;
    c->id = ++capture_ids;
    c->origin = s;
    c->thread = pthread_self();
    c->active = 1;
    s->cap = c;
    s->deps = NULL;
    s->ndeps = 0;
    LEAVE(0);
}
static int begin_capture(void *sh, int mode) {
    return begin_capture_common(sh, NULL, mode, "cuStreamBeginCapture");
}
static int begin_capture_to_graph(void *sh, void *g, const void *const *deps,
                                  const void *edges, size_t n, int mode) {
    (void)edges;
    /* the dependencies are read through later (end_capture's reachability): nodes of g only */
    if (!valid_graph(g) || check_deps((fgraph *)g, deps, n)) return E_INVALID_VALUE;
    int rc = begin_capture_common(sh, (fgraph *)g, mode, "cuStreamBeginCaptureToGraph");
    if (rc) return rc;
    pthread_mutex_lock(&G);
    fstream *s = (fstream *)sh;
    for (size_t i = 0; i < n; ++i) {
        s->deps = (fnode **)realloc(s->deps, (s->ndeps + 1) * sizeof(fnode *));
        s->deps[s->ndeps++] = (fnode *)deps[i];
    }
    s->cap->mode = mode | 0x100; /* remember: the graph is the caller's */
    LEAVE(0);
}
static int end_capture(void *sh, void **graph_out) {
    ENTER("cuStreamEndCapture");
    int err;
    if (!graph_out) LEAVE(E_INVALID_VALUE);
    *graph_out = NULL;
    fstream *s = as_stream(sh, &err);
    if (!s) LEAVE(err);
    fcapture *c = s->cap;
    if (!c) LEAVE(E_INVALID_VALUE);
    if (c->origin != s) {
        capture_invalidate(c);
        LEAVE(E_CAPTURE_UNMATCHED);
    }
    if ((c->mode & 0xff) == 1 && !pthread_equal(c->thread, pthread_self())) LEAVE(E_CAPTURE_WRONG_THREAD);
    int rc = 0;
    /* every other stream's last work must be reachable from the origin's */
    for (int i = 0; i < NSTREAMS && !rc; ++i) {
        fstream *o = streams[i];
        if (!o || o == s || o->cap != c) continue;
        for (size_t d = 0; d < o->ndeps && !rc; ++d) {
            int found = 0;
            for (size_t k = 0; k < s->ndeps && !found; ++k) found = reaches(s->deps[k], o->deps[d]);
            if (!found) rc = E_CAPTURE_UNJOINED;
        }
    }
    for (int i = 0; i < NSTREAMS; ++i) {
        fstream *o = streams[i];
        if (o && o->cap == c) {
            o->cap = NULL;
            free(o->deps);
            o->deps = NULL;
            o->ndeps = 0;
        }
    }
    c->active = 0;
    int own_graph = !(c->mode & 0x100);
    if (!rc && c->invalidated) rc = E_CAPTURE_INVALIDATED;
    if (rc) {
        if (own_graph) graph_free(c->graph);
    } else {
        *graph_out = c->graph;
        if (own_graph) live_graph++;
    }
    /* the capture record stays allocated: events recorded in it refer to it */
    LEAVE(rc);
}
/* cuStreamUpdateCaptureDependencies: the stream's next captured work follows `deps`
 * (flags 1: SET, replacing its dependencies; 0: ADD), nodes of the capture's graph */
static int update_capture_deps(void *sh, void **deps, size_t n, unsigned flags) {
    ENTER("cuStreamUpdateCaptureDependencies");
    int err;
    fstream *s = as_stream(sh, &err);
    if (!s) LEAVE(err);
    if (!s->cap) LEAVE(E_ILLEGAL_STATE);
    if (flags > 1 || check_deps(s->cap->graph, (const void *const *)deps, n)) LEAVE(E_INVALID_VALUE);
    if (flags == 1) {
        free(s->deps);
        s->deps = NULL;
        s->ndeps = 0;
    }
    for (size_t i = 0; i < n; ++i) {
        s->deps = (fnode **)realloc(s->deps, (s->ndeps + 1) * sizeof(fnode *));
        s->deps[s->ndeps++] = (fnode *)deps[i];
    }
    LEAVE(0);
}
static int update_capture_deps_v1(void *sh, void **deps, size_t n, unsigned flags) {
    return update_capture_deps(sh, deps, n, flags);
}
static int update_capture_deps_v2(void *sh, void **deps, const void *edges, size_t n,
                                  unsigned flags) {
    (void)edges;
    return update_capture_deps(sh, deps, n, flags);
}
static int is_capturing(void *sh, int *status) {
    ENTER("cuStreamIsCapturing");
    int err;
    if (!status) LEAVE(E_INVALID_VALUE);
    fstream *s = as_stream(sh, &err);
    if (!s) LEAVE(err);
    *status = !s->cap ? 0 : s->cap->invalidated ? 2 : 1;
    LEAVE(0);
}
/* fake_cuda_set_edge_data(1): every captured dependency carries non-default edge data, as
 * when a library launched with programmatic dependent launch: cuStreamGetCaptureInfo_v3
 * then refuses a NULL edgeData_out with CUDA_ERROR_LOSSY_QUERY, as the driver does */
static int edge_data_on;
static unsigned char *edge_data;   /* CUgraphEdgeData (8 bytes) per dependency */
static size_t edge_data_n;
EXPORT void fake_cuda_set_edge_data(int on) { edge_data_on = on; }
static int capture_info(void *sh, int *status, unsigned long long *id, void **graph,
                        const void *const **deps, const void **edges, int v3, size_t *n) {
    ENTER("cuStreamGetCaptureInfo");
    int err;
    if (!status) LEAVE(E_INVALID_VALUE);
    if (edges && !deps) LEAVE(E_INVALID_VALUE);   /* edgeData_out only beside dependencies_out */
    fstream *s = as_stream(sh, &err);
    if (!s) LEAVE(err);
    int lossy = v3 && edge_data_on && s->cap && s->ndeps;
    if (lossy && !edges && deps) LEAVE(402);   /* CUDA_ERROR_LOSSY_QUERY */
    *status = !s->cap ? 0 : s->cap->invalidated ? 2 : 1;
    if (id) *id = s->cap ? s->cap->id : 0;
    if (graph) *graph = s->cap ? s->cap->graph : NULL;
    if (deps) *deps = (const void *const *)s->deps;
    if (edges && lossy) {
        if (edge_data_n < s->ndeps) {
            free(edge_data);
            edge_data = (unsigned char *)calloc(s->ndeps, 8);
            edge_data_n = s->ndeps;
        }
        for (size_t i = 0; i < s->ndeps; ++i) edge_data[8 * i + 2] = 1;   /* type: programmatic */
        *edges = edge_data;
    } else if (edges) {
        *edges = NULL;
    }
    if (n) *n = s->cap ? s->ndeps : 0;
    LEAVE(0);
}
static int capture_info_v2(void *sh, int *status, unsigned long long *id, void **graph,
                           const void *const **deps, size_t *n) {
    count("capture_info_v2");
    return capture_info(sh, status, id, graph, deps, NULL, 0, n);
}
static int capture_info_v3(void *sh, int *status, unsigned long long *id, void **graph,
                           const void *const **deps, const void **edges, size_t *n) {
    count("capture_info_v3");
    return capture_info(sh, status, id, graph, deps, edges, 1, n);
}
static int exchange_mode(int *mode) {
    if (!mode || *mode < 0 || *mode > 2) return E_INVALID_VALUE;
    int old = tls_capture_mode;
    tls_capture_mode = *mode;
    *mode = old;
    return 0;
}

/* graphs */
static int graph_create(void **out, unsigned flags) {
    ENTER("cuGraphCreate");
    if (!out || flags) LEAVE(E_INVALID_VALUE);
    *out = graph_new();
    live_graph++;
    LEAVE(0);
}
static int graph_destroy(void *g) {
    ENTER("cuGraphDestroy");
    if (!valid_graph(g) || ((fgraph *)g)->cond_parent) LEAVE(E_INVALID_VALUE);
    graph_free((fgraph *)g);
    live_graph--;
    LEAVE(0);
}
static int graph_get_nodes(void *g, void **nodes, size_t *n) {
    ENTER("cuGraphGetNodes");
    if (!valid_graph(g) || !n) LEAVE(E_INVALID_VALUE);
    fgraph *fg = (fgraph *)g;
    if (nodes) {
        for (size_t i = 0; i < fg->n && i < *n; ++i) nodes[i] = fg->nodes[i], nodes_listed++;
        /* "If numNodes is higher than the actual number of nodes, the remaining entries in
         * nodes will be set to NULL" */
        for (size_t i = fg->n; i < *n; ++i) nodes[i] = NULL;
    }
    *n = fg->n;
    LEAVE(0);
}
static int check_deps(fgraph *g, const void *const *deps, size_t n) {
    if (n && !deps) return E_INVALID_VALUE;
    for (size_t i = 0; i < n; ++i)
        if (!valid_node(deps[i]) || ((const fnode *)deps[i])->owner != g) return E_INVALID_VALUE;
    return 0;
}
/* the dependencies of a node being added: "dependencies may not have any duplicate
 * entries" (cuGraphAddKernelNode, cuGraphAddChildGraphNode, cuGraphAddNode); the code is
 * CUDA_ERROR_INVALID_VALUE, the calls' error for an invalid argument */
static int check_new_node_deps(fgraph *g, const void *const *deps, size_t n) {
    int rc = check_deps(g, deps, n);
    for (size_t i = 0; !rc && i < n; ++i)
        for (size_t j = 0; j < i; ++j)
            if (deps[i] == deps[j]) return E_INVALID_VALUE;
    return rc;
}
static int add_child(void **out, void *g, const void *const *deps, size_t n, void *child) {
    ENTER("cuGraphAddChildGraphNode");
    if (!out || !valid_graph(g) || !valid_graph(child)) LEAVE(E_INVALID_VALUE);
    int rc = check_new_node_deps((fgraph *)g, deps, n);
    if (rc) LEAVE(rc);
    /* the docs say only "this call will return an error" for a childGraph holding a
     * conditional node; the code is a guess: CUDA_ERROR_INVALID_VALUE, the one error the
     * call's return list names besides the not-initialized ones */
    if (graph_holds_cond((fgraph *)child)) LEAVE(E_INVALID_VALUE);
    fnode *nd = graph_add((fgraph *)g, N_CHILD, (fnode *const *)deps, n);
    nd->child = graph_clone((fgraph *)child);
    nd->child->in_child = 1;
    *out = nd;
    LEAVE(0);
}
static int child_get_graph(void *node, void **out) {
    ENTER("cuGraphChildGraphNodeGetGraph");
    if (!valid_node(node) || ((fnode *)node)->type != N_CHILD || !out) LEAVE(E_INVALID_VALUE);
    *out = ((fnode *)node)->child;
    LEAVE(0);
}
static int add_deps_common(void *g, const void *const *from, const void *const *to, size_t n) {
    if (!valid_graph(g)) return E_INVALID_VALUE;
    if (check_deps((fgraph *)g, from, n) || check_deps((fgraph *)g, to, n)) return E_INVALID_VALUE;
    for (size_t i = 0; i < n; ++i) {
        if (reaches((const fnode *)from[i], (const fnode *)to[i])) return E_INVALID_VALUE; /* cycle */
        /* "Specifying an existing dependency will return an error" */
        for (size_t j = 0; j < ((const fnode *)to[i])->ndeps; ++j)
            if (((const fnode *)to[i])->deps[j] == (const fnode *)from[i]) return E_INVALID_VALUE;
        node_add_dep((fnode *)to[i], (fnode *)from[i]);
    }
    return 0;
}
static int add_deps_v1(void *g, const void *const *from, const void *const *to, size_t n) {
    ENTER("cuGraphAddDependencies");
    count("add_deps_v1");
    LEAVE(add_deps_common(g, from, to, n));
}
static int add_deps_v2(void *g, const void *const *from, const void *const *to,
                       const void *edges, size_t n) {
    (void)edges;
    ENTER("cuGraphAddDependencies");
    count("add_deps_v2");
    LEAVE(add_deps_common(g, from, to, n));
}

/* CUDA_KERNEL_NODE_PARAMS_v2 */
typedef struct kparams {
    void *func;
    unsigned gx, gy, gz, bx, by, bz, shmem;
    void **params;
    void **extra;
    void *kern;
    void *ctx;
} kparams;

static int kp_to_launch(klaunch *l, const kparams *p) {
    if (!p) return E_INVALID_VALUE;
    if (p->params && p->extra) return E_INVALID_VALUE;   /* both: the driver's documented refusal */
    if (p->extra) return E_NOT_SUPPORTED;
    fake_dim3 g = {p->gx, p->gy, p->gz}, b = {p->bx, p->by, p->bz};
    return klaunch_set(l, p->func ? p->func : p->kern, g, b, p->shmem, p->params);
}
static int add_kernel_node(void **out, void *g, const void *const *deps, size_t n,
                           const kparams *p) {
    ENTER("cuGraphAddKernelNode");
    if (!out || !valid_graph(g)) LEAVE(E_INVALID_VALUE);
    int rc = check_new_node_deps((fgraph *)g, deps, n);
    klaunch l;
    if (!rc) rc = kp_to_launch(&l, p);
    if (rc) LEAVE(rc);
    fnode *nd = graph_add((fgraph *)g, N_KERNEL, (fnode *const *)deps, n);
    klaunch_copy(&nd->kl, &l);
    *out = nd;
    LEAVE(0);
}
static int kernel_node_get(void *node, kparams *p) {
    ENTER("cuGraphKernelNodeGetParams");
    if (!valid_node(node) || ((fnode *)node)->type != N_KERNEL || !p) LEAVE(E_INVALID_VALUE);
    fnode *n = (fnode *)node;
    memset(p, 0, sizeof *p);
    p->func = n->kl.k;
    if (n->kl.kern && kernel_node_form == 1) {
        p->func = NULL;
        p->kern = n->kl.kern;
        p->ctx = PRIMARY_CTX;
    } else if (n->kl.kern) {
        p->func = n->kl.kern;
    }
    p->gx = n->kl.grid.x, p->gy = n->kl.grid.y, p->gz = n->kl.grid.z;
    p->bx = n->kl.block.x, p->by = n->kl.block.y, p->bz = n->kl.block.z;
    p->shmem = n->kl.shmem;
    p->params = n->kl.argv;
    LEAVE(0);
}
static int kernel_node_set(void *node, const kparams *p) {
    ENTER("cuGraphKernelNodeSetParams");
    if (!valid_node(node) || ((fnode *)node)->type != N_KERNEL) LEAVE(E_INVALID_VALUE);
    klaunch l;
    int rc = kp_to_launch(&l, p);
    if (!rc) klaunch_copy(&((fnode *)node)->kl, &l);
    LEAVE(rc);
}

/* conditional nodes */
static int cond_handle_create(unsigned long long *h, void *g, void *ctx, unsigned dflt,
                              unsigned flags) {
    ENTER("cuGraphConditionalHandleCreate");
    /* flags: "Currently must be CU_GRAPH_COND_ASSIGN_DEFAULT or 0" */
    if (!h || !valid_graph(g) || ctx != PRIMARY_CTX || nconds == NCOND || flags > 1)
        LEAVE(E_INVALID_VALUE);
    conds[nconds].graph = (fgraph *)g;
    conds[nconds].dflt = dflt;
    conds[nconds].flags = flags;
    conds[nconds].value = dflt;
    *h = (unsigned long long)++nconds;
    LEAVE(0);
}
typedef struct { unsigned long long handle; int type; unsigned size; void **phGraph_out; void *ctx; } condp;
/* CUDA_CHILD_GRAPH_NODE_PARAMS: the graph, and its ownership (0 clone, 1 move) */
typedef struct { void *graph; int ownership; } childp;
typedef struct { int type; int reserved0[3]; union { long long reserved1[29]; condp cond; childp child; } u;
                 long long reserved2; } nodeparams;
static int nonzero_bytes(const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (((const unsigned char *)p)[i]) return 1;
    return 0;
}
static int add_node_v2(void **out, void *g, const void *const *deps, const void *edges, size_t n,
                       nodeparams *p) {
    (void)edges;
    ENTER("cuGraphAddNode");
    if (!out || !valid_graph(g) || !p) LEAVE(E_INVALID_VALUE);
    int rc = check_new_node_deps((fgraph *)g, deps, n);
    if (rc) LEAVE(rc);
    /* "All unused bytes - that is, reserved0 and all bytes past the utilized union member -
     * must be set to zero" (the code is a guess: CUDA_ERROR_INVALID_VALUE) */
    size_t used = p->type == N_CHILD ? sizeof(childp) : p->type == N_COND ? sizeof(condp) : 0;
    if (used && (nonzero_bytes(p->reserved0, sizeof p->reserved0) ||
        nonzero_bytes((const unsigned char *)&p->u + used, sizeof p->u - used) || p->reserved2))
        LEAVE(E_INVALID_VALUE);
    if (p->type == N_CHILD) {   /* CU_GRAPH_NODE_TYPE_GRAPH: clone only */
        childp *cp = &p->u.child;
        if (!valid_graph(cp->graph) || cp->ownership != 0) LEAVE(E_INVALID_VALUE);
        /* the child-graph rule (graph_holds_cond); the code is a guess, as in add_child */
        if (graph_holds_cond((fgraph *)cp->graph)) LEAVE(E_INVALID_VALUE);
        fnode *nd = graph_add((fgraph *)g, N_CHILD, (fnode *const *)deps, n);
        nd->child = graph_clone((fgraph *)cp->graph);
        nd->child->in_child = 1;
        *out = nd;
        LEAVE(0);
    }
    /* the stand-in adds only conditional and child-graph nodes here */
    if (p->type != N_COND) LEAVE(E_NOT_SUPPORTED);
    /* a conditional node into a child graph's graph (or a body inside one) breaks the
     * child-graph rule (graph_in_child); the code is a guess (CUDA_ERROR_INVALID_VALUE) */
    if (graph_in_child((fgraph *)g)) LEAVE(E_INVALID_VALUE);
    condp *c = &p->u.cond;
    if (c->handle < 1 || c->handle > (unsigned long long)nconds ||
        conds[c->handle - 1].graph != (fgraph *)g || c->type < 0 || c->type > 1 || c->size != 1 ||
        c->ctx != PRIMARY_CTX)
        LEAVE(E_INVALID_VALUE);
    fnode *nd = graph_add((fgraph *)g, N_COND, (fnode *const *)deps, n);
    nd->handle = c->handle;
    nd->cond_type = c->type;
    nd->child = graph_new();
    nd->child->cond_parent = (fgraph *)g;
    nd->body_out[0] = nd->child;
    c->phGraph_out = (void **)nd->body_out;
    *out = nd;
    LEAVE(0);
}

/* The first kernel node (depth first, into conditional bodies and child graphs) that
 * launches `func` (a CUfunction), or NULL. */
static fnode *kernel_node_of(const fgraph *g, const void *func) {
    for (size_t i = 0; i < g->n; ++i) {
        fnode *n = g->nodes[i];
        if (n->type == N_KERNEL && (const void *)n->kl.k == func) return n;
        if ((n->type == N_COND || n->type == N_CHILD) && n->child) {
            fnode *in = kernel_node_of(n->child, func);
            if (in) return in;
        }
    }
    return NULL;
}

/* instantiate / launch / update */
typedef struct { unsigned long long flags; void *upload; void *err_node; int result; } iparams;
static int instantiate(void **out, void *g, iparams *p) {
    ENTER("cuGraphInstantiateWithParams");
    if (!out || !p || !valid_graph(g)) LEAVE(E_INVALID_VALUE);
    fgraph *fg = (fgraph *)g;
    p->err_node = NULL;
    p->result = 0;
    if (fail_instantiate_at >= 0 && (long)fg->n > fail_instantiate_at) {
        p->err_node = fg->nodes[fail_instantiate_at];
        p->result = 3; /* CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED */
        LEAVE(E_NOT_SUPPORTED);
    }
    fnode *bad_kernel = fail_instantiate_kernel ? kernel_node_of(fg, fail_instantiate_kernel) : NULL;
    if (bad_kernel) {
        p->err_node = bad_kernel;   /* the driver names the node, also inside a body */
        p->result = 3; /* CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED */
        LEAVE(E_NOT_SUPPORTED);
    }
    fnode *refused = graph_cond_refused(fg);
    if (refused) {
        p->err_node = refused;
        p->result = 3; /* CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED */
        LEAVE(E_NOT_SUPPORTED);
    }
    /* every condition handle of the graph must be used by a conditional node */
    for (int h = 0; h < nconds; ++h) {
        if (conds[h].graph != fg) continue;
        int used = 0;
        for (size_t i = 0; i < fg->n; ++i)
            if (fg->nodes[i]->type == N_COND && fg->nodes[i]->handle == (unsigned long long)h + 1)
                used = 1;
        if (!used) {
            p->result = 5; /* CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED */
            LEAVE(E_INVALID_VALUE);
        }
    }
    fexec *e = (fexec *)calloc(1, sizeof *e);
    e->magic = EXEC_MAGIC;
    handle_add(e, EXEC_MAGIC);
    e->src = fg;
    e->copy = graph_clone(fg);
    pthread_mutex_init(&e->m, NULL);
    pthread_cond_init(&e->c, NULL);
    *out = e;
    live_exec++;
    LEAVE(0);
}
static int valid_exec(const void *e) {
    return handle_is(e, EXEC_MAGIC) && is_alive(e, EXEC_MAGIC, ((const fexec *)e)->magic);
}
static void exec_quiesce(fexec *e) {
    pthread_mutex_lock(&e->m);
    while (e->pending) pthread_cond_wait(&e->c, &e->m);
    pthread_mutex_unlock(&e->m);
}
static int exec_destroy(void *h) {
    ENTER("cuGraphExecDestroy");
    if (!valid_exec(h)) LEAVE(E_INVALID_VALUE);
    fexec *e = (fexec *)h;
    e->magic = DEAD_MAGIC;
    live_exec--;
    pthread_mutex_unlock(&G);
    exec_quiesce(e); /* launches already queued finish first, as in CUDA */
    graph_free(e->copy);
    return 0;
}
static int graph_upload(void *h, void *sh) {
    ENTER("cuGraphUpload");
    int err;
    if (!valid_exec(h)) LEAVE(E_INVALID_VALUE);
    if (!submit(sh, &err)) LEAVE(err);
    LEAVE(0);
}
static int graph_launch(void *h, void *sh) {
    ENTER("cuGraphLaunch");
    int err;
    if (!valid_exec(h)) LEAVE(E_INVALID_VALUE);
    fstream *s = submit(sh, &err);
    if (!s) LEAVE(err);
    if (s->cap) {
        capture_invalidate(s->cap);
        LEAVE(E_CAPTURE_UNSUPPORTED);
    }
    launch_queue_wait_room(s); /* G was released: check again what it guarded */
    if (!valid_exec(h) || (!s->legacy && !valid_stream(s))) LEAVE(E_INVALID_HANDLE);
    fexec *e = (fexec *)h;
    op *o = (op *)calloc(1, sizeof *o);
    o->type = OP_GRAPH;
    o->exec = e;
    pthread_mutex_lock(&e->m);
    e->pending++;
    pthread_mutex_unlock(&e->m);
    launches++;
    stream_push(s, o);
    LEAVE(0);
}
static int same_topology(const fgraph *a, const fgraph *b) {
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; ++i) {
        const fnode *x = a->nodes[i], *y = b->nodes[i];
        if (x->type != y->type || x->ndeps != y->ndeps) return 0;
        for (size_t d = 0; d < x->ndeps; ++d)
            if (node_index(a, x->deps[d]) != node_index(b, y->deps[d])) return 0;
        if (x->type == N_KERNEL && x->kl.k != y->kl.k) return 0;
        if ((x->type == N_CHILD || x->type == N_COND) && !same_topology(x->child, y->child)) return 0;
    }
    return 1;
}
static void copy_params_into(fgraph *dst, const fgraph *src) {
    for (size_t i = 0; i < dst->n; ++i) {
        fnode *d = dst->nodes[i];
        const fnode *s = src->nodes[i];
        if (d->type == N_KERNEL) klaunch_copy(&d->kl, &s->kl);
        else if (d->type == N_CHILD || d->type == N_COND) copy_params_into(d->child, s->child);
        else {
            d->dst = s->dst, d->src = s->src, d->bytes = s->bytes, d->value = s->value;
            d->event = s->event;
        }
    }
}
typedef struct { int result; void *err_node; void *err_from; } uinfo;
static int exec_update(void *h, void *g, uinfo *info) {
    ENTER("cuGraphExecUpdate");
    if (!valid_exec(h) || !valid_graph(g) || !info) LEAVE(E_INVALID_VALUE);
    fexec *e = (fexec *)h;
    info->result = 0;
    info->err_node = info->err_from = NULL;
    if (!same_topology(e->copy, (fgraph *)g)) {
        info->result = 2; /* CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED */
        LEAVE(E_GRAPH_EXEC_UPDATE);
    }
    pthread_mutex_unlock(&G);
    exec_quiesce(e);
    pthread_mutex_lock(&G);
    copy_params_into(e->copy, (fgraph *)g);
    LEAVE(0);
}
/* the exec's copy of a top-level node of the graph it was instantiated from */
static fnode *exec_node(fexec *e, void *node) {
    if (!valid_node(node) || ((fnode *)node)->owner != e->src || e->src->magic != GRAPH_MAGIC)
        return NULL;
    long i = node_index(e->src, (fnode *)node);
    return i < 0 ? NULL : e->copy->nodes[i];
}
static int exec_kernel_set(void *h, void *node, const kparams *p) {
    ENTER("cuGraphExecKernelNodeSetParams");
    if (!valid_exec(h)) LEAVE(E_INVALID_VALUE);
    fexec *e = (fexec *)h;
    fnode *n = exec_node(e, node);
    if (!n || n->type != N_KERNEL) LEAVE(E_INVALID_VALUE);
    klaunch l;
    int rc = kp_to_launch(&l, p);
    if (rc) LEAVE(rc);
    if (l.k != n->kl.k) LEAVE(E_INVALID_VALUE); /* the function may not change */
    pthread_mutex_unlock(&G);
    exec_quiesce(e); /* later launches see the new parameters, earlier ones the old */
    pthread_mutex_lock(&G);
    klaunch_copy(&n->kl, &l);
    LEAVE(0);
}
static int exec_child_set(void *h, void *node, void *child) {
    ENTER("cuGraphExecChildGraphNodeSetParams");
    if (!valid_exec(h) || !valid_graph(child)) LEAVE(E_INVALID_VALUE);
    fexec *e = (fexec *)h;
    fnode *n = exec_node(e, node);
    if (!n || n->type != N_CHILD || !same_topology(n->child, (fgraph *)child)) LEAVE(E_INVALID_VALUE);
    pthread_mutex_unlock(&G);
    exec_quiesce(e);
    pthread_mutex_lock(&G);
    copy_params_into(n->child, (fgraph *)child);
    LEAVE(0);
}

/* kernels, memory */
static int launch_kernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shmem, void *sh, void **params, void **extra) {
    ENTER("cuLaunchKernel");
    int err;
    if (params && extra) LEAVE(E_INVALID_VALUE);   /* both: the driver's documented refusal */
    if (extra) LEAVE(E_NOT_SUPPORTED);
    fstream *s = submit(sh, &err);
    if (!s) LEAVE(err);
    klaunch l;
    fake_dim3 g = {gx, gy, gz}, b = {bx, by, bz};
    int rc = klaunch_set(&l, f, g, b, shmem, params);
    if (rc) {
        if (s->cap) capture_invalidate(s->cap);
        LEAVE(rc);
    }
    fnode *n;
    if ((rc = capture_add(s, N_KERNEL, &n)) != 0) LEAVE(rc);
    if (n) {
        klaunch_copy(&n->kl, &l);
        LEAVE(0);
    }
    launch_queue_wait_room(s);
    if (!s->legacy && !valid_stream(s)) LEAVE(E_INVALID_HANDLE);
    op *o = (op *)calloc(1, sizeof *o);
    o->type = OP_KERNEL;
    klaunch_copy(&o->kl, &l);
    stream_push(s, o);
    LEAVE(0);
}
static int param_info(void *f, size_t index, size_t *offset, size_t *size) {
    count("cuFuncGetParamInfo");
    if (!valid_kernel(f)) return E_INVALID_HANDLE; /* a CUkernel too */
    fake_kernel *k = (fake_kernel *)f;
    if (index >= k->nparams) return E_INVALID_VALUE;
    size_t off = 0;
    for (size_t i = 0; i < index; ++i) off = (off + k->sizes[i] + 7) / 8 * 8;
    if (offset) *offset = off;
    if (size) *size = k->sizes[index];
    return 0;
}
static int func_get_name(const char **name, void *f) {
    if (!name || !valid_kernel(f)) return E_INVALID_VALUE; /* a CUkernel too */
    *name = ((fake_kernel *)f)->name;
    return 0;
}
static int kernel_get_name(const char **name, void *k) {
    if (!name) return E_INVALID_VALUE;
    fake_kernel *f = libkernel_function(k);
    if (!f) return E_INVALID_HANDLE;
    *name = f->name;
    return 0;
}
static int kernel_get_function(void **func, void *k) {
    ENTER("cuKernelGetFunction"); /* the function of the current context's copy */
    fake_kernel *f = libkernel_function(k);
    if (!func) LEAVE(E_INVALID_VALUE);
    if (!f) LEAVE(E_INVALID_HANDLE);
    *func = f;
    LEAVE(0);
}
/* n bytes of the arena for cuMemAlloc (host 0) or cuMemHostAlloc (host: 1, | 2 with
 * DEVICEMAP), filled with 0xcd (uninitialised, as on a device); 0 when the arena or the
 * allocation table is full. Each allocation is followed by a gap: off-by-one pointers
 * are not device memory. */
static uintptr_t arena_take(size_t n, int host) {
    pthread_mutex_lock(&mem_lock);
    size_t need = (n + 255) / 256 * 256;
    if (arena_used + need > ARENA_SIZE || nallocs == NALLOC) {
        pthread_mutex_unlock(&mem_lock);
        return 0;
    }
    uintptr_t p = (uintptr_t)arena + arena_used;
    arena_used += need + 256;
    allocs[nallocs].lo = p;
    allocs[nallocs].hi = p + n;
    allocs[nallocs].live = 1;
    allocs[nallocs].host = host;
    nallocs++;
    pthread_mutex_unlock(&mem_lock);
    memset((void *)p, 0xcd, n);
    return p;
}
static int mem_alloc(unsigned long long *out, size_t n) {
    ENTER("cuMemAlloc");
    if (!out || !n) LEAVE(E_INVALID_VALUE);
    int rc = unsafe_call_check();
    if (rc) LEAVE(rc);
    uintptr_t p = arena_take(n, 0);
    if (!p) LEAVE(E_OUT_OF_MEMORY);
    *out = p;
    live_devmem++;
    LEAVE(0);
}
static int mem_free(unsigned long long p) {
    ENTER("cuMemFree");
    if (!p) LEAVE(0);
    pthread_mutex_lock(&mem_lock);
    int found = 0;
    for (int i = 0; i < nallocs; ++i)
        if (allocs[i].live && !allocs[i].host && allocs[i].lo == p) {
            allocs[i].live = 0;
            found = 1;
        }
    pthread_mutex_unlock(&mem_lock);
    if (!found) LEAVE(E_INVALID_VALUE);
    live_devmem--;
    LEAVE(0);
}
/* cuMemHostAlloc / cuMemHostGetDevicePointer / cuMemFreeHost: page-locked host memory
 * the device reads and writes in place (CU_MEMHOSTALLOC_DEVICEMAP), the host writing it
 * while kernels run (no stream, no copy). Here it lives in the arena, so kernels may
 * take it (with unified addressing, as on every 64-bit CUDA 12 system, the device
 * pointer is the host pointer); it is not cuMemFree's, nor cuMemFreeHost device memory.
 * Flags other than PORTABLE (1), DEVICEMAP (2) and WRITECOMBINED (4) are INVALID_VALUE;
 * cuMemHostGetDevicePointer of memory allocated without DEVICEMAP is INVALID_VALUE. */
static int mem_host_alloc(void **out, size_t n, unsigned flags) {
    ENTER("cuMemHostAlloc");
    if (!out || !n || (flags & ~7u)) LEAVE(E_INVALID_VALUE);
    int rc = unsafe_call_check();
    if (rc) LEAVE(rc);
    uintptr_t p = arena_take(n, 1 | ((flags & 2u) ? 2 : 0));
    if (!p) LEAVE(E_OUT_OF_MEMORY);
    *out = (void *)p;
    live_hostmem++;
    LEAVE(0);
}
static int mem_host_get_device_pointer(unsigned long long *out, void *p, unsigned flags) {
    ENTER("cuMemHostGetDevicePointer");
    if (!out || flags) LEAVE(E_INVALID_VALUE);
    int ok = 0;
    pthread_mutex_lock(&mem_lock);
    for (int i = 0; i < nallocs; ++i)
        if (allocs[i].live && (allocs[i].host & 2) && allocs[i].lo <= (uintptr_t)p &&
            (uintptr_t)p < allocs[i].hi)
            ok = 1;
    pthread_mutex_unlock(&mem_lock);
    if (!ok) LEAVE(E_INVALID_VALUE);
    *out = (unsigned long long)(uintptr_t)p;
    LEAVE(0);
}
static int mem_free_host(void *p) {
    ENTER("cuMemFreeHost");
    int found = 0;
    pthread_mutex_lock(&mem_lock);
    for (int i = 0; i < nallocs; ++i)
        if (allocs[i].live && allocs[i].host && allocs[i].lo == (uintptr_t)p) {
            allocs[i].live = 0;
            found = 1;
        }
    pthread_mutex_unlock(&mem_lock);
    if (!found) LEAVE(E_INVALID_VALUE);
    live_hostmem--;
    LEAVE(0);
}
static int memcpy_async(unsigned long long dst, unsigned long long src, size_t n, void *sh) {
    ENTER("cuMemcpyAsync");
    int err;
    fstream *s = submit(sh, &err);
    if (!s) LEAVE(err);
    if (n && (!dst || !src)) LEAVE(E_INVALID_VALUE);
    /* host memory that poses as device memory (inside the arena, not allocated) */
    if ((in_arena(dst) && !is_device(dst, n)) || (in_arena(src) && !is_device(src, n)))
        LEAVE(E_INVALID_VALUE);
    fnode *nd;
    int rc = capture_add(s, N_MEMCPY, &nd);
    if (rc) LEAVE(rc);
    if (nd) {
        if (!is_device(dst, n) || !is_device(src, n)) { /* graphs copy device memory only here */
            capture_invalidate(s->cap);
            LEAVE(E_INVALID_VALUE);
        }
        nd->dst = dst, nd->src = src, nd->bytes = n;
        LEAVE(0);
    }
    op *o = (op *)calloc(1, sizeof *o);
    o->type = OP_MEMCPY;
    o->dst = dst, o->src = src, o->bytes = n;
    stream_push(s, o);
    LEAVE(0);
}
static int memset_d8_async(unsigned long long dst, unsigned char v, size_t n, void *sh) {
    ENTER("cuMemsetD8Async");
    int err;
    fstream *s = submit(sh, &err);
    if (!s) LEAVE(err);
    if (!is_device(dst, n)) LEAVE(E_INVALID_VALUE);
    fnode *nd;
    int rc = capture_add(s, N_MEMSET, &nd);
    if (rc) LEAVE(rc);
    if (nd) {
        nd->dst = dst, nd->value = v, nd->bytes = n;
        LEAVE(0);
    }
    op *o = (op *)calloc(1, sizeof *o);
    o->type = OP_MEMSET;
    o->dst = dst, o->value = v, o->bytes = n;
    stream_push(s, o);
    LEAVE(0);
}

/* ---- user objects: the API (see the user objects section above) ---------------------- */

static int valid_userobj(const void *o) {
    return handle_is(o, USEROBJ_MAGIC) && ((const fuserobj *)o)->magic == USEROBJ_MAGIC;
}
/* CUresult cuUserObjectCreate(CUuserObject *, void *ptr, CUhostFn destroy, unsigned
 * initialRefcount, unsigned flags): flags must be CU_USER_OBJECT_NO_DESTRUCTOR_SYNC (1) */
static int userobj_create(void **out, void *ptr, void (*destroy)(void *), unsigned refs, unsigned flags) {
    ENTER("cuUserObjectCreate");
    if (!out || !destroy || !refs || flags != 1) LEAVE(E_INVALID_VALUE);
    fuserobj *o = (fuserobj *)calloc(1, sizeof *o);
    o->magic = USEROBJ_MAGIC;
    handle_add(o, USEROBJ_MAGIC);
    o->ptr = ptr;
    o->destroy = destroy;
    o->refs = refs;
    *out = o;
    LEAVE(0);
}
static int userobj_release_api(void *o, unsigned n) {
    ENTER("cuUserObjectRelease");
    if (!valid_userobj(o) || !n || (long)n > ((fuserobj *)o)->refs) LEAVE(E_INVALID_VALUE);
    pthread_mutex_unlock(&G);
    userobj_release((fuserobj *)o, n);
    return 0;
}
/* cuGraphRetainUserObject(CUgraph, CUuserObject, unsigned count, unsigned flags): flags
 * CU_GRAPH_USER_OBJECT_MOVE (1) moves the caller's references to the graph */
static int graph_retain_userobj(void *g, void *o, unsigned n, unsigned flags) {
    ENTER("cuGraphRetainUserObject");
    if (!valid_graph(g) || !valid_userobj(o) || !n || flags > 1) LEAVE(E_INVALID_VALUE);
    if (!flags) __atomic_add_fetch(&((fuserobj *)o)->refs, (long)n, __ATOMIC_ACQ_REL);
    graph_urefs_add((fgraph *)g, (fuserobj *)o, n);
    LEAVE(0);
}

/* ---- cuGetProcAddress ------------------------------------------------------------------- */

typedef struct { const char *name; int since; int until; void *fn; } proc;
static const proc procs[] = {
    {"cuGetErrorName", 6000, 0, (void *)get_error_name},
    {"cuGetErrorString", 6000, 0, (void *)get_error_string},
    {"cuInit", 2000, 0, (void *)cuInit},
    {"cuDriverGetVersion", 2020, 0, (void *)cuDriverGetVersion},
    {"cuDeviceGetCount", 2000, 0, (void *)device_get_count},
    {"cuDeviceGet", 2000, 0, (void *)device_get},
    {"cuDeviceGetName", 2000, 0, (void *)device_get_name},
    {"cuDevicePrimaryCtxRetain", 7000, 0, (void *)primary_retain},
    {"cuCtxGetCurrent", 4000, 0, (void *)ctx_get_current},
    {"cuCtxSetCurrent", 4000, 0, (void *)ctx_set_current},
    {"cuCtxGetDevice", 2000, 12999, (void *)ctx_get_device},
    {"cuCtxGetDevice", 13000, 0, (void *)ctx_get_device_v2},
    {"cuCtxSynchronize", 2000, 12999, (void *)ctx_synchronize},
    {"cuCtxSynchronize", 13000, 0, (void *)ctx_synchronize_v2},
    {"cuStreamCreate", 2000, 0, (void *)stream_create},
    {"cuStreamDestroy", 4000, 0, (void *)stream_destroy},
    {"cuStreamSynchronize", 2000, 0, (void *)stream_synchronize},
    {"cuStreamQuery", 2000, 0, (void *)stream_query},
    {"cuEventQuery", 2000, 0, (void *)event_query},
    {"cuStreamWaitEvent", 3020, 0, (void *)stream_wait_event},
    {"cuEventCreate", 2000, 0, (void *)event_create},
    {"cuEventDestroy", 4000, 0, (void *)event_destroy},
    {"cuEventRecord", 2000, 0, (void *)event_record},
    {"cuEventSynchronize", 2000, 0, (void *)event_synchronize},
    {"cuStreamBeginCapture", 10010, 0, (void *)begin_capture},
    {"cuStreamBeginCaptureToGraph", 12030, 0, (void *)begin_capture_to_graph},
    {"cuStreamEndCapture", 10000, 0, (void *)end_capture},
    {"cuStreamIsCapturing", 10000, 0, (void *)is_capturing},
    {"cuStreamGetCaptureInfo", 11030, 12029, (void *)capture_info_v2},
    {"cuStreamGetCaptureInfo", 12030, 0, (void *)capture_info_v3},
    {"cuThreadExchangeStreamCaptureMode", 10010, 0, (void *)exchange_mode},
    {"cuStreamUpdateCaptureDependencies", 11030, 12029, (void *)update_capture_deps_v1},
    {"cuStreamUpdateCaptureDependencies", 12030, 0, (void *)update_capture_deps_v2},
    {"cuGraphCreate", 10000, 0, (void *)graph_create},
    {"cuGraphDestroy", 10000, 0, (void *)graph_destroy},
    {"cuGraphGetNodes", 10000, 0, (void *)graph_get_nodes},
    {"cuGraphAddChildGraphNode", 10000, 0, (void *)add_child},
    {"cuGraphChildGraphNodeGetGraph", 10000, 0, (void *)child_get_graph},
    {"cuGraphAddDependencies", 10000, 12029, (void *)add_deps_v1},
    {"cuGraphAddDependencies", 12030, 0, (void *)add_deps_v2},
    {"cuGraphAddKernelNode", 12000, 0, (void *)add_kernel_node},
    {"cuGraphKernelNodeGetParams", 12000, 0, (void *)kernel_node_get},
    {"cuGraphKernelNodeSetParams", 12000, 0, (void *)kernel_node_set},
    {"cuGraphExecKernelNodeSetParams", 12000, 0, (void *)exec_kernel_set},
    {"cuGraphAddNode", 12030, 0, (void *)add_node_v2},
    {"cuGraphConditionalHandleCreate", 12030, 0, (void *)cond_handle_create},
    {"cuGraphInstantiateWithParams", 12000, 0, (void *)instantiate},
    {"cuGraphExecDestroy", 10000, 0, (void *)exec_destroy},
    {"cuGraphUpload", 11010, 0, (void *)graph_upload},
    {"cuGraphLaunch", 10000, 0, (void *)graph_launch},
    {"cuGraphExecUpdate", 12000, 0, (void *)exec_update},
    {"cuGraphExecChildGraphNodeSetParams", 11010, 0, (void *)exec_child_set},
    {"cuLaunchKernel", 4000, 0, (void *)launch_kernel},
    {"cuFuncGetParamInfo", 12040, 0, (void *)param_info},
    {"cuFuncGetName", 12030, 0, (void *)func_get_name},
    {"cuKernelGetName", 12030, 0, (void *)kernel_get_name},
    {"cuKernelGetFunction", 12000, 0, (void *)kernel_get_function},
    {"cuMemAlloc", 3020, 0, (void *)mem_alloc},
    {"cuMemFree", 3020, 0, (void *)mem_free},
    {"cuMemHostAlloc", 2020, 0, (void *)mem_host_alloc},
    {"cuMemHostGetDevicePointer", 3020, 0, (void *)mem_host_get_device_pointer},
    {"cuMemFreeHost", 2000, 0, (void *)mem_free_host},
    {"cuMemcpyAsync", 4000, 0, (void *)memcpy_async},
    {"cuMemsetD8Async", 3020, 0, (void *)memset_d8_async},
    /* user objects (what NCCL ties captured collectives' lifetime to) */
    {"cuUserObjectCreate", 11030, 0, (void *)userobj_create},
    {"cuUserObjectRelease", 11030, 0, (void *)userobj_release_api},
    {"cuGraphRetainUserObject", 11030, 0, (void *)graph_retain_userobj},
};

/* CUdriverProcAddressQueryResult */
enum { PROC_SUCCESS = 0, PROC_SYMBOL_NOT_FOUND = 1, PROC_VERSION_NOT_SUFFICIENT = 2 };
/* CUdriverProcAddress_flags */
enum { PROC_DEFAULT = 0, PROC_LEGACY_STREAM = 1, PROC_PER_THREAD_DEFAULT_STREAM = 2 };

/* Versioned ABIs, as the driver hands them out: a symbol has one row per ABI it has had
 * (`since` is the <version> of cudaTypedefs.h's PFN_<symbol>_v<version>, `until` the last
 * version before the next form); cuGetProcAddress(symbol, version) gives the form of
 * min(version, driver version): the newest form introduced at or before it. So a caller
 * that asks at the driver's version gets the newest form, whatever ABI its own type has
 * (tests/cuda/test_shim_standin.py checks these rows against the real header). The flags
 * must be one of CU_GET_PROC_ADDRESS_* (else CUDA_ERROR_INVALID_VALUE); no symbol here
 * has a per-thread-default-stream form, so the three modes hand out the same function.
 * Every request is logged for the tests: fake_cuda_proc_requests(). */
#define NREQ 256
static struct { char name[64]; int version; unsigned long long flags; } requests[NREQ];
static int nrequests;

EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version,
                               unsigned long long flags, int *status) {
    int st = PROC_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn) return E_INVALID_VALUE;
    *pfn = NULL;
    count("cuGetProcAddress");
    if (flags != PROC_DEFAULT && flags != PROC_LEGACY_STREAM &&
        flags != PROC_PER_THREAD_DEFAULT_STREAM) {
        if (status) *status = PROC_SYMBOL_NOT_FOUND;
        return E_INVALID_VALUE;
    }
    pthread_mutex_lock(&count_lock);
    if (nrequests < NREQ) {
        snprintf(requests[nrequests].name, sizeof requests[nrequests].name, "%s", symbol);
        requests[nrequests].version = cuda_version;
        requests[nrequests].flags = flags;
        nrequests++;
    }
    pthread_mutex_unlock(&count_lock);
    int v = cuda_version < version() ? cuda_version : version();
    for (size_t i = 0; i < sizeof procs / sizeof *procs; ++i) {
        if (strcmp(procs[i].name, symbol)) continue;
        if (v < procs[i].since) { /* newer than asked for, or than this driver */
            if (st == PROC_SYMBOL_NOT_FOUND) st = PROC_VERSION_NOT_SUFFICIENT;
            continue;
        }
        if (procs[i].until && v > procs[i].until) continue;
        *pfn = procs[i].fn;
        st = PROC_SUCCESS;
        break;
    }
    if (status) *status = st;
    return st == PROC_SUCCESS ? 0 : E_NOT_FOUND;
}

/* "symbol version flags" per line, every cuGetProcAddress request so far (a test-only export) */
EXPORT size_t fake_cuda_proc_requests(char *buf, size_t n) {
    size_t used = 0;
    pthread_mutex_lock(&count_lock);
    for (int i = 0; i < nrequests; ++i) {
        int room = buf && used < n;
        int w = snprintf(room ? buf + used : NULL, room ? n - used : 0, "%s %d %llu\n",
                         requests[i].name, requests[i].version, requests[i].flags);
        if (w > 0) used += (size_t)w;
    }
    pthread_mutex_unlock(&count_lock);
    return used;
}

/* ---- observation and injection (test-only exports) ---------------------------------- */

/* make device dev's primary context current on this thread, as a library the test
 * stands for would (cupy.cuda.Device(dev).use()); -1 on a device that is not there */
EXPORT int fake_cuda_use_device(int dev) {
    if (dev < 0 || dev >= n_devices()) return -1;
    tls_ctx = ctx_of_device(dev);
    return 0;
}
EXPORT int fake_cuda_current_device(void) { return device_of_ctx(tls_ctx); }

/* node handles cuGraphGetNodes has written out, in all (a cost: listing a graph is linear) */
EXPORT long fake_cuda_nodes_listed(void) { return nodes_listed; }

EXPORT long fake_cuda_counter(const char *name) {
    long v = 0;
    pthread_mutex_lock(&count_lock);
    for (int i = 0; i < NCOUNTERS && counters[i].name[0]; ++i)
        if (!strcmp(counters[i].name, name)) v = counters[i].value;
    pthread_mutex_unlock(&count_lock);
    return v;
}
EXPORT long fake_cuda_live(const char *kind) {
    if (!strcmp(kind, "stream")) return live_stream;
    if (!strcmp(kind, "event")) return live_event;
    if (!strcmp(kind, "graph")) return live_graph;
    if (!strcmp(kind, "exec")) return live_exec;
    if (!strcmp(kind, "devmem")) return live_devmem;
    if (!strcmp(kind, "hostmem")) return live_hostmem;
    return -1;
}
EXPORT long fake_cuda_launch_count(void) { return launches; }
EXPORT unsigned fake_cuda_last_grid_x(void) { return last_grid_x; }
EXPORT int fake_cuda_sticky(void) { return sticky; }
EXPORT int fake_cuda_fail_next(const char *api, int nth, int err) {
    for (int i = 0; i < NFAIL; ++i)
        if (fails[i].nth == 0) {
            snprintf(fails[i].api, sizeof fails[i].api, "%s", api);
            fails[i].nth = nth;
            fails[i].err = err;
            return 0;
        }
    return -1;
}
EXPORT void fake_cuda_fail_instantiate_at_node(long k) { fail_instantiate_at = k; }
/* instantiating a graph that launches kernel `func` anywhere (a conditional body, a child
 * graph) fails naming that kernel node, as the driver names a body's node (NULL: off) */
EXPORT void fake_cuda_fail_instantiate_at_kernel(const void *func) { fail_instantiate_kernel = func; }
/* the device address range (tests make device arrays there) */
EXPORT int fake_cuda_is_device(unsigned long long p, size_t n) { return is_device((uintptr_t)p, n); }
EXPORT void fake_cuda_reset(void) {
    all_drain();
    pthread_mutex_lock(&G);
    pthread_mutex_lock(&count_lock);
    memset(counters, 0, sizeof counters);
    pthread_mutex_unlock(&count_lock);
    memset(fails, 0, sizeof fails);
    fail_instantiate_at = -1;
    fail_instantiate_kernel = NULL;
    edge_data_on = 0;
    fake_cuda_set_queue_depth(0);
    fake_cuda_set_gate(0);
    sticky = 0;
    launches = 0;
    last_grid_x = 0;
    tls_capture_mode = 0;
    pthread_mutex_unlock(&G);
}
