/*
 * layer_step.c — a layer call in phases (ra_layer_step): the layer runs up
 * to its attention and hands out views of q, k and v; the caller attends
 * (libropeattn_mpi: over every rank's shard) into the step's buffers; the
 * step's finish runs the rest of the call.  The forward and cached steps
 * are here; the training and backward steps are their calls' own
 * (layer_train.c, layer_backward.c), which run as steps on the stack.
 *
 *   forward, cached: x -> q, k, v (rotated at the call's positions)
 *                    | the caller: out (and lse) |  out -> y
 *   training:        the same, with q, k, v, out and lse the tape's
 *   backward:        dy -> dout | the caller: dq, dk, dv |  -> dx, gradients
 */
#include "layer_internal.h"
#include "layer_tape.h"
#include "rope_internal.h"

/* A latent attention layer, refused by a step (fn names it). */
static ra_status refuse_latent(const ra_layer *layer, const char *fn)
{
    if (!layer->config.kv_lora_rank) return RA_OK;
    return ra_fail(RA_ERR_UNSUPPORTED, "%s with a latent attention (MLA) layer (its k and v "
                   "differ in width)", fn);
}

/* The forward and cached steps' buffers, from the step's memory: q, k, v,
 * the attention's output and (with_lse) its lse, and the panel; then q, k
 * and v of x at the call's positions.
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]   lse: [B, H, S] */
static ra_status forward_start(ra_layer_step *step, float *y, const float *x, int with_lse)
{
    const ra_layer_config *c = &step->layer->config;
    const ra_layer_call *call = &step->call;
    const int64_t B = call->batch, S = call->seq, H = c->n_heads, Hkv = c->n_kv_heads;
    const int64_t D = c->head_dim, n_q = call->n_q, n_kv = call->tokens * Hkv * D; /* <= n_q */
    int64_t floats; /* 2 n_q + 2 n_kv + B H S <= 5 n_q */
    if (ra_mul(n_q, 5, &floats) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "batch %lld, seq %lld: the step's buffers overflow",
                       (long long)B, (long long)S);
    floats = 2 * n_q + 2 * n_kv + (with_lse ? B * H * S : 0);
    step->y = y;
    step->x = x;
    RA_TRY(ra_layer_step_gemm(step, call->tokens));
    RA_TRY(ra_scratch_acquire_outer(step->memory, (size_t)floats * sizeof(float), &step->scratch));
    float *buf = step->scratch.data;
    ra_layer_step_views *v = &step->views;
    v->q = ra_tensor_4d(buf, RA_F32, B, S, H, D);
    v->k = ra_tensor_4d(buf + n_q, RA_F32, B, S, Hkv, D);
    v->v = ra_tensor_4d(buf + n_q + n_kv, RA_F32, B, S, Hkv, D);
    v->out = ra_tensor_4d(buf + n_q + 2 * n_kv, RA_F32, B, S, H, D);
    v->lse = with_lse ? buf + 2 * n_q + 2 * n_kv : NULL;
    v->options = call->attn;
    ra_layer_qkv(step->layer, step->ctx, &step->mm, x, &v->q, &v->k, &v->v, call, 1);
    return RA_OK;
}

/* ra_layer_forward's checks, then its steps up to the attention. */
static ra_status forward_begin(ra_layer_step *step, float *y, const float *x, int64_t batch,
                               int64_t seq, const ra_positions *positions,
                               const ra_attention_options *options)
{
    RA_TRY(ra_layer_check_call(step->layer, y, x, batch, seq, positions, options, &step->call));
    RA_TRY(refuse_latent(step->layer, "ra_layer_forward_begin"));
    return forward_start(step, y, x, 1);
}

/* A cached step's checks (ra_layer_forward_cached's, but the cache's),
 * then its steps up to the attention; its options are the layer's masks. */
static ra_status cached_begin(ra_layer_step *step, float *y, const float *x, int64_t batch,
                              int64_t seq, const ra_positions *positions)
{
    const ra_layer *layer = step->layer;
    if (!layer || !y || !x)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !layer ? "layer" : !y ? "y" : "x");
    const char *fn = "ra_layer_forward_cached_begin";
    RA_TRY(refuse_latent(layer, fn));
    RA_TRY(ra_layer_refuse_axial(layer, fn));
    RA_TRY(ra_layer_refuse_non_causal(layer, fn));
    RA_TRY(ra_layer_check_keys_elsewhere(layer, "a phased cached step "
                                         "(ra_layer_forward_cached_begin)"));
    if (!positions)
        return ra_fail(RA_ERR_ARGUMENT, "%s needs positions (there is no cache to continue "
                       "from)", fn);
    ra_layer_call *call = &step->call;
    RA_TRY(ra_layer_call_sizes(layer, batch, seq, call));
    RA_TRY(ra_layer_check_y_apart(layer, y, call->n_x));
    RA_TRY(ra_positions_read(&call->pos, positions, layer->rope, batch, seq, 0));
    const ra_layer_config *c = &layer->config;
    call->attn = ra_attention_options_init();
    call->attn.window = c->window;
    call->attn.chunk = c->chunk;
    call->attn.softcap = c->softcap;
    call->attn.sinks = layer->weights.sinks;
    return forward_start(step, y, x, 0);
}

/* y from the attention's output (o_norm, the gate into q's buffer, wo). */
static void forward_finish(ra_layer_step *step)
{
    ra_layer_output(step->layer, &step->mm, step->y, step->views.out.data, step->x,
                    step->views.q.data, &step->call);
}

/* A public step of kind on ctx, zeroed, its buffers its own. */
static ra_status step_new(ra_layer_step **out, ra_step_kind kind, ra_context *ctx,
                          const ra_layer *layer, ra_layer_step **step)
{
    ra_error_reset();
    if (!out) return ra_fail(RA_ERR_NULL, "out is NULL");
    *out = NULL;
    *step = ra_calloc(1, sizeof **step);
    if (!*step) return ra_fail(RA_ERR_NOMEM, "allocating the step");
    (*step)->kind = kind;
    (*step)->layer = layer;
    (*step)->ctx = ctx;
    (*step)->memory = NULL;
    return RA_OK;
}

/* *out = step when its begin gave RA_OK (it then holds its layer, and a
 * training or backward step its tape, until finished or cancelled); else
 * the step freed. */
static ra_status step_begun(ra_layer_step **out, ra_layer_step *step, ra_status status)
{
    if (status != RA_OK) { /* neither the layer nor the tape held */
        ra_layer_step_release(step);
        ra_free(step);
        return status;
    }
    ra_layer_hold(step->layer);
    if (step->tape) step->tape->steps++;
    step->views.struct_size = sizeof step->views;
    *out = step;
    return RA_OK;
}

RA_API ra_status ra_layer_forward_begin(ra_layer_step **out, ra_context *ctx,
                                        const ra_layer *layer, float *y, const float *x,
                                        int64_t batch, int64_t seq,
                                        const ra_positions *positions,
                                        const ra_attention_options *options)
{
    ra_layer_step *step;
    RA_TRY(step_new(out, RA_STEP_FORWARD, ctx, layer, &step));
    return step_begun(out, step, forward_begin(step, y, x, batch, seq, positions, options));
}

RA_API ra_status ra_layer_forward_train_begin(ra_layer_step **out, ra_context *ctx,
                                              const ra_layer *layer, float *y,
                                              ra_layer_tape *tape, const float *x,
                                              int64_t batch, int64_t seq,
                                              const ra_positions *positions,
                                              const ra_attention_options *options)
{
    ra_layer_step *step;
    RA_TRY(step_new(out, RA_STEP_TRAIN, ctx, layer, &step));
    return step_begun(out, step,
                      ra_layer_train_begin(step, y, tape, x, batch, seq, positions, options));
}

RA_API ra_status ra_layer_forward_cached_begin(ra_layer_step **out, ra_context *ctx,
                                               const ra_layer *layer, float *y, const float *x,
                                               int64_t batch, int64_t seq,
                                               const ra_positions *positions)
{
    ra_layer_step *step;
    RA_TRY(step_new(out, RA_STEP_CACHED, ctx, layer, &step));
    return step_begun(out, step, cached_begin(step, y, x, batch, seq, positions));
}

RA_API ra_status ra_layer_backward_begin(ra_layer_step **out, ra_context *ctx,
                                         const ra_layer *layer, float *dx,
                                         const ra_layer_grads *grads,
                                         const ra_layer_tape *tape, const float *dy)
{
    ra_layer_step *step;
    RA_TRY(step_new(out, RA_STEP_BACKWARD, ctx, layer, &step));
    return step_begun(out, step, ra_layer_back_begin(step, dx, grads, tape, dy));
}

RA_API const ra_layer_step_views *ra_layer_step_get_views(const ra_layer_step *step)
{
    return step ? &step->views : NULL;
}

RA_API ra_status ra_layer_step_finish(ra_layer_step *step)
{
    ra_error_reset();
    if (!step) return ra_fail(RA_ERR_NULL, "step is NULL");
    if (step->kind == RA_STEP_TRAIN)
        ra_layer_train_finish(step);
    else if (step->kind == RA_STEP_BACKWARD)
        ra_layer_back_finish(step);
    else
        forward_finish(step);
    ra_layer_step_cancel(step);
    return RA_OK;
}

RA_API void ra_layer_step_cancel(ra_layer_step *step)
{
    if (!step) return;
    ra_layer_step_release(step);
    if (step->tape) ra_layer_tape_release(step->tape);
    ra_layer_release(step->layer);
    ra_free(step);
}
