/*
 * fields_rope_types.c — RA_HF_ROPE_BY_LAYER_TYPE (Cohere Compass,
 * CohereCompassRotaryEmbedding): rope_parameters keyed by layer type,
 * {"full_attention": {...} or null, "sliding_attention": {...} or null},
 * each rope the layers of that type rotate by (the default rope over all of
 * head_dim, its sections interleaved as M-RoPE's), null: those layers have
 * no RoPE.  A layer type the layers use that rope_parameters lacks (a flat
 * rope_parameters too) fails in transformers (KeyError): refused.  Also
 * RA_HF_HEAD_DIM_BY_HEADS: head_dim is hidden_size / num_attention_heads,
 * whatever the config says.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

static const char *const type_names[2] = {"full_attention", "sliding_attention"};

/* The layer type's rope: rope_parameters' entry (an object; null: no RoPE),
 * of rope type default without partial_rotary_factor (its rotary embedding
 * rotates all of head_dim and runs no other type here). */
static ra_status read_type(const cJSON *item, int i, ra_hf_fields *out, const char *name,
                           char *msg, size_t msg_len)
{
    ra_hf_rope *rope = i == 0 ? &out->rope : &out->local_rope;
    char prefix[48];
    snprintf(prefix, sizeof prefix, "rope_parameters.%s.", type_names[i]);
    if (item == NULL) return RA_OK;
    out->layer_type_rope[i] = cJSON_IsNull(item) ? RA_HF_TYPE_ROPE_NULL : RA_HF_TYPE_ROPE_GIVEN;
    if (cJSON_IsNull(item)) return RA_OK;
    RA_TRY(ra_hf_rope_read(item, name, prefix, rope, msg, msg_len));
    if (rope->type != RA_ROPE_DEFAULT || rope->has_mrope)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"%srope_type\" is \"%s\": "
                          "model_type \"%s\"'s rope per layer type is read as the default "
                          "rope only", name, prefix,
                          rope->has_mrope ? "mrope" : ra_hf_rope_type_name(rope->type),
                          out->family->model_type);
    return RA_OK;
}

ra_status ra_hf_rope_types_read(const cJSON *nested, const cJSON *scaling, ra_hf_fields *out,
                                const char *name, char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_ROPE_BY_LAYER_TYPE)) return RA_OK;
    const char *type = out->family->model_type;
    if (scaling != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"rope_scaling\": model_type "
                          "\"%s\" reads rope_parameters by layer type and ignores it: refused "
                          "(give rope_parameters)", name, type);
    for (const cJSON *e = nested ? nested->child : NULL; e != NULL; e = e->next)
        if (strcmp(e->string, type_names[0]) != 0 && strcmp(e->string, type_names[1]) != 0)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"rope_parameters.%.64s\": "
                              "model_type \"%s\" reads rope_parameters by layer type "
                              "(full_attention, sliding_attention), and no other key", name,
                              e->string, type);
    for (int i = 0; i < 2; i++) {
        const cJSON *item = NULL; /* null kept: that type's layers have no RoPE */
        if (nested) RA_TRY(ra_io_json_key(nested, type_names[i], name, &item, msg, msg_len));
        if (nested && item == NULL) ra_io_json_member(nested, type_names[i], &item);
        RA_TRY(read_type(item, i, out, name, msg, msg_len));
    }
    out->has_rope = out->has_local_rope = 1;
    return RA_OK;
}

/* Whether layer_types (all full_attention without it) gives a layer type i. */
static int type_used(const ra_hf_window *w, int i)
{
    if (!w->has_layer_types) return i == 0;
    for (int64_t l = 0; l < w->n_layer_types; l++)
        if (w->layer_types[l] == (i == 0 ? RA_HF_FULL_ATTENTION : RA_HF_SLIDING_ATTENTION))
            return 1;
    return 0;
}

/* RA_HF_HEAD_DIM_BY_HEADS: hidden_size / num_attention_heads. */
static ra_status head_dim_by_heads(ra_hf_fields *out, const char *name, char *msg,
                                   size_t msg_len)
{
    if (!(out->family->features & RA_HF_HEAD_DIM_BY_HEADS)) return RA_OK;
    if (!out->has_hidden_size || !out->has_num_attention_heads) return RA_OK;
    const int64_t d = out->hidden_size / out->num_attention_heads;
    if (out->has_head_dim && out->head_dim != d)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"head_dim\" is %lld, and model_type "
                          "\"%s\" sets it to hidden_size / num_attention_heads = %lld whatever "
                          "the config says: refused as contradictory", name,
                          (long long)out->head_dim, out->family->model_type, (long long)d);
    out->head_dim = d, out->has_head_dim = 1;
    return RA_OK;
}

ra_status ra_hf_rope_types_check(ra_hf_fields *out, const char *name, char *msg, size_t msg_len)
{
    if (!out->family) return RA_OK;
    RA_TRY(head_dim_by_heads(out, name, msg, msg_len));
    if (!(out->family->features & RA_HF_ROPE_BY_LAYER_TYPE)) return RA_OK;
    const char *type = out->family->model_type;
    if (out->has_partial_rotary_factor || out->rope.has_partial_rotary_factor ||
        out->local_rope.has_partial_rotary_factor)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"partial_rotary_factor\" is "
                          "set, and model_type \"%s\"'s default rope rotates all of head_dim: "
                          "refused", name, type);
    for (int i = 0; i < 2; i++) {
        const ra_hf_rope *rope = i == 0 ? &out->rope : &out->local_rope;
        if (!type_used(&out->window, i)) continue;
        if (out->layer_type_rope[i] == RA_HF_TYPE_ROPE_ABSENT)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: layer_types names %s layers and "
                              "rope_parameters has no \"%s\" (an object, or null for no RoPE): "
                              "model_type \"%s\"'s rotary embedding fails on it (KeyError)",
                              name, type_names[i], type_names[i], type);
        if (out->layer_type_rope[i] == RA_HF_TYPE_ROPE_GIVEN && !rope->has_theta)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: no rope_theta for the %s "
                              "layers (in rope_parameters.%s or at the top level): model_type "
                              "\"%s\"'s rotary embedding fails without one", name,
                              type_names[i], type_names[i], type);
    }
    return RA_OK;
}
