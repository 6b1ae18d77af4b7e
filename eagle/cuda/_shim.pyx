# cython: language_level=3
"""eagle.cuda._shim — Python face of eagle's CUDA shim over the CUDA driver.

Thin wrappers in the style of CuPy's ``cupy_backends.cuda.api.driver``: each
one calls the C function of ``csrc/include/eagle/cuda_shim.h`` without the
GIL, then ``check`` turns a failing status into :class:`eagle.CudaError`
(name and text from the driver). Nothing here links against CUDA: the driver
library (``libcuda.so.1``, or ``EAGLE_LIBCUDA``) is opened on first use and
every entry point is resolved with ``cuGetProcAddress`` for the driver's CUDA
version. The handles are the ones CuPy's runtime uses (same primary context).

Objects (all own their handle and release it in ``close()`` / on collection,
unless made with ``from_ptr``, which borrows):

* :class:`Stream` — a non-blocking stream; ``capture()`` is a context manager
  that always ends the capture (also on error) and yields the :class:`Graph`.
* :class:`Event` — timing-free event, for fork/join of side-by-side branches
  during capture (record on the capturing stream, wait on the side stream,
  and back).
* :class:`NodeOwners` — attributes the graph nodes a capture adds to eagle
  node indices, so a failed instantiate names the eagle node.
* :class:`Graph` — an owned ``cudaGraph_t``; ``instantiate()`` gives a
  :class:`GraphExec`.
* :class:`GraphExec` — ``launch(stream, n)`` (one ``cudaGraphLaunch`` per
  replay, without the GIL), ``add_sized_kernel`` / ``set_logical_size``
  (patches grid and size argument of registered kernel nodes).

Thread-safety: handles may be used from any thread; a ``GraphExec`` serializes
its own ``launch`` / ``set_logical_size`` / ``close`` with a lock.
"""
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport uintptr_t, int32_t, int64_t, uint32_t, uint64_t

# HostFlag's store and load: atomic, sequentially consistent (the host sets the flag while
# kernels read it)
cdef extern from *:
    """
    static inline void host_flag_store(int32_t *p, int32_t v) {
        __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
    }
    static inline int32_t host_flag_load(int32_t *p) {
        return __atomic_load_n(p, __ATOMIC_SEQ_CST);
    }
    """
    void host_flag_store(int32_t *p, int32_t v) nogil
    int32_t host_flag_load(int32_t *p) nogil

import threading

from eagle._errors import CudaError

__all__ = [
    "CudaError", "check_status", "status_name", "status_text", "load", "is_loaded",
    "library", "driver_version", "api_version", "device_count", "driver_status", "has",
    "device_name", "kernel_param_sizes", "Stream", "Event", "Graph", "GraphExec", "NodeOwners",
    "launch_kernel", "kernel_node_params", "DeviceBuffer", "HostFlag", "CAPTURE_MODE_GLOBAL",
    "CAPTURE_MODE_THREAD_LOCAL", "CAPTURE_MODE_RELAXED",
]

CAPTURE_MODE_GLOBAL = EAGLE_CUDA_CAPTURE_MODE_GLOBAL
CAPTURE_MODE_THREAD_LOCAL = EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL
CAPTURE_MODE_RELAXED = EAGLE_CUDA_CAPTURE_MODE_RELAXED
CAPTURE_STATUS_NONE = EAGLE_CUDA_CAPTURE_STATUS_NONE
CAPTURE_STATUS_ACTIVE = EAGLE_CUDA_CAPTURE_STATUS_ACTIVE
CAPTURE_STATUS_INVALIDATED = EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED
ERROR_NOT_LOADED = EAGLE_CUDA_ERROR_NOT_LOADED
ERROR_MISSING_SYMBOL = EAGLE_CUDA_ERROR_MISSING_SYMBOL
ERROR_BAD_ARGUMENT = EAGLE_CUDA_ERROR_BAD_ARGUMENT
ERROR_UNSUPPORTED_NODE = EAGLE_CUDA_ERROR_UNSUPPORTED_NODE
ERROR_TOO_OLD = EAGLE_CUDA_ERROR_TOO_OLD
ERR_NOT_READY = EAGLE_CUDA_ERR_NOT_READY

#: how long a polling wait (``Stream.wait``, ``Event.wait``) runs without the GIL between
#: two signal checks (PyErr_CheckSignals): Ctrl-C is seen within about this
cdef long long _SIGNAL_POLL_NS = 5000000


cdef int _wait_polling(void *h, bint event) except? -1:
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
            return st
        PyErr_CheckSignals()

_INSTANTIATE_RESULTS = {
    0: "cuGraphInstantiateSuccess",
    1: "cuGraphInstantiateError",
    2: "cuGraphInstantiateInvalidStructure",
    3: "cuGraphInstantiateNodeOperationNotSupported",
    4: "cuGraphInstantiateMultipleCtxsNotSupported",
    5: "cuGraphInstantiateConditionalHandleUnused",
}

# replays issued between two checks for Ctrl-C in GraphExec.launch
cdef long long _SIGNAL_CHUNK = 4096


# ---- errors ---------------------------------------------------------------------

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


cdef int check(int status, str detail=None) except -1:
    if status != 0:
        raise CudaError(status, status_name(status), status_text(status), detail)
    return 0


def check_status(int status, detail=None):
    """Raise :class:`eagle.CudaError` for a failing status; return None on success."""
    check(status, detail)


# ---- loading ----------------------------------------------------------------------

def load():
    """Open and bind the CUDA driver (idempotent). Returns the library's path.

    Raises CudaError saying whether no driver library was found (and what was
    tried), the driver is too old, or a driver was found but no GPU is usable.
    """
    cdef char buf[2048]
    cdef int st
    buf[0] = 0
    with nogil:
        st = eagle_cuda_load(buf, sizeof(buf))
    if st != 0:
        raise CudaError(st, status_name(st), status_text(st),
                        buf.decode("utf-8", "replace") or None)
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


cdef inline eagle_dim3 _dim3(object d) except *:
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


cdef inline eagle_cudaStream_t _stream_handle(object stream) except? NULL:
    if stream is None:
        return NULL
    if isinstance(stream, Stream):
        return (<Stream>stream).handle
    if isinstance(stream, int):
        return <eagle_cudaStream_t><uintptr_t>stream
    ptr = getattr(stream, "ptr", None)  # cupy.cuda.Stream
    if isinstance(ptr, int):
        return <eagle_cudaStream_t><uintptr_t>ptr
    raise TypeError(f"expected an eagle.cuda._shim.Stream, a CuPy stream or a handle, "
                    f"got {type(stream).__name__}")


# ---- streams and events --------------------------------------------------------------

cdef class Stream:
    """A CUDA stream. ``Stream()`` creates (and owns) a non-blocking stream;
    ``Stream.from_ptr(ptr, owner)`` borrows an existing one (e.g. CuPy's
    ``stream.ptr``), keeping ``owner`` alive. Usable from any thread."""

    def __cinit__(self, bint non_blocking=True, *, bint _create=True):
        self.handle = NULL
        self.owned = False
        self.owner = None
        if not _create:
            return
        cdef eagle_cudaStream_t s = NULL
        cdef unsigned int flags = EAGLE_CUDA_STREAM_NON_BLOCKING if non_blocking else 0
        cdef int st
        with nogil:
            st = eagle_cuda_stream_create(&s, flags)
        check(st, "cuStreamCreateWithFlags")
        self.handle = s
        self.owned = True

    @staticmethod
    def from_ptr(uintptr_t ptr, owner=None):
        cdef Stream s = Stream.__new__(Stream, _create=False)
        s.handle = <eagle_cudaStream_t>ptr
        s.owner = owner
        return s

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def __cuda_stream__(self):
        """The CUDA stream protocol (cuda.core; CuPy 14's ``Stream.from_external``):
        ``(0, handle)``."""
        return (0, <uintptr_t>self.handle)

    def synchronize(self):
        cdef int st
        with nogil:
            st = eagle_cuda_stream_synchronize(self.handle)
        check(st, "cuStreamSynchronize")

    def query(self):
        """True when every operation queued on the stream is done (cuStreamQuery), False
        while some is queued or running; raises the driver's error otherwise."""
        cdef int st
        with nogil:
            st = eagle_cuda_stream_query(self.handle)
        if st == EAGLE_CUDA_ERR_NOT_READY:
            return False
        check(st, "cuStreamQuery")
        return True

    def wait(self):
        """Wait for the stream's work like ``synchronize``, but interruptibly: polls
        cuStreamQuery without the GIL (a short spin, then sleeps backing off to 1 ms) and
        calls PyErr_CheckSignals every few ms, so Ctrl-C raises KeyboardInterrupt here
        with the work still running (the caller stops or drains it)."""
        st = _wait_polling(self.handle, False)
        check(st, "cuStreamQuery")

    def wait_event(self, Event event not None):
        cdef int st
        with nogil:
            st = eagle_cuda_stream_wait_event(self.handle, event.handle, 0)
        check(st, "cuStreamWaitEvent")

    def begin_capture(self, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Start capturing (relaxed mode by default: a memory pool may allocate
        during capture). Pair with ``end_capture`` on every path."""
        cdef int st
        with nogil:
            st = eagle_cuda_stream_begin_capture(self.handle, mode)
        check(st, "cuStreamBeginCapture")

    def end_capture(self):
        """End the capture and return the captured :class:`Graph` (owned)."""
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_stream_end_capture(self.handle, &g)
        check(st, "cuStreamEndCapture")
        return Graph._own(g)

    def capture(self, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Context manager: ``with stream.capture() as cap: ...``; afterwards
        ``cap.graph`` is the captured Graph. The capture is ended also when
        the body raises (the body's exception wins; the invalid graph is
        dropped)."""
        return _Capture(self, mode)

    def capture_status(self):
        cdef int cs = 0
        cdef int st
        with nogil:
            st = eagle_cuda_stream_is_capturing(self.handle, &cs)
        check(st, "cuStreamIsCapturing")
        return cs

    def is_capturing(self):
        return self.capture_status() == EAGLE_CUDA_CAPTURE_STATUS_ACTIVE

    def capture_info(self):
        """(status, capture id, graph handle, [current dependency node handles])."""
        cdef int cs = 0
        cdef unsigned long long cid = 0
        cdef eagle_cudaGraph_t g = NULL
        cdef const eagle_cudaGraphNode_t *deps = NULL
        cdef size_t n = 0, i
        cdef int st
        with nogil:
            st = eagle_cuda_stream_capture_info(self.handle, &cs, &cid, &g, &deps, &n)
        check(st, "cuStreamGetCaptureInfo")
        return cs, cid, <uintptr_t>g, [<uintptr_t>deps[i] for i in range(n)]

    def begin_capture_to_graph(self, Graph graph not None, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Capture into ``graph`` (cuStreamBeginCaptureToGraph, 12.3+): a conditional
        node's body or a child-graph node's graph. End it with ``end_capture`` (the
        Graph it returns is ``graph``'s handle, not owned)."""
        cdef int st
        with nogil:
            st = eagle_cuda_stream_begin_capture_to_graph(self.handle, graph.handle, mode)
        check(st, "cuStreamBeginCaptureToGraph")

    def end_capture_to_graph(self):
        """End a capture begun with ``begin_capture_to_graph``."""
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_stream_end_capture(self.handle, &g)
        check(st, "cuStreamEndCapture")

    def set_capture_deps(self, nodes):
        """The capturing stream's next work follows ``nodes`` (handles of nodes added to
        the capture's graph by hand): cuStreamUpdateCaptureDependencies, SET."""
        cdef _Nodes nodes_ = _Nodes(nodes)
        cdef eagle_cudaGraphNode_t *d = nodes_.ptr
        cdef size_t n = nodes_.n
        cdef int st
        with nogil:
            st = eagle_cuda_stream_set_capture_deps(self.handle, d, n)
        check(st, "cuStreamUpdateCaptureDependencies")

    def last_node(self):
        """Handle of the node the last captured operation added (for retune)."""
        cdef eagle_cudaGraphNode_t node = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_stream_last_node(self.handle, &node)
        check(st, "the node just captured (cudaStreamGetCaptureInfo)")
        return <uintptr_t>node

    def close(self):
        cdef eagle_cudaStream_t s = self.handle
        cdef int st = 0
        if self.owned and s != NULL:
            self.handle = NULL
            self.owned = False
            with nogil:
                st = eagle_cuda_stream_destroy(s)
            check(st, "cuStreamDestroy")
        self.handle = NULL

    def __dealloc__(self):
        if self.owned and self.handle != NULL:
            with nogil:
                eagle_cuda_stream_destroy(self.handle)
            self.handle = NULL

    def __repr__(self):
        return f"<eagle.cuda._shim.Stream 0x{<uintptr_t>self.handle:x}{'' if self.owned else ' borrowed'}>"


class _Capture:
    def __init__(self, stream, mode):
        self.stream = stream
        self.mode = mode
        self.graph = None

    def __enter__(self):
        self.stream.begin_capture(self.mode)
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.graph = self.stream.end_capture()
        except CudaError:
            if exc_type is None:
                raise
            # the body's error is the story; the ended capture is discarded
        return False


cdef class Event:
    """A timing-free CUDA event (for fork/join during capture). Owns its handle."""

    def __cinit__(self, bint timing=False):
        self.handle = NULL
        cdef eagle_cudaEvent_t e = NULL
        cdef unsigned int flags = 0 if timing else EAGLE_CUDA_EVENT_DISABLE_TIMING
        cdef int st
        with nogil:
            st = eagle_cuda_event_create(&e, flags)
        check(st, "cuEventCreateWithFlags")
        self.handle = e

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def record(self, stream=None):
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        with nogil:
            st = eagle_cuda_event_record(self.handle, s)
        check(st, "cuEventRecord")

    def synchronize(self):
        cdef int st
        with nogil:
            st = eagle_cuda_event_synchronize(self.handle)
        check(st, "cuEventSynchronize")

    def query(self):
        """True when the work before the event's last record is done (cuEventQuery)."""
        cdef int st
        with nogil:
            st = eagle_cuda_event_query(self.handle)
        if st == EAGLE_CUDA_ERR_NOT_READY:
            return False
        check(st, "cuEventQuery")
        return True

    def wait(self):
        """``synchronize``, interruptibly (see ``Stream.wait``)."""
        st = _wait_polling(self.handle, True)
        check(st, "cuEventQuery")

    def close(self):
        cdef eagle_cudaEvent_t e = self.handle
        cdef int st = 0
        if e != NULL:
            self.handle = NULL
            with nogil:
                st = eagle_cuda_event_destroy(e)
            check(st, "cuEventDestroy")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                eagle_cuda_event_destroy(self.handle)
            self.handle = NULL


def fork(Stream origin not None, sides, Event event not None):
    """Fork during capture: record ``event`` on ``origin``, make each side stream wait on it."""
    event.record(origin)
    for s in sides:
        (<Stream?>s).wait_event(event)


def join(Stream origin not None, sides, events):
    """Join during capture: record one event per side stream, make ``origin`` wait on each.
    Joins every side it can; raises the first error after trying them all."""
    first = None
    for s, e in zip(sides, events):
        try:
            (<Event?>e).record(s)
            origin.wait_event(e)
        except CudaError as exc:
            if first is None:
                first = exc
    if first is not None:
        raise first


# ---- node attribution ------------------------------------------------------------

cdef class NodeOwners:
    """Which eagle node added which graph node during one capture.

    Call ``mark(index, stream)`` after capturing eagle node ``index`` on
    ``stream``: every graph node not seen before is attributed to it.
    ``owner(handle)`` gives the index (or None).
    """
    cdef Stream stream
    cdef dict owners
    cdef size_t seen

    def __init__(self, Stream stream not None):
        self.stream = stream
        self.owners = {}
        self.seen = 0

    def mark(self, index, Stream stream=None):
        """Attribute the graph nodes added since the last mark to eagle node ``index``,
        captured on ``stream`` (default: the origin stream); returns them. Linear in
        the nodes added: the node count tells whether any were added, and when the
        leaves of ``stream``'s capture are all of them (a kernel, a copy, a chain's
        last node alone) no listing is needed; otherwise the graph is listed."""
        cdef int cs = 0
        cdef eagle_cudaGraph_t g = NULL
        cdef const eagle_cudaGraphNode_t *deps = NULL
        cdef size_t n = 0, ndeps = 0, i
        cdef int st
        cdef Stream on = stream if stream is not None else self.stream
        with nogil:
            st = eagle_cuda_stream_capture_info(self.stream.handle, &cs, NULL, &g, NULL, NULL)
        check(st, "cuStreamGetCaptureInfo")
        if cs != EAGLE_CUDA_CAPTURE_STATUS_ACTIVE or g == NULL:
            return []
        with nogil:
            st = eagle_cuda_graph_get_nodes(g, NULL, &n)
        check(st, "cuGraphGetNodes")
        if n == self.seen:
            return []
        added = []
        with nogil:
            st = eagle_cuda_stream_capture_info(on.handle, &cs, NULL, NULL, &deps, &ndeps)
        check(st, "cuStreamGetCaptureInfo")
        for i in range(ndeps):
            h = <uintptr_t>deps[i]
            if h not in self.owners and h not in added:
                added.append(h)
        if len(added) != n - self.seen:   # more than the leaves were added: list the graph
            added = [h for h in _graph_nodes(g) if h not in self.owners]
        for h in added:
            self.owners[h] = index
        self.seen = n
        return added

    def owner(self, handle):
        return self.owners.get(handle)

    def __len__(self):
        return len(self.owners)


cdef class _Nodes:
    """Node handles as a C array, any count (a stage of many side-by-side nodes joins
    into the next node through one dependency per node)."""
    cdef eagle_cudaGraphNode_t *ptr
    cdef size_t n

    def __cinit__(self, handles):
        handles = list(handles)
        self.n = len(handles)
        self.ptr = <eagle_cudaGraphNode_t *>PyMem_Malloc((self.n if self.n else 1) * sizeof(eagle_cudaGraphNode_t))
        if self.ptr == NULL:
            raise MemoryError()
        for i, h in enumerate(handles):
            self.ptr[i] = <eagle_cudaGraphNode_t><uintptr_t>h

    def __dealloc__(self):
        PyMem_Free(self.ptr)


cdef list _graph_nodes(eagle_cudaGraph_t g):
    cdef size_t n = 0, i
    cdef int st
    cdef eagle_cudaGraphNode_t *buf
    with nogil:
        st = eagle_cuda_graph_get_nodes(g, NULL, &n)
    check(st, "cuGraphGetNodes")
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


# ---- graphs -----------------------------------------------------------------------

cdef class Graph:
    """An owned ``cudaGraph_t`` (from a capture or ``Graph()``)."""

    def __cinit__(self, *, bint _create=True):
        self.handle = NULL
        self.owned = False
        if not _create:
            return
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_graph_create(&g, 0)
        check(st, "cuGraphCreate")
        self.handle = g
        self.owned = True

    @staticmethod
    def borrow(uintptr_t ptr):
        """A Graph for a handle someone else owns (a capture's graph): never destroyed here."""
        cdef Graph out = Graph.__new__(Graph, _create=False)
        out.handle = <eagle_cudaGraph_t>ptr
        out.owned = False
        return out

    @staticmethod
    cdef Graph _own(eagle_cudaGraph_t g):
        cdef Graph out = Graph.__new__(Graph, _create=False)
        out.handle = g
        out.owned = g != NULL
        return out

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def nodes(self):
        """Node handles, in the runtime's order."""
        return _graph_nodes(self.handle)

    def instantiate(self, upload_stream=None, NodeOwners owners=None, names=None, inner=None):
        """Instantiate (cudaGraphInstantiateWithParams) into a :class:`GraphExec`.

        With ``upload_stream`` the graph is also uploaded there. On failure
        raises CudaError naming the failing node: its eagle index via
        ``owners`` and its name via ``names`` (a sequence indexed by eagle
        node), with ``node_index`` / ``node_name`` set. A failing node of a
        conditional body or child graph (the driver names it there), or of a body
        captured in place, is looked up in ``inner`` (before ``owners``): {handle:
        (what it is, index of the top-level eagle node)};
        ``node_index`` / ``node_name`` are then the top-level node's.
        """
        cdef eagle_cudaGraphExec_t e = NULL
        cdef eagle_cudaGraphNode_t bad = NULL
        cdef int result = 0
        cdef eagle_cudaStream_t us = _stream_handle(upload_stream)
        cdef unsigned long long flags = EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD if upload_stream is not None else 0
        cdef int st
        if self.handle == NULL:
            raise ValueError("the graph is closed")
        with nogil:
            st = eagle_cuda_graph_instantiate(&e, self.handle, flags, us, &bad, &result)
        if st != 0:
            index = owners.owner(<uintptr_t>bad) if (owners is not None and bad != NULL) else None
            name = None
            if index is not None and names is not None:
                try:
                    name = names[index]
                except (IndexError, KeyError, TypeError):
                    name = None
            where = ""
            # inner first: a subgraph body captured in place sits in the top-level graph,
            # where owners knows only the top-level node holding it
            what = inner.get(<uintptr_t>bad) if (inner is not None and bad != NULL) else None
            if what is not None:
                index = what[1]
                if index is not None and names is not None:
                    try:
                        name = names[index]
                    except (IndexError, KeyError, TypeError):
                        name = None
                where = f" at {what[0]}"
            elif name is not None:
                where = f" at node {name!r} (eagle node {index})"
            elif index is not None:
                where = f" at eagle node {index}"
            elif bad != NULL:
                where = f" at graph node 0x{<uintptr_t>bad:x}"
            reason = _INSTANTIATE_RESULTS.get(result, f"result {result}")
            raise CudaError(st, status_name(st), status_text(st),
                            f"instantiating the CUDA graph failed{where} ({reason})",
                            node_index=index, node_name=name)
        cdef GraphExec out = GraphExec.__new__(GraphExec)
        out.handle = e
        out.graph = self
        return out

    def add_conditional(self, str kind, deps=(), unsigned int initial=0):
        """A conditional node (``kind`` "if" or "while", 12.4+ drivers) after ``deps``;
        returns (node handle, condition handle, body :class:`Graph`, not owned: the node
        owns it). ``initial`` is the handle's value at each launch."""
        cdef eagle_cudaGraphNode_t node = NULL
        cdef _Nodes nodes_ = _Nodes(deps)
        cdef eagle_cudaGraphNode_t *d = nodes_.ptr
        cdef size_t n = nodes_.n
        cdef unsigned long long handle = 0
        cdef eagle_cudaGraph_t body = NULL
        cdef int t
        cdef int st
        if kind == "if":
            t = 0
        elif kind == "while":
            t = 1
        else:
            raise ValueError(f"kind is 'if' or 'while', got {kind!r}")
        with nogil:
            st = eagle_cuda_graph_add_conditional_node(&node, self.handle, d, n, t, initial,
                                                       &handle, &body)
        check(st, f"adding a conditional {kind.upper()} node")
        cdef Graph b = Graph._own(body)
        b.owned = False
        return <uintptr_t>node, handle, b

    def child_graph(self, uintptr_t node):
        """The graph embedded in child-graph node ``node`` (not owned: the node owns it;
        cuGraphChildGraphNodeGetGraph, no clone)."""
        cdef eagle_cudaGraph_t g = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_child_graph_node_get_graph(<eagle_cudaGraphNode_t>node, &g)
        check(st, "cuGraphChildGraphNodeGetGraph")
        cdef Graph b = Graph._own(g)
        b.owned = False
        return b

    def add_child(self, Graph child not None, deps=()):
        """A child-graph node running a clone of ``child`` after ``deps`` (node handles)."""
        cdef eagle_cudaGraphNode_t node = NULL
        cdef _Nodes nodes_ = _Nodes(deps)
        cdef eagle_cudaGraphNode_t *d = nodes_.ptr
        cdef size_t n = nodes_.n
        cdef int st
        with nogil:
            st = eagle_cuda_graph_add_child_graph_node(&node, self.handle, d, n, child.handle)
        check(st, "cuGraphAddChildGraphNode")
        return <uintptr_t>node

    def add_dependencies(self, src, dst):
        """Edges src[i] -> dst[i] (cuGraphAddDependencies, the form the driver's version has)."""
        cdef _Nodes src_ = _Nodes(src), dst_ = _Nodes(dst)
        cdef eagle_cudaGraphNode_t *a = src_.ptr
        cdef eagle_cudaGraphNode_t *b = dst_.ptr
        cdef size_t n = src_.n
        if dst_.n != n:
            raise ValueError("src and dst differ in length")
        cdef int st
        with nogil:
            st = eagle_cuda_graph_add_dependencies(self.handle, a, b, n)
        check(st, "cuGraphAddDependencies")

    def add_kernel(self, uintptr_t func, grid, block, args=(), deps=(), unsigned int shared_mem=0):
        """A kernel node (cuGraphAddKernelNode); ``args``: ctypes objects, one per parameter."""
        import ctypes
        cdef eagle_cudaGraphNode_t node = NULL
        cdef _Nodes nodes_ = _Nodes(deps)
        cdef eagle_cudaGraphNode_t *d = nodes_.ptr
        cdef size_t n = nodes_.n
        cdef eagle_dim3 g = _dim3(grid)
        cdef eagle_dim3 b = _dim3(block)
        cdef void *argv[64]
        cdef int st
        if len(args) > 64:
            raise ValueError("at most 64 kernel arguments")
        for i, a in enumerate(args):
            argv[i] = <void *><uintptr_t>ctypes.addressof(a)
        with nogil:
            st = eagle_cuda_graph_add_kernel_node(&node, self.handle, d, n, <eagle_CUfunction>func,
                                                  g, b, shared_mem, argv)
        check(st, "cuGraphAddKernelNode")
        return <uintptr_t>node

    def add_while(self, deps=(), unsigned int initial=1):
        """A conditional WHILE node (driver 12.4+): returns (node, condition handle, body Graph).
        The body belongs to the node (closing it does nothing)."""
        cdef eagle_cudaGraphNode_t node = NULL
        cdef _Nodes nodes_ = _Nodes(deps)
        cdef eagle_cudaGraphNode_t *d = nodes_.ptr
        cdef size_t n = nodes_.n
        cdef unsigned long long handle = 0
        cdef eagle_cudaGraph_t body = NULL
        cdef int st
        with nogil:
            st = eagle_cuda_graph_add_while_node(&node, self.handle, d, n, initial, &handle, &body)
        if st == EAGLE_CUDA_ERROR_TOO_OLD:
            raise CudaError(st, status_name(st), status_text(st),
                            f"conditional WHILE nodes need a CUDA 12.4 driver; this one is "
                            f"{version_text(driver_version())}")
        check(st, "cuGraphConditionalHandleCreate / cuGraphAddNode (WHILE)")
        cdef Graph b = Graph.__new__(Graph, _create=False)
        b.handle = body
        b.owned = False
        return <uintptr_t>node, handle, b

    def close(self):
        cdef eagle_cudaGraph_t g = self.handle
        cdef int st = 0
        if self.owned and g != NULL:
            self.handle = NULL
            self.owned = False
            with nogil:
                st = eagle_cuda_graph_destroy(g)
            check(st, "cuGraphDestroy")
        self.handle = NULL

    def __dealloc__(self):
        if self.owned and self.handle != NULL:
            with nogil:
                eagle_cuda_graph_destroy(self.handle)
            self.handle = NULL


_SIZE_KINDS = {"int32": (0, 4), "int64": (1, 8), "uint32": (2, 4), "uint64": (3, 8), "none": (4, 0)}


cdef class GraphExec:
    """An instantiated graph. Keeps the :class:`Graph` it was instantiated
    from alive (its node handles name the nodes to patch), and the last graph
    ``update()`` took arguments from (``updated_from``, one at most). ``launch``, ``set_logical_size``,
    ``update`` and ``close`` are serialized by a lock."""

    def __cinit__(self):
        self.handle = NULL
        self.graph = None
        self.updated_from = []
        self.sized = NULL
        self.n_sized = 0
        self.cap_sized = 0
        self._lock = threading.Lock()

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    cdef int _alive(self) except -1:
        if self.handle == NULL:
            raise ValueError("the GraphExec is closed")
        return 0

    def upload(self, stream=None):
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        with self._lock:
            self._alive()
            with nogil:
                st = eagle_cuda_graph_upload(self.handle, s)
            check(st, "cuGraphUpload")

    def launch(self, stream=None, long long n=1, long long first=0, long long of=-1):
        """Replay n times on ``stream``: one cuGraphLaunch per replay, issued
        without the GIL; Ctrl-C is honoured between chunks of replays. Returns
        the number issued. Does not synchronize. A failure names the replay as
        ``first`` + its index here, out of ``of`` (default n): a caller issuing one
        launch(n) in windows says where in the whole its window starts."""
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef long long done = 0, total = 0, chunk
        cdef int st = 0
        if n < 0:
            raise ValueError(f"launch(n) needs n >= 0, got {n}")
        with self._lock:
            self._alive()
            while total < n:
                chunk = n - total
                if chunk > _SIGNAL_CHUNK:
                    chunk = _SIGNAL_CHUNK
                with nogil:
                    st = eagle_cuda_graph_launch_n(self.handle, s, chunk, &done)
                total += done
                if st != 0:
                    check(st, f"cuGraphLaunch (replay {first + total} of {n if of < 0 else of})")
                if total < n:
                    PyErr_CheckSignals()
        return total

    def update(self, Graph graph not None):
        """cuGraphExecUpdate from a graph of the same topology. The graph
        instantiated from stays the one whose node handles name nodes; each
        sized kernel's own copy of its arguments is taken from the node at the
        same position of ``graph``, so a later retune keeps what update set."""
        cdef eagle_CUgraphExecUpdateResultInfo info
        cdef int st
        cdef Py_ssize_t i
        with self._lock:
            self._alive()
            info.result = 0
            with nogil:
                st = eagle_cuda_graph_exec_update(self.handle, graph.handle, &info)
            check(st, f"cuGraphExecUpdate (result {info.result})")
            if self.n_sized:
                old = self.graph.nodes()
                new = graph.nodes()
                where = {h: k for k, h in enumerate(old)}
                for i in range(self.n_sized):
                    k = where.get(<uintptr_t>self.sized[i].k.node)
                    if k is None or k >= len(new):
                        continue
                    st = eagle_cuda_sized_refresh(&self.sized[i].k,
                                                  <eagle_cudaGraphNode_t><uintptr_t>new[k])
                    check(st, f"reading the arguments of sized kernel node {i} after update")
            # the sized kernels took their copy of the arguments above: only the latest
            # graph is kept (a list growing with every update() held every graph)
            self.updated_from = [graph]

    # -- retune --------------------------------------------------------------

    def add_sized_kernel(self, uintptr_t node, unsigned int nargs, unsigned int size_index,
                         str size_type="int64", unsigned long long per_block=0,
                         grid_yz=(1, 1), arg_sizes=None, bint in_body=False, long long limit=-1):
        """Register kernel node ``node`` (a handle from ``Stream.last_node()``,
        of the graph this exec was instantiated from) as sized:
        ``set_logical_size(n)`` sets its argument ``size_index`` (of ``nargs``,
        C type ``size_type``: int32/int64/uint32/uint64) to n and its grid.x
        to ceil(n / per_block) (at least 1). ``per_block`` defaults to the
        node's block.x. ``size_type="none"`` patches the grid only.
        eagle copies the node's arguments now (each by its size:
        ``arg_sizes``, default 8 bytes each, or the kernel's real sizes from
        cuFuncGetParamInfo on 12.4+ drivers, which also refuse a wrong
        ``nargs`` or size-parameter width with TypeError). ``in_body``: the node sits
        in a conditional body or a child graph of that graph; a retune patches it in
        the graph and carries it into the exec with one cuGraphExecUpdate (per-node
        exec updates name top-level nodes only). ``limit`` >= 0: the node's extent, the
        most samples it gets (a retune to n patches it for min(n, limit))."""
        if size_type not in _SIZE_KINDS:
            raise ValueError(f"size_type must be one of {sorted(_SIZE_KINDS)}, got {size_type!r}")
        cdef int kind
        cdef unsigned int width
        kind, width = _SIZE_KINDS[size_type]
        if size_type != "none" and size_index >= nargs:
            raise ValueError(f"size_index {size_index} is not below nargs {nargs}")
        if nargs > 256:
            raise ValueError(f"at most 256 kernel arguments, got {nargs}")
        cdef size_t sizes[256]
        cdef const size_t *sp = NULL
        cdef eagle_CUDA_KERNEL_NODE_PARAMS_v2 p
        cdef int st
        cdef eagle_sized_kernel *k
        if arg_sizes is not None:
            if len(arg_sizes) != nargs:
                raise ValueError(f"arg_sizes has {len(arg_sizes)} entries for {nargs} arguments")
            for i, a in enumerate(arg_sizes):
                sizes[i] = a
            sp = sizes
        with nogil:
            st = eagle_cuda_kernel_node_get_params(<eagle_cudaGraphNode_t>node, &p)
        check(st, "cuGraphKernelNodeGetParams")
        if per_block == 0:
            per_block = p.blockDimX
        # a CUfunction, or a CUkernel (in func, or in kern with func NULL)
        real = (kernel_param_sizes(<uintptr_t>(p.func if p.func != NULL else p.kern))
                if p.func != NULL or p.kern != NULL else None)
        if real is not None:
            if len(real) != nargs:
                raise TypeError(f"the kernel takes {len(real)} parameter(s) (sizes {real}), "
                                f"eagle was told {nargs}")
            if width and real[size_index] != width:
                raise TypeError(f"the kernel's size parameter {size_index} is {real[size_index]} "
                                f"bytes wide, eagle was told {size_type} ({width} bytes)")
        with self._lock:
            self._alive()
            if self.n_sized == self.cap_sized:
                newcap = 2 * self.cap_sized if self.cap_sized else 4
                k = <eagle_sized_kernel *>PyMem_Realloc(self.sized, newcap * sizeof(eagle_sized_kernel))
                if k == NULL:
                    raise MemoryError()
                self.sized = k
                self.cap_sized = newcap
            k = &self.sized[self.n_sized]
            with nogil:
                st = eagle_cuda_sized_init(&k.k, <eagle_cudaGraphNode_t>node, nargs, sp,
                                           size_index, width)
            check(st, "copying a sized kernel node's arguments")
            k.size_kind = kind
            k.per_block = per_block
            k.block_grid = _dim3((1,) + tuple(grid_yz))
            k.in_body = in_body
            k.limit = limit
            self.n_sized += 1

    @property
    def n_sized_kernels(self):
        return self.n_sized

    def set_logical_size(self, long long n):
        """Patch every registered sized kernel for n samples (grid + size
        argument, from eagle's own copy of the arguments), without the GIL.
        Never re-captures or re-instantiates."""
        cdef Py_ssize_t i = 0
        cdef int st = 0
        cdef eagle_sized_kernel *k
        cdef eagle_dim3 grid
        cdef const void *value
        cdef unsigned long long blocks
        cdef long long m
        cdef bint bodies = False
        cdef eagle_CUgraphExecUpdateResultInfo info
        if n < 0:
            raise ValueError(f"logical size must be >= 0, got {n}")
        with self._lock:
            self._alive()
            with nogil:
                for i in range(self.n_sized):
                    k = &self.sized[i]
                    m = n if k.limit < 0 or n < k.limit else k.limit
                    blocks = (<unsigned long long>m + k.per_block - 1) // k.per_block
                    if blocks == 0:
                        blocks = 1
                    if blocks > 0x7fffffff:
                        st = EAGLE_CUDA_ERROR_BAD_ARGUMENT
                        break
                    grid = k.block_grid
                    grid.x = <unsigned int>blocks
                    if k.size_kind == 0:
                        k.value_i32 = <int32_t>m
                        value = &k.value_i32
                    elif k.size_kind == 1:
                        k.value_i64 = m
                        value = &k.value_i64
                    elif k.size_kind == 2:
                        k.value_u32 = <uint32_t>m
                        value = &k.value_u32
                    elif k.size_kind == 4:
                        value = NULL
                    else:
                        k.value_u64 = <uint64_t>m
                        value = &k.value_u64
                    if k.in_body:
                        bodies = True
                        st = eagle_cuda_sized_apply_to_graph(&k.k, value, grid)
                    else:
                        st = eagle_cuda_sized_apply(self.handle, &k.k, value, grid)
                    if st != 0:
                        break
            if st != 0:
                check(st, f"retuning sized kernel node {i} for logical size {n}")
            if bodies:
                # kernel nodes inside conditional bodies / child graphs: the graph now holds
                # their new launch; the top-level ones get eagle's copy too (the update
                # takes every node from the graph), then one whole-graph update
                with nogil:
                    for i in range(self.n_sized):
                        if not self.sized[i].in_body:
                            st = eagle_cuda_kernel_node_set_params(self.sized[i].k.node,
                                                                   &self.sized[i].k.params)
                            if st != 0:
                                break
                    if st == 0:
                        info.result = 0
                        st = eagle_cuda_graph_exec_update(self.handle, self.graph.handle, &info)
                check(st, f"cuGraphExecUpdate carrying the retune into control-flow bodies "
                          f"(logical size {n})")

    def write_back_to_graph(self):
        """Set every sized node of the instantiated-from graph to eagle's
        current copy (grid and arguments), so a clone of the graph (the body of
        a WHILE node) launches as the exec does now."""
        cdef Py_ssize_t i
        cdef int st = 0
        with self._lock:
            self._alive()
            for i in range(self.n_sized):
                with nogil:
                    st = eagle_cuda_kernel_node_set_params(self.sized[i].k.node,
                                                           &self.sized[i].k.params)
                check(st, f"cuGraphKernelNodeSetParams (sized kernel node {i})")

    def _free_sized(self):
        cdef Py_ssize_t i
        for i in range(self.n_sized):
            eagle_cuda_sized_free(&self.sized[i].k)
        PyMem_Free(self.sized)
        self.sized = NULL
        self.n_sized = self.cap_sized = 0

    def close(self):
        cdef eagle_cudaGraphExec_t e
        cdef int st = 0
        with self._lock:
            e = self.handle
            self.handle = NULL
            self._free_sized()
            self.updated_from = []
            if e != NULL:
                with nogil:
                    st = eagle_cuda_graph_exec_destroy(e)
                check(st, "cuGraphExecDestroy")

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.handle != NULL:
            with nogil:
                eagle_cuda_graph_exec_destroy(self.handle)
            self.handle = NULL
        for i in range(self.n_sized):
            eagle_cuda_sized_free(&self.sized[i].k)
        PyMem_Free(self.sized)
        self.sized = NULL


# ---- kernels ----------------------------------------------------------------------

def launch_kernel(uintptr_t func, grid, block, args=(), size_t shared_mem=0, stream=None):
    """cuLaunchKernel of ``func`` (a CUfunction: CuPy's ``Function.ptr``,
    cuModuleGetFunction, cudaGetFuncBySymbol). ``args``: a sequence of ctypes
    objects (one per kernel parameter, e.g. ``c_void_p(ptr)``, ``c_int64(n)``);
    the driver copies their values during the call (also during capture)."""
    import ctypes
    cdef eagle_dim3 g = _dim3(grid)
    cdef eagle_dim3 b = _dim3(block)
    cdef eagle_cudaStream_t s = _stream_handle(stream)
    cdef Py_ssize_t n = len(args), i
    cdef void **argv = <void **>PyMem_Malloc((n if n else 1) * sizeof(void *))
    cdef int st
    if argv == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            argv[i] = <void *><uintptr_t>ctypes.addressof(args[i])
        with nogil:
            st = eagle_cuda_launch_kernel(<eagle_CUfunction>func, g, b, argv, shared_mem, s)
        check(st, "cuLaunchKernel")
    finally:
        PyMem_Free(argv)


def kernel_node_name(uintptr_t node, unknown=None):
    """The kernel's name of a kernel node (driver 12.3+; its CUfunction or CUkernel), or
    None (not a kernel node, or a name the driver did not give); ``unknown`` for a kernel
    node on a driver without cuFuncGetName (12.0-12.2)."""
    cdef const char *name = NULL
    cdef int st
    with nogil:
        st = eagle_cuda_kernel_node_name(<eagle_cudaGraphNode_t>node, &name)
    if st == EAGLE_CUDA_ERROR_TOO_OLD:
        return unknown
    if st != 0 or name == NULL:
        return None
    return name.decode("utf-8", "replace")


def kernel_node_params(uintptr_t node):
    """Driver view of a kernel node: dict(func, grid, block, shared_mem, kernel_params)."""
    cdef eagle_CUDA_KERNEL_NODE_PARAMS_v2 p
    cdef int st
    with nogil:
        st = eagle_cuda_kernel_node_get_params(<eagle_cudaGraphNode_t>node, &p)
    check(st, "cuGraphKernelNodeGetParams")
    return dict(func=<uintptr_t>p.func,
                grid=(p.gridDimX, p.gridDimY, p.gridDimZ),
                block=(p.blockDimX, p.blockDimY, p.blockDimZ),
                shared_mem=p.sharedMemBytes,
                kernel_params=<uintptr_t>p.kernelParams)


# ---- device memory ------------------------------------------------------------------

def copy_to_device(uintptr_t dst, data, stream=None):
    """Copy the bytes of the host buffer ``data`` to device address ``dst`` (memory eagle
    does not own: a node's array), with cuMemcpyAsync on ``stream``, then synchronize it."""
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef size_t n = view.shape[0]
    cdef eagle_cudaStream_t s = _stream_handle(stream)
    cdef int st
    if n == 0:
        return
    with nogil:
        st = eagle_cuda_memcpy_async(<void *>dst, &view[0], n, s)
        if st == 0:
            st = eagle_cuda_stream_synchronize(s)
    check(st, "cuMemcpyAsync (host to device)")


cdef class DeviceBuffer:
    """``nbytes`` of device memory (cuMemAlloc), owned; freed by ``close()`` or on
    collection. ``ptr`` is the device address. ``write(data, stream, offset)`` copies
    the bytes of a host buffer to ``ptr + offset``, ``read_into(out, stream, offset,
    synchronize=True)`` copies ``len(out)`` bytes from ``ptr + offset`` into the writable
    host buffer ``out`` and returns it; both with cuMemcpyAsync on ``stream``, then
    synchronize it (``read_into(..., synchronize=False)`` leaves that to the caller;
    never while it captures). eagle uses it for the device logical size, the replay
    counter and the compaction scratch, which live as long as the built graph."""
    cdef void *handle
    cdef readonly size_t nbytes

    def __cinit__(self, size_t nbytes):
        cdef void *p = NULL
        cdef int st
        self.handle = NULL
        self.nbytes = nbytes
        with nogil:
            st = eagle_cuda_malloc(&p, nbytes)
        check(st, f"cuMemAlloc({nbytes})")
        self.handle = p

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def write(self, data, stream=None, size_t offset=0):
        """Copy the bytes of ``data`` (a buffer, e.g. a NumPy array) to ``ptr + offset``."""
        cdef const unsigned char[::1] view = memoryview(data).cast("B")
        cdef size_t n = view.shape[0]
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        if self.handle == NULL:
            raise ValueError("the DeviceBuffer is closed")
        if offset + n > self.nbytes:
            raise ValueError(f"writing {n} bytes at {offset} overruns the buffer ({self.nbytes})")
        if n == 0:
            return
        with nogil:
            st = eagle_cuda_memcpy_async(<char *>self.handle + offset, &view[0], n, s)
            if st == 0:
                st = eagle_cuda_stream_synchronize(s)
        check(st, "cuMemcpyAsync (host to device)")

    def read_into(self, out, stream=None, size_t offset=0, bint synchronize=True):
        """Copy len(out) bytes from ``ptr + offset`` into the writable buffer ``out``."""
        cdef unsigned char[::1] view = memoryview(out).cast("B")
        cdef size_t n = view.shape[0]
        cdef eagle_cudaStream_t s = _stream_handle(stream)
        cdef int st
        if self.handle == NULL:
            raise ValueError("the DeviceBuffer is closed")
        if offset + n > self.nbytes:
            raise ValueError(f"reading {n} bytes at {offset} overruns the buffer ({self.nbytes})")
        if n == 0:
            return out
        with nogil:
            st = eagle_cuda_memcpy_async(&view[0], <char *>self.handle + offset, n, s)
            if st == 0 and synchronize:
                st = eagle_cuda_stream_synchronize(s)
        check(st, "cuMemcpyAsync (device to host)")
        return out

    def close(self):
        cdef void *p = self.handle
        cdef int st
        self.handle = NULL
        if p != NULL:
            with nogil:
                st = eagle_cuda_free(p)
            check(st, "cuMemFree")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                eagle_cuda_free(self.handle)
            self.handle = NULL


cdef class HostFlag:
    """An int32 in host-mapped pinned memory (cuMemHostAlloc PORTABLE | DEVICEMAP): the
    host sets it with a plain store while kernels run, with no stream and no copy to wait
    behind the running work; kernels read it at ``device_ptr`` (volatile). eagle's stop
    flag: a control-flow loop's condition kernel reads it, so Ctrl-C ends the loop at its
    next check. Zero when made; freed by ``close()`` or on collection."""
    cdef void *host
    cdef unsigned long long dev

    def __cinit__(self):
        cdef void *h = NULL
        cdef unsigned long long d = 0
        cdef int st
        self.host = NULL
        self.dev = 0
        with nogil:
            st = eagle_cuda_host_alloc_mapped(&h, &d, 4)
        check(st, "cuMemHostAlloc (DEVICEMAP) / cuMemHostGetDevicePointer")
        self.host = h
        self.dev = d

    @property
    def device_ptr(self):
        return <uintptr_t>self.dev

    def set(self, int value):
        if self.host == NULL:
            raise ValueError("the HostFlag is closed")
        # a release store: what the host wrote before is visible once the flag is
        host_flag_store(<int32_t *>self.host, value)

    def get(self):
        if self.host == NULL:
            raise ValueError("the HostFlag is closed")
        return host_flag_load(<int32_t *>self.host)

    def close(self):
        cdef void *h = self.host
        cdef int st
        self.host = NULL
        self.dev = 0
        if h != NULL:
            with nogil:
                st = eagle_cuda_host_free(h)
            check(st, "cuMemFreeHost")

    def __dealloc__(self):
        if self.host != NULL:
            with nogil:
                eagle_cuda_host_free(self.host)
            self.host = NULL
