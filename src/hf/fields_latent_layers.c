/*
 * fields_latent_layers.c — latent attention's sizes per layer
 * (RA_HF_LATENT_PER_LAYER: dots.note's Dots3NoteTextConfig):
 *   per_layer_config, transformers' heterogeneous config, {"<layer>":
 *     {"num_attention_heads": H, "q_lora_rank": rq, ...}, ...}: the layers
 *     it names take those values over the config's (num_attention_heads,
 *     num_key_value_heads, q_lora_rank, kv_lora_rank, head_dim,
 *     qk_nope_head_dim, qk_rope_head_dim, v_head_dim; any other key is
 *     refused);
 *   without it, the config class's own reading: the layers layer_types
 *     names sliding_attention take the swa_* keys (swa_num_attention_heads
 *     ...; defaults 64, 64, 1024, 1024, 256, 192, 128, swa_qk_rope_head_dim
 *     swa_head_dim - swa_qk_nope_head_dim).
 * Each layer's heads and key/value heads must agree, q_lora_rank be set and
 * a sliding layer's head_dim be qk_nope_head_dim + qk_rope_head_dim
 * (validate_architecture raises otherwise).  The rope of a layer type turns
 * int(head_dim * (qk_rope_head_dim / head_dim)) features (the config class
 * derives partial_rotary_factor so, whatever the file says, for the type's
 * first layer): a count other than each layer's qk_rope_head_dim fails in
 * transformers, refused.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* The keys of a layer's sizes, with their place in `sizes` and the swa_*
 * defaults (Dots3NoteTextConfig.__post_init__). */
enum { K_HEADS, K_KV_HEADS, K_Q_RANK, K_KV_RANK, K_HEAD_DIM, K_NOPE, K_V, K_ROPE, N_KEYS };
static const char *const keys[N_KEYS] = {
    "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank",
    "head_dim", "qk_nope_head_dim", "v_head_dim", "qk_rope_head_dim"};
static const int64_t swa_defaults[N_KEYS - 1] = {64, 64, 1024, 1024, 256, 192, 128};

typedef struct sizes {
    int64_t v[N_KEYS];
} sizes;

/* A positive integer at item (where names it in messages). */
static ra_status read_size(const cJSON *item, const char *where, const char *key,
                           int64_t *value, const char *name, char *msg, size_t msg_len)
{
    if (!ra_io_json_integer(item, value) || *value < 1 || *value > INT32_MAX)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s%s\" must be a positive integer",
                          name, where, key);
    return RA_OK;
}

static int key_index(const char *key)
{
    for (int k = 0; k < N_KEYS; k++)
        if (strcmp(key, keys[k]) == 0) return k;
    return -1;
}

/* One entry of per_layer_config, "<layer>": {...}, over the config's sizes. */
static ra_status read_entry(const cJSON *e, sizes *layers, int64_t n, const char *name,
                            char *msg, size_t msg_len)
{
    const char *key = e->string ? e->string : "";
    char *end = NULL;
    long long layer = isdigit((unsigned char)key[0]) ? strtoll(key, &end, 10) : -1;
    if (layer < 0 || *end != '\0' || layer >= n)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"per_layer_config\" key \"%.32s\" "
                          "is not a layer number below num_hidden_layers (%lld)", name, key,
                          (long long)n);
    if (!cJSON_IsObject(e))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"per_layer_config.%.32s\" must be "
                          "an object", name, key);
    char where[64];
    snprintf(where, sizeof where, "per_layer_config.%.32s.", key);
    for (const cJSON *k = e->child; k != NULL; k = k->next) {
        const int i = key_index(k->string ? k->string : "");
        if (i < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"%s%.64s\": a layer's own "
                              "value of a key other than latent attention's sizes is not "
                              "supported", name, where, k->string ? k->string : "");
        RA_TRY(read_size(k, where, keys[i], &layers[layer].v[i], name, msg, msg_len));
    }
    return RA_OK;
}

/* Without per_layer_config: the sliding layers' swa_* sizes. */
static ra_status read_swa(const cJSON *root, sizes *layers, const ra_hf_fields *out,
                          const char *name, char *msg, size_t msg_len)
{
    sizes swa;
    for (int k = 0; k < N_KEYS; k++) {
        char key[48];
        snprintf(key, sizeof key, "swa_%s", keys[k]);
        const cJSON *item;
        RA_TRY(ra_io_json_key(root, key, name, &item, msg, msg_len));
        if (item != NULL) RA_TRY(read_size(item, "", key, &swa.v[k], name, msg, msg_len));
        else if (k == K_ROPE) swa.v[k] = swa.v[K_HEAD_DIM] - swa.v[K_NOPE];
        else swa.v[k] = swa_defaults[k];
    }
    const ra_hf_window *w = &out->window;
    for (int64_t i = 0; i < w->n_layer_types && i < out->n_latent_layers; i++)
        if (w->layer_types[i] == RA_HF_SLIDING_ATTENTION) layers[i] = swa;
    return RA_OK;
}

/* What validate_architecture and the rotary embedding need of layer i. */
static ra_status check_layer(const ra_hf_fields *out, const sizes *layers, int64_t i,
                             const char *name, char *msg, size_t msg_len)
{
    const int64_t *v = layers[i].v;
    const ra_hf_window *w = &out->window;
    const int sliding = i < w->n_layer_types && w->layer_types[i] == RA_HF_SLIDING_ATTENTION;
    if (v[K_KV_HEADS] != v[K_HEADS])
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: layer %lld's num_key_value_heads "
                          "%lld is not its num_attention_heads %lld (transformers raises)", name,
                          (long long)i, (long long)v[K_KV_HEADS], (long long)v[K_HEADS]);
    if (v[K_Q_RANK] == 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: layer %lld has no q_lora_rank "
                          "(transformers raises: its queries need one)", name, (long long)i);
    if (sliding && v[K_HEAD_DIM] != v[K_NOPE] + v[K_ROPE])
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: sliding layer %lld's head_dim %lld "
                          "is not qk_nope_head_dim + qk_rope_head_dim (transformers raises)",
                          name, (long long)i, (long long)v[K_HEAD_DIM]);
    /* its type's rope: from the type's first layer, over int(head_dim * factor) features */
    int64_t first = 0;
    while (first < i && first < w->n_layer_types && i < w->n_layer_types &&
           w->layer_types[first] != w->layer_types[i])
        first++;
    const int64_t *f = layers[i < w->n_layer_types ? first : i].v;
    const double factor = (double)f[K_ROPE] / (double)f[K_HEAD_DIM];
    const int64_t turned = (int64_t)((double)f[K_HEAD_DIM] * factor);
    if (turned != v[K_ROPE])
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: layer %lld rotates %lld "
                          "features (qk_rope_head_dim) and its layer type's rope %lld (from "
                          "layer %lld's sizes): transformers fails on it", name, (long long)i,
                          (long long)v[K_ROPE], (long long)turned, (long long)first);
    return RA_OK;
}

/* layer_types as saved: the config class's formula for them (by num_hidden_layers and
 * use_sliding_window) is not read. */
static ra_status need_layer_types(const ra_hf_fields *out, const char *name, char *msg,
                                  size_t msg_len)
{
    if (out->window.n_layer_types > 0) return RA_OK;
    return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" needs "
                      "layer_types (which layers are indexed_attention, full_attention or "
                      "sliding_attention): the config class's formula for them is not read",
                      name, out->family->model_type);
}

/* use_dsa renames the layer types (indexed_attention, full_attention) where the config
 * class reads it: not read here. */
static ra_status refuse_use_dsa(const cJSON *root, const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "use_dsa", name, &item, msg, msg_len));
    if (item != NULL && !cJSON_IsNull(item))
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"use_dsa\" (which renames "
                          "layer_types' full and indexed layers) is not read: give layer_types "
                          "as the config class leaves them", name);
    return RA_OK;
}

static ra_status read_layers(const cJSON *root, ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    const int64_t n = out->num_hidden_layers > 0 ? out->num_hidden_layers
                                                 : out->window.n_layer_types;
    sizes *layers = ra_calloc(n > 0 ? (size_t)n : 1, sizeof *layers);
    if (!layers) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    out->latent_layers = (ra_hf_latent_sizes *)ra_calloc(n > 0 ? (size_t)n : 1,
                                                         sizeof *out->latent_layers);
    if (!out->latent_layers) {
        ra_free(layers);
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    }
    out->n_latent_layers = n;
    const cJSON *item = NULL, *head_dim = NULL;
    int64_t global_head_dim = 256; /* Dots3NoteTextConfig's */
    ra_status st = ra_io_json_key(root, "head_dim", name, &head_dim, msg, msg_len);
    if (st == RA_OK && head_dim)
        st = read_size(head_dim, "", "head_dim", &global_head_dim, name, msg, msg_len);
    const sizes global = {{out->num_attention_heads,
                           out->has_num_key_value_heads ? out->num_key_value_heads
                                                        : out->num_attention_heads,
                           out->has_q_lora_rank ? out->q_lora_rank : 0, out->kv_lora_rank,
                           global_head_dim, out->qk_nope_head_dim, out->v_head_dim,
                           out->qk_rope_head_dim}};
    for (int64_t i = 0; i < n; i++) layers[i] = global;
    if (st == RA_OK) st = ra_io_json_key(root, "per_layer_config", name, &item, msg, msg_len);
    if (st == RA_OK && item != NULL && !cJSON_IsObject(item))
        st = ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"per_layer_config\" must be an "
                        "object", name);
    if (st == RA_OK && item == NULL) st = read_swa(root, layers, out, name, msg, msg_len);
    for (const cJSON *e = item ? item->child : NULL; st == RA_OK && e != NULL; e = e->next)
        st = read_entry(e, layers, n, name, msg, msg_len);
    for (int64_t i = 0; st == RA_OK && i < n; i++) {
        st = check_layer(out, layers, i, name, msg, msg_len);
        const int64_t *v = layers[i].v;
        out->latent_layers[i] = (ra_hf_latent_sizes){v[K_HEADS], v[K_Q_RANK], v[K_KV_RANK],
                                                     v[K_NOPE], v[K_ROPE], v[K_V]};
    }
    ra_free(layers);
    return st;
}

/* The window (sliding_window, else sliding_window_size, else 512) and each layer type's
 * rope, which the config class derives from rope_theta and swa_rope_theta only where
 * rope_parameters is absent (not read here: refused). */
static ra_status read_window_and_rope(const cJSON *root, ra_hf_fields *out, const char *name,
                                      char *msg, size_t msg_len)
{
    ra_hf_window *w = &out->window;
    if (w->n_layer_types > 0 && !out->has_local_rope)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" needs "
                          "rope_parameters by layer type (indexed_attention or full_attention, "
                          "and sliding_attention): its defaults from rope_theta and "
                          "swa_rope_theta are not read", name, out->family->model_type);
    if (w->has_sliding_window && w->sliding_window > 0) return RA_OK;
    const cJSON *item;
    int64_t size = 512; /* Dots3NoteTextConfig's */
    RA_TRY(ra_io_json_key(root, "sliding_window_size", name, &item, msg, msg_len));
    if (item != NULL) RA_TRY(read_size(item, "", "sliding_window_size", &size, name, msg, msg_len));
    w->sliding_window = size, w->has_sliding_window = 1;
    return RA_OK;
}

ra_status ra_hf_latent_layers_read(const cJSON *root, ra_hf_fields *out, const char *name,
                                   char *msg, size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_LATENT_PER_LAYER)) return RA_OK;
    RA_TRY(refuse_use_dsa(root, name, msg, msg_len));
    RA_TRY(need_layer_types(out, name, msg, msg_len));
    RA_TRY(read_window_and_rope(root, out, name, msg, msg_len));
    /* the config class derives partial_rotary_factor from each type's sizes */
    out->rope.has_partial_rotary_factor = out->local_rope.has_partial_rotary_factor = 0;
    out->rope.partial_rotary_factor = out->local_rope.partial_rotary_factor = 0;
    out->has_partial_rotary_factor = 0, out->partial_rotary_factor = 0;
    return read_layers(root, out, name, msg, msg_len);
}

int ra_hf_layer_latent(const ra_hf_fields *config, int64_t layer, ra_hf_latent_sizes *out)
{
    *out = (ra_hf_latent_sizes){config->num_attention_heads,
                                config->has_q_lora_rank ? config->q_lora_rank : 0,
                                config->kv_lora_rank, config->qk_nope_head_dim,
                                config->qk_rope_head_dim, config->v_head_dim};
    const int64_t n = config->n_latent_layers;
    if (!config->latent_layers || n <= 0) return 0;
    if (layer >= 0) {
        if (layer < n) *out = config->latent_layers[layer];
        return 0;
    }
    for (int64_t i = 1; i < n; i++)
        if (memcmp(&config->latent_layers[i], &config->latent_layers[0],
                   sizeof config->latent_layers[0]) != 0)
            return -1;
    *out = config->latent_layers[0];
    return 0;
}
