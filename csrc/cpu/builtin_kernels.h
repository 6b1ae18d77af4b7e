/* The contiguous fast paths of eagle's built-in kernels (eagle/kernels.pyx).
 *
 * Each takes unit-stride double arrays and is written so the compiler
 * vectorises it (restrict, #pragma omp simd; the extension is built with -O3
 * and -fopenmp-simd). The callers take these paths only when every array is
 * contiguous and the outputs either are an input exactly (in place: element i
 * is read before it is written, also in a vector) or do not meet the inputs
 * at all; anything else runs the generic strided loop in order.
 *
 * Built with -ffp-contract=off: no fused multiply-adds, so results stay
 * bitwise those of the strided loops and of NumPy's (mul then add, each rounded).
 */
#ifndef EAGLE_BUILTIN_KERNELS_H
#define EAGLE_BUILTIN_KERNELS_H

#include <stdint.h>

/* whether [a, a + n) and [b, b + n) of doubles meet other than as the same range */
static inline int eagle_partly_overlap(const double *a, const double *b, int64_t n)
{
    return a != b && a < b + n && b < a + n;
}

static inline void eagle_fill_contig(int64_t n, double v, double *restrict y)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        y[i] = v;
}

static inline void eagle_copy_contig(int64_t n, const double *restrict x, double *restrict y)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        y[i] = x[i];
}

/* y = a x; x and y disjoint */
static inline void eagle_scale_contig(int64_t n, double a, const double *restrict x, double *restrict y)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        y[i] = a * x[i];
}

/* x = a x, in place */
static inline void eagle_scale_inplace(int64_t n, double a, double *restrict x)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        x[i] = a * x[i];
}

/* y += a x; x and y disjoint */
static inline void eagle_axpy_contig(int64_t n, double a, const double *restrict x, double *restrict y)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        y[i] += a * x[i];
}

/* x += a x, in place */
static inline void eagle_axpy_inplace(int64_t n, double a, double *restrict x)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        x[i] += a * x[i];
}

/* out = a + b; out disjoint from a and b (a and b may be the same) */
static inline void eagle_add_contig(int64_t n, const double *a, const double *b, double *restrict out)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        out[i] = a[i] + b[i];
}

/* out = a + b with out == a or out == b (in place): same index read then written */
static inline void eagle_add_inplace(int64_t n, const double *a, const double *b, double *out)
{
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        out[i] = a[i] + b[i];
}

/* Horner: y[i] = c[0] + x (c[1] + x (... c[degree])). A block of samples at
 * once: the per-sample chains of multiply-adds are independent, so the block
 * gives the vector units several chains to overlap (one chain is bound by the
 * latency of a multiply plus an add per coefficient). x may equal y. */
#define EAGLE_POLY_BLOCK 32
static inline void eagle_polynomial_contig(int64_t n, const double *x, double *y,
                                           const double *restrict c, int64_t degree)
{
    int64_t i = 0;
    for (; i + EAGLE_POLY_BLOCK <= n; i += EAGLE_POLY_BLOCK) {
        double acc[EAGLE_POLY_BLOCK], xb[EAGLE_POLY_BLOCK];
#pragma omp simd
        for (int j = 0; j < EAGLE_POLY_BLOCK; ++j) {
            xb[j] = x[i + j];
            acc[j] = c[degree];
        }
        for (int64_t k = degree - 1; k >= 0; --k) {
            const double ck = c[k];
#pragma omp simd
            for (int j = 0; j < EAGLE_POLY_BLOCK; ++j)
                acc[j] = acc[j] * xb[j] + ck;
        }
#pragma omp simd
        for (int j = 0; j < EAGLE_POLY_BLOCK; ++j)
            y[i + j] = acc[j];
    }
    for (; i < n; ++i) {
        const double xi = x[i];
        double acc = c[degree];
        for (int64_t k = degree - 1; k >= 0; --k)
            acc = acc * xi + c[k];
        y[i] = acc;
    }
}

#endif
