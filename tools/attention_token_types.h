/*
 * attention_token_types.h — `ropeattn attention --token-type-ids`: Gemma 3's
 * image blocks (token_type_ids == 1 runs attend bidirectionally inside each
 * block, causal elsewhere) as the call's attn_mask, built by
 * ra_hf_token_type_mask for a layer created with ra_hf_options.token_types.
 */
#ifndef RA_TOOLS_ATTENTION_TOKEN_TYPES_H
#define RA_TOOLS_ATTENTION_TOKEN_TYPES_H

#include <stdint.h>

#include "ropeattn_hf.h"

/* T.npy at path: int32 or int64 [batch, seq] (or [seq] for batch 1), as
 * transformers' token_type_ids (1: an image token, any other value text),
 * into the layer's mask *out (malloc'ed, [batch, 1, seq, seq] bytes), the
 * padding pad [batch, seq] (NULL: none) on its keys: the call's whole mask
 * (ra_attention_options' non_causal).  prefill P > 0 (--prefill): every
 * token from P on must be text (the decode steps take no mask; the prefill
 * takes the mask's first P rows and keys).  On failure prints one message
 * and returns EXIT_FAIL. */
int token_type_mask_read(const char *path, const ra_hf_layer *layer, const uint8_t *pad,
                         int64_t batch, int64_t seq, int64_t prefill, uint8_t **out);

#endif
