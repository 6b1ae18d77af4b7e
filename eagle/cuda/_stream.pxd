# cython: language_level=3
"""eagle.cuda._stream for ``cimport``: streams (owned and borrowed) and events."""
from eagle.cuda._driver cimport eagle_cudaStream_t, eagle_cudaEvent_t


cdef class StreamBase:
    cdef eagle_cudaStream_t handle


cdef class Stream(StreamBase):
    pass


cdef class BorrowedStream(StreamBase):
    cdef readonly object owner


cdef class Event:
    cdef eagle_cudaEvent_t handle
