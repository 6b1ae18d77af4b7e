/* eagle_mask_counts (csrc/cpu/mask_scan.h: the set bytes and runs of a where= mask's
 * block, which decide how the masked loop runs it) against a byte-by-byte count, for
 * every length 0..200 and then every 37th to 1300 (the AVX-512 steps of 64 bytes, the
 * eight-byte words after them, the last bytes), masks of every kind (random halves,
 * sparse, long runs, all set, none, a run across each 64-byte step) with set bytes of
 * any nonzero value, at every start offset 0..7. Built by tests/ufunc/test_mask_counts.py
 * as the extension builds it and with EAGLE_NO_AVX512_MASKS (the portable form alone);
 * prints the mismatches and exits nonzero if there are any. */
#include <stdint.h>
#include <stdio.h>

#include "mask_scan.h"

#define MAX 1300

int main(void)
{
    static unsigned char buf[MAX + 8];
    uint64_t state = 0x9e3779b97f4a7c15ull;
    long bad = 0, checked = 0;
    for (int n = 0; n <= MAX; n += n < 200 ? 1 : 37) {
        for (int kind = 0; kind < 7; ++kind) {
            for (int off = 0; off < 8; ++off) {
                unsigned char *m = buf + off;
                for (int j = 0; j < n; ++j) {
                    state = state * 6364136223846793005ull + 1442695040888963407ull;
                    const unsigned r = (unsigned)(state >> 33);
                    const unsigned char v = (unsigned char)(1 + (r >> 8) % 255);   /* any nonzero byte */
                    switch (kind) {
                    case 0: m[j] = (r & 1) ? v : 0; break;
                    case 1: m[j] = r % 100 == 0 ? v : 0; break;
                    case 2: m[j] = (j / 300) % 2 == 0 ? v : 0; break;
                    case 3: m[j] = v; break;
                    case 4: m[j] = 0; break;
                    case 5: m[j] = (j % 64 == 63 || j % 64 == 0) ? v : 0; break;  /* runs across steps */
                    default: m[j] = r % 7 ? v : 0; break;
                    }
                }
                intptr_t count = -1, runs = -1, want_count = 0, want_runs = 0;
                eagle_mask_counts(m, n, &count, &runs);
                for (int j = 0; j < n; ++j) {
                    want_count += m[j] != 0;
                    want_runs += m[j] != 0 && (j == 0 || m[j - 1] == 0);
                }
                ++checked;
                if (count != want_count || runs != want_runs) {
                    if (bad < 20)
                        printf("n=%d kind=%d off=%d: count %ld runs %ld, want %ld %ld\n", n, kind, off,
                               (long)count, (long)runs, (long)want_count, (long)want_runs);
                    ++bad;
                }
            }
        }
    }
    printf("%ld masks checked, %ld mismatches\n", checked, bad);
    return bad != 0;
}
