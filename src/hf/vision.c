/*
 * vision.c — the attention layer of a checkpoint's vision encoder
 * (ra_hf_options.vision): Pixtral's PixtralAttention, Qwen2-VL's
 * VisionAttention, Qwen2.5-VL's Qwen2_5_VLVisionAttention and Llama 4's
 * Llama4VisionAttention, as transformers runs them: every head a query head
 * of its own (no GQA), softmax scale head_dim^-0.5, no causal mask (the
 * images' patches see each other; packed images are the call's documents,
 * cu_seqlens), the 2-D rope of vision_config (rope_vision.c).
 *
 * The tensors of layer N, under any of the kind's prefixes (transformers 5
 * saves them without "model.", its modules hold them under it):
 *   Pixtral       vision_tower.transformer.layers.N.attention.{q,k,v,o}_proj.weight
 *                 (bias=False)
 *   Qwen2(.5)-VL  visual.blocks.N.attn.qkv.{weight,bias}: [3 H D, dim], q's
 *                 rows, then k's, then v's (qkv(x).reshape(S, 3, H, -1));
 *                 visual.blocks.N.attn.proj.{weight,bias}
 *   Llama 4       vision_model.model.layers.N.self_attn.{q,k,v,o}_proj.{weight,bias}
 * Any other tensor under the attention module's name is refused, naming it.
 *
 * Qwen2.5-VL's window-attention layers (those not in fullatt_block_indexes)
 * are the same module run on the patches in window order with the windows
 * as documents (vision_windows.c): built only with options->vision_windows,
 * the caller's statement that its calls give those; its
 * ra_layer_config.max_document, the largest window's patches, refuses a
 * call without documents or with one longer (whole frames).
 */
#include <stdio.h>
#include <string.h>

#include "hf/hf.h"

typedef struct tower {
    const char *model_type;
    const char *prefixes[2]; /* "<prefix>N.<module>." */
    const char *module;
    const char *width_key;   /* and its class default, as rope_vision.c reads it */
    int64_t default_width;
    int fused;               /* qkv + proj, not q/k/v/o_proj */
    int biases;
} tower;

static const tower towers[] = {
    {"pixtral", {"vision_tower.transformer.layers.", "model.vision_tower.transformer.layers."},
     "attention", "hidden_size", 1024, 0, 0},
    {"qwen2_vl_vision", {"visual.blocks.", "model.visual.blocks."}, "attn", "embed_dim", 1280, 1,
     1},
    {"qwen2_5_vl_vision", {"visual.blocks.", "model.visual.blocks."}, "attn", "hidden_size",
     3584, 1, 1},
    {"llama4_vision_model", {"vision_model.model.layers.", "model.vision_model.model.layers."},
     "self_attn", "hidden_size", 768, 0, 1},
};

static const char *const split_names[N_PROJ] = {"q_proj", "k_proj", "v_proj", "o_proj"};

/* Qwen2.5-VL's window layers need options->vision_windows, and only they
 * take it (vision_windows.c). */
static ra_status check_windows(const ra_hf_config *config, const ra_hf_options *o)
{
    int windowed;
    RA_HF_TRY(hf_vision_layer_windowed(config, o->layer, &windowed));
    if (windowed && !o->vision_windows)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: vision layer %lld is not in vision_config's "
                       "fullatt_block_indexes: it attends inside windows of the patches in "
                       "window order (transformers' window_index, cu_window_seqlens); set "
                       "ra_hf_options.vision_windows to state that its calls give them "
                       "(ra_hf_vision_windows)", config->path, (long long)o->layer);
    if (!windowed && o->vision_windows)
        return hf_fail(RA_ERR_ARGUMENT, "%s: ra_hf_options.vision_windows: vision layer %lld "
                       "attends over whole frames (a full-attention layer, or a vision encoder "
                       "without windows), not inside windows", config->path,
                       (long long)o->layer);
    return RA_OK;
}

/* The prefix "<p>N.<module>." under which the checkpoint holds layer N's
 * first projection, into buf. */
static ra_status find_module(const ra_hf_checkpoint *ckpt, const tower *k, int64_t layer,
                             char *buf, size_t size)
{
    for (int i = 0; i < 2; i++) {
        char name[512];
        snprintf(buf, size, "%s%lld.%s.", k->prefixes[i], (long long)layer, k->module);
        snprintf(name, sizeof name, "%s%s.weight", buf, k->fused ? "qkv" : "q_proj");
        if (hf_find_tensor(ckpt, name, NULL)) return RA_OK;
    }
    return hf_fail(RA_ERR_NOT_FOUND, "%s: no tensor '%s%lld.%s.%s.weight' (nor under "
                   "\"%s\"): the %s vision encoder's layer %lld", ckpt->path, k->prefixes[0],
                   (long long)layer, k->module, k->fused ? "qkv" : "q_proj", k->prefixes[1],
                   k->model_type, (long long)layer);
}

/* The module's tensor "<prefix><part>", required. */
static ra_status need(const ra_hf_checkpoint *ckpt, const char *prefix, const char *part,
                      const ra_st_tensor **out)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", prefix, part);
    *out = hf_find_tensor(ckpt, name, NULL);
    if (!*out)
        return hf_fail(RA_ERR_NOT_FOUND, "%s: no tensor '%s' (the vision attention's)",
                       ckpt->path, name);
    return RA_OK;
}

/* Every tensor under prefix is one of t's. */
static ra_status refuse_others(const ra_hf_checkpoint *ckpt, const char *prefix,
                               const attention_tensors *t)
{
    const size_t n = strlen(prefix);
    for (int64_t i = 0; i < ra_hf_checkpoint_tensor_count(ckpt); i++) {
        const char *name = ra_hf_checkpoint_tensor_name(ckpt, i);
        if (strncmp(name, prefix, n) != 0) continue;
        int known = (t->fused && strcmp(name, t->fused->name) == 0) ||
                    (t->fused_bias && strcmp(name, t->fused_bias->name) == 0);
        for (int p = 0; p < N_PROJ; p++)
            known |= (t->proj[p] && t->proj[p]->name && strcmp(name, t->proj[p]->name) == 0) ||
                     (t->bias[p] && t->bias[p]->name && strcmp(name, t->bias[p]->name) == 0);
        if (!known)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: tensor '%s' belongs to the vision attention "
                           "layer and ropeattn does not use it", ckpt->path, name);
    }
    return RA_OK;
}

/* Shapes: wq, wk, wv [H D, dim], wo [dim, H D], biases [H D] and [dim]. */
static ra_status check_shapes(const char *path, const attention_tensors *t, int64_t rows,
                              int64_t dim)
{
    for (int p = 0; p < N_PROJ; p++) {
        const ra_st_tensor *w = t->proj[p], *b = t->bias[p];
        const int64_t out = p == PROJ_O ? dim : rows, in = p == PROJ_O ? rows : dim;
        const char *name = t->fused && p < PROJ_O ? t->fused->name : w->name;
        if (w->ndim != 2 || w->shape[0] != out || w->shape[1] != in)
            return hf_fail(RA_ERR_SHAPE, "%s: tensor '%s'%s is not [%lld, %lld]", path, name,
                           t->fused && p < PROJ_O ? " (its part)" : "", (long long)out,
                           (long long)in);
        if (b && (b->ndim != 1 || b->shape[0] != out))
            return hf_fail(RA_ERR_SHAPE, "%s: the bias of '%s' is not [%lld]", path, name,
                           (long long)out);
    }
    return RA_OK;
}

/* The options that name a text layer's heads, layout or tokens. */
static ra_status check_options(const ra_hf_options *o)
{
    const char *set = o->n_heads          ? "n_heads"
                      : o->n_kv_heads     ? "n_kv_heads"
                      : o->head_dim       ? "head_dim"
                      : o->layout != -1   ? "layout"
                      : o->seq_len        ? "seq_len"
                      : o->position_ids   ? "position_ids"
                      : o->first_token    ? "first_token"
                                          : NULL;
    if (o->layer < 0)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_options: vision needs the layer (the vision "
                       "encoder's layer number)");
    if (set)
        return hf_fail(RA_ERR_UNSUPPORTED, "ra_hf_options: %s with vision (the vision encoder's "
                       "heads, rope and layout are its vision_config's; its positions are "
                       "the call's 2-D ones)", set);
    return RA_OK;
}

ra_status hf_vision_build(ra_hf_layer *l, const ra_hf_checkpoint *ckpt,
                          const ra_hf_config *config, const ra_hf_options *options,
                          attention_tensors *t)
{
    RA_HF_TRY(check_options(options));
    const char *type;
    RA_HF_TRY(hf_vision_model_type(config, &type));
    const tower *k = NULL;
    for (size_t i = 0; i < sizeof towers / sizeof towers[0]; i++)
        if (strcmp(type, towers[i].model_type) == 0) k = &towers[i];
    if (!k) /* hf_vision_model_type names no other */
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: vision model_type \"%s\"", config->path, type);
    ra_rope_config rope;
    RA_HF_TRY(ra_hf_vision_rope_config(config, &rope));
    const int64_t layer = options->layer;
    RA_HF_TRY(check_windows(config, options));
    char prefix[256];
    RA_HF_TRY(find_module(ckpt, k, layer, prefix, sizeof prefix));
    t->layer = layer;
    t->layout = rope.layout;
    if (k->fused) {
        RA_HF_TRY(need(ckpt, prefix, "qkv.weight", &t->fused));
        RA_HF_TRY(need(ckpt, prefix, "qkv.bias", &t->fused_bias));
        RA_HF_TRY(need(ckpt, prefix, "proj.weight", &t->proj[PROJ_O]));
        RA_HF_TRY(need(ckpt, prefix, "proj.bias", &t->bias[PROJ_O]));
    } else {
        for (int p = 0; p < N_PROJ; p++) {
            char part[32];
            snprintf(part, sizeof part, "%s.weight", split_names[p]);
            RA_HF_TRY(need(ckpt, prefix, part, &t->proj[p]));
            snprintf(part, sizeof part, "%s.bias", split_names[p]);
            if (k->biases) RA_HF_TRY(need(ckpt, prefix, part, &t->bias[p]));
        }
    }
    RA_HF_TRY(refuse_others(ckpt, prefix, t));
    const ra_st_tensor *wo = t->proj[PROJ_O];
    if (wo->ndim != 2 || wo->shape[0] != wo->shape[1] || wo->shape[0] % rope.head_dim != 0)
        return hf_fail(RA_ERR_SHAPE, "%s: tensor '%s' is not [dim, dim] with dim a multiple "
                       "of the vision encoder's head_dim %lld", ckpt->path, wo->name,
                       (long long)rope.head_dim);
    const int64_t dim = wo->shape[0];
    int64_t width = k->default_width;
    char key[64];
    snprintf(key, sizeof key, "/vision_config/%s", k->width_key);
    ra_status st = ra_hf_config_int(config, key, &width);
    if (st != RA_OK && st != RA_ERR_NOT_FOUND) return st;
    hf_reset(); /* absent: the class default, no failure */
    if (width != dim)
        return hf_fail(RA_ERR_SHAPE, "%s: tensor '%s' is [%lld, %lld]; vision_config's %s is "
                       "%lld", ckpt->path, wo->name, (long long)dim, (long long)dim,
                       k->width_key, (long long)width);
    if (k->fused) {
        t->packing = FUSED_ROWS;
        RA_HF_TRY(hf_split_fused(t, ckpt->path, dim, dim));
    }
    RA_HF_TRY(check_shapes(ckpt->path, t, dim, dim));
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = dim;
    lc.head_dim = rope.head_dim;
    lc.n_heads = lc.n_kv_heads = dim / rope.head_dim;
    lc.non_causal = 1;
    /* a window layer: its calls' documents are windows, none larger */
    int64_t vws, m;
    if (options->vision_windows)
        RA_HF_TRY(hf_vision_window_size(config, &lc.max_document, &vws, &m));
    return hf_layer_from_tensors(l, ckpt, config, NULL, t, &lc, &rope);
}
