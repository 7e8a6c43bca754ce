/*
 * fields_bias.c — which attention projections a config's model builds
 * with a bias: its family's rule (its row in families.c) read against the config's
 * key for it (attention_bias, use_bias, use_qkv_bias, bias ...).
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* RA_HF_QKV_BIAS_NAME: qkv_bias, where given, sets what attention_bias
 * sets (InternLM3Config's attribute_map); both given and differing:
 * refused. */
static ra_status read_qkv_bias_name(const cJSON *text, ra_hf_fields *fields, const char *name,
                                    char *msg, size_t msg_len)
{
    ra_hf_bias *out = &fields->bias;
    const cJSON *item;
    if (!(fields->family->features & RA_HF_QKV_BIAS_NAME)) return RA_OK;
    RA_TRY(ra_io_json_key(text, "qkv_bias", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    int on;
    RA_TRY(ra_hf_flag(text, "qkv_bias", 0, fields->family, &on, name, msg, msg_len));
    if (fields->has_attention_bias && fields->attention_bias != on)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"qkv_bias\" (another name for "
                          "\"attention_bias\" in model_type \"%s\") and \"attention_bias\" "
                          "differ: refused as contradictory", name, fields->family->model_type);
    if (out->rule->qkv_key && strcmp(out->rule->qkv_key, "attention_bias") == 0) out->qkv = on;
    if (out->rule->o_key && strcmp(out->rule->o_key, "attention_bias") == 0) out->o = on;
    return RA_OK;
}

ra_status ra_hf_bias_read_json(const cJSON *text, ra_hf_fields *fields, const char *name,
                               char *msg, size_t msg_len)
{
    ra_hf_bias *out = &fields->bias;
    out->rule = fields->family ? &fields->family->bias : NULL;
    if (out->rule == NULL) { /* no family: as the checkpoint has them */
        out->qkv = out->o = !fields->has_attention_bias || fields->attention_bias;
        return RA_OK;
    }
    out->qkv = out->rule->qkv_default;
    out->o = out->rule->o_default;
    if (out->rule->qkv_key)
        RA_TRY(ra_hf_flag(text, out->rule->qkv_key, out->rule->qkv_default, fields->family,
                          &out->qkv, name, msg, msg_len));
    if (out->rule->o_key)
        RA_TRY(ra_hf_flag(text, out->rule->o_key, out->rule->o_default, fields->family,
                          &out->o, name, msg, msg_len));
    RA_TRY(read_qkv_bias_name(text, fields, name, msg, msg_len));
    if (out->rule->qkv_with_o && out->o) out->qkv = 1;
    return RA_OK;
}
