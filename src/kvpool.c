/*
 * kvpool.c — the paged KV pool: pages of page_size tokens shared by many
 * sequences, a block table per sequence, prefix pages shared by forks
 * (reference counted, the last partial page copied on write), windows that
 * release the pages they pass, and the append that rotates q and k and
 * writes k and v into each sequence's pages in one pass per token block.
 *
 *   K, V: groups of pages [n_pages / G, Hkv, G, page_size, D] in the pool's
 *   dtype (kvpool_internal.h)
 *   append inputs: q [N, S, H, D] (optional), k, v [N, S, Hkv, D] f32 for
 *   N = n_ids sequences
 */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "kvpool_internal.h"
#include "parallel.h"
#include "quant8.h"
#include "rope_internal.h"

/* Pages a group of a pool of pages of page_size: a decode task's
 * RA_DECODE_CHUNK positions (at least one page), so that a task reads
 * each kv head's rows of its positions as one run, as in a contiguous
 * cache, where the pages of a sequence fill its groups in order.  On the
 * 2-core Intel Xeon (family 6 model 167), two threads, 32 sequences of
 * 512..8192 f32 tokens at D 128 in pages of 16: with groups of one page
 * (8 KiB runs) a step took 1.10-1.22 of the contiguous twin's time
 * (eleventh session), with groups of 256 positions (128 KiB runs)
 * 1.01-1.06, of 1024 0.94-1.06 (docs/perf/2026-12-07-paged.md, thirteenth
 * session). */
static int64_t group_pages(int64_t page_size)
{
    return page_size < RA_DECODE_CHUNK ? RA_DECODE_CHUNK / page_size : 1;
}

RA_API ra_status ra_kv_pool_create(ra_kv_pool **out, int64_t n_pages, int64_t page_size,
                                   int64_t max_sequences, int64_t n_kv_heads, int64_t head_dim,
                                   ra_dtype dtype)
{
    ra_error_reset();
    return ra_kv_pool_create_grouped(out, n_pages, page_size, max_sequences, n_kv_heads,
                                     head_dim, dtype, 0);
}

ra_status ra_kv_pool_create_grouped(ra_kv_pool **out, int64_t n_pages, int64_t page_size,
                                    int64_t max_sequences, int64_t n_kv_heads, int64_t head_dim,
                                    ra_dtype dtype, int64_t group)
{
    if (!out) return ra_fail(RA_ERR_NULL, "out is NULL");
    *out = NULL;
    if (!ra_dtype_is_cache8(dtype)) RA_TRY(ra_check_tensor_dtype(dtype, "dtype"));
    static const char *const names[5] = {"n_pages", "page_size", "n_kv_heads", "head_dim",
                                         "max_sequences"};
    int64_t dims[5] = {n_pages, page_size, n_kv_heads, head_dim, max_sequences}, n, unused;
    RA_TRY(ra_count_named(dims, names, 4, &n));
    RA_TRY(ra_count_named(dims + 4, names + 4, 1, &unused));
    if (n_pages > INT32_MAX || max_sequences > INT32_MAX)
        return ra_fail(RA_ERR_OVERFLOW, "%s %lld: at most INT32_MAX",
                       n_pages > INT32_MAX ? "n_pages" : "max_sequences",
                       (long long)(n_pages > INT32_MAX ? n_pages : max_sequences));
    if (head_dim % 2) return ra_fail(RA_ERR_HEAD_DIM, "head_dim %lld is odd", (long long)head_dim);
    if (!group) group = group_pages(page_size);
    ra_kv_pool *p = ra_calloc(1, sizeof *p);
    if (!p) return ra_fail(RA_ERR_NOMEM, "allocating the KV pool");
    const size_t bytes = (size_t)n * ra_dtype_size(dtype);
    const int64_t n_scales = dtype == RA_I8 ? n / head_dim : n_kv_heads;
    p->k = ra_alloc(bytes);
    p->v = p->k ? ra_alloc(bytes) : NULL;
    p->refs = ra_calloc((size_t)n_pages, sizeof *p->refs);
    p->free_pages = ra_alloc((size_t)n_pages * sizeof *p->free_pages);
    p->free_at = ra_alloc((size_t)n_pages * sizeof *p->free_at);
    const int64_t n_groups = (n_pages + group - 1) / group;
    p->group_free = ra_alloc((size_t)n_groups * sizeof *p->group_free);
    p->free_groups = ra_alloc((size_t)n_groups * sizeof *p->free_groups);
    p->free_group_at = ra_alloc((size_t)n_groups * sizeof *p->free_group_at);
    p->seqs = ra_calloc((size_t)max_sequences, sizeof *p->seqs);
    if (ra_dtype_is_cache8(dtype)) {
        p->k_scale = ra_alloc((size_t)n_scales * sizeof(float));
        p->v_scale = p->k_scale ? ra_alloc((size_t)n_scales * sizeof(float)) : NULL;
    }
    if (!p->v || !p->refs || !p->free_pages || !p->free_at || !p->group_free ||
        !p->free_groups || !p->free_group_at || !p->seqs ||
        (ra_dtype_is_cache8(dtype) && !p->v_scale)) {
        ra_kv_pool_destroy(p);
        return ra_fail(RA_ERR_NOMEM, "allocating 2 x %zu bytes of pages (and their tables)",
                       bytes);
    }
    for (int64_t i = 0; ra_dtype_is_cache8(dtype) && i < n_scales; i++)
        p->k_scale[i] = p->v_scale[i] = 1.0f;
    /* every page free; the stack pops groups 0, 1, 2, ... first */
    for (int64_t i = 0; i < n_pages; i++) p->free_pages[i] = p->free_at[i] = (int32_t)i;
    for (int64_t i = 0; i < n_groups; i++) {
        p->group_free[i] = (int32_t)(n_pages - i * group < group ? n_pages - i * group : group);
        p->free_groups[i] = (int32_t)(n_groups - 1 - i);
        p->free_group_at[n_groups - 1 - i] = (int32_t)i;
    }
    p->n_free = n_pages;
    p->n_free_groups = n_groups;
    p->group = group;
    p->n_pages = n_pages;
    p->page_size = page_size;
    p->n_kv_heads = n_kv_heads;
    p->head_dim = head_dim;
    p->max_sequences = max_sequences;
    p->dtype = dtype;
    *out = p;
    return RA_OK;
}

RA_API void ra_kv_pool_destroy(ra_kv_pool *pool)
{
    if (!pool) return;
    for (int64_t i = 0; pool->seqs && i < pool->max_sequences; i++) ra_free(pool->seqs[i].table);
    ra_free(pool->seqs);
    ra_free(pool->k);
    ra_free(pool->v);
    ra_free(pool->k_scale);
    ra_free(pool->v_scale);
    ra_free(pool->refs);
    ra_free(pool->free_pages);
    ra_free(pool->free_at);
    ra_free(pool->group_free);
    ra_free(pool->free_groups);
    ra_free(pool->free_group_at);
    ra_free(pool);
}

ra_kv_sequence *ra_kv_pool_sequence(const ra_kv_pool *pool, int64_t id, const char *what)
{
    const int64_t slot = id & 0xffffffff;
    ra_kv_sequence *s = id >= 0 && slot < pool->max_sequences ? &pool->seqs[slot] : NULL;
    if (s && s->in_use && ra_kv_pool_id(slot, s->generation) == id) return s;
    if (s && id >> 32 < s->generation) /* generations grow by one at each free */
        ra_fail(RA_ERR_ARGUMENT, "%s %lld: a sequence of the pool that was freed (an id is "
                "never reused: its slot %lld now holds %s)", what, (long long)id,
                (long long)slot, s->in_use ? "another sequence" : "none");
    else
        ra_fail(RA_ERR_ARGUMENT, "%s %lld: not a sequence of the pool (ids from "
                "ra_kv_pool_add_sequence or ra_kv_pool_fork, not freed)", what, (long long)id);
    return NULL;
}

/* The lowest slot not in use, or -1 (RA_ERR_CACHE_FULL set). */
static int64_t free_id(const ra_kv_pool *pool)
{
    for (int64_t i = 0; i < pool->max_sequences; i++)
        if (!pool->seqs[i].in_use) return i;
    ra_fail(RA_ERR_CACHE_FULL, "the pool holds its max_sequences %lld sequences: free one "
            "first", (long long)pool->max_sequences);
    return -1;
}

/* Makes s's table hold at least n entries (its entries kept): RA_ERR_NOMEM
 * leaves it as it was. */
static ra_status table_reserve(ra_kv_sequence *s, int64_t n)
{
    if (n <= s->table_size) return RA_OK;
    int64_t size = s->table_size * 2 > n ? s->table_size * 2 : n < 8 ? 8 : n;
    int32_t *t = ra_alloc((size_t)size * sizeof *t);
    if (!t) return ra_fail(RA_ERR_NOMEM, "allocating a block table of %lld pages",
                           (long long)size);
    if (s->n_table) memcpy(t, s->table, (size_t)s->n_table * sizeof *t);
    ra_free(s->table);
    s->table = t;
    s->table_size = size;
    return RA_OK;
}

RA_API ra_status ra_kv_pool_add_sequence(ra_kv_pool *pool, int64_t window, int64_t *id)
{
    ra_error_reset();
    if (!pool || !id) return ra_fail(RA_ERR_NULL, "%s is NULL", !pool ? "pool" : "id");
    if (window < 0)
        return ra_fail(RA_ERR_SIZE, "window %lld: must be >= 0 (0: keep every token)",
                       (long long)window);
    const int64_t i = free_id(pool);
    if (i < 0) return RA_ERR_CACHE_FULL;
    ra_kv_sequence *s = &pool->seqs[i];
    s->in_use = 1;
    s->length = s->first_page = s->n_table = 0;
    s->window = window;
    *id = ra_kv_pool_id(i, s->generation);
    return RA_OK;
}

RA_API ra_status ra_kv_pool_fork(ra_kv_pool *pool, int64_t parent, int64_t *id)
{
    ra_error_reset();
    if (!pool || !id) return ra_fail(RA_ERR_NULL, "%s is NULL", !pool ? "pool" : "id");
    const ra_kv_sequence *from = ra_kv_pool_sequence(pool, parent, "parent");
    if (!from) return RA_ERR_ARGUMENT;
    const int64_t i = free_id(pool);
    if (i < 0) return RA_ERR_CACHE_FULL;
    ra_kv_sequence *s = &pool->seqs[i];
    s->n_table = 0;
    RA_TRY(table_reserve(s, from->n_table));
    if (from->n_table) memcpy(s->table, from->table, (size_t)from->n_table * sizeof *s->table);
    for (int64_t t = 0; t < from->n_table; t++) pool->refs[from->table[t]]++;
    s->n_table = from->n_table;
    s->first_page = from->first_page;
    s->length = from->length;
    s->window = from->window;
    s->in_use = 1;
    *id = ra_kv_pool_id(i, s->generation);
    return RA_OK;
}

/* Pages of group i (the last: those left). */
static int64_t group_size(const ra_kv_pool *pool, int64_t i)
{
    const int64_t left = pool->n_pages - i * pool->group;
    return left < pool->group ? left : pool->group;
}

/* Takes free page p out of the free pages (and its group out of the
 * wholly free ones), held by one sequence. */
static void take_page(ra_kv_pool *pool, int32_t p)
{
    const int32_t last = pool->free_pages[--pool->n_free], at = pool->free_at[p];
    pool->free_pages[at] = last;
    pool->free_at[last] = at;
    const int64_t i = p / pool->group;
    if (pool->group_free[i]-- == group_size(pool, i)) {
        const int32_t top = pool->free_groups[--pool->n_free_groups], gat = pool->free_group_at[i];
        pool->free_groups[gat] = top;
        pool->free_group_at[top] = gat;
    }
    pool->refs[p] = 1;
}

/* Gives page p, which no sequence holds any more, back. */
static void give_page(ra_kv_pool *pool, int32_t p)
{
    pool->free_at[p] = (int32_t)pool->n_free;
    pool->free_pages[pool->n_free++] = p;
    const int64_t i = p / pool->group;
    if (++pool->group_free[i] == group_size(pool, i)) {
        pool->free_group_at[i] = (int32_t)pool->n_free_groups;
        pool->free_groups[pool->n_free_groups++] = (int32_t)i;
    }
}

/* The free page to follow page `after` (-1: none) of a sequence: the next
 * of its group if free, else the first of a wholly free group, else the
 * last one given back (n_free >= 1). */
static int32_t next_free_page(const ra_kv_pool *pool, int64_t after)
{
    const int64_t next = after + 1;
    if (after >= 0 && next % pool->group && next < pool->n_pages && pool->refs[next] == 0)
        return (int32_t)next;
    if (pool->n_free_groups)
        return (int32_t)(pool->free_groups[pool->n_free_groups - 1] * pool->group);
    return pool->free_pages[pool->n_free - 1];
}

/* Drops s's hold on its first n table entries' pages (a page no sequence
 * holds goes back to the free pages) and removes them from the table. */
static void release_pages(ra_kv_pool *pool, ra_kv_sequence *s, int64_t n)
{
    for (int64_t t = 0; t < n; t++)
        if (--pool->refs[s->table[t]] == 0) give_page(pool, s->table[t]);
    if (n) memmove(s->table, s->table + n, (size_t)(s->n_table - n) * sizeof *s->table);
    s->n_table -= n;
    s->first_page += n;
    if (pool->n_free == pool->n_pages) pool->nan_codes = 0; /* no code is read again */
}

RA_API ra_status ra_kv_pool_free_sequence(ra_kv_pool *pool, int64_t id)
{
    ra_error_reset();
    if (!pool) return ra_fail(RA_ERR_NULL, "pool is NULL");
    ra_kv_sequence *s = ra_kv_pool_sequence(pool, id, "id");
    if (!s) return RA_ERR_ARGUMENT;
    release_pages(pool, s, s->n_table);
    s->in_use = 0;
    s->generation = (s->generation + 1) & INT32_MAX; /* the id is never reused */
    return RA_OK;
}

RA_API int64_t ra_kv_pool_length(const ra_kv_pool *pool, int64_t id)
{
    ra_error_reset();
    if (!pool) {
        ra_fail(RA_ERR_NULL, "pool is NULL");
        return -1;
    }
    const ra_kv_sequence *s = ra_kv_pool_sequence(pool, id, "id");
    return s ? s->length : -1;
}

RA_API int64_t ra_kv_pool_free_pages(const ra_kv_pool *pool)
{
    ra_error_reset();
    if (!pool) {
        ra_fail(RA_ERR_NULL, "pool is NULL");
        return -1;
    }
    return pool->n_free;
}

RA_API ra_status ra_kv_pool_set_scales(ra_kv_pool *pool, const float *k_scales,
                                       const float *v_scales, int64_t n_scales)
{
    ra_error_reset();
    if (!pool || !k_scales || !v_scales)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !pool ? "pool" : !k_scales ? "k_scales"
                                                                             : "v_scales");
    if (pool->dtype != RA_F8E4M3)
        return ra_fail(RA_ERR_DTYPE, "ra_kv_pool_set_scales: the pool is not RA_F8E4M3 (an "
                       "int8 pool's scales are each row's own, set as it is appended)");
    if (n_scales != 1 && n_scales != pool->n_kv_heads)
        return ra_fail(RA_ERR_ARGUMENT, "n_scales %lld: must be 1 or the pool's %lld kv heads",
                       (long long)n_scales, (long long)pool->n_kv_heads);
    if (pool->n_free != pool->n_pages)
        return ra_fail(RA_ERR_ARGUMENT, "the pool holds %lld pages of tokens quantized with "
                       "the scales set before: free every sequence's tokens first",
                       (long long)(pool->n_pages - pool->n_free));
    RA_TRY(ra_e4m3_scales_check(k_scales, v_scales, n_scales));
    for (int64_t g = 0; g < pool->n_kv_heads; g++) {
        pool->k_scale[g] = k_scales[n_scales == 1 ? 0 : g];
        pool->v_scale[g] = v_scales[n_scales == 1 ? 0 : g];
    }
    return RA_OK;
}

/* ---- append ------------------------------------------------------------- */

typedef struct pool_append_job {
    ra_kv_pool *pool;
    const int64_t *ids;
    const ra_rope *rope;
    const ra_tensor *q, *k, *v;
    const ra_positions *positions;
    const int64_t *n_new;
    int64_t blocks_per_sequence;
    float *stage;             /* per thread: ra_kv_stage_floats, or NULL */
    int64_t stage_floats;
} pool_append_job;

/* Stores the rows of src (f32, [1, len, Hkv, D]) as the tokens at
 * positions at, at + 1, ... of sequence s, in K (which 0) or V, converted
 * to the pool's dtype (8-bit: quantized as a cache's). */
static void store_rows(ra_kv_pool *pool, const ra_kv_sequence *s, int which,
                       const ra_tensor *src, int64_t at)
{
    const size_t esize = ra_dtype_size(pool->dtype);
    const int64_t d = pool->head_dim;
    char *base = which ? pool->v : pool->k;
    float *scales = which ? pool->v_scale : pool->k_scale;
    for (int64_t t = 0; t < src->shape[1]; t++)
        for (int64_t g = 0; g < pool->n_kv_heads; g++) {
            const int64_t row = ra_kv_pool_row(pool, s, g, at + t);
            const float *from = ra_row(src, 0, t, g);
            void *to = base + (size_t)(row * d) * esize;
            if (pool->dtype == RA_F32)
                memcpy(to, from, (size_t)d * sizeof(float));
            else if (pool->dtype == RA_I8)
                scales[row] = ra_quantize_i8(to, from, d);
            else if (pool->dtype == RA_F8E4M3) {
                if (ra_quantize_e4m3(to, from, scales[g], d))
                    __atomic_store_n(&pool->nan_codes, 1, __ATOMIC_RELAXED);
            }
            else
                ra_convert(to, pool->dtype, from, RA_F32, d);
        }
}

static void pool_append_task(void *arg, int64_t task, int thread)
{
    const pool_append_job *job = arg;
    const int64_t i = task / job->blocks_per_sequence, seq = job->k->shape[1];
    const int64_t s0 = task % job->blocks_per_sequence * RA_APPEND_BLOCK;
    const int64_t n = job->n_new ? job->n_new[i] : seq;
    if (s0 >= n) return;
    const int64_t len = n - s0 < RA_APPEND_BLOCK ? n - s0 : RA_APPEND_BLOCK;
    ra_positions pos = ra_positions_of_rows(job->positions, i, s0, seq);
    if (job->rope && job->q) { /* else stored as given */
        ra_tensor q = ra_kv_rows(job->q, i, s0, len);
        ra_rope_apply(NULL, job->rope, &q, &q, &pos, RA_FORWARD); /* checked by the caller */
    }
    float *stage = job->stage ? job->stage + thread * job->stage_floats : NULL;
    const ra_kv_sequence *s = ra_kv_pool_seq(job->pool, job->ids[i]);
    ra_tensor k = ra_kv_stage_rows(job->k, i, s0, len, job->rope, &pos, stage);
    store_rows(job->pool, s, 0, &k, s->length + s0);
    ra_tensor v = ra_kv_stage_rows(job->v, i, s0, len, NULL, NULL, stage);
    store_rows(job->pool, s, 1, &v, s->length + s0);
}

/* The table entries of s that an append of n >= 1 tokens releases: a
 * window sequence's pages wholly before the first key its first new token
 * sees (position length - W + 1). */
static int64_t pages_released(const ra_kv_pool *pool, const ra_kv_sequence *s, int64_t n)
{
    if (!s->window || n == 0) return 0;
    const int64_t keep = s->length - s->window + 1; /* the first position kept */
    const int64_t before = keep > 0 ? keep / pool->page_size - s->first_page : 0;
    return before > 0 ? before : 0;
}

/* Whether an append of n >= 1 tokens to s first copies its last page: a
 * partial page that another sequence holds too. */
static int copies_last_page(const ra_kv_pool *pool, const ra_kv_sequence *s, int64_t n)
{
    return n > 0 && s->length % pool->page_size && pool->refs[s->table[s->n_table - 1]] > 1;
}

/* Checks that the pool has the pages the append needs and that every
 * table can hold its pages (growing those that cannot: no change the
 * caller can see).  The count is exact: it plays the commit's releases
 * and copies on the pages' holds (a page returns to the stack when its
 * last holder releases it; a shared last page is copied by all but its
 * last holder), then takes them back. */
static ra_status plan_pages(ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                            const int64_t *n_new, int64_t seq)
{
    int64_t needed = 0, freed = 0, most = 0, most_needed = -1;
    for (int64_t i = 0; i < n_ids; i++) {
        ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[i]);
        const int64_t n = n_new ? n_new[i] : seq;
        const int64_t fresh = ra_kv_pool_pages_of(pool, s->length + n) -
                              ra_kv_pool_pages_of(pool, s->length);
        RA_TRY(table_reserve(s, s->n_table - pages_released(pool, s, n) + fresh));
    }
    for (int64_t i = 0; i < n_ids; i++) {
        const ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[i]);
        const int64_t r = pages_released(pool, s, n_new ? n_new[i] : seq);
        for (int64_t t = 0; t < r; t++) freed += --pool->refs[s->table[t]] == 0;
    }
    for (int64_t i = 0; i < n_ids; i++) {
        ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[i]);
        const int64_t n = n_new ? n_new[i] : seq;
        s->copy_planned = copies_last_page(pool, s, n);
        if (s->copy_planned) pool->refs[s->table[s->n_table - 1]]--;
        const int64_t need = ra_kv_pool_pages_of(pool, s->length + n) -
                             ra_kv_pool_pages_of(pool, s->length) + s->copy_planned;
        needed += need;
        if (need > most_needed) most = i, most_needed = need;
    }
    for (int64_t i = 0; i < n_ids; i++) { /* the holds back */
        const ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[i]);
        const int64_t r = pages_released(pool, s, n_new ? n_new[i] : seq);
        for (int64_t t = 0; t < r; t++) pool->refs[s->table[t]]++;
        if (s->copy_planned) pool->refs[s->table[s->n_table - 1]]++;
    }
    if (needed > pool->n_free + freed)
        return ra_fail(RA_ERR_CACHE_FULL, "the KV pool: the append needs %lld new pages "
                       "(sequence %lld, ids[%lld]: %lld of them), %lld are free%s",
                       (long long)needed, (long long)ids[most], (long long)most,
                       (long long)most_needed, (long long)(pool->n_free + freed),
                       freed ? " (counting those its windows release)" : "");
    return RA_OK;
}

/* Gives s its own copy of its last page (K, V and RA_I8's scales), which
 * other sequences hold too: each head's rows of the page. */
static void copy_last_page(ra_kv_pool *pool, ra_kv_sequence *s)
{
    const int32_t from = s->table[s->n_table - 1];
    const int32_t to = next_free_page(pool, s->n_table > 1 ? s->table[s->n_table - 2] : -1);
    const int64_t ps = pool->page_size, d = pool->head_dim;
    const size_t row_bytes = (size_t)d * ra_dtype_size(pool->dtype);
    take_page(pool, to);
    for (int64_t g = 0; g < pool->n_kv_heads; g++) {
        const int64_t a = ra_kv_page_row(from, g, ps, pool->n_kv_heads, pool->group,
                                         pool->n_pages);
        const int64_t b = ra_kv_page_row(to, g, ps, pool->n_kv_heads, pool->group,
                                         pool->n_pages);
        memcpy((char *)pool->k + b * row_bytes, (char *)pool->k + a * row_bytes, ps * row_bytes);
        memcpy((char *)pool->v + b * row_bytes, (char *)pool->v + a * row_bytes, ps * row_bytes);
        if (pool->dtype == RA_I8) {
            memcpy(pool->k_scale + b, pool->k_scale + a, (size_t)ps * sizeof(float));
            memcpy(pool->v_scale + b, pool->v_scale + a, (size_t)ps * sizeof(float));
        }
    }
    pool->refs[from]--;
    s->table[s->n_table - 1] = to;
}

static ra_status check_ids(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                           int distinct)
{
    if (n_ids < 1) return ra_fail(RA_ERR_SIZE, "n_ids %lld: must be >= 1", (long long)n_ids);
    for (int64_t i = 0; i < n_ids; i++) {
        char what[32];
        snprintf(what, sizeof what, "ids[%lld]", (long long)i);
        if (!ra_kv_pool_sequence(pool, ids[i], what)) return RA_ERR_ARGUMENT;
        for (int64_t j = 0; distinct && j < i; j++)
            if (ids[j] == ids[i])
                return ra_fail(RA_ERR_ARGUMENT, "ids[%lld] and ids[%lld] are both sequence %lld "
                               "(an append takes each sequence once)", (long long)j,
                               (long long)i, (long long)ids[i]);
    }
    return RA_OK;
}

ra_status ra_kv_pool_check_ids(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids)
{
    return check_ids(pool, ids, n_ids, 0);
}

RA_API ra_status ra_kv_pool_append(ra_context *ctx, ra_kv_pool *pool, const ra_rope *rope,
                                   const int64_t *ids, int64_t n_ids, const ra_tensor *q,
                                   const ra_tensor *k, const ra_tensor *v,
                                   const ra_positions *positions, const int64_t *n_new)
{
    ra_error_reset();
    if (!pool || !ids) return ra_fail(RA_ERR_NULL, "%s is NULL", !pool ? "pool" : "ids");
    RA_TRY(check_ids(pool, ids, n_ids, 1));
    RA_TRY(ra_kv_append_check(n_ids, pool->n_kv_heads, pool->head_dim, rope, q, k, v, n_new));
    const int64_t seq = k->shape[1];
    for (int64_t i = 0; i < n_ids; i++) {
        const int64_t n = n_new ? n_new[i] : seq;
        if (n > RA_MAX_POSITION - ra_kv_pool_seq(pool, ids[i])->length)
            return ra_fail(RA_ERR_CACHE_FULL, "sequence %lld: %lld tokens + %lld new: more "
                           "than the %lld a sequence may hold", (long long)ids[i],
                           (long long)ra_kv_pool_seq(pool, ids[i])->length, (long long)n,
                           (long long)RA_MAX_POSITION);
    }
    /* Scratch, from ctx's first workspace and only when needed (the paged
     * layer holds that one, and appends f32 at positions it gives): each
     * row's length [n_ids], where positions NULL continue from, then each
     * thread's staging of 16-bit k and v. */
    const int64_t stage = ra_kv_stage_floats(k, v), head = ra_round_up(n_ids, 8);
    ra_scratch scratch = {NULL, 0};
    if (stage || (rope && !positions))
        RA_TRY(ra_scratch_acquire(ctx, (size_t)(2 * head + stage * ra_parallel_threads(ctx)) *
                                           sizeof(float), &scratch));
    int64_t *lengths = scratch.data;
    for (int64_t i = 0; lengths && i < n_ids; i++)
        lengths[i] = ra_kv_pool_seq(pool, ids[i])->length;
    ra_positions pos;
    ra_status status = ra_kv_append_positions(&pos, positions, rope, lengths, n_ids, seq, n_new);
    if (status == RA_OK) status = plan_pages(pool, ids, n_ids, n_new, seq);
    if (status != RA_OK) {
        ra_scratch_release(&scratch);
        return status;
    }
    /* commit: the windows' releases, then each sequence's copy and new pages */
    for (int64_t i = 0; i < n_ids; i++) {
        ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[i]);
        release_pages(pool, s, pages_released(pool, s, n_new ? n_new[i] : seq));
    }
    for (int64_t i = 0; i < n_ids; i++) {
        ra_kv_sequence *s = ra_kv_pool_seq(pool, ids[i]);
        const int64_t n = n_new ? n_new[i] : seq;
        if (copies_last_page(pool, s, n)) copy_last_page(pool, s);
        for (int64_t t = ra_kv_pool_pages_of(pool, s->length); t < ra_kv_pool_pages_of(pool, s->length + n); t++) {
            const int32_t page = next_free_page(pool, s->n_table ? s->table[s->n_table - 1] : -1);
            take_page(pool, page);
            s->table[s->n_table++] = page;
        }
    }
    pool_append_job job = {pool, ids, rope, q, k, v, &pos, n_new,
                           (seq + RA_APPEND_BLOCK - 1) / RA_APPEND_BLOCK,
                           stage ? (float *)scratch.data + 2 * head : NULL, stage};
    ra_parallel_for(n_ids * seq <= RA_APPEND_BLOCK ? NULL : ctx, n_ids * job.blocks_per_sequence,
                    pool_append_task, &job);
    for (int64_t i = 0; i < n_ids; i++)
        ra_kv_pool_seq(pool, ids[i])->length += n_new ? n_new[i] : seq;
    ra_scratch_release(&scratch);
    return RA_OK;
}
