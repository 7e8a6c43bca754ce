/*
 * fields_window.c — which layers of a Hugging Face config see only a
 * sliding window of earlier tokens, as transformers' config class of the
 * family decides it (the rules: ra_hf_windows in io.h): layer_types where
 * the class reads it, else the family's formula from sliding_window_pattern
 * (Gemma), use_sliding_window and max_window_layers (Qwen), no_rope_layers
 * (SmolLM3), or every layer.  A sliding layer's token i sees tokens j with
 * i - sliding_window < j <= i.
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* Stores an integer of at least `least`, or fails naming key. */
static ra_status read_count(const cJSON *item, const char *key, int64_t least,
                            const char *name, int64_t *out, char *msg, size_t msg_len)
{
    if (!ra_io_json_integer(item, out) || *out < least)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be %s", name, key,
                          least > 0 ? "a positive integer" : "a non-negative integer");
    return RA_OK;
}

static ra_status read_layer_types(const cJSON *item, const char *name, ra_hf_window *out,
                                  char *msg, size_t msg_len)
{
    if (!cJSON_IsArray(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"layer_types\" must be an array of strings", name);
    int64_t n = cJSON_GetArraySize(item);
    out->layer_types = ra_malloc(n > 0 ? (size_t)n : 1);
    if (out->layer_types == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    out->n_layer_types = n;
    int64_t i = 0;
    for (const cJSON *t = item->child; t != NULL; t = t->next, i++) {
        if (!cJSON_IsString(t))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"layer_types\" must be an array of strings", name);
        const char *v = t->valuestring;
        /* "attention": the legacy name transformers remaps to full_attention
         * (configuration_utils' remap_legacy_layer_types, in every config) */
        out->layer_types[i] = strcmp(v, "full_attention") == 0 ||
                                      strcmp(v, "attention") == 0   ? RA_HF_FULL_ATTENTION
                              : strcmp(v, "sliding_attention") == 0 ? RA_HF_SLIDING_ATTENTION
                              : strcmp(v, "chunked_attention") == 0 ? RA_HF_CHUNKED_ATTENTION
                                                                    : RA_HF_OTHER_ATTENTION;
    }
    out->has_layer_types = 1;
    out->layer_type_names = item;
    return RA_OK;
}

static ra_status read_keys(const cJSON *root, const char *name, ra_hf_window *out, char *msg,
                           size_t msg_len)
{
    const cJSON *item;
    const cJSON *window;
    RA_TRY(ra_io_json_key(root, "sliding_window", name, &window, msg, msg_len));
    RA_TRY(ra_io_json_key(root, "use_sliding_window", name, &item, msg, msg_len));
    if (item != NULL) {
        if (!cJSON_IsBool(item))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"use_sliding_window\" must be true or false", name);
        out->use_sliding_window = cJSON_IsTrue(item);
        out->has_use_sliding_window = 1;
    }
    /* 0 beside use_sliding_window false: no window, as Qwen2MoeConfig
     * (transformers 5) saves it; refused by ra_hf_window_conflict in a
     * family that does not gate its window by use_sliding_window */
    int64_t zero;
    int off = out->has_use_sliding_window && !out->use_sliding_window;
    out->zero_window = off && window != NULL && ra_io_json_integer(window, &zero) && zero == 0;
    if (window != NULL && !out->zero_window) {
        RA_TRY(read_count(window, "sliding_window", 1, name, &out->sliding_window, msg, msg_len));
        out->has_sliding_window = 1;
    }
    RA_TRY(ra_io_json_key(root, "max_window_layers", name, &item, msg, msg_len));
    if (item != NULL) {
        RA_TRY(read_count(item, "max_window_layers", 0, name, &out->max_window_layers, msg,
                          msg_len));
        out->has_max_window_layers = 1;
    }
    RA_TRY(ra_io_json_key(root, "sliding_window_pattern", name, &item, msg, msg_len));
    /* a string ("LLLG") and 0 (what Exaone4Config saves without a window)
     * are read as no pattern: layer_types, which the configs that have one
     * list, decides (without it: refused, as null) */
    if (item != NULL && !cJSON_IsString(item)) {
        RA_TRY(read_count(item, "sliding_window_pattern", 0, name, &out->sliding_window_pattern,
                          msg, msg_len));
        out->has_sliding_window_pattern = 1;
    }
    RA_TRY(ra_io_json_key(root, "global_attn_every_n_layers", name, &item, msg, msg_len));
    if (item != NULL && !cJSON_IsNull(item))
        RA_TRY(read_count(item, "global_attn_every_n_layers", 1, name, &out->global_every_n, msg,
                          msg_len));
    RA_TRY(ra_io_json_key(root, "layer_types", name, &item, msg, msg_len));
    if (item != NULL) RA_TRY(read_layer_types(item, name, out, msg, msg_len));
    return RA_OK;
}

ra_status ra_hf_window_read(const cJSON *root, const char *name, ra_hf_window *out,
                            char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    ra_status status = read_keys(root, name, out, msg, msg_len);
    if (status != RA_OK) ra_hf_window_free(out);
    return status;
}

void ra_hf_window_free(ra_hf_window *window)
{
    if (window == NULL) return;
    ra_free(window->layer_types);
    memset(window, 0, sizeof *window);
}

/* layer_types' word on layer `layer`: 1 sliding, 0 full, -1 another kind;
 * past the list: -1; layer -1: the kind of every listed layer where they
 * are all full or all sliding, else -1 (an empty list too: transformers'
 * classes that read it check its length against the layers). */
static int listed(const ra_hf_window *w, int64_t layer)
{
    if (layer >= 0 && layer < w->n_layer_types)
        return w->layer_types[layer] == RA_HF_SLIDING_ATTENTION ? 1
               : w->layer_types[layer] == RA_HF_FULL_ATTENTION  ? 0
                                                                : -1;
    if (layer >= 0) return -1;
    int kinds = 0; /* which kinds the list holds: 1 full, 2 sliding, 4 other */
    for (int64_t i = 0; i < w->n_layer_types; i++)
        kinds |= w->layer_types[i] == RA_HF_SLIDING_ATTENTION ? 2
                 : w->layer_types[i] == RA_HF_FULL_ATTENTION  ? 1
                                                              : 4;
    return kinds == 1 ? 0 : kinds == 2 ? 1 : -1;
}

static int reads_layer_types(ra_hf_windows rule)
{
    return rule != RA_HF_WINDOWS_NONE && rule != RA_HF_WINDOWS_EVERY_LAYER &&
           rule != RA_HF_WINDOWS_GATED_EVERY_LAYER;
}

static int gated(ra_hf_windows rule)
{
    return rule == RA_HF_WINDOWS_GATED_FROM_MAX || rule == RA_HF_WINDOWS_GATED_EVEN_BELOW_MAX ||
           rule == RA_HF_WINDOWS_GATED_EVERY_LAYER || rule == RA_HF_WINDOWS_GATED_NO_ROPE;
}

/* The family's rule without layer_types (layer -1: every layer's kind, or
 * -1 where they differ).  The patterns give a layer's kind whatever
 * sliding_window is (Gemma 3's sliding layers take the local rope; CWM's
 * fail without a window: ra_hf_window_conflict); the other rules slide
 * nothing without it. */
static int by_rule(const ra_hf_window *w, int64_t layer, int no_rope)
{
    const int64_t n = w->sliding_window_pattern, first = w->max_window_layers;
    if (w->rule == RA_HF_WINDOWS_PATTERN) { /* n < 1: null (ra_hf_window_conflict) */
        if (n < 1) return -1;
        return layer >= 0 ? (layer + 1) % n != 0 : n == 1 ? 0 : -1;
    }
    if (w->rule == RA_HF_WINDOWS_LISTED) return -1; /* without layer_types: refused */
    if (w->rule == RA_HF_WINDOWS_FULL_EVERY_FOURTH)
        return layer >= 0 ? layer % 4 != 0 : -1;
    if (w->rule == RA_HF_WINDOWS_FULL_EVERY_THIRD)
        return layer >= 0 ? (layer + 1) % 3 != 0 : -1;
    if (w->rule == RA_HF_WINDOWS_GLOBAL_EVERY_N) { /* ModernBertConfig's __post_init__ */
        const int64_t every = w->global_every_n ? w->global_every_n : 3;
        return layer >= 0 ? layer % every != 0 : every == 1 ? 0 : -1;
    }
    if (w->rule == RA_HF_WINDOWS_NONE || !w->has_sliding_window) return 0;
    if (gated(w->rule) && !w->use_sliding_window) return 0;
    switch (w->rule) {
    case RA_HF_WINDOWS_GATED_FROM_MAX:
    case RA_HF_WINDOWS_FROM_MAX:
        return layer >= 0 ? layer >= first : first == 0 ? 1 : -1;
    case RA_HF_WINDOWS_LISTED_ELSE_NONE: return 0;
    case RA_HF_WINDOWS_AS_WRITTEN:
        if (!w->has_use_sliding_window) return 1;
        if (!w->use_sliding_window) return 0;
        return layer >= 0 ? layer >= first : first == 0 ? 1 : -1;
    case RA_HF_WINDOWS_GATED_EVEN_BELOW_MAX:
        return layer >= 0 ? layer % 2 == 0 && layer < first : first == 0 ? 0 : -1;
    case RA_HF_WINDOWS_GATED_NO_ROPE: return layer >= 0 ? no_rope : -1;
    default: return 1; /* every layer */
    }
}

int ra_hf_layer_slides(const ra_hf_window *w, int64_t layer, int no_rope)
{
    if (w == NULL) return 0;
    if (w->has_layer_types && reads_layer_types(w->rule)) return listed(w, layer);
    return by_rule(w, layer, no_rope);
}

const char *ra_hf_window_conflict(const ra_hf_window *w, int64_t layer, int no_rope)
{
    if (w == NULL) return NULL;
    if (w->zero_window && !gated(w->rule)) return "sliding_window";
    if (w->rule == RA_HF_WINDOWS_LISTED && !w->has_layer_types) return "no layer_types";
    if (w->rule == RA_HF_WINDOWS_PATTERN && !w->has_layer_types && w->sliding_window_pattern < 1)
        return "sliding_window_pattern"; /* null: transformers' formula fails */
    if (w->has_layer_types && !reads_layer_types(w->rule))
        return w->n_layer_types > 0 && listed(w, layer) != by_rule(w, layer, no_rope)
                   ? "layer_types" : NULL;
    int slides = ra_hf_layer_slides(w, layer, no_rope);
    if (slides > 0 && w->has_layer_types && gated(w->rule) && !w->use_sliding_window)
        return "use_sliding_window";
    return slides > 0 && !w->has_sliding_window ? "sliding_window" : NULL;
}

const char *ra_hf_layer_not_attention(const ra_hf_window *w, int64_t layer)
{
    if (!w || layer < 0 || layer >= w->n_layer_types ||
        w->layer_types[layer] != RA_HF_OTHER_ATTENTION)
        return NULL;
    if (w->other_kind) return w->other_kind;
    return cJSON_GetArrayItem(w->layer_type_names, (int)layer)->valuestring;
}

int ra_hf_layer_chunked(const ra_hf_window *w, int64_t layer)
{
    return w && w->has_layer_types && layer >= 0 && layer < w->n_layer_types &&
           w->layer_types[layer] == RA_HF_CHUNKED_ATTENTION;
}

int64_t ra_hf_layer_window(const ra_hf_window *window, int64_t layer, int no_rope)
{
    int s = ra_hf_layer_slides(window, layer, no_rope);
    return s < 0 ? -1 : s ? window->sliding_window : 0;
}
