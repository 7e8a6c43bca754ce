/*
 * config_window.c — which layers of a Hugging Face config see only a
 * sliding window of earlier tokens, as transformers decides it:
 *   layer_types, when present, names each layer's kind;
 *   else sliding_window_pattern n (Gemma 3), when present: layer i slides
 *        unless (i + 1) is a multiple of n;
 *   else use_sliding_window (Qwen2), when present: false, no layer slides;
 *        true, layers from max_window_layers on do;
 *   else sliding_window, when set, applies to every layer (Mistral v0.1,
 *        Phi-3, Starcoder2).
 * A sliding layer's token i sees tokens j with i - sliding_window < j <= i.
 */
#include <string.h>

#include "internal.h"
#include "io_json.h"
#include "io_message.h"
#include "io_window.h"

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
        out->layer_types[i] = strcmp(v, "full_attention") == 0      ? RA_HF_FULL_ATTENTION
                              : strcmp(v, "sliding_attention") == 0 ? RA_HF_SLIDING_ATTENTION
                              : strcmp(v, "chunked_attention") == 0 ? RA_HF_CHUNKED_ATTENTION
                                                                    : RA_HF_OTHER_ATTENTION;
    }
    out->has_layer_types = 1;
    return RA_OK;
}

static ra_status read_keys(const cJSON *root, const char *name, ra_hf_window *out, char *msg,
                           size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "sliding_window", name, &item, msg, msg_len));
    if (item != NULL) {
        RA_TRY(read_count(item, "sliding_window", 1, name, &out->sliding_window, msg, msg_len));
        out->has_sliding_window = 1;
    }
    RA_TRY(ra_io_json_key(root, "use_sliding_window", name, &item, msg, msg_len));
    if (item != NULL) {
        if (!cJSON_IsBool(item))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"use_sliding_window\" must be true or false", name);
        out->use_sliding_window = cJSON_IsTrue(item);
        out->has_use_sliding_window = 1;
    }
    RA_TRY(ra_io_json_key(root, "max_window_layers", name, &item, msg, msg_len));
    if (item != NULL) {
        RA_TRY(read_count(item, "max_window_layers", 0, name, &out->max_window_layers, msg,
                          msg_len));
        out->has_max_window_layers = 1;
    }
    RA_TRY(ra_io_json_key(root, "sliding_window_pattern", name, &item, msg, msg_len));
    if (item != NULL) {
        RA_TRY(read_count(item, "sliding_window_pattern", 1, name, &out->sliding_window_pattern,
                          msg, msg_len));
        out->has_sliding_window_pattern = 1;
    }
    RA_TRY(ra_io_json_key(root, "layer_types", name, &item, msg, msg_len));
    if (item != NULL) RA_TRY(read_layer_types(item, name, out, msg, msg_len));
    return RA_OK;
}

ra_status ra_io_window_read(const cJSON *root, const char *name, ra_hf_window *out,
                            char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    ra_status status = read_keys(root, name, out, msg, msg_len);
    if (status != RA_OK) ra_io_window_free(out);
    return status;
}

void ra_io_window_free(ra_hf_window *window)
{
    if (window == NULL) return;
    ra_free(window->layer_types);
    memset(window, 0, sizeof *window);
}

/* Whether layer slides (layer -1: whether any layer does), or -1 for a
 * layer of another kind. */
static int slides(const ra_hf_window *w, int64_t layer)
{
    if (w->has_layer_types) {
        if (layer >= 0 && layer < w->n_layer_types)
            return w->layer_types[layer] == RA_HF_SLIDING_ATTENTION ? 1
                   : w->layer_types[layer] == RA_HF_FULL_ATTENTION  ? 0
                                                                    : -1;
        int any = 0; /* a layer the list does not cover: any of them */
        for (int64_t i = 0; i < w->n_layer_types; i++) {
            if (w->layer_types[i] >= RA_HF_CHUNKED_ATTENTION) return -1;
            any |= w->layer_types[i] == RA_HF_SLIDING_ATTENTION;
        }
        return any;
    }
    if (w->has_sliding_window_pattern) {
        if (layer >= 0) return (layer + 1) % w->sliding_window_pattern != 0;
        return w->sliding_window_pattern > 1;
    }
    if (w->has_use_sliding_window)
        return w->use_sliding_window && (layer < 0 || layer >= w->max_window_layers);
    return 1;
}

int ra_hf_layer_slides(const ra_hf_window *w, int64_t layer)
{
    if (w == NULL) return 0;
    if (w->has_layer_types) {
        if (layer < 0 || layer >= w->n_layer_types) {
            int kinds = 0; /* which kinds the list holds: 1 full, 2 sliding */
            for (int64_t i = 0; i < w->n_layer_types; i++)
                kinds |= w->layer_types[i] == RA_HF_SLIDING_ATTENTION ? 2
                         : w->layer_types[i] == RA_HF_FULL_ATTENTION  ? 1
                                                                      : 4;
            return layer < 0 && (kinds == 1 || kinds == 2) ? kinds == 2 : -1;
        }
        return w->layer_types[layer] == RA_HF_SLIDING_ATTENTION ? 1
               : w->layer_types[layer] == RA_HF_FULL_ATTENTION  ? 0
                                                                : -1;
    }
    if (w->has_sliding_window_pattern) {
        if (layer >= 0) return (layer + 1) % w->sliding_window_pattern != 0;
        return w->sliding_window_pattern == 1 ? 0 : -1;
    }
    if (w->has_use_sliding_window) {
        if (!w->use_sliding_window) return 0;
        if (layer >= 0) return layer >= w->max_window_layers;
        return w->max_window_layers == 0 ? 1 : -1;
    }
    return w->has_sliding_window ? 1 : 0;
}

int ra_hf_layer_chunked(const ra_hf_window *w, int64_t layer)
{
    return w && w->has_layer_types && layer >= 0 && layer < w->n_layer_types &&
           w->layer_types[layer] == RA_HF_CHUNKED_ATTENTION;
}

int64_t ra_hf_layer_window(const ra_hf_window *window, int64_t layer)
{
    if (window == NULL) return 0;
    int s = slides(window, layer);
    return s < 0 ? -1 : s ? window->sliding_window : 0;
}
