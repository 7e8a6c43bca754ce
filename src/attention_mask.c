/*
 * attention_mask.c — the masks and logit changes of ra_attention_options
 * (window, chunk, padding, packed documents, scale, soft-capping, sinks):
 * their checks, and the row facts the kernels share (cpu/attention_job.h).
 */
#include <float.h>
#include <math.h>

#include "attention_internal.h"
#include "rope_internal.h"

ra_status ra_attention_mask_read(ra_attention_mask *mask, const ra_attention_options *options,
                                 const int64_t q_shape[4])
{
    const ra_attention_options none = ra_attention_options_init();
    const ra_attention_options *o = options ? options : &none;
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
    return RA_OK;
}

ra_status ra_attention_mask_check_output(const ra_attention_mask *mask, const ra_tensor *t,
                                         const char *name)
{
    const struct {
        const void *p;
        size_t bytes;
        const char *what;
    } in[3] = {{mask->sinks, (size_t)mask->n_heads * sizeof(float), "sinks"},
               {mask->padding, (size_t)(mask->batch * mask->seq), "padding_mask"},
               {mask->cu_seqlens, (size_t)(mask->n_documents + 1) * sizeof(int64_t),
                "cu_seqlens"}};
    for (int i = 0; i < 3; i++)
        if (ra_tensor_overlaps_bytes(t, in[i].p, in[i].bytes))
            return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", name, in[i].what);
    return RA_OK;
}

