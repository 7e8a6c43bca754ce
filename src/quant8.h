/*
 * quant8.h — the 8-bit KV-cache formats, scalar (internal): the reference
 * quantizers that the append uses and the tests check, and the decoding of
 * one code (inline: ra_load, the decode kernels' tails).
 *
 *   int8 (RA_I8): a row x [n] -> codes c [n] and one scale s = max|x| / 127,
 *     c = round(x / s) to nearest, ties to even, in [-127, 127]; x ~ s c.
 *   fp8 e4m3 (RA_F8E4M3, OCP "e4m3fn"): sign, 4 exponent bits (bias 7), 3
 *     mantissa bits; 0x7f and 0xff are NaN, there is no Inf; largest 448,
 *     smallest normal 2^-6, subnormals m 2^-9.  x ~ s e4m3(x / s).
 */
#ifndef RA_QUANT8_H
#define RA_QUANT8_H

#include <float.h>
#include <stdint.h>

#include "half.h"
#include "ropeattn.h"

/* The value of an e4m3 code (exact in float32). */
static inline float ra_e4m3_to_f32(uint8_t code)
{
    const uint32_t mag = code & 0x7fu, sign = (uint32_t)(code & 0x80u) << 24;
    if (mag == 0x7fu) return ra_bits_f32(sign | 0x7fc00000u); /* NaN */
    if (mag < 8u) return (code & 0x80u ? -(float)mag : (float)mag) * 0x1p-9f; /* subnormal */
    return ra_bits_f32(sign | ((mag << 20) + (120u << 23)));           /* exponent e - 7 + 127 */
}

/* y rounded to an e4m3 code, to nearest, ties to even: finite values
 * beyond +-448 saturate to +-448 (vLLM's SATFINITE conversion); NaN and
 * +-Inf give NaN (0x7f, 0xff by sign). */
uint8_t ra_f32_to_e4m3(float y);

/* RA_OK when every one of the n K and V scales may scale an fp8 cache: a
 * normal float (a subnormal one keeps fewer bits, and reads as 0 where the
 * caller's thread flushes subnormals: DAZ, torch.set_flush_denormal), with
 * 448 s (the largest value stored) finite, as the CLI's --cache-scale;
 * else RA_ERR_ARGUMENT naming the first that is not. */
ra_status ra_e4m3_scales_check(const float *k_scales, const float *v_scales, int64_t n);

/* codes[i] = ra_f32_to_e4m3(x[i] / scale) for i < n (scale finite, > 0);
 * returns whether it stored a NaN code (x held a NaN or an Inf). */
int ra_quantize_e4m3(uint8_t *codes, const float *x, float scale, int64_t n);

/* The int8 codes of a row x [n], and its scale (returned): max|x| / 127,
 * codes x / s rounded to nearest, ties to even, in any rounding mode (s
 * and x / s round as the FP environment says) (the cache's rows, and
 * quantize_q's query rows: decode.c);
 * 0 (and codes 0) for a row of zeros or one whose scale underflows to 0;
 * NaN (and codes 0) for a row that holds a NaN or an Inf. */
float ra_quantize_i8(int8_t *codes, const float *x, int64_t n);

/* ra_quantize_i8 in two steps, for a row held in two parts (a latent
 * cache's [kr | c]): the scale of the row x [n] then x2 [n2] (x2 may be
 * NULL when n2 is 0), and the codes of a part under a scale from it. */
float ra_i8_scale(const float *x, int64_t n, const float *x2, int64_t n2);
void ra_quantize_i8_scaled(int8_t *codes, const float *x, float scale, int64_t n);

#endif
