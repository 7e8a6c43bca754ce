/*
 * fields_json.h — the readers fields.c calls over the object cJSON has
 * already parsed: the model family (families.c), which projections have
 * biases (fields_bias.c), a rope object (rope_params.c), the sliding-window
 * keys (fields_window.c), quantization_config (fields_quant.c) and an
 * indexer's keys (fields_indexer.c).
 * Private to src/hf's config.json readers.
 */
#ifndef RA_HF_FIELDS_JSON_H
#define RA_HF_FIELDS_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "hf/fields.h"

/* Checks obj (the text model's config) for model_type (NULL: absent, read
 * as a Llama-style config): refuses an unknown model_type whose config
 * describes attention, a family ropeattn refuses, and any key that changes
 * attention and is neither neutral nor run for the family, naming it.
 * *out is the family (NULL for none). */
ra_status ra_hf_family_check(const cJSON *obj, const char *name, const char *model_type,
                             const ra_hf_family **out, char *msg, size_t msg_len);

/* A flag key of obj, as family's config class reads it, into *out: true
 * or false; absent: `absent`; null: false, as Python's None (refused
 * where `absent` is 1: transformers 5.23's classes refuse null or keep
 * None, which their code reads as false, never as the default).  1 and 0
 * are refused naming the key (transformers' classes raise
 * StrictDataclassFieldValidationError for them), but in a remote-code
 * family (family->remote_code), whose code reads them as true and false.
 * Anything else fails naming the key, and name (the file) in msg. */
ra_status ra_hf_flag(const cJSON *obj, const char *key, int absent, const ra_hf_family *family,
                     int *out, const char *name, char *msg, size_t msg_len);

/* fields->bias from fields' family's rule (families.c) and its key in text
 * (the text model's object), as ra_hf_flag reads it (absent: the
 * default); anything else fails naming the key, and name (the file) in msg.
 * fields->family and its attention_bias are read before. */
ra_status ra_hf_bias_read_json(const cJSON *text, ra_hf_fields *fields, const char *name,
                               char *msg, size_t msg_len);

/* UltraBERT's older keys (fields_older_keys.c; RA_HF_ROPE_THETA_PER_LAYER): *rewritten NULL
 * (root is read as it is) or a copy of root to read in its place (the caller deletes it):
 * rope_theta's list of bases per layer turned into rope_parameters per layer type, or
 * rope_theta dropped beside rope_parameters, as UltrabertConfig does; attention_windows null
 * and rope_theta other than a list of bases, refused as transformers fails on them. */
ra_status ra_hf_older_keys(const cJSON *root, const ra_hf_family *family, cJSON **rewritten,
                           const char *name, char *msg, size_t msg_len);

/* Reads obj (which must be a JSON object) into *out, which it zeroes first.  Messages read
 * "<name>: \"<prefix><key>\" must be ...", so that a config.json's nested
 * keys read "config.json: \"rope_scaling.factor\" ...".  On failure *out is
 * freed and zeroed. */
ra_status ra_hf_rope_read(const cJSON *obj, const char *name, const char *prefix,
                          ra_hf_rope *out, char *msg, size_t msg_len);

/* Reads sliding_window, use_sliding_window, max_window_layers and
 * layer_types from the top level of root into *out (zeroed first).
 * Messages read "<name>: \"<key>\" must be ...".  On failure *out is freed
 * and zeroed. */
/* Reads the keys ra_hf_layer_nope needs (fields_nope.c). */
ra_status ra_hf_nope_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                          size_t msg_len);

/* Reads the layer kinds and window of a family with RA_HF_BLOCK_TYPES into
 * out->window, after ra_hf_window_read (fields_blocks.c). */
ra_status ra_hf_block_types_read(const cJSON *root, ra_hf_fields *out, const char *name,
                                 char *msg, size_t msg_len);

/* Checks the indexer's keys of a family with RA_HF_INDEXER_TOPK (their
 * sizes, read as fields, and indexer_types: fields_indexer.c). */
ra_status ra_hf_indexer_read(const cJSON *root, const ra_hf_fields *out, const char *name,
                             char *msg, size_t msg_len);

/* Reads per_layer_config (or global_head_dim and num_global_key_value_heads),
 * attention_k_eq_v, checks layer_types' last entry and drops a default
 * rope's partial_rotary_factor, for the families with
 * RA_HF_PER_LAYER_CONFIG, RA_HF_VALUES_FROM_KEYS, RA_HF_LAST_LAYER_FULL,
 * RA_HF_DEFAULT_ROPE_WHOLE (fields_per_layer.c); the window, head shapes
 * and ropes read before. */
ra_status ra_hf_per_layer_read(const cJSON *root, ra_hf_fields *out, const char *name,
                               char *msg, size_t msg_len);
/* RA_HF_LATENT_PER_LAYER: each layer's latent sizes (fields_latent_layers.c); after the
 * window's keys and the ropes. */
ra_status ra_hf_latent_layers_read(const cJSON *root, ra_hf_fields *out, const char *name,
                                   char *msg, size_t msg_len);
/* The keys that bound a sparse-attention indexer's layer into
 * out->sparse_keys (fields_sparse.c); called after the window's keys. */
ra_status ra_hf_sparse_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                            size_t msg_len);

/* RA_HF_ROPE_BY_LAYER_TYPE: rope_parameters (nested; NULL: absent) by layer
 * type into out->rope (full_attention) and out->local_rope
 * (sliding_attention), where fields.c reads ropes; rope_scaling (non-empty)
 * refused.  ra_hf_rope_types_check, after the window's keys: each layer type
 * used has an entry and a rope_theta; and RA_HF_HEAD_DIM_BY_HEADS
 * (fields_rope_types.c). */
ra_status ra_hf_rope_types_read(const cJSON *nested, const cJSON *scaling, ra_hf_fields *out,
                                const char *name, char *msg, size_t msg_len);
ra_status ra_hf_rope_types_check(ra_hf_fields *out, const char *name, char *msg,
                                 size_t msg_len);

/* Reads num_attention_heads_per_layer (RA_HF_HEADS_PER_LAYER) and gating
 * (RA_HF_SOFTPLUS_G_PROJ): fields_heads.c. */
ra_status ra_hf_heads_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                           size_t msg_len);

/* Reads the stacks' keys of a family with RA_HF_LAYER_STACKS (fields_stacks.c). */
ra_status ra_hf_stacks_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                            size_t msg_len);

ra_status ra_hf_window_read(const cJSON *root, const char *name, ra_hf_window *out,
                            char *msg, size_t msg_len);

/* Frees layer_types and zeroes *window; NULL allowed. */
void ra_hf_window_free(ra_hf_window *window);

/* Reads quantization_config, and with it dtype / torch_dtype, from the top
 * level of root into *out (zeroed first; see ra_hf_quant for what is
 * accepted).  text: the text model's object (text_config, else root); a
 * quantization_config there too is refused.  Messages read "<name>:
 * \"quantization_config.<key>\" ...".  On failure *out is freed and zeroed. */
ra_status ra_hf_quant_read(const cJSON *root, const cJSON *text, const char *name,
                           ra_hf_quant *out, char *msg, size_t msg_len);

/* Frees skip and zeroes *quant; NULL allowed. */
void ra_hf_quant_free(ra_hf_quant *quant);

#endif
