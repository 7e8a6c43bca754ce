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
        RA_TRY(ra_io_json_flag(text, out->rule->qkv_key, out->rule->qkv_default, &out->qkv,
                               name, msg, msg_len));
    if (out->rule->o_key)
        RA_TRY(ra_io_json_flag(text, out->rule->o_key, out->rule->o_default, &out->o, name,
                               msg, msg_len));
    if (out->rule->qkv_with_o && out->o) out->qkv = 1;
    return RA_OK;
}
