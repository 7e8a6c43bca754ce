/*
 * kvcache.c — one layer's KV cache: storage, lengths, and the append that
 * rotates q and k and writes k and v into the cache in one pass per token
 * block.  A window cache is a ring: the token at position p (its order of
 * arrival) is in slot p % capacity.
 *
 *   K, V: [B, capacity, Hkv, D] in the cache's dtype, stored head-major,
 *   [B, Hkv, capacity, D] (the views' strides say so): decode reads each kv
 *   head's keys as one sequential stream, which the hardware prefetcher
 *   follows; slot-major storage put a head's rows 4 KiB apart.
 *   append inputs: q [B, S, H, D] (optional), k, v [B, S, Hkv, D], each f32,
 *   f16 or bf16
 */
#include <limits.h>
#include <string.h>

#include "kvcache_internal.h"
#include "parallel.h"
#include "rope_internal.h"

/* A cache of capacity slots; window 0 (full) or W (a ring: the caller
 * checked that capacity = W - 1 + max_new); latent r > 0: one storage for
 * k and v (n_kv_heads 1, head_dim Dr + r). */
static ra_status cache_create(ra_kv_cache **out, int64_t batch, int64_t capacity, int64_t window,
                              int64_t latent, int64_t n_kv_heads, int64_t head_dim,
                              ra_dtype dtype)
{
    if (!ra_dtype_is_cache8(dtype)) RA_TRY(ra_check_tensor_dtype(dtype, "dtype"));
    static const char *const names[4] = {"batch", "capacity", "n_kv_heads", "head_dim"};
    int64_t dims[4] = {batch, capacity, n_kv_heads, head_dim}, n;
    RA_TRY(ra_count_named(dims, names, 4, &n));
    if (head_dim % 2 && !latent) /* rope pairs; a latent row's latent part may be odd */
        return ra_fail(RA_ERR_HEAD_DIM, "head_dim %lld is odd", (long long)head_dim);
    ra_kv_cache *c = ra_calloc(1, sizeof *c);
    if (!c) return ra_fail(RA_ERR_NOMEM, "allocating the KV cache");
    size_t bytes = (size_t)n * ra_dtype_size(dtype);
    c->k = ra_alloc(bytes);
    c->v = c->k && !latent ? ra_alloc(bytes) : c->k;
    c->length = ra_calloc((size_t)batch, sizeof *c->length);
    c->dtype = dtype;
    c->n_kv_heads = n_kv_heads;
    c->latent = latent;
    if (!c->v || !c->length || ra_kv_cache_scales_alloc(c, n / head_dim) != RA_OK) {
        ra_kv_cache_destroy(c);
        return ra_fail(RA_ERR_NOMEM, "allocating %s%zu bytes of %s", latent ? "" : "2 x ",
                       bytes, latent ? "latent rows" : "keys and values (and their scales)");
    }
    c->batch = batch;
    c->capacity = capacity;
    c->window = window;
    c->head_dim = head_dim;
    *out = c;
    return RA_OK;
}

RA_API ra_status ra_kv_cache_create(ra_kv_cache **out, int64_t batch, int64_t capacity,
                                    int64_t n_kv_heads, int64_t head_dim, ra_dtype dtype)
{
    ra_error_reset();
    if (!out) return ra_fail(RA_ERR_NULL, "out is NULL");
    *out = NULL;
    return cache_create(out, batch, capacity, 0, 0, n_kv_heads, head_dim, dtype);
}

RA_API ra_status ra_kv_cache_create_window(ra_kv_cache **out, int64_t batch, int64_t window,
                                           int64_t max_new, int64_t n_kv_heads,
                                           int64_t head_dim, ra_dtype dtype)
{
    ra_error_reset();
    if (!out) return ra_fail(RA_ERR_NULL, "out is NULL");
    *out = NULL;
    if (window < 1 || max_new < 1)
        return ra_fail(RA_ERR_SIZE, "%s %lld: must be >= 1", window < 1 ? "window" : "max_new",
                       (long long)(window < 1 ? window : max_new));
    if (max_new > INT64_MAX - (window - 1))
        return ra_fail(RA_ERR_OVERFLOW, "window %lld - 1 + max_new %lld slots: too many",
                       (long long)window, (long long)max_new);
    return cache_create(out, batch, window - 1 + max_new, window, 0, n_kv_heads, head_dim,
                        dtype);
}

RA_API ra_status ra_kv_cache_create_latent(ra_kv_cache **out, int64_t batch, int64_t capacity,
                                           int64_t kv_lora_rank, int64_t rope_dim,
                                           ra_dtype dtype)
{
    ra_error_reset();
    if (!out) return ra_fail(RA_ERR_NULL, "out is NULL");
    *out = NULL;
    if (kv_lora_rank < 1 || rope_dim < 2 || rope_dim % 2 || kv_lora_rank > INT_MAX ||
        rope_dim > INT_MAX)
        return ra_fail(RA_ERR_SIZE, "kv_lora_rank %lld, rope_dim %lld (need kv_lora_rank >= 1, "
                       "rope_dim even and >= 2)", (long long)kv_lora_rank, (long long)rope_dim);
    return cache_create(out, batch, capacity, 0, kv_lora_rank, 1, kv_lora_rank + rope_dim,
                        dtype);
}

ra_status ra_kv_cache_refuse_latent(const ra_kv_cache *cache, const char *what)
{
    if (cache && cache->latent)
        return ra_fail(RA_ERR_ARGUMENT, "%s: the cache is a latent cache, which only a latent "
                       "attention layer's ra_layer_forward_cached serves", what);
    return RA_OK;
}

void ra_kv_cache_put_row(ra_kv_cache *cache, int64_t b, int64_t p, const float *x, int64_t n,
                         const float *x2, int64_t n2)
{
    const ra_tensor dst = ra_kv_cache_view(cache, 0);
    const int64_t slot = ra_kv_cache_slot(cache, p);
    const size_t esize = ra_dtype_size(cache->dtype);
    char *to = (char *)dst.data + (size_t)(b * dst.stride[0] + slot * dst.stride[1]) * esize;
    if (cache->dtype == RA_I8) {
        const float scale = ra_i8_scale(x, n, x2, n2);
        ((float *)ra_kv_cache_scales(cache, 0, b, 0))[slot] = scale;
        ra_quantize_i8_scaled((int8_t *)to, x, scale, n);
        ra_quantize_i8_scaled((int8_t *)to + n, x2, scale, n2);
    } else if (cache->dtype == RA_F8E4M3) {
        const float scale = ra_kv_cache_scales(cache, 0, b, 0)[0];
        if (ra_quantize_e4m3((uint8_t *)to, x, scale, n) |
            ra_quantize_e4m3((uint8_t *)to + n, x2, scale, n2))
            __atomic_store_n(&cache->nan_codes, 1, __ATOMIC_RELAXED);
    } else {
        ra_convert(to, cache->dtype, x, RA_F32, n);
        ra_convert(to + (size_t)n * esize, cache->dtype, x2, RA_F32, n2);
    }
}

RA_API void ra_kv_cache_destroy(ra_kv_cache *cache)
{
    if (!cache) return;
    if (cache->v != cache->k) ra_free(cache->v);
    ra_free(cache->k);
    if (cache->v_scale != cache->k_scale) ra_free(cache->v_scale);
    ra_free(cache->k_scale);
    ra_free(cache->length);
    ra_free(cache);
}

RA_API void ra_kv_cache_reset(ra_kv_cache *cache)
{
    if (!cache) return;
    memset(cache->length, 0, (size_t)cache->batch * sizeof *cache->length);
    cache->nan_codes = 0; /* no code stored is read again */
}

RA_API ra_status ra_kv_cache_dtype(const ra_kv_cache *cache, ra_dtype *out)
{
    ra_error_reset();
    if (!cache || !out) return ra_fail(RA_ERR_NULL, "%s is NULL", !cache ? "cache" : "out");
    *out = cache->dtype;
    return RA_OK;
}

RA_API int64_t ra_kv_cache_room(const ra_kv_cache *cache, int64_t b)
{
    return ra_kv_cache_length(cache, b) < 0 ? -1 : ra_kv_cache_max_new(cache, b);
}

RA_API int64_t ra_kv_cache_length(const ra_kv_cache *cache, int64_t b)
{
    ra_error_reset();
    if (cache && b >= 0 && b < cache->batch) return cache->length[b];
    if (!cache)
        ra_fail(RA_ERR_NULL, "cache is NULL");
    else
        ra_fail(RA_ERR_ARGUMENT, "sequence %lld: not in [0, %lld)", (long long)b,
                (long long)cache->batch);
    return -1;
}

ra_status ra_kv_cache_refuse_storage(const ra_kv_cache *cache, const ra_tensor *t,
                                     const char *name)
{
    if (!t || cache->page_size) return RA_OK; /* a pool's view: its pages are the pool's */
    for (int which = 0; which < 2; which++) {
        const ra_tensor storage = ra_kv_cache_view(cache, which);
        if (ra_tensors_overlap(t, &storage))
            return ra_fail(RA_ERR_ARGUMENT, "%s overlaps the cache's own storage (its "
                           "ra_kv_cache_views are for reading; copy the rows out first)", name);
    }
    return RA_OK;
}

RA_API ra_status ra_kv_cache_views(const ra_kv_cache *cache, ra_tensor *k, ra_tensor *v)
{
    ra_error_reset();
    if (!cache || !k || !v)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !cache ? "cache" : !k ? "k" : "v");
    if (ra_dtype_is_cache8(cache->dtype))
        return ra_fail(RA_ERR_DTYPE, "an 8-bit cache's codes mean nothing without their "
                       "scales: read its tokens with ra_kv_cache_read");
    *k = ra_kv_cache_view(cache, 0);
    *v = ra_kv_cache_view(cache, 1);
    return RA_OK;
}

RA_API ra_status ra_kv_cache_read(const ra_kv_cache *cache, int64_t b, int64_t from,
                                  const ra_tensor *k, const ra_tensor *v)
{
    ra_error_reset();
    if (!cache) return ra_fail(RA_ERR_NULL, "cache is NULL");
    if (cache->latent)
        return ra_fail(RA_ERR_ARGUMENT, "ra_kv_cache_read: a latent cache's rows are its views "
                       "(ra_kv_cache_views)");
    RA_TRY(ra_tensor_check_output(k, "k"));
    RA_TRY(ra_tensor_check_output(v, "v"));
    const ra_tensor *const t[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        if (t[i]->dtype != RA_F32)
            return ra_fail(RA_ERR_DTYPE, "%s: dtype %s, must be RA_F32", i ? "v" : "k",
                           ra_dtype_name(t[i]->dtype));
        if (t[i]->shape[0] != 1 || t[i]->shape[1] != k->shape[1] ||
            t[i]->shape[2] != cache->n_kv_heads || t[i]->shape[3] != cache->head_dim)
            return ra_fail(RA_ERR_SHAPE, "%s is " RA_DIMS_FMT "; the cache's rows are [1, n, "
                           "%lld, %lld] (n = k's)", i ? "v" : "k", RA_DIMS(t[i]->shape),
                           (long long)cache->n_kv_heads, (long long)cache->head_dim);
    }
    if (ra_tensors_overlap(k, v)) return ra_fail(RA_ERR_ARGUMENT, "k overlaps v");
    if (b < 0 || b >= cache->batch)
        return ra_fail(RA_ERR_ARGUMENT, "b %lld: not in [0, %lld)", (long long)b,
                       (long long)cache->batch);
    const int64_t n = k->shape[1], len = cache->length[b];
    const int64_t oldest = cache->window && len > cache->capacity ? len - cache->capacity : 0;
    if (from < oldest || from > len - n)
        return ra_fail(RA_ERR_ARGUMENT, "positions %lld .. %lld of sequence %lld: the cache "
                       "holds %lld .. %lld", (long long)from, (long long)(from + n - 1),
                       (long long)b, (long long)oldest, (long long)(len - 1));
    for (int which = 0; which < 2; which++) {
        const ra_tensor src = ra_kv_cache_view(cache, which), *dst = t[which];
        for (int64_t s = 0; s < n; s++) {
            const int64_t slot = ra_kv_cache_slot(cache, from + s);
            for (int64_t g = 0; g < cache->n_kv_heads; g++) {
                const void *row = (const char *)src.data + (size_t)(b * src.stride[0] +
                                  slot * src.stride[1] + g * src.stride[2]) *
                                  ra_dtype_size(cache->dtype);
                const float scale = ra_dtype_is_cache8(cache->dtype)
                    ? ra_kv_cache_scales(cache, which, b, g)[cache->dtype == RA_I8 ? slot : 0]
                    : 1.0f;
                float *out = ra_row(dst, 0, s, g);
                for (int64_t d = 0; d < cache->head_dim; d++)
                    out[d] = ra_load(row, cache->dtype, d) * scale;
            }
        }
    }
    return RA_OK;
}

/* ---- append ------------------------------------------------------------- */

int64_t ra_kv_stage_floats(const ra_tensor *k, const ra_tensor *v)
{
    if (k->dtype == RA_F32 && v->dtype == RA_F32) return 0;
    return ra_round_up(RA_APPEND_BLOCK * k->shape[2] * k->shape[3], 16);
}

ra_tensor ra_kv_stage_rows(const ra_tensor *x, int64_t b, int64_t s0, int64_t len,
                           const ra_rope *rope, const ra_positions *pos, float *buf)
{
    ra_tensor rows = ra_kv_rows(x, b, s0, len);
    if (x->dtype == RA_F32) {
        if (rope) ra_rope_apply(NULL, rope, &rows, &rows, pos, RA_FORWARD); /* checked */
        return rows;
    }
    const int64_t heads = x->shape[2], d = x->shape[3];
    ra_tensor f = ra_tensor_4d(buf, RA_F32, 1, len, heads, d);
    for (int64_t s = 0; s < len; s++)
        for (int64_t h = 0; h < heads; h++)
            ra_convert(ra_row(&f, 0, s, h), RA_F32, ra_row_any(&rows, 0, s, h), x->dtype, d);
    if (!rope) return f;
    ra_rope_apply(NULL, rope, &f, &f, pos, RA_FORWARD);
    for (int64_t s = 0; s < len; s++)
        for (int64_t h = 0; h < heads; h++)
            ra_convert((void *)ra_row_any(&rows, 0, s, h), x->dtype, ra_row(&f, 0, s, h), RA_F32, d);
    return f;
}

typedef struct append_job {
    ra_kv_cache *cache;
    const ra_rope *rope;
    const ra_tensor *q, *k, *v;
    const ra_positions *positions;
    const int64_t *n_new;
    int64_t blocks_per_sequence;
    float *stage;             /* per thread: ra_kv_stage_floats, or NULL */
    int64_t stage_floats;
} append_job;

/* Stores the rows of src (f32, [1, len, Hkv, D]) in the cache's k or v as
 * sequence b's tokens at positions at, at + 1, ... (their slots wrap in a
 * window cache), converting to the cache's dtype (8-bit: quantizing). */
static void store_rows(ra_kv_cache *c, int which, const ra_tensor *src, int64_t b, int64_t at)
{
    ra_tensor dst = ra_kv_cache_view(c, which);
    size_t esize = ra_dtype_size(c->dtype);
    for (int64_t s = 0; s < src->shape[1]; s++) {
        const int64_t slot = ra_kv_cache_slot(c, at + s);
        for (int64_t h = 0; h < c->n_kv_heads; h++) {
            const float *from = ra_row(src, 0, s, h);
            char *to = (char *)dst.data + (size_t)(b * dst.stride[0] + slot * dst.stride[1] +
                                                   h * dst.stride[2]) * esize;
            if (c->dtype == RA_F32)
                memcpy(to, from, (size_t)c->head_dim * sizeof(float));
            else if (ra_dtype_is_cache8(c->dtype))
                ra_kv_cache_store8(c, which, b, h, slot, to, from);
            else
                ra_convert(to, c->dtype, from, RA_F32, c->head_dim);
        }
    }
}

static void append_task(void *arg, int64_t task, int thread)
{
    const append_job *job = arg;
    int64_t b = task / job->blocks_per_sequence;
    int64_t s0 = task % job->blocks_per_sequence * RA_APPEND_BLOCK;
    int64_t n = job->n_new ? job->n_new[b] : job->k->shape[1];
    if (s0 >= n) return;
    int64_t len = n - s0 < RA_APPEND_BLOCK ? n - s0 : RA_APPEND_BLOCK, seq = job->k->shape[1];
    ra_positions pos = ra_positions_of_rows(job->positions, b, s0, seq);
    if (job->rope && job->q) { /* else stored as given */
        ra_tensor q = ra_kv_rows(job->q, b, s0, len);
        ra_rope_apply(NULL, job->rope, &q, &q, &pos, RA_FORWARD); /* checked by the caller */
    }
    float *stage = job->stage ? job->stage + thread * job->stage_floats : NULL;
    int64_t at = job->cache->length[b] + s0;
    ra_tensor k = ra_kv_stage_rows(job->k, b, s0, len, job->rope, &pos, stage);
    store_rows(job->cache, 0, &k, b, at);
    ra_tensor v = ra_kv_stage_rows(job->v, b, s0, len, NULL, NULL, stage);
    store_rows(job->cache, 1, &v, b, at);
}

ra_status ra_kv_append_check(int64_t batch, int64_t n_kv_heads, int64_t head_dim,
                             const ra_rope *rope, const ra_tensor *q, const ra_tensor *k,
                             const ra_tensor *v, const int64_t *n_new)
{
    if (!k || !v) return ra_fail(RA_ERR_NULL, "%s is NULL", !k ? "k" : "v");
    /* f32, f16 or bf16 each; with a rope, q and k are rotated in place, so
     * each of their elements needs its own address (a broadcast k, stride
     * 0, would be refused by the rotation, unseen, and stored unrotated) */
    RA_TRY(rope ? ra_tensor_check_output(k, "k") : ra_tensor_check(k, "k"));
    RA_TRY(ra_tensor_check(v, "v"));
    if (q) RA_TRY(rope ? ra_tensor_check_output(q, "q") : ra_tensor_check(q, "q"));
    const int64_t seq = k->shape[1];
    for (int d = 0; d < 4; d++)
        if (v->shape[d] != k->shape[d])
            return ra_fail(RA_ERR_SHAPE, "v " RA_DIMS_FMT " and k " RA_DIMS_FMT " differ",
                           RA_DIMS(v->shape), RA_DIMS(k->shape));
    if (k->shape[0] != batch || k->shape[2] != n_kv_heads || k->shape[3] != head_dim)
        return ra_fail(RA_ERR_SHAPE, "k is [%lld, %lld, %lld, %lld]; the cache holds batch %lld, "
                       "%lld kv heads of %lld", (long long)k->shape[0], (long long)seq,
                       (long long)k->shape[2], (long long)k->shape[3], (long long)batch,
                       (long long)n_kv_heads, (long long)head_dim);
    if (q && (q->shape[0] != batch || q->shape[1] != seq || q->shape[3] != head_dim ||
              q->shape[2] % n_kv_heads))
        return ra_fail(RA_ERR_SHAPE, "q " RA_DIMS_FMT " does not fit k " RA_DIMS_FMT " (its "
                       "heads: a multiple of the cache's %lld)", RA_DIMS(q->shape),
                       RA_DIMS(k->shape), (long long)n_kv_heads);
    if (rope && rope->config.head_dim != head_dim)
        return ra_fail(RA_ERR_SHAPE, "rope's head_dim %lld is not the cache's %lld",
                       (long long)rope->config.head_dim, (long long)head_dim);
    /* q and k are rotated in place: no element may be read or written twice */
    if (q && ra_tensors_share_elements(q, k))
        return ra_fail(RA_ERR_ARGUMENT, "q and k share elements");
    if (q && ra_tensors_share_elements(q, v))
        return ra_fail(RA_ERR_ARGUMENT, "q and v share elements");
    if (ra_tensors_share_elements(k, v)) return ra_fail(RA_ERR_ARGUMENT, "k and v share elements");
    for (int64_t b = 0; b < batch; b++) {
        int64_t n = n_new ? n_new[b] : seq;
        if (n < 0 || n > seq)
            return ra_fail(RA_ERR_ARGUMENT, "n_new[%lld] is %lld, not in [0, %lld]",
                           (long long)b, (long long)n, (long long)seq);
    }
    return RA_OK;
}

ra_status ra_kv_append_positions(ra_positions *p, const ra_positions *positions,
                                 const ra_rope *rope, const int64_t *starts, int64_t batch,
                                 int64_t seq, const int64_t *n_new)
{
    *p = ra_positions_start(0);
    if (!rope) return RA_OK; /* read only to rotate */
    ra_positions next = ra_positions_start(0);
    next.starts = starts;
    return ra_positions_read_new(p, positions ? positions : &next, rope, batch, seq, n_new);
}

static ra_status check_room(const ra_kv_cache *c, const ra_tensor *k, const int64_t *n_new)
{
    for (int64_t b = 0; b < c->batch; b++) {
        int64_t n = n_new ? n_new[b] : k->shape[1];
        if (n > ra_kv_cache_max_new(c, b) && c->window)
            return ra_fail(RA_ERR_CACHE_FULL, "sequence %lld: %lld new tokens exceed the window "
                           "cache's max_new %lld (they would overwrite keys of their own "
                           "windows)", (long long)b, (long long)n,
                           (long long)ra_kv_cache_max_new(c, b));
        if (n > ra_kv_cache_max_new(c, b))
            return ra_fail(RA_ERR_CACHE_FULL, "sequence %lld: %lld cached + %lld new tokens "
                           "exceed the capacity %lld", (long long)b, (long long)c->length[b],
                           (long long)n, (long long)c->capacity);
    }
    return RA_OK;
}

/* An append checked and ready to run: its job, positions and scratch. */
typedef struct append_plan {
    append_job job;
    ra_positions pos;
    ra_scratch scratch;
} append_plan;

/* Checks an append and takes its scratch (from ctx's first workspace, and
 * only for 16-bit k or v: the layers, which hold that workspace, append
 * f32); nothing is written. */
static ra_status append_prepare(append_plan *plan, ra_context *ctx, ra_kv_cache *cache,
                                const ra_rope *rope, const ra_tensor *q, const ra_tensor *k,
                                const ra_tensor *v, const ra_positions *positions,
                                const int64_t *n_new)
{
    RA_TRY(ra_kv_cache_refuse_latent(cache, "ra_kv_cache_append"));
    if (!cache) return ra_fail(RA_ERR_NULL, "cache is NULL");
    RA_TRY(ra_kv_append_check(cache->batch, cache->n_kv_heads, cache->head_dim, rope, q, k, v,
                              n_new));
    RA_TRY(ra_kv_cache_refuse_storage(cache, q, "q"));
    RA_TRY(ra_kv_cache_refuse_storage(cache, k, "k"));
    RA_TRY(ra_kv_cache_refuse_storage(cache, v, "v"));
    const int64_t seq = k->shape[1];
    RA_TRY(ra_kv_append_positions(&plan->pos, positions, rope, cache->length, cache->batch, seq,
                                  n_new));
    RA_TRY(check_room(cache, k, n_new));
    const int64_t stage = ra_kv_stage_floats(k, v);
    plan->scratch = (ra_scratch){NULL, 0};
    if (stage)
        RA_TRY(ra_scratch_acquire(ctx, (size_t)(stage * ra_parallel_threads(ctx)) * sizeof(float),
                                  &plan->scratch));
    plan->job = (append_job){cache, rope, q, k, v, &plan->pos, n_new,
                             (seq + RA_APPEND_BLOCK - 1) / RA_APPEND_BLOCK, plan->scratch.data,
                             stage};
    return RA_OK;
}

/* Runs a prepared append: stores the tokens, advances the lengths. */
static void append_run(append_plan *plan, ra_context *ctx)
{
    append_job *job = &plan->job;
    const int64_t batch = job->k->shape[0], seq = job->k->shape[1];
    ra_parallel_for(batch * seq <= RA_APPEND_BLOCK ? NULL : ctx,
                    batch * job->blocks_per_sequence, append_task, job);
    for (int64_t b = 0; b < batch; b++) job->cache->length[b] += job->n_new ? job->n_new[b] : seq;
    ra_scratch_release(&plan->scratch);
}

RA_API ra_status ra_kv_cache_append(ra_context *ctx, ra_kv_cache *cache, const ra_rope *rope,
                                    const ra_tensor *q, const ra_tensor *k,
                                    const ra_tensor *v, const ra_positions *positions,
                                    const int64_t *n_new)
{
    ra_error_reset();
    append_plan plan;
    RA_TRY(append_prepare(&plan, ctx, cache, rope, q, k, v, positions, n_new));
    append_run(&plan, ctx);
    return RA_OK;
}

RA_API ra_status ra_kv_cache_attend(ra_context *ctx, ra_kv_cache *cache, const ra_rope *rope,
                                    const ra_tensor *out, const ra_tensor *q,
                                    const ra_tensor *k, const ra_tensor *v,
                                    const ra_positions *positions, const int64_t *n_new,
                                    const ra_attention_options *options)
{
    ra_error_reset();
    RA_TRY(ra_kv_cache_refuse_latent(cache, "ra_kv_cache_attend"));
    ra_attention_mask mask;
    RA_TRY(ra_attention_decode_check_views(&mask, cache, out, q, options));
    if (k && v && (ra_tensors_overlap(out, k) || ra_tensors_overlap(out, v)))
        return ra_fail(RA_ERR_ARGUMENT, "out overlaps %s", ra_tensors_overlap(out, k) ? "k" : "v");
    size_t bytes;
    ra_scratch scratch;
    RA_TRY(ra_attention_decode_scratch(cache, q, ra_parallel_threads(ctx), mask.quantize_q,
                                       &bytes));
    RA_TRY(ra_scratch_acquire_outer(ctx, bytes, &scratch)); /* the append takes the first */
    append_plan plan;
    ra_status status = append_prepare(&plan, ctx, cache, rope, q, k, v, positions, n_new);
    if (status == RA_OK) {
        append_run(&plan, ctx);
        ra_attention_decode_run(ctx, cache, out, q, n_new, &mask, scratch.data);
    }
    ra_scratch_release(&scratch);
    return status;
}
