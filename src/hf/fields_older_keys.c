/*
 * fields_older_keys.c — the keys older UltraBERT checkpoints save, which
 * UltrabertConfig.__post_init__ pops and turns into others
 * (RA_HF_ROPE_THETA_PER_LAYER):
 *
 *   rope_theta         a base per layer: with rope_parameters null or absent,
 *                      {kind: {"rope_type": "default", "rope_theta": theta}
 *                      for kind, theta in zip(layer_types, rope_theta)} (a
 *                      later layer's base over an earlier one's of its kind);
 *                      null, or beside rope_parameters: popped, never read
 *   attention_windows  a window per layer (null: TypeError, refused naming it;
 *                      a list: refused as changing attention, families.c)
 *
 * layer_types are the config's, else the class's rule (every third layer
 * full, of num_hidden_layers, 32 by default).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

enum { ULTRABERT_LAYERS = 32 }; /* UltrabertConfig's num_hidden_layers */

/* Layer i's kind: layer_types' (a string), else the class's rule; NULL where
 * layer_types holds something else there. */
static const char *kind_of(const cJSON *types, int64_t i)
{
    if (types == NULL) return (i + 1) % 3 ? "sliding_attention" : "full_attention";
    const cJSON *t = cJSON_GetArrayItem(types, (int)i);
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* {kind: {"rope_type": "default", "rope_theta": theta}} from the list of
 * bases, into rewritten (root without rope_theta); NULL on a failed
 * allocation. */
static cJSON *rope_per_kind(const cJSON *root, const cJSON *bases, const cJSON *types,
                            int64_t layers)
{
    cJSON *copy = cJSON_Duplicate(root, 1), *ropes = cJSON_CreateObject();
    if (copy == NULL || ropes == NULL) goto fail;
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "rope_theta");
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "rope_parameters");
    int64_t i = 0;
    for (const cJSON *b = bases->child; b != NULL && i < layers; b = b->next, i++) {
        const char *kind = kind_of(types, i);
        cJSON *rope = cJSON_CreateObject();
        if (rope == NULL || !cJSON_AddStringToObject(rope, "rope_type", "default") ||
            !cJSON_AddNumberToObject(rope, "rope_theta", b->valuedouble)) {
            cJSON_Delete(rope);
            goto fail;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(ropes, kind); /* the later layer's */
        if (!cJSON_AddItemToObject(ropes, kind, rope)) {
            cJSON_Delete(rope);
            goto fail;
        }
    }
    if (!cJSON_AddItemToObject(copy, "rope_parameters", ropes)) goto fail;
    return copy;
fail:
    cJSON_Delete(ropes);
    cJSON_Delete(copy);
    return NULL;
}

/* Every kind of the first `layers` layers has a base among the first
 * len(bases) (zip's), else transformers' rotary embedding fails on it. */
static ra_status check_kinds(const cJSON *bases, const cJSON *types, int64_t layers,
                             const char *name, char *msg, size_t msg_len)
{
    const int64_t n = cJSON_GetArraySize(bases);
    for (int64_t i = 0; i < layers; i++) {
        const char *kind = kind_of(types, i);
        if (kind == NULL)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"layer_types\" must be a list "
                              "of strings", name);
        int found = 0;
        for (int64_t j = 0; j < n && j < layers && !found; j++)
            found = strcmp(kind_of(types, j), kind) == 0;
        if (!found)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: \"rope_theta\" lists %lld bases, which give layer %lld's kind "
                              "\"%s\" none (UltrabertConfig zips them with layer_types; "
                              "transformers fails on it)", name, (long long)n, (long long)i,
                              kind);
    }
    return RA_OK;
}

ra_status ra_hf_older_keys(const cJSON *root, const ra_hf_family *family, cJSON **rewritten,
                           const char *name, char *msg, size_t msg_len)
{
    *rewritten = NULL;
    if (!family || !(family->features & RA_HF_ROPE_THETA_PER_LAYER)) return RA_OK;
    const cJSON *windows = cJSON_GetObjectItemCaseSensitive(root, "attention_windows");
    if (windows != NULL && cJSON_IsNull(windows))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"attention_windows\" is null: "
                          "model_type \"%s\"'s config class iterates over it (transformers "
                          "raises TypeError; leave the key out)", name, family->model_type);
    const cJSON *bases = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (bases == NULL) return RA_OK;
    if (cJSON_IsNull(bases) || (given != NULL && !cJSON_IsNull(given))) { /* popped, never read */
        if ((*rewritten = cJSON_Duplicate(root, 1)) == NULL)
            return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
        cJSON_DeleteItemFromObjectCaseSensitive(*rewritten, "rope_theta");
        return RA_OK;
    }
    if (!cJSON_IsArray(bases))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"rope_theta\" is not a list: "
                          "model_type \"%s\"'s config class zips it with layer_types as a base "
                          "per layer (transformers raises TypeError)", name, family->model_type);
    for (const cJSON *b = bases->child; b != NULL; b = b->next)
        if (!cJSON_IsNumber(b) || !(b->valuedouble > 0) || !isfinite(b->valuedouble))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"rope_theta\" must list "
                              "positive numbers, a base per layer", name);
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (types != NULL && cJSON_IsNull(types)) types = NULL;
    if (types != NULL && !cJSON_IsArray(types))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"layer_types\" must be a list",
                          name);
    int64_t layers = ULTRABERT_LAYERS;
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(root, "num_hidden_layers");
    if (count != NULL && (!ra_io_json_integer(count, &layers) || layers < 0))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"num_hidden_layers\" must be a "
                          "non-negative integer", name);
    if (types != NULL) layers = cJSON_GetArraySize(types); /* zip's length */
    RA_TRY(check_kinds(bases, types, layers, name, msg, msg_len));
    if ((*rewritten = rope_per_kind(root, bases, types, layers)) == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    return RA_OK;
}
