/*
 * layer_mla.c — the ra_layer_config of a latent-attention layer (DeepSeek-V2,
 * V3, Kimi K2) from its tensors, config.json and the options, as
 * transformers' DeepseekV3Attention builds it (modeling_deepseek_v3.py;
 * DeepseekV2Attention and DeepSeek's own modeling_deepseek.py, which Kimi K2
 * runs, build the same):
 *
 *   q_proj [H * D, dim], or q_a_proj [rq, dim] (+ bias), q_a_layernorm [rq],
 *     q_b_proj [H * D, rq]                            D = Dn + Dr
 *   kv_a_proj_with_mqa [r + Dr, dim] (+ bias), kv_a_layernorm [r],
 *   kv_b_proj [H * (Dn + Dv), r], o_proj [dim, H * Dv] (+ bias)
 *   (Ling's bailing_hybrid: g_proj [H, dim], a sigmoid gate per head: hf/gate.c;
 *   Mistral 4's q times 1 + llama_4_scaling_beta log(1 + floor(position /
 *   original_max_position_embeddings)): hf_position_q_scaling, hf/rope.c;
 *   A.X-K2's q_b_proj [H * (D + Dv), 2 rq], q_gate_proj once loaded,
 *   reading [q_a_layernorm(qa) | qa], each head's D query rows then its Dv
 *   gate rows: RA_HF_Q_GATE_PROJ)
 *
 * with Dn = qk_nope_head_dim, Dr = qk_rope_head_dim, Dv = v_head_dim,
 * r = kv_lora_rank, rq = q_lora_rank.  Biases only where attention_bias
 * puts them (q_a_proj, kv_a_proj_with_mqa, o_proj); the two RMSNorms have
 * DeepseekV3RMSNorm's default epsilon, 1e-6 (rms_norm_eps is the decoder
 * layer's norms'); the softmax scale is D^-1/2 times mscale^2 with
 * mscale = 0.1 mscale_all_dim ln(factor) + 1 when the rope is scaled and
 * sets mscale_all_dim (yarn_get_mscale; transformers' DeepseekV2Attention
 * applies it since its PR #47435, as DeepSeek's own code always did).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hf/hf.h"

/* What every step reads. */
typedef struct job {
    const ra_hf_config *config;
    const ra_hf_fields *hf;
    const ra_hf_options *o;
    const char *path; /* the checkpoint, in messages */
    const attention_tensors *t;
} job;

/* Tensor w must be [rows] (cols 0) or [rows, cols]. */
static ra_status check_shape(const job *j, const ra_st_tensor *w, int64_t rows, int64_t cols,
                             const char *why)
{
    int ndim = cols ? 2 : 1;
    if (w->ndim == ndim && w->shape[0] == rows && (ndim == 1 || w->shape[1] == cols))
        return RA_OK;
    char got[128] = "", want[64];
    for (int i = 0; i < w->ndim; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "",
                 (long long)w->shape[i]);
    if (cols) snprintf(want, sizeof want, "%lld, %lld", (long long)rows, (long long)cols);
    else snprintf(want, sizeof want, "%lld", (long long)rows);
    return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s has shape [%s]; expected [%s] (%s)", w->name,
                   j->path, got, want, why);
}

/* q's tensors as q_lora_rank says: q_proj without it, q_a_proj,
 * q_a_layernorm and q_b_proj with it; a tensor of the other kind would not
 * be loaded by transformers. */
static ra_status check_q_tensors(const job *j, int64_t rq)
{
    const ra_st_tensor *const *l = j->t->latent;
    const ra_st_tensor *stray = rq ? l[MLA_Q] : l[MLA_Q_A] ? l[MLA_Q_A]
                                              : l[MLA_Q_A_NORM] ? l[MLA_Q_A_NORM]
                                                                : l[MLA_Q_B];
    if (stray)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s sets q_lora_rank %s, and "
                       "transformers would not load it", stray->name, j->path, j->config->path,
                       rq ? "(q goes through q_a_proj, q_a_layernorm and q_b_proj)"
                          : "null (q goes through q_proj)");
    static const char *const names[N_MLA] = {
        [MLA_Q] = "q_proj.weight", [MLA_Q_A] = "q_a_proj.weight",
        [MLA_Q_A_NORM] = "q_a_layernorm.weight", [MLA_Q_B] = "q_b_proj.weight"};
    for (int m = MLA_Q; m <= MLA_Q_B; m++)
        if ((m == MLA_Q) == !rq && !l[m])
            return hf_fail(RA_ERR_NOT_FOUND, "%s has no %s beside '%s' (%s %s q_lora_rank)",
                           j->path, names[m], j->t->proj[PROJ_O]->name, j->config->path,
                           rq ? "sets" : "has no");
    return RA_OK;
}

/* Biases where attention_bias puts them, and nowhere else. */
static ra_status check_biases(const job *j, int64_t dim, int64_t rq, int64_t kv_a_rows)
{
    const attention_tensors *t = j->t;
    static const int never[] = {MLA_Q, MLA_Q_B, MLA_KV_B};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (t->latent_bias[never[i]])
            return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: transformers builds this "
                           "projection of latent attention without a bias and would not load "
                           "it", t->latent_bias[never[i]]->name, j->path);
    const ra_st_tensor *const biases[] = {t->latent_bias[MLA_Q_A], t->latent_bias[MLA_KV_A],
                                          t->bias[PROJ_O]};
    const int64_t sizes[] = {rq, kv_a_rows, dim};
    const int on = j->hf->has_attention_bias && j->hf->attention_bias;
    for (int i = 0; i < 3; i++) {
        if (!biases[i]) continue;
        if (!on)
            return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is a bias, and %s does not "
                           "set attention_bias true (transformers would not load it)",
                           biases[i]->name, j->path, j->config->path);
        RA_HF_TRY(check_shape(j, biases[i], sizes[i], 0, "one value per row of its weight"));
    }
    return RA_OK;
}

/* The sizes the config gives, each tensor's shape checked against them. */
static ra_status resolve_shapes(const job *j, const ra_hf_latent_sizes *s, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    const ra_st_tensor *const *l = j->t->latent;
    const int64_t H = j->o->n_heads ? j->o->n_heads : s->heads;
    if (H <= 0) return hf_no_query_heads(j->config);
    if (j->o->n_kv_heads && j->o->n_kv_heads != H)
        return hf_fail(RA_ERR_ARGUMENT, "n_kv_heads %lld was asked for: latent attention gives "
                       "each of the %lld query heads its own key and value",
                       (long long)j->o->n_kv_heads, (long long)H);
    const int64_t Dn = s->qk_nope_head_dim, Dr = s->qk_rope_head_dim, Dv = s->v_head_dim;
    const int64_t r = s->kv_lora_rank, rq = s->q_lora_rank;
    const int64_t D = Dn + Dr;
    if (j->o->head_dim && j->o->head_dim != D)
        return hf_fail(RA_ERR_ARGUMENT, "head_dim %lld was asked for: latent attention's "
                       "heads have qk_nope_head_dim + qk_rope_head_dim = %lld features (%s)",
                       (long long)j->o->head_dim, (long long)D, j->config->path);
    if (Dv > D)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: v_head_dim %lld is more than qk_nope_head_dim + "
                       "qk_rope_head_dim (%lld): not supported", j->config->path, (long long)Dv,
                       (long long)D);
    const ra_st_tensor *kv_a = l[MLA_KV_A];
    if (kv_a->ndim != 2 || kv_a->count == 0)
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not a non-empty 2-D matrix",
                       kv_a->name, j->path);
    const int64_t dim = kv_a->shape[1];
    if (hf->has_hidden_size && hf->hidden_size != dim)
        return hf_fail(RA_ERR_SHAPE, "config hidden_size %lld does not match dim %lld (the "
                       "in_features of '%s')", (long long)hf->hidden_size, (long long)dim,
                       kv_a->name);
    RA_HF_TRY(check_q_tensors(j, rq));
    char why[192];
    snprintf(why, sizeof why, "dim %lld, %lld heads, qk_nope_head_dim %lld, qk_rope_head_dim "
             "%lld, v_head_dim %lld, kv_lora_rank %lld, q_lora_rank %lld", (long long)dim,
             (long long)H, (long long)Dn, (long long)Dr, (long long)Dv, (long long)r,
             (long long)rq);
    RA_HF_TRY(check_shape(j, kv_a, r + Dr, dim, why));
    RA_HF_TRY(check_shape(j, l[MLA_KV_A_NORM], r, 0, why));
    RA_HF_TRY(check_shape(j, l[MLA_KV_B], H * (Dn + Dv), r, why));
    RA_HF_TRY(check_shape(j, j->t->proj[PROJ_O], dim, H * Dv, why));
    const int q_gate = (hf->family->features & RA_HF_Q_GATE_PROJ) != 0;
    if (q_gate && !rq)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: q_lora_rank is null, and model_type \"%s\"'s "
                       "q_gate_proj reads the q latent (transformers fails on it)",
                       j->config->path, hf->family->model_type);
    if (rq) {
        RA_HF_TRY(check_shape(j, l[MLA_Q_A], rq, dim, why));
        RA_HF_TRY(check_shape(j, l[MLA_Q_A_NORM], rq, 0, why));
        RA_HF_TRY(check_shape(j, l[MLA_Q_B], H * (D + (q_gate ? Dv : 0)), rq * (q_gate ? 2 : 1),
                              why));
    } else {
        RA_HF_TRY(check_shape(j, l[MLA_Q], H * D, dim, why));
    }
    RA_HF_TRY(check_biases(j, dim, rq, r + Dr));
    out->dim = dim;
    out->n_heads = out->n_kv_heads = H;
    RA_HF_TRY(hf_gate_config(hf, j->t, j->path, Dv, out)); /* Ling's g_proj */
    out->gated_output |= q_gate; /* A.X-K2's q_gate_proj: the gate in q's rows */
    out->q_b_raw_latent = q_gate;
    out->head_dim = D;
    out->kv_lora_rank = r;
    out->q_lora_rank = rq;
    out->qk_nope_head_dim = Dn;
    out->v_head_dim = Dv;
    out->norm_eps = 1e-6; /* DeepseekV3RMSNorm(q_lora_rank), (kv_lora_rank): the default */
    return RA_OK;
}

/* dots.note's (RA_HF_LATENT_SCALES): the latents times (dim / rank)^1/2,
 * k_rope_only_layernorm [Dr], the norms' epsilon rms_norm_eps; and that
 * norm nowhere else. */
static ra_status resolve_latent_scales(const job *j, ra_layer_config *out)
{
    const ra_st_tensor *n = j->t->latent[MLA_K_ROPE_NORM];
    const ra_hf_fields *hf = j->hf;
    const int has = (hf->family->features & RA_HF_LATENT_SCALES) != 0;
    if (n && !has)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: model_type \"%s\" has no norm of "
                       "the rotated key (transformers would not use it)", n->name, j->path,
                       hf->family->model_type);
    if (!has) return RA_OK;
    if (!n)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has no k_rope_only_layernorm.weight beside '%s': "
                       "model_type \"%s\" norms the rotated key by it (transformers would "
                       "initialize it)", j->path, j->t->proj[PROJ_O]->name,
                       hf->family->model_type);
    RA_HF_TRY(check_shape(j, n, out->head_dim - out->qk_nope_head_dim, 0,
                          "qk_rope_head_dim: the rotated key's norm"));
    out->q_latent_scale = sqrt((double)out->dim / (double)out->q_lora_rank);
    out->kv_latent_scale = sqrt((double)out->dim / (double)out->kv_lora_rank);
    out->norm_eps = hf->has_rms_norm_eps ? hf->rms_norm_eps : 1e-5; /* Dots3NoteRMSNorm's */
    return RA_OK;
}

/* The layer's sliding window where the family reads one (dots.note's sliding layers;
 * DeepSeek's rows read none). */
static ra_status resolve_window(const job *j, ra_layer_config *out)
{
    const ra_hf_window *w = &j->hf->window;
    const int64_t layer = j->t->layer;
    if (w->rule == RA_HF_WINDOWS_NONE) return RA_OK;
    const char *conflict = ra_hf_window_conflict(w, layer, 0);
    if (conflict)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: transformers would not run layer %lld's window "
                       "as the config reads (\"%s\"): refused", j->config->path,
                       (long long)layer, conflict);
    const int64_t window = ra_hf_layer_window(w, layer, 0);
    if (window < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s does not say whether layer %lld slides (name "
                       "the layer; layer_types must list it)", j->config->path,
                       (long long)layer);
    out->window = window;
    return RA_OK;
}

/* The sinks ([H]: RA_HF_SINKS) beside o_proj where the family reads them
 * (HY V4's), and nowhere else (its output gate: hf/gate.c). */
static ra_status check_sinks(const job *j, const ra_layer_config *out)
{
    const ra_st_tensor *s = j->t->sinks;
    const int has = (j->hf->family->features & RA_HF_SINKS) != 0;
    if (s && !has)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: model_type \"%s\" reads no sinks "
                       "beside latent attention (transformers would not use it)", s->name,
                       j->path, j->hf->family->model_type);
    if (!s && has)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has no sinks beside '%s': model_type \"%s\" reads "
                       "them (transformers would initialize them)", j->path,
                       j->t->proj[PROJ_O]->name, j->hf->family->model_type);
    return s ? check_shape(j, s, out->n_heads, 0, "one sink per head") : RA_OK;
}

/* RA_HF_MLA_ROPE_OF_HEAD (Mistral4RotaryEmbedding): its cos and sin span int(D *
 * partial_rotary_factor) features (the factor Dr / (Dn + Dr) where none is given), D with its
 * own default rope type, D the config's head_dim (Dn + Dr unless saved otherwise), and
 * apply_rotary_pos_emb(_interleave) multiplies q's and k's Dr rotated features by them: any
 * other width fails there. */
static ra_status check_rope_of_head(const job *j, const ra_layer_config *out)
{
    const ra_hf_rope *r = &j->config->rope;
    const int64_t D = j->hf->head_dim, Dr = out->head_dim - out->qk_nope_head_dim;
    const int64_t n = r->type == RA_ROPE_DEFAULT ? D /* (the factor: fields.c's default) */
                                                 : (int64_t)((double)D * r->partial_rotary_factor);
    if (n == Dr) return RA_OK;
    return hf_fail(RA_ERR_UNSUPPORTED, "%s: model_type \"%s\"'s rotary embedding gives %lld "
                   "features (%s of head_dim %lld) to the %lld of qk_rope_head_dim "
                   "(transformers fails on it)", j->config->path, j->hf->family->model_type,
                   (long long)n, r->type == RA_ROPE_DEFAULT ? "its default rope type: all"
                                                            : "partial_rotary_factor",
                   (long long)D, (long long)Dr);
}

/* The softmax scale (0: D^-1/2) from the rope object in use (the config's,
 * or the one set in its place). */
static ra_status resolve_scale(const job *j, ra_layer_config *out)
{
    const ra_hf_rope *rope = &j->config->rope;
    out->scale = 1.0 / sqrt((double)out->head_dim);
    if (j->hf->family->features & RA_HF_LATENT_SCALES) return RA_OK; /* no mscale */
    double factor = rope->params.factor, all_dim = rope->params.mscale_all_dim;
    if (rope->type == RA_ROPE_DEFAULT || !rope->has_mscale_all_dim || all_dim == 0) return RA_OK;
    if (!rope->has_factor)
        return hf_fail(RA_ERR_NOT_FOUND, "%s: rope type %s without \"factor\" and with "
                       "mscale_all_dim: latent attention reads it for its softmax scale "
                       "(transformers' yarn_apply_mscale would fail)", j->config->path,
                       ra_hf_rope_type_name(rope->type));
    if (factor > 1) {
        double mscale = 0.1 * all_dim * log(factor) + 1.0;
        out->scale *= mscale * mscale;
    }
    return RA_OK;
}

ra_status hf_mla_config(const ra_hf_config *config, const ra_hf_options *options,
                        const char *path, const attention_tensors *t, ra_layer_config *out,
                        ra_rope_config *rope)
{
    const job j = {config, &config->fields, options, path, t};
    const ra_hf_fields *hf = &config->fields;
    *out = ra_layer_config_init();
    if (!hf->family || !(hf->family->features & RA_HF_MLA))
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: latent attention's tensors need a config whose "
                       "model_type runs it (deepseek_v2, deepseek_v3, kimi_k2 ...)", config->path);
    ra_hf_latent_sizes sizes;
    if (ra_hf_layer_latent(hf, t->layer, &sizes) < 0)
        return hf_fail(RA_ERR_ARGUMENT, "%s gives some layers latent sizes of their own "
                       "(per_layer_config, swa_*): name the layer", config->path);
    RA_HF_TRY(resolve_shapes(&j, &sizes, out));
    RA_HF_TRY(resolve_latent_scales(&j, out));
    RA_HF_TRY(resolve_window(&j, out));
    RA_HF_TRY(check_sinks(&j, out));
    const ra_hf_rope *r = &config->rope;
    if (hf->family->features & RA_HF_MLA_ROPE_OF_HEAD)
        RA_HF_TRY(check_rope_of_head(&j, out));
    else if (r->has_partial_rotary_factor && r->partial_rotary_factor != 1)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g: latent attention "
                       "rotates all qk_rope_head_dim features of q and k (transformers' tables "
                       "would not match them)", config->path, r->partial_rotary_factor);
    /* The rope over the rotated part, Dr features (transformers' head_dim
     * for it; Mistral 4's: its head_dim, check_rope_of_head's), then placed
     * after the Dn that do not rotate. */
    const int64_t Dr = out->head_dim - out->qk_nope_head_dim;
    const int of_head = (hf->family->features & RA_HF_MLA_ROPE_OF_HEAD) != 0;
    RA_HF_TRY(hf_rope(config, t->layer, of_head ? hf->head_dim : Dr, options->seq_len,
                      options->max_position, rope));
    rope->head_dim = out->head_dim;
    rope->rotary_dim = Dr;
    rope->layout = options->layout >= 0 ? (ra_layout)options->layout
                                        : (ra_layout)ra_hf_fields_layout(hf);
    RA_HF_TRY(resolve_scale(&j, out));
    RA_HF_TRY(hf_position_q_scaling(config, t->layer, out)); /* Mistral 4's q by position */
    out->rope = rope;
    return RA_OK;
}
