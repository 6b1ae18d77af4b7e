# cython: language_level=3
"""eagle.cuda._stream — CUDA streams and events, and the capture of a stream into a graph.

In the manner of CuPy's ``cupy.cuda.stream``, with ownership in the class:

* :class:`Stream` creates its stream and destroys it (``close()``, or on collection);
  :class:`BorrowedStream` wraps one someone else owns (CuPy's ``stream.ptr``, torch's),
  keeping ``owner`` alive and never destroying it. Both are a :class:`StreamBase`: wait,
  query, order after an event, capture.
* :class:`Event` — a timing-free event, owned, for fork/join of side-by-side branches
  during capture (``fork`` / ``join``).
* :class:`NodeOwners` — attributes the graph nodes a capture adds to eagle node indices,
  so a failed instantiate names the eagle node.

**No garbage collection while a stream captures.** A collection inside a capture runs
the finalizers of whatever GPU objects became garbage (CuPy's, torch's, eagle's) there,
and CUDA refuses many of their calls during a capture: on an H200 one such collection
aborted the process (tests/gpu/RESULTS.md). So a stream's begin-capture turns Python's
cyclic collector off and its end-capture (or the stream's end) turns it back on once no
stream captures any more, as it was before the first (PyTorch's ``torch.cuda.graph``
guards its captures the same way). Kept in C, beside the capture calls, so a Ctrl-C can
fall before or after the pair of them but never between a capture and its pause.
:func:`collection_paused` extends the pause over what surrounds a capture: the collector
comes back the moment a capture ends, and the collection it had put off then ran inside
the capture's memory-pool scope, as it was being left (CuPy's allocator and torch's
``use_mem_pool`` still in use), and aborted the process the same way on an H200.
A capture's pause belongs to the stream: ending it through another wrapper of the same
stream (a ``BorrowedStream`` of its ``ptr``) ends it. Two limits, both of the collector
being off: a ``gc.disable()`` called while a pause is held is undone when the last pause
ends (the collector comes back as it was before the first), and a wrapper left capturing
inside a reference cycle keeps its pause until an explicit ``gc.collect()`` frees it (eagle
ends every capture it begins, on every path).

Every call goes through eagle.cuda._driver (errors: its ``DriverError``). Handles may be used
from any thread.
"""
from libc.stdint cimport uintptr_t

from eagle.cuda._driver cimport (
    eagle_cudaGraph_t, eagle_cudaGraphNode_t, eagle_CUfunction, eagle_dim3, NodeArray, check,
    dim3, stream_handle, stream_create, stream_destroy, stream_synchronize, stream_query,
    stream_wait_event, wait_polling, event_create, event_destroy, event_record, event_synchronize,
    event_query, begin_capture, end_capture, capture_status, capture_info, last_node,
    begin_capture_to_graph, set_capture_deps, graph_node_count, graph_nodes, launch_kernel as
    _launch_kernel, EAGLE_CUDA_STREAM_NON_BLOCKING, EAGLE_CUDA_EVENT_DISABLE_TIMING,
    EAGLE_CUDA_CAPTURE_MODE_RELAXED, EAGLE_CUDA_CAPTURE_STATUS_ACTIVE)
from eagle.cuda._graph cimport GraphBase, own_graph
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    int PyGC_Enable()
    int PyGC_Disable()

from eagle._errors import CudaError

__all__ = ["StreamBase", "Stream", "BorrowedStream", "Event", "NodeOwners", "fork", "join",
           "launch_kernel", "captures_pausing_collection", "collection_paused"]

# the pauses held now: streams capturing and collection_paused() scopes (any thread; the
# GIL guards these), and whether the collector was on when the first of them began
cdef Py_ssize_t _pauses = 0
cdef bint _collector_was_on = False


cdef void _pause() noexcept:
    global _pauses, _collector_was_on
    if _pauses == 0:
        _collector_was_on = PyGC_Disable()
    _pauses += 1


cdef void _resume() noexcept:
    global _pauses
    _pauses -= 1
    if _pauses == 0 and _collector_was_on:
        PyGC_Enable()


# the streams whose capture holds a pause, by handle: the address of the wrapper that
# began the capture (a borrowed reference: a wrapper leaves this when its pause ends, and
# it ends at the latest when the wrapper is closed or freed), so the capture's end through
# any wrapper of the same stream (a BorrowedStream of its ptr) releases it
cdef dict _pausing_streams = {}


cdef void _pause_collection(StreamBase s) noexcept:
    key = <uintptr_t>s.handle
    if key in _pausing_streams:
        return
    _pausing_streams[key] = <uintptr_t><PyObject *>s
    _pause()


cdef void _resume_collection(StreamBase s) noexcept:
    """s's own pause ends, if it holds one (its capture ended, or s is closed or freed)."""
    key = <uintptr_t>s.handle
    if _pausing_streams.get(key) != <uintptr_t><PyObject *>s:
        return
    del _pausing_streams[key]
    _resume()


cdef void _capture_ended(StreamBase s) noexcept:
    """The capture of s's stream ended through s: the pause of whichever wrapper of that
    stream began it ends."""
    if _pausing_streams.pop(<uintptr_t>s.handle, None) is not None:
        _resume()


def captures_pausing_collection():
    """How many captures and :func:`collection_paused` scopes keep the garbage collector
    off now (module doc)."""
    return _pauses


cdef class _CollectionPause:
    """The context manager :func:`collection_paused` returns: entered and left in C, so a
    Ctrl-C lands before the pause or inside the ``with`` (whose exit resumes), never
    between the two; entered again inside itself, it counts the nesting (the outer
    ``with`` keeps its pause)."""
    cdef Py_ssize_t held

    def __enter__(self):
        self.held += 1
        _pause()
        return self

    def __exit__(self, *exc):
        if self.held > 0:
            self.held -= 1
            _resume()
        return False

    def __dealloc__(self):
        while self.held > 0:
            self.held -= 1
            _resume()


def collection_paused():
    """Context manager: no cyclic garbage collection inside it (module doc), counted with
    the streams' captures; wrap what surrounds a capture, e.g. its memory-pool scope."""
    return _CollectionPause()


cdef class StreamBase:
    """What every stream does; made as a :class:`Stream` (owned) or a
    :class:`BorrowedStream`."""

    def __cinit__(self, *args, **kwargs):
        self.handle = NULL

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def __cuda_stream__(self):
        """The CUDA stream protocol (cuda.core; CuPy 14's ``Stream.from_external``):
        ``(0, handle)``."""
        return (0, <uintptr_t>self.handle)

    def synchronize(self):
        stream_synchronize(self.handle)

    def query(self):
        """True when every operation queued on the stream is done (cuStreamQuery), False
        while some is queued or running; raises the driver's error otherwise."""
        return stream_query(self.handle)

    def wait(self):
        """Wait for the stream's work like ``synchronize``, but interruptibly: polls
        cuStreamQuery without the GIL (a short spin, then sleeps backing off to 1 ms) and
        calls PyErr_CheckSignals every few ms, so Ctrl-C raises KeyboardInterrupt here
        with the work still running (the caller stops or drains it)."""
        wait_polling(self.handle, False)

    def wait_event(self, Event event not None):
        stream_wait_event(self.handle, event.handle)

    def begin_capture(self, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Start capturing (relaxed mode by default: a memory pool may allocate
        during capture), the garbage collector off until it ends (module doc). Pair
        with ``end_capture`` on every path."""
        begin_capture(self.handle, mode)
        _pause_collection(self)

    def end_capture(self):
        """End the capture and return the captured graph (an owned ``Graph``)."""
        try:
            return own_graph(end_capture(self.handle))
        finally:
            _capture_ended(self)

    def capture(self, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Context manager: ``with stream.capture() as cap: ...``; afterwards
        ``cap.graph`` is the captured Graph. The capture is ended also when
        the body raises (the body's exception wins; the invalid graph is
        dropped)."""
        return _Capture(self, mode)

    def capture_status(self):
        return capture_status(self.handle)

    def is_capturing(self):
        return capture_status(self.handle) == EAGLE_CUDA_CAPTURE_STATUS_ACTIVE

    def capture_info(self):
        """(status, capture id, graph handle, [current dependency node handles])."""
        cdef int cs = 0
        cdef unsigned long long cid = 0
        cdef eagle_cudaGraph_t g = NULL
        cdef const eagle_cudaGraphNode_t *deps = NULL
        cdef size_t n = 0, i
        capture_info(self.handle, &cs, &cid, &g, &deps, &n)
        return cs, cid, <uintptr_t>g, [<uintptr_t>deps[i] for i in range(n)]

    def begin_capture_to_graph(self, GraphBase graph not None, int mode=EAGLE_CUDA_CAPTURE_MODE_RELAXED):
        """Capture into ``graph`` (cuStreamBeginCaptureToGraph, 12.3+): a conditional
        node's body or a child-graph node's graph. End it with ``end_capture_to_graph``."""
        begin_capture_to_graph(self.handle, graph.live_handle(), mode)
        _pause_collection(self)

    def end_capture_to_graph(self):
        """End a capture begun with ``begin_capture_to_graph``."""
        try:
            end_capture(self.handle)
        finally:
            _capture_ended(self)

    def set_capture_deps(self, nodes):
        """The capturing stream's next work follows ``nodes`` (handles of nodes added to
        the capture's graph by hand): cuStreamUpdateCaptureDependencies, SET."""
        set_capture_deps(self.handle, NodeArray(nodes))

    def last_node(self):
        """Handle of the node the last captured operation added (for retune)."""
        return <uintptr_t>last_node(self.handle)


cdef class Stream(StreamBase):
    """A CUDA stream eagle creates and owns: non-blocking by default; destroyed by
    ``close()`` or on collection."""

    def __cinit__(self, bint non_blocking=True):
        self.handle = stream_create(EAGLE_CUDA_STREAM_NON_BLOCKING if non_blocking else 0)

    def close(self):
        cdef int st
        s = self.handle
        _resume_collection(self)
        if s != NULL:
            self.handle = NULL
            with nogil:
                st = stream_destroy(s)
            check(st, "cuStreamDestroy")

    def __dealloc__(self):
        _resume_collection(self)
        if self.handle != NULL:
            with nogil:
                stream_destroy(self.handle)
            self.handle = NULL

    def __repr__(self):
        return f"<eagle.cuda._stream.Stream 0x{<uintptr_t>self.handle:x}>"


cdef class BorrowedStream(StreamBase):
    """A stream someone else owns (CuPy's ``stream.ptr``, torch's ``cuda_stream``): keeps
    ``owner`` alive, never destroys the stream; ``close()`` only forgets it."""

    def __cinit__(self, uintptr_t ptr, owner=None):
        self.handle = <void *>ptr
        self.owner = owner

    def close(self):
        _resume_collection(self)
        self.handle = NULL
        self.owner = None

    def __dealloc__(self):
        _resume_collection(self)

    def __repr__(self):
        return f"<eagle.cuda._stream.BorrowedStream 0x{<uintptr_t>self.handle:x}>"


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
    """A CUDA event eagle owns (timing-free unless ``timing``), for fork/join during capture."""

    def __cinit__(self, bint timing=False):
        self.handle = NULL
        self.handle = event_create(0 if timing else EAGLE_CUDA_EVENT_DISABLE_TIMING)

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def record(self, stream=None):
        event_record(self.handle, stream_handle(stream))

    def synchronize(self):
        event_synchronize(self.handle)

    def query(self):
        """True when the work before the event's last record is done (cuEventQuery)."""
        return event_query(self.handle)

    def wait(self):
        """``synchronize``, interruptibly (see ``StreamBase.wait``)."""
        wait_polling(self.handle, True)

    def close(self):
        cdef int st
        e = self.handle
        if e != NULL:
            self.handle = NULL
            with nogil:
                st = event_destroy(e)
            check(st, "cuEventDestroy")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                event_destroy(self.handle)
            self.handle = NULL


def fork(StreamBase origin not None, sides, Event event not None):
    """Fork during capture: record ``event`` on ``origin``, make each side stream wait on it."""
    event.record(origin)
    for s in sides:
        (<StreamBase?>s).wait_event(event)


def join(StreamBase origin not None, sides, events):
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


def launch_kernel(uintptr_t func, grid, block, args=(), size_t shared_mem=0, stream=None):
    """cuLaunchKernel of ``func`` (a CUfunction: CuPy's ``Function.ptr``,
    cuModuleGetFunction, cudaGetFuncBySymbol) on ``stream``. ``args``: a sequence of ctypes
    objects (one per kernel parameter, e.g. ``c_void_p(ptr)``, ``c_int64(n)``); the driver
    copies their values during the call (also during capture)."""
    import ctypes
    cdef eagle_dim3 g = dim3(grid)
    cdef eagle_dim3 b = dim3(block)
    s = stream_handle(stream)
    cdef Py_ssize_t n = len(args), i
    cdef void **argv = <void **>PyMem_Malloc((n if n else 1) * sizeof(void *))
    if argv == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            argv[i] = <void *><uintptr_t>ctypes.addressof(args[i])
        _launch_kernel(<eagle_CUfunction>func, g, b, argv, shared_mem, s)
    finally:
        PyMem_Free(argv)


cdef class NodeOwners:
    """Which eagle node added which graph node during one capture.

    Call ``mark(index, stream)`` after capturing eagle node ``index`` on
    ``stream``: every graph node not seen before is attributed to it.
    ``owner(handle)`` gives the index (or None).
    """
    cdef StreamBase stream
    cdef dict owners
    cdef size_t seen

    def __init__(self, StreamBase stream not None):
        self.stream = stream
        self.owners = {}
        self.seen = 0

    def mark(self, index, StreamBase stream=None):
        """Attribute the graph nodes added since the last mark to eagle node ``index``,
        captured on ``stream`` (default: the origin stream); returns them. Linear in
        the nodes added: the node count tells whether any were added, and when the
        leaves of ``stream``'s capture are all of them (a kernel, a copy, a chain's
        last node alone) no listing is needed; otherwise the graph is listed."""
        cdef int cs = 0
        cdef eagle_cudaGraph_t g = NULL
        cdef const eagle_cudaGraphNode_t *deps = NULL
        cdef size_t n = 0, ndeps = 0, i
        cdef StreamBase on = stream if stream is not None else self.stream
        capture_info(self.stream.handle, &cs, NULL, &g, NULL, NULL)
        if cs != EAGLE_CUDA_CAPTURE_STATUS_ACTIVE or g == NULL:
            return []
        n = graph_node_count(g)
        if n == self.seen:
            return []
        added = []
        capture_info(on.handle, &cs, NULL, NULL, &deps, &ndeps)
        for i in range(ndeps):
            h = <uintptr_t>deps[i]
            if h not in self.owners and h not in added:
                added.append(h)
        if len(added) != n - self.seen:   # more than the leaves were added: list the graph
            added = [h for h in graph_nodes(g) if h not in self.owners]
        for h in added:
            self.owners[h] = index
        self.seen = n
        return added

    def owner(self, handle):
        return self.owners.get(handle)

    def __len__(self):
        return len(self.owners)
