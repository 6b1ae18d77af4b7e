/* eagle's random-node kernels on the CPU; see random_kernels.h and eagle/philox.h.
 *
 * Samples go by blocks of BLOCK: the ids of a block are gathered (when the node has
 * ids) into a small buffer, philox_block.c draws the block's words (by hand with AVX2:
 * the compiler's vectorised Philox is about 3x slower), and one vectorised loop
 * transforms them (#pragma omp simd, the log and the cos inlined); a block of a strided
 * output goes through a buffer. On x86-64 ELF with GCC 11+ the transform loops are
 * built for x86-64-v4 (AVX-512), v3 (AVX2 + FMA) and the baseline, picked at load time
 * (target_clones), so the wheel runs on any x86-64; v4 and v3 vectorise every loop
 * (the baseline's normal loops call libm's fma() and stay scalar).
 * Compiled with -ffp-contract=off: only the explicit fma() calls fuse, so the
 * results are those of philox.h on every machine and on the GPU.
 */
#include "random_kernels.h"

#include <string.h>

#include "eagle/philox.h"
#include "philox_block.h"
#include "simd_clones.h"

#define BLOCK 512


/* a block's Philox words (philox_block.c), apart: w0[j] .. w3[j] of sample j */
typedef struct block_words {
    uint32_t w0[BLOCK], w1[BLOCK], w2[BLOCK], w3[BLOCK];
} block_words;

/* a uniform from a sample's words hi, lo (the first output takes words 0 and 1, a
 * second output words 2 and 3; float32 takes hi alone) */
EAGLE_SIMD_CLONES
static void uniform64(int64_t n, const uint32_t *restrict hi, const uint32_t *restrict lo, double low,
                      double span, double below, double *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        out[j] = eagle_scale_uniform(eagle_u01_53(hi[j], lo[j]), low, span, below);
}

EAGLE_SIMD_CLONES
static void uniform32(int64_t n, const uint32_t *restrict hi, float low, float span, float below,
                      float *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
        out[j] = eagle_scale_uniform_f(eagle_u01_24(hi[j]), low, span, below);
}

EAGLE_SIMD_CLONES
static void normal64(int64_t n, const block_words *restrict w, double loc, double scale, double *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words x = {w->w0[j], w->w1[j], w->w2[j], w->w3[j]};
        out[j] = loc + scale * eagle_normal_from_words(x);
    }
}

EAGLE_SIMD_CLONES
static void normal32(int64_t n, const block_words *restrict w, double loc, double scale, float *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words x = {w->w0[j], w->w1[j], w->w2[j], w->w3[j]};
        out[j] = (float)(loc + scale * eagle_normal_from_words(x));
    }
}

void eagle_random_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                         void *user_data)
{
    const eagle_random_params *p = (const eagle_random_params *)user_data;
    const uint64_t replay = p->replay();
    const uint32_t r0 = (uint32_t)replay, r1 = (uint32_t)(replay >> 32);
    const int k_out = p->has_ids ? 1 : 0;
    char *out = data[k_out];
    const int64_t ostride = strides[k_out];
    const int64_t item = p->what == EAGLE_RANDOM_BITS ? 16 : (p->f32 ? 4 : 8);
    const int direct = ostride == item;
    char *out2 = p->second ? data[k_out + 1] : NULL;
    const int64_t o2stride = p->second ? strides[k_out + 1] : 0;
    const int direct2 = o2stride == item;
    uint64_t id[BLOCK];
    _Alignas(64) block_words w;
    _Alignas(64) unsigned char tmp[BLOCK * 16];
    for (int64_t b = start; b < stop; b += BLOCK) {
        const int64_t n = stop - b < BLOCK ? stop - b : BLOCK;
        const uint64_t *ip = NULL;
        if (p->has_ids && strides[0] == 8) {
            ip = (const uint64_t *)(data[0] + b * 8);   /* in place: int64 and uint64 share their bits */
        } else if (p->has_ids) {
            const char *ids = data[0];
            const int64_t is = strides[0];
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)*(const int64_t *)(ids + (b + j) * is);
            ip = id;
        }
        void *dst = direct ? (void *)(out + b * ostride) : (void *)tmp;
        if (p->what == EAGLE_RANDOM_BITS) {
            eagle_philox_interleaved(n, ip, (uint64_t)b, r0, r1, p->key0, p->key1, (uint32_t *)dst);
        } else {
            eagle_philox_block(n, ip, (uint64_t)b, r0, r1, p->key0, p->key1, w.w0, w.w1, w.w2, w.w3);
            switch (p->what * 2 + p->f32) {
            case EAGLE_RANDOM_UNIFORM * 2:
                uniform64(n, w.w0, w.w1, p->a, p->b, p->below, (double *)dst);
                break;
            case EAGLE_RANDOM_UNIFORM * 2 + 1:
                uniform32(n, w.w0, (float)p->a, (float)p->b, (float)p->below, (float *)dst);
                break;
            case EAGLE_RANDOM_NORMAL * 2:
                normal64(n, &w, p->a, p->b, (double *)dst);
                break;
            default:
                normal32(n, &w, p->a, p->b, (float *)dst);
                break;
            }
        }
        if (!direct)
            for (int64_t j = 0; j < n; ++j)
                memcpy(out + (b + j) * ostride, tmp + j * item, (size_t)item);
        if (out2) {
            void *dst2 = direct2 ? (void *)(out2 + b * o2stride) : (void *)tmp;
            if (p->f32)
                uniform32(n, w.w2, (float)p->a, (float)p->b, (float)p->below, (float *)dst2);
            else
                uniform64(n, w.w2, w.w3, p->a, p->b, p->below, (double *)dst2);
            if (!direct2)
                for (int64_t j = 0; j < n; ++j)
                    memcpy(out2 + (b + j) * o2stride, tmp + j * item, (size_t)item);
        }
    }
}
