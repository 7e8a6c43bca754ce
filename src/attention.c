/*
 * attention.c — ra_attention and ra_attention_forward_lse: argument checks,
 * scratch, and the choice of path.  The kernels are in attention_ref.c and
 * attention_flash.c; the backward is in attention_backward.c.
 */
#include <math.h>

#include "attention_internal.h"
#include "parallel.h"
#include "rope_internal.h"

ra_status ra_attention_prepare(ra_attention_args *args, const ra_tensor *out,
                               const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                               const ra_attention_options *options)
{
    if (!args || !out || !q || !k || !v)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !args ? "args" : !out ? "out" : !q ? "q"
                                                  : !k ? "k" : "v");
    RA_TRY(ra_tensor_check(q, "q"));
    RA_TRY(ra_tensor_check(k, "k"));
    RA_TRY(ra_tensor_check(v, "v"));
    RA_TRY(ra_tensor_check_output(out, "out"));
    if (!(q->dtype == RA_F32 || q->dtype == RA_F16 || q->dtype == RA_BF16) ||
        out->dtype != RA_F32) /* k, v: any */
        return ra_fail(RA_ERR_DTYPE, "q must be f32, f16 or bf16 and out float32");
    for (int d = 0; d < 4; d++) /* k and v: any length Sk */
        if (out->shape[d] != q->shape[d] || v->shape[d] != k->shape[d] ||
            ((d == 0 || d == 3) && k->shape[d] != q->shape[d]))
            return ra_fail(RA_ERR_SHAPE, "q, out [%lld, %lld, %lld, %lld] and k [%lld, %lld, "
                           "%lld, %lld], v [%lld, %lld, %lld, %lld] differ in axis %d",
                           (long long)q->shape[0], (long long)q->shape[1], (long long)q->shape[2],
                           (long long)q->shape[3], (long long)k->shape[0], (long long)k->shape[1],
                           (long long)k->shape[2], (long long)k->shape[3], (long long)v->shape[0],
                           (long long)v->shape[1], (long long)v->shape[2], (long long)v->shape[3],
                           d);
    if (q->shape[2] % k->shape[2])
        return ra_fail(RA_ERR_GQA, "q's %lld heads are not a multiple of k's %lld",
                       (long long)q->shape[2], (long long)k->shape[2]);
    if (ra_tensors_overlap(out, q) || ra_tensors_overlap(out, k) || ra_tensors_overlap(out, v))
        return ra_fail(RA_ERR_ARGUMENT, "out overlaps q, k or v");
    RA_TRY(ra_attention_mask_read_keys(&args->mask, options, q->shape, k->shape[1]));
    RA_TRY(ra_attention_mask_check_output(&args->mask, out, "out"));
    args->out = out;
    args->q = q;
    args->k = k;
    args->v = v;
    args->lse = NULL;
    args->rope = NULL;
    args->positions = NULL;
    args->q_shift = k->shape[1] - q->shape[1]; /* the diagonal aligned bottom-right */
    args->k_start = 0;
    ra_attention_dropout(&args->dropout, &args->drop, options);
    return RA_OK;
}

ra_status ra_attention_options_read(ra_attention_options *out, const ra_attention_options *options)
{
    *out = ra_attention_options_init();
    if (options) RA_TRY(RA_READ_STRUCT(*out, options, ra_attention_options));
    if ((unsigned)out->path >= RA_PATH_COUNT)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: path %d", (int)out->path);
    if (!(out->dropout >= 0.0f && out->dropout < 1.0f))
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: dropout %g is not in [0, 1)",
                       (double)out->dropout);
    return RA_OK;
}

void ra_attention_dropout(int *on, ra_dropout_mask *mask, const ra_attention_options *options)
{
    *on = options && options->dropout > 0.0f;
    if (*on) *mask = ra_dropout_mask_make(options->dropout, options->seed, RA_STREAM_ATTENTION);
}

/* Runs a prepared forward on the given path. */
static ra_status attention_run(ra_context *ctx, ra_attention_path path,
                               const ra_attention_args *args)
{
    const ra_tensor *q = args->q;
    size_t bytes = ra_attention_scratch_bytes(path, q->shape[0], q->shape[1], args->k->shape[1],
                                              q->shape[2], args->k->shape[2], q->shape[3],
                                              ra_parallel_threads(ctx));
    if (bytes == 0)
        return ra_fail(RA_ERR_OVERFLOW, "q " RA_DIMS_FMT ": the %s path's scratch overflows",
                       RA_DIMS(q->shape), path == RA_PATH_REFERENCE ? "reference" : "flash");
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, bytes, &scratch));
    if (path == RA_PATH_REFERENCE)
        ra_attention_reference(args, scratch.data);
    else
        ra_attention_flash(ctx, args, scratch.data);
    ra_scratch_release(&scratch);
    return RA_OK;
}

RA_API ra_status ra_attention(ra_context *ctx, const ra_tensor *out, const ra_tensor *q,
                              const ra_tensor *k, const ra_tensor *v,
                              const ra_attention_options *options)
{
    ra_error_reset();
    ra_attention_options o;
    RA_TRY(ra_attention_options_read(&o, options));
    ra_attention_args args;
    RA_TRY(ra_attention_prepare(&args, out, q, k, v, &o));
    return attention_run(ctx, o.path, &args);
}

RA_API ra_status ra_attention_forward_lse(ra_context *ctx, const ra_tensor *out, float *lse,
                                          const ra_tensor *q, const ra_tensor *k,
                                          const ra_tensor *v,
                                          const ra_attention_options *options)
{
    ra_error_reset();
    ra_attention_options o;
    RA_TRY(ra_attention_options_read(&o, options));
    const ra_attention_path path = o.path;
    if (!lse) return ra_fail(RA_ERR_NULL, "lse is NULL");
    ra_attention_args args;
    RA_TRY(ra_attention_prepare(&args, out, q, k, v, &o));
    /* lse [B, H, S] as a view, for the overlap checks (q's sizes fit). */
    ra_tensor lse_view = ra_tensor_4d(lse, RA_F32, q->shape[0], q->shape[2], q->shape[1], 1);
    const ra_tensor *const read[4] = {out, q, k, v};
    static const char *const read_names[4] = {"out", "q", "k", "v"};
    for (int i = 0; i < 4; i++)
        if (ra_tensors_overlap(&lse_view, read[i]))
            return ra_fail(RA_ERR_ARGUMENT, "lse overlaps %s", read_names[i]);
    RA_TRY(ra_attention_mask_check_output(&args.mask, &lse_view, "lse"));
    args.lse = lse;
    return attention_run(ctx, path, &args);
}
