/*
 * kvcache_common.h — what the KV-cache tests share (test_kvcache.c,
 * test_kvcache8.c, test_kvpool.c): appending rows at RoPE position 0 (the
 * identity, so a cache holds k and v themselves), the reference rows of a
 * sequence (computed once for all SIMD paths), and the mask cases of
 * decode.  Include after harness.h.
 */
#ifndef RA_TEST_KVCACHE_COMMON_H
#define RA_TEST_KVCACHE_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* Appends n_new[b] tokens of each sequence, rows from[b] .. of the
 * [B, S, Hkv, D] arrays k and v, at RoPE position 0 (the identity: the cache
 * then holds k and v themselves).  T: the most any sequence takes. */
static ra_status append_rows(ra_kv_cache *cache, const float *k, const float *v, int64_t B,
                             int64_t S, int64_t hkv, int64_t d, const int64_t *from,
                             const int64_t *n_new, int64_t T)
{
    float *kt = calloc((size_t)(B * T * hkv * d), 4), *vt = calloc((size_t)(B * T * hkv * d), 4);
    int64_t *zeros = calloc((size_t)(B * T), 8);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < n_new[b]; t++) {
            memcpy(kt + (b * T + t) * hkv * d, k + (b * S + from[b] + t) * hkv * d, 4 * hkv * d);
            memcpy(vt + (b * T + t) * hkv * d, v + (b * S + from[b] + t) * hkv * d, 4 * hkv * d);
        }
    ra_rope_config rc = ra_rope_config_default(d);
    rc.table_size = 1; /* position 0 only */
    ra_rope *rope;
    ra_status st = ra_rope_create(&rope, &rc);
    ra_tensor tk = ra_tensor_4d(kt, RA_F32, B, T, hkv, d), tv = ra_tensor_4d(vt, RA_F32, B, T, hkv, d);
    ra_positions at = ra_positions_start(0);
    at.ids = zeros;
    if (st == RA_OK) st = ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &at, n_new);
    ra_rope_destroy(rope);
    free(kt); free(vt); free(zeros);
    return st;
}

/* The reference path is scalar code that no kernel choice changes, and
 * ra_test_each_isa runs a test once per SIMD path: reference_last_rows keeps
 * each result, keyed by a 64-bit FNV-1a hash of its inputs (values, sizes
 * and every option that changes the result), and returns it again for the
 * same inputs. */
typedef struct reference_memo {
    struct reference_memo *next;
    uint64_t key;
    size_t bytes;
    float rows[]; /* [len, H, D] */
} reference_memo;

static reference_memo *reference_memos;

static void reference_memos_free(void)
{
    while (reference_memos) {
        reference_memo *next = reference_memos->next;
        free(reference_memos);
        reference_memos = next;
    }
}

static uint64_t memo_hash(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The reference rows of one sequence: ra_attention on the reference path
 * over its first len tokens, with opts' masks (NULL: none); rows len -
 * rows .. len - 1 of it (the rows a decode compares; rows = len: all), at
 * their places in out (the rows before them are not written).  The last
 * rows alone are q's last rows over every key, the diagonal aligned
 * bottom-right (ra_attention with Sq < Sk); with chunks (which ra_attention
 * takes with Sq = Sk only) the sequence from the chunk that holds the first
 * of them, whose keys none of them sees before.  Each row is the whole
 * computation's, at a fraction of its cost (a decode of 1 to 5 rows
 * compares rows of sequences of up to 2100 tokens).
 *   q, out: [len, H, D]   k, v: [len, Hkv, D] f32 */
static void reference_last_rows(float *out, const float *q, const float *k, const float *v,
                                int64_t len, int64_t rows, int64_t h, int64_t hkv, int64_t d,
                                const ra_attention_options *opts)
{
    ra_attention_options o = opts ? *opts : ra_attention_options_init();
    o.path = RA_PATH_REFERENCE;
    int64_t from = len - rows, keys_from = 0; /* the first row computed, and key */
    if (o.padding_mask || o.cu_seqlens) from = 0;
    if (o.chunk > 0) from = keys_from = from / o.chunk * o.chunk;
    const size_t bytes = 4 * (size_t)((len - from) * h * d), kv_bytes = 4 * (size_t)(len * hkv * d);
    const int64_t sizes[10] = {len, from, h, hkv, d, o.window, o.chunk, o.sinks != NULL,
                               o.padding_mask != NULL, o.n_documents};
    uint64_t key = memo_hash(0xcbf29ce484222325ull, sizes, sizeof sizes);
    key = memo_hash(key, &o.softcap, sizeof o.softcap);
    key = memo_hash(key, &o.scale, sizeof o.scale);
    key = memo_hash(key, &o.dropout, sizeof o.dropout);
    key = memo_hash(key, &o.seed, sizeof o.seed);
    if (o.sinks) key = memo_hash(key, o.sinks, 4 * (size_t)h);
    if (o.padding_mask) key = memo_hash(key, o.padding_mask, (size_t)len);
    if (o.cu_seqlens)
        key = memo_hash(key, o.cu_seqlens, (size_t)(o.n_documents + 1) * sizeof(int64_t));
    key = memo_hash(memo_hash(memo_hash(key, q + from * h * d, bytes), k, kv_bytes), v, kv_bytes);
    out += from * h * d;
    for (const reference_memo *m = reference_memos; m; m = m->next)
        if (m->key == key && m->bytes == bytes) {
            memcpy(out, m->rows, bytes);
            return;
        }
    ra_tensor tq = ra_tensor_4d((void *)(q + from * h * d), RA_F32, 1, len - from, h, d);
    ra_tensor tk = ra_tensor_4d((void *)(k + keys_from * hkv * d), RA_F32, 1, len - keys_from, hkv, d);
    ra_tensor tv = ra_tensor_4d((void *)(v + keys_from * hkv * d), RA_F32, 1, len - keys_from, hkv, d);
    ra_tensor to = ra_tensor_4d(out, RA_F32, 1, len - from, h, d);
    CHECK(ra_attention(NULL, &to, &tq, &tk, &tv, &o) == RA_OK, "reference: %s", ra_last_error());
    reference_memo *m = malloc(sizeof *m + bytes);
    if (!m) return; /* computed again next time */
    if (!reference_memos) atexit(reference_memos_free);
    m->next = reference_memos;
    m->key = key;
    m->bytes = bytes;
    memcpy(m->rows, out, bytes);
    reference_memos = m;
}

/* The decode tests' inputs, from seed .. seed + 3: q [B, S, H, D] times 3
 * (logits of a few units), k and v [B, S, Hkv, D] in [-1, 1), sinks [H]
 * in [-1, 3). */
static inline void decode_inputs(float *q, float *k, float *v, float *sinks, int64_t B,
                                 int64_t S, int64_t H, int64_t hkv, int64_t d, uint64_t seed)
{
    ra_test_fill(q, (size_t)(B * S * H * d), seed);
    ra_test_fill(k, (size_t)(B * S * hkv * d), seed + 1);
    ra_test_fill(v, (size_t)(B * S * hkv * d), seed + 2);
    ra_test_fill(sinks, (size_t)H, seed + 3);
    for (int64_t i = 0; i < B * S * H * d; i++) q[i] *= 3.0f;
    for (int64_t h = 0; h < H; h++) sinks[h] = 2.0f * sinks[h] + 1.0f;
}

/* Each sequence's last nq[b] tokens' queries of q [B, S, H, D] (sequence
 * b holding len[b]) into qt [B, T, H, D], rows past nq[b] repeating its
 * first. */
static inline void last_queries(float *qt, const float *q, int64_t B, int64_t S, int64_t T,
                                int64_t H, int64_t d, const int64_t *len, const int64_t *nq)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            memcpy(qt + (b * T + t) * H * d,
                   q + (b * S + len[b] - nq[b] + (t < nq[b] ? t : 0)) * H * d, 4 * H * d);
}

/* ra_attention_decode of the queries qt [B, T, H, D] (n_query nq) into
 * out, zeroed first, on the calling thread, then on ctxs (2 and 3
 * threads, say) into again: the first call's status, and in *changed how
 * many of the others failed or changed bits. */
static inline ra_status decode_on_threads(ra_context *const ctxs[2], const ra_kv_cache *cache,
                                          float *out, float *again, float *qt, int64_t B,
                                          int64_t T, int64_t H, int64_t d, const int64_t *nq,
                                          const ra_attention_options *o, int *changed)
{
    const ra_tensor tq = ra_tensor_4d(qt, RA_F32, B, T, H, d);
    const ra_tensor to = ra_tensor_4d(out, RA_F32, B, T, H, d);
    const ra_tensor ta = ra_tensor_4d(again, RA_F32, B, T, H, d);
    const size_t bytes = 4 * (size_t)(B * T * H * d);
    memset(out, 0, bytes);
    const ra_status status = ra_attention_decode(NULL, cache, &to, &tq, nq, o);
    *changed = 0;
    for (int c = 0; c < 2 && status == RA_OK; c++) {
        memset(again, 0, bytes);
        *changed += ra_attention_decode(ctxs[c], cache, &ta, &tq, nq, o) != RA_OK ||
                    memcmp(out, again, bytes) != 0;
    }
    return status;
}

typedef struct mask_case {
    int64_t window, chunk;
    double softcap, scale;
    int sinks; /* nonzero: one sink logit per head, in [-1, 3) */
} mask_case;

/* Every kind of mask case, for the decode tests: none, windows 1 to 5000,
 * a chunk, soft-caps, a scale, sinks and their mixes. */
static const mask_case every_mask[8] = {
    {0, 0, 0, 0, 0},   {1, 0, 0, 0, 1},     {5000, 0, 2.0, 0, 0}, {100, 0, 0, 0, 0},
    {0, 7, 0, 0, 0},   {300, 0, 3.0, 0, 1}, {700, 500, 0, 0, 1}, {0, 64, 1.5, 0.2, 1}};

static ra_attention_options mask_options(const mask_case *mc, const float *sinks)
{
    ra_attention_options o = ra_attention_options_init();
    o.window = mc->window;
    o.chunk = mc->chunk;
    o.softcap = mc->softcap;
    o.scale = mc->scale;
    o.sinks = mc->sinks ? sinks : NULL;
    return o;
}

#endif
