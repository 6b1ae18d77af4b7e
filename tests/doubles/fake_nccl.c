/* TEST DOUBLE: a stand-in for NCCL's libnccl.so.2 for the eagle.mpi tests, for a
 * communicator of ONE rank. It implements the entry points eagle calls with NCCL's
 * signatures and result codes, does what one rank of the real collective would do
 * (copy send to recv), and records every call so that the tests can check what
 * eagle asked for. It is not NCCL and is never installed.
 *
 * Where the copy happens:
 * - by default at once, on host memory, ignoring the stream (the unit tests present
 *   NumPy memory as CUDA arrays and call the node's function directly);
 * - with FAKE_NCCL_LIBCUDA=<path of a CUDA driver> (the tests give the driver
 *   stand-in tests/doubles/fake_libcuda.c), as real NCCL does: the copy is
 *   enqueued on the stream given, through that driver (cuMemcpyAsync resolved with
 *   cuGetProcAddress_v2), so during a stream capture it becomes a node of the CUDA
 *   graph and every replay repeats it; a call made on the wrong stream is not
 *   captured and the replays show it. A driver error is ncclUnhandledCudaError. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define ID_BYTES 128

typedef struct { char internal[ID_BYTES]; } ncclUniqueId;
typedef struct fake_comm {
    int nranks, rank, live;
    char tag[48];      /* ranks mode: the rendezvous file's name, from the unique id */
    long arrivals;     /* ranks mode: this rank's collectives so far; atomic */
    long graph_refs;   /* graphs (and execs made from them) that captured this communicator; atomic */
} fake_comm;

enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclInvalidArgument = 4, ncclInvalidUsage = 5 };

static fake_comm comms[16];
static int n_comms, n_ids, group_depth;
static long counters[16];
static const char *names[16] = {"ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclAllReduce",
                                "ncclAllGather", "ncclBroadcast", "ncclSend", "ncclRecv", "ncclGroupStart",
                                "ncclGroupEnd", "ncclGetVersion", NULL};
static char fail_name[64];
static int fail_status;

/* the last collective's arguments */
static struct { const void *send; void *recv; size_t count; int dtype, op, root, peer; void *comm, *stream; } last;
/* a pending send and receive inside a group (one rank: to and from itself) */
static const void *pend_send; static void *pend_recv; static size_t pend_send_n, pend_recv_n; static int pend_dt;
static void *pend_stream, *pend_comm;

/* the driver's cuMemcpyAsync when FAKE_NCCL_LIBCUDA names one (resolved on first use) */
typedef int (*memcpy_async_fn)(unsigned long long dst, unsigned long long src, size_t n, void *stream);
static memcpy_async_fn drv_memcpy;
typedef int (*capture_info_fn)(void *stream, int *status, unsigned long long *id, void **graph,
                               const void *const **deps, const void **edges, size_t *n);
typedef int (*userobj_create_fn)(void **obj, void *ptr, void (*destroy)(void *), unsigned refs,
                                 unsigned flags);
typedef int (*graph_retain_fn)(void *graph, void *obj, unsigned count, unsigned flags);
static capture_info_fn drv_capture_info;
static userobj_create_fn drv_userobj_create;
static graph_retain_fn drv_graph_retain;
static int drv_tried, last_cuda_error;

/* ---- ranks mode: every collective meets the other ranks ---------------------------- */
static const char *ranks_dir(void) {
    const char *d = getenv("FAKE_NCCL_RANKS_DIR");
    return d && *d ? d : NULL;
}
/* this rank's k-th collective on comm waits until every rank has reached its k-th */
static void rendezvous(fake_comm *c) {
    if (c->nranks == 1) return;
    long k = __atomic_add_fetch(&c->arrivals, 1, __ATOMIC_ACQ_REL);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ranks_dir(), c->tag);
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) { perror("fake_nccl rendezvous"); abort(); }
    if (pwrite(fd, &k, sizeof k, (off_t)c->rank * (off_t)sizeof k) != (ssize_t)sizeof k) abort();
    for (;;) {
        int all = 1;
        for (int r = 0; r < c->nranks && all; ++r) {
            long v = 0;
            if (pread(fd, &v, sizeof v, (off_t)r * (off_t)sizeof v) != (ssize_t)sizeof v) v = 0;
            all = v >= k;
        }
        if (all) break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    close(fd);
}
/* the rendezvous as a "kernel" of the driver stand-in (a module it loads: the table
 * fake_libcuda.c's fake_cuda_load_module reads), so a capture records it */
typedef struct { unsigned x, y, z; } fake_dim3;
typedef void (*fake_entry)(void **args, fake_dim3 grid, fake_dim3 block, unsigned shmem);
typedef void (*fake_block_entry)(void **args, fake_dim3 grid, fake_dim3 block, fake_dim3 block_idx);
/* the layout fake_libcuda.c reads (its fake_module_entry): a host-side kernel, no block entry,
 * so the stand-in runs it whole and loads no per-block copies of this library */
typedef struct { const char *name; unsigned nparams; const unsigned *sizes; unsigned pointer_mask;
                 fake_entry entry; fake_block_entry block_entry; unsigned static_shared, registers;
} fake_module_entry;
static void k_rendezvous(void **args, fake_dim3 g, fake_dim3 b, unsigned sh) {
    (void)g, (void)b, (void)sh;
    void *c;
    memcpy(&c, args[0], sizeof c);
    rendezvous((fake_comm *)c);
}
static const unsigned rendezvous_sizes[1] = {8};
EXPORT const fake_module_entry *fake_cuda_module_table(int *n) {
    static const fake_module_entry table[1] = {{"fake_nccl_rendezvous", 1, rendezvous_sizes, 0, k_rendezvous, NULL, 0, 0}};
    *n = 1;
    return table;
}
typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shmem, void *stream, void **params, void **extra);
static launch_fn drv_launch;
static void *rendezvous_kernel;

static memcpy_async_fn driver(void) {
    if (drv_tried) return drv_memcpy;
    drv_tried = 1;
    const char *path = getenv("FAKE_NCCL_LIBCUDA");
    if (!path || !*path) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);   /* the one eagle bound, if it did */
    if (!h) h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
    gpa_fn gpa = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    void *fn = NULL;
    int status = -1;
    if (gpa && gpa("cuMemcpyAsync", &fn, 12000, 0, &status) == 0 && status == 0)
        drv_memcpy = (memcpy_async_fn)fn;
    if (gpa && gpa("cuStreamGetCaptureInfo", &fn, 12030, 0, &status) == 0 && status == 0)
        drv_capture_info = (capture_info_fn)fn;
    if (gpa && gpa("cuUserObjectCreate", &fn, 12000, 0, &status) == 0 && status == 0)
        drv_userobj_create = (userobj_create_fn)fn;
    if (gpa && gpa("cuGraphRetainUserObject", &fn, 12000, 0, &status) == 0 && status == 0)
        drv_graph_retain = (graph_retain_fn)fn;
    if (ranks_dir() && gpa && gpa("cuLaunchKernel", &fn, 12000, 0, &status) == 0 && status == 0) {
        drv_launch = (launch_fn)fn;
        Dl_info self;
        int (*load)(const char *) = (int (*)(const char *))dlsym(h, "fake_cuda_load_module");
        void *(*lookup)(const char *) = (void *(*)(const char *))dlsym(h, "fake_cuda_module_function");
        if (load && lookup && dladdr((void *)fake_cuda_module_table, &self) && load(self.dli_fname) == 0)
            rendezvous_kernel = lookup("fake_nccl_rendezvous");
    }
    return drv_memcpy;
}

/* ---- captured collectives keep the communicator busy ----------------------------------
 * As NCCL (src/enqueue.cc, ncclCudaGraphAddDestructor) does for work enqueued on a
 * capturing stream: a CUDA user object whose destructor drops the communicator's count of
 * graphs referencing it, its reference moved to the capture's graph. ncclCommDestroy
 * (src/init.cc, commDestroySync: "keep polling until all graphs referencing us die")
 * then waits until every graph and exec made from that capture is destroyed. */

static void persistent_destructor(void *comm) {
    __atomic_sub_fetch(&((fake_comm *)comm)->graph_refs, 1, __ATOMIC_ACQ_REL);
}

static int note_capture(void *comm, void *stream) {
    if (!drv_capture_info || !drv_userobj_create || !drv_graph_retain) return ncclSuccess;
    int status = 0;
    void *graph = NULL, *obj = NULL;
    if (drv_capture_info(stream, &status, NULL, &graph, NULL, NULL, NULL) || status != 1 || !graph)
        return ncclSuccess;   /* not capturing: the collective runs now */
    if (drv_userobj_create(&obj, comm, persistent_destructor, 1, 1 /* NO_DESTRUCTOR_SYNC */))
        return ncclUnhandledCudaError;
    __atomic_add_fetch(&((fake_comm *)comm)->graph_refs, 1, __ATOMIC_ACQ_REL);
    if (drv_graph_retain(graph, obj, 1, 1 /* cudaGraphUserObjectMove */)) return ncclUnhandledCudaError;
    return ncclSuccess;
}

/* ranks mode: meet the other ranks, on the stream (a kernel node when captured) */
static int meet(void *comm, void *stream) {
    if (!ranks_dir() || ((fake_comm *)comm)->nranks == 1) return ncclSuccess;
    if (!driver() || !drv_launch || !rendezvous_kernel) { rendezvous((fake_comm *)comm); return ncclSuccess; }
    void *arg = comm;
    void *params[1] = {&arg};
    int rc = drv_launch(rendezvous_kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
    if (rc) { last_cuda_error = rc; return ncclUnhandledCudaError; }
    return ncclSuccess;
}

/* what one rank's collective does with the data: copy n bytes, now or on the stream */
static int move(void *dst, const void *src, size_t n, void *stream) {
    if (dst == src || !n) return ncclSuccess;
    if (getenv("FAKE_NCCL_LIBCUDA")) {
        memcpy_async_fn cp = driver();
        if (!cp) { last_cuda_error = -1; return ncclUnhandledCudaError; }
        int rc = cp((unsigned long long)(uintptr_t)dst, (unsigned long long)(uintptr_t)src, n, stream);
        if (rc) { last_cuda_error = rc; return ncclUnhandledCudaError; }
        return ncclSuccess;
    }
    memmove(dst, src, n);
    return ncclSuccess;
}

static size_t dtype_size(int t) {
    switch (t) {
    case 0: case 1: return 1;
    case 6: case 9: return 2;
    case 2: case 3: case 7: return 4;
    case 4: case 5: case 8: return 8;
    default: return 0;
    }
}

static int enter(const char *name) {
    for (int i = 0; names[i]; ++i)
        if (!strcmp(names[i], name)) counters[i]++;
    if (fail_name[0] && !strcmp(fail_name, name)) {
        fail_name[0] = 0;
        return fail_status;
    }
    return ncclSuccess;
}

/* a communicator this library made: compared as addresses (ordering pointers into
 * different objects is undefined), and only then read through */
static int valid(void *comm) {
    uintptr_t c = (uintptr_t)comm, lo = (uintptr_t)comms;
    if (c < lo || c >= lo + (uintptr_t)n_comms * sizeof *comms || (c - lo) % sizeof *comms) return 0;
    return ((fake_comm *)comm)->live;
}

EXPORT int ncclGetVersion(int *v) { int f = enter("ncclGetVersion"); if (f) return f; *v = 22304; return 0; }

EXPORT int ncclGetUniqueId(ncclUniqueId *id) {
    int f = enter("ncclGetUniqueId");
    if (f) return f;
    memset(id->internal, 0, ID_BYTES);
    memcpy(id->internal, "fake-nccl-id", 12);
    id->internal[ID_BYTES - 1] = (char)(++n_ids);
    snprintf(id->internal + 16, 47, "comm-%ld-%d", (long)getpid(), n_ids);   /* the rendezvous' name */
    return ncclSuccess;
}

EXPORT int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
    int f = enter("ncclCommInitRank");
    if (f) return f;
    int many = ranks_dir() != NULL;
    if ((!many && nranks != 1) || nranks < 1 || rank < 0 || rank >= nranks ||
        memcmp(id.internal, "fake-nccl-id", 12) != 0 || n_comms == 16)
        return ncclInvalidArgument;   /* one rank (unless in ranks mode), and an id this library made */
    comms[n_comms] = (fake_comm){nranks, rank, 1, {0}, 0, 0};
    memcpy(comms[n_comms].tag, id.internal + 16, sizeof comms[n_comms].tag - 1);
    *comm = &comms[n_comms++];
    return ncclSuccess;
}

EXPORT int ncclCommDestroy(void *comm) {
    int f = enter("ncclCommDestroy");
    if (f) return f;
    if (!valid(comm)) return ncclInvalidArgument;
    /* NCCL 2.14+: wait, forever, for the graphs that captured this communicator to die */
    while (__atomic_load_n(&((fake_comm *)comm)->graph_refs, __ATOMIC_ACQUIRE) > 0) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    ((fake_comm *)comm)->live = 0;
    return ncclSuccess;
}

static void remember(const void *s, void *r, size_t n, int dt, int op, int root, int peer, void *c, void *st) {
    last.send = s; last.recv = r; last.count = n; last.dtype = dt; last.op = op; last.root = root;
    last.peer = peer; last.comm = c; last.stream = st;
}

EXPORT int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, void *comm, void *stream) {
    int f = enter("ncclAllReduce");
    if (f) return f;
    if (!valid(comm) || !dtype_size(dt) || op < 0 || op > 4) return ncclInvalidArgument;
    remember(s, r, n, dt, op, -1, -1, comm, stream);
    if (getenv("FAKE_NCCL_LIBCUDA") && driver() && (f = note_capture(comm, stream)) != 0) return f;
    if ((f = meet(comm, stream)) != 0) return f;
    return move(r, s, n * dtype_size(dt), stream);   /* the reduction over one rank */
}

EXPORT int ncclAllGather(const void *s, void *r, size_t n, int dt, void *comm, void *stream) {
    int f = enter("ncclAllGather");
    if (f) return f;
    if (!valid(comm) || !dtype_size(dt)) return ncclInvalidArgument;
    if (getenv("FAKE_NCCL_LIBCUDA") && driver() && (f = note_capture(comm, stream)) != 0) return f;
    if ((f = meet(comm, stream)) != 0) return f;
    remember(s, r, n, dt, -1, -1, -1, comm, stream);
    return move(r, s, n * dtype_size(dt), stream);
}

EXPORT int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, void *comm, void *stream) {
    int f = enter("ncclBroadcast");
    if (f) return f;
    if (!valid(comm) || !dtype_size(dt) || root != 0) return ncclInvalidArgument;
    if (getenv("FAKE_NCCL_LIBCUDA") && driver() && (f = note_capture(comm, stream)) != 0) return f;
    if ((f = meet(comm, stream)) != 0) return f;
    remember(s, r, n, dt, -1, root, -1, comm, stream);
    return move(r, s, n * dtype_size(dt), stream);
}

EXPORT int ncclGroupStart(void) { int f = enter("ncclGroupStart"); if (f) return f; group_depth++; return 0; }

EXPORT int ncclSend(const void *s, size_t n, int dt, int peer, void *comm, void *stream) {
    int f = enter("ncclSend");
    if (f) return f;
    if (!valid(comm) || peer != 0 || !dtype_size(dt)) return ncclInvalidArgument;
    if (!group_depth) return ncclInvalidUsage;   /* eagle pairs them in a group */
    pend_send = s; pend_send_n = n; pend_dt = dt; pend_stream = stream; pend_comm = comm;
    remember(s, NULL, n, dt, -1, -1, peer, comm, stream);
    return ncclSuccess;
}

EXPORT int ncclRecv(void *r, size_t n, int dt, int peer, void *comm, void *stream) {
    int f = enter("ncclRecv");
    if (f) return f;
    if (!valid(comm) || peer != 0 || !dtype_size(dt)) return ncclInvalidArgument;
    if (!group_depth) return ncclInvalidUsage;
    pend_recv = r; pend_recv_n = n; pend_dt = dt;
    last.recv = r;
    return ncclSuccess;
}

EXPORT int ncclGroupEnd(void) {
    int f = enter("ncclGroupEnd");
    if (f) return f;
    if (!group_depth) return ncclInvalidUsage;
    if (--group_depth == 0) {
        if (pend_send && pend_recv) {
            if (pend_send_n > pend_recv_n) return ncclInvalidArgument;   /* the message would not fit */
            if (getenv("FAKE_NCCL_LIBCUDA") && driver() && (f = note_capture(pend_comm, pend_stream)) != 0)
                return f;
            int rc = move(pend_recv, pend_send, pend_send_n * dtype_size(pend_dt), pend_stream);
            pend_send = NULL; pend_recv = NULL;
            if (rc) return rc;
        } else if (pend_send || pend_recv) {
            return ncclInvalidUsage;   /* a send to itself needs its receive, and back */
        }
        pend_send = NULL; pend_recv = NULL;
    }
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(int r) {
    switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (fake NCCL)";
    case 4: return "invalid argument (fake NCCL)";
    case 5: return "invalid usage (fake NCCL)";
    default: return "unhandled error (fake NCCL)";
    }
}

/* ---- for the tests ---- */
EXPORT long fake_nccl_counter(const char *name) {
    for (int i = 0; names[i]; ++i)
        if (!strcmp(names[i], name)) return counters[i];
    return -1;
}
EXPORT void fake_nccl_fail_next(const char *name, int status) {
    strncpy(fail_name, name, sizeof fail_name - 1);
    fail_status = status;
}
EXPORT size_t fake_nccl_last_count(void) { return last.count; }
EXPORT int fake_nccl_last_dtype(void) { return last.dtype; }
EXPORT int fake_nccl_last_op(void) { return last.op; }
EXPORT int fake_nccl_last_root(void) { return last.root; }
EXPORT const void *fake_nccl_last_send(void) { return last.send; }
EXPORT void *fake_nccl_last_recv(void) { return last.recv; }
EXPORT void *fake_nccl_last_stream(void) { return last.stream; }
EXPORT int fake_nccl_last_cuda_error(void) { return last_cuda_error; }
EXPORT long fake_nccl_graph_refs(void) {   /* graphs referencing any communicator */
    long k = 0;
    for (int i = 0; i < n_comms; ++i) k += __atomic_load_n(&comms[i].graph_refs, __ATOMIC_ACQUIRE);
    return k;
}
EXPORT int fake_nccl_live_comms(void) {
    int k = 0;
    for (int i = 0; i < n_comms; ++i) k += comms[i].live;
    return k;
}
EXPORT void fake_nccl_reset(void) {
    memset(counters, 0, sizeof counters);
    memset(&last, 0, sizeof last);
    fail_name[0] = 0;
    group_depth = 0;
    pend_send = NULL; pend_recv = NULL; pend_stream = NULL; pend_comm = NULL;
    last_cuda_error = 0;
}
