/*
 * test_kvpool.c — the paged KV pool (ra_kv_pool_*) and ra_attention_decode_paged:
 *   - a batch of ragged sequences decodes to the same bits as a contiguous
 *     ra_kv_cache holding the same tokens, for every dtype, page sizes 1 to
 *     64, the masks, 1..3 threads; f32 against the scalar reference;
 *   - fork and copy on write: parent and child diverge, shared pages count
 *     once, freeing gives them back;
 *   - an exhausted pool refuses an append and changes nothing;
 *   - window sequences release the pages they pass and decode as a full
 *     cache with the window mask;
 *   - an fp8 pool's NaN flag: forks and page copies read a stored NaN;
 *   - argument errors.
 * Tokens are appended at RoPE position 0 (the identity), so a pool and a
 * cache hold k and v themselves (kvcache_common.h).
 */
#include <string.h>

#include "harness.h"
#include "kvcache_common.h"
#include "kvpool_internal.h" /* nan_codes */
#include "ropeattn.h"

/* Appends n_new[i] tokens to sequence ids[i], rows from[i] .. of
 * [N, S, Hkv, D] k and v, at RoPE position 0.  T: the most one takes. */
static ra_status pool_append_rows(ra_kv_pool *pool, const int64_t *ids, int64_t n, const float *k,
                                  const float *v, int64_t S, int64_t hkv, int64_t d,
                                  const int64_t *from, const int64_t *n_new, int64_t T)
{
    float *kt = calloc((size_t)(n * T * hkv * d), 4), *vt = calloc((size_t)(n * T * hkv * d), 4);
    int64_t *zeros = calloc((size_t)(n * T), 8);
    for (int64_t b = 0; b < n; b++)
        for (int64_t t = 0; t < n_new[b]; t++) {
            memcpy(kt + (b * T + t) * hkv * d, k + (b * S + from[b] + t) * hkv * d, 4 * hkv * d);
            memcpy(vt + (b * T + t) * hkv * d, v + (b * S + from[b] + t) * hkv * d, 4 * hkv * d);
        }
    ra_rope_config rc = ra_rope_config_default(d);
    rc.table_size = 1;
    ra_rope *rope;
    ra_status st = ra_rope_create(&rope, &rc);
    ra_tensor tk = ra_tensor_4d(kt, RA_F32, n, T, hkv, d), tv = ra_tensor_4d(vt, RA_F32, n, T, hkv, d);
    ra_positions at = ra_positions_start(0);
    at.ids = zeros;
    if (st == RA_OK) st = ra_kv_pool_append(NULL, pool, rope, ids, n, NULL, &tk, &tv, &at, n_new);
    ra_rope_destroy(rope);
    free(kt); free(vt); free(zeros);
    return st;
}

static const ra_dtype dtypes[5] = {RA_F32, RA_F16, RA_BF16, RA_I8, RA_F8E4M3};

/* Five sequences of 1 .. 2100 tokens (2100 crosses two chunks of 1024),
 * appended in ragged rounds to a pool (page sizes 1, 3, 16, 64; the
 * sequences' pages interleaved, a freed sequence between them) and to a
 * contiguous cache; decode with each mask case on 0..3 threads must give
 * the cache's bits.  GQA 2 (rows in runs of 2 and 4 with T = 2), D 10 (a
 * tail past every vector width). */
static void test_matches_contiguous(void)
{
    enum { N = 5, HKV = 2, H = 4, D = 10, T = 2, S = 2100 };
    const int64_t len[N] = {1, 17, 100, 1030, 2100}, n_query[N] = {1, 2, 1, 2, 2};
    float *k = malloc(4 * N * S * HKV * D), *v = malloc(4 * N * S * HKV * D);
    float q[N * T * H * D], o_pool[N * T * H * D], o_cache[N * T * H * D], o_one[N * T * H * D];
    float sinks[H];
    ra_test_fill(k, N * S * HKV * D, 1);
    ra_test_fill(v, N * S * HKV * D, 2);
    ra_test_fill(q, N * T * H * D, 3);
    ra_test_fill(sinks, H, 4);
    static const mask_case masks[] = {
        {0, 0, 0, 0, 0}, {64, 0, 0, 0, 1}, {0, 100, 30.0, 0, 0}, {1100, 0, 0, 0.3, 1}};
    static const int64_t page_sizes[] = {1, 3, 16, 64}, groups[] = {0, 1, 3};
    ra_context *ctx[3] = {NULL, NULL, NULL};
    for (int t = 1; t < 3; t++) CHECK(ra_context_create(&ctx[t], t + 1) == RA_OK, "ctx");
    for (int di = 0; di < 5; di++)
        for (int pi = 0; pi < 12; pi++) {
            const int64_t ps = page_sizes[pi % 4], group = groups[pi / 4];
            int64_t pages = 0;
            for (int b = 0; b < N; b++) pages += (len[b] + ps - 1) / ps;
            ra_kv_pool *pool;
            ra_kv_cache *cache;
            CHECK(ra_kv_pool_create_grouped(&pool, pages + 40, ps, 8, HKV, D, dtypes[di], group) ==
                      RA_OK, "pool");
            CHECK(ra_kv_cache_create(&cache, N, S, HKV, D, dtypes[di]) == RA_OK, "cache");
            if (dtypes[di] == RA_F8E4M3) {
                const float ks[HKV] = {0.5f, 0.25f}, vs[HKV] = {0.125f, 1.0f};
                const float subnormal[HKV] = {1e-40f, 1e-45f}; /* as --cache-scale refuses */
                CHECK(ra_kv_pool_set_scales(pool, ks, subnormal, HKV) == RA_ERR_ARGUMENT,
                      "subnormal pool scales");
                CHECK(ra_kv_pool_set_scales(pool, ks, vs, HKV) == RA_OK, "pool scales");
                CHECK(ra_kv_cache_set_scales(cache, ks, vs, HKV) == RA_OK, "cache scales");
            }
            int64_t ids[N], spare, done[N] = {0};
            for (int b = 0; b < N; b++) CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[b]) == RA_OK, "add");
            CHECK(ra_kv_pool_add_sequence(pool, 0, &spare) == RA_OK, "spare");
            /* ragged rounds until every sequence is whole, ids given in
             * reverse order to the pool */
            for (int round = 0; done[N - 1] < len[N - 1]; round++) {
                int64_t n_new[N], rev_ids[N], rev_from[N], rev_n[N], from[N];
                for (int b = 0; b < N; b++) {
                    int64_t want = 1 + (round * 97 + b * 131) % 400;
                    n_new[b] = len[b] - done[b] < want ? len[b] - done[b] : want;
                    from[b] = done[b];
                    rev_ids[b] = ids[N - 1 - b];
                }
                float *rk = malloc(4 * N * S * HKV * D), *rv = malloc(4 * N * S * HKV * D);
                for (int b = 0; b < N; b++) { /* input row b is sequence N - 1 - b */
                    memcpy(rk + b * S * HKV * D, k + (N - 1 - b) * S * HKV * D, 4 * S * HKV * D);
                    memcpy(rv + b * S * HKV * D, v + (N - 1 - b) * S * HKV * D, 4 * S * HKV * D);
                    rev_from[b] = from[N - 1 - b];
                    rev_n[b] = n_new[N - 1 - b];
                }
                CHECK(pool_append_rows(pool, rev_ids, N, rk, rv, S, HKV, D, rev_from, rev_n, 400) ==
                          RA_OK, "pool append: %s", ra_last_error());
                CHECK(append_rows(cache, k, v, N, S, HKV, D, from, n_new, 400) == RA_OK, "append");
                free(rk); free(rv);
                /* a spare sequence takes pages between rounds, then gives them back */
                const int64_t one = 1 + round % 3 * ps, zero = 0;
                CHECK(pool_append_rows(pool, &spare, 1, k, v, S, HKV, D, &zero, &one, one) == RA_OK,
                      "spare append");
                if (round == 3) {
                    CHECK(ra_kv_pool_free_sequence(pool, spare) == RA_OK, "free spare");
                    CHECK(ra_kv_pool_add_sequence(pool, 0, &spare) == RA_OK, "spare again");
                }
                for (int b = 0; b < N; b++) done[b] += n_new[b];
            }
            for (int b = 0; b < N; b++)
                CHECK(done[b] == len[b] && ra_kv_pool_length(pool, ids[b]) == len[b], "length");
            ra_tensor tq = ra_tensor_4d(q, RA_F32, N, T, H, D);
            ra_tensor tp = ra_tensor_4d(o_pool, RA_F32, N, T, H, D);
            ra_tensor tc = ra_tensor_4d(o_cache, RA_F32, N, T, H, D);
            ra_tensor t1 = ra_tensor_4d(o_one, RA_F32, N, T, H, D);
            for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++) {
                ra_attention_options o = mask_options(&masks[m], sinks);
                memset(o_one, 0, sizeof o_one);
                memset(o_cache, 0, sizeof o_cache);
                CHECK(ra_attention_decode(NULL, cache, &tc, &tq, n_query, &o) == RA_OK, "decode");
                CHECK(ra_attention_decode_paged(NULL, pool, ids, N, &t1, &tq, n_query, &o) == RA_OK,
                      "paged: %s", ra_last_error());
                CHECK(memcmp(o_one, o_cache, sizeof o_one) == 0,
                      "dtype %d, page %lld, group %lld, mask %zu: not the contiguous cache's bits",
                      (int)dtypes[di], (long long)ps, (long long)group, m);
                for (int t = 1; t < 3; t++) {
                    memset(o_pool, 0, sizeof o_pool);
                    CHECK(ra_attention_decode_paged(ctx[t], pool, ids, N, &tp, &tq, n_query, &o) ==
                              RA_OK, "paged");
                    CHECK(memcmp(o_pool, o_one, sizeof o_one) == 0, "%d threads changed bits", t + 1);
                }
                if (dtypes[di] != RA_F32 || ps != 16 || group) continue;
                /* the scalar reference: each sequence's rows over its own tokens;
                 * 2e-5 of the largest output, float32 rounding of softmax sums
                 * over up to 2100 keys (as test_kvcache's decode bound) */
                for (int b = 0; b < N; b++) {
                    float *qf = calloc((size_t)(len[b] * H * D), 4), *of = malloc(4 * len[b] * H * D);
                    for (int64_t t = 0; t < n_query[b]; t++)
                        memcpy(qf + (len[b] - n_query[b] + t) * H * D, q + (b * T + t) * H * D, 4 * H * D);
                    reference_last_rows(of, qf, k + b * S * HKV * D, v + b * S * HKV * D, len[b],
                                        n_query[b], H, HKV, D, &o);
                    double worst = 0;
                    for (int64_t t = 0; t < n_query[b]; t++)
                        worst = fmax(worst, ra_test_max_rel_diff(o_one + (b * T + t) * H * D,
                                                                 of + (len[b] - n_query[b] + t) * H * D,
                                                                 H * D));
                    CHECK(worst <= 2e-5, "sequence %d, mask %zu: %.3g from the reference", b, m, worst);
                    free(qf); free(of);
                }
            }
            ra_kv_cache_destroy(cache);
            ra_kv_pool_destroy(pool);
        }
    for (int t = 1; t < 3; t++) ra_context_destroy(ctx[t]);
    free(k); free(v);
}

/* Decodes sequence id's last token (query q [1, 1, H, D]) from the pool
 * and from a contiguous cache holding rows rows of k and v; whether the
 * bits agree. */
static int same_as_contiguous(const ra_kv_pool *pool, int64_t id, const float *k, const float *v,
                              int64_t rows, int64_t hkv, int64_t h, int64_t d, ra_dtype dtype,
                              const ra_attention_options *o)
{
    ra_kv_cache *cache;
    if (ra_kv_cache_create(&cache, 1, rows, hkv, d, dtype) != RA_OK) return 0;
    const int64_t zero = 0;
    int same = append_rows(cache, k, v, 1, rows, hkv, d, &zero, &rows, rows) == RA_OK;
    float q[64], a[64], b[64];
    ra_test_fill(q, (size_t)(h * d), 9);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, h, d), ta = ra_tensor_4d(a, RA_F32, 1, 1, h, d);
    ra_tensor tb = ra_tensor_4d(b, RA_F32, 1, 1, h, d);
    same = same && ra_attention_decode(NULL, cache, &ta, &tq, NULL, o) == RA_OK &&
           ra_attention_decode_paged(NULL, pool, &id, 1, &tb, &tq, NULL, o) == RA_OK &&
           memcmp(a, b, (size_t)(h * d) * 4) == 0;
    ra_kv_cache_destroy(cache);
    return same;
}

/* A parent of 37 tokens (pages of 16: the third partial) and its fork
 * share 3 pages; each then appends its own tokens: the parent's append
 * copies the shared partial page, the child's writes the original. */
static void test_fork_copy_on_write(void)
{
    enum { HKV = 2, H = 4, D = 8, P = 37, S = 50 };
    for (int dg = 0; dg < 10; dg++) { /* groups of the pool's choice, then of 2 pages */
        const int di = dg % 5;
        float parent[2][S * HKV * D], child[2][S * HKV * D]; /* k, v rows of each history */
        ra_test_fill(parent[0], S * HKV * D, 1);
        ra_test_fill(parent[1], S * HKV * D, 2);
        memcpy(child, parent, sizeof child);
        ra_test_fill(child[0] + P * HKV * D, (S - P) * HKV * D, 3); /* diverges after P */
        ra_test_fill(child[1] + P * HKV * D, (S - P) * HKV * D, 4);
        ra_kv_pool *pool;
        CHECK(ra_kv_pool_create_grouped(&pool, 10, 16, 4, HKV, D, dtypes[di], dg / 5 * 2) == RA_OK,
              "pool");
        int64_t a, b, zero = 0, p = P, from = P, five = 5, seven = 7;
        CHECK(ra_kv_pool_add_sequence(pool, 0, &a) == RA_OK, "add");
        CHECK(pool_append_rows(pool, &a, 1, parent[0], parent[1], S, HKV, D, &zero, &p, P) == RA_OK,
              "prefix");
        CHECK(ra_kv_pool_fork(pool, a, &b) == RA_OK && b != a, "fork");
        CHECK(ra_kv_pool_free_pages(pool) == 7 && ra_kv_pool_length(pool, b) == P,
              "shared pages count once: %lld free", (long long)ra_kv_pool_free_pages(pool));
        CHECK(pool_append_rows(pool, &a, 1, parent[0], parent[1], S, HKV, D, &from, &five, 5) ==
                  RA_OK, "parent appends");
        CHECK(ra_kv_pool_free_pages(pool) == 6, "the copy takes a page");
        CHECK(pool_append_rows(pool, &b, 1, child[0], child[1], S, HKV, D, &from, &seven, 7) ==
                  RA_OK, "child appends");
        CHECK(ra_kv_pool_free_pages(pool) == 6, "the child writes its own page in place");
        CHECK(same_as_contiguous(pool, a, parent[0], parent[1], P + 5, HKV, H, D, dtypes[di], NULL),
              "dtype %d: the parent", (int)dtypes[di]);
        CHECK(same_as_contiguous(pool, b, child[0], child[1], P + 7, HKV, H, D, dtypes[di], NULL),
              "dtype %d: the child", (int)dtypes[di]);
        /* a grandchild keeps the pages its ancestors give back */
        int64_t c, from_c = P + 7;
        CHECK(pool_append_rows(pool, &b, 1, child[0], child[1], S, HKV, D, &from_c, &(int64_t){1}, 1) ==
                  RA_OK, "child to 45");
        CHECK(ra_kv_pool_fork(pool, b, &c) == RA_OK, "fork the child");
        CHECK(ra_kv_pool_free_sequence(pool, a) == RA_OK, "free the parent");
        CHECK(ra_kv_pool_free_pages(pool) == 7, "the parent's own page back: %lld",
              (long long)ra_kv_pool_free_pages(pool));
        CHECK(ra_kv_pool_length(pool, a) == -1 && strstr(ra_last_error(), "was freed"),
              "a freed id");
        CHECK(ra_kv_pool_free_sequence(pool, b) == RA_OK, "free the child");
        CHECK(ra_kv_pool_free_pages(pool) == 7, "the grandchild still holds them");
        CHECK(same_as_contiguous(pool, c, child[0], child[1], P + 8, HKV, H, D, dtypes[di], NULL),
              "the grandchild");
        CHECK(ra_kv_pool_free_sequence(pool, c) == RA_OK, "free");
        CHECK(ra_kv_pool_free_pages(pool) == 10, "every page back");
        ra_kv_pool_destroy(pool);
    }
}

/* An fp8 pool's decode skips the NaN check while no page holds a NaN code
 * (nan_codes, kvpool_internal.h).  A parent whose token 35 (in its partial
 * third page of 16) holds a NaN key, and its fork: the parent's append
 * copies that page, the child writes the original; both, and a grandchild,
 * decode to the bits of a contiguous cache of the same tokens (which reads
 * the NaN), and the NaN reaches their outputs.  The flag stays while any
 * page is held, and clears once every page is free: a new sequence then
 * decodes as a contiguous cache that never held a NaN. */
static void test_nan_flag(void)
{
    enum { HKV = 2, H = 4, D = 8, P = 37, S = 50 };
    float k[S * HKV * D], v[S * HKV * D], q[H * D], out[H * D];
    ra_test_fill(k, S * HKV * D, 1);
    ra_test_fill(v, S * HKV * D, 2);
    ra_test_fill(q, H * D, 9); /* same_as_contiguous's query */
    float clean_k[S * HKV * D];
    memcpy(clean_k, k, sizeof k);
    k[(35 * HKV + 1) * D + 3] = NAN;
    ra_kv_pool *pool;
    CHECK(ra_kv_pool_create(&pool, 10, 16, 4, HKV, D, RA_F8E4M3) == RA_OK, "pool");
    int64_t a, b, c, zero = 0, p = P, from = P, five = 5, one = 1;
    CHECK(ra_kv_pool_add_sequence(pool, 0, &a) == RA_OK, "add");
    CHECK(pool_append_rows(pool, &a, 1, k, v, S, HKV, D, &zero, &p, P) == RA_OK, "prefix");
    CHECK(pool->nan_codes == 1, "a NaN stored: the flag is not set");
    CHECK(ra_kv_pool_fork(pool, a, &b) == RA_OK, "fork");
    CHECK(pool_append_rows(pool, &a, 1, k, v, S, HKV, D, &from, &five, 5) == RA_OK,
          "the parent copies the page");
    CHECK(pool_append_rows(pool, &b, 1, k, v, S, HKV, D, &from, &one, 1) == RA_OK,
          "the child writes it");
    CHECK(ra_kv_pool_fork(pool, b, &c) == RA_OK && ra_kv_pool_free_sequence(pool, b) == RA_OK,
          "a grandchild");
    CHECK(same_as_contiguous(pool, a, k, v, P + 5, HKV, H, D, RA_F8E4M3, NULL), "the parent");
    CHECK(same_as_contiguous(pool, c, k, v, P + 1, HKV, H, D, RA_F8E4M3, NULL), "the grandchild");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, H, D), to = ra_tensor_4d(out, RA_F32, 1, 1, H, D);
    CHECK(ra_attention_decode_paged(NULL, pool, &c, 1, &to, &tq, NULL, NULL) == RA_OK &&
              isnan(out[2 * D]) && !isnan(out[0]),
          "the NaN reaches kv head 1's heads, and only them");
    CHECK(ra_kv_pool_free_sequence(pool, a) == RA_OK && pool->nan_codes == 1,
          "the grandchild's pages hold the NaN: the flag stays");
    CHECK(ra_kv_pool_free_sequence(pool, c) == RA_OK && pool->nan_codes == 0,
          "every page free: the flag stays set");
    CHECK(ra_kv_pool_add_sequence(pool, 0, &a) == RA_OK &&
              pool_append_rows(pool, &a, 1, clean_k, v, S, HKV, D, &zero, &p, P) == RA_OK &&
              pool->nan_codes == 0,
          "clean tokens");
    CHECK(same_as_contiguous(pool, a, clean_k, v, P, HKV, H, D, RA_F8E4M3, NULL), "clean");
    ra_kv_pool_destroy(pool);
}

/* An append that needs more pages than are free, alone or with others,
 * is RA_ERR_CACHE_FULL and changes no length, page or decode output. */
static void test_pool_full(void)
{
    enum { HKV = 1, H = 2, D = 4, S = 40 };
    float k[S * HKV * D], v[S * HKV * D];
    ra_test_fill(k, S * HKV * D, 1);
    ra_test_fill(v, S * HKV * D, 2);
    ra_kv_pool *pool;
    CHECK(ra_kv_pool_create(&pool, 4, 8, 2, HKV, D, RA_BF16) == RA_OK, "pool");
    int64_t ids[2], zero[2] = {0, 0}, n[2] = {17, 8}, more[2] = {7, 9};
    CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[0]) == RA_OK &&
              ra_kv_pool_add_sequence(pool, 0, &ids[1]) == RA_OK, "add");
    int64_t third;
    CHECK(ra_kv_pool_add_sequence(pool, 0, &third) == RA_ERR_CACHE_FULL, "max_sequences");
    CHECK(ra_kv_pool_fork(pool, ids[0], &third) == RA_ERR_CACHE_FULL, "fork past max_sequences");
    CHECK(pool_append_rows(pool, ids, 2, k, v, 0, HKV, D, zero, n, 17) == RA_OK, "fill 4 pages");
    CHECK(ra_kv_pool_free_pages(pool) == 0, "no page left");
    float q[2 * H * D], before[2 * H * D], after[2 * H * D];
    ra_test_fill(q, 2 * H * D, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 2, 1, H, D);
    ra_tensor tb = ra_tensor_4d(before, RA_F32, 2, 1, H, D), ta = ra_tensor_4d(after, RA_F32, 2, 1, H, D);
    CHECK(ra_attention_decode_paged(NULL, pool, ids, 2, &tb, &tq, NULL, NULL) == RA_OK, "decode");
    /* the first fits in its last page (17 -> 24), the second needs 2 more */
    CHECK(pool_append_rows(pool, ids, 2, k, v, 0, HKV, D, zero, more, 9) == RA_ERR_CACHE_FULL,
          "full");
    CHECK(strstr(ra_last_error(), "sequence 1") && strstr(ra_last_error(), "0 are free"),
          "names the sequence: %s", ra_last_error());
    CHECK(ra_kv_pool_length(pool, ids[0]) == 17 && ra_kv_pool_length(pool, ids[1]) == 8 &&
              ra_kv_pool_free_pages(pool) == 0, "a refused append changed the lengths or pages");
    CHECK(ra_attention_decode_paged(NULL, pool, ids, 2, &ta, &tq, NULL, NULL) == RA_OK &&
              memcmp(before, after, sizeof before) == 0, "a refused append changed the tokens");
    CHECK(pool_append_rows(pool, ids, 1, k, v, 0, HKV, D, zero, more, 7) == RA_OK, "7 fit");
    ra_kv_pool_destroy(pool);
}

/* Whether sequence id's pages lie in runs: each page but a group's last
 * followed by the next page (kvpool_internal.h's allocation, while whole
 * groups are free). */
static int in_runs(const ra_kv_pool *pool, int64_t id)
{
    const ra_kv_sequence *s = ra_kv_pool_seq(pool, id);
    for (int64_t t = 0; t + 1 < s->n_table; t++)
        if ((s->table[t] + 1) % pool->group && s->table[t + 1] != s->table[t] + 1) return 0;
    return s->n_table == 0 || s->table[0] % pool->group == 0;
}

/* Groups of 4 pages of 2 tokens (the last group of 2 pages): three
 * sequences appended a token at a time in turn each take a whole group
 * and fill it in order; with the middle one freed, a newcomer takes the
 * start of its group, a second the last whole group and then the pages
 * left where they are (fragmented); every sequence decodes as a
 * contiguous cache, on 1 and 3 threads, for each dtype; freeing all makes
 * every group whole. */
static void test_group_runs(void)
{
    enum { HKV = 2, H = 4, D = 8, S = 12, PAGES = 14 };
    float k[5][S * HKV * D], v[5][S * HKV * D];
    for (int b = 0; b < 5; b++) ra_test_fill(k[b], S * HKV * D, 10 + b), ra_test_fill(v[b], S * HKV * D, 20 + b);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    for (int di = 0; di < 5; di++) {
        ra_kv_pool *pool;
        CHECK(ra_kv_pool_create_grouped(&pool, PAGES, 2, 5, HKV, D, dtypes[di], 4) == RA_OK, "pool");
        int64_t ids[5], len[5] = {0};
        for (int b = 0; b < 3; b++) CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[b]) == RA_OK, "add");
        for (int64_t t = 0; t < 7; t++)
            for (int b = 0; b < 3; b++) {
                const int64_t one = 1;
                CHECK(pool_append_rows(pool, &ids[b], 1, k[b], v[b], S, HKV, D, &len[b], &one, 1) ==
                          RA_OK, "token %lld", (long long)t);
                len[b]++;
            }
        for (int b = 0; b < 3; b++)
            CHECK(in_runs(pool, ids[b]) && ra_kv_pool_seq(pool, ids[b])->table[0] == 4 * b,
                  "sequence %d: not its own group's pages in order", b);
        CHECK(ra_kv_pool_free_sequence(pool, ids[1]) == RA_OK, "free");
        for (int b = 3; b < 5; b++) {
            CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[b]) == RA_OK, "add");
            const int64_t n = b == 3 ? 3 : 7, zero = 0; /* pages 4, 5; 12, 13, 6, 7 */
            CHECK(pool_append_rows(pool, &ids[b], 1, k[b], v[b], S, HKV, D, &zero, &n, n) == RA_OK,
                  "newcomer %d: %s", b, ra_last_error());
            len[b] = n;
        }
        CHECK(ra_kv_pool_free_pages(pool) == 0 && pool->n_free_groups == 0, "the pool is full");
        CHECK(in_runs(pool, ids[3]) && ra_kv_pool_seq(pool, ids[3])->table[0] == 4,
              "the first newcomer");
        CHECK(ra_kv_pool_seq(pool, ids[4])->table[0] == 12 && !in_runs(pool, ids[4]),
              "the second newcomer's pages are where the free ones were");
        for (int b = 0; b < 5; b++) {
            if (b == 1) continue;
            CHECK(same_as_contiguous(pool, ids[b], k[b], v[b], len[b], HKV, H, D, dtypes[di], NULL),
                  "dtype %d, sequence %d: not the contiguous cache's bits", (int)dtypes[di], b);
            float q[H * D], one[H * D], three[H * D];
            ra_test_fill(q, H * D, 9);
            ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, H, D);
            ra_tensor t1 = ra_tensor_4d(one, RA_F32, 1, 1, H, D), t3 = ra_tensor_4d(three, RA_F32, 1, 1, H, D);
            CHECK(ra_attention_decode_paged(NULL, pool, &ids[b], 1, &t1, &tq, NULL, NULL) == RA_OK &&
                      ra_attention_decode_paged(ctx, pool, &ids[b], 1, &t3, &tq, NULL, NULL) == RA_OK &&
                      memcmp(one, three, sizeof one) == 0, "3 threads changed bits");
        }
        for (int b = 0; b < 5; b++)
            if (b != 1) CHECK(ra_kv_pool_free_sequence(pool, ids[b]) == RA_OK, "free");
        CHECK(ra_kv_pool_free_pages(pool) == PAGES && pool->n_free_groups == 4, "every group whole");
        ra_kv_pool_destroy(pool);
    }
    ra_context_destroy(ctx);
}

/* A window sequence (W 20, pages of 8) fed one token at a time holds at
 * most ceil(20 / 8) + 1 pages and decodes as a full cache with the window
 * mask; a prefill of 50 keeps everything its queries see. */
static void test_window_release(void)
{
    enum { HKV = 2, H = 2, D = 6, S = 120, W = 20 };
    float k[S * HKV * D], v[S * HKV * D];
    ra_test_fill(k, S * HKV * D, 1);
    ra_test_fill(v, S * HKV * D, 2);
    for (int dg = 0; dg < 15; dg++) { /* groups of the pool's choice, of 2 and of 3 pages */
        const int di = dg % 5;
        ra_kv_pool *pool;
        CHECK(ra_kv_pool_create_grouped(&pool, 16, 8, 2, HKV, D, dtypes[di], dg / 5 ? 1 + dg / 5 : 0) ==
                  RA_OK, "pool");
        int64_t id, zero = 0, fifty = 50;
        CHECK(ra_kv_pool_add_sequence(pool, W, &id) == RA_OK, "add");
        CHECK(pool_append_rows(pool, &id, 1, k, v, S, HKV, D, &zero, &fifty, 50) == RA_OK, "prefill");
        CHECK(ra_kv_pool_free_pages(pool) == 16 - 7, "nothing released yet");
        ra_attention_options o = ra_attention_options_init(), plain = o;
        o.window = W;
        float q[50 * H * D], out[50 * H * D];
        ra_test_fill(q, 50 * H * D, 3);
        ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 50, H, D), to = ra_tensor_4d(out, RA_F32, 1, 50, H, D);
        CHECK(ra_attention_decode_paged(NULL, pool, &id, 1, &to, &tq, NULL, &o) == RA_OK,
              "the prefill's 50 queries: %s", ra_last_error());
        CHECK(ra_attention_decode_paged(NULL, pool, &id, 1, &to, &tq, NULL, &plain) ==
                  RA_ERR_ARGUMENT, "a window sequence without a window mask");
        o.window = W + 1;
        CHECK(ra_attention_decode_paged(NULL, pool, &id, 1, &to, &tq, NULL, &o) == RA_ERR_ARGUMENT,
              "a wider window");
        o.window = W;
        int worst_pages = 0, same = 1;
        for (int64_t p = 50; p < S; p++) {
            const int64_t one = 1;
            CHECK(pool_append_rows(pool, &id, 1, k, v, S, HKV, D, &p, &one, 1) == RA_OK, "step");
            int held = 16 - (int)ra_kv_pool_free_pages(pool);
            worst_pages = held > worst_pages ? held : worst_pages;
            if (p % 7 == 0 || p == S - 1)
                same &= same_as_contiguous(pool, id, k, v, p + 1, HKV, H, D, dtypes[di], &o);
        }
        CHECK(worst_pages <= 4, "held %d pages", worst_pages);
        CHECK(same, "dtype %d: not the full cache's bits", (int)dtypes[di]);
        /* 10 queries at 110 .. 119: the first sees from 91, released */
        ra_tensor t10 = ra_tensor_4d(q, RA_F32, 1, 10, H, D), o10 = ra_tensor_4d(out, RA_F32, 1, 10, H, D);
        CHECK(ra_attention_decode_paged(NULL, pool, &id, 1, &o10, &t10, NULL, &o) == RA_ERR_SIZE,
              "queries past the kept keys");
        /* a fork keeps the window; freeing both gives every page back */
        int64_t c;
        CHECK(ra_kv_pool_fork(pool, id, &c) == RA_OK, "fork");
        CHECK(same_as_contiguous(pool, c, k, v, S, HKV, H, D, dtypes[di], &o), "the fork");
        CHECK(ra_kv_pool_free_sequence(pool, id) == RA_OK && ra_kv_pool_free_sequence(pool, c) == RA_OK &&
                  ra_kv_pool_free_pages(pool) == 16, "freed");
        ra_kv_pool_destroy(pool);
    }
}

/* The append rotates q and k as ra_kv_cache_append does (RoPE at the
 * given positions, bit for bit), stores what it stores, and threads change
 * nothing: two sequences, ragged n_new, 1 and 3 threads, every dtype.  With
 * rope NULL both store rotated keys as given: the same rows. */
static void test_append_matches_cache(void)
{
    enum { B = 2, S = 37, HKV = 2, H = 6, D = 16 };
    const int64_t n_new[B] = {37, 20};
    float q0[B * S * H * D], k0[B * S * HKV * D], v[B * S * HKV * D];
    ra_test_fill(q0, B * S * H * D, 1);
    ra_test_fill(k0, B * S * HKV * D, 2);
    ra_test_fill(v, B * S * HKV * D, 3);
    int64_t pos[B * S];
    for (int64_t i = 0; i < B * S; i++) pos[i] = 3 + (i * 37) % 101;
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    for (int di = 0; di < 5; di++) {
        static float qa[B * S * H * D], ka[B * S * HKV * D], qb[B * S * H * D], kb[B * S * HKV * D];
        memcpy(qa, q0, sizeof qa), memcpy(qb, q0, sizeof qb);
        memcpy(ka, k0, sizeof ka), memcpy(kb, k0, sizeof kb);
        ra_kv_cache *cache;
        ra_kv_pool *pool;
        CHECK(ra_kv_cache_create(&cache, B, S, HKV, D, dtypes[di]) == RA_OK, "cache");
        CHECK(ra_kv_pool_create(&pool, 12, 5, B, HKV, D, dtypes[di]) == RA_OK, "pool");
        int64_t ids[B];
        for (int b = 0; b < B; b++) CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[b]) == RA_OK, "add");
        ra_positions at = {.struct_size = sizeof at, .ids = pos};
        ra_tensor tqa = ra_tensor_4d(qa, RA_F32, B, S, H, D), tka = ra_tensor_4d(ka, RA_F32, B, S, HKV, D);
        ra_tensor tqb = ra_tensor_4d(qb, RA_F32, B, S, H, D), tkb = ra_tensor_4d(kb, RA_F32, B, S, HKV, D);
        ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
        CHECK(ra_kv_cache_append(NULL, cache, rope, &tqa, &tka, &tv, &at, n_new) == RA_OK, "cache");
        CHECK(ra_kv_pool_append(ctx, pool, rope, ids, B, &tqb, &tkb, &tv, &at, n_new) == RA_OK,
              "pool: %s", ra_last_error());
        CHECK(memcmp(qa, qb, sizeof qa) == 0 && memcmp(ka, kb, sizeof ka) == 0,
              "dtype %d: q and k not rotated as the cache's append does", (int)dtypes[di]);
        float out_a[B * H * D], out_b[B * H * D];
        ra_tensor tq1 = ra_tensor_4d(q0, RA_F32, B, 1, H, D);
        ra_tensor toa = ra_tensor_4d(out_a, RA_F32, B, 1, H, D), tob = ra_tensor_4d(out_b, RA_F32, B, 1, H, D);
        CHECK(ra_attention_decode(NULL, cache, &toa, &tq1, NULL, NULL) == RA_OK &&
                  ra_attention_decode_paged(ctx, pool, ids, B, &tob, &tq1, NULL, NULL) == RA_OK &&
                  memcmp(out_a, out_b, sizeof out_a) == 0, "dtype %d: stored rows differ",
              (int)dtypes[di]);
        /* rope NULL: the rotated keys stored as given, q untouched, no positions */
        ra_kv_cache *given;
        ra_kv_pool *given_pool;
        CHECK(ra_kv_cache_create(&given, B, S, HKV, D, dtypes[di]) == RA_OK &&
                  ra_kv_pool_create(&given_pool, 12, 5, B, HKV, D, dtypes[di]) == RA_OK, "given");
        for (int b = 0; b < B; b++)
            CHECK(ra_kv_pool_add_sequence(given_pool, 0, &ids[b]) == RA_OK, "add");
        memcpy(qb, q0, sizeof qb);
        CHECK(ra_kv_cache_append(ctx, given, NULL, &tqb, &tka, &tv, NULL, n_new) == RA_OK &&
                  ra_kv_pool_append(ctx, given_pool, NULL, ids, B, &tqb, &tka, &tv, NULL, n_new) ==
                      RA_OK, "dtype %d: append with rope NULL: %s", (int)dtypes[di],
              ra_last_error());
        CHECK(memcmp(qb, q0, sizeof qb) == 0, "rope NULL rotated q");
        CHECK(ra_attention_decode(NULL, given, &tob, &tq1, NULL, NULL) == RA_OK &&
                  memcmp(out_a, out_b, sizeof out_a) == 0, "dtype %d: rope NULL: the cache's "
              "rows differ", (int)dtypes[di]);
        CHECK(ra_attention_decode_paged(ctx, given_pool, ids, B, &tob, &tq1, NULL, NULL) == RA_OK &&
                  memcmp(out_a, out_b, sizeof out_a) == 0, "dtype %d: rope NULL: the pool's "
              "rows differ", (int)dtypes[di]);
        ra_kv_cache_destroy(given);
        ra_kv_pool_destroy(given_pool);
        ra_kv_cache_destroy(cache);
        ra_kv_pool_destroy(pool);
    }
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
}

/* A pool takes bf16 q, k, v and positions NULL as a cache does: two
 * appends of bf16 inputs, each continuing its sequences, store what f32
 * inputs of the same values at positions from the lengths store (decoded
 * the same bits), every dtype. */
static void test_append_bf16_continues(void)
{
    enum { B = 2, S = 19, HKV = 2, H = 4, D = 16, NQ = B * S * H * D, NK = B * S * HKV * D };
    const int64_t n_new[2][B] = {{19, 7}, {3, 19}};
    ra_rope_config rc = ra_rope_config_hf(D);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    static float q[NQ], k[NK], v[NK];
    static uint16_t qh[NQ], kh[NK], vh[NK];
    for (int di = 0; di < 5; di++) {
        ra_kv_pool *wide, *half;
        CHECK(ra_kv_pool_create(&wide, 24, 4, B, HKV, D, dtypes[di]) == RA_OK &&
              ra_kv_pool_create(&half, 24, 4, B, HKV, D, dtypes[di]) == RA_OK, "pools");
        int64_t ids[B];
        for (int b = 0; b < B; b++)
            CHECK(ra_kv_pool_add_sequence(wide, 0, &ids[b]) == RA_OK &&
                  ra_kv_pool_add_sequence(half, 0, &ids[b]) == RA_OK, "add");
        for (int step = 0; step < 2; step++) {
            float *f[3] = {q, k, v};
            uint16_t *h[3] = {qh, kh, vh};
            const int64_t n[3] = {NQ, NK, NK};
            for (int j = 0; j < 3; j++) { /* f32 copies of bf16 values */
                ra_test_fill(f[j], n[j], 10 * step + j + 1);
                ra_convert(h[j], RA_BF16, f[j], RA_F32, n[j]);
                ra_convert(f[j], RA_F32, h[j], RA_BF16, n[j]);
            }
            int64_t lengths[B];
            for (int b = 0; b < B; b++) lengths[b] = ra_kv_pool_length(wide, ids[b]);
            ra_positions at = ra_positions_start(0);
            at.starts = lengths;
            ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D);
            ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
            ra_tensor hq = ra_tensor_4d(qh, RA_BF16, B, S, H, D), hk = ra_tensor_4d(kh, RA_BF16, B, S, HKV, D);
            ra_tensor hv = ra_tensor_4d(vh, RA_BF16, B, S, HKV, D);
            CHECK(ra_kv_pool_append(NULL, wide, rope, ids, B, &tq, &tk, &tv, &at, n_new[step]) ==
                      RA_OK, "f32: %s", ra_last_error());
            CHECK(ra_kv_pool_append(ctx, half, rope, ids, B, &hq, &hk, &hv, NULL, n_new[step]) ==
                      RA_OK, "dtype %d: bf16, positions NULL: %s", (int)dtypes[di],
                  ra_last_error());
        }
        float out_a[B * H * D], out_b[B * H * D];
        ra_tensor tq1 = ra_tensor_4d(q, RA_F32, B, 1, H, D);
        ra_tensor toa = ra_tensor_4d(out_a, RA_F32, B, 1, H, D), tob = ra_tensor_4d(out_b, RA_F32, B, 1, H, D);
        CHECK(ra_attention_decode_paged(NULL, wide, ids, B, &toa, &tq1, NULL, NULL) == RA_OK &&
                  ra_attention_decode_paged(NULL, half, ids, B, &tob, &tq1, NULL, NULL) == RA_OK &&
                  memcmp(out_a, out_b, sizeof out_a) == 0, "dtype %d: the pools differ",
              (int)dtypes[di]);
        ra_kv_pool_destroy(wide);
        ra_kv_pool_destroy(half);
    }
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
}

static void test_errors(void)
{
    ra_kv_pool *pool = (ra_kv_pool *)1;
    CHECK(ra_kv_pool_create(&pool, 0, 16, 4, 2, 8, RA_F32) == RA_ERR_SIZE && !pool, "no pages");
    CHECK(ra_kv_pool_create(&pool, 4, 0, 4, 2, 8, RA_F32) == RA_ERR_SIZE, "page_size 0");
    CHECK(ra_kv_pool_create(&pool, 4, 16, 0, 2, 8, RA_F32) == RA_ERR_SIZE, "no sequences");
    CHECK(ra_kv_pool_create(&pool, 4, 16, 4, 2, 7, RA_F32) == RA_ERR_HEAD_DIM, "odd D");
    CHECK(ra_kv_pool_create(&pool, 4, 16, 4, 2, 8, (ra_dtype)99) == RA_ERR_ARGUMENT, "dtype");
    CHECK(ra_kv_pool_create(&pool, (int64_t)1 << 40, (int64_t)1 << 40, 4, 2, 8, RA_F32) ==
              RA_ERR_OVERFLOW, "overflow");
    CHECK(ra_kv_pool_create(NULL, 4, 16, 4, 2, 8, RA_F32) == RA_ERR_NULL, "out NULL");
    CHECK(ra_kv_pool_create(&pool, 4, 16, 4, 2, 8, RA_F32) == RA_OK, "pool");
    int64_t id, ids[2];
    CHECK(ra_kv_pool_add_sequence(pool, -1, &id) == RA_ERR_SIZE, "window -1");
    CHECK(ra_kv_pool_add_sequence(NULL, 0, &id) == RA_ERR_NULL, "NULL pool");
    CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[0]) == RA_OK, "add");
    CHECK(ra_kv_pool_fork(pool, 3, &id) == RA_ERR_ARGUMENT, "fork of no sequence");
    CHECK(ra_kv_pool_free_sequence(pool, 7) == RA_ERR_ARGUMENT, "free of no sequence");
    CHECK(ra_kv_pool_length(pool, -1) == -1 && ra_kv_pool_length(NULL, 0) == -1, "length");
    CHECK(ra_kv_pool_free_pages(NULL) == -1, "free pages of NULL");
    const float s1 = 1.0f, bad = 0.0f;
    CHECK(ra_kv_pool_set_scales(pool, &s1, &s1, 1) == RA_ERR_DTYPE, "scales of f32");
    float k[4 * 2 * 8], q[4 * 8], out[4 * 8];
    ra_test_fill(k, 64, 1);
    ra_test_fill(q, 32, 2);
    ids[1] = ids[0];
    const int64_t zero[2] = {0, 0}, one[2] = {1, 1};
    CHECK(pool_append_rows(pool, ids, 2, k, k, 1, 2, 8, zero, one, 1) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "both sequence"), "repeated id: %s", ra_last_error());
    CHECK(pool_append_rows(pool, ids, 1, k, k, 1, 2, 8, zero, one, 1) == RA_OK, "append");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, 4, 8), to = ra_tensor_4d(out, RA_F32, 1, 1, 4, 8);
    ra_tensor tq2 = ra_tensor_4d(q, RA_F32, 1, 2, 2, 8), to2 = ra_tensor_4d(out, RA_F32, 1, 2, 2, 8);
    CHECK(ra_attention_decode_paged(NULL, pool, ids, 0, &to, &tq, NULL, NULL) == RA_ERR_SIZE, "no ids");
    CHECK(ra_attention_decode_paged(NULL, NULL, ids, 1, &to, &tq, NULL, NULL) == RA_ERR_NULL, "pool");
    CHECK(ra_attention_decode_paged(NULL, pool, NULL, 1, &to, &tq, NULL, NULL) == RA_ERR_NULL, "ids");
    const int64_t nobody = 2;
    CHECK(ra_attention_decode_paged(NULL, pool, &nobody, 1, &to, &tq, NULL, NULL) == RA_ERR_ARGUMENT,
          "no such id");
    CHECK(ra_attention_decode_paged(NULL, pool, ids, 1, &to2, &tq2, NULL, NULL) == RA_ERR_SIZE,
          "two queries, one token");
    ra_attention_options drop = DROPOUT(0.1f, 1);
    CHECK(ra_attention_decode_paged(NULL, pool, ids, 1, &to, &tq, NULL, &drop) == RA_ERR_UNSUPPORTED,
          "dropout");
    CHECK(ra_attention_decode_paged(NULL, pool, ids, 2, &to, &tq, NULL, NULL) == RA_ERR_SHAPE,
          "batch is n_ids");
    ra_kv_pool_destroy(pool);
    CHECK(ra_kv_pool_create(&pool, 4, 16, 4, 2, 8, RA_F8E4M3) == RA_OK, "fp8 pool");
    CHECK(ra_kv_pool_set_scales(pool, &bad, &s1, 1) == RA_ERR_ARGUMENT, "scale 0");
    CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[0]) == RA_OK, "add");
    CHECK(pool_append_rows(pool, ids, 1, k, k, 1, 2, 8, zero, one, 1) == RA_OK, "append");
    CHECK(ra_kv_pool_set_scales(pool, &s1, &s1, 1) == RA_ERR_ARGUMENT, "scales after tokens");
    ra_kv_pool_destroy(pool);
    ra_kv_pool_destroy(NULL);
}

/* A freed sequence's id never names a later sequence: the slot's next
 * sequence gets another id, and the freed one is refused everywhere (it
 * appended to and decoded the new sequence silently), naming it freed. */
static void test_freed_id_refused(void)
{
    ra_kv_pool *pool;
    CHECK(ra_kv_pool_create(&pool, 4, 16, 2, 2, 8, RA_F32) == RA_OK, "pool");
    int64_t a, b, c, fork;
    CHECK(ra_kv_pool_add_sequence(pool, 0, &a) == RA_OK && a == 0, "first id 0: %lld",
          (long long)a);
    CHECK(ra_kv_pool_add_sequence(pool, 0, &b) == RA_OK && b == 1, "second id 1");
    float k[2 * 8], q[4 * 8], out[4 * 8];
    ra_test_fill(k, 16, 1);
    ra_test_fill(q, 32, 2);
    const int64_t zero[1] = {0}, one[1] = {1};
    CHECK(pool_append_rows(pool, &a, 1, k, k, 1, 2, 8, zero, one, 1) == RA_OK, "append");
    CHECK(ra_kv_pool_free_sequence(pool, a) == RA_OK, "free");
    CHECK(ra_kv_pool_add_sequence(pool, 0, &c) == RA_OK && c != a && c >= 0, "a new id: %lld",
          (long long)c);
    CHECK(ra_kv_pool_length(pool, c) == 0, "the new sequence is empty");
    CHECK(ra_kv_pool_length(pool, a) == -1 && strstr(ra_last_error(), "freed"),
          "length of the freed id: %s", ra_last_error());
    CHECK(pool_append_rows(pool, &a, 1, k, k, 1, 2, 8, zero, one, 1) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "freed"), "append to the freed id: %s", ra_last_error());
    CHECK(ra_kv_pool_length(pool, c) == 0 && ra_kv_pool_free_pages(pool) == 4,
          "the refused append changed nothing");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, 4, 8), to = ra_tensor_4d(out, RA_F32, 1, 1, 4, 8);
    CHECK(ra_attention_decode_paged(NULL, pool, &a, 1, &to, &tq, NULL, NULL) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "freed"), "decode of the freed id: %s", ra_last_error());
    CHECK(ra_kv_pool_fork(pool, a, &fork) == RA_ERR_ARGUMENT, "fork of the freed id");
    CHECK(ra_kv_pool_free_sequence(pool, a) == RA_ERR_ARGUMENT, "free of the freed id");
    CHECK(ra_kv_pool_length(pool, c) == 0, "the new sequence lives");
    CHECK(pool_append_rows(pool, &c, 1, k, k, 1, 2, 8, zero, one, 1) == RA_OK, "append to it");
    CHECK(ra_kv_pool_length(pool, c) == 1, "its token");
    CHECK(ra_kv_pool_free_sequence(pool, b) == RA_OK, "free b");
    CHECK(ra_kv_pool_fork(pool, c, &fork) == RA_OK && fork != b && fork != a && fork != c,
          "the fork's id: %lld", (long long)fork);
    CHECK(ra_kv_pool_length(pool, b) == -1 && ra_kv_pool_length(pool, fork) == 1, "fork");
    const int64_t past[3] = {(int64_t)1 << 31, (int64_t)1 << 62, INT64_MAX};
    for (int i = 0; i < 3; i++)
        CHECK(ra_kv_pool_length(pool, past[i]) == -1, "id %lld", (long long)past[i]);
    ra_kv_pool_destroy(pool);
}

/* Every case but test_errors' refusals reaches the SIMD kernels, so each
 * runs on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_matches_contiguous);
    RUN(test_fork_copy_on_write);
    RUN(test_group_runs);
    RUN(test_pool_full);
    RUN(test_window_release);
    RUN(test_nan_flag);
    RUN(test_append_matches_cache);
    RUN(test_append_bf16_continues);
    RUN(test_errors);
    RUN(test_freed_id_refused);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("kvpool");
}
