/* Philox4x32-10 over a block of samples, the words stored apart (w0[j], w1[j], w2[j],
 * w3[j] of sample j): the block-0 words of the distribution kernels
 * (distribution_kernels.c). The same words as eagle/philox.h's eagle_philox4x32_10 for
 * the counter (id[j] & 0xffffffff, id[j] >> 32, c2, c3) and the key (key0, key1).
 * Thread-safety: pure. */
#ifndef EAGLE_PHILOX_BLOCK_H
#define EAGLE_PHILOX_BLOCK_H

#include <stdint.h>

void eagle_philox_block(int64_t n, const uint64_t *id, uint32_t c2, uint32_t c3, uint32_t key0,
                        uint32_t key1, uint32_t *w0, uint32_t *w1, uint32_t *w2, uint32_t *w3);

#endif
