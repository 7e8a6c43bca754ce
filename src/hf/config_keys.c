/* config_keys.c — any key of a config.json, for an engine that reads the
 * rest of the model itself: a top-level key by name, or any value by JSON
 * Pointer (RFC 6901: "/text_config/num_hidden_layers", "/eos_token_id/0"),
 * looked up in the tree the file was parsed into (ra_hf_fields.json). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf/hf.h"
#include "io/io_json.h"

/* Whether the pointer token tok[0, len) ("~1" for '/', "~0" for '~') spells
 * name exactly. */
static int token_is(const char *tok, size_t len, const char *name)
{
    for (size_t i = 0; i < len; i++, name++) {
        char c = tok[i];
        if (c == '~') c = tok[++i] == '1' ? '/' : '~';
        if (*name != c) return 0;
    }
    return *name == '\0';
}

/* Whether tok[0, len) is a well-formed token: every '~' followed by 0 or 1. */
static int token_ok(const char *tok, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (tok[i] == '~' && (i + 1 == len || (tok[i + 1] != '0' && tok[i + 1] != '1'))) return 0;
    return 1;
}

/* The element of array a that tok[0, len) indexes (digits, no leading zero:
 * RFC 6901's array index), or NULL. */
static const cJSON *element(const cJSON *a, const char *tok, size_t len)
{
    if (len == 0 || (tok[0] == '0' && len > 1)) return NULL;
    int64_t index = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9' || index > (INT32_MAX - (tok[i] - '0')) / 10)
            return NULL;
        index = index * 10 + (tok[i] - '0');
    }
    const cJSON *item = a->child;
    for (; item && index > 0; index--) item = item->next;
    return item;
}

/* Object o's member called name, or spelled by the pointer token tok[0,
 * len) when name is NULL; *out NULL when absent.  RA_ERR_FORMAT when the
 * file holds it twice (cJSON keeps both: Python's json, and so
 * transformers, would take the last). */
static ra_status member(const ra_hf_config *config, const cJSON *o, const char *name,
                        const char *tok, size_t len, const cJSON **out)
{
    *out = NULL;
    for (const cJSON *item = o->child; item; item = item->next) {
        if (!item->string ||
            !(name ? strcmp(item->string, name) == 0 : token_is(tok, len, item->string)))
            continue;
        if (*out)
            return hf_fail(RA_ERR_FORMAT, "%s holds the key \"%s\" twice in one object",
                           config->path, item->string);
        *out = item;
    }
    return RA_OK;
}

/* The value key names in config's file (*out NULL: absent): a top-level
 * key, or a JSON Pointer when it starts with '/'. */
static ra_status find(const ra_hf_config *config, const char *key, const cJSON **out)
{
    *out = NULL;
    if (!config || !key) return hf_fail(RA_ERR_NULL, "%s is NULL", config ? "key" : "config");
    const cJSON *at = config->fields.json; /* NULL only in a config that is no file */
    if (!at) return RA_OK;
    if (key[0] != '/') return member(config, at, key, NULL, 0, out);
    for (const char *tok = key + 1;; ) {
        size_t len = strcspn(tok, "/");
        if (!token_ok(tok, len))
            return hf_fail(RA_ERR_ARGUMENT, "\"%s\": a '~' in a JSON Pointer must be followed "
                           "by 0 or 1", key);
        if (cJSON_IsObject(at)) RA_HF_TRY(member(config, at, NULL, tok, len, &at));
        else at = cJSON_IsArray(at) ? element(at, tok, len) : NULL;
        if (!at || tok[len] == '\0') break;
        tok += len + 1;
    }
    *out = at;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_kind(const ra_hf_config *config, const char *key,
                                      ra_hf_value_kind *out)
{
    hf_reset();
    if (!out) return hf_fail(RA_ERR_NULL, "out is NULL");
    const cJSON *v;
    RA_HF_TRY(find(config, key, &v));
    *out = !v                 ? RA_HF_ABSENT
           : cJSON_IsNull(v)   ? RA_HF_NULL
           : cJSON_IsBool(v)   ? RA_HF_BOOL
           : cJSON_IsNumber(v) ? RA_HF_NUMBER
           : cJSON_IsString(v) ? RA_HF_STRING
           : cJSON_IsArray(v)  ? RA_HF_ARRAY
                               : RA_HF_OBJECT;
    return RA_OK;
}

/* The value of key for a getter: RA_ERR_NOT_FOUND when absent or null. */
static ra_status value(const ra_hf_config *config, const char *key, const void *out,
                       const cJSON **v)
{
    hf_reset();
    if (!out) return hf_fail(RA_ERR_NULL, "out is NULL");
    RA_HF_TRY(find(config, key, v));
    if (!*v) return hf_fail(RA_ERR_NOT_FOUND, "%s has no \"%s\"", config->path, key);
    if (cJSON_IsNull(*v))
        return hf_fail(RA_ERR_NOT_FOUND, "%s: \"%s\" is null", config->path, key);
    return RA_OK;
}

static ra_status wrong_kind(const ra_hf_config *config, const char *key, const char *kind)
{
    return hf_fail(RA_ERR_FORMAT, "%s: \"%s\" is not %s", config->path, key, kind);
}

RA_HF_API ra_status ra_hf_config_int(const ra_hf_config *config, const char *key, int64_t *out)
{
    const cJSON *v;
    RA_HF_TRY(value(config, key, out, &v));
    if (!ra_io_json_integral(v, out))
        return wrong_kind(config, key, "an integer (of magnitude below 2^53, written without "
                          "a fraction)");
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_double(const ra_hf_config *config, const char *key, double *out)
{
    const cJSON *v;
    RA_HF_TRY(value(config, key, out, &v));
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return wrong_kind(config, key, "a number within double's range");
    *out = v->valuedouble;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_bool(const ra_hf_config *config, const char *key, int *out)
{
    const cJSON *v;
    RA_HF_TRY(value(config, key, out, &v));
    if (!ra_io_json_bool(v, out)) return wrong_kind(config, key, "true or false (or 1 or 0)");
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_string(const ra_hf_config *config, const char *key,
                                        const char **out)
{
    const cJSON *v;
    RA_HF_TRY(value(config, key, out, &v));
    if (!cJSON_IsString(v)) return wrong_kind(config, key, "a string");
    *out = v->valuestring;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_length(const ra_hf_config *config, const char *key,
                                        int64_t *out)
{
    const cJSON *v;
    RA_HF_TRY(value(config, key, out, &v));
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return wrong_kind(config, key, "an array or an object");
    int64_t n = 0;
    for (const cJSON *item = v->child; item; item = item->next) n++;
    *out = n;
    return RA_OK;
}
