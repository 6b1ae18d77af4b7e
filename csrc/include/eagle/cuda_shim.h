/* eagle CUDA shim — the C face, over the CUDA DRIVER (libcuda.so.1).
 *
 * eagle never links against CUDA. This shim dlopens the driver library
 * (libcuda.so.1: one per process, present wherever an NVIDIA driver is, and
 * the same one CuPy's, PyTorch's and numba's runtimes use), asks it for its
 * version (cuDriverGetVersion) and resolves every entry point with
 * cuGetProcAddress_v2, each at the CUDA version whose ABI eagle's function type
 * has (as cuda-python does), choosing by the driver's version between the forms
 * of a symbol that changed (e.g. cuStreamGetCaptureInfo: the CUDA 12.0-12.2 form
 * below 12.3, the 7-argument form from 12.3 and in 13.x). Asking at the
 * driver's own version would hand out the newest form of every symbol (at 13.0
 * cuCtxSynchronize and cuCtxGetDevice take a context).
 * No CUDA runtime library is needed.
 *
 * Context: every call works on the calling thread's current context; when a
 * thread has none, the shim makes the primary context of the device chosen
 * with eagle_cuda_set_device() (device 0 by default) current
 * (cuDevicePrimaryCtxRetain + cuCtxSetCurrent), which is the context the CUDA
 * runtime (CuPy's included) uses. So the streams, events and graphs here are
 * the runtime's objects: cudaStream_t == CUstream, cudaGraph_t == CUgraph,
 * cudaGraphNode_t == CUgraphNode, cudaGraphExec_t == CUgraphExec,
 * cudaEvent_t == CUevent.
 *
 * Library: the path in EAGLE_LIBCUDA when set (the tests point it at a CPU
 * stand-in, tests/doubles/fake_libcuda.c), else libcuda.so.1.
 *
 * Types are declared here under an eagle_ prefix with the exact ABI of the
 * driver's (tests/cuda/test_shim_standin.py checks sizes and offsets against
 * /usr/local/cuda/include/cuda.h), so this header can sit beside cuda.h.
 *
 * Status: every function returns an int: 0 success; > 0 the CUresult the
 * driver returned; < 0 one of the EAGLE_CUDA_ERROR_* codes. Errors after a
 * kernel fault are sticky in CUDA: every later call returns the same error.
 * eagle_cuda_status_text() names any status.
 *
 * Thread-safety: loading is serialized and publishes the function table with
 * release/acquire order; afterwards the table is read-only (but for the
 * default device, a relaxed atomic) and every function may be called from any
 * thread (CUDA's rules
 * for the objects passed apply). No function touches Python; all may run
 * without the GIL. Requires a CUDA 12.0+ driver; newer features (conditional
 * nodes: 12.4, cuFuncGetParamInfo: 12.4) report EAGLE_CUDA_ERROR_TOO_OLD
 * naming the driver version when it lacks them.
 */
#ifndef EAGLE_CUDA_SHIM_H
#define EAGLE_CUDA_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types (ABI-identical to the driver's) ------------------------------ */

typedef void *eagle_cudaStream_t;    /* CUstream    == cudaStream_t    */
typedef void *eagle_cudaEvent_t;     /* CUevent     == cudaEvent_t     */
typedef void *eagle_cudaGraph_t;     /* CUgraph     == cudaGraph_t     */
typedef void *eagle_cudaGraphExec_t; /* CUgraphExec == cudaGraphExec_t */
typedef void *eagle_cudaGraphNode_t; /* CUgraphNode == cudaGraphNode_t */
typedef void *eagle_CUfunction;      /* CUfunction                     */
typedef unsigned long long eagle_CUdeviceptr; /* CUdeviceptr (64-bit)  */

typedef struct eagle_dim3 {
    unsigned int x, y, z;
} eagle_dim3;

/* CUDA_KERNEL_NODE_PARAMS_v2 */
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

/* CUDA_GRAPH_INSTANTIATE_PARAMS */
typedef struct eagle_CUDA_GRAPH_INSTANTIATE_PARAMS {
    unsigned long long flags;
    eagle_cudaStream_t hUploadStream;
    eagle_cudaGraphNode_t hErrNode_out;
    int result_out; /* CUgraphInstantiateResult */
} eagle_CUDA_GRAPH_INSTANTIATE_PARAMS;

/* CUgraphExecUpdateResultInfo */
typedef struct eagle_CUgraphExecUpdateResultInfo {
    int result; /* CUgraphExecUpdateResult */
    eagle_cudaGraphNode_t errorNode;
    eagle_cudaGraphNode_t errorFromNode;
} eagle_CUgraphExecUpdateResultInfo;

/* CUgraphEdgeData (CUDA 12.3+) */
typedef struct eagle_CUgraphEdgeData {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type;
    unsigned char reserved[5];
} eagle_CUgraphEdgeData;

/* CUDA_CONDITIONAL_NODE_PARAMS (CUDA 12.3+) */
typedef struct eagle_CUDA_CONDITIONAL_NODE_PARAMS {
    unsigned long long handle; /* CUgraphConditionalHandle */
    int type;                  /* CUgraphConditionalNodeType */
    unsigned int size;
    eagle_cudaGraph_t *phGraph_out;
    void *ctx; /* CUcontext */
} eagle_CUDA_CONDITIONAL_NODE_PARAMS;

/* CUgraphNodeParams (CUDA 12.2+): 256 bytes, only the conditional member used */
typedef struct eagle_CUgraphNodeParams {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        eagle_CUDA_CONDITIONAL_NODE_PARAMS conditional;
    } u;
    long long reserved2;
} eagle_CUgraphNodeParams;

/* ---- constants (values of the real enums / macros) ---------------------- */

enum {
    EAGLE_CUDA_CAPTURE_MODE_GLOBAL = 0,       /* CU_STREAM_CAPTURE_MODE_GLOBAL       */
    EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL = 1, /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */
    EAGLE_CUDA_CAPTURE_MODE_RELAXED = 2       /* CU_STREAM_CAPTURE_MODE_RELAXED      */
};
enum {
    EAGLE_CUDA_CAPTURE_STATUS_NONE = 0,
    EAGLE_CUDA_CAPTURE_STATUS_ACTIVE = 1,
    EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED = 2
};
#define EAGLE_CUDA_STREAM_DEFAULT 0x00u       /* CU_STREAM_DEFAULT          */
#define EAGLE_CUDA_STREAM_NON_BLOCKING 0x01u  /* CU_STREAM_NON_BLOCKING     */
#define EAGLE_CUDA_EVENT_DEFAULT 0x00u        /* CU_EVENT_DEFAULT           */
#define EAGLE_CUDA_EVENT_DISABLE_TIMING 0x02u /* CU_EVENT_DISABLE_TIMING    */
#define EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2ull /* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD */
#define EAGLE_CUDA_GRAPH_NODE_TYPE_CONDITIONAL 13     /* CU_GRAPH_NODE_TYPE_CONDITIONAL */
#define EAGLE_CUDA_GRAPH_COND_TYPE_IF 0
#define EAGLE_CUDA_GRAPH_COND_TYPE_WHILE 1
#define EAGLE_CUDA_GRAPH_COND_ASSIGN_DEFAULT 1u
#define EAGLE_CUDA_STREAM_SET_CAPTURE_DEPENDENCIES 1u /* CU_STREAM_SET_CAPTURE_DEPENDENCIES */
#define EAGLE_CUDA_MEMHOSTALLOC_PORTABLE 0x01u  /* CU_MEMHOSTALLOC_PORTABLE  */
#define EAGLE_CUDA_MEMHOSTALLOC_DEVICEMAP 0x02u /* CU_MEMHOSTALLOC_DEVICEMAP */

/* The driver's error codes the shim itself produces or tests for. */
#define EAGLE_CUDA_SUCCESS 0
#define EAGLE_CUDA_ERR_INVALID_VALUE 1   /* CUDA_ERROR_INVALID_VALUE  */
#define EAGLE_CUDA_ERR_NO_DEVICE 100     /* CUDA_ERROR_NO_DEVICE      */
#define EAGLE_CUDA_ERR_NOT_READY 600     /* CUDA_ERROR_NOT_READY      */
#define EAGLE_CUDA_ERR_NOT_FOUND 500     /* CUDA_ERROR_NOT_FOUND      */
#define EAGLE_CUDA_ERR_NOT_SUPPORTED 801 /* CUDA_ERROR_NOT_SUPPORTED  */
#define EAGLE_CUDA_ERR_CAPTURE_INVALIDATED 901 /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */

/* eagle's own statuses (negative, never produced by CUDA). */
#define EAGLE_CUDA_ERROR_NOT_LOADED (-1)     /* no CUDA driver library found            */
#define EAGLE_CUDA_ERROR_MISSING_SYMBOL (-2) /* the driver lacks a function eagle needs */
#define EAGLE_CUDA_ERROR_BAD_ARGUMENT (-3)   /* eagle-level argument check failed       */
#define EAGLE_CUDA_ERROR_UNSUPPORTED_NODE (-4) /* kernel node passes args via `extra`  */
#define EAGLE_CUDA_ERROR_TOO_OLD (-5)        /* the driver is too old for this feature  */

/* ---- loading and errors ------------------------------------------------- */

/* Load the driver (idempotent; cached once it succeeded). On failure writes a
 * sentence to errbuf (may be NULL):
 *   "no CUDA driver found (tried ...)"                -> EAGLE_CUDA_ERROR_NOT_LOADED
 *   "CUDA driver <path> (version V) found but cuInit failed: <name>: <text>"
 *                                                     -> that CUresult
 *   "... lacks <symbol>" / "... is older than CUDA 12.0" -> MISSING_SYMBOL / TOO_OLD
 * Every other function loads on first use. */
int eagle_cuda_load(char *errbuf, size_t errbuf_size);
int eagle_cuda_is_loaded(void);
/* Path of the bound driver library ("" if none). Static storage. */
const char *eagle_cuda_library(void);
/* cuDriverGetVersion, e.g. 13000; also before a successful load when the
 * library was found (0 then if not). */
int eagle_cuda_driver_version(int *version);
/* The CUDA version whose entry points the shim resolved (min(driver, 13000)). */
int eagle_cuda_api_version(int *version);
/* 1 if the driver has the optional feature, else 0:
 * "conditional" (conditional nodes, 12.4+), "param_info" (cuFuncGetParamInfo,
 * 12.4+), "capture_to_graph" (cuStreamBeginCaptureToGraph, 12.3+). */
int eagle_cuda_has(const char *feature);

/* Name and sentence for any status (the driver's cuGetErrorName/String when
 * loaded). Never NULL; static storage. Safe without a driver. */
void eagle_cuda_status_text(int status, const char **name, const char **text);

/* ---- devices, contexts, streams, events --------------------------------- */

int eagle_cuda_get_device_count(int *count);
/* The current context's device (after making one current if none was). */
int eagle_cuda_get_device(int *device);
/* Make `device`'s primary context current on this thread (and the default
 * for threads that have none). */
int eagle_cuda_set_device(int device);
/* This thread's current context (cuCtxGetCurrent; NULL if none) and making one current
 * (cuCtxSetCurrent) without changing the default device: what the cuda backend saves and
 * restores around its calls so a graph runs in the context it was built in. */
int eagle_cuda_ctx_get_current(void **ctx);
int eagle_cuda_ctx_set_current(void *ctx);
int eagle_cuda_device_synchronize(void); /* cuCtxSynchronize */
/* Device name (cuDeviceGetName) into buf. */
int eagle_cuda_device_name(int device, char *buf, int n);

int eagle_cuda_stream_create(eagle_cudaStream_t *stream, unsigned int flags);
int eagle_cuda_stream_destroy(eagle_cudaStream_t stream);
int eagle_cuda_stream_synchronize(eagle_cudaStream_t stream);
/* cuStreamQuery / cuEventQuery: 0 when all the work is done, EAGLE_CUDA_ERR_NOT_READY
 * (600) while some is still running or queued, else the error. */
int eagle_cuda_stream_query(eagle_cudaStream_t stream);
int eagle_cuda_event_query(eagle_cudaEvent_t event);
/* A polling wait that gives control back: queries until the work is done (*ready = 1)
 * or `budget_ns` passed (*ready = 0, status 0), spinning briefly and then sleeping
 * with back-off to 1 ms (*backoff_ns, may be NULL, carries the sleep from one call to
 * the next; 0 starts over). What the caller does between calls (Python: check for
 * signals) is its own; a signal cuts the current sleep short. */
int eagle_cuda_stream_wait_for(eagle_cudaStream_t stream, long long budget_ns,
                               long long *backoff_ns, int *ready);
int eagle_cuda_event_wait_for(eagle_cudaEvent_t event, long long budget_ns,
                              long long *backoff_ns, int *ready);

int eagle_cuda_event_create(eagle_cudaEvent_t *event, unsigned int flags);
int eagle_cuda_event_destroy(eagle_cudaEvent_t event);
int eagle_cuda_event_record(eagle_cudaEvent_t event, eagle_cudaStream_t stream);
int eagle_cuda_event_synchronize(eagle_cudaEvent_t event);
int eagle_cuda_stream_wait_event(eagle_cudaStream_t stream, eagle_cudaEvent_t event,
                                 unsigned int flags);

/* ---- capture -------------------------------------------------------------- */

int eagle_cuda_stream_begin_capture(eagle_cudaStream_t stream, int mode);
/* Always call after begin, also on error: a capture left open poisons the
 * stream. *graph is NULL when the capture was invalidated. */
int eagle_cuda_stream_end_capture(eagle_cudaStream_t stream, eagle_cudaGraph_t *graph);
int eagle_cuda_stream_is_capturing(eagle_cudaStream_t stream, int *capture_status);
/* cuStreamGetCaptureInfo (the form the driver's version calls for). Outputs
 * may be NULL. The dependency array belongs to the driver and is valid until
 * the next capture operation on the stream. */
int eagle_cuda_stream_capture_info(eagle_cudaStream_t stream, int *capture_status,
                                   unsigned long long *id, eagle_cudaGraph_t *graph,
                                   const eagle_cudaGraphNode_t **deps, size_t *num_deps);
/* The node the last captured operation added (the stream's single current
 * dependency); EAGLE_CUDA_ERROR_BAD_ARGUMENT if there is not exactly one. */
int eagle_cuda_stream_last_node(eagle_cudaStream_t stream, eagle_cudaGraphNode_t *node);
int eagle_cuda_thread_exchange_capture_mode(int *mode);
/* cuStreamBeginCaptureToGraph (12.3+): capture into an existing graph (a
 * conditional node's body), after no dependencies. */
int eagle_cuda_stream_begin_capture_to_graph(eagle_cudaStream_t stream, eagle_cudaGraph_t graph,
                                             int mode);

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
/* A kernel node added directly to a graph (cuGraphAddKernelNode). */
int eagle_cuda_graph_add_kernel_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                     const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                     eagle_CUfunction func, eagle_dim3 grid, eagle_dim3 block,
                                     unsigned int shared_mem, void **args);
/* A WHILE conditional node (12.4+): creates the condition handle (default
 * value `initial`, assigned at each launch) and the node; *body is the
 * node's body graph (owned by the node). EAGLE_CUDA_ERROR_TOO_OLD below 12.4. */
int eagle_cuda_graph_add_while_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                    const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                    unsigned int initial, unsigned long long *handle,
                                    eagle_cudaGraph_t *body);

/* A conditional node (12.4+) of `type` (EAGLE_CUDA_GRAPH_COND_TYPE_IF / _WHILE):
 * creates its handle on `graph` (default `initial`, assigned at each launch) and
 * the node; *body is its body graph (owned by the node; capture into it with
 * eagle_cuda_stream_begin_capture_to_graph). EAGLE_CUDA_ERROR_TOO_OLD below 12.4. */
int eagle_cuda_graph_add_conditional_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                          const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                          int type, unsigned int initial,
                                          unsigned long long *handle, eagle_cudaGraph_t *body);
/* cuStreamUpdateCaptureDependencies (CU_STREAM_SET_CAPTURE_DEPENDENCIES): the
 * capturing stream's next work follows `nodes` (nodes added to the capture's
 * graph by hand: a conditional or child-graph node). */
int eagle_cuda_stream_set_capture_deps(eagle_cudaStream_t stream,
                                       const eagle_cudaGraphNode_t *nodes, size_t n);

/* cuGraphInstantiateWithParams. On failure *err_node names the node that
 * failed (NULL if none) and *result the CUgraphInstantiateResult. */
int eagle_cuda_graph_instantiate(eagle_cudaGraphExec_t *exec, eagle_cudaGraph_t graph,
                                 unsigned long long flags, eagle_cudaStream_t upload_stream,
                                 eagle_cudaGraphNode_t *err_node, int *result);
int eagle_cuda_graph_exec_destroy(eagle_cudaGraphExec_t exec);
int eagle_cuda_graph_upload(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream);
int eagle_cuda_graph_launch(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream);
/* n launches in a row; stops at the first error; *done = launches issued. */
int eagle_cuda_graph_launch_n(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream,
                              long long n, long long *done);
/* cuGraphExecUpdate; info may be NULL. */
int eagle_cuda_graph_exec_update(eagle_cudaGraphExec_t exec, eagle_cudaGraph_t graph,
                                 eagle_CUgraphExecUpdateResultInfo *info);
int eagle_cuda_graph_exec_child_graph_node_set_params(eagle_cudaGraphExec_t exec,
                                                      eagle_cudaGraphNode_t node,
                                                      eagle_cudaGraph_t child);

/* ---- kernels -------------------------------------------------------------- */

/* cuLaunchKernel: func is a CUfunction (CuPy's Function.ptr, cuModuleGetFunction,
 * cudaGetFuncBySymbol). */
int eagle_cuda_launch_kernel(eagle_CUfunction func, eagle_dim3 grid, eagle_dim3 block,
                             void **args, size_t shared_mem, eagle_cudaStream_t stream);
/* The returned kernelParams/extra belong to the node (read, never write). */
int eagle_cuda_kernel_node_get_params(eagle_cudaGraphNode_t node,
                                      eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p);
int eagle_cuda_kernel_node_set_params(eagle_cudaGraphNode_t node,
                                      const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p);
int eagle_cuda_graph_exec_kernel_node_set_params(eagle_cudaGraphExec_t exec,
                                                 eagle_cudaGraphNode_t node,
                                                 const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p);
/* The name of a kernel node's kernel (cuFuncGetName / cuKernelGetName, 12.3+;
 * static storage of the driver); the node may hold a CUfunction or a CUkernel
 * (in func, or in kern with func NULL). The driver's error when the node is not
 * a kernel node; EAGLE_CUDA_ERROR_TOO_OLD for a kernel node on a driver without
 * cuFuncGetName (12.0-12.2). */
int eagle_cuda_kernel_node_name(eagle_cudaGraphNode_t node, const char **name);
/* The kernel's parameters (cuFuncGetParamInfo, 12.4+): *count of them, and
 * up to cap sizes in bytes. func may also be a CUkernel (cuKernelGetFunction
 * gives the current context's CUfunction). EAGLE_CUDA_ERROR_TOO_OLD when the
 * driver lacks it. */
int eagle_cuda_kernel_param_sizes(eagle_CUfunction func, unsigned int *count, size_t *sizes,
                                  unsigned int cap);

/* A sized kernel node: eagle's own copy of a kernel node's launch and
 * arguments (each copied by its size), patched into an executable graph by
 * eagle_cuda_sized_apply with a new grid and size argument. The copy never
 * reads the node again, so it stays right after the node's graph changed or
 * an exec update replaced the arguments (eagle_cuda_sized_refresh). */
typedef struct eagle_cuda_sized {
    eagle_cudaGraphNode_t node;
    eagle_CUDA_KERNEL_NODE_PARAMS_v2 params; /* kernelParams -> argv below */
    unsigned int nargs;
    unsigned int size_index; /* ignored when size_bytes == 0 */
    unsigned int size_bytes; /* 4, 8, or 0 (grid only) */
    size_t *sizes;           /* nargs sizes */
    unsigned char *bytes;    /* the arguments, each at an 8-aligned offset */
    void **argv;             /* nargs pointers into bytes */
} eagle_cuda_sized;

/* Copy `node`'s launch and arguments into *k. `sizes` (nargs entries, may be
 * NULL = 8 bytes each) gives each argument's size; when the driver has
 * cuFuncGetParamInfo the kernel's real sizes are used and a count or size
 * parameter width that disagrees fails with EAGLE_CUDA_ERROR_BAD_ARGUMENT
 * (eagle_cuda_kernel_param_sizes says what the kernel takes). */
int eagle_cuda_sized_init(eagle_cuda_sized *k, eagle_cudaGraphNode_t node, unsigned int nargs,
                          const size_t *sizes, unsigned int size_index, unsigned int size_bytes);
/* Take the arguments and launch of `from` (a node of a graph an exec was
 * updated from) while keeping k->node (the node of the instantiated graph). */
int eagle_cuda_sized_refresh(eagle_cuda_sized *k, eagle_cudaGraphNode_t from);
/* Patch exec: grid, and the size argument set to *value (size_bytes wide;
 * value NULL or size_bytes 0: grid only). */
int eagle_cuda_sized_apply(eagle_cudaGraphExec_t exec, eagle_cuda_sized *k, const void *value,
                           eagle_dim3 grid);
/* The same patch written into the node of its (non-executable) graph with
 * cuGraphKernelNodeSetParams: for kernel nodes inside conditional bodies and
 * child graphs, which per-node exec updates cannot name; a cuGraphExecUpdate
 * of the whole graph then carries them into the exec. */
int eagle_cuda_sized_apply_to_graph(eagle_cuda_sized *k, const void *value, eagle_dim3 grid);
void eagle_cuda_sized_free(eagle_cuda_sized *k);

/* ---- device memory -------------------------------------------------------- */

int eagle_cuda_malloc(void **ptr, size_t bytes);
int eagle_cuda_free(void *ptr);
/* Host-mapped pinned memory (cuMemHostAlloc PORTABLE | DEVICEMAP, zeroed) and the
 * address kernels read it at (cuMemHostGetDevicePointer): the host writes it while the
 * device runs, with no stream and no copy (eagle's stop flag, read by its loop
 * condition kernel). Free with eagle_cuda_host_free (cuMemFreeHost). */
int eagle_cuda_host_alloc_mapped(void **host, eagle_CUdeviceptr *dev, size_t bytes);
int eagle_cuda_host_free(void *host);
/* cuMemcpyAsync (unified addressing decides the direction); not while
 * `stream` captures. */
int eagle_cuda_memcpy_async(void *dst, const void *src, size_t bytes, eagle_cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EAGLE_CUDA_SHIM_H */
