/*
 * attention_full_mask.h — `ropeattn attention --attention-mask M.npy` of
 * bool or float values: a full mask, PyTorch SDPA's attn_mask, given to the
 * layer call's options (ra_attention_options.attn_mask).  M of int32 or
 * int64 values stays Hugging Face's padding mask (attention_masks.h).
 */
#ifndef RA_TOOLS_ATTENTION_FULL_MASK_H
#define RA_TOOLS_ATTENTION_FULL_MASK_H

#include <stdint.h>

#include "ropeattn.h"
#include "ropeattn_io.h"

typedef struct full_mask {
    ra_npy npy;     /* the values read (bool, float32 or float16) */
    void *joined;   /* full_mask_join's values, or NULL */
    ra_tensor view; /* npy as [B or 1, H or 1, seq or 1, seq or 1], or joined */
} full_mask;

/* M.npy at path into *out: bool (nonzero = may attend) or additive float
 * (float64 rounded to float32), 1 to 4 dimensions aligned to the right of
 * [batch, heads, seq, seq] as numpy broadcasts (the missing leading ones
 * are 1), each extent the input's or 1 (heads: checked by the layer).
 * Returns -1, *out empty, when M holds int32 or int64 values (a padding
 * mask: attention_mask_read); on failure prints one message and returns
 * EXIT_FAIL (the .npy reader names any other dtype). */
int full_mask_read(const char *path, int64_t batch, int64_t seq, full_mask *out);

/* m (read) joined with a mask that also applies, bool keep [batch, 1, seq,
 * seq] (nonzero = may attend: --token-type-ids' mask): a key is seen where
 * both let it.  m's view becomes [batch, m's heads, seq, seq] of its dtype,
 * m's value where keep lets the key be seen, else masked (false, or -inf:
 * exactly the sum of m and keep's additive 0 or -inf).  On failure prints
 * one message and returns EXIT_FAIL. */
int full_mask_join(full_mask *m, const uint8_t *keep, int64_t batch, int64_t seq);
void full_mask_free(full_mask *m);

#endif
