/*
 * fields_heads.c — a family whose layers' query heads differ
 * (RA_HF_HEADS_PER_LAYER: Laguna's num_attention_heads_per_layer, which
 * LagunaConfig fills with num_attention_heads where it is null), and its
 * output gate's granularity (RA_HF_SOFTPLUS_G_PROJ: LagunaAttention's
 * gate_per_head = config.gating is True or config.gating == "per-head").
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* gating: true or "per-head" (one gate per head), false or "per-element"
 * (one per feature); absent or null: LagunaConfig's default, true. */
static ra_status read_gating(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                             size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "gating", name, &item, msg, msg_len));
    out->gate_per_head = 1;
    if (item == NULL) return RA_OK;
    if (cJSON_IsBool(item)) {
        out->gate_per_head = cJSON_IsTrue(item);
        return RA_OK;
    }
    if (cJSON_IsString(item) && (strcmp(item->valuestring, "per-head") == 0 ||
                                 strcmp(item->valuestring, "per-element") == 0)) {
        out->gate_per_head = strcmp(item->valuestring, "per-head") == 0;
        return RA_OK;
    }
    return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"gating\" must be true, false, "
                      "\"per-head\" or \"per-element\"", name);
}

ra_status ra_hf_heads_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                           size_t msg_len)
{
    const ra_hf_features features = out->family ? out->family->features : 0;
    if (features & RA_HF_SOFTPLUS_G_PROJ) RA_TRY(read_gating(root, out, name, msg, msg_len));
    if (!(features & RA_HF_HEADS_PER_LAYER)) return RA_OK;
    const cJSON *item, *layers;
    RA_TRY(ra_io_json_key(root, "num_attention_heads_per_layer", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    int ok = cJSON_IsArray(item) && cJSON_GetArraySize(item) > 0;
    for (const cJSON *e = ok ? item->child : NULL; e; e = e->next) {
        int64_t heads;
        ok = ok && ra_io_json_integer(e, &heads) && heads >= 1 && heads <= INT32_MAX;
    }
    if (!ok)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"num_attention_heads_per_layer\" "
                          "must be an array of positive integers", name);
    RA_TRY(ra_io_json_key(root, "num_hidden_layers", name, &layers, msg, msg_len));
    int64_t n = -1;
    if (layers != NULL && ra_io_json_integer(layers, &n) && n != cJSON_GetArraySize(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"num_attention_heads_per_layer\" "
                          "has %d entries, not num_hidden_layers (%lld)", name,
                          cJSON_GetArraySize(item), (long long)n);
    out->heads_per_layer = item;
    return RA_OK;
}

int64_t ra_hf_layer_heads(const ra_hf_fields *config, int64_t layer)
{
    const cJSON *list = config->heads_per_layer;
    if (list == NULL) return config->num_attention_heads;
    int64_t heads = -1, at = 0;
    for (const cJSON *e = list->child; e; e = e->next, at++) {
        int64_t h;
        ra_io_json_integer(e, &h);
        if (at == layer) return h;
        if (layer < 0 && heads >= 0 && h != heads) return -1; /* no one count */
        heads = h;
    }
    return layer < 0 ? heads : -1;
}
