/* Philox4x32-10 and the transforms of eagle's random nodes, shared by the CPU
 * kernels (csrc/cpu/random_kernels.c), the CUDA kernel (eagle/cuda/kernels/
 * random.cu, compiled by NVRTC) and the tests' CUDA C emulator: one source, so
 * CPU and GPU give the same bits.
 *
 * Philox4x32-10 (Salmon et al., SC'11; Random123's philox4x32, cuRAND's
 * Philox4_32_10): a pure function of a 128-bit counter and a 64-bit key.
 * eagle's counter of sample i at replay r is (id & 0xffffffff, id >> 32,
 * r & 0xffffffff, r >> 32), id = i or ids[i]; the key words are
 * (key & 0xffffffff, key >> 32).
 *
 * Transforms of the four output words w0..w3 of a sample:
 *   uniform float64: u = ((w1 << 32 | w0) >> 11) * 2**-53, in [0, 1);
 *   uniform float32: u = (w0 >> 8) * 2**-24;
 *     scaled as low + (high - low) * u in the output's type, and a result that
 *     rounds up to high is replaced by the largest value below high;
 *   normal: Box-Muller, z = sqrt(-2 log u1) cos(2 pi u2) with
 *     u1 = (((w1 << 32 | w0) >> 11) + 1) * 2**-53 in (0, 1] and
 *     u2 = ((w3 << 32 | w2) >> 11) * 2**-53 in [0, 1), computed in double with
 *     the polynomial log and cos below; out = loc + scale * z in double, then
 *     rounded once to the output's type (float32 or float64).
 * The log and cos are fdlibm's (musl's) kernels written with explicit fma():
 * within 1-2 ulp of the correctly rounded values, and the same bits wherever
 * fma, sqrt and IEEE double arithmetic are exact (every CPU and GPU eagle
 * runs on); the file must be compiled without FP contraction
 * (-ffp-contract=off on the host; the device path uses __dmul_rn/__dadd_rn).
 */
#ifndef EAGLE_PHILOX_H
#define EAGLE_PHILOX_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define EAGLE_RNG_DEVICE 1
#define EAGLE_RNG_FN static __host__ __device__ __forceinline__
#elif defined(EAGLE_EMULATION)
#define EAGLE_RNG_FN static inline
#else
#define EAGLE_RNG_FN static inline __attribute__((always_inline))
#endif

#ifndef EAGLE_RNG_DEVICE
#include <math.h>
#include <string.h>
#endif

typedef unsigned int eagle_u32;
typedef unsigned long long eagle_u64;
typedef long long eagle_i64;

#define EAGLE_PHILOX_M0 0xD2511F53u
#define EAGLE_PHILOX_M1 0xCD9E8D57u
#define EAGLE_PHILOX_W0 0x9E3779B9u
#define EAGLE_PHILOX_W1 0xBB67AE85u

/* powers of two as decimal literals (exact): hexadecimal floats are C++17, and NVRTC
 * compiles random.cu as C++11 */
#define EAGLE_TWO_P52 4503599627370496.0
#define EAGLE_TWO_P51 2251799813685248.0
#define EAGLE_TWO_P21 2097152.0
#define EAGLE_TWO_M53 1.1102230246251565404236316680908203125e-16
#define EAGLE_TWO_M24F 5.9604644775390625e-08f

/* the four output words of one Philox call */
typedef struct eagle_philox_words {
    eagle_u32 w0, w1, w2, w3;
} eagle_philox_words;

/* One round on words held in 64-bit variables: only the low 32 bits of c0..c3 and
 * k0, k1 count (the upper bits may hold garbage; each multiply takes the low 32
 * bits, the outputs are truncated at the end). On the host this keeps every word
 * of a sample in one 64-bit vector lane, so the vectoriser multiplies with
 * vpmuludq (32 x 32 -> 64 bits, the upper half of the lane ignored) and needs no
 * shuffles between 32- and 64-bit lanes (the cast to 32 bits, not a mask, is what
 * lets GCC drop the masking); on the GPU the product is __umulhi and a 32-bit
 * multiply. */
#ifdef EAGLE_RNG_DEVICE
#define EAGLE_WIDE_MUL(a, m) \
    (((eagle_u64)__umulhi((eagle_u32)(a), (m)) << 32) | (eagle_u32)((eagle_u32)(a) * (m)))
#else
#define EAGLE_WIDE_MUL(a, m) ((eagle_u64)(eagle_u32)(a) * (m))
#endif
#define EAGLE_PHILOX_ROUND(c0, c1, c2, c3, k0, k1)                     \
    do {                                                               \
        const eagle_u64 p0_ = EAGLE_WIDE_MUL(c0, EAGLE_PHILOX_M0);     \
        const eagle_u64 p1_ = EAGLE_WIDE_MUL(c2, EAGLE_PHILOX_M1);     \
        (c0) = (p1_ >> 32) ^ (c1) ^ (k0);                              \
        (c1) = p1_;                                                    \
        (c2) = (p0_ >> 32) ^ (c3) ^ (k1);                              \
        (c3) = p0_;                                                    \
    } while (0)

#define EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1)             \
    do {                                                               \
        (k0) += EAGLE_PHILOX_W0;                                       \
        (k1) += EAGLE_PHILOX_W1;                                       \
        EAGLE_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);                    \
    } while (0)

/* philox4x32_10(counter (c0, c1, c2, c3), key (k0, k1)); the ten rounds are written
 * out (no loop: a loop in the body of a sample loop stops the vectoriser) */
EAGLE_RNG_FN eagle_philox_words eagle_philox4x32_10(eagle_u32 w0, eagle_u32 w1, eagle_u32 w2,
                                                    eagle_u32 w3, eagle_u32 key0, eagle_u32 key1)
{
    eagle_u64 c0 = w0, c1 = w1, c2 = w2, c3 = w3, k0 = key0, k1 = key1;
    EAGLE_PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    EAGLE_PHILOX_BUMPED_ROUND(c0, c1, c2, c3, k0, k1);
    eagle_philox_words w = {(eagle_u32)c0, (eagle_u32)c1, (eagle_u32)c2, (eagle_u32)c3};
    return w;
}

#ifdef EAGLE_RNG_DEVICE
#define EAGLE_MUL(a, b) __dmul_rn((a), (b))
#define EAGLE_ADD(a, b) __dadd_rn((a), (b))
#define EAGLE_SUB(a, b) __dsub_rn((a), (b))
EAGLE_RNG_FN double eagle_bits_double(eagle_u64 b) { return __longlong_as_double((long long)b); }
EAGLE_RNG_FN eagle_u64 eagle_double_bits(double d) { return (eagle_u64)__double_as_longlong(d); }
#else
#define EAGLE_MUL(a, b) ((a) * (b))
#define EAGLE_ADD(a, b) ((a) + (b))
#define EAGLE_SUB(a, b) ((a) - (b))
EAGLE_RNG_FN double eagle_bits_double(eagle_u64 b) { double d; memcpy(&d, &b, sizeof d); return d; }
EAGLE_RNG_FN eagle_u64 eagle_double_bits(double d) { eagle_u64 b; memcpy(&b, &d, sizeof b); return b; }
#endif

/* A 32-bit word or any integer below 2**52 as a double, exactly. The host writes it
 * with integer operations (x86 before AVX-512DQ has no vector conversion from
 * 64-bit integers); the device converts: the same value. */
#ifdef EAGLE_RNG_DEVICE
EAGLE_RNG_FN double eagle_small_to_double(eagle_u64 x) { return (double)x; }
#else
EAGLE_RNG_FN double eagle_small_to_double(eagle_u64 x)
{
    return eagle_bits_double(x | 0x4330000000000000ULL) - EAGLE_TWO_P52;
}
#endif

/* (hi << 32 | lo) >> 11, the 53 top bits, as a double (exact) */
EAGLE_RNG_FN double eagle_top53(eagle_u32 lo, eagle_u32 hi)
{
    return EAGLE_ADD(EAGLE_MUL(eagle_small_to_double(hi), EAGLE_TWO_P21), eagle_small_to_double(lo >> 11));
}

/* [0, 1) from 53 bits of (hi << 32 | lo) */
EAGLE_RNG_FN double eagle_u01_53(eagle_u32 lo, eagle_u32 hi)
{
    return EAGLE_MUL(eagle_top53(lo, hi), EAGLE_TWO_M53);
}

/* float32 arithmetic of the device path as explicit PTX: CuPy compiles every module with
 * -ftz=true, under which the compiler's own float32 instructions (.ftz) flush subnormal
 * operands and results to 0 where the CPU keeps them; written instructions keep IEEE. */
#if defined(EAGLE_RNG_DEVICE) && defined(__CUDA_ARCH__)
EAGLE_RNG_FN float eagle_f32_mul(float a, float b)
{
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
EAGLE_RNG_FN float eagle_f32_add(float a, float b)
{
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
/* a double rounded once to float32 */
EAGLE_RNG_FN float eagle_f32_from_double(double d)
{
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(d));
    return r;
}
/* a > b as 1 or 0 */
EAGLE_RNG_FN int eagle_f32_gt(float a, float b)
{
    int r;
    asm("{\n\t.reg .pred p;\n\tsetp.gt.f32 p, %1, %2;\n\tselp.s32 %0, 1, 0, p;\n\t}" : "=r"(r) : "f"(a), "f"(b));
    return r;
}
#elif defined(EAGLE_EMU_F32_EXACT)
/* the tests' CUDA C emulator modelling -ftz=true: its float flushes, explicit PTX does not */
EAGLE_RNG_FN float eagle_f32_mul(float a, float b) { return EAGLE_EMU_F32_EXACT(a, *, b); }
EAGLE_RNG_FN float eagle_f32_add(float a, float b) { return EAGLE_EMU_F32_EXACT(a, +, b); }
EAGLE_RNG_FN float eagle_f32_from_double(double d) { return EAGLE_EMU_F32_RAW(d); }
EAGLE_RNG_FN int eagle_f32_gt(float a, float b) { return EAGLE_EMU_F32_GT(a, b); }
#else
EAGLE_RNG_FN float eagle_f32_mul(float a, float b) { return a * b; }
EAGLE_RNG_FN float eagle_f32_add(float a, float b) { return a + b; }
EAGLE_RNG_FN float eagle_f32_from_double(double d) { return (float)d; }
EAGLE_RNG_FN int eagle_f32_gt(float a, float b) { return a > b; }
#endif

/* [0, 1) from 24 bits of w */
EAGLE_RNG_FN float eagle_u01_24(eagle_u32 w)
{
    return eagle_f32_mul((float)(w >> 8), EAGLE_TWO_M24F);
}

/* musl's log constants (fdlibm's e_log.c): ln 2 in two parts, the polynomial's
 * coefficients, and the bits of sqrt(2)/2 (also used by csrc/cpu/exponential_avx512.h,
 * which must compute what eagle_log_01 does) */
#define EAGLE_LOG_LN2_HI 6.93147180369123816490e-01
#define EAGLE_LOG_LN2_LO 1.90821492927058770002e-10
#define EAGLE_LOG_LG1 6.666666666666735130e-01
#define EAGLE_LOG_LG2 3.999999999940941908e-01
#define EAGLE_LOG_LG3 2.857142874366239149e-01
#define EAGLE_LOG_LG4 2.222219843214978396e-01
#define EAGLE_LOG_LG5 1.818357216161805012e-01
#define EAGLE_LOG_LG6 1.531383769920937332e-01
#define EAGLE_LOG_LG7 1.479819860511658591e-01
#define EAGLE_LOG_HALF_SQRT2_BITS 0x3fe6a09e667f3bcdULL

/* log(x) for x in [2**-53, 1] (no zero, negative, subnormal, inf or nan): musl's
 * log (fdlibm), branch-free, with fma() in the polynomial. */
EAGLE_RNG_FN double eagle_log_01(double x)
{
    const double ln2_hi = EAGLE_LOG_LN2_HI, ln2_lo = EAGLE_LOG_LN2_LO;
    const double Lg1 = EAGLE_LOG_LG1, Lg2 = EAGLE_LOG_LG2, Lg3 = EAGLE_LOG_LG3, Lg4 = EAGLE_LOG_LG4,
                 Lg5 = EAGLE_LOG_LG5, Lg6 = EAGLE_LOG_LG6, Lg7 = EAGLE_LOG_LG7;
    /* x = 2**k m with m in [sqrt(2)/2, sqrt(2)) */
    eagle_u64 ix = eagle_double_bits(x) + (0x3ff0000000000000ULL - EAGLE_LOG_HALF_SQRT2_BITS);
    const double k = EAGLE_SUB(eagle_small_to_double(ix >> 52), 1023.0);   /* the exponent */
    ix = (ix & 0x000fffffffffffffULL) + EAGLE_LOG_HALF_SQRT2_BITS;
    const double f = EAGLE_SUB(eagle_bits_double(ix), 1.0);
    const double hfsq = EAGLE_MUL(EAGLE_MUL(0.5, f), f);
    const double s = f / EAGLE_ADD(2.0, f);
    const double z = EAGLE_MUL(s, s);
    const double w = EAGLE_MUL(z, z);
    const double t1 = EAGLE_MUL(w, fma(w, fma(w, Lg6, Lg4), Lg2));
    const double t2 = EAGLE_MUL(z, fma(w, fma(w, fma(w, Lg7, Lg5), Lg3), Lg1));
    const double R = EAGLE_ADD(t2, t1);
    /* k ln2_hi - ((hfsq - (s (hfsq + R) + k ln2_lo)) - f) */
    const double inner = EAGLE_ADD(EAGLE_MUL(s, EAGLE_ADD(hfsq, R)), EAGLE_MUL(k, ln2_lo));
    return EAGLE_SUB(EAGLE_MUL(k, ln2_hi), EAGLE_SUB(EAGLE_SUB(hfsq, inner), f));
}

/* cos(2 pi t) for t = m 2**-53, m the 53 top bits of (w3 << 32 | w2): reduced exactly
 * in integers to x = 2 pi (t - q/4), q = floor(4 t + 1/2) in 0..4, |x| <= pi/4
 * (64-bit integer lanes, no conversion to 32-bit ints: the vectoriser keeps one lane
 * width), then one of musl's __sin / __cos kernels: both are a degree-6 polynomial
 * in z = x**2 evaluated the same way, so the lane picks its coefficients first
 * (sin for odd q, cos for even q) and evaluates one polynomial. */
EAGLE_RNG_FN double eagle_cos_2pi_top53(eagle_u64 m)
{
    const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                 S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                 S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
    const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                 C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                 C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
    const double two_pi_hi = 6.28318530717958623200e+00, two_pi_lo = 2.44929359829470635446e-16;
    const eagle_u64 q = (m + (1ULL << 50)) >> 51;                      /* 0 .. 4 */
    /* t - q/4 = (m - q 2**51) 2**-53, |m - q 2**51| <= 2**50: exact as a double */
    const double r = EAGLE_MUL(EAGLE_SUB(eagle_small_to_double(m + (1ULL << 51) - (q << 51)), EAGLE_TWO_P51),
                               EAGLE_TWO_M53);
    const double x = fma(r, two_pi_hi, EAGLE_MUL(r, two_pi_lo));
    const double z = EAGLE_MUL(x, x);
    /* cos(x + q pi/2): q = 0, 4: cos x; 1: -sin x; 2: -cos x; 3: sin x */
    const int odd = (int)(q & 1);
    const double K1 = odd ? S1 : C1, K2 = odd ? S2 : C2, K3 = odd ? S3 : C3,
                 K4 = odd ? S4 : C4, K5 = odd ? S5 : C5, K6 = odd ? S6 : C6;
    const double P = fma(z, fma(z, fma(z, fma(z, fma(z, K6, K5), K4), K3), K2), K1);
    /* sin x = x + x z P_S(z) */
    const double sn = fma(EAGLE_MUL(x, z), P, x);
    /* cos x = w + (((1 - w) - hz) + z (z P_C(z))), w = 1 - z/2 */
    const double hz = EAGLE_MUL(0.5, z);
    const double w = EAGLE_SUB(1.0, hz);
    const double cs = EAGLE_ADD(w, EAGLE_ADD(EAGLE_SUB(EAGLE_SUB(1.0, w), hz), EAGLE_MUL(z, EAGLE_MUL(z, P))));
    const double v = odd ? sn : cs;
    const double sign = ((q + 1) & 2) ? -1.0 : 1.0;
    return EAGLE_MUL(sign, v);
}

/* One standard normal from a sample's four words (see the file's comment). */
EAGLE_RNG_FN double eagle_normal_from_words(eagle_philox_words w)
{
    const double u1 = EAGLE_MUL(EAGLE_ADD(eagle_top53(w.w0, w.w1), 1.0), EAGLE_TWO_M53);
    const eagle_u64 m2 = ((eagle_u64)w.w3 << 21) | (w.w2 >> 11);
    return EAGLE_MUL(sqrt(EAGLE_MUL(-2.0, eagle_log_01(u1))), eagle_cos_2pi_top53(m2));
}

/* low + (high - low) u in double, below high */
EAGLE_RNG_FN double eagle_scale_uniform(double u, double low, double span, double below_high)
{
    const double v = EAGLE_ADD(low, EAGLE_MUL(span, u));
    return v > below_high ? below_high : v;
}

/* low + (high - low) u in float32, below high */
EAGLE_RNG_FN float eagle_scale_uniform_f(float u, float low, float span, float below_high)
{
    const float v = eagle_f32_add(low, eagle_f32_mul(span, u));
    return eagle_f32_gt(v, below_high) ? below_high : v;
}

#endif
