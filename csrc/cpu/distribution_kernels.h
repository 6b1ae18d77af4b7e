/* The CPU kernels of eagle's distribution nodes (eagle.graph.exponential, poisson,
 * binomial, integers; eagle/cpu/random_node.py): the samplers of
 * csrc/include/eagle/distributions.h over samples [start, stop) of one replay.
 *
 * One kernel (eagle_distribution_kernel, an eagle_kernel) serves every distribution
 * node; its user_data is an eagle_dist_params. Arrays, in order: the ids (int64, when
 * has_ids), parameter 0 (when per_sample0: float64 scale / lam, int64 n / low),
 * parameter 1 (when per_sample1: float64 p, int64 high), then the output. The replay
 * comes from params->replay(), the replay the calling thread runs (as for the random
 * kernels), so a sample's numbers do not depend on thread, split or tile.
 * Thread-safety: any threads at once on disjoint ranges. Ownership: the params are
 * the caller's (eagle/cpu/_random.pyx keeps them alive with the node).
 */
#ifndef EAGLE_DISTRIBUTION_KERNELS_H
#define EAGLE_DISTRIBUTION_KERNELS_H

#include <stdint.h>

enum { EAGLE_DIST_EXPONENTIAL = 0, EAGLE_DIST_POISSON = 1, EAGLE_DIST_BINOMIAL = 2,
       EAGLE_DIST_INTEGERS = 3 };
/* the output's type */
enum { EAGLE_DIST_F64 = 0, EAGLE_DIST_F32 = 1, EAGLE_DIST_I64 = 2, EAGLE_DIST_I32 = 3 };

typedef struct eagle_dist_params {
    uint32_t key0, key1;
    int32_t what;                   /* EAGLE_DIST_* (distribution) */
    int32_t out_type;               /* EAGLE_DIST_F64 ... */
    int32_t has_ids;
    int32_t per_sample0, per_sample1;
    double d0, d1;                  /* exponential: scale; poisson: lam; binomial: d1 = p */
    int64_t i0, i1;                 /* binomial: i0 = n; integers: low, high */
    uint64_t (*replay)(void);
} eagle_dist_params;

void eagle_distribution_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                               void *user_data);

#endif
