/*
 * attention_block.c — ra_attention_block_lse: one block of queries against
 * one block of keys of a longer causal sequence, at their positions (the
 * flash path with a query shift: cpu/flash_impl.h).  What ring attention
 * and other splits of the sequence merge by their log-sum-exps.  And its
 * backward, ra_attention_block_backward: the flash backward's task with the
 * same shift (cpu/flash_backward_impl.h), adding to the gradients.
 *
 *   q, out, dq, dout: [B, Sq, H, D]   k, v, dk, dv: [B, Sk, Hkv, D]
 *   lse: [B, H, Sq]
 */
#include "attention_internal.h"
#include "parallel.h"
#include "rope_internal.h"

/* The options a block serves: scale, softcap, window, chunk, sinks, and
 * over a sequence of seq > 0 tokens padding_mask, cu_seqlens and dropout.
 * fn: the caller's name. */
static ra_status block_options(ra_attention_options *o, const ra_attention_options *options,
                               int64_t seq, const char *fn)
{
    RA_TRY(ra_attention_options_read(o, options));
    if (o->path == RA_PATH_REFERENCE)
        return ra_fail(RA_ERR_UNSUPPORTED, "%s: the reference path (the block runs on the "
                       "flash path only)", fn);
    if (seq == 0 && (o->padding_mask || o->cu_seqlens || o->n_documents || o->dropout > 0.0f))
        return ra_fail(RA_ERR_ARGUMENT, "%s: %s with seq = 0 (the sequence they describe has "
                       "no length)", fn, o->padding_mask ? "padding_mask"
                       : o->dropout > 0.0f ? "dropout" : "cu_seqlens");
    return RA_OK;
}

/* RA_ERR_POSITION unless q_start and k_start are in [0, RA_MAX_POSITION]
 * and, with seq > 0, the block's n_q query rows and n_k key rows lie in
 * the sequence's [0, seq); RA_ERR_SIZE for seq outside [0, 2^32 + 1] (the
 * positions' range). */
static ra_status block_starts(int64_t q_start, int64_t k_start, int64_t seq, int64_t n_q,
                              int64_t n_k)
{
    if (q_start < 0 || q_start > RA_MAX_POSITION || k_start < 0 || k_start > RA_MAX_POSITION)
        return ra_fail(RA_ERR_POSITION, "q_start %lld, k_start %lld: not in [0, 2^32]",
                       (long long)q_start, (long long)k_start);
    if (seq < 0 || seq > RA_MAX_POSITION + 1)
        return ra_fail(RA_ERR_SIZE, "seq %lld is not in [0, 2^32 + 1]", (long long)seq);
    if (seq > 0 && (q_start > seq - n_q || k_start > seq - n_k))
        return ra_fail(RA_ERR_POSITION, "query rows %lld .. %lld and key rows %lld .. %lld: not "
                       "all within the sequence's %lld", (long long)q_start,
                       (long long)(q_start + n_q - 1), (long long)k_start,
                       (long long)(k_start + n_k - 1), (long long)seq);
    return RA_OK;
}

/* The block's masks: o's over the sequence (q's shape with seq rows; seq 0:
 * the block's own), the rows placed at q_start and k_start. */
static ra_status block_mask(ra_attention_mask *mask, const ra_attention_options *o,
                            const ra_tensor *q, int64_t seq, int64_t q_start, int64_t k_start)
{
    const int64_t shape[4] = {q->shape[0], seq ? seq : q->shape[1], q->shape[2], q->shape[3]};
    int64_t cells; /* the padding's B seq bytes */
    if (ra_mul(shape[0], shape[1], &cells) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "batch %lld x seq %lld overflows", (long long)shape[0],
                       (long long)shape[1]);
    RA_TRY(ra_attention_mask_read(mask, o, shape));
    mask->q_origin = q_start;
    mask->k_origin = k_start;
    return RA_OK;
}

/* The views' checks: ra_attention_prepare's, but k (and v) may be of any
 * length. */
static ra_status block_views(const ra_tensor *out, const float *lse, const ra_tensor *q,
                             const ra_tensor *k, const ra_tensor *v)
{
    if (!out || !lse || !q || !k || !v)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !out ? "out" : !lse ? "lse" : !q ? "q"
                                                  : !k ? "k" : "v");
    RA_TRY(ra_tensor_check(q, "q"));
    RA_TRY(ra_tensor_check(k, "k"));
    RA_TRY(ra_tensor_check(v, "v"));
    RA_TRY(ra_tensor_check_output(out, "out"));
    if (!(q->dtype == RA_F32 || q->dtype == RA_F16 || q->dtype == RA_BF16) ||
        out->dtype != RA_F32)
        return ra_fail(RA_ERR_DTYPE, "q must be f32, f16 or bf16 and out float32");
    for (int d = 0; d < 4; d++)
        if (out->shape[d] != q->shape[d] || v->shape[d] != k->shape[d] ||
            ((d == 0 || d == 3) && k->shape[d] != q->shape[d]))
            return ra_fail(RA_ERR_SHAPE, "q, out " RA_DIMS_FMT " and k " RA_DIMS_FMT ", v "
                           RA_DIMS_FMT " differ in axis %d", RA_DIMS(q->shape),
                           RA_DIMS(k->shape), RA_DIMS(v->shape), d);
    if (q->shape[2] % k->shape[2])
        return ra_fail(RA_ERR_GQA, "q's %lld heads are not a multiple of k's %lld",
                       (long long)q->shape[2], (long long)k->shape[2]);
    if (ra_tensors_overlap(out, q) || ra_tensors_overlap(out, k) || ra_tensors_overlap(out, v))
        return ra_fail(RA_ERR_ARGUMENT, "out overlaps q, k or v");
    /* lse [B, H, Sq] as a view, for the overlap checks (q's sizes fit) */
    ra_tensor lse_view = ra_tensor_4d((float *)lse, RA_F32, q->shape[0], q->shape[2],
                                      q->shape[1], 1);
    const ra_tensor *const read[4] = {out, q, k, v};
    static const char *const names[4] = {"out", "q", "k", "v"};
    for (int i = 0; i < 4; i++)
        if (ra_tensors_overlap(&lse_view, read[i]))
            return ra_fail(RA_ERR_ARGUMENT, "lse overlaps %s", names[i]);
    return RA_OK;
}

RA_API ra_status ra_attention_block_lse(ra_context *ctx, const ra_tensor *out, float *lse,
                                        const ra_tensor *q, const ra_tensor *k,
                                        const ra_tensor *v, int64_t q_start, int64_t k_start,
                                        int64_t seq, const ra_attention_options *options)
{
    ra_error_reset();
    ra_attention_options o;
    RA_TRY(block_options(&o, options, seq, "ra_attention_block_lse"));
    RA_TRY(block_views(out, lse, q, k, v));
    RA_TRY(block_starts(q_start, k_start, seq, q->shape[1], k->shape[1]));
    ra_attention_args args = {0};
    RA_TRY(block_mask(&args.mask, &o, q, seq, q_start, k_start));
    RA_TRY(ra_attention_mask_check_output(&args.mask, out, "out"));
    const ra_tensor lse_view = ra_tensor_4d(lse, RA_F32, q->shape[0], q->shape[2], q->shape[1], 1);
    RA_TRY(ra_attention_mask_check_output(&args.mask, &lse_view, "lse"));
    args.out = out;
    args.q = q;
    args.k = k;
    args.v = v;
    args.lse = lse;
    ra_attention_dropout(&args.dropout, &args.drop, &o);
    args.q_shift = q_start - k_start;
    args.k_start = k_start;
    size_t bytes = ra_attention_scratch_bytes(RA_PATH_FLASH, q->shape[0], q->shape[1], k->shape[1],
                                              q->shape[2], k->shape[2], q->shape[3],
                                              ra_parallel_threads(ctx));
    if (bytes == 0)
        return ra_fail(RA_ERR_OVERFLOW, "q " RA_DIMS_FMT ": the flash path's scratch overflows",
                       RA_DIMS(q->shape));
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, bytes, &scratch));
    ra_attention_flash(ctx, &args, scratch.data);
    ra_scratch_release(&scratch);
    return RA_OK;
}

RA_API ra_status ra_attention_block_backward(ra_context *ctx, const ra_tensor *dq,
                                             const ra_tensor *dk, const ra_tensor *dv,
                                             const ra_tensor *dout, const ra_tensor *q,
                                             const ra_tensor *k, const ra_tensor *v,
                                             const ra_tensor *out, const float *lse,
                                             int64_t q_start, int64_t k_start, int64_t seq,
                                             const ra_attention_options *options)
{
    ra_error_reset();
    ra_attention_options o;
    RA_TRY(block_options(&o, options, seq, "ra_attention_block_backward"));
    if (o.dsinks)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_block_backward: dsinks (dL/dsinks "
                       "depends on the queries alone: the caller sums it once)");
    /* the views' checks without the sequence's masks, which are read after */
    ra_attention_options views = o;
    views.padding_mask = NULL;
    views.cu_seqlens = NULL;
    views.n_documents = 0;
    ra_attention_backward_args args;
    RA_TRY(ra_attention_backward_prepare(&args, 1, RA_PATH_FLASH, dq, dk, dv, dout, q, k, v, out,
                                         lse, &views));
    RA_TRY(block_starts(q_start, k_start, seq, q->shape[1], k->shape[1]));
    RA_TRY(block_mask(&args.fwd.mask, &o, q, seq, q_start, k_start));
    const ra_tensor *const grads[3] = {dq, dk, dv};
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++)
        RA_TRY(ra_attention_mask_check_output(&args.fwd.mask, grads[i], names[i]));
    args.fwd.q_shift = q_start - k_start;
    args.fwd.k_start = k_start;
    args.fwd.mask.sinks = NULL; /* lse holds them: they change no probability */
    args.accumulate = 1;
    return ra_attention_backward_run(ctx, &args, RA_PATH_FLASH);
}
