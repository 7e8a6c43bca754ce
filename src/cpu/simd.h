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

/* Shuffles, as __builtin_shufflevector (clang, GCC 12) takes them: one
 * constant index per result lane, 0 .. RA_W - 1 for x's lanes and
 * RA_W .. 2 RA_W - 1 for y's.  RA_LANES(f, k) is the list f(0, k), f(1, k),
 * ..., f(RA_W - 1, k), so RA_SHUFFLE(x, y, f, k) gives lane i of the result
 * from lane f(i, k) of the pair; f and k are constant expressions, which is
 * why the stages of the transposes and reductions below are written out per
 * constant rather than looped over. */
#if RA_W == 16
#define RA_LANES(f, k)                                                                      \
    f(0, k), f(1, k), f(2, k), f(3, k), f(4, k), f(5, k), f(6, k), f(7, k), f(8, k), f(9, k), \
        f(10, k), f(11, k), f(12, k), f(13, k), f(14, k), f(15, k)
#elif RA_W == 8
#define RA_LANES(f, k) f(0, k), f(1, k), f(2, k), f(3, k), f(4, k), f(5, k), f(6, k), f(7, k)
#else
#define RA_LANES(f, k) f(0, k), f(1, k), f(2, k), f(3, k)
#endif
#define RA_SHUFFLE(x, y, f, k) __builtin_shufflevector(x, y, RA_LANES(f, k))

#define RA_LANE_CONST(i, k) (k)        /* every lane from lane k */
#define RA_LANE_SWAP(i, h) ((i) ^ (h)) /* the h-lane halves of each 2h lanes swapped */
/* Interleaving x and y: the low result x0 y0 x1 y1 ..., the high result
 * the same from lane RA_W / 2 on (k unused). */
#define RA_LANE_ZIP_LOW(i, k) ((i) & 1 ? RA_W + (i) / 2 : (i) / 2)
#define RA_LANE_ZIP_HIGH(i, k) ((i) & 1 ? RA_W + RA_W / 2 + (i) / 2 : RA_W / 2 + (i) / 2)

static inline vf vsplat(float x)
{
    vf v = {x};
    return RA_SHUFFLE(v, v, RA_LANE_CONST, 0); /* one broadcast */
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

#if defined(RA_SIMD_AVX512) && defined(__AVX512VNNI__)
/* 64 bytes as 16 lanes of 4 (vpdpbusd's operands). */
static inline vi vload_bytes(const void *p)
{
    vi v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Every byte b. */
static inline vi vbytes_splat(uint8_t b)
{
    vi v;
    memset(&v, b, sizeof v);
    return v;
}

/* acc + in each lane the sum of its 4 products of unsigned bytes of a and
 * signed bytes of b (vpdpbusd: exact, without saturation). */
static inline vi vdot_u8_s8(vi acc, vi a, vi b)
{
    return (vi)_mm512_dpbusd_epi32((__m512i)acc, (__m512i)a, (__m512i)b);
}
#endif

typedef int8_t vi8 __attribute__((vector_size(RA_W)));
typedef uint8_t vu8 __attribute__((vector_size(RA_W)));
typedef uint32_t vu __attribute__((vector_size(RA_W * 4)));

/* RA_W int8 codes widened to float32 (exact). */
static inline vf vload_i8(const int8_t *p)
{
#if defined(RA_SIMD_AVX512)
    return (vf)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
#elif defined(RA_SIMD_AVX2)
    return (vf)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
#else
    vi8 b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(__builtin_convertvector(b, vi), vf);
#endif
}

/* RA_W bytes zero-extended to int32. */
static inline vi vload_u8(const uint8_t *p)
{
#if defined(RA_SIMD_AVX512)
    return (vi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
#elif defined(RA_SIMD_AVX2)
    return (vi)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
#else
    vu8 b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, vi);
#endif
}

/* RA_W fp8 e4m3 codes widened to float32 and scaled by 2^-8 (exact:
 * quant8.h's ra_e4m3_to_f32 lane by lane, times 2^-8), for codes that
 * are not NaN: a NaN code (0x7f, 0xff) gives a finite number (480 2^-8 in
 * magnitude).  The decode kernels fold the 2^8 into the caches' scales
 * (docs/perf/2026-12-03-decode8.md) and read a cache that may hold NaN
 * codes with vload_e4m3_low_nan.  On AVX2 and AVX-512, through IEEE
 * half: a code's bits moved into a half's (sign to bit 15, exponent and
 * mantissa shifted up by 7) are the code's value times 2^-8, subnormals
 * included (both formats' subnormals are m 2^(1 - bias) with the biases
 * 8 apart), and F16C widens them.  Elsewhere with integer arithmetic: a
 * normal code's exponent and mantissa shifted into a float32's and
 * rebiased (+120 - 8), a subnormal's m 2^-17, then the sign. */
static inline vf vload_e4m3_low(const uint8_t *p)
{
#if defined(RA_SIMD_AVX512)
    const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); /* the sign
                                                                   in bits 7 .. 15 */
    return (vf)_mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(w, 7),
                                                _mm256_set1_epi16((short)0xbfff)));
#elif defined(RA_SIMD_AVX2)
    const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p));
    return (vf)_mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16((short)0xbfff)));
#else
    const vi c = vload_u8(p), mag = c & 0x7f;
    vf v = (vf)((mag << 20) + (112 << 23));
    v = vselect(mag < 8, __builtin_convertvector(mag, vf) * vsplat(0x1p-17f), v);
    return (vf)((vu)v | (((vu)c & 0x80u) << 24));
#endif
}

/* vload_e4m3_low for any codes: a NaN code gives a quiet NaN of its sign
 * (sign | 0x7fc00000, as ra_e4m3_to_f32).  The check (a compare and a
 * branch per vector) made an fp8 decode step 1.14-1.15 times as long on
 * AVX-512, so the kernels use it only for a cache that stored a NaN code
 * (docs/perf/2026-12-03-decode8.md). */
static inline vf vload_e4m3_low_nan(const uint8_t *p)
{
    const vf v = vload_e4m3_low(p);
#if defined(RA_SIMD_AVX512)
    const __m128i codes = _mm_loadu_si128((const __m128i *)p);
#elif defined(RA_SIMD_AVX2)
    const __m128i codes = _mm_loadl_epi64((const __m128i *)p);
#endif
#if defined(RA_SIMD_AVX512) || defined(RA_SIMD_AVX2)
    const __m128i nan = _mm_set1_epi8(0x7f);
    if (__builtin_expect(!(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(codes, nan), nan)) &
                           ((1 << RA_W) - 1)), 1))
        return v; /* no NaN code: the usual case */
#endif
    const vi c = vload_u8(p);
    return vselect((c & 0x7f) == 0x7f, (vf)(((vu)c & 0x80u) << 24 | 0x7fc00000u), v);
}

/* vload_e4m3_low of p[0, RA_W) into *lo and of p[RA_W, 2 RA_W) into *hi.
 * On AVX-512 the 32 codes go through one 512-bit shift and mask and one
 * extract: 8 operations where two vload_e4m3_low take 10 (the widening to
 * float of 16 halves, vcvtph2ps, is two). */
static inline void vload_e4m3_low2(const uint8_t *p, vf *lo, vf *hi)
{
#if defined(RA_SIMD_AVX512)
    const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(w, 7), _mm512_set1_epi16((short)0xbfff));
    *lo = (vf)_mm512_cvtph_ps(_mm512_castsi512_si256(h));
    *hi = (vf)_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
#else
    *lo = vload_e4m3_low(p);
    *hi = vload_e4m3_low(p + RA_W);
#endif
}

/* vload_e4m3_low2 for any codes: vload_e4m3_low_nan's NaNs, one check for
 * the 2 RA_W codes. */
static inline void vload_e4m3_low2_nan(const uint8_t *p, vf *lo, vf *hi)
{
#if defined(RA_SIMD_AVX512)
    vload_e4m3_low2(p, lo, hi);
    const __m256i codes = _mm256_loadu_si256((const __m256i *)p), nan = _mm256_set1_epi8(0x7f);
    if (__builtin_expect(!_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(codes, nan), nan)),
                         1))
        return; /* no NaN code: the usual case */
    const vi c0 = vload_u8(p), c1 = vload_u8(p + RA_W);
    *lo = vselect((c0 & 0x7f) == 0x7f, (vf)(((vu)c0 & 0x80u) << 24 | 0x7fc00000u), *lo);
    *hi = vselect((c1 & 0x7f) == 0x7f, (vf)(((vu)c1 & 0x80u) << 24 | 0x7fc00000u), *hi);
#else
    *lo = vload_e4m3_low_nan(p);
    *hi = vload_e4m3_low_nan(p + RA_W);
#endif
}

/* m(h, a) for h = RA_W / 2, RA_W / 4, ..., 1: the stages of the transposes
 * and reductions below, in that order. */
#if RA_W == 16
#define RA_STAGES(m, a) m(8, a) m(4, a) m(2, a) m(1, a)
#elif RA_W == 8
#define RA_STAGES(m, a) m(4, a) m(2, a) m(1, a)
#else
#define RA_STAGES(m, a) m(2, a) m(1, a)
#endif

/* Stage h of a transpose, from the pair (x, y): within each block of 2h
 * lanes, the low result takes x's low h lanes then y's low h lanes, the
 * high result x's high h lanes then y's high h lanes.  For RA_W 8, h 2:
 * low = x0 x1 y0 y1 x4 x5 y4 y5, high = x2 x3 y2 y3 x6 x7 y6 y7. */
#define RA_LANE_LOW(i, h) ((i) & (h) ? RA_W + (i) - (h) : (i))
#define RA_LANE_HIGH(i, h) ((i) & (h) ? RA_W + (i) : (i) + (h))

/* vtranspose's stage h: x[i], x[i + h] for each i with bit h clear become
 * the low and the high result of the pair, which swaps the off-diagonal
 * h x h blocks of every 2h x 2h block. */
#define RA_TRANSPOSE_STAGE(h, x)                                                  \
    _Pragma("GCC unroll 16") for (int i = 0; i < RA_W; i++) {                     \
        if (i & (h)) continue;                                                    \
        vf lo = RA_SHUFFLE(x[i], x[i + (h)], RA_LANE_LOW, h);                     \
        vf hi = RA_SHUFFLE(x[i], x[i + (h)], RA_LANE_HIGH, h);                    \
        x[i] = lo;                                                                \
        x[i + (h)] = hi;                                                          \
    }

/* Transposes the RA_W x RA_W block held in x[0..RA_W): log2(RA_W) stages. */
static inline __attribute__((always_inline)) void vtranspose(vf x[RA_W])
{
    RA_STAGES(RA_TRANSPOSE_STAGE, x)
}

/* The lanes of x with bit h clear and of y with it set (a blend), and the
 * others: x's lane i + h, y's lane i - h. */
#define RA_LANE_MIX(i, h) ((i) & (h) ? RA_W + (i) : (i))
#define RA_LANE_CROSS(i, h) ((i) & (h) ? RA_W + (i) - (h) : (i) + (h))

/* vsum_lanes's stage h: the 2h vectors x[0, 2h) halved into x[0, h) by
 * adding the low and the high result of each pair (x[i], x[i + h]), as
 * the blend plus the other lanes: one shuffle and a blend where the low
 * and the high result take two shuffles (the same sums, each lane's two
 * terms in either order).  On one core of an Intel Xeon (family 6 model
 * 167) an int8 cache's scores loop (4 rows x 4 keys, D 128, in L1) took
 * 0.95 of the time (docs/perf/2026-12-07-decode.md, twelfth session). */
#define RA_SUM_STAGE(h, x)                                                        \
    _Pragma("GCC unroll 16") for (int i = 0; i < (h); i++)                        \
        x[i] = RA_SHUFFLE(x[i], x[i + (h)], RA_LANE_MIX, h) +                     \
               RA_SHUFFLE(x[i], x[i + (h)], RA_LANE_CROSS, h);

/* Lane i of the result = the sum of x[i]'s lanes, for all RA_W vectors at
 * once: log2(RA_W) stages, each halving the vectors by adding the two
 * halves of a vtranspose stage (half the shuffles of a full transpose). */
static inline __attribute__((always_inline)) vf vsum_lanes(vf x[RA_W])
{
    RA_STAGES(RA_SUM_STAGE, x)
    return x[0];
}

/* The largest lane and the sum of the lanes, in log2(RA_W) steps, each
 * against v with its lanes i ^ h (a tree: the sum's order is fixed, not
 * left to right). */
#define RA_MAX_STAGE(h, v) v = vmax(v, RA_SHUFFLE(v, v, RA_LANE_SWAP, h));
#define RA_ADD_STAGE(h, v) v += RA_SHUFFLE(v, v, RA_LANE_SWAP, h);

static inline float vreduce_max(vf v)
{
    RA_STAGES(RA_MAX_STAGE, v)
    return v[0];
}

static inline float vreduce_add(vf v)
{
    RA_STAGES(RA_ADD_STAGE, v)
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

/* tanh(x) for a vector, relative error under 4e-7 (x subnormal too): the 13/6 rational
 * approximation Eigen's ptanh uses (odd numerator, even denominator in
 * x^2), on x clamped to +-7.905 where it reaches +-1; NaN stays NaN.  The
 * soft-cap's c tanh(s / c) (Gemma 2). */
static inline vf vtanh(vf x)
{
    const vf clamp = vsplat(7.90531110763549805f);
    x = vselect(x > clamp, clamp, x); /* comparisons with NaN are false */
    x = vselect(x < -clamp, -clamp, x);
    const vf x2 = x * x;
    vf p = vsplat(-2.76076847742355e-16f);
    p = p * x2 + vsplat(2.00018790482477e-13f);
    p = p * x2 + vsplat(-8.60467152213735e-11f);
    p = p * x2 + vsplat(5.12229709037114e-08f);
    p = p * x2 + vsplat(1.48572235717979e-05f);
    p = p * x2 + vsplat(6.37261928875436e-04f);
    p = p * x2 + vsplat(4.89352455891786e-03f);
    vf q = vsplat(1.19825839466702e-06f);
    q = q * x2 + vsplat(1.18534705686654e-04f);
    q = q * x2 + vsplat(2.26843463243900e-03f);
    q = q * x2 + vsplat(4.89352518554385e-03f);
    return x * (p / q); /* not (x p) / q: x p may be subnormal */
}

#endif
