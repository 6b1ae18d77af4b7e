# cython: language_level=3
"""eagle.cuda._driver for ``cimport``: the types and constants of eagle's C shim over the CUDA
driver (csrc/include/eagle/cuda_shim.h) and the wrappers every other CUDA module calls.

The shim's C code is linked into eagle.cuda._driver alone (the one place the driver is
resolved); the other modules reach it through the wrappers declared here. A checked wrapper
calls the C function without the GIL, then ``check``: a failing status raises
``DriverError``. A raw wrapper (``noexcept nogil``) returns the status, for a loop that runs
without the GIL, a ``__dealloc__``, or a caller that names the failure itself (the failing
graph node of an instantiate, the replay of a launch).
"""

cdef extern from "eagle/cuda_shim.h" nogil:
    ctypedef void *eagle_cudaStream_t
    ctypedef void *eagle_cudaEvent_t
    ctypedef void *eagle_cudaGraph_t
    ctypedef void *eagle_cudaGraphExec_t
    ctypedef void *eagle_cudaGraphNode_t
    ctypedef void *eagle_CUfunction

    ctypedef struct eagle_dim3:
        unsigned int x, y, z

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

    unsigned int EAGLE_CUDA_STREAM_DEFAULT
    unsigned int EAGLE_CUDA_STREAM_NON_BLOCKING
    unsigned int EAGLE_CUDA_EVENT_DEFAULT
    unsigned int EAGLE_CUDA_EVENT_DISABLE_TIMING
    unsigned long long EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
    int EAGLE_CUDA_SUCCESS
    int EAGLE_CUDA_ERR_INVALID_VALUE
    int EAGLE_CUDA_ERR_NO_DEVICE
    int EAGLE_CUDA_ERR_NOT_READY
    int EAGLE_CUDA_ERR_NOT_FOUND
    int EAGLE_CUDA_ERR_NOT_SUPPORTED
    int EAGLE_CUDA_ERR_CAPTURE_INVALIDATED
    int EAGLE_CUDA_ERROR_NOT_LOADED
    int EAGLE_CUDA_ERROR_MISSING_SYMBOL
    int EAGLE_CUDA_ERROR_BAD_ARGUMENT
    int EAGLE_CUDA_ERROR_UNSUPPORTED_NODE
    int EAGLE_CUDA_ERROR_TOO_OLD


# ---- errors ---------------------------------------------------------------------------
cdef int check(int status, str detail=*) except -1

# ---- arguments ------------------------------------------------------------------------
cdef eagle_dim3 dim3(object d) except *
# None, an int handle, or anything with an int ``ptr`` (eagle's and CuPy's streams)
cdef eagle_cudaStream_t stream_handle(object stream) except? NULL

cdef class NodeArray:
    cdef eagle_cudaGraphNode_t *ptr
    cdef size_t n

# ---- streams and events ---------------------------------------------------------------
cdef eagle_cudaStream_t stream_create(unsigned int flags) except? NULL
cdef int stream_destroy(eagle_cudaStream_t s) noexcept nogil
cdef int stream_synchronize(eagle_cudaStream_t s) except -1
cdef bint stream_query(eagle_cudaStream_t s) except -1
cdef int stream_wait_event(eagle_cudaStream_t s, eagle_cudaEvent_t e) except -1
cdef int wait_polling(void *h, bint event) except -1
cdef eagle_cudaEvent_t event_create(unsigned int flags) except? NULL
cdef int event_destroy(eagle_cudaEvent_t e) noexcept nogil
cdef int event_record(eagle_cudaEvent_t e, eagle_cudaStream_t s) except -1
cdef int event_synchronize(eagle_cudaEvent_t e) except -1
cdef bint event_query(eagle_cudaEvent_t e) except -1

# ---- stream capture -------------------------------------------------------------------
cdef int begin_capture(eagle_cudaStream_t s, int mode) except -1
cdef eagle_cudaGraph_t end_capture(eagle_cudaStream_t s) except? NULL
cdef int capture_status(eagle_cudaStream_t s) except -1
cdef int capture_info(eagle_cudaStream_t s, int *status, unsigned long long *capture_id,
                      eagle_cudaGraph_t *graph, const eagle_cudaGraphNode_t **deps,
                      size_t *n) except -1
cdef eagle_cudaGraphNode_t last_node(eagle_cudaStream_t s) except? NULL
cdef int begin_capture_to_graph(eagle_cudaStream_t s, eagle_cudaGraph_t g, int mode) except -1
cdef int set_capture_deps(eagle_cudaStream_t s, NodeArray nodes) except -1

# ---- graphs ---------------------------------------------------------------------------
cdef eagle_cudaGraph_t graph_create() except? NULL
cdef int graph_destroy(eagle_cudaGraph_t g) noexcept nogil
cdef size_t graph_node_count(eagle_cudaGraph_t g) except? 0
cdef list graph_nodes(eagle_cudaGraph_t g)
cdef eagle_cudaGraphNode_t add_child_graph(eagle_cudaGraph_t g, NodeArray deps,
                                           eagle_cudaGraph_t child) except? NULL
cdef eagle_cudaGraph_t child_graph_of(eagle_cudaGraphNode_t node) except? NULL
cdef int add_dependencies(eagle_cudaGraph_t g, NodeArray src, NodeArray dst) except -1
cdef eagle_cudaGraphNode_t add_kernel_node(eagle_cudaGraph_t g, NodeArray deps, eagle_CUfunction f,
                                           eagle_dim3 grid, eagle_dim3 block, unsigned int shared_mem,
                                           void **args) except? NULL
cdef eagle_cudaGraphNode_t add_conditional_node(eagle_cudaGraph_t g, NodeArray deps, int kind,
                                                unsigned int initial, unsigned long long *handle,
                                                eagle_cudaGraph_t *body) except? NULL
cdef int graph_instantiate(eagle_cudaGraphExec_t *exec_, eagle_cudaGraph_t g, unsigned long long flags,
                           eagle_cudaStream_t upload_stream, eagle_cudaGraphNode_t *err_node,
                           int *result) noexcept nogil
cdef int graph_exec_destroy(eagle_cudaGraphExec_t e) noexcept nogil
cdef int graph_upload(eagle_cudaGraphExec_t e, eagle_cudaStream_t s) except -1
cdef int graph_launch_n(eagle_cudaGraphExec_t e, eagle_cudaStream_t s, long long n,
                        long long *done) noexcept nogil
cdef int graph_exec_update(eagle_cudaGraphExec_t e, eagle_cudaGraph_t g,
                           eagle_CUgraphExecUpdateResultInfo *info) noexcept nogil

# ---- kernels and kernel nodes ---------------------------------------------------------
cdef int launch_kernel(eagle_CUfunction f, eagle_dim3 grid, eagle_dim3 block, void **args,
                       size_t shared_mem, eagle_cudaStream_t s) except -1
cdef int kernel_node_get_params(eagle_cudaGraphNode_t node, eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) except -1
cdef int kernel_node_set_params(eagle_cudaGraphNode_t node,
                                const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) noexcept nogil
cdef int kernel_node_name_of(eagle_cudaGraphNode_t node, const char **name) noexcept nogil

# ---- sized kernel nodes (eagle's copy of a node's launch; the retune) -----------------
cdef int sized_init(eagle_cuda_sized *k, eagle_cudaGraphNode_t node, unsigned int nargs,
                    const size_t *sizes, unsigned int size_index, unsigned int size_bytes) noexcept nogil
cdef int sized_refresh(eagle_cuda_sized *k, eagle_cudaGraphNode_t src) noexcept nogil
cdef int sized_apply(eagle_cudaGraphExec_t e, eagle_cuda_sized *k, const void *value,
                     eagle_dim3 grid) noexcept nogil
cdef int sized_apply_to_graph(eagle_cuda_sized *k, const void *value, eagle_dim3 grid) noexcept nogil
cdef void sized_free(eagle_cuda_sized *k) noexcept nogil

# ---- memory ---------------------------------------------------------------------------
cdef void *mem_alloc(size_t nbytes) except? NULL
cdef int mem_free(void *p) noexcept nogil
cdef int host_alloc_mapped(void **host, unsigned long long *dev, size_t nbytes) except -1
cdef int host_free(void *host) noexcept nogil
cdef int copy(void *dst, const void *src, size_t nbytes, eagle_cudaStream_t s, bint synchronize,
              str detail) except -1
