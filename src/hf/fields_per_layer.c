/*
 * fields_per_layer.c — Gemma 4's layers of two shapes, and its keys as
 * values:
 *   per_layer_config (RA_HF_PER_LAYER_CONFIG), transformers' heterogeneous
 *     config, {"<layer>": {"head_dim": D, "num_key_value_heads": K}, ...}:
 *     the layers it names take those values over the config's (a value
 *     equal to the config's is no override, as transformers drops it; any
 *     other key is refused); without it, Gemma4TextConfig's own reading:
 *     the full_attention layers take global_head_dim (default 512) and,
 *     with attention_k_eq_v, num_global_key_value_heads (default none);
 *   attention_k_eq_v (RA_HF_VALUES_FROM_KEYS): the layers that do not
 *     slide have no v_proj, and take k_proj's output as values;
 *   layer_types' last entry full_attention (RA_HF_LAST_LAYER_FULL): the
 *     config class forces it so whatever the file says;
 *   the default rope over all of head_dim (RA_HF_DEFAULT_ROPE_WHOLE):
 *     Gemma4TextRotaryEmbedding's (and LFM3's, Llama's and most families':
 *     families.c's WHOLE) compute_default_rope_parameters reads no
 *     partial_rotary_factor (what
 *     the rope object has, or took from the top level, is dropped); the
 *     proportional rope reads it; the other types, which would rotate
 *     fewer features than head_dim, are refused.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

static ra_hf_features features_of(const ra_hf_fields *c)
{
    return c->family ? c->family->features : 0;
}

/* Zeroed shapes for n layers: every layer the config's. */
static ra_status alloc_shapes(ra_hf_fields *out, int64_t n, const char *name, char *msg,
                              size_t msg_len)
{
    const size_t count = n > 0 ? (size_t)n : 1;
    out->layer_head_dim = ra_calloc(count, sizeof *out->layer_head_dim);
    out->layer_kv_heads = ra_calloc(count, sizeof *out->layer_kv_heads);
    if (!out->layer_head_dim || !out->layer_kv_heads)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    out->n_layer_shapes = n;
    return RA_OK;
}

/* A layer's head_dim or num_key_value_heads (key) into *value: a positive
 * integer, 0 where it is the config's own (global). */
static ra_status read_size(const cJSON *item, const char *where, const char *key,
                           int64_t global, int64_t *value, const char *name, char *msg,
                           size_t msg_len)
{
    if (!ra_io_json_integer(item, value) || *value < 1 || *value > INT32_MAX)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s%s\" must be a positive integer",
                          name, where, key);
    if (*value == global) *value = 0;
    return RA_OK;
}

/* One entry of per_layer_config, "<layer>": {...}, as transformers reads
 * it (int(key), 0 <= layer < num_hidden_layers). */
static ra_status read_entry(const cJSON *e, ra_hf_fields *out, const char *name, char *msg,
                            size_t msg_len)
{
    const char *key = e->string ? e->string : "";
    char *end = NULL;
    long long layer = isdigit((unsigned char)key[0]) ? strtoll(key, &end, 10) : -1;
    if (layer < 0 || *end != '\0' || layer >= out->n_layer_shapes)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"per_layer_config\" key \"%.32s\" "
                          "is not a layer number below num_hidden_layers (%lld)", name, key,
                          (long long)out->n_layer_shapes);
    char where[64];
    snprintf(where, sizeof where, "per_layer_config.%.32s.", key);
    if (!cJSON_IsObject(e))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"per_layer_config.%.32s\" must be "
                          "an object", name, key);
    for (const cJSON *k = e->child; k != NULL; k = k->next) {
        const char *what = k->string ? k->string : "";
        if (strcmp(what, "head_dim") == 0)
            RA_TRY(read_size(k, where, what, out->head_dim, &out->layer_head_dim[layer], name,
                             msg, msg_len));
        else if (strcmp(what, "num_key_value_heads") == 0)
            RA_TRY(read_size(k, where, what, out->num_key_value_heads,
                             &out->layer_kv_heads[layer], name, msg, msg_len));
        else
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"%s%.64s\": a layer's own "
                              "value of a key other than head_dim and num_key_value_heads is "
                              "not supported", name, where, what);
    }
    return RA_OK;
}

/* Without per_layer_config: global_head_dim (default 512) and, with
 * attention_k_eq_v, num_global_key_value_heads for the full_attention
 * layers of layer_types (Gemma4TextConfig.__post_init__). */
static ra_status read_global(const cJSON *root, ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    static const char *const keys[2] = {"global_head_dim", "num_global_key_value_heads"};
    const int64_t global[2] = {out->head_dim, out->num_key_value_heads};
    int64_t value[2] = {512, 0};
    for (int i = 0; i < 2; i++) {
        const cJSON *item;
        RA_TRY(ra_io_json_key(root, keys[i], name, &item, msg, msg_len));
        if (item == NULL || (i == 1 && cJSON_IsNull(item))) continue; /* None: no override */
        if (cJSON_IsNull(item)) /* {"head_dim": None}: transformers fails on it */
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" is null", name, keys[i]);
        RA_TRY(read_size(item, "", keys[i], global[i], &value[i], name, msg, msg_len));
    }
    if (value[0] == global[0]) value[0] = 0;
    if (!out->values_from_keys) value[1] = 0;
    const ra_hf_window *w = &out->window;
    if (!w->has_layer_types) { /* its full layers: by the class's formula, not read */
        out->shapes_unknown = value[0] || value[1];
        return RA_OK;
    }
    for (int64_t i = 0; i < w->n_layer_types && i < out->n_layer_shapes; i++) {
        if (w->layer_types[i] != RA_HF_FULL_ATTENTION) continue;
        out->layer_head_dim[i] = value[0];
        out->layer_kv_heads[i] = value[1];
    }
    return RA_OK;
}

/* transformers' rotary embedding reads one config per layer type
 * (per_layer_config[layer_type]), which raises where the layers of a type
 * differ. */
static ra_status check_by_type(const ra_hf_fields *out, const char *name, char *msg,
                               size_t msg_len)
{
    const ra_hf_window *w = &out->window;
    int64_t first[RA_HF_OTHER_ATTENTION + 1] = {-1, -1, -1, -1};
    for (int64_t i = 0; i < w->n_layer_types && i < out->n_layer_shapes; i++) {
        int64_t *f = &first[w->layer_types[i]];
        if (*f < 0) *f = i;
        if (out->layer_head_dim[i] == out->layer_head_dim[*f] &&
            out->layer_kv_heads[i] == out->layer_kv_heads[*f])
            continue;
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"per_layer_config\" gives "
                          "layers %lld and %lld, of one kind in layer_types, different head "
                          "sizes or key/value heads: transformers' rotary embedding reads one "
                          "per layer type (it raises)", name, (long long)*f, (long long)i);
    }
    return RA_OK;
}

static ra_status read_shapes(const cJSON *root, ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    const ra_hf_window *w = &out->window;
    RA_TRY(alloc_shapes(out, out->num_hidden_layers > 0 ? out->num_hidden_layers
                                                         : w->n_layer_types,
                        name, msg, msg_len));
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "per_layer_config", name, &item, msg, msg_len));
    if (item == NULL) RA_TRY(read_global(root, out, name, msg, msg_len));
    else if (!cJSON_IsObject(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"per_layer_config\" must be an "
                          "object", name);
    for (const cJSON *e = item ? item->child : NULL; e != NULL; e = e->next)
        RA_TRY(read_entry(e, out, name, msg, msg_len));
    return check_by_type(out, name, msg, msg_len);
}

/* attention_k_eq_v: true, false or null (false). */
static ra_status read_k_eq_v(const cJSON *root, ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "attention_k_eq_v", name, &item, msg, msg_len));
    if (item != NULL && !cJSON_IsBool(item) && !cJSON_IsNull(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"attention_k_eq_v\" must be true "
                          "or false", name);
    out->values_from_keys = item != NULL && cJSON_IsTrue(item);
    return RA_OK;
}

/* RA_HF_DEFAULT_ROPE_WHOLE: a default rope's partial_rotary_factor dropped;
 * a proportional rope keeps it; any other type with one other than 1
 * refused (transformers' cos and sin then have fewer features than q and
 * k, and it fails). */
static ra_status default_rope_whole(ra_hf_rope *rope, const char *family, const char *name,
                                    char *msg, size_t msg_len)
{
    if (rope->proportional || !rope->has_partial_rotary_factor) return RA_OK;
    if (rope->type == RA_ROPE_DEFAULT) {
        rope->has_partial_rotary_factor = 0;
        rope->partial_rotary_factor = 0;
        return RA_OK;
    }
    if (rope->partial_rotary_factor == 1) return RA_OK;
    return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"partial_rotary_factor\" is %g "
                      "with rope type %s, and model_type \"%s\" rotates all of head_dim with "
                      "it (only its default and proportional ropes do; transformers fails on "
                      "the others)", name, rope->partial_rotary_factor,
                      ra_hf_rope_type_name(rope->type), family);
}

ra_status ra_hf_per_layer_read(const cJSON *root, ra_hf_fields *out, const char *name,
                               char *msg, size_t msg_len)
{
    const ra_hf_features features = features_of(out);
    const ra_hf_window *w = &out->window;
    if ((features & RA_HF_LAST_LAYER_FULL) && w->n_layer_types > 0 &&
        w->layer_types[w->n_layer_types - 1] != RA_HF_FULL_ATTENTION)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"layer_types\" ends in a layer "
                          "other than full_attention, and model_type \"%s\"'s config class "
                          "makes the last layer full_attention whatever it says: refused",
                          name, out->family->model_type);
    if (features & RA_HF_DEFAULT_ROPE_WHOLE) {
        const char *family = out->family->model_type;
        RA_TRY(default_rope_whole(&out->rope, family, name, msg, msg_len));
        RA_TRY(default_rope_whole(&out->local_rope, family, name, msg, msg_len));
    }
    if (features & RA_HF_VALUES_FROM_KEYS) RA_TRY(read_k_eq_v(root, out, name, msg, msg_len));
    if (features & RA_HF_PER_LAYER_CONFIG) RA_TRY(read_shapes(root, out, name, msg, msg_len));
    return RA_OK;
}

int ra_hf_layer_shape(const ra_hf_fields *config, int64_t layer, int64_t *head_dim,
                      int64_t *n_kv_heads)
{
    *head_dim = *n_kv_heads = 0;
    if (!(features_of(config) & RA_HF_PER_LAYER_CONFIG)) return 0;
    if (config->shapes_unknown) return -1;
    if (layer < 0) {
        for (int64_t i = 0; i < config->n_layer_shapes; i++)
            if (config->layer_head_dim[i] || config->layer_kv_heads[i]) return -1;
        return 0;
    }
    if (layer >= config->n_layer_shapes) return 0;
    *head_dim = config->layer_head_dim[layer];
    *n_kv_heads = config->layer_kv_heads[layer];
    return *head_dim || *n_kv_heads;
}

int ra_hf_layer_values_from_keys(const ra_hf_fields *config, int64_t layer)
{
    if (!(features_of(config) & RA_HF_VALUES_FROM_KEYS) || !config->values_from_keys) return 0;
    const ra_hf_window *w = &config->window;
    if (layer < 0 || !w->has_layer_types || layer >= w->n_layer_types) return -1;
    return w->layer_types[layer] != RA_HF_SLIDING_ATTENTION;
}
