# cython: language_level=3
"""Cython declarations of eagle's CUDA driver shim (csrc/include/eagle/cuda_shim.h)
and of the extension types in eagle.cuda._shim, for ``cimport eagle.cuda._shim``.

Every shim function is nogil and returns an int status (0 = success, >0 the
driver's CUresult, <0 an eagle shim code); ``check`` turns a status into
``eagle.CudaError``.
"""

cdef extern from "eagle/cuda_shim.h" nogil:
    ctypedef void *eagle_cudaStream_t
    ctypedef void *eagle_cudaEvent_t
    ctypedef void *eagle_cudaGraph_t
    ctypedef void *eagle_cudaGraphExec_t
    ctypedef void *eagle_cudaGraphNode_t

    ctypedef struct eagle_dim3:
        unsigned int x, y, z

    ctypedef void *eagle_CUfunction

    ctypedef struct eagle_CUDA_KERNEL_NODE_PARAMS_v2:
        void *func
        unsigned int gridDimX, gridDimY, gridDimZ
        unsigned int blockDimX, blockDimY, blockDimZ
        unsigned int sharedMemBytes
        void **kernelParams
        void **extra
        void *kern
        void *ctx

    ctypedef struct eagle_CUgraphExecUpdateResultInfo:
        int result
        eagle_cudaGraphNode_t errorNode
        eagle_cudaGraphNode_t errorFromNode

    ctypedef struct eagle_cuda_sized:
        eagle_cudaGraphNode_t node
        eagle_CUDA_KERNEL_NODE_PARAMS_v2 params
        unsigned int nargs
        unsigned int size_index
        unsigned int size_bytes
        size_t *sizes
        unsigned char *bytes
        void **argv

    enum:
        EAGLE_CUDA_CAPTURE_MODE_GLOBAL
        EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL
        EAGLE_CUDA_CAPTURE_MODE_RELAXED
        EAGLE_CUDA_CAPTURE_STATUS_NONE
        EAGLE_CUDA_CAPTURE_STATUS_ACTIVE
        EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED

    unsigned int EAGLE_CUDA_STREAM_NON_BLOCKING
    unsigned int EAGLE_CUDA_EVENT_DISABLE_TIMING
    unsigned long long EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
    int EAGLE_CUDA_ERROR_NOT_LOADED
    int EAGLE_CUDA_ERROR_MISSING_SYMBOL
    int EAGLE_CUDA_ERROR_BAD_ARGUMENT
    int EAGLE_CUDA_ERROR_UNSUPPORTED_NODE
    int EAGLE_CUDA_ERROR_TOO_OLD

    int eagle_cuda_load(char *errbuf, size_t n)
    int eagle_cuda_is_loaded()
    const char *eagle_cuda_library()
    int eagle_cuda_driver_version(int *version)
    int eagle_cuda_api_version(int *version)
    int eagle_cuda_has(const char *feature)
    int eagle_cuda_device_name(int device, char *buf, int n)
    void eagle_cuda_status_text(int status, const char **name, const char **text)

    int eagle_cuda_get_device_count(int *count)
    int eagle_cuda_get_device(int *device)
    int eagle_cuda_set_device(int device)
    int eagle_cuda_ctx_get_current(void **ctx)
    int eagle_cuda_ctx_set_current(void *ctx)
    int eagle_cuda_device_synchronize()

    int eagle_cuda_stream_create(eagle_cudaStream_t *stream, unsigned int flags)
    int eagle_cuda_stream_destroy(eagle_cudaStream_t stream)
    int eagle_cuda_stream_synchronize(eagle_cudaStream_t stream)
    int EAGLE_CUDA_ERR_NOT_READY
    int eagle_cuda_stream_query(eagle_cudaStream_t stream)
    int eagle_cuda_event_query(eagle_cudaEvent_t event)
    int eagle_cuda_stream_wait_for(eagle_cudaStream_t stream, long long budget_ns,
                                   long long *backoff_ns, int *ready)
    int eagle_cuda_event_wait_for(eagle_cudaEvent_t event, long long budget_ns,
                                  long long *backoff_ns, int *ready)
    int eagle_cuda_event_create(eagle_cudaEvent_t *event, unsigned int flags)
    int eagle_cuda_event_destroy(eagle_cudaEvent_t event)
    int eagle_cuda_event_record(eagle_cudaEvent_t event, eagle_cudaStream_t stream)
    int eagle_cuda_event_synchronize(eagle_cudaEvent_t event)
    int eagle_cuda_stream_wait_event(eagle_cudaStream_t stream, eagle_cudaEvent_t event,
                                     unsigned int flags)

    int eagle_cuda_stream_begin_capture(eagle_cudaStream_t stream, int mode)
    int eagle_cuda_stream_end_capture(eagle_cudaStream_t stream, eagle_cudaGraph_t *graph)
    int eagle_cuda_stream_is_capturing(eagle_cudaStream_t stream, int *capture_status)
    int eagle_cuda_stream_capture_info(eagle_cudaStream_t stream, int *capture_status,
                                       unsigned long long *id, eagle_cudaGraph_t *graph,
                                       const eagle_cudaGraphNode_t **deps, size_t *num_deps)
    int eagle_cuda_stream_last_node(eagle_cudaStream_t stream, eagle_cudaGraphNode_t *node)
    int eagle_cuda_thread_exchange_capture_mode(int *mode)
    int eagle_cuda_stream_begin_capture_to_graph(eagle_cudaStream_t stream, eagle_cudaGraph_t graph,
                                                 int mode)

    int eagle_cuda_graph_create(eagle_cudaGraph_t *graph, unsigned int flags)
    int eagle_cuda_graph_destroy(eagle_cudaGraph_t graph)
    int eagle_cuda_graph_get_nodes(eagle_cudaGraph_t graph, eagle_cudaGraphNode_t *nodes,
                                   size_t *count)
    int eagle_cuda_graph_add_child_graph_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                              const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                              eagle_cudaGraph_t child)
    int eagle_cuda_child_graph_node_get_graph(eagle_cudaGraphNode_t node, eagle_cudaGraph_t *child)
    int eagle_cuda_graph_add_dependencies(eagle_cudaGraph_t graph,
                                          const eagle_cudaGraphNode_t *src,
                                          const eagle_cudaGraphNode_t *dst, size_t n)
    int eagle_cuda_graph_add_kernel_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                         const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                         eagle_CUfunction func, eagle_dim3 grid, eagle_dim3 block,
                                         unsigned int shared_mem, void **args)
    int eagle_cuda_graph_add_conditional_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                              const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                              int type, unsigned int initial,
                                              unsigned long long *handle, eagle_cudaGraph_t *body)
    int eagle_cuda_stream_set_capture_deps(eagle_cudaStream_t stream,
                                           const eagle_cudaGraphNode_t *nodes, size_t n)
    int eagle_cuda_graph_add_while_node(eagle_cudaGraphNode_t *node, eagle_cudaGraph_t graph,
                                        const eagle_cudaGraphNode_t *deps, size_t num_deps,
                                        unsigned int initial, unsigned long long *handle,
                                        eagle_cudaGraph_t *body)
    int eagle_cuda_graph_instantiate(eagle_cudaGraphExec_t *exec, eagle_cudaGraph_t graph,
                                     unsigned long long flags, eagle_cudaStream_t upload_stream,
                                     eagle_cudaGraphNode_t *err_node, int *result)
    int eagle_cuda_graph_exec_destroy(eagle_cudaGraphExec_t exec)
    int eagle_cuda_graph_upload(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream)
    int eagle_cuda_graph_launch(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream)
    int eagle_cuda_graph_launch_n(eagle_cudaGraphExec_t exec, eagle_cudaStream_t stream,
                                  long long n, long long *done)
    int eagle_cuda_graph_exec_update(eagle_cudaGraphExec_t exec, eagle_cudaGraph_t graph,
                                     eagle_CUgraphExecUpdateResultInfo *info)

    int eagle_cuda_launch_kernel(eagle_CUfunction func, eagle_dim3 grid, eagle_dim3 block,
                                 void **args, size_t shared_mem, eagle_cudaStream_t stream)
    int eagle_cuda_kernel_node_get_params(eagle_cudaGraphNode_t node,
                                          eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p)
    int eagle_cuda_kernel_node_set_params(eagle_cudaGraphNode_t node,
                                          const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p)
    int eagle_cuda_graph_exec_kernel_node_set_params(eagle_cudaGraphExec_t exec,
                                                     eagle_cudaGraphNode_t node,
                                                     const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p)
    int eagle_cuda_kernel_node_name(eagle_cudaGraphNode_t node, const char **name)
    int eagle_cuda_kernel_param_sizes(eagle_CUfunction func, unsigned int *count, size_t *sizes,
                                      unsigned int cap)
    int eagle_cuda_sized_init(eagle_cuda_sized *k, eagle_cudaGraphNode_t node, unsigned int nargs,
                              const size_t *sizes, unsigned int size_index, unsigned int size_bytes)
    int eagle_cuda_sized_refresh(eagle_cuda_sized *k, eagle_cudaGraphNode_t src)
    int eagle_cuda_sized_apply(eagle_cudaGraphExec_t exec, eagle_cuda_sized *k, const void *value,
                               eagle_dim3 grid)
    int eagle_cuda_sized_apply_to_graph(eagle_cuda_sized *k, const void *value, eagle_dim3 grid)
    void eagle_cuda_sized_free(eagle_cuda_sized *k)

    int eagle_cuda_malloc(void **ptr, size_t nbytes)
    int eagle_cuda_free(void *ptr)
    int eagle_cuda_host_alloc_mapped(void **host, unsigned long long *dev, size_t nbytes)
    int eagle_cuda_host_free(void *host)
    int eagle_cuda_memcpy_async(void *dst, const void *src, size_t nbytes,
                                eagle_cudaStream_t stream)


cdef int check(int status, str detail=*) except -1


cdef class Stream:
    cdef eagle_cudaStream_t handle
    cdef bint owned
    cdef object owner


cdef class Event:
    cdef eagle_cudaEvent_t handle


cdef class Graph:
    cdef eagle_cudaGraph_t handle
    cdef bint owned

    @staticmethod
    cdef Graph _own(eagle_cudaGraph_t g)


# one registered sized kernel node of a GraphExec
ctypedef struct eagle_sized_kernel:
    eagle_cuda_sized k       # eagle's own copy of the node's launch and arguments
    int size_kind            # 0: int32, 1: int64, 2: uint32, 3: uint64, 4: none (grid only)
    unsigned long long per_block   # samples one block covers (block.x * items per thread)
    eagle_dim3 block_grid    # grid.y / grid.z kept from the recording (x is recomputed)
    long long value_i64
    unsigned long long value_u64
    int value_i32
    unsigned int value_u32
    bint in_body             # a node of a conditional body / child graph: patched in the graph
    long long limit          # its node's extent: it gets min(n, limit) samples (< 0: no limit)


cdef class GraphExec:
    cdef eagle_cudaGraphExec_t handle
    cdef readonly Graph graph      # the graph instantiated from (its node handles name nodes)
    cdef readonly list updated_from  # the last graph update() took arguments from (kept alive)
    cdef eagle_sized_kernel *sized
    cdef Py_ssize_t n_sized
    cdef Py_ssize_t cap_sized
    cdef object _lock

    cdef int _alive(self) except -1
