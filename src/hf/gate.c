/*
 * gate.c — the attention output's gate from a projection of its own, as
 * each family's modeling code builds it, for the standard layer and latent
 * attention alike (ra_layer_config.gated_output with ra_layer_weights.wgate):
 *
 *   AfMoE (RA_HF_GATE_PROJ): gate_proj.weight [H * Do, dim],
 *     attn_output * sigmoid(gate_proj(x))
 *   LFM3, Ling (bailing_hybrid) (RA_HF_GATE_PER_HEAD): g_proj.weight [H, dim],
 *     attn_output * sigmoid(g_proj(x)).unsqueeze(-1); LFM3's only while
 *     use_attention_gate (RA_HF_GATE_BY_KEY), saved as gate_proj.weight
 *     (RA_HF_GATE_SAVED_AS_GATE_PROJ)
 *   Laguna (RA_HF_SOFTPLUS_G_PROJ): g_proj.weight [H, dim] or [H * Do, dim] as
 *     gating says, attn_output * softplus(g_proj(x))
 *   Beam (RA_HF_GATE_PROJ with RA_HF_GATE_BIAS): AfMoE's, plus gate_bias [H]
 *     added to each head's gates before the sigmoid
 *   HY V4: AfMoE's beside latent attention (saved as linear_gate.weight)
 *
 * with Do the output's features per head (head_dim; v_head_dim with latent
 * attention).  Only Beam's has a bias.
 */
#include <stdio.h>

#include "hf/hf.h"

/* Whether the family's layers have the gate (the config's key for it read). */
static int family_gates(const ra_hf_fields *hf)
{
    const ra_hf_features features = hf->family ? hf->family->features : 0;
    if (features & RA_HF_GATE_PER_HEAD)
        return !(features & RA_HF_GATE_BY_KEY) || hf->attention_gate;
    return (features & (RA_HF_GATE_PROJ | RA_HF_SOFTPLUS_G_PROJ)) != 0;
}

/* Beam's gate_bias [H] (RA_HF_GATE_BIAS), and nowhere else. */
static ra_status check_gate_bias(const ra_hf_fields *hf, const attention_tensors *t,
                                 const char *path, const ra_layer_config *out)
{
    const ra_st_tensor *b = t->gate_bias;
    const ra_hf_family *family = hf->family;
    const int has = family && (family->features & RA_HF_GATE_BIAS);
    if (b && !has)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s%s%s has no output gate's bias "
                       "per head (transformers would not use it)", b->name, path,
                       family ? "model_type \"" : "a config without model_type",
                       family ? family->model_type : "", family ? "\"" : "");
    if (has && !b)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has no output gate's bias per head (gate_bias) "
                       "beside '%s': model_type \"%s\" reads it (transformers would initialize "
                       "it)", path, t->proj[PROJ_O]->name, family->model_type);
    if (b && (b->ndim != 1 || b->shape[0] != out->n_heads))
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not [%lld] (the output gate's bias, "
                       "one per head)", b->name, path, (long long)out->n_heads);
    return RA_OK;
}

ra_status hf_gate_config(const ra_hf_fields *hf, const attention_tensors *t, const char *path,
                         int64_t head_features, ra_layer_config *out)
{
    const ra_st_tensor *g = t->gate;
    const ra_hf_family *family = hf->family;
    const int has = family_gates(hf);
    RA_HF_TRY(check_gate_bias(hf, t, path, out));
    if (g && !has)
        return hf_fail(RA_ERR_UNSUPPORTED, "tensor '%s' in %s: %s%s%s has no output gate of "
                       "its own%s (transformers would not use it)", g->name, path,
                       family ? "model_type \"" : "a config without model_type",
                       family ? family->model_type : "", family ? "\"" : "",
                       family && (family->features & RA_HF_GATE_BY_KEY)
                           ? " while use_attention_gate is false" : "");
    if (!has) return RA_OK;
    const int softplus = (family->features & RA_HF_SOFTPLUS_G_PROJ) != 0;
    const int per_head = (family->features & RA_HF_GATE_PER_HEAD) || (softplus && hf->gate_per_head);
    const char *name = softplus ? "g_proj.weight"
                       : !per_head ? "gate_proj.weight"
                       : family->features & RA_HF_GATE_SAVED_AS_GATE_PROJ
                           ? "gate_proj.weight (or g_proj.weight)"
                           : "g_proj.weight";
    if (!g)
        return hf_fail(RA_ERR_NOT_FOUND, "%s has no %s beside '%s': model_type \"%s\" gates "
                       "its attention output by it (transformers would initialize the missing "
                       "weight)", path, name, t->proj[PROJ_O]->name, family->model_type);
    const int64_t rows = per_head ? out->n_heads : out->n_heads * head_features;
    if (g->ndim != 2 || g->shape[0] != rows || g->shape[1] != out->dim)
        return hf_fail(RA_ERR_SHAPE, "tensor '%s' in %s is not [%lld, %lld] (the output gate: "
                       "%s)", g->name, path, (long long)rows, (long long)out->dim,
                       per_head ? "one per query head" : "one per output feature");
    out->gated_output = 1;
    out->gate_per_head = per_head;
    out->gate_softplus = softplus;
    return RA_OK;
}
