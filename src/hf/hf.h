/*
 * hf.h — inside libropeattn_hf (include/ropeattn_hf.h): the opened
 * checkpoint and config, the attention tensors of one layer, and how
 * failures are reported (hf_fail: one sentence for ra_hf_last_error).
 */
#ifndef RA_HF_H
#define RA_HF_H

#include <stddef.h>
#include <stdint.h>

#include "hf/fields.h"
#include "io/io.h"
#include "ropeattn_hf.h"

#if defined(__GNUC__)
#define RA_HF_PRINTF __attribute__((format(printf, 2, 3)))
#else
#define RA_HF_PRINTF
#endif

/* Records the sentence for the calling thread's ra_hf_last_error and
 * returns status; hf_reset empties it (each public function's first step). */
ra_status hf_fail(ra_status status, const char *format, ...) RA_HF_PRINTF;
void hf_reset(void);

#define RA_HF_TRY(expr)                                 \
    do {                                                \
        ra_status ra_hf_try_status_ = (expr);           \
        if (ra_hf_try_status_ != RA_OK) return ra_hf_try_status_; \
    } while (0)

/* The caller's options (NULL: the defaults), checked, into out (ours);
 * max_position filled in from the tokens when -1 (stays -1, unknown,
 * without them). */
ra_status hf_options_read(ra_hf_options *out, const ra_hf_options *options);

struct ra_hf_checkpoint {
    char *path;       /* as given (a copy) */
    ra_safetensors **files;
    char **paths;     /* each file's path */
    int64_t n;
};

struct ra_hf_config {
    ra_hf_fields fields; /* config.json's keys (its rope object moved to rope) */
    ra_hf_rope rope;     /* the rope object: the config's, or the one set */
    const char *path;    /* names the config in messages: its path, or "config" */
    char *owned_path;
    double theta;        /* ra_hf_config_set_rope_theta; 0: not set */
    int64_t max_position_embeddings; /* ra_hf_config_set_...; 0: not set */
    int rope_parameters_set;         /* ra_hf_config_set_rope_parameters was called */
};

/* ---- one layer's attention tensors (checkpoint.c) ------------------------ */

enum { PROJ_Q, PROJ_K, PROJ_V, PROJ_O, N_PROJ };

/* Latent attention's tensors besides o_proj (proj[PROJ_O]), as
 * transformers' DeepseekV3Attention names them: q_proj, or q_a_proj,
 * q_a_layernorm and q_b_proj; kv_a_proj_with_mqa, kv_a_layernorm,
 * kv_b_proj. */
enum { MLA_Q, MLA_Q_A, MLA_Q_A_NORM, MLA_Q_B, MLA_KV_A, MLA_KV_A_NORM, MLA_KV_B,
       MLA_K_ROPE_NORM /* dots.note's k_rope_only_layernorm */, N_MLA };

typedef struct attention_tensors {
    const ra_st_tensor *proj[N_PROJ]; /* wq, wk, wv, wo; inside the mapping */
    const ra_st_tensor *bias[N_PROJ]; /* their biases ("...bias"); NULL: none */
    const ra_st_tensor *norm[2];      /* q_norm, k_norm weights; NULL: none */
    /* Persimmon's q_layernorm.weight and .bias (k_layernorm's), one
     * LayerNorm shared by the heads; NULL: none. */
    const ra_st_tensor *layer_norm[2], *layer_norm_bias[2];
    const ra_st_tensor *sinks;        /* gpt-oss's attention sinks [H] (or under
                                         HF_SINKS_ALIASES); NULL: none */
    const ra_st_tensor *o_norm;       /* BitNet's attn_sub_norm [H * D]; NULL: none */
    const ra_st_tensor *gate;         /* AfMoE's gate_proj.weight, Laguna's g_proj.weight;
                                         NULL: none */
    const ra_st_tensor *gate_bias;    /* Beam's gate_bias [H]; NULL: none */
    /* StableLM 2's LayerNorm per head, q_layernorm.norms.N.weight and
     * k_layernorm.norms.N.weight for N = 0, 1 ... (n_head_norms[i] of each;
     * the arrays are owned here, NULL: none). */
    const ra_st_tensor **head_norms[2];
    int64_t n_head_norms[2];
    ra_layout layout;                 /* the layout the names imply */
    int64_t layer;                    /* the layer number in the names; -1: none */
    /* A fused projection and its bias (NULL otherwise), packed as
     * `packing` says.  proj[Q..V] and bias[Q..V] are NULL until
     * hf_split_fused points them at views of it: row ranges of it
     * (FUSED_ROWS), or (FUSED_GROUPED) descriptions of wq's, wk's and wv's
     * shapes only, with no data (the layer reads the fused weight). */
    const ra_st_tensor *fused, *fused_bias;
    fused_packing packing;
    ra_st_tensor views[4], bias_views[3]; /* views[3]: FUSED_GATE_ROWS's gate */
    /* Latent attention (mla set): its tensors and their biases (a norm has
     * none), NULL where absent; proj[PROJ_Q .. PROJ_V] are NULL. */
    int mla;
    const ra_st_tensor *latent[N_MLA], *latent_bias[N_MLA];
    /* RA_HF_VALUES_FROM_KEYS (set by hf_layer_config): the layer has no
     * v_proj; proj[PROJ_V] and bias[PROJ_V] are k_proj's. */
    int values_from_keys;
    /* v_proj's features per key/value head where fewer than head_dim
     * (RA_HF_V_HEAD_DIM: the layer pads each value head with zeros), else 0 */
    int64_t v_head_dim;
} attention_tensors;

/* The tensor called name in whichever of the checkpoint's files holds it
 * (*file: its index, when file is not NULL), or NULL. */
const ra_st_tensor *hf_find_tensor(const ra_hf_checkpoint *ckpt, const char *name,
                                   int64_t *file);

/* The other names a family's checkpoints may give the sinks tensor
 * (transformers renames it to sinks on loading, for the family whose row
 * names it: ra_hf_family.sinks_alias). */
#define HF_SINKS_ALIASES {"softmax_offset", "attention_sink_bias"}

/* Finds the projections of layer `layer` (-1: the files must name a single
 * layer, or none), their biases and q and k norms, and checks that the
 * attention module holds nothing else: under the family's names (its row's
 * names, else the common ones of checkpoint.c; family NULL, a file without
 * a config: those and every family's); stack not NULL: layer `layer` of
 * that stack, model.<stack>.layers.N.self_attn.'s names only
 * (RA_HF_LAYER_STACKS); with the family's RA_HF_MLA, latent attention's
 * tensors instead, and with RA_HF_INDEXER_TOPK, an indexer's tensors are
 * let be (the layer is refused where it would need them). */
ra_status hf_find_attention(const ra_hf_checkpoint *ckpt, int64_t layer, const char *stack,
                            const ra_hf_family *family, attention_tensors *out);
void hf_tensors_free(attention_tensors *t); /* head_norms */

/* Points proj[Q..V] (and bias[Q..V]) at views of the fused tensor, as
 * t->packing says: q_rows of wq and kv_rows each of wk and wv, in place. */
ra_status hf_split_fused(attention_tensors *t, const char *path, int64_t q_rows,
                         int64_t kv_rows);

/* How a fused query_key_value packs q, k and v by the config's family, for
 * n_heads query heads.  Falcon (FalconAttention): new_decoder_architecture,
 * per group of num_kv_heads; else multi_query, all q rows and one key and
 * value head; else per head ([H, 3, D]).  ChatGLM: multi_query_attention,
 * all q rows and multi_query_group_num key and value heads; else per head.
 * GPT-NeoX (RA_HF_QKV_PER_HEAD): per head.  Another family (or none: hf
 * NULL) is refused, naming the tensor (in the file at path). */
ra_status hf_config_packing(const ra_hf_fields *hf, const char *config_path, const char *tensor,
                            const char *path, int64_t n_heads, fused_packing *packing,
                            int64_t *n_kv_heads);

/* The layer number text[0, len) spells in canonical decimal (no sign, no
 * leading zero but "0" itself, at most INT32_MAX), else -1. */
int64_t hf_layer_number(const char *text, size_t len);

/* Converts t (F32, F16, BF16 or F64) into dst (t->count floats). */
ra_status hf_load_f32(const ra_st_tensor *t, const char *path, float *dst);

/* ---- block-FP8 weights (fp8.c) ------------------------------------------ */

/* The dtype t's values take in a layer: an F8_E4M3 tensor's, with a
 * quantization_config, the config's torch_dtype; any other tensor's own. */
ra_st_dtype hf_value_dtype(const ra_st_tensor *t, const ra_hf_quant *q);

/* Checks tensor t of a layer against the config's quantization q (matrix:
 * t is a projection matrix, the only kind that may be quantized) and finds
 * its scale: an F8_E4M3 t needs q, q's dtype, a module not in
 * modules_to_not_convert and t's "weight_scale_inv" beside it (F32 or BF16,
 * [ceil(out / bo), ceil(in / bi)], finite), which *scale points at; any
 * other t must have no scale beside it (*scale NULL).  Fails naming the
 * tensor. */
ra_status hf_fp8_check(const ra_hf_checkpoint *ckpt, const ra_hf_quant *q, const ra_st_tensor *t,
                       int matrix, const ra_st_tensor **scale);

/* t (checked by hf_fp8_check) dequantized into dst, t->count values of
 * dtype to: q->dtype's 16-bit values, or (RA_F32) them widened.  Fails,
 * naming the element, on a NaN code or a value beyond q->dtype's range. */
ra_status hf_fp8_dequantize(const ra_st_tensor *t, const ra_st_tensor *scale,
                            const ra_hf_quant *q, const char *path, ra_dtype to, void *dst);

/* ---- rope (rope.c) ------------------------------------------------------- */

/* head_dim from the config: head_dim, else hidden_size /
 * num_attention_heads (transformers' rule); 0 when neither is there. */
int64_t hf_config_head_dim(const ra_hf_fields *c);

/* The rope of layer `layer` (-1: any), for head_dim, the length dynamic
 * and longrope scale by (0: max_position + 1) and the largest position the
 * layer is given (-1: not known); the layout is left to the caller
 * (interleaved). */
ra_status hf_rope(const ra_hf_config *config, int64_t layer, int64_t head_dim, int64_t seq_len,
                  int64_t max_position, ra_rope_config *out);

/* A family with RA_HF_POSITION_Q_SCALING: out's temperature (the floor,
 * scale and no offset) from layer `layer`'s rope parameters; nothing in
 * other families. */
ra_status hf_position_q_scaling(const ra_hf_config *config, int64_t layer, ra_layer_config *out);

/* ---- the layer (layer_config.c, layer.c) --------------------------------- */

/* RoFormer: a sinusoidal table the checkpoint saves (its model's or a bare
 * RoFormerModel's encoder.embed_positions.weight) must be the formula's
 * for head_dim (hf/roformer_table.c); none saved: RA_OK (transformers
 * computes it). */
ra_status hf_check_roformer_table(const ra_hf_checkpoint *ckpt, const ra_hf_config *config,
                                  int64_t head_dim);

/* The layer from its tensors t (found, fused ones split), its config and
 * rope (layer_config->rope is replaced by rope_config): the tensor list and
 * slots, the loaded weights (block-FP8 as config's quantization_config
 * says; family NULL: none of a family's changes to them), then
 * ra_layer_create (layer.c). */
/* 1: created with ra_hf_options.token_types (hf/layer.c) */
int hf_layer_token_types(const ra_hf_layer *l);
ra_status hf_layer_from_tensors(ra_hf_layer *l, const ra_hf_checkpoint *ckpt,
                                const ra_hf_config *config, const ra_hf_family *family,
                                attention_tensors *t, const ra_layer_config *layer_config,
                                const ra_rope_config *rope_config);

/* ra_hf_layer_create with options->vision: the attention layer
 * options->layer of the config's vision encoder (vision.c). */
ra_status hf_vision_build(ra_hf_layer *l, const ra_hf_checkpoint *ckpt,
                          const ra_hf_config *config, const ra_hf_options *options,
                          attention_tensors *t);

/* The vision encoder's model_type (its kind, as ra_hf_vision_rope_config
 * reads it: "pixtral", "qwen2_vl_vision", "qwen2_5_vl_vision",
 * "llama4_vision_model") into *model_type, a static string; refused as
 * there (rope_vision.c). */
ra_status hf_vision_model_type(const ra_hf_config *config, const char **model_type);

/* *windowed 1 where vision layer `layer` attends inside windows
 * (Qwen2.5-VL's layers not in fullatt_block_indexes), else 0
 * (vision_windows.c). */
ra_status hf_vision_layer_windowed(const ra_hf_config *config, int64_t layer, int *windowed);

/* The most patches a window of the config's qwen2_5_vl_vision encoder
 * holds, (window_size // m // patch_size)^2 m^2 with m its
 * spatial_merge_size (INT64_MAX where that does not fit), into *patches (NULL: not),
 * the window's side in merged units (vws) into *vws and m into *m; the
 * keys checked, as ra_hf_vision_windows names them (vision_windows.c). */
ra_status hf_vision_window_size(const ra_hf_config *config, int64_t *patches, int64_t *vws,
                                int64_t *m);

/* The layer's config and its rope's (out->rope points at rope) from the
 * tensors t of the checkpoint at path (their fused weight split, if any),
 * the config and the options (read by hf_options_read). */
ra_status hf_layer_config(const ra_hf_config *config, const ra_hf_options *options,
                          const char *path, attention_tensors *t, ra_layer_config *out,
                          ra_rope_config *rope);

/* RA_HF_KV_SHARED_LAYERS (Gemma 3n, 4): RA_ERR_UNSUPPORTED, naming
 * num_kv_shared_layers, for a layer that takes its keys and values from an
 * earlier layer's; RA_OK for any other (layer -1: not known). */
ra_status hf_check_kv_shared(const ra_hf_config *config, int64_t layer);

/* Fails saying that the number of query heads is not known: the config
 * (one read from a file or text) lacks num_attention_heads, or none was
 * given; the caller gave no n_heads either. */
ra_status hf_no_query_heads(const ra_hf_config *config);

/* The output gate from a projection of its own (gate.c): t->gate where
 * the family has one (out->gated_output, gate_per_head set), and nowhere
 * else, checked against out's n_heads and dim and head_features, the
 * output's features per head (head_dim; v_head_dim with latent attention). */
ra_status hf_gate_config(const ra_hf_fields *hf, const attention_tensors *t, const char *path,
                         int64_t head_features, ra_layer_config *out);

/* The same for latent attention's tensors (t->mla; layer_mla.c). */
ra_status hf_mla_config(const ra_hf_config *config, const ra_hf_options *options,
                        const char *path, const attention_tensors *t, ra_layer_config *out,
                        ra_rope_config *rope);

#endif
