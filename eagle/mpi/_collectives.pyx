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

A collective over several ranks is also the executor's ``eagle_group`` of its
communicator (csrc/cpu/plan.h): ``all_max`` takes the maximum of a few
numbers over the ranks, which the executor uses to compare the launch counts
at every launch and to stop ``launch_until_done`` on every rank at one replay.
The launch's comparison waits at most ``EAGLE_MPI_LAUNCH_TIMEOUT`` seconds
(default 300) for the other ranks, then ends the job naming rank and node.

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
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
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
ctypedef int (*iallreduce_i_t)(const void *, void *, int, int, int, int, void *) noexcept nogil
ctypedef int (*iallreduce_p_t)(const void *, void *, int, void *, void *, void *, void *) noexcept nogil
ctypedef int (*test_t)(void *, int *, void *) noexcept nogil

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
    void *iallreduce
    void *test

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
    intptr_t int64_type  # MPI_INT64_T and MPI_MAX, for the executor's all_max
    intptr_t max_op
    double launch_timeout_s
    int armed            # compare the launch call (arm_n, arm_until) over the ranks on the next call
    int64_t arm_n
    int arm_until

_CALL_NAMES = ("MPI_Allreduce", "MPI_Allgather", "MPI_Bcast", "MPI_Sendrecv")
_SYMBOLS = ("MPI_Allreduce", "MPI_Allgather", "MPI_Bcast", "MPI_Sendrecv", "MPI_Abort", "MPI_Error_string",
            "MPI_Iallreduce", "MPI_Test")


cdef void abort_job(call_t *c) noexcept nogil:
    usleep(ABORT_DELAY_US)   # the process manager forwards the message before it ends the job
    if API.pointer_handles:
        (<abort_p_t>API.abort_)(<void *>c.comm, 1)
    else:
        (<abort_i_t>API.abort_)(<int>c.comm, 1)
    # MPI_Abort may return (MPICH's asks the process manager to end the job and goes
    # on); this rank must not go on
    _exit(1)


cdef double now_s() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec + 1e-9 * t.tv_nsec


cdef void all_max(void *ctx, int64_t *vals, int32_t count, int32_t at_launch) noexcept nogil:
    """The executor's eagle_group call: vals := their maximum over the communicator's ranks."""
    cdef call_t *c = <call_t *>ctx
    cdef bint p = API.pointer_handles
    cdef int rc, done = 0
    cdef intptr_t request = 0
    cdef double started, t
    cdef int64_t n = 0
    cdef bint until = False
    cdef int spins = 0
    cdef unsigned pause_us = 1
    if not at_launch:
        # after a replay, in step with the graph's collectives: blocking, as they are
        if p:
            rc = (<allreduce_p_t>API.allreduce)(API.in_place, vals, count, <void *>c.int64_type,
                                                <void *>c.max_op, <void *>c.comm)
        else:
            rc = (<allreduce_i_t>API.allreduce)(API.in_place, vals, count, <int>c.int64_type, <int>c.max_op,
                                                <int>c.comm)
        if rc != 0:
            fail(c, rc, b"MPI_Allreduce (launch_until_done's stop)")
        return
    # at a launch's start: a rank that launches this graph fewer times (or never) would
    # leave this one waiting in its first collective; wait a bounded time instead.
    # (vals holds the launch call here: count, -count, mode, -mode, live; after a replay
    # it is one number)
    n, until = vals[0], vals[2] > 0
    if p:
        rc = (<iallreduce_p_t>API.iallreduce)(API.in_place, vals, count, <void *>c.int64_type,
                                              <void *>c.max_op, <void *>c.comm, &request)
    else:
        rc = (<iallreduce_i_t>API.iallreduce)(API.in_place, vals, count, <int>c.int64_type, <int>c.max_op,
                                              <int>c.comm, &request)
    if rc != 0:
        fail(c, rc, b"MPI_Iallreduce (the launch check)")
    started = -1
    while True:
        rc = (<test_t>API.test)(&request, &done, c.status)
        if rc != 0:
            fail(c, rc, b"MPI_Test (the launch check)")
        if done:
            return
        spins += 1
        if spins & 63:
            continue   # the other ranks are usually there within microseconds: spin, as MPI does
        t = now_s()
        if started < 0:
            started = t
        elif t - started > c.launch_timeout_s:
            fprintf(stderr, b"eagle: rank %d of %d: %s(%lld) of the graph with collective '%s' waited %g s %s "
                    b"for the other ranks to launch it too; a rank launches this graph fewer times or not at "
                    b"all (every rank must make the same launch calls; EAGLE_MPI_LAUNCH_TIMEOUT sets the "
                    b"wait); aborting the MPI job\n", c.rank, c.size,
                    b"launch_until_done" if until else b"launch", <long long>n, c.name, c.launch_timeout_s,
                    b"at its start (before replay 0)" if at_launch == 1 else
                    b"in replay 0, in its launch check at this node")
            fflush(stderr)
            abort_job(c)
        if t - started > 1e-3:
            # a millisecond late: a rank is elsewhere; poll less often
            usleep(pause_us)
            if pause_us < 10000:
                pause_us *= 2


cdef void arm(void *ctx, int64_t n, int32_t until_done, int32_t compare) noexcept nogil:
    """The executor's eagle_group call at a launch's start."""
    cdef call_t *c = <call_t *>ctx
    c.armed, c.arm_n, c.arm_until = compare, n, until_done


cdef void check_launch(call_t *c) noexcept nogil:
    """On replay 0 of a launch(n), at the communicator's first collective: every rank must
    have called launch with the same n (else one would wait for the others in a collective).
    The same exchange as launch_until_done's check at its start, so a rank in either meets a
    rank in the other."""
    cdef int64_t vals[5]
    vals[0], vals[1], vals[2], vals[3], vals[4] = c.arm_n, -c.arm_n, c.arm_until, -c.arm_until, 0
    all_max(c, vals, 5, 2)
    if vals[0] == -vals[1] and vals[2] == -vals[3]:
        return
    fprintf(stderr, b"eagle: rank %d of %d: %s(%lld) of the graph with collective '%s', but the ranks launch it "
            b"differently (%s from %lld to %lld); every rank must launch a graph with collectives with the same "
            b"call and count, or a rank would wait for the others in a collective forever; aborting the MPI "
            b"job\n", c.rank, c.size, b"launch_until_done" if c.arm_until else b"launch", <long long>c.arm_n,
            c.name, b"some call launch_until_done, others launch; counts" if vals[2] != -vals[3] else b"counts",
            <long long>-vals[1], <long long>vals[0])
    fflush(stderr)
    abort_job(c)


cdef void fail(call_t *c, int rc, const char *call=NULL) noexcept nogil:
    cdef char text[512]
    cdef int length = 0
    memset(text, 0, sizeof(text))
    if API.error_string != NULL:
        (<error_string_t>API.error_string)(rc, text, &length)
    if call == NULL:
        call = b"MPI_Sendrecv"
        if c.what == ALLREDUCE:
            call = b"MPI_Allreduce"
        elif c.what == ALLGATHER:
            call = b"MPI_Allgather"
        elif c.what == BCAST:
            call = b"MPI_Bcast"
    fprintf(stderr, b"eagle: rank %d of %d: %s in node '%s' failed (MPI error %d: %s); aborting the MPI job "
            b"so that no rank waits forever in the next collective\n", c.rank, c.size, call, c.name, rc, text)
    fflush(stderr)
    abort_job(c)   # this rank must not go on with a failed collective


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
    if c.armed:
        c.armed = 0
        check_launch(c)
    cdef int rc = call_mpi(c, data)
    if rc != 0:
        fail(c, rc)


def resolve(str library, bint pointer_handles, uintptr_t in_place):
    """Find the MPI entry points in ``library`` (mpi4py's MPI module, whose dependencies
    include the MPI library), else in the process's global scope."""
    cdef void *handle = dlopen(library.encode(), RTLD_NOW | RTLD_LOCAL)
    cdef void *everywhere = dlopen(NULL, RTLD_NOW)
    cdef void *found[8]
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
    API.iallreduce, API.test = found[6], found[7]
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
                 int rank, int size, uintptr_t int64_type=0, uintptr_t max_op=0):
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
        self.c.int64_type, self.c.max_op = <intptr_t>int64_type, <intptr_t>max_op
        self.c.launch_timeout_s = 300
        self.set_name(name)
        self.kernel = wrap_team_kernel(collective_kernel, 1, name, &self.c, self)

    def set_name(self, str name):
        """The node name an MPI error message gives (set again at build, when the graph named it)."""
        b = name.encode("utf-8", "replace")[:NAME_BYTES - 1]
        memset(self.c.name, 0, NAME_BYTES)
        strncpy(self.c.name, b, NAME_BYTES - 1)

    def set_launch_timeout(self, double seconds):
        """How long the check at a launch's start waits for the other ranks (EAGLE_MPI_LAUNCH_TIMEOUT)."""
        self.c.launch_timeout_s = seconds

    # ---- the executor's eagle_group (csrc/cpu/executor.h) of this call's communicator ----

    @property
    def key(self):
        """The communicator's handle: one group per communicator."""
        return <uintptr_t>self.c.comm

    @property
    def all_max_address(self):
        return <uintptr_t>&all_max

    @property
    def arm_address(self):
        return <uintptr_t>&arm

    @property
    def context_address(self):
        return <uintptr_t>&self.c

    def launch_mismatch(self, n, until_done, counts, modes):
        """The ranks' launch calls differ (counts and modes: (smallest, largest) over them); every
        rank raises, before any replay."""
        from eagle.mpi._errors import LaunchMismatchError

        call = "launch_until_done" if until_done else "launch"
        how = ("some ranks call launch() and others launch_until_done()" if modes[0] != modes[1]
               else f"the counts run from {counts[0]} to {counts[1]}")
        raise LaunchMismatchError(
            f"rank {self.c.rank} of {self.c.size}: {call}({n}) of the graph with collective "
            f"{self.c.name.decode('utf-8', 'replace')!r}, but the ranks launch it differently ({how}); every "
            "rank must launch a graph with collectives with the same call and count, or a rank would wait "
            "for the others in a collective forever. No replay ran.")
