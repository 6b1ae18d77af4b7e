/* eagle CUDA shim over the driver — the implementation (a detail header:
 * include eagle/cuda_shim.h or eagle/cuda.hpp, never this one directly).
 *
 * Compiled once per program: csrc/cuda/cuda_shim.c includes it for the Python
 * extension; a C++ program using the header-only face (eagle/cuda.hpp)
 * defines EAGLE_CUDA_SHIM_IMPLEMENTATION in exactly one translation unit,
 * and cuda.hpp includes it there.
 * Compiles as C11 and as C++ (nvcc host code). Needs dlopen; never CUDA
 * headers (the declarations of eagle/cuda_shim.h carry the ABI).
 */
#ifndef EAGLE_CUDA_SHIM_IMPL_H
#define EAGLE_CUDA_SHIM_IMPL_H

#include "eagle/cuda_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the driver's function types (CUresult is an int enum) ---------------- */

typedef int (*eagle_cu_getproc_v2)(const char *, void **, int, unsigned long long, int *);
typedef int (*eagle_cu_int_p)(int *);
typedef int (*eagle_cu_uint)(unsigned int);
typedef int (*eagle_cu_void)(void);
typedef int (*eagle_cu_h)(void *);
typedef int (*eagle_cu_hp)(void **);
typedef int (*eagle_cu_hp_flags)(void **, unsigned int);
typedef int (*eagle_cu_hh)(void *, void *);
typedef int (*eagle_cu_hp_h)(void **, void *);
typedef int (*eagle_cu_h_hp)(void *, void **);
typedef int (*eagle_cu_err_str)(int, const char **);
typedef int (*eagle_cu_dev_get)(int *, int);
typedef int (*eagle_cu_ctx_retain)(void **, int);
typedef int (*eagle_cu_dev_name)(char *, int, int);
typedef int (*eagle_cu_wait_event)(void *, void *, unsigned int);
typedef int (*eagle_cu_begin_capture)(void *, int);
typedef int (*eagle_cu_end_capture)(void *, void **);
typedef int (*eagle_cu_is_capturing)(void *, int *);
typedef int (*eagle_cu_capture_info_v2)(void *, int *, unsigned long long *, void **,
                                        const void *const **, size_t *);
typedef int (*eagle_cu_capture_info_v3)(void *, int *, unsigned long long *, void **,
                                        const void *const **, const eagle_CUgraphEdgeData **,
                                        size_t *);
typedef int (*eagle_cu_capture_to_graph)(void *, void *, const void *const *,
                                         const eagle_CUgraphEdgeData *, size_t, int);
typedef int (*eagle_cu_update_deps_v1)(void *, void **, size_t, unsigned int);
typedef int (*eagle_cu_update_deps_v2)(void *, void **, const eagle_CUgraphEdgeData *, size_t,
                                       unsigned int);
typedef int (*eagle_cu_graph_get_nodes)(void *, void **, size_t *);
typedef int (*eagle_cu_add_child)(void **, void *, const void *const *, size_t, void *);
typedef int (*eagle_cu_add_deps_v1)(void *, const void *const *, const void *const *, size_t);
typedef int (*eagle_cu_add_deps_v2)(void *, const void *const *, const void *const *,
                                    const eagle_CUgraphEdgeData *, size_t);
typedef int (*eagle_cu_add_kernel)(void **, void *, const void *const *, size_t,
                                   const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *);
typedef int (*eagle_cu_add_node_v2)(void **, void *, const void *const *,
                                    const eagle_CUgraphEdgeData *, size_t,
                                    eagle_CUgraphNodeParams *);
typedef int (*eagle_cu_cond_create)(unsigned long long *, void *, void *, unsigned int,
                                    unsigned int);
typedef int (*eagle_cu_instantiate)(void **, void *, eagle_CUDA_GRAPH_INSTANTIATE_PARAMS *);
typedef int (*eagle_cu_exec_update)(void *, void *, eagle_CUgraphExecUpdateResultInfo *);
typedef int (*eagle_cu_exec_child_set)(void *, void *, void *);
typedef int (*eagle_cu_launch_kernel)(void *, unsigned int, unsigned int, unsigned int,
                                      unsigned int, unsigned int, unsigned int, unsigned int,
                                      void *, void **, void **);
typedef int (*eagle_cu_kn_get)(void *, eagle_CUDA_KERNEL_NODE_PARAMS_v2 *);
typedef int (*eagle_cu_kn_set)(void *, const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *);
typedef int (*eagle_cu_exec_kn_set)(void *, void *, const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *);
typedef int (*eagle_cu_param_info)(void *, size_t, size_t *, size_t *);
typedef int (*eagle_cu_get_name)(const char **, void *);
typedef int (*eagle_cu_mem_alloc)(eagle_CUdeviceptr *, size_t);
typedef int (*eagle_cu_mem_free)(eagle_CUdeviceptr);
typedef int (*eagle_cu_memcpy_async)(eagle_CUdeviceptr, eagle_CUdeviceptr, size_t, void *);
typedef int (*eagle_cu_host_alloc)(void **, size_t, unsigned int);
typedef int (*eagle_cu_host_dptr)(eagle_CUdeviceptr *, void *, unsigned int);

typedef struct eagle_cuda_table {
    int loaded;
    int driver_version; /* cuDriverGetVersion */
    int api;            /* the CUDA version entry points were resolved for */
    char library[512];
    void *dl;
    int device;         /* the device whose primary context threads get */
    eagle_cu_err_str GetErrorName, GetErrorString;
    eagle_cu_int_p DeviceGetCount;
    eagle_cu_dev_get DeviceGet;
    eagle_cu_dev_name DeviceGetName;
    eagle_cu_ctx_retain DevicePrimaryCtxRetain;
    eagle_cu_hp CtxGetCurrent;
    eagle_cu_h CtxSetCurrent;
    eagle_cu_int_p CtxGetDevice;
    eagle_cu_void CtxSynchronize;
    eagle_cu_hp_flags StreamCreate, EventCreate, GraphCreate;
    eagle_cu_h StreamDestroy, StreamSynchronize, EventDestroy, EventSynchronize;
    eagle_cu_h GraphDestroy, GraphExecDestroy;
    eagle_cu_hh EventRecord, GraphUpload, GraphLaunch;
    eagle_cu_wait_event StreamWaitEvent;
    eagle_cu_begin_capture StreamBeginCapture;
    eagle_cu_end_capture StreamEndCapture;
    eagle_cu_is_capturing StreamIsCapturing;
    eagle_cu_int_p ThreadExchangeStreamCaptureMode;
    eagle_cu_capture_info_v2 CaptureInfoV2; /* api < 12.3                   */
    eagle_cu_capture_info_v3 CaptureInfoV3; /* api >= 12.3 (and 13.x)      */
    eagle_cu_capture_to_graph BeginCaptureToGraph; /* 12.3+, optional      */
    eagle_cu_update_deps_v1 UpdateDepsV1;          /* 11.3-12.2 form       */
    eagle_cu_update_deps_v2 UpdateDepsV2;          /* 12.3+ form           */
    eagle_cu_graph_get_nodes GraphGetNodes;
    eagle_cu_add_child GraphAddChildGraphNode;
    eagle_cu_h_hp GraphChildGraphNodeGetGraph;
    eagle_cu_add_deps_v1 AddDepsV1;
    eagle_cu_add_deps_v2 AddDepsV2;
    eagle_cu_add_kernel GraphAddKernelNode;
    eagle_cu_add_node_v2 GraphAddNode;             /* 12.3+, optional      */
    eagle_cu_cond_create ConditionalHandleCreate;  /* 12.3+, optional      */
    eagle_cu_instantiate GraphInstantiateWithParams;
    eagle_cu_exec_update GraphExecUpdate;
    eagle_cu_exec_child_set GraphExecChildGraphNodeSetParams;
    eagle_cu_launch_kernel LaunchKernel;
    eagle_cu_kn_get GraphKernelNodeGetParams;
    eagle_cu_kn_set GraphKernelNodeSetParams;
    eagle_cu_exec_kn_set GraphExecKernelNodeSetParams;
    eagle_cu_param_info FuncGetParamInfo;          /* 12.4+, optional      */
    eagle_cu_get_name FuncGetName, KernelGetName;  /* 12.3+, optional      */
    eagle_cu_hp_h KernelGetFunction;               /* CUkernel -> CUfunction */
    eagle_cu_mem_alloc MemAlloc;
    eagle_cu_mem_free MemFree;
    eagle_cu_memcpy_async MemcpyAsync;
    eagle_cu_h StreamQuery, EventQuery;            /* the polling wait            */
    eagle_cu_host_alloc MemHostAlloc;              /* host-mapped pinned memory   */
    eagle_cu_h MemFreeHost;
    eagle_cu_host_dptr MemHostGetDevicePointer;
} eagle_cuda_table;

static eagle_cuda_table eagle_cuda_T;

/* Publication of the table: eagle_cuda_bind fills every field with `loaded`
 * still 0 and then stores loaded = 1 with release order; every reader's first
 * look at `loaded` is an acquire load, so a thread that sees 1 also sees the
 * whole table (the fast path of the first calls runs without the lock, from
 * any thread). `device` may change after loading (eagle_cuda_set_device) while
 * other threads read it: relaxed accesses (each value whole, no order needed). */
#if defined(__GNUC__) || defined(__clang__)
static inline int eagle_cuda_loaded(void) {
    return __atomic_load_n(&eagle_cuda_T.loaded, __ATOMIC_ACQUIRE);
}
static inline void eagle_cuda_publish(void) {
    __atomic_store_n(&eagle_cuda_T.loaded, 1, __ATOMIC_RELEASE);
}
static inline int eagle_cuda_device_load(void) {
    return __atomic_load_n(&eagle_cuda_T.device, __ATOMIC_RELAXED);
}
static inline void eagle_cuda_device_store(int d) {
    __atomic_store_n(&eagle_cuda_T.device, d, __ATOMIC_RELAXED);
}
#else
#error "eagle's CUDA shim needs GCC/Clang atomic builtins (__atomic_load_n)"
#endif
/* the error names of a driver found but not usable (kept open for them) */
static eagle_cu_err_str eagle_cuda_found_err_name, eagle_cuda_found_err_str;
static pthread_mutex_t eagle_cuda_lock = PTHREAD_MUTEX_INITIALIZER;
#if defined(__cplusplus)
static thread_local int eagle_cuda_ctx_ok;
#else
static _Thread_local int eagle_cuda_ctx_ok;
#endif

/* One entry point: the name cuGetProcAddress takes; the driver versions for
 * which eagle uses this form (lo..hi, 0: no bound; a symbol with two forms
 * has two entries); `abi`, the CUDA version whose ABI the table's type
 * encodes (the <version> of cudaTypedefs.h's PFN_<name>_v<version>), which
 * is the version eagle asks cuGetProcAddress for; and whether eagle cannot
 * work without it. Asking at the driver's own version instead would hand
 * out the newest form: at 13.0 cuCtxSynchronize and cuCtxGetDevice are
 * their _v2 forms taking a context (tests/cuda/test_shim_standin.py checks
 * every entry's arity against cudaTypedefs.h for 12.0-13.0). */
typedef struct eagle_cuda_entry {
    const char *name;
    int min_api, max_api;
    int abi;
    int required;
    size_t offset;
} eagle_cuda_entry;

#define EAGLE_E(field, name, lo, hi, abi, req)                                 \
    {name, lo, hi, abi, req, offsetof(eagle_cuda_table, field)}
static const eagle_cuda_entry eagle_cuda_entries[] = {
    EAGLE_E(GetErrorName, "cuGetErrorName", 0, 0, 6000, 1),
    EAGLE_E(GetErrorString, "cuGetErrorString", 0, 0, 6000, 1),
    EAGLE_E(DeviceGetCount, "cuDeviceGetCount", 0, 0, 2000, 1),
    EAGLE_E(DeviceGet, "cuDeviceGet", 0, 0, 2000, 1),
    EAGLE_E(DeviceGetName, "cuDeviceGetName", 0, 0, 2000, 0),
    EAGLE_E(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0, 0, 7000, 1),
    EAGLE_E(CtxGetCurrent, "cuCtxGetCurrent", 0, 0, 4000, 1),
    EAGLE_E(CtxSetCurrent, "cuCtxSetCurrent", 0, 0, 4000, 1),
    EAGLE_E(CtxGetDevice, "cuCtxGetDevice", 0, 0, 2000, 1),
    EAGLE_E(CtxSynchronize, "cuCtxSynchronize", 0, 0, 2000, 1),
    EAGLE_E(StreamCreate, "cuStreamCreate", 0, 0, 2000, 1),
    EAGLE_E(StreamDestroy, "cuStreamDestroy", 0, 0, 4000, 1),
    EAGLE_E(StreamSynchronize, "cuStreamSynchronize", 0, 0, 2000, 1),
    EAGLE_E(StreamWaitEvent, "cuStreamWaitEvent", 0, 0, 3020, 1),
    EAGLE_E(EventCreate, "cuEventCreate", 0, 0, 2000, 1),
    EAGLE_E(EventDestroy, "cuEventDestroy", 0, 0, 4000, 1),
    EAGLE_E(EventRecord, "cuEventRecord", 0, 0, 2000, 1),
    EAGLE_E(EventSynchronize, "cuEventSynchronize", 0, 0, 2000, 1),
    EAGLE_E(StreamBeginCapture, "cuStreamBeginCapture", 0, 0, 10010, 1),
    EAGLE_E(StreamEndCapture, "cuStreamEndCapture", 0, 0, 10000, 1),
    EAGLE_E(StreamIsCapturing, "cuStreamIsCapturing", 0, 0, 10000, 1),
    EAGLE_E(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 0, 0, 10010, 1),
    EAGLE_E(CaptureInfoV2, "cuStreamGetCaptureInfo", 0, 12029, 11030, 0),
    EAGLE_E(CaptureInfoV3, "cuStreamGetCaptureInfo", 12030, 0, 12030, 0),
    EAGLE_E(BeginCaptureToGraph, "cuStreamBeginCaptureToGraph", 12030, 0, 12030, 0),
    EAGLE_E(UpdateDepsV1, "cuStreamUpdateCaptureDependencies", 0, 12029, 11030, 0),
    EAGLE_E(UpdateDepsV2, "cuStreamUpdateCaptureDependencies", 12030, 0, 12030, 0),
    EAGLE_E(GraphCreate, "cuGraphCreate", 0, 0, 10000, 1),
    EAGLE_E(GraphDestroy, "cuGraphDestroy", 0, 0, 10000, 1),
    EAGLE_E(GraphGetNodes, "cuGraphGetNodes", 0, 0, 10000, 1),
    EAGLE_E(GraphAddChildGraphNode, "cuGraphAddChildGraphNode", 0, 0, 10000, 1),
    EAGLE_E(GraphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph", 0, 0, 10000, 1),
    EAGLE_E(AddDepsV1, "cuGraphAddDependencies", 0, 12029, 10000, 0),
    EAGLE_E(AddDepsV2, "cuGraphAddDependencies", 12030, 0, 12030, 0),
    EAGLE_E(GraphAddKernelNode, "cuGraphAddKernelNode", 12000, 0, 12000, 1),
    EAGLE_E(GraphAddNode, "cuGraphAddNode", 12030, 0, 12030, 0),
    EAGLE_E(ConditionalHandleCreate, "cuGraphConditionalHandleCreate", 12040, 0, 12030, 0),
    EAGLE_E(GraphInstantiateWithParams, "cuGraphInstantiateWithParams", 12000, 0, 12000, 1),
    EAGLE_E(GraphExecDestroy, "cuGraphExecDestroy", 0, 0, 10000, 1),
    EAGLE_E(GraphUpload, "cuGraphUpload", 0, 0, 11010, 1),
    EAGLE_E(GraphLaunch, "cuGraphLaunch", 0, 0, 10000, 1),
    EAGLE_E(GraphExecUpdate, "cuGraphExecUpdate", 12000, 0, 12000, 1),
    EAGLE_E(GraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams", 0, 0, 11010, 1),
    EAGLE_E(LaunchKernel, "cuLaunchKernel", 0, 0, 4000, 1),
    EAGLE_E(GraphKernelNodeGetParams, "cuGraphKernelNodeGetParams", 12000, 0, 12000, 1),
    EAGLE_E(GraphKernelNodeSetParams, "cuGraphKernelNodeSetParams", 12000, 0, 12000, 1),
    EAGLE_E(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams", 12000, 0, 12000, 1),
    EAGLE_E(FuncGetParamInfo, "cuFuncGetParamInfo", 12040, 0, 12040, 0),
    EAGLE_E(FuncGetName, "cuFuncGetName", 12030, 0, 12030, 0),
    EAGLE_E(KernelGetName, "cuKernelGetName", 12030, 0, 12030, 0),
    EAGLE_E(KernelGetFunction, "cuKernelGetFunction", 12000, 0, 12000, 0),
    EAGLE_E(MemAlloc, "cuMemAlloc", 0, 0, 3020, 1),
    EAGLE_E(MemFree, "cuMemFree", 0, 0, 3020, 1),
    EAGLE_E(MemcpyAsync, "cuMemcpyAsync", 0, 0, 4000, 1),
    EAGLE_E(StreamQuery, "cuStreamQuery", 0, 0, 2000, 1),
    EAGLE_E(EventQuery, "cuEventQuery", 0, 0, 2000, 1),
    EAGLE_E(MemHostAlloc, "cuMemHostAlloc", 0, 0, 2020, 1),
    EAGLE_E(MemFreeHost, "cuMemFreeHost", 0, 0, 2000, 1),
    EAGLE_E(MemHostGetDevicePointer, "cuMemHostGetDevicePointer", 0, 0, 3020, 1),
};
#undef EAGLE_E

/* the highest CUDA version whose entry-point ABI this shim is written for */
#define EAGLE_CUDA_MAX_API 13000

static void eagle_cuda_version_text(int v, char *buf, size_t n) {
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* Resolve everything into a fresh table; commit it only on success.
 * Called with eagle_cuda_lock held. */
static int eagle_cuda_bind(void *dl, const char *path, char *errbuf, size_t errn) {
    eagle_cuda_table t;
    memset(&t, 0, sizeof t);
    t.dl = dl;
    snprintf(t.library, sizeof t.library, "%s", path);
    eagle_cu_getproc_v2 getproc = NULL;
    eagle_cu_uint init = NULL;
    eagle_cu_int_p getver = NULL;
    void *p;
    p = dlsym(dl, "cuGetProcAddress_v2");
    memcpy(&getproc, &p, sizeof p);
    p = dlsym(dl, "cuInit");
    memcpy(&init, &p, sizeof p);
    p = dlsym(dl, "cuDriverGetVersion");
    memcpy(&getver, &p, sizeof p);
    if (!init || !getver) {
        if (errbuf) snprintf(errbuf, errn, "%s is not a CUDA driver (it lacks cuInit)", path);
        return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
    }
    if (getver(&t.driver_version) != 0) t.driver_version = 0;
    char vtext[32];
    eagle_cuda_version_text(t.driver_version, vtext, sizeof vtext);
    if (t.driver_version < 12000 || !getproc) {
        if (errbuf)
            snprintf(errbuf, errn,
                     "CUDA driver %s speaks CUDA %s; eagle needs a CUDA 12.0 or newer driver "
                     "(cuGetProcAddress_v2)", path, vtext);
        return EAGLE_CUDA_ERROR_TOO_OLD;
    }
    t.api = t.driver_version < EAGLE_CUDA_MAX_API ? t.driver_version : EAGLE_CUDA_MAX_API;
    for (size_t i = 0; i < sizeof eagle_cuda_entries / sizeof eagle_cuda_entries[0]; ++i) {
        const eagle_cuda_entry *e = &eagle_cuda_entries[i];
        void *fn = NULL;
        int status = 0;
        int in_range = t.api >= e->min_api && (e->max_api == 0 || t.api <= e->max_api) &&
                       t.api >= e->abi;
        if (in_range) {
            int st = getproc(e->name, &fn, e->abi, 0 /* CU_GET_PROC_ADDRESS_DEFAULT */, &status);
            if (st != 0 || status != 0 /* CU_GET_PROC_ADDRESS_SUCCESS */) fn = NULL;
        }
        if (!fn && e->required) {
            if (errbuf)
                snprintf(errbuf, errn, "CUDA driver %s (CUDA %s) lacks %s", path, vtext, e->name);
            return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
        }
        memcpy((char *)&t + e->offset, &fn, sizeof fn);
    }
    if (!t.CaptureInfoV2 && !t.CaptureInfoV3) {
        if (errbuf)
            snprintf(errbuf, errn, "CUDA driver %s (CUDA %s) lacks cuStreamGetCaptureInfo", path,
                     vtext);
        return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
    }
    if (!t.AddDepsV1 && !t.AddDepsV2) {
        if (errbuf)
            snprintf(errbuf, errn, "CUDA driver %s (CUDA %s) lacks cuGraphAddDependencies", path,
                     vtext);
        return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
    }
    int st = init(0);
    if (st == 0) {
        int count = 0;
        st = t.DeviceGetCount(&count);
        if (st == 0 && count == 0) st = EAGLE_CUDA_ERR_NO_DEVICE;
    }
    if (st != 0) {
        const char *n = NULL, *x = NULL;
        eagle_cuda_found_err_name = t.GetErrorName; /* the library stays open for them */
        eagle_cuda_found_err_str = t.GetErrorString;
        t.GetErrorName(st, &n);
        t.GetErrorString(st, &x);
        if (errbuf)
            snprintf(errbuf, errn, "CUDA driver %s (CUDA %s) found but no GPU is usable (%s: %s)",
                     path, vtext, n ? n : "?", x ? x : "?");
        return st;
    }
    /* every field but `loaded` (which other threads read meanwhile, atomically),
     * then `loaded`, published */
    memcpy((char *)&eagle_cuda_T + offsetof(eagle_cuda_table, driver_version),
           (const char *)&t + offsetof(eagle_cuda_table, driver_version),
           sizeof t - offsetof(eagle_cuda_table, driver_version));
    eagle_cuda_publish();
    return 0;
}

/* the driver found but not usable: its version, for messages */
static int eagle_cuda_found_version;

int eagle_cuda_load(char *errbuf, size_t errbuf_size) {
    if (eagle_cuda_loaded()) return 0;
    pthread_mutex_lock(&eagle_cuda_lock);
    int st = 0;
    if (!eagle_cuda_loaded()) {
        const char *env = getenv("EAGLE_LIBCUDA");
        const char *path = env && *env ? env : "libcuda.so.1";
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            if (errbuf && errbuf_size)
                snprintf(errbuf, errbuf_size, "no CUDA driver found (tried %s%s: %s)",
                         env && *env ? "EAGLE_LIBCUDA=" : "", path, dlerror());
            st = EAGLE_CUDA_ERROR_NOT_LOADED;
        } else {
            char real[512];
            snprintf(real, sizeof real, "%s", path);
#if defined(_GNU_SOURCE) || defined(__cplusplus)
            {
                Dl_info info;
                void *sym = dlsym(dl, "cuInit");
                if (sym && dladdr(sym, &info) && info.dli_fname)
                    snprintf(real, sizeof real, "%s", info.dli_fname);
            }
#endif
            st = eagle_cuda_bind(dl, real, errbuf, errbuf_size);
            if (st != 0) {
                eagle_cu_int_p getver = NULL;
                void *p = dlsym(dl, "cuDriverGetVersion");
                memcpy(&getver, &p, sizeof p);
                if (getver) getver(&eagle_cuda_found_version);
                if (!eagle_cuda_found_err_name) dlclose(dl);
            }
        }
    }
    pthread_mutex_unlock(&eagle_cuda_lock);
    return st;
}

int eagle_cuda_is_loaded(void) { return eagle_cuda_loaded(); }
const char *eagle_cuda_library(void) { return eagle_cuda_loaded() ? eagle_cuda_T.library : ""; }

/* Make sure this thread has a current context (the chosen device's primary
 * one when it has none). */
static int eagle_cuda_context(void) {
    if (eagle_cuda_ctx_ok) return 0;
    void *ctx = NULL;
    int st = eagle_cuda_T.CtxGetCurrent(&ctx);
    if (st) return st;
    if (!ctx) {
        int dev = 0;
        st = eagle_cuda_T.DeviceGet(&dev, eagle_cuda_device_load());
        if (!st) st = eagle_cuda_T.DevicePrimaryCtxRetain(&ctx, dev);
        if (!st) st = eagle_cuda_T.CtxSetCurrent(ctx);
        if (st) return st;
    }
    eagle_cuda_ctx_ok = 1;
    return 0;
}

#define EAGLE_CUDA_ENSURE()                                                    \
    do {                                                                       \
        if (!eagle_cuda_loaded()) {                                            \
            int eagle_st_ = eagle_cuda_load(NULL, 0);                          \
            if (eagle_st_) return eagle_st_;                                   \
        }                                                                      \
        {                                                                      \
            int eagle_st_ = eagle_cuda_context();                              \
            if (eagle_st_) return eagle_st_;                                   \
        }                                                                      \
    } while (0)

#define EAGLE_CUDA_CALL(field, ...)                                            \
    do {                                                                       \
        EAGLE_CUDA_ENSURE();                                                   \
        if (!eagle_cuda_T.field) return EAGLE_CUDA_ERROR_MISSING_SYMBOL;       \
        return eagle_cuda_T.field(__VA_ARGS__);                                \
    } while (0)

int eagle_cuda_driver_version(int *version) {
    if (!version) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    if (!eagle_cuda_loaded()) {
        int st = eagle_cuda_load(NULL, 0);
        *version = eagle_cuda_found_version;
        return eagle_cuda_found_version ? 0 : st;
    }
    *version = eagle_cuda_T.driver_version;
    return 0;
}
int eagle_cuda_api_version(int *version) {
    if (!version) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    if (!eagle_cuda_loaded()) {
        int st = eagle_cuda_load(NULL, 0);
        if (st) return st;
    }
    *version = eagle_cuda_T.api;
    return 0;
}
int eagle_cuda_has(const char *feature) {
    if (!eagle_cuda_loaded() && eagle_cuda_load(NULL, 0) != 0) return 0;
    if (!feature) return 0;
    if (!strcmp(feature, "conditional"))
        return eagle_cuda_T.ConditionalHandleCreate && eagle_cuda_T.GraphAddNode &&
               eagle_cuda_T.api >= 12040;
    if (!strcmp(feature, "param_info")) return eagle_cuda_T.FuncGetParamInfo != NULL;
    if (!strcmp(feature, "capture_to_graph")) return eagle_cuda_T.BeginCaptureToGraph != NULL;
    return 0;
}

void eagle_cuda_status_text(int status, const char **name, const char **text) {
    const char *n = NULL, *x = NULL;
    switch (status) {
    case 0: n = "CUDA_SUCCESS"; x = "no error"; break;
    case EAGLE_CUDA_ERROR_NOT_LOADED:
        n = "eagleCudaErrorNotLoaded";
        x = "no usable CUDA driver (eagle_cuda_load() says why)";
        break;
    case EAGLE_CUDA_ERROR_MISSING_SYMBOL:
        n = "eagleCudaErrorMissingSymbol";
        x = "the CUDA driver lacks a function eagle needs";
        break;
    case EAGLE_CUDA_ERROR_BAD_ARGUMENT:
        n = "eagleCudaErrorBadArgument";
        x = "invalid argument to an eagle CUDA shim function";
        break;
    case EAGLE_CUDA_ERROR_UNSUPPORTED_NODE:
        n = "eagleCudaErrorUnsupportedNode";
        x = "the kernel node passes its arguments through `extra`; eagle can only retune "
            "kernels launched with an argument array";
        break;
    case EAGLE_CUDA_ERROR_TOO_OLD:
        n = "eagleCudaErrorDriverTooOld";
        x = "the CUDA driver is too old for this (eagle needs 12.0; conditional nodes and "
            "cuFuncGetParamInfo need 12.4)";
        break;
    default:
        if (status > 0 && eagle_cuda_loaded()) {
            if (eagle_cuda_T.GetErrorName(status, &n) != 0) n = NULL;
            if (eagle_cuda_T.GetErrorString(status, &x) != 0) x = NULL;
        } else if (status > 0 && eagle_cuda_found_err_name) {
            if (eagle_cuda_found_err_name(status, &n) != 0) n = NULL;
            if (eagle_cuda_found_err_str(status, &x) != 0) x = NULL;
        }
        if (!n) n = "CUDA_ERROR_UNRECOGNIZED";
        if (!x) x = "unrecognized error code";
    }
    if (name) *name = n;
    if (text) *text = x;
}

/* ---- devices, streams, events ------------------------------------------- */

int eagle_cuda_get_device_count(int *count) {
    if (!eagle_cuda_loaded()) {
        int st = eagle_cuda_load(NULL, 0);
        if (st) return st;
    }
    return eagle_cuda_T.DeviceGetCount(count);
}
int eagle_cuda_get_device(int *device) { EAGLE_CUDA_CALL(CtxGetDevice, device); }
int eagle_cuda_set_device(int device) {
    void *ctx = NULL;
    int dev = 0, st;
    if (!eagle_cuda_loaded() && (st = eagle_cuda_load(NULL, 0)) != 0) return st;
    st = eagle_cuda_T.DeviceGet(&dev, device);
    if (!st) st = eagle_cuda_T.DevicePrimaryCtxRetain(&ctx, dev);
    if (!st) st = eagle_cuda_T.CtxSetCurrent(ctx);
    if (!st) {
        eagle_cuda_device_store(device);
        eagle_cuda_ctx_ok = 1;
    }
    return st;
}
/* the cuda backend's save / restore of the current context (not the default device) */
int eagle_cuda_ctx_get_current(void **ctx) {
    int st;
    if (!ctx) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    if (!eagle_cuda_T.loaded && (st = eagle_cuda_load(NULL, 0)) != 0) return st;
    return eagle_cuda_T.CtxGetCurrent(ctx);
}
int eagle_cuda_ctx_set_current(void *ctx) {
    int st;
    if (!eagle_cuda_T.loaded && (st = eagle_cuda_load(NULL, 0)) != 0) return st;
    st = eagle_cuda_T.CtxSetCurrent(ctx);
    if (!st) eagle_cuda_ctx_ok = ctx != NULL;   /* none current: the next call makes one again */
    return st;
}
int eagle_cuda_device_synchronize(void) { EAGLE_CUDA_CALL(CtxSynchronize); }
int eagle_cuda_device_name(int device, char *buf, int n) {
    int dev = 0, st;
    if (!buf || n <= 0) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    buf[0] = 0;
    EAGLE_CUDA_ENSURE();
    if (!eagle_cuda_T.DeviceGetName) return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
    st = eagle_cuda_T.DeviceGet(&dev, device);
    if (st) return st;
    return eagle_cuda_T.DeviceGetName(buf, n, dev);
}

int eagle_cuda_stream_create(eagle_cudaStream_t *stream, unsigned int flags) {
    if (!stream) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(StreamCreate, stream, flags);
}
int eagle_cuda_stream_destroy(eagle_cudaStream_t s) { EAGLE_CUDA_CALL(StreamDestroy, s); }
int eagle_cuda_stream_synchronize(eagle_cudaStream_t s) { EAGLE_CUDA_CALL(StreamSynchronize, s); }
int eagle_cuda_stream_query(eagle_cudaStream_t s) { EAGLE_CUDA_CALL(StreamQuery, s); }
int eagle_cuda_event_query(eagle_cudaEvent_t e) { EAGLE_CUDA_CALL(EventQuery, e); }

/* The polling wait: query until ready or `budget_ns` passed. The first ~100 us spin
 * (sched_yield between queries: a short replay is seen at once, as cuStreamSynchronize's
 * default spin would), then sleeps of an eighth of the time waited so far, from 20 us to
 * 1 ms, so the wait overshoots the work by at most ~1/8 (sleeps doubling from 20 us
 * overshot a 250 us replay by 60%); *backoff_ns carries the sleep across calls (0: start
 * over). A signal interrupts the sleep (EINTR), so the caller's signal check comes
 * without delay. */
static long long eagle_cuda_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}
static int eagle_cuda_poll(int (*query)(void *), void *h, long long budget_ns,
                           long long *backoff_ns, int *ready) {
    long long start = eagle_cuda_now_ns(), now = start;
    long long sleep_ns = backoff_ns ? *backoff_ns : 0;
    /* the time waited before this call: the sleeps so far add up to about 8 times the last */
    long long before = 8 * sleep_ns;
    *ready = 0;
    for (;;) {
        int st = query(h);
        if (st == 0) {
            *ready = 1;
            if (backoff_ns) *backoff_ns = 0;
            return 0;
        }
        if (st != EAGLE_CUDA_ERR_NOT_READY) return st;
        now = eagle_cuda_now_ns();
        if (now - start >= budget_ns) break;
        if (sleep_ns == 0 && now - start < 100000) {
            sched_yield();
            continue;
        }
        sleep_ns = (before + now - start) / 8;
        sleep_ns = sleep_ns < 20000 ? 20000 : (sleep_ns > 1000000 ? 1000000 : sleep_ns);
        if (sleep_ns > budget_ns - (now - start)) sleep_ns = budget_ns - (now - start);
        struct timespec ts = {0, (long)sleep_ns};
        nanosleep(&ts, NULL);
    }
    if (backoff_ns) *backoff_ns = sleep_ns;
    return 0;
}
static int eagle_cuda_stream_query_v(void *h) { return eagle_cuda_stream_query(h); }
static int eagle_cuda_event_query_v(void *h) { return eagle_cuda_event_query(h); }
int eagle_cuda_stream_wait_for(eagle_cudaStream_t s, long long budget_ns, long long *backoff_ns,
                               int *ready) {
    if (!ready) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    return eagle_cuda_poll(eagle_cuda_stream_query_v, s, budget_ns, backoff_ns, ready);
}
int eagle_cuda_event_wait_for(eagle_cudaEvent_t e, long long budget_ns, long long *backoff_ns,
                              int *ready) {
    if (!ready) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    return eagle_cuda_poll(eagle_cuda_event_query_v, e, budget_ns, backoff_ns, ready);
}

int eagle_cuda_event_create(eagle_cudaEvent_t *event, unsigned int flags) {
    if (!event) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(EventCreate, event, flags);
}
int eagle_cuda_event_destroy(eagle_cudaEvent_t e) { EAGLE_CUDA_CALL(EventDestroy, e); }
int eagle_cuda_event_record(eagle_cudaEvent_t e, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(EventRecord, e, s);
}
int eagle_cuda_event_synchronize(eagle_cudaEvent_t e) { EAGLE_CUDA_CALL(EventSynchronize, e); }
int eagle_cuda_stream_wait_event(eagle_cudaStream_t s, eagle_cudaEvent_t e, unsigned int flags) {
    EAGLE_CUDA_CALL(StreamWaitEvent, s, e, flags);
}

/* ---- capture -------------------------------------------------------------- */

int eagle_cuda_stream_begin_capture(eagle_cudaStream_t s, int mode) {
    EAGLE_CUDA_CALL(StreamBeginCapture, s, mode);
}
int eagle_cuda_stream_begin_capture_to_graph(eagle_cudaStream_t s, eagle_cudaGraph_t g,
                                             int mode) {
    EAGLE_CUDA_ENSURE();
    if (!eagle_cuda_T.BeginCaptureToGraph) return EAGLE_CUDA_ERROR_TOO_OLD;
    return eagle_cuda_T.BeginCaptureToGraph(s, g, NULL, NULL, 0, mode);
}
int eagle_cuda_stream_end_capture(eagle_cudaStream_t s, eagle_cudaGraph_t *graph) {
    eagle_cudaGraph_t g = NULL;
    EAGLE_CUDA_ENSURE();
    int st = eagle_cuda_T.StreamEndCapture(s, &g);
    if (graph) *graph = g;
    return st;
}
int eagle_cuda_stream_is_capturing(eagle_cudaStream_t s, int *capture_status) {
    EAGLE_CUDA_CALL(StreamIsCapturing, s, capture_status);
}
int eagle_cuda_stream_capture_info(eagle_cudaStream_t s, int *capture_status,
                                   unsigned long long *id, eagle_cudaGraph_t *graph,
                                   const eagle_cudaGraphNode_t **deps, size_t *num_deps) {
    int status_local = 0;
    EAGLE_CUDA_ENSURE();
    int *sp = capture_status ? capture_status : &status_local;
    /* the edge data is asked for (and not used): with a NULL edgeData_out the driver refuses
     * the query (CUDA_ERROR_LOSSY_QUERY) once a dependency carries non-default edge data, as
     * a library's programmatic dependent launch leaves; eagle's edges from these nodes are
     * full dependencies, which order at least as strongly. The driver takes edgeData_out
     * only beside dependencies_out (else CUDA_ERROR_INVALID_VALUE) */
    const eagle_CUgraphEdgeData *edges = NULL;
    if (eagle_cuda_T.CaptureInfoV3)
        return eagle_cuda_T.CaptureInfoV3(s, sp, id, graph, (const void *const **)deps,
                                          deps ? &edges : NULL, num_deps);
    return eagle_cuda_T.CaptureInfoV2(s, sp, id, graph, (const void *const **)deps, num_deps);
}
int eagle_cuda_stream_last_node(eagle_cudaStream_t s, eagle_cudaGraphNode_t *node) {
    int cs = 0;
    const eagle_cudaGraphNode_t *deps = NULL;
    size_t n = 0;
    if (!node) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    *node = NULL;
    int st = eagle_cuda_stream_capture_info(s, &cs, NULL, NULL, &deps, &n);
    if (st) return st;
    if (cs != EAGLE_CUDA_CAPTURE_STATUS_ACTIVE || n != 1 || !deps)
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    *node = deps[0];
    return 0;
}
int eagle_cuda_thread_exchange_capture_mode(int *mode) {
    EAGLE_CUDA_CALL(ThreadExchangeStreamCaptureMode, mode);
}

/* ---- graphs --------------------------------------------------------------- */

int eagle_cuda_graph_create(eagle_cudaGraph_t *graph, unsigned int flags) {
    if (!graph) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphCreate, graph, flags);
}
int eagle_cuda_graph_destroy(eagle_cudaGraph_t g) { EAGLE_CUDA_CALL(GraphDestroy, g); }
int eagle_cuda_graph_get_nodes(eagle_cudaGraph_t g, eagle_cudaGraphNode_t *nodes, size_t *count) {
    if (!count) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphGetNodes, g, nodes, count);
}
int eagle_cuda_graph_add_child_graph_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t g,
                                          const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                          eagle_cudaGraph_t child) {
    EAGLE_CUDA_CALL(GraphAddChildGraphNode, node, g, (const void *const *)deps, num_deps, child);
}
int eagle_cuda_child_graph_node_get_graph(eagle_cudaGraphNode_t node, eagle_cudaGraph_t *child) {
    EAGLE_CUDA_CALL(GraphChildGraphNodeGetGraph, node, child);
}
int eagle_cuda_graph_add_dependencies(eagle_cudaGraph_t g, const eagle_cudaGraphNode_t *from,
                                      const eagle_cudaGraphNode_t *to, size_t n) {
    EAGLE_CUDA_ENSURE();
    if (eagle_cuda_T.AddDepsV2)
        return eagle_cuda_T.AddDepsV2(g, (const void *const *)from, (const void *const *)to,
                                      NULL, n);
    return eagle_cuda_T.AddDepsV1(g, (const void *const *)from, (const void *const *)to, n);
}
int eagle_cuda_graph_add_kernel_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t g,
                                     const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                     eagle_CUfunction func, eagle_dim3 grid, eagle_dim3 block,
                                     unsigned int shared_mem, void **args) {
    eagle_CUDA_KERNEL_NODE_PARAMS_v2 p;
    memset(&p, 0, sizeof p);
    p.func = func;
    p.gridDimX = grid.x, p.gridDimY = grid.y, p.gridDimZ = grid.z;
    p.blockDimX = block.x, p.blockDimY = block.y, p.blockDimZ = block.z;
    p.sharedMemBytes = shared_mem;
    p.kernelParams = args;
    EAGLE_CUDA_CALL(GraphAddKernelNode, node, g, (const void *const *)deps, num_deps, &p);
}
int eagle_cuda_graph_add_conditional_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t g,
                                          const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                          int type, unsigned int initial,
                                          unsigned long long *handle, eagle_cudaGraph_t *body) {
    void *ctx = NULL;
    int st;
    if (!node || !handle || !body) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    if (type != EAGLE_CUDA_GRAPH_COND_TYPE_IF && type != EAGLE_CUDA_GRAPH_COND_TYPE_WHILE)
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    if (!eagle_cuda_has("conditional")) return EAGLE_CUDA_ERROR_TOO_OLD;
    st = eagle_cuda_T.CtxGetCurrent(&ctx);
    if (st) return st;
    /* the handle belongs to the graph that holds the node (a body graph when nested) */
    st = eagle_cuda_T.ConditionalHandleCreate(handle, g, ctx, initial,
                                              EAGLE_CUDA_GRAPH_COND_ASSIGN_DEFAULT);
    if (st) return st;
    eagle_CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = EAGLE_CUDA_GRAPH_NODE_TYPE_CONDITIONAL;
    p.u.conditional.handle = *handle;
    p.u.conditional.type = type;
    p.u.conditional.size = 1;
    p.u.conditional.ctx = ctx;
    st = eagle_cuda_T.GraphAddNode(node, g, (const void *const *)deps, NULL, num_deps, &p);
    if (st) return st;
    *body = p.u.conditional.phGraph_out ? p.u.conditional.phGraph_out[0] : NULL;
    return *body ? 0 : EAGLE_CUDA_ERROR_BAD_ARGUMENT;
}
int eagle_cuda_graph_add_while_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t g,
                                    const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                    unsigned int initial, unsigned long long *handle,
                                    eagle_cudaGraph_t *body) {
    return eagle_cuda_graph_add_conditional_node(node, g, deps, num_deps,
                                                 EAGLE_CUDA_GRAPH_COND_TYPE_WHILE, initial, handle,
                                                 body);
}
int eagle_cuda_stream_set_capture_deps(eagle_cudaStream_t s, const eagle_cudaGraphNode_t *nodes,
                                       size_t n) {
    EAGLE_CUDA_ENSURE();
    if (eagle_cuda_T.UpdateDepsV2)
        return eagle_cuda_T.UpdateDepsV2(s, (void **)nodes, NULL, n,
                                         EAGLE_CUDA_STREAM_SET_CAPTURE_DEPENDENCIES);
    if (eagle_cuda_T.UpdateDepsV1)
        return eagle_cuda_T.UpdateDepsV1(s, (void **)nodes, n,
                                         EAGLE_CUDA_STREAM_SET_CAPTURE_DEPENDENCIES);
    return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
}

int eagle_cuda_graph_instantiate(eagle_cudaGraphExec_t *exec, eagle_cudaGraph_t graph,
                                 unsigned long long flags, eagle_cudaStream_t upload_stream,
                                 eagle_cudaGraphNode_t *err_node, int *result) {
    eagle_CUDA_GRAPH_INSTANTIATE_PARAMS p;
    if (!exec) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    memset(&p, 0, sizeof p);
    p.flags = flags;
    p.hUploadStream = upload_stream;
    *exec = NULL;
    int st = eagle_cuda_T.GraphInstantiateWithParams(exec, graph, &p);
    if (err_node) *err_node = st ? p.hErrNode_out : NULL;
    if (result) *result = p.result_out;
    if (st) *exec = NULL;
    return st;
}
int eagle_cuda_graph_exec_destroy(eagle_cudaGraphExec_t e) { EAGLE_CUDA_CALL(GraphExecDestroy, e); }
int eagle_cuda_graph_upload(eagle_cudaGraphExec_t e, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(GraphUpload, e, s);
}
int eagle_cuda_graph_launch(eagle_cudaGraphExec_t e, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(GraphLaunch, e, s);
}
int eagle_cuda_graph_launch_n(eagle_cudaGraphExec_t e, eagle_cudaStream_t s, long long n,
                              long long *done) {
    long long i = 0;
    int st = 0;
    if (done) *done = 0;
    if (n < 0) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    eagle_cu_hh launch = eagle_cuda_T.GraphLaunch;
    for (; i < n; ++i) {
        st = launch(e, s);
        if (st) break;
    }
    if (done) *done = i;
    return st;
}
int eagle_cuda_graph_exec_update(eagle_cudaGraphExec_t e, eagle_cudaGraph_t g,
                                 eagle_CUgraphExecUpdateResultInfo *info) {
    eagle_CUgraphExecUpdateResultInfo local;
    memset(&local, 0, sizeof local);
    EAGLE_CUDA_CALL(GraphExecUpdate, e, g, info ? info : &local);
}
int eagle_cuda_graph_exec_child_graph_node_set_params(eagle_cudaGraphExec_t e,
                                                      eagle_cudaGraphNode_t node,
                                                      eagle_cudaGraph_t child) {
    EAGLE_CUDA_CALL(GraphExecChildGraphNodeSetParams, e, node, child);
}

/* ---- kernels -------------------------------------------------------------- */

int eagle_cuda_launch_kernel(eagle_CUfunction func, eagle_dim3 grid, eagle_dim3 block,
                             void **args, size_t shared_mem, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(LaunchKernel, func, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                    (unsigned int)shared_mem, s, args, NULL);
}
int eagle_cuda_kernel_node_get_params(eagle_cudaGraphNode_t node,
                                      eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    if (!p) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphKernelNodeGetParams, node, p);
}
int eagle_cuda_kernel_node_set_params(eagle_cudaGraphNode_t node,
                                      const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    if (!p) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphKernelNodeSetParams, node, p);
}
int eagle_cuda_graph_exec_kernel_node_set_params(eagle_cudaGraphExec_t e,
                                                 eagle_cudaGraphNode_t node,
                                                 const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    if (!p) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphExecKernelNodeSetParams, e, node, p);
}
/* Runtime and library launches (the CUDA 12+ runtime under lazy loading, cuBLAS,
 * cuFFT) may leave a CUkernel in a kernel node rather than a CUfunction: in `kern`
 * with func NULL, or cast into `func` (cuLaunchKernel takes either). The cuFunc*
 * calls refuse a CUkernel, so on their failure the handle is tried as a CUkernel:
 * cuKernelGetFunction gives the current context's CUfunction of it. */
static void *eagle_cuda_node_kernel(const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    return p->func ? p->func : p->kern;
}
static int eagle_cuda_kernel_function(void *h, void **func) {
    *func = NULL;
    if (!h || !eagle_cuda_T.KernelGetFunction) return EAGLE_CUDA_ERR_INVALID_VALUE;
    return eagle_cuda_T.KernelGetFunction(func, h);
}

int eagle_cuda_kernel_node_name(eagle_cudaGraphNode_t node, const char **name) {
    eagle_CUDA_KERNEL_NODE_PARAMS_v2 p;
    void *f = NULL;
    if (!name) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    *name = NULL;
    EAGLE_CUDA_ENSURE();
    memset(&p, 0, sizeof p);
    int st = eagle_cuda_T.GraphKernelNodeGetParams(node, &p); /* not a kernel node: its error */
    if (st) return st;
    if (!eagle_cuda_T.FuncGetName) return EAGLE_CUDA_ERROR_TOO_OLD;
    void *h = eagle_cuda_node_kernel(&p);
    if (!h) return EAGLE_CUDA_ERR_INVALID_VALUE;
    st = p.func ? eagle_cuda_T.FuncGetName(name, p.func) : EAGLE_CUDA_ERR_INVALID_VALUE;
    if (st && eagle_cuda_T.KernelGetName && eagle_cuda_T.KernelGetName(name, h) == 0) return 0;
    if (st && eagle_cuda_kernel_function(h, &f) == 0) st = eagle_cuda_T.FuncGetName(name, f);
    if (st) *name = NULL;
    return st;
}

static int eagle_cuda_param_sizes_of(void *func, unsigned int *count, size_t *sizes,
                                     unsigned int cap) {
    unsigned int i = 0;
    for (;; ++i) {
        size_t off = 0, size = 0;
        int st = eagle_cuda_T.FuncGetParamInfo(func, i, &off, &size);
        if (st == EAGLE_CUDA_ERR_INVALID_VALUE) break; /* past the last parameter */
        if (st) return st;
        if (sizes && i < cap) sizes[i] = size;
        if (i > 4096) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    }
    *count = i;
    return 0;
}

int eagle_cuda_kernel_param_sizes(eagle_CUfunction func, unsigned int *count, size_t *sizes,
                                  unsigned int cap) {
    void *f = NULL;
    if (!count) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    *count = 0;
    EAGLE_CUDA_ENSURE();
    if (!eagle_cuda_T.FuncGetParamInfo) return EAGLE_CUDA_ERROR_TOO_OLD;
    int st = eagle_cuda_param_sizes_of(func, count, sizes, cap);
    /* refused, or no parameter at all: func may be a CUkernel */
    if ((st || *count == 0) && eagle_cuda_kernel_function(func, &f) == 0 && f)
        st = eagle_cuda_param_sizes_of(f, count, sizes, cap);
    return st;
}

/* ---- sized kernel nodes ----------------------------------------------------- */

static size_t eagle_cuda_align8(size_t n) { return (n + 7) / 8 * 8; }

/* Copy p's arguments into k (k->sizes set). */
static int eagle_cuda_sized_copy(eagle_cuda_sized *k, const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    size_t total = 0, off = 0;
    unsigned int i;
    if (!p->kernelParams && k->nargs) return EAGLE_CUDA_ERROR_UNSUPPORTED_NODE;
    for (i = 0; i < k->nargs; ++i) total += eagle_cuda_align8(k->sizes[i]);
    unsigned char *bytes = (unsigned char *)calloc(total ? total : 1, 1);
    void **argv = (void **)calloc(k->nargs ? k->nargs : 1, sizeof(void *));
    if (!bytes || !argv) {
        free(bytes);
        free(argv);
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    }
    for (i = 0; i < k->nargs; ++i) {
        memcpy(bytes + off, p->kernelParams[i], k->sizes[i]);
        argv[i] = bytes + off;
        off += eagle_cuda_align8(k->sizes[i]);
    }
    free(k->bytes);
    free(k->argv);
    k->bytes = bytes;
    k->argv = argv;
    k->params = *p;
    k->params.kernelParams = argv;
    k->params.extra = NULL;
    return 0;
}

int eagle_cuda_sized_init(eagle_cuda_sized *k, eagle_cudaGraphNode_t node, unsigned int nargs,
                          const size_t *sizes, unsigned int size_index, unsigned int size_bytes) {
    eagle_CUDA_KERNEL_NODE_PARAMS_v2 p;
    int st;
    unsigned int i;
    if (!k) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    memset(k, 0, sizeof *k);
    if (size_bytes && (size_index >= nargs || (size_bytes != 4 && size_bytes != 8)))
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    memset(&p, 0, sizeof p);
    st = eagle_cuda_T.GraphKernelNodeGetParams(node, &p);
    if (st) return st;
    k->node = node;
    k->nargs = nargs;
    k->size_index = size_index;
    k->size_bytes = size_bytes;
    k->sizes = (size_t *)calloc(nargs ? nargs : 1, sizeof(size_t));
    if (!k->sizes) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    for (i = 0; i < nargs; ++i) k->sizes[i] = sizes ? sizes[i] : 8;
    if (eagle_cuda_T.FuncGetParamInfo && eagle_cuda_node_kernel(&p)) {
        unsigned int count = 0;
        size_t *real = (size_t *)calloc(nargs ? nargs : 1, sizeof(size_t));
        if (!real) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
        st = eagle_cuda_kernel_param_sizes(eagle_cuda_node_kernel(&p), &count, real, nargs);
        if (st == 0 && count != nargs) st = EAGLE_CUDA_ERROR_BAD_ARGUMENT;
        if (st == 0 && size_bytes && real[size_index] != size_bytes)
            st = EAGLE_CUDA_ERROR_BAD_ARGUMENT;
        if (st == 0) memcpy(k->sizes, real, sizeof(size_t) * nargs);
        free(real);
        if (st) {
            eagle_cuda_sized_free(k);
            return st;
        }
    }
    st = eagle_cuda_sized_copy(k, &p);
    if (st) eagle_cuda_sized_free(k);
    return st;
}

int eagle_cuda_sized_refresh(eagle_cuda_sized *k, eagle_cudaGraphNode_t from) {
    eagle_CUDA_KERNEL_NODE_PARAMS_v2 p;
    if (!k || !k->sizes) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    memset(&p, 0, sizeof p);
    int st = eagle_cuda_T.GraphKernelNodeGetParams(from, &p);
    if (st) return st;
    return eagle_cuda_sized_copy(k, &p);
}

int eagle_cuda_sized_apply(eagle_cudaGraphExec_t exec, eagle_cuda_sized *k, const void *value,
                           eagle_dim3 grid) {
    if (!k || !k->argv || grid.x == 0 || grid.y == 0 || grid.z == 0)
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    if (value && k->size_bytes) memcpy(k->argv[k->size_index], value, k->size_bytes);
    k->params.gridDimX = grid.x;
    k->params.gridDimY = grid.y;
    k->params.gridDimZ = grid.z;
    return eagle_cuda_T.GraphExecKernelNodeSetParams(exec, k->node, &k->params);
}

int eagle_cuda_sized_apply_to_graph(eagle_cuda_sized *k, const void *value, eagle_dim3 grid) {
    if (!k || !k->argv || grid.x == 0 || grid.y == 0 || grid.z == 0)
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    if (value && k->size_bytes) memcpy(k->argv[k->size_index], value, k->size_bytes);
    k->params.gridDimX = grid.x;
    k->params.gridDimY = grid.y;
    k->params.gridDimZ = grid.z;
    return eagle_cuda_T.GraphKernelNodeSetParams(k->node, &k->params);
}

void eagle_cuda_sized_free(eagle_cuda_sized *k) {
    if (!k) return;
    free(k->sizes);
    free(k->bytes);
    free(k->argv);
    k->sizes = NULL;
    k->bytes = NULL;
    k->argv = NULL;
}

/* ---- device memory ---------------------------------------------------------- */

int eagle_cuda_malloc(void **ptr, size_t bytes) {
    eagle_CUdeviceptr d = 0;
    if (!ptr) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    *ptr = NULL;
    EAGLE_CUDA_ENSURE();
    int st = eagle_cuda_T.MemAlloc(&d, bytes ? bytes : 1);
    if (!st) *ptr = (void *)(size_t)d;
    return st;
}
int eagle_cuda_free(void *ptr) { EAGLE_CUDA_CALL(MemFree, (eagle_CUdeviceptr)(size_t)ptr); }
int eagle_cuda_host_alloc_mapped(void **host, eagle_CUdeviceptr *dev, size_t bytes) {
    if (!host || !dev) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    *host = NULL;
    *dev = 0;
    EAGLE_CUDA_ENSURE();
    int st = eagle_cuda_T.MemHostAlloc(host, bytes ? bytes : 1,
                                       EAGLE_CUDA_MEMHOSTALLOC_PORTABLE |
                                           EAGLE_CUDA_MEMHOSTALLOC_DEVICEMAP);
    if (st) return st;
    memset(*host, 0, bytes ? bytes : 1);
    st = eagle_cuda_T.MemHostGetDevicePointer(dev, *host, 0);
    if (st) {
        eagle_cuda_T.MemFreeHost(*host);
        *host = NULL;
    }
    return st;
}
int eagle_cuda_host_free(void *host) {
    if (!host) return 0;
    EAGLE_CUDA_CALL(MemFreeHost, host);
}
int eagle_cuda_memcpy_async(void *dst, const void *src, size_t bytes, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(MemcpyAsync, (eagle_CUdeviceptr)(size_t)dst, (eagle_CUdeviceptr)(size_t)src,
                    bytes, s);
}

#undef EAGLE_CUDA_CALL
#undef EAGLE_CUDA_ENSURE

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EAGLE_CUDA_SHIM_IMPL_H */
