/* The samplers of eagle's distribution nodes (eagle.graph.exponential, poisson,
 * binomial, integers), shared by the CPU kernels (csrc/cpu/distribution_kernels.c),
 * the CUDA kernel (eagle/cuda/kernels/random.cu, NVRTC --std=c++11) and the CUDA C
 * emulator of the tests: one source, valid C99 and C++11, so every backend gives the
 * same integers and the same float bits. No hexadecimal float literals (C++17).
 *
 * Counter layout. Block (c, j) of a node at replay r is
 *     philox4x32_10((c & 0xffffffff, c >> 32, r & 0xffffffff, (r >> 32) ^ (j << 16)), key),
 * so the blocks of one (c, replay) never meet another's while r < 2**48 (2.8e14
 * replays). A sample `id` draws from its own blocks (id, 0), (id, 1), ... (block
 * (id, 0) is the block random_bits/uniform/normal draw for that sample), j below
 * EAGLE_DIST_BLOCKS: a sampler that would need more (every sampler here accepts a
 * block with probability above 1/2, so the chance is below 2**-65535) writes the
 * invalid marker (integers: low). The samplers that need few bits share a block
 * between consecutive ids, since a block costs more than the rest of their work: 64
 * bits of block (id >> 1, j) each for two samples, (w1 << 32 | w0) for an even id and
 * (w3 << 32 | w2) for an odd one, or one word of block (id >> 2, 0) each for four, w[id & 3];
 * a shared block (q, 0) is never a sample's own block 0 in the same node. A sample's
 * numbers depend on key, id, replay and the node's parameters, nothing else.
 *
 * Uniforms from 64 bits x = (hi << 32 | lo): u = (x >> 11) 2**-53 in [0, 1),
 * v = ((x >> 11) + 1) 2**-53 in (0, 1].
 *   exponential: -log(v) of its 64 bits of block (id >> 1, 0).
 *   integers in [low, low + s): Lemire's nearly divisionless method, first on its word
 *     of block (id >> 2, 0) (s <= 2**32) or its 64 bits of block (id >> 1, 0xffff)
 *     (s > 2**32), then on the 32-bit words w0, w1, w2, w3 (s <= 2**32) or the 64-bit
 *     words (w1 << 32 | w0), (w3 << 32 | w2) of its own blocks 1, 2, ...
 *   poisson: lam < 10: inversion (sequential search of the CDF) with u of (w0, w1) of
 *     block (id, 0); else PTRS (Hormann 1993), one attempt per own block j with
 *     (u of (w0, w1), v of (w2, w3)).
 *   binomial: p' = min(p, 1 - p), the result n - k when p > 1/2; n p' < 10:
 *     inversion with u of block (id, 0); else BTRS (Hormann 1993), one attempt per block.
 * The log is philox.h's eagle_log_01 (musl's log: exact for every positive normal
 * double, not only (0, 1]); exp, log1p and the Stirling tail are below; every other
 * operation is IEEE +, -, *, /, sqrt, floor, so host and device agree bit for bit
 * when compiled without contraction (-ffp-contract=off; NVRTC --fmad=false).
 */
#ifndef EAGLE_DISTRIBUTIONS_H
#define EAGLE_DISTRIBUTIONS_H

#include "eagle/philox.h"

/* a sample's own blocks j < EAGLE_DIST_BLOCKS; j of the blocks two samples share 64
 * bits of for integers' wide ranges; the marker a sample gets past its blocks or for a
 * bad parameter */
#define EAGLE_DIST_BLOCKS 65535u
#define EAGLE_DIST_WIDE 65535u
#define EAGLE_DIST_INVALID (-1LL)
/* 2**-53, 2**32, 2**52 */
#define EAGLE_DIST_TWO_M53 1.1102230246251565e-16
#define EAGLE_DIST_TWO_P52 4503599627370496.0
/* the largest lam (poisson) and n (binomial) the samplers take: every count is an exact
 * double (n below 2**52 also converts with integer operations, eagle_small_to_double) */
#define EAGLE_POISSON_LAM_MAX 1e15
#define EAGLE_BINOMIAL_N_MAX 4503599627370495LL
/* inversion below this mean, rejection (PTRS, BTRS) from it */
#define EAGLE_INVERSION_BELOW 10.0

/* the high 64 bits of a 64 x 64-bit product (exact integer arithmetic: the same anywhere) */
#ifdef EAGLE_RNG_DEVICE
EAGLE_RNG_FN eagle_u64 eagle_mulhi64(eagle_u64 a, eagle_u64 b) { return __umul64hi(a, b); }
#else
EAGLE_RNG_FN eagle_u64 eagle_mulhi64(eagle_u64 a, eagle_u64 b)
{
    const eagle_u64 a0 = a & 0xffffffffULL, a1 = a >> 32, b0 = b & 0xffffffffULL, b1 = b >> 32;
    const eagle_u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const eagle_u64 mid = (p00 >> 32) + (p01 & 0xffffffffULL) + (p10 & 0xffffffffULL);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}
#endif

/* block (c, j) (see the file's comment) */
EAGLE_RNG_FN eagle_philox_words eagle_dist_block(eagle_u64 c, eagle_u64 r, eagle_u32 key0,
                                                 eagle_u32 key1, eagle_u32 j)
{
    return eagle_philox4x32_10((eagle_u32)c, (eagle_u32)(c >> 32), (eagle_u32)r,
                               (eagle_u32)(r >> 32) ^ (j << 16), key0, key1);
}

/* sample id's 64 bits of a block two samples share, and its word of one four share */
EAGLE_RNG_FN eagle_u64 eagle_half_block(eagle_philox_words w, eagle_u64 id)
{
    return (id & 1) ? ((eagle_u64)w.w3 << 32) | w.w2 : ((eagle_u64)w.w1 << 32) | w.w0;
}

EAGLE_RNG_FN eagle_u32 eagle_quarter_block(eagle_philox_words w, eagle_u64 id)
{
    const eagle_u32 c = (eagle_u32)(id & 3);
    return c == 0 ? w.w0 : c == 1 ? w.w1 : c == 2 ? w.w2 : w.w3;
}

/* [0, 1) and (0, 1] from the 53 top bits of (hi << 32 | lo) */
EAGLE_RNG_FN double eagle_u_closed0(eagle_u32 lo, eagle_u32 hi)
{
    return eagle_top53(lo, hi) * EAGLE_DIST_TWO_M53;
}

EAGLE_RNG_FN double eagle_u_closed1(eagle_u32 lo, eagle_u32 hi)
{
    return (eagle_top53(lo, hi) + 1.0) * EAGLE_DIST_TWO_M53;
}

/* exp(x) for x in [-700, 0]: fdlibm's e_exp.c without its special cases (x = k ln2 + r,
 * |r| <= ln2 / 2, a degree-5 rational approximation), 2**k made from its bits */
EAGLE_RNG_FN double eagle_exp_neg(double x)
{
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10,
                 inv_ln2 = 1.44269504088896338700e+00;
    const double P1 = 1.66666666666666019037e-01, P2 = -2.77777777770155933842e-03,
                 P3 = 6.61375632143793436117e-05, P4 = -1.65339022054652515390e-06,
                 P5 = 4.13813679705723846039e-08;
    const double k = floor(x * inv_ln2 + 0.5);
    const double hi = x - k * ln2_hi;   /* exact: ln2_hi has 32 low zero bits */
    const double lo = k * ln2_lo;
    const double r = hi - lo;
    const double t = r * r;
    const double c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    const double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    /* k + 1023 in [1, 1023] lands in the low mantissa bits of 2**52 + k + 1023 */
    const eagle_u64 e = eagle_double_bits(k + (EAGLE_DIST_TWO_P52 + 1023.0)) << 52;
    return y * eagle_bits_double(e);
}

/* log(1 + x) for x > -1 (Goldberg's correction of log(1 + x) for the rounding of 1 + x) */
EAGLE_RNG_FN double eagle_log1p_(double x)
{
    const double u = 1.0 + x;
    const double d = u - 1.0;
    const double l = eagle_log_01(u) * (x / d);   /* computed either way: no branch */
    return d == 0.0 ? x : l;
}

/* log(k!) - ((k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2) for an integer k >= 0:
 * a table below 10, else the Stirling series of lgamma(k + 1) to its 1/x**9 term
 * (error below 1e-14 relative to the tail, 1e-16 absolute) */
EAGLE_RNG_FN double eagle_log_fact_tail(double k)
{
    const double x = k + 1.0;
    const double ix = 1.0 / x;
    const double ix2 = ix * ix;
    const double series = ix * (1.0 / 12.0 - ix2 * (1.0 / 360.0 - ix2 * (1.0 / 1260.0 -
                          ix2 * (1.0 / 1680.0 - ix2 * (1.0 / 1188.0)))));
    return k < 1.0 ? 0.08106146679532726 : k < 2.0 ? 0.0413406959554093 :
           k < 3.0 ? 0.02767792568499834 : k < 4.0 ? 0.020790672103765093 :
           k < 5.0 ? 0.016644691189821193 : k < 6.0 ? 0.013876128823070748 :
           k < 7.0 ? 0.01189670994589177 : k < 8.0 ? 0.010411265261972096 :
           k < 9.0 ? 0.009255462182712733 : k < 10.0 ? 0.00833056343336287 : series;
}

#define EAGLE_HALF_LOG_2PI 0.9189385332046728

/* ---- exponential ---------------------------------------------------------------- */

/* a standard exponential from 64 bits (hi << 32 | lo): 0 - log((top53 + 1) 2**-53), in
 * [0, 36.74] */
EAGLE_RNG_FN double eagle_std_exponential(eagle_u32 w0, eagle_u32 w1)
{
    return 0.0 - eagle_log_01(eagle_u_closed1(w0, w1));
}

/* ---- poisson -------------------------------------------------------------------- */

/* inversion for lam < 10: the smallest k with u <= F(k), F summed in order (stops when
 * the terms underflow) */
EAGLE_RNG_FN double eagle_poisson_inversion(double lam, double u)
{
    double p = eagle_exp_neg(0.0 - lam), F = p, k = 0.0;
    while (u > F && p > 0.0) {
        k = k + 1.0;
        p = (p * lam) * (1.0 / k);
        F = F + p;
    }
    return k;
}

/* PTRS's constants for one lam >= 10 */
typedef struct eagle_ptrs {
    double lam, a, b, vr, log_invalpha;
} eagle_ptrs;

EAGLE_RNG_FN eagle_ptrs eagle_ptrs_setup(double lam)
{
    eagle_ptrs s;
    const double b = 0.931 + 2.53 * sqrt(lam);
    s.lam = lam;
    s.b = b;
    s.a = -0.059 + 0.02483 * b;
    s.vr = 0.9277 - 3.6224 / (b - 2.0);
    s.log_invalpha = eagle_log_01(1.1239 + 1.1328 / (b - 3.4));
    return s;
}

/* One PTRS attempt with (u, v): the candidate k, its quick acceptance (the squeeze)
 * and the full test of log(v invalpha / (a / us**2 + b)) against the log density
 * k log lam - lam - log k!, the latter written with Stirling's form of log k! around lam,
 * -k log1p((k + 1 - lam) / lam) - log(k + 1) / 2 + (k + 1 - lam) - log(2 pi) / 2 - tail(k),
 * so it keeps its precision at large lam. Branch-free (the CPU vectorises it). */
EAGLE_RNG_FN double eagle_ptrs_k(const eagle_ptrs *s, double u)
{
    const double U = u - 0.5;
    const double us = 0.5 - fabs(U);
    return floor(((2.0 * s->a) / us + s->b) * U + s->lam + 0.43);
}

EAGLE_RNG_FN int eagle_ptrs_quick(const eagle_ptrs *s, double u, double v, double k)
{
    const double us = 0.5 - fabs(u - 0.5);
    return (us >= 0.07) & (v <= s->vr) & (k >= 0.0);
}

EAGLE_RNG_FN int eagle_ptrs_full(const eagle_ptrs *s, double u, double v, double k)
{
    const double us = 0.5 - fabs(u - 0.5);
    const double x = k + 1.0;
    const double d = x - s->lam;
    const double logp = (0.0 - k) * eagle_log1p_(d / s->lam) - 0.5 * eagle_log_01(x) + d -
                        EAGLE_HALF_LOG_2PI - eagle_log_fact_tail(k);
    const double lhs = eagle_log_01(v) + s->log_invalpha - eagle_log_01(s->a / (us * us) + s->b);
    return (k >= 0.0) & !((us < 0.013) & (v > us)) & (lhs <= logp);
}

/* the attempt: 1 and *k when accepted */
EAGLE_RNG_FN int eagle_ptrs_try(const eagle_ptrs *s, double u, double v, double *k_out)
{
    const double k = eagle_ptrs_k(s, u);
    *k_out = k;
    return eagle_ptrs_quick(s, u, v, k) | eagle_ptrs_full(s, u, v, k);
}

/* attempts from block j0 on; the invalid marker past the last block */
EAGLE_RNG_FN eagle_i64 eagle_ptrs_from(const eagle_ptrs *s, eagle_u64 id, eagle_u64 r,
                                       eagle_u32 key0, eagle_u32 key1, eagle_u32 j0)
{
    for (eagle_u32 j = j0; j < EAGLE_DIST_BLOCKS; ++j) {
        const eagle_philox_words w = eagle_dist_block(id, r, key0, key1, j);
        double k;
        if (eagle_ptrs_try(s, eagle_u_closed0(w.w0, w.w1), eagle_u_closed1(w.w2, w.w3), &k))
            return (eagle_i64)k;
    }
    return EAGLE_DIST_INVALID;
}

EAGLE_RNG_FN int eagle_poisson_valid(double lam)
{
    return (lam >= 0.0) & (lam <= EAGLE_POISSON_LAM_MAX);   /* false for nan */
}

/* one Poisson(lam) sample: the reference every backend's kernel reproduces */
EAGLE_RNG_FN eagle_i64 eagle_poisson_sample(double lam, eagle_u64 id, eagle_u64 r,
                                            eagle_u32 key0, eagle_u32 key1)
{
    if (!eagle_poisson_valid(lam))
        return EAGLE_DIST_INVALID;
    if (lam < EAGLE_INVERSION_BELOW) {
        const eagle_philox_words w = eagle_dist_block(id, r, key0, key1, 0);
        return (eagle_i64)eagle_poisson_inversion(lam, eagle_u_closed0(w.w0, w.w1));
    }
    const eagle_ptrs s = eagle_ptrs_setup(lam);
    return eagle_ptrs_from(&s, id, r, key0, key1, 0);
}

/* ---- binomial ------------------------------------------------------------------- */

/* inversion for p <= 1/2, n p < 10: the smallest k with u <= F(k), k <= n */
EAGLE_RNG_FN double eagle_binomial_inversion(double n, double p, double u)
{
    const double s = p / (1.0 - p);
    double P = eagle_exp_neg(n * eagle_log1p_(0.0 - p)), F = P, k = 0.0;
    while (u > F && k < n && P > 0.0) {
        k = k + 1.0;
        P = (P * ((n - k + 1.0) * s)) * (1.0 / k);
        F = F + P;
    }
    return k;
}

/* BTRS's constants for one n, p (p <= 1/2, n p >= 10) */
typedef struct eagle_btrs {
    double n, a, b, c, vr, alpha, r, m, h;
} eagle_btrs;

EAGLE_RNG_FN eagle_btrs eagle_btrs_setup(double n, double p)
{
    eagle_btrs s;
    const double q = 1.0 - p;
    const double spq = sqrt(n * p * q);
    const double b = 1.15 + 2.53 * spq;
    s.n = n;
    s.b = b;
    s.a = -0.0873 + 0.0248 * b + 0.01 * p;
    s.c = n * p + 0.5;
    s.vr = 0.92 - 4.2 / b;
    s.alpha = (2.83 + 5.1 / b) * spq;
    s.r = p / q;
    s.m = floor((n + 1.0) * p);
    /* log f(m) up to the terms that cancel against the attempt's */
    s.h = (s.m + 0.5) * eagle_log_01((s.m + 1.0) / (s.r * (n - s.m + 1.0))) +
          eagle_log_fact_tail(s.m) + eagle_log_fact_tail(n - s.m);
    return s;
}

/* One BTRS attempt with (u, v): the candidate k, its quick acceptance and the full
 * test, log f(k) / f(m) in Stirling's form (Hormann's step 3.4), the (n + 1) log(nm / nk)
 * term through log1p; both refuse a k outside [0, n] */
EAGLE_RNG_FN double eagle_btrs_k(const eagle_btrs *s, double u)
{
    const double U = u - 0.5;
    const double us = 0.5 - fabs(U);
    return floor(((2.0 * s->a) / us + s->b) * U + s->c);
}

EAGLE_RNG_FN int eagle_btrs_quick(const eagle_btrs *s, double u, double v, double k)
{
    const double us = 0.5 - fabs(u - 0.5);
    return (k >= 0.0) & (k <= s->n) & (us >= 0.07) & (v <= s->vr);
}

EAGLE_RNG_FN int eagle_btrs_full(const eagle_btrs *s, double u, double v, double k)
{
    const double us = 0.5 - fabs(u - 0.5);
    const double nk = s->n - k + 1.0;
    const double rhs = s->h + (s->n + 1.0) * eagle_log1p_((k - s->m) / nk) +
                       (k + 0.5) * eagle_log_01((nk * s->r) / (k + 1.0)) -
                       eagle_log_fact_tail(k) - eagle_log_fact_tail(s->n - k);
    const double lhs = eagle_log_01((v * s->alpha) / (s->a / (us * us) + s->b));
    return (k >= 0.0) & (k <= s->n) & (lhs <= rhs);
}

/* the attempt: 1 and *k when accepted */
EAGLE_RNG_FN int eagle_btrs_try(const eagle_btrs *s, double u, double v, double *k_out)
{
    const double k = eagle_btrs_k(s, u);
    *k_out = k;
    return eagle_btrs_quick(s, u, v, k) | eagle_btrs_full(s, u, v, k);
}

EAGLE_RNG_FN eagle_i64 eagle_btrs_from(const eagle_btrs *s, eagle_u64 id, eagle_u64 r,
                                       eagle_u32 key0, eagle_u32 key1, eagle_u32 j0)
{
    for (eagle_u32 j = j0; j < EAGLE_DIST_BLOCKS; ++j) {
        const eagle_philox_words w = eagle_dist_block(id, r, key0, key1, j);
        double k;
        if (eagle_btrs_try(s, eagle_u_closed0(w.w0, w.w1), eagle_u_closed1(w.w2, w.w3), &k))
            return (eagle_i64)k;
    }
    return EAGLE_DIST_INVALID;
}

EAGLE_RNG_FN int eagle_binomial_valid(eagle_i64 n, double p)
{
    return (n >= 0) & (n <= EAGLE_BINOMIAL_N_MAX) & (p >= 0.0) & (p <= 1.0);
}

/* one Binomial(n, p) sample: the reference every backend's kernel reproduces */
EAGLE_RNG_FN eagle_i64 eagle_binomial_sample(eagle_i64 n, double p, eagle_u64 id, eagle_u64 r,
                                             eagle_u32 key0, eagle_u32 key1)
{
    if (!eagle_binomial_valid(n, p))
        return EAGLE_DIST_INVALID;
    const int flip = p > 0.5;
    const double pp = flip ? 1.0 - p : p;
    const double nd = eagle_small_to_double((eagle_u64)n);
    eagle_i64 k;
    if (nd * pp < EAGLE_INVERSION_BELOW) {
        const eagle_philox_words w = eagle_dist_block(id, r, key0, key1, 0);
        k = (eagle_i64)eagle_binomial_inversion(nd, pp, eagle_u_closed0(w.w0, w.w1));
    } else {
        const eagle_btrs s = eagle_btrs_setup(nd, pp);
        k = eagle_btrs_from(&s, id, r, key0, key1, 0);
        if (k < 0)
            return k;
    }
    return flip ? n - k : k;
}

/* ---- integers ------------------------------------------------------------------- */

/* Lemire's threshold (2**32 - s) mod s (s <= 2**32) or (2**64 - s) mod s: a word whose
 * product's low part is below it is rejected */
EAGLE_RNG_FN eagle_u64 eagle_lemire_threshold(eagle_u64 s)
{
    return s <= 4294967296ULL ? (4294967296ULL - s) % s : (0ULL - s) % s;
}

/* Lemire's test of the word x (below 2**32 when s <= 2**32) for the range s: 1 and *off,
 * the offset in [0, s), when x is accepted. *t: s until a product's low part falls
 * below s, then the threshold (a low part at or above s is accepted either way). */
EAGLE_RNG_FN int eagle_lemire_take(eagle_u64 x, eagle_u64 s, eagle_u64 *t, eagle_u64 *off)
{
    eagle_u64 l;
    if (s <= 4294967296ULL) {
        const eagle_u64 m = x * s;
        l = m & 0xffffffffULL;
        *off = m >> 32;
    } else {
        l = x * s;
        *off = eagle_mulhi64(x, s);
    }
    if (l < s && *t == s)
        *t = eagle_lemire_threshold(s);
    return l >= *t;
}

/* one integer in [low, low + s), s >= 1 (s = high - low as an unsigned 64-bit number):
 * the first word of the sample's stream Lemire's method accepts */
EAGLE_RNG_FN eagle_i64 eagle_integers_sample(eagle_i64 low, eagle_u64 s, eagle_u64 id, eagle_u64 r,
                                             eagle_u32 key0, eagle_u32 key1)
{
    const int narrow = s <= 4294967296ULL;
    eagle_u64 t = s, off = 0;
    const eagle_philox_words g = narrow ? eagle_dist_block(id >> 2, r, key0, key1, 0)
                                        : eagle_dist_block(id >> 1, r, key0, key1, EAGLE_DIST_WIDE);
    if (eagle_lemire_take(narrow ? eagle_quarter_block(g, id) : eagle_half_block(g, id), s, &t, &off))
        return (eagle_i64)((eagle_u64)low + off);
    for (eagle_u32 j = 1; j < EAGLE_DIST_BLOCKS; ++j) {
        const eagle_philox_words w = eagle_dist_block(id, r, key0, key1, j);
        const eagle_u64 x[4] = {narrow ? w.w0 : ((eagle_u64)w.w1 << 32) | w.w0,
                                narrow ? w.w1 : ((eagle_u64)w.w3 << 32) | w.w2, w.w2, w.w3};
        for (int i = 0; i < (narrow ? 4 : 2); ++i)
            if (eagle_lemire_take(x[i], s, &t, &off))
                return (eagle_i64)((eagle_u64)low + off);
    }
    return low;   /* unreachable in practice: the chance is below 2**-(2**17) */
}

/* ---- one sample as a node writes it (parameter checks and markers included) ------ */

#define EAGLE_DBL_MAX 1.7976931348623157e308

/* scale * a standard exponential of 64 bits (hi << 32 | lo); nan for a scale that is
 * negative, inf or nan */
EAGLE_RNG_FN double eagle_exponential_value(double scale, eagle_u32 w0, eagle_u32 w1)
{
    const double e = eagle_std_exponential(w0, w1);
    return (scale >= 0.0) & (scale <= EAGLE_DBL_MAX) ? scale * e : eagle_bits_double(0x7ff8000000000000ULL);
}

/* an integer in [low, high) for an int64 (i32 = 0) or int32 (i32 = 1) output; the
 * output type's smallest value when high <= low or the range leaves the type */
EAGLE_RNG_FN eagle_i64 eagle_integers_value(eagle_i64 low, eagle_i64 high, int i32, eagle_u64 id,
                                            eagle_u64 r, eagle_u32 key0, eagle_u32 key1)
{
    const eagle_i64 smallest = i32 ? -2147483647LL - 1 : -9223372036854775807LL - 1;
    if (!(low < high) || (i32 && (low < -2147483647LL - 1 || high > 2147483648LL)))
        return smallest;
    return eagle_integers_sample(low, (eagle_u64)high - (eagle_u64)low, id, r, key0, key1);
}

/* one exponential sample (scale * -log v of its 64 bits of block (id >> 1, 0)) */
EAGLE_RNG_FN double eagle_exponential_sample(double scale, eagle_u64 id, eagle_u64 r, eagle_u32 key0,
                                             eagle_u32 key1)
{
    const eagle_u64 x = eagle_half_block(eagle_dist_block(id >> 1, r, key0, key1, 0), id);
    return eagle_exponential_value(scale, (eagle_u32)x, (eagle_u32)(x >> 32));
}

#endif
