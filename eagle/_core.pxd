# The compiled core of eagle.Graph, for the backends that launch from compiled code.
from libc.stdint cimport int64_t


cdef class CompiledLaunch:
    """A backend's launch path that eagle._core.GraphCore calls without a Python call
    (the cpu backend's plan is one). Both methods are called with the GIL held: ``run``
    by the thread holding the graph's lock, ``encloses_current_thread`` by a thread
    that found the lock taken (it only reads thread-local state)."""

    # replay n times (until_done: until the logical size is 0, at most n); the replays
    # done, or -1 with the exception set
    cdef int64_t run(self, int64_t n, bint until_done) except -1
    # whether a launch through this launcher encloses the calling thread (a worker of its
    # team, or a thread that one of its nodes started a nested launch on)
    cdef bint encloses_current_thread(self) noexcept
