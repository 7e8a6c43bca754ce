/*
 * layer_backward.c — the backward of LLaMA's Attention module: its
 * forward lines in reverse, each step quoting the line it differentiates.
 *
 *   dy [B, S, dim]
 *   -> g = dy * resid mask                      [B, S, dim]
 *   -> dattn = g wo                             [B, S, H * D]
 *   -> dattn through o_norm (BitNet), and do_norm (+)=, and through the
 *      gate (Qwen3-Next: dattn * sigmoid(gate), and the gate's gradient;
 *      softplus, per head: layer_gate.c), from the tape's attention output
 *      and gate
 *   -> dq, dk, dv = attention backward          [B, S, H or Hkv, D]
 *      (from the tape's rotated q, k, v, attn and lse; attn_dropout's mask
 *      regenerated from the seed)
 *   -> dq, dk = R^T dq, R^T dk                  (RoPE with RA_INVERSE)
 *   -> dq *= scale sqrt(D), where the layer's softmax scale is not 1/sqrt(D),
 *      and by Llama 4's or Ministral 3's temperature (temperature_floor)
 *   -> dq, dk through the L2 norm (qk_l2_norm)
 *   -> dq, dk through the q and k norms, where the layer has them (from
 *      q and k recomputed before the norms), and dq_norm (+)=, dk_norm (+)=
 *      (and their biases', dq_norm_bias (+)= the sum of dq's rows ...)
 *      (with norm_after_rope, the norms come first and R^T after them)
 *   -> dv = R^T dv (rope_values: RoFormer's rotary_value)
 *   -> dv times v_scale (MiMo-V2-Flash), then through v_norm (Gemma 3n), from v
 *      recomputed before it
 *   -> dq, dk, dv zero where clip_qkv clamped q, k, v (q and k: before the
 *      norms' gradient where clip_after_norm clamped their outputs)
 *   -> dwo (+)= g^T o (o: wo's input, recomputed), dwq (+)= dq^T x, dwk (+)= dk^T x, dwv (+)= dv^T x
 *      and, for the biases the layer has, dbo (+)= sum of g's rows, dbq of
 *      dq's, dbk of dk's, dbv of dv's
 *   -> dx = dq wq + dk wk + dv wv               [B, S, dim]
 *      (+ the gate's gradient times its rows of wq, or wgate; dwgate,
 *      dbgate (+)=)
 *      (a fused wqkv: the same, group by group, into dwqkv and dbqkv)
 *
 * Nothing the caller owns is written before the one call that can fail (the
 * attention's backward, for scratch memory).
 */
#include <string.h>

#include "gemm.h"
#include "layer_tape.h"
#include "layer_mla.h"
#include "parallel.h"

static ra_status check_backward(const ra_layer *layer, const float *dx, const ra_layer_grads *g,
                                const ra_layer_tape *tape, const float *dy)
{
    const ra_layer_weights *w = &layer->weights;
    const int fused = w->wqkv != NULL;
    if (!g->dwo) return ra_fail(RA_ERR_NULL, "ra_layer_grads: dwo is NULL");
    if (fused && !g->dwqkv)
        return ra_fail(RA_ERR_NULL, "ra_layer_grads: dwqkv is NULL (the layer has wqkv)");
    if (!fused && (!g->dwq || !g->dwk || !g->dwv))
        return ra_fail(RA_ERR_NULL, "ra_layer_grads: %s is NULL",
                       !g->dwq ? "dwq" : !g->dwk ? "dwk" : "dwv");
    /* Each bias's and norm's gradient, required where the layer has it
     * (the weight's name is the gradient's without its d). */
    const struct {
        const float *weight, *grad;
        const char *name;
    } needed[] = {{w->bq, g->dbq, "dbq"}, {w->bk, g->dbk, "dbk"}, {w->bv, g->dbv, "dbv"},
                  {w->bo, g->dbo, "dbo"}, {w->bqkv, g->dbqkv, "dbqkv"},
                  {w->q_norm, g->dq_norm, "dq_norm"}, {w->k_norm, g->dk_norm, "dk_norm"},
                  {w->sinks, g->dsinks, "dsinks"}, {w->o_norm, g->do_norm, "do_norm"},
                  {w->q_norm_bias, g->dq_norm_bias, "dq_norm_bias"},
                  {w->k_norm_bias, g->dk_norm_bias, "dk_norm_bias"},
                  {w->wgate, g->dwgate, "dwgate"}, {w->bgate, g->dbgate, "dbgate"}};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (needed[i].weight && !needed[i].grad)
            return ra_fail(RA_ERR_NULL, "ra_layer_grads: %s is NULL (the layer has %s)",
                           needed[i].name, needed[i].name + 1);
    const ra_layer_config *c = &layer->config;
    const int64_t D = c->head_dim, q_dim = c->n_heads * D, kv = c->n_kv_heads * D;
    const int64_t n_x = tape->call.n_x, n_wq = q_dim * c->dim, n_wkv = kv * c->dim;
    const int64_t n_wgate = ra_layer_gate_width(c) * c->dim;
    const int64_t q_rows = c->gated_output && !w->wgate ? 2 * q_dim : q_dim; /* wq's, bq's */
    const ra_layer_norm_shape qn = ra_layer_norm_shape_of(c, c->n_heads, 1),
                              kn = ra_layer_norm_shape_of(c, c->n_kv_heads, 1);
    const int64_t n_qn = qn.weight_rows * qn.d, n_kn = kn.weight_rows * kn.d; /* norms */
    /* what it writes (a bias's or norm's gradient only where the layer has
     * it) */
    const ra_layer_span outputs[] = {
        {dx, n_x, "dx"}, {fused ? NULL : g->dwq, q_rows * c->dim, "dwq"},
        {fused ? NULL : g->dwk, n_wkv, "dwk"}, {fused ? NULL : g->dwv, n_wkv, "dwv"},
        {g->dwo, n_wq, "dwo"}, {w->bq ? g->dbq : NULL, q_rows, "dbq"},
        {w->bk ? g->dbk : NULL, kv, "dbk"}, {w->bv ? g->dbv : NULL, kv, "dbv"},
        {w->bo ? g->dbo : NULL, c->dim, "dbo"},
        {w->q_norm ? g->dq_norm : NULL, n_qn, "dq_norm"},
        {w->k_norm ? g->dk_norm : NULL, n_kn, "dk_norm"},
        {fused ? g->dwqkv : NULL, n_wq + 2 * n_wkv, "dwqkv"},
        {w->bqkv ? g->dbqkv : NULL, q_dim + 2 * kv, "dbqkv"},
        {w->sinks ? g->dsinks : NULL, c->n_heads, "dsinks"},
        {w->o_norm ? g->do_norm : NULL, q_dim, "do_norm"},
        {w->q_norm_bias ? g->dq_norm_bias : NULL, n_qn, "dq_norm_bias"},
        {w->k_norm_bias ? g->dk_norm_bias : NULL, n_kn, "dk_norm_bias"},
        {w->wgate ? g->dwgate : NULL, n_wgate, "dwgate"},
        {w->bgate ? g->dbgate : NULL, c->n_heads, "dbgate"}};
    /* what it reads: the layer's weights, dy and the tape's x */
    ra_layer_span inputs[RA_LAYER_SPANS + 2];
    int n_in = ra_layer_weight_spans(layer, inputs);
    inputs[n_in++] = (ra_layer_span){dy, n_x, "dy"};
    inputs[n_in++] = (ra_layer_span){tape->x, n_x, "x (kept by the tape)"};
    const int n_out = sizeof outputs / sizeof outputs[0];
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i].p) continue;
        for (int j = i + 1; j < n_out; j++)
            if (outputs[j].p &&
                ra_floats_overlap(outputs[i].p, outputs[i].n, outputs[j].p, outputs[j].n))
                return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", outputs[i].name,
                               outputs[j].name);
        for (int j = 0; j < n_in; j++)
            if (inputs[j].p &&
                ra_floats_overlap(outputs[i].p, outputs[i].n, inputs[j].p, inputs[j].n))
                return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", outputs[i].name,
                               inputs[j].name);
    }
    return RA_OK;
}

/* db (+)= the sum of d's rows [rows, cols], in row order; no bias: nothing. */
static void bias_grad(float *db, const float *bias, const float *d, int64_t rows, int64_t cols,
                      int accumulate)
{
    if (!bias) return;
    if (!accumulate) memset(db, 0, (size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < cols; i++) db[i] += d[r * cols + i];
}

/* Projection pj's gradients from d [T, groups * rows], its output's: dw
 * (+)= d^T x and db (+)= the sum of d's rows (db NULL: no bias), laid out as
 * pj's weight and bias; dx (+)= d w (beta 0: =). */
static void proj_grad(const ra_gemm_env *mm, float *dw, float *db, float *dx,
                      const ra_layer_proj *pj, const float *d, const float *x, int64_t T,
                      int64_t dim, float beta, int accumulate)
{
    const int64_t ld = pj->groups * pj->rows;
    for (int64_t g = 0; g < pj->groups; g++) {
        const float *dg = d + g * pj->rows;
        const void *wg = ra_gemm_weight_at(pj->w, mm->dtype, g * pj->stride * dim);
        ra_gemm_tn(dw + g * pj->stride * dim, dg, ld, x, pj->rows, dim, T,
                   accumulate ? 1.0f : 0.0f);
        ra_gemm_nn_w(mm, dx, dg, ld, wg, T, dim, pj->rows, g == 0 ? beta : 1.0f);
        if (!db) continue;
        float *dbg = db + g * pj->stride;
        if (!accumulate) memset(dbg, 0, (size_t)pj->rows * sizeof(float));
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < pj->rows; i++) dbg[i] += dg[t * ld + i];
    }
}

/* g through a norm (NULL weight: none) at its input x; dweight (+)=, and
 * where it has a bias, dbias (+)= the sum of g's rows (out = ... + bias). */
static void norm_grad(float *g, float *dweight, float *dbias, const float *x,
                      const float *weight, const float *bias, const ra_layer_norm_shape *n,
                      int accumulate)
{
    if (!weight) return;
    const int64_t n_weights = n->weight_rows * n->d;
    if (!accumulate) memset(dweight, 0, (size_t)n_weights * sizeof(float));
    if (bias && !accumulate) memset(dbias, 0, (size_t)n_weights * sizeof(float));
    for (int64_t r = 0; bias && r < n->rows; r++) {
        float *db = dbias + (r % n->weight_rows) * n->d;
        for (int64_t i = 0; i < n->d; i++) db[i] += g[r * n->d + i];
    }
    ra_layer_norm_backward(g, dweight, x, weight, n);
}

/* g = 0 unless -limit <= x <= limit (the float32 limit, as the forward's
 * clamp; a NaN x stops its gradient, as torch's clamp does). */
static void clip_grad(float *g, const float *x, int64_t n, double limit)
{
    const float hi = (float)limit;
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] >= -hi && x[i] <= hi)) g[i] = 0.0f;
}

/* Where the steps between the attention and wo put their values (each
 * [T, H D], dweight [H D]; those of the steps the layer lacks unused). */
typedef struct output_buffers {
    float *gated;   /* attn * act(gate) (gated_output) */
    float *normed;  /* o_norm's output */
    float *dgate;   /* the gate's gradient */
    float *dweight; /* o_norm's gradient */
} output_buffers;

/* wo's input o from the attention's output attn [T, H D]: attn itself, or
 * attn * act(gate) (Qwen3-Next's gate, gated_output) and then o_norm
 * (BitNet's attn_sub_norm); d, o's gradient, taken back to attn's in
 * place, through the norm (o_norm's gradient into b->dweight) and the gate
 * (its gradient into b->dgate). */
static const float *output_back(const ra_layer *layer, float *d, const output_buffers *b,
                                const float *attn, const float *gate, int64_t T)
{
    const ra_layer_weights *w = &layer->weights;
    const ra_layer_norm_shape n = ra_layer_o_norm_shape(&layer->config, T);
    const int64_t count = T * n.d;
    const float *o = attn, *normed_in = attn;
    const int gated = layer->config.gated_output;
    if (gated) { /* attn_output = attn_output * torch.sigmoid(gate) */
        memcpy(b->gated, attn, (size_t)count * sizeof(float));
        ra_layer_gate_apply(layer, b->gated, gate, T);
        o = normed_in = b->gated;
    }
    if (w->o_norm) { /* attn_output = self.attn_sub_norm(attn_output) */
        memcpy(b->normed, normed_in, (size_t)count * sizeof(float));
        ra_layer_norm(b->normed, w->o_norm, NULL, &n);
        memset(b->dweight, 0, (size_t)n.d * sizeof(float));
        ra_layer_norm_backward(d, b->dweight, normed_in, w->o_norm, &n);
        o = b->normed;
    }
    if (gated) ra_layer_gate_back(layer, d, b->dgate, attn, gate, T);
    return o;
}

/* dq = R^T dq, dk = R^T dk: RoPE's backward at the forward's positions. */
static void rotate_back(ra_context *ctx, const ra_layer *layer, const ra_tensor *dq,
                        const ra_tensor *dk, const ra_positions *pos)
{
    ra_rope_apply(ctx, layer->rope, dq, dq, pos, RA_INVERSE);
    ra_rope_apply(ctx, layer->rope, dk, dk, pos, RA_INVERSE);
}

/* The checks before the layer kind's: grads read into *read, the tape
 * filled for layer, the forward's keys (as it checked them). */
static ra_status check_args(const ra_layer *layer, const float *dx, const ra_layer_grads *grads,
                            const ra_layer_tape *tape, const float *dy, ra_layer_grads *read)
{
    if (!grads) return ra_fail(RA_ERR_NULL, "grads is NULL");
    RA_TRY(RA_READ_STRUCT(*read, grads, ra_layer_grads));
    if (!layer || !dx || !tape || !dy)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !layer ? "layer" : !dx ? "dx" : !tape ? "tape"
                                                                            : "dy");
    if (!ra_layer_tape_is_for(tape, layer))
        return ra_fail(RA_ERR_ARGUMENT, "tape was made for another layer (or for a destroyed "
                       "layer whose address this one took)");
    if (!tape->filled)
        return ra_fail(RA_ERR_ARGUMENT, "tape holds no forward (ra_layer_forward_train fills it)");
    return ra_layer_check_keys(layer, &tape->call); /* the forward's, as it checked */
}

/* Floats of v before v_norm, and of the steps between the attention and
 * wo (output_buffers), in the backward's scratch. */
static int64_t v_floats_of(const ra_layer *layer, int64_t n_kv)
{
    return layer->config.v_norm ? n_kv : 0;
}

static int64_t out_floats_of(const ra_layer *layer, int64_t n_q)
{
    const int64_t q_dim = layer->config.n_heads * layer->config.head_dim;
    return (layer->config.gated_output ? 2 * n_q : 0) +
           (layer->weights.o_norm ? n_q + q_dim : 0);
}

/* The backward up to the attention's: the checks of its kind, its
 * scratch, g = dy (resid_dropout's mask), dattn = g wo, back through the
 * output's steps; the views for the attention's backward. */
static ra_status back_start(ra_layer_step *step, float *dx, const ra_layer_tape *tape,
                            const float *dy)
{
    const ra_layer *layer = step->layer;
    ra_layer_back *bk = &step->back;
    const ra_layer_grads *grads = &bk->grads;
    RA_TRY(check_backward(layer, dx, grads, tape, dy));
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const ra_layer_call *call = &tape->call;
    const int64_t B = call->batch, S = call->seq, T = call->tokens, H = c->n_heads;
    const int64_t Hkv = c->n_kv_heads, D = c->head_dim, dim = c->dim, kv = Hkv * D;
    const int64_t q_dim = H * D, n_x = call->n_x, n_q = call->n_q, n_kv = T * kv;
    ra_layer_tape_views v = ra_layer_tape_views_of(tape);

    /* Scratch (the outer workspace: the attention's backward takes the
     * other): g [T, dim], dattn, dq [T, H D] and dk, dv [T, Hkv D]; with
     * q or k norms (or the L2 norm) also q and k before them, [T, H D] and
     * [T, Hkv D]; with clip_qkv q, k and v before the clamp; with both norms
     * and the L2 norm, q and k between them; with gated_output, the gated
     * output and the gate's gradient [T, H D]; with o_norm, its output
     * [T, H D] and its weights' gradient [H D]; with v_norm, v before it
     * [T, Hkv D].  The tape was made with
     * 12 T max(dim, H D) <= RA_MAX_ELEMENTS, so this size fits. */
    const int norms = w->q_norm || w->k_norm, clip = c->clip_qkv > 0, l2 = c->qk_l2_norm;
    const int clip_late = clip && norms && c->clip_after_norm; /* OLMoE: after the norms */
    const int inputs = norms || l2; /* the norms' inputs are needed */
    const int gated = c->gated_output;
    const int64_t out_floats = out_floats_of(layer, n_q);
    const int64_t floats = n_x + 2 * n_q + 2 * n_kv + (inputs ? n_q + n_kv : 0) +
                           (clip ? n_q + 2 * n_kv : 0) +
                           (norms && (l2 || clip_late) ? n_q + n_kv : 0) +
                           v_floats_of(layer, n_kv) + out_floats + H; /* and the sinks' gradient [H] */
    step->y = dx;
    step->tape = (ra_layer_tape *)tape; /* read only */
    bk->dy = dy;
    RA_TRY(ra_layer_step_gemm(step, 0));
    RA_TRY(ra_scratch_acquire_outer(step->memory, (size_t)floats * sizeof(float), &step->scratch));
    float *g = step->scratch.data, *dattn = g + n_x, *dq = dattn + n_q, *dk = dq + n_q;
    float *dv = dk + n_kv;
    ra_layer_step_views *sv = &step->views;
    ra_layer_tape_step_views(sv, &v);
    sv->dout = ra_tensor_4d(dattn, RA_F32, B, S, H, D);
    sv->dq = ra_tensor_4d(dq, RA_F32, B, S, H, D);
    sv->dk = ra_tensor_4d(dk, RA_F32, B, S, Hkv, D);
    sv->dv = ra_tensor_4d(dv, RA_F32, B, S, Hkv, D);

    /* output = self.resid_dropout(output): g = dy * mask (the same mask) */
    memcpy(g, dy, (size_t)n_x * sizeof(float));
    if (call->attn.dropout > 0.0f)
        ra_layer_output_dropout(g, n_x, call->attn.dropout, call->attn.seed);
    /* output = self.wo(output): dattn = g wo (dwo below) */
    ra_gemm_nn_w(&step->mm, dattn, g, dim, w->wo, T, q_dim, dim, 0.0f);
    output_buffers ob;
    ob.gated = g + floats - H - out_floats;
    ob.normed = ob.gated + (gated ? n_q : 0);
    ob.dgate = ob.normed + (w->o_norm ? n_q : 0);
    ob.dweight = ob.dgate + (gated ? n_q : 0);
    bk->g = g;
    bk->o = output_back(layer, dattn, &ob, v.attn.data, v.gate, T);
    bk->gated = ob.gated;
    bk->dgate = ob.dgate;
    bk->do_norm = ob.dweight;
    /* output = attention(xq, xk, xv) with attn_dropout: dq, dk, dv, and
     * the sinks' gradient (added to grads->dsinks when accumulating) */
    bk->dsinks = g + floats - H;
    sv->options = call->attn;
    if (w->sinks) sv->options.dsinks = grads->accumulate ? bk->dsinks : grads->dsinks;
    return RA_OK;
}

ra_status ra_layer_back_begin(ra_layer_step *step, float *dx, const ra_layer_grads *grads,
                              const ra_layer_tape *tape, const float *dy)
{
    RA_TRY(check_args(step->layer, dx, grads, tape, dy, &step->back.grads));
    if (step->layer->config.kv_lora_rank)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_backward_begin with a latent attention "
                       "(MLA) layer (its k and v differ in width)");
    return back_start(step, dx, tape, dy);
}

RA_API ra_status ra_layer_backward(ra_context *ctx, const ra_layer *layer, float *dx,
                                   const ra_layer_grads *grads, const ra_layer_tape *tape,
                                   const float *dy)
{
    ra_error_reset();
    ra_layer_step step = {.kind = RA_STEP_BACKWARD, .layer = layer, .ctx = ctx, .memory = ctx};
    RA_TRY(check_args(layer, dx, grads, tape, dy, &step.back.grads));
    if (layer->config.kv_lora_rank)
        return ra_mla_backward(layer, ctx, dx, &step.back.grads, tape, dy);
    ra_status status = back_start(&step, dx, tape, dy);
    const ra_layer_step_views *v = &step.views;
    if (status == RA_OK)
        status = ra_attention_backward(ctx, &v->dq, &v->dk, &v->dv, &v->dout, &v->q, &v->k,
                                       &v->v, &v->out, v->lse, &v->options);
    if (status == RA_OK) ra_layer_back_finish(&step);
    ra_layer_step_release(&step);
    return status;
}

/* The backward from the attention's dq, dk and dv (and dsinks) on:
 * through RoPE, the scale, the norms and clamps to the projections'
 * gradients and dx. */
void ra_layer_back_finish(ra_layer_step *step)
{
    const ra_layer *layer = step->layer;
    ra_context *ctx = step->ctx;
    const ra_layer_tape *tape = step->tape;
    const ra_layer_grads *grads = &step->back.grads;
    const ra_layer_back *bk = &step->back;
    const ra_gemm_env mm = step->mm;
    float *dx = step->y;
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const ra_layer_call *call = &tape->call;
    const int64_t B = call->batch, S = call->seq, T = call->tokens, H = c->n_heads;
    const int64_t Hkv = c->n_kv_heads, D = c->head_dim, dim = c->dim, kv = Hkv * D;
    const int64_t q_dim = H * D, n_q = call->n_q, n_kv = T * kv;
    const float beta = grads->accumulate ? 1.0f : 0.0f;
    const int norms = w->q_norm || w->k_norm, clip = c->clip_qkv > 0, l2 = c->qk_l2_norm;
    const int clip_late = clip && norms && c->clip_after_norm; /* OLMoE: after the norms */
    const int inputs = norms || l2; /* the norms' inputs are needed */
    const int gated = c->gated_output, vnorm = c->v_norm;
    const int64_t v_floats = v_floats_of(layer, n_kv);
    const ra_tensor tdq = step->views.dq, tdk = step->views.dk;
    float *g = bk->g, *dq = tdq.data, *dk = tdk.data, *dv = step->views.dv.data;
    const float *o = bk->o, *dsinks = bk->dsinks;
    output_buffers ob = {bk->gated, NULL, bk->dgate, bk->do_norm};
    if (w->sinks && grads->accumulate)
        for (int64_t h = 0; h < H; h++) grads->dsinks[h] += dsinks[h];
    for (int64_t i = 0; w->o_norm && i < q_dim; i++)
        grads->do_norm[i] = (grads->accumulate ? grads->do_norm[i] : 0.0f) + ob.dweight[i];
    /* xq, xk = apply_rotary_emb(xq, xk, freqs_cos, freqs_sin): dq = R^T dq, dk = R^T dk
     * (here, or after the norms where they follow RoPE: norm_after_rope) */
    const int norms_after = c->norm_after_rope;
    if (!norms_after) rotate_back(ctx, layer, &tdq, &tdk, &call->pos);
    /* xq *= scale sqrt(D) (a softmax scale other than 1/sqrt(D)), and
     * Llama 4's (Ministral 3's) temperature at each token's position */
    const float q_factor = ra_layer_q_factor(c);
    if (q_factor != 1.0f)
        for (int64_t i = 0; i < n_q; i++) dq[i] *= q_factor;
    ra_layer_temperature(layer, dq, &call->pos, T, S);
    /* The norms' inputs (q_in, k_in, v_in: clamped where the layer clips)
     * and the projections before any clamp (q_raw, k_raw, v_raw),
     * recomputed (q's and k's only where a norm or the clamp needs them). */
    float *q_in = dv + n_kv, *k_in = q_in + n_q, *q_raw = q_in, *k_raw = k_in;
    float *v_in = ob.gated - v_floats, *v_raw = vnorm ? v_in : NULL;
    float *after = k_in + n_kv; /* between the weighted norms and the L2 norm */
    if (clip) {
        q_raw = inputs ? k_in + n_kv : q_in;
        k_raw = q_raw + n_q;
        v_raw = k_raw + n_kv;
        after = v_raw + n_kv;
    }
    if (inputs || clip || vnorm)
        ra_layer_project_qkv(layer, &mm, inputs || clip ? q_raw : NULL,
                             inputs || clip ? k_raw : NULL, v_raw, tape->x, T, 0);
    if (inputs && clip) {
        memcpy(q_in, q_raw, (size_t)n_q * sizeof(float));
        memcpy(k_in, k_raw, (size_t)n_kv * sizeof(float));
        if (!clip_late) ra_layer_clip(q_in, n_q, c->clip_qkv);
        if (!clip_late) ra_layer_clip(k_in, n_kv, c->clip_qkv);
    }
    if (vnorm && clip) {
        memcpy(v_in, v_raw, (size_t)n_kv * sizeof(float));
        ra_layer_clip(v_in, n_kv, c->clip_qkv);
    }
    if (inputs && norms_after) { /* the norms' inputs are the rotated q and k */
        const ra_tensor tq = ra_tensor_4d(q_in, RA_F32, B, S, H, D),
                        tk = ra_tensor_4d(k_in, RA_F32, B, S, Hkv, D);
        ra_rope_apply(ctx, layer->rope, &tq, &tq, &call->pos, RA_FORWARD);
        ra_rope_apply(ctx, layer->rope, &tk, &tk, &call->pos, RA_FORWARD);
    }
    const ra_layer_norm_shape qn = ra_layer_norm_shape_of(c, H, T),
                              kn = ra_layer_norm_shape_of(c, Hkv, T);
    /* xq, xk = l2_norm(xq), l2_norm(xk) (Llama 4; before RoPE here, which
     * keeps a head's RMS), at the weighted norms' outputs */
    if (l2) {
        float *lq = q_in, *lk = k_in;
        if (norms) {
            lq = after;
            lk = after + n_q;
            memcpy(lq, q_in, (size_t)n_q * sizeof(float));
            memcpy(lk, k_in, (size_t)n_kv * sizeof(float));
            ra_layer_qk_norms(layer, lq, lk, T);
        }
        const ra_layer_norm_shape lqn = ra_layer_l2_shape(c, H, T),
                                  lkn = ra_layer_l2_shape(c, Hkv, T);
        ra_layer_norm_backward(dq, NULL, lq, NULL, &lqn);
        ra_layer_norm_backward(dk, NULL, lk, NULL, &lkn);
    }
    /* OLMoE's clamp after the norms: the gradient passes where the norms'
     * outputs (recomputed) are within the limit */
    if (clip_late) {
        float *nq = after, *nk = after + n_q;
        memcpy(nq, q_in, (size_t)n_q * sizeof(float));
        memcpy(nk, k_in, (size_t)n_kv * sizeof(float));
        ra_layer_qk_norms(layer, nq, nk, T);
        clip_grad(dq, nq, n_q, c->clip_qkv);
        clip_grad(dk, nk, n_kv, c->clip_qkv);
    }
    /* xq, xk = q_norm(xq), k_norm(xk): per head, or per token (norm_whole) */
    if (norms) {
        norm_grad(dq, grads->dq_norm, grads->dq_norm_bias, q_in, w->q_norm, w->q_norm_bias, &qn,
                  grads->accumulate);
        norm_grad(dk, grads->dk_norm, grads->dk_norm_bias, k_in, w->k_norm, w->k_norm_bias, &kn,
                  grads->accumulate);
    }
    if (norms_after) rotate_back(ctx, layer, &tdq, &tdk, &call->pos);
    /* RoFormer's rotary_value: value_layer rotated as key_layer, last: dv = R^T dv */
    if (c->rope_values) ra_rope_apply(ctx, layer->rope, &step->views.dv, &step->views.dv,
                                      &call->pos, RA_INVERSE);
    /* value_states = value_states * v_scale (MiMo-V2-Flash) */
    for (int64_t i = 0; c->v_scale != 1.0 && i < n_kv; i++) dv[i] = (float)(dv[i] * c->v_scale);
    /* value_states = self.v_norm(value_states) (Gemma 3n: no weights) */
    if (vnorm) {
        const ra_layer_norm_shape vn = ra_layer_l2_shape(c, Hkv, T);
        ra_layer_norm_backward(dv, NULL, v_in, NULL, &vn);
    }
    /* x.clamp_(-clip_qkv, clip_qkv) on q, k, v: the gradient passes where
     * |x| <= clip_qkv, as torch's clamp */
    if (clip && !clip_late) clip_grad(dq, q_raw, n_q, c->clip_qkv);
    if (clip && !clip_late) clip_grad(dk, k_raw, n_kv, c->clip_qkv);
    if (clip) clip_grad(dv, v_raw, n_kv, c->clip_qkv);
    /* output = self.wo(output): dwo = g^T o */
    ra_gemm_tn(grads->dwo, g, dim, o, dim, q_dim, T, beta);
    bias_grad(grads->dbo, w->bo, g, T, dim, grads->accumulate);
    /* xq, xk, xv = self.wq(x), self.wk(x), self.wv(x): dw = d^T x, db = the
     * sum of d's rows, dx = sum of d w (a fused wqkv: each group's rows of
     * dwqkv and dbqkv; Qwen3-Next's gate: its rows of wq) */
    float *const dws[4] = {grads->dwq, grads->dwk, grads->dwv, grads->dwq},
                 *const dbs[4] = {grads->dbq, grads->dbk, grads->dbv, grads->dbq};
    const void *const ws[4] = {w->wq, w->wk, w->wv, w->wq};
    const float *const bs[4] = {w->bq, w->bk, w->bv, w->bq};
    const float *const ds[4] = {dq, dk, dv, ob.dgate};
    for (int p = RA_PROJ_Q; p <= (gated && !w->wgate ? RA_PROJ_GATE : RA_PROJ_V); p++) {
        const ra_layer_proj pj = ra_layer_proj_of(layer, p);
        /* its first rows' offset in its weight (wqkv, or wq for the gate), in elements */
        const void *weight = w->wqkv ? (const void *)w->wqkv : ws[p];
        const int64_t first =
            ((const char *)pj.w - (const char *)weight) / (int64_t)ra_dtype_size(w->dtype);
        float *dw = (w->wqkv ? grads->dwqkv : dws[p]) + first;
        float *db = !pj.b ? NULL : w->bqkv ? grads->dbqkv + (pj.b - w->bqkv)
                                           : dbs[p] + (pj.b - bs[p]);
        proj_grad(&mm, dw, db, dx, &pj, ds[p], tape->x, T, dim, p == RA_PROJ_Q ? 0.0f : 1.0f,
                  grads->accumulate);
    }
    if (w->wgate) ra_layer_gate_grads(layer, &mm, dx, grads, ob.dgate, tape->x, T);
}
