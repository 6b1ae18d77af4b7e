/* Reductions and tallies over fixed sample blocks; see reduce_kernels.h. */
#include "reduce_kernels.h"

#include <stdbool.h>
#include <string.h>

#define B EAGLE_REDUCE_BLOCK

/* The combinations, on two values of the accumulator type. Integers wrap (computed on
 * the unsigned type, as NumPy's loops do); maximum / minimum propagate NaN as NumPy's. */
#define ADD_I(U, a, v) ((U)((U)(a) + (U)(v)))
#define MUL_I(U, a, v) ((U)((uint64_t)(U)(a) * (uint64_t)(U)(v)))
#define ADD_F(a, v) ((a) + (v))
#define MUL_F(a, v) ((a) * (v))
#define MAX_F(a, v) (((a) >= (v) || (a) != (a)) ? (a) : (v))
#define MIN_F(a, v) (((a) <= (v) || (a) != (a)) ? (a) : (v))
#define MAX_I(a, v) ((a) >= (v) ? (a) : (v))
#define MIN_I(a, v) ((a) <= (v) ? (a) : (v))
#define LOR(a, v) ((a) || (v))
#define LAND(a, v) ((a) && (v))
#define BOR(a, v) ((a) | (v))
#define BAND(a, v) ((a) & (v))
#define BXOR(a, v) ((a) ^ (v))

/* One op on one type: the block partials (kernel) and their combination (finish). */
#define DEFINE_REDUCE(SUF, T, OPN, COMB)                                                        \
static void reduce_##SUF##_##OPN(const eagle_reduce_params *p, int64_t start, int64_t stop,     \
                                 char **data, const int64_t *strides)                          \
{                                                                                               \
    const int64_t row = p->row, xs = p->x_step, ws = p->w_step;                                 \
    T ident;                                                                                    \
    memcpy(&ident, &p->identity, sizeof(T));                                                    \
    T *part = (T *)p->partials;                                                                 \
    const char *x = data[0];                                                                    \
    const int64_t sx = strides[0];                                                              \
    const char *w = p->has_where ? data[1] : NULL;                                              \
    const int64_t sw = p->has_where ? strides[1] : 0;                                           \
    for (int64_t b0 = start; b0 < stop; b0 += B) {                                              \
        const int64_t b1 = stop - b0 < B ? stop : b0 + B;                                       \
        T *acc = part + (b0 / B) * row;                                                         \
        if (row == 1 && w == NULL && !p->src_bool) {                                            \
            T lane[8];                                                                          \
            for (int l = 0; l < 8; ++l)                                                         \
                lane[l] = ident;                                                                \
            int64_t i = b0;                                                                     \
            for (; i + 8 <= b1; i += 8)                                                         \
                for (int l = 0; l < 8; ++l) {                                                   \
                    const T a = lane[l], v = *(const T *)(x + (i + l) * sx);                    \
                    lane[l] = (T)(COMB(a, v));                                                  \
                }                                                                               \
            for (; i < b1; ++i) {                                                               \
                const T a = lane[(i - b0) & 7], v = *(const T *)(x + i * sx);                   \
                lane[(i - b0) & 7] = (T)(COMB(a, v));                                           \
            }                                                                                   \
            for (int h = 1; h < 8; h *= 2)                                                      \
                for (int l = 0; l < 8; l += 2 * h) {                                            \
                    const T a = lane[l], v = lane[l + h];                                       \
                    lane[l] = (T)(COMB(a, v));                                                  \
                }                                                                               \
            acc[0] = lane[0];                                                                   \
            continue;                                                                           \
        }                                                                                       \
        if (row == 1 && p->src_bool && p->op == EAGLE_RED_ADD && sx == 1 && (w == NULL || sw == 1)) { \
            /* a count of set flags (where set): exact, vectorised on bytes */                  \
            const unsigned char *xb = (const unsigned char *)x, *wb = (const unsigned char *)w;  \
            uint32_t c = 0;                                                                     \
            if (wb == NULL)                                                                     \
                for (int64_t i = b0; i < b1; ++i)                                               \
                    c += xb[i] != 0;                                                            \
            else                                                                                \
                for (int64_t i = b0; i < b1; ++i)                                               \
                    c += (xb[i] != 0) & (wb[i] != 0);                                           \
            acc[0] = (T)(COMB(ident, (T)c));                                                    \
            continue;                                                                           \
        }                                                                                       \
        for (int64_t j = 0; j < row; ++j)                                                       \
            acc[j] = ident;                                                                     \
        for (int64_t i = b0; i < b1; ++i) {                                                     \
            const char *xi = x + i * sx;                                                        \
            const char *wi = w != NULL ? w + i * sw : NULL;                                     \
            for (int64_t j = 0; j < row; ++j) {                                                 \
                if (wi != NULL && !*(const bool *)(wi + j * ws))                                \
                    continue;                                                                   \
                const T a = acc[j];                                                             \
                const T v = p->src_bool ? (T)(*(const bool *)(xi + j * xs))                     \
                                        : *(const T *)(xi + j * xs);                            \
                acc[j] = (T)(COMB(a, v));                                                       \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
static int finish_##SUF##_##OPN(eagle_reduce_params *p, int64_t n, char *out)                   \
{                                                                                               \
    const int64_t row = p->row, nb = n / B + (n % B != 0);                                      \
    T *part = (T *)p->partials;                                                                 \
    T r0, init;                                                                                 \
    memcpy(&r0, &p->identity, sizeof(T));                                                       \
    memcpy(&init, &p->initial, sizeof(T));                                                      \
    if (nb == 0 && !p->has_initial && p->op != EAGLE_RED_MAX && p->op != EAGLE_RED_MIN) {       \
        for (int64_t j = 0; j < row; ++j)                                                       \
            *(T *)(out + j * p->out_step) = r0;                                                 \
        return 0;                                                                               \
    }                                                                                           \
    if (nb == 0 && !p->has_initial)                                                             \
        return -1;                                                                              \
    for (int64_t h = 1; h < nb; h *= 2)                                                         \
        for (int64_t b = 0; b + h < nb; b += 2 * h)                                             \
            for (int64_t j = 0; j < row; ++j) {                                                 \
                const T a = part[b * row + j], v = part[(b + h) * row + j];                     \
                part[b * row + j] = (T)(COMB(a, v));                                            \
            }                                                                                   \
    for (int64_t j = 0; j < row; ++j) {                                                         \
        T r = nb ? part[j] : init;                                                              \
        if (nb && p->has_initial) {                                                             \
            const T a = init, v = r;                                                            \
            r = (T)(COMB(a, v));                                                                \
        }                                                                                       \
        *(T *)(out + j * p->out_step) = r;                                                      \
    }                                                                                           \
    return 0;                                                                                   \
}

#define ADD_U8(a, v) ADD_I(uint8_t, a, v)
#define ADD_U16(a, v) ADD_I(uint16_t, a, v)
#define ADD_U32(a, v) ADD_I(uint32_t, a, v)
#define ADD_U64(a, v) ADD_I(uint64_t, a, v)
#define MUL_U8(a, v) MUL_I(uint8_t, a, v)
#define MUL_U16(a, v) MUL_I(uint16_t, a, v)
#define MUL_U32(a, v) MUL_I(uint32_t, a, v)
#define MUL_U64(a, v) MUL_I(uint64_t, a, v)

/* The (op, combiner) lists of each kind of type, expanded by DEFINE (DEFINE_REDUCE or
 * DEFINE_AT) for a type SUF, T: the four ops reductions and tallies share (add, mul,
 * max, min, in that order), then those of reductions alone (logical, bitwise). */
#define OPS_INT(DEFINE, SUF, T, W)                             \
    DEFINE(SUF, T, add, ADD_U##W)                              \
    DEFINE(SUF, T, mul, MUL_U##W)                              \
    DEFINE(SUF, T, max, MAX_I)                                 \
    DEFINE(SUF, T, min, MIN_I)
#define OPS_FLOAT(DEFINE, SUF, T)                              \
    DEFINE(SUF, T, add, ADD_F)                                 \
    DEFINE(SUF, T, mul, MUL_F)                                 \
    DEFINE(SUF, T, max, MAX_F)                                 \
    DEFINE(SUF, T, min, MIN_F)
/* bool: add is or, multiply is and (NumPy's bool loops) */
#define OPS_BOOL(DEFINE)                                       \
    DEFINE(b, bool, add, LOR)                                  \
    DEFINE(b, bool, mul, LAND)                                 \
    DEFINE(b, bool, max, LOR)                                  \
    DEFINE(b, bool, min, LAND)
#define OPS_LOGICAL(DEFINE, SUF, T)                            \
    DEFINE(SUF, T, lor, LOR)                                   \
    DEFINE(SUF, T, land, LAND)
#define OPS_BITWISE(DEFINE, SUF, T)                            \
    DEFINE(SUF, T, bor, BOR)                                   \
    DEFINE(SUF, T, band, BAND)                                 \
    DEFINE(SUF, T, bxor, BXOR)

/* every op of an integer type */
#define DEFINE_INT(SUF, T, W)                                  \
    OPS_INT(DEFINE_REDUCE, SUF, T, W)                          \
    OPS_LOGICAL(DEFINE_REDUCE, SUF, T)                         \
    OPS_BITWISE(DEFINE_REDUCE, SUF, T)

#define DEFINE_FLOAT(SUF, T)                                   \
    OPS_FLOAT(DEFINE_REDUCE, SUF, T)                           \
    OPS_LOGICAL(DEFINE_REDUCE, SUF, T)

OPS_BOOL(DEFINE_REDUCE)
OPS_LOGICAL(DEFINE_REDUCE, b, bool)
OPS_BITWISE(DEFINE_REDUCE, b, bool)
DEFINE_INT(i8, int8_t, 8)
DEFINE_INT(i16, int16_t, 16)
DEFINE_INT(i32, int32_t, 32)
DEFINE_INT(i64, int64_t, 64)
DEFINE_INT(u8, uint8_t, 8)
DEFINE_INT(u16, uint16_t, 16)
DEFINE_INT(u32, uint32_t, 32)
DEFINE_INT(u64, uint64_t, 64)
DEFINE_FLOAT(f32, float)
DEFINE_FLOAT(f64, double)

typedef void (*reduce_fn)(const eagle_reduce_params *, int64_t, int64_t, char **, const int64_t *);
typedef int (*finish_fn)(eagle_reduce_params *, int64_t, char *);

#define ROW_INT(SUF) {reduce_##SUF##_add, reduce_##SUF##_mul, reduce_##SUF##_max, reduce_##SUF##_min,     \
                      reduce_##SUF##_lor, reduce_##SUF##_land, reduce_##SUF##_bor, reduce_##SUF##_band,   \
                      reduce_##SUF##_bxor}
#define ROW_FLOAT(SUF) {reduce_##SUF##_add, reduce_##SUF##_mul, reduce_##SUF##_max, reduce_##SUF##_min,   \
                        reduce_##SUF##_lor, reduce_##SUF##_land, NULL, NULL, NULL}
#define FROW_INT(SUF) {finish_##SUF##_add, finish_##SUF##_mul, finish_##SUF##_max, finish_##SUF##_min,    \
                       finish_##SUF##_lor, finish_##SUF##_land, finish_##SUF##_bor, finish_##SUF##_band,  \
                       finish_##SUF##_bxor}
#define FROW_FLOAT(SUF) {finish_##SUF##_add, finish_##SUF##_mul, finish_##SUF##_max, finish_##SUF##_min,  \
                         finish_##SUF##_lor, finish_##SUF##_land, NULL, NULL, NULL}

static const reduce_fn REDUCE[EAGLE_T_N][EAGLE_RED_N_OPS] = {
    ROW_INT(b), ROW_INT(i8), ROW_INT(i16), ROW_INT(i32), ROW_INT(i64), ROW_INT(u8), ROW_INT(u16),
    ROW_INT(u32), ROW_INT(u64), ROW_FLOAT(f32), ROW_FLOAT(f64)};
static const finish_fn FINISH[EAGLE_T_N][EAGLE_RED_N_OPS] = {
    FROW_INT(b), FROW_INT(i8), FROW_INT(i16), FROW_INT(i32), FROW_INT(i64), FROW_INT(u8), FROW_INT(u16),
    FROW_INT(u32), FROW_INT(u64), FROW_FLOAT(f32), FROW_FLOAT(f64)};

int eagle_reduce_supported(int32_t acc, int32_t op)
{
    return acc >= 0 && acc < EAGLE_T_N && op >= 0 && op < EAGLE_RED_N_OPS && REDUCE[acc][op] != NULL;
}

void eagle_reduce_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data)
{
    const eagle_reduce_params *p = (const eagle_reduce_params *)user_data;
    REDUCE[p->acc][p->op](p, start, stop, data, strides);
}

void eagle_reduce_finish(int64_t start, int64_t n, char **data, const int64_t *strides, void *user_data)
{
    (void)start;
    (void)strides;
    eagle_reduce_params *p = (eagle_reduce_params *)user_data;
    char *out = data[p->has_where ? 2 : 1];
    if (FINISH[p->acc][p->op](p, n, out) < 0)
        __atomic_store_n(&p->empty_error, 1, __ATOMIC_RELAXED);
}

/* ---- tallies ------------------------------------------------------------------ */

static inline int64_t load_index(int32_t type, const char *q)
{
    switch (type) {
    case EAGLE_T_I8: return *(const int8_t *)q;
    case EAGLE_T_I16: return *(const int16_t *)q;
    case EAGLE_T_I32: return *(const int32_t *)q;
    case EAGLE_T_U8: return *(const uint8_t *)q;
    case EAGLE_T_U16: return *(const uint16_t *)q;
    case EAGLE_T_U32: return *(const uint32_t *)q;
    /* uint64 as NumPy's ufunc.at casts it to intp: 2**64 - 1 is -1, the last cell */
    default: return *(const int64_t *)q;
    }
}

#define DEFINE_AT(SUF, T, OPN, COMB)                                                            \
static void at_##SUF##_##OPN(eagle_at_params *p, int64_t start, int64_t stop, char **data,      \
                             const int64_t *strides)                                            \
{                                                                                               \
    T wconst;                                                                                   \
    memcpy(&wconst, &p->weight, sizeof(T));                                                     \
    const char *idx = data[0], *wt = p->has_weights ? data[1] : NULL;                           \
    const int64_t si = strides[0], sw = p->has_weights ? strides[1] : 0;                        \
    for (int64_t b0 = start; b0 < stop; b0 += B) {                                              \
        const int64_t b1 = stop - b0 < B ? stop : b0 + B, blk = b0 / B;                         \
        int64_t *cell = p->cell + blk * B;                                                      \
        T *val = (T *)p->value + blk * B;                                                       \
        int32_t k = 0;                                                                          \
        for (int64_t i = b0; i < b1; ++i) {                                                     \
            int64_t c = load_index(p->index_type, idx + i * si);                                \
            if (c < 0)                                                                          \
                c += p->cells;                                                                  \
            if (c < 0 || c >= p->cells) {                                                       \
                if (p->bad_at[blk] == 0) {                                                      \
                    p->bad_at[blk] = i + 1;                                                     \
                    p->bad_index[blk] = load_index(p->index_type, idx + i * si);                \
                }                                                                               \
                __atomic_store_n(&p->has_bad, 1, __ATOMIC_RELAXED);                             \
                continue;                                                                       \
            }                                                                                   \
            const T v = wt != NULL ? *(const T *)(wt + i * sw) : wconst;                        \
            int32_t m = 0;                                                                      \
            while (m < k && cell[m] != c)                                                       \
                ++m;                                                                            \
            if (m == k) {                                                                       \
                cell[k] = c;                                                                    \
                val[k++] = v;                                                                   \
            } else {                                                                            \
                const T a = val[m];                                                             \
                val[m] = (T)(COMB(a, v));                                                       \
            }                                                                                   \
        }                                                                                       \
        p->count[blk] = k;                                                                      \
    }                                                                                           \
}                                                                                               \
                                                                                                \
static void at_finish_##SUF##_##OPN(eagle_at_params *p, int64_t n, char *tally)                 \
{                                                                                               \
    const int64_t nb = n / B + (n % B != 0);                                                    \
    for (int64_t b = 0; b < nb; ++b) {                                                          \
        const int64_t *cell = p->cell + b * B;                                                  \
        const T *val = (const T *)p->value + b * B;                                             \
        for (int32_t m = 0; m < p->count[b]; ++m) {                                             \
            T *t = (T *)(tally + cell[m] * p->tally_step);                                      \
            const T a = *t, v = val[m];                                                         \
            *t = (T)(COMB(a, v));                                                               \
        }                                                                                       \
    }                                                                                           \
}

#define DEFINE_AT_INT(SUF, T, W) OPS_INT(DEFINE_AT, SUF, T, W)
#define DEFINE_AT_FLOAT(SUF, T) OPS_FLOAT(DEFINE_AT, SUF, T)

OPS_BOOL(DEFINE_AT)
DEFINE_AT_INT(i8, int8_t, 8)
DEFINE_AT_INT(i16, int16_t, 16)
DEFINE_AT_INT(i32, int32_t, 32)
DEFINE_AT_INT(i64, int64_t, 64)
DEFINE_AT_INT(u8, uint8_t, 8)
DEFINE_AT_INT(u16, uint16_t, 16)
DEFINE_AT_INT(u32, uint32_t, 32)
DEFINE_AT_INT(u64, uint64_t, 64)
DEFINE_AT_FLOAT(f32, float)
DEFINE_AT_FLOAT(f64, double)

typedef void (*at_fn)(eagle_at_params *, int64_t, int64_t, char **, const int64_t *);
typedef void (*at_finish_fn)(eagle_at_params *, int64_t, char *);
#define AROW(SUF) {at_##SUF##_add, at_##SUF##_mul, at_##SUF##_max, at_##SUF##_min}
#define AFROW(SUF) {at_finish_##SUF##_add, at_finish_##SUF##_mul, at_finish_##SUF##_max, at_finish_##SUF##_min}
static const at_fn AT[EAGLE_T_N][4] = {AROW(b), AROW(i8), AROW(i16), AROW(i32), AROW(i64), AROW(u8),
                                       AROW(u16), AROW(u32), AROW(u64), AROW(f32), AROW(f64)};
static const at_finish_fn AT_FINISH[EAGLE_T_N][4] = {
    AFROW(b), AFROW(i8), AFROW(i16), AFROW(i32), AFROW(i64), AFROW(u8), AFROW(u16), AFROW(u32),
    AFROW(u64), AFROW(f32), AFROW(f64)};

void eagle_at_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data)
{
    eagle_at_params *p = (eagle_at_params *)user_data;
    AT[p->acc][p->op](p, start, stop, data, strides);
}

void eagle_at_finish(int64_t start, int64_t n, char **data, const int64_t *strides, void *user_data)
{
    (void)start;
    (void)strides;
    eagle_at_params *p = (eagle_at_params *)user_data;
    AT_FINISH[p->acc][p->op](p, n, data[p->has_weights ? 2 : 1]);
}

/* ---- nodes on arrays that are not per-sample ------------------------------------- */

void eagle_nothing_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                          void *user_data)
{
    (void)start, (void)stop, (void)data, (void)strides, (void)user_data;
}

void eagle_whole_finish(int64_t start, int64_t n, char **data, const int64_t *strides, void *user_data)
{
    (void)start, (void)n;
    const eagle_whole_params *p = (const eagle_whole_params *)user_data;
    p->kernel(0, p->n, data, strides, p->user_data);
}
