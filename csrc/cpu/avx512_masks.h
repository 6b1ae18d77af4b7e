/* AVX-512 over byte masks (a where= mask, a compaction's alive flags): whether the CPU
 * has it (F, BW and VL, checked at run time), the attribute that compiles a function for
 * it, and eight or sixteen mask bytes as a bit mask (bit i: byte i is not zero). For
 * x86-64 with GCC or Clang; EAGLE_AVX512_MASKS is defined where it applies (not with
 * EAGLE_NO_AVX512_MASKS: the tests' checks build the portable forms that way). */
#ifndef EAGLE_AVX512_MASKS_H
#define EAGLE_AVX512_MASKS_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(EAGLE_NO_AVX512_MASKS)
#include <immintrin.h>
#define EAGLE_AVX512_MASKS 1
#define EAGLE_AVX512_BW __attribute__((target("avx512f,avx512bw,avx512vl")))

static inline int eagle_has_avx512_bw(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

EAGLE_AVX512_BW static inline __mmask8 eagle_mask_bits8(const unsigned char *m)
{
    const __m128i b = _mm_loadl_epi64((const __m128i *)m);
    return (__mmask8)_mm_test_epi8_mask(b, b);
}

EAGLE_AVX512_BW static inline __mmask16 eagle_mask_bits16(const unsigned char *m)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)m);
    return (__mmask16)_mm_test_epi8_mask(b, b);
}
#endif

#endif
