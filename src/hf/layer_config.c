/*
 * layer_config.c — an ra_layer_config from a layer's tensors, config.json
 * and the options: head counts and head_dim (options, then config, then the
 * tensors' shapes), every tensor's shape checked against them, the q/k
 * norms the family reads, the softmax scale, the rope, and the per-layer
 * keys (NoPE layers, Llama 4's chunks, sliding windows, soft-capping, sinks).
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
    attention_tensors *t;
} job;

static ra_status shape_mismatch(const job *j, int proj, int64_t rows, int64_t cols,
                                const char *why)
{
    const ra_st_tensor *w = j->t->proj[proj];
    if (w->ndim == 2 && w->shape[0] == rows && w->shape[1] == cols) return RA_OK;
    char shape[128] = "";
    for (int i = 0; i < w->ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                 i ? ", " : "", (long long)w->shape[i]);
    return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s has shape [%s]; expected [%lld, %lld] (%s)",
                   w->name, j->path, shape, (long long)rows, (long long)cols, why);
}

ra_status hf_no_query_heads(const ra_hf_config *config)
{
    if (config->fields.json == NULL) /* no config given */
        return hf_fail(RA_ERR_ARGUMENT, "the number of query heads is not known: set n_heads, "
                       "or give a config with num_attention_heads");
    return hf_fail(RA_ERR_ARGUMENT, "%s has no \"num_attention_heads\" (nor a default for it "
                   "by its model_type): the number of query heads is not known: set n_heads",
                   config->path);
}

/* n_heads: the option's, else the config's (the layer's own: RA_HF_HEADS_PER_LAYER). */
static ra_status query_heads(const job *j, int64_t *n_heads)
{
    *n_heads = j->o->n_heads ? j->o->n_heads : ra_hf_layer_heads(j->hf, j->t->layer);
    if (*n_heads < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: num_attention_heads_per_layer gives the layers "
                       "%s query heads: give the layer (the names in %s carry none)%s",
                       j->config->path, j->t->layer < 0 ? "different counts of" : "no count of",
                       j->path, j->t->layer < 0 ? "" : ", one the list has");
    return *n_heads > 0 ? RA_OK : hf_no_query_heads(j->config);
}

/* A fused q/k/v weight split into wq, wk, wv views by the head counts of
 * the options or config (a query_key_value packed as the config says:
 * hf_config_packing, with which n_kv_heads must agree) and head_dim (the
 * config's, else hidden_size / n_heads, as transformers, else in_features
 * / n_heads). */
static ra_status resolve_fused(const job *j)
{
    const ra_hf_fields *hf = j->hf;
    attention_tensors *t = j->t;
    const ra_st_tensor *fused = t->fused;
    if (!fused) return RA_OK;
    int64_t n_heads;
    RA_HF_TRY(query_heads(j, &n_heads));
    int64_t n_kv_heads = j->o->n_kv_heads            ? j->o->n_kv_heads
                         : hf->has_num_key_value_heads ? hf->num_key_value_heads
                                                       : n_heads;
    if (t->packing == FUSED_BY_CONFIG) {
        RA_HF_TRY(hf_config_packing(hf, j->config->path, fused->name, j->path, n_heads,
                                    &t->packing, &n_kv_heads));
        if (j->o->n_kv_heads && j->o->n_kv_heads != n_kv_heads)
            return hf_fail(RA_ERR_ARGUMENT, "n_kv_heads %lld was asked for, but the config "
                           "packs %lld key/value heads", (long long)j->o->n_kv_heads,
                           (long long)n_kv_heads);
    }
    if (t->packing == FUSED_QVK_GROUPS && (n_heads % 4 != 0 || n_kv_heads != n_heads))
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s packs q, v and k in mp_num = 4 "
                       "model-parallel groups of whole heads, each as many key/value heads as "
                       "query heads: %lld query heads and %lld key/value heads do not split so",
                       fused->name, j->path, (long long)n_heads, (long long)n_kv_heads);
    int64_t dim = fused->ndim == 2 ? fused->shape[1] : 0;
    int64_t head_dim = j->o->head_dim        ? j->o->head_dim
                       : hf->has_head_dim    ? hf->head_dim
                       : hf->has_hidden_size ? hf->hidden_size / n_heads
                                             : dim / n_heads;
    if (head_dim <= 0)
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s: no head_dim follows from its shape "
                       "and %lld heads", fused->name, j->path, (long long)n_heads);
    return hf_split_fused(t, j->path, n_heads * head_dim, n_kv_heads * head_dim);
}

/* The name of q's (i 0) or k's (i 1) norm in a family with features:
 * HunYuan-V1's (RA_HF_NORM_AFTER_ROPE), LFM2's (RA_HF_QK_LAYERNORM_NAMES),
 * else Qwen3's. */
static const char *norm_name(ra_hf_features features, int i)
{
    static const char *const after[] = {"query_layernorm.weight", "key_layernorm.weight"};
    static const char *const layernorm[] = {"q_layernorm.weight", "k_layernorm.weight"};
    static const char *const before[] = {"q_norm.weight", "k_norm.weight"};
    return (features & RA_HF_NORM_AFTER_ROPE)        ? after[i]
           : (features & RA_HF_QK_LAYERNORM_NAMES) ? layernorm[i]
                                                   : before[i];
}

/* "model_type \"llama\"", or "a config without model_type". */
static const char *family_name(const job *j, char *buf, size_t len)
{
    const ra_hf_family *family = j->hf->family;
    if (!family) return "a config without model_type";
    snprintf(buf, len, "model_type \"%s\"", family->model_type);
    return buf;
}

/* A q/k norm n (NULL: none) under the name its family's model gives it:
 * transformers would not load one under another family's name. */
static ra_status check_norm_name(const job *j, const ra_st_tensor *n)
{
    const ra_hf_features features = j->hf->family ? j->hf->family->features : 0;
    if (!n) return RA_OK;
    char who[96];
    for (int i = 0; i < 2; i++) {
        const char *want = norm_name(features, i);
        size_t len = strlen(n->name), tail = strlen(want);
        if (len >= tail && strcmp(n->name + len - tail, want) == 0) return RA_OK;
    }
    return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s names its q/k norms %s and %s "
                   "(transformers would not use it)", n->name, j->path,
                   family_name(j, who, sizeof who), norm_name(features, 0),
                   norm_name(features, 1));
}

/* BitNet's attn_sub_norm (RA_HF_O_NORM): an RMSNorm of the attention
 * output's H * D features before o_proj, in the families that have one and
 * nowhere else. */
static ra_status check_o_norm(const job *j, int64_t features_out)
{
    const ra_hf_family *family = j->hf->family;
    const int wanted = family && (family->features & RA_HF_O_NORM);
    const ra_st_tensor *n = j->t->o_norm;
    char who[96];
    if (n && !wanted)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s has no norm before o_proj "
                       "(transformers would not use it)", n->name, j->path,
                       family_name(j, who, sizeof who));
    if (!n && wanted)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has no attn_sub_norm.weight beside '%s': "
                       "model_type \"%s\" normalizes the attention output before o_proj "
                       "(transformers would initialize the missing weight)", j->path,
                       j->t->proj[PROJ_O]->name, family->model_type);
    if (n && (n->ndim != 1 || n->shape[0] != features_out))
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not a vector of %lld values (the "
                       "columns of '%s')", n->name, j->path, (long long)features_out,
                       j->t->proj[PROJ_O]->name);
    return RA_OK;
}

/* The norm tensor of q (i = 0) or k (1) that the family does not read
 * (rms, cohere, stablelm, shared: which kinds it reads), or NULL. */
static const ra_st_tensor *stray_norm(const attention_tensors *t, int i, int rms, int cohere,
                                      int stablelm, int shared)
{
    if (t->norm[i] && !rms && !cohere) return t->norm[i];
    if (t->n_head_norms[i] && !stablelm) return t->head_norms[i][0];
    if (!shared) return t->layer_norm[i] ? t->layer_norm[i] : t->layer_norm_bias[i];
    return NULL;
}

/* The LayerNorm of q (i = 0) or k (1) with weight and bias: Persimmon's
 * q_layernorm.weight and .bias, each [head_dim] (heads 0: shared by the
 * heads), Nemotron 3.5 Transcribe's q_norm.weight and .bias, each
 * [head_dim], or Chameleon's q_norm.weight and .bias, each [heads,
 * head_dim]. */
static ra_status check_layer_norm(const job *j, int i, int64_t heads, int64_t head_dim)
{
    const attention_tensors *t = j->t;
    const int by_key = !(j->hf->family->features &
                         (RA_HF_QK_NORM_HEAD_BIAS | RA_HF_QK_NORM_BIAS_SHARED));
    const ra_st_tensor *const parts[2] = {t->layer_norm[i], t->layer_norm_bias[i]};
    for (int p = 0; p < 2; p++) {
        const ra_st_tensor *x = parts[p];
        if (!x)
            return hf_fail(RA_ERR_NOT_FOUND, "%s has no %s_%s.%s beside '%s': model_type "
                           "\"%s\"%s normalizes q and k by a LayerNorm with weight and bias "
                           "(transformers would initialize the missing tensor)", j->path,
                           i ? "k" : "q", by_key ? "layernorm" : "norm", p ? "bias" : "weight",
                           t->fused ? t->fused->name : t->proj[PROJ_Q]->name,
                           j->hf->family->model_type, by_key ? " with qk_layernorm" : "");
        if (heads && (x->ndim != 2 || x->shape[0] != heads || x->shape[1] != head_dim))
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not [%lld, %lld] (a LayerNorm of "
                           "each head, [heads, head_dim])", x->name, j->path, (long long)heads,
                           (long long)head_dim);
        if (!heads && (x->ndim != 1 || x->shape[0] != head_dim))
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not a vector of %lld values "
                           "(head_dim)", x->name, j->path, (long long)head_dim);
    }
    return RA_OK;
}

/* The q/k norm tensors the family reads, and nothing else:
 *   RMSNorm, weight [head_dim] shared by the heads (Qwen3, Gemma 3), or over
 *     the whole projection (OLMo 2): q_norm.weight, k_norm.weight;
 *   LayerNorm per head, each head its own weights, when the family's key
 *     says so: q_norm.weight [H, head_dim] (Cohere's use_qk_norm), or
 *     q_layernorm.norms.N.weight [head_dim] (StableLM's qk_layernorm);
 *   LayerNorm with a bias shared by the heads, when the family's key says
 *     so: q_layernorm.weight and .bias [head_dim] (Persimmon's qk_layernorm);
 * a config without model_type may have the first kind.  Sets out's norm
 * fields. */
static ra_status check_norms(const job *j, int64_t n_heads, int64_t n_kv_heads,
                             int64_t head_dim, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    const attention_tensors *t = j->t;
    const ra_hf_family *family = hf->family;
    const ra_hf_features features = family ? family->features : 0;
    const int by_key = hf->qk_norm_by_key && (features & RA_HF_QK_NORM_BY_KEY);
    const int rms = !family || (features & RA_HF_QK_NORM) || by_key;
    const int cohere = hf->head_layer_norms && (features & RA_HF_USE_QK_NORM);
    const int stablelm = hf->head_layer_norms && (features & RA_HF_QK_LAYERNORM);
    const int shared = hf->head_layer_norms && (features & RA_HF_QK_LAYERNORM_BIAS);
    const int head_bias = (features & RA_HF_QK_NORM_HEAD_BIAS) != 0; /* Chameleon, always */
    const int shared_bias = (features & RA_HF_QK_NORM_BIAS_SHARED) != 0; /* always */
    const int plain_layer = (features & RA_HF_QK_NORM_LAYER) != 0; /* ESMC's, no bias */
    const int whole = (features & RA_HF_NORM_OVER_PROJECTION) != 0;
    for (int i = 0; i < 2; i++) {
        const ra_st_tensor *n = t->norm[i];
        const ra_st_tensor *stray =
            stray_norm(t, i, rms, cohere, stablelm, shared || head_bias || shared_bias);
        const int64_t heads = i ? n_kv_heads : n_heads;
        const char *kind = i ? "k" : "q";
        if (stray)
            return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s%s%s reads no such q/k "
                           "norm (transformers would not use it)", stray->name, j->path,
                           family ? "model_type \"" : "a config without model_type",
                           family ? family->model_type : "", family ? "\"" : "");
        RA_HF_TRY(check_norm_name(j, n));
        if (((features & RA_HF_QK_NORM) || cohere || by_key) && !n)
            return hf_fail(RA_ERR_NOT_FOUND, "%s has no %s beside '%s': model_type \"%s\"%s "
                           "normalizes q and k (transformers would initialize the missing "
                           "weight)", j->path, norm_name(features, i),
                           t->proj[PROJ_Q] ? t->proj[PROJ_Q]->name : t->fused->name,
                           family->model_type,
                           cohere || by_key ? " with use_qk_norm" : " always");
        if (n && cohere && (n->ndim != 2 || n->shape[0] != heads || n->shape[1] != head_dim))
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not [%lld, %lld] (a LayerNorm of "
                           "each head, [heads, head_dim])", n->name, j->path, (long long)heads,
                           (long long)head_dim);
        int64_t want = whole ? t->proj[i]->shape[0] : head_dim;
        if (n && !cohere && (n->ndim != 1 || n->shape[0] != want))
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not a vector of %lld values (%s)",
                           n->name, j->path, (long long)want,
                           whole ? "the projection's rows" : "head_dim");
        if (stablelm && t->n_head_norms[i] != heads)
            return hf_fail(RA_ERR_SHAPE, "%s has %lld of the %s_layernorm.norms.N.weight beside "
                           "'%s'; model_type \"%s\" with qk_layernorm has one per head "
                           "(%lld)", j->path, (long long)t->n_head_norms[i], kind,
                           t->proj[PROJ_Q]->name, family->model_type, (long long)heads);
        for (int64_t h = 0; h < t->n_head_norms[i]; h++) {
            const ra_st_tensor *w = t->head_norms[i][h];
            if (w->ndim != 1 || w->shape[0] != head_dim)
                return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not a vector of %lld values "
                               "(head_dim)", w->name, j->path, (long long)head_dim);
        }
        if (shared || head_bias || shared_bias)
            RA_HF_TRY(check_layer_norm(j, i, head_bias ? heads : 0, head_dim));
    }
    /* The LayerNorms' epsilon is layer_norm_eps (Chameleon's, ESMC's and Nemotron 3.5
     * Transcribe's: torch's 1e-5); the RMSNorms', rms_norm_eps. */
    out->norm_head_weights = cohere || stablelm || head_bias;
    out->norm_layer = cohere || stablelm || shared || head_bias || plain_layer || shared_bias;
    out->norm_whole = whole;
    out->norm_after_rope = (features & RA_HF_NORM_AFTER_ROPE) != 0;
    out->norm_eps = head_bias || plain_layer || shared_bias ? 1e-5
                    : out->norm_layer        ? hf->layer_norm_eps
                    : hf->has_rms_norm_eps   ? hf->rms_norm_eps
                                             : 0; /* 0: 1e-6 */
    return RA_OK;
}

/* Each projection a non-empty 2-D matrix; dim, its in_features. */
static ra_status check_matrices(const job *j)
{
    for (int p = 0; p < N_PROJ; p++) {
        const ra_st_tensor *w = j->t->proj[p];
        if (w->ndim != 2)
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is %d-D; expected a 2-D "
                           "[out_features, in_features] matrix", w->name, j->path, w->ndim);
        if (w->count == 0) /* then head_dim or n_kv_heads could come out 0 */
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s has shape [%lld, %lld]: it is empty",
                           w->name, j->path, (long long)w->shape[0], (long long)w->shape[1]);
    }
    return RA_OK;
}

/* Why q, k and v (o: the output projection) have a bias or not, for
 * messages: the config key that says so, or that the family fixes it. */
static const char *bias_reason(const job *j, int o, int k, char *buf, size_t len)
{
    const ra_hf_bias *bias = &j->config->fields.bias;
    if (k && bias->rule && bias->rule->k_none) {
        snprintf(buf, len, "builds k_proj without a bias whatever the config says");
        return buf;
    }
    const char *key = bias->rule ? (o ? bias->rule->o_key : bias->rule->qkv_key)
                                 : "attention_bias";
    const int on = o ? bias->o : bias->qkv;
    if (!key) {
        snprintf(buf, len, "builds it %s a bias whatever the config says", on ? "with" : "without");
        return buf;
    }
    if (bias->rule && bias->rule->qkv_with_o && !o && on && bias->o) key = bias->rule->o_key;
    if (on)
        snprintf(buf, len, "builds it with a bias while \"%s\" is true, as it is for %s (set, "
                 "or by default)", key, j->config->path);
    else
        snprintf(buf, len, "builds it without a bias unless \"%s\" is true, which %s does not "
                 "set", key, j->config->path);
    return buf;
}

/* Biases: one value per row of their weight, where the family's model
 * has them (its rule, read against the config: ra_hf_bias) and nowhere
 * else.  A stray bias (transformers would not load it) and a missing one
 * (transformers would initialize it) are refused, naming the tensor and
 * the key, rather than added or dropped silently. */
static ra_status check_biases(const job *j)
{
    const attention_tensors *t = j->t;
    const ra_hf_bias *bias = &j->config->fields.bias;
    char who[96], why[256];
    for (int p = 0; p < N_PROJ; p++) {
        const ra_st_tensor *b = t->bias[p], *w = t->proj[p];
        const int o = p == PROJ_O, k = p == PROJ_K;
        const int on = o ? bias->o : k && bias->rule && bias->rule->k_none ? 0 : bias->qkv;
        const int fused = !o && t->fused;
        const char *weight = fused ? t->fused->name : w->name;
        if (b && !on)
            return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s is a bias that transformers "
                           "would not load: %s %s (remove the tensor, or fix the config)",
                           b->name, j->path, family_name(j, who, sizeof who),
                           bias_reason(j, o, k, why, sizeof why));
        if (!b && on && bias->rule) {
            size_t len = strlen(weight), tail = strlen("weight");
            return hf_fail(RA_ERR_NOT_FOUND, "%s has no '%.*sbias' beside '%s': %s %s "
                           "(transformers would initialize the missing bias)", j->path,
                           (int)(len >= tail ? len - tail : len), weight, weight,
                           family_name(j, who, sizeof who),
                           bias_reason(j, o, k, why, sizeof why));
        }
        if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not a vector of %lld values "
                           "(the rows of '%s')", b->name, j->path, (long long)w->shape[0],
                           w->name);
    }
    return RA_OK;
}

/* The config's head_dim and num_key_value_heads (has_*: whether it gives
 * them) for the layer: its own where per_layer_config names it
 * (RA_HF_PER_LAYER_CONFIG). */
typedef struct config_shape {
    int64_t head_dim, n_kv_heads;
    int has_head_dim, has_n_kv_heads;
} config_shape;

static ra_status layer_shape(const job *j, config_shape *s)
{
    const ra_hf_fields *hf = j->hf;
    *s = (config_shape){hf->head_dim, hf->num_key_value_heads, hf->has_head_dim,
                        hf->has_num_key_value_heads};
    int64_t head_dim, n_kv_heads;
    int own = ra_hf_layer_shape(hf, j->t->layer, &head_dim, &n_kv_heads);
    if (own < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" gives some layers a head size "
                       "or key/value heads of their own (per_layer_config, global_head_dim), "
                       "and %s", j->config->path, hf->family->model_type,
                       j->t->layer < 0 ? "the checkpoint's names carry no layer number"
                                       : "the config has no layer_types to say which");
    if (head_dim) s->head_dim = head_dim, s->has_head_dim = 1;
    if (n_kv_heads) s->n_kv_heads = n_kv_heads, s->has_n_kv_heads = 1;
    return RA_OK;
}

/* RA_HF_VALUES_FROM_KEYS (attention_k_eq_v): a layer that does not slide
 * has no v_proj and takes k_proj's output (before k_norm and RoPE) as its
 * values: wv is wk (bv bk); one with a v_proj there is refused
 * (transformers would not load it), as a sliding one without. */
static ra_status resolve_values(const job *j)
{
    attention_tensors *t = j->t;
    const int from_keys = ra_hf_layer_values_from_keys(j->hf, t->layer);
    const char *v = t->proj[PROJ_V] ? t->proj[PROJ_V]->name : NULL;
    if (from_keys < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: attention_k_eq_v takes the values of the layers "
                       "that do not slide from k_proj, and %s", j->config->path,
                       t->layer < 0 ? "the checkpoint's names carry no layer number"
                                    : "layer_types does not list this layer");
    if (from_keys && v)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: layer %lld takes its values from "
                       "k_proj (attention_k_eq_v), and transformers would not load it", v,
                       j->path, (long long)t->layer);
    if (!from_keys && !v && !t->fused)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has '%s' but no v_proj beside it: layer %lld "
                       "takes its values from a v_proj of its own", j->path,
                       t->proj[PROJ_K]->name, (long long)t->layer);
    if (!from_keys) return RA_OK;
    t->proj[PROJ_V] = t->proj[PROJ_K];
    t->bias[PROJ_V] = t->bias[PROJ_K];
    t->values_from_keys = 1;
    return RA_OK;
}

/* RA_HF_SLIDING_KV_SINKS: a sliding layer has twice the config's key/value
 * heads (MiMo-V2-Flash); a layer whose kind is not known (no layer number,
 * the layers differing) is refused. */
static ra_status sliding_kv_heads(const job *j, int64_t *n_kv_heads)
{
    const ra_hf_family *family = j->hf->family;
    if (!family || !(family->features & RA_HF_SLIDING_KV_SINKS) || j->o->n_kv_heads) return RA_OK;
    const int slides = ra_hf_layer_slides(&j->hf->window, j->t->layer, 0);
    if (slides < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" gives its sliding layers "
                       "twice the key/value heads of its full ones, and the config does not "
                       "say which this layer is%s", j->path, family->model_type,
                       j->t->layer < 0 ? " (the checkpoint's names carry no layer number)" : "");
    if (slides) *n_kv_heads *= 2;
    return RA_OK;
}

/* RA_HF_V_HEAD_DIM: v's features per head, v_head_dim (head_dim where the
 * family has none), at most head_dim: fewer are padded with zeros at load
 * (hf/layer.c), which what reads the heads' features together (o_norm's
 * RMS, a gate per feature, a fused qkv) would see: refused with them. */
static ra_status value_head_dim(const job *j, int64_t head_dim, int64_t *v_dim)
{
    const ra_hf_fields *hf = j->hf;
    *v_dim = head_dim;
    if (!hf->family || !(hf->family->features & RA_HF_V_HEAD_DIM) || !hf->has_v_head_dim)
        return RA_OK;
    *v_dim = hf->v_head_dim;
    const char *with = j->t->fused ? "a fused qkv" : j->t->o_norm ? "a norm before o_proj"
                       : j->t->gate || (hf->family->features & RA_HF_GATED_OUTPUT)
                           ? "an output gate"
                           : NULL;
    if (*v_dim > head_dim || (*v_dim < head_dim && with))
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: v_head_dim %lld with head_dim %lld%s%s: not "
                       "supported (value heads run padded with zeros to head_dim)", j->path,
                       (long long)*v_dim, (long long)head_dim, with ? " and " : "",
                       with ? with : "");
    j->t->v_head_dim = *v_dim < head_dim ? *v_dim : 0;
    return RA_OK;
}

/* n_heads, n_kv_heads and head_dim from the options, config and the
 * weights' shapes, in that order of precedence; each weight's shape
 * checked; the norms and the softmax scale. */
static ra_status resolve_shapes(const job *j, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    config_shape cs;
    RA_HF_TRY(layer_shape(j, &cs));
    const ra_st_tensor *wq = j->t->proj[PROJ_Q], *wk = j->t->proj[PROJ_K];
    RA_HF_TRY(check_matrices(j));
    int64_t dim = wq->shape[1];
    if (hf->has_hidden_size && hf->hidden_size != dim)
        return hf_fail(RA_ERR_SHAPE, "config hidden_size %lld does not match dim %lld (the "
                       "in_features of '%s')", (long long)hf->hidden_size, (long long)dim,
                       wq->name);
    int64_t n_heads;
    RA_HF_TRY(query_heads(j, &n_heads));
    /* head_dim: the option's, else the config's (H * D may differ from
     * dim, as in Qwen3), else wq's rows / n_heads (dim / n_heads for
     * LLaMA's square wq); the shapes below must agree with it. */
    /* gated attention (RA_HF_GATED_OUTPUT): each head's D gate rows follow
     * its D query rows in q_proj */
    const int gated = hf->family && (hf->family->features & RA_HF_GATED_OUTPUT);
    int64_t head_dim = j->o->head_dim ? j->o->head_dim : cs.head_dim;
    if (!j->o->head_dim && !cs.has_head_dim) {
        if (wq->shape[0] % (n_heads << gated) != 0)
            return hf_fail(RA_ERR_SHAPE, "n_heads %lld does not divide the %lld rows of '%s'%s",
                           (long long)n_heads, (long long)wq->shape[0], wq->name,
                           gated ? " into a query and a gate per head" : "");
        head_dim = wq->shape[0] / (n_heads << gated);
    }
    if (head_dim % 2 != 0)
        return hf_fail(RA_ERR_HEAD_DIM, "head_dim %lld is odd; RoPE needs it even",
                       (long long)head_dim);
    int64_t n_kv_heads = j->o->n_kv_heads ? j->o->n_kv_heads : cs.n_kv_heads;
    if (!j->o->n_kv_heads && !cs.has_n_kv_heads) {
        if (wk->shape[0] % head_dim != 0)
            return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s has %lld rows, not a multiple of "
                           "head_dim %lld", wk->name, j->path, (long long)wk->shape[0],
                           (long long)head_dim);
        n_kv_heads = wk->shape[0] / head_dim;
    }
    RA_HF_TRY(sliding_kv_heads(j, &n_kv_heads));
    int64_t v_dim;
    RA_HF_TRY(value_head_dim(j, head_dim, &v_dim));
    if (n_heads % n_kv_heads != 0)
        return hf_fail(RA_ERR_GQA, "n_heads %lld is not a multiple of n_kv_heads %lld",
                       (long long)n_heads, (long long)n_kv_heads);
    char why[160];
    snprintf(why, sizeof why, "dim %lld, n_heads %lld, n_kv_heads %lld, head_dim %lld%s%s",
             (long long)dim, (long long)n_heads, (long long)n_kv_heads, (long long)head_dim,
             j->o->head_dim ? " (the options')" : "", gated ? ", a gate per query head" : "");
    RA_HF_TRY(shape_mismatch(j, PROJ_Q, (n_heads << gated) * head_dim, dim, why));
    RA_HF_TRY(shape_mismatch(j, PROJ_K, n_kv_heads * head_dim, dim, why));
    if (v_dim != head_dim)
        snprintf(why + strlen(why), sizeof why - strlen(why), ", v_head_dim %lld",
                 (long long)v_dim);
    RA_HF_TRY(shape_mismatch(j, PROJ_V, n_kv_heads * v_dim, dim, why));
    RA_HF_TRY(shape_mismatch(j, PROJ_O, dim, n_heads * v_dim, why));
    RA_HF_TRY(check_biases(j));
    RA_HF_TRY(check_norms(j, n_heads, n_kv_heads, head_dim, out));
    RA_HF_TRY(check_o_norm(j, n_heads * head_dim));
    out->dim = dim;
    out->n_heads = n_heads;
    out->n_kv_heads = n_kv_heads;
    out->head_dim = head_dim;
    out->gated_output = gated;
    RA_HF_TRY(hf_gate_config(hf, j->t, j->path, head_dim, out)); /* AfMoE: gated_output too */
    out->clip_qkv = hf->has_clip_qkv ? hf->clip_qkv : 0.0; /* OLMo */
    out->clip_after_norm = out->clip_qkv > 0 && (j->t->norm[0] || j->t->norm[1]); /* OLMoE */
    /* The softmax scale: Granite's attention_multiplier, Gemma's
     * query_pre_attn_scalar^-1/2, Gemma 3n's 1, else 1/sqrt(head_dim) (0). */
    const ra_hf_features features = hf->family ? hf->family->features : 0;
    out->scale = hf->has_attention_multiplier    ? hf->attention_multiplier
                 : hf->has_query_pre_attn_scalar ? 1.0 / sqrt(hf->query_pre_attn_scalar)
                 : (features & RA_HF_UNIT_SCALE) ? 1.0
                                                 : 0.0;
    /* Falcon-H1's key_multiplier scales k, so every logit */
    if (hf->has_key_multiplier)
        out->scale = hf->key_multiplier * (out->scale ? out->scale : 1.0 / sqrt((double)head_dim));
    out->v_norm = (features & RA_HF_V_NORM) != 0; /* Gemma 3n: v_norm, epsilon rms_norm_eps */
    if ((features & RA_HF_VALUE_SCALE) && hf->has_attention_value_scale) /* MiMo-V2-Flash */
        out->v_scale = hf->attention_value_scale;
    return RA_OK;
}

/* "layer 3", or "this layer" when the names carry no layer number. */
static void layer_name(char *buf, size_t len, int64_t layer)
{
    if (layer >= 0) snprintf(buf, len, "layer %lld", (long long)layer);
    else snprintf(buf, len, "this layer");
}

/* no_rope_layers (SmolLM3): layer N runs without RoPE when its entry is 0;
 * without the list, when N + 1 is a multiple of no_rope_layer_interval. */
static ra_status resolve_no_rope(const job *j, int64_t layer, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    if (hf->rope_off) { /* GraniteMoeHybrid's position_embedding_type */
        out->no_rope = 1;
        return RA_OK;
    }
    if (!hf->no_rope_layers && hf->has_no_rope_layer_interval) {
        if (layer < 0 && hf->no_rope_layer_interval > 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's no_rope_layer_interval turns RoPE "
                           "off in some layers, and the checkpoint's names carry no layer "
                           "number");
        out->no_rope = (layer + 1) % hf->no_rope_layer_interval == 0;
        return RA_OK;
    }
    if (!hf->no_rope_layers) return RA_OK;
    if (layer < 0) {
        for (int64_t i = 0; i < hf->n_no_rope_layers; i++)
            if (!hf->no_rope_layers[i])
                return hf_fail(RA_ERR_UNSUPPORTED, "the config's no_rope_layers turns RoPE off "
                               "in some layers, and the checkpoint's names carry no layer "
                               "number");
        return RA_OK;
    }
    if (layer >= hf->n_no_rope_layers)
        return hf_fail(RA_ERR_FORMAT, "the config's no_rope_layers has %lld entries; layer %lld "
                       "has none", (long long)hf->n_no_rope_layers, (long long)layer);
    out->no_rope = !hf->no_rope_layers[layer];
    return RA_OK;
}

/* RA_HF_NOPE_FULL_LAYERS (Cohere 2, EXAONE 4, Flint): the full-attention
 * layers run without RoPE (fields_nope.c says which). */
static ra_status resolve_nope_full_layers(const job *j, int64_t layer, ra_layer_config *out)
{
    int nope = ra_hf_layer_nope(j->hf, layer);
    if (nope < 0 && layer < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "model_type \"%s\" runs some layers without RoPE "
                       "by their kind, and the checkpoint's names carry no layer number",
                       j->hf->family->model_type);
    if (nope > 0) out->no_rope = 1;
    return RA_OK; /* nope < 0 otherwise: the window's checks name the key */
}

/* RA_HF_NULL_ROPE_SCALED (BeamModel): a layer whose type's rope is null runs
 * without RoPE, q times compute_attention_scaling's
 * exp(0.1 * log1p((position_ids + 1) / 2048)). */
static ra_status resolve_null_rope(const job *j, int64_t layer, ra_layer_config *out)
{
    int nope = ra_hf_layer_null_rope(j->hf, layer);
    if (nope < 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "model_type \"%s\" runs the layers of the type whose "
                       "rope_parameters entry is null without RoPE, and %s",
                       j->hf->family->model_type, layer < 0 ? "the checkpoint's names carry no "
                       "layer number" : "the config does not say which type this layer is");
    if (nope == 0) return RA_OK;
    out->no_rope = 1;
    out->temperature_length = 2048.0;
    out->temperature_power = 0.1;
    return RA_OK;
}

/* RA_HF_ATTENTION_CHUNKS (Llama4TextAttention): RoPE layers attend
 * within chunks of attention_chunk_size tokens (layer_types may say
 * chunked_attention too). */
static ra_status resolve_chunks(const job *j, int64_t layer, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    if (!hf->family || !(hf->family->features & RA_HF_ATTENTION_CHUNKS)) return RA_OK;
    /* layer_types, where the config has it, says which layers are chunked
     * (transformers picks each layer's mask from it); else the RoPE layers */
    int chunked = hf->window.has_layer_types ? ra_hf_layer_chunked(&hf->window, layer)
                                             : !out->no_rope;
    if (chunked && !hf->has_attention_chunk_size) /* null (absent: Llama4TextConfig's 8192) */
        return hf_fail(RA_ERR_FORMAT, "%s: layer %lld is chunked and attention_chunk_size is "
                       "null (transformers fails on it building the chunked mask)",
                       j->config->path, (long long)layer);
    if (chunked) out->chunk = hf->attention_chunk_size;
    return RA_OK;
}

/* RoPE layers apply the L2 norm after RoPE (use_qk_norm: RA_HF_QK_L2_NORM;
 * 0 in other families).  NoPE layers scale q by the temperature at each
 * token's place in the sequence (attn_temperature_tuning:
 * RA_HF_TEMPERATURE_TUNING; 0 in other families), which transformers takes
 * from cache_position: position ids are refused there. */
static ra_status resolve_l2_norm_and_temperature(const job *j, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    out->qk_l2_norm = hf->qk_l2_norm && !out->no_rope;
    if (!hf->attn_temperature_tuning || !out->no_rope) return RA_OK;
    if (!hf->has_floor_scale || !hf->has_attn_scale)
        return hf_fail(RA_ERR_FORMAT, "%s: attn_temperature_tuning is on and %s is null",
                       j->config->path, hf->has_floor_scale ? "attn_scale" : "floor_scale");
    if (j->o->position_ids)
        return hf_fail(RA_ERR_ARGUMENT, "Llama 4's NoPE layers scale q by each token's "
                       "place in the sequence (attn_temperature_tuning), not by position ids: "
                       "give start positions");
    out->temperature_floor = hf->floor_scale;
    out->temperature_scale = hf->attn_scale;
    return RA_OK;
}

/* The sliding window the config gives this layer (transformers' reading
 * of it: src/hf/fields_window.c), Gemma 2's soft-cap, and gpt-oss's sinks:
 * a sinks tensor [H] beside q_proj where the family reads one, refused
 * elsewhere (transformers would not use it). */
static ra_status resolve_masks(const job *j, int64_t layer, ra_layer_config *out)
{
    const ra_hf_fields *hf = j->hf;
    char which[48];
    layer_name(which, sizeof which, layer);
    const ra_hf_features features = hf->family ? hf->family->features : 0;
    /* A family whose model reads no window (Llama, Gemma ...) ignores
     * sliding_window, as transformers; a config without model_type is read
     * as written (fields_window.c). */
    const ra_hf_window *w = &hf->window;
    if (features & RA_HF_ATTENTION_CHUNKS) { /* layer_types says which layers are chunked */
        int listed = w->has_layer_types && layer >= 0 && layer < w->n_layer_types;
        int kind = listed ? w->layer_types[layer] : RA_HF_FULL_ATTENTION;
        if (w->has_layer_types &&
            (!listed || (kind != RA_HF_FULL_ATTENTION && kind != RA_HF_CHUNKED_ATTENTION)))
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's layer_types does not give %s "
                           "full_attention or chunked_attention (Llama 4 runs no other)%s", which,
                           layer < 0 ? ": the checkpoint's names carry no layer number" : "");
    } else {
        const char *conflict = ra_hf_window_conflict(w, layer, out->no_rope);
        int slides = ra_hf_layer_slides(w, layer, out->no_rope);
        if (conflict && strcmp(conflict, "layer_types") == 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's layer_types disagrees with "
                           "model_type \"%s\" on %s: transformers' model ignores layer_types "
                           "and gives it %s", hf->family->model_type, which,
                           slides ? "a sliding window" : "full attention");
        if (conflict && strcmp(conflict, "use_sliding_window") == 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's layer_types gives %s a sliding "
                           "window and \"use_sliding_window\" is false: transformers would "
                           "have no window to give it", which);
        if (conflict && strcmp(conflict, "sliding_window") == 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config makes %s a sliding layer and its "
                           "\"sliding_window\" is null: transformers would have no window to "
                           "give it", which);
        if (conflict && strcmp(conflict, "no layer_types") == 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config has no \"layer_types\": model_type "
                           "\"%s\"'s config class derives which layers slide by a formula of "
                           "its own, which ropeattn does not read (the configs it saves list "
                           "layer_types)", hf->family->model_type);
        if (conflict)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's \"sliding_window_pattern\" is "
                           "null or a string and it has no layer_types: transformers cannot "
                           "tell whether %s slides", which);
        if (slides < 0 && layer < 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's layers differ in their sliding "
                           "windows and the checkpoint's names carry no layer number");
        if (slides < 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "the config's layer_types gives %s a kind of "
                           "attention other than full_attention or sliding_attention: not "
                           "supported", which);
    }
    int64_t window = ra_hf_layer_window(w, layer, out->no_rope);
    out->window = window > 0 ? window : 0;
    if ((features & RA_HF_SOFTCAP) && hf->has_attn_logit_softcapping)
        out->softcap = hf->attn_logit_softcapping;
    /* gpt-oss: every layer's sinks; MiMo-V2-Flash: the sliding layers' */
    const int reads_sinks = (features & RA_HF_SINKS) ||
                            ((features & RA_HF_SLIDING_KV_SINKS) && out->window > 0);
    const ra_st_tensor *sinks = j->t->sinks;
    if (sinks && !reads_sinks)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s%s%s reads no attention sinks "
                       "in %s (transformers would not use it)", sinks->name, j->path,
                       hf->family ? "model_type \"" : "a config without model_type",
                       hf->family ? hf->family->model_type : "", hf->family ? "\"" : "",
                       which);
    if (!sinks && reads_sinks)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has no sinks beside '%s': model_type \"%s\" adds "
                       "one logit per head to every softmax (transformers would initialize the "
                       "missing weight)", j->path, j->t->proj[PROJ_O]->name,
                       hf->family->model_type);
    const char *dot = sinks ? strrchr(sinks->name, '.') : NULL;
    const char *alias = hf->family ? hf->family->sinks_alias : NULL;
    const char *leaf = dot ? dot + 1 : sinks ? sinks->name : "sinks";
    if (strcmp(leaf, "sinks") != 0 && (!alias || strcmp(leaf, alias) != 0))
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: model_type \"%s\" reads its "
                       "sinks from a tensor named sinks%s%s (transformers would not load this "
                       "one)", sinks->name, j->path, hf->family->model_type,
                       alias ? " or " : "", alias ? alias : "");
    if (sinks && (sinks->ndim != 1 || sinks->shape[0] != out->n_heads))
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not [%lld] (one sink per query head)",
                       sinks->name, j->path, (long long)out->n_heads);
    return RA_OK;
}

ra_status hf_check_kv_shared(const ra_hf_config *config, int64_t layer)
{
    const ra_hf_fields *hf = &config->fields;
    const ra_hf_family *family = hf->family;
    if (!family || !(family->features & RA_HF_KV_SHARED_LAYERS) || layer < 0) return RA_OK;
    const int64_t first = hf->num_hidden_layers - hf->num_kv_shared_layers;
    if (hf->num_kv_shared_layers == 0 || layer < first) return RA_OK;
    return hf_fail(RA_ERR_UNSUPPORTED, "layer %lld takes its keys and values from an earlier "
                   "layer (%s: num_kv_shared_layers %lld of num_hidden_layers %lld, so layers "
                   "%lld on reuse the last earlier layer of their kind's): not supported; the "
                   "layers before %lld run", (long long)layer, config->path,
                   (long long)hf->num_kv_shared_layers, (long long)hf->num_hidden_layers,
                   (long long)first, (long long)first);
}

/* RA_HF_ROTARY_VALUE: RoPE on v too (rotary_value).  RA_HF_NON_CAUSAL (encoders): no causal
 * mask, unless the family reads is_decoder and it is true; the options' non_causal: none in
 * any family (a window or chunks then refused, where the family is not an encoder).  transformers' bidirectional sliding window keeps |i - j| <= sliding_window, the
 * core's non-causal window W keeps |i - j| < W: W is sliding_window + 1. */
static ra_status resolve_non_causal(const job *j, ra_layer_config *out)
{
    const ra_hf_family *family = j->hf->family;
    if (family && (family->features & RA_HF_ROTARY_VALUE)) out->rope_values = j->hf->rotary_value;
    if (j->o->non_causal && (!family || !(family->features & RA_HF_NON_CAUSAL))) {
        if (out->window > 0 || out->chunk > 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: non_causal (--no-causal) on a layer with "
                           "a %s of %lld tokens: %s defines it over earlier tokens only, and "
                           "no window both ways: refused", j->config->path,
                           out->window > 0 ? "sliding window" : "chunk",
                           (long long)(out->window > 0 ? out->window : out->chunk),
                           family ? family->model_type : "a config without model_type");
        out->non_causal = 1;
        return RA_OK;
    }
    if (!family || !(family->features & RA_HF_NON_CAUSAL)) return RA_OK;
    if ((family->features & RA_HF_IS_DECODER_KEY) && j->hf->is_decoder) return RA_OK;
    out->non_causal = 1;
    if (out->window > 0) {
        if (out->window == INT64_MAX)
            return hf_fail(RA_ERR_ARGUMENT, "%s: a sliding window of %lld tokens each way is "
                           "too large", j->config->path, (long long)out->window);
        out->window += 1;
    }
    return RA_OK;
}

ra_status hf_layer_config(const ra_hf_config *config, const ra_hf_options *options,
                          const char *path, attention_tensors *t, ra_layer_config *out,
                          ra_rope_config *rope)
{
    const job j = {config, &config->fields, options, path, t};
    *out = ra_layer_config_init();
    RA_HF_TRY(resolve_fused(&j));
    RA_HF_TRY(resolve_values(&j));
    RA_HF_TRY(resolve_shapes(&j, out));
    RA_HF_TRY(hf_rope(config, t->layer, out->head_dim, options->seq_len, options->max_position,
                      rope));
    /* The layout: the option's, else the family's for Hugging Face names
     * (Cohere and GLM pair q_proj's features interleaved), else the names'. */
    ra_layout layout = t->layout;
    if (config->fields.family && layout == RA_LAYOUT_HALF) layout = config->fields.family->layout;
    if (!config->fields.family && layout == RA_LAYOUT_HALF && options->layout < 0)
        return hf_fail(RA_ERR_ARGUMENT, "%s: how q and k pair their features under these "
                       "tensor names is the model family's (half for Llama, interleaved for "
                       "Cohere and GLM), and no config names a model_type: give the layout "
                       "(--layout, ra_hf_options.layout)", path);
    rope->layout = options->layout >= 0 ? (ra_layout)options->layout : layout;
    RA_HF_TRY(resolve_no_rope(&j, t->layer, out));
    RA_HF_TRY(resolve_nope_full_layers(&j, t->layer, out));
    RA_HF_TRY(resolve_null_rope(&j, t->layer, out));
    RA_HF_TRY(resolve_chunks(&j, t->layer, out));
    RA_HF_TRY(resolve_l2_norm_and_temperature(&j, out));
    RA_HF_TRY(hf_position_q_scaling(config, t->layer, out));
    RA_HF_TRY(resolve_masks(&j, t->layer, out)); /* SmolLM3's windows follow no_rope */
    RA_HF_TRY(resolve_non_causal(&j, out));
    out->rope = rope;
    return RA_OK;
}
