/* where= on an add, subtract, multiply or divide (float64, float32; add, subtract,
 * multiply of 64- and 32-bit integers): d[j] = m[j] ? a[j] OP b[j] : d[j] in ONE pass over
 * the operands, chunk by chunk of EAGLE_MASK_CHUNK mask bytes: a chunk all unset is
 * skipped, one all set is computed and stored as the unmasked loop does, a mixed one is
 * computed run by run of set elements or, scattered, computed and selected element by
 * element. No counting pass before it: a chunk's kind is read from its bitmap, made from
 * its 256 mask bytes just before they are used. a and b contiguous or one of them a scalar (step 0), d and m contiguous. IEEE
 * +, -, *, / of the operands' type (one rounding, nothing to contract), integers modulo
 * 2^bits: NumPy's loop's results bit for bit. d may be a or b (in place), never a
 * partial overlap (the node refuses one). */
#ifndef EAGLE_MASKED_ARITH_H
#define EAGLE_MASKED_ARITH_H

#include <stdint.h>
#include <string.h>

#include "mask_scan.h"
#include "simd_clones.h"

#define EAGLE_MASK_CHUNK 256

/* what a call did, chunk by chunk: skipped (all unset), computed whole (all set),
 * mixed and selected element by element, mixed and computed run by run of set elements */
typedef struct {
    intptr_t skipped, whole, mixed, runs;
} eagle_mask_tally;

/* o = f ? v : o on the bits (a select of doubles on byte flags is left scalar by GCC 12) */
#define EAGLE_PICK(U, v, o, f) do { U vi_, oi_; const U k_ = (U)0 - (U)((f) != 0); \
    memcpy(&vi_, &(v), sizeof vi_); memcpy(&oi_, &(o), sizeof oi_); oi_ = (vi_ & k_) | (oi_ & ~k_); \
    memcpy(&(o), &oi_, sizeof oi_); } while (0)

/* the element ops: floats as they are, integers on their unsigned type (wraps, as NumPy's) */
#define EAGLE_FLOAT_OP(T, U, x, OP, y) ((x) OP (y))
#define EAGLE_INT_OP(T, U, x, OP, y) ((T)((U)(x) OP (U)(y)))

/* the straight and the selecting loop over [c, e) */
#define EAGLE_MASKED_WHOLE(T, U, ELEM, A, OP, B, c, e) \
    _Pragma("GCC ivdep") for (intptr_t j = (c); j < (e); ++j) d[j] = ELEM(T, U, A(j), OP, B(j));
#define EAGLE_MASKED_SELECT(T, U, ELEM, A, OP, B, c, e) \
    _Pragma("GCC ivdep") for (intptr_t j = (c); j < (e); ++j) { \
        const T v = ELEM(T, U, A(j), OP, B(j)); T o = d[j]; EAGLE_PICK(U, v, o, m[j]); d[j] = o; }

/* a mixed chunk of at most this many runs of set elements goes run by run */
#define EAGLE_MASK_RUNS 16

/* One pass over the chunks, the element A(j) OP B(j), a chunk's kind read from its
 * bitmap. A mixed chunk of few runs of set elements (sparse, or long runs) goes run by
 * run, each computed as a chunk all set is: what it skips is neither read nor written; a
 * scattered one is selected whole (one vectorised loop, no branch on the mask). */
#define EAGLE_MASKED_CHUNKS(T, U, ELEM, A, OP, B) do { \
    uint64_t bits[4]; \
    for (intptr_t c = 0; c < n; c += EAGLE_MASK_CHUNK) { \
        const intptr_t e = c + EAGLE_MASK_CHUNK < n ? c + EAGLE_MASK_CHUNK : n; \
        eagle_mask_bits(m + c, e - c, bits); \
        if (!(bits[0] | bits[1] | bits[2] | bits[3])) { \
            ++t->skipped; \
        } else if (e - c == EAGLE_MASK_CHUNK && !~(bits[0] & bits[1] & bits[2] & bits[3])) { \
            ++t->whole; \
            EAGLE_MASKED_WHOLE(T, U, ELEM, A, OP, B, c, e) \
        } else if (eagle_mask_bit_runs(bits) > EAGLE_MASK_RUNS) { \
            ++t->mixed; \
            EAGLE_MASKED_SELECT(T, U, ELEM, A, OP, B, c, e) \
        } else { \
            ++t->runs; \
            for (int i = eagle_mask_bit_next(bits, 0, 1); i < e - c; ) { \
                const int r = eagle_mask_bit_next(bits, i, 0); \
                EAGLE_MASKED_WHOLE(T, U, ELEM, A, OP, B, c + i, c + r) \
                i = r < 256 ? eagle_mask_bit_next(bits, r, 1) : 256; \
            } \
        } \
    } } while (0)

#define EAGLE_ARRAY_A(j) a[j]
#define EAGLE_ARRAY_B(j) b[j]
#define EAGLE_SCALAR_A(j) x
#define EAGLE_SCALAR_B(j) y

#define EAGLE_MASKED_ARITH(name, T, U, ELEM, OP) \
EAGLE_SIMD_CLONES static void name(T *d, const T *a, int sa, const T *b, int sb, \
                                   const unsigned char *restrict m, intptr_t n, eagle_mask_tally *t) \
{ if (sa && sb) { \
      EAGLE_MASKED_CHUNKS(T, U, ELEM, EAGLE_ARRAY_A, OP, EAGLE_ARRAY_B); \
  } else if (sa) { const T y = b[0]; \
      EAGLE_MASKED_CHUNKS(T, U, ELEM, EAGLE_ARRAY_A, OP, EAGLE_SCALAR_B); \
  } else { const T x = a[0]; \
      EAGLE_MASKED_CHUNKS(T, U, ELEM, EAGLE_SCALAR_A, OP, EAGLE_ARRAY_B); } }

EAGLE_MASKED_ARITH(eagle_masked_add_f64, double, uint64_t, EAGLE_FLOAT_OP, +)
EAGLE_MASKED_ARITH(eagle_masked_sub_f64, double, uint64_t, EAGLE_FLOAT_OP, -)
EAGLE_MASKED_ARITH(eagle_masked_mul_f64, double, uint64_t, EAGLE_FLOAT_OP, *)
EAGLE_MASKED_ARITH(eagle_masked_div_f64, double, uint64_t, EAGLE_FLOAT_OP, /)
EAGLE_MASKED_ARITH(eagle_masked_add_f32, float, uint32_t, EAGLE_FLOAT_OP, +)
EAGLE_MASKED_ARITH(eagle_masked_sub_f32, float, uint32_t, EAGLE_FLOAT_OP, -)
EAGLE_MASKED_ARITH(eagle_masked_mul_f32, float, uint32_t, EAGLE_FLOAT_OP, *)
EAGLE_MASKED_ARITH(eagle_masked_div_f32, float, uint32_t, EAGLE_FLOAT_OP, /)
EAGLE_MASKED_ARITH(eagle_masked_add_i64, int64_t, uint64_t, EAGLE_INT_OP, +)
EAGLE_MASKED_ARITH(eagle_masked_sub_i64, int64_t, uint64_t, EAGLE_INT_OP, -)
EAGLE_MASKED_ARITH(eagle_masked_mul_i64, int64_t, uint64_t, EAGLE_INT_OP, *)
EAGLE_MASKED_ARITH(eagle_masked_add_i32, int32_t, uint32_t, EAGLE_INT_OP, +)
EAGLE_MASKED_ARITH(eagle_masked_sub_i32, int32_t, uint32_t, EAGLE_INT_OP, -)
EAGLE_MASKED_ARITH(eagle_masked_mul_i32, int32_t, uint32_t, EAGLE_INT_OP, *)

/* op: 1 add, 2 subtract, 3 multiply, 4 divide of float64; + 4 float32, + 8 64-bit
 * integers, + 12 32-bit integers (no divide: NumPy's integer divide is a float loop).
 * Returns 0, or -1 for an op it does not know (nothing written). */
static int eagle_masked_arith(int op, char *d, const char *a, int sa, const char *b, int sb,
                              const unsigned char *m, intptr_t n, eagle_mask_tally *t)
{
    switch (op) {
#define EAGLE_CASE(code, fn, T) \
    case code: fn((T *)d, (const T *)a, sa, (const T *)b, sb, m, n, t); return 0;
    EAGLE_CASE(1, eagle_masked_add_f64, double)
    EAGLE_CASE(2, eagle_masked_sub_f64, double)
    EAGLE_CASE(3, eagle_masked_mul_f64, double)
    EAGLE_CASE(4, eagle_masked_div_f64, double)
    EAGLE_CASE(5, eagle_masked_add_f32, float)
    EAGLE_CASE(6, eagle_masked_sub_f32, float)
    EAGLE_CASE(7, eagle_masked_mul_f32, float)
    EAGLE_CASE(8, eagle_masked_div_f32, float)
    EAGLE_CASE(9, eagle_masked_add_i64, int64_t)
    EAGLE_CASE(10, eagle_masked_sub_i64, int64_t)
    EAGLE_CASE(11, eagle_masked_mul_i64, int64_t)
    EAGLE_CASE(13, eagle_masked_add_i32, int32_t)
    EAGLE_CASE(14, eagle_masked_sub_i32, int32_t)
    EAGLE_CASE(15, eagle_masked_mul_i32, int32_t)
#undef EAGLE_CASE
    default:
        return -1;
    }
}

#endif
