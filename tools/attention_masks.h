/*
 * attention_masks.h — `ropeattn attention`'s per-call masks: a padding mask
 * read from --attention-mask, and packed documents found by --packed in the
 * position ids (as transformers 5's find_packed_sequence_indices).
 */
#ifndef RA_TOOLS_ATTENTION_MASKS_H
#define RA_TOOLS_ATTENTION_MASKS_H

#include <stdint.h>

#include "ropeattn.h"

/* M.npy at path: int32 or int64 [batch, seq] (or [seq] for batch 1) of 0
 * (padding) and 1 (a real token), as Hugging Face's attention_mask, into
 * *out (malloc'ed, batch * seq bytes).  On failure prints one message and
 * returns EXIT_FAIL. */
int attention_mask_read(const char *path, int64_t batch, int64_t seq, uint8_t **out);

/* The documents of packed rows: a new one starts at every token whose
 * position id is not its predecessor's plus one, as transformers'
 * find_packed_sequence_indices finds them in each row.  The library takes
 * one cu_seqlens for all the rows of a call, so rows that start documents
 * at the same tokens form a group, each group one call (packed_rows_run). */
typedef struct packed_rows {
    int64_t seq, n_groups; /* seq: the rows' tokens */
    int64_t *group;       /* [batch]: each row's group, numbered in order of first row */
    int64_t *n_documents; /* [n_groups] */
    int64_t *cu;          /* [n_groups, seq + 1]: group g's document starts, then seq
                             (n_documents[g] + 1 values from cu + g * (seq + 1)) */
} packed_rows;

/* The packed rows of position ids [batch, seq] (read from path) into *out;
 * on failure prints one message and returns EXIT_FAIL. */
int packed_rows_find(const int64_t *ids, int64_t batch, int64_t seq, const char *path,
                     packed_rows *out);
void packed_rows_free(packed_rows *p);

/* One library call on n rows of the batch, gathered: x, y, dy, dx
 * [n, seq, width] (dy, dx NULL: a forward), ids [components, n, seq] (NULL:
 * none given), attention with the rows' documents; accumulate: add the
 * weights' gradients to the earlier calls'. */
typedef ra_status (*packed_rows_call)(void *arg, int64_t n, const float *x, const float *dy,
                                      const int64_t *ids, const ra_attention_options *attention,
                                      int accumulate, float *y, float *dx);

/* Rows of [batch, seq] through call: once per group of p, each group's rows
 * gathered and its results put back in place, or (p NULL, or one group)
 * once on every row in place.  x, y, dy, dx: [batch, seq, width];
 * ids: [components, batch, seq] or NULL (seq: p's, or a shard of each
 * row's tokens: the documents stay p's).  The first failing call's status;
 * RA_ERR_NOMEM if the gathered rows cannot be had. */
ra_status packed_rows_run(const packed_rows *p, int64_t batch, int64_t seq, int64_t width,
                          int components, const float *x, const float *dy, const int64_t *ids,
                          ra_attention_options attention, float *y, float *dx,
                          packed_rows_call call, void *arg);

/* With --packed, a chunked layer (Llama 4): 0 when every document of
 * ids [batch, seq] starts at a token whose place and position agree modulo
 * chunk, so that transformers' chunks (counted by position within packed
 * documents) are the library's (counted by place); else the CLI's failure
 * naming the first that does not. */
int packed_chunks_align(const int64_t *ids, int64_t batch, int64_t seq, int64_t chunk,
                        const char *path);

/* Whether the text positions [batch, seq] of [4, ...] position ids (Qwen3-VL)
 * leave the mask causal, each the one before plus one: transformers' mask
 * finds packed documents in them when it is given no attention mask and
 * no cache.  Else prints one message (--packed masks those documents) and
 * returns EXIT_FAIL. */
int text_positions_plain(const int64_t *text, int64_t batch, int64_t seq, const char *path);

#endif
