/*
 * fields_blocks.c — the layer kinds of a family with RA_HF_BLOCK_TYPES
 * (RecurrentGemma): block_types, repeated over num_hidden_layers, names
 * each layer's temporal block: "recurrent" (an RG-LRU block, refused by
 * kind as other hybrids' layers) or attention, every one of them sliding
 * with attention_window_size (its config class's attribute_map names it
 * sliding_window) and the default rope only.
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* RecurrentGemmaConfig's defaults */
#define DEFAULT_LAYERS 26
#define DEFAULT_WINDOW 2048
static const char *const default_blocks[] = {"recurrent", "recurrent", "attention"};
#define N_DEFAULT_BLOCKS ((int64_t)(sizeof default_blocks / sizeof default_blocks[0]))

/* key's positive integer, else fallback. */
static ra_status read_positive(const cJSON *root, const char *key, int64_t fallback,
                               int64_t *out, const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, key, name, &item, msg, msg_len));
    *out = fallback;
    if (item != NULL && (!ra_io_json_integer(item, out) || *out < 1))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be a positive integer",
                          name, key);
    return RA_OK;
}

/* The kind of block i of n: 1 "recurrent", 0 another (attention, as
 * RecurrentGemmaConfig.layers_block_type reads it), -1 not a string. */
static int recurrent(const cJSON *blocks, int64_t i)
{
    if (blocks == NULL) return strcmp(default_blocks[i], "recurrent") == 0;
    const cJSON *b = cJSON_GetArrayItem(blocks, (int)i);
    return cJSON_IsString(b) ? strcmp(b->valuestring, "recurrent") == 0 : -1;
}

/* layer_types of num_hidden_layers layers from block_types. */
static ra_status layer_kinds(const cJSON *root, ra_hf_window *w, const char *name, char *msg,
                             size_t msg_len)
{
    const cJSON *blocks;
    int64_t layers;
    RA_TRY(ra_io_json_key(root, "block_types", name, &blocks, msg, msg_len));
    RA_TRY(read_positive(root, "num_hidden_layers", DEFAULT_LAYERS, &layers, name, msg,
                         msg_len));
    const int64_t n = blocks == NULL ? N_DEFAULT_BLOCKS
                      : cJSON_IsArray(blocks) ? cJSON_GetArraySize(blocks)
                                              : 0;
    if (n < 1)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"block_types\" must be a non-empty array of strings", name);
    w->layer_types = ra_malloc((size_t)layers);
    if (w->layer_types == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    w->n_layer_types = layers;
    for (int64_t i = 0; i < layers; i++) {
        int kind = recurrent(blocks, i % n);
        if (kind < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"block_types\" must be a non-empty array of strings", name);
        w->layer_types[i] = kind ? RA_HF_OTHER_ATTENTION : RA_HF_SLIDING_ATTENTION;
    }
    w->has_layer_types = 1;
    w->other_kind = "recurrent";
    w->kinds_key = "block_types";
    return RA_OK;
}

/* attention_window_size, or sliding_window (its other name); both given
 * and differing: refused. */
static ra_status read_window(const cJSON *root, ra_hf_window *w, const char *name, char *msg,
                             size_t msg_len)
{
    int64_t size;
    RA_TRY(read_positive(root, "attention_window_size", DEFAULT_WINDOW, &size, name, msg,
                         msg_len));
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "attention_window_size", name, &item, msg, msg_len));
    if (w->has_sliding_window && item != NULL && w->sliding_window != size)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"sliding_window\" and "
                          "\"attention_window_size\" (the same attribute) differ: refused as "
                          "contradictory", name);
    if (!w->has_sliding_window) w->sliding_window = size;
    w->has_sliding_window = 1;
    return RA_OK;
}

ra_status ra_hf_block_types_read(const cJSON *root, ra_hf_fields *out, const char *name,
                                 char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_BLOCK_TYPES)) return RA_OK;
    const char *type = out->family->model_type;
    if (out->window.has_layer_types)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"layer_types\" is given: "
                          "model_type \"%s\" derives its layers' kinds from block_types: "
                          "refused", name, type);
    if (out->has_local_rope || out->rope.type != RA_ROPE_DEFAULT)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" runs the "
                          "default rope only (one rope_parameters object, rope_type "
                          "\"default\"), as its rotary embedding does: refused", name, type);
    RA_TRY(read_window(root, &out->window, name, msg, msg_len));
    return layer_kinds(root, &out->window, name, msg, msg_len);
}
