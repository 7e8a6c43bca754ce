/*
 * decode_paged.c — ra_attention_decode_paged: one decode step of many
 * sequences of an ra_kv_pool, of ragged lengths, in one call.  The pool's
 * sequences are given to ra_attention_decode's kernels as a paged view of
 * a cache (kvcache_internal.h): the same tasks over chunks of positions,
 * the same blocks and the same merge, each key's row found through its
 * sequence's block table; so the same bits as a contiguous cache holding
 * the same tokens.
 *
 *   q, out: [N, T, H, D] f32 for N = n_ids sequences
 */
#include "kvpool_internal.h"
#include "parallel.h"

/* The furthest back a query sees under mask (0: no bound): W - 1 keys
 * (window W), C - 1 (chunk C). */
static int64_t mask_reach(const ra_attention_mask *mask)
{
    int64_t reach = mask->window ? mask->window : mask->chunk;
    if (mask->window && mask->chunk && mask->chunk < mask->window) reach = mask->chunk;
    return reach;
}

ra_status ra_kv_pool_check_reach(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                                 const ra_attention_mask *mask)
{
    const int64_t reach = mask_reach(mask);
    for (int64_t b = 0; b < n_ids; b++) {
        const ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[b]);
        if (s->window && (reach == 0 || reach > s->window))
            return ra_fail(RA_ERR_ARGUMENT, "window %lld, chunk %lld: sequence %lld (ids[%lld]) "
                           "keeps a window of %lld keys; set window or chunk to at most that",
                           (long long)mask->window, (long long)mask->chunk, (long long)ids[b],
                           (long long)b, (long long)s->window);
    }
    return RA_OK;
}

/* A window sequence's queries must not see further back than its window,
 * nor need a key its released pages held. */
static ra_status check_windows(const ra_kv_pool *pool, const int64_t *ids, const ra_kv_cache *view,
                               const ra_attention_mask *mask, const int64_t *n_query, int64_t T)
{
    RA_TRY(ra_kv_pool_check_reach(pool, ids, view->batch, mask));
    for (int64_t b = 0; b < view->batch; b++) {
        const ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[b]);
        const int64_t nq = n_query ? n_query[b] : T;
        if (nq == 0) continue;
        const int64_t first = ra_mask_first_key(mask, s->length - nq, 0);
        if (first < s->first_page * pool->page_size)
            return ra_fail(RA_ERR_SIZE, "sequence %lld (ids[%lld]): its %lld queries see from "
                           "position %lld, but its window released the pages before %lld (a "
                           "query sees the keys kept for the tokens of the last append)",
                           (long long)ids[b], (long long)b, (long long)nq, (long long)first,
                           (long long)(s->first_page * pool->page_size));
    }
    return RA_OK;
}

ra_kv_cache ra_kv_pool_view(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                            const int64_t *grow, int64_t *arrays)
{
    int64_t *length = arrays, *first_page = length + n_ids, max_length = 1;
    const int32_t **pages = (const int32_t **)(void *)(first_page + n_ids);
    for (int64_t b = 0; b < n_ids; b++) {
        const ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[b]);
        length[b] = s->length + (grow ? grow[b] : 0);
        first_page[b] = s->first_page;
        pages[b] = s->table;
        max_length = length[b] > max_length ? length[b] : max_length;
    }
    return (ra_kv_cache){
        .batch = n_ids, .capacity = max_length, .n_kv_heads = pool->n_kv_heads,
        .head_dim = pool->head_dim, .dtype = pool->dtype, .k = pool->k, .v = pool->v,
        .k_scale = pool->k_scale, .v_scale = pool->v_scale, .length = length,
        .nan_codes = pool->nan_codes, .page_size = pool->page_size,
        .page_group = pool->group, .n_pages = pool->n_pages, .pages = pages,
        .first_page = first_page};
}

RA_API ra_status ra_attention_decode_paged(ra_context *ctx, const ra_kv_pool *pool,
                                           const int64_t *ids, int64_t n_ids,
                                           const ra_tensor *out, const ra_tensor *q,
                                           const int64_t *n_query,
                                           const ra_attention_options *options)
{
    ra_error_reset();
    if (!pool || !ids) return ra_fail(RA_ERR_NULL, "%s is NULL", !pool ? "pool" : "ids");
    RA_TRY(ra_kv_pool_check_ids(pool, ids, n_ids));
    /* the view's per-row arrays: lengths, first pages, tables */
    ra_scratch rows;
    RA_TRY(ra_scratch_acquire_outer(ctx, (size_t)n_ids * 3 * sizeof(int64_t), &rows));
    const ra_kv_cache view = ra_kv_pool_view(pool, ids, n_ids, NULL, rows.data);
    ra_attention_mask mask;
    ra_status status = ra_attention_decode_check(&mask, &view, out, q, n_query, options);
    if (status == RA_OK)
        status = check_windows(pool, ids, &view, &mask, n_query, q->shape[1]);
    size_t bytes = 0;
    if (status == RA_OK)
        status = ra_attention_decode_scratch(&view, q, ra_parallel_threads(ctx), mask.quantize_q,
                                             &bytes);
    ra_scratch scratch;
    if (status == RA_OK) status = ra_scratch_acquire(ctx, bytes, &scratch);
    if (status == RA_OK) {
        ra_attention_decode_run(ctx, &view, out, q, n_query, &mask, scratch.data);
        ra_scratch_release(&scratch);
    }
    ra_scratch_release(&rows);
    return status;
}
