/*
 * quant8.c — the 8-bit KV-cache quantizers, scalar: int8 with a scale per
 * row, fp8 e4m3 with a given scale (quant8.h says the formats).  The
 * append calls them row by row (a token's row of one kv head).
 */
#include <float.h>
#include <math.h>

#include "internal.h"
#include "quant8.h"

/* v rounded to the nearest integer, ties to even, for |v| < 2^22: adding
 * 1.5 * 2^23 leaves no fraction bits, so the add rounds (in the default
 * rounding mode) and the subtraction is exact. */
static inline float round_small(float v)
{
    return (v + 0x1.8p23f) - 0x1.8p23f;
}

/* v rounded to the nearest integer, ties to even, for |v| <= 127, whatever
 * the rounding mode (the scale and the quotient v still round as the
 * caller's FP environment says): the truncation and v less it are exact.
 * No branch: the loop vectorizes. */
static inline float round_even(float v)
{
    const int32_t i = (int32_t)v;
    const float r = v - (float)i;
    const int32_t odd = i & 1, up = (r > 0.5f) | ((r == 0.5f) & odd);
    return (float)(i + up - ((r < -0.5f) | ((r == -0.5f) & odd)));
}

uint8_t ra_f32_to_e4m3(float y)
{
    const uint8_t sign = (uint8_t)(ra_f32_bits(y) >> 24 & 0x80u);
    const float a = fabsf(y);
    if (!(a <= FLT_MAX)) return sign | 0x7fu; /* NaN, Inf */
    if (a >= 448.0f) return sign | 0x7eu;     /* saturate: 448 = 1.75 * 2^8 */
    if (a < 0x1p-6f) /* subnormal codes m 2^-9, m in 0 .. 8 (8: the smallest normal, 0x08) */
        return sign | (uint8_t)round_small(a * 512.0f);
    /* keep the top 3 of 23 mantissa bits, ties to even (a carry goes into
     * the exponent), then rebias the exponent from 127 to 7 */
    uint32_t bits = ra_f32_bits(a);
    bits += 0x7ffffu + (bits >> 20 & 1u);
    return sign | (uint8_t)((bits >> 20) - (120u << 3));
}

int ra_quantize_e4m3(uint8_t *codes, const float *x, float scale, int64_t n)
{
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        float y = x[i] / scale; /* a finite x whose quotient overflows (scale < 1) saturates */
        codes[i] = ra_f32_to_e4m3(isinf(y) && isfinite(x[i]) ? copysignf(448.0f, x[i]) : y);
        nan |= (codes[i] & 0x7f) == 0x7f;
    }
    return nan;
}

float ra_i8_scale(const float *x, int64_t n, const float *x2, int64_t n2)
{
    float amax = 0.0f;
    int finite = 1;
    for (int part = 0; part < 2; part++)
        for (int64_t i = 0, m = part ? n2 : n; i < m; i++) {
            float a = fabsf(part ? x2[i] : x[i]);
            finite &= a <= FLT_MAX;
            amax = a > amax ? a : amax;
        }
    return finite ? amax / 127.0f : NAN;
}

void ra_quantize_i8_scaled(int8_t *codes, const float *x, float scale, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        /* |x / s| <= 127 but for rounding, or a scale below FLT_MIN */
        float c = scale > 0.0f ? x[i] / scale : 0.0f;
        codes[i] = (int8_t)round_even(c > 127.0f ? 127.0f : c < -127.0f ? -127.0f : c);
    }
}

float ra_quantize_i8(int8_t *codes, const float *x, int64_t n)
{
    const float scale = ra_i8_scale(x, n, NULL, 0);
    ra_quantize_i8_scaled(codes, x, scale, n);
    return scale;
}

static int scale_ok(float s)
{
    return s >= FLT_MIN && s <= FLT_MAX / 448.0f;
}

ra_status ra_e4m3_scales_check(const float *k_scales, const float *v_scales, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const int k_ok = scale_ok(k_scales[i]);
        if (!k_ok || !scale_ok(v_scales[i]))
            return ra_fail(RA_ERR_ARGUMENT, "%s[%lld] is %g: must be a normal float (>= "
                           "FLT_MIN) and at most FLT_MAX / 448", k_ok ? "v_scales" : "k_scales",
                           (long long)i, (double)(k_ok ? v_scales[i] : k_scales[i]));
    }
    return RA_OK;
}
