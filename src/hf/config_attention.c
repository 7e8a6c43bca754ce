/* config_attention.c — what config.json says of attention, for a program
 * that reads a checkpoint's tensors itself (ropeattn_hf.h's
 * ra_hf_config_attention and the calls after it). */
#include <string.h>

#include "hf/hf.h"

_Static_assert(sizeof(ra_hf_attention_info) >= RA_HF_ATTENTION_INFO_SIZE_V1,
               "ra_hf_attention_info only grows");

/* Whether the config's family has feature f. */
static int has_feature(const ra_hf_fields *c, ra_hf_features f)
{
    return c->family && (c->family->features & f);
}

/* layer_n_heads, layer_head_dim, layer_n_kv_heads of out for layer. */
static void layer_shape(const ra_hf_fields *c, int64_t layer, ra_hf_attention_info *out)
{
    out->layer_n_heads = c->heads_per_layer ? ra_hf_layer_heads(c, layer) : out->n_heads;
    int64_t head_dim = 0, n_kv_heads = 0;
    if (ra_hf_layer_shape(c, layer, &head_dim, &n_kv_heads) < 0) head_dim = n_kv_heads = -1;
    out->layer_head_dim = head_dim;
    out->layer_n_kv_heads = n_kv_heads;
}

/* 3 where a rope of the config takes 3-D positions: the one set, or the
 * config's and (unless rope parameters replaced both) its sliding layers',
 * or one whose family's code has sections of its own (GLM-4.1V's). */
static int64_t position_components(const ra_hf_config *config)
{
    const ra_hf_fields *c = &config->fields;
    const int mrope = config->rope.has_mrope_section ||
                      (c->family && c->family->mrope_default[0]) ||
                      (!config->rope_parameters_set && c->has_local_rope &&
                       c->local_rope.has_mrope_section);
    return mrope ? 3 : 1;
}

RA_HF_API ra_status ra_hf_config_attention(const ra_hf_config *config, int64_t layer,
                                           ra_hf_attention_info *out)
{
    hf_reset();
    if (!config || !out) return hf_fail(RA_ERR_NULL, "%s is NULL", config ? "out" : "config");
    if (out->struct_size < RA_HF_ATTENTION_INFO_SIZE_V1)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_attention_info: struct_size %zu is less than "
                       "%d: start from ra_hf_attention_info_init()", out->struct_size,
                       RA_HF_ATTENTION_INFO_SIZE_V1);
    if (layer < -1) return hf_fail(RA_ERR_ARGUMENT, "layer %lld is below -1", (long long)layer);
    const ra_hf_fields *c = &config->fields;
    ra_hf_attention_info a = ra_hf_attention_info_init();
    a.n_heads = c->has_num_attention_heads ? c->num_attention_heads : 0;
    a.n_kv_heads = c->has_num_key_value_heads ? c->num_key_value_heads : 0;
    a.head_dim = hf_config_head_dim(c);
    a.head_dim_given = c->has_head_dim;
    layer_shape(c, layer, &a);
    a.layout = ra_hf_fields_layout(c);
    a.cos_sin_halves = !has_feature(c, RA_HF_COS_SIN_HALF_WIDTH) &&
                       (!c->family || c->family->layout == RA_LAYOUT_HALF ||
                        has_feature(c, RA_HF_ROPE_INTERLEAVE));
    a.gated_queries = has_feature(c, RA_HF_GATED_OUTPUT);
    a.values_from_keys = ra_hf_layer_values_from_keys(c, layer);
    a.latent = has_feature(c, RA_HF_MLA);
    a.cache_window = has_feature(c, RA_HF_CACHE_WINDOW) && c->window.has_sliding_window
                         ? c->window.sliding_window
                         : 0;
    a.position_components = position_components(config);
    /* as many bytes as the caller's struct holds (an older, shorter one:
     * its fields) */
    size_t n = out->struct_size < sizeof a ? out->struct_size : sizeof a;
    a.struct_size = out->struct_size;
    memcpy(out, &a, n);
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_rope_theta(const ra_hf_config *config, double *theta)
{
    hf_reset();
    if (!config || !theta) return hf_fail(RA_ERR_NULL, "%s is NULL", config ? "theta" : "config");
    if (!config->theta && !config->rope.has_theta)
        return hf_fail(RA_ERR_NOT_FOUND, "%s gives no rope_theta", config->path);
    *theta = config->theta ? config->theta : config->rope.theta;
    return RA_OK;
}

/* The share of each head's features that rope pairs (all of them under
 * the proportional rope) and its partial_rotary_factor (*prf). */
static double paired_share(const ra_hf_rope *rope, double *prf)
{
    *prf = rope->has_partial_rotary_factor ? rope->partial_rotary_factor : 1.0;
    return rope->proportional ? 1.0 : *prf;
}

RA_HF_API ra_status ra_hf_config_rotary_dim(const ra_hf_config *config, int64_t head_dim,
                                            int64_t *rotary_dim)
{
    hf_reset();
    if (!config || !rotary_dim)
        return hf_fail(RA_ERR_NULL, "%s is NULL", config ? "rotary_dim" : "config");
    if (head_dim < 1 || head_dim > INT32_MAX)
        return hf_fail(RA_ERR_ARGUMENT, "head_dim %lld is outside [1, %d]", (long long)head_dim,
                       INT32_MAX);
    const ra_hf_fields *c = &config->fields;
    const ra_hf_rope *rope = &config->rope;
    double prf, local_prf;
    const double share = paired_share(rope, &prf), local_share = paired_share(&c->local_rope,
                                                                             &local_prf);
    if (c->has_local_rope && local_share != share) /* (each layer's rows as its own rope turns) */
        return hf_fail(RA_ERR_UNSUPPORTED, "%s rotates %g of each head in its full layers and "
                       "%g in its sliding layers (a rope per layer type)", config->path, prf,
                       local_prf);
    int64_t rotary = (int64_t)((double)head_dim * prf);
    if (!rope->has_partial_rotary_factor && c->has_rotary_dim) /* GPT-J */
        rotary = c->rotary_dim <= head_dim ? c->rotary_dim : 0;
    if (rope->proportional) /* every pair of head_dim (some do not turn) */
        rotary = head_dim;
    /* RA_HF_ODD_ROTARY_ROUNDS_UP: an odd count of the default rope rotates
     * one more (rope.c) */
    else if (rotary % 2 != 0 && has_feature(c, RA_HF_ODD_ROTARY_ROUNDS_UP) &&
             rope->type == RA_ROPE_DEFAULT && rotary < head_dim)
        rotary++;
    if (head_dim % 2 != 0 || rotary <= 0 || rotary % 2 != 0)
        return hf_fail(RA_ERR_HEAD_DIM, "head_dim %lld and partial_rotary_factor %g give "
                       "rotary_dim %lld; it must be even and > 0", (long long)head_dim, prf,
                       (long long)rotary);
    *rotary_dim = rotary;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_qkv_packing(const ra_hf_config *config, const char *tensor,
                                             const char *file, int64_t n_heads,
                                             int64_t *packing, int64_t *n_kv_heads)
{
    hf_reset();
    if (!tensor || !file || !packing || !n_kv_heads)
        return hf_fail(RA_ERR_NULL, "%s is NULL", !tensor ? "tensor" : !file ? "file"
                                                  : !packing ? "packing" : "n_kv_heads");
    if (n_heads < 1 || n_heads > INT32_MAX)
        return hf_fail(RA_ERR_ARGUMENT, "n_heads %lld is outside [1, %d]", (long long)n_heads,
                       INT32_MAX);
    fused_packing fused;
    RA_HF_TRY(hf_config_packing(config ? &config->fields : NULL, config ? config->path : "",
                                tensor, file, n_heads, &fused, n_kv_heads));
    *packing = fused == FUSED_ROWS         ? RA_HF_QKV_ROWS
               : fused == FUSED_QVK_GROUPS ? RA_HF_QKV_QVK_GROUPS
                                           : RA_HF_QKV_GROUPED;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_tensor_layer(const char *name, int64_t *layer)
{
    hf_reset();
    if (!name || !layer) return hf_fail(RA_ERR_NULL, "%s is NULL", name ? "layer" : "name");
    *layer = -1;
    for (const char *p = name; (p = strstr(p, "layers.")) != NULL; p++) {
        if (p != name && p[-1] != '.') continue;
        const char *number = p + strlen("layers.");
        size_t len = strspn(number, "+-0123456789");
        if (number[len] != '.') continue;
        *layer = hf_layer_number(number, len);
        if (*layer >= 0) return RA_OK;
        return hf_fail(RA_ERR_FORMAT, "tensor '%s' has a malformed layer number (expected 0, "
                       "1, 2 ... without signs or leading zeros)", name);
    }
    return RA_OK;
}
