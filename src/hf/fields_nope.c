/*
 * fields_nope.c — which layers of a family with RA_HF_NOPE_FULL_LAYERS run
 * without RoPE: the full-attention ones (Cohere 2, Flint: "if
 * self.sliding_window is not None"), only while sliding_window is set
 * (EXAONE 4: "if self.sliding_window is None or self.is_sliding"), and not
 * the dense-MLP layers while prefix_dense_sliding_window_pattern is 1
 * (Cohere 2 MoE's force_rope); and those of a layer type whose rope is null
 * (RA_HF_ROPE_BY_LAYER_TYPE: Cohere Compass).
 */
#include <string.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* mlp_layer_types (strings: "dense" or another kind), else transformers'
 * default from first_k_dense_replace: the first k layers dense. */
static ra_status read_dense_layers(const cJSON *root, ra_hf_fields *out, const char *name,
                                   char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "mlp_layer_types", name, &item, msg, msg_len));
    if (item == NULL) {
        RA_TRY(ra_io_json_key(root, "first_k_dense_replace", name, &item, msg, msg_len));
        if (item != NULL && (!ra_io_json_integer(item, &out->first_dense_layers) ||
                             out->first_dense_layers < 0))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"first_k_dense_replace\" must be a non-negative integer",
                              name);
        return RA_OK;
    }
    if (!cJSON_IsArray(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"mlp_layer_types\" must be an array of strings", name);
    int64_t n = cJSON_GetArraySize(item), i = 0;
    out->dense_layers = ra_malloc(n > 0 ? (size_t)n : 1);
    if (out->dense_layers == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", name);
    out->n_dense_layers = n;
    for (const cJSON *e = item->child; e != NULL; e = e->next, i++) {
        if (!cJSON_IsString(e))
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: \"mlp_layer_types\" must be an array of strings", name);
        out->dense_layers[i] = strcmp(e->valuestring, "dense") == 0;
    }
    return RA_OK;
}

/* layer_rope_theta (RA_HF_LAYER_ROPE_THETA): null, or every entry the
 * rope's theta; a base of its own per layer (0: no RoPE) is refused. */
static ra_status check_layer_rope_theta(const cJSON *root, const ra_hf_fields *out,
                                        const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, "layer_rope_theta", name, &item, msg, msg_len));
    if (item == NULL) return RA_OK;
    const double theta = out->rope.has_theta ? out->rope.theta
                         : out->has_rope_theta ? out->rope_theta
                                               : 10000.0;
    if (!cJSON_IsArray(item))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"layer_rope_theta\" must be an array of numbers", name);
    for (const cJSON *e = item->child; e != NULL; e = e->next)
        if (!cJSON_IsNumber(e) || e->valuedouble != theta)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: \"layer_rope_theta\" gives a layer a rope base other than "
                              "rope_theta (%g) or no RoPE (0): per-layer rope bases are not "
                              "supported", name, theta);
    return RA_OK;
}

ra_status ra_hf_nope_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                          size_t msg_len)
{
    const ra_hf_features features = out->family ? out->family->features : 0;
    if (features & RA_HF_LAYER_ROPE_THETA)
        RA_TRY(check_layer_rope_theta(root, out, name, msg, msg_len));
    if (!(features & RA_HF_ROPE_DENSE_LAYERS)) return RA_OK;
    const cJSON *item;
    out->prefix_dense_pattern = 1; /* Cohere2MoeConfig's default */
    RA_TRY(ra_io_json_key(root, "prefix_dense_sliding_window_pattern", name, &item, msg,
                          msg_len));
    if (item != NULL && (!ra_io_json_integer(item, &out->prefix_dense_pattern) ||
                         out->prefix_dense_pattern < 1))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"prefix_dense_sliding_window_"
                          "pattern\" must be a positive integer", name);
    return read_dense_layers(root, out, name, msg, msg_len);
}

/* Whether layer `layer` (>= 0) has a dense MLP that forces RoPE on. */
static int forced_rope(const ra_hf_fields *hf, int64_t layer)
{
    if (!(hf->family->features & RA_HF_ROPE_DENSE_LAYERS) || hf->prefix_dense_pattern != 1)
        return 0;
    if (hf->dense_layers) return layer < hf->n_dense_layers && hf->dense_layers[layer];
    return layer < hf->first_dense_layers;
}

/* RA_HF_ROPE_BY_LAYER_TYPE: the layers of a type whose rope_parameters
 * entry is null (layer -1: where the types listed agree). */
static int nope_by_type(const ra_hf_fields *hf, int64_t layer)
{
    const int null[2] = {hf->layer_type_rope[0] == RA_HF_TYPE_ROPE_NULL,
                         hf->layer_type_rope[1] == RA_HF_TYPE_ROPE_NULL};
    int slides = ra_hf_layer_slides(&hf->window, layer, 0);
    if (slides >= 0) return null[slides > 0];
    return layer < 0 && null[0] == null[1] ? null[0] : -1;
}

int ra_hf_layer_nope(const ra_hf_fields *hf, int64_t layer)
{
    const ra_hf_features features = hf->family ? hf->family->features : 0;
    if (features & RA_HF_ROPE_BY_LAYER_TYPE) return nope_by_type(hf, layer);
    if (!(features & RA_HF_NOPE_FULL_LAYERS)) return 0;
    if ((features & RA_HF_NOPE_NEEDS_WINDOW) && !hf->window.has_sliding_window) return 0;
    int slides = ra_hf_layer_slides(&hf->window, layer, 0);
    if (slides != 0) return slides > 0 ? 0 : -1; /* -1: refused by the window's checks */
    if (layer < 0) /* every layer full: each must agree */
        return (features & RA_HF_ROPE_DENSE_LAYERS) && hf->prefix_dense_pattern == 1 &&
                       (hf->first_dense_layers > 0 || hf->dense_layers)
                   ? -1 : 1;
    return !forced_rope(hf, layer);
}

int ra_hf_layer_null_rope(const ra_hf_fields *hf, int64_t layer)
{
    if (hf->null_rope_type == 0) return 0;
    int slides = ra_hf_layer_slides(&hf->window, layer, 0);
    if (slides < 0) return -1;
    return hf->null_rope_type == (slides ? 2 : 1);
}
