/* The kernels of eagle's random nodes on CUDA arrays (eagle/cuda/random_node.py):
 * Philox4x32-10 and the transforms of csrc/include/eagle/philox.h, the header the
 * CPU kernels (csrc/cpu/random_kernels.c) are built from, so both give the same
 * bits. Compiled by CuPy (NVRTC, -I eagle's include directory, --fmad=false) on a
 * GPU and by the tests' CUDA C emulator on the CPU (tests/doubles/cuda_emulation.h:
 * there the header takes its host path, the CPU's own code).
 * eagle_distribution runs the samplers of csrc/include/eagle/distributions.h (the
 * header the CPU's csrc/cpu/distribution_kernels.c is built from), one sample per
 * thread (a block that consecutive samples share is drawn by each of their threads),
 * the same integers and float bits as the CPU.
 * Every parameter is 8 bytes (pointer, long long, double).
 */
#include "eagle/philox.h"
#include "eagle/distributions.h"

typedef long long i64;

/* One thread per sample i < n (n: patched by set_logical_size; size, when not NULL:
 * the graph's device logical size, set by a compaction). replay: the graph's device
 * replay counter (g.replays), which eagle_replay_step advances at the end of every
 * replay. what: 0 random_bits (uint32 x 4 per sample), 1 uniform (a: low, b: high -
 * low, below: the largest value below high), 2 normal (a: loc, b: scale); f32: a
 * float32 output. ids: NULL (id = i) or int64 ids, istride bytes apart; ostride: the
 * bytes between two samples of out; out2: NULL, or a uniform node's second output
 * (words 2 and 3 of the same block), o2stride bytes apart. */
extern "C" __global__ void eagle_random(char *out, i64 ostride, const char *ids, i64 istride,
                                        i64 what, i64 f32, i64 key, double a, double b,
                                        double below, const unsigned long long *replay,
                                        char *out2, i64 o2stride, const i64 *size, i64 n) {
    const i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i >= n || (size && i >= *size)) return;
    const eagle_u64 r = *replay;
    const eagle_u64 id = ids ? (eagle_u64)*(const i64 *)(ids + i * istride) : (eagle_u64)i;
    const eagle_u64 k = (eagle_u64)key;
    const eagle_philox_words w = eagle_philox4x32_10((eagle_u32)id, (eagle_u32)(id >> 32),
                                                     (eagle_u32)r, (eagle_u32)(r >> 32),
                                                     (eagle_u32)k, (eagle_u32)(k >> 32));
    char *o = out + i * ostride;
    if (what == 0) {
        eagle_u32 *q = (eagle_u32 *)o;
        q[0] = w.w0;
        q[1] = w.w1;
        q[2] = w.w2;
        q[3] = w.w3;
    } else if (what == 1) {
        if (f32)
            *(float *)o = eagle_scale_uniform_f(eagle_u01_24(w.w0), eagle_f32_from_double(a),
                                                 eagle_f32_from_double(b), eagle_f32_from_double(below));
        else
            *(double *)o = eagle_scale_uniform(eagle_u01_53(w.w0, w.w1), a, b, below);
        if (out2 && f32)
            *(float *)(out2 + i * o2stride) =
                eagle_scale_uniform_f(eagle_u01_24(w.w2), eagle_f32_from_double(a),
                                      eagle_f32_from_double(b), eagle_f32_from_double(below));
        else if (out2)
            *(double *)(out2 + i * o2stride) = eagle_scale_uniform(eagle_u01_53(w.w2, w.w3), a, b, below);
    } else {
        const double z = EAGLE_ADD(a, EAGLE_MUL(b, eagle_normal_from_words(w)));
        if (f32)
            *(float *)o = eagle_f32_from_double(z);
        else
            *(double *)o = z;
    }
}

/* One thread per sample i < n (n and size as eagle_random's). what: 0 exponential
 * (d0: scale), 1 poisson (d0: lam), 2 binomial (i0: n, d1: p), 3 integers (i0: low,
 * i1: high); q0 / q1: NULL, or the per-sample parameter 0 / 1 (float64 scale, lam, p;
 * int64 n, low, high), q0stride / q1stride bytes apart. out_type: 0 float64,
 * 1 float32, 2 int64, 3 int32. A sample's bad per-sample parameter gives the marker of
 * distributions.h (nan, -1, the type's smallest value). */
extern "C" __global__ void eagle_distribution(char *out, i64 ostride, const char *ids, i64 istride,
                                              i64 what, i64 out_type, i64 key, const char *q0,
                                              i64 q0stride, const char *q1, i64 q1stride, i64 i0,
                                              i64 i1, double d0, double d1,
                                              const unsigned long long *replay, const i64 *size,
                                              i64 n) {
    const i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i >= n || (size && i >= *size)) return;
    const eagle_u64 r = *replay;
    const eagle_u64 id = ids ? (eagle_u64)*(const i64 *)(ids + i * istride) : (eagle_u64)i;
    const eagle_u32 k0 = (eagle_u32)(eagle_u64)key, k1 = (eagle_u32)((eagle_u64)key >> 32);
    char *o = out + i * ostride;
    if (what == 0) {
        const double scale = q0 ? *(const double *)(q0 + i * q0stride) : d0;
        const double x = eagle_exponential_sample(scale, id, r, k0, k1);
        if (out_type == 1)
            *(float *)o = eagle_f32_from_double(x);
        else
            *(double *)o = x;
        return;
    }
    eagle_i64 v;
    if (what == 1) {
        v = eagle_poisson_sample(q0 ? *(const double *)(q0 + i * q0stride) : d0, id, r, k0, k1);
    } else if (what == 2) {
        v = eagle_binomial_sample(q0 ? *(const i64 *)(q0 + i * q0stride) : i0,
                                  q1 ? *(const double *)(q1 + i * q1stride) : d1, id, r, k0, k1);
    } else {
        v = eagle_integers_value(q0 ? *(const i64 *)(q0 + i * q0stride) : i0,
                                 q1 ? *(const i64 *)(q1 + i * q1stride) : i1, out_type == 3, id, r,
                                 k0, k1);
    }
    if (out_type == 3)
        *(int *)o = (int)v;
    else
        *(i64 *)o = v;
}

/* The last node of every replay of a graph with random nodes: the next replay draws
 * replay r + 1. One thread. */
extern "C" __global__ void eagle_replay_step(unsigned long long *replay) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *replay += 1;
}
