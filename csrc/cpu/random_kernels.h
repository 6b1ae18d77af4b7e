/* The CPU kernels of eagle's random nodes (eagle/cpu/random_node.py): Philox4x32-10
 * (csrc/include/eagle/philox.h) over samples [start, stop) of one replay.
 *
 * One kernel (eagle_random_kernel, an eagle_kernel) serves every random node; its
 * user_data is an eagle_random_params. The replay index comes from
 * params->replay(): the replay the calling thread is running (the executor keeps
 * it per thread, eagle_thread_replay in executor.h), so a sample's numbers do not
 * depend on which thread, split or tile draws them. Arrays: data[0] is the ids
 * (int64 per sample) when has_ids, then the output, then (a uniform node's second)
 * the output drawn from words 2 and 3 of the same block.
 * Thread-safety: any threads at once on disjoint ranges. Ownership: the params
 * are the caller's (eagle/cpu/_random.pyx keeps them alive with the node).
 */
#ifndef EAGLE_RANDOM_KERNELS_H
#define EAGLE_RANDOM_KERNELS_H

#include <stdint.h>

enum { EAGLE_RANDOM_BITS = 0, EAGLE_RANDOM_UNIFORM = 1, EAGLE_RANDOM_NORMAL = 2 };

typedef struct eagle_random_params {
    uint32_t key0, key1;
    int32_t what;           /* EAGLE_RANDOM_* */
    int32_t f32;            /* the output is float32 (else float64; bits: uint32 x 4) */
    int32_t has_ids;        /* data[0] holds the samples' ids */
    double a, b;            /* uniform: low, high - low; normal: loc, scale */
    double below;           /* uniform: the largest output value below high */
    int32_t second;         /* uniform: a second output, from words 2 and 3 */
    uint64_t (*replay)(void);   /* the replay the calling thread runs */
} eagle_random_params;

void eagle_random_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                         void *user_data);

#endif
