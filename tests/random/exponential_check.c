/* csrc/cpu/exponential_avx512.h against the portable sampler of eagle/distributions.h,
 * bit for bit: words at the edges (v = 2**-53 and 1, every power of two between, the
 * ends of musl's reduction interval around sqrt(2)/2 and sqrt(2)), then random words
 * and words shifted right by every count (small v); one scale and per-sample scales,
 * the invalid ones among them (negative, -0, inf, nan, subnormal, the largest double);
 * every count 0..40 (the groups of eight and their tails: the kernel does n rounded down
 * to eight and writes nothing past it). Built by tests/random/test_exponential_avx512.py
 * with the extension's flags; prints the mismatches and exits nonzero if there are any. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "eagle/distributions.h"
#include "exponential_avx512.h"

#define MAX 4096

static uint64_t bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* the 64-bit word whose v is (t + 1) 2**-53, t < 2**53 */
static uint64_t word_of(uint64_t t, uint64_t low11) { return (t << 11) | (low11 & 0x7ff); }

int main(void)
{
#ifndef EAGLE_EXPONENTIAL_AVX512
    puts("no AVX-512 path in this build");
    return 2;
#else
    if (!eagle_exponential_avx512_usable()) {
        puts("this CPU has no AVX-512 F and DQ");
        return 2;
    }
    static uint64_t x[MAX];
    static double scale[MAX], got[MAX + 8], want[MAX];
    const double scales[] = {1.0, 2.5, 0.0, -0.0, -1.0, INFINITY, -INFINITY, NAN, 4.9e-324,
                             1.7976931348623157e308, 1e-300, 3.0};
    const int n_scales = (int)(sizeof scales / sizeof scales[0]);
    int m = 0;
    const uint64_t top = 1ull << 53;
    x[m++] = word_of(0, 0);               /* v = 2**-53 */
    x[m++] = word_of(top - 1, 0x7ff);     /* v = 1 */
    for (int e = 0; e < 53; ++e) {        /* v = 2**(e - 53) and its neighbours */
        const uint64_t t = (1ull << e) - 1;
        x[m++] = word_of(t, 0);
        x[m++] = word_of(t + 1, 0x7ff);
        if (t > 0)
            x[m++] = word_of(t - 1, 0x123);
    }
    /* v around sqrt(2)/2 and 1/sqrt(2) * 2**-e: the reduction's interval ends */
    for (int e = 0; e < 50; ++e) {
        const double edge = ldexp(0.70710678118654757, -e) / 1.1102230246251565e-16;
        const uint64_t t = (uint64_t)edge;
        for (int d = -2; d <= 2; ++d)
            x[m++] = word_of(t + (uint64_t)d - 1, (uint64_t)d);
    }
    uint64_t state = 0x9e3779b97f4a7c15ull;
    while (m < MAX) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t r = state ^ (state >> 29);
        x[m] = m % 3 ? r : r >> (m % 64);
        ++m;
    }
    for (int j = 0; j < MAX; ++j)
        scale[j] = scales[j % n_scales];
    long bad = 0, checked = 0;
    for (int per_sample = 0; per_sample < 2; ++per_sample) {
        const double one = 1.75;
        for (int j = 0; j < MAX; ++j)
            want[j] = per_sample ? eagle_exponential_value(scale[j], (eagle_u32)x[j], (eagle_u32)(x[j] >> 32))
                                 : one * eagle_std_exponential((eagle_u32)x[j], (eagle_u32)(x[j] >> 32));
        for (int n = 0; n <= MAX; n += n < 40 ? 1 : MAX - 40) {
            for (int j = 0; j < n + 8 && j < MAX + 8; ++j)
                got[j] = -123.0;
            const int64_t done = eagle_exponential_avx512(n, x, per_sample ? scale : NULL, one, got);
            if (done != (n & ~7)) {
                printf("n=%d: did %lld, want %d\n", n, (long long)done, n & ~7);
                ++bad;
            }
            for (int j = 0; j < done; ++j) {
                ++checked;
                if (bits(got[j]) != bits(want[j]) && !(isnan(got[j]) && isnan(want[j]))) {
                    if (bad < 20)
                        printf("per_sample=%d j=%d x=%016llx scale=%g: %.17g, want %.17g\n", per_sample, j,
                               (unsigned long long)x[j], per_sample ? scale[j] : one, got[j], want[j]);
                    ++bad;
                }
            }
            for (int j = (int)done; j < n + 8 && j < MAX + 8; ++j)
                if (got[j] != -123.0) {
                    printf("n=%d: wrote element %d past the groups of eight\n", n, j);
                    ++bad;
                    break;
                }
        }
    }
    printf("%ld values checked, %ld mismatches\n", checked, bad);
    return bad != 0;
#endif
}
