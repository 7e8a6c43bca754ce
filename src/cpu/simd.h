/*
 * simd.h — the thin per-ISA layer the kernels are written against (internal).
 *
 * One vector type `vf` of RA_W floats (and `vi` of RA_W int32), built on
 * GCC's vector extensions, so the same kernel source compiles to AVX-512
 * (RA_W 16), AVX2 (8), NEON or baseline SSE2 (4).  The file that includes a
 * kernel template defines the ISA macro and is compiled with that ISA's
 * flags; nothing else in the library uses these instructions, and dispatch
 * (dispatch.c) calls a file's kernels only when the CPU and OS support them.
 * Kernels built on this layer are compiled with -ffp-contract=fast so that
 * a * b + c becomes one FMA.
 */
#ifndef RA_SIMD_H
#define RA_SIMD_H

#include <stdint.h>
#include <string.h>

#include "half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#if defined(RA_SIMD_AVX512)
#define RA_W 16
#elif defined(RA_SIMD_AVX2)
#define RA_W 8
#else /* RA_SIMD_NEON or the baseline: 128-bit vectors */
#define RA_W 4
#endif

typedef float vf __attribute__((vector_size(RA_W * 4)));
typedef int32_t vi __attribute__((vector_size(RA_W * 4)));

static inline vf vload(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

typedef uint16_t vh __attribute__((vector_size(RA_W * 2)));

/* RA_W bfloat16 values widened to float32 (exact: the top half of a float). */
static inline vf vload_bf16(const uint16_t *p)
{
#if defined(RA_SIMD_AVX512)
    return (vf)_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16);
#elif defined(RA_SIMD_AVX2)
    return (vf)_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16);
#else
    vh h;
    memcpy(&h, p, sizeof h);
    return (vf)(__builtin_convertvector(h, vi) << 16);
#endif
}

/* RA_W IEEE half values widened to float32 (exact, subnormals included). */
static inline vf vload_f16(const uint16_t *p)
{
#if defined(RA_SIMD_AVX512)
    return (vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
#elif defined(RA_SIMD_AVX2)
    return (vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#else
    vf v;
    for (int i = 0; i < RA_W; i++) v[i] = ra_half_f16_to_f32(p[i]);
    return v;
#endif
}

static inline vf vsplat(float x)
{
    vf v = {x};
    return __builtin_shuffle(v, (vi){0}); /* every lane from lane 0: one broadcast */
}

/* The lane numbers 0, 1, ..., RA_W - 1. */
#if RA_W == 16
static const vi ra_lanes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#elif RA_W == 8
static const vi ra_lanes = {0, 1, 2, 3, 4, 5, 6, 7};
#else
static const vi ra_lanes = {0, 1, 2, 3};
#endif

/* Lane-wise select: mask lanes are all ones (true) or zero. */
static inline vf vselect(vi mask, vf a, vf b) { return (vf)((mask & (vi)a) | (~mask & (vi)b)); }

/* Lane-wise maximum (the ISA's max instruction where there is one). */
static inline vf vmax(vf a, vf b)
{
#if defined(RA_SIMD_AVX512)
    return (vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif defined(RA_SIMD_AVX2)
    return (vf)_mm256_max_ps((__m256)a, (__m256)b);
#elif defined(__aarch64__)
    return (vf)vmaxq_f32((float32x4_t)a, (float32x4_t)b);
#elif defined(__SSE2__)
    return (vf)_mm_max_ps((__m128)a, (__m128)b);
#else
    return vselect(a > b, a, b);
#endif
}

/* Masks for the stages of an in-register transpose (granularity RA_W/2,
 * RA_W/4, ..., 1): lanes taken from the pair (x, y) for the low and the
 * high result. */
#if RA_W == 16
static const vi ra_transpose_masks[4][2] = {
    {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
     {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}},
    {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
     {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
    {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
     {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
    {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
     {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}},
};
#elif RA_W == 8
static const vi ra_transpose_masks[3][2] = {
    {{0, 1, 2, 3, 8, 9, 10, 11},
     {4, 5, 6, 7, 12, 13, 14, 15}},
    {{0, 1, 8, 9, 4, 5, 12, 13},
     {2, 3, 10, 11, 6, 7, 14, 15}},
    {{0, 8, 2, 10, 4, 12, 6, 14},
     {1, 9, 3, 11, 5, 13, 7, 15}},
};
#else
static const vi ra_transpose_masks[2][2] = {
    {{0, 1, 4, 5},
     {2, 3, 6, 7}},
    {{0, 4, 2, 6},
     {1, 5, 3, 7}},
};
#endif

/* Transposes the RA_W x RA_W block held in x[0..RA_W): log2(RA_W) stages
 * that swap the off-diagonal h x h blocks of every 2h x 2h block. */
static inline __attribute__((always_inline)) void vtranspose(vf x[RA_W])
{
    int stage = 0;
#pragma GCC unroll 8
    for (int h = RA_W / 2; h >= 1; h /= 2, stage++)
#pragma GCC unroll 16
        for (int i = 0; i < RA_W; i++) {
            if (i & h) continue;
            vf lo = __builtin_shuffle(x[i], x[i + h], ra_transpose_masks[stage][0]);
            vf hi = __builtin_shuffle(x[i], x[i + h], ra_transpose_masks[stage][1]);
            x[i] = lo;
            x[i + h] = hi;
        }
}

/* Lane i of the result = the sum of x[i]'s lanes, for all RA_W vectors at
 * once: log2(RA_W) stages, each halving the vectors by adding the two
 * halves of a vtranspose stage (half the shuffles of a full transpose). */
static inline __attribute__((always_inline)) vf vsum_lanes(vf x[RA_W])
{
    int stage = 0;
#pragma GCC unroll 8
    for (int n = RA_W; n > 1; n /= 2, stage++)
#pragma GCC unroll 16
        for (int i = 0; i < n / 2; i++)
            x[i] = __builtin_shuffle(x[i], x[i + n / 2], ra_transpose_masks[stage][0]) +
                   __builtin_shuffle(x[i], x[i + n / 2], ra_transpose_masks[stage][1]);
    return x[0];
}

/* Lane i ^ h of the pair swaps for h = RA_W / 2, RA_W / 4, ..., 1: the
 * stages of a tree reduction. */
#if RA_W == 16
static const vi ra_swap_masks[4] = {
    {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7},
    {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},
    {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
    {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14},
};
#elif RA_W == 8
static const vi ra_swap_masks[3] = {
    {4, 5, 6, 7, 0, 1, 2, 3},
    {2, 3, 0, 1, 6, 7, 4, 5},
    {1, 0, 3, 2, 5, 4, 7, 6},
};
#else
static const vi ra_swap_masks[2] = {
    {2, 3, 0, 1},
    {1, 0, 3, 2},
};
#endif

/* The largest lane and the sum of the lanes, in log2(RA_W) steps (a tree:
 * the sum's order is fixed, not left to right). */
static inline float vreduce_max(vf v)
{
    for (int stage = 0; RA_W >> (stage + 1); stage++)
        v = vmax(v, __builtin_shuffle(v, ra_swap_masks[stage]));
    return v[0];
}

static inline float vreduce_add(vf v)
{
    for (int stage = 0; RA_W >> (stage + 1); stage++)
        v += __builtin_shuffle(v, ra_swap_masks[stage]);
    return v[0];
}

/* e^x for a vector, relative error ~2e-7; exactly 0 for x < -87.3 (and -Inf),
 * +Inf above 88.7, NaN stays NaN.  2^n * 2^f with f in [-1/2, 1/2]. */
static inline vf vexp(vf x)
{
    const vf log2e = vsplat(1.44269504088896341f);
    vf t = x * log2e;
    vi tiny = t < vsplat(-126.0f), huge = t > vsplat(128.0f);
    t = vselect(tiny, vsplat(-126.0f), t);
    t = vselect(huge, vsplat(128.0f), t);
    vi ni = __builtin_convertvector(t + vselect(t < vsplat(0.0f), vsplat(-0.5f), vsplat(0.5f)), vi);
    vf n = __builtin_convertvector(ni, vf);            /* t rounded to nearest */
    vf f = (t - n) * vsplat(0.693147180559945309f); /* in [-ln2/2, ln2/2] */
    vf p = vsplat(1.0f / 720.0f);
    p = p * f + vsplat(1.0f / 120.0f);
    p = p * f + vsplat(1.0f / 24.0f);
    p = p * f + vsplat(1.0f / 6.0f);
    p = p * f + vsplat(0.5f);
    p = p * f + vsplat(1.0f);
    p = p * f + vsplat(1.0f);
    vi bits = (ni + 127) << 23; /* 2^n, n in [-126, 128] (128 only where huge) */
    vf r = p * (vf)bits;
    r = vselect(tiny, vsplat(0.0f), r);
    r = vselect(huge, vsplat(__builtin_inff()), r);
    return vselect(x != x, x, r);
}

#endif
