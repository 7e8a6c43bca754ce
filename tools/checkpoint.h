/*
 * checkpoint.h — finds the four attention projections of one layer in a
 * .safetensors checkpoint, whichever of the common naming schemes it uses,
 * with their biases (Qwen2: q_proj.bias ...) and q/k norms (Qwen3:
 * q_norm.weight, k_norm.weight; StableLM 2: q_layernorm.norms.N.weight)
 * where it has them, and converts them to float32.
 *
 * Names tried (N is the layer number given by --layer):
 *   Meta's LLaMA reference code      wq.weight  wk.weight  wv.weight  wo.weight,
 *                                    attention.wq.weight, layers.N.attention.wq.weight
 *   Hugging Face Llama               q_proj.weight  k_proj.weight  v_proj.weight
 *                                    o_proj.weight, also under self_attn.,
 *                                    model.layers.N.self_attn., layers.N.self_attn.,
 *                                    and a multimodal model's language_model
 *   Phi-1, Phi-2                     dense.weight as the output
 *   Phi-3                            qkv_proj.weight (fused), o_proj.weight
 *   GPT-J                            transformer.h.N.attn.{q,k,v,out}_proj.weight
 *   GPT-NeoX, Pythia                 gpt_neox.layers.N.attention.query_key_value
 *                                    (fused, per head), attention.dense
 *   Falcon                           transformer.h.N.self_attention.query_key_value
 *                                    (fused as the config says), dense
 *   InternLM2                        model.layers.N.attention.wqkv (fused per
 *                                    key/value head), wo
 *   ChatGLM 2, 3, GLM-4 (remote)     transformer.encoder.layers.N.self_attention.
 *                                    query_key_value (fused as the config says),
 *                                    dense
 * Meta's names imply the interleaved RoPE layout; Hugging Face names the half
 * layout (its conversion permutes the rows of wq and wk).  A sharded
 * checkpoint is given by its model.safetensors.index.json: the tensors are
 * looked up in every shard it names.
 */
#ifndef RA_TOOLS_CHECKPOINT_H
#define RA_TOOLS_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "io/io.h"

enum { PROJ_Q, PROJ_K, PROJ_V, PROJ_O, N_PROJ };

/* How a fused q/k/v weight packs its rows. */
typedef enum fused_packing {
    FUSED_NONE,
    FUSED_ROWS,    /* all of q's rows, then k's, then v's: Phi-3's qkv_proj,
                      Falcon's multi-query query_key_value */
    FUSED_GROUPED, /* per key/value head, its query heads' rows, then its
                      key's, then its value's: GPT-NeoX ([H, 3, D]), Falcon's
                      new_decoder_architecture, InternLM2's wqkv; the layer
                      reads it as it is (ra_layer_weights.wqkv) */
    FUSED_BY_CONFIG, /* one of the two, as the config says (Falcon's and
                        ChatGLM's query_key_value): the caller sets packing */
} fused_packing;

typedef struct attention_tensors {
    const ra_st_tensor *proj[N_PROJ]; /* wq, wk, wv, wo; inside the mapping */
    const ra_st_tensor *bias[N_PROJ]; /* their biases ("...bias"); NULL: none */
    const ra_st_tensor *norm[2];      /* q_norm, k_norm weights; NULL: none */
    /* StableLM 2's LayerNorm per head, q_layernorm.norms.N.weight and
     * k_layernorm.norms.N.weight for N = 0, 1 ... (n_head_norms[i] of each;
     * the arrays are owned here, NULL: none). */
    const ra_st_tensor **head_norms[2];
    int64_t n_head_norms[2];
    ra_layout layout;                 /* the layout the names imply */
    int64_t layer;                    /* the layer number in the names; -1: none */
    /* A fused projection and its bias (NULL otherwise), packed as
     * `packing` says.  proj[Q..V] and bias[Q..V] are NULL until
     * checkpoint_split_fused points them at views of it: row ranges of it
     * (FUSED_ROWS), or (FUSED_GROUPED) descriptions of wq's, wk's and wv's
     * shapes only, with no data (the layer reads the fused weight). */
    const ra_st_tensor *fused, *fused_bias;
    fused_packing packing;
    ra_st_tensor views[3], bias_views[3];
} attention_tensors;

/* The .safetensors files of a checkpoint: the one at path, or, when path
 * ends in ".json", each shard its index names (beside it).  No tensor name
 * may be in two of them. */
typedef struct checkpoint_files {
    const char *path; /* as given */
    ra_safetensors **files;
    char **paths; /* each file's path */
    int64_t n;
} checkpoint_files;

/* On failure prints one message and returns EXIT_FAIL (*out then holds
 * nothing to close). */
int checkpoint_files_open(checkpoint_files *out, const char *path);
void checkpoint_files_close(checkpoint_files *files); /* zeroes it */

/* Finds the projections of layer `layer` (-1: the files must name a single
 * layer, or none), their biases and the q and k norms (q_norm.weight,
 * k_norm.weight beside q_proj.weight).  A per-layer wq name whose layer
 * number is not canonical decimal (007, +1, beyond int64, empty) is refused,
 * naming it.  On failure prints one message naming the checkpoint's path and
 * returns EXIT_FAIL. */
int checkpoint_find_attention(const checkpoint_files *files, int64_t layer,
                              attention_tensors *out);

/* Points proj[Q..V] (and bias[Q..V]) at views of the fused tensor, as
 * t->packing says: q_rows of wq and kv_rows each of wk and wv, in place
 * (no copy).  On a fused tensor of another shape prints one message and
 * returns EXIT_FAIL. */
int checkpoint_split_fused(attention_tensors *t, const char *path, int64_t q_rows,
                           int64_t kv_rows);
void checkpoint_tensors_free(attention_tensors *t); /* head_norms */

/* How a fused query_key_value packs q, k and v by the config's family, for
 * n_heads query heads.  Falcon (FalconAttention): new_decoder_architecture,
 * per group of num_kv_heads; else multi_query, all q rows and one key and
 * value head; else per head ([H, 3, D]).  ChatGLM: multi_query_attention,
 * all q rows and multi_query_group_num key and value heads; else per head.
 * GPT-NeoX: per head.  Sets *packing and *n_kv_heads; a config of another
 * family (or none: hf NULL) prints one message naming the tensor and
 * returns EXIT_FAIL. */
int checkpoint_config_packing(const ra_hf_config *hf, const char *config_path,
                              const char *tensor, const char *path, int64_t n_heads,
                              fused_packing *packing, int64_t *n_kv_heads);

/* Norm i (0: q, 1: k) as float32: norm[i], else the head_norms[i] one after
 * another; *out NULL (and 0) when the layer has none.  On failure prints one
 * message and returns EXIT_FAIL. */
int checkpoint_load_norm(const attention_tensors *t, int i, const char *path, float **out);

/* The layer number text[0, len) spells in canonical decimal (no sign, no
 * leading zero but "0" itself, within int64), else -1. */
int64_t checkpoint_layer_number(const char *text, size_t len);

/* Converts t (F32, F16, BF16 or F64) to a new float32 buffer of t->count
 * elements; free() it.  On failure prints one message and returns EXIT_FAIL. */
int checkpoint_load_f32(const ra_st_tensor *t, const char *path, float **out);

#endif
