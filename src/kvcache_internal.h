/*
 * kvcache_internal.h — the KV cache's insides and the decode kernels'
 * job description (internal).
 */
#ifndef RA_KVCACHE_INTERNAL_H
#define RA_KVCACHE_INTERNAL_H

#include "internal.h"

struct ra_kv_cache {
    int64_t batch, capacity, n_kv_heads, head_dim;
    ra_dtype dtype;
    void *k, *v;     /* [B, capacity, Hkv, D] each */
    int64_t *length; /* [B] slots filled */
};

/* A view of the whole K (which = 0) or V (which = 1) storage. */
ra_tensor ra_kv_cache_view(const ra_kv_cache *cache, int which);

/* Keys per decode task: each task reads this many cache rows of one kv
 * head and keeps a partial softmax (max, sum, weighted values) per query row.
 * Long runs: the prefetch that runs ahead of a run (decode_impl.h) is lost
 * at its start and wasted past its end, about 2% at 1024 rows of 512 bytes
 * (256 rows: 15% slower). */
enum { RA_DECODE_CHUNK = 1024 };

/* The split of ra_attention_decode: tasks (b, chunk c, split), a split
 * being Hkv / n_splits kv heads g; each writes, for its heads,
 * partials[((b * Hkv + g) * n_chunks + c) * rows + r] for the rows
 * r = (head in group) * T + t, each D + 2 floats: o[D], m, l. */
typedef struct ra_decode_job {
    const ra_kv_cache *cache;
    const ra_tensor *q, *out;
    const int64_t *n_query; /* [B] or NULL */
    int64_t n_chunks, rows; /* rows = rep * T */
    int64_t n_splits;       /* of the kv heads into tasks: divides Hkv */
    float *partials;
    float *scratch;         /* per thread: scaled q rows [Hkv * rows, D], last slots [rows] */
    int64_t per_thread;     /* floats */
} ra_decode_job;

/* ra_attention_decode in two steps, for callers that own the scratch (the
 * layer): the bytes needed for any length up to the capacity, and the run
 * on arguments already checked. */
ra_status ra_attention_decode_scratch(const ra_kv_cache *cache, const ra_tensor *q, int threads,
                                      size_t *bytes);
void ra_attention_decode_run(ra_context *ctx, const ra_kv_cache *cache, const ra_tensor *out,
                             const ra_tensor *q, const int64_t *n_query, float *scratch);

#endif
