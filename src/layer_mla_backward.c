/*
 * layer_mla_backward.c — latent attention's training forward and backward:
 * the forward of layer_mla.c with its q, k, v (rotated), output and
 * log-sum-exp kept in the tape, and its lines in reverse (layer_mla.c's
 * names):
 *
 *   dy [T, dim] -> g = dy * resid mask
 *   -> dpacked = g wo [T, H * Dv] (through the gate: dgate, dpacked *=
 *      act(gate)) -> dattn [T, H, D] (the padding's 0)
 *   -> dq, dk, dv [T, H, D] = attention backward (the tape's q, k, v, out, lse)
 *   -> q's rope part: R^T; dq *= the scale's factor
 *   -> dkr = R^T (sum over heads of dk's rope part)             [T, Dr]
 *      (through k_rope_norm, its input recomputed)
 *   -> dkvb = per head [dk's nope part | dv's first Dv]         [T, H (Dn + Dv)]
 *   -> dwkv_b = dkvb^T c, dc = dkvb wkv_b, through kv_a_norm (c recomputed)
 *   -> dwkv_a = [dc_raw | dkr]^T x, dbkv_a, dx = [dc_raw | dkr] wkv_a
 *   -> q: dwq = dq^T x, dx += dq wq; or dwq_b = dq^T qa, dqa = dq wq_b,
 *      through q_a_norm (qa recomputed), dwq_a = dqa^T x, dbq_a, dx += dqa wq_a
 *      (q_b_raw_latent: wq_b's input [q_a_norm(qa) | qa], its second half's
 *      gradient added after the norm's; a gate in wq_b's or wq's rows:
 *      each head's [dq_h | dgate_h] as its rows)
 *   -> the gate's: dwgate = dgate^T x, dbgate, dx += dgate wgate
 *   -> dwo = g^T packed(out) (gated), dbo
 */
#include <string.h>

#include "gemm.h"
#include "layer_tape.h"
#include "layer_mla.h"
#include "parallel.h"

ra_status ra_mla_forward_train(const ra_layer *layer, ra_context *ctx, float *y,
                               ra_layer_tape *tape, const float *x)
{
    const ra_mla_dims d = ra_mla_dims_of(&layer->config);
    const ra_layer_call *call = &tape->call;
    const int64_t proj = ra_mla_project_floats(&d, call->tokens);
    ra_scratch scratch;
    if (proj < 0 || (uint64_t)proj > SIZE_MAX / sizeof(float))
        return ra_fail(RA_ERR_OVERFLOW, "the latent layer's scratch overflows");
    RA_TRY(ra_scratch_acquire_outer(ctx, (size_t)proj * sizeof(float), &scratch));
    ra_layer_tape_views v = ra_layer_tape_views_of(tape);
    ra_status status = ra_mla_project(layer, ctx, v.xq.data, v.xk.data, v.xv.data, v.gate, x,
                                      call->batch, call->seq, &call->pos, scratch.data);
    if (status == RA_OK)
        status = ra_attention_forward_lse(ctx, &v.attn, v.lse, &v.xq, &v.xk, &v.xv, &call->attn);
    if (status == RA_OK) {
        ra_mla_output(layer, y, v.attn.data, x, v.gate, call->tokens, scratch.data);
        if (call->attn.dropout > 0.0f)
            ra_layer_output_dropout(y, call->n_x, call->attn.dropout, call->attn.seed);
    }
    ra_scratch_release(&scratch);
    return status;
}

static ra_status check_grads(const ra_layer *layer, const float *dx, const ra_layer_grads *g,
                             const ra_layer_tape *tape, const float *dy)
{
    const int64_t n_x = tape->call.n_x;
    /* Each weight, and its gradient at the same index; then dy and x */
    ra_layer_span in[RA_LAYER_SPANS + 2];
    int n_in = ra_layer_weight_spans(layer, in);
    in[n_in++] = (ra_layer_span){dy, n_x, "dy"};
    in[n_in++] = (ra_layer_span){tape->x, n_x, "x (kept by the tape)"};
    float *const outs[] = {g->dwq, g->dwq_a, g->dbq_a, g->dq_a_norm, g->dwq_b, g->dwkv_a,
                           g->dbkv_a, g->dkv_a_norm, g->dwkv_b, g->dwo, g->dbo, g->dsinks,
                           g->dwgate, g->dbgate, g->dk_rope_norm, (float *)dx};
    static const char *const out_names[] = {"dwq", "dwq_a", "dbq_a", "dq_a_norm", "dwq_b",
                                            "dwkv_a", "dbkv_a", "dkv_a_norm", "dwkv_b", "dwo",
                                            "dbo", "dsinks", "dwgate", "dbgate",
                                            "dk_rope_norm", "dx"};
    const int n_out = sizeof outs / sizeof outs[0];
    ra_layer_span out[sizeof outs / sizeof outs[0]];
    for (int i = 0; i < n_out; i++) { /* written where the layer has the weight */
        out[i] = (ra_layer_span){in[i].p ? outs[i] : NULL, in[i].n, out_names[i]};
        if (in[i].p && !outs[i])
            return ra_fail(RA_ERR_NULL, "ra_layer_grads: %s is NULL (the layer has %s)",
                           out_names[i], in[i].name);
    }
    for (int i = 0; i < n_out; i++) {
        if (!out[i].p) continue;
        for (int j = i + 1; j < n_out; j++)
            if (out[j].p && ra_floats_overlap(out[i].p, out[i].n, out[j].p, out[j].n))
                return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", out[i].name, out[j].name);
        for (int j = 0; j < n_in; j++)
            if (in[j].p && ra_floats_overlap(out[i].p, out[i].n, in[j].p, in[j].n))
                return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", out[i].name, in[j].name);
    }
    return RA_OK;
}

/* db (+)= the sum of d's rows [T, n] (bias NULL: nothing). */
static void bias_grad(float *db, const float *bias, const float *d, int64_t T, int64_t n,
                      int accumulate)
{
    if (!bias) return;
    if (!accumulate) memset(db, 0, (size_t)n * sizeof(float));
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) db[i] += d[t * n + i];
}

/* g [T, n] through an RMSNorm with weight w at its input x [T, n], and
 * dw (+)=. */
static void rms_grad(float *g, float *dw, const float *x, const float *w, int64_t T, int64_t n,
                     double eps, int accumulate)
{
    const ra_layer_norm_shape shape = {T, n, 1, 0, eps};
    if (!accumulate) memset(dw, 0, (size_t)n * sizeof(float));
    ra_layer_norm_backward(g, dw, x, w, &shape);
}

/* q (and the gate, where its rows are in W: ra_mla_gate_rows) = in W^T,
 * W wq_b or wq, in [T, Kq]: dW (+)= each head's [dq_h | dgate_h]^T in, and
 * din [T, Kq] = [dq | dgate] W + beta_in din. */
static void q_grads(const ra_layer *layer, float *dW, float *din, const float *dq,
                    const float *dgate, const float *in, int64_t T, float beta, float beta_in)
{
    const ra_mla_dims d = ra_mla_dims_of(&layer->config);
    const float *W = d.rq ? layer->weights.wq_b : layer->weights.wq;
    const int64_t Dg = ra_mla_gate_rows(&layer->config, &layer->weights), rows = d.D + Dg;
    const int64_t n = d.H * d.D;
    if (!Dg) {
        ra_gemm_tn(dW, dq, n, in, n, d.Kq, T, beta);
        ra_gemm_nn(din, dq, n, W, T, d.Kq, n, beta_in);
        return;
    }
    for (int64_t h = 0; h < d.H; h++) {
        const float *Wq = W + h * rows * d.Kq, *Wg = Wq + d.D * d.Kq;
        ra_gemm_tn(dW + h * rows * d.Kq, dq + h * d.D, n, in, d.D, d.Kq, T, beta);
        ra_gemm_tn(dW + (h * rows + d.D) * d.Kq, dgate + h * Dg, d.H * Dg, in, Dg, d.Kq, T,
                   beta);
        ra_gemm_nn(din, dq + h * d.D, n, Wq, T, d.Kq, d.D, h ? 1.0f : beta_in);
        ra_gemm_nn(din, dgate + h * Dg, d.H * Dg, Wg, T, d.Kq, Dg, 1.0f);
    }
}

/* q = q_b_proj(q_a_layernorm(q_a_proj(x))) (or of [q_a_norm(qa) | qa]):
 * dwq_b, dq_a_norm, dwq_a, dbq_a, and dx +=; scratch qa_raw, qa, dqa [T,
 * rq], then in, din [T, 2 rq] with q_b_raw_latent. */
static void q_latent_grads(const ra_layer *layer, float *dx, const ra_layer_grads *grads,
                           const float *dq, const float *dgate, const float *x, int64_t T,
                           float *scratch)
{
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const ra_mla_dims d = ra_mla_dims_of(c);
    const int acc = grads->accumulate;
    float *qa_raw = scratch, *qa = qa_raw + T * d.rq, *dqa = qa + T * d.rq;
    float *in = dqa + T * d.rq, *din = c->q_b_raw_latent ? in + T * d.Kq : dqa;
    ra_mla_linear(qa_raw, x, w->wq_a, w->bq_a, T, d.rq, d.dim);
    memcpy(qa, qa_raw, (size_t)(T * d.rq) * sizeof(float));
    const float *q_in = ra_mla_q_input(layer, qa, in, T);
    q_grads(layer, grads->dwq_b, din, dq, dgate, q_in, T, acc ? 1.0f : 0.0f, 0.0f);
    for (int64_t t = 0; c->q_b_raw_latent && t < T; t++) /* q_resid's half */
        memcpy(dqa + t * d.rq, din + 2 * t * d.rq, (size_t)d.rq * sizeof(float));
    ra_mla_scale(dqa, T * d.rq, c->q_latent_scale);
    rms_grad(dqa, grads->dq_a_norm, qa_raw, w->q_a_norm, T, d.rq, c->norm_eps, acc);
    for (int64_t t = 0; c->q_b_raw_latent && t < T; t++) /* q_compressed's half */
        for (int64_t i = 0; i < d.rq; i++) dqa[t * d.rq + i] += din[(2 * t + 1) * d.rq + i];
    ra_gemm_tn(grads->dwq_a, dqa, d.rq, x, d.rq, d.dim, T, acc ? 1.0f : 0.0f);
    bias_grad(grads->dbq_a, w->bq_a, dqa, T, d.rq, acc);
    ra_gemm_nn(dx, dqa, d.rq, w->wq_a, T, d.dim, d.rq, 1.0f);
}

ra_status ra_mla_backward(const ra_layer *layer, ra_context *ctx, float *dx,
                          const ra_layer_grads *grads, const ra_layer_tape *tape,
                          const float *dy)
{
    RA_TRY(check_grads(layer, dx, grads, tape, dy));
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const ra_mla_dims d = ra_mla_dims_of(c);
    const ra_layer_call *call = &tape->call;
    const int64_t B = call->batch, S = call->seq, T = call->tokens, n_x = call->n_x;
    const int64_t n = T * d.H * d.D, kv = d.Dn + d.Dv, acc = grads->accumulate;
    const float beta = acc ? 1.0f : 0.0f;
    const float *x = tape->x;
    ra_layer_tape_views v = ra_layer_tape_views_of(tape);

    /* Scratch (the outer workspace): g [T, dim], dattn, dq, dk, dv [T, H, D],
     * packed [T, H Dv], dkvb [T, H (Dn + Dv)], c_raw, c, dc [T, r], dkr
     * [T, Dr], kr_raw [T, Dr] (k_rope_norm's input), qa_raw, qa, dqa [T, rq]
     * (and in, din [T, 2 rq] with q_b_raw_latent), and with gated_output the
     * output packed [T, H Dv] and the gate's gradient [T, G], dsinks [H]:
     * within the 12 T max(dim, H D) floats the tape was sized for, plus the
     * latent sizes. */
    const int gated = c->gated_output;
    const int64_t G = gated ? ra_layer_gate_width(c) : 0;
    const int64_t q_latent = 3 * d.rq + (c->q_b_raw_latent ? 2 * d.Kq : 0);
    int64_t latent, floats;
    if (ra_mul(T, d.H * d.Dv + d.H * kv + 3 * d.r + 2 * d.Dr + q_latent +
                      (gated ? d.H * d.Dv : 0) + G,
               &latent) != RA_OK ||
        latent > INT64_MAX / 2 - n_x - 4 * n - d.H ||
        (uint64_t)(floats = n_x + 4 * n + latent + d.H) > SIZE_MAX / sizeof(float))
        return ra_fail(RA_ERR_OVERFLOW, "the latent layer's backward scratch overflows");
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire_outer(ctx, (size_t)floats * sizeof(float), &scratch));
    float *g = scratch.data, *dattn = g + n_x, *dq = dattn + n, *dk = dq + n, *dv = dk + n;
    float *packed = dv + n, *dkvb = packed + T * d.H * d.Dv, *c_raw = dkvb + T * d.H * kv;
    float *lat = c_raw + T * d.r, *dc = lat + T * d.r, *dkr = dc + T * d.r;
    float *kr_raw = dkr + T * d.Dr, *q_scratch = kr_raw + T * d.Dr;
    float *o_packed = q_scratch + T * q_latent;
    float *dgate = o_packed + (gated ? T * d.H * d.Dv : 0);
    float *dsinks = dgate + T * G;
    ra_tensor tdattn = ra_tensor_4d(dattn, RA_F32, B, S, d.H, d.D);
    ra_tensor tdq = ra_tensor_4d(dq, RA_F32, B, S, d.H, d.D);
    ra_tensor tdk = ra_tensor_4d(dk, RA_F32, B, S, d.H, d.D);
    ra_tensor tdv = ra_tensor_4d(dv, RA_F32, B, S, d.H, d.D);

    /* y = resid_dropout(o_proj(packed)): g, dpacked = g wo, dattn */
    memcpy(g, dy, (size_t)n_x * sizeof(float));
    if (call->attn.dropout > 0.0f)
        ra_layer_output_dropout(g, n_x, call->attn.dropout, call->attn.seed);
    ra_gemm_nn(packed, g, d.dim, w->wo, T, d.H * d.Dv, d.dim, 0.0f);
    if (gated) { /* attn_output = attn_output * torch.sigmoid(gate_proj(x)) */
        ra_mla_pack(o_packed, v.attn.data, T, &d);
        ra_layer_gate_back(layer, packed, dgate, o_packed, v.gate, T);
    }
    ra_mla_unpack(dattn, packed, T, &d);
    /* attention: dq, dk, dv (and the sinks' gradient) */
    ra_attention_options attn = call->attn;
    if (w->sinks) attn.dsinks = acc ? dsinks : grads->dsinks;
    ra_status status = ra_attention_backward(ctx, &tdq, &tdk, &tdv, &tdattn, &v.xq, &v.xk,
                                             &v.xv, &v.attn, v.lse, &attn);
    if (status != RA_OK) {
        ra_scratch_release(&scratch);
        return status;
    }
    if (w->sinks && acc)
        for (int64_t h = 0; h < d.H; h++) grads->dsinks[h] += dsinks[h];
    /* q_rot, k_rot = RoPE(q_rot, k_rot); k_rot expanded over the heads */
    ra_tensor dq_rope = ra_mla_rope_part(dq, B, S, d.H, &d);
    status = ra_rope_apply(ctx, layer->rope, &dq_rope, &dq_rope, &call->pos, RA_INVERSE);
    for (int64_t t = 0; t < T; t++) {
        float *to = dkr + t * d.Dr;
        memset(to, 0, (size_t)d.Dr * sizeof(float));
        for (int64_t h = 0; h < d.H; h++)
            for (int64_t i = 0; i < d.Dr; i++) to[i] += dk[(t * d.H + h) * d.D + d.Dn + i];
    }
    ra_tensor tdkr = ra_tensor_4d(dkr, RA_F32, B, S, 1, d.Dr);
    if (status == RA_OK)
        status = ra_rope_apply(ctx, layer->rope, &tdkr, &tdkr, &call->pos, RA_INVERSE);
    if (status != RA_OK) { /* the forward's positions: not reached */
        ra_scratch_release(&scratch);
        return status;
    }
    if (w->k_rope_norm) { /* k_rot = k_rope_only_layernorm(k_rot), its input recomputed */
        ra_mla_linear(kr_raw, x, w->wkv_a + d.r * d.dim, w->bkv_a ? w->bkv_a + d.r : NULL, T,
                      d.Dr, d.dim);
        rms_grad(dkr, grads->dk_rope_norm, kr_raw, w->k_rope_norm, T, d.Dr, c->norm_eps,
                 (int)acc);
    }
    const float q_factor = ra_layer_q_factor(c);
    if (q_factor != 1.0f)
        for (int64_t i = 0; i < n; i++) dq[i] *= q_factor;
    ra_layer_temperature(layer, dq, &call->pos, T, S); /* q's factor at its position */
    /* k_pass, value_states = split(kv_b_proj(c)) */
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < d.H; h++) {
            float *to = dkvb + (t * d.H + h) * kv;
            memcpy(to, dk + (t * d.H + h) * d.D, (size_t)d.Dn * sizeof(float));
            memcpy(to + d.Dn, dv + (t * d.H + h) * d.D, (size_t)d.Dv * sizeof(float));
        }
    /* c = kv_a_layernorm(c_raw), recomputed; dwkv_b = dkvb^T c, dc = dkvb wkv_b */
    ra_mla_linear(c_raw, x, w->wkv_a, w->bkv_a, T, d.r, d.dim);
    memcpy(lat, c_raw, (size_t)(T * d.r) * sizeof(float));
    const ra_layer_norm_shape lat_shape = {T, d.r, 1, 0, c->norm_eps};
    ra_layer_norm(lat, w->kv_a_norm, NULL, &lat_shape);
    ra_mla_scale(lat, T * d.r, c->kv_latent_scale);
    ra_gemm_tn(grads->dwkv_b, dkvb, d.H * kv, lat, d.H * kv, d.r, T, beta);
    ra_gemm_nn(dc, dkvb, d.H * kv, w->wkv_b, T, d.r, d.H * kv, 0.0f);
    ra_mla_scale(dc, T * d.r, c->kv_latent_scale);
    rms_grad(dc, grads->dkv_a_norm, c_raw, w->kv_a_norm, T, d.r, c->norm_eps, (int)acc);
    /* c_raw, k_rot = split(kv_a_proj_with_mqa(x)) */
    ra_gemm_tn(grads->dwkv_a, dc, d.r, x, d.r, d.dim, T, beta);
    ra_gemm_tn(grads->dwkv_a + d.r * d.dim, dkr, d.Dr, x, d.Dr, d.dim, T, beta);
    if (w->bkv_a) {
        bias_grad(grads->dbkv_a, w->bkv_a, dc, T, d.r, (int)acc);
        bias_grad(grads->dbkv_a + d.r, w->bkv_a, dkr, T, d.Dr, (int)acc);
    }
    ra_gemm_nn(dx, dc, d.r, w->wkv_a, T, d.dim, d.r, 0.0f);
    ra_gemm_nn(dx, dkr, d.Dr, w->wkv_a + d.r * d.dim, T, d.dim, d.Dr, 1.0f);
    /* q = q_proj(x), or q_b_proj(q_a_layernorm(q_a_proj(x))) */
    if (d.rq)
        q_latent_grads(layer, dx, grads, dq, dgate, x, T, q_scratch);
    else
        q_grads(layer, grads->dwq, dx, dq, dgate, x, T, beta, 1.0f);
    if (gated && w->wgate) { /* the gate's projection (F32: latent attention's weights) */
        const ra_gemm_env mm = {ctx, RA_F32, NULL, 0};
        ra_layer_gate_grads(layer, &mm, dx, grads, dgate, x, T);
    }
    /* y = o_proj(packed): dwo = g^T packed(out), dbo */
    ra_mla_pack(packed, v.attn.data, T, &d);
    if (gated) ra_layer_gate_apply(layer, packed, v.gate, T);
    ra_gemm_tn(grads->dwo, g, d.dim, packed, d.dim, d.H * d.Dv, T, beta);
    bias_grad(grads->dbo, w->bo, g, T, d.dim, (int)acc);
    ra_scratch_release(&scratch);
    return RA_OK;
}
