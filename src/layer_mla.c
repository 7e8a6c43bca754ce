/*
 * layer_mla.c — multi-head latent attention, as transformers' DeepseekV3Attention
 * (DeepSeek-V2, V2-Lite, V3, R1, Kimi K2):
 *
 *   x [T, dim] -> q = wq(x), or wq_b(q_a_norm(wq_a(x) + bq_a))   [T, H, Dn + Dr]
 *      (q_b_raw_latent: wq_b([q_a_norm(qa) | qa]), qa = wq_a(x) + bq_a;
 *      the gate's rows in wq_b or wq: each head's [q_h | gate_h])
 *   -> wkv_a(x) + bkv_a = [c_raw (r) | kr (Dr)]                  [T, r + Dr]
 *   -> c = kv_a_norm(c_raw); per head [k_nope | v] = c wkv_b_h^T  [T, H, Dn + Dv]
 *   -> q's rope part and kr rotated; k_h = [k_nope_h | kr] (kr shared by all heads)
 *      (Mistral 4: q times 1 + beta log(1 + floor(p / original)) at its position p,
 *      temperature_floor with temperature_no_offset)
 *   -> causal attention over heads of D = Dn + Dr (v padded with zeros to D)
 *   -> y = wo(attention output's first Dv of each head) + bo
 *
 * With a cache (a latent cache: per token [kr | c], Dr + r values), the
 * prefill runs the forward above and stores [kr | c]; later tokens are
 * decoded with wkv_b absorbed, as FlashMLA and FlashInfer do: for head h,
 * q_nope_h . k_nope_h(j) = (q_nope_h W_UK_h) . c_j and the output's
 * v_h = (sum_j p_j c_j) W_UV_h^T (W_UK_h, W_UV_h: head h's key and value
 * rows of wkv_b), so the step is one-kv-head attention of queries
 * [q_rope_h | q_nope_h W_UK_h] over the cache rows, every head reading
 * each row once, its values the rows' c.
 */
#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "attention_internal.h"
#include "cpu/kernels.h"
#include "gemm.h"
#include "kvcache_internal.h"
#include "layer_mla.h"
#include "parallel.h"
#include "rope_internal.h"

/* The features the other layer kinds use and latent layers refuse. */
static ra_status refuse_features(const ra_layer_config *c, const ra_layer_weights *w)
{
    const struct {
        int set;
        const char *name;
    } refused[] = {{w->wk != NULL, "weights.wk"},     {w->wv != NULL, "weights.wv"},
                   {w->bq != NULL, "weights.bq"},     {w->bk != NULL, "weights.bk"},
                   {w->bv != NULL, "weights.bv"},     {w->wqkv != NULL, "weights.wqkv"},
                   {w->bqkv != NULL, "weights.bqkv"}, {w->q_norm != NULL, "weights.q_norm"},
                   {w->k_norm != NULL, "weights.k_norm"}, {c->norm_whole, "norm_whole"},
                   {c->norm_head_weights, "norm_head_weights"}, {c->norm_layer, "norm_layer"},
                   {c->clip_qkv != 0, "clip_qkv"},    {c->qk_l2_norm, "qk_l2_norm"},
                   {c->temperature_length != 0, "temperature_length"},
                   {c->norm_after_rope, "norm_after_rope"},
                   {w->o_norm != NULL, "weights.o_norm"},
                   {c->v_norm, "v_norm"}, {w->q_norm_bias != NULL, "weights.q_norm_bias"},
                   {w->k_norm_bias != NULL, "weights.k_norm_bias"},
                   {c->v_scale != 0 && c->v_scale != 1.0, "v_scale"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (refused[i].set)
            return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: latent attention "
                           "(kv_lora_rank %lld) with %s", (long long)c->kv_lora_rank,
                           refused[i].name);
    return RA_OK;
}

/* Each size and width at most INT_MAX (cblas), each weight's elements
 * countable; every product checked.  Dg: ra_mla_gate_rows. */
static ra_status check_sizes(const ra_mla_dims *d, int64_t Dg)
{
    const int64_t sizes[] = {d->dim, d->H, d->D + Dg, d->r, d->Kq};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] > INT_MAX)
            return ra_fail(RA_ERR_OVERFLOW, "ra_layer_config: latent attention's sizes exceed "
                           "INT_MAX (cblas)");
    /* each below 2^31: their sums below 2^32 */
    const int64_t pairs[][2] = {{d->H, d->D + Dg}, {d->H, d->Dn + d->Dv}, {d->H, d->Dv},
                                {d->H, d->Dr + d->r}};
    int64_t n, widths[4];
    for (int i = 0; i < 4; i++)
        if (ra_mul(pairs[i][0], pairs[i][1], &widths[i]) != RA_OK || widths[i] > INT_MAX ||
            d->r + d->Dr > INT_MAX)
            return ra_fail(RA_ERR_OVERFLOW, "ra_layer_config: latent attention's widths exceed "
                           "INT_MAX (cblas)");
    const int64_t weights[][2] = {{d->rq, d->dim}, {widths[0], d->Kq}, {widths[0], d->dim},
                                  {d->r + d->Dr, d->dim}, {widths[1], d->r},
                                  {d->dim, widths[2]}};
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
        if (ra_mul(weights[i][0], weights[i][1], &n) != RA_OK)
            return ra_fail(RA_ERR_OVERFLOW, "ra_layer_config: latent attention's weights have "
                           "too many elements");
    return RA_OK;
}

/* q_latent_scale and kv_latent_scale: 0 (none) or positive and finite;
 * q's only with q_lora_rank. */
static ra_status check_latent_scales(const ra_layer_config *c)
{
    if (!(c->q_latent_scale >= 0 && c->q_latent_scale <= FLT_MAX && c->kv_latent_scale >= 0 &&
          c->kv_latent_scale <= FLT_MAX))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: q_latent_scale %g, kv_latent_scale %g "
                       "(0, or positive and finite)", c->q_latent_scale, c->kv_latent_scale);
    if (c->q_latent_scale && c->kv_lora_rank && c->q_lora_rank == 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: q_latent_scale without q_lora_rank");
    return RA_OK;
}

ra_status ra_mla_resolve(ra_layer_config *c, const ra_layer_weights *w, ra_rope_config *rope)
{
    const void *const latent[] = {w->wq_a, w->bq_a, w->q_a_norm, w->wq_b,
                                  w->wkv_a, w->bkv_a, w->kv_a_norm, w->wkv_b, w->k_rope_norm};
    RA_TRY(check_latent_scales(c));
    if (c->kv_lora_rank == 0) {
        if (c->q_lora_rank || c->qk_nope_head_dim || c->v_head_dim || c->q_latent_scale ||
            c->kv_latent_scale || c->q_b_raw_latent)
            return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: q_lora_rank, qk_nope_head_dim, "
                           "v_head_dim, q_latent_scale, kv_latent_scale or q_b_raw_latent set "
                           "without kv_lora_rank");
        for (size_t i = 0; i < sizeof latent / sizeof latent[0]; i++)
            if (latent[i])
                return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: a latent attention weight "
                               "(wq_a ... wkv_b, k_rope_norm) without config.kv_lora_rank");
        return RA_OK;
    }
    if (c->kv_lora_rank < 0 || c->q_lora_rank < 0 || c->qk_nope_head_dim < 0 ||
        c->dim <= 0 || c->n_heads <= 0 || c->head_dim <= c->qk_nope_head_dim ||
        (c->head_dim - c->qk_nope_head_dim) % 2 || c->v_head_dim < 1 ||
        c->v_head_dim > c->head_dim)
        return ra_fail(RA_ERR_SIZE, "ra_layer_config: latent attention with dim %lld, n_heads "
                       "%lld, head_dim %lld, kv_lora_rank %lld, q_lora_rank %lld, "
                       "qk_nope_head_dim %lld, v_head_dim %lld (need head_dim - "
                       "qk_nope_head_dim even and >= 2, 1 <= v_head_dim <= head_dim)",
                       (long long)c->dim, (long long)c->n_heads, (long long)c->head_dim,
                       (long long)c->kv_lora_rank, (long long)c->q_lora_rank,
                       (long long)c->qk_nope_head_dim, (long long)c->v_head_dim);
    if (c->n_kv_heads != 0 && c->n_kv_heads != c->n_heads)
        return ra_fail(RA_ERR_GQA, "ra_layer_config: latent attention has n_heads key heads "
                       "(%lld), not n_kv_heads %lld", (long long)c->n_heads,
                       (long long)c->n_kv_heads);
    c->n_kv_heads = c->n_heads;
    RA_TRY(refuse_features(c, w));
    const int with_q_lora = c->q_lora_rank > 0;
    if (!w->wkv_a || !w->kv_a_norm || !w->wkv_b || (with_q_lora && (!w->wq_a || !w->q_a_norm ||
                                                                    !w->wq_b)) ||
        (!with_q_lora && !w->wq))
        return ra_fail(RA_ERR_NULL, "ra_layer_weights: latent attention needs wkv_a, kv_a_norm, "
                       "wkv_b and %s", with_q_lora ? "wq_a, q_a_norm, wq_b" : "wq");
    if (with_q_lora ? w->wq != NULL : (w->wq_a || w->bq_a || w->q_a_norm || w->wq_b))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: %s", with_q_lora
                       ? "wq with q_lora_rank (q comes from wq_a, q_a_norm, wq_b)"
                       : "wq_a, bq_a, q_a_norm or wq_b without q_lora_rank");
    if (c->q_b_raw_latent && !with_q_lora)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: q_b_raw_latent without q_lora_rank "
                       "(no q latent to read)");
    const int64_t Dr = c->head_dim - c->qk_nope_head_dim;
    if (rope->rotary_dim != 0 && rope->rotary_dim != Dr)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: rotary_dim %lld; latent attention "
                       "rotates its %lld rope features", (long long)rope->rotary_dim,
                       (long long)Dr);
    rope->head_dim = Dr;
    rope->rotary_dim = Dr;
    ra_mla_dims d = ra_mla_dims_of(c);
    d.dim = c->dim;
    return check_sizes(&d, ra_mla_gate_rows(c, w));
}

/* ---- projections ---------------------------------------------------------- */

/* wq_b's input [T, Kq] kept apart from qa: with q_b_raw_latent. */
static int64_t q_input_floats(const ra_mla_dims *d)
{
    return d->rq && d->Kq != d->rq ? d->Kq : 0;
}

int64_t ra_mla_project_floats(const ra_mla_dims *d, int64_t T)
{
    int64_t n;
    if (ra_mul(T, d->r + d->Dr + d->rq + q_input_floats(d) + d->H * (d->Dn + d->Dv), &n) !=
        RA_OK)
        return -1;
    return n;
}

void ra_mla_scale(float *x, int64_t n, double scale)
{
    const float s = (float)scale;
    for (int64_t i = 0; scale != 0 && s != 1.0f && i < n; i++) x[i] *= s;
}

void ra_mla_linear(float *out, const float *a, const float *w, const float *b, int64_t T,
                   int64_t n, int64_t k)
{
    ra_gemm_nt(out, n, a, w, T, n, k);
    for (int64_t t = 0; b && t < T; t++)
        for (int64_t i = 0; i < n; i++) out[t * n + i] += b[i];
}

/* RMSNorm of T rows of n, in place, with weight w. */
static void rms_rows(float *x, const float *w, int64_t T, int64_t n, double eps)
{
    const ra_layer_norm_shape shape = {T, n, 1, 0, eps};
    ra_layer_norm(x, w, NULL, &shape);
}

ra_tensor ra_mla_rope_part(float *a, int64_t B, int64_t S, int64_t heads, const ra_mla_dims *d)
{
    ra_tensor t = ra_tensor_4d(a + d->Dn, RA_F32, B, S, heads, d->Dr);
    t.stride[0] = S * heads * d->D;
    t.stride[1] = heads * d->D;
    t.stride[2] = d->D;
    return t;
}

/* q [T, H D] = in [T, Kq] W^T, W wq_b or wq; with the gate's rows in W
 * (A.X-K2's q_gate_proj viewed [..., H, D + Dv] and split), each head's
 * D rows give q_h, its next Dv its gate [T, H Dv]. */
static void project_q(const ra_layer *layer, float *q, float *gate, const float *in, int64_t T)
{
    const ra_layer_config *c = &layer->config;
    const ra_mla_dims d = ra_mla_dims_of(c);
    const float *W = d.rq ? layer->weights.wq_b : layer->weights.wq;
    const int64_t Dg = ra_mla_gate_rows(c, &layer->weights), rows = d.D + Dg;
    if (!Dg) {
        ra_mla_linear(q, in, W, NULL, T, d.H * d.D, d.Kq);
        return;
    }
    for (int64_t h = 0; h < d.H; h++) {
        ra_gemm_nt(q + h * d.D, d.H * d.D, in, W + h * rows * d.Kq, T, d.D, d.Kq);
        ra_gemm_nt(gate + h * Dg, d.H * Dg, in, W + (h * rows + d.D) * d.Kq, T, Dg, d.Kq);
    }
}

const float *ra_mla_q_input(const ra_layer *layer, float *qa, float *in, int64_t T)
{
    const ra_layer_config *c = &layer->config;
    const int64_t rq = c->q_lora_rank;
    for (int64_t t = 0; c->q_b_raw_latent && t < T; t++)
        memcpy(in + (2 * t + 1) * rq, qa + t * rq, (size_t)rq * sizeof(float));
    rms_rows(qa, layer->weights.q_a_norm, T, rq, c->norm_eps);
    ra_mla_scale(qa, T * rq, c->q_latent_scale); /* q_resid * self.q_lora_scale (dots.note) */
    if (!c->q_b_raw_latent) return qa;
    for (int64_t t = 0; t < T; t++)
        memcpy(in + 2 * t * rq, qa + t * rq, (size_t)rq * sizeof(float));
    return in;
}

ra_status ra_mla_project(const ra_layer *layer, ra_context *ctx, float *q, float *k, float *v,
                         float *gate, const float *x, int64_t batch, int64_t seq,
                         const ra_positions *pos, float *scratch)
{
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const ra_mla_dims d = ra_mla_dims_of(c);
    const int64_t T = batch * seq, kv = d.Dn + d.Dv;
    float *lat = scratch, *kr = lat + T * d.r, *qa = kr + T * d.Dr, *in = qa + T * d.rq;
    float *kvb = in + T * q_input_floats(&d);

    /* q = q_proj(x), or q_b_proj(q_a_layernorm(q_a_proj(x))); q *= the scale's factor */
    if (d.rq) {
        ra_mla_linear(qa, x, w->wq_a, w->bq_a, T, d.rq, d.dim);
        project_q(layer, q, gate, ra_mla_q_input(layer, qa, in, T), T);
    } else {
        project_q(layer, q, gate, x, T);
    }
    const float q_factor = ra_layer_q_factor(c);
    if (q_factor != 1.0f)
        for (int64_t i = 0; i < T * d.H * d.D; i++) q[i] *= q_factor;
    /* query_states *= get_llama_4_attn_scale(position_ids, beta, original) (Mistral 4):
     * a factor per token, the same before RoPE as after it */
    ra_layer_temperature(layer, q, pos, T, seq);
    /* k_pass, k_rot = split(kv_a_proj_with_mqa(x)); c = kv_a_layernorm(k_pass) */
    ra_mla_linear(lat, x, w->wkv_a, w->bkv_a, T, d.r, d.dim);
    ra_mla_linear(kr, x, w->wkv_a + d.r * d.dim, w->bkv_a ? w->bkv_a + d.r : NULL, T, d.Dr, d.dim);
    rms_rows(lat, w->kv_a_norm, T, d.r, c->norm_eps);
    ra_mla_scale(lat, T * d.r, c->kv_latent_scale); /* k_pass * self.kv_lora_scale */
    if (w->k_rope_norm) rms_rows(kr, w->k_rope_norm, T, d.Dr, c->norm_eps); /* dots.note */
    /* q_rot, k_rot = RoPE(q_rot, k_rot): k_rot once, before it is shared */
    ra_tensor qr = ra_mla_rope_part(q, batch, seq, d.H, &d);
    ra_tensor krt = ra_tensor_4d(kr, RA_F32, batch, seq, 1, d.Dr);
    RA_TRY(ra_rope_apply(ctx, layer->rope, &qr, &qr, pos, RA_FORWARD));
    RA_TRY(ra_rope_apply(ctx, layer->rope, &krt, &krt, pos, RA_FORWARD));
    /* k_pass, value_states = split(kv_b_proj(c)); key = cat(k_pass, k_rot) */
    if (!k) return RA_OK; /* absorbed decoding reads c and kr only */
    ra_mla_linear(kvb, lat, w->wkv_b, NULL, T, d.H * kv, d.r);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < d.H; h++) {
            const float *from = kvb + (t * d.H + h) * kv;
            float *kh = k + (t * d.H + h) * d.D, *vh = v + (t * d.H + h) * d.D;
            memcpy(kh, from, (size_t)d.Dn * sizeof(float));
            memcpy(kh + d.Dn, kr + t * d.Dr, (size_t)d.Dr * sizeof(float));
            memcpy(vh, from + d.Dn, (size_t)d.Dv * sizeof(float));
            memset(vh + d.Dv, 0, (size_t)(d.D - d.Dv) * sizeof(float));
        }
    return RA_OK;
}

void ra_mla_pack(float *packed, const float *v, int64_t T, const ra_mla_dims *d)
{
    for (int64_t i = 0; i < T * d->H; i++) /* may be in place: i Dv <= i D */
        memmove(packed + i * d->Dv, v + i * d->D, (size_t)d->Dv * sizeof(float));
}

void ra_mla_unpack(float *v, const float *packed, int64_t T, const ra_mla_dims *d)
{
    for (int64_t i = 0; i < T * d->H; i++) {
        memcpy(v + i * d->D, packed + i * d->Dv, (size_t)d->Dv * sizeof(float));
        memset(v + i * d->D + d->Dv, 0, (size_t)(d->D - d->Dv) * sizeof(float));
    }
}

/* y = wo(packed) (+ bo), packed [T, H * Dv] first multiplied in place by
 * its gate (ra_mla_output's gate). */
static void gated_wo(const ra_layer *layer, float *y, float *packed, const float *x, float *gate,
                     int64_t T)
{
    const ra_layer_config *c = &layer->config;
    const ra_mla_dims d = ra_mla_dims_of(c);
    if (c->gated_output && layer->weights.wgate) { /* sigmoid(gate_proj(x)) */
        ra_mla_linear(gate, x, layer->weights.wgate, NULL, T, ra_layer_gate_width(c), d.dim);
        ra_layer_gate_bias(layer, gate, T);
    }
    if (c->gated_output) ra_layer_gate_apply(layer, packed, gate, T);
    ra_mla_linear(y, packed, layer->weights.wo, layer->weights.bo, T, d.dim, d.H * d.Dv);
}

void ra_mla_output(const ra_layer *layer, float *y, const float *attn, const float *x,
                   float *gate, int64_t T, float *packed)
{
    const ra_mla_dims d = ra_mla_dims_of(&layer->config);
    ra_mla_pack(packed, attn, T, &d);
    gated_wo(layer, y, packed, x, gate, T);
}

/* ---- the forward ---------------------------------------------------------- */

static ra_status scratch_overflow(int64_t tokens)
{
    return ra_fail(RA_ERR_OVERFLOW, "%lld tokens: the latent layer's scratch overflows",
                   (long long)tokens);
}

/* The bytes of `floats` floats and then `kernel` bytes; 0 when they overflow. */
static size_t scratch_bytes(int64_t floats, size_t kernel)
{
    if (floats < 0 || (uint64_t)floats > SIZE_MAX / 8 || kernel == 0 ||
        kernel > SIZE_MAX - (size_t)floats * sizeof(float))
        return 0;
    return (size_t)floats * sizeof(float) + kernel;
}

/* The four [T, H, D] arrays, ra_mla_project's scratch and the gate [T, G],
 * in floats, a multiple of 16 (the kernels' scratch that follows is
 * 64-byte aligned); 0: too many. */
static int64_t forward_floats(const ra_mla_dims *d, int64_t T)
{
    int64_t n, bound, proj = ra_mla_project_floats(d, T);
    if (proj < 0 || ra_mul(T, d->H * d->D, &n) != RA_OK || ra_mul(n, 8, &bound) != RA_OK ||
        proj > INT64_MAX / 2 - 4 * n)
        return 0;
    return ra_round_up(4 * n + proj + T * d->G, 16); /* T G <= T H D = n */
}

ra_status ra_mla_forward(const ra_layer *layer, ra_context *ctx, float *y, const float *x,
                         const ra_layer_call *call)
{
    const ra_mla_dims d = ra_mla_dims_of(&layer->config);
    const int64_t B = call->batch, S = call->seq, T = call->tokens, n = T * d.H * d.D;
    const int64_t floats = forward_floats(&d, T);
    const size_t bytes = scratch_bytes(
        floats, ra_attention_scratch_bytes(call->attn.path, B, S, S, d.H, d.H, d.D,
                                           ra_parallel_threads(ctx)));
    if (!floats || !bytes) return scratch_overflow(T);
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, bytes, &scratch));
    float *buf = scratch.data, *proj = buf + 4 * n;
    float *gate = proj + ra_mla_project_floats(&d, T);
    ra_tensor q = ra_tensor_4d(buf, RA_F32, B, S, d.H, d.D);
    ra_tensor k = ra_tensor_4d(buf + n, RA_F32, B, S, d.H, d.D);
    ra_tensor v = ra_tensor_4d(buf + 2 * n, RA_F32, B, S, d.H, d.D);
    ra_tensor attn = ra_tensor_4d(buf + 3 * n, RA_F32, B, S, d.H, d.D);
    ra_attention_args args;
    ra_status status = ra_attention_prepare(&args, &attn, &q, &k, &v, &call->attn);
    if (status == RA_OK)
        status = ra_mla_project(layer, ctx, q.data, k.data, v.data, gate, x, B, S, &call->pos,
                                proj);
    if (status == RA_OK) {
        if (call->attn.path == RA_PATH_REFERENCE)
            ra_attention_reference(&args, buf + floats);
        else
            ra_attention_flash(ctx, &args, buf + floats);
        ra_mla_output(layer, y, attn.data, x, gate, T, proj); /* proj: free again */
        if (call->attn.dropout > 0.0f)
            ra_layer_output_dropout(y, call->n_x, call->attn.dropout, call->attn.seed);
    }
    ra_scratch_release(&scratch);
    return status;
}

/* ---- with a latent cache -------------------------------------------------- */

/* Query tokens decoded per pass: the decode kernel keeps H * tokens scaled
 * query rows of Dr + r per thread (128 heads of 576: 295 KiB a token). */
enum { MLA_DECODE_TOKENS = 8 };

/* Stores the T tokens' [kr | c] rows of sequence b at its positions
 * length[b] + s (s in [s0, s1)); lat [T, r], kr [T, Dr] from
 * ra_mla_project. */
static void store_latent(ra_kv_cache *cache, const float *lat, const float *kr, int64_t b,
                         int64_t seq, int64_t s0, int64_t s1, const ra_mla_dims *d)
{
    for (int64_t s = s0; s < s1; s++) {
        const int64_t t = b * seq + s, p = cache->length[b] + s - s0;
        ra_kv_cache_put_row(cache, b, p, kr + t * d->Dr, d->Dr, lat + t * d->r, d->r);
    }
}

/* The absorbed queries of tokens [s0, s1) of every sequence, qa [B, n, H,
 * Dr + r]: [q_rope_h | q_nope_h W_UK_h] (q from ra_mla_project, [B, S, H, D]).
 * One sgemm per head for every sequence's rows when they lie evenly apart
 * (n = S, as in a decode step), so W_UK is read once, not B times. */
static void absorb_queries(const ra_layer *layer, float *qa, const float *q, int64_t batch,
                           int64_t seq, int64_t s0, int64_t s1, const ra_mla_dims *d)
{
    const int64_t n = s1 - s0, row = d->Dr + d->r, kv = d->Dn + d->Dv;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < d->H; h++)
                memcpy(qa + ((b * n + t) * d->H + h) * row,
                       q + ((b * seq + s0 + t) * d->H + h) * d->D + d->Dn,
                       (size_t)d->Dr * sizeof(float));
    const int64_t groups = n == seq ? 1 : batch, rows = n == seq ? batch * n : n;
    for (int64_t g = 0; g < groups; g++) {
        const float *qb = q + (g * seq + s0) * d->H * d->D;
        float *ob = qa + g * n * d->H * row;
        for (int64_t h = 0; h < d->H; h++) /* [rows, Dn] (H D apart) times W_UK_h [Dn, r] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)d->r,
                        (int)d->Dn, 1.0f, qb + h * d->D, (int)(d->H * d->D),
                        layer->weights.wkv_b + h * kv * d->r, (int)d->r, 0.0f,
                        ob + h * row + d->Dr, (int)(d->H * row));
    }
}

/* attention output's latent part o [tokens, H, Dr + r] (its [Dr, Dr + r))
 * -> packed [tokens, H * Dv]: o_h W_UV_h^T. */
static void absorb_output(const ra_layer *layer, float *packed, const float *o, int64_t tokens,
                          const ra_mla_dims *d)
{
    const int64_t row = d->Dr + d->r, kv = d->Dn + d->Dv;
    for (int64_t h = 0; h < d->H; h++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tokens, (int)d->Dv, (int)d->r,
                    1.0f, o + h * row + d->Dr, (int)(d->H * row),
                    layer->weights.wkv_b + (h * kv + d->Dn) * d->r, (int)d->r, 0.0f,
                    packed + h * d->Dv, (int)(d->H * d->Dv));
}

/* The absorbed attention by sgemm, for the plain causal mask (a window,
 * chunk, soft-cap or sinks go to the decode kernel): the m newest tokens of
 * every sequence, queries qa [B, m, H, Dr + r] (q's factor in), against
 * the cache's rows in blocks of keys,
 *   s = qa_b rows^T (sgemm) -> online softmax (cpu/softmax_impl.h, o rescaled)
 *   -> o_b += p rows (sgemm)
 * and o /= l at the end: o [B, m, H, Dr + r], the rows' weighted sums.  A
 * 16-bit or 8-bit cache's block is widened into scratch first.  Blocks of keys
 * keys (block_keys of the most rows a call has), scratch
 * latent_attention_floats for those rows and keys. */
static int64_t block_keys(int64_t rows)
{
    const int64_t keys = ((int64_t)1 << 19) / rows; /* scores of about 2 MiB */
    return keys < 256 ? 256 : keys > 8192 ? 8192 : keys / 16 * 16;
}

static int64_t latent_attention_floats(const ra_kv_cache *cache, int64_t rows, int64_t keys)
{
    return ra_round_up(rows * keys, 16) + ra_round_up(keys * cache->head_dim, 16) +
           ra_round_up(4 * rows, 16); /* s, a widened block, m, l, seen (int64) */
}

/* Keys j0 .. j0 + n - 1 of sequence b's latent rows (base: the sequence's
 * first) widened into wide [n, row]: 16-bit values exactly, 8-bit codes
 * times their scales (ra_kv_cache_read's values). */
static void widen_latent(float *wide, const ra_kv_cache *cache, const char *base, int64_t b,
                         int64_t j0, int64_t n)
{
    const int64_t row = cache->head_dim;
    if (!ra_dtype_is_cache8(cache->dtype)) {
        ra_convert(wide, RA_F32, base + (size_t)(j0 * row) * ra_dtype_size(cache->dtype),
                   cache->dtype, n * row);
        return;
    }
    const float *scales = ra_kv_cache_scales(cache, 0, b, 0);
    float e4m3[256];
    for (int c = 0; c < 256 && cache->dtype == RA_F8E4M3; c++)
        e4m3[c] = ra_e4m3_to_f32((uint8_t)c) * scales[0];
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *codes = (const uint8_t *)base + (j0 + j) * row;
        float *w = wide + j * row;
        if (cache->dtype == RA_F8E4M3) {
            for (int64_t e = 0; e < row; e++) w[e] = e4m3[codes[e]];
        } else {
            const float s = scales[j0 + j];
            for (int64_t e = 0; e < row; e++) w[e] = (float)(int8_t)codes[e] * s;
        }
    }
}

static void latent_attention(ra_context *ctx, const ra_kv_cache *cache, float *o,
                             const float *qa, int64_t batch, int64_t m, int64_t H, float scale,
                             int64_t keys, float *scratch)
{
    const int64_t row = cache->head_dim, rows = m * H;
    float *s = scratch, *wide = s + ra_round_up(rows * keys, 16);
    float *mx = wide + ra_round_up(keys * row, 16), *l = mx + rows;
    int64_t *seen = (int64_t *)(void *)(l + rows);
    const ra_tensor view = ra_kv_cache_view(cache, 0);
    const size_t esize = ra_dtype_size(cache->dtype);
    const int threads = ra_parallel_threads(ctx);
    for (int64_t b = 0; b < batch; b++) {
        const int64_t len = cache->length[b];
        const float *q = qa + b * rows * row;
        float *ob = o + b * rows * row;
        const char *base = (const char *)view.data + (size_t)(b * view.stride[0]) * esize;
        memset(ob, 0, (size_t)(rows * row) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) mx[r] = -INFINITY, l[r] = 0.0f;
        for (int64_t j0 = 0; j0 < len; j0 += keys) { /* the last query sees all len keys */
            const int64_t n = len - j0 < keys ? len - j0 : keys;
            const float *k = (const float *)(const void *)base + j0 * row;
            if (cache->dtype != RA_F32) {
                widen_latent(wide, cache, base, b, j0, n);
                k = wide;
            }
            for (int64_t r = 0; r < rows; r++) { /* token t = r / H is at len - m + t */
                const int64_t last = len - m + r / H;
                seen[r] = last < j0 ? 0 : last - j0 + 1 < n ? last - j0 + 1 : n;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)row, 1.0f,
                        q, (int)row, k, (int)row, 0.0f, s, (int)n);
            ra_softmax_job job = {s, n, n, seen, scale, mx, l, ob, row, rows,
                                  (rows + 2 * threads - 1) / (2 * threads)};
            ra_parallel_for(ctx, (rows + job.rows_per_task - 1) / job.rows_per_task,
                            ra_kernels_get()->softmax_task, &job);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)row, (int)n,
                        1.0f, s, (int)n, k, (int)row, 1.0f, ob, (int)row);
        }
        for (int64_t r = 0; r < rows; r++) {
            const float inv = 1.0f / l[r];
            for (int64_t e = 0; e < row; e++) ob[r * row + e] *= inv;
        }
    }
}

ra_status ra_mla_forward_cached(const ra_layer *layer, ra_context *ctx, ra_kv_cache *cache,
                                float *y, const float *x, int64_t batch, int64_t seq,
                                const ra_positions *positions)
{
    const ra_layer_config *c = &layer->config;
    const ra_mla_dims d = ra_mla_dims_of(c);
    if (cache->latent != d.r || cache->head_dim != d.Dr + d.r || cache->batch != batch)
        return ra_fail(RA_ERR_SHAPE, "the cache holds batch %lld, rows of %lld (latent %lld); "
                       "the latent layer needs batch %lld, a latent cache (ra_kv_cache_create_"
                       "latent) of kv_lora_rank %lld and rope %lld", (long long)cache->batch,
                       (long long)cache->head_dim, (long long)cache->latent, (long long)batch,
                       (long long)d.r, (long long)d.Dr);
    for (int64_t b = 0; b < batch; b++)
        if (seq > ra_kv_cache_max_new(cache, b))
            return ra_fail(RA_ERR_CACHE_FULL, "sequence %lld: %lld cached + %lld new tokens "
                           "exceed the capacity %lld", (long long)b, (long long)cache->length[b],
                           (long long)seq, (long long)cache->capacity);
    ra_attention_options masks = ra_attention_options_init();
    masks.window = c->window;
    masks.chunk = c->chunk;
    masks.softcap = c->softcap;
    masks.sinks = layer->weights.sinks;
    masks.scale = 1.0 / sqrt((double)d.D); /* q carries the rest of the layer's scale */
    const int64_t row = d.Dr + d.r, step = seq < MLA_DECODE_TOKENS ? seq : MLA_DECODE_TOKENS;
    ra_tensor q_step = ra_tensor_4d((void *)x, RA_F32, batch, step, d.H, row);
    ra_attention_mask mask;
    RA_TRY(ra_attention_decode_mask(&mask, cache, &q_step, &masks));
    ra_positions given;
    if (positions) RA_TRY(ra_positions_read(&given, positions, layer->rope, batch, seq, 0));
    int prefill = 1; /* every sequence empty: the forward, unabsorbed */
    for (int64_t b = 0; b < batch; b++) prefill &= cache->length[b] == 0;

    /* Scratch: starts [B], q, k, v, attention output [T, H, D], the
     * projections', and then either the flash kernel's or the absorbed
     * queries and outputs [B, step, H, Dr + r] and latent_attention's or, with
     * the masks only it has, the decode kernel's. */
    const int64_t T = batch * seq, n = T * d.H * d.D, floats = forward_floats(&d, T);
    const int by_gemm = !c->window && !c->chunk && !c->softcap && !layer->weights.sinks;
    const int64_t keys = block_keys(step * d.H); /* every pass's, short last ones too */
    size_t kernel = 0;
    if (prefill)
        kernel = ra_attention_scratch_bytes(RA_PATH_FLASH, batch, seq, seq, d.H, d.H, d.D,
                                            ra_parallel_threads(ctx));
    else if (by_gemm)
        kernel = (size_t)latent_attention_floats(cache, step * d.H, keys) * sizeof(float);
    else
        RA_TRY(ra_attention_decode_scratch(cache, &q_step, ra_parallel_threads(ctx), 0,
                                           &kernel));
    const int64_t absorbed = prefill ? 0 : 2 * ra_round_up(batch * step * d.H * row, 16);
    const int64_t head = ra_round_up(2 * batch, 16); /* starts, as floats */
    const size_t bytes = floats ? scratch_bytes(head + floats + absorbed, kernel) : 0;
    if (!bytes) return scratch_overflow(T);
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, bytes, &scratch));
    int64_t *starts = scratch.data;
    float *buf = (float *)scratch.data + head, *proj = buf + 4 * n;
    float *gate = proj + ra_mla_project_floats(&d, T), *qa = buf + floats, *oa = qa + absorbed / 2, *kernel_scratch = qa + absorbed;
    for (int64_t b = 0; b < batch; b++) starts[b] = cache->length[b];
    ra_positions pos = ra_positions_start(0);
    pos.starts = starts;
    if (positions) pos = given;
    ra_tensor q = ra_tensor_4d(buf, RA_F32, batch, seq, d.H, d.D);
    ra_tensor k = ra_tensor_4d(buf + n, RA_F32, batch, seq, d.H, d.D);
    ra_tensor v = ra_tensor_4d(buf + 2 * n, RA_F32, batch, seq, d.H, d.D);
    ra_tensor attn = ra_tensor_4d(buf + 3 * n, RA_F32, batch, seq, d.H, d.D);
    ra_status status = ra_mla_project(layer, ctx, q.data, prefill ? k.data : NULL, v.data,
                                      gate, x, batch, seq, &pos, proj);
    if (status != RA_OK) { /* nothing written yet */
        ra_scratch_release(&scratch);
        return status;
    }
    const float *lat = proj, *kr = proj + T * d.r;
    if (prefill) {
        ra_attention_args args;
        status = ra_attention_prepare(&args, &attn, &q, &k, &v, &masks);
        if (status != RA_OK) { /* the masks were checked: not reached */
            ra_scratch_release(&scratch);
            return status;
        }
        ra_attention_flash(ctx, &args, kernel_scratch);
        for (int64_t b = 0; b < batch; b++) store_latent(cache, lat, kr, b, seq, 0, seq, &d);
        for (int64_t b = 0; b < batch; b++) cache->length[b] += seq;
        float *packed = attn.data; /* packed in place: row i moves to i * Dv <= i * D */
        ra_mla_pack(packed, attn.data, T, &d);
        gated_wo(layer, y, packed, x, gate, T);
    } else {
        /* Tokens [s0, s1) of every sequence: stored, then decoded as the
         * last s1 - s0 tokens; their outputs packed into attn [T, H * Dv]. */
        for (int64_t s0 = 0; s0 < seq; s0 += step) {
            const int64_t s1 = seq - s0 < step ? seq : s0 + step, m = s1 - s0;
            for (int64_t b = 0; b < batch; b++) {
                store_latent(cache, lat, kr, b, seq, s0, s1, &d);
                cache->length[b] += m;
            }
            ra_tensor tq = ra_tensor_4d(qa, RA_F32, batch, m, d.H, row);
            ra_tensor to = ra_tensor_4d(oa, RA_F32, batch, m, d.H, row);
            absorb_queries(layer, qa, q.data, batch, seq, s0, s1, &d);
            if (by_gemm)
                latent_attention(ctx, cache, oa, qa, batch, m, d.H, (float)masks.scale, keys,
                                 kernel_scratch);
            else
                ra_attention_decode_run(ctx, cache, &to, &tq, NULL, &mask, kernel_scratch);
            if (m == seq) /* every sequence's rows at once: W_UV read once */
                absorb_output(layer, attn.data, oa, batch * m, &d);
            else
                for (int64_t b = 0; b < batch; b++)
                    absorb_output(layer, (float *)attn.data + (b * seq + s0) * d.H * d.Dv,
                                  oa + b * m * d.H * row, m, &d);
        }
        gated_wo(layer, y, attn.data, x, gate, T);
    }
    ra_scratch_release(&scratch);
    return RA_OK;
}
