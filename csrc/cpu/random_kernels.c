/* eagle's random-node kernels on the CPU; see random_kernels.h and eagle/philox.h.
 *
 * Samples go by blocks of BLOCK: the ids of a block are gathered (or counted
 * from start) into a small buffer, one vectorised loop draws the block (the
 * compiler vectorises Philox, the log and the cos over samples: #pragma omp
 * simd, everything inlined), and a block of a strided output goes through a
 * buffer. On x86-64 ELF with GCC 11+ the block loops are built for x86-64-v4
 * (AVX-512), v3 (AVX2 + FMA) and the baseline, picked at load time (target_clones),
 * so the wheel runs on any x86-64; v4 and v3 vectorise every loop (the baseline's
 * normal loops call libm's fma() and stay scalar).
 * Compiled with -ffp-contract=off: only the explicit fma() calls fuse, so the
 * results are those of philox.h on every machine and on the GPU.
 */
#include "random_kernels.h"

#include <string.h>

#include "eagle/philox.h"

#define BLOCK 512

/* One clone per x86-64 level: a target_clones string is one ISA per comma ("avx2,fma"
 * would be two clones, an AVX2 one without FMA whose fma() calls stop the vectoriser),
 * so the levels are named as arch= (GCC 11+; v4: AVX-512F/BW/DQ/VL, v3: AVX2 + FMA). */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 11 && !defined(EAGLE_NO_CLONES)
#define EAGLE_SIMD_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define EAGLE_SIMD_CLONES
#endif

EAGLE_SIMD_CLONES
static void draw_bits(int64_t n, const uint64_t *restrict id, uint32_t r0, uint32_t r1,
                      uint32_t k0, uint32_t k1, uint32_t *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words w = eagle_philox4x32_10((eagle_u32)id[j], (eagle_u32)(id[j] >> 32),
                                                         r0, r1, k0, k1);
        out[4 * j] = w.w0;
        out[4 * j + 1] = w.w1;
        out[4 * j + 2] = w.w2;
        out[4 * j + 3] = w.w3;
    }
}

EAGLE_SIMD_CLONES
static void draw_uniform64(int64_t n, const uint64_t *restrict id, uint32_t r0, uint32_t r1,
                           uint32_t k0, uint32_t k1, double low, double span, double below,
                           double *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words w = eagle_philox4x32_10((eagle_u32)id[j], (eagle_u32)(id[j] >> 32),
                                                         r0, r1, k0, k1);
        out[j] = eagle_scale_uniform(eagle_u01_53(w.w0, w.w1), low, span, below);
    }
}

EAGLE_SIMD_CLONES
static void draw_uniform32(int64_t n, const uint64_t *restrict id, uint32_t r0, uint32_t r1,
                           uint32_t k0, uint32_t k1, float low, float span, float below,
                           float *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words w = eagle_philox4x32_10((eagle_u32)id[j], (eagle_u32)(id[j] >> 32),
                                                         r0, r1, k0, k1);
        out[j] = eagle_scale_uniform_f(eagle_u01_24(w.w0), low, span, below);
    }
}

EAGLE_SIMD_CLONES
static void draw_normal64(int64_t n, const uint64_t *restrict id, uint32_t r0, uint32_t r1,
                          uint32_t k0, uint32_t k1, double loc, double scale, double *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words w = eagle_philox4x32_10((eagle_u32)id[j], (eagle_u32)(id[j] >> 32),
                                                         r0, r1, k0, k1);
        out[j] = loc + scale * eagle_normal_from_words(w);
    }
}

EAGLE_SIMD_CLONES
static void draw_normal32(int64_t n, const uint64_t *restrict id, uint32_t r0, uint32_t r1,
                          uint32_t k0, uint32_t k1, double loc, double scale, float *restrict out)
{
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
        const eagle_philox_words w = eagle_philox4x32_10((eagle_u32)id[j], (eagle_u32)(id[j] >> 32),
                                                         r0, r1, k0, k1);
        out[j] = (float)(loc + scale * eagle_normal_from_words(w));
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
    uint64_t id[BLOCK];
    _Alignas(64) unsigned char tmp[BLOCK * 16];
    for (int64_t b = start; b < stop; b += BLOCK) {
        const int64_t n = stop - b < BLOCK ? stop - b : BLOCK;
        if (p->has_ids) {
            const char *ids = data[0];
            const int64_t is = strides[0];
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)*(const int64_t *)(ids + (b + j) * is);
        } else {
            for (int64_t j = 0; j < n; ++j)
                id[j] = (uint64_t)(b + j);
        }
        void *dst = direct ? (void *)(out + b * ostride) : (void *)tmp;
        switch (p->what * 2 + p->f32) {
        case EAGLE_RANDOM_BITS * 2:
        case EAGLE_RANDOM_BITS * 2 + 1:
            draw_bits(n, id, r0, r1, p->key0, p->key1, (uint32_t *)dst);
            break;
        case EAGLE_RANDOM_UNIFORM * 2:
            draw_uniform64(n, id, r0, r1, p->key0, p->key1, p->a, p->b, p->below, (double *)dst);
            break;
        case EAGLE_RANDOM_UNIFORM * 2 + 1:
            draw_uniform32(n, id, r0, r1, p->key0, p->key1, (float)p->a, (float)p->b,
                           (float)p->below, (float *)dst);
            break;
        case EAGLE_RANDOM_NORMAL * 2:
            draw_normal64(n, id, r0, r1, p->key0, p->key1, p->a, p->b, (double *)dst);
            break;
        default:
            draw_normal32(n, id, r0, r1, p->key0, p->key1, p->a, p->b, (float *)dst);
            break;
        }
        if (!direct)
            for (int64_t j = 0; j < n; ++j)
                memcpy(out + (b + j) * ostride, tmp + j * item, (size_t)item);
    }
}
