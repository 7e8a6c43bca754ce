/*
 * rope_vision.c — the 2-D rope of a multimodal config's vision encoder
 * (vision_config), as transformers' vision config classes read their keys
 * and their rotary modules use them:
 *
 *   vision model_type     heads (default)            width (default)      rope
 *   pixtral               num_attention_heads (16)   hidden_size (1024)   alternate, half
 *   qwen2_vl_vision       num_heads (16)             embed_dim (1280)     shared, half
 *   qwen2_5_vl_vision     num_heads (16)             hidden_size (3584)   shared, half
 *   llama4_vision_model   num_attention_heads (16)   hidden_size (768)    shared, column
 *                                                                         first, interleaved
 *
 * head_dim = width / heads; theta = the rope object's rope_theta, else the
 * vision config's, else 10000 (their default_theta).  A key that would
 * change the rotation and is not read here is refused, naming it.
 */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf/hf.h"
#include "io/io_json.h"

typedef struct vision_kind {
    const char *model_type;
    const char *heads_key;
    const char *width_key;
    int64_t default_heads, default_width;
    ra_rope_axial axial;
    int column_first;
    ra_layout layout;
    const char *rope_type; /* besides "default", the one rope_type it takes */
} vision_kind;

static const vision_kind kinds[] = {
    {"pixtral", "num_attention_heads", "hidden_size", 16, 1024, RA_AXIAL_ALTERNATE, 0,
     RA_LAYOUT_HALF, "axial"},
    {"qwen2_vl_vision", "num_heads", "embed_dim", 16, 1280, RA_AXIAL_SHARED, 0, RA_LAYOUT_HALF,
     "axial"},
    {"qwen2_5_vl_vision", "num_heads", "hidden_size", 16, 3584, RA_AXIAL_SHARED, 0,
     RA_LAYOUT_HALF, "axial"},
    {"llama4_vision_model", "num_attention_heads", "hidden_size", 16, 768, RA_AXIAL_SHARED, 1,
     RA_LAYOUT_INTERLEAVED, "default"},
};

/* The older vision model_types that transformers' config classes rename,
 * and what a vision_config without model_type is to its outer config's
 * class (Llava's is CLIP's: no rope, refused). */
static const char *const renamed[][2] = {
    {"qwen2_vl", "qwen2_vl_vision"}, {"qwen2_5_vl", "qwen2_5_vl_vision"},
};
static const char *const implied[][2] = {
    {"qwen2_vl", "qwen2_vl_vision"}, {"qwen2_5_vl", "qwen2_5_vl_vision"},
    {"mistral3", "pixtral"},         {"llama4", "llama4_vision_model"},
};

/* obj's key, NULL when absent or null; a key held twice is RA_ERR_FORMAT. */
static ra_status key(const ra_hf_config *config, const cJSON *obj, const char *name,
                     const cJSON **out)
{
    char msg[512];
    ra_status st = ra_io_json_key(obj, name, config->path, out, msg, sizeof msg);
    return st == RA_OK ? RA_OK : hf_fail(st, "%s", msg);
}

/* A positive integer key of the vision config (absent: fallback). */
static ra_status positive(const ra_hf_config *config, const cJSON *vision, const char *name,
                          int64_t fallback, int64_t *out)
{
    const cJSON *v;
    RA_HF_TRY(key(config, vision, name, &v));
    if (!v) {
        *out = fallback;
        return RA_OK;
    }
    if (!ra_io_json_integer(v, out) || *out <= 0)
        return hf_fail(RA_ERR_FORMAT, "%s: \"vision_config.%s\" must be a positive integer",
                       config->path, name);
    return RA_OK;
}

/* The vision config's kind, from its model_type (or the outer config's). */
static ra_status kind_of(const ra_hf_config *config, const cJSON *root, const cJSON *vision,
                         const vision_kind **out)
{
    const cJSON *v, *outer;
    RA_HF_TRY(key(config, vision, "model_type", &v));
    RA_HF_TRY(key(config, root, "model_type", &outer));
    const char *type = cJSON_IsString(v) ? v->valuestring : NULL;
    const char *outer_type = cJSON_IsString(outer) ? outer->valuestring : "";
    if (v && !type)
        return hf_fail(RA_ERR_FORMAT, "%s: \"vision_config.model_type\" must be a string",
                       config->path);
    const int given = type != NULL;
    for (size_t i = 0; given && i < sizeof renamed / sizeof renamed[0]; i++)
        if (strcmp(type, renamed[i][0]) == 0) type = renamed[i][1];
    for (size_t i = 0; !given && i < sizeof implied / sizeof implied[0]; i++)
        if (strcmp(outer_type, implied[i][0]) == 0) type = implied[i][1];
    for (size_t i = 0; type && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(type, kinds[i].model_type) == 0) {
            *out = &kinds[i];
            return RA_OK;
        }
    return hf_fail(RA_ERR_UNSUPPORTED, "%s: a vision encoder of model_type \"%s\"%s: its "
                   "2-D rope is not supported (pixtral, qwen2_vl, qwen2_5_vl and llama4 "
                   "vision encoders are)", config->path, type ? type : outer_type,
                   type ? "" : " (vision_config says no model_type)");
}

/* theta from the rope object (rope_parameters, or rope_scaling, which
 * transformers takes first), else the vision config's rope_theta, else
 * 10000; any other key of the object, or another rope_type, refused. */
static ra_status theta_of(const ra_hf_config *config, const cJSON *vision,
                          const vision_kind *kind, double *theta)
{
    const cJSON *params, *scaling, *top;
    RA_HF_TRY(key(config, vision, "rope_parameters", &params));
    RA_HF_TRY(key(config, vision, "rope_scaling", &scaling));
    RA_HF_TRY(key(config, vision, "rope_theta", &top));
    if (params && scaling)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: vision_config has both \"rope_parameters\" and "
                       "\"rope_scaling\"", config->path);
    const cJSON *rope = scaling ? scaling : params, *given = NULL;
    const char *rope_key = scaling ? "rope_scaling" : "rope_parameters";
    if (rope && !cJSON_IsObject(rope))
        return hf_fail(RA_ERR_FORMAT, "%s: \"vision_config.%s\" must be an object", config->path,
                       rope_key);
    for (const cJSON *item = rope ? rope->child : NULL; item; item = item->next) {
        const char *k = item->string ? item->string : "";
        if (strcmp(k, "rope_theta") == 0) {
            given = item;
        } else if (strcmp(k, "rope_type") == 0 || strcmp(k, "type") == 0) {
            const char *t = cJSON_IsString(item) ? item->valuestring : "";
            if (strcmp(t, "default") != 0 && strcmp(t, kind->rope_type) != 0)
                return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"vision_config.%s.%s\" \"%s\": a %s "
                               "vision encoder's rope is \"%s\"", config->path, rope_key, k, t,
                               kind->model_type, kind->rope_type);
        } else {
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"vision_config.%s.%s\": a %s vision "
                           "encoder's 2-D rope reads rope_theta alone", config->path, rope_key,
                           k, kind->model_type);
        }
    }
    if (!given) given = top;
    *theta = 10000.0;
    if (given && !(cJSON_IsNumber(given) && isfinite(given->valuedouble) &&
                   given->valuedouble >= 2.2250738585072014e-308))
        return hf_fail(RA_ERR_FORMAT, "%s: the vision encoder's rope_theta must be a finite "
                       "number > 0", config->path);
    if (given) *theta = given->valuedouble;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_vision_rope_config(const ra_hf_config *config, ra_rope_config *out)
{
    hf_reset();
    if (!config || !out) return hf_fail(RA_ERR_NULL, "%s is NULL", config ? "out" : "config");
    const cJSON *root = config->fields.json, *vision = NULL;
    if (root) RA_HF_TRY(key(config, root, "vision_config", &vision));
    if (!cJSON_IsObject(vision))
        return hf_fail(vision ? RA_ERR_FORMAT : RA_ERR_NOT_FOUND, "%s: %s", config->path,
                       vision ? "\"vision_config\" must be an object" : "no \"vision_config\"");
    const vision_kind *kind = NULL;
    RA_HF_TRY(kind_of(config, root, vision, &kind));
    int64_t heads, width, alias = 0, head_dim = 0;
    RA_HF_TRY(positive(config, vision, kind->heads_key, kind->default_heads, &heads));
    if (strcmp(kind->heads_key, "num_heads") == 0) { /* attribute_map's num_attention_heads */
        RA_HF_TRY(positive(config, vision, "num_attention_heads", 0, &alias));
        if (alias && alias != heads)
            return hf_fail(RA_ERR_FORMAT, "%s: \"vision_config\" has num_heads %lld and "
                           "num_attention_heads %lld", config->path, (long long)heads,
                           (long long)alias);
    }
    RA_HF_TRY(positive(config, vision, kind->width_key, kind->default_width, &width));
    if (width % heads)
        return hf_fail(RA_ERR_SHAPE, "%s: vision_config's %s %lld is not a multiple of its %lld "
                       "heads", config->path, kind->width_key, (long long)width,
                       (long long)heads);
    RA_HF_TRY(positive(config, vision, "head_dim", 0, &head_dim));
    if (head_dim && head_dim != width / heads)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"vision_config.head_dim\" %lld is not %s / "
                       "heads = %lld, which the %s vision encoder's attention uses",
                       config->path, (long long)head_dim, kind->width_key,
                       (long long)(width / heads), kind->model_type);
    const cJSON *partial;
    RA_HF_TRY(key(config, vision, "partial_rotary_factor", &partial));
    if (partial)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: \"vision_config.partial_rotary_factor\": a "
                       "vision encoder's 2-D rope turns the whole head", config->path);
    double theta;
    RA_HF_TRY(theta_of(config, vision, kind, &theta));
    head_dim = width / heads;
    if (head_dim % 4)
        return hf_fail(RA_ERR_HEAD_DIM, "%s: the vision encoder's head_dim %lld (%s / heads) is "
                       "not a multiple of 4: its 2-D rope gives rows and columns a quarter of "
                       "it in pairs each", config->path, (long long)head_dim, kind->width_key);
    ra_rope_config c = ra_rope_config_hf(head_dim);
    c.layout = kind->layout;
    c.theta = theta;
    c.axial = kind->axial;
    c.axial_column_first = kind->column_first;
    *out = c;
    return RA_OK;
}

ra_status hf_vision_model_type(const ra_hf_config *config, const char **model_type)
{
    const cJSON *root = config->fields.json, *vision = NULL;
    if (root) RA_HF_TRY(key(config, root, "vision_config", &vision));
    if (!cJSON_IsObject(vision))
        return hf_fail(vision ? RA_ERR_FORMAT : RA_ERR_NOT_FOUND, "%s: %s", config->path,
                       vision ? "\"vision_config\" must be an object" : "no \"vision_config\"");
    const vision_kind *kind = NULL;
    RA_HF_TRY(kind_of(config, root, vision, &kind));
    *model_type = kind->model_type;
    return RA_OK;
}
