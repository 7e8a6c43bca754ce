/*
 * fp8.c — block-FP8 weights (DeepSeek-V3's release, Qwen3-*-FP8), dequantized
 * at load as transformers' dequantize path does
 * (integrations/finegrained_fp8.py, FineGrainedDequantize._dequantize_one):
 *
 *   W [out, in] of F8_E4M3 codes, S = weight_scale_inv [ceil(out / bo), ceil(in / bi)]
 *   W'[r][c] = dtype( float32(e4m3(W[r][c])) * float32(S[r / bo][c / bi]) )
 *
 * one float32 product (e4m3 values are exact in float32), rounded to the
 * model's dtype (config.json's torch_dtype: the parameter the weight loads
 * into), to nearest, ties to even.  Blocks on the right and bottom edges
 * may be partial (out, in not multiples of bo, bi), as DeepSeek's own
 * weight_dequant kernel and transformers' FP8Linear index them (r / bo).
 * docs/DESIGN.md, decision 21.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hf/hf.h"
#include "memory.h"
#include "quant8.h"

#define NAME_LEN 1024

ra_st_dtype hf_value_dtype(const ra_st_tensor *t, const ra_hf_quant *q)
{
    return t->dtype == RA_ST_F8_E4M3 && q->present ? q->dtype : t->dtype;
}

/* The weight_scale_inv beside weight t ("...weight"), or NULL. */
static const ra_st_tensor *find_scale(const ra_hf_checkpoint *ckpt, const ra_st_tensor *t)
{
    size_t len = strlen(t->name);
    char name[NAME_LEN];
    if (len < 6 || strcmp(t->name + len - 6, "weight") != 0 ||
        len + sizeof "_scale_inv" > sizeof name)
        return NULL;
    snprintf(name, sizeof name, "%s_scale_inv", t->name);
    return hf_find_tensor(ckpt, name, NULL);
}

/* Whether transformers would leave name's module unquantized: an entry of
 * modules_to_not_convert within it, or within it with each run of digits
 * written "*" (replace_with_fp8_linear's test). */
static int not_converted(const ra_hf_quant *q, const char *name)
{
    char starred[NAME_LEN];
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < sizeof starred;) {
        if (*p >= '0' && *p <= '9') {
            while (*p >= '0' && *p <= '9') p++;
            starred[n++] = '*';
        } else {
            starred[n++] = *p++;
        }
    }
    starred[n] = '\0';
    for (int64_t i = 0; i < q->n_skip; i++)
        if (strstr(name, q->skip[i]) || strstr(starred, q->skip[i])) return 1;
    return 0;
}

/* ceil(n / block) without overflow. */
static int64_t blocks(int64_t n, int64_t block)
{
    return n / block + (n % block != 0);
}

/* Scale number i of s (F32 or BF16) as float32. */
static float scale_at(const ra_st_tensor *s, int64_t i)
{
    if (s->dtype == RA_ST_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)s->data + 2 * i, 2);
        return ra_half_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, (const char *)s->data + 4 * i, 4);
    return f;
}

/* The scale s of weight t: F32 or BF16, [ceil(out / bo), ceil(in / bi)], finite. */
static ra_status check_scale(const ra_st_tensor *t, const ra_st_tensor *s, const ra_hf_quant *q,
                             const char *path)
{
    int64_t rows = blocks(t->shape[0], q->block_out), cols = blocks(t->shape[1], q->block_in);
    if (s->dtype != RA_ST_F32 && s->dtype != RA_ST_BF16)
        return hf_fail(RA_ERR_DTYPE, "tensor '%s' in %s has dtype %s; a block scale must be F32 "
                       "or BF16", s->name, path, ra_st_dtype_name(s->dtype));
    if (s->ndim != 2 || s->shape[0] != rows || s->shape[1] != cols)
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not [%lld, %lld]: the scales of "
                       "'%s' [%lld, %lld] in blocks of [%lld, %lld] (weight_block_size)",
                       s->name, path, (long long)rows, (long long)cols, t->name,
                       (long long)t->shape[0], (long long)t->shape[1], (long long)q->block_out,
                       (long long)q->block_in);
    if (s->count > 0 && !s->data)
        return hf_fail(RA_ERR_FORMAT, "tensor '%s' in %s has no data", s->name, path);
    for (int64_t i = 0; i < s->count; i++)
        if (!isfinite(scale_at(s, i)))
            return hf_fail(RA_ERR_FORMAT, "tensor '%s' in %s: scale %lld is not finite",
                           s->name, path, (long long)i);
    return RA_OK;
}

ra_status hf_fp8_check(const ra_hf_checkpoint *ckpt, const ra_hf_quant *q, const ra_st_tensor *t,
                       int matrix, const ra_st_tensor **scale)
{
    const char *path = ckpt->path;
    *scale = find_scale(ckpt, t);
    if (t->dtype != RA_ST_F8_E4M3) {
        if (*scale)
            return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is %s, not F8_E4M3, yet has "
                           "a scale '%s' beside it: refused", t->name, path,
                           ra_st_dtype_name(t->dtype), (*scale)->name);
        return RA_OK;
    }
    if (!q->present)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is F8_E4M3, but the config has "
                       "no quantization_config saying how it is scaled: refused", t->name, path);
    if (!matrix || t->ndim != 2)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is F8_E4M3: only projection "
                       "matrices may be block-quantized", t->name, path);
    if (not_converted(q, t->name))
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is F8_E4M3, but "
                       "quantization_config.modules_to_not_convert leaves its module "
                       "unquantized: refused", t->name, path);
    if (!*scale)
        return hf_fail(RA_ERR_NOT_FOUND, "tensor '%s' in %s is F8_E4M3 without its scale "
                       "'%s_scale_inv'", t->name, path, t->name);
    if (q->dtype == RA_ST_DTYPE_COUNT)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is F8_E4M3, and the config gives "
                       "no torch_dtype (or dtype), the dtype transformers dequantizes it to",
                       t->name, path);
    return check_scale(t, *scale, q, path);
}

ra_status hf_fp8_dequantize(const ra_st_tensor *t, const ra_st_tensor *scale,
                            const ra_hf_quant *q, const char *path, ra_dtype to, void *dst)
{
    const int64_t rows = t->shape[0], cols = t->shape[1], scale_cols = scale->shape[1];
    const unsigned char *codes = t->data;
    if (t->ndim != 2 || t->dtype != RA_ST_F8_E4M3 || t->nbytes != (size_t)t->count ||
        (t->count > 0 && !codes))
        return hf_fail(RA_ERR_FORMAT, "tensor '%s' in %s is not a matrix of F8_E4M3 codes",
                       t->name, path);
    const ra_dtype rounded = q->dtype == RA_ST_BF16 ? RA_BF16 : q->dtype == RA_ST_F16 ? RA_F16
                                                                                      : RA_F32;
    if (to != RA_F32 && to != rounded)
        return hf_fail(RA_ERR_ARGUMENT, "tensor '%s' in %s: dequantized to %s, asked for as "
                       "another dtype", t->name, path, ra_st_dtype_name(q->dtype));
    for (int64_t r = 0; r < rows; r++) {
        const int64_t scale_row = (r / q->block_out) * scale_cols;
        for (int64_t c = 0; c < cols; c++) {
            const int64_t i = r * cols + c;
            if ((codes[i] & 0x7f) == 0x7f)
                return hf_fail(RA_ERR_FORMAT, "tensor '%s' in %s: element [%lld, %lld] is the "
                               "e4m3 NaN code 0x%02x: refused", t->name, path, (long long)r,
                               (long long)c, codes[i]);
            float v = ra_e4m3_to_f32(codes[i]) * scale_at(scale, scale_row + c / q->block_in);
            uint16_t h = 0;
            int finite = isfinite(v);
            if (q->dtype == RA_ST_BF16) {
                h = ra_half_f32_to_bf16(v);
                v = ra_half_bf16_to_f32(h);
                finite = (h & 0x7f80u) != 0x7f80u;
            } else if (q->dtype == RA_ST_F16) {
                h = ra_half_f32_to_f16(v);
                v = ra_half_f16_to_f32(h);
                finite = (h & 0x7c00u) != 0x7c00u;
            }
            if (!finite)
                return hf_fail(RA_ERR_FORMAT, "tensor '%s' in %s: element [%lld, %lld] "
                               "dequantizes beyond the range of %s", t->name, path,
                               (long long)r, (long long)c, ra_st_dtype_name(q->dtype));
            if (to == RA_F32) ((float *)dst)[i] = v;
            else ((uint16_t *)dst)[i] = h;
        }
    }
    return RA_OK;
}
