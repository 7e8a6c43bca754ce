/*
 * simd_half.h — float32 lanes rounded to float16 or bfloat16 (internal);
 * simd.h's vload_f16/vload_bf16 are the way back.  Bit for bit what half.h's
 * scalar conversions give: round to nearest, ties to even; subnormals kept;
 * beyond the f16 range -> Inf; NaN stays NaN with the top bits of its
 * payload, quieted.
 *
 *   f16:  F16C's vcvtps2ph (round to nearest even from the immediate, not
 *         MXCSR) on the AVX2 and AVX-512 paths; integer arithmetic on the
 *         128-bit baseline and NEON.
 *   bf16: integer arithmetic everywhere (AVX-512 BF16's vcvtneps2bf16
 *         flushes subnormals to zero, so it is not used), on pairs: 2 RA_W
 *         values as RA_W 32-bit lanes, each holding an even-indexed value
 *         in its low half and the next one in its high half, which widen and
 *         round with lane arithmetic alone (no shuffles).  The rounding
 *         takes NaNs that are quiet with a zero low half — every NaN that
 *         float32 arithmetic makes from widened bf16 values and numbers —
 *         and leaves them as they are, so it needs no NaN case.
 */
#ifndef RA_SIMD_HALF_H
#define RA_SIMD_HALF_H

#include "cpu/simd.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bf16 pairs below assume a little-endian machine"
#endif

typedef uint32_t vu __attribute__((vector_size(RA_W * 4)));

/* Each lane rounded to bfloat16 in the lane's high 16 bits (the low 16 are
 * left over): half.h's ra_half_f32_to_bf16 there, for lanes whose NaNs are
 * quiet with a zero low half (adding at most 0x8000 to that half carries
 * nothing). */
static inline vu vbf16_round(vf v)
{
    vu u = (vu)v;
    return u + 0x7fffu + ((u >> 16) & 1u); /* nearest, ties to even */
}

/* p[0, 2 RA_W) widened: even = p[0], p[2], ...; odd = p[1], p[3], ... */
static inline void vload_bf16_pairs(const uint16_t *p, vf *even, vf *odd)
{
    vu w;
    memcpy(&w, p, sizeof w);
    *even = (vf)(w << 16);
    *odd = (vf)(w & 0xffff0000u);
}

/* The inverse, as the RA_W lanes to store: even[i] rounded in the low half
 * of lane i, odd[i] in its high half (NaNs as vbf16_round takes them). */
static inline vu vbf16_pack(vf even, vf odd)
{
    return (vbf16_round(even) >> 16) | (vbf16_round(odd) & 0xffff0000u);
}

/* p[2i] = even[i], p[2i + 1] = odd[i], rounded. */
static inline void vstore_bf16_pairs(uint16_t *p, vf even, vf odd)
{
    vu w = vbf16_pack(even, odd);
    memcpy(p, &w, sizeof w);
}

#if defined(RA_SIMD_AVX512)
static inline void vstore_f16(uint16_t *p, vf v)
{
    __m256i h = _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256((__m256i *)(void *)p, h);
}
#elif defined(RA_SIMD_AVX2)
static inline void vstore_f16(uint16_t *p, vf v)
{
    __m128i h = _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(void *)p, h);
}
#else
/* Lane-wise select on integer lanes: mask lanes are all ones or zero. */
static inline vu vselect_u(vu mask, vu a, vu b) { return (mask & a) | (~mask & b); }

/* half.h's ra_half_f32_to_f16, a lane at a time; lanes are cut to 16 bits
 * at the end, as its (uint16_t) casts do. */
static inline void vstore_f16(uint16_t *p, vf v)
{
    vu u = (vu)v, sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    vu normal = sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13); /* rebias, round */
    vu tiny = sign | ((vu)((vf)a + 0.5f) - 0x3f000000u); /* below 2^-14: the float add rounds */
    vu nan = sign | 0x7e00u | ((a >> 13) & 0x3ffu);
    vu r = vselect_u((vu)(a < 0x38800000u), tiny, normal);
    r = vselect_u((vu)(a >= 0x477ff000u), sign | 0x7c00u, r);
    r = vselect_u((vu)(a > 0x7f800000u), nan, r);
    vh h = __builtin_convertvector(r, vh);
    memcpy(p, &h, sizeof h);
}
#endif

#endif
