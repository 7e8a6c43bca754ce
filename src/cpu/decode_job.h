/*
 * decode_job.h — what the decode kernels (cpu/decode_impl.h) and the
 * latent layer's softmax kernel (cpu/softmax_impl.h) read (internal): the
 * KV cache's insides, a decode job and a softmax job.  The core fills them
 * (kvcache_internal.h, decode.c, layer_mla.c).
 */
#ifndef RA_CPU_DECODE_JOB_H
#define RA_CPU_DECODE_JOB_H

#include "cpu/attention_job.h"
#include "internal.h"

/* A token's position is its order of arrival in its sequence, 0, 1, ...
 * (ra_kv_cache_length counts them), and it lives in slot position %
 * capacity: a full cache (window 0) never wraps, a window cache is a ring
 * that holds the last capacity = window - 1 + max_new tokens. */
struct ra_kv_cache {
    int64_t batch, capacity, n_kv_heads, head_dim;
    int64_t window;  /* 0: a full cache; else the ring's window W */
    int64_t latent;  /* r > 0: a latent cache, rows [kr | c] of D = Dr + r,
                        Hkv 1, v == k; 0: keys and values */
    ra_dtype dtype;
    void *k, *v;     /* [B, capacity, Hkv, D] each */
    float *k_scale, *v_scale; /* RA_I8: [B, Hkv, capacity] each (a row's scale
                                 beside its codes, head-major as they are);
                                 RA_F8E4M3: [Hkv] each; else NULL */
    int64_t *length; /* [B] tokens appended (absolute positions) */
    /* RA_F8E4M3: 1 once an append has stored a NaN code (0x7f, 0xff: a NaN
     * or Inf input) in K or V, until ra_kv_cache_reset; while 0 the decode
     * kernels widen the codes without checking for NaN (decode_impl.h).
     * Set with an atomic store: an append's tasks may set it at once. */
    int nan_codes;
    /* page_size > 0: a view of an ra_kv_pool's pages for one decode call
     * (kvpool_internal.h; window 0, capacity the longest length): k, v
     * [n_pages / page_group groups, Hkv, page_group, page_size, D] (the
     * last group may hold fewer pages: ra_kv_page_row), RA_I8's scales
     * the same without D; the token at position p of row b is row p %
     * page_size of page pages[b][p / page_size - first_page[b]]. */
    int64_t page_size, page_group, n_pages;
    const int32_t *const *pages; /* [B] block tables */
    const int64_t *first_page;   /* [B] the logical page of each table's entry 0 */
    /* k_stride[3] = 1: a view of a block's own K and V tensors for one
     * decode call (attention_short.c; window 0, capacity and length the
     * keys' count): k, v [B, capacity, Hkv, D] at these element strides,
     * k_stride[1] = v_stride[1]; all 0: the storage's own layout */
    int64_t k_stride[4], v_stride[4];
};

/* The row index (units of D elements, and of one RA_I8 scale) of kv head
 * g's first row of page `page` of a pool of n_pages pages of ps tokens and
 * n_kv heads, in groups of `group` pages (the last group: the pages left):
 * a group holds each head's rows of its pages as one run, page after page. */
static inline int64_t ra_kv_page_row(int64_t page, int64_t g, int64_t ps, int64_t n_kv,
                                     int64_t group, int64_t n_pages)
{
    const int64_t start = page / group * group;
    const int64_t size = n_pages - start < group ? n_pages - start : group;
    return (start * n_kv + g * size + page - start) * ps;
}

/* The slot of the token at position p (one the cache still holds). */
static inline int64_t ra_kv_cache_slot(const ra_kv_cache *cache, int64_t p)
{
    return p % cache->capacity;
}

/* Sequence b's kv head g's scales of K (which = 0) or V (1): RA_I8's
 * [capacity], indexed by slot; RA_F8E4M3's one, for every slot. */
static inline const float *ra_kv_cache_scales(const ra_kv_cache *cache, int which, int64_t b,
                                              int64_t g)
{
    const float *s = which ? cache->v_scale : cache->k_scale;
    return cache->dtype == RA_I8 ? s + (b * cache->n_kv_heads + g) * cache->capacity : s + g;
}

/* A view of the whole K (which = 0) or V (which = 1) storage. */
static inline ra_tensor ra_kv_cache_view(const ra_kv_cache *cache, int which)
{
    const int64_t capacity = cache->capacity, heads = cache->n_kv_heads, d = cache->head_dim;
    ra_tensor t = {which ? cache->v : cache->k, cache->dtype,
                   {cache->batch, capacity, heads, d},
                   {heads * capacity * d, d, capacity * d, 1}};
    const int64_t *borrowed = which ? cache->v_stride : cache->k_stride;
    if (borrowed[3])
        for (int i = 0; i < 4; i++) t.stride[i] = borrowed[i];
    return t;
}

/* Keys per decode task: each task reads this many cache rows of one kv
 * head and keeps a partial softmax (max, sum, weighted values) per query row.
 * Long runs: the prefetch that runs ahead of a run (decode_impl.h) is lost
 * at its start and wasted past its end, about 2% at 1024 rows of 512 bytes
 * (256 rows: 15% slower). */
enum { RA_DECODE_CHUNK = 1024 };

/* quantize_q's largest head_dim: the codes' products, |c_q c| <= 127 128,
 * summed over D stay below 2^24, so that float32 sums them exactly (the
 * float kernels; VNNI's int32 lanes too) while D 16256 < 2^24. */
enum { RA_DECODE_Q8_MAX_DIM = 1032 };

/* The split of ra_attention_decode: tasks (b, chunk c, split), a split
 * being Hkv / n_splits kv heads g; each writes, for its heads,
 * partials[((b * Hkv + g) * n_chunks + c) * rows + r] for the rows
 * r = (head in group) * T + t, each D + 2 floats: o[D], m, l.  Chunk c of
 * sequence b holds the positions [(first + c) RA_DECODE_CHUNK, (first + c
 * + 1) RA_DECODE_CHUNK), first = ra_decode_first_chunk: a window reads
 * only the chunks its rows see. */
typedef struct ra_decode_job {
    const ra_kv_cache *cache;
    const ra_tensor *q, *out;
    const int64_t *n_query; /* [B] or NULL */
    ra_attention_mask mask; /* scale, softcap, window, chunk, sinks (checked) */
    int64_t n_chunks, rows; /* rows = rep * T */
    int64_t n_splits;       /* of the kv heads into tasks: divides Hkv */
    float *partials;
    float *scratch;         /* per thread: scaled q rows [Hkv * rows, D], each
                               row's first and last key positions [rows] each */
    int64_t per_thread;     /* floats */
    /* ra_attention_decode_lse: the position of each sequence's query row 0
     * [B] (NULL: length - n_query, the last tokens cached), and lse [B, H,
     * T] (NULL: not written) */
    const int64_t *q_start;
    float *lse;
    /* ra_attention_decode_lse: each sequence's first cached token's
     * position in the whole sequence [B], where chunks count from (NULL:
     * 0) */
    const int64_t *k_start;
    /* mask.quantize_q: each query row's int8 codes [B, Hkv, rows, D] and
     * scale s_q [B, Hkv, rows] (rows past n_query: 0), from the caller's
     * thread (decode.c); else NULL */
    const int8_t *q_codes;
    const float *q_scale;
} ra_decode_job;

/* The floats of a thread's scaled queries [Hkv * rows, D] in the decode
 * scratch, rounded up to 64 bytes: the rows' key ranges (int64) follow
 * (D may be odd: a latent cache's rows). */
static inline int64_t ra_decode_queries_floats(const ra_kv_cache *c, int64_t rows)
{
    return ra_round_up(c->n_kv_heads * rows * c->head_dim, 16);
}

/* Queries of sequence b: its n_query, or T. */
static inline int64_t ra_decode_queries(const ra_decode_job *job, int64_t b)
{
    return job->n_query ? job->n_query[b] : job->q->shape[1];
}

/* The position of sequence b's query row 0. */
static inline int64_t ra_decode_query_start(const ra_decode_job *job, int64_t b)
{
    return job->q_start ? job->q_start[b] : job->cache->length[b] - ra_decode_queries(job, b);
}

/* The last key the query at position p sees: p or the last one cached (-1:
 * none). */
static inline int64_t ra_decode_last_key(const ra_decode_job *job, int64_t b, int64_t p)
{
    const int64_t end = job->cache->length[b] - 1;
    return p < end ? (p < -1 ? -1 : p) : end;
}

/* The first key the query at position p of sequence b sees (the chunks
 * count from position -k_start: a cache has no padding, and may be a shard
 * of a longer sequence). */
static inline int64_t ra_decode_first_key(const ra_decode_job *job, int64_t b, int64_t p)
{
    return ra_mask_first_key(&job->mask, p, job->k_start ? -job->k_start[b] : 0);
}

/* The chunk of sequence b's earliest visible key: its rows see keys from
 * the first key of its first query (the first key grows with the query). */
static inline int64_t ra_decode_first_chunk(const ra_decode_job *job, int64_t b)
{
    const int64_t nq = ra_decode_queries(job, b);
    if (nq == 0) return 0;
    return ra_decode_first_key(job, b, ra_decode_query_start(job, b)) / RA_DECODE_CHUNK;
}

/* One block of keys' online softmax for the latent layer's absorbed
 * decode (cpu/softmax_impl.h): rows of scores s [rows, ld] of which row r
 * sees its first seen[r] of cols keys, scaled by scale, into
 * probabilities against the rows' running max m and sum l, the rows of o
 * [rows, od] (their weighted sums so far) rescaled to the new max.  Tasks
 * of rows_per_task rows. */
typedef struct ra_softmax_job {
    float *s;
    int64_t ld, cols;
    const int64_t *seen;
    float scale;
    float *m, *l;
    float *o;
    int64_t od;
    int64_t rows, rows_per_task;
} ra_softmax_job;

#endif
