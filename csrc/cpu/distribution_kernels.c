/* eagle's distribution kernels on the CPU; see distribution_kernels.h and
 * eagle/distributions.h (the samplers, one source with the GPU).
 *
 * Samples go by blocks of BLOCK. Each block: the ids (when the node has them, or a
 * rejection sampler needs them), the parameters (broadcast or gathered) and the Philox
 * words the samples start from (philox_block.c: their own block 0, or the blocks
 * consecutive samples share, each drawn once) in small buffers; then one vectorised
 * loop runs every sample's first attempt (the whole of exponential, the first word of
 * integers); the inversion samplers count the entries of one CDF table below each u
 * (one parameter set) or run all their samples' steps side by side (step k for every
 * sample still searching, so the loop vectorises); the rejection samplers (PTRS, BTRS)
 * go by rounds, round j a vectorised attempt with block j of every sample still
 * pending; the few integers whose first word was rejected finish one by one with the
 * header's own sampler. Each result is the header's reference sample's, whatever the
 * path. x86-64 clones as in random_kernels.c, and the exponential by hand with AVX-512
 * where the CPU has it (exponential_avx512.h: 1e6 samples on a Zen 4 core 2.06 -> 1.85
 * ms); -ffp-contract=off, so the bits are those of the GPU.
 */
#include "distribution_kernels.h"

#include <stdint.h>
#include <string.h>

#include "eagle/distributions.h"
#include "exponential_avx512.h"
#include "philox_block.h"
#include "simd_clones.h"

#define BLOCK 256

/* a sample's first attempt was rejected: finish it with the scalar sampler */
#define TODO_REJECTED 1
/* an inversion sample: the side-by-side search decides it */
#define TODO_INVERSION 2

typedef struct block_words {
    uint32_t w0[BLOCK], w1[BLOCK], w2[BLOCK], w3[BLOCK];
} block_words;

/* ---- blocks that consecutive samples share ------------------------------------- */

/* The 64 bits (per = 2: block (id >> 1, j)) or the word (per = 4: block (id >> 2, j)) of
 * each sample b + j (id == NULL) or id[j], j < n, from the blocks they share: for
 * consecutive samples each block drawn once, counter by counter, and the samples' part
 * read in place (returned: a pointer into buf); for ids, each sample's own copy of its
 * block and its part picked out. */
typedef union shared_buf {
    uint32_t w32[4 * (BLOCK + 4)];
    uint64_t w64[2 * (BLOCK + 4)];
} shared_buf;

EAGLE_SIMD_CLONES
static void pick_half(int64_t n, const uint64_t *restrict id, const block_words *restrict w,
                      uint64_t *restrict x)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        x[j] = (id[j] & 1) ? ((uint64_t)w->w3[j] << 32) | w->w2[j] : ((uint64_t)w->w1[j] << 32) | w->w0[j];
}

EAGLE_SIMD_CLONES
static void pick_quarter(int64_t n, const uint64_t *restrict id, const block_words *restrict w,
                         uint32_t *restrict x)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t c = id[j] & 3;
        x[j] = c == 0 ? w->w0[j] : c == 1 ? w->w1[j] : c == 2 ? w->w2[j] : w->w3[j];
    }
}

/* whether ids[0..n) run on from ids[0] by one (a block before any compaction, a run of
 * survivors after one), below 2**63 */
EAGLE_SIMD_CLONES
static int consecutive_ids(int64_t n, const uint64_t *restrict id)
{
    const uint64_t first = id[0];
    uint64_t off = 0;
#pragma omp simd reduction(| : off)
    for (int64_t j = 0; j < n; ++j)
        off |= id[j] ^ (first + (uint64_t)j);
    return off == 0 && first <= (uint64_t)INT64_MAX - (uint64_t)n;
}

static const void *shared_bits(int per, int64_t n, const uint64_t *id, int64_t b, uint32_t r0, uint32_t c3,
                               uint32_t k0, uint32_t k1, shared_buf *buf)
{
    const int shift = per == 2 ? 1 : 2;
    if (id && n > 0 && consecutive_ids(n, id)) {
        /* the blocks consecutive samples share, each drawn once: the same words */
        b = (int64_t)id[0];
        id = NULL;
    }
    if (!id) {
        const int64_t g0 = b >> shift, groups = ((b + n - 1) >> shift) - g0 + 1;
        eagle_philox_interleaved(groups, NULL, (uint64_t)g0, r0, c3, k0, k1, buf->w32);
        return per == 2 ? (const void *)(buf->w64 + (b & 1)) : (const void *)(buf->w32 + (b & 3));
    }
    uint64_t q[BLOCK];
    block_words w;
    for (int64_t j = 0; j < BLOCK; ++j)   /* the whole buffer: GCC cannot see n > 0 */
        q[j] = j < n ? id[j] >> shift : 0;
    eagle_philox_block(n, q, 0, r0, c3, k0, k1, w.w0, w.w1, w.w2, w.w3);
    if (per == 2)
        pick_half(n, id, &w, buf->w64);
    else
        pick_quarter(n, id, &w, buf->w32);
    return buf->w32;
}

/* ---- exponential ---------------------------------------------------------------- */

EAGLE_SIMD_CLONES
static void exponential_block(int64_t n, const uint64_t *restrict x, const double *restrict scale,
                              double *restrict res)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        res[j] = eagle_exponential_value(scale[j], (uint32_t)x[j], (uint32_t)(x[j] >> 32));
}

/* one scale (checked when recorded: finite, >= 0) */
EAGLE_SIMD_CLONES
static void exponential_block_one(int64_t n, const uint64_t *restrict x, double scale, double *restrict res)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        res[j] = scale * eagle_std_exponential((uint32_t)x[j], (uint32_t)(x[j] >> 32));
}

/* ---- the inversion searches, side by side --------------------------------------- */

/* The lanes with todo[j] == TODO_INVERSION as int64 flags: GCC 12 leaves an omp simd loop
 * scalar when it loads bytes beside an int64 reduction, so the searches below read these */
EAGLE_SIMD_CLONES
static void inversion_lanes(int64_t n, const unsigned char *restrict todo, int64_t *restrict inv)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        inv[j] = todo[j] == TODO_INVERSION;
}

/* whether any todo[j] is set (a byte reduction: see inversion_lanes) */
EAGLE_SIMD_CLONES
static int any_todo(int64_t n, const unsigned char *restrict todo)
{
    unsigned char any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t j = 0; j < n; ++j)
        any |= todo[j];
    return any != 0;
}

/* The search both inversions run from their first terms: lanes with active[j] set have
 * p[j] = F[j] = P(0) and k[j] = 0; step k multiplies a lane's term by its factor over k,
 * lam (Poisson) or (n - k + 1) p / (1 - p) (binomial, par = n, s = p / (1 - p)), adds it
 * to F and stops at u <= F, a term that underflowed, or (binomial) k = n. Inlined into
 * each clone with `binomial` a constant: each loop is the one it was before the fold. */
static inline __attribute__((always_inline)) void inversion_search(
    int64_t n, const int binomial, const double *restrict par, const double *restrict s,
    const double *restrict u, double *restrict p, double *restrict F, int64_t *restrict active,
    double *restrict k)
{
    int64_t any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t j = 0; j < n; ++j)
        any |= active[j];
    for (double step = 1.0; any; step += 1.0) {
        const double inv = 1.0 / step;
        any = 0;
#pragma omp simd reduction(| : any)
        for (int64_t j = 0; j < n; ++j) {
            const int64_t a = active[j];
            const double pn = (p[j] * (binomial ? (par[j] - step + 1.0) * s[j] : par[j])) * inv;
            p[j] = a ? pn : p[j];
            F[j] = a ? F[j] + pn : F[j];
            k[j] = a ? step : k[j];
            active[j] = a & (u[j] > F[j]) & (binomial ? step < par[j] : 1) & (p[j] > 0.0);
            any |= active[j];
        }
    }
}

/* Poisson: lanes with inv[j] search; k[j] gets the result */
EAGLE_SIMD_CLONES
static void poisson_inversions(int64_t n, const double *restrict lam, const double *restrict u,
                               const int64_t *restrict inv, double *restrict k)
{
    double p[BLOCK], F[BLOCK];
    int64_t active[BLOCK];
    /* e is computed in every lane (the selects vectorise, a call under a condition does not) */
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const int64_t mine = inv[j];
        const double e = eagle_exp_neg(0.0 - lam[j]);
        p[j] = mine ? e : 0.0;
        F[j] = p[j];
        k[j] = mine ? 0.0 : k[j];
        active[j] = mine & (u[j] > F[j]) & (p[j] > 0.0);
    }
    inversion_search(n, 0, lam, NULL, u, p, F, active, k);
}

/* Binomial (p[j] <= 1/2 already): lanes with inv[j] search */
EAGLE_SIMD_CLONES
static void binomial_inversions(int64_t n, const double *restrict nn, const double *restrict pp,
                                const double *restrict u, const int64_t *restrict inv, double *restrict k)
{
    double P[BLOCK], F[BLOCK], s[BLOCK];
    int64_t active[BLOCK];
#pragma omp simd   /* see poisson_inversions */
    for (int64_t j = 0; j < n; ++j) {
        const int64_t mine = inv[j];
        const double e = eagle_exp_neg(nn[j] * eagle_log1p_(0.0 - pp[j]));
        s[j] = pp[j] / (1.0 - pp[j]);
        P[j] = mine ? e : 0.0;
        F[j] = P[j];
        k[j] = mine ? 0.0 : k[j];
        active[j] = mine & (u[j] > F[j]) & (0.0 < nn[j]) & (P[j] > 0.0);
    }
    inversion_search(n, 1, nn, s, u, P, F, active, k);
}

/* ---- the inversion searches for one parameter set: a table ---------------------- */

#define TABLE 64

/* The CDF F(0), F(1), ... as the header's sequential search sums it. The search stops
 * at the first k with u <= F(k), or at L, the first k where its terms end (the term
 * underflowed to 0, or k = n); so its result is the number of F(i), i < L, below u:
 * one compare per entry and sample, no chain of dependent steps. */
typedef struct cdf_table {
    double F[TABLE];
    int64_t count;      /* the entries that count: L, or TABLE when L is past the table */
    int complete;       /* L is within the table (else a u above F[TABLE - 1] searches on) */
} cdf_table;

static void cdf_table_build(cdf_table *t, int binomial, double lam_or_n, double p)
{
    const double nd = lam_or_n, s = binomial ? p / (1.0 - p) : 0.0;
    double P = binomial ? eagle_exp_neg(nd * eagle_log1p_(0.0 - p)) : eagle_exp_neg(0.0 - lam_or_n);
    double F = P, k = 0.0;
    int64_t len = 1;
    int stop = !(P > 0.0) || (binomial && !(k < nd));
    t->F[0] = F;
    while (!stop && len < TABLE) {
        k = k + 1.0;
        P = binomial ? (P * ((nd - k + 1.0) * s)) * (1.0 / k) : (P * lam_or_n) * (1.0 / k);
        F = F + P;
        t->F[len++] = F;
        stop = !(P > 0.0) || (binomial && !(k < nd));
    }
    t->complete = stop;
    t->count = stop ? len - 1 : len;
}

/* k[j] = the count of entries below u[j]; more[j]: the table is too short for u[j] */
EAGLE_SIMD_CLONES
static void cdf_count(int64_t n, const cdf_table *restrict t, const double *restrict u, double *restrict k,
                      int64_t *restrict more)
{
    double umax = 0.0;
#pragma omp simd reduction(max : umax)
    for (int64_t j = 0; j < n; ++j)
        umax = u[j] > umax ? u[j] : umax;
    /* entries from the first one at or above every u count for no sample */
    int64_t top = 0;
    while (top < t->count && t->F[top] < umax)
        ++top;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        k[j] = 0.0;
    for (int64_t i = 0; i < top; ++i) {
        const double f = t->F[i];
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
            k[j] += u[j] > f ? 1.0 : 0.0;
    }
    const double last = t->complete ? 2.0 : t->F[TABLE - 1];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        more[j] = u[j] > last;
}

/* ---- the rejection samplers, by rounds ------------------------------------------ */

/* Samples idx[0..m) of a block all make attempt 0 with block 0's words, those rejected
 * attempt 1 with their block 1, and so on: each round one vectorised loop over the
 * samples still pending (their words gathered, or drawn by eagle_philox_block with the
 * counter word (r >> 32) ^ (j << 16)), the pending list compacted after it. */
typedef struct pending {
    int32_t idx[BLOCK];
    int64_t m;
    block_words w;
    uint64_t id[BLOCK];
    double a[BLOCK], b[BLOCK], k[BLOCK];
    int64_t ok[BLOCK];
} pending;

/* the pending samples' words of block j */
static void pending_words(pending *q, const block_words *w0, const uint64_t *id, uint32_t r0, uint32_t r1,
                          uint32_t k0, uint32_t k1, uint32_t j)
{
    const int64_t m = q->m;
    if (j == 0) {
        for (int64_t i = 0; i < m; ++i) {
            q->w.w0[i] = w0->w0[q->idx[i]];
            q->w.w1[i] = w0->w1[q->idx[i]];
            q->w.w2[i] = w0->w2[q->idx[i]];
            q->w.w3[i] = w0->w3[q->idx[i]];
        }
    } else {
        for (int64_t i = 0; i < m; ++i)
            q->id[i] = id[q->idx[i]];
        eagle_philox_block(m, q->id, 0, r0, r1 ^ (j << 16), k0, k1, q->w.w0, q->w.w1, q->w.w2, q->w.w3);
    }
}

/* k[idx] for the accepted, the rest stay pending */
static void pending_compact(pending *q, double *k)
{
    int64_t m2 = 0;
    for (int64_t i = 0; i < q->m; ++i) {
        if (q->ok[i])
            k[q->idx[i]] = q->k[i];
        else
            q->idx[m2++] = q->idx[i];
    }
    q->m = m2;
}

/* One parameter set: the candidates and the squeeze of every pending sample in one loop,
 * then the full test for those the squeeze did not take, in a second (compacted) loop */
#define ROUND_ONE(NAME, TYPE, K, QUICK, FULL)                                                  \
    EAGLE_SIMD_CLONES                                                                         \
    static void NAME(pending *restrict q, const TYPE *restrict one)                          \
    {                                                                                         \
        const TYPE c = *one;                                                                  \
        const int64_t m = q->m;                                                               \
        double u[BLOCK], v[BLOCK];                                                            \
        int32_t rest[BLOCK];                                                                  \
        _Pragma("omp simd")                                                                   \
        for (int64_t i = 0; i < m; ++i) {                                                     \
            u[i] = eagle_u_closed0(q->w.w0[i], q->w.w1[i]);                                   \
            v[i] = eagle_u_closed1(q->w.w2[i], q->w.w3[i]);                                   \
            q->k[i] = K(&c, u[i]);                                                            \
            q->ok[i] = QUICK(&c, u[i], v[i], q->k[i]);                                        \
        }                                                                                     \
        int64_t r = 0;                                                                        \
        for (int64_t i = 0; i < m; ++i)                                                       \
            if (!q->ok[i])                                                                    \
                rest[r++] = (int32_t)i;                                                       \
        double ru[BLOCK], rv[BLOCK], rk[BLOCK];                                               \
        int64_t rok[BLOCK];                                                                   \
        for (int64_t i = 0; i < r; ++i) {                                                     \
            ru[i] = u[rest[i]];                                                               \
            rv[i] = v[rest[i]];                                                               \
            rk[i] = q->k[rest[i]];                                                            \
        }                                                                                     \
        _Pragma("omp simd")                                                                   \
        for (int64_t i = 0; i < r; ++i)                                                       \
            rok[i] = FULL(&c, ru[i], rv[i], rk[i]);                                           \
        for (int64_t i = 0; i < r; ++i)                                                       \
            q->ok[rest[i]] = rok[i];                                                          \
    }

ROUND_ONE(ptrs_round_one, eagle_ptrs, eagle_ptrs_k, eagle_ptrs_quick, eagle_ptrs_full)
ROUND_ONE(btrs_round_one, eagle_btrs, eagle_btrs_k, eagle_btrs_quick, eagle_btrs_full)

/* Per-sample parameters: each pending sample's constants, then its attempt */
EAGLE_SIMD_CLONES
static void ptrs_round_each(pending *restrict q)
{
    const int64_t m = q->m;
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
        const eagle_ptrs c = eagle_ptrs_setup(q->a[i]);
        double kk;
        q->ok[i] = eagle_ptrs_try(&c, eagle_u_closed0(q->w.w0[i], q->w.w1[i]),
                                  eagle_u_closed1(q->w.w2[i], q->w.w3[i]), &kk);
        q->k[i] = kk;
    }
}

EAGLE_SIMD_CLONES
static void btrs_round_each(pending *restrict q)
{
    const int64_t m = q->m;
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
        const eagle_btrs c = eagle_btrs_setup(q->a[i], q->b[i]);
        double kk;
        q->ok[i] = eagle_btrs_try(&c, eagle_u_closed0(q->w.w0[i], q->w.w1[i]),
                                  eagle_u_closed1(q->w.w2[i], q->w.w3[i]), &kk);
        q->k[i] = kk;
    }
}

/* Every sample j with todo[j] == TODO_REJECTED gets k[j] from PTRS (ptrs != NULL: one
 * lam, else a[j]) or BTRS (btrs != NULL: one n, p, else (a[j], b[j])); the invalid
 * marker past the last block */
static void rejection(int64_t n, const unsigned char *todo, const block_words *w, const uint64_t *id,
                      uint32_t r0, uint32_t r1, uint32_t k0, uint32_t k1, int binomial,
                      const eagle_ptrs *ptrs, const eagle_btrs *btrs, const double *a, const double *b,
                      double *k)
{
    pending q;
    q.m = 0;
    for (int64_t j = 0; j < n; ++j)
        if (todo[j] == TODO_REJECTED)
            q.idx[q.m++] = (int32_t)j;
    for (uint32_t att = 0; q.m > 0 && att < EAGLE_DIST_BLOCKS; ++att) {
        pending_words(&q, w, id, r0, r1, k0, k1, att);
        if (binomial ? !btrs : !ptrs)
            for (int64_t i = 0; i < q.m; ++i) {
                q.a[i] = a[q.idx[i]];
                if (binomial)
                    q.b[i] = b[q.idx[i]];
            }
        if (binomial && btrs)
            btrs_round_one(&q, btrs);
        else if (binomial)
            btrs_round_each(&q);
        else if (ptrs)
            ptrs_round_one(&q, ptrs);
        else
            ptrs_round_each(&q);
        pending_compact(&q, k);
    }
    for (int64_t i = 0; i < q.m; ++i)
        k[q.idx[i]] = (double)EAGLE_DIST_INVALID;
}

/* ---- poisson -------------------------------------------------------------------- */

/* which sampler each sample takes (lam differs between samples); k = -1 when invalid */
EAGLE_SIMD_CLONES
static void poisson_todo(int64_t n, const double *restrict lam, double *restrict k,
                         unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const int valid = eagle_poisson_valid(lam[j]);
        k[j] = -1.0;
        todo[j] = (unsigned char)(!valid ? 0 : lam[j] < EAGLE_INVERSION_BELOW ? TODO_INVERSION : TODO_REJECTED);
    }
}

static void poisson_block(int64_t n, const uint64_t *id, uint32_t r0, uint32_t r1, const eagle_dist_params *p,
                          const cdf_table *table, const block_words *w, const double *lam, int64_t *res)
{
    double u[BLOCK], k[BLOCK];
    unsigned char todo[BLOCK];
    const int one = !p->per_sample0;   /* one lam, checked when recorded */
    if (one && table) {
        int64_t more[BLOCK];
        for (int64_t j = 0; j < n; ++j)
            u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
        cdf_count(n, table, u, k, more);
        for (int64_t j = 0; j < n; ++j)
            res[j] = more[j] ? (int64_t)eagle_poisson_inversion(p->d0, u[j]) : (int64_t)k[j];
        return;
    }
    if (one)
        memset(todo, TODO_REJECTED, (size_t)n);
    else
        poisson_todo(n, lam, k, todo);
    if (!one) {
        for (int64_t j = 0; j < n; ++j)
            u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
        int64_t inv[BLOCK];
        inversion_lanes(n, todo, inv);
        poisson_inversions(n, lam, u, inv, k);
    }
    eagle_ptrs s1;
    if (one)
        s1 = eagle_ptrs_setup(p->d0);
    rejection(n, todo, w, id, r0, r1, p->key0, p->key1, 0, one ? &s1 : NULL, NULL, lam, NULL, k);
    for (int64_t j = 0; j < n; ++j)
        res[j] = (int64_t)k[j];
}

/* ---- binomial ------------------------------------------------------------------- */

/* each sample's n (as a double), p' = min(p, 1 - p) and sampler; k = -1 when invalid */
EAGLE_SIMD_CLONES
static void binomial_todo(int64_t n, const int64_t *restrict nn, const double *restrict p,
                          double *restrict nd, double *restrict pp, double *restrict k,
                          unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const int valid = eagle_binomial_valid(nn[j], p[j]);
        nd[j] = valid ? eagle_small_to_double((eagle_u64)nn[j]) : 0.0;
        pp[j] = valid ? (p[j] > 0.5 ? 1.0 - p[j] : p[j]) : 0.0;
        k[j] = -1.0;
        todo[j] = (unsigned char)(!valid ? 0 : nd[j] * pp[j] < EAGLE_INVERSION_BELOW ? TODO_INVERSION
                                                                                     : TODO_REJECTED);
    }
}

static void binomial_block(int64_t n, const uint64_t *id, uint32_t r0, uint32_t r1, const eagle_dist_params *p,
                           const cdf_table *table, const block_words *w, const int64_t *nn, const double *prob,
                           int64_t *res)
{
    double nd[BLOCK], pp[BLOCK], u[BLOCK], k[BLOCK];
    unsigned char todo[BLOCK];
    const int one = !p->per_sample0 && !p->per_sample1;   /* one n, p, checked when recorded */
    const int flip = p->d1 > 0.5;
    if (one && table) {
        int64_t more[BLOCK];
        const double pp1 = flip ? 1.0 - p->d1 : p->d1, nd1 = eagle_small_to_double((eagle_u64)p->i0);
        for (int64_t j = 0; j < n; ++j)
            u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
        cdf_count(n, table, u, k, more);
        for (int64_t j = 0; j < n; ++j) {
            const int64_t kk = more[j] ? (int64_t)eagle_binomial_inversion(nd1, pp1, u[j]) : (int64_t)k[j];
            res[j] = flip ? p->i0 - kk : kk;
        }
        return;
    }
    binomial_todo(n, nn, prob, nd, pp, k, todo);
    if (!one) {
        for (int64_t j = 0; j < n; ++j)
            u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
        int64_t inv[BLOCK];
        inversion_lanes(n, todo, inv);
        binomial_inversions(n, nd, pp, u, inv, k);
    }
    eagle_btrs s1;
    if (one)
        s1 = eagle_btrs_setup(nd[0], pp[0]);
    rejection(n, todo, w, id, r0, r1, p->key0, p->key1, 1, NULL, one ? &s1 : NULL, nd, pp, k);
    for (int64_t j = 0; j < n; ++j) {
        const int64_t kk = (int64_t)k[j];
        res[j] = kk >= 0 && prob[j] > 0.5 ? nn[j] - kk : kk;
    }
}

/* ---- integers ------------------------------------------------------------------- */

/* Every sample's first word (from the blocks four samples share) against its own range
 * s = high - low <= 2**32, accepted when its product's low part is at or above s (at or
 * above the threshold, whatever it is); todo: a wide, invalid or empty range, or a word
 * that needs the threshold. */
EAGLE_SIMD_CLONES
static void integers_first(int64_t n, const uint32_t *restrict x, const int64_t *restrict low,
                              const int64_t *restrict high, int i32, int64_t *restrict res,
                              unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t s = (uint64_t)high[j] - (uint64_t)low[j];
        const uint64_t m = (uint64_t)x[j] * s;
        const int bad = (low[j] >= high[j]) | (i32 & ((low[j] < -2147483647LL - 1) | (high[j] > 2147483648LL)));
        res[j] = (int64_t)((uint64_t)low[j] + (m >> 32));
        todo[j] = (unsigned char)(bad | !((s <= 4294967296ULL) & ((m & 0xffffffffULL) >= s)));
    }
}

/* the same for one range s < 2**32 (its threshold t known): a 32 x 32-bit product */
EAGLE_SIMD_CLONES
static void integers_first_one(int64_t n, const uint32_t *restrict x, int64_t low, uint32_t s, uint32_t t,
                                  int64_t *restrict res, unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t m = (uint64_t)x[j] * s;
        res[j] = (int64_t)((uint64_t)low + (m >> 32));
        todo[j] = (unsigned char)((uint32_t)m < t);
    }
}

/* the range s = 2**32: every word is accepted, the offset is the word itself */
EAGLE_SIMD_CLONES
static void integers_whole_words(int64_t n, const uint32_t *restrict x, int64_t low, int64_t *restrict res,
                                 unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        res[j] = (int64_t)((uint64_t)low + x[j]);
    memset(todo, 0, (size_t)n);
}

/* one wide range s > 2**32 (its threshold t known) on the 64 bits of the shared blocks */
static void integers_first_wide(int64_t n, const uint64_t *restrict x, int64_t low, uint64_t s, uint64_t t,
                                   int64_t *restrict res, unsigned char *restrict todo)
{
    for (int64_t j = 0; j < n; ++j) {
        res[j] = (int64_t)((uint64_t)low + eagle_mulhi64(x[j], s));
        todo[j] = (unsigned char)(x[j] * s < t);
    }
}

static void integers_block(int64_t n, const uint64_t *id, int64_t b, uint64_t replay, const eagle_dist_params *p,
                           const int64_t *low, const int64_t *high, int64_t *res)
{
    unsigned char todo[BLOCK];
    shared_buf buf;
    const uint32_t r0 = (uint32_t)replay, r1 = (uint32_t)(replay >> 32);
    const int i32 = p->out_type == EAGLE_DIST_I32;
    const uint64_t s1 = (uint64_t)p->i1 - (uint64_t)p->i0;
    if (p->per_sample0 || p->per_sample1)
        integers_first(n, shared_bits(4, n, id, b, r0, r1, p->key0, p->key1, &buf), low, high, i32, res, todo);
    else if (s1 < 4294967296ULL)   /* one range, checked when recorded; low, high not gathered */
        integers_first_one(n, shared_bits(4, n, id, b, r0, r1, p->key0, p->key1, &buf), p->i0, (uint32_t)s1,
                           (uint32_t)eagle_lemire_threshold(s1), res, todo);
    else if (s1 == 4294967296ULL)
        integers_whole_words(n, shared_bits(4, n, id, b, r0, r1, p->key0, p->key1, &buf), p->i0, res, todo);
    else
        integers_first_wide(n, shared_bits(2, n, id, b, r0, r1 ^ (EAGLE_DIST_WIDE << 16), p->key0, p->key1,
                                           &buf), p->i0, s1, eagle_lemire_threshold(s1), res, todo);
    if (!any_todo(n, todo))
        return;
    const int one = !p->per_sample0 && !p->per_sample1;
    for (int64_t j = 0; j < n; ++j)
        if (todo[j])
            res[j] = eagle_integers_value(one ? p->i0 : low[j], one ? p->i1 : high[j], i32,
                                          id ? id[j] : (uint64_t)(b + j), replay, p->key0, p->key1);
}

/* ---- the kernel ----------------------------------------------------------------- */

static void gather_f64(int64_t n, int per_sample, const char *a, int64_t stride, int64_t b, double v,
                       double *dst)
{
    for (int64_t j = 0; j < n; ++j)
        dst[j] = per_sample ? *(const double *)(a + (b + j) * stride) : v;
}

static void gather_i64(int64_t n, int per_sample, const char *a, int64_t stride, int64_t b, int64_t v,
                       int64_t *dst)
{
    for (int64_t j = 0; j < n; ++j)
        dst[j] = per_sample ? *(const int64_t *)(a + (b + j) * stride) : v;
}

void eagle_distribution_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                               void *user_data)
{
    const eagle_dist_params *p = (const eagle_dist_params *)user_data;
    const uint64_t replay = p->replay();
    const uint32_t r0 = (uint32_t)replay, r1 = (uint32_t)(replay >> 32);
    int k = 0;
    const int k_ids = p->has_ids ? k++ : -1;
    const int k_p0 = p->per_sample0 ? k++ : -1;
    const int k_p1 = p->per_sample1 ? k++ : -1;
    char *out = data[k];
    const int64_t ostride = strides[k];
    const char *a0 = k_p0 >= 0 ? data[k_p0] : NULL, *a1 = k_p1 >= 0 ? data[k_p1] : NULL;
    const int64_t s0 = k_p0 >= 0 ? strides[k_p0] : 0, s1 = k_p1 >= 0 ? strides[k_p1] : 0;
    /* one parameter set for an inversion sampler: its CDF table, once per call */
    cdf_table tab;
    const cdf_table *table = NULL;
    if (p->what == EAGLE_DIST_POISSON && !p->per_sample0 && p->d0 < EAGLE_INVERSION_BELOW) {
        cdf_table_build(&tab, 0, p->d0, 0.0);
        table = &tab;
    } else if (p->what == EAGLE_DIST_BINOMIAL && !p->per_sample0 && !p->per_sample1) {
        const double pp = p->d1 > 0.5 ? 1.0 - p->d1 : p->d1, nd = eagle_small_to_double((eagle_u64)p->i0);
        if (nd * pp < EAGLE_INVERSION_BELOW) {
            cdf_table_build(&tab, 1, nd, pp);
            table = &tab;
        }
    }
#ifdef EAGLE_EXPONENTIAL_AVX512
    const int exponential_avx512 = p->what == EAGLE_DIST_EXPONENTIAL && eagle_exponential_avx512_usable();
#endif
    uint64_t id[BLOCK];
    _Alignas(64) block_words w;
    double f0[BLOCK], f1[BLOCK], fbuf[BLOCK];
    int64_t i0[BLOCK], i1[BLOCK], ibuf[BLOCK];
    /* rejection samplers keep every sample's id; the others count them from b */
    const int need_ids = k_ids >= 0 || p->what == EAGLE_DIST_POISSON || p->what == EAGLE_DIST_BINOMIAL;
    for (int64_t b = start; b < stop; b += BLOCK) {
        const int64_t n = stop - b < BLOCK ? stop - b : BLOCK;
        /* contiguous ids are read in place (int64 and uint64 share their bits) */
        const uint64_t *idb = k_ids >= 0 && strides[k_ids] == 8 ? (const uint64_t *)(data[k_ids] + b * 8) : id;
        const uint64_t *ip = k_ids >= 0 ? idb : NULL;
        if (k_ids >= 0 && idb == id) {
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)*(const int64_t *)(data[k_ids] + (b + j) * strides[k_ids]);
        } else if (k_ids < 0 && need_ids) {
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)(b + j);
        }
        char *o = out + b * ostride;
        /* results straight into a contiguous float64 / int64 out, else through a buffer */
        double *fres = p->out_type == EAGLE_DIST_F64 && ostride == 8 ? (double *)o : fbuf;
        int64_t *ires = p->out_type == EAGLE_DIST_I64 && ostride == 8 ? (int64_t *)o : ibuf;
        shared_buf sb;
        switch (p->what) {
        case EAGLE_DIST_EXPONENTIAL: {
            const uint64_t *x = shared_bits(2, n, ip, b, r0, r1, p->key0, p->key1, &sb);
            if (p->per_sample0)
                gather_f64(n, 1, a0, s0, b, 0.0, f0);
            int64_t d = 0;   /* done eight at a time by AVX-512; the rest (and all elsewhere) here */
#ifdef EAGLE_EXPONENTIAL_AVX512
            if (exponential_avx512)
                d = eagle_exponential_avx512(n, x, p->per_sample0 ? f0 : NULL, p->d0, fres);
#endif
            if (p->per_sample0)
                exponential_block(n - d, x + d, f0 + d, fres + d);
            else
                exponential_block_one(n - d, x + d, p->d0, fres + d);
            break;
        }
        case EAGLE_DIST_POISSON:
            eagle_philox_block(n, idb, 0, r0, r1, p->key0, p->key1, w.w0, w.w1, w.w2, w.w3);
            if (p->per_sample0)   /* one lam: the block uses p->d0 */
                gather_f64(n, 1, a0, s0, b, 0.0, f0);
            poisson_block(n, idb, r0, r1, p, table, &w, f0, ires);
            break;
        case EAGLE_DIST_BINOMIAL:
            eagle_philox_block(n, idb, 0, r0, r1, p->key0, p->key1, w.w0, w.w1, w.w2, w.w3);
            gather_i64(n, p->per_sample0, a0, s0, b, p->i0, i0);
            gather_f64(n, p->per_sample1, a1, s1, b, p->d1, f1);
            binomial_block(n, idb, r0, r1, p, table, &w, i0, f1, ires);
            break;
        default:
            if (p->per_sample0 || p->per_sample1) {
                gather_i64(n, p->per_sample0, a0, s0, b, p->i0, i0);
                gather_i64(n, p->per_sample1, a1, s1, b, p->i1, i1);
            }
            integers_block(n, ip, b, replay, p, i0, i1, ires);
            break;
        }
        switch (p->out_type) {
        case EAGLE_DIST_F64:
            if (ostride != 8)
                for (int64_t j = 0; j < n; ++j)
                    *(double *)(o + j * ostride) = fres[j];
            break;
        case EAGLE_DIST_F32:
            if (ostride == 4)
                for (int64_t j = 0; j < n; ++j)
                    ((float *)o)[j] = (float)fres[j];
            else
                for (int64_t j = 0; j < n; ++j)
                    *(float *)(o + j * ostride) = (float)fres[j];
            break;
        case EAGLE_DIST_I64:
            if (ostride != 8)
                for (int64_t j = 0; j < n; ++j)
                    *(int64_t *)(o + j * ostride) = ires[j];
            break;
        default:
            if (ostride == 4)
                for (int64_t j = 0; j < n; ++j)
                    ((int32_t *)o)[j] = (int32_t)ires[j];
            else
                for (int64_t j = 0; j < n; ++j)
                    *(int32_t *)(o + j * ostride) = (int32_t)ires[j];
            break;
        }
    }
}
