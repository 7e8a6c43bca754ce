/* config.c — a config.json, read and checked (src/hf/fields.c), with the
 * overrides a caller sets as if editing the file. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf.h"
#include "memory.h"

/* Wraps fields (parsed, or failed with msg) into *out. */
static ra_status wrap(ra_hf_config **out, ra_status status, ra_hf_fields *fields,
                      const char *path, const char *msg)
{
    if (status != RA_OK) {
        ra_hf_fields_free(fields);
        return hf_fail(status, "%s", msg);
    }
    ra_hf_config *config = ra_calloc(1, sizeof *config);
    char *copy = path ? ra_strdup(path) : NULL;
    if (!config || (path && !copy)) {
        ra_free(config);
        ra_free(copy);
        ra_hf_fields_free(fields);
        return hf_fail(RA_ERR_NOMEM, "out of memory");
    }
    config->fields = *fields;
    /* The rope object now belongs to config->rope (the one overrides replace). */
    config->rope = fields->rope;
    memset(&config->fields.rope, 0, sizeof config->fields.rope);
    config->owned_path = copy;
    config->path = copy ? copy : "config";
    *out = config;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_open(ra_hf_config **out, const char *path)
{
    hf_reset();
    if (!out || !path) return hf_fail(RA_ERR_NULL, "%s is NULL", out ? "path" : "out");
    *out = NULL;
    char msg[512];
    ra_hf_fields fields;
    ra_status status = ra_hf_fields_read(path, &fields, msg, sizeof msg);
    return wrap(out, status, &fields, path, msg);
}

RA_HF_API ra_status ra_hf_config_parse(ra_hf_config **out, const char *json, size_t len)
{
    hf_reset();
    if (!out || !json) return hf_fail(RA_ERR_NULL, "%s is NULL", out ? "json" : "out");
    *out = NULL;
    char msg[512];
    ra_hf_fields fields;
    ra_status status = ra_hf_fields_parse(json, len, &fields, msg, sizeof msg);
    return wrap(out, status, &fields, NULL, msg);
}

RA_HF_API void ra_hf_config_close(ra_hf_config *config)
{
    if (!config) return;
    ra_hf_fields_free(&config->fields);
    ra_hf_rope_free(&config->rope);
    ra_free(config->owned_path);
    ra_free(config);
}

RA_HF_API const char *ra_hf_config_model_type(const ra_hf_config *config)
{
    return config ? config->fields.model_type : "";
}

RA_HF_API ra_status ra_hf_config_set_rope_parameters(ra_hf_config *config, const char *json,
                                                     size_t len)
{
    hf_reset();
    if (!config || !json) return hf_fail(RA_ERR_NULL, "%s is NULL", config ? "json" : "config");
    char msg[512];
    ra_hf_rope rope;
    ra_status status = ra_hf_rope_parse(json, len, &rope, msg, sizeof msg);
    if (status != RA_OK) return hf_fail(status, "%s", msg); /* "rope parameters: ..." */
    ra_hf_rope_inherit(&rope, &config->fields);
    ra_hf_rope_free(&config->rope);
    config->rope = rope;
    config->rope_parameters_set = 1;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_set_rope_theta(ra_hf_config *config, double theta)
{
    hf_reset();
    if (!config) return hf_fail(RA_ERR_NULL, "config is NULL");
    if (!(theta >= DBL_MIN) || !isfinite(theta)) /* normal, as config.json's rope_theta */
        return hf_fail(RA_ERR_THETA, "rope_theta %g: must be a finite number > 0%s", theta,
                       theta > 0 && theta < DBL_MIN ? " and not subnormal (below DBL_MIN)" : "");
    config->theta = theta;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_config_set_max_position_embeddings(ra_hf_config *config,
                                                             int64_t max_position_embeddings)
{
    hf_reset();
    if (!config) return hf_fail(RA_ERR_NULL, "config is NULL");
    if (max_position_embeddings < 1 || max_position_embeddings > RA_MAX_POSITION + 1)
        return hf_fail(RA_ERR_ARGUMENT, "max_position_embeddings %lld: must be from 1 to %lld",
                       (long long)max_position_embeddings, (long long)RA_MAX_POSITION + 1);
    config->max_position_embeddings = max_position_embeddings;
    return RA_OK;
}
