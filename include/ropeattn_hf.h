/*
 * ropeattn_hf.h — Hugging Face checkpoints for ropeattn: open a .safetensors
 * file or a sharded checkpoint's model.safetensors.index.json, read
 * config.json, and build the attention layer of layer N exactly as the
 * `ropeattn attention` command does (it calls these functions).  The
 * library is libropeattn_hf (pkg-config ropeattn-hf, CMake
 * ropeattn::ropeattn_hf); it needs libropeattn and cJSON.
 *
 * What it reads: the attention weights of every naming scheme docs/FAMILIES.md's
 * family table lists (Meta's LLaMA names, Hugging Face's q_proj ... o_proj
 * under any of their prefixes, Phi's dense, Phi-3's fused qkv_proj, GPT-J,
 * GPT-NeoX, Falcon, InternLM2, ChatGLM, DeepSeek's latent attention), in
 * F32, F16, BF16 or F64, or block-FP8 (F8_E4M3 projections with their
 * weight_scale_inv and config.json's quantization_config, quant_method
 * "fp8": dequantized at load as transformers does, into its torch_dtype), with
 * their biases and q/k norms; config.json's model_type, head counts,
 * head_dim, rope (every rope type: default, linear, dynamic, yarn, llama3,
 * longrope), softmax scale and the keys that change attention.  A key, a
 * tensor or a family whose effect on attention ropeattn does not run is
 * refused, naming it: a checkpoint is run exactly or not at all.
 *
 * Conventions: as ropeattn.h (statuses, struct_size, argument order); each
 * failing call leaves a sentence for ra_hf_last_error() that names the file,
 * the tensor or the key.  Files are read as hostile input: every size and
 * offset is checked before use.  The opened objects are read-only after
 * creation (a config's overrides are set before it is shared), so threads
 * may build layers from one checkpoint and config at once.  JSON (config.json,
 * a safetensors header, a sharded index, rope parameters) is parsed by cJSON,
 * which keeps its last error in a process-wide variable: open checkpoints
 * and configs, and set rope parameters, on one thread at a time.
 *
 * Typical use:
 *
 *   ra_hf_checkpoint *ckpt;  ra_hf_config *config;  ra_hf_layer *layer;
 *   ra_hf_checkpoint_open(&ckpt, "model.safetensors.index.json");
 *   ra_hf_config_open(&config, "config.json");
 *   ra_hf_options o = ra_hf_options_init();
 *   o.layer = 3;            // model.layers.3.self_attn.*
 *   o.n_tokens = 4096;      // the longest sequence it will see (its rope)
 *   if (ra_hf_layer_create(&layer, ckpt, config, &o) != RA_OK)
 *       fprintf(stderr, "%s\n", ra_hf_last_error());
 *   ra_layer_forward(ctx, ra_hf_layer_get(layer), y, x, B, S, NULL, NULL);
 *   ra_hf_layer_destroy(layer);  ra_hf_config_close(config);
 *   ra_hf_checkpoint_close(ckpt);   // the layer has its own weights
 */
#ifndef ROPEATTN_HF_H
#define ROPEATTN_HF_H

#include "ropeattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RA_BUILDING_HF_LIBRARY) && defined(__GNUC__)
#define RA_HF_API __attribute__((visibility("default")))
#else
#define RA_HF_API
#endif

/* What the calling thread's last call of this library that failed found
 * wrong ("model.safetensors: tensor 'model.layers.0.self_attn.sinks'
 * belongs to the attention layer and ropeattn does not use it ..."); "" after
 * a call that succeeded.  Each thread has its own; never NULL. */
RA_HF_API const char *ra_hf_last_error(void);

/* ---- model families ---------------------------------------------------- */

/* The model families ropeattn knows by config.json's model_type (the table
 * docs/FAMILIES.md gives; `ropeattn families` prints it): how many, and for
 * i in [0, count), sorted by model_type, the i-th one's model_type, its rope
 * layout (an ra_layout: how q_proj's and k_proj's rows pair) and why
 * ropeattn refuses it ("" where it runs it).  An i out of range gives NULL
 * (layout: -1).  A model_type missing from the table is refused where its
 * config describes attention. */
RA_HF_API int64_t ra_hf_family_count(void);
RA_HF_API const char *ra_hf_family_model_type(int64_t i);
RA_HF_API int ra_hf_family_layout(int64_t i);
RA_HF_API const char *ra_hf_family_refused(int64_t i);

/* ---- checkpoints ------------------------------------------------------- */

/* The .safetensors files of a checkpoint: the one at path, or, when path
 * ends in ".json", every shard its index's weight_map names (in the index's
 * folder).  The files are mapped read-only; no tensor name may be in two. */
typedef struct ra_hf_checkpoint ra_hf_checkpoint;

RA_HF_API ra_status ra_hf_checkpoint_open(ra_hf_checkpoint **out, const char *path);
RA_HF_API void ra_hf_checkpoint_close(ra_hf_checkpoint *ckpt); /* NULL is allowed */
/* The files it opened (1 unless sharded), and each one's path. */
RA_HF_API int64_t ra_hf_checkpoint_file_count(const ra_hf_checkpoint *ckpt);
RA_HF_API const char *ra_hf_checkpoint_file_path(const ra_hf_checkpoint *ckpt, int64_t i);

/* Any tensor of the checkpoint, for an engine that loads the rest of the
 * model itself (embeddings, norms, MLPs) and so needs no second safetensors
 * reader.  Tensors are numbered 0 .. count - 1 over the files in order;
 * each file's in the order its header lists them.  Names are NUL-terminated
 * copies of the file's (a name holding \u0000 is refused at open). */
RA_HF_API int64_t ra_hf_checkpoint_tensor_count(const ra_hf_checkpoint *ckpt);
RA_HF_API const char *ra_hf_checkpoint_tensor_name(const ra_hf_checkpoint *ckpt,
                                                   int64_t i); /* NULL out of range */

/* A tensor as stored.  Pointers are into ckpt (data: its read-only
 * mapping, not aligned in general): valid until ra_hf_checkpoint_close.
 * Fields added later go at the end; the library writes at most struct_size
 * bytes. */
typedef struct ra_hf_tensor {
    size_t struct_size; /* sizeof(ra_hf_tensor): ra_hf_tensor_init() */
    const char *name;
    const char *dtype;  /* safetensors' name: "F32", "F16", "BF16", "F64",
                           "I8" .. "U64", "BOOL", "F8_E4M3", "F8_E5M2" */
    int64_t ndim;       /* 0 .. 8 */
    int64_t shape[8];   /* shape[ndim ..] are 0 */
    int64_t count;      /* the product of shape (1 for ndim 0) */
    const void *data;   /* count elements, little-endian, row-major */
    size_t nbytes;      /* count * the dtype's size */
    const char *file;   /* the path of the file that holds it */
} ra_hf_tensor;

/* The size of the first published ra_hf_tensor. */
#define RA_HF_TENSOR_SIZE_V1 128

static inline ra_hf_tensor ra_hf_tensor_init(void)
{
    ra_hf_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    return t;
}

/* The tensor called name (exactly; the names ra_hf_checkpoint_tensor_name
 * gives): RA_ERR_NOT_FOUND when no file holds it. */
RA_HF_API ra_status ra_hf_checkpoint_tensor(const ra_hf_checkpoint *ckpt, const char *name,
                                            ra_hf_tensor *out);

/* The values of tensor name converted to float32 into dst, which holds
 * count floats, count being the tensor's (else RA_ERR_SIZE): F32 as it is,
 * F16 and BF16 exactly, F64 rounded to nearest, a finite F64 value beyond
 * float32's range refused (RA_ERR_FORMAT) as the layer's loader does.
 * Other dtypes are RA_ERR_DTYPE: read their bytes (ra_hf_checkpoint_tensor;
 * block-FP8 weights need their weight_scale_inv).  dst is written only on
 * success. */
RA_HF_API ra_status ra_hf_checkpoint_read_f32(const ra_hf_checkpoint *ckpt, const char *name,
                                              float *dst, int64_t count);
/* Where a checkpoint's files are, as transformers' from_pretrained finds
 * them in a folder: path a folder gives its model.safetensors, else its
 * model.safetensors.index.json (RA_ERR_NOT_FOUND with neither); any other
 * path is the weights as given (for ra_hf_checkpoint_open to open or
 * refuse).  config: the config.json in the weights' folder where that is
 * a file, else "" (nothing is opened).  weights and config are buffers of
 * size bytes each (RA_ERR_SIZE when a path does not fit); "" on failure. */
RA_HF_API ra_status ra_hf_checkpoint_find(const char *path, char *weights, char *config,
                                          size_t size);

/* ---- config.json ------------------------------------------------------- */

/* The keys of a config.json that attention needs (a multimodal model's
 * text_config's), checked against what its model_type's attention does. */
typedef struct ra_hf_config ra_hf_config;

RA_HF_API ra_status ra_hf_config_open(ra_hf_config **out, const char *path);
/* From text (len bytes, need not end in NUL); "{}" is a config that says
 * nothing (theta 10000, heads from the options and the tensors). */
RA_HF_API ra_status ra_hf_config_parse(ra_hf_config **out, const char *json, size_t len);
RA_HF_API void ra_hf_config_close(ra_hf_config *config); /* NULL is allowed */
/* model_type (text_config's when it has one); "" when absent. */
RA_HF_API const char *ra_hf_config_model_type(const ra_hf_config *config);

/* Any key of config.json, for an engine that reads the rest of the model
 * itself (num_hidden_layers, vocab_size, tie_word_embeddings, rms_norm_eps
 * ...) and so needs no second JSON reader.  key is a top-level key by name
 * ("vocab_size"), or, starting with '/', a JSON Pointer (RFC 6901) into
 * nested objects and arrays: "/text_config/num_hidden_layers" (a
 * multimodal model's text model is not looked up for you),
 * "/eos_token_id/0"; in a pointer "~1" stands for '/' in a key and "~0" for
 * '~' (anything else after '~' is RA_ERR_ARGUMENT).  The values are the
 * file's as written: the overrides set below do not show.  A key held twice
 * in one object is RA_ERR_FORMAT.
 *
 * ra_hf_config_kind tells whether the key is there and what it holds. The
 * getters fail with RA_ERR_NOT_FOUND when the key is absent or null (so a
 * null reads as "not set", as transformers' None) and RA_ERR_FORMAT when it
 * holds another kind of value: ra_hf_config_int an integer of magnitude
 * below 2^53 (every integer JSON spells exactly; 4096.0 counts, 4096.5 does
 * not), ra_hf_config_double any finite number, ra_hf_config_bool true,
 * false, 1 or 0 (as Python's truth reads them; the library's own flags take
 * true and false only where transformers' strict config classes do),
 * ra_hf_config_string a string
 * (valid while config is open), ra_hf_config_length the elements of an
 * array or the keys of an object.  *out is written only on success. */
typedef enum ra_hf_value_kind {
    RA_HF_ABSENT = 0,
    RA_HF_NULL,
    RA_HF_BOOL,
    RA_HF_NUMBER,
    RA_HF_STRING,
    RA_HF_ARRAY,
    RA_HF_OBJECT
} ra_hf_value_kind;

RA_HF_API ra_status ra_hf_config_kind(const ra_hf_config *config, const char *key,
                                      ra_hf_value_kind *out);
RA_HF_API ra_status ra_hf_config_int(const ra_hf_config *config, const char *key, int64_t *out);
RA_HF_API ra_status ra_hf_config_double(const ra_hf_config *config, const char *key,
                                        double *out);
RA_HF_API ra_status ra_hf_config_bool(const ra_hf_config *config, const char *key, int *out);
RA_HF_API ra_status ra_hf_config_string(const ra_hf_config *config, const char *key,
                                        const char **out);
RA_HF_API ra_status ra_hf_config_length(const ra_hf_config *config, const char *key,
                                        int64_t *out);

/* Overrides, as the tool's flags: a rope_scaling / rope_parameters object
 * (JSON text, len bytes) replacing the config's (and the rope a family
 * gives its sliding layers), its missing keys taken from the config's top
 * level; the rope base of every layer, theta (> 0, finite); and
 * max_position_embeddings (> 0). */
RA_HF_API ra_status ra_hf_config_set_rope_parameters(ra_hf_config *config, const char *json,
                                                     size_t len);
RA_HF_API ra_status ra_hf_config_set_rope_theta(ra_hf_config *config, double theta);
RA_HF_API ra_status ra_hf_config_set_max_position_embeddings(ra_hf_config *config,
                                                             int64_t max_position_embeddings);

/* ---- what config.json says of attention ---------------------------------- */

/* For a program that reads a checkpoint's tensors itself (`ropeattn rope`,
 * `freqs` and `convert-layout` do): what the config says of a layer's
 * heads and rope, as the layer built by ra_hf_layer_create reads it.
 * Fields added later go at the end; the library writes at most struct_size
 * bytes.  "-1" in a layer_ field: the config does not say for that layer
 * (layer -1, "any layer", in a model whose layers differ; or a layer its
 * per-layer list does not name). */
typedef struct ra_hf_attention_info {
    size_t struct_size; /* sizeof(ra_hf_attention_info): ra_hf_attention_info_init() */
    /* num_attention_heads (or its model_type's default) and
     * num_key_value_heads (multi_query: 1; absent: num_attention_heads);
     * 0: the config does not say */
    int64_t n_heads, n_kv_heads;
    /* head_dim, else hidden_size / num_attention_heads (transformers'
     * rule); 0: neither; head_dim_given: 1 where it is config.json's
     * head_dim (or its family's name for it) */
    int64_t head_dim, head_dim_given;
    /* the layer's own query heads (num_attention_heads_per_layer), else
     * n_heads; its own head size and key/value heads (per_layer_config),
     * else 0 (the config's hold) */
    int64_t layer_n_heads, layer_head_dim, layer_n_kv_heads;
    /* the ra_layout in which the model_type's rope pairs q's and k's
     * features; -1: no model_type the library knows (none given) */
    int64_t layout;
    /* 1: the model's rotary embedding gives cos and sin as cat(t, t) over
     * the rotated features, the form rotate_half takes (also with no
     * model_type); 0: it arranges them otherwise */
    int64_t cos_sin_halves;
    /* 1: q_proj gives each query head head_dim rows of queries, then
     * head_dim rows of an output gate ([n_heads, 2, head_dim] rows) */
    int64_t gated_queries;
    /* 1: the layer has no v_proj, its values are k_proj's
     * (attention_k_eq_v); -1: not said for that layer */
    int64_t values_from_keys;
    /* 1: latent attention (q_a_proj, kv_a_proj_with_mqa ...: DeepSeek's) */
    int64_t latent;
    /* > 0: the model's KV cache keeps the last cache_window - 1 tokens
     * while its mask lets a query see every earlier one (transformers'
     * cache for that model_type), so that generation through the cache
     * differs from the whole sequence from token cache_window on; 0 */
    int64_t cache_window;
    /* 3: the rope takes 3-D positions (temporal, height, width:
     * mrope_section, in any layer's rope); 1: one position a token */
    int64_t position_components;
} ra_hf_attention_info;

/* The size of the first published ra_hf_attention_info. */
#define RA_HF_ATTENTION_INFO_SIZE_V1 120

static inline ra_hf_attention_info ra_hf_attention_info_init(void)
{
    ra_hf_attention_info a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    return a;
}

/* What config says of layer `layer` (its number in the checkpoint's names;
 * -1: any layer) into *out. */
RA_HF_API ra_status ra_hf_config_attention(const ra_hf_config *config, int64_t layer,
                                           ra_hf_attention_info *out);

/* The rope base the config gives (rope_theta: its rope parameters', its
 * top level's, or ra_hf_config_set_rope_theta's) into *theta;
 * RA_ERR_NOT_FOUND where it gives none (the rope then turns by 10000). */
RA_HF_API ra_status ra_hf_config_rope_theta(const ra_hf_config *config, double *theta);

/* How many of each q and k head's head_dim features (rows of q_proj and
 * k_proj) the rope pairs, in every layer: int(head_dim *
 * partial_rotary_factor), GPT-J's rotary_dim, an odd count rounded up
 * where the model_type's rope does so, and head_dim for the proportional
 * rope (whose last pairs do not turn).  RA_ERR_UNSUPPORTED where the
 * config's full and sliding layers pair different counts (a rope per layer
 * type), RA_ERR_HEAD_DIM where the count is odd or 0. */
RA_HF_API ra_status ra_hf_config_rotary_dim(const ra_hf_config *config, int64_t head_dim,
                                            int64_t *rotary_dim);

/* How a fused q, k, v projection whose packing the config decides
 * (query_key_value: Falcon's, GPT-NeoX's, ChatGLM's) packs its rows, for
 * n_heads query heads (> 0): RA_HF_QKV_ROWS, all of q's rows, then k's,
 * then v's; RA_HF_QKV_GROUPED, per key/value head its query heads' rows,
 * then its key's, then its value's; RA_HF_QKV_QVK_GROUPS (CodeGen's
 * qkv_proj), 4 model-parallel groups of rows, each a quarter of the heads'
 * q rows, then their v rows, then their k rows.  *n_kv_heads: the
 * key/value heads it holds.  config NULL, or a model_type that packs none
 * so, is refused naming tensor and file (the file that holds it, for the
 * message). */
enum { RA_HF_QKV_ROWS = 1, RA_HF_QKV_GROUPED = 2, RA_HF_QKV_QVK_GROUPS = 3 };
RA_HF_API ra_status ra_hf_config_qkv_packing(const ra_hf_config *config, const char *tensor,
                                             const char *file, int64_t n_heads,
                                             int64_t *packing, int64_t *n_kv_heads);

/* The layer a tensor's name numbers, by its first "layers.N." part
 * (name's start or after a '.'), into *layer; -1 where it has none.
 * RA_ERR_FORMAT where N is digits and signs but not a layer number in
 * canonical decimal (007, +1, -1, beyond INT32_MAX, empty). */
RA_HF_API ra_status ra_hf_tensor_layer(const char *name, int64_t *layer);

/* ---- what to build ----------------------------------------------------- */

/* Every field is 8 bytes (no padding a newer field could hide in); fields
 * added later take 0 as "not used". */
typedef struct ra_hf_options {
    size_t struct_size; /* sizeof(ra_hf_options) */
    /* The layer (its number in the checkpoint's names; a model whose two
     * stacks of layers run in cycles, HRM-Text's: its cache slot, 0 ..
     * num_hidden_layers - 1, as transformers numbers them); -1: the
     * checkpoint names one layer only, or none (a file of one layer's
     * tensors).  For
     * ra_hf_rope_config: -1 is any layer (a config whose layers have
     * different ropes is then refused). */
    int64_t layer;
    int64_t n_heads;    /* 0: the config's; at most INT32_MAX (as n_kv_heads, head_dim) */
    int64_t n_kv_heads; /* 0: the config's, else wk's rows / head_dim */
    /* 0: the config's (head_dim, else hidden_size / n_heads), else wq's
     * rows / n_heads; the weights' shapes must agree with it (latent
     * attention's: qk_nope_head_dim + qk_rope_head_dim) */
    int64_t head_dim;
    int64_t layout;     /* -1: the names' and family's; else an ra_layout */
    /* The tokens the layer will run on, as their places in the sequence:
     * [first_token, first_token + n_tokens); n_tokens 0: unknown.  They
     * size the rope (max_position below), and bound the keys a query sees:
     * first_token + n_tokens, else max_position + 1.  A family with a
     * sparse-attention indexer (deepseek_v32, glm_moe_dsa: index_topk;
     * qwen4_exp: indexer_budget + indexer_compress_ratio - 1;
     * minimax_m3_vl_text's sparse layers: index_topk_blocks *
     * index_block_size) needs that bound and at most that many keys (the
     * indexer then keeps them all: the dense layer); its
     * ra_layer_config.max_keys is that many,
     * so that every call of the layer on more keys is refused
     * (RA_ERR_UNSUPPORTED). */
    int64_t first_token, n_tokens;
    /* The largest position id the layer will be given (its rope tables;
     * dynamic and longrope scale by max_position + 1 unless seq_len says
     * otherwise); -1: first_token + n_tokens - 1, unknown when n_tokens is
     * 0 (dynamic and longrope then need seq_len). */
    int64_t max_position;
    int64_t seq_len;  /* > 0: the current length dynamic and longrope scale by */
    /* 1: the caller gives position ids (ra_positions.ids), not start
     * positions; Llama 4's NoPE layers, which scale q by each token's place
     * in the sequence, are then refused. */
    int64_t position_ids;
    /* 1: the attention layer `layer` of the config's vision encoder
     * (vision_config: Pixtral's, Qwen2-VL's, Qwen2.5-VL's, Llama 4's), not
     * of its text model: bidirectional (ra_layer_config.non_causal), its
     * 2-D rope (ra_hf_vision_rope_config; the call gives
     * ra_positions.axial_ids, and Qwen's packed images as the options'
     * cu_seqlens); n_heads, n_kv_heads, head_dim, layout, first_token,
     * seq_len and position_ids are refused with it (RA_ERR_UNSUPPORTED),
     * n_tokens and max_position unused, and ra_hf_rope_config refuses it
     * (the rope is ra_hf_vision_rope_config's).  Its
     * tensors: Pixtral's vision_tower.transformer.layers.N.attention.
     * {q,k,v,o}_proj, Qwen's visual.blocks.N.attn.qkv (q's rows, k's, v's)
     * and .proj, with biases, Llama 4's vision_model.model.layers.N.
     * self_attn.{q,k,v,o}_proj with biases, each under "model." too
     * (docs/FAMILIES.md "Vision encoders").  Qwen2.5-VL's window-attention
     * layers need vision_windows below. */
    int64_t vision;
    /* 1: the layer without the causal mask whatever its family says (a
     * decoder's layer run as an encoder's: `attention --no-causal`); a
     * layer with a sliding window is then refused (its family defines no
     * window both ways).  0: as the config's model_type says (the encoders,
     * ModernBERT, ESM-2, RoFormer, have none). */
    int64_t non_causal;
    /* 1: a Gemma 3 text layer (model_type "gemma3", whose Gemma3Model reads
     * token_type_ids) for calls whose tokens carry token_type_ids (image
     * blocks attend bidirectionally inside each block): the causal layer,
     * window and all (a call without a mask is a text-only one, as
     * transformers' without token_type_ids), and ra_hf_token_type_mask
     * makes a call's whole mask (options' attn_mask with non_causal).
     * Other model_types and vision: RA_ERR_UNSUPPORTED. */
    int64_t token_types;
    /* 1: with vision, the caller states that it runs a window-attention
     * layer (Qwen2.5-VL's layers not in vision_config's
     * fullatt_block_indexes: ra_hf_vision_layer_windowed) as transformers'
     * tower does: on the patches in window order, with
     * ra_hf_vision_windows' positions as ra_positions.axial_ids and its
     * cu_window_seqlens as the options' cu_seqlens.  Its
     * ra_layer_config.max_document is the largest window's patches,
     * (window_size // spatial_merge_size // patch_size)^2
     * spatial_merge_size^2: a call without documents, or with one longer
     * (whole frames, a full layer's), is refused (RA_ERR_ARGUMENT naming
     * max_document); windows of the wrong images are the caller's to
     * avoid.  A window layer without it is refused (RA_ERR_UNSUPPORTED, naming
     * vision_windows), as is vision_windows on any other layer (a full
     * one attends over whole frames; RA_ERR_ARGUMENT) and without vision
     * (RA_ERR_ARGUMENT). */
    int64_t vision_windows;
} ra_hf_options;

/* The size of the first published ra_hf_options. */
#define RA_HF_OPTIONS_SIZE_V1 88

static inline ra_hf_options ra_hf_options_init(void)
{
    ra_hf_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.layer = -1;
    o.layout = -1;
    o.max_position = -1;
    return o;
}

/* The rope of the config (and of options->layer): type, theta, rotary_dim
 * = int(head_dim * partial_rotary_factor) (GPT-J: rotary_dim), the scaling
 * parameters, each key the type needs checked; layout the option's, else
 * the family's, else rotate_half's for a config (Hugging Face's pairs) and
 * interleaved for config NULL (Meta's).  out->short_factor and long_factor point into
 * config: keep it open until ra_rope_create (which copies them). */
RA_HF_API ra_status ra_hf_rope_config(const ra_hf_config *config, const ra_hf_options *options,
                                      ra_rope_config *out);

/* The 2-D rope of the config's vision encoder (its vision_config), as
 * transformers builds it (docs/ROPE.md "2-D RoPE"): Pixtral's (vision
 * model_type pixtral: Llava's and Mistral 3's), Qwen2-VL's and Qwen2.5-VL's
 * (qwen2_vl, qwen2_5_vl), Llama 4's (llama4_vision_model): axial, layout,
 * theta (the rope object's rope_theta, else vision_config's, else 10000)
 * and head_dim (the vision encoder's width / its heads: hidden_size or
 * embed_dim / num_attention_heads or num_heads, their class defaults where
 * absent).  The positions are the caller's (ra_positions.axial_ids); the
 * grid is vision_config's image_size / patch_size (ra_hf_config_int).
 * Refused, naming the key: no vision_config (RA_ERR_NOT_FOUND), another
 * vision model_type, a rope type or rope key besides rope_theta, a
 * head_dim that is not width / heads, partial_rotary_factor
 * (RA_ERR_UNSUPPORTED), a head_dim not a multiple of 4 (RA_ERR_HEAD_DIM). */
RA_HF_API ra_status ra_hf_vision_rope_config(const ra_hf_config *config, ra_rope_config *out);

/* Qwen2.5-VL's window attention (docs/FAMILIES.md "Vision encoders").
 * transformers' Qwen2_5_VisionTransformerPretrainedModel permutes its
 * patches into window order once, before its first block (window_index, in
 * groups of spatial_merge_size^2 patches), and every block runs on them in
 * that order: the layers in vision_config's fullatt_block_indexes (default
 * [7, 15, 23, 31]) with each frame of each image as a document (its
 * cu_seqlens: t documents of h w patches per image, the same boundaries in
 * window order), the others, window layers, with each window as a
 * document (cu_window_seqlens).
 *
 * ra_hf_vision_layer_windowed: *windowed 1 where vision layer `layer` of
 * the config's vision encoder is a window layer, 0 for every other layer
 * (and every layer of the other vision encoders).
 *
 * ra_hf_vision_windows: for the images grid_thw [n_images, 3] (t, h, w in
 * patches, as transformers' grid_thw; h and w multiples of
 * spatial_merge_size m), what vision_utils.get_vision_window_index and
 * get_vision_position_ids give, read from vision_config's window_size
 * (default 112), patch_size (14) and spatial_merge_size (2):
 *   counts[0]          N = sum t h w, the patches
 *   counts[1]          G = N / m^2, window_index's entries
 *   counts[2]          W, the windows (empty ones dropped, as
 *                      unique_consecutive drops their repeats)
 *   window_index       [G]: transformers' window_index, the group (of m^2
 *                      consecutive patches, in the processor's order) at
 *                      each place of the window order: patch p of the
 *                      window order is window_index[p / m^2] m^2 + p % m^2
 *   cu_window_seqlens  [W + 1]: 0, then where each window ends, in patches
 *   positions          [N, 2]: each patch's (row, column) in window order
 *                      (get_vision_position_ids permuted as the rotary
 *                      embeddings are), for ra_positions.axial_ids
 * Windows are vws x vws merged units, vws = window_size // m // patch_size,
 * row-major over each frame's grid of h / m x w / m units and row-major
 * inside (those past the frame's edge dropped: transformers' -100 padding).
 * Call it once with the three arrays NULL for the counts, then with arrays
 * of those sizes (any of them NULL: not written), counts on entry saying
 * them: where an array is given, counts[0], [1] and [2] must hold at least
 * these images' counts (positions [counts[0], 2], window_index
 * [counts[1]], cu_window_seqlens [counts[2] + 1]), else RA_ERR_SIZE
 * naming the array, nothing written.  Refused: a vision
 * encoder other than qwen2_5_vl_vision (RA_ERR_UNSUPPORTED), vws 0
 * (RA_ERR_UNSUPPORTED: transformers divides by it), a key that is not a
 * positive integer (RA_ERR_FORMAT), n_images < 1, t, h or w < 1, h or w
 * not a multiple of m, more than INT32_MAX patches (RA_ERR_ARGUMENT). */
RA_HF_API ra_status ra_hf_vision_layer_windowed(const ra_hf_config *config, int64_t layer,
                                                int64_t *windowed);
RA_HF_API ra_status ra_hf_vision_windows(const ra_hf_config *config, const int64_t *grid_thw,
                                         int64_t n_images, int64_t counts[3],
                                         int64_t *window_index, int64_t *cu_window_seqlens,
                                         int64_t *positions);

/* ---- layers ------------------------------------------------------------ */

/* An attention layer built from a checkpoint's tensors, holding its own
 * copy of the weights (a fused q/k/v weight of GPT-NeoX's kind stays
 * fused: ra_layer_weights.wqkv).  The projection matrices keep their
 * stored dtype where they all are BF16 or all F16 (ra_layer_weights.dtype;
 * not for latent attention), block-FP8 ones counting as the config's
 * torch_dtype they are dequantized to; otherwise, and for every bias and
 * norm, the copy is float32.  Gradients (ra_hf_grads) are float32 always. */
typedef struct ra_hf_layer ra_hf_layer;

/* config may be NULL (a config that says nothing).  Fails, naming what,
 * when the tensors' shapes disagree with the config or each other, when
 * the attention module holds a tensor ropeattn does not use (gpt-oss's
 * sinks), or when the config asks for attention ropeattn does not run. */
RA_HF_API ra_status ra_hf_layer_create(ra_hf_layer **out, const ra_hf_checkpoint *ckpt,
                                       const ra_hf_config *config, const ra_hf_options *options);
RA_HF_API void ra_hf_layer_destroy(ra_hf_layer *layer); /* NULL is allowed */
/* The layer.  Where the model family's RoPE turns by the opposite angle
 * (rotate_half cat(x2, -x1): nanochat) its wq and wk (bq, bk) are the
 * checkpoint's with the second feature of each rotary pair negated, and so
 * are its q and k and the keys a KV cache holds: the outputs are the
 * model's, and ra_hf_grads_tensor gives the checkpoint tensors' gradients. */
RA_HF_API const ra_layer *ra_hf_layer_get(const ra_hf_layer *layer);

/* Gemma 3's attention mask over tokens with token_type_ids, as
 * transformers' Gemma3Model forms it (get_block_sequence_ids_for_mask,
 * create_masks_for_vision_model), for a layer created with
 * ra_hf_options.token_types; mask [batch, 1, seq, seq] RA_BOOL (1 = may
 * attend), the call's whole mask: give it as the call's options' attn_mask
 * with non_causal set (ra_layer_forward: the layer's causal mask is then
 * not applied, the mask has it; the window still bounds the earlier keys,
 * as it does in the mask, and a layer made with token_types refuses an
 * attn_mask without non_causal).  An image block is a maximal
 * run of token_type_ids == 1 in a row (any other value is text; two runs
 * apart by one text token are two blocks).  Query i of row b sees key j when
 *   (j <= i  or  i and j are in the same image block)
 *   and (full layer, or j > i - W: the layer's sliding_window W)
 *   and (padding NULL or padding[b, j] != 0)
 * that is, full layers OR(causal, block); sliding layers
 * AND(window, OR(causal, block)): inside a block a query sees every later
 * key of its block, the window bounding only the keys before it (a block
 * longer than W included).  padding [batch, seq] is Hugging Face's
 * attention_mask (nonzero: a token), on the keys as transformers'
 * padding_mask_function; a query that sees no key gets a zero row
 * (ra_attention_options).  token_type_ids [batch, seq].  Not token_types:
 * RA_ERR_ARGUMENT.  Text-only calls (decode steps: transformers' generate
 * passes no token_type_ids after the prefill) need no mask: the layer is
 * Gemma 3's causal one, window and all. */
RA_HF_API ra_status ra_hf_token_type_mask(const ra_hf_layer *layer, const int64_t *token_type_ids,
                                          const uint8_t *padding, int64_t batch, int64_t seq,
                                          uint8_t *mask);

/* The mask of a cached call (ra_layer_forward_cached_mask, non_causal set)
 * after past tokens: its seq queries are tokens past .. past + seq - 1 of
 * each row, its keys tokens 0 .. past + seq - 1, under the rule above
 * (transformers' chunked prefill: each chunk's mask from the token_type_ids
 * of the whole sequence so far; a block cut by a chunk's end is
 * bidirectional within each chunk, the later chunk seeing the earlier
 * one's part).  token_type_ids and padding [batch, past + seq] (every
 * token so far); mask [batch, 1, seq, past + seq].  past 0 is
 * ra_hf_token_type_mask. */
RA_HF_API ra_status ra_hf_token_type_mask_cached(const ra_hf_layer *layer,
                                                 const int64_t *token_type_ids,
                                                 const uint8_t *padding, int64_t batch,
                                                 int64_t past, int64_t seq, uint8_t *mask);

/* The checkpoint tensors it was built from, in the order weights, biases,
 * q/k norms: name and shape (ndim ≤ 8 dims into shape).  The gradient of
 * tensor i is ra_hf_grads_tensor's i. */
RA_HF_API int64_t ra_hf_layer_tensor_count(const ra_hf_layer *layer);
RA_HF_API const char *ra_hf_layer_tensor_name(const ra_hf_layer *layer, int64_t i);
RA_HF_API int ra_hf_layer_tensor_shape(const ra_hf_layer *layer, int64_t i, int64_t shape[8]);

/* Gradient buffers for ra_layer_backward laid out as the checkpoint's
 * tensors, zeroed: ra_hf_grads_get gives the ra_layer_grads to pass (copy
 * it to set accumulate), and tensor i's gradient is the float32 array
 * ra_hf_grads_tensor(g, i) of tensor i's shape (a fused qkv_proj's, for
 * example, one array as stored; under RoPE by the opposite angle, q's and
 * k's a copy this call makes: call it after the backward; where the layer
 * takes its values from k_proj (attention_k_eq_v: Gemma 4's full layers,
 * which have no v_proj; the layer's wv is wk), k_proj's: this call adds the
 * values' gradient, ra_layer_grads' dwv and dbv, into dwk and dbk, in
 * place, and zeroes them).  Destroy it before its layer. */
typedef struct ra_hf_grads ra_hf_grads;

RA_HF_API ra_status ra_hf_grads_create(ra_hf_grads **out, const ra_hf_layer *layer);
RA_HF_API void ra_hf_grads_destroy(ra_hf_grads *grads); /* NULL is allowed */
RA_HF_API const ra_layer_grads *ra_hf_grads_get(const ra_hf_grads *grads);
RA_HF_API const float *ra_hf_grads_tensor(const ra_hf_grads *grads, int64_t i);

#ifdef __cplusplus
}
#endif

#endif /* ROPEATTN_HF_H */
