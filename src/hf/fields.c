/*
 * fields.c — reads the fields attention needs from a Hugging Face
 * config.json, checking that each holds the right kind of number, its
 * rope_scaling / rope_parameters object (rope_params.c), its
 * sliding-window keys (fields_window.c), its quantization_config
 * (fields_quant.c) and its model family (families.c).
 * A multimodal config's text model is read from its text_config.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

#define MAX_CONFIG_BYTES (16 << 20)

/* Numbers are refused where the command line's options refuse them: a
 * positive number must be finite and normal (at least DBL_MIN; strtod calls
 * a smaller one an underflow), and a count must fit its option's range. */
typedef enum field_kind {
    POSITIVE_INTEGER, /* stored as int64_t, in [1, max] */
    POSITIVE_NUMBER,  /* stored as double, in [DBL_MIN, +inf) */
    FRACTION,         /* stored as double, in [DBL_MIN, 1] */
} field_kind;

typedef struct field {
    const char *key;
    field_kind kind;
    int64_t max;            /* POSITIVE_INTEGER: the largest value */
    int in_rope_parameters; /* newer configs may nest it in "rope_parameters" */
    ra_hf_features feature;  /* an alias: the family feature that reads it */
    size_t value, has;      /* offsets in ra_hf_fields */
} field;

#define FIELD(name, kind, max, nested)                                      \
    {#name, kind, max, nested, 0, offsetof(ra_hf_fields, name),             \
     offsetof(ra_hf_fields, has_##name)}
/* Another name for a field, read (when the field is absent) only in the
 * families whose configs use it (the family feature: RA_HF_ALIASES for
 * GPT-J and GPT-NeoX). */
#define ALIAS(key, name, kind, max, feature)                                 \
    {key, kind, max, 0, feature, offsetof(ra_hf_fields, name),               \
     offsetof(ra_hf_fields, has_##name)}

/* Sizes up to INT32_MAX, as --n-heads and --n-kv-heads take; positions as
 * --max-position-embeddings takes them. */
#define MAX_SIZE INT32_MAX
#define MAX_POSITIONS (RA_MAX_POSITION + 1)

static const field fields[] = {
    FIELD(hidden_size, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(num_attention_heads, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(num_key_value_heads, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(head_dim, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(max_position_embeddings, POSITIVE_INTEGER, MAX_POSITIONS, 0),
    FIELD(rope_theta, POSITIVE_NUMBER, 0, 1),
    FIELD(partial_rotary_factor, FRACTION, 0, 1),
    FIELD(original_max_position_embeddings, POSITIVE_INTEGER, MAX_POSITIONS, 0),
    FIELD(rms_norm_eps, POSITIVE_NUMBER, 0, 0),
    FIELD(query_pre_attn_scalar, POSITIVE_NUMBER, 0, 0),
    FIELD(attn_logit_softcapping, POSITIVE_NUMBER, 0, 0),
    FIELD(attention_multiplier, POSITIVE_NUMBER, 0, 0),
    FIELD(key_multiplier, POSITIVE_NUMBER, 0, 0),
    FIELD(rope_local_base_freq, POSITIVE_NUMBER, 0, 0),
    FIELD(no_rope_layer_interval, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(rotary_dim, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(clip_qkv, POSITIVE_NUMBER, 0, 0),
    FIELD(layer_norm_eps, POSITIVE_NUMBER, 0, 0),
    FIELD(num_kv_heads, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(kv_channels, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(multi_query_group_num, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(rope_ratio, POSITIVE_NUMBER, 0, 0),
    FIELD(attention_chunk_size, POSITIVE_INTEGER, MAX_POSITIONS, 0),
    FIELD(floor_scale, POSITIVE_NUMBER, 0, 0),
    FIELD(attn_scale, POSITIVE_NUMBER, 0, 0),
    FIELD(kv_lora_rank, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(q_lora_rank, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(qk_nope_head_dim, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(qk_rope_head_dim, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(v_head_dim, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(index_topk, POSITIVE_INTEGER, MAX_POSITIONS, 0),
    FIELD(index_n_heads, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(index_head_dim, POSITIVE_INTEGER, MAX_SIZE, 0),
    FIELD(attention_value_scale, POSITIVE_NUMBER, 0, 0),
};

static const field aliases[] = {
    ALIAS("n_embd", hidden_size, POSITIVE_INTEGER, MAX_SIZE, RA_HF_ALIASES),
    ALIAS("n_head", num_attention_heads, POSITIVE_INTEGER, MAX_SIZE, RA_HF_ALIASES),
    ALIAS("n_positions", max_position_embeddings, POSITIVE_INTEGER, MAX_POSITIONS, RA_HF_ALIASES),
    ALIAS("rotary_pct", partial_rotary_factor, FRACTION, 0, RA_HF_ALIASES),
    ALIAS("rotary_emb_base", rope_theta, POSITIVE_NUMBER, 0, RA_HF_ALIASES),
    ALIAS("norm_eps", rms_norm_eps, POSITIVE_NUMBER, 0, RA_HF_NORM_EPS_KEY),
    ALIAS("d_model", hidden_size, POSITIVE_INTEGER, MAX_SIZE, RA_HF_NESTED_ATTN_CONFIG),
    ALIAS("n_heads", num_attention_heads, POSITIVE_INTEGER, MAX_SIZE, RA_HF_NESTED_ATTN_CONFIG),
    ALIAS("max_seq_len", max_position_embeddings, POSITIVE_INTEGER, MAX_POSITIONS,
          RA_HF_NESTED_ATTN_CONFIG),
    ALIAS("model_max_length", max_position_embeddings, POSITIVE_INTEGER, MAX_POSITIONS,
          RA_HF_MODEL_MAX_LENGTH),
};

/* DBRX's attn_config keys, read into the top level's fields. */
static const field attn_config_fields[] = {
    ALIAS("kv_n_heads", num_key_value_heads, POSITIVE_INTEGER, MAX_SIZE,
          RA_HF_NESTED_ATTN_CONFIG),
    ALIAS("clip_qkv", clip_qkv, POSITIVE_NUMBER, 0, RA_HF_NESTED_ATTN_CONFIG),
};

/* Stores item's value in the field of out, or fails naming the key. */
static ra_status store(const field *f, const cJSON *item, ra_hf_fields *out, const char *name,
                       char *msg, size_t msg_len)
{
    char *base = (char *)out;
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    int64_t integer;
    switch (f->kind) {
    case POSITIVE_INTEGER:
        if (cJSON_IsNumber(item) && (item->type & RA_IO_JSON_REAL) && isfinite(v) && v == floor(v))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"%s\" is written as a float (with a fraction or an "
                              "exponent): it must be an integer, as transformers' config "
                              "classes require", name, f->key);
        if (!ra_io_json_integer(item, &integer) || integer <= 0)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"%s\" must be a positive integer", name, f->key);
        if (integer > f->max)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"%s\" is %lld; at most %lld is supported", name, f->key,
                              (long long)integer, (long long)f->max);
        memcpy(base + f->value, &integer, sizeof integer);
        break;
    case POSITIVE_NUMBER:
        if (!isfinite(v) || v < DBL_MIN)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"%s\" must be a positive number", name, f->key);
        memcpy(base + f->value, &v, sizeof v);
        break;
    case FRACTION:
        if (!isfinite(v) || v < DBL_MIN || v > 1)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"%s\" must be a number in (0, 1]", name, f->key);
        memcpy(base + f->value, &v, sizeof v);
        break;
    }
    int one = 1;
    memcpy(base + f->has, &one, sizeof one);
    return RA_OK;
}

/* An alias given beside its field (rotary_pct and partial_rotary_factor,
 * rotary_emb_base and rope_theta ...) must say the same: transformers'
 * releases disagree on which one wins (GPT-NeoX's config class of
 * transformers 4 read rotary_pct, transformers 5 partial_rotary_factor). */
static ra_status alias_agrees(const field *alias, const cJSON *item, const ra_hf_fields *out,
                              const char *name, char *msg, size_t msg_len)
{
    ra_hf_fields given;
    memset(&given, 0, sizeof given);
    RA_TRY(store(alias, item, &given, name, msg, msg_len));
    const char *key = "";
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value == alias->value) key = fields[i].key;
    /* both stored as 8 bytes, int64_t or double by the field's kind */
    if (memcmp((const char *)&given + alias->value, (const char *)out + alias->value, 8) == 0)
        return RA_OK;
    return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                      "%s: \"%s\" and \"%s\" (another name for it) are both set and differ: "
                      "transformers' releases disagree on which one wins: refused", name, key,
                      alias->key);
}

/* *out = the object under key, NULL when absent or null; fails when the
 * value is something else. */
static ra_status lookup_object(const cJSON *root, const char *key, const char *name,
                               const cJSON **out, char *msg, size_t msg_len)
{
    RA_TRY(ra_io_json_key(root, key, name, out, msg, msg_len));
    if (*out != NULL && !cJSON_IsObject(*out))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be an object or null",
                          name, key);
    return RA_OK;
}

/* Whether root has key at all (a null value counts: it is not a default). */
static int has_key(const cJSON *root, const char *key)
{
    for (const cJSON *e = root->child; e != NULL; e = e->next)
        if (e->string && strcmp(e->string, key) == 0) return 1;
    return 0;
}

/* Whether root's key is an explicit null. */
static int is_null(const cJSON *root, const char *key)
{
    for (const cJSON *e = root->child; e != NULL; e = e->next)
        if (e->string && strcmp(e->string, key) == 0) return cJSON_IsNull(e);
    return 0;
}

/* RA_HF_ROPE_NEOX_NAMES: a top-level rope_theta or partial_rotary_factor
 * that the config class does not read (rotary_emb_base and rotary_pct,
 * or their defaults, fill its rope first), unless its other name is
 * there too (alias_agrees: the same value). */
static ra_status refuse_unread_neox_names(const cJSON *root, const ra_hf_fields *out,
                                          const char *name, char *msg, size_t msg_len)
{
    static const char *const keys[2][2] = {{"rope_theta", "rotary_emb_base"},
                                           {"partial_rotary_factor", "rotary_pct"}};
    if (!out->family || !(out->family->features & RA_HF_ROPE_NEOX_NAMES)) return RA_OK;
    for (int i = 0; i < 2; i++) {
        const cJSON *item;
        RA_TRY(ra_io_json_key(root, keys[i][0], name, &item, msg, msg_len));
        if (item == NULL || has_key(root, keys[i][1])) continue;
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: a top-level \"%s\" without \"%s\": model_type \"%s\"'s config "
                          "class takes %s (or its default) and never reads it: refused (give %s, "
                          "or rope_parameters.%s)", name, keys[i][0], keys[i][1],
                          out->family->model_type, keys[i][1], keys[i][1], keys[i][0]);
    }
    return RA_OK;
}

/* Keys with a family default whose null means something of its own in
 * transformers' config classes and modeling code: head_dim (hidden_size /
 * num_attention_heads), num_key_value_heads (one per query head),
 * rotary_dim (GPT-J: the whole head), attention_chunk_size (no chunks),
 * attn_logit_softcapping (none), attention_value_scale (1: MiMo-V2-Flash's
 * v unscaled); and keys whose null is read or refused later with a message
 * of its own (latent attention's sizes, read_mla; Llama 4's temperature
 * tuning, hf/layer_config.c; rope_theta, check_null_theta).  A null for any
 * other key with a default is refused: transformers' code fails on it
 * (Gemma 3's query_pre_attn_scalar ...), and the default is not what the
 * file says. */
static const char *const null_means_something[] = {
    "head_dim",         "num_key_value_heads", "rotary_dim",  "attention_chunk_size",
    "attn_logit_softcapping", "q_lora_rank",   "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim",          "floor_scale", "attn_scale",
    "attention_value_scale", "rope_theta",
};

static int is_field(const char *key)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(fields[i].key, key) == 0) return 1;
    return 0;
}

static int null_allowed(const char *key)
{
    for (size_t i = 0; i < sizeof null_means_something / sizeof null_means_something[0]; i++)
        if (strcmp(null_means_something[i], key) == 0) return 1;
    return 0;
}

/* The family's defaults (ra_hf_family.defaults, "key=number ...") for the
 * keys root lacks: config fields, then (window set) the window's.  A
 * config field given as null is refused unless null_allowed. */
static ra_status apply_defaults(const cJSON *root, ra_hf_fields *out, int window,
                                const char *name, char *msg, size_t msg_len)
{
    const char *at = out->family ? out->family->defaults : NULL;
    char key[64];
    double value;
    int used;
    while (at && sscanf(at, " %63[a-z_]=%lf%n", key, &value, &used) == 2) {
        at += used;
        if (!window && is_field(key) && is_null(root, key) && !null_allowed(key))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"%s\" is null: model_type \"%s\" needs a number there "
                              "(transformers fails on null; leave the key out for its default, "
                              "%g)", name, key, out->family->model_type, value);
        if (has_key(root, key)) continue;
        ra_hf_window *w = &out->window;
        if (window && strcmp(key, "sliding_window") == 0) {
            w->sliding_window = (int64_t)value;
            w->has_sliding_window = 1;
        } else if (window && strcmp(key, "sliding_window_pattern") == 0) {
            w->sliding_window_pattern = (int64_t)value;
            w->has_sliding_window_pattern = 1;
        } else if (window && strcmp(key, "use_sliding_window") == 0) {
            w->use_sliding_window = value != 0;
            w->has_use_sliding_window = 1;
        } else if (window && strcmp(key, "max_window_layers") == 0) {
            w->max_window_layers = (int64_t)value;
            w->has_max_window_layers = 1;
        }
        for (size_t i = 0; !window && i < sizeof fields / sizeof fields[0]; i++) {
            if (strcmp(fields[i].key, key) != 0) continue;
            char *base = (char *)out;
            int64_t integer = (int64_t)value;
            int one = 1, has;
            memcpy(&has, base + fields[i].has, sizeof has);
            if (has) break; /* an alias gave it */
            if (fields[i].kind == POSITIVE_INTEGER)
                memcpy(base + fields[i].value, &integer, sizeof integer);
            else
                memcpy(base + fields[i].value, &value, sizeof value);
            memcpy(base + fields[i].has, &one, sizeof one);
        }
    }
    return RA_OK;
}

/* no_rope_layers (SmolLM3): one 0 or 1 per layer, 0 meaning no RoPE. */
static ra_status read_no_rope_layers(const cJSON *root, ra_hf_fields *out, const char *name,
                                     char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "no_rope_layers", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    if (!cJSON_IsArray(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"no_rope_layers\" must be an array of 0 and 1", name);
    int64_t n = cJSON_GetArraySize(item), i = 0;
    /* Llama4TextConfig takes an empty list as none given (the interval's). */
    if (n == 0 && out->family && (out->family->features & RA_HF_EMPTY_NO_ROPE_LAYERS))
        return RA_OK;
    out->no_rope_layers = ra_malloc(n > 0 ? (size_t)n : 1);
    if (out->no_rope_layers == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    out->n_no_rope_layers = n;
    for (const cJSON *e = item->child; e != NULL; e = e->next, i++) {
        int64_t v;
        if (!ra_io_json_integer(e, &v) || (v != 0 && v != 1))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"no_rope_layers\" must be an array of 0 and 1", name);
        out->no_rope_layers[i] = (unsigned char)v;
    }
    return RA_OK;
}

/* out's cross_attention_layers from item: an array of layer numbers. */
static ra_status store_layer_numbers(const cJSON *item, ra_hf_fields *out, const char *name,
                                     char *msg, size_t msg_len)
{
    int64_t n = cJSON_GetArraySize(item), i = 0;
    if (!cJSON_IsArray(item)) n = 0;
    out->cross_attention_layers = ra_malloc(n > 0 ? (size_t)n * sizeof(int64_t) : 1);
    if (out->cross_attention_layers == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    out->n_cross_attention_layers = n;
    int ok = cJSON_IsArray(item);
    for (const cJSON *e = ok ? item->child : NULL; e != NULL; e = e->next, i++)
        ok = ok && ra_io_json_integer(e, &out->cross_attention_layers[i]) &&
             out->cross_attention_layers[i] >= 0;
    if (!ok)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"cross_attention_layers\" must "
                          "be an array of layer numbers (integers >= 0)", name);
    return RA_OK;
}

/* RA_HF_CROSS_ATTENTION_LAYERS (Mllama): cross_attention_layers; absent
 * or null, the config class's default (the row's). */
static ra_status read_cross_attention_layers(const cJSON *root, ra_hf_fields *out,
                                             const char *name, char *msg, size_t msg_len)
{
    const ra_hf_family *family = out->family;
    if (!family || !(family->features & RA_HF_CROSS_ATTENTION_LAYERS)) return RA_OK;
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "cross_attention_layers", name, &item, msg, msg_len));
    if (item != NULL) return store_layer_numbers(item, out, name, msg, msg_len);
    cJSON *fallback = cJSON_Parse(family->default_cross_attention_layers);
    if (fallback == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    ra_status status = store_layer_numbers(fallback, out, name, msg, msg_len);
    cJSON_Delete(fallback);
    return status;
}

/* transformers 5's rope_parameters per layer type, for the families whose
 * sliding layers have a rope of their own (Gemma 3): "full_attention" into
 * out->rope, "sliding_attention" into out->local_rope.  Any other layout of
 * nested objects is left to ra_hf_rope_read, which refuses it. */
static ra_status read_rope_per_layer_type(const cJSON *nested, ra_hf_fields *out,
                                          const char *name, char *msg, size_t msg_len)
{
    const cJSON *full, *sliding;
    ra_hf_features features = out->family ? out->family->features : 0;
    if (nested == NULL || !(features & RA_HF_LOCAL_ROPE)) return RA_OK;
    const char *full_key = "full_attention"; /* the indexed layers' (RA_HF_INDEXED_LAYER_TYPES) */
    if ((features & RA_HF_INDEXED_LAYER_TYPES) && ra_io_json_member(nested, "indexed_attention",
                                                                    &full))
        full_key = "indexed_attention";
    RA_TRY(ra_io_json_key(nested, full_key, name, &full, msg, msg_len));
    RA_TRY(ra_io_json_key(nested, "sliding_attention", name, &sliding, msg, msg_len));
    if ((features & RA_HF_NULL_ROPE_SCALED) && cJSON_GetArraySize(nested) == 2 &&
        cJSON_IsObject(full) != cJSON_IsObject(sliding)) { /* one type without RoPE (Beam) */
        const cJSON *other;
        ra_io_json_member(nested, full ? "sliding_attention" : full_key, &other);
        if (!cJSON_IsNull(other)) return RA_OK; /* absent: ra_hf_rope_read refuses it */
        out->null_rope_type = full ? 2 : 1;
        full = sliding = full ? full : sliding; /* the other's, unused */
    }
    if (!cJSON_IsObject(full) || !cJSON_IsObject(sliding) ||
        cJSON_GetArraySize(nested) != 2)
        return RA_OK;
    char prefix[48];
    snprintf(prefix, sizeof prefix, "rope_parameters.%s.", full_key);
    RA_TRY(ra_hf_rope_read(full, name, prefix, &out->rope, msg, msg_len));
    RA_TRY(ra_hf_rope_read(sliding, name, "rope_parameters.sliding_attention.",
                           &out->local_rope, msg, msg_len));
    out->has_rope = out->has_local_rope = 1;
    return RA_OK;
}

/* A positive number at key, or def where absent; RA_ERR_FORMAT naming it
 * otherwise (null too: transformers fails on it). */
static ra_status read_positive(const cJSON *root, const char *key, double def, double *out,
                              const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, key, name, &item, msg, msg_len));
    *out = def;
    if (item == NULL) return RA_OK;
    if (!cJSON_IsNumber(item) || !(item->valuedouble > 0) || !isfinite(item->valuedouble))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be a positive number",
                          name, key);
    *out = item->valuedouble;
    return RA_OK;
}

/* RA_HF_LOCAL_ATTENTION's window (nothing in other families):
 * ModernBertDecoderConfig sets
 * sliding_window to local_attention // 2 (-1 for a null or 0, which masks
 * every key), over a sliding_window the file gives. */
static ra_status read_local_window(const cJSON *root, ra_hf_fields *out, const char *name,
                                   char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_LOCAL_ATTENTION)) return RA_OK;
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "local_attention", name, &item, msg, msg_len));
    int64_t local = 128;
    if (item != NULL && (!ra_io_json_integer(item, &local) || local < 0))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"local_attention\" must be an "
                          "integer >= 0", name);
    if (is_null(root, "local_attention") || local < 2)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"local_attention\" is %s: "
                          "model_type \"%s\"'s sliding layers would see no key (a window of "
                          "local_attention // 2 tokens, -1 for null or 0): refused", name,
                          item == NULL || cJSON_IsNull(item) ? "null" : "under 2",
                          out->family->model_type);
    ra_hf_window *w = &out->window;
    if (w->has_sliding_window && w->sliding_window != local / 2)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"sliding_window\" is %lld and "
                          "\"local_attention\" %lld: model_type \"%s\" sets the window to "
                          "local_attention // 2: refused as contradictory", name,
                          (long long)w->sliding_window, (long long)local,
                          out->family->model_type);
    w->sliding_window = local / 2;
    w->has_sliding_window = 1;
    return RA_OK;
}

/* RA_HF_LOCAL_ATTENTION's ropes, as ModernBertDecoderConfig's
 * convert_rope_params_to_dict: rope_parameters per layer type, each
 * without rope_theta taking global_rope_theta (full) or local_rope_theta
 * (sliding), else 160000 and 10000; none given: both the default rope so.
 * rope_scaling (merged into both) and a rope_parameters of one rope
 * (its keys mixed with the layer types') are not read; partial_rotary_factor is refused (its rotary embedding rotates
 * all of head_dim whatever it says). */
static ra_status read_local_attention(const cJSON *root, const cJSON *nested,
                                      const cJSON *scaling, ra_hf_fields *out,
                                      const char *name, char *msg, size_t msg_len)
{
    const ra_hf_family *family = out->family;
    if (!family || !(family->features & RA_HF_LOCAL_ATTENTION)) return RA_OK;
    if (scaling != NULL && scaling->child != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: rope_scaling: model_type "
                          "\"%s\" merges it into both layer types' ropes, which is not read: "
                          "give rope_parameters per layer type", name, family->model_type);
    if (nested != NULL && !out->has_local_rope)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: rope_parameters of one rope: "
                          "model_type \"%s\" reads one per layer type (full_attention, "
                          "sliding_attention)", name, family->model_type);
    if (out->has_partial_rotary_factor || out->rope.has_partial_rotary_factor ||
        out->local_rope.has_partial_rotary_factor)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"partial_rotary_factor\" is "
                          "set, and model_type \"%s\" rotates all of head_dim: refused", name,
                          family->model_type);
    double global, local;
    RA_TRY(read_positive(root, "global_rope_theta", 160000.0, &global, name, msg, msg_len));
    RA_TRY(read_positive(root, "local_rope_theta", 10000.0, &local, name, msg, msg_len));
    ra_hf_rope *ropes[2] = {&out->rope, &out->local_rope};
    const double thetas[2] = {global, local};
    for (int i = 0; i < 2; i++)
        if (!ropes[i]->has_theta) {
            ropes[i]->theta = thetas[i];
            ropes[i]->has_theta = 1;
        }
    out->has_rope = out->has_local_rope = 1;
    return RA_OK;
}

/* use_qk_norm (RA_HF_QK_L2_NORM; always on with RA_HF_QK_L2_NORM_ALWAYS)
 * and attn_temperature_tuning (RA_HF_TEMPERATURE_TUNING; Llama4TextConfig:
 * true, and 4 in older releases; any number but 0 is true). */
static ra_status read_l2_norm_and_temperature(const cJSON *root, ra_hf_fields *out,
                                              const char *name, char *msg, size_t msg_len)
{
    const ra_hf_features features = out->family ? out->family->features : 0;
    if (features & RA_HF_QK_L2_NORM_ALWAYS) /* the key not read, as its model does not */
        out->qk_l2_norm = 1;
    else if (features & RA_HF_QK_L2_NORM)
        RA_TRY(ra_hf_flag(root, "use_qk_norm", 1, out->family, &out->qk_l2_norm, name, msg,
                          msg_len));
    if (!(features & RA_HF_TEMPERATURE_TUNING)) return RA_OK;
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "attn_temperature_tuning", name, &item, msg, msg_len));
    out->attn_temperature_tuning = 1;
    if (item == NULL) return RA_OK;
    if (!cJSON_IsBool(item) && !(cJSON_IsNumber(item) && isfinite(item->valuedouble)))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"attn_temperature_tuning\" must be true, false or a number",
                          name);
    out->attn_temperature_tuning = cJSON_IsBool(item) ? cJSON_IsTrue(item)
                                                      : item->valuedouble != 0;
    return RA_OK;
}

/* RA_HF_ROTARY_DIM_FACTOR (MiniMaxM2Config): without a
 * partial_rotary_factor at the top level or in the rope object, rotary_dim
 * gives it, rotary_dim / head_dim. */
static void rotary_dim_factor(ra_hf_fields *out)
{
    if (!out->family || !(out->family->features & RA_HF_ROTARY_DIM_FACTOR)) return;
    if (!out->has_rotary_dim || !out->has_head_dim || out->has_partial_rotary_factor ||
        out->rope.has_partial_rotary_factor)
        return;
    out->partial_rotary_factor = (double)out->rotary_dim / (double)out->head_dim;
    out->has_partial_rotary_factor = 1;
}

/* The rope object's "alpha" (a number; null, 0 or absent: none), where the
 * family reads it (ra_hf_family.ntk_alpha). */
static ra_status read_rope_alpha(const cJSON *rope, ra_hf_fields *out, const char *where,
                                 const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    if (!out->family || !out->family->ntk_alpha || rope == NULL) return RA_OK;
    RA_TRY(ra_io_json_key(rope, "alpha", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"%salpha\" must be a number >= 0", name, where);
    out->rope_alpha = item->valuedouble;
    return RA_OK;
}

/* The row's default for key (its "key=number"), or -1 when it has none. */
static int64_t row_default(const ra_hf_family *family, const char *key)
{
    const char *at = family->defaults;
    char name[64];
    double value;
    int used;
    while (at && sscanf(at, " %63[a-z_]=%lf%n", name, &value, &used) == 2) {
        at += used;
        if (strcmp(name, key) == 0) return (int64_t)value;
    }
    return -1;
}

/* RA_HF_KV_SHARED_LAYERS: num_kv_shared_layers (a count, 0 allowed) and
 * num_hidden_layers, as given, else the row's defaults; the shared layers
 * at most all of them. */
static ra_status read_kv_shared(const cJSON *root, ra_hf_fields *out, const char *name,
                                char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_KV_SHARED_LAYERS)) return RA_OK;
    static const char *const keys[2] = {"num_kv_shared_layers", "num_hidden_layers"};
    int64_t *values[2] = {&out->num_kv_shared_layers, &out->num_hidden_layers};
    for (int i = 0; i < 2; i++) {
        const cJSON *item;
        RA_TRY(ra_io_json_key(root, keys[i], name, &item, msg, msg_len));
        *values[i] = row_default(out->family, keys[i]);
        if (item == NULL && *values[i] < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: no \"%s\"", name, keys[i]);
        if (item != NULL && (!ra_io_json_integer(item, values[i]) || *values[i] < i))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be a %s integer",
                              name, keys[i], i ? "positive" : "non-negative");
    }
    if (out->num_kv_shared_layers > out->num_hidden_layers)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"num_kv_shared_layers\" %lld "
                          "exceeds \"num_hidden_layers\" %lld", name,
                          (long long)out->num_kv_shared_layers,
                          (long long)out->num_hidden_layers);
    return RA_OK;
}

/* RA_HF_QKV_BY_MULTI_QUERY: Falcon's packing keys, with FalconConfig's
 * defaults. */
static ra_status read_falcon(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                             size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_QKV_BY_MULTI_QUERY)) return RA_OK;
    RA_TRY(ra_hf_flag(root, "multi_query", 1, out->family, &out->multi_query, name, msg,
                      msg_len));
    return ra_hf_flag(root, "new_decoder_architecture", 0, out->family,
                      &out->new_decoder_architecture, name, msg, msg_len);
}

/* A hybrid family's keys for which layers are attention and whether they
 * rotate: attn_layer_indices (Bamba: an array of layer numbers >= 0, or
 * null: none), position_embedding_type (GraniteMoeHybrid: RoPE only when
 * "rope"). */
static ra_status read_hybrid(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                             size_t msg_len)
{
    ra_hf_features features = out->family ? out->family->features : 0;
    const cJSON *item;
    if (features & RA_HF_ROPE_BY_EMBEDDING_TYPE) {
        RA_TRY(ra_io_json_key(root, "position_embedding_type", name, &item, msg, msg_len));
        out->rope_off = !(cJSON_IsString(item) && strcmp(item->valuestring, "rope") == 0);
    }
    if (features & RA_HF_ROTARY_REQUIRED) { /* other values: ra_hf_family_check */
        RA_TRY(ra_io_json_key(root, "position_embedding_type", name, &item, msg, msg_len));
        if (item == NULL || cJSON_IsNull(item))
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"position_embedding_type\" "
                              "is %s: model_type \"%s\" then adds learned absolute position "
                              "embeddings (\"absolute\"), not RoPE: refused", name,
                              item ? "null" : "absent", out->family->model_type);
    }
    if (features & RA_HF_IS_DECODER_KEY)
        RA_TRY(ra_hf_flag(root, "is_decoder", 0, out->family, &out->is_decoder, name, msg,
                          msg_len));
    if (features & RA_HF_ROTARY_VALUE)
        RA_TRY(ra_hf_flag(root, "rotary_value", 0, out->family, &out->rotary_value, name, msg,
                          msg_len));
    if (!(features & RA_HF_ATTN_LAYER_INDICES)) return RA_OK;
    RA_TRY(ra_io_json_key(root, "attn_layer_indices", name, &item, msg, msg_len));
    int ok = item == NULL || cJSON_IsArray(item);
    int64_t layer;
    for (const cJSON *i = cJSON_IsArray(item) ? item->child : NULL; ok && i; i = i->next)
        ok = ra_io_json_integer(i, &layer) && layer >= 0;
    if (!ok)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"attn_layer_indices\" must be an "
                          "array of layer numbers (integers >= 0) or null", name);
    out->attn_layer_indices = item;
    return RA_OK;
}

int ra_hf_attn_layer_listed(const ra_hf_fields *config, int64_t layer)
{
    const cJSON *list = config->attn_layer_indices;
    int64_t listed;
    for (const cJSON *i = list ? list->child : NULL; i; i = i->next)
        if (ra_io_json_integer(i, &listed) && listed == layer) return 1;
    return 0;
}

/* attention_bias: true or false (ra_hf_flag); null reads as false. */
static ra_status read_attention_bias(const cJSON *root, ra_hf_fields *out, const char *name,
                                     char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "attention_bias", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    out->has_attention_bias = 1;
    return ra_hf_flag(root, "attention_bias", 0, out->family, &out->attention_bias, name, msg,
                      msg_len);
}

/* head_layer_norms from the family's key for them (Cohere's use_qk_norm,
 * StableLM's qk_layernorm; Persimmon's qk_layernorm, true when absent), or
 * qk_norm_by_key (GLM-4-MoE's use_qk_norm): true, false (ra_hf_flag) or
 * null (false, as Python's `if None`). */
static ra_status read_head_layer_norms(const cJSON *root, ra_hf_fields *out, const char *name,
                                       char *msg, size_t msg_len)
{
    ra_hf_features features = out->family ? out->family->features : 0;
    if (features & RA_HF_QK_NORM_BY_KEY)
        return ra_hf_flag(root, "use_qk_norm", 0, out->family, &out->qk_norm_by_key, name, msg,
                          msg_len);
    const char *key = features & RA_HF_USE_QK_NORM ? "use_qk_norm"
                      : features & (RA_HF_QK_LAYERNORM | RA_HF_QK_LAYERNORM_BIAS) ? "qk_layernorm"
                                                                                  : NULL;
    const cJSON *item;
    if (!key || (ra_io_json_member(root, key, &item) && item && cJSON_IsNull(item))) return RA_OK;
    const int absent = (features & RA_HF_QK_LAYERNORM_BIAS) != 0;
    return ra_hf_flag(root, key, absent, out->family, &out->head_layer_norms, name, msg,
                      msg_len);
}

/* RA_HF_GATE_BY_KEY: use_attention_gate, true or false (absent: true,
 * Lfm3Config's default; ra_hf_flag). */
static ra_status read_attention_gate(const cJSON *root, ra_hf_fields *out, const char *name,
                                     char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_GATE_BY_KEY)) return RA_OK;
    return ra_hf_flag(root, "use_attention_gate", 1, out->family, &out->attention_gate, name,
                      msg,
                           msg_len);
}

/* RA_HF_ROPE_RATIO (ChatGLM 2, 3 and GLM-4's remote code: ChatGLMConfig,
 * modeling_chatglm.py): RoPE on the first half of each head's features,
 * interleaved (original_rope; rotate_half otherwise, refused), base 10000 *
 * rope_ratio (ChatGLM3, GLM-4; ChatGLM2-32K's code divides the positions by
 * it instead: rope_cli refuses a ratio other than 1 without --theta).
 * rope_ratio is a field, with the config class's default (the row's). */
static ra_status read_rope_ratio(const cJSON *root, ra_hf_fields *out, const char *name,
                                 char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_ROPE_RATIO)) return RA_OK;
    int original_rope;
    RA_TRY(ra_hf_flag(root, "original_rope", 1, out->family, &original_rope, name, msg,
                      msg_len));
    if (!original_rope)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"original_rope\" is false "
                          "(rotate_half pairs in ChatGLM's code): not supported", name);
    out->rope_theta = 10000.0 * out->rope_ratio;
    if (!(out->rope_theta <= DBL_MAX))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"rope_ratio\" is too large", name);
    out->partial_rotary_factor = 0.5;
    out->has_rope_theta = out->has_partial_rotary_factor = 1;
    return RA_OK;
}

/* RA_HF_MULTI_QUERY_GROUPS (ChatGLM): head_dim kv_channels;
 * multi_query_group_num key/value heads with multi_query_attention, else
 * one per query head.  kv_channels and multi_query_group_num are fields,
 * with the config class's defaults (the row's). */
static ra_status read_multi_query_groups(const cJSON *root, ra_hf_fields *out, const char *name,
                                         char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_MULTI_QUERY_GROUPS)) return RA_OK;
    RA_TRY(ra_hf_flag(root, "multi_query_attention", 0, out->family, &out->multi_query, name,
                      msg, msg_len));
    out->head_dim = out->kv_channels;
    out->has_head_dim = 1;
    out->num_key_value_heads = out->multi_query ? out->multi_query_group_num
                                                : out->num_attention_heads;
    out->has_num_key_value_heads = out->multi_query || out->has_num_attention_heads;
    return RA_OK;
}

/* RA_HF_V_HEAD_DIM_FROM_HEADS (MiniCPM3Config): v_head_dim absent or null
 * is hidden_size // num_attention_heads. */
static ra_status v_head_dim_from_heads(ra_hf_fields *out, const char *name, char *msg,
                                       size_t msg_len)
{
    if (!(out->family->features & RA_HF_V_HEAD_DIM_FROM_HEADS) || out->has_v_head_dim)
        return RA_OK;
    if (!out->has_hidden_size || !out->has_num_attention_heads ||
        out->hidden_size < out->num_attention_heads)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"v_head_dim\" is null, and "
                          "hidden_size / num_attention_heads, which model_type \"%s\" takes "
                          "for it, is not a size", name, out->family->model_type);
    out->v_head_dim = out->hidden_size / out->num_attention_heads;
    out->has_v_head_dim = 1;
    return RA_OK;
}

/* RA_HF_NESTED_ATTN_CONFIG (DbrxConfig, DbrxAttention): attn_config's
 * kv_n_heads (DbrxAttentionConfig's default 1; DbrxConfig copies it to
 * num_key_value_heads, which a file must not contradict) and clip_qkv
 * (null: none).  Its rope_theta is read by transformers 4's DBRX code and
 * ignored by 5's, whose rope is the top level's: refused where they
 * differ. */
static ra_status read_attn_config(const cJSON *root, ra_hf_fields *out, const char *name,
                                  char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_NESTED_ATTN_CONFIG)) return RA_OK;
    const cJSON *attn, *item;
    RA_TRY(lookup_object(root, "attn_config", name, &attn, msg, msg_len));
    const int64_t top_kv = out->num_key_value_heads, has_top_kv = out->has_num_key_value_heads;
    out->num_key_value_heads = 1;
    out->has_num_key_value_heads = 1;
    for (size_t i = 0; attn && i < sizeof attn_config_fields / sizeof attn_config_fields[0]; i++) {
        RA_TRY(ra_io_json_key(attn, attn_config_fields[i].key, name, &item, msg, msg_len));
        if (item) RA_TRY(store(&attn_config_fields[i], item, out, name, msg, msg_len));
    }
    if (has_top_kv && top_kv != out->num_key_value_heads)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"num_key_value_heads\" is %lld and "
                          "\"attn_config.kv_n_heads\" %lld: model_type \"%s\" takes the latter: "
                          "refused as contradictory", name, (long long)top_kv,
                          (long long)out->num_key_value_heads, out->family->model_type);
    if (!attn) return RA_OK;
    RA_TRY(ra_io_json_key(attn, "rope_theta", name, &item, msg, msg_len));
    if (!item) return RA_OK;
    const double theta = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    const double used = out->rope.has_theta ? out->rope.theta : 10000.0;
    if (theta != used)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"attn_config.rope_theta\" is "
                          "%g and the rope's rope_theta %g: transformers 4 takes the first, 5 "
                          "the second (model_type \"%s\"): refused rather than guess (give "
                          "rope_parameters the same rope_theta)", name, theta, used,
                          out->family->model_type);
    return RA_OK;
}

/* Latent attention (DeepSeek-V2, V3, Kimi K2): its sizes (null only for
 * q_lora_rank: q_proj) and qk_head_dim, their sum, where saved;
 * rope_interleave, which DeepseekV3Config reads (default true) and the
 * others' modeling code, always interleaved, ignores (false refused
 * there); the rope's head_dim, which their config classes set to
 * qk_rope_head_dim (another value in the file would not rotate the rope
 * part); and a key and value per query head (transformers repeats them
 * num_attention_heads / num_key_value_heads times, which fails for any
 * other count). */
/* RA_HF_MLA_ROPE_OF_HEAD (Mistral4Config): rope_parameters.setdefault("partial_rotary_factor",
 * qk_rope_head_dim / head_dim) (head_dim the sum qk_nope_head_dim + qk_rope_head_dim then,
 * whatever head_dim is saved) before transformers' standardize_rope_params, so a top-level
 * factor is never read: one other than that default refused (it was inherited by the rope
 * object where that had none), none given: the default. */
static ra_status rope_of_head_factor(const cJSON *root, ra_hf_fields *out, int64_t head_dim,
                                     const char *name, char *msg, size_t msg_len)
{
    const double factor = (double)out->qk_rope_head_dim / (double)head_dim;
    const cJSON *top;
    RA_TRY(ra_io_json_key(root, "partial_rotary_factor", name, &top, msg, msg_len));
    if (top && out->has_partial_rotary_factor && out->partial_rotary_factor != factor)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"partial_rotary_factor\" %g at the top level: model_type "
                          "\"%s\" sets its rope's to qk_rope_head_dim / head_dim (%g) where "
                          "rope_parameters has none, and never reads the top level's: give it "
                          "in rope_parameters", name, out->partial_rotary_factor,
                          out->family->model_type, factor);
    if (!out->rope.has_partial_rotary_factor) {
        out->rope.partial_rotary_factor = factor;
        out->rope.has_partial_rotary_factor = 1;
    }
    return RA_OK;
}

static ra_status read_mla(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                          size_t msg_len)
{
    const ra_hf_family *family = out->family;
    if (!family || !(family->features & RA_HF_MLA)) return RA_OK;
    RA_TRY(v_head_dim_from_heads(out, name, msg, msg_len));
    const char *null = !out->has_kv_lora_rank       ? "kv_lora_rank"
                       : !out->has_qk_nope_head_dim ? "qk_nope_head_dim"
                       : !out->has_qk_rope_head_dim ? "qk_rope_head_dim"
                       : !out->has_v_head_dim       ? "v_head_dim"
                                                    : NULL; /* absent: the default */
    if (null)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" is null: model_type \"%s\" "
                          "needs it (only q_lora_rank may be null)", name, null,
                          family->model_type);
    const int interleaved = family->layout == RA_LAYOUT_INTERLEAVED;
    RA_TRY(ra_hf_flag(root, "rope_interleave", interleaved, out->family, &out->rope_interleave,
                      name, msg,
                           msg_len));
    if (out->rope_interleave != interleaved && !(family->features & RA_HF_ROPE_INTERLEAVE))
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"rope_interleave\" is %s, and model_type \"%s\" pairs the "
                          "rope's features %s whatever it says: refused", name,
                          out->rope_interleave ? "true" : "false", family->model_type,
                          interleaved ? "interleaved" : "as rotate_half");
    /* (RA_HF_LATENT_PER_LAYER: head_dim is the rope's, over qk_rope_head_dim of it;
     * RA_HF_MLA_ROPE_OF_HEAD: Mistral4Config sets it to qk_nope_head_dim + qk_rope_head_dim,
     * and a saved one is set over that after (its __post_init__'s kwargs): only its rotary
     * embedding reads it, as the rope's head_dim (the heads' width is the sum:
     * hf/layer_mla.c) */
    const int64_t qk_sum = out->qk_nope_head_dim + out->qk_rope_head_dim;
    if (out->has_head_dim && out->head_dim != out->qk_rope_head_dim &&
        !(family->features & (RA_HF_LATENT_PER_LAYER | RA_HF_MLA_ROPE_OF_HEAD)))
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"head_dim\" is %lld and \"qk_rope_head_dim\" %lld: model_type "
                          "\"%s\" rotates qk_rope_head_dim features (its config class sets "
                          "head_dim to it): refused", name, (long long)out->head_dim,
                          (long long)out->qk_rope_head_dim, family->model_type);
    if (!(family->features & RA_HF_MLA_ROPE_OF_HEAD)) out->head_dim = out->qk_rope_head_dim;
    else if (!out->has_head_dim) out->head_dim = qk_sum;
    out->has_head_dim = 1;
    if (family->features & RA_HF_MLA_ROPE_OF_HEAD) /* rope_parameters.setdefault(...) */
        RA_TRY(rope_of_head_factor(root, out, qk_sum, name, msg, msg_len));
    /* qk_head_dim: saved by transformers' config classes, and read back
     * over the sum they compute (q's view and the softmax scale) */
    const cJSON *item;
    int64_t qk_head_dim;
    RA_TRY(ra_io_json_key(root, "qk_head_dim", name, &item, msg, msg_len));
    if (item && (!ra_io_json_integer(item, &qk_head_dim) ||
                 qk_head_dim != out->qk_nope_head_dim + out->qk_rope_head_dim))
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"qk_head_dim\" is not qk_nope_head_dim + qk_rope_head_dim "
                          "(%lld): refused", name,
                          (long long)(out->qk_nope_head_dim + out->qk_rope_head_dim));
    if (out->has_num_key_value_heads && out->has_num_attention_heads &&
        out->num_key_value_heads != out->num_attention_heads)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"num_key_value_heads\" is %lld and \"num_attention_heads\" "
                          "%lld: latent attention gives every query head its own key and value",
                          name, (long long)out->num_key_value_heads,
                          (long long)out->num_attention_heads);
    return RA_OK;
}

/* The rope the family's config class sets when config.json has neither
 * rope_scaling nor rope_parameters (its row's default_rope: gpt-oss's
 * yarn), named so in messages; nothing for the others. */
static ra_status read_default_rope(ra_hf_fields *out, const char **where, char *msg,
                                   size_t msg_len)
{
    const ra_hf_family *family = out->family;
    if (!family || !family->default_rope) return RA_OK;
    const char *json = family->default_rope;
    *where = family->default_rope_name;
    if (family->features & RA_HF_LOCAL_ROPE) { /* a rope per layer type (Mellum) */
        cJSON *nested = cJSON_Parse(json);
        if (nested == NULL)
            return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", *where);
        ra_status status = read_rope_per_layer_type(nested, out, *where, msg, msg_len);
        cJSON_Delete(nested);
        return status;
    }
    RA_TRY(ra_hf_rope_parse(json, strlen(json), &out->rope, msg, msg_len));
    out->has_rope = 1;
    return RA_OK;
}

/* A family whose config class's rope_theta default changed between
 * transformers releases (4.57, which wrote their published configs, and
 * 5; its row's disputed_theta): a config that leaves rope_theta out runs
 * differently on each, and nothing in it says which was meant: refused. */
static ra_status check_theta_given(const ra_hf_fields *out, const char *name, char *msg,
                                   size_t msg_len)
{
    const ra_hf_family *family = out->family;
    int lacks = !out->rope.has_theta || (out->has_local_rope && !out->local_rope.has_theta);
    if (family && family->disputed_theta && lacks && !out->has_rope_theta)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: no \"rope_theta\": model_type \"%s\"'s default is %s: "
                          "refused rather than guess (give rope_theta)", name,
                          family->model_type, family->disputed_theta);
    return RA_OK;
}

/* A null rope_theta, as transformers 5 reads it: convert_rope_params_to_dict sets the
 * null into each rope that has no rope_theta of its own (rope_scaling's or rope_parameters', else
 * the config class's default rope), whose rotary embedding then fails on None; a rope with its
 * own keeps it, and the null changes nothing (the default ropes of Apertus, Gemma 4, Mellum,
 * Ministral 3 ...; any rope_parameters holding rope_theta).  GPT-NeoX's config classes never read
 * it (RA_HF_ROPE_NEOX_NAMES: rotary_emb_base or its default); RA_HF_THETA_TYPED classes fail on
 * it.  Before ra_hf_rope_inherit: the ropes' thetas are their own. */
static ra_status check_null_theta(const cJSON *root, const ra_hf_fields *out, const char *name,
                                  char *msg, size_t msg_len)
{
    const ra_hf_family *family = out->family;
    ra_hf_features features = family ? family->features : 0;
    if (!is_null(root, "rope_theta") || (features & RA_HF_ROPE_NEOX_NAMES)) return RA_OK;
    if (features & RA_HF_THETA_TYPED)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"rope_theta\" is null: model_type "
                          "\"%s\"'s config class declares it a number and fails on null (leave "
                          "the key out for its default)", name, family->model_type);
    int own = out->rope.has_theta && (!out->has_local_rope || out->local_rope.has_theta);
    if (own) return RA_OK;
    if (family && family->disputed_theta)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"rope_theta\" is null: give it "
                          "(model_type \"%s\"'s default is %s)", name, family->model_type,
                          family->disputed_theta);
    return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"rope_theta\" is null and the rope "
                      "has no rope_theta of its own (transformers fails on null; leave the key "
                      "out for the config class's default)", name);
}

/* RA_HF_ROPE_TYPES_NEEDED, RA_HF_ROPE_SCALING_UNREAD and RA_HF_TYPE_THETA_NEEDED: what a
 * family's config class and rotary embedding read of rope_parameters by layer type, where one
 * rope object, rope_scaling or a type's rope without rope_theta would otherwise be run as
 * another family's (transformers runs the class's default ropes over them, or fails). */
static ra_status rope_types_needed(const cJSON *nested, const cJSON *scaling,
                                   const ra_hf_fields *out, const char *name, char *msg,
                                   size_t msg_len)
{
    const ra_hf_family *family = out->family;
    ra_hf_features features = family ? family->features : 0;
    if ((features & RA_HF_ROPE_SCALING_UNREAD) && scaling != NULL && scaling->child != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"rope_scaling\": model_type "
                          "\"%s\" reads rope_parameters by layer type and never reads it "
                          "(transformers fails): give rope_parameters per layer type", name,
                          family->model_type);
    if ((features & RA_HF_ROPE_TYPES_NEEDED) && nested != NULL && !out->has_local_rope)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: rope_parameters is one rope "
                          "object: model_type \"%s\" reads it by layer type (full_attention, "
                          "sliding_attention), and transformers runs its default ropes over "
                          "those keys or fails: give a rope per layer type", name,
                          family->model_type);
    if (!(features & RA_HF_TYPE_THETA_NEEDED) || nested == NULL) return RA_OK;
    const ra_hf_rope *ropes[2] = {&out->rope, &out->local_rope};
    static const char *const types[2] = {"full_attention", "sliding_attention"};
    for (int t = 0; t < 2; t++)
        if (!ropes[t]->has_theta)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"rope_parameters.%s\" "
                              "has no \"rope_theta\": model_type \"%s\"'s rotary embedding reads "
                              "it there, and its config class never fills it from a top-level "
                              "rope_theta (transformers fails): give it", name, types[t],
                              family->model_type);
    return RA_OK;
}

/* RA_HF_ROPE_PER_TYPE_ONLY: the family's rotary embedding reads
 * rope_parameters[layer_type]["rope_theta"] (and its partial_rotary_factor,
 * else a default of its own): one rope object for every layer, or a type's
 * object without those keys, is refused; no rope at all is the row's. */
static ra_status rope_per_type_only(const cJSON *nested, const cJSON *scaling,
                                    const ra_hf_fields *out, const char *name, char *msg,
                                    size_t msg_len)
{
    static const char *const types[2] = {"full_attention", "sliding_attention"};
    static const char *const keys[2] = {"rope_theta", "partial_rotary_factor"};
    if (!out->family || !(out->family->features & RA_HF_ROPE_PER_TYPE_ONLY)) return RA_OK;
    const int scaled = scaling != NULL && scaling->child != NULL;
    if (nested == NULL && !scaled) return RA_OK;
    if (scaled || !out->has_local_rope)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" reads "
                          "rope_parameters by layer type (full_attention, sliding_attention): "
                          "one rope object for every layer is refused", name,
                          out->family->model_type);
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++) {
            const cJSON *item;
            RA_TRY(ra_io_json_key(cJSON_GetObjectItemCaseSensitive(nested, types[t]), keys[k],
                                  name, &item, msg, msg_len));
            if (item == NULL)
                return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"rope_parameters.%s\" "
                                  "has no \"%s\": model_type \"%s\"'s rotary embedding reads it "
                                  "there (a default of its own, or none): give it", name,
                                  types[t], keys[k], out->family->model_type);
        }
    return RA_OK;
}

/* RA_HF_SLIDING_KV_SINKS: sliding_window_size, where given, makes
 * sliding_window sliding_window_size + 1 (MiMoV2FlashConfig). */
static ra_status read_sliding_window_size(const cJSON *root, ra_hf_fields *out,
                                          const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    int64_t size;
    if (!out->family || !(out->family->features & RA_HF_SLIDING_KV_SINKS)) return RA_OK;
    RA_TRY(ra_io_json_key(root, "sliding_window_size", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    if (!ra_io_json_integer(item, &size) || size < 0 || size >= INT64_MAX)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"sliding_window_size\" must be "
                          "a non-negative integer", name);
    out->window.sliding_window = size + 1;
    out->window.has_sliding_window = 1;
    return RA_OK;
}

/* RA_HF_LONGROPE_ONLY: Phi3Config (transformers 5) reads rope type "su"
 * and "yarn" as longrope ("su" is longrope everywhere: rope_params.c) and
 * raises on any type but default and longrope. */
static ra_status longrope_only(ra_hf_rope *rope, const ra_hf_fields *out, const char *where,
                                const char *name, char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_LONGROPE_ONLY)) return RA_OK;
    if (rope->type == RA_ROPE_YARN) rope->type = RA_ROPE_LONGROPE;
    if (rope->type == RA_ROPE_DEFAULT || rope->type == RA_ROPE_LONGROPE) return RA_OK;
    return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                      "%s: \"%srope_type\" is \"%s\": model_type \"%s\" runs the default "
                      "rope or longrope (\"su\" and \"yarn\" read as longrope), as Phi3Config "
                      "does: refused", name, where, ra_hf_rope_type_name(rope->type),
                      out->family->model_type);
}

/* RA_HF_DEFAULT_MROPE_ONLY: Cosmos3EdgeTextConfig raises on a rope type
 * other than default and on rope parameters without mrope_section. */
static ra_status default_mrope_only(const ra_hf_rope *rope, const ra_hf_fields *out,
                                    const char *where, const char *name, char *msg,
                                    size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_DEFAULT_MROPE_ONLY)) return RA_OK;
    if (rope->type != RA_ROPE_DEFAULT || rope->has_mrope || rope->proportional)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"%srope_type\" is \"%s\": model_type \"%s\"'s config class "
                          "takes the default rope only (it raises on any other): refused", name,
                          where, rope->has_mrope ? "mrope" : rope->proportional ? "proportional"
                                                 : ra_hf_rope_type_name(rope->type),
                          out->family->model_type);
    if (!rope->has_mrope_section)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: no \"%smrope_section\": model_type \"%s\"'s config class "
                          "requires it (KeyError)", name, where, out->family->model_type);
    return RA_OK;
}

/* RA_HF_LONGROPE_MSCALE: PhimoeConfig raises unless a rope type other
 * than default has short_mscale and long_mscale, and PhimoeRotaryEmbedding
 * puts them in place of the type's attention factor (only longrope's is
 * run here: hf/rope.c). */
static ra_status longrope_mscale(const ra_hf_rope *rope, const ra_hf_fields *out,
                                 const char *where, const char *name, char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_LONGROPE_MSCALE) ||
        rope->type == RA_ROPE_DEFAULT)
        return RA_OK;
    if (rope->type != RA_ROPE_LONGROPE)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"%srope_type\" is \"%s\": model_type \"%s\" scales it by "
                          "short_mscale / long_mscale, run for longrope only: refused", name,
                          where, ra_hf_rope_type_name(rope->type), out->family->model_type);
    if (!rope->has_short_mscale || !rope->has_long_mscale)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"%s%s\" is missing: model_type \"%s\" needs short_mscale and "
                          "long_mscale with longrope (transformers raises without them)", name,
                          where, rope->has_short_mscale ? "long_mscale" : "short_mscale",
                          out->family->model_type);
    return RA_OK;
}

/* "" when config.json has key at root, else " (model_type X's default)". */
static const char *whose(const cJSON *root, const char *key, const ra_hf_fields *out,
                         char *buf, size_t len)
{
    if (has_key(root, key) || !out->family) return "";
    snprintf(buf, len, " (model_type \"%s\"'s default)", out->family->model_type);
    return buf;
}

/* transformers 5's standardize_rope_params: for llama3, yarn and longrope
 * the config's original_max_position_embeddings replaces the rope object's
 * (top_level_orig: a single rope object; Phi3Config's default 4096 among
 * them) — a value the object alone gives is overwritten; where both are
 * there and differ the file contradicts itself: refused, naming both.  A
 * partial_rotary_factor is only set where the object has none (5.23's
 * setdefault; every family's attention reads the object's), so the object's
 * own is kept beside a different top-level one.  Then the object takes what
 * it lacks from the config (ra_hf_rope_inherit). */
static ra_status standardize_rope(ra_hf_rope *rope, const ra_hf_fields *out, const cJSON *root,
                                  const char *where, int top_level_orig, const char *name,
                                  char *msg, size_t msg_len)
{
    char buf[96];
    const ra_rope_type t = rope->type;
    const int64_t top = out->original_max_position_embeddings,
                  own = rope->params.original_max_position_embeddings;
    if (top_level_orig && out->has_original_max_position_embeddings &&
        rope->has_original_max_position_embeddings && top != own &&
        (t == RA_ROPE_LLAMA3 || t == RA_ROPE_YARN || t == RA_ROPE_LONGROPE))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"%soriginal_max_position_embeddings\" is %lld and the top "
                          "level's %lld%s: transformers 5 takes the top level's for rope type %s: "
                          "refused as contradictory", name, where, (long long)own,
                          (long long)top,
                          whose(root, "original_max_position_embeddings", out, buf, sizeof buf),
                          ra_hf_rope_type_name(t));
    ra_hf_rope_inherit(rope, out);
    return RA_OK;
}

/* model_type of the text model: text's, else the top level's; "" when
 * neither has one.  The top level's row may read its text_config as its own
 * (text_config_merged) or refuse one without model_type (text_config_typed); a
 * refused top level is refused as itself where its text_config's model_type is
 * not refused too (CLVP's unknown clvp_encoder; Gemma 4's assistant's text rows). */
static ra_status read_model_type(const cJSON *root, const cJSON *text, ra_hf_fields *out,
                                 const char *name, char *msg, size_t msg_len)
{
    const cJSON *item = NULL, *top = NULL;
    RA_TRY(ra_io_json_key(root, "model_type", name, &top, msg, msg_len));
    if (text != root) RA_TRY(ra_io_json_key(text, "model_type", name, &item, msg, msg_len));
    const ra_hf_family *row =
        top && cJSON_IsString(top) ? ra_hf_family_find(top->valuestring) : NULL;
    const ra_hf_family *text_row =
        item && cJSON_IsString(item) ? ra_hf_family_find(item->valuestring) : NULL;
    if (text != root && row && row->refused && !(text_row && text_row->refused))
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" is refused: %s",
                          name, row->model_type, row->refused);
    if (item && row && row->text_config_merged) { /* read as its row, if it is its own */
        char own[64];
        snprintf(own, sizeof own, "%s_text", row->model_type);
        if (!cJSON_IsString(item) || strcmp(item->valuestring, own) != 0)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: text_config's \"model_type\" is not \"%s\", and model_type "
                              "\"%s\" merges its own text defaults under it: refused", name, own,
                              row->model_type);
        item = NULL;
    } else if (text != root && !item && row && row->text_config_typed)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: text_config has no \"model_type\", which model_type \"%s\"'s "
                          "config class reads (transformers fails): refused", name,
                          row->model_type);
    if (item == NULL) item = top;
    if (item == NULL) return RA_OK;
    if (!cJSON_IsString(item) || strlen(item->valuestring) >= sizeof out->model_type)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"model_type\" must be a string of at most %d bytes", name,
                          (int)sizeof out->model_type - 1);
    strcpy(out->model_type, item->valuestring);
    return RA_OK;
}

static ra_status read_fields(const cJSON *root, ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    const cJSON *nested, *scaling;
    cJSON *rewritten; /* UltraBERT's older keys turned into rope_parameters */
    RA_TRY(ra_hf_older_keys(root, out->family, &rewritten, name, msg, msg_len));
    if (rewritten != NULL) {
        ra_status status = read_fields(rewritten, out, name, msg, msg_len);
        cJSON_Delete(rewritten);
        return status;
    }
    RA_TRY(lookup_object(root, "rope_parameters", name, &nested, msg, msg_len));
    RA_TRY(lookup_object(root, "rope_scaling", name, &scaling, msg, msg_len));
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const cJSON *item;
        RA_TRY(ra_io_json_key(root, fields[i].key, name, &item, msg, msg_len));
        if (item == NULL && nested != NULL && fields[i].in_rope_parameters)
            RA_TRY(ra_io_json_key(nested, fields[i].key, name, &item, msg, msg_len));
        if (item != NULL) RA_TRY(store(&fields[i], item, out, name, msg, msg_len));
    }
    ra_hf_features features = out->family ? out->family->features : 0;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (!(aliases[i].feature & features)) continue;
        const cJSON *item;
        int has;
        memcpy(&has, (const char *)out + aliases[i].has, sizeof has);
        RA_TRY(ra_io_json_key(root, aliases[i].key, name, &item, msg, msg_len));
        if (item != NULL && !has) RA_TRY(store(&aliases[i], item, out, name, msg, msg_len));
        else if (item != NULL) RA_TRY(alias_agrees(&aliases[i], item, out, name, msg, msg_len));
    }
    RA_TRY(refuse_unread_neox_names(root, out, name, msg, msg_len));
    /* transformers takes rope_scaling when it is a non-empty object, else
     * rope_parameters, else the family's default rope; but Gemma 3's and
     * OLMo 3's config classes merge rope_scaling's keys into rope_parameters'
     * full_attention rope, which is not read: refused. */
    if ((features & RA_HF_LOCAL_ROPE) && scaling != NULL && scaling->child != NULL &&
        nested != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: both \"rope_scaling\" and \"rope_parameters\": model_type \"%s\" "
                          "merges the first into the second's full_attention rope, which is "
                          "not read: give one", name, out->family->model_type);
    const cJSON *rope = scaling != NULL && scaling->child != NULL ? scaling : nested;
    const char *where = rope == scaling ? "rope_scaling." : "rope_parameters.";
    if (rope == nested) RA_TRY(read_rope_per_layer_type(nested, out, name, msg, msg_len));
    RA_TRY(ra_hf_rope_types_read(nested, rope == scaling ? scaling : NULL, out, name, msg,
                                 msg_len));
    if (rope != NULL && !out->has_local_rope) {
        RA_TRY(ra_hf_rope_read(rope, name, where, &out->rope, msg, msg_len));
        RA_TRY(read_rope_alpha(rope, out, where, name, msg, msg_len));
        out->has_rope = 1;
    } else if (rope == NULL && !out->has_local_rope) { /* (per layer type: Cohere Compass) */
        RA_TRY(read_default_rope(out, &where, msg, msg_len));
    }
    RA_TRY(read_local_attention(root, nested, scaling, out, name, msg, msg_len));
    RA_TRY(apply_defaults(root, out, 0, name, msg, msg_len));
    rotary_dim_factor(out);
    RA_TRY(rope_types_needed(nested, scaling, out, name, msg, msg_len));
    RA_TRY(check_null_theta(root, out, name, msg, msg_len));
    RA_TRY(rope_per_type_only(nested, scaling, out, name, msg, msg_len));
    RA_TRY(check_theta_given(out, name, msg, msg_len));
    RA_TRY(read_rope_ratio(root, out, name, msg, msg_len));
    RA_TRY(read_multi_query_groups(root, out, name, msg, msg_len));
    if (features & RA_HF_KV_HEADS_IGNORED) { /* (whatever num_key_value_heads says) */
        out->num_key_value_heads = out->num_attention_heads;
        out->has_num_key_value_heads = out->has_num_attention_heads;
    }
    if ((features & RA_HF_KV_HEADS_EQUAL) && out->has_num_key_value_heads &&
        out->num_key_value_heads != out->num_attention_heads)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"num_key_value_heads\" is %lld, not num_attention_heads (%lld): "
                          "model_type \"%s\"'s v_proj has a row per query head and k_proj one "
                          "per key/value head, which its attention fails on", name,
                          (long long)out->num_key_value_heads,
                          (long long)out->num_attention_heads, out->family->model_type);
    if (out->has_local_rope) { /* per layer type: theirs; rope_local_base_freq is the
                                  sliding layers' rope_theta */
        ra_hf_rope *local = &out->local_rope;
        if (!local->has_theta && out->has_rope_local_base_freq) {
            local->theta = out->rope_local_base_freq;
            local->has_theta = 1;
        }
        RA_TRY(standardize_rope(&out->rope, out, root, "rope_parameters.full_attention.", 0,
                                name, msg, msg_len));
        RA_TRY(standardize_rope(local, out, root, "rope_parameters.sliding_attention.", 0, name,
                                msg, msg_len));
    } else {
        RA_TRY(longrope_only(&out->rope, out, where, name, msg, msg_len));
        RA_TRY(default_mrope_only(&out->rope, out, where, name, msg, msg_len));
        RA_TRY(longrope_mscale(&out->rope, out, where, name, msg, msg_len));
        RA_TRY(standardize_rope(&out->rope, out, root, where, 1, name, msg, msg_len));
    }
    RA_TRY(read_no_rope_layers(root, out, name, msg, msg_len));
    RA_TRY(read_cross_attention_layers(root, out, name, msg, msg_len));
    RA_TRY(read_head_layer_norms(root, out, name, msg, msg_len));
    RA_TRY(read_attention_gate(root, out, name, msg, msg_len));
    RA_TRY(read_attention_bias(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_bias_read_json(root, out, name, msg, msg_len));
    RA_TRY(read_falcon(root, out, name, msg, msg_len));
    RA_TRY(read_hybrid(root, out, name, msg, msg_len));
    RA_TRY(read_l2_norm_and_temperature(root, out, name, msg, msg_len));
    RA_TRY(read_kv_shared(root, out, name, msg, msg_len));
    RA_TRY(read_mla(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_indexer_read(root, out, name, msg, msg_len));
    RA_TRY(read_attn_config(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_window_read(root, name, &out->window, msg, msg_len));
    RA_TRY(read_local_window(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_block_types_read(root, out, name, msg, msg_len));
    out->window.rule = out->family ? out->family->windows : RA_HF_WINDOWS_AS_WRITTEN;
    RA_TRY(apply_defaults(root, out, 1, name, msg, msg_len));
    RA_TRY(read_sliding_window_size(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_nope_read(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_per_layer_read(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_sparse_read(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_latent_layers_read(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_rope_types_check(out, name, msg, msg_len));
    RA_TRY(ra_hf_stacks_read(root, out, name, msg, msg_len));
    RA_TRY(ra_hf_heads_read(root, out, name, msg, msg_len));
    const ra_hf_rope *r = &out->rope;
    if ((r->has_mrope || r->has_mrope_section || r->params.mrope_interleaved) &&
        !(features & RA_HF_MROPE))
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: %s (3-D multimodal positions) is supported for the Qwen-VL "
                          "families only", name, r->has_mrope ? "rope type \"mrope\""
                                                 : r->has_mrope_section ? "\"mrope_section\""
                                                                        : "\"mrope_interleaved\"");
    return RA_OK;
}

/* The text_config of a family whose row keeps it one level down
 * (text_parent: Qwen2.5-Omni's thinker_config) into *text, that family
 * into *outer; *text NULL where the parent or its text_config is absent
 * (the class's default text config then), both NULL for other families. */
static ra_status nested_text(const cJSON *root, const char *name, const cJSON **text,
                             const ra_hf_family **outer, char *msg, size_t msg_len)
{
    const cJSON *type = NULL, *parent = NULL;
    *text = NULL, *outer = NULL;
    RA_TRY(ra_io_json_key(root, "model_type", name, &type, msg, msg_len));
    const ra_hf_family *family =
        type && cJSON_IsString(type) ? ra_hf_family_find(type->valuestring) : NULL;
    if (!family || !family->text_parent) return RA_OK;
    *outer = family;
    RA_TRY(lookup_object(root, family->text_parent, name, &parent, msg, msg_len));
    if (parent && family->text_parent_whole) *text = parent;
    else if (parent) RA_TRY(lookup_object(parent, "text_config", name, text, msg, msg_len));
    return RA_OK;
}

/* The text model's object (text_config, else the one its family's row
 * nests, else root), its model family checked, then its fields. */
static ra_status read_config(const cJSON *root, ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    const cJSON *text;
    const ra_hf_family *outer = NULL;
    RA_TRY(lookup_object(root, "text_config", name, &text, msg, msg_len));
    if (text == NULL) RA_TRY(nested_text(root, name, &text, &outer, msg, msg_len));
    if (text == NULL) text = root;
    if (outer) /* (its text_config's model_type names the class the row reads) */
        snprintf(out->model_type, sizeof out->model_type, "%s", outer->model_type);
    else
        RA_TRY(read_model_type(root, text, out, name, msg, msg_len));
    RA_TRY(ra_hf_family_check(text, name, out->model_type[0] ? out->model_type : NULL,
                              &out->family, msg, msg_len));
    ra_status quant = ra_hf_quant_read(root, text, name, &out->quant, msg, msg_len);
    if (quant != RA_OK) { /* refused when a layer loads weights, not before */
        out->quant.refused = quant;
        snprintf(out->quant.reason, sizeof out->quant.reason, "%s", msg);
        if (msg_len) msg[0] = '\0';
    }
    if (text != root || !out->family || !out->family->default_text_config)
        return read_fields(text, out, name, msg, msg_len);
    /* No text_config: transformers makes the default one and reads none of
     * the top level's keys into it. */
    cJSON *defaults = cJSON_CreateObject();
    if (defaults == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    ra_status status = read_fields(defaults, out, name, msg, msg_len);
    cJSON_Delete(defaults);
    return status;
}

void ra_hf_rope_inherit(ra_hf_rope *rope, const ra_hf_fields *config)
{
    if (rope == NULL || config == NULL) return;
    if (!rope->has_theta && config->has_rope_theta) {
        rope->theta = config->rope_theta;
        rope->has_theta = 1;
    }
    if (!rope->has_partial_rotary_factor && config->has_partial_rotary_factor) {
        rope->partial_rotary_factor = config->partial_rotary_factor;
        rope->has_partial_rotary_factor = 1;
    }
    if (!rope->has_original_max_position_embeddings &&
        config->has_original_max_position_embeddings) {
        rope->params.original_max_position_embeddings =
            config->original_max_position_embeddings;
        rope->has_original_max_position_embeddings = 1;
    }
}

void ra_hf_fields_free(ra_hf_fields *config)
{
    if (config == NULL) return;
    ra_hf_rope_free(&config->rope);
    ra_hf_rope_free(&config->local_rope);
    ra_hf_window_free(&config->window);
    ra_hf_quant_free(&config->quant);
    ra_free(config->no_rope_layers);
    ra_free(config->dense_layers);
    ra_free(config->cross_attention_layers);
    ra_free(config->layer_head_dim);
    ra_free(config->layer_kv_heads);
    ra_free(config->latent_layers);
    cJSON_Delete(config->json);
    memset(config, 0, sizeof *config);
}

/* Parses text, naming the file name in any failure; *out is zeroed then. */
static ra_status parse_named(const char *text, size_t len, const char *name,
                             ra_hf_fields *out, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    cJSON *root;
    ra_status parsed = ra_io_json_parse_named(text, len, name, &root, msg, msg_len);
    if (parsed != RA_OK) return parsed;
    ra_status status = cJSON_IsObject(root)
                           ? read_config(root, out, name, msg, msg_len)
                           : ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                                        "%s: the top level is not a JSON object", name);
    out->json = root; /* kept for any key's reader, freed with out */
    if (status != RA_OK) ra_hf_fields_free(out);
    return status;
}

ra_status ra_hf_fields_parse(const char *text, size_t len, ra_hf_fields *out,
                             char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (text == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_hf_fields_parse: text or out is NULL");
    return parse_named(text, len, "config.json", out, msg, msg_len);
}

ra_status ra_hf_fields_read(const char *path, ra_hf_fields *out, char *msg,
                            size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (path == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_hf_fields_read: path or out is NULL");
    char *text = NULL;
    size_t len = 0;
    RA_TRY(ra_io_read_text(path, MAX_CONFIG_BYTES, &text, &len, msg, msg_len));
    ra_status status = parse_named(text, len, path, out, msg, msg_len);
    ra_free(text);
    return status;
}
