/*
 * kvcache_internal.h — the KV cache's appends, checks and decode runs
 * (internal).  Its insides and the decode kernels' jobs: cpu/decode_job.h.
 */
#ifndef RA_KVCACHE_INTERNAL_H
#define RA_KVCACHE_INTERNAL_H

#include "attention_internal.h"
#include "cpu/decode_job.h"
#include "internal.h"

/* Tokens one append (and one decode) may take per sequence: a window cache
 * keeps the W - 1 keys before them; a full cache, what is left. */
static inline int64_t ra_kv_cache_max_new(const ra_kv_cache *cache, int64_t b)
{
    return cache->window ? cache->capacity - cache->window + 1
                         : cache->capacity - cache->length[b];
}

/* Allocates an 8-bit cache's scales (K's and V's: RA_I8 [rows] each, rows
 * = B * capacity * Hkv; RA_F8E4M3 [Hkv] each, set to 1); nothing for the
 * other dtypes.  RA_ERR_NOMEM (no detail) when an allocation fails. */
ra_status ra_kv_cache_scales_alloc(ra_kv_cache *cache, int64_t rows);

/* Quantizes the row x [D] of kv head g of sequence b's slot into to (its
 * codes in K's (which = 0) or V's storage), with its scale (RA_I8: set
 * from the row; RA_F8E4M3: the head's; a NaN code stored sets
 * nan_codes). */
void ra_kv_cache_store8(ra_kv_cache *cache, int which, int64_t b, int64_t g, int64_t slot,
                        void *to, const float *x);

/* Stores the row [x | x2] (n + n2 = D floats) of sequence b's token at
 * position p, kv head 0 of k's storage (a latent cache's [kr | c]), in the
 * cache's dtype: 8-bit as one row (RA_I8: one scale for both parts). */
void ra_kv_cache_put_row(ra_kv_cache *cache, int64_t b, int64_t p, const float *x, int64_t n,
                         const float *x2, int64_t n2);

/* Checks ra_kv_cache_append's (and ra_kv_pool_append's) tensors: q, k, v
 * of a batch of `batch` sequences of n_kv_heads heads of head_dim (q
 * optional; each f32, f16 or bf16), n_new and the rope's head_dim. */
ra_status ra_kv_append_check(int64_t batch, int64_t n_kv_heads, int64_t head_dim,
                             const ra_rope *rope, const ra_tensor *q, const ra_tensor *k,
                             const ra_tensor *v, const int64_t *n_new);

/* The positions an append rotates its tokens at, read and checked into *p
 * for a [batch, seq] grid whose row b holds n_new[b] new tokens (NULL:
 * seq; ra_positions_read_new): the caller's, or with positions NULL each
 * sequence's next ones, starts[b] + s (starts: the sequences' lengths).
 * rope NULL: none are read (*p is start 0). */
ra_status ra_kv_append_positions(ra_positions *p, const ra_positions *positions,
                                 const ra_rope *rope, const int64_t *starts, int64_t batch,
                                 int64_t seq, const int64_t *n_new);

/* Tokens per append task (ra_kv_cache_append, ra_kv_pool_append): small
 * enough to stay in L1. */
enum { RA_APPEND_BLOCK = 16 };

/* The floats one thread's staging of a block takes (ra_kv_stage_rows):
 * RA_APPEND_BLOCK rows of heads x head_dim, 0 when k and v are both f32
 * (their own rows serve). */
int64_t ra_kv_stage_floats(const ra_tensor *k, const ra_tensor *v);

/* Rows [s0, s0 + len) of sequence b of x [B, S, heads, D] (f32, f16 or
 * bf16), rotated by rope at pos (NULL: stored as given), as the float32
 * rows an append stores, [1, len, heads, D]: x's own rows, rotated in
 * place, when x is f32; else x's values widened into buf [len, heads, D]
 * and rotated there, in float32, and the rotation rounded once back into
 * x (as ra_rope_apply on x rounds it).  So the cache receives what an f32
 * input of the same values gives. */
ra_tensor ra_kv_stage_rows(const ra_tensor *x, int64_t b, int64_t s0, int64_t len,
                           const ra_rope *rope, const ra_positions *pos, float *buf);

/* Rows [s0, s0 + len) of sequence b of a [B, S, heads, D] view. */
static inline ra_tensor ra_kv_rows(const ra_tensor *t, int64_t b, int64_t s0, int64_t len)
{
    ra_tensor r = *t;
    r.data = (char *)t->data +
             (size_t)(b * t->stride[0] + s0 * t->stride[1]) * ra_dtype_size(t->dtype);
    r.shape[0] = 1;
    r.shape[1] = len;
    return r;
}

/* RA_ERR_ARGUMENT for a latent cache, which only a latent layer serves. */
ra_status ra_kv_cache_refuse_latent(const ra_kv_cache *cache, const char *what);

/* RA_ERR_ARGUMENT naming t when it overlaps the cache's K or V storage (a
 * view from ra_kv_cache_views given back as an input that is written, or
 * read while the cache is, or as an output); a pool's view (page_size)
 * and t NULL pass. */
ra_status ra_kv_cache_refuse_storage(const ra_kv_cache *cache, const ra_tensor *t,
                                     const char *name);

/* Reads options into *mask for q [B, T, H, D]: the masks a cache can
 * serve (a window cache: a window or chunk within its own).  The cache's
 * lengths stand for padding and documents, and decode is inference:
 * dropout, padding_mask and cu_seqlens are refused. */
ra_status ra_attention_decode_mask(ra_attention_mask *mask, const ra_kv_cache *c,
                                   const ra_tensor *q, const ra_attention_options *options);

/* ra_attention_decode's checks of its views and options, not of the
 * queries' counts against the lengths (ra_kv_cache_attend's, before its
 * append); fills *mask, quantize_q included (the decode mask refuses it:
 * the layers' calls do not take it). */
ra_status ra_attention_decode_check_views(ra_attention_mask *mask, const ra_kv_cache *c,
                                          const ra_tensor *out, const ra_tensor *q,
                                          const ra_attention_options *options);

/* ra_attention_decode's checks of its arguments (c may be a paged view);
 * fills *mask. */
ra_status ra_attention_decode_check(ra_attention_mask *mask, const ra_kv_cache *c,
                                    const ra_tensor *out, const ra_tensor *q,
                                    const int64_t *n_query, const ra_attention_options *options);

/* ra_attention_decode in two steps, for callers that own the scratch (the
 * layer): the bytes needed for any length up to the capacity (any mask of
 * that quantize_q), and the run on arguments already checked. */
ra_status ra_attention_decode_scratch(const ra_kv_cache *cache, const ra_tensor *q, int threads,
                                      int quantize_q, size_t *bytes);
void ra_attention_decode_run(ra_context *ctx, const ra_kv_cache *cache, const ra_tensor *out,
                             const ra_tensor *q, const int64_t *n_query,
                             const ra_attention_mask *mask, float *scratch);

/* ra_attention_decode_run with the queries at q_start (NULL: the last
 * tokens cached), chunks counted from -k_start (NULL: 0) and each row's lse
 * written (NULL: not): ra_attention_decode_lse's run, and the flash path's
 * short blocks' (attention_short.c). */
void ra_attention_decode_run_at(ra_context *ctx, const ra_kv_cache *cache, const ra_tensor *out,
                                const ra_tensor *q, const int64_t *n_query,
                                const int64_t *q_start, const int64_t *k_start, float *lse,
                                const ra_attention_mask *mask, float *scratch);

#endif
