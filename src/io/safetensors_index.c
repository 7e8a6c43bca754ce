/*
 * safetensors_index.c — the shard list of a sharded checkpoint's
 * model.safetensors.index.json:
 *   {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>", ...}}
 * Only the shard names are kept; the caller opens each shard and finds the
 * tensors there.
 */
#include <string.h>

#include "internal.h"
#include "io.h"
#include "io_json.h"
#include "io_message.h"

#define MAX_INDEX_BYTES (64 << 20)

static const char SUFFIX[] = ".safetensors";

/* A plain file name in the index's folder: no '/' or '\', not hidden (so
 * not "." or ".."), ending in ".safetensors" after at least one byte. */
static int plain_shard_name(const char *name)
{
    size_t len = strlen(name), suffix = sizeof SUFFIX - 1;
    return len > suffix && len < 256 && name[0] != '.' && strchr(name, '/') == NULL &&
           strchr(name, '\\') == NULL && strcmp(name + len - suffix, SUFFIX) == 0;
}

/* Adds name to out's shards unless it is there already. */
static ra_status add_shard(ra_st_index *out, const char *name, const char *path, char *msg,
                           size_t msg_len)
{
    for (int64_t i = 0; i < out->n_shards; i++)
        if (strcmp(out->shards[i], name) == 0) return RA_OK;
    if (out->n_shards == RA_ST_INDEX_MAX_SHARDS)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: more than %d shards", path,
                          RA_ST_INDEX_MAX_SHARDS);
    size_t len = strlen(name) + 1;
    char *copy = ra_malloc(len);
    if (copy == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    memcpy(copy, name, len);
    out->shards[out->n_shards++] = copy;
    return RA_OK;
}

static ra_status read_weight_map(const cJSON *root, const char *path, ra_st_index *out,
                                 char *msg, size_t msg_len)
{
    if (!cJSON_IsObject(root))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the top level is not a JSON object",
                          path);
    const cJSON *map;
    RA_TRY(ra_io_json_key(root, "weight_map", path, &map, msg, msg_len));
    if (map == NULL || !cJSON_IsObject(map) || map->child == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"weight_map\" must be an object naming each tensor's file",
                          path);
    out->shards = ra_malloc(RA_ST_INDEX_MAX_SHARDS * sizeof *out->shards);
    if (out->shards == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    for (const cJSON *entry = map->child; entry != NULL; entry = entry->next) {
        if (!cJSON_IsString(entry) || !plain_shard_name(entry->valuestring))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: weight_map[\"%.100s\"] must be the name of a .safetensors "
                              "file beside the index (no folder)", path, entry->string);
        RA_TRY(add_shard(out, entry->valuestring, path, msg, msg_len));
    }
    return RA_OK;
}

ra_status ra_st_index_read(const char *path, ra_st_index *out, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (path == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_st_index_read: path or out is NULL");
    char *text = NULL;
    size_t len = 0;
    RA_TRY(ra_io_read_text(path, MAX_INDEX_BYTES, &text, &len, msg, msg_len));
    cJSON *root;
    ra_status status = ra_io_json_parse_named(text, len, path, &root, msg, msg_len);
    ra_free(text);
    if (status != RA_OK) return status;
    status = read_weight_map(root, path, out, msg, msg_len);
    cJSON_Delete(root);
    if (status != RA_OK) ra_st_index_free(out);
    return status;
}

void ra_st_index_free(ra_st_index *index)
{
    if (index == NULL) return;
    for (int64_t i = 0; i < index->n_shards; i++) ra_free(index->shards[i]);
    ra_free(index->shards);
    memset(index, 0, sizeof *index);
}
