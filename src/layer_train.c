/*
 * layer_train.c — the tape and the layer's training forward: the inference
 * forward's steps, with the activations the backward needs written into the
 * tape instead of scratch, and the attention's per-row log-sum-exp kept.
 *
 *   x [B, S, dim] -> xq, xk (rotated), xv -> attention -> attn -> y
 *   tape: xq [B, S, H, D], xk, xv [B, S, Hkv, D], attn [B, S, H, D],
 *         lse [B, H, S], positions, padding and documents, path, dropout,
 *         and the pointer x
 */
#include <stdlib.h>
#include <string.h>

#include "layer_internal.h"
#include "layer_tape.h"
#include "layer_mla.h"

static void tape_free(ra_layer_tape *tape)
{
    free(tape->activations);
    free(tape->ids);
    free(tape->starts);
    free(tape->padding);
    free(tape->cu_seqlens);
    free(tape);
}

RA_API ra_status ra_layer_tape_create(ra_layer_tape **out, const ra_layer *layer,
                                      int64_t max_tokens)
{
    ra_error_reset();
    if (!out || !layer) return ra_fail(RA_ERR_NULL, "%s is NULL", out ? "layer" : "out");
    *out = NULL;
    if (max_tokens <= 0)
        return ra_fail(RA_ERR_SIZE, "max_tokens %lld: must be >= 1", (long long)max_tokens);
    const ra_layer_config *c = &layer->config;
    /* Floats: xq and attn (and gated_output's gate), tokens * H * D each; xk
     * and xv, tokens * Hkv * D each; lse, tokens * H: at most 6 * tokens *
     * max(dim, H * D); the
     * backward's scratch takes up to 12 times that, which must fit.  ids (or 2-D or
     * 3-D ids) and starts: 4 * max_tokens int64, the bytes of 8 * max_tokens
     * floats. */
    const int64_t q_dim = c->n_heads * c->head_dim;
    int64_t n_q, n_wide, bound;
    if (ra_mul(max_tokens, q_dim, &n_q) != RA_OK ||
        ra_mul(max_tokens, c->dim > q_dim ? c->dim : q_dim, &n_wide) != RA_OK ||
        ra_mul(n_wide, 12, &bound) != RA_OK || ra_mul(max_tokens, 8, &bound) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "max_tokens %lld: the tape and the backward's scratch "
                       "would overflow", (long long)max_tokens);
    const int64_t floats = (c->gated_output ? 3 : 2) * n_q +
                           2 * max_tokens * c->n_kv_heads * c->head_dim + max_tokens * c->n_heads;
    ra_layer_tape *tape = calloc(1, sizeof *tape);
    if (!tape) return ra_fail(RA_ERR_NOMEM, "allocating the tape");
    tape->activations = ra_alloc((size_t)floats * sizeof(float));
    tape->ids = malloc(3 * (size_t)max_tokens * sizeof(int64_t));
    tape->starts = malloc((size_t)max_tokens * sizeof(int64_t));
    tape->padding = malloc((size_t)max_tokens);
    tape->cu_seqlens = malloc((size_t)(max_tokens + 1) * sizeof(int64_t));
    if (!tape->activations || !tape->ids || !tape->starts || !tape->padding ||
        !tape->cu_seqlens) {
        tape_free(tape);
        return ra_fail(RA_ERR_NOMEM, "allocating the tape's %zu bytes of activations",
                       (size_t)floats * sizeof(float) + (size_t)max_tokens +
                           (5 * (size_t)max_tokens + 1) * sizeof(int64_t));
    }
    tape->layer = layer;
    tape->layer_serial = layer->serial;
    tape->max_tokens = max_tokens;
    *out = tape;
    return RA_OK;
}

RA_API void ra_layer_tape_destroy(ra_layer_tape *tape)
{
    if (!tape) return;
    if (tape->steps > 0) /* their views are its activations: the last one frees it */
        tape->destroyed = 1;
    else
        tape_free(tape);
}

void ra_layer_tape_release(ra_layer_tape *tape)
{
    if (--tape->steps == 0 && tape->destroyed) tape_free(tape);
}

/* The call's positions, padding and documents, copied into the tape (the
 * backward reads them after the caller may have reused its arrays; the
 * call was checked, so they fit). */
static void keep_call(ra_layer_tape *tape)
{
    ra_attention_options *o = &tape->call.attn;
    if (o->padding_mask) {
        memcpy(tape->padding, o->padding_mask, (size_t)tape->call.tokens);
        o->padding_mask = tape->padding;
    }
    if (o->cu_seqlens) {
        memcpy(tape->cu_seqlens, o->cu_seqlens, (size_t)(o->n_documents + 1) * sizeof(int64_t));
        o->cu_seqlens = tape->cu_seqlens;
    }
    ra_positions *p = &tape->call.pos;
    if (p->mrope_ids) { /* [3, tokens] from [3, stride] */
        for (int c = 0; c < 3; c++)
            memcpy(tape->ids + c * tape->call.tokens, p->mrope_ids + c * p->mrope_stride,
                   (size_t)tape->call.tokens * sizeof(int64_t));
        p->mrope_ids = tape->ids;
        p->mrope_stride = tape->call.tokens;
    }
    if (p->ids) {
        memcpy(tape->ids, p->ids, (size_t)tape->call.tokens * sizeof(int64_t));
        p->ids = tape->ids;
    }
    if (p->axial_ids) { /* [tokens, 2] (row, column) */
        memcpy(tape->ids, p->axial_ids, 2 * (size_t)tape->call.tokens * sizeof(int64_t));
        p->axial_ids = tape->ids;
    }
    if (p->starts) {
        memcpy(tape->starts, p->starts, (size_t)tape->call.batch * sizeof(int64_t));
        p->starts = tape->starts;
    }
}

/* The tape suits this call. */
static ra_status check_tape(const ra_layer_tape *tape, const ra_layer *layer,
                            const ra_layer_call *call)
{
    if (!tape) return ra_fail(RA_ERR_NULL, "tape is NULL");
    if (!ra_layer_tape_is_for(tape, layer))
        return ra_fail(RA_ERR_ARGUMENT, "tape was made for another layer (or for a destroyed "
                       "layer whose address this one took)");
    if (tape->steps > 0) /* it would overwrite what that step reads */
        return ra_fail(RA_ERR_ARGUMENT, "tape is held by an unfinished step (a training or "
                       "backward step: ra_layer_step_finish or ra_layer_step_cancel it first)");
    if (call->tokens > tape->max_tokens)
        return ra_fail(RA_ERR_SIZE, "batch %lld * seq %lld tokens exceed the tape's max_tokens "
                       "%lld", (long long)call->batch, (long long)call->seq,
                       (long long)tape->max_tokens);
    return RA_OK;
}

/* The checks of ra_layer_forward_train; then the call recorded in the
 * tape, which is left empty until the forward completes. */
static ra_status record(ra_layer_tape *tape, const ra_layer *layer, const float *y,
                        const float *x, int64_t batch, int64_t seq,
                        const ra_positions *positions, const ra_attention_options *options)
{
    ra_layer_call call;
    RA_TRY(ra_layer_check_call(layer, y, x, batch, seq, positions, options, &call));
    RA_TRY(check_tape(tape, layer, &call));
    tape->filled = 0;
    tape->call = call;
    tape->x = x;
    keep_call(tape);
    return RA_OK;
}

/* The training forward up to its attention: the panel, wo's input where
 * it is not the attention's output (which the tape keeps: [B, S, H * D],
 * in the outer workspace; attention takes the other), q, k and v into the
 * tape; the views for the attention. */
static ra_status train_start(ra_layer_step *step, float *y, ra_layer_tape *tape)
{
    const ra_layer *layer = step->layer;
    step->y = y;
    step->x = tape->x;
    step->tape = tape;
    RA_TRY(ra_layer_step_gemm(step, 0));
    if (ra_layer_output_changes(layer))
        RA_TRY(ra_scratch_acquire_outer(step->memory, (size_t)tape->call.n_q * sizeof(float),
                                        &step->o));
    ra_layer_tape_views v = ra_layer_tape_views_of(tape);
    ra_layer_qkv(layer, step->ctx, &step->mm, tape->x, &v.xq, &v.xk, &v.xv, &tape->call, 1);
    ra_layer_tape_step_views(&step->views, &v);
    step->views.options = tape->call.attn; /* output = attention(xq, xk, xv), attn_dropout */
    return RA_OK;
}

ra_status ra_layer_train_begin(ra_layer_step *step, float *y, ra_layer_tape *tape,
                               const float *x, int64_t batch, int64_t seq,
                               const ra_positions *positions,
                               const ra_attention_options *options)
{
    if (step->layer && step->layer->config.kv_lora_rank)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_forward_train_begin with a latent "
                       "attention (MLA) layer (its k and v differ in width)");
    RA_TRY(record(tape, step->layer, y, x, batch, seq, positions, options));
    return train_start(step, y, tape);
}

void ra_layer_train_finish(ra_layer_step *step)
{
    ra_layer_tape *tape = step->tape;
    const ra_layer_tape_views v = ra_layer_tape_views_of(tape);
    float *o = step->o.data;
    if (o) memcpy(o, v.attn.data, (size_t)tape->call.n_q * sizeof(float));
    ra_layer_output(step->layer, &step->mm, step->y, o ? o : v.attn.data, tape->x, v.gate,
                    &tape->call);
    tape->filled = 1;
}

RA_API ra_status ra_layer_forward_train(ra_context *ctx, const ra_layer *layer, float *y,
                                        ra_layer_tape *tape, const float *x, int64_t batch,
                                        int64_t seq, const ra_positions *positions,
                                        const ra_attention_options *options)
{
    ra_error_reset();
    RA_TRY(record(tape, layer, y, x, batch, seq, positions, options));
    if (layer->config.kv_lora_rank) {
        ra_status status = ra_mla_forward_train(layer, ctx, y, tape, x);
        tape->filled = status == RA_OK;
        return status;
    }
    ra_layer_step step = {.kind = RA_STEP_TRAIN, .layer = layer, .ctx = ctx, .memory = ctx};
    ra_status status = train_start(&step, y, tape);
    const ra_layer_step_views *v = &step.views;
    if (status == RA_OK) /* else scratch memory only: y is untouched */
        status = ra_attention_forward_lse(ctx, &v->out, v->lse, &v->q, &v->k, &v->v,
                                          &v->options);
    if (status == RA_OK) ra_layer_train_finish(&step);
    ra_layer_step_release(&step);
    return status;
}
