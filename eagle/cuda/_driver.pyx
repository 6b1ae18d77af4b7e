# cython: language_level=3
"""eagle.cuda._driver — the thin driver layer: eagle's C shim over the CUDA driver.

Nothing here links against CUDA: the driver library (``libcuda.so.1``, or ``EAGLE_LIBCUDA``)
is opened on first use by the C shim (csrc/cuda/cuda_shim.c, linked into this module alone)
and every entry point is resolved with ``cuGetProcAddress`` for the driver's CUDA version.
The handles are the ones CuPy's runtime uses (same primary context).

In the manner of CuPy's ``cupy_backends.cuda.api.driver``: every status constant is exported,
each wrapper calls the C function without the GIL and then ``check``, and a failing status
raises :class:`DriverError`, an :class:`eagle.CudaError` that builds its text from the status
(the driver's name and sentence) and, unlike CuPy's, names the failing eagle node where
there is one. The objects over these handles live in eagle.cuda._stream (streams, events,
capture), eagle.cuda._graph (graphs, executable graphs), eagle.cuda._retune (sized kernel
nodes) and eagle.cuda._memory (device and mapped host memory).
"""
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uintptr_t

from eagle._errors import CudaError

cdef extern from "eagle/cuda_shim.h" nogil:
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

__all__ = [
    "DriverError", "CudaError", "check_status", "status_name", "status_text", "load", "is_loaded",
    "library", "version_text", "driver_version", "api_version", "driver_status", "has",
    "device_count", "current_device", "current_context", "set_current_context", "set_device",
    "device_name", "kernel_param_sizes",
    "CUDA_SUCCESS", "CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_NOT_READY",
    "CUDA_ERROR_NOT_FOUND", "CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
    "ERROR_NOT_LOADED", "ERROR_MISSING_SYMBOL", "ERROR_BAD_ARGUMENT", "ERROR_UNSUPPORTED_NODE",
    "ERROR_TOO_OLD", "CAPTURE_MODE_GLOBAL", "CAPTURE_MODE_THREAD_LOCAL", "CAPTURE_MODE_RELAXED",
    "CAPTURE_STATUS_NONE", "CAPTURE_STATUS_ACTIVE", "CAPTURE_STATUS_INVALIDATED",
    "STREAM_DEFAULT", "STREAM_NON_BLOCKING", "EVENT_DEFAULT", "EVENT_DISABLE_TIMING",
]

# ---- status constants: the driver's CUresult values eagle meets, and eagle's own codes (< 0)
CUDA_SUCCESS = EAGLE_CUDA_SUCCESS
CUDA_ERROR_INVALID_VALUE = EAGLE_CUDA_ERR_INVALID_VALUE
CUDA_ERROR_NO_DEVICE = EAGLE_CUDA_ERR_NO_DEVICE
CUDA_ERROR_NOT_READY = EAGLE_CUDA_ERR_NOT_READY
CUDA_ERROR_NOT_FOUND = EAGLE_CUDA_ERR_NOT_FOUND
CUDA_ERROR_NOT_SUPPORTED = EAGLE_CUDA_ERR_NOT_SUPPORTED
CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = EAGLE_CUDA_ERR_CAPTURE_INVALIDATED
ERROR_NOT_LOADED = EAGLE_CUDA_ERROR_NOT_LOADED
ERROR_MISSING_SYMBOL = EAGLE_CUDA_ERROR_MISSING_SYMBOL
ERROR_BAD_ARGUMENT = EAGLE_CUDA_ERROR_BAD_ARGUMENT
ERROR_UNSUPPORTED_NODE = EAGLE_CUDA_ERROR_UNSUPPORTED_NODE
ERROR_TOO_OLD = EAGLE_CUDA_ERROR_TOO_OLD
# ---- flags and modes
CAPTURE_MODE_GLOBAL = EAGLE_CUDA_CAPTURE_MODE_GLOBAL
CAPTURE_MODE_THREAD_LOCAL = EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL
CAPTURE_MODE_RELAXED = EAGLE_CUDA_CAPTURE_MODE_RELAXED
CAPTURE_STATUS_NONE = EAGLE_CUDA_CAPTURE_STATUS_NONE
CAPTURE_STATUS_ACTIVE = EAGLE_CUDA_CAPTURE_STATUS_ACTIVE
CAPTURE_STATUS_INVALIDATED = EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED
STREAM_DEFAULT = EAGLE_CUDA_STREAM_DEFAULT
STREAM_NON_BLOCKING = EAGLE_CUDA_STREAM_NON_BLOCKING
EVENT_DEFAULT = EAGLE_CUDA_EVENT_DEFAULT
EVENT_DISABLE_TIMING = EAGLE_CUDA_EVENT_DISABLE_TIMING

#: how long a polling wait runs without the GIL between two signal checks
#: (PyErr_CheckSignals): Ctrl-C is seen within about this
cdef long long _SIGNAL_POLL_NS = 5000000


# ---- errors ---------------------------------------------------------------------------

cpdef str status_name(int status):
    """The error name for a status (the driver's ``CUDA_ERROR_INVALID_VALUE``..., or eagle's own ``eagleCudaErrorNotLoaded``...)."""
    cdef const char *name
    cdef const char *text
    eagle_cuda_status_text(status, &name, &text)
    return name.decode("utf-8", "replace")


cpdef str status_text(int status):
    """The driver's sentence for a status (``cuGetErrorString``), or eagle's for its own codes."""
    cdef const char *name
    cdef const char *text
    eagle_cuda_status_text(status, &name, &text)
    return text.decode("utf-8", "replace")


class DriverError(CudaError):
    """A failing status of a CUDA driver call (an :class:`eagle.CudaError`): the name and the
    sentence come from the status itself; ``detail`` says what eagle was doing, and
    ``node_index`` / ``node_name`` name the eagle node that failed, where one did."""

    def __init__(self, status, detail=None, node_index=None, node_name=None):
        status = int(status)
        super().__init__(status, status_name(status), status_text(status), detail,
                         node_index, node_name)

    def __reduce__(self):
        return (type(self), (self.status, self.detail, self.node_index, self.node_name))


cdef int check(int status, str detail=None) except -1:
    if status != 0:
        raise DriverError(status, detail)
    return 0


def check_status(int status, detail=None):
    """Raise :class:`DriverError` for a failing status; return None on success."""
    check(status, detail)


# ---- loading and the device -----------------------------------------------------------

def load():
    """Open and bind the CUDA driver (idempotent). Returns the library's path.

    Raises DriverError saying whether no driver library was found (and what was
    tried), the driver is too old, or a driver was found but no GPU is usable.
    """
    cdef char buf[2048]
    cdef int st
    buf[0] = 0
    with nogil:
        st = eagle_cuda_load(buf, sizeof(buf))
    if st != 0:
        raise DriverError(st, buf.decode("utf-8", "replace") or None)
    return eagle_cuda_library().decode("utf-8", "replace")


def is_loaded():
    return bool(eagle_cuda_is_loaded())


def library():
    """Path of the bound driver library, '' if none."""
    return eagle_cuda_library().decode("utf-8", "replace")


def version_text(int v):
    """13000 -> '13.0'."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def driver_status():
    """One line for ``eagle.show_config()``: the driver in use, or plainly why there is none."""
    try:
        path = load()
    except CudaError as e:
        if e.status == EAGLE_CUDA_ERROR_NOT_LOADED:
            return "no CUDA driver found (libcuda.so.1; the cuda backend needs an NVIDIA driver)"
        return f"unusable: {e.detail or e}"
    v = driver_version()
    names = ", ".join(device_name(i) for i in range(device_count()))
    return (f"CUDA driver {version_text(v)} ({v}) at {path}; {device_count()} device(s): {names}; "
            f"conditional nodes {'yes' if has('conditional') else 'no (driver < 12.4)'}")


def driver_version():
    """cuDriverGetVersion of the bound (or found) driver, e.g. 13000."""
    cdef int v = 0
    cdef int st
    with nogil:
        st = eagle_cuda_driver_version(&v)
    check(st)
    return v


def api_version():
    """The CUDA version whose entry points the shim resolved: min(driver, 13000)."""
    cdef int v = 0
    cdef int st
    with nogil:
        st = eagle_cuda_api_version(&v)
    check(st)
    return v


def has(str feature):
    """Whether the driver has an optional feature: "conditional" (12.4+),
    "param_info" (cuFuncGetParamInfo, 12.4+), "capture_to_graph" (12.3+)."""
    cdef bytes f = feature.encode()
    return bool(eagle_cuda_has(f))


def device_count():
    cdef int n = 0
    cdef int st
    with nogil:
        st = eagle_cuda_get_device_count(&n)
    check(st)
    return n


def current_device():
    """The device of this thread's current context (cuCtxGetDevice; with no current
    context eagle makes its default device's primary context current first)."""
    cdef int d = 0
    cdef int st
    with nogil:
        st = eagle_cuda_get_device(&d)
    check(st, "cuCtxGetDevice")
    return d


def current_context():
    """This thread's current CUDA context (a handle; 0 if none)."""
    cdef void *ctx = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_ctx_get_current(&ctx)
    check(st, "cuCtxGetCurrent")
    return <uintptr_t>ctx


def set_current_context(uintptr_t ctx):
    """Make ``ctx`` (from ``current_context()``) current on this thread (cuCtxSetCurrent);
    eagle's default device is left as it is."""
    cdef int st
    with nogil:
        st = eagle_cuda_ctx_set_current(<void *>ctx)
    check(st, "cuCtxSetCurrent")


def set_device(int device):
    """Make ``device``'s primary context current on this thread (cuCtxSetCurrent)."""
    cdef int st
    with nogil:
        st = eagle_cuda_set_device(device)
    check(st, f"making device {device}'s primary context current")


def device_name(int device=0):
    cdef char buf[256]
    cdef int st
    with nogil:
        st = eagle_cuda_device_name(device, buf, sizeof(buf))
    check(st, "cuDeviceGetName")
    return buf.decode("utf-8", "replace")


def kernel_param_sizes(uintptr_t func):
    """The byte size of each parameter of kernel ``func`` (a CUfunction), from
    cuFuncGetParamInfo; None when the driver lacks it (before 12.4)."""
    cdef unsigned int n = 0
    cdef size_t sizes[256]
    cdef int st
    with nogil:
        st = eagle_cuda_kernel_param_sizes(<eagle_CUfunction>func, &n, sizes, 256)
    if st == EAGLE_CUDA_ERROR_TOO_OLD:
        return None
    check(st, "cuFuncGetParamInfo")
    return [sizes[i] for i in range(min(n, 256))]


# ---- arguments ------------------------------------------------------------------------

cdef eagle_dim3 dim3(object d) except *:
    cdef eagle_dim3 out
    out.x = 1
    out.y = 1
    out.z = 1
    if isinstance(d, int):
        out.x = d
        return out
    d = tuple(d)
    if not 1 <= len(d) <= 3:
        raise ValueError(f"a launch dimension has 1 to 3 entries, got {d!r}")
    out.x = d[0]
    if len(d) > 1:
        out.y = d[1]
    if len(d) > 2:
        out.z = d[2]
    return out


cdef eagle_cudaStream_t stream_handle(object stream) except? NULL:
    if stream is None:
        return NULL
    if isinstance(stream, int):
        return <eagle_cudaStream_t><uintptr_t>stream
    ptr = getattr(stream, "ptr", None)  # eagle's streams, cupy.cuda.Stream
    if isinstance(ptr, int):
        return <eagle_cudaStream_t><uintptr_t>ptr
    raise TypeError(f"expected an eagle.cuda._stream stream, a CuPy stream or a handle, "
                    f"got {type(stream).__name__}")


cdef class NodeArray:
    """Graph node handles as a C array, any count (a stage of many side-by-side nodes joins
    into the next node through one dependency per node)."""

    def __cinit__(self, handles=()):
        handles = list(handles)
        self.n = len(handles)
        self.ptr = <eagle_cudaGraphNode_t *>PyMem_Malloc((self.n if self.n else 1) * sizeof(eagle_cudaGraphNode_t))
        if self.ptr == NULL:
            raise MemoryError()
        for i, h in enumerate(handles):
            self.ptr[i] = <eagle_cudaGraphNode_t><uintptr_t>h

    def __dealloc__(self):
        PyMem_Free(self.ptr)


# ---- streams and events ---------------------------------------------------------------

cdef eagle_cudaStream_t stream_create(unsigned int flags) except? NULL:
    cdef eagle_cudaStream_t s = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_stream_create(&s, flags)
    check(st, "cuStreamCreateWithFlags")
    return s


cdef int stream_destroy(eagle_cudaStream_t s) noexcept nogil:
    return eagle_cuda_stream_destroy(s)


cdef int stream_synchronize(eagle_cudaStream_t s) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_synchronize(s)
    return check(st, "cuStreamSynchronize")


cdef bint stream_query(eagle_cudaStream_t s) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_query(s)
    if st == EAGLE_CUDA_ERR_NOT_READY:
        return False
    check(st, "cuStreamQuery")
    return True


cdef int stream_wait_event(eagle_cudaStream_t s, eagle_cudaEvent_t e) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_wait_event(s, e, 0)
    return check(st, "cuStreamWaitEvent")


cdef int wait_polling(void *h, bint event) except -1:
    """Poll ``h`` (a stream or an event) until its work is done, checking for signals every
    few ms; a signal handler's exception (KeyboardInterrupt) propagates with the work
    still queued or running: the caller decides what to do with it."""
    cdef long long backoff = 0
    cdef int ready = 0
    cdef int st = 0
    while True:
        with nogil:
            if event:
                st = eagle_cuda_event_wait_for(h, _SIGNAL_POLL_NS, &backoff, &ready)
            else:
                st = eagle_cuda_stream_wait_for(h, _SIGNAL_POLL_NS, &backoff, &ready)
        if st != 0 or ready:
            return check(st, "cuEventQuery" if event else "cuStreamQuery")
        PyErr_CheckSignals()


cdef eagle_cudaEvent_t event_create(unsigned int flags) except? NULL:
    cdef eagle_cudaEvent_t e = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_event_create(&e, flags)
    check(st, "cuEventCreateWithFlags")
    return e


cdef int event_destroy(eagle_cudaEvent_t e) noexcept nogil:
    return eagle_cuda_event_destroy(e)


cdef int event_record(eagle_cudaEvent_t e, eagle_cudaStream_t s) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_event_record(e, s)
    return check(st, "cuEventRecord")


cdef int event_synchronize(eagle_cudaEvent_t e) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_event_synchronize(e)
    return check(st, "cuEventSynchronize")


cdef bint event_query(eagle_cudaEvent_t e) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_event_query(e)
    if st == EAGLE_CUDA_ERR_NOT_READY:
        return False
    check(st, "cuEventQuery")
    return True


# ---- stream capture -------------------------------------------------------------------

cdef int begin_capture(eagle_cudaStream_t s, int mode) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_begin_capture(s, mode)
    return check(st, "cuStreamBeginCapture")


cdef eagle_cudaGraph_t end_capture(eagle_cudaStream_t s) except? NULL:
    cdef eagle_cudaGraph_t g = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_stream_end_capture(s, &g)
    check(st, "cuStreamEndCapture")
    return g


cdef int capture_status(eagle_cudaStream_t s) except -1:
    cdef int cs = 0
    cdef int st
    with nogil:
        st = eagle_cuda_stream_is_capturing(s, &cs)
    check(st, "cuStreamIsCapturing")
    return cs


cdef int capture_info(eagle_cudaStream_t s, int *status, unsigned long long *capture_id,
                      eagle_cudaGraph_t *graph, const eagle_cudaGraphNode_t **deps,
                      size_t *n) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_capture_info(s, status, capture_id, graph, deps, n)
    return check(st, "cuStreamGetCaptureInfo")


cdef eagle_cudaGraphNode_t last_node(eagle_cudaStream_t s) except? NULL:
    cdef eagle_cudaGraphNode_t node = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_stream_last_node(s, &node)
    check(st, "the node just captured (cudaStreamGetCaptureInfo)")
    return node


cdef int begin_capture_to_graph(eagle_cudaStream_t s, eagle_cudaGraph_t g, int mode) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_begin_capture_to_graph(s, g, mode)
    return check(st, "cuStreamBeginCaptureToGraph")


cdef int set_capture_deps(eagle_cudaStream_t s, NodeArray nodes) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_stream_set_capture_deps(s, nodes.ptr, nodes.n)
    return check(st, "cuStreamUpdateCaptureDependencies")


# ---- graphs ---------------------------------------------------------------------------

cdef eagle_cudaGraph_t graph_create() except? NULL:
    cdef eagle_cudaGraph_t g = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_graph_create(&g, 0)
    check(st, "cuGraphCreate")
    return g


cdef int graph_destroy(eagle_cudaGraph_t g) noexcept nogil:
    return eagle_cuda_graph_destroy(g)


cdef size_t graph_node_count(eagle_cudaGraph_t g) except? 0:
    cdef size_t n = 0
    cdef int st
    with nogil:
        st = eagle_cuda_graph_get_nodes(g, NULL, &n)
    check(st, "cuGraphGetNodes")
    return n


cdef list graph_nodes(eagle_cudaGraph_t g):
    cdef size_t n = graph_node_count(g), i
    cdef int st
    cdef eagle_cudaGraphNode_t *buf
    if n == 0:
        return []
    buf = <eagle_cudaGraphNode_t *>PyMem_Malloc(n * sizeof(eagle_cudaGraphNode_t))
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            st = eagle_cuda_graph_get_nodes(g, buf, &n)
        check(st, "cuGraphGetNodes")
        return [<uintptr_t>buf[i] for i in range(n)]
    finally:
        PyMem_Free(buf)


cdef eagle_cudaGraphNode_t add_child_graph(eagle_cudaGraph_t g, NodeArray deps,
                                           eagle_cudaGraph_t child) except? NULL:
    cdef eagle_cudaGraphNode_t node = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_graph_add_child_graph_node(&node, g, deps.ptr, deps.n, child)
    check(st, "cuGraphAddChildGraphNode")
    return node


cdef eagle_cudaGraph_t child_graph_of(eagle_cudaGraphNode_t node) except? NULL:
    cdef eagle_cudaGraph_t g = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_child_graph_node_get_graph(node, &g)
    check(st, "cuGraphChildGraphNodeGetGraph")
    return g


cdef int add_dependencies(eagle_cudaGraph_t g, NodeArray src, NodeArray dst) except -1:
    cdef int st
    if dst.n != src.n:
        raise ValueError("src and dst differ in length")
    with nogil:
        st = eagle_cuda_graph_add_dependencies(g, src.ptr, dst.ptr, src.n)
    return check(st, "cuGraphAddDependencies")


cdef eagle_cudaGraphNode_t add_kernel_node(eagle_cudaGraph_t g, NodeArray deps, eagle_CUfunction f,
                                           eagle_dim3 grid, eagle_dim3 block, unsigned int shared_mem,
                                           void **args) except? NULL:
    cdef eagle_cudaGraphNode_t node = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_graph_add_kernel_node(&node, g, deps.ptr, deps.n, f, grid, block,
                                              shared_mem, args)
    check(st, "cuGraphAddKernelNode")
    return node


cdef eagle_cudaGraphNode_t add_conditional_node(eagle_cudaGraph_t g, NodeArray deps, int kind,
                                                unsigned int initial, unsigned long long *handle,
                                                eagle_cudaGraph_t *body) except? NULL:
    """A conditional node of ``kind`` 0 (IF) or 1 (WHILE); a driver before 12.4 is named."""
    cdef eagle_cudaGraphNode_t node = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_graph_add_conditional_node(&node, g, deps.ptr, deps.n, kind, initial,
                                                   handle, body)
    what = "WHILE" if kind == 1 else "IF"
    if st == EAGLE_CUDA_ERROR_TOO_OLD:
        raise DriverError(st, f"conditional {what} nodes need a CUDA 12.4 driver; this one is "
                              f"{version_text(driver_version())}")
    check(st, f"adding a conditional {what} node (cuGraphConditionalHandleCreate / cuGraphAddNode)")
    return node


cdef int graph_instantiate(eagle_cudaGraphExec_t *exec_, eagle_cudaGraph_t g, unsigned long long flags,
                           eagle_cudaStream_t upload_stream, eagle_cudaGraphNode_t *err_node,
                           int *result) noexcept nogil:
    return eagle_cuda_graph_instantiate(exec_, g, flags, upload_stream, err_node, result)


cdef int graph_exec_destroy(eagle_cudaGraphExec_t e) noexcept nogil:
    return eagle_cuda_graph_exec_destroy(e)


cdef int graph_upload(eagle_cudaGraphExec_t e, eagle_cudaStream_t s) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_graph_upload(e, s)
    return check(st, "cuGraphUpload")


cdef int graph_launch_n(eagle_cudaGraphExec_t e, eagle_cudaStream_t s, long long n,
                        long long *done) noexcept nogil:
    return eagle_cuda_graph_launch_n(e, s, n, done)


cdef int graph_exec_update(eagle_cudaGraphExec_t e, eagle_cudaGraph_t g,
                           eagle_CUgraphExecUpdateResultInfo *info) noexcept nogil:
    return eagle_cuda_graph_exec_update(e, g, info)


# ---- kernels and kernel nodes ---------------------------------------------------------

cdef int launch_kernel(eagle_CUfunction f, eagle_dim3 grid, eagle_dim3 block, void **args,
                       size_t shared_mem, eagle_cudaStream_t s) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_launch_kernel(f, grid, block, args, shared_mem, s)
    return check(st, "cuLaunchKernel")


cdef int kernel_node_get_params(eagle_cudaGraphNode_t node, eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_kernel_node_get_params(node, p)
    return check(st, "cuGraphKernelNodeGetParams")


cdef int kernel_node_set_params(eagle_cudaGraphNode_t node,
                                const eagle_CUDA_KERNEL_NODE_PARAMS_v2 *p) noexcept nogil:
    return eagle_cuda_kernel_node_set_params(node, p)


cdef int kernel_node_name_of(eagle_cudaGraphNode_t node, const char **name) noexcept nogil:
    return eagle_cuda_kernel_node_name(node, name)


# ---- sized kernel nodes ---------------------------------------------------------------

cdef int sized_init(eagle_cuda_sized *k, eagle_cudaGraphNode_t node, unsigned int nargs,
                    const size_t *sizes, unsigned int size_index, unsigned int size_bytes) noexcept nogil:
    return eagle_cuda_sized_init(k, node, nargs, sizes, size_index, size_bytes)


cdef int sized_refresh(eagle_cuda_sized *k, eagle_cudaGraphNode_t src) noexcept nogil:
    return eagle_cuda_sized_refresh(k, src)


cdef int sized_apply(eagle_cudaGraphExec_t e, eagle_cuda_sized *k, const void *value,
                     eagle_dim3 grid) noexcept nogil:
    return eagle_cuda_sized_apply(e, k, value, grid)


cdef int sized_apply_to_graph(eagle_cuda_sized *k, const void *value, eagle_dim3 grid) noexcept nogil:
    return eagle_cuda_sized_apply_to_graph(k, value, grid)


cdef void sized_free(eagle_cuda_sized *k) noexcept nogil:
    eagle_cuda_sized_free(k)


# ---- memory ---------------------------------------------------------------------------

cdef void *mem_alloc(size_t nbytes) except? NULL:
    cdef void *p = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_malloc(&p, nbytes)
    check(st, f"cuMemAlloc({nbytes})")
    return p


cdef int mem_free(void *p) noexcept nogil:
    return eagle_cuda_free(p)


cdef int host_alloc_mapped(void **host, unsigned long long *dev, size_t nbytes) except -1:
    cdef int st
    with nogil:
        st = eagle_cuda_host_alloc_mapped(host, dev, nbytes)
    return check(st, "cuMemHostAlloc (DEVICEMAP) / cuMemHostGetDevicePointer")


cdef int host_free(void *host) noexcept nogil:
    return eagle_cuda_host_free(host)


cdef int copy(void *dst, const void *src, size_t nbytes, eagle_cudaStream_t s, bint synchronize,
              str detail) except -1:
    """cuMemcpyAsync on ``s``, then (``synchronize``) cuStreamSynchronize."""
    cdef int st
    with nogil:
        st = eagle_cuda_memcpy_async(dst, src, nbytes, s)
        if st == 0 and synchronize:
            st = eagle_cuda_stream_synchronize(s)
    return check(st, detail)
