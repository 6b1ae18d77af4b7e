# cython: language_level=3
"""eagle.cuda._memory — device memory and mapped host memory eagle owns.

* :class:`DeviceBuffer` — ``cuMemAlloc``'d bytes, with copies from and to host buffers;
  eagle's device logical size, replay counter, compaction scratch and error words.
* :class:`HostFlag` — an int32 in host-mapped pinned memory the host sets while kernels
  run (eagle's stop flag).
* ``copy_to_device`` — bytes into device memory eagle does not own (a node's array).

Every call goes through eagle.cuda._driver (errors: its ``DriverError``).
"""
from libc.stdint cimport uintptr_t, int32_t

from eagle.cuda._driver cimport (
    eagle_cudaStream_t, stream_handle, mem_alloc, mem_free, host_alloc_mapped, host_free, copy,
    check)

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

__all__ = ["DeviceBuffer", "HostFlag", "copy_to_device"]


def copy_to_device(uintptr_t dst, data, stream=None):
    """Copy the bytes of the host buffer ``data`` to device address ``dst`` (memory eagle
    does not own: a node's array), with cuMemcpyAsync on ``stream``, then synchronize it."""
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef size_t n = view.shape[0]
    cdef eagle_cudaStream_t s = stream_handle(stream)
    if n == 0:
        return
    copy(<void *>dst, &view[0], n, s, True, "cuMemcpyAsync (host to device)")


cdef class DeviceBuffer:
    """``nbytes`` of device memory (cuMemAlloc), owned; freed by ``close()`` or on
    collection. ``ptr`` is the device address. ``write(data, stream, offset)`` copies
    the bytes of a host buffer to ``ptr + offset``, ``read_into(out, stream, offset,
    synchronize=True)`` copies ``len(out)`` bytes from ``ptr + offset`` into the writable
    host buffer ``out`` and returns it; both with cuMemcpyAsync on ``stream``, then
    synchronize it (``read_into(..., synchronize=False)`` leaves that to the caller;
    never while it captures)."""
    cdef void *handle
    cdef readonly size_t nbytes

    def __cinit__(self, size_t nbytes):
        self.handle = NULL
        self.nbytes = nbytes
        self.handle = mem_alloc(nbytes)

    @property
    def ptr(self):
        return <uintptr_t>self.handle

    def write(self, data, stream=None, size_t offset=0):
        """Copy the bytes of ``data`` (a buffer, e.g. a NumPy array) to ``ptr + offset``."""
        cdef const unsigned char[::1] view = memoryview(data).cast("B")
        cdef size_t n = view.shape[0]
        cdef eagle_cudaStream_t s = stream_handle(stream)
        if self.handle == NULL:
            raise ValueError("the DeviceBuffer is closed")
        if offset + n > self.nbytes:
            raise ValueError(f"writing {n} bytes at {offset} overruns the buffer ({self.nbytes})")
        if n == 0:
            return
        copy(<char *>self.handle + offset, &view[0], n, s, True, "cuMemcpyAsync (host to device)")

    def read_into(self, out, stream=None, size_t offset=0, bint synchronize=True):
        """Copy len(out) bytes from ``ptr + offset`` into the writable buffer ``out``."""
        cdef unsigned char[::1] view = memoryview(out).cast("B")
        cdef size_t n = view.shape[0]
        cdef eagle_cudaStream_t s = stream_handle(stream)
        if self.handle == NULL:
            raise ValueError("the DeviceBuffer is closed")
        if offset + n > self.nbytes:
            raise ValueError(f"reading {n} bytes at {offset} overruns the buffer ({self.nbytes})")
        if n == 0:
            return out
        copy(&view[0], <char *>self.handle + offset, n, s, synchronize, "cuMemcpyAsync (device to host)")
        return out

    def close(self):
        cdef void *p = self.handle
        cdef int st
        self.handle = NULL
        if p != NULL:
            with nogil:
                st = mem_free(p)
            check(st, "cuMemFree")

    def __dealloc__(self):
        if self.handle != NULL:
            with nogil:
                mem_free(self.handle)
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
        self.host = NULL
        self.dev = 0
        host_alloc_mapped(&h, &d, 4)
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
                st = host_free(h)
            check(st, "cuMemFreeHost")

    def __dealloc__(self):
        if self.host != NULL:
            with nogil:
                host_free(self.host)
            self.host = NULL
