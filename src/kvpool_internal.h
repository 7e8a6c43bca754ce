/*
 * kvpool_internal.h — the paged KV pool's insides (internal): pages of
 * page_size tokens from one pool, a block table per sequence.
 *
 *   K, V: [n_pages / G groups, Hkv, G, page_size, D] in the pool's dtype
 *   (G = group pages; the last group holds the n_pages % G left, if any):
 *   a group holds each kv head's rows of its pages as one sequential run,
 *   page after page (ra_kv_page_row)
 *   RA_I8 scales: the same without D, for K and for V (a row's beside its
 *   codes, as in a cache); RA_F8E4M3: [Hkv] for K and for V
 *
 * A sequence's next page is the next page of its last page's group when
 * that one is free, else the first page of a wholly free group, else any
 * free page: so a sequence's pages, appended in whatever rounds, lie in
 * runs of G pages, and a decode reads each head's rows of G pages as one
 * run (decode_paged_task).
 */
#ifndef RA_KVPOOL_INTERNAL_H
#define RA_KVPOOL_INTERNAL_H

#include "kvcache_internal.h"

/* One sequence: its tokens at positions 0 .. length - 1, of which those
 * from first_page * page_size on are held (a window sequence releases
 * whole pages that no later query sees).  table[i] is the page of logical
 * page first_page + i, i < n_table. */
typedef struct ra_kv_sequence {
    int in_use;
    int32_t generation;     /* sequences the slot held before (mod 2^31): its id's
                               high half (ra_kv_pool_id) */
    int copy_planned;       /* ra_kv_pool_append's plan: copies its last page */
    int64_t length, window; /* window 0: every token kept */
    int64_t first_page, n_table, table_size;
    int32_t *table;         /* [table_size], kept for the id's next sequence */
} ra_kv_sequence;

struct ra_kv_pool {
    int64_t n_pages, page_size, n_kv_heads, head_dim, max_sequences;
    int64_t group;            /* G: pages a group */
    ra_dtype dtype;
    void *k, *v;              /* see above */
    float *k_scale, *v_scale; /* see above; else NULL */
    int32_t *refs;            /* [n_pages] the sequences holding each page; 0: free */
    int32_t *free_pages;      /* [n_pages] the n_free free pages, in no order */
    int32_t *free_at;         /* [n_pages] a free page's index in free_pages */
    int64_t n_free;
    /* [ceil(n_pages / G)] each: a group's free pages; the n_free_groups
     * wholly free groups (a stack, next on top); a wholly free group's
     * index in free_groups */
    int32_t *group_free, *free_groups, *free_group_at;
    int64_t n_free_groups;
    ra_kv_sequence *seqs;     /* [max_sequences] */
    /* RA_F8E4M3: 1 once an append has stored a NaN code in any page, until
     * every page is free again (a cache's nan_codes, for the whole pool:
     * forks and page copies hold the same codes); atomic stores */
    int nan_codes;
};

/* A sequence's id: its slot in [0, max_sequences) in the low 32 bits, the
 * slot's generation above them (the first sequence of each slot: the slot
 * itself), so that a freed sequence's id never names a later one. */
static inline int64_t ra_kv_pool_id(int64_t slot, int32_t generation)
{
    return (int64_t)generation << 32 | slot;
}

/* The sequence of an id checked by ra_kv_pool_sequence or
 * ra_kv_pool_check_ids. */
static inline ra_kv_sequence *ra_kv_pool_seq(const ra_kv_pool *pool, int64_t id)
{
    return &pool->seqs[id & 0xffffffff];
}

/* The row index (units of D elements, and of one RA_I8 scale) of kv head
 * g's row of the held token at position p of sequence s. */
static inline int64_t ra_kv_pool_row(const ra_kv_pool *pool, const ra_kv_sequence *s, int64_t g,
                                     int64_t p)
{
    const int64_t page = s->table[p / pool->page_size - s->first_page];
    return ra_kv_page_row(page, g, pool->page_size, pool->n_kv_heads, pool->group,
                          pool->n_pages) + p % pool->page_size;
}

/* ra_kv_pool_create with groups of `group` pages (0: the public one's
 * choice, kvpool.c's group_pages). */
ra_status ra_kv_pool_create_grouped(ra_kv_pool **out, int64_t n_pages, int64_t page_size,
                                    int64_t max_sequences, int64_t n_kv_heads, int64_t head_dim,
                                    ra_dtype dtype, int64_t group);

/* Pages (logical) a sequence of length tokens spans: ceil(length / ps). */
static inline int64_t ra_kv_pool_pages_of(const ra_kv_pool *pool, int64_t length)
{
    return (length + pool->page_size - 1) / pool->page_size;
}

/* The sequence of id, or NULL with RA_ERR_ARGUMENT set (what: the
 * argument's name in the message; a freed sequence's id is named so). */
ra_kv_sequence *ra_kv_pool_sequence(const ra_kv_pool *pool, int64_t id, const char *what);

/* Checks a decode's ids: n_ids >= 1, each a sequence of the pool
 * (repeats allowed: a decode only reads). */
ra_status ra_kv_pool_check_ids(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids);

/* A paged view (kvcache_internal.h) of sequences ids[0 .. n_ids) as
 * they are, with lengths grown by grow[b] (NULL: none; for sizing a
 * decode before the append that grows them): its per-row arrays in
 * arrays [3 n_ids] (lengths, first pages, tables), which must outlive it. */
ra_kv_cache ra_kv_pool_view(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                            const int64_t *grow, int64_t *arrays);

/* RA_ERR_ARGUMENT unless every window sequence's window holds what mask's
 * window or chunk reaches (ids checked). */
ra_status ra_kv_pool_check_reach(const ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                                 const ra_attention_mask *mask);

#endif
