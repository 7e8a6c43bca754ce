/*
 * decode.c — ra_attention_decode: checks, the split of the visible part of
 * the cache into chunks across threads, and the exact merge of their
 * partial softmaxes (kernels: cpu/decode_impl.h).
 *
 *   q: [B, T, H, D] f32, f16 or bf16   out: [B, T, H, D] f32
 *   cache K, V: [B, capacity, Hkv, D]
 */
#include <stdatomic.h>

#include "attention_internal.h"
#include "cpu/kernels.h"
#include "kvcache_internal.h"
#include "parallel.h"
#include "quant8.h"
#include "rope_internal.h"

ra_status ra_attention_decode_mask(ra_attention_mask *mask, const ra_kv_cache *c,
                                   const ra_tensor *q, const ra_attention_options *options)
{
    ra_attention_options o;
    RA_TRY(ra_attention_options_read(&o, options));
    if (o.dropout > 0.0f)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: dropout %g in decode, which "
                       "is inference", (double)o.dropout);
    if (o.padding_mask)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: padding_mask in decode (the "
                       "cache's lengths replace it)");
    if (o.cu_seqlens || o.n_documents)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: cu_seqlens in decode (one "
                       "sequence per batch row)");
    RA_TRY(ra_attention_mask_read(mask, &o, q->shape));
    /* the furthest back a query sees: W - 1 keys (window), C - 1 (chunk) */
    int64_t reach = o.window ? o.window : o.chunk;
    if (o.window && o.chunk && o.chunk < o.window) reach = o.chunk;
    if (c->window && (reach == 0 || reach > c->window))
        return ra_fail(RA_ERR_ARGUMENT, "ra_attention_options: window %lld, chunk %lld: this "
                       "window cache keeps %lld keys per query; set window or chunk to at most "
                       "that", (long long)o.window, (long long)o.chunk, (long long)c->window);
    return RA_OK;
}

/* quantize_q (decode_impl.h's DECODE_I8_Q8): int8 codes of q against an
 * RA_I8 cache's, up to RA_DECODE_Q8_MAX_DIM. */
static ra_status check_quantize_q(const ra_kv_cache *c)
{
    if (c->dtype != RA_I8)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: quantize_q with an %s cache "
                       "(only RA_I8 caches and pools take it)", ra_dtype_name(c->dtype));
    if (c->head_dim > RA_DECODE_Q8_MAX_DIM)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_attention_options: quantize_q with head_dim %lld "
                       "(at most %d: the integer sums must stay exact in float32)",
                       (long long)c->head_dim, RA_DECODE_Q8_MAX_DIM);
    return RA_OK;
}

ra_status ra_attention_decode_check_views(ra_attention_mask *mask, const ra_kv_cache *c,
                                          const ra_tensor *out, const ra_tensor *q,
                                          const ra_attention_options *options)
{
    if (!c || !out || !q)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !c ? "cache" : !out ? "out" : "q");
    RA_TRY(ra_tensor_check(q, "q")); /* f32, f16 or bf16, widened as loaded */
    RA_TRY(ra_tensor_check_output(out, "out")); /* each element written once */
    if (out->dtype != RA_F32)
        return ra_fail(RA_ERR_DTYPE, "out: dtype %s, must be RA_F32", ra_dtype_name(out->dtype));
    for (int d = 0; d < 4; d++)
        if (out->shape[d] != q->shape[d])
            return ra_fail(RA_ERR_SHAPE, "out " RA_DIMS_FMT " and q " RA_DIMS_FMT " differ",
                           RA_DIMS(out->shape), RA_DIMS(q->shape));
    if (q->shape[0] != c->batch || q->shape[3] != c->head_dim)
        return ra_fail(RA_ERR_SHAPE, "q is " RA_DIMS_FMT "; the cache holds batch %lld, head_dim "
                       "%lld", RA_DIMS(q->shape), (long long)c->batch, (long long)c->head_dim);
    if (q->shape[2] % c->n_kv_heads)
        return ra_fail(RA_ERR_GQA, "q's %lld heads are not a multiple of the cache's %lld",
                       (long long)q->shape[2], (long long)c->n_kv_heads);
    if (ra_tensors_overlap(out, q)) return ra_fail(RA_ERR_ARGUMENT, "out overlaps q");
    RA_TRY(ra_kv_cache_refuse_storage(c, out, "out"));
    /* quantize_q is the decode calls' alone: the mask readers refuse it */
    ra_attention_options o;
    RA_TRY(ra_attention_options_read(&o, options));
    const int quantize_q = o.quantize_q != 0;
    o.quantize_q = 0;
    RA_TRY(ra_attention_decode_mask(mask, c, q, &o));
    if (quantize_q) RA_TRY(check_quantize_q(c));
    mask->quantize_q = quantize_q;
    RA_TRY(ra_attention_mask_check_output(mask, out, "out"));
    return RA_OK;
}

/* n_query[b] (NULL: T) is in [0, T]. */
static ra_status check_count(const int64_t *n_query, const ra_tensor *q, int64_t b)
{
    int64_t n = n_query ? n_query[b] : q->shape[1];
    if (n < 0 || n > q->shape[1])
        return ra_fail(RA_ERR_ARGUMENT, "n_query[%lld] is %lld, not in [0, %lld]", (long long)b,
                       (long long)n, (long long)q->shape[1]);
    return RA_OK;
}

ra_status ra_attention_decode_check(ra_attention_mask *mask, const ra_kv_cache *c,
                                    const ra_tensor *out, const ra_tensor *q,
                                    const int64_t *n_query, const ra_attention_options *options)
{
    RA_TRY(ra_attention_decode_check_views(mask, c, out, q, options));
    for (int64_t b = 0; b < c->batch; b++) {
        RA_TRY(check_count(n_query, q, b));
        int64_t n = n_query ? n_query[b] : q->shape[1];
        if (n > c->length[b]) /* queries must be cached tokens */
            return ra_fail(RA_ERR_SIZE, "sequence %lld: %lld queries, but %lld tokens cached",
                           (long long)b, (long long)n, (long long)c->length[b]);
        if (c->window && n > ra_kv_cache_max_new(c, b)) /* their keys are in the ring */
            return ra_fail(RA_ERR_SIZE, "sequence %lld: %lld queries, but the window cache "
                           "holds the keys of at most max_new = %lld", (long long)b, (long long)n,
                           (long long)ra_kv_cache_max_new(c, b));
    }
    return RA_OK;
}

/* Keys of sequence b some row sees: first .. last (none when last <
 * first). */
static void keys_seen(const ra_decode_job *job, int64_t b, int64_t *first, int64_t *last)
{
    const int64_t nq = ra_decode_queries(job, b), p = ra_decode_query_start(job, b);
    *first = ra_decode_first_key(job, b, p);
    *last = nq ? ra_decode_last_key(job, b, p + nq - 1) : -1;
}

/* Chunks of sequence b that hold keys its rows see (0 without queries). */
static int64_t chunks_of(const ra_decode_job *job, int64_t b)
{
    int64_t first, last;
    keys_seen(job, b, &first, &last);
    if (last < first) return 0;
    return last / RA_DECODE_CHUNK - ra_decode_first_chunk(job, b) + 1;
}

/* The job for these arguments (already checked); scratch comes later. */
static ra_decode_job make_job(const ra_kv_cache *cache, const ra_tensor *out, const ra_tensor *q,
                              const int64_t *n_query, const int64_t *q_start,
                              const int64_t *k_start, const ra_attention_mask *mask)
{
    int64_t rows = (q->shape[2] / cache->n_kv_heads) * q->shape[1];
    /* per thread: scaled queries [Hkv * rows, D], each row's first and last key */
    ra_decode_job job = {cache, q, out, n_query, *mask, 1, rows, 1, NULL, NULL,
                         ra_decode_queries_floats(cache, rows) + ra_round_up(4 * rows, 16),
                         q_start, NULL, k_start, NULL, NULL};
    for (int64_t b = 0; b < cache->batch; b++) {
        int64_t n = chunks_of(&job, b);
        job.n_chunks = n > job.n_chunks ? n : job.n_chunks;
    }
    return job;
}

/* quantize_q's floats of scratch: every query row's scale [B, Hkv, rows],
 * then its codes [B, Hkv, rows, D], each rounded up to 64 bytes (0 without
 * quantize_q).  At most the partials' count, and a few. */
static int64_t q8_floats(const ra_decode_job *job)
{
    const ra_kv_cache *c = job->cache;
    const int64_t n = c->batch * c->n_kv_heads * job->rows;
    return job->mask.quantize_q ? ra_round_up(n, 16) + ra_round_up(n * c->head_dim, 64) / 4 : 0;
}

/* The floats of the tasks' counters (decode_call's left): one int a
 * (sequence, kv head), as many as there may be splits. */
_Static_assert(sizeof(atomic_int) <= sizeof(float), "a counter in a float's place");
static int64_t left_floats(const ra_kv_cache *c)
{
    return ra_round_up(c->batch * c->n_kv_heads, 16);
}

/* Scratch floats: q rows per thread, then the partials of every task, then
 * quantize_q's rows (q8_floats), then the tasks' counters (left_floats). */
static ra_status scratch_floats(const ra_decode_job *job, int threads, int64_t *per_threads,
                                int64_t *total)
{
    const ra_kv_cache *c = job->cache;
    int64_t dims[4] = {c->batch * c->n_kv_heads, job->n_chunks, job->rows, c->head_dim + 2}, n;
    ra_status status = ra_count(dims, 4, &n);
    if (status == RA_OK) /* no overflow: n is at most RA_MAX_ELEMENTS */
        n += q8_floats(job) + left_floats(c);
    if (status == RA_OK && (ra_mul(job->per_thread, threads, per_threads) != RA_OK ||
                            n > RA_MAX_ELEMENTS - *per_threads))
        status = RA_ERR_OVERFLOW;
    if (status != RA_OK)
        return ra_fail(status, "decode scratch for batch %lld, capacity %lld and %d "
                       "threads: too many elements", (long long)c->batch,
                       (long long)c->capacity, threads);
    *total = n + *per_threads;
    return RA_OK;
}

ra_status ra_attention_decode_scratch(const ra_kv_cache *cache, const ra_tensor *q, int threads,
                                      int quantize_q, size_t *bytes)
{
    ra_attention_mask plain = {0};
    plain.quantize_q = quantize_q;
    ra_decode_job job = make_job(cache, q, q, NULL, NULL, NULL, &plain);
    int64_t per_threads, total;
    /* lengths grow by the append that precedes the call: size for the
     * capacity, and for a ring's keys one more chunk (its first need not
     * start one) */
    job.n_chunks = (cache->capacity + RA_DECODE_CHUNK - 1) / RA_DECODE_CHUNK + !!cache->window;
    RA_TRY(scratch_floats(&job, threads, &per_threads, &total));
    *bytes = (size_t)total * sizeof(float);
    return RA_OK;
}

/* quantize_q: every query row of the call, scaled as decode_task scales
 * it (q times the logit scale, in float), as int8 codes and a scale by the
 * cache's own quantizer (ra_quantize_i8), once for all tasks, into area
 * (q8_floats); the rows past n_query zero. */
static void quantize_queries(ra_decode_job *job, float *area)
{
    const ra_kv_cache *c = job->cache;
    const ra_tensor *q = job->q;
    const int64_t n_kv = c->n_kv_heads, d = c->head_dim, T = q->shape[1], rows = job->rows;
    const int64_t rep = q->shape[2] / n_kv;
    const float scale = (float)job->mask.scale;
    float *scales = area, x[RA_DECODE_Q8_MAX_DIM];
    int8_t *codes = (int8_t *)(area + ra_round_up(c->batch * n_kv * rows, 16));
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t g = 0; g < n_kv; g++)
            for (int64_t r = 0; r < rows; r++) {
                const int64_t row = (b * n_kv + g) * rows + r, h = r / T, t = r % T;
                if (t >= ra_decode_queries(job, b)) {
                    scales[row] = 0.0f;
                    memset(codes + row * d, 0, (size_t)d);
                    continue;
                }
                const void *qrow = ra_row_any(q, b, t, g * rep + h);
                for (int64_t e = 0; e < d; e++) x[e] = ra_load(qrow, q->dtype, e) * scale;
                scales[row] = ra_quantize_i8(codes + row * d, x, d);
            }
    job->q_scale = scales;
    job->q_codes = codes;
}

/* A call's tasks: each runs the kernels' task (job's), and the task that
 * ends the last chunk of a sequence's split of kv heads merges those heads'
 * partials (decode_merge_task, in chunk order: the same bits whichever
 * thread it is), while the other threads go on reading the cache.  left
 * [B, n_splits]: the chunks of each not yet ended. */
typedef struct decode_call {
    ra_decode_job job;
    ra_task_fn task, merge;
    atomic_int *left;
} decode_call;

static void decode_call_task(void *arg, int64_t task, int thread)
{
    decode_call *call = arg;
    const ra_decode_job *job = &call->job;
    call->task(&call->job, task, thread);
    /* task = (b n_chunks + chunk) n_splits + split (decode_task's) */
    const int64_t split = task % job->n_splits, b = task / job->n_splits / job->n_chunks;
    if (atomic_fetch_sub(&call->left[b * job->n_splits + split], 1) != 1) return;
    const int64_t n_kv = job->cache->n_kv_heads, heads = n_kv / job->n_splits;
    for (int64_t g = split * heads; g < (split + 1) * heads; g++)
        call->merge(&call->job, b * n_kv + g, thread);
}

void ra_attention_decode_run_at(ra_context *ctx, const ra_kv_cache *cache, const ra_tensor *out,
                                const ra_tensor *q, const int64_t *n_query,
                                const int64_t *q_start, const int64_t *k_start, float *lse,
                                const ra_attention_mask *mask, float *scratch)
{
    ra_decode_job job = make_job(cache, out, q, n_query, q_start, k_start, mask);
    job.lse = lse;
    int64_t per_threads, total;
    scratch_floats(&job, ra_parallel_threads(ctx), &per_threads, &total); /* sized before */
    job.scratch = scratch;
    job.partials = scratch + per_threads;
    const int64_t q8_at = total - left_floats(cache) - q8_floats(&job);
    if (mask->quantize_q) quantize_queries(&job, scratch + q8_at);
    /* Split the kv heads too (each kv head's sums stay the same), until
     * there are 16 tasks per thread: the threads finish apart by up to a
     * task, so small tasks keep that tail short.  At 16384 tokens on 2
     * threads, 32 tasks of 4 kv heads rather than 16 of 8 took a bf16 step
     * from 0.57 to 0.55 of an f32 step's time.  Not when the whole call is
     * a few microseconds of work (under MIN_SPLIT rows read), which one
     * thread does sooner than two can share it. */
    enum { MIN_SPLIT = 512 };
    int64_t rows_read = 0;
    for (int64_t b = 0; b < cache->batch; b++) {
        int64_t first, last;
        keys_seen(&job, b, &first, &last);
        if (last >= first) rows_read += last + 1 - first;
    }
    rows_read *= cache->n_kv_heads;
    const int64_t threads = ra_parallel_threads(ctx), chunks = cache->batch * job.n_chunks;
    while (rows_read >= MIN_SPLIT && chunks * job.n_splits < 16 * threads &&
           job.n_splits < cache->n_kv_heads) {
        int64_t s = job.n_splits + 1;
        while (cache->n_kv_heads % s) s++;
        job.n_splits = s;
    }
    const ra_kernels *kernels = ra_kernels_get();
    decode_call call = {job, mask->quantize_q ? kernels->decode_q8_task : kernels->decode_task,
                        kernels->decode_merge_task, NULL};
    /* The merges in the tasks, not after them on this thread: on two
     * threads of an Intel Xeon (family 6 model 167), the merge of 32
     * sequences of 512..8192 tokens took 0.4-0.5 ms of a 45 ms step, its
     * partials (2.5 MB) mostly out of the caches by then; in the tasks the
     * step took 0.99 of that time, one thread's the same
     * (docs/perf/2026-12-07-paged.md, fourteenth session). */
    call.left = (atomic_int *)(void *)(scratch + total - left_floats(cache));
    for (int64_t i = 0; i < cache->batch * job.n_splits; i++)
        atomic_init(&call.left[i], (int)job.n_chunks);
    ra_parallel_for(ctx, chunks * job.n_splits, decode_call_task, &call);
}

void ra_attention_decode_run(ra_context *ctx, const ra_kv_cache *cache, const ra_tensor *out,
                             const ra_tensor *q, const int64_t *n_query,
                             const ra_attention_mask *mask, float *scratch)
{
    ra_attention_decode_run_at(ctx, cache, out, q, n_query, NULL, NULL, NULL, mask, scratch);
}

RA_API ra_status ra_attention_decode(ra_context *ctx, const ra_kv_cache *cache,
                                     const ra_tensor *out, const ra_tensor *q,
                                     const int64_t *n_query, const ra_attention_options *options)
{
    ra_error_reset();
    ra_attention_mask mask;
    RA_TRY(ra_attention_decode_check(&mask, cache, out, q, n_query, options));
    ra_decode_job job = make_job(cache, out, q, n_query, NULL, NULL, &mask);
    int64_t per_threads, total;
    RA_TRY(scratch_floats(&job, ra_parallel_threads(ctx), &per_threads, &total));
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, (size_t)total * sizeof(float), &scratch));
    ra_attention_decode_run(ctx, cache, out, q, n_query, &mask, scratch.data);
    ra_scratch_release(&scratch);
    return RA_OK;
}

RA_API ra_status ra_attention_decode_lse(ra_context *ctx, const ra_kv_cache *cache,
                                         const ra_tensor *out, float *lse, const ra_tensor *q,
                                         const int64_t *n_query, const int64_t *q_start,
                                         const int64_t *k_start,
                                         const ra_attention_options *options)
{
    ra_error_reset();
    if (!lse) return ra_fail(RA_ERR_NULL, "lse is NULL");
    if (k_start && !q_start) return ra_fail(RA_ERR_ARGUMENT, "k_start without q_start");
    ra_attention_mask mask;
    if (!q_start) {
        RA_TRY(ra_attention_decode_check(&mask, cache, out, q, n_query, options));
    } else {
        if (cache && (cache->window || cache->page_size))
            return ra_fail(RA_ERR_UNSUPPORTED, "q_start with a window cache (its ring holds "
                           "the keys of the last tokens only)");
        RA_TRY(ra_attention_decode_check_views(&mask, cache, out, q, options));
        for (int64_t b = 0; b < cache->batch; b++) {
            RA_TRY(check_count(n_query, q, b));
            if (q_start[b] < -RA_MAX_POSITION || q_start[b] > RA_MAX_POSITION)
                return ra_fail(RA_ERR_POSITION, "q_start[%lld] is %lld, beyond +-2^32",
                               (long long)b, (long long)q_start[b]);
            if (k_start && (k_start[b] < 0 || k_start[b] > RA_MAX_POSITION))
                return ra_fail(RA_ERR_POSITION, "k_start[%lld] is %lld, not in [0, 2^32]",
                               (long long)b, (long long)k_start[b]);
        }
    }
    /* lse [B, H, T] as a view, for the overlap checks (q's sizes fit) */
    ra_tensor lse_view = ra_tensor_4d(lse, RA_F32, q->shape[0], q->shape[2], q->shape[1], 1);
    if (ra_tensors_overlap(&lse_view, out) || ra_tensors_overlap(&lse_view, q))
        return ra_fail(RA_ERR_ARGUMENT, "lse overlaps %s",
                       ra_tensors_overlap(&lse_view, out) ? "out" : "q");
    RA_TRY(ra_attention_mask_check_output(&mask, &lse_view, "lse"));
    ra_decode_job job = make_job(cache, out, q, n_query, q_start, k_start, &mask);
    int64_t per_threads, total;
    RA_TRY(scratch_floats(&job, ra_parallel_threads(ctx), &per_threads, &total));
    ra_scratch scratch;
    RA_TRY(ra_scratch_acquire(ctx, (size_t)total * sizeof(float), &scratch));
    ra_attention_decode_run_at(ctx, cache, out, q, n_query, q_start, k_start, lse, &mask,
                               scratch.data);
    ra_scratch_release(&scratch);
    return RA_OK;
}
