/*
 * test_concurrency.c — eight application threads call the library at once,
 * as ropeattn.h's "Thread safety" allows, and every result must equal the
 * single-threaded run's:
 *   - shared and read-only: one ra_rope (its table and, past the table, the
 *     on-the-fly angles), one ra_layer (its rope and the weights it
 *     borrows), one filled ra_kv_cache and one ra_kv_pool holding the
 *     same tokens that every thread decodes from into its own outputs;
 *   - each thread's own: contexts (created, used and destroyed in every
 *     round, so thread pools start and stop concurrently; or NULL), KV
 *     caches filled through the cached layer, output buffers.
 * `make tsan` runs it under ThreadSanitizer.  RoPE, attention and decoding
 * must match bit for bit (they are deterministic for any thread count); the
 * layer's projections go through OpenBLAS, whose results may change in the
 * last bits with how it splits a product across its own threads, so the
 * layer matches to 1e-6 of max|y| (the tolerance its own test states here).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { THREADS = 8, ROUNDS = 10 };
enum { B = 2, S = 40, H = 4, HKV = 2, D = 16, DIM = H * D, CAP = S + 2 };

/* Inputs, and the shared read-only objects. */
static float q[B * S * H * D], k[B * S * HKV * D], v[B * S * HKV * D], x[B * S * DIM];
static float wq[DIM * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * DIM];
static int64_t table_pos[S];
static ra_rope *rope;
static ra_layer *layer;
static ra_kv_cache *shared_cache;
static ra_kv_pool *shared_pool;
static int64_t pool_ids[B];

/* One thread's results: every output the checks compare. */
typedef struct results {
    float rope[B * S * H * D];
    float cos[S * D / 2], sin[S * D / 2];
    float flash[B * S * H * D], reference[B * S * H * D];
    float decode[B * 2 * H * D], paged[B * 2 * H * D];
    float layer[B * S * DIM];
    float cached[B * (S + 2) * DIM]; /* prefill S tokens, then 2 decode steps */
} results;

static results expected;

/* Runs every operation once into r; ctx may be NULL.  Returns the number
 * of calls that failed. */
static int run_all(results *r, ra_context *ctx)
{
    int failed = 0;
    /* RoPE with the shared rope, positions 20 .. 59 past its 32-row table */
    memcpy(r->rope, q, sizeof q);
    failed += ra_rope_apply_f32(ctx, rope, r->rope, B, S, H, 20) != RA_OK;
    failed += ra_rope_table(rope, r->cos, r->sin, table_pos, S) != RA_OK;

    /* attention on both paths */
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    ra_tensor tf = ra_tensor_4d(r->flash, RA_F32, B, S, H, D);
    ra_tensor tr = ra_tensor_4d(r->reference, RA_F32, B, S, H, D);
    failed += ra_attention(ctx, &tf, &tq, &tk, &tv, PATH_OPTS(RA_PATH_FLASH)) != RA_OK;
    failed += ra_attention(ctx, &tr, &tq, &tk, &tv, PATH_OPTS(RA_PATH_REFERENCE)) != RA_OK;

    /* the shared cache: the last 2 of its tokens as queries */
    ra_tensor t2 = ra_tensor_4d(q, RA_F32, B, 2, H, D);
    ra_tensor td = ra_tensor_4d(r->decode, RA_F32, B, 2, H, D);
    failed += ra_attention_decode(ctx, shared_cache, &td, &t2, NULL, NULL) != RA_OK;
    ra_tensor tp = ra_tensor_4d(r->paged, RA_F32, B, 2, H, D);
    failed += ra_attention_decode_paged(ctx, shared_pool, pool_ids, B, &tp, &t2, NULL, NULL) !=
              RA_OK;

    /* the shared layer, and its cached form on a cache of this thread's */
    failed += ra_layer_forward(ctx, layer, r->layer, x, B, S, NULL, NULL) != RA_OK;
    ra_kv_cache *cache;
    if (ra_kv_cache_create(&cache, B, CAP, HKV, D, RA_BF16) != RA_OK) return failed + 1;
    float y[B * DIM], step[B * DIM];
    failed += ra_layer_forward_cached(ctx, layer, cache, r->cached, x, B, S, NULL) != RA_OK;
    for (int s = 0; s < 2; s++) {
        for (int b = 0; b < B; b++) memcpy(step + b * DIM, x + (b * S + s) * DIM, sizeof(float) * DIM);
        failed += ra_layer_forward_cached(ctx, layer, cache, y, step, B, 1, NULL) != RA_OK;
        memcpy(r->cached + (B * S + s * B) * DIM, y, sizeof y);
    }
    ra_kv_cache_destroy(cache);
    return failed;
}

/* Bit-for-bit comparisons, and the layer's to 1e-6.  Returns mismatches. */
static int compare(const results *r)
{
    int bad = 0;
    bad += memcmp(r->rope, expected.rope, sizeof r->rope) != 0;
    bad += memcmp(r->cos, expected.cos, sizeof r->cos) != 0;
    bad += memcmp(r->sin, expected.sin, sizeof r->sin) != 0;
    bad += memcmp(r->flash, expected.flash, sizeof r->flash) != 0;
    bad += memcmp(r->reference, expected.reference, sizeof r->reference) != 0;
    bad += memcmp(r->decode, expected.decode, sizeof r->decode) != 0;
    bad += memcmp(r->paged, expected.decode, sizeof r->paged) != 0; /* the cache's bits */
    bad += !(ra_test_max_rel_diff(r->layer, expected.layer, B * S * DIM) <= 1e-6);
    bad += !(ra_test_max_rel_diff(r->cached, expected.cached, B * (S + 2) * DIM) <= 1e-6);
    return bad;
}

typedef struct worker {
    pthread_t thread;
    int id;
    int failed_calls, mismatches;
    results r;
} worker;

/* Odd workers give each round a context of their own (2 or 3 threads),
 * even ones run without. */
static void *work(void *p)
{
    worker *w = p;
    for (int round = 0; round < ROUNDS; round++) {
        ra_context *ctx = NULL;
        if (w->id % 2 && ra_context_create(&ctx, 2 + round % 2) != RA_OK) {
            w->failed_calls++;
            continue;
        }
        memset(&w->r, 0, sizeof w->r);
        w->failed_calls += run_all(&w->r, ctx);
        w->mismatches += compare(&w->r);
        ra_context_destroy(ctx);
    }
    return NULL;
}

static void setup(void)
{
    ra_test_fill(q, sizeof q / sizeof q[0], 1);
    ra_test_fill(k, sizeof k / sizeof k[0], 2);
    ra_test_fill(v, sizeof v / sizeof v[0], 3);
    ra_test_fill(x, sizeof x / sizeof x[0], 4);
    ra_test_fill(wq, sizeof wq / sizeof wq[0], 5);
    ra_test_fill(wk, sizeof wk / sizeof wk[0], 6);
    ra_test_fill(wv, sizeof wv / sizeof wv[0], 7);
    ra_test_fill(wo, sizeof wo / sizeof wo[0], 8);
    for (int t = 0; t < S; t++) table_pos[t] = (int64_t)t * 977;
    ra_rope_config rc = ra_rope_config_default(D);
    rc.table_size = 32;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_rope_config lc_rope = ra_rope_config_default(0);
    ra_layer_config lc = {.struct_size = sizeof lc, .dim = DIM, .n_heads = H, .n_kv_heads = HKV,
                          .rope = &lc_rope};
    lc_rope.layout = RA_LAYOUT_HALF;
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer");
    /* the shared cache: S tokens of k and v (copies: append rotates k) */
    static float kc[B * S * HKV * D];
    memcpy(kc, k, sizeof kc);
    ra_tensor tk = ra_tensor_4d(kc, RA_F32, B, S, HKV, D), tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    ra_positions p = {.struct_size = sizeof p, .start = 0};
    CHECK(ra_kv_cache_create(&shared_cache, B, CAP, HKV, D, RA_F16) == RA_OK, "cache");
    CHECK(ra_kv_cache_append(NULL, shared_cache, rope, NULL, &tk, &tv, &p, NULL) == RA_OK, "fill");
    /* the shared pool (pages of 8): the same tokens, from the same inputs */
    memcpy(kc, k, sizeof kc);
    CHECK(ra_kv_pool_create(&shared_pool, B * S / 8, 8, B, HKV, D, RA_F16) == RA_OK, "pool");
    for (int b = 0; b < B; b++)
        CHECK(ra_kv_pool_add_sequence(shared_pool, 0, &pool_ids[b]) == RA_OK, "add");
    CHECK(ra_kv_pool_append(NULL, shared_pool, rope, pool_ids, B, NULL, &tk, &tv, &p, NULL) ==
              RA_OK, "fill the pool");
}

/* The expected results, from this thread alone, without a context; then
 * the same through a 3-thread context (the library's own determinism). */
static void test_single_thread(void)
{
    CHECK(run_all(&expected, NULL) == 0, "a call failed");
    static results again;
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    CHECK(run_all(&again, ctx) == 0, "a call failed");
    CHECK(compare(&again) == 0, "a 3-thread context changes results");
    ra_context_destroy(ctx);
}

static void test_many_threads(void)
{
    static worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i].id = i;
        CHECK(pthread_create(&workers[i].thread, NULL, work, &workers[i]) == 0, "thread %d", i);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(workers[i].thread, NULL);
    for (int i = 0; i < THREADS; i++) {
        CHECK(workers[i].failed_calls == 0, "thread %d: %d calls failed", i, workers[i].failed_calls);
        CHECK(workers[i].mismatches == 0, "thread %d: %d results differ from one thread's", i,
              workers[i].mismatches);
    }
    /* the shared objects are as they were: the cache's lengths, the rope's
     * numbers (a fresh single-threaded run still matches) */
    CHECK(ra_kv_cache_length(shared_cache, 0) == S && ra_kv_cache_length(shared_cache, 1) == S,
          "the shared cache's lengths changed");
    static results after;
    CHECK(run_all(&after, NULL) == 0 && compare(&after) == 0, "the shared objects changed");
}

/* Both reach the SIMD kernels, so both run on every path (harness.h), in
 * this order: test_many_threads compares with what test_single_thread
 * computed on the same path. */
static void simd_cases(void)
{
    RUN(test_single_thread);
    RUN(test_many_threads);
}

int main(void)
{
    setup();
    ra_test_each_isa(simd_cases);
    ra_kv_cache_destroy(shared_cache);
    ra_kv_pool_destroy(shared_pool);
    ra_layer_destroy(layer);
    ra_rope_destroy(rope);
    return ra_test_summary("concurrency");
}
