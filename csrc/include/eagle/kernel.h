/* eagle's native kernel API: the C signature of a node's work.
 *
 * A native kernel processes samples [start, stop) of the graph's logical size.
 * data[k] is the data pointer of the node's k-th declared array (its reads
 * first, then its writes, each in declaration order); sample i of array k
 * lives at data[k] + i * strides[k] (strides[k] is the byte stride of the
 * array's axis 0, or 0 for a 0-d array). user_data is the pointer given when
 * the node was made.
 *
 * Thread-safety: the CPU executor may call one kernel from several threads at
 * once, on disjoint [start, stop) ranges of the same replay; a kernel must
 * only touch samples in its range (or be made with split=False). It runs
 * without the GIL and must not call into Python.
 *
 * Sample-local kernels: a kernel that touches sample i of its per-sample arrays
 * only when i is in [start, stop), and writes no other memory, may be declared
 * so (eagle.native.Kernel(k, sample_local=True), or native(..., sample_local=True)
 * in Python; eagle's built-in kernels are). The CPU executor may then call it in a
 * fused run: over consecutive tiles [a, b) of a thread's range, each tile through
 * several nodes in turn, so its ranges are smaller than a thread's share and it
 * runs interleaved with its neighbours. A kernel that reads another sample (a
 * stencil) or accumulates into a total must not declare it.
 * Ownership: eagle owns data and strides; they stay valid for the call only.
 */
#ifndef EAGLE_KERNEL_H
#define EAGLE_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*eagle_kernel)(int64_t start, int64_t stop, char **data,
                             const int64_t *strides, void *user_data);

/* The name a PyCapsule holding an eagle_kernel must carry. */
#define EAGLE_KERNEL_SIGNATURE "void (int64_t, int64_t, char **, const int64_t *, void *)"

/* A team kernel works in phases over samples [0, size): every thread of the
 * team runs phase p (knowing its index `thread` among `n_threads`) and all of
 * them finish it before any starts phase p + 1. It is how a node that needs
 * the whole team to cooperate (a prefix sum, a counting sort) runs without
 * the GIL and without a parallel region of its own. Run alone, it is called
 * with thread 0 of 1 for each phase in turn.
 * Thread-safety: phases of one replay run on all threads at once; a phase
 * must only write what its thread owns until the phase ends. */
typedef void (*eagle_team_kernel)(int32_t phase, int32_t thread, int32_t n_threads,
                                  int64_t size, char **data, const int64_t *strides,
                                  void *user_data);

#ifdef __cplusplus
}
#endif

#endif
