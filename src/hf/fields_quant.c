/*
 * fields_quant.c — a config.json's quantization_config: the block-FP8 kind
 * transformers' FineGrainedFP8Config describes (utils/quantization_config.py),
 * read strictly; every other method, format or scheme is refused naming
 * the key, since loading it as plain weights would give wrong numbers.
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

#define QC "quantization_config"

/* The keys a FineGrainedFP8Config saves that we read or may ignore. */
static const char *const known_keys[] = {
    "quant_method", "fmt", "activation_scheme", "weight_block_size", "scale_fmt",
    "dequantize", "modules_to_not_convert",
};

static int is_known(const char *key)
{
    for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++)
        if (strcmp(key, known_keys[i]) == 0) return 1;
    return 0;
}

/* *value = the string under key, NULL when absent or null; another kind
 * of value fails. */
static ra_status string_key(const cJSON *qc, const char *key, const char *name,
                            const char **value, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(qc, key, name, &item, msg, msg_len));
    *value = NULL;
    if (item == NULL) return RA_OK;
    if (!cJSON_IsString(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"" QC ".%s\" must be a string",
                          name, key);
    *value = item->valuestring;
    return RA_OK;
}

/* A string key that must be absent, null or one of allowed (NULL-ended). */
static ra_status one_of(const cJSON *qc, const char *key, const char *const *allowed,
                        int required, const char *why, const char *name, char *msg,
                        size_t msg_len)
{
    const char *value;
    RA_TRY(string_key(qc, key, name, &value, msg, msg_len));
    if (value == NULL && !required) return RA_OK;
    for (int i = 0; value != NULL && allowed[i]; i++)
        if (strcmp(value, allowed[i]) == 0) return RA_OK;
    if (value == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"" QC ".%s\" is absent: %s",
                          name, key, why);
    return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: \"" QC ".%s\" is \"%.64s\": %s",
                      name, key, value, why);
}

/* weight_block_size: [rows, columns], integers in [1, INT32_MAX]. */
static ra_status read_block(const cJSON *qc, ra_hf_quant *out, const char *name, char *msg,
                            size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(qc, "weight_block_size", name, &item, msg, msg_len));
    if (item == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"" QC ".weight_block_size\" is absent or null: per-tensor or "
                          "per-channel scales are not supported (block FP8 only)", name);
    int64_t v[2];
    int ok = cJSON_IsArray(item) && cJSON_GetArraySize(item) == 2;
    const cJSON *e = ok ? item->child : NULL;
    for (int i = 0; ok && i < 2; i++, e = e->next)
        ok = ra_io_json_integer(e, &v[i]) && v[i] >= 1 && v[i] <= INT32_MAX;
    if (!ok)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"" QC ".weight_block_size\" must be two integers from 1 to "
                          "%d (rows, columns of a block)", name, INT32_MAX);
    out->block_out = v[0];
    out->block_in = v[1];
    return RA_OK;
}

/* modules_to_not_convert: null or an array of strings (copied). */
static ra_status read_skip(const cJSON *qc, ra_hf_quant *out, const char *name, char *msg,
                           size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(qc, "modules_to_not_convert", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    int64_t n = cJSON_IsArray(item) ? cJSON_GetArraySize(item) : -1;
    for (const cJSON *e = n > 0 ? item->child : NULL; e != NULL; e = e->next)
        if (!cJSON_IsString(e)) n = -1;
    if (n < 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"" QC ".modules_to_not_convert\" must be an array of strings "
                          "or null", name);
    if (n == 0) return RA_OK;
    if (!(out->skip = ra_calloc((size_t)n, sizeof *out->skip)))
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    for (const cJSON *e = item->child; e != NULL; e = e->next) {
        if (!(out->skip[out->n_skip] = ra_strdup(e->valuestring)))
            return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
        out->n_skip++;
    }
    return RA_OK;
}

/* dtype (transformers 5) or torch_dtype (4) at the top level: the dtype
 * the model's parameters, so the dequantized weights, take. */
static ra_status read_dtype(const cJSON *root, ra_hf_quant *out, const char *name, char *msg,
                            size_t msg_len)
{
    static const struct {
        const char *name;
        ra_st_dtype dtype;
    } dtypes[] = {{"bfloat16", RA_ST_BF16}, {"float16", RA_ST_F16}, {"float32", RA_ST_F32}};
    static const char *const keys[] = {"dtype", "torch_dtype"};
    out->dtype = RA_ST_DTYPE_COUNT;
    for (int k = 0; k < 2; k++) {
        const cJSON *item;
        RA_TRY(ra_io_json_key(root, keys[k], name, &item, msg, msg_len));
        if (item == NULL) continue;
        ra_st_dtype dtype = RA_ST_DTYPE_COUNT;
        for (size_t i = 0; cJSON_IsString(item) && i < sizeof dtypes / sizeof dtypes[0]; i++)
            if (strcmp(item->valuestring, dtypes[i].name) == 0) dtype = dtypes[i].dtype;
        if (dtype == RA_ST_DTYPE_COUNT)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: \"%s\" must be \"bfloat16\", \"float16\" or \"float32\" in a "
                              "quantized checkpoint (the dtype its weights are dequantized to)",
                              name, keys[k]);
        if (out->dtype != RA_ST_DTYPE_COUNT && out->dtype != dtype)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: \"dtype\" and \"torch_dtype\" disagree", name);
        out->dtype = dtype;
    }
    return RA_OK;
}

static ra_status read_quant(const cJSON *root, const cJSON *text, const char *name,
                            ra_hf_quant *out, char *msg, size_t msg_len)
{
    const cJSON *qc, *inner = NULL;
    RA_TRY(ra_io_json_key(root, QC, name, &qc, msg, msg_len));
    if (text != root) RA_TRY(ra_io_json_key(text, QC, name, &inner, msg, msg_len));
    if (inner != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"text_config." QC "\": a quantization of the text model alone "
                          "is not supported", name);
    if (qc == NULL) return RA_OK;
    if (!cJSON_IsObject(qc))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"" QC "\" must be an object or null",
                          name);
    static const char *const fp8[] = {"fp8", NULL}, *const e4m3[] = {"e4m3", NULL},
                             *const dynamic[] = {"dynamic", NULL}, *const ue8m0[] = {"ue8m0", NULL};
    RA_TRY(one_of(qc, "quant_method", fp8, 1, "ropeattn loads block-FP8 checkpoints only "
                  "(\"fp8\", transformers' FineGrainedFP8Config)", name, msg, msg_len));
    for (const cJSON *e = qc->child; e != NULL; e = e->next)
        if (!e->string || !is_known(e->string))
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: \"" QC ".%.64s\": a quantization setting ropeattn does not "
                              "implement", name, e->string ? e->string : "");
    RA_TRY(one_of(qc, "fmt", e4m3, 0, "only e4m3 weights are supported", name, msg, msg_len));
    RA_TRY(one_of(qc, "activation_scheme", dynamic, 0, "only \"dynamic\" (no input scales) is "
                  "supported", name, msg, msg_len));
    RA_TRY(one_of(qc, "scale_fmt", ue8m0, 0, "only scales stored as numbers are supported",
                  name, msg, msg_len));
    const cJSON *item;
    RA_TRY(ra_io_json_key(qc, "dequantize", name, &item, msg, msg_len));
    if (item != NULL && !cJSON_IsBool(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"" QC ".dequantize\" must be true or false", name);
    RA_TRY(read_block(qc, out, name, msg, msg_len));
    RA_TRY(read_skip(qc, out, name, msg, msg_len));
    RA_TRY(read_dtype(root, out, name, msg, msg_len));
    out->present = 1;
    return RA_OK;
}

ra_status ra_hf_quant_read(const cJSON *root, const cJSON *text, const char *name,
                           ra_hf_quant *out, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    out->dtype = RA_ST_DTYPE_COUNT;
    ra_status status = read_quant(root, text, name, out, msg, msg_len);
    if (status != RA_OK) ra_hf_quant_free(out);
    return status;
}

void ra_hf_quant_free(ra_hf_quant *quant)
{
    if (quant == NULL) return;
    for (int64_t i = 0; i < quant->n_skip; i++) ra_free(quant->skip[i]);
    ra_free(quant->skip);
    memset(quant, 0, sizeof *quant);
    quant->dtype = RA_ST_DTYPE_COUNT;
}
