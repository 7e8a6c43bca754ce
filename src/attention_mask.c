/*
 * attention_mask.c — the masks and logit changes of ra_attention_options
 * (window, chunk, padding, packed documents, scale, soft-capping, sinks,
 * non_causal, attn_mask):
 * their checks, and the row facts the kernels share (cpu/attention_job.h).
 */
#include <float.h>
#include <math.h>

#include "attention_internal.h"
#include "rope_internal.h"

/* Whether an attn_mask value is +Inf or a NaN: f32 x (x - x is NaN there
 * and at -Inf), or 16-bit bits x whose exponent field is exp (all ones,
 * but -Inf: the sign bit too). */
#define BAD_F32(x) (((x) - (x) != 0.0f) & ((x) != -INFINITY))
#define BAD_16(x) ((((x) & exp) == exp) & ((x) != (uint16_t)(0x8000u | exp)))

/* The first of n values from p (one every stride) that bad() holds for,
 * or -1 (exp: BAD_16's).  Runs of 256 are tested by OR-ing bad() over
 * them (a loop the compiler vectorizes), the culprit sought only in a run
 * that holds one. */
#define FIRST_NONFINITE(name, type, bad)                                                     \
    static int64_t name(const type *p, int64_t n, int64_t stride, uint16_t exp)             \
    {                                                                                        \
        (void)exp;                                                                           \
        for (int64_t j0 = 0; j0 < n; j0 += 256) {                                            \
            const int64_t m = n - j0 < 256 ? n - j0 : 256;                                    \
            const type *run = p + j0 * stride;                                               \
            int any = 0;                                                                     \
            if (stride == 1)                                                                 \
                for (int64_t j = 0; j < m; j++) any |= bad(run[j]);                          \
            else                                                                             \
                for (int64_t j = 0; j < m; j++) any |= bad(run[j * stride]);                 \
            for (int64_t j = 0; any && j < m; j++)                                           \
                if (bad(run[j * stride])) return j0 + j;                                     \
        }                                                                                    \
        return -1;                                                                           \
    }
FIRST_NONFINITE(first_nonfinite_f32, float, BAD_F32)
FIRST_NONFINITE(first_nonfinite_16, uint16_t, BAD_16)
#undef FIRST_NONFINITE
#undef BAD_16
#undef BAD_F32

/* attn_mask's additive values (mask's attn fields set; shape: its view's)
 * all finite or -Inf: each distinct element read once (a broadcast axis, of
 * extent 1 or stride 0, at index 0 only), a row of Sk at a time. */
static ra_status check_attn_values(const ra_attention_mask *mask, const int64_t shape[4])
{
    const int64_t *st = mask->attn_stride;
    int64_t n[4];
    for (int d = 0; d < 4; d++) n[d] = st[d] ? shape[d] : 1;
    const int wide = mask->attn_dtype == RA_F32;
    const uint16_t exp = mask->attn_dtype == RA_F16 ? 0x7c00 : 0x7f80; /* f16, bf16 */
    for (int64_t b = 0; b < n[0]; b++)
        for (int64_t h = 0; h < n[1]; h++)
            for (int64_t i = 0; i < n[2]; i++) {
                const int64_t at = b * st[0] + h * st[1] + i * st[2];
                const int64_t j =
                    wide ? first_nonfinite_f32((const float *)mask->attn + at, n[3], st[3], exp)
                         : first_nonfinite_16((const uint16_t *)mask->attn + at, n[3], st[3], exp);
                if (j >= 0)
                    return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: attn_mask[%lld, "
                                   "%lld, %lld, %lld] is %g: must be finite or -Inf",
                                   (long long)b, (long long)h, (long long)i, (long long)j,
                                   (double)ra_mask_attn(mask, b, h, i, j));
            }
    return RA_OK;
}

/* attn_mask's view against [B, H, Sq, Sk] (full): data, dtype, shape,
 * strides and values; fills mask's attn fields. */
static ra_status read_attn_mask(ra_attention_mask *mask, const ra_tensor *t,
                                const int64_t full[4])
{
    static const char *const axes[4] = {"B", "H", "Sq", "Sk"};
    if (!t->data) return ra_fail(RA_ERR_NULL, "ra_attention_options: attn_mask's data is NULL");
    if (!(t->dtype == RA_BOOL || t->dtype == RA_F32 || t->dtype == RA_F16 ||
          t->dtype == RA_BF16))
        return ra_fail(RA_ERR_DTYPE, "ra_attention_options: attn_mask's dtype %s (%d): must be "
                       "RA_BOOL, RA_F32, RA_F16 or RA_BF16", ra_dtype_name(t->dtype),
                       (int)t->dtype);
    int64_t last = 0, term;
    for (int d = 0; d < 4; d++) {
        if (t->shape[d] != full[d] && t->shape[d] != 1)
            return ra_fail(RA_ERR_SHAPE, "ra_attention_options: attn_mask " RA_DIMS_FMT ": axis "
                           "%d is %lld, must be %s = %lld or 1", RA_DIMS(t->shape), d,
                           (long long)t->shape[d], axes[d], (long long)full[d]);
        if (t->stride[d] < 0)
            return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: attn_mask's stride[%d] is "
                           "%lld, must be >= 0", d, (long long)t->stride[d]);
        if (ra_mul(t->shape[d] - 1, t->stride[d], &term) != RA_OK ||
            term > RA_MAX_ELEMENTS - last)
            return ra_fail(RA_ERR_OVERFLOW, "ra_attention_options: attn_mask " RA_DIMS_FMT " with "
                           "stride " RA_DIMS_FMT ": the last element's offset overflows",
                           RA_DIMS(t->shape), RA_DIMS(t->stride));
        last += term;
        mask->attn_stride[d] = t->shape[d] == 1 ? 0 : t->stride[d];
    }
    mask->attn = t->data;
    mask->attn_dtype = t->dtype;
    mask->attn_bytes = (size_t)(last + 1) * ra_dtype_size(t->dtype);
    return t->dtype == RA_BOOL ? RA_OK : check_attn_values(mask, t->shape);
}

ra_status ra_attention_mask_read_keys(ra_attention_mask *mask,
                                      const ra_attention_options *options,
                                      const int64_t q_shape[4], int64_t n_keys)
{
    const ra_attention_options none = ra_attention_options_init();
    const ra_attention_options *o = options ? options : &none;
    ra_attention_options rest = *o;
    rest.non_causal = 0;
    rest.attn_mask = NULL;
    RA_TRY(ra_attention_mask_read(mask, &rest, q_shape));
    if (n_keys != q_shape[1] && (o->padding_mask || o->cu_seqlens || o->chunk))
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: %s with Sq = %lld queries and "
                       "Sk = %lld keys (it names one sequence): give attn_mask instead",
                       o->padding_mask ? "padding_mask" : o->cu_seqlens ? "cu_seqlens" : "chunk",
                       (long long)q_shape[1], (long long)n_keys);
    mask->non_causal = o->non_causal != 0;
    mask->window_earlier_only = o->non_causal && o->window_earlier_only;
    mask->n_keys = n_keys;
    const int64_t full[4] = {q_shape[0], q_shape[2], q_shape[1], n_keys};
    if (o->attn_mask) RA_TRY(read_attn_mask(mask, o->attn_mask, full));
    return RA_OK;
}

ra_status ra_attention_mask_read(ra_attention_mask *mask, const ra_attention_options *options,
                                 const int64_t q_shape[4])
{
    const ra_attention_options none = ra_attention_options_init();
    const ra_attention_options *o = options ? options : &none;
    if (o->non_causal || o->attn_mask)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: %s on this call (decode, "
                       "cached and block calls take neither non_causal nor attn_mask)",
                       o->non_causal ? "non_causal" : "attn_mask");
    if (o->quantize_q)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: quantize_q on this call (only "
                       "the decode calls of an RA_I8 cache take it: ra_attention_decode, "
                       "ra_attention_decode_lse, ra_attention_decode_paged, "
                       "ra_kv_cache_attend)");
    const int64_t seq = q_shape[1], n_heads = q_shape[2];
    if (!(o->scale == 0 || (isfinite(o->scale) && o->scale > 0 && o->scale <= FLT_MAX)))
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: scale %g is not 0 (1 / sqrt(D)) "
                       "nor a positive float", o->scale);
    if (!(o->softcap == 0 || (isfinite(o->softcap) && o->softcap >= FLT_MIN &&
                              o->softcap <= FLT_MAX)))
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: softcap %g is not 0 (none) nor a "
                       "positive normal float", o->softcap);
    if (o->window < 0 || o->chunk < 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: %s %lld is negative",
                       o->window < 0 ? "window" : "chunk",
                       (long long)(o->window < 0 ? o->window : o->chunk));
    if (o->dsinks && !o->sinks)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: dsinks without sinks");
    if (o->sinks)
        for (int64_t h = 0; h < n_heads; h++)
            if (!isfinite(o->sinks[h]))
                return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: sinks[%lld] is %g, not "
                               "finite", (long long)h, (double)o->sinks[h]);
    if (!o->cu_seqlens != !o->n_documents)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: cu_seqlens %s but n_documents "
                       "%lld", o->cu_seqlens ? "set" : "NULL", (long long)o->n_documents);
    if (o->cu_seqlens) {
        if (o->n_documents < 1 || o->n_documents > seq || o->cu_seqlens[0] != 0 ||
            o->cu_seqlens[o->n_documents] != seq)
            return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: cu_seqlens must run from 0 to "
                           "S = %lld in n_documents = %lld steps", (long long)seq,
                           (long long)o->n_documents);
        for (int64_t d = 0; d < o->n_documents; d++)
            if (o->cu_seqlens[d + 1] <= o->cu_seqlens[d])
                return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: cu_seqlens[%lld] = %lld is "
                               "not above cu_seqlens[%lld] = %lld", (long long)d + 1,
                               (long long)o->cu_seqlens[d + 1], (long long)d,
                               (long long)o->cu_seqlens[d]);
    }
    mask->scale = o->scale ? o->scale : 1.0 / sqrt((double)q_shape[3]);
    mask->softcap = (float)o->softcap;
    mask->window = o->window;
    mask->chunk = o->chunk;
    mask->sinks = o->sinks;
    mask->padding = o->padding_mask;
    mask->cu_seqlens = o->cu_seqlens;
    mask->n_documents = o->n_documents;
    mask->seq = seq;
    mask->batch = q_shape[0];
    mask->n_heads = n_heads;
    mask->q_origin = 0;
    mask->k_origin = 0;
    mask->non_causal = 0;
    mask->window_earlier_only = 0;
    mask->n_keys = seq;
    mask->attn = NULL;
    mask->attn_dtype = RA_F32;
    for (int d = 0; d < 4; d++) mask->attn_stride[d] = 0;
    mask->attn_bytes = 0;
    mask->quantize_q = 0;
    return RA_OK;
}

ra_status ra_attention_mask_check_output(const ra_attention_mask *mask, const ra_tensor *t,
                                         const char *name)
{
    const struct {
        const void *p;
        size_t bytes;
        const char *what;
    } in[4] = {{mask->sinks, (size_t)mask->n_heads * sizeof(float), "sinks"},
               {mask->padding, (size_t)(mask->batch * mask->seq), "padding_mask"},
               {mask->cu_seqlens, (size_t)(mask->n_documents + 1) * sizeof(int64_t),
                "cu_seqlens"},
               {mask->attn, mask->attn_bytes, "attn_mask"}};
    for (int i = 0; i < 4; i++)
        if (ra_tensor_overlaps_bytes(t, in[i].p, in[i].bytes))
            return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", name, in[i].what);
    return RA_OK;
}

