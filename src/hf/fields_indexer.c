/*
 * fields_indexer.c — the keys of DeepSeek sparse attention's indexer
 * (RA_HF_INDEXER_TOPK; transformers' DeepseekV32Indexer and its followers):
 * each query scores every key, ReLU'd per indexer head, masked as the
 * attention is, and keeps its min(index_topk, keys) best.  A query that
 * sees at most index_topk keys keeps every one of them (the masked keys
 * score -inf and rank below), so the layer is then the dense one: the
 * layer runs there and is refused beyond (hf/layer.c).  The sizes are read
 * here to be checked, as transformers' modules would build them.
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* An array of "full" and "shared" whose first entry is "full" (a shared
 * layer reuses the top-k of the full layer before it, and transformers
 * raises for a first layer without one); key names it in messages. */
static ra_status check_indexer_types(const cJSON *item, const char *key, const char *name,
                                     char *msg, size_t msg_len)
{
    int ok = cJSON_IsArray(item) && item->child != NULL;
    for (const cJSON *e = ok ? item->child : NULL; e != NULL; e = e->next)
        ok &= cJSON_IsString(e) &&
              (strcmp(e->valuestring, "full") == 0 || strcmp(e->valuestring, "shared") == 0);
    if (!ok)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be an array of "
                          "\"full\" and \"shared\"", name, key);
    if (strcmp(item->child->valuestring, "full") != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"%s\" makes the first layer "
                          "\"shared\", with no earlier indexer to share (transformers raises)",
                          name, key);
    return RA_OK;
}

/* index_topk_pattern ("FSS..." or ["full", "shared", ...]), index_topk_freq
 * and index_skip_topk_offset (integers): what GlmMoeDsaConfig derives
 * indexer_types from when the config lacks it. */
static ra_status check_derived_types(const cJSON *root, const char *name, char *msg,
                                     size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "index_topk_pattern", name, &item, msg, msg_len));
    if (item != NULL && cJSON_IsString(item)) {
        const char *p = item->valuestring;
        if (p[0] != 'F' || strspn(p, "FS") != strlen(p))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"index_topk_pattern\" must be "
                              "\"F\" then \"F\"s and \"S\"s (full and shared layers), or an "
                              "array of \"full\" and \"shared\"", name);
    } else if (item != NULL) {
        RA_TRY(check_indexer_types(item, "index_topk_pattern", name, msg, msg_len));
    }
    static const char *const counts[] = {"index_topk_freq", "index_skip_topk_offset"};
    for (int i = 0; i < 2; i++) {
        int64_t value;
        RA_TRY(ra_io_json_key(root, counts[i], name, &item, msg, msg_len));
        if (item != NULL && !ra_io_json_integer(item, &value))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be an integer", name,
                              counts[i]);
    }
    return RA_OK;
}

ra_status ra_hf_indexer_read(const cJSON *root, const ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len)
{
    const ra_hf_family *family = out->family;
    if (!family || !(family->features & RA_HF_INDEXER_TOPK)) return RA_OK;
    const char *missing = !out->has_index_topk      ? "index_topk"
                          : !out->has_index_n_heads ? "index_n_heads"
                          : !out->has_index_head_dim ? "index_head_dim"
                                                     : NULL;
    if (missing)
        return ra_io_fail(msg, msg_len, RA_ERR_NOT_FOUND, "%s: no \"%s\": model_type \"%s\" "
                          "needs it for its indexer", name, missing, family->model_type);
    if (out->index_head_dim < out->qk_rope_head_dim)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"index_head_dim\" %lld is less "
                          "than qk_rope_head_dim %lld: the indexer rotates the first "
                          "qk_rope_head_dim features of its heads (transformers fails)", name,
                          (long long)out->index_head_dim, (long long)out->qk_rope_head_dim);
    if (!(family->features & RA_HF_INDEXER_SHARED)) return RA_OK;
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "indexer_types", name, &item, msg, msg_len));
    if (item != NULL) return check_indexer_types(item, "indexer_types", name, msg, msg_len);
    return check_derived_types(root, name, msg, msg_len);
}
