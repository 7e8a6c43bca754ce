/*
 * half.h — float32 <-> float16 / bfloat16 conversion, inline so that the
 * kernels' per-element loads and stores compile to a few instructions
 * (internal; the public ra_f16_to_f32 and friends wrap these).
 * Round to nearest, ties to even; NaN stays NaN; beyond the f16 range -> Inf.
 */
#ifndef RA_HALF_H
#define RA_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ra_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ra_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float ra_half_bf16_to_f32(uint16_t h) { return ra_bits_f32((uint32_t)h << 16); }

static inline uint16_t ra_half_f32_to_bf16(float f)
{
    uint32_t u = ra_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static inline float ra_half_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return ra_bits_f32(sign | 0x7f800000u | (man << 13)); /* Inf, NaN */
    if (exp == 0) {                                   /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return ra_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t ra_half_f32_to_f16(float f)
{
    uint32_t u = ra_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu); /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) {
        /* below 2^-14: subnormal or zero.  Adding 0.5 shifts the value so the
         * float's own rounding (nearest-even) lands on a multiple of 2^-24. */
        float v = ra_bits_f32(a) + 0.5f;
        return sign | (uint16_t)(ra_f32_bits(v) - ra_f32_bits(0.5f));
    }
    uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1u); /* rebias 127 -> 15, round */
    return sign | (uint16_t)(r >> 13);
}

#endif
