/*
 * families.c — how each Hugging Face model family (config.json's
 * model_type) is read, and the config keys that change attention: each one
 * is run, where the family's row says so, or refused, naming the key.  A
 * key missing from both lists below cannot change a RoPE attention layer
 * (vocab_size, intermediate_size, residual_multiplier ...).
 */
#include <string.h>

#include "internal.h"
#include "hf/hf.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

#define H RA_LAYOUT_HALF        /* transformers' rotate_half */
#define I RA_LAYOUT_INTERLEAVED /* pairs (2i, 2i + 1): Cohere, GLM, GPT-J, Llama 4 */

#define FUSED "its fused query_key_value / qkv weights are not supported"
/* Dots3NoteTextConfig's: latent attention with a gate per head (g_proj), rescaled latents and
 * the rotated key normed, its sizes per layer (per_layer_config, swa_*), the indexer on the
 * indexed_attention layers only, the sliding layers' rope of their own; layer_types as
 * saved (the class's formula for them is not read) */
#define DOTS3                                                                            \
    (RA_HF_MLA | RA_HF_INDEXER_TOPK | RA_HF_GATE_PER_HEAD | RA_HF_LATENT_SCALES |         \
     RA_HF_LATENT_PER_LAYER | RA_HF_INDEXED_LAYER_TYPES | RA_HF_LOCAL_ROPE)
#define DOTS3_DEFAULTS                                                                   \
    "kv_lora_rank=512 q_lora_rank=1024 qk_nope_head_dim=128 qk_rope_head_dim=64 "       \
    "v_head_dim=128 hidden_size=5120 num_attention_heads=128 num_key_value_heads=128 "  \
    "max_position_embeddings=524288 index_topk=2048 index_n_heads=64 index_head_dim=128 " \
    "rms_norm_eps=1e-05"
/* Gemma 3n and 4: values RMS-normed per head without weights, and the
 * last num_kv_shared_layers layers reuse an earlier layer's keys and values
 * (Gemma 4's assistants: every layer reuses its target model's). */
#define V_NORM                                                                           \
    "its v_norm (an RMSNorm of each value head) is not supported, nor its layers that take " \
    "their keys and values from an earlier layer (num_kv_shared_layers)"
/* LFM2's attention (beside its convolution layers): q_layernorm, k_layernorm
 * (RMSNorms of each head), out_proj, norm_eps; Lfm2Config's defaults */
#define LFM2 (RA_HF_QK_NORM | RA_HF_NORM_EPS_KEY | RA_HF_QK_LAYERNORM_NAMES)
#define LFM2_DEFAULTS "rope_theta=1000000 rms_norm_eps=1e-05"
/* LFM3's attention: LFM2's norms under Qwen3's names, a gate per head, a rope per layer type
 * (its default rope over all of head_dim, its proportional rope reading partial_rotary_factor) */
#define LFM3 (RA_HF_QK_NORM | RA_HF_NORM_EPS_KEY | RA_HF_LOCAL_ROPE | RA_HF_GATE_PER_HEAD |      \
              RA_HF_GATE_BY_KEY | RA_HF_GATE_SAVED_AS_GATE_PROJ | RA_HF_DEFAULT_ROPE_WHOLE |      \
              RA_HF_ROPE_TYPES_NEEDED | RA_HF_ROPE_SCALING_UNREAD)
#define LFM3_DEFAULTS                                                                    \
    "hidden_size=2048 num_attention_heads=16 num_key_value_heads=4 head_dim=128 "       \
    "max_position_embeddings=128000 rms_norm_eps=1e-05 sliding_window=256"
/* Lfm3Config's default rope_parameters: the full layers' "proportional" rope */
#define LFM3_ROPE                                                                        \
    .default_rope = "{\"sliding_attention\": {\"rope_type\": \"default\", "              \
                    "\"rope_theta\": 10000.0}, \"full_attention\": {\"rope_type\": "        \
                    "\"proportional\", \"rope_theta\": 1000000.0, "                         \
                    "\"partial_rotary_factor\": 0.5}}",                                     \
    .default_rope_name = "Lfm3Config's default rope_parameters."
/* Gemma 3n: q and k RMS-normed (plain weights), values RMS-normed per head
 * without weights, softmax scale 1, a rope per layer type, windows by
 * layer_types; the last num_kv_shared_layers layers reuse an earlier
 * layer's keys and values (refused, layer by layer).  Gemma3nTextConfig's
 * defaults. */
#define GEMMA3N                                                                          \
    (RA_HF_QK_NORM | RA_HF_V_NORM | RA_HF_UNIT_SCALE | RA_HF_LOCAL_ROPE |                \
     RA_HF_KV_SHARED_LAYERS | RA_HF_ROPE_TYPES_NEEDED)
#define GEMMA3N_DEFAULTS                                                                 \
    "hidden_size=2048 num_attention_heads=8 num_key_value_heads=2 head_dim=256 "        \
    "rope_theta=1000000 rope_local_base_freq=10000 sliding_window=512 "                 \
    "num_hidden_layers=35 num_kv_shared_layers=15"
/* Gemma 4: Gemma 3n's attention, with a head size and key/value heads per
 * layer (per_layer_config, or global_head_dim for the full layers), the full
 * layers' values from k_proj (attention_k_eq_v) and a proportional rope (its
 * default rope ignores partial_rotary_factor);
 * vision tokens' bidirectional blocks (not run: text tokens are causal);
 * Gemma4TextConfig's and Gemma4UnifiedTextConfig's defaults and rope. */
#define GEMMA4                                                                           \
    (GEMMA3N | RA_HF_PER_LAYER_CONFIG | RA_HF_VALUES_FROM_KEYS | RA_HF_LAST_LAYER_FULL |  \
     RA_HF_BIDIRECTIONAL_VISION | RA_HF_DEFAULT_ROPE_WHOLE | RA_HF_ROPE_SCALING_UNREAD |     \
     RA_HF_TYPE_THETA_NEEDED)
#define GEMMA4_SIZES                                                                     \
    "hidden_size=2304 num_attention_heads=8 num_key_value_heads=4 head_dim=256 "        \
    "num_hidden_layers=30 num_kv_shared_layers=0 "
#define GEMMA4_ROPE                                                                      \
    .default_rope = "{\"sliding_attention\": {\"rope_type\": \"default\", "               \
                    "\"rope_theta\": 10000.0}, \"full_attention\": {\"rope_type\": "         \
                    "\"proportional\", \"partial_rotary_factor\": 0.25, "                  \
                    "\"rope_theta\": 1000000.0}}",                                         \
    .default_rope_name = "Gemma4TextConfig's default rope_parameters."
/* Gemma 4's assistants: every layer reuses its target model's keys and values. */
#define GEMMA4_ASSISTANT                                                                 \
    "its layers all take their keys and values from the target model's (shared_kv_states): " \
    "not supported"
#define GEMMA3                                                                           \
    (RA_HF_PRE_ATTN_SCALAR | RA_HF_NORM_PLUS_ONE | RA_HF_LOCAL_ROPE | RA_HF_QK_NORM |     \
     RA_HF_SOFTCAP_IGNORED | RA_HF_ROPE_TYPES_NEEDED)
/* Gemma3TextConfig's defaults (configs saved inside a multimodal one often
 * leave them out: gemma-3-4b's text_config has no head counts nor head_dim). */
#define GEMMA3_DEFAULTS                                                                  \
    "hidden_size=2304 num_attention_heads=8 num_key_value_heads=4 head_dim=256 "        \
    "query_pre_attn_scalar=256 rope_local_base_freq=10000 rope_theta=1000000 "          \
    "sliding_window=4096 sliding_window_pattern=6"
#define OLMO2 (RA_HF_NORM_OVER_PROJECTION | RA_HF_QK_NORM)
/* Qwen2Config's (and its followers') window defaults: no layer slides unless
 * use_sliding_window (then as the row's ra_hf_windows says). */
#define QWEN_WINDOW(n) "use_sliding_window=0 max_window_layers=" #n
/* Qwen2VLTextConfig's and Qwen2_5_VLTextConfig's (transformers 4.57 and 5). */
#define QWEN_VL_DEFAULTS QWEN_WINDOW(80) " rope_theta=1000000"
#define OLMO3 (OLMO2 | RA_HF_LOCAL_ROPE | RA_HF_ROPE_TYPES_NEEDED)
/* sliding layers rotate, full ones not (Cohere 2); only with a window (EXAONE 4) */
#define NOPE_FULL RA_HF_NOPE_FULL_LAYERS
#define EXAONE4 (RA_HF_QK_NORM | RA_HF_NOPE_FULL_LAYERS | RA_HF_NOPE_NEEDS_WINDOW)
/* Gated attention (Qwen3-Next, Qwen3.5): q_proj gives a gate per head, the
 * q/k norms scale by 1 + weight; the linear-attention layers beside it are
 * refused (layer_types). */
#define GATED_QWEN (RA_HF_QK_NORM | RA_HF_NORM_PLUS_ONE | RA_HF_GATED_OUTPUT)
/* Qwen3NextConfig's, Qwen3_5TextConfig's, Qwen3_5MoeTextConfig's defaults */
#define GATED_QWEN_DEFAULTS "head_dim=256 partial_rotary_factor=0.25"
#define QWEN4_EXP                                                                        \
    (GATED_QWEN | RA_HF_MROPE | RA_HF_MROPE_INTERLEAVED | RA_HF_QK_NORM |                \
     RA_HF_MROPE_OWN_DEFAULT | RA_HF_BLOCK_INDEXER)
#define QWEN4_EXP_DEFAULTS                                                               \
    "hidden_size=2048 num_attention_heads=16 num_key_value_heads=2 head_dim=256 "        \
    "max_position_embeddings=32768"
#define PATTERN RA_HF_WINDOWS_PATTERN
#define FROM_MAX RA_HF_WINDOWS_GATED_FROM_MAX
#define LISTED RA_HF_WINDOWS_LISTED
#define NOWINDOW RA_HF_WINDOWS_NONE
#define QWEN3_VL (RA_HF_MROPE | RA_HF_MROPE_INTERLEAVED | RA_HF_QK_NORM)
/* DeepseekV2Config's and DeepseekV3Config's defaults (Kimi K2's remote
 * configuration_deepseek.py has V3's); V2's num_key_value_heads is
 * num_attention_heads. */
#define MLA_DEFAULTS                                                                     \
    "kv_lora_rank=512 q_lora_rank=1536 qk_nope_head_dim=128 qk_rope_head_dim=64 "       \
    "v_head_dim=128 "
#define DEEPSEEK_V2_DEFAULTS                                                             \
    MLA_DEFAULTS "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048"
#define DEEPSEEK_V3_DEFAULTS                                                             \
    MLA_DEFAULTS "hidden_size=7168 num_attention_heads=128 num_key_value_heads=128 "    \
    "max_position_embeddings=4096"
/* AXK1Config's, YoutuConfig's (DeepseekV3Config's latent sizes), Glm4MoeLiteConfig's and
 * MiniCPM3Config's (its v_head_dim: hidden_size / num_attention_heads). */
#define AXK1_DEFAULTS                                                                    \
    MLA_DEFAULTS "hidden_size=7168 num_attention_heads=64 num_key_value_heads=64 "      \
    "max_position_embeddings=32768"
#define YOUTU_DEFAULTS                                                                   \
    MLA_DEFAULTS "hidden_size=2048 num_attention_heads=16 num_key_value_heads=16 "      \
    "max_position_embeddings=131072"
#define GLM4_MOE_LITE_DEFAULTS                                                           \
    "kv_lora_rank=512 q_lora_rank=768 qk_nope_head_dim=192 qk_rope_head_dim=64 "        \
    "v_head_dim=256 hidden_size=2048 num_attention_heads=20 num_key_value_heads=20 "    \
    "max_position_embeddings=202752"
#define MINICPM3_DEFAULTS                                                                \
    "kv_lora_rank=256 q_lora_rank=768 qk_nope_head_dim=64 qk_rope_head_dim=32 "         \
    "hidden_size=2560 num_attention_heads=40 num_key_value_heads=40 "                   \
    "max_position_embeddings=32768"
#define MLA_V3 (RA_HF_MLA | RA_HF_ROPE_INTERLEAVE)
/* BailingHybridConfig's (no q_lora_rank: q_proj; its rope_theta under rope_parameters) */
#define BAILING_HYBRID_DEFAULTS                                                          \
    "kv_lora_rank=512 qk_nope_head_dim=128 qk_rope_head_dim=64 v_head_dim=128 "         \
    "hidden_size=2560 num_attention_heads=32 num_key_value_heads=32 "                   \
    "max_position_embeddings=262144 rope_theta=6000000"
/* DeepseekV32Config's and GlmMoeDsaConfig's: A.X K1's attention (always
 * with q_a_proj, interleaved pairs whatever rope_interleave says) and an
 * indexer; GLM-MoE-DSA's layers may share one. */
#define DEEPSEEK_V32_DEFAULTS                                                            \
    MLA_DEFAULTS "hidden_size=7168 num_attention_heads=128 num_key_value_heads=128 "    \
    "max_position_embeddings=163840 index_topk=2048 index_n_heads=64 index_head_dim=128"
#define GLM_MOE_DSA_DEFAULTS                                                             \
    "kv_lora_rank=512 q_lora_rank=2048 qk_nope_head_dim=192 qk_rope_head_dim=64 "       \
    "v_head_dim=256 hidden_size=6144 num_attention_heads=64 num_key_value_heads=64 "    \
    "max_position_embeddings=202752 index_topk=2048 index_n_heads=32 index_head_dim=128"
#define DSA (RA_HF_MLA | RA_HF_INDEXER_TOPK)
/* CohereCompassTextConfig's (and its multimodal config's text model) */
#define COHERE_COMPASS                                                                   \
    (RA_HF_ROPE_BY_LAYER_TYPE | RA_HF_HEAD_DIM_BY_HEADS | RA_HF_MROPE | RA_HF_MROPE_INTERLEAVED)
#define COHERE_COMPASS_DEFAULTS                                                          \
    "hidden_size=8192 num_attention_heads=64 max_position_embeddings=8192 "             \
    "layer_norm_eps=1e-05 sliding_window=4096"
#define COSMOS3_EDGE                                                                     \
    (RA_HF_MROPE | RA_HF_MROPE_INTERLEAVED | RA_HF_DEFAULT_MROPE_ONLY | WHOLE)
#define COSMOS3_EDGE_DEFAULTS                                                            \
    "hidden_size=2048 num_attention_heads=16 num_key_value_heads=8 head_dim=128 "       \
    "max_position_embeddings=131072"
#define COSMOS3_EDGE_ROPE                                                                \
    .default_rope = "{\"rope_type\": \"default\", \"rope_theta\": 100000000.0, "       \
                    "\"mrope_section\": [24, 20, 20]}",                                    \
    .default_rope_name = "Cosmos3EdgeTextConfig's default rope_parameters."
#define PADDLEOCR_DEFAULTS                                                               \
    "hidden_size=1024 num_attention_heads=16 num_key_value_heads=2 head_dim=128 "       \
    "rope_theta=500000 max_position_embeddings=131072"
#define QWEN2_5_OMNI_DEFAULTS                                                            \
    QWEN_WINDOW(28) " sliding_window=32768 rope_theta=1000000 hidden_size=3584 "          \
    "num_attention_heads=28 num_key_value_heads=4 max_position_embeddings=32768"
#define QWEN3_OMNI_DEFAULTS                                                              \
    "rope_theta=1000000 hidden_size=2048 num_attention_heads=28 num_key_value_heads=4 "  \
    "max_position_embeddings=32768"
#define GRANITE_DOCLING_DEFAULTS                                                         \
    "attention_multiplier=0.015625 hidden_size=1024 num_attention_heads=16 "            \
    "num_key_value_heads=4 max_position_embeddings=32768"
/* The vision-language families refused, naming what their attention needs */
#define ERNIE_VL                                                                         \
    "its M-RoPE (Ernie4_5_VLMoeTextRotaryEmbedding's: the first mrope_section[0] + "     \
    "mrope_section[1] rotary pairs alternate height and width positions, the last "      \
    "mrope_section[2] take time) is not supported"
#define HUNYUAN_VL                                                                       \
    "its XD-RoPE (mrope_section, or xdrope_section: head_dim / 2 rotary pairs over 3 or 4 " \
    "position axes, position, width, height and image index) is not supported"
#define MOLMO2                                                                           \
    "its rope scaled only in the layers rope_scaling_layers names (the others the default " \
    "rope), and its q/k norms by qk_norm_type (per head, or over the projection), are not " \
    "supported"
#define MUSE                                                                             \
    "its attention (q and k RMS-normed without weights, q times qk_scale_factor, the "   \
    "output times sigmoid(gate_proj(x)); RoPE only in the layers the model gives it) is not " \
    "supported"
/* The twelfth session's text rows: what they refuse */
#define NOPE_LATENT(beside)                                                              \
    "its attention layers are latent attention without any rotary embedding (NoPE), "     \
    "beside " beside ": not a RoPE layer"
#define UNLIMITED_OCR                                                                    \
    "its reference sliding window (reference_sliding_attention: each token sees the last " \
    "sliding_window tokens and every image and prompt token) is not supported"
#define STEP3P7                                                                          \
    "its attention (Gemma's q/k norms, query_pre_attn_scalar, a sigmoid gate per head from " \
    "g_proj, query heads per layer type through per_layer_config, a partial rope per layer " \
    "type) is not supported"
#define DIFFUSION_GEMMA                                                                  \
    "its text model is an encoder stack and a decoder stack whose attention reads the "    \
    "encoder's keys and values without a causal mask, and ropeattn reads one stack of "    \
    "layers: not supported"
#define EMBEDDING_GEMMA2                                                                 \
    "an encoder whose sliding layers see a window on both sides of each token (Gemma 4's "  \
    "attention without a causal mask): not supported"
#define NEOMME                                                                           \
    "its attention (exclusive self-attention, value embeddings added after RoPE, a "       \
    "two-axis M-RoPE, a sigmoid gate per feature, no causal mask) is not supported"
#define MUSE_GLIMMER_ASSISTANT                                                           \
    "its keys and values include the target model's context hidden states "               \
    "(context_hidden_states, a DFlash drafter), and its block has no causal mask: not "    \
    "supported"
#define MISTRAL_LARGE4                                                                   \
    "its latent attention scales each head's queries by a learned scale log(position + 1) " \
    "+ bias (softmax_scaling), beside DeepSeek sparse attention's indexer: not supported"
/* VoxtralRealtimeTextConfig's, and VoxtralRealtimeConfig's text defaults (merged under its
 * text_config) */
#define VOXTRAL_REALTIME_TEXT_DEFAULTS                                                   \
    "hidden_size=4096 num_attention_heads=32 num_key_value_heads=8 "                    \
    "max_position_embeddings=131072 sliding_window=4096"
#define VOXTRAL_REALTIME_DEFAULTS                                                        \
    "hidden_size=3072 num_attention_heads=32 num_key_value_heads=8 head_dim=128 "       \
    "max_position_embeddings=131072 rms_norm_eps=1e-05 rope_theta=1000000 "             \
    "sliding_window=8192"
/* Exaone4Config's */
#define EXAONE4_DEFAULTS "rms_norm_eps=1e-05 sliding_window=4096 sliding_window_pattern=4"
/* Inkling2TextConfig's attention */
#define INKLING2                                                                         \
    "its attention's short convolutions of k (k_sconv) and relative position projection " \
    "(r_proj) are not supported"
/* MiniMaxM3VLTextConfig's */
#define MINIMAX_M3                                                                       \
    (RA_HF_QK_NORM | RA_HF_NORM_PLUS_ONE | RA_HF_SPARSE_LAYER_INDEXER | RA_HF_ROTARY_DIM_IGNORED)
#define MINIMAX_M3_DEFAULTS                                                              \
    "rope_theta=5000000 hidden_size=6144 num_attention_heads=64 num_key_value_heads=4 "  \
    "head_dim=128"
/* GLM-4.1V, GLM-OCR (Glm4vTextAttention): chunked M-RoPE, head_dim by the heads */
#define GLM4V (RA_HF_MROPE | RA_HF_HEAD_DIM_BY_HEADS)
/* Their code's sections where mrope_section is absent (Glm4vTextRotaryEmbedding's, GLM-4.5V's,
 * GLM-OCR's, GLM-Image's) */
#define GLM_MROPE .mrope_default = {8, 12, 12}
#define GLM4V_DEFAULTS                                                                   \
    "hidden_size=4096 num_attention_heads=32 num_key_value_heads=2 "                    \
    "max_position_embeddings=32768"
#define GLM_OCR_DEFAULTS                                                                 \
    "hidden_size=1024 num_attention_heads=16 num_key_value_heads=8 "                    \
    "max_position_embeddings=131072"
/* Glm4vMoeTextConfig's (Glm4MoeConfig's, no head_dim: hidden_size / num_attention_heads) */
#define GLM4V_MOE_DEFAULTS                                                               \
    "partial_rotary_factor=0.5 hidden_size=4096 num_attention_heads=96 "                \
    "num_key_value_heads=8 max_position_embeddings=65536"
#define GLM_IMAGE_DEFAULTS                                                               \
    "hidden_size=4096 num_attention_heads=32 num_key_value_heads=2 "                    \
    "max_position_embeddings=131072"
/* HYV4Config's */
#define HY_V4_DEFAULTS                                                                   \
    "kv_lora_rank=512 q_lora_rank=1536 qk_nope_head_dim=192 qk_rope_head_dim=64 "       \
    "v_head_dim=256 hidden_size=2816 num_attention_heads=32 num_key_value_heads=32 "    \
    "max_position_embeddings=262144 index_topk=2048 index_n_heads=16 index_head_dim=128 " \
    "rms_norm_eps=1e-05"
#define AXK2_DEFAULTS                                                                    \
    "kv_lora_rank=128 q_lora_rank=384 qk_nope_head_dim=64 qk_rope_head_dim=32 "         \
    "v_head_dim=64 hidden_size=2048 num_attention_heads=32 num_key_value_heads=32 "     \
    "max_position_embeddings=131072 index_topk=2048 index_n_heads=16 index_head_dim=128"
#define LLAMA4                                                                           \
    (RA_HF_QK_L2_NORM | RA_HF_ATTENTION_CHUNKS | RA_HF_TEMPERATURE_TUNING |           \
     RA_HF_NO_ROPE_LAYERS | RA_HF_EMPTY_NO_ROPE_LAYERS)
/* Llama4TextConfig's defaults. */
#define LLAMA4_DEFAULTS                                                                  \
    "head_dim=128 rope_theta=500000 rms_norm_eps=1e-05 no_rope_layer_interval=4 "       \
    "attention_chunk_size=8192 floor_scale=8192 attn_scale=0.1"
/* Qwen3.5: Qwen3-VL's interleaved M-RoPE, but its code's sections where mrope_section is
 * absent are [11, 11, 10], not Qwen3-VL's [24, 20, 20] */
#define QWEN3_5_MROPE (QWEN3_VL | RA_HF_MROPE_OWN_DEFAULT)

/* Which projections have biases, from each family's modeling code
 * (ChatGLM's and InternLM2's remote code): q, k, v and o biased by one key,
 * with its default; q, k and v only; fixed; none (latent attention's read
 * attention_bias themselves: hf/layer_mla.c). */
#define ALL(key, on) {key, on, key, on, 0}
#define QKV(key, on) {key, on, NULL, 0, 0}
#define FIXED(qkv, o) {NULL, qkv, NULL, o, 0}
#define NO_BIAS FIXED(0, 0)
#define AB "attention_bias"
/* ChatGLM: q, k, v by add_qkv_bias, or by add_bias_linear with o */
#define CHATGLM_BIAS {"add_qkv_bias", 0, "add_bias_linear", 0, 1}

/* transformers 5's GptOssConfig: yarn, factor 32 over 4096 positions,
 * truncate false (its defaults give rope_theta 150000). */
#define GPT_OSS_ROPE                                                                     \
    .default_rope = "{\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, "   \
                    "\"beta_slow\": 1.0, \"truncate\": false, "                          \
                    "\"original_max_position_embeddings\": 4096}",                       \
    .default_rope_name = "GptOssConfig's default rope_parameters."
/* Ministral3Config's (its max_position_embeddings key, 262144, is the config's) */
#define MINISTRAL3_ROPE                                                                  \
    .default_rope = "{\"rope_type\": \"yarn\", \"rope_theta\": 1000000.0, \"factor\": 16.0, "  \
                    "\"original_max_position_embeddings\": 16384, \"beta_fast\": 32.0, "     \
                    "\"beta_slow\": 1.0, \"mscale_all_dim\": 1.0, \"mscale\": 1.0, "          \
                    "\"llama_4_scaling_beta\": 0.1}",                                     \
    .default_rope_name = "Ministral3Config's default rope_parameters."
/* Nemotron3DiarizationAudioConfig's: its __post_init__ sets partial_rotary_factor 1.0 by
 * kwargs.setdefault, then 0.5 the same way, which keeps the first: the whole head rotates */
#define NEMOTRON3_DIARIZATION_DEFAULTS                                                   \
    "hidden_size=512 num_attention_heads=8 max_position_embeddings=5000"
/* Nemotron 3.5 Transcribe's speech recognition encoder and word timestamp encoder
 * (Nemotron3_5TranscribeAttention): Nemotron-3 diarization's attention (no causal mask, a bias
 * on o_proj alone, v_proj of every query head) with q and k LayerNormed per head before RoPE
 * (nn.LayerNorm(head_dim): weight and bias shared by the heads, epsilon 1e-5); without
 * rope_parameters their config classes' rope (half of each head rotated), with one that has
 * no partial_rotary_factor the top level's (default 1) */
#define NEMOTRON3_5 (RA_HF_NON_CAUSAL | RA_HF_KV_HEADS_EQUAL | RA_HF_QK_NORM_BIAS_SHARED)
#define NEMOTRON3_5_ROPE(config)                                                         \
    .default_rope = "{\"rope_type\": \"default\", \"rope_theta\": 10000.0, "                \
                    "\"partial_rotary_factor\": 0.5}",                                     \
    .default_rope_name = config "'s default rope_parameters."
#define LASR_DEFAULTS "hidden_size=512 num_attention_heads=8 max_position_embeddings=10000"
/* Perception Encoder's audio and video encoders (PeAudioEncoderConfig, PeVideoEncoderConfig,
 * PeAudioVideoEncoderConfig): Qwen3's attention (q and k RMS-normed per head, rms_norm_eps)
 * without a causal mask, on interleaved pairs (its stack_freqs turns pair (2i, 2i + 1) by
 * frequency i), attention_bias on all four, its default rope over all of head_dim whatever
 * partial_rotary_factor says; their defaults (rope_theta 20000: default_theta) */
#define PE_ENCODER (RA_HF_QK_NORM | RA_HF_NON_CAUSAL | WHOLE)
#define PE_ENCODER_DEFAULTS                                                              \
    "hidden_size=1792 num_attention_heads=14 head_dim=128 max_position_embeddings=10000 " \
    "rope_theta=20000 rms_norm_eps=1e-05"
/* Mistral4Config's sizes and default rope (its max_position_embeddings, 1048576, too; its
 * partial_rotary_factor qk_rope_head_dim / head_dim: RA_HF_MLA_ROPE_OF_HEAD) */
#define MISTRAL4_DEFAULTS                                                                \
    "kv_lora_rank=256 q_lora_rank=1024 qk_nope_head_dim=64 qk_rope_head_dim=64 "        \
    "v_head_dim=128 hidden_size=4096 num_attention_heads=32 num_key_value_heads=32 "    \
    "max_position_embeddings=1048576"
#define MISTRAL4_ROPE                                                                    \
    .default_rope = "{\"rope_type\": \"yarn\", \"rope_theta\": 10000.0, \"factor\": 128.0, "    \
                    "\"original_max_position_embeddings\": 8192, \"beta_fast\": 32.0, "      \
                    "\"beta_slow\": 1.0, \"mscale_all_dim\": 1.0, \"mscale\": 1.0, "           \
                    "\"llama_4_scaling_beta\": 0.1}",                                      \
    .default_rope_name = "Mistral4Config's default rope_parameters."
/* Qwen3-VL's config classes (and OLMo 3's): rope_theta's default changed. */
#define QWEN3_VL_THETA .disputed_theta = "5000000 in transformers 4.57, 500000 in 5"

/* CwmConfig's rope when config.json has neither rope_scaling nor
 * rope_parameters (its top-level rope_theta is then ignored). */
#define CWM_ROPE                                                                         \
    .default_rope = "{\"rope_type\": \"llama3\", \"rope_theta\": 1000000.0, "          \
                    "\"factor\": 16.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, " \
                    "\"original_max_position_embeddings\": 8192}",                      \
    .default_rope_name = "CwmConfig's default rope_parameters."
/* MllamaTextConfig's cross_attention_layers when config.json has none. */
#define MLLAMA_CROSS .default_cross_attention_layers = "[3, 8, 13, 18, 23, 28, 33, 38]"
/* ApertusConfig's default rope (transformers 5). */
#define APERTUS_ROPE                                                                     \
    .default_rope = "{\"rope_type\": \"llama3\", \"rope_theta\": 12000000.0, "          \
                    "\"factor\": 8.0, \"original_max_position_embeddings\": 8192, "      \
                    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0}",               \
    .default_rope_name = "ApertusConfig's default rope_parameters."
/* MellumConfig's default rope, per layer type. */
/* UltrabertConfig's */
#define ULTRABERT_ROPE                                                                   \
    .default_rope = "{\"sliding_attention\": {\"rope_type\": \"default\", "             \
                    "\"rope_theta\": 10000.0}, \"full_attention\": {\"rope_type\": "       \
                    "\"default\", \"rope_theta\": 2560000.0}}",                            \
    .default_rope_name = "UltrabertConfig's default rope_parameters."
#define MELLUM_ROPE                                                                      \
    .default_rope = "{\"full_attention\": {\"rope_type\": \"default\", "                 \
                    "\"rope_theta\": 500000.0}, \"sliding_attention\": "                  \
                    "{\"rope_type\": \"default\", \"rope_theta\": 10000.0}}",             \
    .default_rope_name = "MellumConfig's default rope_parameters."
/* MiMoV2FlashConfig's */
#define MIMO_V2_FLASH                                                                    \
    (RA_HF_LOCAL_ROPE | RA_HF_ROPE_PER_TYPE_ONLY | RA_HF_SLIDING_KV_SINKS |             \
     RA_HF_V_HEAD_DIM | RA_HF_VALUE_SCALE | RA_HF_ODD_ROTARY_ROUNDS_UP)
#define MIMO_V2_FLASH_DEFAULTS                                                           \
    "hidden_size=4096 num_attention_heads=64 num_key_value_heads=4 head_dim=192 "       \
    "v_head_dim=128 attention_value_scale=0.707 sliding_window=129 rms_norm_eps=1e-05 " \
    "max_position_embeddings=131072"
#define MIMO_V2_FLASH_ROPE                                                               \
    .default_rope = "{\"full_attention\": {\"rope_type\": \"default\", "                 \
                    "\"rope_theta\": 5000000.0, \"partial_rotary_factor\": 0.334}, "       \
                    "\"sliding_attention\": {\"rope_type\": \"default\", "               \
                    "\"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.334}}",          \
    .default_rope_name = "MiMoV2FlashConfig's default rope_parameters."
/* BeamConfig's default rope, per layer type: none in the full layers. */
#define BEAM_ROPE                                                                        \
    .default_rope = "{\"sliding_attention\": {\"rope_type\": \"default\", "                \
                    "\"rope_theta\": 10000.0}, \"full_attention\": null}",                  \
    .default_rope_name = "BeamConfig's default rope_parameters."
/* LagunaConfig's default rope, per layer type. */
#define LAGUNA_ROPE                                                                      \
    .default_rope = "{\"full_attention\": {\"rope_type\": \"default\", "                 \
                    "\"rope_theta\": 500000.0, \"partial_rotary_factor\": 0.5}, "           \
                    "\"sliding_attention\": {\"rope_type\": \"default\", "                 \
                    "\"rope_theta\": 10000.0, \"partial_rotary_factor\": 1.0}}",             \
    .default_rope_name = "LagunaConfig's default rope_parameters."
/* HunYuan-V1: q/k norms after RoPE; a dynamic rope with alpha is NTK by a fixed alpha */
#define HUNYUAN (RA_HF_QK_NORM | RA_HF_NORM_AFTER_ROPE)

/* ---- tensor names of the families that do not use the common ones ------- */

#define NAMES_END {NULL, NULL, {NULL}, H, FUSED_NONE, NULL}
#define LAYERS "model.layers.", ".self_attn."
#define NEOX_NAMES {"query_key_value.weight", "query_key_value.weight", \
                    "query_key_value.weight", "dense.weight"}
/* Phi-1, Phi-2: dense is the output */
static const ra_hf_names phi_names[] = {
    {LAYERS, {"q_proj.weight", "k_proj.weight", "v_proj.weight", "dense.weight"}, H, 0, NULL},
    NAMES_END};
/* LFM2: out_proj is the output */
static const ra_hf_names lfm2_names[] = {
    {LAYERS, {"q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight"}, H, 0, NULL},
    NAMES_END};
/* Phi-3: q, k and v fused, q's rows first */
static const ra_hf_names phi3_names[] = {
    {LAYERS, {"qkv_proj.weight", "qkv_proj.weight", "qkv_proj.weight", "o_proj.weight"}, H,
     FUSED_ROWS, NULL},
    NAMES_END};
static const ra_hf_names gptj_names[] = {
    {"transformer.h.", ".attn.", {"q_proj.weight", "k_proj.weight", "v_proj.weight",
     "out_proj.weight"}, I, 0, NULL},
    NAMES_END};
/* GPT-NeoX, Pythia: fused per head */
static const ra_hf_names gpt_neox_names[] = {
    {"gpt_neox.layers.", ".attention.", NEOX_NAMES, H, FUSED_GROUPED, NULL}, NAMES_END};
/* its last layer's dense_bias is added by the decoder layer */
static const ra_hf_names gpt_neox_japanese_names[] = {
    {"gpt_neox_japanese.layers.", ".attention.", NEOX_NAMES, H, FUSED_GROUPED, "dense_bias"},
    NAMES_END};
/* Falcon: fused as the config says */
static const ra_hf_names falcon_names[] = {
    {"transformer.h.", ".self_attention.", NEOX_NAMES, H, FUSED_BY_CONFIG, NULL}, NAMES_END};
/* InternLM2: fused per key/value head */
static const ra_hf_names internlm2_names[] = {
    {"model.layers.", ".attention.", {"wqkv.weight", "wqkv.weight", "wqkv.weight", "wo.weight"},
     H, FUSED_GROUPED, NULL},
    NAMES_END};
static const ra_hf_names modernbert_names[] = {
    {"model.layers.", ".attn.", {"q_proj.weight", "k_proj.weight", "v_proj.weight",
     "Wo.weight"}, H, 0, NULL},
    NAMES_END};
/* ModernBERT: q, k and v fused, q's rows first (ModernBertForMaskedLM's model.layers,
 * ModernBertModel's layers, the text model of Perception Encoder's audio and video models:
 * PeAudioModel's, PeVideoModel's and PeAudioVideoModel's text_model.layers) */
#define MODERNBERT_NAMES {"Wqkv.weight", "Wqkv.weight", "Wqkv.weight", "Wo.weight"}
static const ra_hf_names modernbert_encoder_names[] = {
    {"model.layers.", ".attn.", MODERNBERT_NAMES, H, FUSED_ROWS, NULL},
    {"layers.", ".attn.", MODERNBERT_NAMES, H, FUSED_ROWS, NULL},
    {"text_model.layers.", ".attn.", MODERNBERT_NAMES, H, FUSED_ROWS, NULL},
    NAMES_END};
/* BERT's names (ESM, RoFormer): attention.self.query .. attention.output.dense, under the
 * task model's prefix or none (the bare model's); the module's LayerNorm (ESM's before
 * attention, RoFormer's output.LayerNorm after its residual) is the block's, not the layer's */
#define BERT_NAMES {"self.query.weight", "self.key.weight", "self.value.weight", \
                    "output.dense.weight"}
static const ra_hf_names esm_names[] = {
    {"esm.encoder.layer.", ".attention.", BERT_NAMES, H, FUSED_NONE, NULL},
    {"encoder.layer.", ".attention.", BERT_NAMES, H, FUSED_NONE, NULL},
    NAMES_END};
static const ra_hf_names roformer_names[] = {
    {"roformer.encoder.layer.", ".attention.", BERT_NAMES, H, FUSED_NONE, NULL},
    {"encoder.layer.", ".attention.", BERT_NAMES, H, FUSED_NONE, NULL},
    NAMES_END};
/* ChatGLM 2, 3, GLM-4 (remote code): fused as the config says */
static const ra_hf_names chatglm_names[] = {
    {"transformer.encoder.layers.", ".self_attention.", NEOX_NAMES, I, FUSED_BY_CONFIG, NULL},
    NAMES_END};
/* DBRX: fused, q's rows first */
static const ra_hf_names dbrx_names[] = {
    {"transformer.blocks.", ".norm_attn_norm.attn.", {"Wqkv.weight", "Wqkv.weight",
     "Wqkv.weight", "out_proj.weight"}, H, FUSED_ROWS, NULL},
    NAMES_END};
/* Moshi's text decoder: MoshiForCausalLM's, MoshiForConditionalGeneration's (its depth
 * decoder's, without RoPE, are not read) */
#define MOSHI_NAMES {"q_proj.linear.weight", "k_proj.linear.weight", "v_proj.linear.weight", \
                     "o_proj.linear.weight"}
static const ra_hf_names moshi_names[] = {
    {LAYERS, MOSHI_NAMES, H, 0, NULL},
    {"decoder.model.layers.", ".self_attn.", MOSHI_NAMES, H, 0, NULL},
    NAMES_END};
/* Ling's latent attention (bailing_hybrid): its checkpoints' module is attention, o_proj is
 * dense (transformers renames them at load), or transformers' own names */
static const ra_hf_names bailing_hybrid_names[] = {
    {"model.layers.", ".attention.", {"kv_a_proj_with_mqa.weight", "kv_b_proj.weight",
     "kv_a_layernorm.weight", "dense.weight"}, I, 0, NULL},
    {LAYERS, {"kv_a_proj_with_mqa.weight", "kv_b_proj.weight", "kv_a_layernorm.weight",
     "o_proj.weight"}, I, 0, NULL},
    NAMES_END};
/* RecurrentGemma: its attention blocks, beside its recurrent ones */
static const ra_hf_names recurrent_gemma_names[] = {
    {"model.layers.", ".temporal_block.", {"q_proj.weight", "k_proj.weight", "v_proj.weight",
     "o_proj.weight"}, H, 0, NULL},
    NAMES_END};
/* Persimmon, and Fuyu's language model (transformers 5 and 4): fused as the config says */
static const ra_hf_names persimmon_names[] = {
    {LAYERS, NEOX_NAMES, H, FUSED_BY_CONFIG, NULL},
    {"model.language_model.layers.", ".self_attn.", NEOX_NAMES, H, FUSED_BY_CONFIG, NULL},
    {"language_model.model.layers.", ".self_attn.", NEOX_NAMES, H, FUSED_BY_CONFIG, NULL},
    NAMES_END};

/* Kimi K2.5's latent attention: its release's language_model.model.layers.N, transformers 5's
 * model.language_model.layers.N, or language_model.model.blocks.N, as transformers saves it
 * (its conversion renames every "blocks" to "layers", the vision tower's and the text's) */
#define MLA_NAMES {"kv_a_proj_with_mqa.weight", "kv_b_proj.weight", "kv_a_layernorm.weight", \
                   "o_proj.weight"}
static const ra_hf_names kimi_k25_names[] = {
    {"language_model.model.layers.", ".self_attn.", MLA_NAMES, H, 0, NULL},
    {"model.language_model.layers.", ".self_attn.", MLA_NAMES, H, 0, NULL},
    {"language_model.model.blocks.", ".self_attn.", MLA_NAMES, H, 0, NULL},
    NAMES_END};
/* Cosmos3-Edge: its release's text tower at the top level, to_q .. to_out (transformers'
 * conversion renames them model.language_model.layers.N's q_proj .. o_proj), or those */
static const ra_hf_names cosmos3_edge_names[] = {
    {"layers.", ".self_attn.", {"to_q.weight", "to_k.weight", "to_v.weight", "to_out.weight"}, H,
     0, NULL},
    {"model.language_model.layers.", ".self_attn.", {"q_proj.weight", "k_proj.weight",
     "v_proj.weight", "o_proj.weight"}, H, 0, NULL},
    NAMES_END};
/* The encoders of GTE, Nomic BERT and Jina Embeddings v3 as saved (transformers renames them
 * at load): q, k and v fused, q's rows first, under the task model's prefix, or none (the bare
 * model's); GTE's checkpoints' prefix new. too */
#define QKV_ROWS(name, out) {name ".weight", name ".weight", name ".weight", out ".weight"}
static const ra_hf_names gte_names[] = {
    {"gte.encoder.layer.", ".attention.", QKV_ROWS("qkv_proj", "o_proj"), H, FUSED_ROWS, NULL},
    {"new.encoder.layer.", ".attention.", QKV_ROWS("qkv_proj", "o_proj"), H, FUSED_ROWS, NULL},
    {"encoder.layer.", ".attention.", QKV_ROWS("qkv_proj", "o_proj"), H, FUSED_ROWS, NULL},
    NAMES_END};
static const ra_hf_names nomic_bert_names[] = {
    {"nomic_bert.encoder.layers.", ".attn.", QKV_ROWS("Wqkv", "out_proj"), H, FUSED_ROWS, NULL},
    {"encoder.layers.", ".attn.", QKV_ROWS("Wqkv", "out_proj"), H, FUSED_ROWS, NULL},
    NAMES_END};
/* ESMC: Llama's names under EsmcForMaskedLM's esmc., or the bare model's */
#define HF_PROJ {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}
static const ra_hf_names esmc_names[] = {
    {"esmc.layers.", ".self_attn.", HF_PROJ, H, FUSED_NONE, NULL},
    {"layers.", ".self_attn.", HF_PROJ, H, FUSED_NONE, NULL},
    NAMES_END};
#undef HF_PROJ
static const ra_hf_names jina_embeddings_v3_names[] = {
    {"roberta.encoder.layers.", ".mixer.", QKV_ROWS("Wqkv", "out_proj"), H, FUSED_ROWS, NULL},
    {"encoder.layers.", ".mixer.", QKV_ROWS("Wqkv", "out_proj"), H, FUSED_ROWS, NULL},
    NAMES_END};
/* CodeGen: q, v and k fused per model-parallel group (FUSED_QVK_GROUPS) */
static const ra_hf_names codegen_names[] = {
    {"transformer.h.", ".attn.", QKV_ROWS("qkv_proj", "out_proj"), I, FUSED_QVK_GROUPS, NULL},
    NAMES_END};
#undef QKV_ROWS

/* Qwen2.5-Omni, Qwen3-Omni: the thinker's text layers, as transformers saves them
 * (thinker.model.layers.N) or names them (thinker.model.language_model.layers.N); the
 * talker's (talker.model.layers.N) are another model's, not read */
#define HF_NAMES {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}
static const ra_hf_names qwen_omni_names[] = {
    {"thinker.model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"thinker.model.language_model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* Granite-Docling (Idefics3's layout): its text model's layers under model.text_model, or as
 * its text model (layers.N) and a causal LM (model.layers.N) save them */
static const ra_hf_names granite_docling_names[] = {
    {"model.text_model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* Emu3: its text model's layers as Emu3ForConditionalGeneration saves them
 * (text_model.model.layers.N), or Emu3ForCausalLM (model.layers.N) */
static const ra_hf_names emu3_names[] = {
    {"text_model.model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};
/* Voxtral Realtime: its text decoder's layers under model.language_model.model.layers.N, or as
 * its text model saves them (layers.N) */
static const ra_hf_names voxtral_realtime_names[] = {
    {"model.language_model.model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* Nemotron-3 diarization's audio encoder layers: in the whole model, or saved alone */
static const ra_hf_names nemotron3_diarization_names[] = {
    {"model.audio_tower.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* GLM-ASR's encoder layers saved alone */
static const ra_hf_names glmasr_encoder_names[] = {
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* Perception Encoder's audio, video and audio-video encoders saved alone: their own layers
 * (PeAudioVideoEncoder's embedder holds an audio and a video encoder of their own beside them,
 * embedder.audio_encoder.layers.N ..., not read) */
static const ra_hf_names pe_encoder_names[] = {
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* Nemotron 3.5 Transcribe's encoders saved alone */
static const ra_hf_names nemotron3_5_names[] = {
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* LASR's encoder layers: in LasrForCTC (encoder.), or the encoder saved alone */
static const ra_hf_names lasr_names[] = {
    {"encoder.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* UltraBERT's layers as its task models save them (ultrabert.), as its bare model does, or as
 * a causal LM would */
static const ra_hf_names ultrabert_names[] = {
    {"ultrabert.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"model.layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    {"layers.", ".self_attn.", HF_NAMES, H, 0, NULL},
    NAMES_END};

/* HiggsAudioV2Config's */
#define HIGGS_AUDIO_V2_ROPE                                                              \
    .default_rope = "{\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, \"factor\": 32.0, "  \
                    "\"high_freq_factor\": 0.5, \"low_freq_factor\": 0.125, "                  \
                    "\"original_max_position_embeddings\": 1024}",                             \
    .default_rope_name = "HiggsAudioV2Config's default rope_parameters."
/* The audio and vision families refused, naming what their attention needs (the twelfth
 * session's survey of transformers 5.23's RoPE models beyond the text decoders) */
#define DINOV3_ROPE                                                                      \
    "its 2-D RoPE (DINOv3ViTRopePositionEmbedding) turns each patch by 2 pi times its "  \
    "centre's coordinates scaled to [-1, 1] (not integer rows and columns) and leaves the "  \
    "class and register tokens unrotated: not supported"
#define SAM_MEMORY_ROPE                                                                  \
    "its memory attention's 2-D axial RoPE over the image grid, with the rotated keys "  \
    "repeated over memory frames (rope_k_repeat) and object pointers left unrotated, "   \
    "beside attention blocks without RoPE in its other stacks: not supported"
#define ROPE_BY_HEAD                                                                     \
    "its RoPE turns each head by the head's index (position_ids arange(num_attention_heads), " \
    "the same for every token), not by the token's position: not supported"
#define CONFORMER_RELATIVE                                                               \
    "its conformer self-attention adds relative position scores (Transformer-XL's: "     \
    "linear_pos with bias_u and bias_v), not RoPE: not supported"
#define CONFORMER_W2V2                                                                   \
    "its conformer self-attention adds relative position scores "                        \
    "(position_embeddings_type \"relative\" or \"relative_key\"), or with \"rotary\" rotates "  \
    "the hidden states before the q and k projections (not q and k): not supported"
/* Parts of composite models saved alone (a sub-config's model_type): ropeattn reads a whole
 * model's config (its text_config; Pixtral's, Qwen2-VL's, Qwen2.5-VL's and Llama 4's
 * vision_config with --vision), never a part's config alone (the thirteenth session's survey) */
#define VISION_ALONE                                                                     \
    "a vision encoder's config saved alone (a multimodal model's vision_config): ropeattn "  \
    "reads a multimodal model's text layers from the whole model's config, and vision layers " \
    "only of Pixtral, Qwen2-VL, Qwen2.5-VL and Llama 4 from it (--vision): not supported"
#define VISION_FROM_WHOLE                                                                \
    "a vision tower saved alone: its layers run from a multimodal config's vision_config "   \
    "(ra_hf_options.vision, --vision), which gives their names; alone: not read"
#define PART_ALONE(what)                                                                 \
    "a part of a composite model saved alone (" what "): ropeattn reads a whole model's "   \
    "config and its text layers, not a part's config alone: not supported"
#define VLM_CONFIG                                                                       \
    "a retrieval model: its vision-language model's config sits in vlm_config (its text "   \
    "model in vlm_config.text_config), which ropeattn does not read: not supported"
#define STACK_OF(model)                                                                  \
    "one stack of layers of " model " saved alone (a sub-config of the whole model, whose " \
    "model_type is refused for its several stacks): not supported"
/* Sorted by model_type.  The multimodal rows (gemma3, mistral3, qwen2_vl
 * ...) are read through their text_config, as transformers does.  Row:
 * model_type, layout, features, why refused, config-class defaults, which
 * layers slide, biases, then (named, where the family has them) the
 * default rope and a disputed rope_theta default. */
/* Its rotary embedding turns all of head_dim in the default rope, whatever
 * partial_rotary_factor says (transformers 5's compute_default_rope_parameters
 * of these families never reads it; the scaled types' cos and sin fall short
 * of head_dim and transformers fails): RA_HF_DEFAULT_ROPE_WHOLE */
#define WHOLE RA_HF_DEFAULT_ROPE_WHOLE
/* Encoder-decoder models: two stacks of layers of their own configs, the decoder's with
 * cross-attention */
#define ENCODER_DECODER                                                                  \
    "an encoder-decoder model: its layers sit in an encoder and a decoder stack of their own "  \
    "configs (the decoder's beside cross-attention), and ropeattn reads one stack of layers: " \
    "not supported"
/* Hybrids whose attention layers have no RoPE at all (JambaAttention, NemotronHAttention) */
#define NO_ROTARY(beside)                                                                \
    "its attention layers (beside " beside ") apply no rotary embedding: not a RoPE layer"
/* A multimodal row whose text model is its default one without text_config */
#define DEFAULT_TEXT .default_text_config = 1
#define ROW(type, lay, feat, why, defs, win, biases, ...)                                \
    {.model_type = type, .layout = lay, .features = feat, .refused = why,               \
     .defaults = defs, .windows = win, .bias = biases, __VA_ARGS__}

static const ra_hf_family families[] = {
    /* AfmoeConfig: its own gate_proj, sigmoid, on the attention output; RoPE only in the
     * sliding layers; layer_types (from global_attn_every_n_layers when absent: refused) */
    ROW("afmoe", H, RA_HF_QK_NORM | NOPE_FULL | RA_HF_GATE_PROJ | WHOLE, NULL,
        "head_dim=128 rms_norm_eps=1e-05 sliding_window=1024", LISTED, ALL(AB, 0)),
    /* ApertusConfig: Qwen3's q/k norms, llama3 rope by default */
    ROW("apertus", H, RA_HF_QK_NORM | WHOLE, NULL, "rope_theta=12000000 rms_norm_eps=1e-05",
        NOWINDOW, ALL(AB, 0), APERTUS_ROPE),
    ROW("arcee", H, WHOLE, NULL,
        "hidden_size=2560 num_attention_heads=32 max_position_embeddings=4096", NOWINDOW,
        ALL(AB, 0)),
    /* AriaConfig: its text_config an AriaTextConfig (aria_text where it names none) */
    ROW("aria", H, WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0), DEFAULT_TEXT),
    ROW("aria_text", H, WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0)),
    /* A.X K1: DeepSeek-V3's attention, always with q_a_proj */
    ROW("axk1", I, MLA_V3, NULL, AXK1_DEFAULTS, NOWINDOW, NO_BIAS),
    /* AXK2Config: DeepSeek-V3.2's sparse latent attention, its q_b_proj q_gate_proj once
     * loaded (the q latent normed and not, queries and a sigmoid gate per output feature) */
    ROW("axk2", I, DSA | RA_HF_Q_GATE_PROJ, NULL, AXK2_DEFAULTS, NOWINDOW, NO_BIAS,
        .latent_q_b = "q_gate_proj"),
    ROW("baichuan", H, 0,
        "its 7B runs RoPE and its 13B ALiBi, by modeling code of their own that config.json does "
        "not name", NULL, NOWINDOW, NO_BIAS),
    /* BailingHybridConfig (Ling 3.0): DeepSeek-V3's latent attention with q_proj alone,
     * interleaved pairs always, and a sigmoid gate per head (g_proj); its linear-attention
     * layers are refused (layer_types); max_position_embeddings saved as model_max_length;
     * rope_theta a typed field (null fails) */
    ROW("bailing_hybrid", I,
        RA_HF_MLA | RA_HF_GATE_PER_HEAD | RA_HF_MODEL_MAX_LENGTH | RA_HF_THETA_TYPED, NULL,
        BAILING_HYBRID_DEFAULTS, NOWINDOW, NO_BIAS, .names = bailing_hybrid_names),
    /* BambaConfig: partial_rotary_factor 0.5 (its __post_init__ sets it) */
    ROW("bamba", H, RA_HF_ATTN_LAYER_INDICES, NULL, "partial_rotary_factor=0.5", NOWINDOW,
        ALL(AB, 0)),
    /* BeamConfig: q/k norms; its own gate_proj, sigmoid, with a bias per head (gate_bias);
     * a rope per layer type, the full layers' null: no RoPE, q scaled by position */
    ROW("beam", H,
        RA_HF_QK_NORM | RA_HF_LOCAL_ROPE | RA_HF_NULL_ROPE_SCALED | RA_HF_GATE_PROJ |
            RA_HF_ROPE_TYPES_NEEDED | RA_HF_ROPE_SCALING_UNREAD | RA_HF_TYPE_THETA_NEEDED |
            RA_HF_GATE_BIAS | WHOLE, NULL,
        "hidden_size=5120 num_attention_heads=48 num_key_value_heads=8 head_dim=128 "
        "max_position_embeddings=8192 sliding_window=512", LISTED, ALL(AB, 0), BEAM_ROPE),
    ROW("bitnet", H, RA_HF_O_NORM | WHOLE, NULL,
        "rope_theta=500000 rms_norm_eps=1e-05 hidden_size=2560 num_attention_heads=20 "
        "num_key_value_heads=5", NOWINDOW, ALL(AB, 0)),
    /* BltConfig: a local encoder, a global transformer and a local decoder (and an entropy
     * patcher), each a stack of attention layers of its own sizes */
    ROW("blt", I, 0,
        "its attention layers sit in four stacks of their own sizes (local_encoder, "
        "global_transformer, local_decoder, patcher: encoder_config, global_config, "
        "decoder_config, patcher_config), and ropeattn reads one stack of layers: not supported",
        NULL, NOWINDOW, NO_BIAS),
    ROW("blt_global_transformer", H, 0, STACK_OF("BLT"), NULL, NOWINDOW, NO_BIAS),
    ROW("blt_local_decoder", H, 0, STACK_OF("BLT"), NULL, NOWINDOW, NO_BIAS),
    ROW("blt_local_encoder", H, 0, STACK_OF("BLT"), NULL, NOWINDOW, NO_BIAS),
    ROW("blt_patcher", H, 0, STACK_OF("BLT"), NULL, NOWINDOW, NO_BIAS),
    /* ChameleonConfig: Llama's attention, head_dim hidden_size / num_attention_heads (a head_dim
     * key that differs is refused), q and k LayerNormed per head (ChameleonLayerNorm: each head
     * its own weight and bias, [heads, head_dim], epsilon 1e-5), attention_bias for q, k, v and
     * o; swin_norm moves the block's norms, not the layer's */
    ROW("chameleon", H, RA_HF_QK_NORM_HEAD_BIAS | RA_HF_HEAD_DIM_BY_HEADS | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 num_key_value_heads=32 "
        "max_position_embeddings=4096", NOWINDOW, ALL(AB, 0)),
    ROW("chatglm", I, RA_HF_MULTI_QUERY_GROUPS | RA_HF_ROPE_RATIO | RA_HF_FIXED_ROPE, NULL,
        "hidden_size=4096 num_attention_heads=32 kv_channels=128 multi_query_group_num=1 "
        "rope_ratio=1", NOWINDOW, CHATGLM_BIAS, .names = chatglm_names, .remote_code = 1),
    ROW("chmv2", H, 0,
        "its backbone (backbone_config) is DINOv3's ViT: " DINOV3_ROPE,
        NULL, NOWINDOW, NO_BIAS),
    ROW("clvp", H, 0,
        "its attention layers sit in three stacks of their own sizes (text_config's and "
        "speech_config's encoders, whose rotary embedding turns rotary_emb_dim features of "
        "each head, and decoder_config's GPT-2 attention without RoPE), and ropeattn reads "
        "one stack of layers: not read", NULL, NOWINDOW, NO_BIAS),
    ROW("clvp_decoder", H, 0, STACK_OF("CLVP"), NULL, NOWINDOW, NO_BIAS),
    ROW("clvp_encoder", H, 0, STACK_OF("CLVP"), NULL, NOWINDOW, NO_BIAS),
    /* CodeGenConfig: GPT-J's attention (rotate_every_two on the first rotary_dim features,
     * theta 10000 fixed, head_dim hidden_size / num_attention_heads, no biases) with q, k
     * and v fused in qkv_proj, packed per model-parallel group (mp_num 4: each group its
     * quarter of the heads' q rows, then v's, then k's) */
    ROW("codegen", I, RA_HF_ALIASES | RA_HF_FIXED_ROPE | RA_HF_HEAD_DIM_BY_HEADS, NULL,
        "rotary_dim=64", NOWINDOW, FIXED(0, 0), .names = codegen_names),
    /* CohereConfig: rope_theta 10000 by default in transformers 4.57, its default_theta 500000
     * in 5 */
    ROW("cohere", I, RA_HF_USE_QK_NORM | WHOLE, NULL, "layer_norm_eps=1e-05", NOWINDOW, ALL(AB, 0),
        .disputed_theta = "10000 in transformers 4.57, 500000 in 5"),
    ROW("cohere2", I, NOPE_FULL | WHOLE, NULL, "sliding_window=4096 sliding_window_pattern=4",
        PATTERN, ALL(AB, 0)),
    /* Cohere2MoeConfig: head_dim 128; force_rope in the dense-MLP layers; its
     * sliding_window_pattern read only without layer_types (then refused); rope_theta a typed
     * field (null fails) */
    ROW("cohere2_moe", I,
        NOPE_FULL | RA_HF_ROPE_DENSE_LAYERS | RA_HF_WINDOW_PATTERN | RA_HF_THETA_TYPED | WHOLE,
        NULL,
        "head_dim=128 sliding_window=4096", LISTED, ALL(AB, 0)),
    /* CohereCompassTextConfig: rope_parameters by layer type (null: that type without RoPE),
     * each the default rope, M-RoPE with Qwen3-VL's interleaved sections (mrope_section
     * default [24, 20, 20]); head_dim hidden_size / num_attention_heads; layer_types (else
     * every layer full) */
    ROW("cohere_compass", H, COHERE_COMPASS, NULL, COHERE_COMPASS_DEFAULTS,
        RA_HF_WINDOWS_LISTED_ELSE_NONE, ALL(AB, 0), DEFAULT_TEXT),
    ROW("cohere_compass_text", H, COHERE_COMPASS, NULL, COHERE_COMPASS_DEFAULTS,
        RA_HF_WINDOWS_LISTED_ELSE_NONE, ALL(AB, 0)),
    ROW("cohere_compass_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("colmodernvbert", H, 0, VLM_CONFIG, NULL, NOWINDOW, NO_BIAS),
    ROW("colpali", H, 0, VLM_CONFIG, NULL, NOWINDOW, NO_BIAS),
    ROW("colqwen2", H, 0, VLM_CONFIG, NULL, NOWINDOW, NO_BIAS),
    /* Cosmos3EdgeTextConfig (Cosmos3-Edge): Llama's attention (attention_bias for q, k, v and
     * o), Qwen3-VL's interleaved M-RoPE over all of head_dim; the default rope with
     * mrope_section only (its class raises otherwise); without rope_parameters theta 1e8 and
     * sections [24, 20, 20], a top-level rope_theta ignored */
    ROW("cosmos3_edge", H, COSMOS3_EDGE, NULL, COSMOS3_EDGE_DEFAULTS, NOWINDOW, ALL(AB, 0),
        COSMOS3_EDGE_ROPE, DEFAULT_TEXT, .names = cosmos3_edge_names),
    ROW("cosmos3_edge_text", H, COSMOS3_EDGE, NULL, COSMOS3_EDGE_DEFAULTS, NOWINDOW, ALL(AB, 0),
        COSMOS3_EDGE_ROPE),
    ROW("cosmos3_edge_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("csm", H, 0,
        "its backbone and its depth decoder (depth_decoder_config) are two stacks of RoPE "
        "layers of their own sizes, and ropeattn reads one stack of layers: not supported", NULL,
        NOWINDOW, NO_BIAS),
    ROW("csm_depth_decoder_model", H, 0,
        PART_ALONE("CSM's depth decoder"),
        NULL, NOWINDOW, NO_BIAS),
    /* CwmConfig: Qwen2's attention without biases, and its window rule */
    ROW("cwm", H, WHOLE, NULL,
        "rope_theta=1000000 hidden_size=6144 num_attention_heads=48 num_key_value_heads=8 "
        "head_dim=128 max_position_embeddings=131072 sliding_window=8192",
        RA_HF_WINDOWS_FULL_EVERY_FOURTH, FIXED(0, 0), CWM_ROPE),
    /* DbrxConfig: d_model, n_heads, max_seq_len; attn_config (fields.c) */
    ROW("dbrx", H, RA_HF_NESTED_ATTN_CONFIG | WHOLE, NULL,
        "hidden_size=2048 num_attention_heads=16 max_position_embeddings=2048", NOWINDOW,
        FIXED(0, 0), .names = dbrx_names),
    /* DeepseekOcr2TextConfig (DeepSeek-OCR 2's text model): Llama's attention (attention_bias
     * on all four), head_dim hidden_size / num_attention_heads whatever the config says, no
     * latent attention (its config class drops DeepseekV2Config's latent sizes) */
    ROW("deepseek_ocr2", H, RA_HF_HEAD_DIM_BY_HEADS | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0), DEFAULT_TEXT),
    ROW("deepseek_ocr2_encoder", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("deepseek_ocr2_sam_vision_model", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("deepseek_ocr2_text", H, RA_HF_HEAD_DIM_BY_HEADS | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0)),
    ROW("deepseek_ocr2_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("deepseek_v2", I, RA_HF_MLA, NULL, DEEPSEEK_V2_DEFAULTS, NOWINDOW, NO_BIAS),
    ROW("deepseek_v3", I, MLA_V3, NULL, DEEPSEEK_V3_DEFAULTS, NOWINDOW,
        NO_BIAS),
    ROW("deepseek_v32", I, DSA, NULL, DEEPSEEK_V32_DEFAULTS, NOWINDOW, NO_BIAS),
    ROW("deepseek_v4", I, 0,
        "its compressed sparse attention (keys compressed per block, then an indexer's top-k) "
        "is not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("dia", H, 0, ENCODER_DECODER, NULL, NOWINDOW, NO_BIAS),
    ROW("dia_decoder", H, 0, STACK_OF("Dia"), NULL, NOWINDOW, NO_BIAS),
    ROW("dia_encoder", H, 0, STACK_OF("Dia"), NULL, NOWINDOW, NO_BIAS),
    /* DiffLlamaAttention (transformers 5): each query head attends over both halves of the
     * key/value heads' values (2 head_dim features); head j's output minus lambda times head
     * j + H/2's, RMS-normed over the 2 head_dim and times 1 - lambda_init(layer) */
    ROW("diffllama", H, 0,
        "its differential attention (each query head's softmax over the values of both halves "
        "of the key/value heads, head j's output minus lambda = exp(lambda_q1 . lambda_k1) - "
        "exp(lambda_q2 . lambda_k2) + lambda_init times head j + H/2's, RMS-normed over "
        "2 head_dim and scaled by 1 - lambda_init) is not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("diffusion_gemma", H, 0, DIFFUSION_GEMMA, NULL, NOWINDOW, NO_BIAS),
    ROW("diffusion_gemma_text", H, 0, DIFFUSION_GEMMA, NULL, NOWINDOW, NO_BIAS),
    ROW("dinov3_vit", H, 0, DINOV3_ROPE, NULL, NOWINDOW, NO_BIAS),
    ROW("doge", H, 0,
        "its dynamic mask attention (a bias on the logits from v through dt_proj and A, "
        "keep_window_size) is not supported", NULL, NOWINDOW, NO_BIAS),
    /* Dots1Config: Qwen3's attention; layer_types, else sliding from max_window_layers on */
    ROW("dots1", H, RA_HF_QK_NORM | WHOLE, NULL,
        "hidden_size=4608 num_key_value_heads=32 sliding_window=4096 max_window_layers=62",
        RA_HF_WINDOWS_FROM_MAX, ALL(AB, 0)),
    ROW("dots3_note", I, DOTS3, NULL, DOTS3_DEFAULTS, LISTED, NO_BIAS),
    ROW("dots3_note_audio_encoder", H, 0, PART_ALONE("an audio encoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("dots3_note_text", I, DOTS3, NULL, DOTS3_DEFAULTS, LISTED, NO_BIAS),
    ROW("dots3_note_vision_encoder", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("edgetam_video", H, 0, SAM_MEMORY_ROPE, NULL, NOWINDOW, NO_BIAS),
    ROW("edgetam_video_mask_decoder", H, 0,
        PART_ALONE("a segmentation model's mask decoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("efficientloftr", H, 0,
        "its aggregated attention pools the keys and values (and queries) of a coarse feature "
        "map by convolution and max-pooling before its 2-D RoPE, and attends across two "
        "images: not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("embedding_gemma2", H, 0, EMBEDDING_GEMMA2, NULL, NOWINDOW, NO_BIAS),
    ROW("embedding_gemma2_text", H, 0, EMBEDDING_GEMMA2, NULL, NOWINDOW, NO_BIAS),
    /* Emu3Config: its text_config an Emu3TextConfig (Llama's attention) */
    ROW("emu3", H, WHOLE, NULL,
        "rope_theta=1000000 hidden_size=4096 num_attention_heads=32 num_key_value_heads=8 "
        "max_position_embeddings=9216", NOWINDOW, ALL(AB, 0), DEFAULT_TEXT, .names = emu3_names),
    ROW("emu3_text_model", H, WHOLE, NULL,
        "rope_theta=1000000 hidden_size=4096 num_attention_heads=32 num_key_value_heads=8 "
        "max_position_embeddings=9216", NOWINDOW, ALL(AB, 0), .names = emu3_names),
    ROW("emu3_vqgan", H, 0,
        PART_ALONE("Emu3's image tokenizer, a VQ-GAN"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("eomt_dinov3", H, 0, DINOV3_ROPE, NULL, NOWINDOW, NO_BIAS),
    /* Ernie4_5Config, Ernie4_5_MoeConfig (the MoE's has no head_dim: hidden_size /
     * num_attention_heads); use_bias biases q, k, v and o */
    ROW("ernie4_5", I, WHOLE, NULL, "head_dim=128 num_key_value_heads=2 rope_theta=500000",
        NOWINDOW,
        ALL("use_bias", 0)),
    ROW("ernie4_5_moe", I, WHOLE, NULL, "num_key_value_heads=4 rope_theta=500000", NOWINDOW,
        ALL("use_bias", 0)),
    /* EsmConfig (ESM-2): an encoder (is_decoder: causal) whose rotary embedding, with
     * position_embedding_type "rotary", rotates all of hidden_size / num_attention_heads by
     * rope_theta; q scaled by head_dim^-1/2 before RoPE (the same logits); biased projections.
     * The layer is attention.self and attention.output.dense (not the LayerNorm before nor
     * the residual after) */
    ROW("ernie4_5_vl_moe", I, 0, ERNIE_VL, NULL, NOWINDOW, NO_BIAS),
    ROW("ernie4_5_vl_moe_text", I, 0, ERNIE_VL, NULL, NOWINDOW, NO_BIAS),
    ROW("ernie4_5_vl_moe_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* EsmConfig: rope_theta a typed field (null fails) */
    ROW("esm", H, RA_HF_NON_CAUSAL | RA_HF_IS_DECODER_KEY | RA_HF_ROTARY_REQUIRED |
        RA_HF_HEAD_DIM_BY_HEADS | RA_HF_THETA_TYPED, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=1026", NOWINDOW,
        FIXED(1, 1), .names = esm_names, .block_norm = "LayerNorm."),
    /* EsmcConfig: an encoder (every token sees every other one), q and k LayerNormed over
     * the whole projection (no bias, epsilon 1e-5), no GQA (its config class refuses it) */
    ROW("esmc", H, RA_HF_QK_NORM | RA_HF_NORM_OVER_PROJECTION | RA_HF_QK_NORM_LAYER |
        RA_HF_NON_CAUSAL | WHOLE, NULL,
        "hidden_size=2560 num_attention_heads=40 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0), .names = esmc_names),
    ROW("esmfold2", H, 0,
        "a structure model: its folding blocks' attention (pair representations, relative "
        "position encodings, sliding atom windows) is not supported; its ESMC language model "
        "runs as model_type esmc from an ESMC checkpoint", NULL, NOWINDOW, NO_BIAS),
    /* EuroBertConfig: an encoder with Llama's attention (every token sees every other one);
     * num_key_value_heads and head_dim default to num_attention_heads and hidden_size /
     * num_attention_heads */
    ROW("eurobert", H, RA_HF_NON_CAUSAL | WHOLE, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=8192", NOWINDOW,
        ALL(AB, 0)),
    /* EvollaConfig: Llama's attention (its protein encoder's and the aligner's
     * cross-attention are other modules); rope_theta 500000 by default */
    ROW("evolla", H, WHOLE, NULL,
        "rope_theta=500000 hidden_size=4096 num_attention_heads=32 num_key_value_heads=8 "
        "max_position_embeddings=8192 rms_norm_eps=1e-05", NOWINDOW, ALL(AB, 0)),
    ROW("exaone4", H, EXAONE4 | WHOLE, NULL, EXAONE4_DEFAULTS, PATTERN, FIXED(0, 0)),
    /* Exaone4_5_Config without text_config: Exaone4Config's defaults; a text_config without
     * model_type refused (its __post_init__ reads text_config["model_type"]: KeyError) */
    ROW("exaone4_5", H, EXAONE4 | WHOLE, NULL, EXAONE4_DEFAULTS, PATTERN, FIXED(0, 0),
        DEFAULT_TEXT, .text_config_typed = 1),
    /* EXAONE 4.5's text_config (Exaone4_5_Config renames its model_type exaone4; it fails
     * on a text_config without one) */
    ROW("exaone4_5_text", H, EXAONE4 | WHOLE, NULL, EXAONE4_DEFAULTS, PATTERN, FIXED(0, 0)),
    ROW("exaone4_5_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("exaone_moe", H, EXAONE4 | WHOLE, NULL, EXAONE4_DEFAULTS, PATTERN, FIXED(0, 0)),
    ROW("falcon", H, RA_HF_QKV_BY_MULTI_QUERY | WHOLE, NULL, NULL, NOWINDOW, ALL("bias", 0),
        .names = falcon_names),
    ROW("falcon_h1", H, RA_HF_KEY_MULTIPLIER | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0)),
    ROW("flex_olmo", H, OLMO2 | WHOLE, NULL, "rope_theta=500000", NOWINDOW, ALL(AB, 0)),
    /* FlintConfig: RoPE only in the sliding layers, sinks */
    ROW("flint", H, RA_HF_QK_NORM | NOPE_FULL | RA_HF_SINKS | WHOLE, NULL,
        "head_dim=128 sliding_window=513", LISTED, ALL(AB, 0),
        .sinks_alias = "softmax_offset"),
    ROW("gemma", H, WHOLE, NULL, "head_dim=256", NOWINDOW, ALL(AB, 0)),
    ROW("gemma2", H, RA_HF_PRE_ATTN_SCALAR | RA_HF_SOFTCAP | WHOLE, NULL,
        "head_dim=256 query_pre_attn_scalar=256 attn_logit_softcapping=50 sliding_window=4096 "
        "sliding_window_pattern=2", PATTERN, ALL(AB, 0)),
    ROW("gemma3", H, GEMMA3 | WHOLE, NULL, GEMMA3_DEFAULTS, PATTERN, ALL(AB, 0), DEFAULT_TEXT),
    ROW("gemma3_text", H, GEMMA3 | WHOLE, NULL, GEMMA3_DEFAULTS, PATTERN, ALL(AB, 0)),
    ROW("gemma3n", H, GEMMA3N | WHOLE, NULL, GEMMA3N_DEFAULTS, LISTED, ALL(AB, 0), DEFAULT_TEXT),
    ROW("gemma3n_text", H, GEMMA3N | WHOLE, NULL, GEMMA3N_DEFAULTS, LISTED, ALL(AB, 0)),
    ROW("gemma4", H, GEMMA4, NULL, GEMMA4_SIZES "sliding_window=512", LISTED, ALL(AB, 0),
        GEMMA4_ROPE, DEFAULT_TEXT),
    ROW("gemma4_assistant", H, 0, GEMMA4_ASSISTANT, NULL, NOWINDOW, NO_BIAS),
    ROW("gemma4_audio", H, 0, PART_ALONE("an audio encoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("gemma4_text", H, GEMMA4, NULL, GEMMA4_SIZES "sliding_window=512", LISTED, ALL(AB, 0),
        GEMMA4_ROPE),
    ROW("gemma4_unified", H, GEMMA4, NULL, GEMMA4_SIZES "sliding_window=1024", LISTED,
        ALL(AB, 0), GEMMA4_ROPE, DEFAULT_TEXT),
    ROW("gemma4_unified_assistant", H, 0, GEMMA4_ASSISTANT, NULL, NOWINDOW, NO_BIAS),
    ROW("gemma4_unified_text", H, GEMMA4, NULL, GEMMA4_SIZES "sliding_window=1024", LISTED,
        ALL(AB, 0), GEMMA4_ROPE),
    ROW("gemma4_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("glm", I, 0, NULL, "head_dim=128 partial_rotary_factor=0.5", NOWINDOW, QKV(AB, 1)),
    ROW("glm4", I, 0, NULL, "head_dim=128 partial_rotary_factor=0.5", NOWINDOW, QKV(AB, 1)),
    /* Glm4MoeConfig: o_proj has no bias; q/k norms with use_qk_norm */
    ROW("glm4_moe", H, RA_HF_QK_NORM_BY_KEY, NULL,
        "partial_rotary_factor=0.5 rms_norm_eps=1e-05 num_attention_heads=96 "
        "num_key_value_heads=8", NOWINDOW, QKV(AB, 0)),
    /* Glm4MoeLiteConfig: head_dim is another name for qk_rope_head_dim (attribute_map) */
    ROW("glm4_moe_lite", I, MLA_V3, NULL, GLM4_MOE_LITE_DEFAULTS, NOWINDOW, NO_BIAS),
    /* Glm4vTextConfig (GLM-4.1V): interleaved pairs, M-RoPE in chunked sections over the
     * rotated pairs (its code's [8, 12, 12] where mrope_section is absent: GLM_MROPE, refused
     * where the rotary pairs are not 32, as transformers fails), partial_rotary_factor read (default 1); head_dim hidden_size /
     * num_attention_heads (its rotary embedding reads a head_dim key, its attention not: one
     * that differs refused); q, k and v always biased, o not */
    ROW("glm4v", I, GLM4V, NULL, GLM4V_DEFAULTS, NOWINDOW, FIXED(1, 0), DEFAULT_TEXT, GLM_MROPE),
    /* Glm4vMoeTextConfig (GLM-4.5V): Glm4MoeConfig's attention without q/k norms, rotate_half
     * pairs, M-RoPE in chunked sections as GLM-4.1V's, partial_rotary_factor 0.5 by default;
     * attention_bias for q, k and v */
    ROW("glm4v_moe", H, RA_HF_MROPE, NULL, GLM4V_MOE_DEFAULTS, NOWINDOW, QKV(AB, 1),
        DEFAULT_TEXT, GLM_MROPE),
    ROW("glm4v_moe_text", H, RA_HF_MROPE, NULL, GLM4V_MOE_DEFAULTS, NOWINDOW, QKV(AB, 1),
        GLM_MROPE),
    ROW("glm4v_moe_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("glm4v_text", I, GLM4V, NULL, GLM4V_DEFAULTS, NOWINDOW, FIXED(1, 0), GLM_MROPE),
    ROW("glm4v_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("glm5_next", I, 0, NOPE_LATENT("linear-attention (KDA) layers"), NULL, NOWINDOW,
        NO_BIAS),
    ROW("glm5_next_text", I, 0, NOPE_LATENT("linear-attention (KDA) layers"), NULL, NOWINDOW,
        NO_BIAS),
    ROW("glm5_next_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* GlmImageTextConfig (GLM-Image): GLM-4.5V's rope (rotate_half pairs, chunked M-RoPE,
     * partial_rotary_factor read, default 1); attention_bias (default true) for q, k and v */
    ROW("glm_image", H, RA_HF_MROPE, NULL, GLM_IMAGE_DEFAULTS, NOWINDOW, QKV(AB, 1),
        DEFAULT_TEXT, GLM_MROPE),
    ROW("glm_image_text", H, RA_HF_MROPE, NULL, GLM_IMAGE_DEFAULTS, NOWINDOW, QKV(AB, 1),
        GLM_MROPE),
    ROW("glm_moe_dsa", I, DSA | RA_HF_INDEXER_SHARED, NULL, GLM_MOE_DSA_DEFAULTS, NOWINDOW,
        NO_BIAS),
    /* GlmOcrTextConfig (GLM-OCR): GLM-4.1V's attention and rope without any bias */
    ROW("glm_ocr", I, GLM4V, NULL, GLM_OCR_DEFAULTS, NOWINDOW, NO_BIAS, DEFAULT_TEXT, GLM_MROPE),
    ROW("glm_ocr_text", I, GLM4V, NULL, GLM_OCR_DEFAULTS, NOWINDOW, NO_BIAS, GLM_MROPE),
    ROW("glm_ocr_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* GlmAsrEncoderConfig: GLM-ASR's audio encoder saved alone; Llama's attention without a
     * causal mask, biases on q, v and o (never k), rotate_half on the first half of each head
     * (partial_rotary_factor 0.5 by default), its positions 0 .. S-1 */
    ROW("glmasr_encoder", H, RA_HF_NON_CAUSAL, NULL,
        "hidden_size=1280 num_attention_heads=20 max_position_embeddings=1500 "
        "partial_rotary_factor=0.5", NOWINDOW, {NULL, 1, NULL, 1, 0, 1},
        .names = glmasr_encoder_names),
    ROW("got_ocr2_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("gpt_neox", H, RA_HF_ALIASES | RA_HF_QKV_PER_HEAD | RA_HF_ROPE_NEOX_NAMES, NULL, "partial_rotary_factor=0.25",
        NOWINDOW, ALL(AB, 1), .names = gpt_neox_names),
    /* GptOssConfig (transformers 5) */
    /* GPTNeoXJapaneseAttention: no biases in its projections (the last layer's dense_bias is
     * returned beside the module's output, for the decoder layer to add: checkpoint.c) */
    ROW("gpt_neox_japanese", H, RA_HF_ALIASES | RA_HF_QKV_PER_HEAD | RA_HF_ROPE_NEOX_NAMES, NULL, NULL, NOWINDOW,
        FIXED(0, 0), .names = gpt_neox_japanese_names),
    ROW("gpt_oss", H, RA_HF_SINKS | RA_HF_COS_SIN_HALF_WIDTH | WHOLE, NULL,
        "rope_theta=150000 head_dim=64 max_position_embeddings=131072 sliding_window=128 "
        "sliding_window_pattern=2", PATTERN, ALL(AB, 1), GPT_OSS_ROPE),
    ROW("gptj", I, RA_HF_ALIASES | RA_HF_FIXED_ROPE, NULL, "rotary_dim=64", NOWINDOW, FIXED(0, 0),
        .names = gptj_names),
    ROW("gradium_phonon_tts", H, 0,
        "its checkpoints keep q, k and v fused in flow_lm.transformer.layers.N.self_attn.in_proj "
        "with q's and k's rows in interleaved pairs (transformers splits and permutes them at "
        "load) and their biases under model.layers.N.self_attn: not supported",
        NULL, NOWINDOW, NO_BIAS),
    ROW("granite", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL, "attention_multiplier=1", NOWINDOW,
        ALL(AB, 0)),
    /* GraniteSwaConfig: windows by layer_types, sinks */
    /* GraniteDoclingTextConfig, Granite4VisionTextConfig: Granite's attention (attention_multiplier
     * the softmax scale, attention_bias on all four, head_dim where given) */
    ROW("granite4_vision", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL,
        "attention_multiplier=1 max_position_embeddings=2048", NOWINDOW, ALL(AB, 0),
        DEFAULT_TEXT),
    ROW("granite4_vision_text", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL,
        "attention_multiplier=1 max_position_embeddings=2048", NOWINDOW, ALL(AB, 0)),
    ROW("granite_docling", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL, GRANITE_DOCLING_DEFAULTS,
        NOWINDOW, ALL(AB, 0), DEFAULT_TEXT, .names = granite_docling_names),
    ROW("granite_docling_text", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL,
        GRANITE_DOCLING_DEFAULTS, NOWINDOW, ALL(AB, 0), .names = granite_docling_names),
    ROW("granite_docling_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("granite_swa", H, RA_HF_ATTENTION_MULTIPLIER | RA_HF_SINKS | RA_HF_LAYER_ROPE_THETA | WHOLE,
        NULL,
        "attention_multiplier=1 sliding_window=128", LISTED, ALL(AB, 0)),
    ROW("granitemoe", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL, "attention_multiplier=1",
        NOWINDOW,
        ALL(AB, 0)),
    ROW("granitemoe_swa", H,
        RA_HF_ATTENTION_MULTIPLIER | RA_HF_SINKS | RA_HF_LAYER_ROPE_THETA | WHOLE,
        NULL, "attention_multiplier=1 sliding_window=128", LISTED, ALL(AB, 0)),
    ROW("granitemoehybrid", H, RA_HF_ATTENTION_MULTIPLIER | RA_HF_ROPE_BY_EMBEDDING_TYPE | WHOLE,
        NULL,
        "attention_multiplier=1", NOWINDOW, ALL(AB, 0)),
    ROW("granitemoeshared", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL, "attention_multiplier=1",
        NOWINDOW,
        ALL(AB, 0)),
    /* GteConfig: an encoder (every token sees every other one), q, k, v and o biased, as many
     * key/value heads as query heads (the model reads no num_key_value_heads), rope_theta
     * 160000 by default */
    ROW("gte", H, RA_HF_NON_CAUSAL | RA_HF_KV_HEADS_IGNORED | WHOLE, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=8192 rope_theta=160000",
        NOWINDOW, FIXED(1, 1), .names = gte_names),
    /* HeliumConfig: attention_bias for q, k and v only */
    ROW("helium", I, WHOLE, NULL, "head_dim=128 rope_theta=100000", NOWINDOW, QKV(AB, 0)),
    /* HiggsAudioV2Config: Llama's attention, shared by its text and audio tokens (the block's
     * second norms and MLP for audio tokens are not the layer's); head_dim 128, a llama3 rope */
    ROW("higgs_audio_v2", H, WHOLE, NULL,
        "hidden_size=3072 num_attention_heads=24 num_key_value_heads=8 head_dim=128 "
        "max_position_embeddings=2048", NOWINDOW, ALL(AB, 0), HIGGS_AUDIO_V2_ROPE),
    /* HrmTextConfig: its own gate_proj, sigmoid, on the attention output (biased with the
     * others by attention_bias: refused, gate_proj.bias unread); two stacks (H_module,
     * L_module) run in cycles, each run a cache slot of its own: a layer number is a slot */
    ROW("hrm_text", H, RA_HF_GATE_PROJ | RA_HF_LAYER_STACKS | WHOLE, NULL,
        "hidden_size=1536 num_attention_heads=12 head_dim=128", NOWINDOW, ALL(AB, 0)),
    ROW("hunyuan_v1_dense", H, HUNYUAN | WHOLE, NULL, "rms_norm_eps=1e-05", NOWINDOW, ALL(AB, 0),
        .ntk_alpha = 1),
    ROW("hunyuan_v1_moe", H, HUNYUAN | WHOLE, NULL, "rms_norm_eps=1e-05", NOWINDOW, ALL(AB, 0),
        .ntk_alpha = 1),
    ROW("hunyuan_vl", H, 0, HUNYUAN_VL, NULL, NOWINDOW, NO_BIAS),
    ROW("hunyuan_vl_text", H, 0, HUNYUAN_VL, NULL, NOWINDOW, NO_BIAS),
    ROW("hunyuan_vl_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("hy_v3", H, RA_HF_QK_NORM | WHOLE, NULL,
        "rope_theta=11158840 rms_norm_eps=1e-05 num_attention_heads=64 num_key_value_heads=8 "
        "head_dim=128", NOWINDOW, ALL(AB, 0)),
    /* HYV4Config: DeepSeek-V3.2's attention (indexer top-k shared by indexer_types) with
     * rotate_half's rope, its output times sigmoid(gate_proj(x)) per feature, and sinks */
    ROW("hy_v4", H, DSA | RA_HF_INDEXER_SHARED | RA_HF_GATE_PROJ | RA_HF_SINKS, NULL,
        HY_V4_DEFAULTS, NOWINDOW, NO_BIAS),
    /* HyperCLOVAXConfig: attention_multiplier absent or null is head_dim^-1/2 */
    ROW("hyperclovax", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0)),
    /* HyperCLOVAXVisionV2Config: its text_config a HyperCLOVAXConfig */
    ROW("hyperclovax_vision_v2", H, RA_HF_ATTENTION_MULTIPLIER | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0), DEFAULT_TEXT),
    /* IdeficsConfig: its decoder layers' self-attention is Llama's without biases, key/value
     * groups or a head_dim of its own (hidden_size / num_attention_heads); the gated
     * cross-attention layers between them (gated_cross_attn_layers.N) are other modules */
    ROW("idefics", H, RA_HF_HEAD_DIM_BY_HEADS | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=2048", NOWINDOW,
        FIXED(0, 0)),
    ROW("idefics_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("inkling2", H, 0, INKLING2, NULL, NOWINDOW, NO_BIAS),
    ROW("inkling2_text", H, 0, INKLING2, NULL, NOWINDOW, NO_BIAS),
    ROW("inkling2_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("internlm2", H, WHOLE, NULL, NULL, NOWINDOW, ALL("bias", 1), .names = internlm2_names,
        .remote_code = 1),
    /* InternLM3Config: Llama's model */
    ROW("internlm3", H, RA_HF_QKV_BIAS_NAME | WHOLE, NULL,
        "hidden_size=4096 num_attention_heads=32 num_key_value_heads=2 head_dim=128 "
        "max_position_embeddings=32768", NOWINDOW, ALL(AB, 0)),
    /* IQuestCoderConfig: Llama's model */
    ROW("iquestcoder", H, WHOLE, NULL,
        "hidden_size=5120 num_attention_heads=40 num_key_value_heads=8 head_dim=128 "
        "max_position_embeddings=131072", NOWINDOW, ALL(AB, 0)),
    ROW("jais2", H, WHOLE, NULL,
        "hidden_size=3328 num_attention_heads=26 max_position_embeddings=8192", NOWINDOW,
        ALL(AB, 1)),
    ROW("jamba", H, 0, NO_ROTARY("Mamba layers"), NULL, NOWINDOW, NO_BIAS),
    ROW("jetmoe", H, 0,
        "its mixture of attention heads (each token's queries and output projection from its "
        "top-k routed experts) is not supported", NULL, NOWINDOW, NO_BIAS),
    /* JinaEmbeddingsV3Config: GTE's encoder attention (biased, no GQA), rope_theta 20000 by
     * default; its task LoRA adapters are not in transformers' model */
    ROW("jina_embeddings_v3", H, RA_HF_NON_CAUSAL | RA_HF_KV_HEADS_IGNORED | WHOLE, NULL,
        "hidden_size=1024 num_attention_heads=16 max_position_embeddings=8194 rope_theta=20000",
        NOWINDOW, FIXED(1, 1), .names = jina_embeddings_v3_names),
    /* Kimi K2: DeepSeek-V3's remote modeling code (transformers has no
        * kimi_k2 of its own) */
    ROW("kimi_k2", I, RA_HF_MLA, NULL, DEEPSEEK_V3_DEFAULTS, NOWINDOW, NO_BIAS,
        .remote_code = 1),
    /* Kimi_K25Config (Kimi K2.5): its text_config a DeepseekV3Config (AutoConfig's, by its
     * model_type: deepseek_v3 where it names none; kimi_k2 renamed deepseek_v3 by the class,
     * which kimi_k2's row reads alike but for rope_interleave false, refused there) */
    ROW("kimi_k25", I, MLA_V3, NULL, DEEPSEEK_V3_DEFAULTS, NOWINDOW, NO_BIAS, DEFAULT_TEXT,
        .names = kimi_k25_names),
    ROW("kimi_k25_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("kimi_linear", H, 0, NOPE_LATENT("Kimi Delta Attention layers"), NULL, NOWINDOW,
        NO_BIAS),
    ROW("kolibri1", H, EXAONE4 | WHOLE, NULL, "head_dim=128 sliding_window=513", LISTED,
        FIXED(0, 0)),
    ROW("kyutai_speech_to_text", H, 0,
        "transformers' full forward masks no window (create_causal_mask) while its cache "
        "keeps only the last sliding_window keys in generation (the config's sliding_window, "
        "default 375): the two disagree past sliding_window tokens, so neither is run",
        NULL, NOWINDOW, NO_BIAS),
    /* LagunaConfig: q/k norms, a rope per layer type, its output times softplus(g_proj(x))
     * (per head or per feature: gating), query heads per layer */
    ROW("laguna", H,
        RA_HF_QK_NORM | RA_HF_LOCAL_ROPE | RA_HF_SOFTPLUS_G_PROJ | RA_HF_HEADS_PER_LAYER |
            RA_HF_ROPE_TYPES_NEEDED | RA_HF_ROPE_SCALING_UNREAD | RA_HF_TYPE_THETA_NEEDED,
        NULL,
        "num_attention_heads=48 num_key_value_heads=8 head_dim=128 "
        "max_position_embeddings=131072 sliding_window=512", RA_HF_WINDOWS_LISTED_ELSE_NONE,
        ALL(AB, 0), LAGUNA_ROPE),
    ROW("lasr_ctc", H, RA_HF_NON_CAUSAL | WHOLE, NULL, LASR_DEFAULTS, NOWINDOW, ALL(AB, 0),
        .text_parent = "encoder_config", .text_parent_whole = 1, .names = lasr_names),
    /* LasrEncoderConfig (Google's MedASR): a conformer encoder whose self-attention is Llama's
     * without a causal mask (attention_bias on all four), head_dim hidden_size / heads, its
     * positions 0 .. S-1; LasrCTCConfig holds it as encoder_config */
    ROW("lasr_encoder", H, RA_HF_NON_CAUSAL | WHOLE, NULL, LASR_DEFAULTS, NOWINDOW, ALL(AB, 0),
        .names = lasr_names),
    ROW("lfm2", H, LFM2 | WHOLE, NULL, LFM2_DEFAULTS, NOWINDOW, FIXED(0, 0), .names = lfm2_names),
    ROW("lfm2_moe", H, LFM2 | WHOLE, NULL, LFM2_DEFAULTS, NOWINDOW, FIXED(0, 0),
        .names = lfm2_names),
    /* Lfm3Config: Qwen3's q/k norms (epsilon norm_eps), a sigmoid gate per head (g_proj,
     * use_attention_gate), a rope per layer type, windows by layer_types; its convolution
     * layers are refused */
    ROW("lfm3", H, LFM3, NULL, LFM3_DEFAULTS, LISTED, ALL(AB, 0), LFM3_ROPE),
    /* Lfm3VlConfig: its text_config an Lfm3Config (AutoConfig's: lfm3 where it names none) */
    ROW("lfm3_vl", H, LFM3, NULL, LFM3_DEFAULTS, LISTED, ALL(AB, 0), LFM3_ROPE, DEFAULT_TEXT),
    ROW("lfm3_vl_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("lightglue", H, 0,
        "its self-attention rotates q and k by a learned Fourier encoding of keypoint "
        "coordinates (not position indices), beside cross-attention between two images: not "
        "supported", NULL, NOWINDOW, NO_BIAS),
    ROW("llama", H, WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0)),
    ROW("llama4", I, LLAMA4 | WHOLE, NULL, LLAMA4_DEFAULTS, NOWINDOW, ALL(AB, 0), DEFAULT_TEXT),
    ROW("llama4_text", I, LLAMA4 | WHOLE, NULL, LLAMA4_DEFAULTS, NOWINDOW, ALL(AB, 0)),
    ROW("llama4_vision_model", H, 0, VISION_FROM_WHOLE, NULL, NOWINDOW, NO_BIAS),
    ROW("longcat_flash", I, 0,
        "its decoder layers hold two latent attention modules each (self_attn.0 and "
        "self_attn.1: cache slots 2N and 2N + 1), their q and latents rescaled (mla_scale_q_lora, "
        "mla_scale_kv_lora): not supported", NULL, NOWINDOW, NO_BIAS),
    /* MellumConfig: a rope per layer type; layer_types, else every layer full */
    ROW("mellum", H,
        RA_HF_QK_NORM | RA_HF_LOCAL_ROPE | RA_HF_ROPE_TYPES_NEEDED | RA_HF_ROPE_SCALING_UNREAD |
            RA_HF_TYPE_THETA_NEEDED,
        NULL,
        "hidden_size=2304 num_attention_heads=32 num_key_value_heads=4 head_dim=128 "
        "sliding_window=1024", RA_HF_WINDOWS_LISTED_ELSE_NONE, ALL(AB, 0), MELLUM_ROPE),
    ROW("mimi", H, 0,
        "its attention layers sit in two stacks (encoder_transformer and "
        "decoder_transformer), and ropeattn reads one stack of layers: not read",
        NULL, NOWINDOW, NO_BIAS),
    ROW("mimi_decoder", H, 0, STACK_OF("Mimi"), NULL, NOWINDOW, NO_BIAS),
    ROW("mimi_encoder", H, 0, STACK_OF("Mimi"), NULL, NOWINDOW, NO_BIAS),
    /* MiMoV2FlashConfig: head_dim 192, v_head_dim 128, v scaled; its sliding layers have
     * num_key_value_heads * 2 key/value heads and sinks; a rope per layer type (partial);
     * layer_types (without it: refused); o_proj without a bias */
    ROW("mimo_v2_flash", H, MIMO_V2_FLASH, NULL, MIMO_V2_FLASH_DEFAULTS, LISTED, QKV(AB, 0),
        MIMO_V2_FLASH_ROPE, .sinks_alias = "attention_sink_bias"),
    /* MiniCPM3: DeepSeek-V2's attention with rotate_half's rope */
    ROW("minicpm3", H, RA_HF_MLA | RA_HF_V_HEAD_DIM_FROM_HEADS, NULL, MINICPM3_DEFAULTS,
        NOWINDOW, NO_BIAS),
    /* MiniMaxConfig: sliding_window (default null) slides every attention layer */
    ROW("minimax", H, WHOLE, NULL, "rope_theta=1000000", RA_HF_WINDOWS_EVERY_LAYER, FIXED(0, 0)),
    /* MiniMaxM2Config: q/k norms over the whole projection, rotary_dim */
    ROW("minimax_m2", H, OLMO2 | RA_HF_ROTARY_DIM_FACTOR, NULL,
        "rope_theta=5000000 hidden_size=3072 num_attention_heads=48 num_key_value_heads=8 "
        "head_dim=128", NOWINDOW, FIXED(0, 0)),
    /* MiniMaxM3VLTextConfig: Gemma's q/k norms (1 + weight); an indexer in the
     * "minimax_m3_sparse" layers; one causal mask for every layer (no window).  Its rotary_dim
     * is read by no code in transformers 5.23 (it rotates as rope_parameters says) */
    ROW("minimax_m3_vl", H, MINIMAX_M3, NULL, MINIMAX_M3_DEFAULTS, NOWINDOW, FIXED(0, 0),
        DEFAULT_TEXT),
    ROW("minimax_m3_vl_text", H, MINIMAX_M3, NULL, MINIMAX_M3_DEFAULTS, NOWINDOW, FIXED(0, 0)),
    ROW("minimax_m3_vl_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("ministral", H, WHOLE, NULL, "sliding_window=4096", RA_HF_WINDOWS_LAYER_TYPES, FIXED(0, 0)),
    /* Ministral3Config: its default rope is yarn with llama_4_scaling_beta; a sliding_window
     * (default null) slides every layer (the model ignores layer_types) */
    ROW("ministral3", H, RA_HF_POSITION_Q_SCALING | WHOLE, NULL,
        "head_dim=128 num_key_value_heads=8 max_position_embeddings=262144",
        RA_HF_WINDOWS_EVERY_LAYER, NO_BIAS, MINISTRAL3_ROPE),
    ROW("mistral", H, WHOLE, NULL, "sliding_window=4096", RA_HF_WINDOWS_LAYER_TYPES, FIXED(0, 0)),
    ROW("mistral3", H, WHOLE, NULL, NULL, RA_HF_WINDOWS_LAYER_TYPES, FIXED(0, 0), DEFAULT_TEXT),
    /* Mistral4Config: DeepSeek-V3's latent attention, q times 1 + llama_4_scaling_beta
     * log(1 + floor(position / original_max_position_embeddings)); its rope over
     * qk_nope_head_dim + qk_rope_head_dim at partial_rotary_factor qk_rope / that */
    ROW("mistral4", I, MLA_V3 | RA_HF_POSITION_Q_SCALING | RA_HF_MLA_ROPE_OF_HEAD, NULL,
        MISTRAL4_DEFAULTS, NOWINDOW, NO_BIAS, MISTRAL4_ROPE),
    /* MistralLarge4Config: its text_config a MistralLarge4TextConfig */
    ROW("mistral_large4", I, 0, MISTRAL_LARGE4, NULL, NOWINDOW, NO_BIAS),
    ROW("mistral_large4_text", I, 0, MISTRAL_LARGE4, NULL, NOWINDOW, NO_BIAS),
    ROW("mixtral", H, WHOLE, NULL, "rope_theta=1000000", RA_HF_WINDOWS_EVERY_LAYER, FIXED(0, 0)),
    ROW("mlcd", H, 0,
        "its vision attention's 2-D RoPE (MLCDRotaryEmbedding over the patch grid, the class "
        "token turned by a learned class_pos_emb) is not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("mlcd_vision_model", H, 0,
        "its vision attention's 2-D RoPE (MLCDRotaryEmbedding over the patch grid, the class "
        "token turned by a learned class_pos_emb) is not supported", NULL, NOWINDOW, NO_BIAS),
    /* MllamaConfig: its text_config a MllamaTextConfig */
    ROW("mllama", H, RA_HF_CROSS_ATTENTION_LAYERS | WHOLE, NULL,
        "rope_theta=500000 hidden_size=4096 num_attention_heads=32 num_key_value_heads=8 "
        "max_position_embeddings=131072", NOWINDOW, FIXED(0, 0), MLLAMA_CROSS, DEFAULT_TEXT),
    /* MllamaTextConfig: its self-attention layers are Llama's, head_dim
     * hidden_size / num_attention_heads (a head_dim key that differs does
     * not fit the weights' shapes: refused) */
    ROW("mllama_text_model", H, RA_HF_CROSS_ATTENTION_LAYERS | WHOLE, NULL,
        "rope_theta=500000 hidden_size=4096 num_attention_heads=32 num_key_value_heads=8 "
        "max_position_embeddings=131072", NOWINDOW, FIXED(0, 0), MLLAMA_CROSS),
    /* ModernBertConfig: an encoder, q, k and v fused (Wqkv), attention_bias for Wqkv and Wo;
     * sliding layers (layer_types, else global_attn_every_n_layers) see |i - j| <=
     * local_attention // 2; ModernBERT's decoder's ropes and window keys */
    ROW("modernbert", H, RA_HF_LOCAL_ROPE | RA_HF_LOCAL_ATTENTION | RA_HF_NON_CAUSAL |
        RA_HF_HEAD_DIM_BY_HEADS, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=8192",
        RA_HF_WINDOWS_GLOBAL_EVERY_N, ALL(AB, 0), .names = modernbert_encoder_names),
    /* ModernBertDecoderConfig: head_dim hidden_size / num_attention_heads, no GQA; attention_bias
     * for q, k, v and Wo */
    ROW("modernbert-decoder", H, RA_HF_LOCAL_ROPE | RA_HF_LOCAL_ATTENTION, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=8192", LISTED,
        ALL(AB, 0), .names = modernbert_names),
    ROW("molmo2", H, 0, MOLMO2, NULL, NOWINDOW, NO_BIAS),
    ROW("molmo2_adapter", H, 0, PART_ALONE("MoLMo 2's vision adapter"), NULL, NOWINDOW, NO_BIAS),
    ROW("molmo2_text", H, 0, MOLMO2, NULL, NOWINDOW, NO_BIAS),
    ROW("molmo2_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("moonshine", H, 0, ENCODER_DECODER, NULL, NOWINDOW, NO_BIAS),
    ROW("moonshine_streaming", H, 0, ENCODER_DECODER, NULL, NOWINDOW, NO_BIAS),
    ROW("moonshine_streaming_encoder", H, 0,
        STACK_OF("Moonshine Streaming"),
        NULL, NOWINDOW, NO_BIAS),
    /* MoshiConfig: its text decoder (MoshiForCausalLM, and MoshiForConditionalGeneration's
     * decoder.model): Llama's attention, projections under .linear; its mask is causal,
     * whatever sliding_window says (only the cache reads it); the depth decoder has no rope */
    ROW("moshi", H, RA_HF_CACHE_WINDOW | WHOLE, NULL,
        "max_position_embeddings=3000 sliding_window=3000",
        NOWINDOW, FIXED(0, 0), .names = moshi_names),
    ROW("moshi_depth", H, 0, PART_ALONE("Moshi's depth decoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("moss_transcribe_diarize_audio", H, 0,
        PART_ALONE("an audio encoder"),
        NULL, NOWINDOW, NO_BIAS),
    /* NanoChatConfig: q and k RMS-normed without weights after RoPE (Llama 4's norm, always:
     * the model reads no use_qk_norm), RoPE by the opposite angle; attention_bias for q, k, v
     * and o */
    ROW("muse_glimmer", H, 0, MUSE, NULL, NOWINDOW, NO_BIAS),
    ROW("muse_glimmer_assistant", H, 0, MUSE_GLIMMER_ASSISTANT, NULL, NOWINDOW, NO_BIAS),
    ROW("muse_glimmer_text", H, 0, MUSE, NULL, NOWINDOW, NO_BIAS),
    ROW("muse_glimmer_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("muse_spark", H, 0, MUSE " (and its o_norm)", NULL, NOWINDOW, NO_BIAS),
    ROW("muse_spark_text", H, 0, MUSE " (and its o_norm)", NULL, NOWINDOW, NO_BIAS),
    ROW("muse_spark_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("nanochat", H,
        RA_HF_QK_L2_NORM | RA_HF_QK_L2_NORM_ALWAYS | RA_HF_ROPE_OPPOSITE_ANGLE | WHOLE,
        NULL, "hidden_size=768 num_attention_heads=6 max_position_embeddings=2048", NOWINDOW,
        ALL(AB, 0)),
    ROW("nemotron", H, 0, NULL,
        "partial_rotary_factor=0.5 hidden_size=6144 num_attention_heads=48 "
        "max_position_embeddings=4096", NOWINDOW, ALL(AB, 0)),
    /* Nemotron3_5TranscribeAsrAudioConfig, Nemotron3_5TranscribeWordTimestampConfig (NVIDIA's
     * Nemotron 3.5 Transcribe): its speech recognition and word timestamp encoders saved
     * alone; its audio model (nemotron3_5_transcribe_audio) holds two encoders */
    ROW("nemotron3_5_transcribe_asr_audio", H, NEMOTRON3_5, NULL,
        "hidden_size=1280 num_attention_heads=10 max_position_embeddings=5000", NOWINDOW,
        FIXED(0, 1), NEMOTRON3_5_ROPE("Nemotron3_5TranscribeAsrAudioConfig"),
        .names = nemotron3_5_names),
    ROW("nemotron3_5_transcribe_audio", H, 0,
        "its speech recognition encoder (asr_config: runs saved alone, as "
        "nemotron3_5_transcribe_asr_audio) and its diarization model (diarization_config) are "
        "two stacks of RoPE layers of their own configs, and ropeattn reads one stack of "
        "layers: not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("nemotron3_5_transcribe_word_timestamp", H, NEMOTRON3_5, NULL,
        "hidden_size=1280 num_attention_heads=16 max_position_embeddings=5000", NOWINDOW,
        FIXED(0, 1), NEMOTRON3_5_ROPE("Nemotron3_5TranscribeWordTimestampConfig"),
        .names = nemotron3_5_names),
    /* Nemotron3DiarizationAudioConfig (NVIDIA's Nemotron-3 diarization): its audio encoder's
     * self-attention, Llama's without a causal mask, a bias on o_proj alone, rotate_half on the
     * whole head (partial_rotary_factor 1.0 by default), v_proj of every query head
     * (key/value heads other than the query heads refused); the whole model's
     * audio_config read, its layers under model.audio_tower.layers.N */
    ROW("nemotron3_diarization", H, RA_HF_NON_CAUSAL | RA_HF_KV_HEADS_EQUAL, NULL,
        NEMOTRON3_DIARIZATION_DEFAULTS, NOWINDOW, FIXED(0, 1), .text_parent = "audio_config",
        .text_parent_whole = 1, .names = nemotron3_diarization_names),
    ROW("nemotron3_diarization_audio", H, RA_HF_NON_CAUSAL | RA_HF_KV_HEADS_EQUAL, NULL,
        NEMOTRON3_DIARIZATION_DEFAULTS, NOWINDOW, FIXED(0, 1),
        .names = nemotron3_diarization_names),
    ROW("nemotron_asr_streaming", H, 0, CONFORMER_RELATIVE, NULL, NOWINDOW, NO_BIAS),
    ROW("nemotron_asr_streaming_encoder", H, 0, CONFORMER_RELATIVE, NULL, NOWINDOW, NO_BIAS),
    ROW("nemotron_h", H, 0, NO_ROTARY("Mamba and MoE layers"), NULL, NOWINDOW, NO_BIAS),
    ROW("neomme", H, 0, NEOMME, NULL, NOWINDOW, NO_BIAS),
    ROW("neucodec", H, 0, ROPE_BY_HEAD, NULL, NOWINDOW, NO_BIAS),
    /* NomicBertConfig: GTE's encoder attention without biases, rope_theta 1000 by default */
    ROW("nomic_bert", H, RA_HF_NON_CAUSAL | RA_HF_KV_HEADS_IGNORED | WHOLE, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=2048 rope_theta=1000",
        NOWINDOW, FIXED(0, 0), .names = nomic_bert_names),
    ROW("olmo", H, RA_HF_CLIP_QKV | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0)),
    /* Olmo2Config and Olmo3Config: rms_norm_eps 1e-5 (not Llama's 1e-6); Olmo3Config's sliding
     * layers without a rope_theta of their own take its default_theta, 500000, whatever
     * rope_theta says (its convert_rope_params_to_dict pops rope_theta for the full layers'
     * rope first): their rope_local_base_freq */
    ROW("olmo2", H, OLMO2 | WHOLE, NULL, "rms_norm_eps=1e-05", NOWINDOW, ALL(AB, 0)),
    ROW("olmo3", H, OLMO3 | WHOLE, NULL,
        "rms_norm_eps=1e-05 sliding_window=4096 sliding_window_pattern=4 "
        "rope_local_base_freq=500000",
        PATTERN, ALL(AB, 0), .disputed_theta = "10000 in transformers 4.57, 500000 in 5"),
    ROW("olmo_hybrid", H, OLMO2 | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0)),
    /* OlmoeConfig: OLMo 2's norms; its clip_qkv clamps after them */
    ROW("olmoe", H, OLMO2 | RA_HF_CLIP_QKV | WHOLE, NULL,
        "rms_norm_eps=1e-05 hidden_size=2048 num_attention_heads=16", NOWINDOW, ALL(AB, 0)),
    /* OpenAIPrivacyFilterConfig: GPT-OSS's attention (sinks, biases, its yarn rope, cos and sin
     * over half of head_dim) on interleaved pairs (its own _apply_rotary_emb), q and k each
     * scaled by head_dim^-0.25, no causal mask, every layer seeing |i - j| <= sliding_window
     * (layer_types not read) */
    ROW("openai_privacy_filter", I,
        RA_HF_SINKS | RA_HF_COS_SIN_HALF_WIDTH | RA_HF_NON_CAUSAL | WHOLE, NULL,
        "rope_theta=150000 head_dim=64 hidden_size=640 num_attention_heads=14 "
        "num_key_value_heads=2 max_position_embeddings=131072 sliding_window=128",
        RA_HF_WINDOWS_EVERY_LAYER, ALL(AB, 1), GPT_OSS_ROPE),
    /* PersimmonConfig: query_key_value [H, 3, D] and dense, biased; qk_layernorm */
    /* PaddleOCRTextConfig (PaddleOCR-VL; Ernie4_5Config's defaults): Qwen2.5-VL's attention
     * and M-RoPE (rotate_half pairs, chunked sections) with use_bias on q, k, v and o; its
     * multimodal config's text keys at the top level (as its hub configs are saved) or in
     * text_config */
    ROW("paddleocr_vl", H, RA_HF_MROPE | WHOLE, NULL, PADDLEOCR_DEFAULTS, NOWINDOW,
        ALL("use_bias", 0)),
    ROW("paddleocr_vl_text", H, RA_HF_MROPE | WHOLE, NULL, PADDLEOCR_DEFAULTS, NOWINDOW,
        ALL("use_bias", 0)),
    ROW("paddleocr_vl_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("parakeet_ctc", H, 0, CONFORMER_RELATIVE, NULL, NOWINDOW, NO_BIAS),
    ROW("parakeet_encoder", H, 0, CONFORMER_RELATIVE, NULL, NOWINDOW, NO_BIAS),
    ROW("parakeet_rnnt", H, 0, CONFORMER_RELATIVE, NULL, NOWINDOW, NO_BIAS),
    ROW("parakeet_tdt", H, 0, CONFORMER_RELATIVE, NULL, NOWINDOW, NO_BIAS),
    /* PeAudioEncoderConfig, PeVideoEncoderConfig, PeAudioVideoEncoderConfig (Perception
     * Encoder's audio, video and audio-video encoders saved alone); the whole models (pe_audio,
     * pe_video, pe_audio_video) are read through their text_config, a ModernBERT */
    ROW("pe_audio_encoder", I, PE_ENCODER, NULL, PE_ENCODER_DEFAULTS, NOWINDOW, ALL(AB, 0),
        .names = pe_encoder_names),
    ROW("pe_audio_video_encoder", I, PE_ENCODER, NULL, PE_ENCODER_DEFAULTS, NOWINDOW,
        ALL(AB, 0), .names = pe_encoder_names),
    ROW("pe_video_encoder", I, PE_ENCODER, NULL, PE_ENCODER_DEFAULTS, NOWINDOW, ALL(AB, 0),
        .names = pe_encoder_names),
    ROW("persimmon", H, RA_HF_QKV_PER_HEAD | RA_HF_QK_LAYERNORM_BIAS, NULL,
        "partial_rotary_factor=0.5 layer_norm_eps=1e-05", NOWINDOW, FIXED(1, 1),
        .disputed_theta = "25000 in transformers 4.57, 10000 in 5", .names = persimmon_names),
    ROW("phi", H, 0, NULL, "partial_rotary_factor=0.5", NOWINDOW, FIXED(1, 1),
        .names = phi_names),
    /* Phi3Config: its original_max_position_embeddings replaces the rope
        * object's (fields.c's standardize_rope) */
    ROW("phi3", H, RA_HF_LONGROPE_ONLY, NULL, "original_max_position_embeddings=4096",
        RA_HF_WINDOWS_EVERY_LAYER, FIXED(0, 0), .names = phi3_names),
    /* Phi4MultimodalConfig: Phi-3's attention and rope (the text model at the top level) */
    ROW("phi4_multimodal", H, RA_HF_LONGROPE_ONLY, NULL,
        "num_key_value_heads=8 max_position_embeddings=131072 "
        "original_max_position_embeddings=4096", RA_HF_WINDOWS_EVERY_LAYER, FIXED(0, 0),
        .names = phi3_names),
    ROW("phi4_multimodal_audio", H, 0, PART_ALONE("an audio encoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("phi4_multimodal_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* PhimoeConfig */
    ROW("phimoe", H, RA_HF_LONGROPE_MSCALE | WHOLE, NULL,
        "rope_theta=1000000 num_key_value_heads=8",
        RA_HF_WINDOWS_EVERY_LAYER, ALL(AB, 0)),
    ROW("pi0", H, 0,
        "a vision-language-action model: its Gemma action expert (dit_config) attends over "
        "the PaliGemma prefix's cached keys and values beside its own under a block mask, and "
        "ropeattn reads one stack of layers: not supported",
        NULL, NOWINDOW, NO_BIAS),
    ROW("pixtral", H, 0,
        "a vision tower saved alone (PixtralVisionModel): its layers run from a multimodal "
        "config's vision_config (Mistral 3, Llava: ra_hf_options.vision, --vision), which gives "
        "their names; alone: not read", NULL, NOWINDOW, NO_BIAS),
    /* PocketTTSConfig: Llama's attention (attention_bias for all four) in its text-to-speech
     * transformer; the flow head beside it has none */
    ROW("pocket_tts", H, WHOLE, NULL,
        "hidden_size=1024 num_attention_heads=16 max_position_embeddings=8192", NOWINDOW,
        ALL(AB, 0)),
    ROW("pocket_tts_audio_tokenizer", H, 0,
        PART_ALONE("an audio tokenizer"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("pocket_tts_audio_tokenizer_decoder", H, 0,
        PART_ALONE("an audio tokenizer's decoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("pocket_tts_audio_tokenizer_encoder", H, 0,
        PART_ALONE("an audio tokenizer's encoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("pp_chart2table_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("pp_doclayout_v2", H, 0,
        "a detection model: its reading-order encoder adds 2-D relative position biases and "
        "its decoder runs deformable attention, neither a RoPE layer: not supported",
        NULL, NOWINDOW, NO_BIAS),
    ROW("qwen", H, 0, FUSED, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen2", H, WHOLE, NULL, QWEN_WINDOW(28), FROM_MAX, FIXED(1, 0)),
    /* Qwen2_5OmniTextConfig (Qwen2.5-Omni's thinker): Qwen2.5-VL's attention and M-RoPE,
     * Qwen2's window rule (sliding_window 32768 where use_sliding_window); the whole model's
     * in thinker_config.text_config, its thinker's in text_config */
    ROW("qwen2_5_omni", H, RA_HF_MROPE | WHOLE, NULL, QWEN2_5_OMNI_DEFAULTS, FROM_MAX, FIXED(1, 0),
        DEFAULT_TEXT, .text_parent = "thinker_config", .names = qwen_omni_names),
    ROW("qwen2_5_omni_dit", H, 0,
        PART_ALONE("the Omni model's token-to-wave DiT"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("qwen2_5_omni_talker", H, 0,
        PART_ALONE("the Omni model's talker, its speech-token decoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("qwen2_5_omni_text", H, RA_HF_MROPE | WHOLE, NULL, QWEN2_5_OMNI_DEFAULTS, FROM_MAX,
        FIXED(1, 0)),
    ROW("qwen2_5_omni_thinker", H, RA_HF_MROPE | WHOLE, NULL, QWEN2_5_OMNI_DEFAULTS, FROM_MAX,
        FIXED(1, 0), DEFAULT_TEXT),
    ROW("qwen2_5_omni_token2wav", H, 0,
        PART_ALONE("the Omni model's token-to-wave vocoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("qwen2_5_omni_vision_encoder", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen2_5_vl", H, RA_HF_MROPE | WHOLE, NULL, QWEN_VL_DEFAULTS, FROM_MAX, FIXED(1, 0)),
    ROW("qwen2_5_vl_text", H, RA_HF_MROPE | WHOLE, NULL, QWEN_VL_DEFAULTS, FROM_MAX, FIXED(1, 0)),
    ROW("qwen2_5_vl_vision", H, 0, VISION_FROM_WHOLE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen2_moe", H, WHOLE, NULL, QWEN_WINDOW(28), RA_HF_WINDOWS_GATED_EVEN_BELOW_MAX,
        QKV("qkv_bias", 1)),
    ROW("qwen2_vl", H, RA_HF_MROPE | WHOLE, NULL, QWEN_VL_DEFAULTS, FROM_MAX, FIXED(1, 0)),
    ROW("qwen2_vl_text", H, RA_HF_MROPE | WHOLE, NULL, QWEN_VL_DEFAULTS, FROM_MAX, FIXED(1, 0)),
    ROW("qwen2_vl_vision", H, 0, VISION_FROM_WHOLE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3", H, RA_HF_QK_NORM | WHOLE, NULL, "head_dim=128 " QWEN_WINDOW(28), FROM_MAX,
        ALL(AB, 0)),
    /* Qwen3.5's interleaved M-RoPE is the default rope on text positions */
    ROW("qwen3_5", H, GATED_QWEN | QWEN3_5_MROPE, NULL, GATED_QWEN_DEFAULTS, NOWINDOW,
        ALL(AB, 0), DEFAULT_TEXT),
    ROW("qwen3_5_moe", H, GATED_QWEN | QWEN3_5_MROPE, NULL, GATED_QWEN_DEFAULTS, NOWINDOW,
        ALL(AB, 0), DEFAULT_TEXT),
    ROW("qwen3_5_moe_text", H, GATED_QWEN | QWEN3_5_MROPE, NULL, GATED_QWEN_DEFAULTS, NOWINDOW,
        ALL(AB, 0)),
    ROW("qwen3_5_moe_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3_5_text", H, GATED_QWEN | QWEN3_5_MROPE, NULL, GATED_QWEN_DEFAULTS, NOWINDOW,
        ALL(AB, 0)),
    ROW("qwen3_5_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3_moe", H, RA_HF_QK_NORM | WHOLE, NULL, "use_sliding_window=0",
        RA_HF_WINDOWS_GATED_EVERY_LAYER, ALL(AB, 0)),
    ROW("qwen3_next", H, GATED_QWEN, NULL, GATED_QWEN_DEFAULTS, NOWINDOW, ALL(AB, 0)),
    /* Qwen3OmniMoeTextConfig (Qwen3-Omni's thinker): Qwen3-MoE's attention (q/k norms,
     * attention_bias on all four, no window whatever sliding_window says) with Qwen3-VL's
     * interleaved M-RoPE; nested as Qwen2.5-Omni's */
    ROW("qwen3_omni_moe", H, QWEN3_VL | WHOLE, NULL, QWEN3_OMNI_DEFAULTS, NOWINDOW, ALL(AB, 0),
        DEFAULT_TEXT, .text_parent = "thinker_config", .names = qwen_omni_names),
    ROW("qwen3_omni_moe_talker_code_predictor", H, 0,
        PART_ALONE("the Omni talker's code predictor"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3_omni_moe_talker_text", H, 0,
        PART_ALONE("the Omni model's talker, its speech-token decoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3_omni_moe_text", H, QWEN3_VL | WHOLE, NULL, QWEN3_OMNI_DEFAULTS, NOWINDOW,
        ALL(AB, 0)),
    ROW("qwen3_omni_moe_thinker", H, QWEN3_VL | WHOLE, NULL, QWEN3_OMNI_DEFAULTS, NOWINDOW,
        ALL(AB, 0), DEFAULT_TEXT),
    ROW("qwen3_omni_moe_vision_encoder", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3_vl", H, QWEN3_VL | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0), QWEN3_VL_THETA,
        DEFAULT_TEXT),
    ROW("qwen3_vl_moe", H, QWEN3_VL | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0), QWEN3_VL_THETA,
        DEFAULT_TEXT),
    ROW("qwen3_vl_moe_text", H, QWEN3_VL | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0), QWEN3_VL_THETA),
    ROW("qwen3_vl_moe_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("qwen3_vl_text", H, QWEN3_VL | WHOLE, NULL, NULL, NOWINDOW, ALL(AB, 0), QWEN3_VL_THETA),
    ROW("qwen3_vl_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* Qwen4ExpTextConfig: Qwen3.5's gated attention (no default partial rotary; M-RoPE
     * sections [11, 11, 10] by default) beside QSA's block-sparse indexer in every attention
     * layer ("indexed_attention") */
    ROW("qwen4_exp", H, QWEN4_EXP, NULL, QWEN4_EXP_DEFAULTS, NOWINDOW, ALL(AB, 0), DEFAULT_TEXT),
    ROW("qwen4_exp_text", H, QWEN4_EXP, NULL, QWEN4_EXP_DEFAULTS, NOWINDOW, ALL(AB, 0)),
    ROW("qwen4_exp_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* RecurrentGemmaConfig: attention blocks among recurrent ones by block_types, each sliding;
     * head_dim hidden_size / num_attention_heads (a head_dim key that differs does not fit the
     * weights' shapes: refused); o_proj always biased, q, k and v by attention_bias */
    ROW("recurrent_gemma", H, RA_HF_BLOCK_TYPES, NULL,
        "hidden_size=2560 num_attention_heads=10 partial_rotary_factor=0.5", LISTED,
        {AB, 0, NULL, 1, 0}, .names = recurrent_gemma_names),
    /* SeedOssConfig: attention_bias for q, k and v, attention_out_bias for o */
    /* RoFormerConfig: an encoder (is_decoder: causal), biased projections, its sinusoidal
     * rope fixed (base 10000 over hidden_size / num_attention_heads, interleaved pairs, at
     * positions 0, 1 ... of the input); rotary_value: RoPE on v too.  The layer is
     * attention.self and attention.output.dense (not the residual and LayerNorm after it) */
    ROW("roformer", I, RA_HF_NON_CAUSAL | RA_HF_IS_DECODER_KEY | RA_HF_FIXED_ROPE |
        RA_HF_HEAD_DIM_BY_HEADS | RA_HF_ROTARY_VALUE, NULL,
        "hidden_size=768 num_attention_heads=12 max_position_embeddings=1536", NOWINDOW,
        FIXED(1, 1), .names = roformer_names,
        .block_norm = "output.LayerNorm."),
    ROW("sam2_video", H, 0, SAM_MEMORY_ROPE, NULL, NOWINDOW, NO_BIAS),
    ROW("sam2_video_mask_decoder", H, 0,
        PART_ALONE("a segmentation model's mask decoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("sam3", H, 0,
        "a segmentation model: its attention sits in several stacks (a ViT backbone with 2-D "
        "RoPE over patch rows and columns, a DETR encoder and decoder, a geometry encoder, a mask "
        "decoder, a CLIP text encoder), and ropeattn reads one stack of layers: not supported",
        NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_detr_decoder", H, 0, PART_ALONE("SAM 3's DETR decoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_detr_encoder", H, 0, PART_ALONE("SAM 3's DETR encoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_geometry_encoder", H, 0,
        PART_ALONE("SAM 3's geometry encoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_lite_text", H, 0,
        "a segmentation model: its attention sits in several stacks (a ViT backbone with 2-D "
        "RoPE over patch rows and columns, a DETR encoder and decoder, a geometry encoder, a mask "
        "decoder, a CLIP text encoder), and ropeattn reads one stack of layers: not supported",
        NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_mask_decoder", H, 0,
        PART_ALONE("a segmentation model's mask decoder"),
        NULL, NOWINDOW, NO_BIAS),
    /* Sam3TrackerConfig: no text model; RoPE only in its vision_config's (sam3_vision_model) ViT */
    ROW("sam3_tracker", H, 0,
        "its only RoPE attention is its vision encoder's ViT (2-D axial RoPE inside windows), "
        "which is not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_tracker_video", H, 0, SAM_MEMORY_ROPE, NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_tracker_video_mask_decoder", H, 0,
        PART_ALONE("a segmentation model's mask decoder"),
        NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_video", H, 0,
        "its detector's ViT attention (2-D axial RoPE inside windows) and its tracker's "
        "memory attention (2-D axial RoPE, keys repeated over memory frames) are not "
        "supported", NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_vision_model", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("sam3_vit_model", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("sapiens2", H, 0, DINOV3_ROPE, NULL, NOWINDOW, NO_BIAS),
    ROW("seamless_m4t", H, 0,
        "an encoder-decoder model (speech and text encoders, a text decoder, a text-to-unit "
        "model, each a stack of its own) whose speech encoder's conformer attention adds "
        "relative position scores or rotates by a table of its own: not read",
        NULL, NOWINDOW, NO_BIAS),
    ROW("seamless_m4t_v2", H, 0,
        "an encoder-decoder model (speech and text encoders, a text decoder, a text-to-unit "
        "model, each a stack of its own) whose speech encoder's conformer attention adds "
        "relative position scores (relative_key): not read", NULL, NOWINDOW, NO_BIAS),
    ROW("seed_oss", H, WHOLE, NULL, "head_dim=128 num_key_value_heads=8", NOWINDOW,
        {AB, 1, "attention_out_bias", 0, 0}),
    ROW("smollm3", H, RA_HF_NO_ROPE_LAYERS | WHOLE, NULL,
        "rope_theta=2000000 no_rope_layer_interval=4 use_sliding_window=0",
        RA_HF_WINDOWS_GATED_NO_ROPE, ALL(AB, 0)),
    /* SolarOpenConfig: o_proj never has a bias */
    ROW("solar_open", H, 0, NULL,
        "rope_theta=1000000 hidden_size=4096 num_attention_heads=64 num_key_value_heads=8 "
        "head_dim=128 max_position_embeddings=131072", NOWINDOW, QKV(AB, 0)),
    ROW("stablelm", H, RA_HF_QK_LAYERNORM, NULL, "partial_rotary_factor=0.25 layer_norm_eps=1e-05",
        NOWINDOW, QKV("use_qkv_bias", 0)),
    ROW("starcoder2", H, WHOLE, NULL, NULL, RA_HF_WINDOWS_EVERY_LAYER, ALL("use_bias", 1)),
    /* Step3p7TextConfig (saved as model_type step3p5) */
    ROW("step3p5", H, 0, STEP3P7, NULL, NOWINDOW, NO_BIAS),
    ROW("step3p5_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("step3p7", H, 0, STEP3P7, NULL, NOWINDOW, NO_BIAS),
    ROW("t5_gemma_module", H, 0, STACK_OF("T5Gemma"), NULL, NOWINDOW, NO_BIAS),
    ROW("t5gemma", H, 0, ENCODER_DECODER, NULL, NOWINDOW, NO_BIAS),
    ROW("t5gemma2", H, 0, ENCODER_DECODER, NULL, NOWINDOW, NO_BIAS),
    ROW("t5gemma2_decoder", H, 0, STACK_OF("T5Gemma 2"), NULL, NOWINDOW, NO_BIAS),
    ROW("t5gemma2_encoder", H, 0, STACK_OF("T5Gemma 2"), NULL, NOWINDOW, NO_BIAS),
    ROW("t5gemma2_text", H, 0, STACK_OF("T5Gemma 2"), NULL, NOWINDOW, NO_BIAS),
    ROW("timesfm2_5", H, 0,
        "its attention scales each feature of q by a learned softplus(scaling) (a vector, not "
        "one softmax scale) after RMS-norming q and k: not supported", NULL, NOWINDOW, NO_BIAS),
    /* UltrabertConfig: EuroBERT's attention (grouped key/value heads, attention_bias for q, k, v
     * and o), no causal mask; its sliding layers (layer_types, else all but every third) see
     * |i - j| <= sliding_window; a rope per layer type */
    ROW("ultrabert", H,
        RA_HF_NON_CAUSAL | RA_HF_LOCAL_ROPE | RA_HF_ROPE_THETA_PER_LAYER | WHOLE |
            RA_HF_ROPE_TYPES_NEEDED | RA_HF_ROPE_SCALING_UNREAD,
        NULL,
        "hidden_size=4096 num_attention_heads=32 max_position_embeddings=32768 "
        "sliding_window=128", RA_HF_WINDOWS_FULL_EVERY_THIRD, ALL(AB, 0), ULTRABERT_ROPE,
        .names = ultrabert_names),
    ROW("unlimited_ocr", H, 0, UNLIMITED_OCR, NULL, NOWINDOW, NO_BIAS),
    ROW("unlimited_ocr_sam_vision_model", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("unlimited_ocr_text", H, 0, UNLIMITED_OCR, NULL, NOWINDOW, NO_BIAS),
    ROW("unlimited_ocr_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("unlimited_ocr_vision_encoder", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    /* VaultGemmaConfig: Gemma 2's attention */
    ROW("vaultgemma", H, RA_HF_PRE_ATTN_SCALAR | RA_HF_SOFTCAP | WHOLE, NULL,
        "head_dim=256 query_pre_attn_scalar=256 attn_logit_softcapping=50 sliding_window=4096 "
        "sliding_window_pattern=2", PATTERN, ALL(AB, 0)),
    /* VideoLlama3Config: its text_config a Qwen2Config (AutoConfig's: qwen2 where it names
     * none), run on 1-D positions */
    ROW("video_llama_3", H, WHOLE, NULL, QWEN_WINDOW(28), FROM_MAX, FIXED(1, 0), DEFAULT_TEXT),
    ROW("video_llama_3_vision", H, 0, VISION_ALONE, NULL, NOWINDOW, NO_BIAS),
    ROW("vjepa2", H, 0,
        "its 3-D RoPE (head_dim split into frame, row and column parts, each rotated by its "
        "own positions on interleaved pairs) is not supported", NULL, NOWINDOW, NO_BIAS),
    ROW("voxtral_encoder", H, 0, PART_ALONE("an audio encoder"), NULL, NOWINDOW, NO_BIAS),
    /* VoxtralRealtimeConfig: its text decoder's attention is Mistral's (no biases, every
     * layer sliding by sliding_window where set); its text_config is read over the class's
     * own text defaults, whatever its text_config's model_type says (text_config_merged) */
    ROW("voxtral_realtime", H, WHOLE, NULL, VOXTRAL_REALTIME_DEFAULTS,
        RA_HF_WINDOWS_EVERY_LAYER, FIXED(0, 0), DEFAULT_TEXT, .text_config_merged = 1,
        .names = voxtral_realtime_names),
    ROW("voxtral_realtime_encoder", H, 0, PART_ALONE("an audio encoder"), NULL, NOWINDOW, NO_BIAS),
    ROW("voxtral_realtime_text", H, WHOLE, NULL, VOXTRAL_REALTIME_TEXT_DEFAULTS,
        RA_HF_WINDOWS_EVERY_LAYER, FIXED(0, 0), .names = voxtral_realtime_names),
    ROW("wav2vec2-bert", H, 0, CONFORMER_W2V2, NULL, NOWINDOW, NO_BIAS),
    ROW("wav2vec2-conformer", H, 0, CONFORMER_W2V2, NULL, NOWINDOW, NO_BIAS),
    ROW("xcodec2", H, 0, ROPE_BY_HEAD, NULL, NOWINDOW, NO_BIAS),
    ROW("youtu", I, MLA_V3, NULL, YOUTU_DEFAULTS, NOWINDOW, NO_BIAS),
    ROW("zamba2", H, 0, "its attention is one shared block run on the hidden state concatenated "
        "with the embeddings (q, k and v read 2 hidden_size features, o_proj writes "
        "hidden_size: an input width other than the output's), with LoRA adapters per hybrid "
        "layer on q, k and v (linear_q_adapter_list ...): not supported", NULL, NOWINDOW,
        NO_BIAS),
    ROW("zaya", H, 0, "its q, k and v come from a convolutional projection (ZayaCCAProjection): "
        "not supported", NULL, NOWINDOW, NO_BIAS),
};

#undef H
#undef I
#undef PATTERN
#undef FROM_MAX
#undef LISTED
#undef NOPE_FULL
#undef EXAONE4
#undef NOWINDOW
#undef ALL
#undef QKV
#undef FIXED
#undef NO_BIAS
#undef INDEXED
#undef GEMMA3N
#undef GEMMA3N_DEFAULTS
#undef GEMMA4
#undef GEMMA4_SIZES
#undef GEMMA4_ROPE
#undef GEMMA4_ASSISTANT
#undef DOTS3
#undef DOTS3_DEFAULTS
#undef DSA
#undef ERNIE_VL
#undef HUNYUAN_VL
#undef MOLMO2
#undef MUSE
#undef GRANITE_DOCLING_DEFAULTS
#undef HF_NAMES
#undef QWEN2_5_OMNI_DEFAULTS
#undef QWEN3_OMNI_DEFAULTS
#undef MLA_NAMES
#undef PADDLEOCR_DEFAULTS
#undef COSMOS3_EDGE
#undef COSMOS3_EDGE_DEFAULTS
#undef COSMOS3_EDGE_ROPE
#undef COHERE_COMPASS
#undef COHERE_COMPASS_DEFAULTS
#undef EXAONE4_DEFAULTS
#undef INKLING2
#undef MINIMAX_M3
#undef MINIMAX_M3_DEFAULTS
#undef GLM4V
#undef GLM4V_DEFAULTS
#undef GLM_MROPE
#undef NOPE_LATENT
#undef UNLIMITED_OCR
#undef STEP3P7
#undef DIFFUSION_GEMMA
#undef EMBEDDING_GEMMA2
#undef NEOMME
#undef MUSE_GLIMMER_ASSISTANT
#undef MISTRAL_LARGE4
#undef VOXTRAL_REALTIME_TEXT_DEFAULTS
#undef VOXTRAL_REALTIME_DEFAULTS
#undef GLM_OCR_DEFAULTS
#undef GLM4V_MOE_DEFAULTS
#undef GLM_IMAGE_DEFAULTS
#undef V_NORM
#undef AB
#undef CHATGLM_BIAS
#undef GPT_OSS_ROPE
#undef CWM_ROPE
#undef MLLAMA_CROSS
#undef APERTUS_ROPE
#undef MELLUM_ROPE
#undef LAGUNA_ROPE
#undef BEAM_ROPE
#undef LFM3
#undef LFM3_DEFAULTS
#undef LFM3_ROPE
#undef BAILING_HYBRID_DEFAULTS
#undef HUNYUAN
#undef QWEN3_VL_THETA
#undef QWEN4_EXP
#undef QWEN4_EXP_DEFAULTS
#undef MLA_V3
#undef ROW
#undef NO_ROTARY
#undef ENCODER_DECODER
#undef WHOLE

const ra_hf_family *ra_hf_family_find(const char *model_type)
{
    if (model_type == NULL) return NULL;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].model_type, model_type) == 0) return &families[i];
    return NULL;
}

/* ---- the public listing (ropeattn_hf.h) ----------------------------------- */

#define N_FAMILIES ((int64_t)(sizeof families / sizeof families[0]))

RA_HF_API int64_t ra_hf_family_count(void) { return N_FAMILIES; }

const ra_hf_family *ra_hf_family_at(int64_t i)
{
    return i >= 0 && i < N_FAMILIES ? &families[i] : NULL;
}

RA_HF_API const char *ra_hf_family_model_type(int64_t i)
{
    return i >= 0 && i < N_FAMILIES ? families[i].model_type : NULL;
}

RA_HF_API int ra_hf_family_layout(int64_t i)
{
    return i >= 0 && i < N_FAMILIES ? (int)families[i].layout : -1;
}

RA_HF_API const char *ra_hf_family_refused(int64_t i)
{
    if (i < 0 || i >= N_FAMILIES) return NULL;
    return families[i].refused ? families[i].refused : "";
}

#undef N_FAMILIES

int ra_hf_fields_layout(const ra_hf_fields *config)
{
    const ra_hf_family *family = config ? config->family : NULL;
    if (family == NULL) return -1;
    if ((family->features & RA_HF_MLA) && !config->rope_interleave) return RA_LAYOUT_HALF;
    return family->layout;
}

/* ---- keys that change attention ------------------------------------------ */

/* When a key's value leaves attention as Llama's. */
typedef enum neutral_kind {
    NULL_ONLY,  /* any value but null changes it */
    FALSE_ONLY, /* true changes it (false, null and 0 do not) */
    ROTARY,     /* a string other than "rope" or "rotary" changes it */
    BUT_VISION, /* as FALSE_ONLY, "vision" too (Gemma 4's vision tokens only) */
} neutral_kind;

typedef struct attention_key {
    const char *key;
    neutral_kind neutral;
    ra_hf_features feature; /* the family feature that runs it; 0: refused */
    const char *what;
} attention_key;

static const attention_key attention_keys[] = {
    {"attention_multiplier", NULL_ONLY, RA_HF_ATTENTION_MULTIPLIER, "the softmax scale"},
    {"query_pre_attn_scalar", NULL_ONLY, RA_HF_PRE_ATTN_SCALAR, "the softmax scale"},
    {"rope_local_base_freq", NULL_ONLY, RA_HF_LOCAL_ROPE, "the sliding layers' rope"},
    {"local_attention", NULL_ONLY, RA_HF_LOCAL_ATTENTION, "the sliding window (ModernBERT's)"},
    {"global_rope_theta", NULL_ONLY, RA_HF_LOCAL_ATTENTION, "the full layers' rope base"},
    {"local_rope_theta", NULL_ONLY, RA_HF_LOCAL_ATTENTION, "the sliding layers' rope base"},
    {"no_rope_layers", NULL_ONLY, RA_HF_NO_ROPE_LAYERS, "layers without RoPE"},
    {"clip_qkv", NULL_ONLY, RA_HF_CLIP_QKV, "q, k and v clipped"},
    {"attn_logit_softcapping", NULL_ONLY, RA_HF_SOFTCAP | RA_HF_SOFTCAP_IGNORED,
     "soft-capped attention logits"},
    {"use_qk_norm", FALSE_ONLY, RA_HF_USE_QK_NORM | RA_HF_QK_L2_NORM | RA_HF_QK_NORM_BY_KEY,
     "q and k norms"},
    {"qk_layernorm", FALSE_ONLY, RA_HF_QK_LAYERNORM | RA_HF_QK_LAYERNORM_BIAS,
     "LayerNorms of q and k"},
    {"attention_chunk_size", NULL_ONLY, RA_HF_ATTENTION_CHUNKS, "chunked attention"},
    {"attn_temperature_tuning", FALSE_ONLY, RA_HF_TEMPERATURE_TUNING,
     "attention temperature tuning"},
    {"no_rope_layer_interval", NULL_ONLY, RA_HF_NO_ROPE_LAYERS, "layers without RoPE"},
    {"sliding_window_pattern", NULL_ONLY, RA_HF_WINDOW_PATTERN, "which layers slide"},
    {"cross_attention_layers", NULL_ONLY, RA_HF_CROSS_ATTENTION_LAYERS, "cross-attention layers"},
    {"kv_lora_rank", NULL_ONLY, RA_HF_MLA, "latent attention"},
    {"q_lora_rank", NULL_ONLY, RA_HF_MLA, "latent attention"},
    {"qk_nope_head_dim", NULL_ONLY, RA_HF_MLA, "latent attention"},
    {"qk_rope_head_dim", NULL_ONLY, RA_HF_MLA, "latent attention"},
    {"v_head_dim", NULL_ONLY, RA_HF_MLA | RA_HF_V_HEAD_DIM, "a value head size other than "
     "head_dim"},
    {"attention_value_scale", NULL_ONLY, RA_HF_VALUE_SCALE, "values scaled"},
    {"index_topk", NULL_ONLY, RA_HF_INDEXER_TOPK, "a sparse-attention indexer's top-k keys"},
    {"index_n_heads", NULL_ONLY, RA_HF_INDEXER_TOPK | RA_HF_SPARSE_LAYER_INDEXER,
     "a sparse-attention indexer"},
    {"index_head_dim", NULL_ONLY, RA_HF_INDEXER_TOPK | RA_HF_SPARSE_LAYER_INDEXER,
     "a sparse-attention indexer"},
    {"index_topk_blocks", NULL_ONLY, RA_HF_SPARSE_LAYER_INDEXER,
     "a block-sparse indexer's top-k blocks"},
    {"index_block_size", NULL_ONLY, RA_HF_SPARSE_LAYER_INDEXER, "a block-sparse indexer"},
    {"indexer_budget", NULL_ONLY, RA_HF_BLOCK_INDEXER, "a block-sparse indexer's keys"},
    {"indexer_compress_ratio", NULL_ONLY, RA_HF_BLOCK_INDEXER, "a block-sparse indexer"},
    {"indexer_n_heads", NULL_ONLY, RA_HF_BLOCK_INDEXER, "a block-sparse indexer"},
    {"indexer_types", NULL_ONLY, RA_HF_INDEXER_TOPK, "layers sharing an indexer's top-k"},
    {"alibi", FALSE_ONLY, 0, "ALiBi position biases"},
    {"use_alibi", FALSE_ONLY, 0, "ALiBi position biases"},
    {"position_embedding_type", ROTARY, RA_HF_ROPE_BY_EMBEDDING_TYPE, "positions without RoPE"},
    {"key_multiplier", NULL_ONLY, RA_HF_KEY_MULTIPLIER, "k scaled"},
    {"attn_layer_indices", NULL_ONLY, RA_HF_ATTN_LAYER_INDICES,
     "which layers are attention (the others Mamba)"},
    {"block_types", NULL_ONLY, RA_HF_BLOCK_TYPES, "which layers are attention (the others "
     "recurrent)"},
    {"attention_window_size", NULL_ONLY, RA_HF_BLOCK_TYPES, "the sliding window (RecurrentGemma's "
     "name)"},
    {"use_logn_attn", FALSE_ONLY, 0, "log-n attention scaling"},
    {"logn_attn", FALSE_ONLY, 0, "log-n attention scaling"},
    {"use_dynamic_ntk", FALSE_ONLY, 0, "dynamic NTK rope"},
    {"use_bidirectional_attention", FALSE_ONLY, RA_HF_BIDIRECTIONAL_VISION,
     "attention without the causal mask"},
    {"use_bidirectional_attention", BUT_VISION, 0, "attention without the causal mask"},
    {"per_layer_config", NULL_ONLY, RA_HF_PER_LAYER_CONFIG | RA_HF_LATENT_PER_LAYER,
     "a head size and key/value heads per layer"},
    {"global_head_dim", NULL_ONLY, RA_HF_PER_LAYER_CONFIG, "the full layers' head size"},
    {"num_global_key_value_heads", NULL_ONLY, RA_HF_PER_LAYER_CONFIG,
     "the full layers' key/value heads"},
    {"attention_k_eq_v", FALSE_ONLY, RA_HF_VALUES_FROM_KEYS, "values from k_proj"},
    {"rotary_pct", NULL_ONLY, RA_HF_ALIASES, "the rotary fraction (GPT-NeoX's name)"},
    {"rotary_emb_base", NULL_ONLY, RA_HF_ALIASES, "the rope base (GPT-NeoX's name)"},
    {"rotary_dim", NULL_ONLY,
     RA_HF_ALIASES | RA_HF_ROTARY_DIM_FACTOR | RA_HF_ROTARY_DIM_IGNORED, "the rotary size"},
    {"rope_ratio", NULL_ONLY, RA_HF_ROPE_RATIO, "the rope base (ChatGLM's name)"},
    {"kv_channels", NULL_ONLY, RA_HF_MULTI_QUERY_GROUPS, "the head size (ChatGLM's name)"},
    {"multi_query_group_num", NULL_ONLY, RA_HF_MULTI_QUERY_GROUPS,
     "key/value heads (ChatGLM's name)"},
    {"multi_query_attention", FALSE_ONLY, RA_HF_MULTI_QUERY_GROUPS,
     "key/value heads (ChatGLM's name)"},
    {"position_encoding_2d", FALSE_ONLY, 0, "2-D positions (the first ChatGLM)"},
    {"pre_seq_len", NULL_ONLY, 0, "a learned key/value prefix (P-tuning v2)"},
    {"multi_query", FALSE_ONLY, RA_HF_QKV_BY_MULTI_QUERY, "key/value heads (Falcon's name)"},
    {"num_kv_heads", NULL_ONLY, RA_HF_QKV_BY_MULTI_QUERY, "key/value heads (Falcon's name)"},
    {"n_head", NULL_ONLY, RA_HF_ALIASES, "query heads (GPT-J's name)"},
    {"n_head_kv", NULL_ONLY, 0, "key/value heads (Falcon's name)"},
    {"num_attention_heads_per_layer", NULL_ONLY, RA_HF_HEADS_PER_LAYER, "query heads per layer"},
    {"num_kv_shared_layers", FALSE_ONLY, RA_HF_KV_SHARED_LAYERS,
     "layers that take their keys and values from an earlier layer"},
    {"use_attention_gate", FALSE_ONLY, RA_HF_GATE_BY_KEY, "an output gate per head"},
    {"rotary_value", FALSE_ONLY, RA_HF_ROTARY_VALUE, "RoPE on the values too (RoFormer's)"},
    {"attention_windows", NULL_ONLY, 0, "a window per layer (UltraBERT's older checkpoints' "
     "name, which its config class turns into sliding_window and layer_types)"},
};

/* Keys that show a config describes attention (an unknown model_type with
 * any of them, or of the list above, is refused). */
static const char *const attention_shape_keys[] = {
    "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta", "rope_scaling",
    "rope_parameters", "partial_rotary_factor", "sliding_window", "layer_types",
};

static int changes_attention(const cJSON *item, neutral_kind neutral)
{
    if (item == NULL || cJSON_IsNull(item)) return 0;
    switch (neutral) {
    case NULL_ONLY: return 1;
    case FALSE_ONLY:
        return !(cJSON_IsFalse(item) || (cJSON_IsNumber(item) && item->valuedouble == 0));
    case ROTARY:
        return !(cJSON_IsString(item) && (strcmp(item->valuestring, "rope") == 0 ||
                                          strcmp(item->valuestring, "rotary") == 0));
    case BUT_VISION:
        return changes_attention(item, FALSE_ONLY) &&
               !(cJSON_IsString(item) && strcmp(item->valuestring, "vision") == 0);
    }
    return 1;
}

/* The first key of obj that shows it describes attention, else the first such key of an object
 * one level down (an encoder_config, audio_config ... of a model whose top level names none:
 * *parent its key), or NULL. */
static const char *attention_evidence(const cJSON *obj, const char **parent)
{
    const cJSON *item;
    *parent = NULL;
    for (size_t i = 0; i < sizeof attention_shape_keys / sizeof attention_shape_keys[0]; i++)
        if (ra_io_json_member(obj, attention_shape_keys[i], &item) && item && !cJSON_IsNull(item))
            return attention_shape_keys[i];
    for (size_t i = 0; i < sizeof attention_keys / sizeof attention_keys[0]; i++)
        if (ra_io_json_member(obj, attention_keys[i].key, &item) && item && !cJSON_IsNull(item))
            return attention_keys[i].key;
    for (const cJSON *child = obj ? obj->child : NULL; child; child = child->next) {
        if (!cJSON_IsObject(child) || child->string == NULL) continue;
        for (size_t i = 0; i < sizeof attention_shape_keys / sizeof attention_shape_keys[0]; i++)
            if (ra_io_json_member(child, attention_shape_keys[i], &item) && item &&
                !cJSON_IsNull(item)) {
                *parent = child->string;
                return attention_shape_keys[i];
            }
    }
    return NULL;
}

/* GPT-J's rope is fixed (base 10000, no scaling), ChatGLM's set by its own
 * keys (rope_ratio): a config that sets rope_theta or rope_scaling would be
 * read one way here and ignored by the family's code. */
static ra_status check_fixed_rope(const cJSON *obj, const char *name,
                                  const ra_hf_family *family, char *msg, size_t msg_len)
{
    static const char *const keys[] = {"rope_theta", "rope_scaling", "rope_parameters",
                                       "partial_rotary_factor"};
    if (!family || !(family->features & RA_HF_FIXED_ROPE)) return RA_OK;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *item;
        RA_TRY(ra_io_json_key(obj, keys[i], name, &item, msg, msg_len));
        if (item != NULL)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: \"%s\" is set, and model_type \"%s\" has a fixed rope "
                              "that transformers does not change by it: refused", name, keys[i],
                              family->model_type);
    }
    return RA_OK;
}

ra_status ra_hf_family_check(const cJSON *obj, const char *name, const char *model_type,
                             const ra_hf_family **out, char *msg, size_t msg_len)
{
    *out = NULL;
    const ra_hf_family *family = ra_hf_family_find(model_type);
    if (model_type != NULL && family == NULL) {
        const char *parent, *key = attention_evidence(obj, &parent);
        if (key != NULL)
            return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                              "%s: model_type \"%.64s\" is not a family ropeattn knows, and its "
                              "config describes attention (\"%.64s%s%s\"): refused rather than "
                              "run as Llama", name, model_type, parent ? parent : "",
                              parent ? "." : "", key);
        return RA_OK;
    }
    if (family != NULL && family->refused != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED, "%s: model_type \"%s\" is refused: %s",
                          name, family->model_type, family->refused);
    RA_TRY(check_fixed_rope(obj, name, family, msg, msg_len));
    ra_hf_features features = family ? family->features : 0;
    if (family && family->windows == RA_HF_WINDOWS_PATTERN) features |= RA_HF_WINDOW_PATTERN;
    for (size_t i = 0; i < sizeof attention_keys / sizeof attention_keys[0]; i++) {
        const attention_key *k = &attention_keys[i];
        const cJSON *item;
        RA_TRY(ra_io_json_key(obj, k->key, name, &item, msg, msg_len));
        if (!changes_attention(item, k->neutral) || (k->feature & features)) continue;
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: \"%s\" (%s) changes attention and is not supported%s%s%s", name,
                          k->key, k->what, family ? " for model_type \"" : "",
                          family ? family->model_type : "", family ? "\"" : "");
    }
    *out = family;
    return RA_OK;
}
