"""MPI calls without Python: collectives as nogil team kernels.

eagle is built without ``mpi.h`` and without linking an MPI library. At run time
the MPI entry points (``MPI_Allreduce``, ``MPI_Allgather``, ``MPI_Bcast``,
``MPI_Sendrecv``, ``MPI_Abort``, ``MPI_Error_string``) are looked up with
``dlsym`` in the MPI library that mpi4py loaded, so eagle calls the very MPI
mpi4py initialized, with the communicator, datatype and op handles mpi4py
holds (``MPI._handleof``).

The handle types differ between MPI ABIs: MPICH's are ``int``, Open MPI's and
the standard MPI ABI's (MPI 5) are pointers. ``MPI._sizeof(MPI.Comm)`` says
which; each call goes through a function-pointer type of the right kind.
``MPI_IN_PLACE`` is read from mpi4py (``MPI.Get_address(MPI.IN_PLACE)``),
never assumed.

A collective is a team kernel of one phase: the executor calls it on every
replay, whatever the logical size, and only thread 0 of the team (the thread
that called ``launch``) calls MPI. An MPI error cannot be raised from there: the
kernel prints which rank, node and call failed, with MPI's own text, and
calls ``MPI_Abort`` so that no rank waits forever (then ``_exit(1)``: MPICH's
``MPI_Abort`` returns while its process manager ends the job).
"""
from libc.stdint cimport int32_t, int64_t, intptr_t, uintptr_t
from libc.stdio cimport fprintf, fflush, stderr
from libc.string cimport strncpy, memset
from posix.unistd cimport _exit, usleep
from posix.dlfcn cimport dlopen, dlsym, dlerror, RTLD_NOW, RTLD_LOCAL

from eagle.native cimport Kernel, wrap_team_kernel

# MPI entry points, for int handles (MPICH) and pointer handles (Open MPI, MPI ABI)
ctypedef int (*allreduce_i_t)(const void *, void *, int, int, int, int) noexcept nogil
ctypedef int (*allreduce_p_t)(const void *, void *, int, void *, void *, void *) noexcept nogil
ctypedef int (*allgather_i_t)(const void *, int, int, void *, int, int, int) noexcept nogil
ctypedef int (*allgather_p_t)(const void *, int, void *, void *, int, void *, void *) noexcept nogil
ctypedef int (*bcast_i_t)(void *, int, int, int, int) noexcept nogil
ctypedef int (*bcast_p_t)(void *, int, void *, int, void *) noexcept nogil
ctypedef int (*sendrecv_i_t)(const void *, int, int, int, int, void *, int, int, int, int, int,
                             void *) noexcept nogil
ctypedef int (*sendrecv_p_t)(const void *, int, void *, int, int, void *, int, void *, int, int,
                             void *, void *) noexcept nogil
ctypedef int (*abort_i_t)(int, int) noexcept nogil
ctypedef int (*abort_p_t)(void *, int) noexcept nogil
ctypedef int (*error_string_t)(int, char *, int *) noexcept nogil

cdef enum:
    ALLREDUCE = 0
    ALLGATHER = 1
    BCAST = 2
    SENDRECV = 3
    STATUS_BYTES = 256     # larger than MPI_Status in every ABI (MPICH 20, Open MPI 24, MPI ABI 32)
    NAME_BYTES = 128
    ABORT_DELAY_US = 500000

cdef struct mpi_api:
    bint ready
    bint pointer_handles
    void *in_place
    void *allreduce
    void *allgather
    void *bcast
    void *sendrecv
    void *abort_
    void *error_string

cdef mpi_api API

cdef struct call_t:
    int what
    int count            # elements sent (allreduce, allgather, bcast, sendrecv)
    int recv_count       # elements received per rank (allgather) or in all (sendrecv)
    int in_place
    intptr_t dtype
    intptr_t op
    intptr_t comm
    int root
    int dest
    int source
    int send_tag
    int recv_tag
    int rank
    int size
    char name[NAME_BYTES]
    char status[STATUS_BYTES]

_CALL_NAMES = ("MPI_Allreduce", "MPI_Allgather", "MPI_Bcast", "MPI_Sendrecv")
_SYMBOLS = ("MPI_Allreduce", "MPI_Allgather", "MPI_Bcast", "MPI_Sendrecv", "MPI_Abort", "MPI_Error_string")


cdef void fail(call_t *c, int rc) noexcept nogil:
    cdef char text[512]
    cdef int length = 0
    memset(text, 0, sizeof(text))
    if API.error_string != NULL:
        (<error_string_t>API.error_string)(rc, text, &length)
    cdef const char *call = b"MPI_Sendrecv"
    if c.what == ALLREDUCE:
        call = b"MPI_Allreduce"
    elif c.what == ALLGATHER:
        call = b"MPI_Allgather"
    elif c.what == BCAST:
        call = b"MPI_Bcast"
    fprintf(stderr, b"eagle: rank %d of %d: %s in node '%s' failed (MPI error %d: %s); aborting the MPI job "
            b"so that no rank waits forever in the next collective\n", c.rank, c.size, call, c.name, rc, text)
    fflush(stderr)
    usleep(ABORT_DELAY_US)   # the process manager forwards the message before it ends the job
    if API.pointer_handles:
        (<abort_p_t>API.abort_)(<void *>c.comm, 1)
    else:
        (<abort_i_t>API.abort_)(<int>c.comm, 1)
    # MPI_Abort may return (MPICH's asks the process manager to end the job and goes
    # on); this rank must not go on with a failed collective
    _exit(1)


cdef int call_mpi(call_t *c, char **data) noexcept nogil:
    cdef bint p = API.pointer_handles
    cdef const void *send
    cdef void *recv
    if c.what == ALLREDUCE:
        send = API.in_place if c.in_place else data[0]
        recv = data[0] if c.in_place else data[1]
        if p:
            return (<allreduce_p_t>API.allreduce)(send, recv, c.count, <void *>c.dtype, <void *>c.op,
                                                  <void *>c.comm)
        return (<allreduce_i_t>API.allreduce)(send, recv, c.count, <int>c.dtype, <int>c.op, <int>c.comm)
    if c.what == ALLGATHER:
        if p:
            return (<allgather_p_t>API.allgather)(data[0], c.count, <void *>c.dtype, data[1], c.recv_count,
                                                  <void *>c.dtype, <void *>c.comm)
        return (<allgather_i_t>API.allgather)(data[0], c.count, <int>c.dtype, data[1], c.recv_count,
                                              <int>c.dtype, <int>c.comm)
    if c.what == BCAST:
        if p:
            return (<bcast_p_t>API.bcast)(data[0], c.count, <void *>c.dtype, c.root, <void *>c.comm)
        return (<bcast_i_t>API.bcast)(data[0], c.count, <int>c.dtype, c.root, <int>c.comm)
    if p:
        return (<sendrecv_p_t>API.sendrecv)(data[0], c.count, <void *>c.dtype, c.dest, c.send_tag,
                                            data[1], c.recv_count, <void *>c.dtype, c.source, c.recv_tag,
                                            <void *>c.comm, c.status)
    return (<sendrecv_i_t>API.sendrecv)(data[0], c.count, <int>c.dtype, c.dest, c.send_tag,
                                        data[1], c.recv_count, <int>c.dtype, c.source, c.recv_tag,
                                        <int>c.comm, c.status)


cdef void collective_kernel(int32_t phase, int32_t thread, int32_t n_threads, int64_t size, char **data,
                            const int64_t *strides, void *user_data) noexcept nogil:
    # every replay, whatever the logical size; MPI from the launching thread only
    if thread != 0:
        return
    cdef call_t *c = <call_t *>user_data
    cdef int rc = call_mpi(c, data)
    if rc != 0:
        fail(c, rc)


def resolve(str library, bint pointer_handles, uintptr_t in_place):
    """Find the MPI entry points in ``library`` (mpi4py's MPI module, whose dependencies
    include the MPI library), else in the process's global scope."""
    cdef void *handle = dlopen(library.encode(), RTLD_NOW | RTLD_LOCAL)
    cdef void *everywhere = dlopen(NULL, RTLD_NOW)
    cdef void *found[6]
    for k, name in enumerate(_SYMBOLS):
        b = name.encode()
        found[k] = dlsym(handle, b) if handle != NULL else NULL
        if found[k] == NULL and everywhere != NULL:
            found[k] = dlsym(everywhere, b)
        if found[k] == NULL:
            raise ImportError(f"eagle.mpi: cannot find {name} in the MPI library mpi4py loaded "
                              f"({library}); is mpi4py built against a shared MPI library?")
    API.allreduce, API.allgather, API.bcast = found[0], found[1], found[2]
    API.sendrecv, API.abort_, API.error_string = found[3], found[4], found[5]
    API.pointer_handles = pointer_handles
    API.in_place = <void *>in_place
    API.ready = True


def resolved():
    return bool(API.ready)


cdef class CollectiveCall:
    """One collective's arguments, and the team kernel that makes the call."""
    cdef call_t c
    cdef readonly Kernel kernel
    cdef readonly object what_name

    def __init__(self, str what, str name, int count, int recv_count, bint in_place, uintptr_t dtype,
                 uintptr_t op, uintptr_t comm, int root, int dest, int source, int send_tag, int recv_tag,
                 int rank, int size):
        if not API.ready:
            raise RuntimeError("eagle.mpi: the MPI entry points are not resolved (eagle.mpi._runtime.api())")
        memset(&self.c, 0, sizeof(call_t))
        self.c.what = {"allreduce": ALLREDUCE, "allgather": ALLGATHER, "bcast": BCAST, "sendrecv": SENDRECV}[what]
        self.what_name = _CALL_NAMES[self.c.what]
        self.c.count, self.c.recv_count, self.c.in_place = count, recv_count, in_place
        # handles arrive as unsigned addresses; an int handle is the low 32 bits
        self.c.dtype, self.c.op, self.c.comm = <intptr_t>dtype, <intptr_t>op, <intptr_t>comm
        self.c.root, self.c.dest, self.c.source = root, dest, source
        self.c.send_tag, self.c.recv_tag = send_tag, recv_tag
        self.c.rank, self.c.size = rank, size
        self.set_name(name)
        self.kernel = wrap_team_kernel(collective_kernel, 1, name, &self.c, self)

    def set_name(self, str name):
        """The node name an MPI error message gives (set again at build, when the graph named it)."""
        b = name.encode("utf-8", "replace")[:NAME_BYTES - 1]
        memset(self.c.name, 0, NAME_BYTES)
        strncpy(self.c.name, b, NAME_BYTES - 1)
