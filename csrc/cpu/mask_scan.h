/* Scans of a contiguous where= mask (bytes, any nonzero byte set), eight bytes a step:
 * the set count and runs of a block, the next set or unset byte, and a chunk's bitmap
 * (which says whether it is all unset, all set, or how many runs it holds). Used by the masked ufunc loop (eagle/cpu/_ufunc.pyx). */
#ifndef EAGLE_MASK_SCAN_H
#define EAGLE_MASK_SCAN_H

#include <stdint.h>
#include <string.h>

#include "avx512_masks.h"
#include "simd_clones.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define EAGLE_MASK_ONES 0x0101010101010101ULL

/* inlined into each clone of a caller, so compiled for the clone's level */
#if defined(__GNUC__)
#define EAGLE_MASK_INLINE static inline __attribute__((always_inline))
#else
#define EAGLE_MASK_INLINE static inline
#endif

EAGLE_MASK_INLINE uint64_t eagle_mask_word(const unsigned char *m)
{
    uint64_t w;
    memcpy(&w, m, sizeof w);
    return w;
}

/* 0x01 in each byte of w that is nonzero, 0x00 elsewhere (no carry crosses a byte) */
EAGLE_MASK_INLINE uint64_t eagle_mask_flags(uint64_t w)
{
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    return ((((w & low7) + low7) | w) >> 7) & EAGLE_MASK_ONES;
}

/* the sum of the bytes of w (each at most 255): the even and odd bytes as 16-bit lanes */
EAGLE_MASK_INLINE intptr_t eagle_mask_byte_sum(uint64_t w)
{
    const uint64_t even = 0x00ff00ff00ff00ffULL, lanes = 0x0001000100010001ULL;
    return (intptr_t)((((w & even) + ((w >> 8) & even)) * lanes) >> 48);
}

#ifdef EAGLE_AVX512_MASKS
/* eagle_mask_counts over m[0, n rounded down to 64), sixty-four bytes a step (one test
 * into a 64-bit mask, popcounts): adds to *count and *runs, returns the bytes done */
EAGLE_AVX512_BW static intptr_t eagle_mask_counts_avx512(const unsigned char *m, intptr_t n, intptr_t *count,
                                                         intptr_t *runs)
{
    intptr_t c = 0, r = 0, j = 0;
    uint64_t last = 0;   /* bit 0: the byte before this step is set */
    for (; j + 64 <= n; j += 64) {
        const __m512i b = _mm512_loadu_si512((const void *)(m + j));
        const uint64_t k = (uint64_t)_mm512_test_epi8_mask(b, b);
        c += __builtin_popcountll(k);
        r += __builtin_popcountll(k & ~((k << 1) | last));
        last = k >> 63;
    }
    *count += c;
    *runs += r;
    return j;
}
#endif

/* *count the set bytes of m[0, n), *runs its runs of set bytes (a set byte at the start
 * or after an unset one). With AVX-512 BW sixty-four bytes a step (perf, a masked exp
 * over 1e6 doubles: 2.3x fewer samples in the counts than the words below); else, and
 * for the rest, eight bytes a step, branch-free: a byte counter per lane of a word,
 * summed every 255 words (a lane then holds at most 255), vectorised across words in
 * the clones. */
EAGLE_SIMD_CLONES static void eagle_mask_counts(const unsigned char *m, intptr_t n, intptr_t *count,
                                                intptr_t *runs)
{
    intptr_t c = 0, r = 0, k = 0;
#ifdef EAGLE_AVX512_MASKS
    if (eagle_has_avx512_bw())
        k = eagle_mask_counts_avx512(m, n, &c, &r) / 8;
#endif
    const intptr_t words = n / 8;
    while (k < words) {
        const intptr_t e = k + 255 < words ? k + 255 : words;
        uint64_t cc = 0, rr = 0;
        for (intptr_t i = k; i < e; ++i) {
            const uint64_t f = eagle_mask_flags(eagle_mask_word(m + 8 * i));
            const uint64_t before = i ? eagle_mask_flags(eagle_mask_word(m + 8 * i - 8)) >> 56 : 0;
            /* byte j's predecessor is byte j - 1 (little-endian: 8 bits lower) */
            const uint64_t prev = (f << 8) | before;
            cc += f;
            rr += f & ~prev;
        }
        c += eagle_mask_byte_sum(cc);
        r += eagle_mask_byte_sum(rr);
        k = e;
    }
    for (intptr_t j = 8 * words; j < n; ++j) {
        c += m[j] != 0;
        r += (m[j] != 0) & (j == 0 || m[j - 1] == 0);
    }
    *count = c;
    *runs = r;
}

/* the first j in [i, n) with m[j] set (set != 0) or unset (set == 0), n if none */
EAGLE_MASK_INLINE intptr_t eagle_mask_find(const unsigned char *m, intptr_t i, intptr_t n, int set)
{
    const uint64_t flip = set ? 0 : EAGLE_MASK_ONES;
    for (; i + 8 <= n; i += 8) {
        uint64_t hit = eagle_mask_flags(eagle_mask_word(m + i)) ^ flip;
        if (hit) {
#if defined(__GNUC__)
            return i + (__builtin_ctzll(hit) >> 3);
#else
            while (!(hit & 0xff)) {
                hit >>= 8;
                ++i;
            }
            return i;
#endif
        }
    }
    for (; i < n; ++i)
        if ((m[i] != 0) == (set != 0))
            return i;
    return n;
}

/* The bitmap of a chunk of the mask m[0, n), n <= 256: bit j % 64 of bits[j / 64] is
 * m[j] != 0 (bits past n clear). Sixteen bytes a step (SSE2's byte compare and move
 * mask) on x86-64, eight bytes a step (a multiply gathers a word's flags) elsewhere. */
EAGLE_MASK_INLINE void eagle_mask_bits(const unsigned char *m, intptr_t n, uint64_t bits[4])
{
    bits[0] = bits[1] = bits[2] = bits[3] = 0;
    intptr_t j = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    for (; j + 16 <= n; j += 16) {
        const unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(m + j)), zero));
        bits[j >> 6] |= (uint64_t)(~z & 0xffffu) << (j & 63);
    }
#endif
    for (; j + 8 <= n; j += 8) {
        /* flag i (bit 8i) to bit 56 + i: the products land on distinct bits, no carry */
        const uint64_t f = eagle_mask_flags(eagle_mask_word(m + j));
        bits[j >> 6] |= ((f * 0x0102040810204080ULL) >> 56) << (j & 63);
    }
    for (; j < n; ++j)
        bits[j >> 6] |= (uint64_t)(m[j] != 0) << (j & 63);
}

EAGLE_MASK_INLINE int eagle_mask_ctz(uint64_t w)   /* w != 0 */
{
#if defined(__GNUC__)
    return __builtin_ctzll(w);
#else
    int k = 0;
    while (!(w & 1)) {
        w >>= 1;
        ++k;
    }
    return k;
#endif
}

EAGLE_MASK_INLINE int eagle_mask_popcount(uint64_t w)
{
#if defined(__GNUC__)
    return __builtin_popcountll(w);
#else
    int k = 0;
    for (; w; w &= w - 1)
        ++k;
    return k;
#endif
}

/* the runs of set bits of a chunk's bitmap */
EAGLE_MASK_INLINE int eagle_mask_bit_runs(const uint64_t bits[4])
{
    int r = 0;
    uint64_t carry = 0;
    for (int k = 0; k < 4; ++k) {
        r += eagle_mask_popcount(bits[k] & ~((bits[k] << 1) | carry));
        carry = bits[k] >> 63;
    }
    return r;
}

/* the first bit q >= p of a chunk's bitmap that is set (set != 0) or clear, 256 if none */
EAGLE_MASK_INLINE int eagle_mask_bit_next(const uint64_t bits[4], int p, int set)
{
    for (int k = p >> 6; k < 4; ++k) {
        uint64_t w = set ? bits[k] : ~bits[k];
        if (k == p >> 6)
            w &= ~(uint64_t)0 << (p & 63);
        if (w)
            return 64 * k + eagle_mask_ctz(w);
    }
    return 256;
}

#endif
