/* rope.c — a layer's ra_rope_config from config.json: its rope object (or
 * the one set in its place), rope_theta, partial_rotary_factor and the
 * context lengths, each key the rope type needs checked. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hf/hf.h"

int64_t hf_config_head_dim(const ra_hf_fields *c)
{
    if (c->has_head_dim) return c->head_dim;
    if (c->has_hidden_size && c->has_num_attention_heads)
        return c->hidden_size / c->num_attention_heads;
    return 0;
}

/* "rope type yarn needs \"factor\" ..." */
static ra_status missing(ra_rope_type type, const char *what)
{
    return hf_fail(RA_ERR_NOT_FOUND, "rope type %s needs %s", ra_hf_rope_type_name(type), what);
}

/* A factor list must have one entry per rotating pair. */
static ra_status check_factor_list(const char *key, int64_t n, int64_t rotary_dim)
{
    if (n == rotary_dim / 2) return RA_OK;
    return hf_fail(RA_ERR_SHAPE, "longrope %s has %lld entries; rotary_dim %lld needs %lld (one "
                   "per pair)", key, (long long)n, (long long)rotary_dim,
                   (long long)(rotary_dim / 2));
}

/* Every key the type needs, from the rope object, the config or an override. */
static ra_status check_required(const ra_hf_rope *rope, int64_t max_positions,
                                int64_t rotary_dim)
{
    ra_rope_type type = rope->type;
    switch (type) {
    case RA_ROPE_DEFAULT:
        return RA_OK;
    case RA_ROPE_LINEAR:
        return rope->has_factor ? RA_OK : missing(type, "\"factor\"");
    case RA_ROPE_DYNAMIC:
        if (!rope->has_factor) return missing(type, "\"factor\"");
        if (!max_positions)
            return missing(type, "max_position_embeddings: the length it scales beyond");
        return RA_OK;
    case RA_ROPE_YARN:
        if (!rope->has_factor && !(rope->has_original_max_position_embeddings && max_positions))
            return missing(type, "\"factor\" (or original_max_position_embeddings and "
                           "max_position_embeddings, to derive it)");
        if (!rope->has_original_max_position_embeddings && !max_positions)
            return missing(type, "\"original_max_position_embeddings\" (or "
                           "max_position_embeddings, which then stands for it)");
        {
            double fast = rope->params.beta_fast > 0 ? rope->params.beta_fast : 32.0;
            double slow = rope->params.beta_slow > 0 ? rope->params.beta_slow : 1.0;
            if (fast < slow)
                return hf_fail(RA_ERR_ARGUMENT, "yarn needs beta_fast (%g) >= beta_slow (%g)",
                               fast, slow);
        }
        return RA_OK;
    case RA_ROPE_LLAMA3:
        if (!rope->has_factor) return missing(type, "\"factor\"");
        if (!rope->has_low_freq_factor) return missing(type, "\"low_freq_factor\"");
        if (!rope->has_high_freq_factor) return missing(type, "\"high_freq_factor\"");
        if (!rope->has_original_max_position_embeddings)
            return missing(type, "\"original_max_position_embeddings\"");
        return RA_OK;
    case RA_ROPE_LONGROPE:
        if (!rope->has_short_factor) return missing(type, "\"short_factor\"");
        if (!rope->has_long_factor) return missing(type, "\"long_factor\"");
        if (!rope->has_original_max_position_embeddings)
            return missing(type, "\"original_max_position_embeddings\" (in the rope "
                           "parameters or at config.json's top level)");
        if (!rope->has_factor && !rope->has_attention_factor && !max_positions)
            return missing(type, "\"factor\", \"attention_factor\" or max_position_embeddings "
                           "(factor = max_position_embeddings / "
                           "original_max_position_embeddings)");
        RA_HF_TRY(check_factor_list("short_factor", rope->n_short_factor, rotary_dim));
        return check_factor_list("long_factor", rope->n_long_factor, rotary_dim);
    case RA_ROPE_TYPE_COUNT:
        break;
    }
    return hf_fail(RA_ERR_ARGUMENT, "unknown rope type %d", (int)type);
}

/* The rope object of layer `layer`: Gemma 3's and OLMo 3's sliding layers
 * take the default rope (the config's scaling is the full layers') at
 * rope_local_base_freq (Gemma 3) or rope_theta, as transformers does, or
 * their own rope_parameters of transformers 5 (Cohere Compass's too); a layer's kind:
 * ra_hf_layer_slides.  A rope object that was set replaces both. */
static ra_status layer_rope(const ra_hf_config *config, int64_t layer, ra_hf_rope *out)
{
    const ra_hf_fields *hf = &config->fields;
    *out = config->rope;
    if (!hf->family || !(hf->family->features & (RA_HF_LOCAL_ROPE | RA_HF_ROPE_BY_LAYER_TYPE)) ||
        config->rope_parameters_set)
        return RA_OK;
    int slides = ra_hf_layer_slides(&hf->window, layer, 0);
    int differ = hf->has_local_rope || hf->has_rope_local_base_freq ||
                 config->rope.type != RA_ROPE_DEFAULT || config->rope.has_partial_rotary_factor;
    if (slides < 0 && differ) {
        char which[64] = "layer -1 (any layer)";
        if (layer >= 0) snprintf(which, sizeof which, "layer %lld", (long long)layer);
        return hf_fail(RA_ERR_ARGUMENT, "%s gives its sliding layers a rope of their own beside "
                       "the full layers', and does not say which kind %s is: name the layer, "
                       "or set the rope parameters wanted", config->path, which);
    }
    if (slides > 0 && hf->has_local_rope)
        *out = hf->local_rope;
    else if (slides > 0)
        *out = (ra_hf_rope){.type = RA_ROPE_DEFAULT,
                            .theta = hf->has_rope_local_base_freq ? hf->rope_local_base_freq
                                     : config->rope.has_theta     ? config->rope.theta
                                                                  : 10000.0,
                            .has_theta = 1};
    return RA_OK;
}

/* M-RoPE's sections into out (rotary_dim set): mrope_section, summing to
 * rotary_dim / 2, arranged as the family's code does it whatever
 * mrope_interleaved says (Qwen2-VL, Qwen2.5-VL chunked; Qwen3-VL
 * interleaved), a disagreeing mrope_interleaved refused; without a family,
 * as mrope_interleaved says; Qwen3-VL without sections as its code's
 * default (not a family whose code has a default of its own:
 * RA_HF_MROPE_OWN_DEFAULT, whose 3-D positions then need sections); a chunked
 * family's own default sections (ra_hf_family.mrope_default: GLM-4.1V's), refused
 * where they do not split its rotary pairs.  A family without M-RoPE refuses sections
 * (set by --rope-parameters: config.json's are refused when read). */
static ra_status mrope(const ra_hf_config *config, const ra_hf_rope *rope, ra_rope_config *out)
{
    const ra_hf_family *family = config->fields.family;
    const ra_hf_features features = family ? family->features : 0;
    const int64_t *s = rope->params.mrope_section;
    /* Qwen3-VL's code defaults to [24, 20, 20]: height and width each take
     * 20 of the interleaved pairs, time the rest (all the pairs it has at
     * head_dim 128) */
    const int64_t pairs = out->rotary_dim / 2, qwen3_vl[3] = {pairs - 40, 20, 20};
    const int64_t *own = family && family->mrope_default[0] ? family->mrope_default : NULL;
    if (!rope->has_mrope_section && (features & RA_HF_MROPE_INTERLEAVED) &&
        !(features & RA_HF_MROPE_OWN_DEFAULT) && pairs >= 60)
        s = qwen3_vl;
    else if (!rope->has_mrope_section && own) { /* (its code splits cos and sin by them) */
        if (own[0] + own[1] + own[2] != pairs)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: no \"mrope_section\", and model_type "
                           "\"%s\"'s code splits the rotary pairs by its default [%lld, %lld, "
                           "%lld], %lld of them, where rotary_dim %lld has %lld (transformers "
                           "fails): refused", config->path, family->model_type,
                           (long long)own[0], (long long)own[1], (long long)own[2],
                           (long long)(own[0] + own[1] + own[2]), (long long)out->rotary_dim,
                           (long long)pairs);
        s = own;
    } else if (!rope->has_mrope_section) {
        if (rope->has_mrope)
            return hf_fail(RA_ERR_NOT_FOUND, "%s: rope type \"mrope\" needs \"mrope_section\"",
                           config->path);
        if (rope->params.mrope_interleaved)
            return hf_fail(RA_ERR_NOT_FOUND, "%s: \"mrope_interleaved\" without "
                           "\"mrope_section\"", config->path);
        return RA_OK; /* text positions only: the family's M-RoPE needs no sections */
    }
    if (family && !(features & RA_HF_MROPE))
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"mrope_section\" (3-D multimodal positions) "
                       "is supported for the Qwen-VL families only, not model_type \"%s\"",
                       config->path, family->model_type);
    if (s[0] + s[1] + s[2] != out->rotary_dim / 2)
        return hf_fail(RA_ERR_SHAPE, "%s: \"mrope_section\" [%lld, %lld, %lld] sums to %lld; "
                       "rotary_dim %lld needs %lld (one entry per pair)", config->path,
                       (long long)s[0], (long long)s[1], (long long)s[2],
                       (long long)(s[0] + s[1] + s[2]), (long long)out->rotary_dim,
                       (long long)(out->rotary_dim / 2));
    int interleaved = rope->params.mrope_interleaved;
    if (features & RA_HF_MROPE) {
        const int family_interleaved = (features & RA_HF_MROPE_INTERLEAVED) != 0;
        if (rope->has_mrope_interleaved && interleaved != family_interleaved)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"mrope_interleaved\" is %s, and "
                           "model_type \"%s\"'s code %s the sections whatever it says: refused",
                           config->path, interleaved ? "true" : "false", family->model_type,
                           family_interleaved ? "interleaves" : "does not interleave");
        interleaved = family_interleaved;
    }
    memcpy(out->mrope_section, s, sizeof out->mrope_section);
    out->mrope_interleaved = interleaved;
    return RA_OK;
}

/* HunYuan-V1 (ra_hf_family.ntk_alpha): a dynamic rope with alpha runs the
 * default rope at base rope_theta * alpha ^ (head_dim / (head_dim - 2)),
 * whatever the sequence's length, as its rotary embedding's ntk_alpha.  A
 * rope set in the config's place says what it means. */
static ra_status ntk_alpha(const ra_hf_config *config, int64_t head_dim, ra_hf_rope *rope)
{
    const double alpha = config->fields.rope_alpha;
    if (alpha == 0 || rope->type != RA_ROPE_DYNAMIC || config->rope_parameters_set) return RA_OK;
    if (!config->fields.has_head_dim || head_dim <= 2)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: the rope's alpha stretches its base by "
                       "head_dim / (head_dim - 2), and the config gives no head_dim above 2 "
                       "(transformers fails on it)", config->path);
    double theta = rope->has_theta ? rope->theta : 10000.0;
    rope->type = RA_ROPE_DEFAULT;
    rope->theta = theta * pow(alpha, (double)head_dim / (double)(head_dim - 2));
    rope->has_theta = 1;
    return RA_OK;
}

/* Rope type "proportional" (transformers' _compute_proportional_rope_parameters):
 * every pair of head_dim, the first int(partial_rotary_factor * head_dim // 2)
 * turning by base^(-2i / head_dim) / factor (the linear rope's; factor
 * absent: 1, the default rope's), the others not (frequency 0). */
static ra_status proportional(const ra_hf_config *config, ra_hf_rope *rope, int64_t head_dim,
                              double prf, ra_rope_config *out)
{
    const int64_t turning = (int64_t)floor(prf * (double)head_dim / 2.0);
    if (turning < 1)
        return hf_fail(RA_ERR_HEAD_DIM, "%s: rope type proportional with partial_rotary_factor "
                       "%g and head_dim %lld turns no pair: not supported", config->path, prf,
                       (long long)head_dim);
    out->rotary_dim = head_dim;
    out->rotating_pairs = turning < head_dim / 2 ? turning : 0;
    if (rope->has_factor) rope->type = out->type = RA_ROPE_LINEAR;
    return RA_OK;
}

/* max_position_embeddings: the one set, else the config's; 0: none. */
static int64_t max_positions_of(const ra_hf_config *config)
{
    const ra_hf_fields *c = &config->fields;
    return config->max_position_embeddings     ? config->max_position_embeddings
           : c->has_max_position_embeddings ? c->max_position_embeddings
                                            : 0;
}

/* Ministral3Attention: q *= 1 + beta log(1 + floor(position_ids /
 * original)), beta and original its rope parameters' llama_4_scaling_beta
 * and original_max_position_embeddings, which transformers 5's
 * standardize_rope_params gives llama3, yarn and longrope ropes
 * (max_position_embeddings where absent; the top level's where given) and
 * no other type: one missing is None in the formula, which fails there. */
ra_status hf_position_q_scaling(const ra_hf_config *config, int64_t layer, ra_layer_config *out)
{
    const ra_hf_fields *c = &config->fields;
    if (!c->family || !(c->family->features & RA_HF_POSITION_Q_SCALING)) return RA_OK;
    ra_hf_rope rope;
    RA_HF_TRY(layer_rope(config, layer, &rope));
    const int scaled = rope.type == RA_ROPE_LLAMA3 || rope.type == RA_ROPE_YARN ||
                       rope.type == RA_ROPE_LONGROPE;
    if (!scaled && c->has_original_max_position_embeddings)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"original_max_position_embeddings\" at the top "
                       "level, which transformers moves into the rope parameters of llama3, "
                       "yarn and longrope only, and model_type \"%s\" divides positions by the "
                       "rope parameters' with rope type %s: give it there alone",
                       config->path, c->family->model_type, ra_hf_rope_type_name(rope.type));
    const int64_t original = rope.has_original_max_position_embeddings
                                 ? rope.params.original_max_position_embeddings
                             : scaled ? max_positions_of(config)
                                      : 0;
    if (!rope.has_llama_4_scaling_beta || original == 0)
        return hf_fail(RA_ERR_FORMAT, "%s: model_type \"%s\" scales q by 1 + "
                       "llama_4_scaling_beta log(1 + floor(position / "
                       "original_max_position_embeddings)), and the rope parameters (type %s) "
                       "lack %s (transformers fails on it)", config->path,
                       c->family->model_type, ra_hf_rope_type_name(rope.type),
                       rope.has_llama_4_scaling_beta ? "original_max_position_embeddings"
                                                     : "llama_4_scaling_beta");
    out->temperature_floor = (double)original;
    out->temperature_scale = rope.llama_4_scaling_beta;
    out->temperature_no_offset = 1;
    return RA_OK;
}

ra_status hf_rope(const ra_hf_config *config, int64_t layer, int64_t head_dim, int64_t seq_len,
                  int64_t max_position, ra_rope_config *out)
{
    const ra_hf_fields *c = &config->fields;
    if (c->family && (c->family->features & RA_HF_ROPE_RATIO) && c->rope_ratio != 1 &&
        !config->theta)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s has rope_ratio %g, which ChatGLM3's and GLM-4's "
                       "code multiply the rope base by and ChatGLM2-32K's divides the positions "
                       "by; config.json does not say which: set rope_theta (%g for the first)",
                       config->path, c->rope_ratio, 10000.0 * c->rope_ratio);
    ra_hf_rope rope;
    RA_HF_TRY(layer_rope(config, layer, &rope));
    RA_HF_TRY(ntk_alpha(config, head_dim, &rope));
    *out = rope.params; /* the scaled types' parameters; the rest is set here */
    memset(out->mrope_section, 0, sizeof out->mrope_section); /* mrope(), below */
    out->mrope_interleaved = 0;
    out->struct_size = sizeof *out;
    out->type = rope.type;
    out->layout = RA_LAYOUT_INTERLEAVED;
    out->head_dim = head_dim;
    out->theta = config->theta ? config->theta : rope.has_theta ? rope.theta : 10000.0;

    double prf = rope.has_partial_rotary_factor ? rope.partial_rotary_factor : 1.0;
    /* transformers: int(head_dim * partial_rotary_factor), truncating;
     * GPT-J's config gives the count, rotary_dim. */
    int64_t rotary_dim = (int64_t)((double)head_dim * prf);
    if (!rope.has_partial_rotary_factor && c->has_rotary_dim) {
        rotary_dim = c->rotary_dim;
        if (rotary_dim > head_dim)
            return hf_fail(RA_ERR_HEAD_DIM, "rotary_dim %lld is more than head_dim %lld",
                           (long long)rotary_dim, (long long)head_dim);
    }
    /* RA_HF_ODD_ROTARY_ROUNDS_UP: an odd int(head_dim * partial_rotary_factor)
     * (MiMo-V2-Flash's 0.334 of a small head): the default rope's inv_freq =
     * base^(-arange(0, dim, 2) / dim) has (dim + 1) / 2 frequencies over dim + 1
     * features, base^(-2i / dim) = (base^((dim + 1) / dim))^(-2i / (dim + 1)):
     * that rope over dim + 1. */
    const int rounds_up = c->family && (c->family->features & RA_HF_ODD_ROTARY_ROUNDS_UP);
    if (!rope.proportional && rotary_dim % 2 != 0 && rounds_up && rope.type == RA_ROPE_DEFAULT &&
        rotary_dim < head_dim) {
        out->theta = pow(out->theta, (double)(rotary_dim + 1) / (double)rotary_dim);
        rotary_dim++;
    }
    if (rope.proportional)
        RA_HF_TRY(proportional(config, &rope, head_dim, prf, out));
    else if (rotary_dim <= 0 || rotary_dim % 2 != 0)
        return hf_fail(RA_ERR_HEAD_DIM, "partial_rotary_factor %g with head_dim %lld gives "
                       "rotary_dim %lld; RoPE needs it even and > 0", prf, (long long)head_dim,
                       (long long)rotary_dim);
    else
        out->rotary_dim = rotary_dim;
    rotary_dim = out->rotary_dim;
    RA_HF_TRY(mrope(config, &rope, out));

    const int64_t max_positions = max_positions_of(config);
    RA_HF_TRY(check_required(&rope, max_positions, rotary_dim));
    if (rope.type == RA_ROPE_DYNAMIC || rope.type == RA_ROPE_YARN ||
        rope.type == RA_ROPE_LONGROPE)
        out->max_position_embeddings = max_positions;
    const int by_length = rope.type == RA_ROPE_DYNAMIC || rope.type == RA_ROPE_LONGROPE;
    if (by_length && seq_len <= 0 && max_position < 0)
        return hf_fail(RA_ERR_ARGUMENT, "rope type %s scales by the sequence's length: set "
                       "seq_len, or the tokens (n_tokens) or largest position (max_position) "
                       "the layer will see", ra_hf_rope_type_name(rope.type));
    if (by_length) out->seq_len = seq_len > 0 ? seq_len : max_position + 1;
    if (rope.type == RA_ROPE_LONGROPE && c->family &&
        (c->family->features & RA_HF_LONGROPE_MSCALE)) { /* PhimoeRotaryEmbedding */
        if (!rope.has_short_mscale || !rope.has_long_mscale)
            return hf_fail(RA_ERR_FORMAT, "%s: model_type \"%s\" runs longrope with "
                           "short_mscale and long_mscale, and the rope parameters lack %s",
                           config->path, c->family->model_type,
                           rope.has_short_mscale ? "long_mscale" : "short_mscale");
        out->long_factor = out->short_factor;
        out->attention_factor = out->seq_len > out->original_max_position_embeddings
                                    ? rope.long_mscale : rope.short_mscale;
    }
    /* Every position up to the largest from a table (at most 2^15 rows;
     * 4096 when the largest is not known). */
    const int64_t most = (int64_t)1 << 15;
    out->table_size = max_position < 0 ? 4096 : max_position + 1 < most ? max_position + 1 : most;
    return RA_OK;
}

_Static_assert(sizeof(ra_hf_options) >= RA_HF_OPTIONS_SIZE_V1, "ra_hf_options only grows");

/* The options, checked, with struct_size ours. */
ra_status hf_options_read(ra_hf_options *out, const ra_hf_options *options)
{
    /* As ropeattn.h's structs that grow: an older header's struct lacks
     * the later fields (they keep their defaults); a newer header's fields
     * must be 0. */
    *out = ra_hf_options_init();
    if (options && options->struct_size < RA_HF_OPTIONS_SIZE_V1)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_options: struct_size %zu is less than %d: start "
                       "from ra_hf_options_init()", options->struct_size,
                       RA_HF_OPTIONS_SIZE_V1);
    for (size_t i = sizeof *out; options && i < options->struct_size; i++)
        if (((const unsigned char *)options)[i])
            return hf_fail(RA_ERR_UNSUPPORTED, "ra_hf_options: a field this library does not "
                           "know (byte %zu) is set", i);
    if (options)
        memcpy(out, options, options->struct_size < sizeof *out ? options->struct_size
                                                                : sizeof *out);
    /* Sizes as config.json's (at most INT32_MAX): products of two fit. */
    const char *bad = out->layer < -1 || out->layer > INT32_MAX           ? "layer"
                      : out->n_heads < 0 || out->n_heads > INT32_MAX       ? "n_heads"
                      : out->n_kv_heads < 0 || out->n_kv_heads > INT32_MAX ? "n_kv_heads"
                      : out->head_dim < 0 || out->head_dim > INT32_MAX     ? "head_dim"
                      : out->layout < -1 || out->layout >= RA_LAYOUT_COUNT ? "layout"
                      : out->first_token < 0              ? "first_token"
                      : out->n_tokens < 0                 ? "n_tokens"
                      : out->max_position < -1            ? "max_position"
                      : out->seq_len < 0                  ? "seq_len"
                      : out->position_ids != 0 && out->position_ids != 1 ? "position_ids"
                      : out->vision != 0 && out->vision != 1 ? "vision"
                      : out->non_causal != 0 && out->non_causal != 1 ? "non_causal"
                      : out->token_types != 0 && out->token_types != 1 ? "token_types"
                      : out->vision_windows != 0 && out->vision_windows != 1 ? "vision_windows"
                                                          : NULL;
    if (bad) return hf_fail(RA_ERR_ARGUMENT, "ra_hf_options: %s is out of range", bad);
    if (out->first_token > RA_MAX_POSITION || out->n_tokens > RA_MAX_POSITION + 1 ||
        out->first_token + out->n_tokens - 1 > RA_MAX_POSITION ||
        out->max_position > RA_MAX_POSITION)
        return hf_fail(RA_ERR_POSITION, "ra_hf_options: first_token %lld, n_tokens %lld, "
                       "max_position %lld: beyond position %lld", (long long)out->first_token,
                       (long long)out->n_tokens, (long long)out->max_position,
                       (long long)RA_MAX_POSITION);
    if (out->max_position < 0 && out->n_tokens)
        out->max_position = out->first_token + out->n_tokens - 1; /* else unknown: -1 */
    out->struct_size = sizeof *out;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_rope_config(const ra_hf_config *config, const ra_hf_options *options,
                                      ra_rope_config *out)
{
    hf_reset();
    if (!out) return hf_fail(RA_ERR_NULL, "out is NULL");
    ra_hf_options o;
    RA_HF_TRY(hf_options_read(&o, options));
    if (o.vision)
        return hf_fail(RA_ERR_UNSUPPORTED, "ra_hf_options: vision: a vision encoder's rope is "
                       "ra_hf_vision_rope_config's");
    static ra_hf_config none = {.path = "config"}; /* a config that says nothing */
    const ra_hf_config *c = config ? config : &none;
    int64_t head_dim = o.head_dim ? o.head_dim : hf_config_head_dim(&c->fields), own, kv;
    const int shaped = ra_hf_layer_shape(&c->fields, o.layer, &own, &kv); /* Gemma 4 */
    if (!o.head_dim && shaped < 0)
        return hf_fail(RA_ERR_ARGUMENT, "%s gives some layers a head size of their own "
                       "(per_layer_config, global_head_dim): name the layer, or set head_dim",
                       c->path);
    if (!o.head_dim && own) head_dim = own;
    if (head_dim <= 0)
        return hf_fail(RA_ERR_ARGUMENT, "head_dim is not known: set it in the options, or give "
                       "a config with head_dim (or hidden_size and num_attention_heads)");
    if (head_dim % 2 != 0)
        return hf_fail(RA_ERR_HEAD_DIM, "head_dim %lld%s%s is odd; RoPE needs it even",
                       (long long)head_dim, o.head_dim ? "" : " from ",
                       o.head_dim ? "" : c->path);
    ra_rope_config rope;
    RA_HF_TRY(hf_rope(c, o.layer, head_dim, o.seq_len, o.max_position, &rope));
    /* The layout: the option's; else the family's; else a Hugging Face
     * config's rotate_half; without a config, Meta's interleaved pairs. */
    rope.layout = o.layout >= 0          ? (ra_layout)o.layout
                  : c->fields.family     ? (ra_layout)ra_hf_fields_layout(&c->fields)
                  : config               ? RA_LAYOUT_HALF
                                         : RA_LAYOUT_INTERLEAVED;
    *out = rope;
    return RA_OK;
}
