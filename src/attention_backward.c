/*
 * attention_backward.c — ra_attention_backward: argument checks, scratch,
 * and the choice of path.  The kernels are in attention_ref_backward.c and
 * attention_flash_backward.c (its task: cpu/flash_backward_impl.h).
 *
 *   dq, dout, q, out: [B, Sq, H, D]   dk, dv, k, v: [B, Sk, Hkv, D]   lse: [B, H, Sq]
 */
#include "attention_internal.h"
#include "cpu/kernels.h"
#include "parallel.h"
#include "rope_internal.h"

/* The index of the first of the n views (NULLs skipped) that view a may
 * share an element with, or -1; gradients interleaved in one fused buffer
 * do not. */
static int overlaps_any(const ra_tensor *a, const ra_tensor *const *others, int n)
{
    for (int i = 0; i < n; i++)
        if (others[i] && ra_tensors_share_elements(a, others[i])) return i;
    return -1;
}

/* RA_ERR_SHAPE naming a and b unless their shapes are equal. */
static ra_status same_shape(const ra_tensor *a, const char *a_name, const ra_tensor *b,
                            const char *b_name)
{
    for (int d = 0; d < 4; d++)
        if (a->shape[d] != b->shape[d])
            return ra_fail(RA_ERR_SHAPE, "%s " RA_DIMS_FMT " and %s " RA_DIMS_FMT " differ", a_name,
                           RA_DIMS(a->shape), b_name, RA_DIMS(b->shape));
    return RA_OK;
}

ra_status ra_attention_backward_prepare(ra_attention_backward_args *args, int any_keys,
                                        ra_attention_path path, const ra_tensor *dq,
                                        const ra_tensor *dk, const ra_tensor *dv,
                                        const ra_tensor *dout, const ra_tensor *q,
                                        const ra_tensor *k, const ra_tensor *v,
                                        const ra_tensor *out, const float *lse,
                                        const ra_attention_options *options)
{
    if (!args || !dq || !dk || !dv || !dout || !q || !k || !v)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !args ? "args" : !dq ? "dq" : !dk ? "dk"
                                                  : !dv ? "dv" : !dout ? "dout" : !q ? "q"
                                                  : !k ? "k" : "v");
    if (path != RA_PATH_REFERENCE && (!out || !lse))
        return ra_fail(RA_ERR_NULL, "%s is NULL, and the flash path's backward needs it",
                       !out ? "out" : "lse");
    const ra_tensor *views[] = {dq, dk, dv, dout, q, k, v, out};
    static const char *const names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out"};
    for (int i = 0; i < 8; i++)
        if (views[i]) RA_TRY(ra_tensor_check(views[i], names[i]));
    const ra_tensor *f32[] = {dq, dk, dv, dout, out};
    static const char *const f32_names[] = {"dq", "dk", "dv", "dout", "out"};
    for (int i = 0; i < 5; i++)
        if (f32[i] && f32[i]->dtype != RA_F32) /* q, k, v: any */
            return ra_fail(RA_ERR_DTYPE, "%s: dtype %s, must be RA_F32", f32_names[i],
                           ra_dtype_name(f32[i]->dtype));
    RA_TRY(same_shape(dq, "dq", q, "q"));
    RA_TRY(same_shape(dout, "dout", q, "q"));
    if (out) RA_TRY(same_shape(out, "out", q, "q"));
    RA_TRY(same_shape(dk, "dk", k, "k"));
    RA_TRY(same_shape(dv, "dv", k, "k"));
    RA_TRY(same_shape(v, "v", k, "k"));
    for (int d = 0; d < 4; d++) /* k: any length Sk */
        if ((d == 0 || d == 3) && k->shape[d] != q->shape[d])
            return ra_fail(RA_ERR_SHAPE, "k " RA_DIMS_FMT " and q " RA_DIMS_FMT " differ in "
                           "axis %d", RA_DIMS(k->shape), RA_DIMS(q->shape), d);
    if (q->shape[2] % k->shape[2])
        return ra_fail(RA_ERR_GQA, "q's %lld heads are not a multiple of k's %lld",
                       (long long)q->shape[2], (long long)k->shape[2]);

    /* The gradients are written: they must not share memory with each other
     * or with anything read (lse as a [B, H, S] view; q's sizes fit). */
    ra_tensor lse_view, sinks_view, dsinks_view;
    const int64_t n_heads = q->shape[2];
    if (lse) lse_view = ra_tensor_4d((void *)lse, RA_F32, q->shape[0], n_heads, q->shape[1], 1);
    const float *sinks = options ? options->sinks : NULL;
    float *dsinks = options ? options->dsinks : NULL;
    if (sinks) sinks_view = ra_tensor_4d((void *)sinks, RA_F32, 1, 1, n_heads, 1);
    if (dsinks) dsinks_view = ra_tensor_4d(dsinks, RA_F32, 1, 1, n_heads, 1);
    const ra_tensor *read[] = {dout, q, k, v, out, lse ? &lse_view : NULL,
                               sinks ? &sinks_view : NULL};
    static const char *const read_names[] = {"dout", "q", "k", "v", "out", "lse", "sinks"};
    const ra_tensor *grads[] = {dq, dk, dv, dsinks ? &dsinks_view : NULL};
    static const char *const grad_names[] = {"dq", "dk", "dv", "dsinks"};
    for (int i = 0; i < 4; i++) {
        if (!grads[i]) continue;
        int j = overlaps_any(grads[i], read, 7);
        if (j >= 0)
            return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", grad_names[i], read_names[j]);
        j = overlaps_any(grads[i], grads + i + 1, 3 - i);
        if (j >= 0)
            return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", grad_names[i],
                           grad_names[i + 1 + j]);
    }

    if (any_keys) /* a block's: its caller reads the sequence's masks */
        RA_TRY(ra_attention_mask_read(&args->fwd.mask, options, q->shape));
    else
        RA_TRY(ra_attention_mask_read_keys(&args->fwd.mask, options, q->shape, k->shape[1]));
    for (int i = 0; i < 4; i++)
        if (grads[i]) RA_TRY(ra_attention_mask_check_output(&args->fwd.mask, grads[i],
                                                            grad_names[i]));
    args->fwd.out = out;
    args->fwd.q = q;
    args->fwd.k = k;
    args->fwd.v = v;
    args->fwd.lse = NULL;
    args->fwd.q_shift = any_keys ? 0 : k->shape[1] - q->shape[1]; /* bottom-right */
    args->fwd.k_start = 0;
    args->accumulate = 0;
    ra_attention_dropout(&args->fwd.dropout, &args->fwd.drop, options);
    args->dq = dq;
    args->dk = dk;
    args->dv = dv;
    args->dout = dout;
    args->lse = lse;
    args->dsinks = dsinks;
    return RA_OK;
}

/* wide = q's values as float32, [B, S, H, D] contiguous; q f16 or bf16. */
static void widen_q(float *wide, const ra_tensor *q)
{
    const int64_t d = q->shape[3];
    for (int64_t b = 0; b < q->shape[0]; b++)
        for (int64_t s = 0; s < q->shape[1]; s++)
            for (int64_t h = 0; h < q->shape[2]; h++, wide += d)
                ra_kernels_get()->widen16(wide, ra_row_any(q, b, s, h), d, q->dtype == RA_BF16);
}

size_t ra_attention_backward_scratch_bytes(ra_attention_path path, int64_t batch,
                                           int64_t q_seq, int64_t seq, int64_t n_heads,
                                           int64_t head_dim, int threads)
{
    int64_t a, b, n;
    if (path == RA_PATH_REFERENCE) {
        /* P and dS [Sq, Sk] and two rows of Sk floats (dropout multipliers,
         * keys seen: an even count), then dk and dv sums [Sk, D] (doubles). */
        if (ra_mul(2 * q_seq + 2, seq, &a) != RA_OK || ra_mul(seq, head_dim, &b) != RA_OK ||
            ra_mul(b, 4, &b) != RA_OK || a > RA_MAX_ELEMENTS - b ||
            a + b > RA_MAX_ELEMENTS - 2 * n_heads)
            return 0;
        n = a + b + 2 * n_heads; /* and dsink [H] (doubles) */
    } else {
        /* Per-head dk and dv [B, H, S, dp], each task's dsinks [B, H],
         * then each thread's tiles. */
        if (head_dim > RA_MAX_ELEMENTS / 4096) return 0;
        if (ra_mul(batch, n_heads, &a) != RA_OK || ra_mul(a, seq + 1, &a) != RA_OK ||
            ra_mul(a, 2 * ra_round_up(head_dim, 16), &a) != RA_OK ||
            ra_mul(ra_flash_backward_per_thread(head_dim), threads, &b) != RA_OK ||
            a > RA_MAX_ELEMENTS - b)
            return 0;
        n = a + b;
    }
    return (size_t)n * sizeof(float);
}

RA_API ra_status ra_attention_backward(ra_context *ctx, const ra_tensor *dq,
                                       const ra_tensor *dk, const ra_tensor *dv,
                                       const ra_tensor *dout, const ra_tensor *q,
                                       const ra_tensor *k, const ra_tensor *v,
                                       const ra_tensor *out, const float *lse,
                                       const ra_attention_options *options)
{
    ra_error_reset();
    ra_attention_options o;
    RA_TRY(ra_attention_options_read(&o, options));
    const ra_attention_path path = o.path == RA_PATH_AUTO ? RA_PATH_FLASH : o.path;
    ra_attention_backward_args args;
    RA_TRY(ra_attention_backward_prepare(&args, 0, path, dq, dk, dv, dout, q, k, v, out, lse,
                                         &o));
    return ra_attention_backward_run(ctx, &args, path);
}

ra_status ra_attention_backward_run(ra_context *ctx, ra_attention_backward_args *args,
                                    ra_attention_path path)
{
    const ra_tensor *q = args->fwd.q;
    size_t bytes = ra_attention_backward_scratch_bytes(path, q->shape[0], q->shape[1],
                                                       args->dk->shape[1], q->shape[2],
                                                       q->shape[3], ra_parallel_threads(ctx));
    if (bytes == 0)
        return ra_fail(RA_ERR_OVERFLOW, "q " RA_DIMS_FMT ": the %s path's scratch overflows",
                       RA_DIMS(q->shape), path == RA_PATH_REFERENCE ? "reference" : "flash");
    /* The reference path reads q's rows as float32: a 16-bit q is widened
     * once, exactly, after its scratch (k and v it widens as it goes).  The
     * flash path widens q's rows a block at a time, or reads them as they
     * are on the bf16 units (cpu/flash_backward_bf16_impl.h). */
    const int wide_q = q->dtype != RA_F32 && path == RA_PATH_REFERENCE;
    const size_t q_at = (bytes + 63) & ~(size_t)63;
    if (wide_q) /* at most RA_MAX_ELEMENTS (ra_tensor_check) */
        bytes = q_at + (size_t)(q->shape[0] * q->shape[1] * q->shape[2] * q->shape[3]) * 4;
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, bytes, &scratch));
    ra_tensor q32;
    if (wide_q) {
        float *wide = (float *)(void *)((char *)scratch.data + q_at);
        widen_q(wide, q);
        q32 = ra_tensor_4d(wide, RA_F32, q->shape[0], q->shape[1], q->shape[2], q->shape[3]);
        args->fwd.q = &q32;
    }
    if (path == RA_PATH_REFERENCE)
        ra_attention_backward_reference(args, scratch.data);
    else
        ra_attention_backward_flash(ctx, args, scratch.data);
    ra_scratch_release(&scratch);
    return RA_OK;
}
