/* Every form of csrc/cpu/philox_block.c (words apart or interleaved, counters from ids or
 * from `first`) against the portable Philox4x32-10 of eagle/philox.h, for every count from
 * 0 to 64 and then every 37th to 700 (the vector loops' groups and their tails), counters
 * whose low word carries into the high one, and nothing written past n. Built by
 * tests/random/test_philox_block.py at each EAGLE_PHILOX_MAX_LEVEL; prints the
 * mismatches and exits nonzero if there are any. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "eagle/philox.h"
#include "philox_block.h"

#define MAX 700

int main(void)
{
    static uint32_t w[4][MAX], inter[4 * MAX];
    static uint64_t id[MAX];
    uint64_t state = 0x9e3779b97f4a7c15ull;
    long bad = 0, checked = 0;
    for (int n = 0; n <= MAX; n += n < 64 ? 1 : 37) {
        for (int use_id = 0; use_id < 2; ++use_id) {
            const uint64_t first = 0xffffffffull - 100 + (uint64_t)n;
            for (int j = 0; j < n; ++j) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                id[j] = state ^ (state >> 29);
            }
            memset(w, 0xab, sizeof w);
            memset(inter, 0xcd, sizeof inter);
            const uint64_t *ids = use_id ? id : NULL;
            eagle_philox_block(n, ids, first, 11, 22, 0xdeadbeefu, 0x12345678u, w[0], w[1], w[2], w[3]);
            eagle_philox_interleaved(n, ids, first, 11, 22, 0xdeadbeefu, 0x12345678u, inter);
            for (int j = 0; j < n; ++j) {
                const uint64_t c = use_id ? id[j] : first + (uint64_t)j;
                const eagle_philox_words x =
                    eagle_philox4x32_10((uint32_t)c, (uint32_t)(c >> 32), 11, 22, 0xdeadbeefu, 0x12345678u);
                const uint32_t want[4] = {x.w0, x.w1, x.w2, x.w3};
                for (int q = 0; q < 4; ++q) {
                    bad += w[q][j] != want[q];
                    bad += inter[4 * j + q] != want[q];
                    checked += 2;
                }
            }
            for (int j = n; j < MAX; ++j)
                bad += w[0][j] != 0xababababu || w[3][j] != 0xababababu || inter[4 * j] != 0xcdcdcdcdu;
        }
    }
    printf("%ld words checked, %ld mismatches\n", checked, bad);
    return bad != 0;
}
