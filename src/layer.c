/*
 * layer.c — LLaMA's Attention module: four projections through CBLAS
 * around RoPE and causal GQA attention.
 *
 *   x [B, S, dim] -> xq = x wq^T [B, S, H, D], xk = x wk^T, xv = x wv^T [B, S, Hkv, D]
 *   (H * D may differ from dim, as in Qwen3 or Gemma: wq is [H * D, dim])
 *   -> rope(xq), rope(xk) at the tokens' positions (the flash path rotates
 *      each tile as attention loads it: no pass of its own over xq and xk)
 *   -> attention (causal, GQA by index, attn_dropout when training) [B, S, H, D]
 *   -> y = out wo^T [B, S, dim] -> resid_dropout when training
 * (q, k and v may come from one weight fused per key/value group, read in
 * place: GPT-NeoX, Falcon, InternLM2.)
 * Each projection adds its bias, where the layer has one (Qwen2: bq, bk, bv),
 * q, k and v are clamped where the layer has clip_qkv (OLMo; q and k after
 * their norms with clip_after_norm: OLMoE), q and k are
 * normalized before RoPE where the layer has the norms (RMSNorm per head:
 * Qwen3; over the whole projection: OLMo 2; LayerNorm with each head's own
 * weights: Cohere, StableLM 2), v's heads are RMS-normed without weights
 * where the layer has v_norm (Gemma 3n, 4), then scaled by v_scale
 * (MiMo-V2-Flash), and q is multiplied by
 * scale * sqrt(D) when the layer's softmax scale is not 1/sqrt(D).
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "attention_internal.h"
#include "gemm.h"
#include "kvcache_internal.h"
#include "layer_internal.h"
#include "layer_mla.h"
#include "parallel.h"
#include "rope_internal.h"

static ra_status check_temperature_power(const ra_layer_config *c)
{
    if (!(c->temperature_length >= 0 && c->temperature_length < HUGE_VAL &&
          fabs(c->temperature_power) < HUGE_VAL))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: temperature_length %g, "
                       "temperature_power %g", c->temperature_length, c->temperature_power);
    if (c->temperature_length == 0) return RA_OK;
    if (c->temperature_floor > 0)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: temperature_length with "
                       "temperature_floor (two position scalings of q)");
    /* the factor is monotonic in p: its ends must be normal floats */
    const double ends[2] = {ra_layer_temperature_power_at(c, 0.0),
                            ra_layer_temperature_power_at(c, (double)RA_MAX_POSITION)};
    for (int i = 0; i < 2; i++)
        if (!(ends[i] >= FLT_MIN && ends[i] <= FLT_MAX))
            return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: temperature_length %g and "
                           "temperature_power %g make q's factor %g at position %lld, not a "
                           "normal float", c->temperature_length, c->temperature_power,
                           ends[i], i ? (long long)RA_MAX_POSITION : 0LL);
    return RA_OK;
}

static ra_status resolve_config(ra_layer_config *c)
{
    if (c->dim <= 0 || c->n_heads <= 0 || c->n_kv_heads < 0 || c->head_dim < 0)
        return ra_fail(RA_ERR_SIZE, "ra_layer_config: dim %lld, n_heads %lld, n_kv_heads %lld, "
                       "head_dim %lld (dim and n_heads must be positive, the others >= 0)",
                       (long long)c->dim, (long long)c->n_heads, (long long)c->n_kv_heads,
                       (long long)c->head_dim);
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    if (c->head_dim == 0) {
        if (c->dim % c->n_heads)
            return ra_fail(RA_ERR_DIM, "ra_layer_config: dim %lld is not a multiple of n_heads "
                           "%lld (set head_dim)", (long long)c->dim, (long long)c->n_heads);
        c->head_dim = c->dim / c->n_heads;
    }
    if (c->head_dim % 2)
        return ra_fail(RA_ERR_HEAD_DIM, "ra_layer_config: head_dim %lld is odd",
                       (long long)c->head_dim);
    if (c->norm_eps == 0) c->norm_eps = 1e-6;
    if (!(c->norm_eps > 0 && c->norm_eps < 1))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: norm_eps %g is not in (0, 1)",
                       c->norm_eps);
    if (c->norm_whole && c->norm_head_weights)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: norm_whole and norm_head_weights "
                       "are both set");
    if (c->clip_after_norm && (c->norm_after_rope || c->qk_l2_norm))
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: clip_after_norm with %s",
                       c->norm_after_rope ? "norm_after_rope" : "qk_l2_norm");
    if (c->norm_after_rope && (c->qk_l2_norm || c->temperature_floor || c->temperature_length))
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: norm_after_rope with %s",
                       c->qk_l2_norm          ? "qk_l2_norm"
                       : c->temperature_floor ? "temperature_floor"
                                              : "temperature_length");
    if (c->scale == 0) c->scale = 1.0 / sqrt((double)c->head_dim);
    if (!(c->scale > 0 && c->scale * sqrt((double)c->head_dim) <= FLT_MAX)) /* q's factor */
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: scale %g", c->scale);
    if (c->window < 0 || c->chunk < 0 ||
        !(c->softcap == 0 || (c->softcap >= FLT_MIN && c->softcap <= FLT_MAX)))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: window %lld, chunk %lld, softcap %g "
                       "(each 0 or positive, softcap a normal float)", (long long)c->window,
                       (long long)c->chunk, c->softcap);
    if (c->v_scale == 0) c->v_scale = 1.0;
    if (!(fabs(c->v_scale) <= FLT_MAX)) /* v * v_scale must stay a float */
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: v_scale %g (0 means 1; else at "
                       "most FLT_MAX in size)", c->v_scale);
    if (c->max_keys < 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: max_keys %lld (0: no bound, or "
                       "positive)", (long long)c->max_keys);
    if (!(c->clip_qkv >= 0 && c->clip_qkv < HUGE_VAL))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: clip_qkv %g", c->clip_qkv);
    /* Llama 4's (and Ministral 3's) temperature: the factor at the last position a float */
    if (!(c->temperature_floor >= 0 && c->temperature_floor < HUGE_VAL &&
          fabs(c->temperature_scale) < HUGE_VAL))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: temperature_floor %g, "
                       "temperature_scale %g", c->temperature_floor, c->temperature_scale);
    if (c->temperature_no_offset && c->temperature_floor == 0)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: temperature_no_offset without "
                       "temperature_floor");
    if (c->temperature_floor > 0 &&
        !(1.0 + fabs(c->temperature_scale) *
                    log1p(floor(((double)RA_MAX_POSITION + 1.0) / c->temperature_floor)) <=
          FLT_MAX))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: temperature_floor %g and "
                       "temperature_scale %g make q's factor beyond float32",
                       c->temperature_floor, c->temperature_scale);
    RA_TRY(check_temperature_power(c));
    int64_t q_dim;
    if (ra_mul(c->n_heads, c->head_dim, &q_dim) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "ra_layer_config: n_heads %lld * head_dim %lld: too many "
                       "elements", (long long)c->n_heads, (long long)c->head_dim);
    if (c->n_heads % c->n_kv_heads)
        return ra_fail(RA_ERR_GQA, "ra_layer_config: n_heads %lld is not a multiple of "
                       "n_kv_heads %lld", (long long)c->n_heads, (long long)c->n_kv_heads);
    /* cblas takes int sizes: every weight dimension must fit. */
    if (c->dim > INT_MAX || q_dim > INT_MAX)
        return ra_fail(RA_ERR_OVERFLOW, "ra_layer_config: %s %lld exceeds INT_MAX (cblas)",
                       c->dim > INT_MAX ? "dim" : "n_heads * head_dim",
                       (long long)(c->dim > INT_MAX ? c->dim : q_dim));
    int64_t weight;
    if (ra_mul(c->dim, c->gated_output ? 2 * q_dim : q_dim, &weight) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "ra_layer_config: dim %lld * n_heads * head_dim %lld: "
                       "too many elements", (long long)c->dim, (long long)q_dim);
    return RA_OK;
}

/* q, k and v's weights: wq, wk and wv, or one wqkv. */
static ra_status check_qkv_weights(const ra_layer_weights *w)
{
    if (w->wqkv && (w->wq || w->wk || w->wv || w->bq || w->bk || w->bv))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: wqkv with wq, wk, wv, bq, bk or bv");
    if (!w->wqkv && w->bqkv)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: bqkv without wqkv");
    if (!w->wqkv && (!w->wq || !w->wk || !w->wv))
        return ra_fail(RA_ERR_NULL, "ra_layer_weights: wq, wk or wv is NULL (and no wqkv)");
    return RA_OK;
}

/* The q and k norms' biases: each with its norm's weights, of LayerNorms. */
static ra_status check_norm_biases(const ra_layer_weights *w, const ra_layer_config *c)
{
    const struct {
        const float *bias, *weight;
        const char *name, *weight_name;
    } biases[] = {{w->q_norm_bias, w->q_norm, "q_norm_bias", "q_norm"},
                  {w->k_norm_bias, w->k_norm, "k_norm_bias", "k_norm"}};
    for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++) {
        if (!biases[i].bias) continue;
        if (!biases[i].weight)
            return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: %s without %s", biases[i].name,
                           biases[i].weight_name);
        if (!c->norm_layer)
            return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: %s without config.norm_layer "
                           "(an RMSNorm has no bias)", biases[i].name);
    }
    return RA_OK;
}

/* The output gate's weight, bias and options: each with what it needs. */
static ra_status check_gate(const ra_layer_weights *w, const ra_layer_config *c)
{
    const struct {
        int set;
        const char *name;
    } need_wgate[] = {{w->bgate != NULL, "ra_layer_weights: bgate"},
                      {c->gate_per_head, "ra_layer_config: gate_per_head"},
                      {c->gate_softplus, "ra_layer_config: gate_softplus"}};
    for (size_t i = 0; i < sizeof need_wgate / sizeof need_wgate[0]; i++)
        if (need_wgate[i].set && !w->wgate)
            return ra_fail(RA_ERR_ARGUMENT, "%s without weights.wgate (the output gate's own "
                           "projection)", need_wgate[i].name);
    if (w->wgate && !c->gated_output)
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: wgate without config.gated_output");
    return RA_OK;
}

/* The projection matrices' dtype, and their alignment where 16-bit. */
static ra_status check_weight_dtype(const ra_layer_weights *w, const ra_layer_config *c)
{
    if ((unsigned)w->dtype >= RA_DTYPE_COUNT && !ra_dtype_is_cache8(w->dtype))
        return ra_fail(RA_ERR_DTYPE, "ra_layer_weights: dtype %d is not a ra_dtype",
                       (int)w->dtype);
    if (w->dtype != RA_F32 && w->dtype != RA_BF16 && w->dtype != RA_F16)
        return ra_fail(RA_ERR_DTYPE, "ra_layer_weights: dtype %s (the projections take RA_F32, "
                       "RA_BF16 or RA_F16)", ra_dtype_name(w->dtype));
    if (w->dtype == RA_F32) return RA_OK;
    if (c->kv_lora_rank)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_weights: dtype %s with latent attention "
                       "(config.kv_lora_rank): its weights must be RA_F32",
                       ra_dtype_name(w->dtype));
    const struct {
        const float *p;
        const char *name;
    } ws[] = {{w->wq, "wq"},     {w->wk, "wk"},     {w->wv, "wv"},
              {w->wo, "wo"},     {w->wqkv, "wqkv"}, {w->wgate, "wgate"}};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if ((uintptr_t)ws[i].p % 2)
            return ra_fail(RA_ERR_ARGUMENT, "ra_layer_weights: %s is not 2-byte aligned (16-bit "
                           "weights)", ws[i].name);
    return RA_OK;
}

RA_API ra_status ra_layer_create(ra_layer **out, const ra_layer_config *config,
                                 const ra_layer_weights *weights)
{
    ra_error_reset();
    if (!out || !config || !weights)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !out ? "out" : !config ? "config" : "weights");
    *out = NULL;
    ra_layer_config c;
    ra_layer_weights w_read;
    ra_rope_config rope = ra_rope_config_default(0);
    RA_TRY(RA_READ_STRUCT(c, config, ra_layer_config));
    if (c.max_document < 0 || (c.max_document && !c.non_causal))
        return ra_fail(RA_ERR_ARGUMENT, "ra_layer_config: max_document %lld (0: no bound; "
                       "positive, with non_causal: a windowed encoder's)",
                       (long long)c.max_document);
    if (c.non_causal && c.kv_lora_rank)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: non_causal with kv_lora_rank %lld "
                       "(latent attention is a decoder's)", (long long)c.kv_lora_rank);
    if (c.whole_masks && (c.non_causal || c.chunk || c.kv_lora_rank))
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: whole_masks with %s (its calls take "
                       "no whole mask)", c.non_causal ? "non_causal" : c.chunk ? "chunk"
                                                                         : "kv_lora_rank");
    /* older headers' weights end before dtype: float32 */
    RA_TRY(ra_struct_read(&w_read, sizeof w_read, offsetof(ra_layer_weights, dtype), weights,
                          "ra_layer_weights"));
    if (c.rope) RA_TRY(RA_READ_STRUCT(rope, c.rope, ra_rope_config));
    const ra_layer_weights *w = &w_read;
    if (!w->wo) return ra_fail(RA_ERR_NULL, "ra_layer_weights: wo is NULL");
    RA_TRY(check_weight_dtype(w, &c));
    RA_TRY(ra_mla_resolve(&c, w, &rope)); /* a latent layer's weights, and its rope */
    if (!c.kv_lora_rank) RA_TRY(check_qkv_weights(w));
    RA_TRY(check_norm_biases(w, &c));
    if (c.gated_output && w->wqkv)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: gated_output with weights.wqkv");
    RA_TRY(check_gate(w, &c));
    RA_TRY(resolve_config(&c));
    if (!c.kv_lora_rank) rope.head_dim = c.head_dim;
    ra_layer *layer = ra_calloc(1, sizeof *layer);
    if (!layer) return ra_fail(RA_ERR_NOMEM, "allocating the layer");
    ra_status status = ra_rope_create(&layer->rope, &rope);
    if (status != RA_OK) {
        ra_free(layer);
        return status;
    }
    if (c.no_rope) ra_rope_zero_angles(layer->rope);
    /* A 2-D (axial) rope: the vision towers' layers (issue 43's item 3),
     * on the uncached calls only (ra_layer_refuse_axial). */
    const char *axial_with = rope.axial == RA_AXIAL_NONE ? NULL
                             : c.kv_lora_rank            ? "kv_lora_rank (latent attention)"
                             : c.positions_are_slots     ? "positions_are_slots"
                                                         : NULL;
    if (axial_with) {
        ra_rope_destroy(layer->rope);
        ra_free(layer);
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: %s with a 2-D (axial) rope",
                       axial_with);
    }
    if ((c.temperature_floor > 0 || c.temperature_length > 0) &&
        layer->rope->component) { /* no one position to scale by */
        ra_rope_destroy(layer->rope);
        ra_free(layer);
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: %s with a rope that has %s",
                       c.temperature_floor > 0 ? "temperature_floor" : "temperature_length",
                       rope.axial != RA_AXIAL_NONE ? "2-D positions (axial)"
                                                   : "mrope_section (3-D positions)");
    }
    double factor = ra_rope_attention_factor(layer->rope);
    if (c.qk_l2_norm && factor != 1.0) {
        ra_rope_destroy(layer->rope);
        ra_free(layer);
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: qk_l2_norm with a rope whose "
                       "attention factor is %g, not 1", factor);
    }
    if (c.rope_values && (c.kv_lora_rank || factor != 1.0)) { /* v would be scaled by it */
        ra_rope_destroy(layer->rope);
        ra_free(layer);
        return c.kv_lora_rank ? ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: rope_values with "
                                        "latent attention (kv_lora_rank)")
                              : ra_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: rope_values with a "
                                        "rope whose attention factor is %g, not 1", factor);
    }
    static uint64_t layers_made;
    c.rope = &layer->rope->config;
    layer->config = c;
    layer->weights = w_read;
    layer->serial = __atomic_fetch_add(&layers_made, 1, __ATOMIC_RELAXED);
    layer->holds = 1;
    *out = layer;
    return RA_OK;
}

RA_API void ra_layer_destroy(ra_layer *layer)
{
    if (layer) ra_layer_release(layer);
}

void ra_layer_hold(const ra_layer *layer)
{
    __atomic_add_fetch(&((ra_layer *)layer)->holds, 1, __ATOMIC_RELAXED);
}

void ra_layer_release(const ra_layer *layer)
{
    ra_layer *l = (ra_layer *)layer; /* ra_layer_create's, not const */
    if (__atomic_sub_fetch(&l->holds, 1, __ATOMIC_ACQ_REL) > 0) return;
    ra_rope_destroy(l->rope);
    ra_free(l);
}

RA_API const ra_layer_config *ra_layer_get_config(const ra_layer *layer)
{
    return layer ? &layer->config : NULL;
}

/* The sizes of x (and y), and of the layer's q, for a failure's detail. */
static const char *const layer_x_names[3] = {"batch", "seq", "dim"};
static const char *const layer_q_names[3] = {"batch", "seq", "n_heads * head_dim"};

ra_status ra_layer_call_sizes(const ra_layer *layer, int64_t batch, int64_t seq,
                              ra_layer_call *call)
{
    const ra_layer_config *c = &layer->config;
    int64_t dims[3] = {batch, seq, c->dim}, q_dims[3] = {batch, seq, c->n_heads * c->head_dim};
    RA_TRY(ra_count_named(dims, layer_x_names, 3, &call->n_x));
    RA_TRY(ra_count_named(q_dims, layer_q_names, 3, &call->n_q));
    call->batch = batch;
    call->seq = seq;
    call->tokens = batch * seq;
    return RA_OK;
}

int ra_layer_weight_spans(const ra_layer *layer, ra_layer_span spans[RA_LAYER_SPANS])
{
    const ra_layer_weights *w = &layer->weights;
    const ra_layer_config *c = &layer->config;
    const int64_t n_wgate = ra_layer_gate_width(c) * c->dim;
    if (c->kv_lora_rank) {
        const ra_mla_dims d = ra_mla_dims_of(c);
        const int64_t q_rows = d.H * (d.D + ra_mla_gate_rows(c, w));
        const ra_layer_span latent[] = {
            {w->wq, q_rows * d.dim, "wq"},        {w->wq_a, d.rq * d.dim, "wq_a"},
            {w->bq_a, d.rq, "bq_a"},              {w->q_a_norm, d.rq, "q_a_norm"},
            {w->wq_b, q_rows * d.Kq, "wq_b"},     {w->wkv_a, (d.r + d.Dr) * d.dim, "wkv_a"},
            {w->bkv_a, d.r + d.Dr, "bkv_a"},      {w->kv_a_norm, d.r, "kv_a_norm"},
            {w->wkv_b, d.H * (d.Dn + d.Dv) * d.r, "wkv_b"},
            {w->wo, d.dim * d.H * d.Dv, "wo"},    {w->bo, d.dim, "bo"},
            {w->sinks, d.H, "sinks"},             {w->wgate, n_wgate, "wgate"},
            {w->bgate, d.H, "bgate"},             {w->k_rope_norm, d.Dr, "k_rope_norm"}};
        memcpy(spans, latent, sizeof latent);
        return (int)(sizeof latent / sizeof latent[0]);
    }
    const int64_t D = c->head_dim, q_dim = c->n_heads * D, kv = c->n_kv_heads * D;
    const int64_t n_wq = q_dim * c->dim, n_wkv = kv * c->dim;
    const int64_t q_rows = c->gated_output && !w->wgate ? 2 * q_dim : q_dim; /* wq's, bq's */
    const ra_layer_norm_shape qn = ra_layer_norm_shape_of(c, c->n_heads, 1),
                              kn = ra_layer_norm_shape_of(c, c->n_kv_heads, 1);
    const int64_t n_qn = qn.weight_rows * qn.d, n_kn = kn.weight_rows * kn.d;
    const ra_layer_span plain[] = {
        {w->wq, ra_layer_weight_floats(layer, q_rows * c->dim), "wq"},
        {w->wk, ra_layer_weight_floats(layer, n_wkv), "wk"},
        {w->wv, ra_layer_weight_floats(layer, n_wkv), "wv"},
        {w->wo, ra_layer_weight_floats(layer, n_wq), "wo"},
        {w->bq, q_rows, "bq"}, {w->bk, kv, "bk"}, {w->bv, kv, "bv"}, {w->bo, c->dim, "bo"},
        {w->q_norm, n_qn, "q_norm"}, {w->k_norm, n_kn, "k_norm"},
        {w->wqkv, ra_layer_weight_floats(layer, n_wq + 2 * n_wkv), "wqkv"},
        {w->bqkv, q_dim + 2 * kv, "bqkv"}, {w->sinks, c->n_heads, "sinks"},
        {w->o_norm, q_dim, "o_norm"}, {w->q_norm_bias, n_qn, "q_norm_bias"},
        {w->k_norm_bias, n_kn, "k_norm_bias"},
        {w->wgate, ra_layer_weight_floats(layer, n_wgate), "wgate"},
        {w->bgate, c->n_heads, "bgate"}};
    memcpy(spans, plain, sizeof plain);
    return (int)(sizeof plain / sizeof plain[0]);
}

ra_status ra_layer_check_y_apart(const ra_layer *layer, const float *y, int64_t n)
{
    ra_layer_span w[RA_LAYER_SPANS];
    const int n_w = ra_layer_weight_spans(layer, w);
    for (int i = 0; i < n_w; i++)
        if (w[i].p && ra_floats_overlap(y, n, w[i].p, w[i].n))
            return ra_fail(RA_ERR_ARGUMENT, "y overlaps the layer's %s", w[i].name);
    return RA_OK;
}

ra_status ra_layer_check_call(const ra_layer *layer, const float *y, const float *x,
                              int64_t batch, int64_t seq, const ra_positions *positions,
                              const ra_attention_options *options, ra_layer_call *call)
{
    if (!layer || !y || !x)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !layer ? "layer" : !y ? "y" : "x");
    const ra_layer_config *c = &layer->config;
    RA_TRY(ra_layer_call_sizes(layer, batch, seq, call));
    /* The training forward keeps x for the backward: y written over it
     * would change the gradients silently. */
    if (ra_floats_overlap(y, call->n_x, x, call->n_x))
        return ra_fail(RA_ERR_ARGUMENT, "y overlaps x");
    RA_TRY(ra_layer_check_y_apart(layer, y, call->n_x));
    RA_TRY(ra_attention_options_read(&call->attn, options));
    if (call->attn.path == RA_PATH_AUTO) call->attn.path = RA_PATH_FLASH;
    /* The layer's own masks come from its config and weights; a call's
     * padding and documents from its options. */
    ra_attention_options *o = &call->attn;
    if (o->scale || o->softcap || o->window || o->chunk || o->sinks || o->dsinks)
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: the layer takes its scale, "
                       "window, chunk, soft-cap and sinks from its config and weights, not "
                       "from options");
    RA_TRY(ra_layer_read_whole_mask(layer, o));
    if (o->attn_mask && c->kv_lora_rank)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: attn_mask with a latent "
                       "attention layer (kv_lora_rank %lld)", (long long)c->kv_lora_rank);
    /* non_causal: the attn_mask is the whole mask but for the window's
     * bound on earlier keys, which a sliding layer's mask always keeps */
    const int whole = o->non_causal;
    o->window = c->window;
    o->window_earlier_only = whole;
    o->chunk = c->chunk;
    o->softcap = c->softcap;
    o->sinks = layer->weights.sinks;
    o->non_causal = whole || c->non_causal; /* the config's: the window both ways */
    ra_attention_mask mask; /* checked here, before anything is computed: attn_mask over
                               [B or 1, H or 1, S or 1, S or 1] */
    const int64_t q_shape[4] = {batch, seq, c->n_heads, c->head_dim};
    RA_TRY(ra_attention_mask_read_keys(&mask, o, q_shape, seq));
    if (o->attn_mask && ra_tensor_overlaps_bytes(o->attn_mask, y, (size_t)call->n_x * 4))
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: attn_mask overlaps y");
    /* Packed ragged batches need attention that stays inside each sequence. */
    RA_TRY(ra_positions_read(&call->pos, positions, layer->rope, batch, seq, 0));
    return ra_layer_check_keys(layer, call);
}

/* y [rows, cols] += bias [cols] on every row; no bias (NULL): nothing. */
static void add_bias(float *y, const float *bias, int64_t rows, int64_t cols)
{
    if (!bias) return;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < cols; i++) y[r * cols + i] += bias[i];
}

ra_layer_proj ra_layer_proj_of(const ra_layer *layer, int p)
{
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const int64_t D = c->head_dim, heads = p == RA_PROJ_Q ? c->n_heads : c->n_kv_heads;
    if (p == RA_PROJ_GATE && w->wgate) /* AfMoE: gate_proj, a weight of its own */
        return (ra_layer_proj){w->wgate, NULL, 1, ra_layer_gate_width(c), 0};
    if (c->gated_output && !w->wgate && (p == RA_PROJ_Q || p == RA_PROJ_GATE)) {
        /* Qwen3-Next: each head's D query rows, then its D gate rows */
        const int64_t first = p == RA_PROJ_GATE ? D : 0;
        return (ra_layer_proj){ra_gemm_weight_at(w->wq, w->dtype, first * c->dim),
                               w->bq ? w->bq + first : NULL, c->n_heads, D, 2 * D};
    }
    if (!w->wqkv) {
        const float *const ws[3] = {w->wq, w->wk, w->wv}, *const bs[3] = {w->bq, w->bk, w->bv};
        return (ra_layer_proj){ws[p], bs[p], 1, heads * D, 0};
    }
    /* Each group: rep query heads' rows, then a key head's, then a value head's. */
    const int64_t rep = c->n_heads / c->n_kv_heads;
    const int64_t first = p == RA_PROJ_Q ? 0 : p == RA_PROJ_K ? rep * D : (rep + 1) * D;
    return (ra_layer_proj){ra_gemm_weight_at(w->wqkv, w->dtype, first * c->dim),
                           w->bqkv ? w->bqkv + first : NULL, c->n_kv_heads,
                           p == RA_PROJ_Q ? rep * D : D, (rep + 2) * D};
}

ra_status ra_layer_gemm_begin(const ra_layer *layer, ra_context *ctx, int64_t rows,
                              ra_scratch *panel, ra_gemm_env *env)
{
    const ra_layer_config *c = &layer->config;
    const int64_t q_dim = c->n_heads * c->head_dim;
    *env = (ra_gemm_env){ctx, layer->weights.dtype, NULL, 0};
    *panel = (ra_scratch){NULL, 0};
    if (env->dtype == RA_F32 || (rows > 0 && rows <= RA_GEMV16_ROWS)) return RA_OK;
    /* dim, q_dim <= INT_MAX and dim * q_dim within RA_MAX_ELEMENTS
     * (resolve_config); wq and wo are the largest matrices (a fused
     * wqkv's groups are each smaller) */
    env->panel_floats = ra_gemm_panel_floats(c->dim > q_dim ? c->dim : q_dim, c->dim * q_dim);
    RA_TRY(ra_scratch_acquire_panel(ctx, (size_t)env->panel_floats * sizeof(float), panel));
    env->panel = panel->data;
    return RA_OK;
}

ra_status ra_layer_step_gemm(ra_layer_step *step, int64_t rows)
{
    RA_TRY(ra_layer_gemm_begin(step->layer, step->memory, rows, &step->panel, &step->mm));
    step->mm.ctx = step->ctx; /* the threads are the call's, whatever holds the panel */
    return RA_OK;
}

void ra_layer_step_release(ra_layer_step *step)
{
    ra_scratch_release(&step->scratch);
    ra_scratch_release(&step->o);
    ra_scratch_release(&step->panel);
}

/* out [tokens, groups * rows] = x wp^T (+ bp), block by block. */
static void project(const ra_gemm_env *mm, float *out, const float *x, const ra_layer_proj *pj,
                    int64_t tokens, int64_t dim)
{
    const int64_t ld = pj->groups * pj->rows;
    for (int64_t g = 0; g < pj->groups; g++) {
        float *o = out + g * pj->rows;
        ra_gemm_nt_w(mm, o, ld, x, ra_gemm_weight_at(pj->w, mm->dtype, g * pj->stride * dim),
                     tokens, pj->rows, dim);
        for (int64_t t = 0; pj->b && t < tokens; t++)
            for (int64_t i = 0; i < pj->rows; i++) o[t * ld + i] += pj->b[g * pj->stride + i];
    }
}

ra_layer_norm_shape ra_layer_norm_shape_of(const ra_layer_config *c, int64_t heads,
                                           int64_t tokens)
{
    ra_layer_norm_shape n = {tokens * heads, c->head_dim, 1, c->norm_layer != 0, c->norm_eps};
    if (c->norm_whole) {
        n.rows = tokens;
        n.d = heads * c->head_dim;
    } else if (c->norm_head_weights) {
        n.weight_rows = heads;
    }
    return n;
}

ra_layer_norm_shape ra_layer_l2_shape(const ra_layer_config *c, int64_t heads, int64_t tokens)
{
    return (ra_layer_norm_shape){tokens * heads, c->head_dim, 1, 0, c->norm_eps};
}

void ra_layer_qk_norms(const ra_layer *layer, float *xq, float *xk, int64_t tokens)
{
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    if (w->q_norm) {
        ra_layer_norm_shape n = ra_layer_norm_shape_of(c, c->n_heads, tokens);
        ra_layer_norm(xq, w->q_norm, w->q_norm_bias, &n);
    }
    if (w->k_norm) {
        ra_layer_norm_shape n = ra_layer_norm_shape_of(c, c->n_kv_heads, tokens);
        ra_layer_norm(xk, w->k_norm, w->k_norm_bias, &n);
    }
}

/* xq [tokens, H * D] *= ra_layer_q_factor, unless it is 1. */
static void scale_q(const ra_layer_config *c, float *xq, int64_t tokens)
{
    const float q_factor = ra_layer_q_factor(c);
    if (q_factor != 1.0f)
        for (int64_t i = 0; i < tokens * c->n_heads * c->head_dim; i++) xq[i] *= q_factor;
}

void ra_layer_project_qkv(const ra_layer *layer, const ra_gemm_env *mm, float *xq, float *xk,
                          float *xv, const float *x, int64_t tokens, int normalize)
{
    const ra_layer_config *c = &layer->config;
    const int64_t q_dim = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const ra_layer_proj pq = ra_layer_proj_of(layer, RA_PROJ_Q),
                        pk = ra_layer_proj_of(layer, RA_PROJ_K),
                        pv = ra_layer_proj_of(layer, RA_PROJ_V);
    if (xq) project(mm, xq, x, &pq, tokens, c->dim);
    if (xk) project(mm, xk, x, &pk, tokens, c->dim);
    if (xv) project(mm, xv, x, &pv, tokens, c->dim);
    if (!normalize) return;
    const int clip_late = c->clip_after_norm; /* OLMoE: q and k clamped after their norms */
    if (c->clip_qkv > 0) {
        if (!clip_late) ra_layer_clip(xq, tokens * q_dim, c->clip_qkv);
        if (!clip_late) ra_layer_clip(xk, tokens * kv, c->clip_qkv);
        if (xv) ra_layer_clip(xv, tokens * kv, c->clip_qkv);
    }
    if (xv && c->v_norm) { /* Gemma 3n: value_states = self.v_norm(value_states) */
        const ra_layer_norm_shape vn = ra_layer_l2_shape(c, c->n_kv_heads, tokens);
        ra_layer_norm(xv, NULL, NULL, &vn);
    }
    for (int64_t i = 0; xv && c->v_scale != 1.0 && i < tokens * kv; i++) /* MiMo-V2-Flash */
        xv[i] = (float)(xv[i] * c->v_scale);
    if (c->norm_after_rope) return; /* the norms and q's factor: ra_layer_rotate */
    ra_layer_qk_norms(layer, xq, xk, tokens);
    if (c->clip_qkv > 0 && clip_late) {
        ra_layer_clip(xq, tokens * q_dim, c->clip_qkv);
        ra_layer_clip(xk, tokens * kv, c->clip_qkv);
    }
    if (c->qk_l2_norm) { /* after RoPE in Llama 4, which keeps each head's RMS */
        ra_layer_norm_shape qn = ra_layer_l2_shape(c, c->n_heads, tokens),
                            kn = ra_layer_l2_shape(c, c->n_kv_heads, tokens);
        ra_layer_norm(xq, NULL, NULL, &qn);
        ra_layer_norm(xk, NULL, NULL, &kn);
    }
    scale_q(c, xq, tokens);
}

const ra_rope *ra_layer_late_rope(const ra_layer *layer)
{
    return layer->config.norm_after_rope ? NULL : layer->rope;
}

void ra_layer_rotate(const ra_layer *layer, ra_context *ctx, const ra_tensor *xq,
                     const ra_tensor *xk, const ra_positions *pos, const int64_t *n_new)
{
    const int64_t batch = xq->shape[0], seq = xq->shape[1];
    if (!n_new) {
        ra_rope_apply(ctx, layer->rope, xq, xq, pos, RA_FORWARD); /* checked by the caller */
        ra_rope_apply(ctx, layer->rope, xk, xk, pos, RA_FORWARD);
    }
    for (int64_t b = 0; n_new && b < batch; b++) { /* a sequence's padding is never rotated */
        if (!n_new[b]) continue;
        const ra_positions rows = ra_positions_of_rows(pos, b, 0, seq);
        const ra_tensor q = ra_kv_rows(xq, b, 0, n_new[b]), k = ra_kv_rows(xk, b, 0, n_new[b]);
        ra_rope_apply(ctx, layer->rope, &q, &q, &rows, RA_FORWARD);
        ra_rope_apply(ctx, layer->rope, &k, &k, &rows, RA_FORWARD);
    }
    if (!layer->config.norm_after_rope) return;
    ra_layer_qk_norms(layer, xq->data, xk->data, batch * seq); /* HunYuan: after apply_rotary_pos_emb */
    scale_q(&layer->config, xq->data, batch * seq);
}

void ra_layer_rotate_values(const ra_layer *layer, ra_context *ctx, const ra_tensor *xv,
                            const ra_positions *pos, const int64_t *n_new)
{
    if (!layer->config.rope_values) return;
    if (!n_new) ra_rope_apply(ctx, layer->rope, xv, xv, pos, RA_FORWARD); /* checked by the caller */
    for (int64_t b = 0; n_new && b < xv->shape[0]; b++) { /* padding is never rotated */
        if (!n_new[b]) continue;
        const ra_positions rows = ra_positions_of_rows(pos, b, 0, xv->shape[1]);
        const ra_tensor v = ra_kv_rows(xv, b, 0, n_new[b]);
        ra_rope_apply(ctx, layer->rope, &v, &v, &rows, RA_FORWARD);
    }
}

ra_status ra_layer_check_rotation(const ra_layer *layer, const ra_positions *pos, int64_t batch,
                                  int64_t seq, const int64_t *n_new)
{
    ra_positions read;
    if (ra_layer_late_rope(layer) && !layer->config.rope_values) return RA_OK;
    return ra_positions_read_new(&read, pos, layer->rope, batch, seq, n_new);
}

void ra_layer_clip(float *x, int64_t n, double limit)
{
    const float hi = (float)limit, lo = -hi;
    for (int64_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

int ra_layer_output_changes(const ra_layer *layer)
{
    return layer->config.gated_output || layer->weights.o_norm != NULL;
}

ra_layer_norm_shape ra_layer_o_norm_shape(const ra_layer_config *c, int64_t tokens)
{
    return (ra_layer_norm_shape){tokens, c->n_heads * c->head_dim, 1, 0, c->norm_eps};
}

void ra_layer_project_output(const ra_layer *layer, const ra_gemm_env *mm, float *y, float *o,
                             const float *x, float *gate, int64_t tokens)
{
    const ra_layer_config *c = &layer->config;
    if (c->gated_output) { /* Qwen3-Next: attn_output = attn_output * torch.sigmoid(gate) */
        const ra_layer_proj pg = ra_layer_proj_of(layer, RA_PROJ_GATE);
        project(mm, gate, x, &pg, tokens, c->dim);
        ra_layer_gate_bias(layer, gate, tokens);
        ra_layer_gate_apply(layer, o, gate, tokens);
    }
    if (layer->weights.o_norm) { /* BitNet: attn_output = self.attn_sub_norm(attn_output) */
        const ra_layer_norm_shape n = ra_layer_o_norm_shape(c, tokens);
        ra_layer_norm(o, layer->weights.o_norm, NULL, &n);
    }
    ra_gemm_nt_w(mm, y, c->dim, o, layer->weights.wo, tokens, c->dim, c->n_heads * c->head_dim);
    add_bias(y, layer->weights.bo, tokens, c->dim);
}

void ra_layer_qkv(const ra_layer *layer, ra_context *ctx, const ra_gemm_env *mm, const float *x,
                  const ra_tensor *xq, const ra_tensor *xk, const ra_tensor *xv,
                  const ra_layer_call *call, int rotate)
{
    ra_layer_project_qkv(layer, mm, xq->data, xk->data, xv->data, x, call->tokens, 1); /* wq(x) .. */
    ra_layer_temperature(layer, xq->data, &call->pos, call->tokens, call->seq);
    if (rotate) ra_layer_rotate(layer, ctx, xq, xk, &call->pos, NULL); /* apply_rotary_emb */
    ra_layer_rotate_values(layer, ctx, xv, &call->pos, NULL); /* RoFormer's rotary_value */
}

void ra_layer_output(const ra_layer *layer, const ra_gemm_env *mm, float *y, float *o,
                     const float *x, float *gate, const ra_layer_call *call)
{
    ra_layer_project_output(layer, mm, y, o, x, gate, call->tokens); /* output = wo(output) */
    if (call->attn.dropout > 0.0f) /* resid_dropout */
        ra_layer_output_dropout(y, call->n_x, call->attn.dropout, call->attn.seed);
}

/* A forward whose scratch would not fit in memory. */
static ra_status scratch_overflow(int64_t batch, int64_t seq)
{
    return ra_fail(RA_ERR_OVERFLOW, "batch %lld, seq %lld: the layer's scratch overflows",
                   (long long)batch, (long long)seq);
}

RA_API ra_status ra_layer_forward(ra_context *ctx, const ra_layer *layer, float *y, const float *x,
                                  int64_t batch, int64_t seq, const ra_positions *positions,
                                  const ra_attention_options *options)
{
    ra_error_reset();
    ra_layer_call call;
    RA_TRY(ra_layer_check_call(layer, y, x, batch, seq, positions, options, &call));
    if (layer->config.kv_lora_rank) return ra_mla_forward(layer, ctx, y, x, &call);
    const ra_layer_config *c = &layer->config;
    const int64_t H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim;

    /* Scratch: xq, xk, xv and the attention output, then the kernel's own. */
    int64_t n_q = call.n_q, n_kv = call.tokens * Hkv * D; /* n_kv <= n_q = tokens * H * D */
    size_t kernel_bytes =
        ra_attention_scratch_bytes(call.attn.path, batch, seq, seq, H, Hkv, D,
                                   ra_parallel_threads(ctx));
    int64_t own_floats;
    if (ra_mul(n_q, 4, &own_floats) != RA_OK) /* bounds 2 * n_q + 2 * n_kv */
        return scratch_overflow(batch, seq);
    size_t own = (size_t)(2 * n_q + 2 * n_kv) * sizeof(float);
    if (kernel_bytes == 0 || kernel_bytes > SIZE_MAX - own) return scratch_overflow(batch, seq);
    ra_scratch scratch, panel;
    ra_gemm_env mm;
    RA_TRY(ra_layer_gemm_begin(layer, ctx, call.tokens, &panel, &mm));
    ra_status status = ra_scratch_acquire(ctx, own + kernel_bytes, &scratch);
    if (status != RA_OK) {
        ra_scratch_release(&panel);
        return status;
    }
    float *buf = scratch.data;
    ra_tensor xq = ra_tensor_4d(buf, RA_F32, batch, seq, H, D);
    ra_tensor xk = ra_tensor_4d(buf + n_q, RA_F32, batch, seq, Hkv, D);
    ra_tensor xv = ra_tensor_4d(buf + n_q + n_kv, RA_F32, batch, seq, Hkv, D);
    ra_tensor attn = ra_tensor_4d(buf + n_q + 2 * n_kv, RA_F32, batch, seq, H, D);
    float *kernel_scratch = buf + 2 * n_q + 2 * n_kv;
    ra_attention_args args;
    status = ra_attention_prepare(&args, &attn, &xq, &xk, &xv, &call.attn);
    if (status != RA_OK) {
        ra_scratch_release(&scratch);
        ra_scratch_release(&panel);
        return status;
    }

    /* RoPE fused into the flash tiles' loads; not for a short call, which
     * runs on the decode kernel over rotated rows (attention_short.c), as
     * ra_layer_forward_train's does: the same bits */
    const int fused = call.attn.path == RA_PATH_FLASH && ra_layer_late_rope(layer) &&
                      !ra_attention_short_shape(seq, seq, H / Hkv);
    if (fused) {
        args.rope = layer->rope;
        args.positions = &call.pos;
    }
    ra_layer_qkv(layer, ctx, &mm, x, &xq, &xk, &xv, &call, !fused);
    if (call.attn.path == RA_PATH_REFERENCE)
        ra_attention_reference(&args, kernel_scratch);
    else
        ra_attention_flash(ctx, &args, kernel_scratch);
    ra_layer_output(layer, &mm, y, attn.data, x, xq.data, &call);
    ra_scratch_release(&scratch);
    ra_scratch_release(&panel);
    return RA_OK;
}

/* ---- with a KV cache ------------------------------------------------------ */

/* positions_are_slots: each row's positions (NULL: the cache's lengths
 * on) continue its cache. */
static ra_status check_cached_slots(const ra_layer *layer, const ra_kv_cache *cache,
                                    int64_t batch, int64_t seq, const ra_positions *positions)
{
    if (!layer->config.positions_are_slots || !positions) return RA_OK;
    ra_positions pos;
    RA_TRY(ra_positions_read(&pos, positions, layer->rope, batch, seq, 0));
    for (int64_t b = 0; b < batch && b < cache->batch; b++)
        RA_TRY(ra_layer_check_new_slots(layer, &pos, "sequence", b, b, seq, cache->length[b], seq));
    return RA_OK;
}

/* n_q: batch * seq * H * D, checked, as are x's and y's sizes. */
static ra_status check_cached(const ra_layer *layer, const ra_kv_cache *cache, const float *y,
                              const float *x, int64_t batch, int64_t seq,
                              const ra_positions *positions, int64_t *n_q)
{
    if (!layer || !cache || !y || !x)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !layer ? "layer" : !cache ? "cache"
                                                  : !y ? "y" : "x");
    const ra_layer_config *c = &layer->config;
    int64_t n_x, dims[3] = {batch, seq, c->dim};
    int64_t q_dims[3] = {batch, seq, c->n_heads * c->head_dim};
    RA_TRY(ra_count_named(dims, layer_x_names, 3, &n_x));
    RA_TRY(ra_count_named(q_dims, layer_q_names, 3, n_q));
    RA_TRY(ra_layer_check_y_apart(layer, y, n_x));
    RA_TRY(ra_layer_refuse_axial(layer, "ra_layer_forward_cached"));
    RA_TRY(ra_layer_refuse_non_causal(layer, "ra_layer_forward_cached"));
    for (int64_t b = 0; b < batch && b < cache->batch; b++) /* a batch unlike it: refused below */
        RA_TRY(ra_layer_check_new_keys(layer, "sequence", b, cache->length[b], seq));
    RA_TRY(check_cached_slots(layer, cache, batch, seq, positions));
    if (c->kv_lora_rank) return RA_OK; /* a latent cache: ra_mla_forward_cached checks it */
    RA_TRY(ra_kv_cache_refuse_latent(cache, "ra_layer_forward_cached"));
    if (cache->batch != batch || cache->n_kv_heads != layer->config.n_kv_heads ||
        cache->head_dim != layer->config.head_dim)
        return ra_fail(RA_ERR_SHAPE, "the cache holds batch %lld, %lld kv heads of %lld; the "
                       "layer needs batch %lld, %lld of %lld", (long long)cache->batch,
                       (long long)cache->n_kv_heads, (long long)cache->head_dim,
                       (long long)batch, (long long)c->n_kv_heads, (long long)c->head_dim);
    return RA_OK;
}

/* A masked cached call (ra_layer_forward_cached_mask): its options hold an
 * attn_mask over [B or 1, H or 1, S or 1, L + S or 1], L the tokens every
 * sequence held before (the same in each), and non_causal at most; what its
 * flash attention over the cache's first L + S slots needs. */
static ra_status check_cached_mask(const ra_layer *layer, const ra_kv_cache *cache,
                                   const float *y, int64_t batch, int64_t seq,
                                   const ra_attention_options *options, ra_attention_options *o)
{
    const char *fn = "ra_layer_forward_cached_mask";
    RA_TRY(ra_attention_options_read(o, options));
    if (!o->attn_mask)
        return ra_fail(RA_ERR_NULL, "%s: options' attn_mask is NULL (without one: "
                       "ra_layer_forward_cached)", fn);
    if (o->path || o->dropout || o->seed || o->scale || o->softcap || o->window || o->chunk ||
        o->sinks || o->dsinks || o->padding_mask || o->cu_seqlens || o->n_documents)
        return ra_fail(RA_ERR_ARGUMENT, "%s: options other than attn_mask and non_causal (the "
                       "cache's calls run flash attention under the layer's own masks)", fn);
    RA_TRY(ra_layer_read_whole_mask(layer, o));
    const ra_layer_config *c = &layer->config;
    if (c->kv_lora_rank || c->max_keys || c->positions_are_slots)
        return ra_fail(RA_ERR_UNSUPPORTED, "%s: a layer with %s", fn,
                       c->kv_lora_rank ? "latent attention (kv_lora_rank)"
                       : c->max_keys ? "max_keys" : "positions_are_slots");
    const int64_t past = cache->length[0];
    for (int64_t b = 1; b < batch; b++)
        if (cache->length[b] != past)
            return ra_fail(RA_ERR_UNSUPPORTED, "%s: sequences of different lengths in the cache "
                           "(%lld and %lld tokens): the mask's keys are one length", fn,
                           (long long)past, (long long)cache->length[b]);
    if (past && cache->window)
        return ra_fail(RA_ERR_UNSUPPORTED, "%s: a window cache holding tokens (its slots are a "
                       "ring): a masked call only into an empty one, or a full cache", fn);
    if (past && ra_dtype_is_cache8(cache->dtype))
        return ra_fail(RA_ERR_UNSUPPORTED, "%s: an 8-bit cache holding tokens (the flash "
                       "kernel reads no 8-bit keys): a masked call only into an empty one", fn);
    if (past > cache->capacity - seq)
        return RA_OK; /* the append refuses it, naming the cache's capacity */
    if (past && c->chunk)
        return ra_fail(RA_ERR_UNSUPPORTED, "%s: a chunked layer (chunk %lld) with tokens in the "
                       "cache: a masked call only into an empty one", fn, (long long)c->chunk);
    o->window = c->window; /* non_causal: its bound on earlier keys only, as above */
    o->window_earlier_only = o->non_causal;
    o->chunk = c->chunk;
    o->softcap = c->softcap;
    o->sinks = layer->weights.sinks;
    ra_attention_mask mask;
    const int64_t q_shape[4] = {batch, seq, c->n_heads, c->head_dim};
    RA_TRY(ra_attention_mask_read_keys(&mask, o, q_shape, past + seq));
    if (ra_tensor_overlaps_bytes(o->attn_mask, y, (size_t)(batch * seq * c->dim) * 4))
        return ra_fail(RA_ERR_ARGUMENT, "%s: attn_mask overlaps y", fn);
    return RA_OK;
}

static ra_status forward_cached(ra_context *ctx, const ra_layer *layer, ra_kv_cache *cache,
                                float *y, const float *x, int64_t batch, int64_t seq,
                                const ra_positions *positions, const ra_attention_options *call)
{
    ra_error_reset();
    int64_t n_q;
    RA_TRY(check_cached(layer, cache, y, x, batch, seq, positions, &n_q));
    ra_attention_options masks = ra_attention_options_init();
    if (call) RA_TRY(check_cached_mask(layer, cache, y, batch, seq, call, &masks));
    if (layer->config.kv_lora_rank)
        return ra_mla_forward_cached(layer, ctx, cache, y, x, batch, seq, positions);
    /* The layer's masks, for the prefill and the steps alike; a window
     * cache must keep what its window or chunk reaches. */
    const ra_layer_config *lc = &layer->config;
    const int64_t reach = lc->window && (!lc->chunk || lc->window < lc->chunk) ? lc->window
                                                                                : lc->chunk;
    if (cache->window && !reach)
        return ra_fail(RA_ERR_ARGUMENT, "the cache is a window cache of %lld tokens, and the "
                       "layer's queries see every earlier token", (long long)cache->window);
    if (cache->window && reach > cache->window)
        return ra_fail(RA_ERR_ARGUMENT, "the cache is a window cache of %lld tokens, and the "
                       "layer's queries see up to %lld", (long long)cache->window,
                       (long long)reach);
    if (!call) {
        masks.window = lc->window;
        masks.chunk = lc->chunk;
        masks.softcap = lc->softcap;
        masks.sinks = layer->weights.sinks;
    }
    ra_tensor q_shape = ra_tensor_4d((void *)x, RA_F32, batch, seq, lc->n_heads, lc->head_dim);
    ra_attention_mask mask;
    if (!call) RA_TRY(ra_attention_decode_mask(&mask, cache, &q_shape, &masks));
    ra_positions given;
    if (positions) RA_TRY(ra_positions_read(&given, positions, layer->rope, batch, seq, 0));
    const ra_layer_config *c = &layer->config;
    const int64_t H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim;
    const int64_t tokens = batch * seq, n_kv = tokens * Hkv * D; /* n_kv <= n_q */
    /* Flash attention over the cache's first past + S slots: a prefill
     * (every sequence starts empty) or a masked call (all hold past). */
    int flash = 1;
    for (int64_t b = 0; b < batch; b++) flash &= cache->length[b] == 0;
    const int64_t past = call ? cache->length[0] : 0;
    flash |= call != NULL;

    /* Scratch: starts [B], xq, xk, xv, attention output, then the flash
     * kernel's own or the decode's. */
    size_t kernel_bytes = 0;
    if (flash)
        kernel_bytes = ra_attention_scratch_bytes(RA_PATH_FLASH, batch, seq, past + seq, H, Hkv, D,
                                                  ra_parallel_threads(ctx));
    else
        RA_TRY(ra_attention_decode_scratch(cache, &q_shape, ra_parallel_threads(ctx), 0,
                                           &kernel_bytes));
    int64_t own_floats;
    if (ra_mul(n_q, 4, &own_floats) != RA_OK) return scratch_overflow(batch, seq);
    size_t own = (size_t)(ra_round_up(2 * batch, 16) + 2 * n_q + 2 * n_kv) * sizeof(float);
    if (kernel_bytes == 0 || kernel_bytes > SIZE_MAX - own) return scratch_overflow(batch, seq);
    ra_scratch scratch, panel;
    ra_gemm_env mm;
    RA_TRY(ra_layer_gemm_begin(layer, ctx, batch * seq, &panel, &mm));
    ra_status status = ra_scratch_acquire(ctx, own + kernel_bytes, &scratch);
    if (status != RA_OK) {
        ra_scratch_release(&panel);
        return status;
    }
    int64_t *starts = scratch.data;
    float *buf = (float *)scratch.data + ra_round_up(2 * batch, 16);
    for (int64_t b = 0; b < batch; b++) starts[b] = cache->length[b];
    ra_positions pos = ra_positions_start(0);
    pos.starts = starts;
    if (positions) pos = given;
    ra_tensor xq = ra_tensor_4d(buf, RA_F32, batch, seq, H, D);
    ra_tensor xk = ra_tensor_4d(buf + n_q, RA_F32, batch, seq, Hkv, D);
    ra_tensor xv = ra_tensor_4d(buf + n_q + n_kv, RA_F32, batch, seq, Hkv, D);
    ra_tensor attn = ra_tensor_4d(buf + n_q + 2 * n_kv, RA_F32, batch, seq, H, D);

    /* Nothing is written before the append has accepted everything. */
    const ra_rope *late = ra_layer_late_rope(layer);
    status = ra_layer_check_rotation(layer, &pos, batch, seq, NULL);
    if (status == RA_OK) {
        ra_layer_project_qkv(layer, &mm, xq.data, xk.data, xv.data, x, tokens, 1);
        ra_layer_temperature(layer, xq.data, &pos, tokens, seq);
        if (!late) ra_layer_rotate(layer, ctx, &xq, &xk, &pos, NULL);
        ra_layer_rotate_values(layer, ctx, &xv, &pos, NULL);
        status = ra_kv_cache_append(ctx, cache, late, &xq, &xk, &xv, &pos, NULL);
    }
    if (status == RA_OK && flash) {
        /* the slots up to those just written; an 8-bit cache's keys and
         * values as projected (xk rotated by the append; past is 0): the
         * flash kernel reads no 8-bit rows, and the unquantized ones are
         * the more exact.  Query i stands at key past + i. */
        ra_tensor kc = ra_kv_cache_view(cache, 0), vc = ra_kv_cache_view(cache, 1);
        if (ra_dtype_is_cache8(cache->dtype)) kc = xk, vc = xv;
        kc.shape[1] = vc.shape[1] = past + seq;
        ra_attention_args args;
        status = ra_attention_prepare(&args, &attn, &xq, &kc, &vc, &masks);
        if (status == RA_OK) ra_attention_flash(ctx, &args, buf + 2 * n_q + 2 * n_kv);
    } else if (status == RA_OK) {
        ra_attention_decode_run(ctx, cache, &attn, &xq, NULL, &mask, buf + 2 * n_q + 2 * n_kv);
    }
    if (status == RA_OK) ra_layer_project_output(layer, &mm, y, attn.data, x, xq.data, tokens);
    ra_scratch_release(&scratch);
    ra_scratch_release(&panel);
    return status;
}

RA_API ra_status ra_layer_forward_cached(ra_context *ctx, const ra_layer *layer,
                                         ra_kv_cache *cache, float *y, const float *x,
                                         int64_t batch, int64_t seq,
                                         const ra_positions *positions)
{
    return forward_cached(ctx, layer, cache, y, x, batch, seq, positions, NULL);
}

RA_API ra_status ra_layer_forward_cached_mask(ra_context *ctx, const ra_layer *layer,
                                              ra_kv_cache *cache, float *y, const float *x,
                                              int64_t batch, int64_t seq,
                                              const ra_positions *positions,
                                              const ra_attention_options *options)
{
    if (!options) {
        ra_error_reset();
        return ra_fail(RA_ERR_NULL, "ra_layer_forward_cached_mask: options is NULL");
    }
    return forward_cached(ctx, layer, cache, y, x, batch, seq, positions, options);
}
