/* eagle's distribution kernels on the CPU; see distribution_kernels.h and
 * eagle/distributions.h (the samplers, one source with the GPU).
 *
 * Samples go by blocks of BLOCK. Each block: the ids, the parameters (broadcast or
 * gathered) and block 0's Philox words of every sample in small buffers; then one
 * vectorised loop runs every sample's first attempt (the whole of exponential, the
 * first word of integers, one PTRS / BTRS attempt), the inversion samplers run all
 * their samples' steps side by side (step k for every sample still searching, so the
 * loop vectorises), and the few samples whose first attempt was rejected finish one
 * by one with the header's own sampler from block 1 on. Each result is the header's
 * reference sample's, whatever the path. x86-64 clones as in random_kernels.c;
 * -ffp-contract=off, so the bits are those of the GPU.
 */
#include "distribution_kernels.h"

#include <string.h>

#include "eagle/distributions.h"

#define BLOCK 256

#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 11 && !defined(EAGLE_NO_CLONES)
#define EAGLE_SIMD_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define EAGLE_SIMD_CLONES
#endif

/* a sample's first attempt was rejected: finish it with the scalar sampler */
#define TODO_REJECTED 1
/* an inversion sample: the side-by-side search decides it */
#define TODO_INVERSION 2

typedef struct block_words {
    uint32_t w0[BLOCK], w1[BLOCK], w2[BLOCK], w3[BLOCK];
} block_words;

EAGLE_SIMD_CLONES
static void draw_block0(int64_t n, const uint64_t *restrict id, uint32_t r0, uint32_t r1,
                        uint32_t k0, uint32_t k1, block_words *restrict w)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words x = eagle_philox4x32_10((eagle_u32)id[j], (eagle_u32)(id[j] >> 32),
                                                         r0, r1, k0, k1);
        w->w0[j] = x.w0;
        w->w1[j] = x.w1;
        w->w2[j] = x.w2;
        w->w3[j] = x.w3;
    }
}

/* ---- exponential ---------------------------------------------------------------- */

EAGLE_SIMD_CLONES
static void exponential_block(int64_t n, const block_words *restrict w, const double *restrict scale,
                              double *restrict res)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        res[j] = eagle_exponential_value(scale[j], w->w0[j], w->w1[j]);
}

/* ---- the inversion searches, side by side --------------------------------------- */

/* Poisson: lanes with todo[j] == TODO_INVERSION search; k[j] gets the result */
EAGLE_SIMD_CLONES
static void poisson_inversions(int64_t n, const double *restrict lam, const double *restrict u,
                               const unsigned char *restrict todo, double *restrict k)
{
    double p[BLOCK], F[BLOCK];
    unsigned char active[BLOCK];
    int any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t j = 0; j < n; ++j) {
        const int mine = todo[j] == TODO_INVERSION;
        p[j] = mine ? eagle_exp_neg(0.0 - lam[j]) : 0.0;
        F[j] = p[j];
        if (mine)
            k[j] = 0.0;
        active[j] = (unsigned char)(mine & (u[j] > F[j]) & (p[j] > 0.0));
        any |= active[j];
    }
    for (double step = 1.0; any; step += 1.0) {
        const double inv = 1.0 / step;
        any = 0;
#pragma omp simd reduction(| : any)
        for (int64_t j = 0; j < n; ++j) {
            const int a = active[j];
            const double pn = (p[j] * lam[j]) * inv;
            p[j] = a ? pn : p[j];
            F[j] = a ? F[j] + pn : F[j];
            k[j] = a ? step : k[j];
            active[j] = (unsigned char)(a & (u[j] > F[j]) & (p[j] > 0.0));
            any |= active[j];
        }
    }
}

/* Binomial (p[j] <= 1/2 already): lanes with todo[j] == TODO_INVERSION search */
EAGLE_SIMD_CLONES
static void binomial_inversions(int64_t n, const double *restrict nn, const double *restrict pp,
                                const double *restrict u, const unsigned char *restrict todo,
                                double *restrict k)
{
    double P[BLOCK], F[BLOCK], s[BLOCK];
    unsigned char active[BLOCK];
    int any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t j = 0; j < n; ++j) {
        const int mine = todo[j] == TODO_INVERSION;
        s[j] = pp[j] / (1.0 - pp[j]);
        P[j] = mine ? eagle_exp_neg(nn[j] * eagle_log1p_(0.0 - pp[j])) : 0.0;
        F[j] = P[j];
        if (mine)
            k[j] = 0.0;
        active[j] = (unsigned char)(mine & (u[j] > F[j]) & (0.0 < nn[j]) & (P[j] > 0.0));
        any |= active[j];
    }
    for (double step = 1.0; any; step += 1.0) {
        const double inv = 1.0 / step;
        any = 0;
#pragma omp simd reduction(| : any)
        for (int64_t j = 0; j < n; ++j) {
            const int a = active[j];
            const double Pn = (P[j] * ((nn[j] - step + 1.0) * s[j])) * inv;
            P[j] = a ? Pn : P[j];
            F[j] = a ? F[j] + Pn : F[j];
            k[j] = a ? step : k[j];
            active[j] = (unsigned char)(a & (u[j] > F[j]) & (step < nn[j]) & (P[j] > 0.0));
            any |= active[j];
        }
    }
}

/* ---- poisson -------------------------------------------------------------------- */

/* First attempts of one block; per-sample constants (lam differs between samples) */
EAGLE_SIMD_CLONES
static void poisson_first(int64_t n, const block_words *restrict w, const double *restrict lam,
                          double *restrict u, double *restrict k, unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const double l = lam[j];
        const int valid = eagle_poisson_valid(l);
        const int small = l < EAGLE_INVERSION_BELOW;
        u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
        const eagle_ptrs s = eagle_ptrs_setup(small || !valid ? EAGLE_INVERSION_BELOW : l);
        double kk;
        const int ok = eagle_ptrs_try(&s, u[j], eagle_u_closed1(w->w2[j], w->w3[j]), &kk);
        k[j] = !valid ? -1.0 : kk;
        todo[j] = (unsigned char)(!valid ? 0 : small ? TODO_INVERSION : ok ? 0 : TODO_REJECTED);
    }
}

/* The same with one lam >= 10 for the whole node (its constants computed once) */
EAGLE_SIMD_CLONES
static void poisson_first_one(int64_t n, const block_words *restrict w, const eagle_ptrs *restrict s,
                              double *restrict k, unsigned char *restrict todo)
{
    const eagle_ptrs c = *s;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        double kk;
        const int ok = eagle_ptrs_try(&c, eagle_u_closed0(w->w0[j], w->w1[j]),
                                      eagle_u_closed1(w->w2[j], w->w3[j]), &kk);
        k[j] = kk;
        todo[j] = (unsigned char)(ok ? 0 : TODO_REJECTED);
    }
}

static void poisson_block(int64_t n, const uint64_t *id, uint64_t replay, const eagle_dist_params *p,
                          const block_words *w, const double *lam, int64_t *res)
{
    double u[BLOCK], k[BLOCK];
    unsigned char todo[BLOCK];
    const int one = !p->per_sample0 && p->d0 >= EAGLE_INVERSION_BELOW;
    eagle_ptrs s1;
    if (one) {
        s1 = eagle_ptrs_setup(p->d0);
        poisson_first_one(n, w, &s1, k, todo);
    } else if (!p->per_sample0) {
        /* one lam below 10 (checked when recorded): every sample searches */
        for (int64_t j = 0; j < n; ++j) {
            u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
            todo[j] = TODO_INVERSION;
        }
        poisson_inversions(n, lam, u, todo, k);
    } else {
        poisson_first(n, w, lam, u, k, todo);
        poisson_inversions(n, lam, u, todo, k);
    }
    for (int64_t j = 0; j < n; ++j) {
        if (todo[j] == TODO_REJECTED) {
            const eagle_ptrs s = one ? s1 : eagle_ptrs_setup(lam[j]);
            res[j] = eagle_ptrs_from(&s, id[j], replay, p->key0, p->key1, 1);
        } else {
            res[j] = (int64_t)k[j];
        }
    }
}

/* ---- binomial ------------------------------------------------------------------- */

EAGLE_SIMD_CLONES
static void binomial_first(int64_t n, const block_words *restrict w, const int64_t *restrict nn,
                           const double *restrict p, double *restrict nd, double *restrict pp,
                           double *restrict u, double *restrict k, unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const int valid = eagle_binomial_valid(nn[j], p[j]);
        nd[j] = (double)nn[j];
        pp[j] = p[j] > 0.5 ? 1.0 - p[j] : p[j];
        const int small = !(nd[j] * pp[j] >= EAGLE_INVERSION_BELOW);
        u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
        const eagle_btrs s = eagle_btrs_setup(small || !valid ? 20.0 : nd[j], small || !valid ? 0.5 : pp[j]);
        double kk;
        const int ok = eagle_btrs_try(&s, u[j], eagle_u_closed1(w->w2[j], w->w3[j]), &kk);
        k[j] = kk;
        todo[j] = (unsigned char)(!valid ? 0 : small ? TODO_INVERSION : ok ? 0 : TODO_REJECTED);
    }
}

EAGLE_SIMD_CLONES
static void binomial_first_one(int64_t n, const block_words *restrict w, const eagle_btrs *restrict s,
                               double *restrict k, unsigned char *restrict todo)
{
    const eagle_btrs c = *s;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        double kk;
        const int ok = eagle_btrs_try(&c, eagle_u_closed0(w->w0[j], w->w1[j]),
                                      eagle_u_closed1(w->w2[j], w->w3[j]), &kk);
        k[j] = kk;
        todo[j] = (unsigned char)(ok ? 0 : TODO_REJECTED);
    }
}

static void binomial_block(int64_t n, const uint64_t *id, uint64_t replay, const eagle_dist_params *p,
                           const block_words *w, const int64_t *nn, const double *prob, int64_t *res)
{
    double nd[BLOCK], pp[BLOCK], u[BLOCK], k[BLOCK];
    unsigned char todo[BLOCK];
    const int ok_one = !p->per_sample0 && !p->per_sample1 && eagle_binomial_valid(p->i0, p->d1);
    const double pp1 = p->d1 > 0.5 ? 1.0 - p->d1 : p->d1;
    const int one = ok_one && (double)p->i0 * pp1 >= EAGLE_INVERSION_BELOW;
    eagle_btrs s1;
    if (one) {
        s1 = eagle_btrs_setup((double)p->i0, pp1);
        binomial_first_one(n, w, &s1, k, todo);
    } else if (ok_one) {
        /* one n, p with n p' below 10: every sample searches */
        for (int64_t j = 0; j < n; ++j) {
            nd[j] = (double)p->i0;
            pp[j] = pp1;
            u[j] = eagle_u_closed0(w->w0[j], w->w1[j]);
            todo[j] = TODO_INVERSION;
        }
        binomial_inversions(n, nd, pp, u, todo, k);
    } else {
        binomial_first(n, w, nn, prob, nd, pp, u, k, todo);
        binomial_inversions(n, nd, pp, u, todo, k);
    }
    for (int64_t j = 0; j < n; ++j) {
        if (!eagle_binomial_valid(nn[j], prob[j])) {
            res[j] = EAGLE_DIST_INVALID;
            continue;
        }
        int64_t kk = (int64_t)k[j];
        if (todo[j] == TODO_REJECTED) {
            const double pj = prob[j] > 0.5 ? 1.0 - prob[j] : prob[j];
            const eagle_btrs s = one ? s1 : eagle_btrs_setup((double)nn[j], pj);
            kk = eagle_btrs_from(&s, id[j], replay, p->key0, p->key1, 1);
            if (kk < 0) {
                res[j] = kk;
                continue;
            }
        }
        res[j] = prob[j] > 0.5 ? nn[j] - kk : kk;
    }
}

/* ---- integers ------------------------------------------------------------------- */

/* The first 32-bit word of every sample whose range is at most 2**32 (t: Lemire's
 * threshold, or s itself when unknown: a word at or above it is accepted either way) */
EAGLE_SIMD_CLONES
static void integers_first(int64_t n, const block_words *restrict w, const int64_t *restrict low,
                           const uint64_t *restrict s, const uint64_t *restrict t, int64_t *restrict res,
                           unsigned char *restrict todo)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const uint64_t m = (uint64_t)w->w0[j] * s[j];
        const uint64_t l = m & 0xffffffffULL;
        res[j] = (int64_t)((uint64_t)low[j] + (m >> 32));
        todo[j] = (unsigned char)!(s[j] <= 4294967296ULL && l >= t[j]);
    }
}

static void integers_block(int64_t n, const uint64_t *id, uint64_t replay, const eagle_dist_params *p,
                           const block_words *w, const int64_t *low, const int64_t *high, int64_t *res)
{
    uint64_t s[BLOCK], t[BLOCK];
    unsigned char todo[BLOCK];
    const int i32 = p->out_type == EAGLE_DIST_I32;
    const int one = !p->per_sample0 && !p->per_sample1;
    const uint64_t s1 = (uint64_t)p->i1 - (uint64_t)p->i0;
    const uint64_t t1 = one && p->i0 < p->i1 ? eagle_lemire_threshold(s1) : 0;
    for (int64_t j = 0; j < n; ++j) {
        s[j] = (uint64_t)high[j] - (uint64_t)low[j];
        t[j] = one ? t1 : s[j];
    }
    integers_first(n, w, low, s, t, res, todo);
    for (int64_t j = 0; j < n; ++j) {
        const int bad = !(low[j] < high[j]) ||
                        (i32 && (low[j] < -2147483647LL - 1 || high[j] > 2147483648LL));
        if (todo[j] || bad)
            res[j] = eagle_integers_value(low[j], high[j], i32, id[j], replay, p->key0, p->key1);
    }
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
    uint64_t id[BLOCK];
    _Alignas(64) block_words w;
    double f0[BLOCK], f1[BLOCK], fres[BLOCK];
    int64_t i0[BLOCK], i1[BLOCK], ires[BLOCK];
    for (int64_t b = start; b < stop; b += BLOCK) {
        const int64_t n = stop - b < BLOCK ? stop - b : BLOCK;
        if (k_ids >= 0) {
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)*(const int64_t *)(data[k_ids] + (b + j) * strides[k_ids]);
        } else {
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)(b + j);
        }
        draw_block0(n, id, r0, r1, p->key0, p->key1, &w);
        switch (p->what) {
        case EAGLE_DIST_EXPONENTIAL:
            gather_f64(n, p->per_sample0, a0, s0, b, p->d0, f0);
            exponential_block(n, &w, f0, fres);
            break;
        case EAGLE_DIST_POISSON:
            gather_f64(n, p->per_sample0, a0, s0, b, p->d0, f0);
            poisson_block(n, id, replay, p, &w, f0, ires);
            break;
        case EAGLE_DIST_BINOMIAL:
            gather_i64(n, p->per_sample0, a0, s0, b, p->i0, i0);
            gather_f64(n, p->per_sample1, a1, s1, b, p->d1, f1);
            binomial_block(n, id, replay, p, &w, i0, f1, ires);
            break;
        default:
            gather_i64(n, p->per_sample0, a0, s0, b, p->i0, i0);
            gather_i64(n, p->per_sample1, a1, s1, b, p->i1, i1);
            integers_block(n, id, replay, p, &w, i0, i1, ires);
            break;
        }
        char *o = out + b * ostride;
        switch (p->out_type) {
        case EAGLE_DIST_F64:
            for (int64_t j = 0; j < n; ++j)
                *(double *)(o + j * ostride) = fres[j];
            break;
        case EAGLE_DIST_F32:
            for (int64_t j = 0; j < n; ++j)
                *(float *)(o + j * ostride) = (float)fres[j];
            break;
        case EAGLE_DIST_I64:
            for (int64_t j = 0; j < n; ++j)
                *(int64_t *)(o + j * ostride) = ires[j];
            break;
        default:
            for (int64_t j = 0; j < n; ++j)
                *(int32_t *)(o + j * ostride) = (int32_t)ires[j];
            break;
        }
    }
}
