/*
 * rope_params.c — a Hugging Face rope_scaling / rope_parameters object as
 * ra_hf_rope: each key checked for its kind, the factor lists copied into
 * memory the struct owns.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* The rope_type names, indexed by ra_rope_type. */
static const char *const type_names[RA_ROPE_TYPE_COUNT] = {
    [RA_ROPE_DEFAULT] = "default", [RA_ROPE_LINEAR] = "linear",
    [RA_ROPE_DYNAMIC] = "dynamic", [RA_ROPE_YARN] = "yarn",
    [RA_ROPE_LLAMA3] = "llama3",   [RA_ROPE_LONGROPE] = "longrope",
};

const char *ra_hf_rope_type_name(ra_rope_type type)
{
    return (unsigned)type < RA_ROPE_TYPE_COUNT ? type_names[type] : "unknown";
}

void ra_hf_rope_free(ra_hf_rope *rope)
{
    if (rope == NULL) return;
    ra_free(rope->short_factor);
    ra_free(rope->long_factor);
    memset(rope, 0, sizeof *rope);
}

/* What one reading needs to name a failure. */
typedef struct reader {
    const cJSON *obj;
    const char *name, *prefix;
    char *msg;
    size_t msg_len;
} reader;

/* *out = obj's value for key, NULL when absent or null; fails on a key
 * given twice. */
static ra_status find(const reader *r, const char *key, const cJSON **out)
{
    if (!ra_io_json_member(r->obj, key, out))
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT, "%s: \"%s%s\" appears twice",
                          r->name, r->prefix, key);
    if (cJSON_IsNull(*out)) *out = NULL;
    return RA_OK;
}

/* As the command line's options take numbers: finite, and never below
 * DBL_MIN but for 0 (strtod calls a smaller one an underflow). */
typedef enum number_kind {
    POSITIVE,     /* finite, >= DBL_MIN */
    NON_NEGATIVE, /* finite, 0 or >= DBL_MIN (0 means "use the default", as in transformers) */
    FRACTION,     /* in [DBL_MIN, 1] */
    FINITE,       /* any finite number (never a subnormal but 0) */
} number_kind;

static const char *const number_kind_text[] = {
    [POSITIVE] = "a positive number",
    [NON_NEGATIVE] = "a number >= 0",
    [FRACTION] = "a number in (0, 1]",
    [FINITE] = "a finite number",
};

static int number_ok(const cJSON *item, number_kind kind, double *out)
{
    if (!cJSON_IsNumber(item)) return 0;
    double v = item->valuedouble;
    if (!isfinite(v)) return 0;
    if (kind == POSITIVE && !(v >= DBL_MIN)) return 0;
    if (kind == NON_NEGATIVE && !(v == 0 || v >= DBL_MIN)) return 0;
    if (kind == FRACTION && !(v >= DBL_MIN && v <= 1)) return 0;
    if (kind == FINITE && !(v == 0 || fabs(v) >= DBL_MIN)) return 0;
    *out = v;
    return 1;
}

/* Reads key as a number of the given kind into *out, setting *has. */
static ra_status read_number(const reader *r, const char *key, number_kind kind, double *out,
                             int *has)
{
    const cJSON *item;
    RA_TRY(find(r, key, &item));
    if (item == NULL) return RA_OK;
    if (!number_ok(item, kind, out))
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT, "%s: \"%s%s\" must be %s",
                          r->name, r->prefix, key, number_kind_text[kind]);
    *has = 1;
    return RA_OK;
}

/* Reads key as a count of positions, in [1, RA_MAX_POSITION + 1] as
 * --max-position-embeddings takes it. */
static ra_status read_positions(const reader *r, const char *key, int64_t *out, int *has)
{
    const cJSON *item;
    RA_TRY(find(r, key, &item));
    if (item == NULL) return RA_OK;
    int64_t v; /* transformers reads it as a number: 8192.0 is 8192 */
    if (!ra_io_json_integral(item, &v) || v <= 0)
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                          "%s: \"%s%s\" must be a positive integer", r->name, r->prefix, key);
    if (v > RA_MAX_POSITION + 1)
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                          "%s: \"%s%s\" is %lld; at most %lld is supported", r->name, r->prefix,
                          key, (long long)v, (long long)(RA_MAX_POSITION + 1));
    *out = v;
    *has = 1;
    return RA_OK;
}

/* Reads key as a non-empty array of positive numbers into a new array. */
static ra_status read_factors(const reader *r, const char *key, double **out, int64_t *n,
                              int *has)
{
    const cJSON *item;
    RA_TRY(find(r, key, &item));
    if (item == NULL) return RA_OK;
    if (!cJSON_IsArray(item) || item->child == NULL)
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                          "%s: \"%s%s\" must be a non-empty array of positive numbers",
                          r->name, r->prefix, key);
    int64_t count = 0;
    for (const cJSON *e = item->child; e != NULL; e = e->next) count++;
    double *values = ra_malloc((size_t)count * sizeof *values);
    if (values == NULL)
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_NOMEM, "%s: out of memory", r->name);
    int64_t i = 0;
    for (const cJSON *e = item->child; e != NULL; e = e->next, i++) {
        if (!number_ok(e, POSITIVE, &values[i])) {
            ra_free(values);
            return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                              "%s: \"%s%s\"[%lld] must be a positive number", r->name,
                              r->prefix, key, (long long)i);
        }
    }
    *out = values;
    *n = count;
    *has = 1;
    return RA_OK;
}

/* M-RoPE's mrope_section, [temporal, height, width] pairs, into
 * s->mrope_section: exactly 3 integers >= 0 (their sum is checked against
 * rotary_dim where that is known, hf/rope.c). */
static ra_status read_sections(const reader *r, ra_hf_rope *out)
{
    const cJSON *item;
    RA_TRY(find(r, "mrope_section", &item));
    if (item == NULL) return RA_OK;
    int64_t v[3], n = 0;
    int ok = cJSON_IsArray(item);
    for (const cJSON *e = ok ? item->child : NULL; ok && e != NULL; e = e->next, n++)
        ok = n < 3 && ra_io_json_integer(e, &v[n]) && v[n] >= 0 && v[n] <= INT32_MAX;
    if (!ok || n != 3)
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                          "%s: \"%smrope_section\" must be an array of 3 integers >= 0 "
                          "(temporal, height, width)", r->name, r->prefix);
    memcpy(out->params.mrope_section, v, sizeof v);
    out->has_mrope_section = 1;
    return RA_OK;
}

/* mrope_interleaved: true or false. */
static ra_status read_interleaved(const reader *r, ra_hf_rope *out)
{
    const cJSON *item;
    RA_TRY(find(r, "mrope_interleaved", &item));
    if (item == NULL) return RA_OK;
    if (!cJSON_IsBool(item))
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                          "%s: \"%smrope_interleaved\" must be true or false", r->name,
                          r->prefix);
    out->params.mrope_interleaved = cJSON_IsTrue(item);
    out->has_mrope_interleaved = 1;
    return RA_OK;
}

/* rope_type, else type; "su" is longrope. */
static ra_status read_type(const reader *r, ra_hf_rope *out)
{
    const cJSON *rope_type, *type;
    RA_TRY(find(r, "rope_type", &rope_type));
    RA_TRY(find(r, "type", &type));
    const cJSON *item = rope_type ? rope_type : type;
    const char *key = rope_type ? "rope_type" : "type";
    if (item == NULL) return RA_OK;
    if (!cJSON_IsString(item) || item->valuestring == NULL)
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT, "%s: \"%s%s\" must be a string",
                          r->name, r->prefix, key);
    const char *value = item->valuestring;
    for (int t = 0; t < RA_ROPE_TYPE_COUNT; t++) {
        if (strcmp(value, type_names[t]) == 0) {
            out->type = (ra_rope_type)t;
            out->has_type = 1;
            return RA_OK;
        }
    }
    if (strcmp(value, "mrope") == 0) { /* Qwen2-VL's first configs: the default rope in
                                          sections (mrope_section) */
        out->type = RA_ROPE_DEFAULT;
        out->has_type = out->has_mrope = 1;
        return RA_OK;
    }
    if (strcmp(value, "proportional") == 0) { /* Gemma 4's full layers: hf/rope.c */
        out->type = RA_ROPE_DEFAULT;
        out->has_type = out->proportional = 1;
        return RA_OK;
    }
    if (strcmp(value, "su") == 0) {
        out->type = RA_ROPE_LONGROPE;
        out->has_type = 1;
        return RA_OK;
    }
    return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                      "%s: \"%s%s\" is \"%.64s\"%s; supported: default, linear, dynamic, yarn, "
                      "llama3, longrope (or su), mrope, proportional", r->name, r->prefix, key, value,
                      strlen(value) > 64 ? "..." : "");
}

/* A member whose value is an object means per-layer-type parameters
 * (transformers v5's {"full_attention": {...}, "sliding_attention": {...}}):
 * reading it as one set of parameters would silently give the default. */
static ra_status refuse_nested(const reader *r)
{
    for (const cJSON *e = r->obj->child; e != NULL; e = e->next)
        if (cJSON_IsObject(e))
            return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                              "%s: \"%s%.64s\" is an object: per-layer-type rope parameters are "
                              "read for Gemma 3 and OLMo 3 only (pass one set with "
                              "--rope-parameters)",
                              r->name, r->prefix, e->string ? e->string : "");
    return RA_OK;
}

/* Without rope_type (or type) transformers runs the default rope and
 * ignores the scaling keys (standardize_rope_params defaults the type to
 * "default"): a factor the file gives would change nothing, though whoever
 * wrote it meant it to. */
static ra_status refuse_untyped_scaling(const reader *r, const ra_hf_rope *out)
{
    const struct {
        int has;
        const char *key;
    } scaling[] = {
        {out->has_factor, "factor"},
        {out->has_original_max_position_embeddings, "original_max_position_embeddings"},
        {out->has_attention_factor, "attention_factor"},
        {out->has_beta_fast, "beta_fast"},
        {out->has_beta_slow, "beta_slow"},
        {out->has_mscale, "mscale"},
        {out->has_mscale_all_dim, "mscale_all_dim"},
        {out->has_truncate, "truncate"},
        {out->has_low_freq_factor, "low_freq_factor"},
        {out->has_high_freq_factor, "high_freq_factor"},
        {out->has_short_factor, "short_factor"},
        {out->has_long_factor, "long_factor"},
    };
    if (out->has_type) return RA_OK;
    for (size_t i = 0; i < sizeof scaling / sizeof scaling[0]; i++)
        if (scaling[i].has)
            return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                              "%s: \"%s%s\" is set without \"%srope_type\" (or \"%stype\"): "
                              "transformers would run the default rope and ignore it: refused",
                              r->name, r->prefix, scaling[i].key, r->prefix, r->prefix);
    return RA_OK;
}

static ra_status read_all(const reader *r, ra_hf_rope *out)
{
    ra_rope_config *s = &out->params;
    RA_TRY(refuse_nested(r));
    RA_TRY(read_type(r, out));
    const cJSON *theta;
    if (ra_io_json_member(r->obj, "rope_theta", &theta) && cJSON_IsNull(theta))
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                          "%s: \"%srope_theta\" is null (transformers fails on null; leave the "
                          "key out for the config's)", r->name, r->prefix);
    RA_TRY(read_number(r, "rope_theta", POSITIVE, &out->theta, &out->has_theta));
    RA_TRY(read_number(r, "partial_rotary_factor", FRACTION, &out->partial_rotary_factor,
                          &out->has_partial_rotary_factor));
    RA_TRY(read_number(r, "factor", POSITIVE, &s->factor, &out->has_factor));
    RA_TRY(read_positions(r, "original_max_position_embeddings",
                             &s->original_max_position_embeddings,
                             &out->has_original_max_position_embeddings));
    RA_TRY(read_number(r, "attention_factor", POSITIVE, &s->attention_factor,
                          &out->has_attention_factor));
    RA_TRY(read_number(r, "beta_fast", NON_NEGATIVE, &s->beta_fast, &out->has_beta_fast));
    RA_TRY(read_number(r, "beta_slow", NON_NEGATIVE, &s->beta_slow, &out->has_beta_slow));
    RA_TRY(read_number(r, "mscale", NON_NEGATIVE, &s->mscale, &out->has_mscale));
    RA_TRY(read_number(r, "mscale_all_dim", NON_NEGATIVE, &s->mscale_all_dim,
                          &out->has_mscale_all_dim));
    RA_TRY(read_number(r, "short_mscale", POSITIVE, &out->short_mscale, &out->has_short_mscale));
    RA_TRY(read_number(r, "long_mscale", POSITIVE, &out->long_mscale, &out->has_long_mscale));
    RA_TRY(read_number(r, "llama_4_scaling_beta", FINITE, &out->llama_4_scaling_beta,
                          &out->has_llama_4_scaling_beta));
    RA_TRY(read_number(r, "low_freq_factor", POSITIVE, &s->low_freq_factor,
                          &out->has_low_freq_factor));
    RA_TRY(read_number(r, "high_freq_factor", POSITIVE, &s->high_freq_factor,
                          &out->has_high_freq_factor));

    /* null is not "not given" here: transformers' `if truncate:` reads None
     * (get("truncate", True) finds it) as no truncation */
    const cJSON *truncate;
    if (!ra_io_json_member(r->obj, "truncate", &truncate))
        return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT, "%s: \"%struncate\" appears twice",
                          r->name, r->prefix);
    if (truncate != NULL) {
        if (!cJSON_IsBool(truncate) && !cJSON_IsNull(truncate))
            return ra_io_fail(r->msg, r->msg_len, RA_ERR_FORMAT,
                              "%s: \"%struncate\" must be true, false or null", r->name,
                              r->prefix);
        s->yarn_no_truncate = !cJSON_IsTrue(truncate);
        out->has_truncate = 1;
    }

    RA_TRY(read_sections(r, out));
    RA_TRY(read_interleaved(r, out));
    RA_TRY(read_factors(r, "short_factor", &out->short_factor, &out->n_short_factor,
                           &out->has_short_factor));
    RA_TRY(read_factors(r, "long_factor", &out->long_factor, &out->n_long_factor,
                           &out->has_long_factor));
    s->short_factor = out->short_factor;
    s->long_factor = out->long_factor;
    return refuse_untyped_scaling(r, out);
}

ra_status ra_hf_rope_read(const cJSON *obj, const char *name, const char *prefix,
                          ra_hf_rope *out, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    out->type = RA_ROPE_DEFAULT;
    reader r = {obj, name, prefix, msg, msg_len};
    ra_status status = read_all(&r, out);
    if (status != RA_OK) ra_hf_rope_free(out);
    return status;
}

ra_status ra_hf_rope_parse(const char *json, size_t len, ra_hf_rope *out, char *msg,
                           size_t msg_len)
{
    static const char name[] = "rope parameters";
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (json == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_hf_rope_parse: json or out is NULL");
    cJSON *root;
    ra_status parsed = ra_io_json_parse_named(json, len, name, &root, msg, msg_len);
    if (parsed != RA_OK) return parsed;
    ra_status status = cJSON_IsObject(root)
                           ? ra_hf_rope_read(root, name, "", out, msg, msg_len)
                           : ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                                        "%s: not a JSON object (expected {\"rope_type\": ...})",
                                        name);
    cJSON_Delete(root);
    return status;
}
