/*
 * fields_flag.c — a config.json flag (attention_bias, use_qk_norm,
 * rope_interleave ...) as its family's config class reads it: transformers
 * 5.23's classes are strict dataclasses, which take true and false only;
 * remote code reads any value by Python's truth.
 */
#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

ra_status ra_hf_flag(const cJSON *obj, const char *key, int absent, const ra_hf_family *family,
                     int *out, const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(obj, key, name, &item, msg, msg_len)); /* once; null as absent */
    ra_io_json_member(obj, key, &item);
    *out = absent;
    if (item == NULL) return RA_OK;
    if (cJSON_IsNull(item)) {
        if (absent)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" is null, whose default "
                              "is true: transformers reads null as false (Python's None) or "
                              "refuses it, never as the default: write true or false", name,
                              key);
        *out = 0;
        return RA_OK;
    }
    const int remote = family && family->remote_code;
    if (!cJSON_IsBool(item) && !remote) {
        int64_t v;
        if (ra_io_json_integer(item, &v) && (v == 0 || v == 1))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" is %lld, not a bool: "
                              "transformers' config class%s%s refuses it "
                              "(StrictDataclassFieldValidationError): write %s", name, key,
                              (long long)v, family ? " of model_type " : "",
                              family ? family->model_type : "", v ? "true" : "false");
    }
    if (!ra_io_json_bool(item, out))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be true or false",
                          name, key);
    return RA_OK;
}
