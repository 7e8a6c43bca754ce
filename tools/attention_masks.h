/*
 * attention_masks.h — `ropeattn attention`'s per-call masks: a padding mask
 * read from --attention-mask, and packed documents found by --packed in the
 * position ids (as transformers 5's find_packed_sequence_indices).
 */
#ifndef RA_TOOLS_ATTENTION_MASKS_H
#define RA_TOOLS_ATTENTION_MASKS_H

#include <stdint.h>

/* M.npy at path: int32 or int64 [batch, seq] (or [seq] for batch 1) of 0
 * (padding) and 1 (a real token), as Hugging Face's attention_mask, into
 * *out (malloc'ed, batch * seq bytes).  On failure prints one message and
 * returns EXIT_FAIL. */
int attention_mask_read(const char *path, int64_t batch, int64_t seq, uint8_t **out);

/* The documents of position ids [batch, seq]: a new one starts at every
 * token whose id is not its predecessor's plus one.  *cu (malloc'ed, n + 1
 * values) holds their starts and seq; every row must start documents at
 * the same tokens.  On failure prints one message and returns EXIT_FAIL. */
int packed_documents(const int64_t *ids, int64_t batch, int64_t seq, const char *path,
                     int64_t **cu, int64_t *n);

/* Whether the text positions [batch, seq] of [4, ...] position ids (Qwen3-VL)
 * leave the mask causal, each the one before plus one: transformers' mask
 * finds packed documents in them when it is given no attention mask and
 * no cache.  Else prints one message (--packed masks those documents) and
 * returns EXIT_FAIL. */
int text_positions_plain(const int64_t *text, int64_t batch, int64_t seq, const char *path);

#endif
