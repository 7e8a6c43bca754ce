/* dtype.c — element sizes and float32 <-> float16 / bfloat16 conversion. */
#include <string.h>

#include "ropeattn.h"
#include "internal.h"

RA_API size_t ra_dtype_size(ra_dtype dtype)
{
    switch (dtype) {
    case RA_F32: return 4;
    case RA_F16: return 2;
    case RA_BF16: return 2;
    default: return 0;
    }
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

RA_API float ra_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

RA_API uint16_t ra_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

RA_API float ra_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* Inf, NaN */
    if (exp == 0) {                                   /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

RA_API uint16_t ra_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu); /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) {
        /* below 2^-14: subnormal or zero.  Adding 0.5 shifts the value so the
         * float's own rounding (nearest-even) lands on a multiple of 2^-24. */
        float v = bits_f32(a) + 0.5f;
        return sign | (uint16_t)(f32_bits(v) - f32_bits(0.5f));
    }
    uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1u); /* rebias 127->15, round */
    return sign | (uint16_t)(r >> 13);
}

RA_API ra_status ra_convert(void *dst, ra_dtype dst_dtype, const void *src,
                            ra_dtype src_dtype, int64_t n)
{
    if (!dst || !src) return RA_ERR_NULL;
    if (n <= 0) return RA_ERR_SIZE;
    size_t ds = ra_dtype_size(dst_dtype), ss = ra_dtype_size(src_dtype);
    if (!ds || !ss) return RA_ERR_ARGUMENT;
    if ((uint64_t)n > SIZE_MAX / 4) return RA_ERR_OVERFLOW;
    for (int64_t i = 0; i < n; i++)
        ra_store(dst, dst_dtype, i, ra_load(src, src_dtype, i));
    return RA_OK;
}
