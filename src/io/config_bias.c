/*
 * config_bias.c — which attention projections a config's model builds
 * with a bias: its family's rule (families.c) read against the config's
 * key for it (attention_bias, use_bias, use_qkv_bias, bias ...).
 */
#include <string.h>

#include "internal.h"
#include "io.h"
#include "io_json.h"
#include "io_message.h"

#define MAX_CONFIG_BYTES (16 << 20) /* as config.c */

/* A known family without a rule of its own builds no biases. */
static const ra_hf_bias_rule no_biases = {"", NULL, 0, NULL, 0, 0};

/* *out = key's value in obj (true, false, 1, 0), default_value when key is
 * NULL, absent or null. */
static ra_status read_flag(const cJSON *obj, const char *key, int default_value, int *out,
                           const char *name, char *msg, size_t msg_len)
{
    *out = default_value;
    if (key == NULL) return RA_OK;
    const cJSON *item;
    RA_TRY(ra_io_json_key(obj, key, name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    int64_t v = -1;
    if (cJSON_IsBool(item)) v = cJSON_IsTrue(item);
    else if (!ra_io_json_integer(item, &v)) v = -1;
    if (v != 0 && v != 1)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be true or false",
                          name, key);
    *out = (int)v;
    return RA_OK;
}

static ra_status read_bias(const cJSON *root, const ra_hf_fields *fields, const char *name,
                           ra_hf_bias *out, char *msg, size_t msg_len)
{
    const cJSON *text;
    RA_TRY(ra_io_json_key(root, "text_config", name, &text, msg, msg_len));
    if (text == NULL || !cJSON_IsObject(text)) text = root; /* config.c refuses the rest */
    const ra_hf_bias_rule *rule = ra_hf_bias_rule_find(fields->family);
    out->rule = rule ? rule : fields->family ? &no_biases : NULL;
    if (out->rule == NULL) { /* no family: as the checkpoint has them */
        out->qkv = out->o = !fields->has_attention_bias || fields->attention_bias;
        return RA_OK;
    }
    RA_TRY(read_flag(text, out->rule->qkv_key, out->rule->qkv_default, &out->qkv, name, msg,
                     msg_len));
    RA_TRY(read_flag(text, out->rule->o_key, out->rule->o_default, &out->o, name, msg,
                     msg_len));
    if (out->rule->qkv_with_o && out->o) out->qkv = 1;
    return RA_OK;
}

ra_status ra_hf_bias_parse(const char *text, size_t len, const ra_hf_fields *fields,
                           const char *name, ra_hf_bias *out, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (text == NULL || fields == NULL || name == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_hf_bias_parse: an argument is NULL");
    cJSON *root;
    ra_status parsed = ra_io_json_parse(text, len, &root);
    if (parsed != RA_OK)
        return ra_io_fail(msg, msg_len, parsed, "%s: %s", name,
                          parsed == RA_ERR_NOMEM ? "out of memory" : "not valid JSON");
    ra_status status = cJSON_IsObject(root)
                           ? read_bias(root, fields, name, out, msg, msg_len)
                           : ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                                        "%s: the top level is not a JSON object", name);
    cJSON_Delete(root);
    return status;
}

ra_status ra_hf_bias_read(const char *path, const ra_hf_fields *fields, ra_hf_bias *out,
                          char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (path == NULL || fields == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_hf_bias_read: an argument is NULL");
    char *text = NULL;
    size_t len = 0;
    RA_TRY(ra_io_read_text(path, MAX_CONFIG_BYTES, &text, &len, msg, msg_len));
    ra_status status = ra_hf_bias_parse(text, len, fields, path, out, msg, msg_len);
    ra_free(text);
    return status;
}
