/* Philox4x32-10 (csrc/include/eagle/philox.h) over a block of counters, vectorised by
 * hand where the compiler does not: counter j is (c & 0xffffffff, c >> 32, c2, c3) with
 * c = id[j], or first + j when id is NULL. */
#ifndef EAGLE_PHILOX_BLOCK_H
#define EAGLE_PHILOX_BLOCK_H

#include <stdint.h>

/* word by word: w0[j] .. w3[j] are counter j's four words */
void eagle_philox_block(int64_t n, const uint64_t *id, uint64_t first, uint32_t c2, uint32_t c3,
                        uint32_t key0, uint32_t key1, uint32_t *w0, uint32_t *w1, uint32_t *w2, uint32_t *w3);

/* counter by counter: out[4 j + i] is counter j's word i (random_bits' layout; as
 * 64-bit words on a little-endian host, out64[2 j] = w1 << 32 | w0, out64[2 j + 1] =
 * w3 << 32 | w2) */
void eagle_philox_interleaved(int64_t n, const uint64_t *id, uint64_t first, uint32_t c2, uint32_t c3,
                              uint32_t key0, uint32_t key1, uint32_t *out);

#endif
