/* eagle CUDA runtime shim — the implementation.
 *
 * Compiled once per program: csrc/cuda_shim.c includes it for the Python
 * extension; a C++ program using the header-only face (eagle/cuda.hpp)
 * defines EAGLE_CUDA_SHIM_IMPLEMENTATION in exactly one translation unit
 * before including eagle/cuda.hpp. Compiles as C11 and as C++ (nvcc host
 * code). Needs dlopen (link with -ldl on old glibc); never CUDA headers.
 */
#ifndef EAGLE_CUDA_SHIM_IMPL_H
#define EAGLE_CUDA_SHIM_IMPL_H

#include "eagle/cuda_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- function table ----------------------------------------------------- */

typedef const char *(*eagle_fn_err_str)(int);
typedef int (*eagle_fn_int_p)(int *);
typedef int (*eagle_fn_int)(int);
typedef int (*eagle_fn_void)(void);
typedef int (*eagle_fn_handle)(void *);
typedef int (*eagle_fn_handle_p_flags)(void **, unsigned int);
typedef int (*eagle_fn_2handles)(void *, void *);
typedef int (*eagle_fn_wait_event)(void *, void *, unsigned int);
typedef int (*eagle_fn_begin_capture)(void *, int);
typedef int (*eagle_fn_end_capture)(void *, void **);
typedef int (*eagle_fn_is_capturing)(void *, int *);
typedef int (*eagle_fn_capture_info_v2)(void *, int *, unsigned long long *, void **,
                                        const void *const **, size_t *);
typedef int (*eagle_fn_capture_info_v3)(void *, int *, unsigned long long *, void **,
                                        const void *const **, const eagle_cudaGraphEdgeData **,
                                        size_t *);
typedef int (*eagle_fn_graph_get_nodes)(void *, void **, size_t *);
typedef int (*eagle_fn_add_child)(void **, void *, const void *const *, size_t, void *);
typedef int (*eagle_fn_child_get_graph)(void *, void **);
typedef int (*eagle_fn_add_deps_v1)(void *, const void *const *, const void *const *, size_t);
typedef int (*eagle_fn_add_deps_v2)(void *, const void *const *, const void *const *,
                                    const eagle_cudaGraphEdgeData *, size_t);
typedef int (*eagle_fn_instantiate)(void **, void *, eagle_cudaGraphInstantiateParams *);
typedef int (*eagle_fn_exec_update)(void *, void *, eagle_cudaGraphExecUpdateResultInfo *);
typedef int (*eagle_fn_exec_child_set)(void *, void *, void *);
typedef int (*eagle_fn_launch_kernel)(const void *, eagle_dim3, eagle_dim3, void **, size_t,
                                      void *);
typedef int (*eagle_fn_kn_get)(void *, eagle_cudaKernelNodeParams *);
typedef int (*eagle_fn_kn_set)(void *, const eagle_cudaKernelNodeParams *);
typedef int (*eagle_fn_exec_kn_set)(void *, void *, const eagle_cudaKernelNodeParams *);
typedef int (*eagle_fn_entry_point)(const char *, void **, unsigned long long, int *);
typedef int (*eagle_fn_entry_point_v)(const char *, void **, unsigned int, unsigned long long,
                                      int *);
/* driver API (CUresult is an int enum) */
typedef int (*eagle_fn_malloc)(void **, size_t);
typedef int (*eagle_fn_memcpy_async)(void *, const void *, size_t, int, void *);
typedef int (*eagle_fn_cu_kn_get)(void *, eagle_CUDA_KERNEL_NODE_PARAMS_v2 *);
typedef int (*eagle_fn_cu_exec_kn_set)(void *, void *, const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *);

typedef struct eagle_cuda_table {
    int loaded;
    int version;
    char library[512];
    void *dl;
    eagle_fn_err_str GetErrorName, GetErrorString;
    eagle_fn_int_p RuntimeGetVersion, DriverGetVersion, GetDeviceCount, GetDevice;
    eagle_fn_int SetDevice;
    eagle_fn_void DeviceSynchronize, GetLastError;
    eagle_fn_handle_p_flags StreamCreateWithFlags, EventCreateWithFlags, GraphCreate;
    eagle_fn_handle StreamDestroy, StreamSynchronize, EventDestroy, EventSynchronize;
    eagle_fn_handle GraphDestroy, GraphExecDestroy;
    eagle_fn_2handles EventRecord, GraphUpload, GraphLaunch;
    eagle_fn_wait_event StreamWaitEvent;
    eagle_fn_begin_capture StreamBeginCapture;
    eagle_fn_end_capture StreamEndCapture;
    eagle_fn_is_capturing StreamIsCapturing;
    eagle_fn_int_p ThreadExchangeStreamCaptureMode;
    eagle_fn_capture_info_v2 CaptureInfoV2; /* CUDA 12.0-12.2 (_v2)              */
    eagle_fn_capture_info_v3 CaptureInfoV3; /* CUDA 12.3+ (_v3), CUDA 13 (plain) */
    eagle_fn_graph_get_nodes GraphGetNodes;
    eagle_fn_add_child GraphAddChildGraphNode;
    eagle_fn_child_get_graph GraphChildGraphNodeGetGraph;
    eagle_fn_add_deps_v1 AddDepsV1;
    eagle_fn_add_deps_v2 AddDepsV2;
    eagle_fn_instantiate GraphInstantiateWithParams;
    eagle_fn_exec_update GraphExecUpdate;
    eagle_fn_exec_child_set GraphExecChildGraphNodeSetParams;
    eagle_fn_launch_kernel LaunchKernel;
    eagle_fn_kn_get GraphKernelNodeGetParams;
    eagle_fn_kn_set GraphKernelNodeSetParams;
    eagle_fn_exec_kn_set GraphExecKernelNodeSetParams;
    eagle_fn_entry_point GetDriverEntryPoint;
    eagle_fn_entry_point_v GetDriverEntryPointByVersion;
    eagle_fn_malloc Malloc;
    eagle_fn_handle Free;
    eagle_fn_memcpy_async MemcpyAsync;
    /* driver entry points for retune, resolved on first retune */
    int driver_resolved;
    eagle_fn_cu_kn_get cuKernelNodeGetParams;
    eagle_fn_cu_exec_kn_set cuExecKernelNodeSetParams;
} eagle_cuda_table;

static eagle_cuda_table eagle_cuda_T;
/* Error names stay available when a runtime was found but no device is
 * usable (the table is not committed then), so that status says which. */
static eagle_fn_err_str eagle_cuda_found_err_name, eagle_cuda_found_err_str;
static pthread_mutex_t eagle_cuda_lock = PTHREAD_MUTEX_INITIALIZER;

static void eagle_cuda_msg(char *buf, size_t n, const char *fmt, const char *a, const char *b,
                           const char *c) {
    if (buf && n) snprintf(buf, n, fmt, a, b, c);
}

typedef void *(*eagle_sym_fn)(const char *name, void *ctx);

static void *eagle_cuda_dlsym_resolver(const char *name, void *ctx) {
    return dlsym(ctx, name);
}

#define EAGLE_CUDA_BIND(field, name, type)                                     \
    do {                                                                       \
        void *eagle_p_ = resolve(name, ctx);                                   \
        memcpy(&t.field, &eagle_p_, sizeof(void *));                           \
    } while (0)

/* Resolve everything into a fresh table; commit it only on success.
 * Called with eagle_cuda_lock held. */
static int eagle_cuda_bind(eagle_sym_fn resolve, void *ctx, void *dl, const char *label,
                           char *errbuf, size_t errn) {
    eagle_cuda_table t;
    memset(&t, 0, sizeof t);
    t.dl = dl;
    snprintf(t.library, sizeof t.library, "%s", label ? label : "");
    EAGLE_CUDA_BIND(GetErrorName, "cudaGetErrorName", eagle_fn_err_str);
    EAGLE_CUDA_BIND(GetErrorString, "cudaGetErrorString", eagle_fn_err_str);
    EAGLE_CUDA_BIND(RuntimeGetVersion, "cudaRuntimeGetVersion", eagle_fn_int_p);
    EAGLE_CUDA_BIND(DriverGetVersion, "cudaDriverGetVersion", eagle_fn_int_p);
    EAGLE_CUDA_BIND(GetDeviceCount, "cudaGetDeviceCount", eagle_fn_int_p);
    EAGLE_CUDA_BIND(GetDevice, "cudaGetDevice", eagle_fn_int_p);
    EAGLE_CUDA_BIND(SetDevice, "cudaSetDevice", eagle_fn_int);
    EAGLE_CUDA_BIND(DeviceSynchronize, "cudaDeviceSynchronize", eagle_fn_void);
    EAGLE_CUDA_BIND(GetLastError, "cudaGetLastError", eagle_fn_void);
    EAGLE_CUDA_BIND(StreamCreateWithFlags, "cudaStreamCreateWithFlags", x);
    EAGLE_CUDA_BIND(StreamDestroy, "cudaStreamDestroy", x);
    EAGLE_CUDA_BIND(StreamSynchronize, "cudaStreamSynchronize", x);
    EAGLE_CUDA_BIND(StreamWaitEvent, "cudaStreamWaitEvent", x);
    EAGLE_CUDA_BIND(EventCreateWithFlags, "cudaEventCreateWithFlags", x);
    EAGLE_CUDA_BIND(EventDestroy, "cudaEventDestroy", x);
    EAGLE_CUDA_BIND(EventRecord, "cudaEventRecord", x);
    EAGLE_CUDA_BIND(EventSynchronize, "cudaEventSynchronize", x);
    EAGLE_CUDA_BIND(StreamBeginCapture, "cudaStreamBeginCapture", x);
    EAGLE_CUDA_BIND(StreamEndCapture, "cudaStreamEndCapture", x);
    EAGLE_CUDA_BIND(StreamIsCapturing, "cudaStreamIsCapturing", x);
    EAGLE_CUDA_BIND(ThreadExchangeStreamCaptureMode, "cudaThreadExchangeStreamCaptureMode", x);
    EAGLE_CUDA_BIND(GraphCreate, "cudaGraphCreate", x);
    EAGLE_CUDA_BIND(GraphDestroy, "cudaGraphDestroy", x);
    EAGLE_CUDA_BIND(GraphGetNodes, "cudaGraphGetNodes", x);
    EAGLE_CUDA_BIND(GraphAddChildGraphNode, "cudaGraphAddChildGraphNode", x);
    EAGLE_CUDA_BIND(GraphChildGraphNodeGetGraph, "cudaGraphChildGraphNodeGetGraph", x);
    EAGLE_CUDA_BIND(GraphInstantiateWithParams, "cudaGraphInstantiateWithParams", x);
    EAGLE_CUDA_BIND(GraphExecDestroy, "cudaGraphExecDestroy", x);
    EAGLE_CUDA_BIND(GraphUpload, "cudaGraphUpload", x);
    EAGLE_CUDA_BIND(GraphLaunch, "cudaGraphLaunch", x);
    EAGLE_CUDA_BIND(GraphExecUpdate, "cudaGraphExecUpdate", x);
    EAGLE_CUDA_BIND(GraphExecChildGraphNodeSetParams, "cudaGraphExecChildGraphNodeSetParams", x);
    EAGLE_CUDA_BIND(LaunchKernel, "cudaLaunchKernel", x);
    EAGLE_CUDA_BIND(GraphKernelNodeGetParams, "cudaGraphKernelNodeGetParams", x);
    EAGLE_CUDA_BIND(GraphKernelNodeSetParams, "cudaGraphKernelNodeSetParams", x);
    EAGLE_CUDA_BIND(GraphExecKernelNodeSetParams, "cudaGraphExecKernelNodeSetParams", x);
    EAGLE_CUDA_BIND(GetDriverEntryPoint, "cudaGetDriverEntryPoint", x);
    EAGLE_CUDA_BIND(GetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion", x);
    EAGLE_CUDA_BIND(Malloc, "cudaMalloc", x);
    EAGLE_CUDA_BIND(Free, "cudaFree", x);
    EAGLE_CUDA_BIND(MemcpyAsync, "cudaMemcpyAsync", x);

    /* Everything eagle cannot work without (the driver entry points and the
     * child-graph helpers are optional). */
    {
        static const char *required[] = {"cudaGetErrorName", "cudaGetErrorString",
            "cudaRuntimeGetVersion", "cudaGetDeviceCount", "cudaStreamCreateWithFlags",
            "cudaStreamDestroy", "cudaStreamSynchronize", "cudaStreamWaitEvent",
            "cudaEventCreateWithFlags", "cudaEventDestroy", "cudaEventRecord",
            "cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaStreamIsCapturing",
            "cudaGraphDestroy", "cudaGraphGetNodes", "cudaGraphInstantiateWithParams",
            "cudaGraphExecDestroy", "cudaGraphUpload", "cudaGraphLaunch",
            "cudaLaunchKernel", "cudaGraphKernelNodeGetParams",
            "cudaGraphExecKernelNodeSetParams", NULL};
        void *have[] = {(void *)t.GetErrorName, (void *)t.GetErrorString,
            (void *)t.RuntimeGetVersion, (void *)t.GetDeviceCount,
            (void *)t.StreamCreateWithFlags, (void *)t.StreamDestroy,
            (void *)t.StreamSynchronize, (void *)t.StreamWaitEvent,
            (void *)t.EventCreateWithFlags, (void *)t.EventDestroy, (void *)t.EventRecord,
            (void *)t.StreamBeginCapture, (void *)t.StreamEndCapture,
            (void *)t.StreamIsCapturing, (void *)t.GraphDestroy, (void *)t.GraphGetNodes,
            (void *)t.GraphInstantiateWithParams, (void *)t.GraphExecDestroy,
            (void *)t.GraphUpload, (void *)t.GraphLaunch, (void *)t.LaunchKernel,
            (void *)t.GraphKernelNodeGetParams, (void *)t.GraphExecKernelNodeSetParams};
        for (int i = 0; required[i]; ++i) {
            if (!have[i]) {
                if (i == 16) /* cudaGraphInstantiateWithParams: added in 12.0 */
                    eagle_cuda_msg(errbuf, errn,
                                   "CUDA runtime %s is older than CUDA 12.0 (it lacks %s)%s",
                                   t.library, required[i], "");
                else
                    eagle_cuda_msg(errbuf, errn, "CUDA runtime %s lacks %s%s", t.library,
                                   required[i], "");
                return i == 16 ? EAGLE_CUDA_ERROR_TOO_OLD : EAGLE_CUDA_ERROR_MISSING_SYMBOL;
            }
        }
    }
    if (t.RuntimeGetVersion(&t.version) != 0) t.version = 0;
#if defined(_GNU_SOURCE) || defined(__cplusplus)
    if (dl) { /* name the file actually bound, not just the soname asked for */
        Dl_info info;
        if (dladdr((void *)t.GetErrorName, &info) && info.dli_fname)
            snprintf(t.library, sizeof t.library, "%s", info.dli_fname);
    }
#endif

    /* cudaStreamGetCaptureInfo: CUDA 13 exports the 7-argument form under
     * the plain name; CUDA 12 exports _v3 (12.3+, 7 args) and _v2 (6 args),
     * and the plain name there is the legacy 3-argument form. */
    if (t.version >= 13000) {
        EAGLE_CUDA_BIND(CaptureInfoV3, "cudaStreamGetCaptureInfo", x);
        EAGLE_CUDA_BIND(AddDepsV2, "cudaGraphAddDependencies", x);
    } else {
        EAGLE_CUDA_BIND(CaptureInfoV3, "cudaStreamGetCaptureInfo_v3", x);
        if (!t.CaptureInfoV3) EAGLE_CUDA_BIND(CaptureInfoV2, "cudaStreamGetCaptureInfo_v2", x);
        EAGLE_CUDA_BIND(AddDepsV2, "cudaGraphAddDependencies_v2", x);
        if (!t.AddDepsV2) EAGLE_CUDA_BIND(AddDepsV1, "cudaGraphAddDependencies", x);
    }
    if (!t.CaptureInfoV3 && !t.CaptureInfoV2) {
        eagle_cuda_msg(errbuf, errn, "CUDA runtime %s lacks cudaStreamGetCaptureInfo%s%s",
                       t.library, t.version >= 13000 ? "" : "_v2/_v3", "");
        return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
    }
    if (t.version && t.version < 12000) {
        eagle_cuda_msg(errbuf, errn, "CUDA runtime %s is older than CUDA 12.0%s%s", t.library,
                       "", "");
        return EAGLE_CUDA_ERROR_TOO_OLD;
    }

    /* A runtime is there: is a GPU? */
    {
        int count = 0;
        int st = t.GetDeviceCount(&count);
        if (st == 0 && count == 0) st = EAGLE_CUDA_ERR_NO_DEVICE;
        if (st != 0) {
            eagle_cuda_found_err_name = t.GetErrorName;
            eagle_cuda_found_err_str = t.GetErrorString;
            if (errbuf && errn)
                snprintf(errbuf, errn,
                         "CUDA runtime %s found but no GPU/driver usable "
                         "(cudaGetDeviceCount -> %s: %s)",
                         t.library, t.GetErrorName(st), t.GetErrorString(st));
            return st;
        }
    }
    t.loaded = 1;
    eagle_cuda_T = t;
    return 0;
}

static const char *const eagle_cuda_sonames[] = {
    "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};

int eagle_cuda_load(char *errbuf, size_t errbuf_size) {
    if (eagle_cuda_T.loaded) return 0;
    pthread_mutex_lock(&eagle_cuda_lock);
    int st = 0;
    if (!eagle_cuda_T.loaded) {
        char tried[1024];
        size_t used = 0;
        void *dl = NULL;
        const char *label = NULL;
        char labelbuf[512];
        tried[0] = '\0';
        const char *env = getenv("EAGLE_CUDA_RUNTIME");
        if (env && *env) {
            dl = dlopen(env, RTLD_NOW | RTLD_LOCAL);
            used += (size_t)snprintf(tried + used, sizeof tried - used,
                                     "EAGLE_CUDA_RUNTIME=%s (%s)", env,
                                     dl ? "ok" : dlerror());
            label = env;
        } else {
            for (int i = 0; !dl && eagle_cuda_sonames[i]; ++i) {
                dl = dlopen(eagle_cuda_sonames[i], RTLD_NOW | RTLD_NOLOAD);
                if (dl) {
                    snprintf(labelbuf, sizeof labelbuf, "%s (already loaded)",
                             eagle_cuda_sonames[i]);
                    label = labelbuf;
                }
            }
            if (!dl) {
                used += (size_t)snprintf(tried, sizeof tried, "already-loaded libcudart.so*");
                for (int i = 0; !dl && eagle_cuda_sonames[i]; ++i) {
                    dl = dlopen(eagle_cuda_sonames[i], RTLD_NOW | RTLD_LOCAL);
                    if (used < sizeof tried)
                        used += (size_t)snprintf(tried + used, sizeof tried - used, ", %s",
                                                 eagle_cuda_sonames[i]);
                    label = eagle_cuda_sonames[i];
                }
            }
        }
        if (!dl) {
            eagle_cuda_msg(errbuf, errbuf_size,
                           "no CUDA runtime library found (tried %s)%s%s", tried,
                           env && *env ? "" : "; install CuPy or the CUDA runtime "
                                              "(nvidia-cuda-runtime), or set EAGLE_CUDA_RUNTIME",
                           "");
            st = EAGLE_CUDA_ERROR_NOT_LOADED;
        } else {
            st = eagle_cuda_bind(eagle_cuda_dlsym_resolver, dl, dl, label, errbuf, errbuf_size);
            /* keep a runtime that only lacks a device open: its error names
             * are still used */
            if (st < 0) dlclose(dl);
        }
    }
    pthread_mutex_unlock(&eagle_cuda_lock);
    return st;
}

int eagle_cuda_load_with(eagle_cuda_resolver_fn resolve, void *ctx, const char *label,
                         char *errbuf, size_t errbuf_size) {
    if (!resolve) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    pthread_mutex_lock(&eagle_cuda_lock);
    int st = 0;
    if (!eagle_cuda_T.loaded)
        st = eagle_cuda_bind(resolve, ctx, NULL, label ? label : "(resolver)", errbuf,
                             errbuf_size);
    pthread_mutex_unlock(&eagle_cuda_lock);
    return st;
}

int eagle_cuda_is_loaded(void) { return eagle_cuda_T.loaded; }

const char *eagle_cuda_library(void) { return eagle_cuda_T.loaded ? eagle_cuda_T.library : ""; }

#define EAGLE_CUDA_ENSURE()                                                    \
    do {                                                                       \
        if (!eagle_cuda_T.loaded) {                                            \
            int eagle_st_ = eagle_cuda_load(NULL, 0);                          \
            if (eagle_st_) return eagle_st_;                                   \
        }                                                                      \
    } while (0)

#define EAGLE_CUDA_CALL(field, ...)                                            \
    do {                                                                       \
        EAGLE_CUDA_ENSURE();                                                   \
        if (!eagle_cuda_T.field) return EAGLE_CUDA_ERROR_MISSING_SYMBOL;       \
        return eagle_cuda_T.field(__VA_ARGS__);                                \
    } while (0)

int eagle_cuda_runtime_version(int *version) {
    EAGLE_CUDA_ENSURE();
    if (version) *version = eagle_cuda_T.version;
    return 0;
}
int eagle_cuda_driver_version(int *version) { EAGLE_CUDA_CALL(DriverGetVersion, version); }

void eagle_cuda_status_text(int status, const char **name, const char **text) {
    const char *n = NULL, *x = NULL;
    switch (status) {
    case 0: n = "cudaSuccess"; x = "no error"; break;
    case EAGLE_CUDA_ERROR_NOT_LOADED:
        n = "eagleCudaErrorNotLoaded";
        x = "no usable CUDA runtime (eagle_cuda_load() says why)";
        break;
    case EAGLE_CUDA_ERROR_MISSING_SYMBOL:
        n = "eagleCudaErrorMissingSymbol";
        x = "the CUDA runtime lacks a function eagle needs";
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
        n = "eagleCudaErrorRuntimeTooOld";
        x = "eagle needs a CUDA 12.0 or newer runtime";
        break;
    default:
        if (status > 0 && eagle_cuda_T.loaded) {
            n = eagle_cuda_T.GetErrorName(status);
            x = eagle_cuda_T.GetErrorString(status);
        } else if (status > 0 && eagle_cuda_found_err_name) {
            n = eagle_cuda_found_err_name(status);
            x = eagle_cuda_found_err_str(status);
        }
        if (!n) n = "cudaErrorUnrecognized";
        if (!x) x = "unrecognized error code";
    }
    if (name) *name = n;
    if (text) *text = x;
}

/* ---- devices, streams, events ------------------------------------------- */

int eagle_cuda_get_device_count(int *count) { EAGLE_CUDA_CALL(GetDeviceCount, count); }
int eagle_cuda_get_device(int *device) { EAGLE_CUDA_CALL(GetDevice, device); }
int eagle_cuda_set_device(int device) { EAGLE_CUDA_CALL(SetDevice, device); }
int eagle_cuda_device_synchronize(void) { EAGLE_CUDA_CALL(DeviceSynchronize); }
int eagle_cuda_get_last_error(void) { EAGLE_CUDA_CALL(GetLastError); }

int eagle_cuda_stream_create(eagle_cudaStream_t *stream, unsigned int flags) {
    if (!stream) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(StreamCreateWithFlags, stream, flags);
}
int eagle_cuda_stream_destroy(eagle_cudaStream_t s) { EAGLE_CUDA_CALL(StreamDestroy, s); }
int eagle_cuda_stream_synchronize(eagle_cudaStream_t s) { EAGLE_CUDA_CALL(StreamSynchronize, s); }

int eagle_cuda_event_create(eagle_cudaEvent_t *event, unsigned int flags) {
    if (!event) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(EventCreateWithFlags, event, flags);
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
    if (eagle_cuda_T.CaptureInfoV3)
        return eagle_cuda_T.CaptureInfoV3(s, sp, id, graph, (const void *const **)deps, NULL,
                                          num_deps);
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
    if (eagle_cuda_T.AddDepsV1)
        return eagle_cuda_T.AddDepsV1(g, (const void *const *)from, (const void *const *)to, n);
    return EAGLE_CUDA_ERROR_MISSING_SYMBOL;
}

int eagle_cuda_graph_instantiate(eagle_cudaGraphExec_t *exec, eagle_cudaGraph_t graph,
                                 unsigned long long flags, eagle_cudaStream_t upload_stream,
                                 eagle_cudaGraphNode_t *err_node, int *result) {
    eagle_cudaGraphInstantiateParams p;
    if (!exec) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    memset(&p, 0, sizeof p);
    p.flags = flags;
    p.uploadStream = upload_stream;
    *exec = NULL;
    int st = eagle_cuda_T.GraphInstantiateWithParams(exec, graph, &p);
    if (err_node) *err_node = st ? p.errNode_out : NULL;
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
    eagle_fn_2handles launch = eagle_cuda_T.GraphLaunch;
    for (; i < n; ++i) {
        st = launch(e, s);
        if (st) break;
    }
    if (done) *done = i;
    return st;
}
int eagle_cuda_graph_exec_update(eagle_cudaGraphExec_t e, eagle_cudaGraph_t g,
                                 eagle_cudaGraphExecUpdateResultInfo *info) {
    eagle_cudaGraphExecUpdateResultInfo local;
    memset(&local, 0, sizeof local);
    EAGLE_CUDA_CALL(GraphExecUpdate, e, g, info ? info : &local);
}
int eagle_cuda_graph_exec_child_graph_node_set_params(eagle_cudaGraphExec_t e,
                                                      eagle_cudaGraphNode_t node,
                                                      eagle_cudaGraph_t child) {
    EAGLE_CUDA_CALL(GraphExecChildGraphNodeSetParams, e, node, child);
}

/* ---- kernels -------------------------------------------------------------- */

int eagle_cuda_launch_kernel(const void *func, eagle_dim3 grid, eagle_dim3 block, void **args,
                             size_t shared_mem, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(LaunchKernel, func, grid, block, args, shared_mem, s);
}
int eagle_cuda_kernel_node_get_params(eagle_cudaGraphNode_t node, eagle_cudaKernelNodeParams *p) {
    if (!p) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphKernelNodeGetParams, node, p);
}
int eagle_cuda_kernel_node_set_params(eagle_cudaGraphNode_t node,
                                      const eagle_cudaKernelNodeParams *p) {
    if (!p) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphKernelNodeSetParams, node, p);
}
int eagle_cuda_graph_exec_kernel_node_set_params(eagle_cudaGraphExec_t e,
                                                 eagle_cudaGraphNode_t node,
                                                 const eagle_cudaKernelNodeParams *p) {
    if (!p) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(GraphExecKernelNodeSetParams, e, node, p);
}

/* Resolve the driver's kernel-node entry points through the runtime (no
 * second dlopen: the runtime hands out the driver it uses). ABI pinned to
 * CUDA 12.0 (the _v2 parameter struct). */
static void eagle_cuda_resolve_driver(void) {
    if (eagle_cuda_T.driver_resolved) return;
    pthread_mutex_lock(&eagle_cuda_lock);
    if (!eagle_cuda_T.driver_resolved) {
        const char *names[2] = {"cuGraphKernelNodeGetParams", "cuGraphExecKernelNodeSetParams"};
        void *fns[2] = {NULL, NULL};
        for (int i = 0; i < 2; ++i) {
            int q = 0, st = -1;
            if (eagle_cuda_T.GetDriverEntryPointByVersion)
                st = eagle_cuda_T.GetDriverEntryPointByVersion(names[i], &fns[i], 12000, 0, &q);
            if (st != 0 && eagle_cuda_T.GetDriverEntryPoint && eagle_cuda_T.version >= 12000 &&
                eagle_cuda_T.version < 13000)
                st = eagle_cuda_T.GetDriverEntryPoint(names[i], &fns[i], 0, &q);
            if (st != 0 || q != 0 /* cudaDriverEntryPointSuccess */) fns[i] = NULL;
        }
        if (fns[0] && fns[1]) {
            memcpy(&eagle_cuda_T.cuKernelNodeGetParams, &fns[0], sizeof(void *));
            memcpy(&eagle_cuda_T.cuExecKernelNodeSetParams, &fns[1], sizeof(void *));
        }
        eagle_cuda_T.driver_resolved = 1;
    }
    pthread_mutex_unlock(&eagle_cuda_lock);
}

int eagle_cuda_retune_uses_driver(void) {
    EAGLE_CUDA_ENSURE();
    eagle_cuda_resolve_driver();
    return eagle_cuda_T.cuKernelNodeGetParams ? 1 : 0;
}

#define EAGLE_CUDA_RETUNE_STACK_ARGS 32

int eagle_cuda_retune_kernel_node(eagle_cudaGraphExec_t exec, eagle_cudaGraphNode_t node,
                                  unsigned int nargs, unsigned int size_index,
                                  const void *size_value, eagle_dim3 grid) {
    void *stack_args[EAGLE_CUDA_RETUNE_STACK_ARGS];
    void **args = stack_args;
    int st;
    if ((size_value && size_index >= nargs) || grid.x == 0 || grid.y == 0 || grid.z == 0)
        return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_ENSURE();
    eagle_cuda_resolve_driver();
    if (nargs > EAGLE_CUDA_RETUNE_STACK_ARGS) {
        args = (void **)malloc(sizeof(void *) * nargs);
        if (!args) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    }
    /* The node's own argument storage stays valid: only exec is modified. */
    if (eagle_cuda_T.cuKernelNodeGetParams) {
        eagle_CUDA_KERNEL_NODE_PARAMS_v2 p;
        memset(&p, 0, sizeof p);
        st = eagle_cuda_T.cuKernelNodeGetParams(node, &p);
        if (st == 0) {
            if (!p.kernelParams) {
                st = EAGLE_CUDA_ERROR_UNSUPPORTED_NODE;
            } else {
                memcpy(args, p.kernelParams, sizeof(void *) * nargs);
                if (size_value) args[size_index] = (void *)size_value;
                p.kernelParams = args;
                p.gridDimX = grid.x;
                p.gridDimY = grid.y;
                p.gridDimZ = grid.z;
                st = eagle_cuda_T.cuExecKernelNodeSetParams(exec, node, &p);
            }
            goto done;
        }
        /* fall through to the runtime API */
    }
    {
        eagle_cudaKernelNodeParams p;
        memset(&p, 0, sizeof p);
        st = eagle_cuda_T.GraphKernelNodeGetParams(node, &p);
        if (st) goto done;
        if (!p.kernelParams) {
            st = EAGLE_CUDA_ERROR_UNSUPPORTED_NODE;
            goto done;
        }
        memcpy(args, p.kernelParams, sizeof(void *) * nargs);
        if (size_value) args[size_index] = (void *)size_value;
        p.kernelParams = args;
        p.gridDim = grid;
        st = eagle_cuda_T.GraphExecKernelNodeSetParams(exec, node, &p);
    }
done:
    if (args != stack_args) free(args);
    return st;
}

/* ---- device memory ---------------------------------------------------------- */

int eagle_cuda_malloc(void **ptr, size_t bytes) {
    if (!ptr) return EAGLE_CUDA_ERROR_BAD_ARGUMENT;
    EAGLE_CUDA_CALL(Malloc, ptr, bytes ? bytes : 1);
}
int eagle_cuda_free(void *ptr) { EAGLE_CUDA_CALL(Free, ptr); }
int eagle_cuda_memcpy_async(void *dst, const void *src, size_t bytes, eagle_cudaStream_t s) {
    EAGLE_CUDA_CALL(MemcpyAsync, dst, src, bytes, 4 /* cudaMemcpyDefault */, s);
}

#undef EAGLE_CUDA_BIND
#undef EAGLE_CUDA_CALL
#undef EAGLE_CUDA_ENSURE

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EAGLE_CUDA_SHIM_IMPL_H */
