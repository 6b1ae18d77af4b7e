/* Reductions over the sample axis and scatter tallies (eagle/cpu/reduce_node.py),
 * deterministic whatever splits the samples.
 *
 * The samples [0, n) are cut into fixed blocks of EAGLE_REDUCE_BLOCK samples from
 * sample 0. A call over [start, stop) (start a multiple of the block: the executor
 * aligns the shares, csrc/cpu/plan.h `align`, and a fused run's tile is a multiple of
 * it) computes each of its blocks' partial in one fixed order and stores it at the
 * block's index; the node's finish (run once after every share is done) combines the
 * partials in a fixed pairwise tree into the output. The result is a function of the
 * data and n alone: the same bits for every thread count, tile, fusion setting and
 * launch grouping.
 *
 * Reduction data[]: x, [the where= mask], out. Tally data[]: index, [weights], tally.
 * Ownership: the params and the partials belong to the Python object that made them
 * (eagle/cpu/_reduce.pyx). Thread-safety: calls write disjoint blocks; the finish
 * runs alone.
 */
#ifndef EAGLE_REDUCE_KERNELS_H
#define EAGLE_REDUCE_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EAGLE_REDUCE_BLOCK 64

/* the operations (eagle/cpu/_reduce.pyx OPS) */
enum { EAGLE_RED_ADD, EAGLE_RED_MUL, EAGLE_RED_MAX, EAGLE_RED_MIN, EAGLE_RED_LOR, EAGLE_RED_LAND,
       EAGLE_RED_BOR, EAGLE_RED_BAND, EAGLE_RED_BXOR, EAGLE_RED_N_OPS };

/* the element types: the accumulator's (the output's) and the source's */
enum { EAGLE_T_BOOL, EAGLE_T_I8, EAGLE_T_I16, EAGLE_T_I32, EAGLE_T_I64, EAGLE_T_U8, EAGLE_T_U16,
       EAGLE_T_U32, EAGLE_T_U64, EAGLE_T_F32, EAGLE_T_F64, EAGLE_T_N };

typedef struct eagle_reduce_params {
    int32_t op, acc;          /* EAGLE_RED_*, EAGLE_T_* of the output */
    int32_t src_bool;         /* x is bool (read as 0 / 1), else x is of the acc type */
    int32_t has_where;        /* data[1] is the mask */
    int32_t has_initial;      /* `initial` takes part (NumPy's initial=) */
    int32_t empty_error;      /* out: a reduction without identity ran over no sample */
    int64_t row;              /* elements per sample (x.shape[1:] flattened; 1 for 1-d) */
    int64_t x_step, w_step, out_step;   /* byte steps between a row's elements */
    char *partials;           /* a row of accumulators per block (acc type), n_blocks of them;
                               * the finish combines them in place */
    int64_t n_blocks;         /* how many the partials hold: ceil(extent / block) */
    uint64_t identity;        /* the op's identity (or initial) in the acc type's bytes */
    uint64_t initial;
} eagle_reduce_params;

/* whether the kernels hold op for that accumulator type */
int eagle_reduce_supported(int32_t acc, int32_t op);

void eagle_reduce_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                         void *user_data);
void eagle_reduce_finish(int64_t start, int64_t n, char **data, const int64_t *strides,
                         void *user_data);

/* Scatter: tally[index[i]] = op(tally[index[i]], weight[i]) for the samples, NumPy's
 * ufunc.at. A block's partial is its distinct cells' combined weights, in sample
 * order; the finish applies the blocks in order. */
typedef struct eagle_at_params {
    int32_t op, acc;          /* the tally's type */
    int32_t index_type;       /* EAGLE_T_* (an integer) */
    int32_t has_weights;      /* data[1] holds them (acc type), else `weight` */
    uint64_t weight;          /* the scalar weight, acc type's bytes */
    int64_t cells;            /* the tally's length */
    int64_t tally_step;       /* byte step between its cells */
    int64_t *cell;            /* per block: up to EAGLE_REDUCE_BLOCK cells ... */
    char *value;              /* ... their combined weights (acc type) */
    int32_t *count;           /* ... and how many */
    int64_t n_blocks;
    /* out, per block (its one thread writes it): the first sample of the block whose
     * index is out of bounds, plus 1 (0: none), and that index; has_bad: any (atomic) */
    int64_t *bad_at;
    int64_t *bad_index;
    int32_t has_bad;
} eagle_at_params;

void eagle_at_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data);
void eagle_at_finish(int64_t start, int64_t n, char **data, const int64_t *strides, void *user_data);

/* A node on arrays that are not per-sample: its kernel once over the whole extent. */
typedef struct eagle_whole_params {
    void (*kernel)(int64_t, int64_t, char **, const int64_t *, void *);
    void *user_data;
    int64_t n;                /* the kernel runs over [0, n): its arrays' whole axis 0 */
} eagle_whole_params;

void eagle_nothing_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                          void *user_data);
void eagle_whole_finish(int64_t start, int64_t n, char **data, const int64_t *strides, void *user_data);

#ifdef __cplusplus
}
#endif

#endif
