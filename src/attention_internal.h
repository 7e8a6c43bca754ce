/*
 * attention_internal.h — the attention kernels behind ra_attention and
 * ra_layer_forward (internal).
 *
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]   float32 strided views
 */
#ifndef RA_ATTENTION_INTERNAL_H
#define RA_ATTENTION_INTERNAL_H

#include "dropout.h"
#include "internal.h"

typedef struct ra_attention_args {
    const ra_tensor *out, *q, *k, *v;
    int dropout;          /* nonzero: apply mask to the probabilities */
    ra_dropout_mask mask; /* stream RA_STREAM_ATTENTION */
} ra_attention_args;

/* Validates the views and the dropout; fills args. */
ra_status ra_attention_prepare(ra_attention_args *args, const ra_tensor *out,
                               const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                               const ra_dropout *dropout);

/* Scratch bytes the path needs for these sizes and thread count; 0 when
 * that does not fit in memory. */
size_t ra_attention_scratch_bytes(ra_attention_path path, int64_t seq, int64_t n_heads,
                                  int64_t n_kv_heads, int64_t head_dim, int threads);

/* The seed's masked path, materializing [S, S] scores per head, on the
 * calling thread.  scratch: ra_attention_scratch_bytes(REFERENCE) bytes. */
void ra_attention_reference(const ra_attention_args *args, float *scratch);

/* Tiled attention with an online softmax, threads over (b, kv head, query
 * block) tasks.  scratch: ra_attention_scratch_bytes(FLASH, threads). */
void ra_attention_flash(ra_context *ctx, const ra_attention_args *args, float *scratch);

/* Row pointer of (b, s, h) in a float32 view. */
static inline float *ra_row(const ra_tensor *t, int64_t b, int64_t s, int64_t h)
{
    return (float *)t->data + b * t->stride[0] + s * t->stride[1] + h * t->stride[2];
}

#endif
