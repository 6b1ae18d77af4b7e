/* TEST DOUBLE: the MPI entry points eagle's collective kernels call, for checking
 * the handle ABI only. Built twice by the tests: with -DPOINTER_HANDLES (Open MPI's
 * and the MPI-5 standard ABI's handles are pointers) and without (MPICH's are int).
 * Each call records its arguments and copies send to recv as one rank would; it is
 * not MPI and is never installed. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef POINTER_HANDLES
typedef void *handle;
#define AS_U64(h) ((uint64_t)(uintptr_t)(h))
#else
typedef int handle;
#define AS_U64(h) ((uint64_t)(int64_t)(h))
#endif

#define EXPORT __attribute__((visibility("default")))

static struct { char call[32]; const void *send; void *recv; int count, recv_count, root, dest, source, tag;
                uint64_t dtype, op, comm; } last;
static int aborted = -1;

static void note(const char *call, const void *s, void *r, int n, handle dt, uint64_t op, handle comm) {
    snprintf(last.call, sizeof last.call, "%s", call);
    last.send = s; last.recv = r; last.count = n; last.dtype = AS_U64(dt); last.op = op; last.comm = AS_U64(comm);
}

/* 8-byte elements only: the tests use float64 */
EXPORT int MPI_Allreduce(const void *s, void *r, int n, handle dt, handle op, handle comm) {
    note("MPI_Allreduce", s, r, n, dt, AS_U64(op), comm);
    if (s != (const void *)(intptr_t)-1 && s != r) memmove(r, s, (size_t)n * 8);
    return n == 13 ? 17 : 0;   /* a count of 13 fails, with error 17 */
}
EXPORT int MPI_Allgather(const void *s, int n, handle dt, void *r, int rn, handle rdt, handle comm) {
    note("MPI_Allgather", s, r, n, dt, 0, comm);
    last.recv_count = rn;
    memmove(r, s, (size_t)n * 8);
    return 0;
}
EXPORT int MPI_Bcast(void *b, int n, handle dt, int root, handle comm) {
    note("MPI_Bcast", b, b, n, dt, 0, comm);
    last.root = root;
    return 0;
}
EXPORT int MPI_Sendrecv(const void *s, int n, handle dt, int dest, int stag, void *r, int rn, handle rdt,
                        int source, int rtag, handle comm, void *status) {
    note("MPI_Sendrecv", s, r, n, dt, 0, comm);
    last.recv_count = rn; last.dest = dest; last.source = source; last.tag = stag;
    memmove(r, s, (size_t)(n < rn ? n : rn) * 8);
    return 0;
}
/* the launch check eagle makes at every launch (the maximum of a few int64 over the ranks):
 * one rank's in place, done at the first test */
EXPORT int MPI_Iallreduce(const void *s, void *r, int n, handle dt, handle op, handle comm, handle *request) {
    if (s != (const void *)(intptr_t)-1 && s != r) memmove(r, s, (size_t)n * 8);
    *request = (handle)1;
    return 0;
}
EXPORT int MPI_Test(handle *request, int *flag, void *status) { *flag = 1; return 0; }
EXPORT int MPI_Abort(handle comm, int code) { aborted = code; fprintf(stderr, "fake MPI_Abort(%d)\n", code); return 0; }
EXPORT int MPI_Error_string(int code, char *text, int *len) {
    *len = snprintf(text, 64, "fake error %d", code);
    return 0;
}

EXPORT const char *fake_mpi_last_call(void) { return last.call; }
EXPORT uint64_t fake_mpi_last_dtype(void) { return last.dtype; }
EXPORT uint64_t fake_mpi_last_op(void) { return last.op; }
EXPORT uint64_t fake_mpi_last_comm(void) { return last.comm; }
EXPORT int fake_mpi_last_count(void) { return last.count; }
EXPORT int fake_mpi_last_recv_count(void) { return last.recv_count; }
EXPORT int fake_mpi_last_root(void) { return last.root; }
EXPORT int fake_mpi_last_dest(void) { return last.dest; }
EXPORT int fake_mpi_last_source(void) { return last.source; }
EXPORT int fake_mpi_last_tag(void) { return last.tag; }
EXPORT const void *fake_mpi_last_send(void) { return last.send; }
EXPORT void *fake_mpi_last_recv(void) { return last.recv; }
