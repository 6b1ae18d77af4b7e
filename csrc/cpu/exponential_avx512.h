/* The exponential node's samples eight at a time with AVX-512 (F and DQ), picked at run
 * time (eagle_exponential_avx512_usable): scale * (0 - log v), v = ((x >> 11) + 1) 2**-53,
 * with musl's log exactly as eagle_log_01 (eagle/philox.h) computes it, operation for
 * operation and with its constants, so the bits are the portable sampler's
 * (eagle_exponential_value, eagle_std_exponential) and the GPU's.
 *
 * Why by hand: GCC's vectorisation of the portable loop builds v and the exponent as the
 * portable code must (sums of two doubles made from integer bits: the GPU and the AVX2
 * clone have no 64-bit integer conversion) and reloads its constants; here each is one
 * exact conversion (vcvtuqq2pd: v's integer is at most 2**53) and the constants stay in
 * registers. The log itself, division included, is unchanged.
 *
 * Header-only: included by distribution_kernels.c and by the bit-for-bit check
 * tests/random/exponential_check.c. Compile without FP contraction (-ffp-contract=off)
 * like the portable sampler; the intrinsics here are explicit about their fma.
 */
#ifndef EAGLE_EXPONENTIAL_AVX512_H
#define EAGLE_EXPONENTIAL_AVX512_H

#include <stdint.h>

#include "eagle/distributions.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(EAGLE_NO_EXPONENTIAL_AVX512)
#define EAGLE_EXPONENTIAL_AVX512 1
#include <immintrin.h>

/* whether this CPU runs eagle_exponential_avx512 */
static inline int eagle_exponential_avx512_usable(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}

/* res[j] for j < n rounded down to a multiple of 8 (returned): the exponential of the 64
 * bits x[j] times scale[j] (nan where scale[j] is negative, inf or nan), or times
 * one_scale when scale is NULL (checked by the caller: finite, >= 0) */
__attribute__((target("avx512f,avx512dq"))) static int64_t eagle_exponential_avx512(
    int64_t n, const uint64_t *restrict x, const double *restrict scale, double one_scale,
    double *restrict res)
{
    const __m512d ln2_hi = _mm512_set1_pd(EAGLE_LOG_LN2_HI), ln2_lo = _mm512_set1_pd(EAGLE_LOG_LN2_LO);
    const __m512d lg1 = _mm512_set1_pd(EAGLE_LOG_LG1), lg2 = _mm512_set1_pd(EAGLE_LOG_LG2),
                  lg3 = _mm512_set1_pd(EAGLE_LOG_LG3), lg4 = _mm512_set1_pd(EAGLE_LOG_LG4),
                  lg5 = _mm512_set1_pd(EAGLE_LOG_LG5), lg6 = _mm512_set1_pd(EAGLE_LOG_LG6),
                  lg7 = _mm512_set1_pd(EAGLE_LOG_LG7);
    const __m512d two_m53 = _mm512_set1_pd(EAGLE_TWO_M53), one = _mm512_set1_pd(1.0),
                  two = _mm512_set1_pd(2.0), half = _mm512_set1_pd(0.5), bias = _mm512_set1_pd(1023.0),
                  zero = _mm512_setzero_pd(), dbl_max = _mm512_set1_pd(EAGLE_DBL_MAX),
                  nan = _mm512_castsi512_pd(_mm512_set1_epi64(0x7ff8000000000000LL)),
                  scale1 = _mm512_set1_pd(one_scale);
    const __m512i to_m = _mm512_set1_epi64((long long)(0x3ff0000000000000ULL - EAGLE_LOG_HALF_SQRT2_BITS)),
                  mantissa = _mm512_set1_epi64(0x000fffffffffffffLL),
                  half_sqrt2 = _mm512_set1_epi64((long long)EAGLE_LOG_HALF_SQRT2_BITS),
                  plus1 = _mm512_set1_epi64(1);
    const int64_t done = n & ~(int64_t)7;
    for (int64_t j = 0; j < done; j += 8) {
        const __m512i w = _mm512_loadu_si512((const void *)(x + j));
        /* v = (top53 + 1) 2**-53 (eagle_u_closed1) */
        const __m512d v = _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_add_epi64(_mm512_srli_epi64(w, 11), plus1)),
                                        two_m53);
        /* eagle_log_01(v) */
        __m512i ix = _mm512_add_epi64(_mm512_castpd_si512(v), to_m);
        const __m512d k = _mm512_sub_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(ix, 52)), bias);
        ix = _mm512_add_epi64(_mm512_and_si512(ix, mantissa), half_sqrt2);
        const __m512d f = _mm512_sub_pd(_mm512_castsi512_pd(ix), one);
        const __m512d hfsq = _mm512_mul_pd(_mm512_mul_pd(half, f), f);
        const __m512d s = _mm512_div_pd(f, _mm512_add_pd(two, f));
        const __m512d z = _mm512_mul_pd(s, s);
        const __m512d ww = _mm512_mul_pd(z, z);
        const __m512d t1 = _mm512_mul_pd(ww, _mm512_fmadd_pd(ww, _mm512_fmadd_pd(ww, lg6, lg4), lg2));
        const __m512d t2 = _mm512_mul_pd(
            z, _mm512_fmadd_pd(ww, _mm512_fmadd_pd(ww, _mm512_fmadd_pd(ww, lg7, lg5), lg3), lg1));
        const __m512d R = _mm512_add_pd(t2, t1);
        const __m512d inner = _mm512_add_pd(_mm512_mul_pd(s, _mm512_add_pd(hfsq, R)), _mm512_mul_pd(k, ln2_lo));
        const __m512d lg = _mm512_sub_pd(_mm512_mul_pd(k, ln2_hi), _mm512_sub_pd(_mm512_sub_pd(hfsq, inner), f));
        const __m512d e = _mm512_sub_pd(zero, lg);
        if (scale) {
            const __m512d sc = _mm512_loadu_pd(scale + j);
            const __mmask8 ok = _mm512_cmp_pd_mask(sc, zero, _CMP_GE_OQ) & _mm512_cmp_pd_mask(sc, dbl_max, _CMP_LE_OQ);
            _mm512_storeu_pd(res + j, _mm512_mask_mul_pd(nan, ok, sc, e));
        } else {
            _mm512_storeu_pd(res + j, _mm512_mul_pd(scale1, e));
        }
    }
    return done;
}
#endif

#endif
