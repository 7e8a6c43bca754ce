/*
 * fields.h — inside libropeattn_hf: a Hugging Face config.json read into
 * the fields attention needs (fields.c), its rope_scaling /
 * rope_parameters object (rope_params.c), its sliding-window keys
 * (fields_window.c), its quantization_config (fields_quant.c) and its model
 * family: one row per model_type (families.c), the one home of what
 * ropeattn knows of each family.  The file formats below it (JSON, npy,
 * safetensors) are src/io's.
 *
 * Threads: as io.h says of cJSON (its parser's error position is a
 * process-wide variable): parse on one thread.
 */
#ifndef RA_HF_FIELDS_H
#define RA_HF_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "io/io.h"
#include "ropeattn.h"

/* ---- rope parameters (rope_scaling / rope_parameters) ----------------- */

/* A Hugging Face rope_scaling or rope_parameters object, as the library's
 * types.  Keys (null counts as absent; unknown keys are ignored):
 *   rope_type or type (rope_type wins): default, linear, dynamic, yarn,
 *     llama3, longrope ("su", Phi-3's old name, means longrope), mrope
 *     (default, has_mrope set), proportional (default, proportional set)
 *   rope_theta, partial_rotary_factor (transformers v5 nests them here)
 *   factor, original_max_position_embeddings, attention_factor, beta_fast,
 *   beta_slow, mscale, mscale_all_dim, truncate (false sets
 *   params.yarn_no_truncate), low_freq_factor, high_freq_factor,
 *   short_factor, long_factor (arrays of numbers), short_mscale, long_mscale
 *   (Phi-3.5-MoE's), llama_4_scaling_beta (Ministral 3's); mrope_section (3
 *   integers >= 0) and mrope_interleaved (true, false) into
 *   params.mrope_section and params.mrope_interleaved
 * Each value must have the right kind; a wrong one is RA_ERR_FORMAT with a
 * message naming the key.  Whether the keys a type needs are all there is
 * not checked here (a config.json may supply them at its top level). */
typedef struct ra_hf_rope {
    ra_rope_type type;             /* RA_ROPE_DEFAULT when absent */
    double theta;                  /* rope_theta */
    double partial_rotary_factor;  /* in (0, 1] */
    ra_rope_config params;         /* the scaled types' parameters (factor ..
                                      long_factor; the other fields are not
                                      set).  short_factor / long_factor point
                                      at the arrays below; seq_len and
                                      max_position_embeddings stay 0 */
    double *short_factor, *long_factor; /* owned (malloc'ed) or NULL */
    int64_t n_short_factor, n_long_factor;
    int has_type, has_theta, has_partial_rotary_factor, has_factor,
        has_original_max_position_embeddings, has_attention_factor, has_beta_fast,
        has_beta_slow, has_mscale, has_mscale_all_dim, has_truncate,
        has_low_freq_factor, has_high_freq_factor, has_short_factor, has_long_factor;
    int has_mrope; /* rope type "mrope" (Qwen2-VL): default rope in 3-D sections;
                      with text (1-D) positions it is the default rope */
    int has_mrope_section, has_mrope_interleaved;
    double short_mscale, long_mscale; /* read only with RA_HF_LONGROPE_MSCALE (Phi-3.5-MoE) */
    int has_short_mscale, has_long_mscale;
    double llama_4_scaling_beta; /* used only with RA_HF_POSITION_Q_SCALING (Ministral 3) */
    int has_llama_4_scaling_beta;
    /* rope type "proportional" (Gemma 4's full layers; type is then
     * RA_ROPE_DEFAULT): every pair of head_dim, the first
     * int(partial_rotary_factor * head_dim // 2) turning by base^(-2i /
     * head_dim) / factor (factor absent: 1), the others not (hf/rope.c) */
    int proportional;
} ra_hf_rope;

/* Parses one JSON object (len bytes, need not be NUL-terminated), e.g. the
 * value of --rope-parameters.  Messages start "rope parameters: ".  On
 * failure *out is zeroed.  Free with ra_hf_rope_free. */
ra_status ra_hf_rope_parse(const char *json, size_t len, ra_hf_rope *out, char *msg,
                           size_t msg_len);
/* Frees the factor arrays and zeroes *rope; NULL allowed. */
void ra_hf_rope_free(ra_hf_rope *rope);
/* "default", "linear", ...; "unknown" for a value out of range. */
const char *ra_hf_rope_type_name(ra_rope_type type);

/* ---- config.json ------------------------------------------------------- */

/* A layer's kind of attention in a config's layer_types. */
typedef enum ra_hf_layer_type {
    RA_HF_FULL_ATTENTION,    /* "full_attention" */
    RA_HF_SLIDING_ATTENTION, /* "sliding_attention" */
    RA_HF_CHUNKED_ATTENTION, /* "chunked_attention" (Llama 4) */
    RA_HF_OTHER_ATTENTION,   /* any other name */
} ra_hf_layer_type;

/* Which sliding-window keys a family's config class reads in transformers,
 * and how it picks the sliding layers (without layer_types, where it reads
 * them): its row in families.c.  "Gated": only with use_sliding_window,
 * which defaults to false; a config class without it ignores it. */
typedef enum ra_hf_windows {
    RA_HF_WINDOWS_NONE,        /* its model reads no window (Llama, Gemma ...) */
    RA_HF_WINDOWS_AS_WRITTEN,  /* no model_type: layer_types, else use_sliding_window
                                  from max_window_layers on, else every layer */
    RA_HF_WINDOWS_EVERY_LAYER, /* Mixtral, Phi-3, Starcoder2: every layer */
    RA_HF_WINDOWS_LAYER_TYPES, /* Mistral (AutoConfig reads a Mistral config with
                                  layer_types as Ministral), Ministral: layer_types,
                                  else every layer */
    RA_HF_WINDOWS_PATTERN,     /* Gemma 2, 3, gpt-oss, OLMo 3: layer_types, else
                                  layer i unless (i + 1) % sliding_window_pattern == 0 */
    RA_HF_WINDOWS_GATED_FROM_MAX, /* Qwen2, Qwen3, Qwen2-VL: layer_types, else gated,
                                     the layers from max_window_layers on */
    RA_HF_WINDOWS_GATED_EVEN_BELOW_MAX, /* Qwen2-MoE: layer_types, else gated, the even
                                           layers (0, 2, ...) below max_window_layers */
    RA_HF_WINDOWS_GATED_EVERY_LAYER, /* Qwen3-MoE: gated, every layer */
    RA_HF_WINDOWS_GATED_NO_ROPE, /* SmolLM3: layer_types, else gated, the layers without
                                    RoPE */
    RA_HF_WINDOWS_LISTED, /* Cohere 2 MoE, Flint, Granite SWA, Kolibri: layer_types; without it
                             refused (the config class derives it by a formula of its own; the
                             configs it saves list it) */
    RA_HF_WINDOWS_FULL_EVERY_FOURTH, /* CWM: layer_types, else layers 0, 4, 8 ... full and
                                        the others sliding */
    RA_HF_WINDOWS_LISTED_ELSE_NONE, /* Mellum: layer_types, else no layer slides */
    RA_HF_WINDOWS_FROM_MAX,    /* Dots1: layer_types, else the layers from max_window_layers
                                  on (not gated) */
    RA_HF_WINDOWS_GLOBAL_EVERY_N, /* ModernBERT: layer_types, else layer i slides unless
                                     i % global_attn_every_n_layers == 0 (default 3) */
    RA_HF_WINDOWS_FULL_EVERY_THIRD, /* UltraBERT: layer_types, else layers 2, 5, 8 ... full
                                       and the others sliding */
} ra_hf_windows;

/* The keys from which transformers decides which layers see only a sliding
 * window of earlier tokens, and the family's rule for them.  A key that is
 * absent or null is 0 (its has_* tells which were present). */
typedef struct ra_hf_window {
    ra_hf_windows rule;         /* set from the family once it is known */
    int64_t sliding_window;     /* tokens a sliding layer sees (itself included) */
    int use_sliding_window;     /* Qwen2: 0 turns the window off */
    int64_t max_window_layers;  /* Qwen2: layers before this one see everything */
    int64_t sliding_window_pattern; /* Gemma 3: without layer_types, layer i slides
                                       unless (i + 1) is a multiple of it */
    int64_t global_every_n;     /* ModernBERT's global_attn_every_n_layers (>= 1), 0: absent */
    unsigned char *layer_types; /* [n_layer_types] ra_hf_layer_type; owned; or NULL */
    int64_t n_layer_types;
    const struct cJSON *layer_type_names; /* layer_types as written (the config's
                                             tree, borrowed), or NULL */
    int has_sliding_window, has_use_sliding_window, has_max_window_layers, has_layer_types,
        has_sliding_window_pattern;
    int zero_window; /* sliding_window 0 beside use_sliding_window false (no window,
                        as Qwen2MoeConfig saves it): only a gated rule reads it so */
    /* layer_types derived from another key (RA_HF_BLOCK_TYPES): that key, and the name of
     * every layer of another kind; NULL: layer_types as written */
    const char *kinds_key, *other_kind;
} ra_hf_window;

/* Whether layer `layer` slides (1) or sees every earlier token (0) by the
 * family's rule; -1 when the keys do not say: layer -1 (not known, as when
 * a checkpoint's names carry no layer number) and the layers differ, a
 * layer past the end of layer_types, or one of another kind there.
 * no_rope: whether the layer runs without RoPE (SmolLM3's rule). */
int ra_hf_layer_slides(const ra_hf_window *window, int64_t layer, int no_rope);

/* The sliding window of layer `layer`: the number of tokens it sees,
 * itself included; 0 when it sees every earlier token; -1 as above. */
int64_t ra_hf_layer_window(const ra_hf_window *window, int64_t layer, int no_rope);

/* The key for which transformers would not run the config's windows as
 * they read, or NULL: "layer_types" when the family's model ignores a
 * layer_types that disagrees with its rule for this layer (-1: any layer),
 * "use_sliding_window" when layer_types gives a gated family's layer a
 * window with the gate off (transformers then has no window to give it),
 * "sliding_window_pattern" when it is null (or a string) and the family's
 * formula needs it, "sliding_window" when a sliding layer has none (null:
 * transformers' mask builder raises), "no layer_types" when the family's
 * rule is RA_HF_WINDOWS_LISTED and the config has none. */
const char *ra_hf_window_conflict(const ra_hf_window *window, int64_t layer, int no_rope);

/* The name layer_types gives layer `layer` where it is not softmax
 * attention (not full_attention, sliding_attention nor chunked_attention:
 * "linear_attention", "mamba", "conv" ...), else NULL. */
const char *ra_hf_layer_not_attention(const ra_hf_window *window, int64_t layer);

/* Whether layer_types names layer `layer` chunked_attention. */
int ra_hf_layer_chunked(const ra_hf_window *window, int64_t layer);

/* ---- model families ----------------------------------------------------- */

/* What a family's attention has beyond the Llama layer, that ropeattn runs:
 * bits of ra_hf_family.features. */
typedef unsigned __int128 ra_hf_features; /* 128 bits (gcc and clang) */
#define RA_HF_BIT(n) ((ra_hf_features)1 << (n))
/* attention_multiplier is the softmax scale (Granite) */
#define RA_HF_ATTENTION_MULTIPLIER RA_HF_BIT(0)
/* the scale is query_pre_attn_scalar^-1/2 (Gemma 2, 3) */
#define RA_HF_PRE_ATTN_SCALAR RA_HF_BIT(1)
/* q and k norms scale by 1 + weight (Gemma 3, Qwen3-Next) */
#define RA_HF_NORM_PLUS_ONE RA_HF_BIT(2)
/* sliding layers: rope_local_base_freq, no scaling */
#define RA_HF_LOCAL_ROPE RA_HF_BIT(3)
/* sliding_window_pattern (implied by the family's RA_HF_WINDOWS_PATTERN; set in the row of a
 * RA_HF_WINDOWS_LISTED family whose config class saves it) */
#define RA_HF_WINDOW_PATTERN RA_HF_BIT(4)
/* no_rope_layers[i] == 0: layer i has no RoPE */
#define RA_HF_NO_ROPE_LAYERS RA_HF_BIT(5)
/* M-RoPE: mrope_section, 3-D positions (Qwen2-VL, Qwen2.5-VL: chunked sections) */
#define RA_HF_MROPE RA_HF_BIT(6)
/* q_norm over all of q's H * D features (OLMo 2) */
#define RA_HF_NORM_OVER_PROJECTION RA_HF_BIT(7)
/* q_norm and k_norm tensors (Qwen3, Gemma 3, OLMo 2) */
#define RA_HF_QK_NORM RA_HF_BIT(8)
/* n_embd, n_head, n_positions, rotary_dim, rotary_pct, rotary_emb_base (GPT-J, GPT-NeoX):
 * other names of the fields */
#define RA_HF_ALIASES RA_HF_BIT(9)
/* clip_qkv clamps q, k, v (OLMo); q and k after the q/k norms where the family has them
 * (OLMoE) */
#define RA_HF_CLIP_QKV RA_HF_BIT(10)
/* rope_theta and rope_scaling are not read (GPT-J: base 10000; ChatGLM: 10000 * rope_ratio):
 * refused if given */
#define RA_HF_FIXED_ROPE RA_HF_BIT(11)
/* use_qk_norm: a LayerNorm per head, each head its own weights, q_norm.weight [H, D] (Cohere) */
#define RA_HF_USE_QK_NORM RA_HF_BIT(12)
/* qk_layernorm: a LayerNorm per head, q_layernorm.norms.N.weight [D] (StableLM 2) */
#define RA_HF_QK_LAYERNORM RA_HF_BIT(13)
/* multi_query (default true), new_decoder_architecture (default false) and num_kv_heads say how
 * query_key_value packs q, k and v (Falcon) */
#define RA_HF_QKV_BY_MULTI_QUERY RA_HF_BIT(14)
/* kv_channels is head_dim; with multi_query_attention, multi_query_group_num key/value heads
 * after all of q's rows in query_key_value, else one per query head, packed per head (ChatGLM 2,
 * 3, GLM-4's remote code) */
#define RA_HF_MULTI_QUERY_GROUPS RA_HF_BIT(15)
/* attention_chunk_size: the RoPE layers (or those layer_types names chunked_attention) attend
 * within chunks; layer_types names no other kind but full_attention (Llama 4) */
#define RA_HF_ATTENTION_CHUNKS RA_HF_BIT(16)
/* attn_logit_softcapping caps the logits (Gemma 2) */
#define RA_HF_SOFTCAP RA_HF_BIT(17)
/* a sinks tensor [H] beside q_proj (gpt-oss) */
#define RA_HF_SINKS RA_HF_BIT(18)
/* with RA_HF_MROPE: the sections interleaved, whatever mrope_interleaved says (Qwen3-VL's
 * apply_interleaved_mrope) */
#define RA_HF_MROPE_INTERLEAVED RA_HF_BIT(19)
/* multi-head latent attention: kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
 * v_head_dim (DeepSeek-V2, V3, Kimi K2) */
#define RA_HF_MLA RA_HF_BIT(20)
/* rope_interleave false: rotate_half pairs (DeepSeek-V3 in transformers) */
#define RA_HF_ROPE_INTERLEAVE RA_HF_BIT(21)
/* rope types default and longrope only, "su" and "yarn" read as longrope (Phi3Config) */
#define RA_HF_LONGROPE_ONLY RA_HF_BIT(22)
/* a fused query_key_value packs q, k and v per head, [H, 3, D], whatever the config says (GPT-
 * NeoX) */
#define RA_HF_QKV_PER_HEAD RA_HF_BIT(23)
/* rope_ratio: the base is 10000 * rope_ratio, over the first half of each head's features,
 * interleaved (original_rope true; ChatGLM) */
#define RA_HF_ROPE_RATIO RA_HF_BIT(24)
/* use_qk_norm (default true): q and k L2-normed after RoPE, in RoPE layers (Llama 4) */
#define RA_HF_QK_L2_NORM RA_HF_BIT(25)
/* attn_temperature_tuning (default true), floor_scale, attn_scale: NoPE layers scale q by each
 * token's place (Llama 4) */
#define RA_HF_TEMPERATURE_TUNING RA_HF_BIT(26)
/* an empty no_rope_layers is none given (Llama4TextConfig) */
#define RA_HF_EMPTY_NO_ROPE_LAYERS RA_HF_BIT(27)
/* rope types default and longrope only; longrope rotates by short_factor at every length and
 * scales cos and sin by short_mscale, or long_mscale past original_max_position_embeddings, in
 * place of its attention factor (Phi-3.5-MoE) */
#define RA_HF_LONGROPE_MSCALE RA_HF_BIT(30)
/* rope_parameters' llama_4_scaling_beta: in every layer q times 1 + beta log(1 + floor(position /
 * original_max_position_embeddings)), the rope object's (Ministral 3) */
#define RA_HF_POSITION_Q_SCALING RA_HF_BIT(31)
/* local_attention // 2 (default 128) is the sliding layers' window, whatever sliding_window says;
 * global_rope_theta and local_rope_theta (160000, 10000) the full and sliding layers' rope_theta
 * where rope_parameters (per layer type) lack one; every rope rotates all of head_dim
 * (ModernBERT's decoder) */
#define RA_HF_LOCAL_ATTENTION RA_HF_BIT(32)
/* the full-attention layers (by the family's window rule) run without RoPE, the sliding ones with
 * it (Cohere 2, Flint) */
#define RA_HF_NOPE_FULL_LAYERS RA_HF_BIT(37)
/* with RA_HF_NOPE_FULL_LAYERS: only while sliding_window is set; with it null every layer rotates
 * (EXAONE 4: "if self.sliding_window is None or self.is_sliding") */
#define RA_HF_NOPE_NEEDS_WINDOW RA_HF_BIT(38)
/* with RA_HF_NOPE_FULL_LAYERS: the layers mlp_layer_types names "dense" rotate too while
 * prefix_dense_sliding_window_pattern is 1 (Cohere 2 MoE's force_rope) */
#define RA_HF_ROPE_DENSE_LAYERS RA_HF_BIT(39)
/* layer_rope_theta (a rope base per layer, 0: no RoPE) read, run where every entry is rope_theta
 * (what the config class saves when none is given), else refused (Granite SWA) */
#define RA_HF_LAYER_ROPE_THETA RA_HF_BIT(40)
/* d_model, n_heads, max_seq_len for hidden_size, num_attention_heads, max_position_embeddings;
 * attn_config's kv_n_heads (default 1) and clip_qkv; attn_config's rope_theta, which transformers
 * 5 ignores (the rope is the top level's), refused where it differs from that (DBRX) */
#define RA_HF_NESTED_ATTN_CONFIG RA_HF_BIT(41)
/* gate_proj.weight [H * D, dim] beside q_proj, without a bias: the attention's output times
 * sigmoid(gate_proj(x)) before o_proj (AfMoE) */
#define RA_HF_GATE_PROJ RA_HF_BIT(42)
/* with RA_HF_MLA: v_head_dim absent or null is hidden_size / num_attention_heads (MiniCPM3) */
#define RA_HF_V_HEAD_DIM_FROM_HEADS RA_HF_BIT(43)
/* qk_layernorm (default true): q_layernorm and k_layernorm, one LayerNorm over head_dim with weight
 * and bias shared by the heads, q_layernorm.weight, q_layernorm.bias [D] (Persimmon) */
#define RA_HF_QK_LAYERNORM_BIAS RA_HF_BIT(44)
/* cross_attention_layers (absent or null: the row's default_cross_attention_layers): those
 * layers attend to another sequence (the vision encoder's states), and are refused by layer;
 * the others run (Mllama's text model) */
#define RA_HF_CROSS_ATTENTION_LAYERS RA_HF_BIT(28)
/* qkv_bias is another name for attention_bias (InternLM3Config's attribute_map) */
#define RA_HF_QKV_BIAS_NAME RA_HF_BIT(29)
/* q_proj gives each head its D query rows, then D gate rows ([2 H D, dim]); the attention's
 * output is multiplied by sigmoid(gate) before o_proj (Qwen3-Next's gated attention) */
#define RA_HF_GATED_OUTPUT RA_HF_BIT(45)
/* attn_layer_indices lists the attention layers; the others (all, without it) are Mamba layers,
 * refused (Bamba) */
#define RA_HF_ATTN_LAYER_INDICES RA_HF_BIT(46)
/* position_embedding_type "rope" turns RoPE on; any other value, null or absent: no RoPE
 * (GraniteMoeHybrid) */
#define RA_HF_ROPE_BY_EMBEDDING_TYPE RA_HF_BIT(47)
/* key_multiplier scales k (the softmax scale by it; Falcon-H1) */
#define RA_HF_KEY_MULTIPLIER RA_HF_BIT(48)
/* the q and k norms come after RoPE, on the rotated q and k, under the names
 * query_layernorm.weight and key_layernorm.weight (HunYuan-V1) */
#define RA_HF_NORM_AFTER_ROPE RA_HF_BIT(33)
/* attn_sub_norm.weight: an RMSNorm over each token's attention output, all its H * D features,
 * before o_proj (BitNet) */
#define RA_HF_O_NORM RA_HF_BIT(34)
/* use_qk_norm (default false) turns on RA_HF_QK_NORM's q_norm and k_norm, RMSNorms of
 * head_dim shared by the heads (GLM-4-MoE) */
#define RA_HF_QK_NORM_BY_KEY RA_HF_BIT(35)
/* rotary_dim, where the rope has no partial_rotary_factor, gives it as rotary_dim / head_dim
 * (MiniMax-M2's convert_rope_params_to_dict) */
#define RA_HF_ROTARY_DIM_FACTOR RA_HF_BIT(36)
/* the softmax scale is 1, whatever head_dim (scaling = 1.0 beside RMS-normed q and k: Gemma 3n,
 * 4) */
#define RA_HF_UNIT_SCALE RA_HF_BIT(49)
/* v_norm: each value head RMS-normed without weights, epsilon rms_norm_eps (Gemma 3n, 4) */
#define RA_HF_V_NORM RA_HF_BIT(50)
/* num_kv_shared_layers (and num_hidden_layers, each with the row's default): the last
 * num_kv_shared_layers layers take their keys and values from an earlier layer's (Gemma 3n, 4):
 * those layers refused, naming it; the others run */
#define RA_HF_KV_SHARED_LAYERS RA_HF_BIT(51)
/* an indexer (DeepSeek sparse attention's: index_topk, index_n_heads, index_head_dim, its
 * tensors under indexer.) keeps each query's index_topk best-scoring keys: while no query sees
 * more keys than that it keeps them all and the layer is the dense one, which runs (the
 * indexer's tensors read and ignored); beyond, refused (DeepSeek-V3.2) */
#define RA_HF_INDEXER_TOPK RA_HF_BIT(56)
/* with RA_HF_INDEXER_TOPK: indexer_types ("full", "shared": the layer reuses the previous full
 * layer's top-k, and has no indexer tensors), or index_topk_pattern, index_topk_freq and
 * index_skip_topk_offset that derive it (GLM-MoE-DSA) */
#define RA_HF_INDEXER_SHARED RA_HF_BIT(57)
/* sliding_window bounds only transformers' cache (DynamicCache's sliding layers), not its mask:
 * the layer sees every earlier token, and `attention --prefill` past the window, where
 * transformers' cached generation sees fewer, is refused (Moshi) */
#define RA_HF_CACHE_WINDOW RA_HF_BIT(53)
/* QSA's block-sparse indexer (indexer_n_heads, indexer_kv_heads, indexer_head_dim,
 * indexer_budget, indexer_compress_ratio, all required; its tensors under indexer.): each query
 * keeps whole blocks of indexer_compress_ratio of its keys, up to indexer_budget keys, and the
 * last incomplete block: while it sees fewer than indexer_budget + indexer_compress_ratio keys
 * it keeps them all and the layer is the dense one, which runs; beyond, refused (Qwen4-Exp) */
#define RA_HF_BLOCK_INDEXER RA_HF_BIT(88)
/* the layers layer_types names "minimax_m3_sparse" have an indexer (index_n_heads,
 * index_head_dim, index_block_size, index_topk_blocks, index_local_blocks): blocks of
 * index_block_size keys by place, index_topk_blocks of them kept per query: while it sees at
 * most index_topk_blocks * index_block_size keys it keeps them all (the dense layer, which
 * runs); beyond, refused; the other layers are dense (MiniMax-M3) */
#define RA_HF_SPARSE_LAYER_INDEXER RA_HF_BIT(89)
/* rotary_dim is read by no code: the rope rotates as rope_parameters says (MiniMax-M3 in
 * transformers 5.23) */
#define RA_HF_ROTARY_DIM_IGNORED RA_HF_BIT(90)
/* rope_parameters keyed by layer type ("full_attention", "sliding_attention"), each the default
 * rope over all of head_dim (M-RoPE's sections where the family has them) or null, that type's
 * layers without RoPE; a type the layers use and rope_parameters lacks refused (transformers'
 * KeyError) (Cohere Compass) */
#define RA_HF_ROPE_BY_LAYER_TYPE RA_HF_BIT(91)
/* head_dim is hidden_size / num_attention_heads whatever the config says (a head_dim that
 * differs refused) (Cohere Compass) */
#define RA_HF_HEAD_DIM_BY_HEADS RA_HF_BIT(92)
/* with RA_HF_MROPE_INTERLEAVED: the code's sections where mrope_section is absent are its own
 * ([11, 11, 10]), not Qwen3-VL's [24, 20, 20]: none taken (text positions run, 3-D ones need
 * mrope_section) (Qwen4-Exp) */
#define RA_HF_MROPE_OWN_DEFAULT RA_HF_BIT(93)
/* attn_logit_softcapping is read by no code: the attention module keeps it
 * (self.attn_logit_softcapping) and passes no softcap to any attention
 * function, eager, sdpa, flex or flash (transformers 5.23's
 * Gemma3Attention.forward): the logits are not capped (Gemma 3) */
#define RA_HF_SOFTCAP_IGNORED RA_HF_BIT(94)

/* Encoders (bits 52, 54): */
/* no causal mask: every token sees every other, a sliding layer those with |i - j| <=
 * sliding_window (transformers' bidirectional window: ra_layer_config.window sliding_window +
 * 1, non_causal) (RoFormer, ModernBERT, ESM-2) */
#define RA_HF_NON_CAUSAL RA_HF_BIT(52)
/* with RA_HF_NON_CAUSAL: is_decoder (default false) true keeps the causal mask (ESM, RoFormer) */
#define RA_HF_IS_DECODER_KEY RA_HF_BIT(55)
/* rotary_value (default false): RoPE on v too, as on k (ra_layer_config.rope_values; RoFormer) */
#define RA_HF_ROTARY_VALUE RA_HF_BIT(58)
/* position_embedding_type must be "rotary": absent, the config class's "absolute" (learned
 * position embeddings added to the tokens, no RoPE), or any other value refused (ESM) */
#define RA_HF_ROTARY_REQUIRED RA_HF_BIT(54)
/* norm_eps is rms_norm_eps, the q/k norms' epsilon (LFM2) */
#define RA_HF_NORM_EPS_KEY RA_HF_BIT(59)
/* the q/k norms (RA_HF_QK_NORM) are named q_layernorm.weight and k_layernorm.weight (LFM2) */
#define RA_HF_QK_LAYERNORM_NAMES RA_HF_BIT(60)
/* rotate_half is cat(x2, -x1), RoPE by the opposite angle: run as the usual RoPE on q and k with
 * the second feature of each rotary pair negated, in q_proj's and k_proj's rows and biases
 * (hf/layer.c; NanoChat) */
#define RA_HF_ROPE_OPPOSITE_ANGLE RA_HF_BIT(61)
/* with RA_HF_QK_L2_NORM: the norm always applies, use_qk_norm not read (NanoChat's model has
 * no such switch) */
#define RA_HF_QK_L2_NORM_ALWAYS RA_HF_BIT(62)
/* its config class fills the rope from rotary_emb_base and rotary_pct (else 10000 and its
 * default fraction), and a top-level rope_theta or partial_rotary_factor is never read: one
 * given without its other name is refused (GPT-NeoX, GPT-NeoX-Japanese in transformers 5) */
#define RA_HF_ROPE_NEOX_NAMES RA_HF_BIT(63)
/* gatefam's features (bits 72-79) */
/* two stacks of layers, L_module and H_module, run in cycles (H_cycles of L_cycles runs of the
 * L stack, then one of the H stack), each run of a layer a cache slot of its own: layer N is
 * cache slot N, run by model.{L,H}_module.layers.(N mod num_layers_per_stack) (fields_stacks.c;
 * HRM-Text) */
#define RA_HF_LAYER_STACKS RA_HF_BIT(72)
/* g_proj.weight beside q_proj, without a bias: the attention's output times softplus(g_proj(x))
 * before o_proj, one gate per head ([H, dim]) where gating is true or "per-head" (its default),
 * one per feature ([H * D, dim]) where it is false or "per-element" (fields_heads.c; Laguna) */
#define RA_HF_SOFTPLUS_G_PROJ RA_HF_BIT(73)
/* with RA_HF_GATE_PROJ: gate_bias [H] beside q_proj, one per head, added to each of the head's
 * gates before the sigmoid (Beam) */
#define RA_HF_GATE_BIAS RA_HF_BIT(74)
/* num_attention_heads_per_layer (null: num_attention_heads in every layer): each layer's query
 * heads (fields_heads.c; Laguna) */
#define RA_HF_HEADS_PER_LAYER RA_HF_BIT(75)
/* with RA_HF_LOCAL_ROPE: a layer type whose rope_parameters entry is null runs without RoPE, q
 * times (1 + (p + 1) / 2048)^0.1, a scalable softmax (ra_layer_config.temperature_length,
 * _power; Beam) */
#define RA_HF_NULL_ROPE_SCALED RA_HF_BIT(76)
/* The attention output gated per head (bits 64 .. 71, hf/gate.c): g_proj.weight [H, dim] beside
 * q_proj (or latent attention's tensors), without a bias; each head's output times
 * sigmoid(g_proj(x))[h] before o_proj (LFM3; Ling's latent attention, bailing_hybrid) */
#define RA_HF_GATE_PER_HEAD RA_HF_BIT(64)
/* with RA_HF_GATE_PER_HEAD: use_attention_gate (default true) turns the gate on; false: no g_proj
 * (LFM3) */
#define RA_HF_GATE_BY_KEY RA_HF_BIT(65)
/* with RA_HF_GATE_PER_HEAD: the gate saved as gate_proj.weight, which transformers renames g_proj
 * on load (its conversion mapping), g_proj.weight read too (LFM3) */
#define RA_HF_GATE_SAVED_AS_GATE_PROJ RA_HF_BIT(66)
/* a top-level rope_theta is a base per layer (UltraBERT's older checkpoints), which the config
 * class turns into rope_parameters per layer type, or ignores beside rope_parameters; and
 * attention_windows null fails there (fields_older_keys.c) */
#define RA_HF_ROPE_THETA_PER_LAYER RA_HF_BIT(67)
/* A.X-K2 (bits 68-71, 104-111): */
/* latent attention's q_b_proj is q_gate_proj [H * (D + Dv), 2 q_lora_rank] (saved as
 * q_b_proj, the row's latent_q_b read too): it reads [q_a_layernorm(qa) | qa], the q latent after its norm
 * and before it, and each head's D query rows are followed by its Dv rows of a sigmoid gate
 * on the head's attention output (ra_layer_config.q_b_raw_latent, gated_output without
 * wgate); q_lora_rank null refused (transformers fails on it) */
#define RA_HF_Q_GATE_PROJ RA_HF_BIT(68)
/* with RA_HF_MLA: the rotary embedding's head_dim is qk_nope_head_dim + qk_rope_head_dim and
 * rotates int(head_dim * partial_rotary_factor) features, the config class's default factor
 * qk_rope_head_dim / head_dim; its own default rope type the whole head_dim (Mistral4Config):
 * any other count than qk_rope_head_dim refused (transformers fails on it) */
#define RA_HF_MLA_ROPE_OF_HEAD RA_HF_BIT(69)
/* Gemma 4 (bits 80-87): */
/* per_layer_config (transformers' heterogeneous config): the layers it names take their own
 * head_dim and num_key_value_heads (any other key refused); without it, the full-attention
 * layers take global_head_dim (default 512) and, with attention_k_eq_v,
 * num_global_key_value_heads (fields_per_layer.c) */
#define RA_HF_PER_LAYER_CONFIG RA_HF_BIT(80)
/* attention_k_eq_v (default false): the full-attention layers have no v_proj, their values are
 * k_proj's output before k_norm and RoPE (wv is wk; k_proj's gradient the sum of both) */
#define RA_HF_VALUES_FROM_KEYS RA_HF_BIT(81)
/* the config class makes the last layer full_attention whatever layer_types says: a config
 * whose layer_types ends otherwise is refused */
#define RA_HF_LAST_LAYER_FULL RA_HF_BIT(82)
/* use_bidirectional_attention "vision": only vision tokens see each other both ways, text
 * tokens keep the causal mask (they are what ropeattn runs); "all" is refused */
#define RA_HF_BIDIRECTIONAL_VISION RA_HF_BIT(83)
/* rope type default turns every pair of head_dim, whatever partial_rotary_factor says (its
 * rotary embedding's own compute_default_rope_parameters), proportional reads it; the other
 * types with a partial_rotary_factor other than 1 are refused (their cos and sin fall short of
 * head_dim, which transformers' rotate_half over all of head_dim fails on) (Gemma 4, LFM3;
 * and the Llama-like families, whose compute_default_rope_parameters never reads it) */
#define RA_HF_DEFAULT_ROPE_WHOLE RA_HF_BIT(84)

/* block_types (default recurrent, recurrent, attention), repeated over num_hidden_layers (default
 * 26), names each layer's kind: "recurrent" ones refused, the others sliding attention with
 * attention_window_size (default 2048; sliding_window its other name) and the default rope only
 * (RecurrentGemma: hf/fields_blocks.c) */
#define RA_HF_BLOCK_TYPES RA_HF_BIT(96)
/* the sliding layers (by layer_types) have 2 * num_key_value_heads key/value heads and a sinks
 * tensor [H]; the full layers num_key_value_heads and no sinks; sliding_window_size, where given,
 * makes sliding_window sliding_window_size + 1 (MiMo-V2-Flash) */
#define RA_HF_SLIDING_KV_SINKS RA_HF_BIT(97)
/* v_head_dim (the row's default; at most head_dim): v_proj's rows per key/value head and o_proj's
 * columns per query head; run with each value head padded with zeros to head_dim at load (v_proj's
 * rows, o_proj's columns: hf/layer.c), the padding's gradients dropped (MiMo-V2-Flash) */
#define RA_HF_V_HEAD_DIM RA_HF_BIT(98)
/* attention_value_scale (the row's default; null: 1) multiplies v (ra_layer_config.v_scale) */
#define RA_HF_VALUE_SCALE RA_HF_BIT(99)
/* rope_parameters per layer type only, each with its rope_theta and partial_rotary_factor, as the
 * family's rotary embedding reads them: one rope object for every layer, or a type's object
 * without them, refused (MiMo-V2-Flash) */
#define RA_HF_ROPE_PER_TYPE_ONLY RA_HF_BIT(100)
/* an odd int(head_dim * partial_rotary_factor) with the default rope rotates one more feature,
 * the base to the power (n + 1) / n: its inv_freq over arange(0, n, 2) / n, its
 * apply_rotary_pos_emb over cos's width (MiMo-V2-Flash; other families' code fails on it, or
 * slices otherwise: refused) */
#define RA_HF_ODD_ROTARY_ROUNDS_UP RA_HF_BIT(101)
/* the rope is the default type with mrope_section (M-RoPE's sections), which its config class
 * requires (it raises on any other type, and on none of them: KeyError) (Cosmos3-Edge) */
#define RA_HF_DEFAULT_MROPE_ONLY RA_HF_BIT(102)
/* with RA_HF_MLA: latent attention as dots.note's (Dots3NoteTextAttention): the normed q and kv
 * latents times (hidden_size / rank)^1/2, the shared rotated key RMS-normed before RoPE
 * (k_rope_only_layernorm), the three norms' epsilon rms_norm_eps, the softmax scale
 * (qk_nope_head_dim + qk_rope_head_dim)^-1/2 whatever the rope's mscale */
#define RA_HF_LATENT_SCALES RA_HF_BIT(120)
/* with RA_HF_MLA: latent sizes per layer (fields_latent_layers.c): per_layer_config's, else
 * the sliding layers' swa_* keys (Dots3NoteTextConfig); the rope over each layer's
 * qk_rope_head_dim (its partial_rotary_factor derived from it, as the config class does) */
#define RA_HF_LATENT_PER_LAYER RA_HF_BIT(121)
/* with RA_HF_INDEXER_TOPK: only the layers layer_types names indexed_attention have the
 * indexer, and rope_parameters' indexed_attention entry is theirs (as full_attention's) */
#define RA_HF_INDEXED_LAYER_TYPES RA_HF_BIT(122)
/* model_max_length for max_position_embeddings (BailingHybridConfig's attribute_map: a dynamic
 * rope rescales past it) */
#define RA_HF_MODEL_MAX_LENGTH RA_HF_BIT(123)
/* the rotary embedding returns cos and sin over the rotated half only, [.., rotary_dim / 2], not
 * cat(t, t) (GptOssRotaryEmbedding): ropeattn freqs --hf-shape refuses it, freqs writes it */
#define RA_HF_COS_SIN_HALF_WIDTH RA_HF_BIT(124)
/* q_norm and k_norm: a LayerNorm of each head with its own weight and bias, each [heads,
 * head_dim], epsilon 1e-5 whatever the config says, always on (ChameleonLayerNorm) */
#define RA_HF_QK_NORM_HEAD_BIAS RA_HF_BIT(125)
/* q_norm and k_norm: one LayerNorm over head_dim with weight and bias [head_dim] shared by the
 * heads, epsilon 1e-5 whatever the config says, always on (nn.LayerNorm(head_dim): Nemotron
 * 3.5 Transcribe's encoders) */
#define RA_HF_QK_NORM_BIAS_SHARED RA_HF_BIT(71)
/* the q/k norms (RA_HF_QK_NORM's q_norm, k_norm) are LayerNorms without bias, epsilon 1e-5
 * whatever the config says (EsmcLayerNorm: torch's nn.LayerNorm over the whole projection) */
#define RA_HF_QK_NORM_LAYER RA_HF_BIT(126)
/* num_key_value_heads is not read: as many key/value heads as query heads, whatever it says (GTE's,
 * Nomic BERT's and Jina Embeddings v3's models have no grouped heads and their config classes no
 * such attribute) */
#define RA_HF_KV_HEADS_IGNORED RA_HF_BIT(115)
/* num_key_value_heads other than num_attention_heads refused: v_proj has a row per query head and
 * k_proj one per key/value head, which transformers' attention fails on (Nemotron-3
 * diarization's encoder) */
#define RA_HF_KV_HEADS_EQUAL RA_HF_BIT(70)
/* its config class declares rope_theta a number field: a null fails the class's validation,
 * whatever rope_parameters holds (BailingHybridConfig, Cohere2MoeConfig, EsmConfig in transformers
 * 5.23); elsewhere a null rope_theta is read as transformers 5 reads it (fields.c:
 * check_null_theta) */
#define RA_HF_THETA_TYPED RA_HF_BIT(77)
/* a rope per layer type only (RA_HF_LOCAL_ROPE): one rope object in rope_parameters is refused,
 * as its config class runs its default ropes over it (Gemma 3, Gemma 3n, OLMo 3: its keys are
 * left beside the layer types' and never read) or its rotary embedding fails on it (KeyError:
 * Mellum, Laguna, Gemma 4, Beam, LFM3, UltraBERT) */
#define RA_HF_ROPE_TYPES_NEEDED RA_HF_BIT(78)
/* rope_scaling refused: its config class never merges it into the layer types' ropes (Gemma 3's
 * and OLMo 3's merge it into the full layers'), and its rotary embedding fails on it */
#define RA_HF_ROPE_SCALING_UNREAD RA_HF_BIT(79)
/* each layer type's rope must hold its rope_theta: its config class never reads a top-level
 * rope_theta into them (its convert_rope_params_to_dict returns it unread), and its rotary
 * embedding fails without (Mellum, Laguna, Gemma 4, Beam) */
#define RA_HF_TYPE_THETA_NEEDED RA_HF_BIT(85)
/* Which of a family's attention projections transformers builds with a
 * bias: q, k and v's (or their fused weight's), and the output
 * projection's; each fixed, or given by a config key (then *_default is the
 * config class's default for it).  All zero: no biases (latent attention's
 * read attention_bias themselves, hf/layer_mla.c). */
typedef struct ra_hf_bias_rule {
    const char *qkv_key; /* NULL: qkv_default is fixed */
    int qkv_default;
    const char *o_key;   /* NULL: o_default is fixed */
    int o_default;
    int qkv_with_o;      /* q, k and v have biases too when o has (ChatGLM's
                            add_bias_linear) */
    int k_none;          /* k has none whatever q's and v's are (Whisper's
                            k_proj: GLM-ASR's encoder) */
} ra_hf_bias_rule;

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
                        ChatGLM's query_key_value): hf_config_packing */
    FUSED_GATE_ROWS, /* the output gate's rows (gate_proj's), then q's, k's and
                        v's: HRM-Text's gqkv_proj */
    FUSED_QVK_GROUPS, /* 4 model-parallel groups of rows, each a quarter of the
                         heads' q rows, then their v rows, then their k rows
                         (CodeGen's qkv_proj, mp_num 4): the layer permutes
                         them to FUSED_ROWS's order at load, and dW back */
} fused_packing;

/* One way of naming a layer's attention tensors: "<prefix>N<infix><proj>"
 * for layer N, or "<prefix><proj>" (infix NULL: a file of one layer's).  A
 * fused q, k, v tensor is named thrice, packed as `fused` says.  Families
 * name theirs in their rows (ra_hf_family.names); checkpoint.c holds the
 * common ones. */
typedef struct ra_hf_names {
    const char *prefix;
    const char *infix;
    const char *proj[4]; /* wq, wk, wv, wo */
    /* how q and k pair their features under these names: RA_LAYOUT_HALF
     * (Hugging Face's) is the family's layout, RA_LAYOUT_INTERLEAVED the
     * names' own (Meta's, GPT-J's) */
    ra_layout layout;
    fused_packing fused;
    /* NULL, or a tensor of the module that its forward returns beside its
     * output, for the decoder layer to add after it: not part of the
     * module's output, which is what ropeattn computes (GPT-NeoX-Japanese's
     * last layer's dense_bias), so passed over */
    const char *returned_bias;
} ra_hf_names;

/* How one model_type is read: every fact ropeattn has about the family
 * (families.c; the only place model_type strings appear). */
typedef struct ra_hf_family {
    const char *model_type;
    ra_layout layout;    /* how its q_proj and k_proj rows pair for RoPE */
    ra_hf_features features; /* RA_HF_* it may use */
    const char *refused; /* NULL, or why ropeattn refuses the family */
    /* transformers' defaults for keys its config class reads where they
     * differ from the Llama reading, "key=number ..." (NULL: none): a key
     * absent from the config takes its default, as transformers gives it. */
    const char *defaults;
    ra_hf_windows windows; /* which layers slide (fields_window.c) */
    ra_hf_bias_rule bias;  /* which projections have biases (fields_bias.c) */
    /* The rope its config class sets when config.json has neither
     * rope_scaling nor rope_parameters (a rope_parameters object, JSON), and
     * the name messages give it; NULL: none (the default rope). */
    const char *default_rope, *default_rope_name;
    /* NULL, or how its config class's rope_theta default changed between
     * transformers releases ("X in transformers 4.57, Y in 5"): a config
     * without rope_theta is refused rather than read either way. */
    const char *disputed_theta;
    /* The other name transformers loads its sinks from (a WeightRenaming of
     * its own: Flint's softmax_offset, MiMo-V2-Flash's attention_sink_bias),
     * one of HF_SINKS_ALIASES; NULL: none. */
    const char *sinks_alias;
    /* RA_HF_CROSS_ATTENTION_LAYERS: the config class's cross_attention_layers
     * when config.json has none (a JSON array of layer numbers). */
    const char *default_cross_attention_layers;
    /* Nonzero: a rope of type dynamic with a nonzero "alpha" is NTK scaling
     * by that fixed alpha, the default rope at base rope_theta * alpha ^
     * (head_dim / (head_dim - 2)) (HunYuan-V1's rotary embedding). */
    int ntk_alpha;
    /* How its checkpoints name the attention tensors, ended by an entry
     * without prefix; NULL: the common names (checkpoint.c: Meta's, Hugging
     * Face's q_proj .. o_proj under model.layers.N.self_attn. or a
     * multimodal model's language_model; latent attention's) */
    const ra_hf_names *names;
    /* another name latent attention's q_b_proj is read under where q_b_proj
     * is absent (A.X-K2's q_gate_proj, transformers' name once loaded;
     * saved as q_b_proj); NULL: none */
    const char *latent_q_b;
    /* NULL, or a module under the attention module's names that is not the
     * layer's and is passed over: the residual block's LayerNorm before it
     * (ESM's "LayerNorm.") or after the output projection's residual
     * (RoFormer's "output.LayerNorm.") */
    const char *block_norm;
    /* Nonzero: a multimodal config class that builds its text model from
     * its default text config when config.json has no text_config,
     * whatever the top level holds (transformers 5's Gemma 3, Llama 4,
     * Mistral 3, Qwen3-VL ...): the text fields are then the defaults, not
     * the top level's keys. */
    int default_text_config;
    /* NULL, or the object of the top level that holds its text_config (and
     * the top level none: Qwen2.5-Omni's and Qwen3-Omni's thinker_config), or
     * is it (text_parent_whole): that text_config is read as this family's
     * (its row, its tensor names) */
    const char *text_parent;
    /* Nonzero: its text_config, whatever model_type it names, is read as
     * this family's (its row's defaults and tensor names): the config class
     * merges its own text defaults under the saved text_config (Voxtral
     * Realtime's sub_configs_defaults) */
    int text_config_merged;
    /* Nonzero: a text_config without "model_type" is refused, as its config
     * class fails on one (Exaone4_5_Config reads text_config["model_type"]) */
    int text_config_typed;
    /* Nonzero, with text_parent: that object is itself the model's config (LASR CTC's
     * encoder_config: a LasrEncoderConfig), not the holder of a text_config */
    int text_parent_whole;
    /* The sections its code's chunked M-RoPE splits the rotary pairs by
     * where mrope_section is absent ({0}: none; GLM-4.1V's [8, 12, 12]) */
    int64_t mrope_default[3];
    /* Nonzero: its config class is remote code (trust_remote_code; no
     * model_type of transformers 5.23's), a PretrainedConfig that keeps
     * what config.json gives: its code reads a flag by Python's truth (1 and
     * 0 as true and false), where transformers' own classes, strict
     * dataclasses, refuse anything but true and false (ra_hf_flag). */
    int remote_code;
} ra_hf_family;

/* The row for model_type, or NULL when ropeattn does not know it. */
const ra_hf_family *ra_hf_family_find(const char *model_type);
/* Row i (0 .. ra_hf_family_count() - 1), else NULL. */
const ra_hf_family *ra_hf_family_at(int64_t i);

/* The layer_types name of a family's layers with a sparse-attention indexer
 * ("indexed_attention", "minimax_m3_sparse"), softmax attention over the
 * keys it keeps; NULL for a family without one (fields_sparse.c). */
const char *ra_hf_indexed_layer_type(const ra_hf_family *family);

/* Which projections a config's model has biases on, by its family's rule
 * (fields_bias.c).  rule NULL (a config without model_type): the
 * checkpoint's biases are read unless attention_bias is false. */
typedef struct ra_hf_bias {
    const ra_hf_bias_rule *rule;
    int qkv, o;
} ra_hf_bias;


/* A config's quantization_config (top level), where it is transformers'
 * FineGrainedFP8Config of the kind checkpoints ship (DeepSeek-V3's release,
 * Qwen3-*-FP8): quant_method "fp8", fmt "e4m3" (or absent),
 * activation_scheme "dynamic" (or absent), weight_block_size [bo, bi] (each
 * 1 .. INT32_MAX; required: transformers' newer default derives the block
 * from the scales' grid, a reading we refuse to guess), scale_fmt absent or
 * "ue8m0" (scales stored as numbers all the same), dequantize (a loader
 * option, ignored) and modules_to_not_convert (null or strings).  Any other
 * key or value is RA_ERR_UNSUPPORTED naming it.  With it, the top level's
 * dtype (transformers 5) or torch_dtype (4): "bfloat16", "float16" or
 * "float32", the dtype transformers rounds dequantized weights to. */
typedef struct ra_hf_quant {
    int present;                  /* quantization_config was an object */
    int64_t block_out, block_in;  /* weight_block_size: rows, columns per scale */
    ra_st_dtype dtype;            /* RA_ST_BF16, RA_ST_F16, RA_ST_F32; RA_ST_DTYPE_COUNT:
                                     the config names none */
    char **skip;                  /* modules_to_not_convert, owned */
    int64_t n_skip;
    /* RA_OK, or why the weights cannot be loaded (a quantization ropeattn
     * does not run): kept for the layer, since RoPE and the layer's shape
     * do not depend on it (transformers' config loads either way) */
    ra_status refused;
    char reason[384];
} ra_hf_quant;

/* The fields of a Hugging Face config.json that attention needs, read from
 * its text_config when it has one (a multimodal model's, as transformers'
 * get_text_config).  A field that the file does not have is 0 (has_* tells
 * which were present).  The model family is checked (ra_hf_family_check):
 * keys that change attention in a way ropeattn does not run are refused. */
typedef struct ra_hf_fields {
    int64_t hidden_size;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;
    int64_t head_dim;
    int64_t max_position_embeddings;
    double rope_theta;             /* top level, else inside rope_parameters */
    double partial_rotary_factor;  /* top level, else inside rope_parameters */
    int64_t original_max_position_embeddings; /* top level (Phi-3 style) */
    double rms_norm_eps;           /* the q and k norms' epsilon (Qwen3) */
    double query_pre_attn_scalar;  /* Gemma 2, 3: the scale is its -1/2 power */
    double attention_multiplier;   /* Granite: the softmax scale */
    double rope_local_base_freq;   /* Gemma 3: the sliding layers' rope_theta */
    int64_t no_rope_layer_interval; /* SmolLM3 without no_rope_layers: layer i has
                                       no RoPE when (i + 1) is a multiple of it */
    int64_t rotary_dim;            /* GPT-J: the features that rotate (a count) */
    double clip_qkv;               /* OLMo: q, k, v clamped to [-clip_qkv, clip_qkv] */
    double layer_norm_eps;         /* the LayerNorms' epsilon (Cohere, StableLM) */
    int64_t num_kv_heads;          /* Falcon's name for num_key_value_heads */
    int64_t kv_channels, multi_query_group_num; /* ChatGLM's head_dim, key/value heads */
    double rope_ratio;             /* ChatGLM's rope base / 10000 */
    double rope_alpha;             /* the rope object's alpha, where the family's
                                      ntk_alpha reads it; 0: none */
    int64_t attention_chunk_size;  /* Llama 4: RoPE layers attend within chunks */
    double floor_scale, attn_scale; /* Llama 4's temperature tuning */
    double attn_logit_softcapping;  /* Gemma 2: logits capped to (-c, c) */
    double key_multiplier;          /* Falcon-H1: k scaled by it (RA_HF_KEY_MULTIPLIER) */
    double attention_value_scale;   /* v scaled by it (RA_HF_VALUE_SCALE) */
    int has_attention_value_scale;
    /* RA_HF_ROPE_BY_EMBEDDING_TYPE: position_embedding_type is not "rope":
     * no layer has RoPE (GraniteMoeHybrid) */
    int rope_off;
    /* RA_HF_IS_DECODER_KEY: is_decoder (default false), the causal mask kept */
    int is_decoder;
    /* RA_HF_ROTARY_VALUE: rotary_value (default false), v rotated too */
    int rotary_value;
    /* RA_HF_ATTN_LAYER_INDICES: the array of attention layers (the
     * tree's, borrowed; validated: integers >= 0), or NULL (none) */
    const struct cJSON *attn_layer_indices;
    /* Latent attention (RA_HF_MLA): the latent's rank, q's (absent or null:
     * q_proj, no q_lora_rank), each head's q/k features that do not rotate
     * and that do (head_dim is set to it, the rope's, as transformers'
     * config classes do), v's per head. */
    int64_t kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int has_kv_lora_rank, has_q_lora_rank, has_qk_nope_head_dim, has_qk_rope_head_dim,
        has_v_head_dim;
    /* The indexer (RA_HF_INDEXER_TOPK): the keys each query keeps, its heads
     * and their size. */
    int64_t index_topk, index_n_heads, index_head_dim;
    int has_index_topk, has_index_n_heads, has_index_head_dim;
    /* rope_interleave (RA_HF_ROPE_INTERLEAVE; true by default): latent
     * attention's rope pairs (2i, 2i + 1), else rotate_half's (i, i + d/2). */
    int rope_interleave;
    int has_hidden_size, has_num_attention_heads, has_num_key_value_heads,
        has_head_dim, has_max_position_embeddings, has_rope_theta,
        has_partial_rotary_factor, has_original_max_position_embeddings, has_rms_norm_eps,
        has_query_pre_attn_scalar, has_attention_multiplier, has_rope_local_base_freq,
        has_no_rope_layer_interval, has_rotary_dim, has_clip_qkv, has_layer_norm_eps,
        has_num_kv_heads, has_attention_chunk_size, has_floor_scale, has_attn_scale,
        has_kv_channels, has_multi_query_group_num, has_rope_ratio,
        has_attn_logit_softcapping, has_key_multiplier;
    /* The family's key for LayerNorms of q and k is true (Cohere's
     * use_qk_norm, StableLM's qk_layernorm, per head; Persimmon's
     * qk_layernorm, true by default, shared by the heads: RA_HF_USE_QK_NORM,
     * RA_HF_QK_LAYERNORM, RA_HF_QK_LAYERNORM_BIAS). */
    int head_layer_norms;
    /* RA_HF_QK_NORM_BY_KEY: use_qk_norm (default false), the q and k RMSNorms on. */
    int qk_norm_by_key;
    /* RA_HF_GATE_BY_KEY: use_attention_gate (default true), the output gate on. */
    int attention_gate;
    /* attention_bias, where the config gives it (Llama, Gemma, Cohere, OLMo
     * 2, Qwen3, GPT-NeoX ...): whether q, k, v and o have biases;
     * has_attention_bias 0 when absent or null. */
    int attention_bias, has_attention_bias;
    /* Which projections the family's model builds with a bias: its rule
     * read against the config's key for it (fields_bias.c). */
    ra_hf_bias bias;
    /* RA_HF_QKV_BY_MULTI_QUERY (Falcon): FalconConfig's multi_query (default
     * true) and new_decoder_architecture (default false), with num_kv_heads.
     * RA_HF_MULTI_QUERY_GROUPS (ChatGLM): multi_query is its
     * multi_query_attention (default false); num_key_value_heads its
     * multi_query_group_num with it, head_dim its kv_channels.
     * RA_HF_ROPE_RATIO: rope_theta 10000 * rope_ratio. */
    int multi_query, new_decoder_architecture;
    /* use_qk_norm (RA_HF_QK_L2_NORM) and attn_temperature_tuning
     * (RA_HF_TEMPERATURE_TUNING), both true by default (Llama4TextConfig). */
    int qk_l2_norm, attn_temperature_tuning;
    /* RA_HF_KV_SHARED_LAYERS: num_kv_shared_layers (0: none) of the
     * num_hidden_layers, as given or by the row's defaults. */
    int64_t num_kv_shared_layers, num_hidden_layers;
    /* model_type of the text model (text_config's, else the top level's);
     * "" when absent.  family: its row, NULL when absent (a Llama-style
     * config written by hand) or when it names no attention. */
    char model_type[64];
    const ra_hf_family *family;
    unsigned char *no_rope_layers; /* [n_no_rope_layers], 0 = no RoPE; owned; or NULL */
    int64_t n_no_rope_layers;
    /* RA_HF_ROPE_DENSE_LAYERS (fields_nope.c): mlp_layer_types' "dense" layers
     * ([n_dense_layers], 1 = dense; owned; or NULL: the first first_dense_layers,
     * first_k_dense_replace), and prefix_dense_sliding_window_pattern (default 1) */
    unsigned char *dense_layers;
    int64_t n_dense_layers, first_dense_layers, prefix_dense_pattern;
    /* RA_HF_CROSS_ATTENTION_LAYERS: the layers that attend to another
     * sequence, [n_cross_attention_layers]; owned; or NULL */
    int64_t *cross_attention_layers;
    int64_t n_cross_attention_layers;
    /* rope_scaling (transformers v4) if it is an object, else rope_parameters
     * (v5), else the family's default rope (gpt-oss's yarn) or nothing
     * (has_rope 0, rope all default).  Values the object lacks are filled
     * from the top level by ra_hf_rope_inherit; top-level values that differ
     * from the object's, where transformers 5 would replace them, were
     * refused (fields.c's standardize_rope). */
    ra_hf_rope rope;
    int has_rope;
    /* transformers 5's rope_parameters per layer type, {"full_attention":
     * {...}, "sliding_attention": {...}} (Gemma 3): rope is the full
     * layers', local_rope the sliding layers' (has_local_rope).  Read only
     * for families with RA_HF_LOCAL_ROPE; refused elsewhere. */
    ra_hf_rope local_rope;
    int has_local_rope;
    ra_hf_window window; /* owns layer_types */
    /* RA_HF_PER_LAYER_CONFIG (fields_per_layer.c): layer i's head_dim and
     * num_key_value_heads, [n_layer_shapes] each, 0 where the config's
     * hold (owned; NULL: every layer the config's); shapes_unknown: the
     * config names neither per_layer_config nor layer_types, and
     * global_head_dim's layers cannot be told. */
    int64_t *layer_head_dim, *layer_kv_heads;
    int64_t n_layer_shapes;
    int shapes_unknown;
    int values_from_keys; /* RA_HF_VALUES_FROM_KEYS: attention_k_eq_v */
    ra_hf_quant quant;   /* quantization_config; owns skip */
    struct cJSON *json;  /* the whole file as parsed (cJSON's tree), owned:
                            any key, for libropeattn_hf's ra_hf_config_int ... */
    /* Sparse attention (fields_sparse.c): the most keys a query of an indexed
     * layer may see while the indexer keeps them all (RA_HF_INDEXER_TOPK,
     * RA_HF_BLOCK_INDEXER, RA_HF_SPARSE_LAYER_INDEXER); 0: no indexer. */
    int64_t sparse_keys;
    /* RA_HF_ROPE_BY_LAYER_TYPE (fields_rope_types.c): rope_parameters'
     * full_attention and sliding_attention entries (rope and local_rope). */
    unsigned char layer_type_rope[2]; /* ra_hf_type_rope */
    /* RA_HF_LAYER_STACKS (fields_stacks.c): the layers of each stack, H_cycles,
     * L_cycles (HrmTextConfig's defaults 16, 2, 3); the cache slots, num_hidden_layers,
     * are num_layers_per_stack * H_cycles * (L_cycles + 1) */
    int64_t stack_layers, h_cycles, l_cycles;
    /* RA_HF_HEADS_PER_LAYER: num_attention_heads_per_layer (the tree's, borrowed; validated:
     * positive integers, num_hidden_layers of them where that is given), or NULL */
    const struct cJSON *heads_per_layer;
    /* RA_HF_SOFTPLUS_G_PROJ: gating true or "per-head" (1), false or "per-element" (0) */
    int gate_per_head;
    /* RA_HF_NULL_ROPE_SCALED: the layer type whose rope_parameters entry is null: 1
     * full_attention (rope is then local_rope's), 2 sliding_attention (local_rope is rope's);
     * 0: none */
    int null_rope_type;
    /* RA_HF_LATENT_PER_LAYER (fields_latent_layers.c): each layer's latent sizes,
     * [n_latent_layers] (owned; NULL: every layer the config's) */
    struct ra_hf_latent_sizes *latent_layers;
    int64_t n_latent_layers;
} ra_hf_fields;

/* A latent-attention layer's sizes (RA_HF_MLA): query heads, q_lora_rank (0: q_proj),
 * kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim. */
typedef struct ra_hf_latent_sizes {
    int64_t heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
} ra_hf_latent_sizes;

/* Layer `layer`'s latent sizes into *out: its own (RA_HF_LATENT_PER_LAYER), else the
 * config's; -1 when the config does not say (layer -1 and the layers differ). */
int ra_hf_layer_latent(const ra_hf_fields *config, int64_t layer, ra_hf_latent_sizes *out);

/* A layer type's entry in rope_parameters (RA_HF_ROPE_BY_LAYER_TYPE). */
enum ra_hf_type_rope {
    RA_HF_TYPE_ROPE_ABSENT, /* no key: its layers fail in transformers */
    RA_HF_TYPE_ROPE_GIVEN,  /* a rope object */
    RA_HF_TYPE_ROPE_NULL,   /* null: its layers have no RoPE */
};

/* Parses config.json text (len bytes, need not be NUL-terminated).  Numbers
 * must be of the right kind (integers where integers are meant, positive).
 * Free with ra_hf_fields_free (it owns rope's arrays and window.layer_types). */
ra_status ra_hf_fields_parse(const char *text, size_t len, ra_hf_fields *out,
                             char *msg, size_t msg_len);
ra_status ra_hf_fields_read(const char *path, ra_hf_fields *out, char *msg,
                            size_t msg_len);
void ra_hf_fields_free(ra_hf_fields *config); /* zeroes it; NULL allowed */


/* The layout a config's rope pairs features in: its family's, or
 * rotate_half's for latent attention with rope_interleave false; -1 for a
 * config without a family. */
int ra_hf_fields_layout(const ra_hf_fields *config);

/* Whether config's attn_layer_indices lists layer `layer` (RA_HF_ATTN_LAYER_INDICES). */
int ra_hf_attn_layer_listed(const ra_hf_fields *config, int64_t layer);

/* Fills what rope lacks from config's top level: rope_theta,
 * partial_rotary_factor and original_max_position_embeddings (Phi-3 keeps
 * the last outside rope_scaling).  Values rope has are kept (a rope set in
 * the config's place, --rope-parameters, says what it means). */
void ra_hf_rope_inherit(ra_hf_rope *rope, const ra_hf_fields *config);

/* RA_HF_LAYER_STACKS: the stack that runs cache slot `layer` ("L_module" or "H_module") and
 * the layer's number in it (*index); NULL where config's family has no stacks. */
const char *ra_hf_stack_layer(const ra_hf_fields *config, int64_t layer, int64_t *index);

/* Layer `layer`'s query heads: num_attention_heads_per_layer's entry (RA_HF_HEADS_PER_LAYER;
 * layer -1: the one count every entry has, else -1), else num_attention_heads. */
int64_t ra_hf_layer_heads(const ra_hf_fields *config, int64_t layer);

/* For a family with RA_HF_NULL_ROPE_SCALED: whether layer `layer`'s type has a null rope (1)
 * or not (0); -1 when the config does not say (layer -1 and the layers differ, or no window
 * says which layers slide).  0 in other families. */
int ra_hf_layer_null_rope(const ra_hf_fields *config, int64_t layer);

/* For a family with RA_HF_NOPE_FULL_LAYERS: whether layer `layer` runs
 * without RoPE (1) or with it (0); -1 when the config does not say (the
 * layer's window is not known, or layer -1 and the layers differ).  0 in
 * other families. */
int ra_hf_layer_nope(const ra_hf_fields *config, int64_t layer);

/* RA_HF_PER_LAYER_CONFIG: layer `layer`'s own head_dim and
 * num_key_value_heads (0 where the config's hold) into *head_dim and
 * *n_kv_heads; 1 when it has either, 0 when neither (and in other
 * families), -1 when the config does not say (layer -1 and the layers
 * differ, or shapes_unknown). */
int ra_hf_layer_shape(const ra_hf_fields *config, int64_t layer, int64_t *head_dim,
                      int64_t *n_kv_heads);

/* RA_HF_VALUES_FROM_KEYS: whether layer `layer` takes its values from
 * k_proj (attention_k_eq_v and not a sliding layer); -1 when the config does
 * not say (layer -1, or a layer layer_types does not list); 0 in other
 * families. */
int ra_hf_layer_values_from_keys(const ra_hf_fields *config, int64_t layer);
/* The keys a query of layer `layer` (-1: any) may see while its indexer
 * keeps them all (ra_layer_config.max_keys); 0: the layer has no indexer. */
int64_t ra_hf_sparse_keys(const ra_hf_fields *config, int64_t layer);
/* Whether layer `layer`'s indexer selects keys by slot and masks them by
 * position id (ra_layer_config.positions_are_slots): MiniMax-M3's
 * (RA_HF_SPARSE_LAYER_INDEXER); the other indexers select among the keys
 * the attention mask leaves, whatever their positions. */
int ra_hf_sparse_by_slots(const ra_hf_fields *config, int64_t layer);

#endif /* RA_HF_FIELDS_H */
