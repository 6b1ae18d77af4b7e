/* eagle CUDA runtime shim — the C face.
 *
 * eagle never links against CUDA. This shim reaches the CUDA runtime
 * (libcudart) through function pointers resolved at run time with
 * dlopen/dlsym, so eagle builds and imports on machines without a CUDA
 * toolkit, and uses whichever runtime the process already has (CuPy's) or the
 * system provides.
 *
 * Library lookup order (eagle_cuda_load):
 *   1. the path in the environment variable EAGLE_CUDA_RUNTIME (tests point it
 *      at a CPU stand-in, tests/cuda_standin/fake_cudart.c);
 *   2. a libcudart already loaded in the process (CuPy loads one), found with
 *      dlopen(RTLD_NOLOAD) for the common sonames;
 *   3. libcudart.so.13, libcudart.so.12, libcudart.so.
 * eagle_cuda_load_with() binds to a caller-supplied symbol resolver instead
 * (the C++ face uses it under nvcc to bind to the program's own runtime).
 *
 * Types: every CUDA type the shim passes is declared here under an eagle_
 * prefix, with the exact ABI of the real one (tests/cuda/test_shim_standin.py
 * checks sizes and offsets against the real headers), so this header can sit
 * beside cuda_runtime_api.h in one translation unit.
 *
 * Status: every function returns an int. 0 is success; a positive value is
 * the cudaError_t the runtime returned; a negative value is one of the
 * EAGLE_CUDA_ERROR_* codes below. eagle_cuda_status_text() turns any status
 * into a name and a sentence.
 *
 * Thread-safety: loading is serialized internally; after a successful load
 * the function table is read-only, so every function may be called from any
 * thread, with the CUDA runtime's own rules for the objects passed (a stream
 * capture in relaxed mode, the mode eagle uses, does not restrict other
 * threads). No function touches Python; all may run without the GIL.
 *
 * Requires a CUDA 12.0+ runtime (cudaGraphInstantiateWithParams).
 */
#ifndef EAGLE_CUDA_SHIM_H
#define EAGLE_CUDA_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types (ABI-identical to the CUDA runtime's) ------------------------ */

typedef void *eagle_cudaStream_t;    /* cudaStream_t    (CUstream_st *)      */
typedef void *eagle_cudaEvent_t;     /* cudaEvent_t     (CUevent_st *)       */
typedef void *eagle_cudaGraph_t;     /* cudaGraph_t     (CUgraph_st *)       */
typedef void *eagle_cudaGraphExec_t; /* cudaGraphExec_t (CUgraphExec_st *)   */
typedef void *eagle_cudaGraphNode_t; /* cudaGraphNode_t (CUgraphNode_st *)   */

/* dim3 */
typedef struct eagle_dim3 {
    unsigned int x, y, z;
} eagle_dim3;

/* struct cudaKernelNodeParams */
typedef struct eagle_cudaKernelNodeParams {
    void *func;
    eagle_dim3 gridDim;
    eagle_dim3 blockDim;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
} eagle_cudaKernelNodeParams;

/* cudaGraphInstantiateParams */
typedef struct eagle_cudaGraphInstantiateParams {
    unsigned long long flags;
    eagle_cudaStream_t uploadStream;
    eagle_cudaGraphNode_t errNode_out;
    int result_out; /* enum cudaGraphInstantiateResult */
} eagle_cudaGraphInstantiateParams;

/* cudaGraphExecUpdateResultInfo */
typedef struct eagle_cudaGraphExecUpdateResultInfo {
    int result; /* enum cudaGraphExecUpdateResult */
    eagle_cudaGraphNode_t errorNode;
    eagle_cudaGraphNode_t errorFromNode;
} eagle_cudaGraphExecUpdateResultInfo;

/* cudaGraphEdgeData (CUDA 12.3+) */
typedef struct eagle_cudaGraphEdgeData {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type;
    unsigned char reserved[5];
} eagle_cudaGraphEdgeData;

/* CUDA_KERNEL_NODE_PARAMS_v2 (driver API, used for retuning kernels the
 * runtime API cannot describe, e.g. CuPy RawKernels from cuModuleLoad). */
typedef struct eagle_CUDA_KERNEL_NODE_PARAMS_v2 {
    void *func; /* CUfunction */
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern; /* CUkernel  */
    void *ctx;  /* CUcontext */
} eagle_CUDA_KERNEL_NODE_PARAMS_v2;

/* ---- constants (values of the real enums / macros) ---------------------- */

enum {
    EAGLE_CUDA_CAPTURE_MODE_GLOBAL = 0,       /* cudaStreamCaptureModeGlobal      */
    EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL = 1, /* cudaStreamCaptureModeThreadLocal */
    EAGLE_CUDA_CAPTURE_MODE_RELAXED = 2       /* cudaStreamCaptureModeRelaxed     */
};
enum {
    EAGLE_CUDA_CAPTURE_STATUS_NONE = 0,
    EAGLE_CUDA_CAPTURE_STATUS_ACTIVE = 1,
    EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED = 2
};
#define EAGLE_CUDA_STREAM_DEFAULT 0x00u       /* cudaStreamDefault      */
#define EAGLE_CUDA_STREAM_NON_BLOCKING 0x01u  /* cudaStreamNonBlocking  */
#define EAGLE_CUDA_EVENT_DEFAULT 0x00u        /* cudaEventDefault       */
#define EAGLE_CUDA_EVENT_DISABLE_TIMING 0x02u /* cudaEventDisableTiming */
#define EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2ull /* cudaGraphInstantiateFlagUpload */

/* The CUDA runtime's error codes the shim itself produces or tests for. */
#define EAGLE_CUDA_SUCCESS 0
#define EAGLE_CUDA_ERR_INVALID_VALUE 1          /* cudaErrorInvalidValue          */
#define EAGLE_CUDA_ERR_INVALID_DEVICE_FUNCTION 98
#define EAGLE_CUDA_ERR_NO_DEVICE 100
#define EAGLE_CUDA_ERR_NOT_SUPPORTED 801

/* eagle's own statuses (negative, never produced by CUDA). */
#define EAGLE_CUDA_ERROR_NOT_LOADED (-1)     /* no CUDA runtime library found           */
#define EAGLE_CUDA_ERROR_MISSING_SYMBOL (-2) /* the runtime lacks a function eagle needs */
#define EAGLE_CUDA_ERROR_BAD_ARGUMENT (-3)   /* eagle-level argument check failed        */
#define EAGLE_CUDA_ERROR_UNSUPPORTED_NODE (-4) /* kernel node passes args via `extra`   */
#define EAGLE_CUDA_ERROR_TOO_OLD (-5)        /* runtime older than CUDA 12.0             */

/* ---- loading and errors ------------------------------------------------- */

/* Load the runtime (idempotent; later calls return the cached result once it
 * succeeded). On failure writes a sentence to errbuf (may be NULL) saying
 * which of these happened:
 *   "no CUDA runtime library found (tried ...)"            -> EAGLE_CUDA_ERROR_NOT_LOADED
 *   "CUDA runtime <path> found but no GPU/driver usable
 *    (cudaGetDeviceCount -> <error name>: <text>)"        -> that cudaError_t
 *   "... lacks <symbol>" / "... is older than CUDA 12.0"   -> MISSING_SYMBOL / TOO_OLD
 * Every other function loads on first use and returns
 * EAGLE_CUDA_ERROR_NOT_LOADED when that fails. */
int eagle_cuda_load(char *errbuf, size_t errbuf_size);

/* Bind to a caller-supplied resolver instead of dlopen (for example the
 * C++ face compiled by nvcc, which hands out its own linked runtime's
 * functions). resolve(name, ctx) returns the function for a runtime symbol
 * name, or NULL. Replaces an earlier binding only if none succeeded yet. */
typedef void *(*eagle_cuda_resolver_fn)(const char *name, void *ctx);
int eagle_cuda_load_with(eagle_cuda_resolver_fn resolve, void *ctx, const char *label,
                         char *errbuf, size_t errbuf_size);

int eagle_cuda_is_loaded(void);
/* Path or label of the bound runtime ("" if none). Static storage. */
const char *eagle_cuda_library(void);
/* The runtime's version (cudaRuntimeGetVersion), e.g. 13000. */
int eagle_cuda_runtime_version(int *version);
int eagle_cuda_driver_version(int *version);

/* Name and sentence for any status (CUDA's own via cudaGetErrorName/String
 * when loaded). Never NULL; static storage. Safe without a runtime. */
void eagle_cuda_status_text(int status, const char **name, const char **text);

/* ---- devices, streams, events ------------------------------------------- */

int eagle_cuda_get_device_count(int *count);
int eagle_cuda_get_device(int *device);
int eagle_cuda_set_device(int device);
int eagle_cuda_device_synchronize(void);
int eagle_cuda_get_last_error(void);

int eagle_cuda_stream_create(eagle_cudaStream_t *stream, unsigned int flags);
int eagle_cuda_stream_destroy(eagle_cudaStream_t stream);
int eagle_cuda_stream_synchronize(eagle_cudaStream_t stream);

int eagle_cuda_event_create(eagle_cudaEvent_t *event, unsigned int flags);
int eagle_cuda_event_destroy(eagle_cudaEvent_t event);
int eagle_cuda_event_record(eagle_cudaEvent_t event, eagle_cudaStream_t stream);
int eagle_cuda_event_synchronize(eagle_cudaEvent_t event);
int eagle_cuda_stream_wait_event(eagle_cudaStream_t stream, eagle_cudaEvent_t event,
                                 unsigned int flags);

/* ---- capture -------------------------------------------------------------- */

/* mode: EAGLE_CUDA_CAPTURE_MODE_*; eagle uses RELAXED (allocations from a
 * memory pool during capture are legal only there). */
int eagle_cuda_stream_begin_capture(eagle_cudaStream_t stream, int mode);
/* Always call after begin, also on error: a capture left open poisons the
 * stream. *graph is NULL when the capture was invalidated. */
int eagle_cuda_stream_end_capture(eagle_cudaStream_t stream, eagle_cudaGraph_t *graph);
int eagle_cuda_stream_is_capturing(eagle_cudaStream_t stream, int *capture_status);
/* cudaStreamGetCaptureInfo (the CUDA 12 _v2/_v3 or CUDA 13 entry point, picked
 * at load). Outputs may be NULL. The dependency array belongs to the runtime
 * and is valid until the next capture operation on the stream. */
int eagle_cuda_stream_capture_info(eagle_cudaStream_t stream, int *capture_status,
                                   unsigned long long *id, eagle_cudaGraph_t *graph,
                                   const eagle_cudaGraphNode_t **deps, size_t *num_deps);
/* The node the last captured operation added: the stream's single current
 * dependency. EAGLE_CUDA_ERROR_BAD_ARGUMENT if the stream is not capturing or
 * has no single dependency (e.g. right after a join). */
int eagle_cuda_stream_last_node(eagle_cudaStream_t stream, eagle_cudaGraphNode_t *node);
int eagle_cuda_thread_exchange_capture_mode(int *mode);

/* ---- graphs --------------------------------------------------------------- */

int eagle_cuda_graph_create(eagle_cudaGraph_t *graph, unsigned int flags);
int eagle_cuda_graph_destroy(eagle_cudaGraph_t graph);
/* nodes may be NULL to query the count; *count in: capacity, out: total. */
int eagle_cuda_graph_get_nodes(eagle_cudaGraph_t graph, eagle_cudaGraphNode_t *nodes,
                               size_t *count);
/* The child graph is cloned into the new node; the caller keeps it. */
int eagle_cuda_graph_add_child_graph_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                          const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                          eagle_cudaGraph_t child);
int eagle_cuda_child_graph_node_get_graph(eagle_cudaGraphNode_t node, eagle_cudaGraph_t *child);
/* Edges from[i] -> to[i] (default edge data). */
int eagle_cuda_graph_add_dependencies(eagle_cudaGraph_t graph, const eagle_cudaGraphNode_t *from,
                                      const eagle_cudaGraphNode_t *to, size_t n);

/* cudaGraphInstantiateWithParams. On failure *err_node names the node that
 * failed (NULL if none) and *result the cudaGraphInstantiateResult; either
 * pointer may be NULL. upload_stream is used with
 * EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD. */
int eagle_cuda_graph_instantiate(eagle_cudaGraphExec_t *exec, eagle_cudaGraph_t graph,
                                 unsigned long long flags, eagle_cudaStream_t upload_stream,
                                 eagle_cudaGraphNode_t *err_node, int *result);
int eagle_cuda_graph_exec_destroy(eagle_cudaGraphExec_t exec);
int eagle_cuda_graph_upload(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream);
int eagle_cuda_graph_launch(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream);
/* n launches in a row (one cudaGraphLaunch each); stops at the first error
 * and stores how many were issued in *done (may be NULL). */
int eagle_cuda_graph_launch_n(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream,
                              long long n, long long *done);
/* cudaGraphExecUpdate; info may be NULL. */
int eagle_cuda_graph_exec_update(eagle_cudaGraphExec_t exec, eagle_cudaGraph_t graph,
                                 eagle_cudaGraphExecUpdateResultInfo *info);
int eagle_cuda_graph_exec_child_graph_node_set_params(eagle_cudaGraphExec_t exec,
                                                      eagle_cudaGraphNode_t node,
                                                      eagle_cudaGraph_t child);

/* ---- kernels -------------------------------------------------------------- */

int eagle_cuda_launch_kernel(const void *func, eagle_dim3 grid, eagle_dim3 block, void **args,
                             size_t shared_mem, eagle_cudaStream_t stream);
/* The returned kernelParams/extra belong to the node (read, never write). */
int eagle_cuda_kernel_node_get_params(eagle_cudaGraphNode_t node, eagle_cudaKernelNodeParams *p);
int eagle_cuda_kernel_node_set_params(eagle_cudaGraphNode_t node,
                                      const eagle_cudaKernelNodeParams *p);
int eagle_cuda_graph_exec_kernel_node_set_params(eagle_cudaGraphExec_t exec,
                                                 eagle_cudaGraphNode_t node,
                                                 const eagle_cudaKernelNodeParams *p);

/* Retune one sized kernel node of an instantiated graph: read the node's
 * parameters, replace argument size_index (of nargs) by *size_value and the
 * grid by `grid`, and patch them into exec. The node must be a top-level
 * kernel node of the graph exec was instantiated from. Uses the driver API
 * (cuGraphKernelNodeGetParams / cuGraphExecKernelNodeSetParams, reached via
 * cudaGetDriverEntryPoint) when available, since the runtime API cannot
 * describe kernels loaded through cuModuleLoad (CuPy RawKernel); falls back
 * to the runtime API. Graph nodes keep their recorded parameters; only exec
 * changes, so retuning again starts from the recording. */
int eagle_cuda_retune_kernel_node(eagle_cudaGraphExec_t exec, eagle_cudaGraphNode_t node,
                                  unsigned int nargs, unsigned int size_index,
                                  const void *size_value, eagle_dim3 grid);
/* 1 if retune will use the driver API, 0 if the runtime API, <0 status. */
int eagle_cuda_retune_uses_driver(void);
/* size_value may be NULL: then only the grid is patched (kernels that read
 * the logical size from device memory, eagle's SIZE_PTR and the compaction
 * kernels); size_index is ignored then. */

/* ---- device memory (optional symbols: EAGLE_CUDA_ERROR_MISSING_SYMBOL if absent) -- */

/* cudaMalloc / cudaFree. */
int eagle_cuda_malloc(void **ptr, size_t bytes);
int eagle_cuda_free(void *ptr);
/* cudaMemcpyAsync with cudaMemcpyDefault (unified addressing decides the
 * direction) on `stream`; not while `stream` is capturing. */
int eagle_cuda_memcpy_async(void *dst, const void *src, size_t bytes, eagle_cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EAGLE_CUDA_SHIM_H */
