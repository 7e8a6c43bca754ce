/*
 * test_alloc_failure.c — every public path with its n-th allocation failing,
 * for n = 1, 2, ... until the path completes without reaching an n-th
 * (src/fault.h; built only by `make alloc-test`, with -DRA_FAULT_INJECTION
 * under AddressSanitizer + LeakSanitizer, by GCC or clang).  Each failing run must
 *   - return RA_ERR_NOMEM (RA_ERR_THREAD when the failure is a worker
 *     thread's start),
 *   - leave what the caller owns as it was: *out NULL, an output buffer
 *     still holding its sentinel bytes, a KV cache's lengths and contents,
 *     no output file and no temporary file, no worker thread left running,
 *   - and leak nothing (LeakSanitizer, checked after every path).
 * The run that reaches no failure must succeed.  cJSON's allocations count
 * too: main hooks ra_malloc / ra_free into cJSON (memory.h says why the
 * library itself does not).  Prints the failure points of each path and the
 * total.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sanitizer/lsan_interface.h>

/* ASan: GCC defines __SANITIZE_ADDRESS__, clang (14) answers __has_feature */
#if defined(__SANITIZE_ADDRESS__)
#define RA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RA_TEST_ASAN 1
#endif
#endif
#if !defined(RA_FAULT_INJECTION) || !defined(RA_TEST_ASAN)
#error "build with make alloc-test: -DRA_FAULT_INJECTION and -fsanitize=address"
#endif

#include "fault.h"
/* Allocation failures do not depend on the SIMD path: the cases run once,
 * on the default path (harness.h). */
#define RA_TEST_ONE_PATH
#include "harness.h"
#include "kvcache_internal.h"
#include "hf/fields.h"
#include "io/io.h"
#include "memory.h"
#include "ropeattn.h"
#include "ropeattn_hf.h"

/* ---- the sweep ---------------------------------------------------------- */

/* One run of a path: the acquisition that fails, how many the armed call
 * made, and what it returned. */
typedef struct trial {
    int64_t fail_at, reached;
    ra_status status;
} trial;

/* Runs the library call with the trial's acquisition failing. */
#define ARMED(t, call)                          \
    do {                                        \
        ra_fault_fail_at((t)->fail_at);         \
        (t)->status = (call);                   \
        (t)->reached = ra_fault_count();        \
        ra_fault_fail_at(0);                    \
    } while (0)

#define RA_TEST_TRY(call)                  \
    do {                                   \
        ra_status s_ = (call);             \
        if (s_ != RA_OK) return s_;        \
    } while (0)

/* Whether the injected failure was reached in this trial. */
#define INJECTED(t) ((t)->reached >= (t)->fail_at)

static int64_t total_points;

/* The threads of this process, from /proc/self/status. */
static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

/* thread_count() once it equals `expected`, or after about 100 ms: a
 * thread that pthread_join has returned for can still be counted for a
 * moment (the kernel wakes the joiner before it removes the thread). */
static int thread_count_settled(int expected)
{
    for (int i = 0; i < 100 && thread_count() != expected; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return thread_count();
}

/* Runs fn for n = 1, 2, ... (a path is expected to make well under 1000
 * acquisitions); allow_thread: RA_ERR_THREAD is a correct answer too. */
static void sweep(const char *name, void (*fn)(trial *), int allow_thread)
{
    int64_t n;
    for (n = 1; n < 1000; n++) {
        int threads = thread_count();
        trial t = {n, 0, RA_OK};
        fn(&t);
        int after = thread_count_settled(threads);
        CHECK(after == threads, "%s, n = %lld: %d threads before, %d after", name, (long long)n,
              threads, after);
        if (!INJECTED(&t)) {
            CHECK(t.status == RA_OK, "%s: the run without a failure gave %s", name,
                  ra_status_string(t.status));
            break;
        }
        CHECK(t.status == RA_ERR_NOMEM || (allow_thread && t.status == RA_ERR_THREAD),
              "%s, acquisition %lld failing: %s", name, (long long)n, ra_status_string(t.status));
    }
    CHECK(n < 1000, "%s never completed", name);
    CHECK(__lsan_do_recoverable_leak_check() == 0, "%s leaks (report above)", name);
    printf("  %-42s %3lld failure points\n", name, (long long)(n - 1));
    total_points += n - 1;
}

/* ---- shapes, inputs and sentinels ---------------------------------------- */

enum { B = 2, S = 5, H = 4, HKV = 2, D = 16, DIM = H * D, CAP = 9 };

static float q[B * S * H * D], k[B * S * HKV * D], v[B * S * HKV * D];
static float x[B * S * DIM], wq[DIM * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * DIM];

/* Output buffers start as these bytes; a failed call must leave them. */
#define SENTINEL 0xA5

static int is_sentinel(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != SENTINEL) return 0;
    return 1;
}

static const void *const NOT_NULL = &total_points; /* *out before a create */

/* ---- context, rope, layer, cache: creation ------------------------------ */

static void context_create(trial *t, int threads)
{
    ra_context *ctx = (ra_context *)NOT_NULL;
    ARMED(t, ra_context_create(&ctx, threads));
    if (INJECTED(t)) CHECK(ctx == NULL, "*out not NULL after a failure");
    ra_context_destroy(t->status == RA_OK ? ctx : NULL);
}
static void context_1(trial *t) { context_create(t, 1); }
static void context_4(trial *t) { context_create(t, 4); }

static void rope_create(trial *t, ra_rope_config c)
{
    ra_rope *rope = (ra_rope *)NOT_NULL;
    ARMED(t, ra_rope_create(&rope, &c));
    if (INJECTED(t)) CHECK(rope == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_rope_destroy(rope);
}
static void rope_default(trial *t) { rope_create(t, ra_rope_config_default(D)); }
static void rope_no_table(trial *t)
{
    ra_rope_config c = ra_rope_config_default(D);
    c.table_size = 0;
    rope_create(t, c);
}
static void rope_longrope(trial *t)
{
    static const double short_f[D / 2] = {1, 1, 1, 1, 2, 2, 2, 2}, long_f[D / 2] = {1, 2, 3, 4, 5, 6, 7, 8};
    ra_rope_config c = ra_rope_config_default(D);
    c.type = RA_ROPE_LONGROPE;
    c.original_max_position_embeddings = 64;
    c.max_position_embeddings = 256;
    c.short_factor = short_f;
    c.long_factor = long_f;
    rope_create(t, c);
}
static void rope_mrope(trial *t)
{
    ra_rope_config c = ra_rope_config_default(D);
    c.mrope_section[0] = D / 2 - 2, c.mrope_section[1] = 1, c.mrope_section[2] = 1;
    rope_create(t, c);
}
static void rope_axial(trial *t)
{
    ra_rope_config c = ra_rope_config_hf(D);
    c.axial = RA_AXIAL_ALTERNATE;
    rope_create(t, c);
}

static ra_layer_config layer_config(void)
{
    ra_layer_config c = {.struct_size = sizeof c, .dim = DIM, .n_heads = H, .n_kv_heads = HKV,
                         .rope = NULL}; /* the default rope */
    return c;
}

static void layer_create(trial *t)
{
    ra_layer_config c = layer_config();
    ra_layer_weights w = {.struct_size = sizeof w, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    ra_layer *layer = (ra_layer *)NOT_NULL;
    ARMED(t, ra_layer_create(&layer, &c, &w));
    if (INJECTED(t)) CHECK(layer == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_layer_destroy(layer);
}

static void cache_create(trial *t)
{
    ra_kv_cache *cache = (ra_kv_cache *)NOT_NULL;
    ARMED(t, ra_kv_cache_create(&cache, B, CAP, HKV, D, RA_F16));
    if (INJECTED(t)) CHECK(cache == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_kv_cache_destroy(cache);
}

static void cache_create_window(trial *t)
{
    ra_kv_cache *cache = (ra_kv_cache *)NOT_NULL;
    ARMED(t, ra_kv_cache_create_window(&cache, B, CAP - 1, 2, HKV, D, RA_BF16));
    if (INJECTED(t)) CHECK(cache == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_kv_cache_destroy(cache);
}

/* 8-bit caches allocate their scales too (int8's per token, fp8's per head). */
static void cache_create_int8(trial *t)
{
    ra_kv_cache *cache = (ra_kv_cache *)NOT_NULL;
    ARMED(t, ra_kv_cache_create(&cache, B, CAP, HKV, D, RA_I8));
    if (INJECTED(t)) CHECK(cache == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_kv_cache_destroy(cache);
}

static void cache_create_window_fp8(trial *t)
{
    ra_kv_cache *cache = (ra_kv_cache *)NOT_NULL;
    ARMED(t, ra_kv_cache_create_window(&cache, B, CAP - 1, 2, HKV, D, RA_F8E4M3));
    if (INJECTED(t)) CHECK(cache == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_kv_cache_destroy(cache);
}

/* A paged pool allocates its pages, tables and scales. */
static void pool_create(trial *t)
{
    ra_kv_pool *pool = (ra_kv_pool *)NOT_NULL;
    ARMED(t, ra_kv_pool_create(&pool, 8, 2, B, HKV, D, RA_I8));
    if (INJECTED(t)) CHECK(pool == NULL, "*out not NULL after a failure");
    if (t->status == RA_OK) ra_kv_pool_destroy(pool);
}

/* A pool (pages of 1) holding sequence ids[0] (S tokens) and its fork
 * ids[1]: the tables, the pages' holds. */
static ra_kv_pool *pool_filled(int64_t ids[2])
{
    ra_kv_pool *pool = NULL;
    ra_rope *rope = NULL;
    CHECK(ra_kv_pool_create(&pool, 64, 1, 4, HKV, D, RA_F16) == RA_OK, "pool");
    CHECK(ra_rope_create(&rope, &(ra_rope_config){.struct_size = sizeof(ra_rope_config),
                                                  .head_dim = D, .theta = 10000}) == RA_OK, "rope");
    static float ka[S * HKV * D];
    memcpy(ka, k, sizeof ka);
    ra_tensor tk = ra_tensor_4d(ka, RA_F32, 1, S, HKV, D), tv = ra_tensor_4d(v, RA_F32, 1, S, HKV, D);
    ra_positions p = {.struct_size = sizeof p, .start = 0};
    CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[0]) == RA_OK, "add");
    CHECK(ra_kv_pool_append(NULL, pool, rope, &ids[0], 1, NULL, &tk, &tv, &p, NULL) == RA_OK, "fill");
    CHECK(ra_kv_pool_fork(pool, ids[0], &ids[1]) == RA_OK, "fork");
    ra_rope_destroy(rope);
    return pool;
}

/* ra_kv_pool_fork allocates the child's table: a failure takes no id and
 * no hold. */
static void pool_fork(trial *t)
{
    int64_t ids[2], child = -1;
    ra_kv_pool *pool = pool_filled(ids);
    const int64_t free_before = ra_kv_pool_free_pages(pool);
    ARMED(t, ra_kv_pool_fork(pool, ids[1], &child));
    if (INJECTED(t)) {
        CHECK(child == -1 && ra_kv_pool_length(pool, 2) == -1, "a failed fork made a sequence");
        CHECK(ra_kv_pool_free_sequence(pool, ids[0]) == RA_OK &&
                  ra_kv_pool_free_sequence(pool, ids[1]) == RA_OK &&
                  ra_kv_pool_free_pages(pool) == 64, "a failed fork took a hold on a page");
    }
    CHECK(ra_kv_pool_free_pages(pool) >= free_before, "pages");
    ra_kv_pool_destroy(pool);
}

/* ra_kv_pool_append of S tokens to each (their tables of 8 grow) and ra_attention_decode_paged on threads threads: a
 * failed append changes no length, page or decoded bit; a failed decode
 * leaves out as it was. */
static void pool_append_decode(trial *t, int threads, int decode)
{
    int64_t ids[2];
    ra_kv_pool *pool = pool_filled(ids);
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    ra_rope *rope = NULL;
    CHECK(ra_rope_create(&rope, &(ra_rope_config){.struct_size = sizeof(ra_rope_config),
                                                  .head_dim = D, .theta = 10000}) == RA_OK, "rope");
    static float out[B * 2 * H * D], before[B * 2 * H * D], ka[B * S * HKV * D];
    ra_tensor to = ra_tensor_4d(out, RA_F32, B, 2, H, D), tq = ra_tensor_4d(q, RA_F32, B, 2, H, D);
    memcpy(ka, k, sizeof ka);
    ra_tensor tk = ra_tensor_4d(ka, RA_F32, B, S, HKV, D), tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    ra_positions p = {.struct_size = sizeof p, .start = S};
    if (decode) {
        memset(out, SENTINEL, sizeof out);
        ARMED(t, ra_attention_decode_paged(ctx, pool, ids, 2, &to, &tq, NULL, NULL));
        if (INJECTED(t)) CHECK(is_sentinel(out, sizeof out), "out written by a failed call");
        else CHECK(!is_sentinel(out, sizeof out), "out not written");
    } else {
        CHECK(ra_attention_decode_paged(ctx, pool, ids, 2, &to, &tq, NULL, NULL) == RA_OK, "decode");
        memcpy(before, out, sizeof out);
        const int64_t free_before = ra_kv_pool_free_pages(pool);
        ARMED(t, ra_kv_pool_append(ctx, pool, rope, ids, 2, NULL, &tk, &tv, &p, NULL));
        if (INJECTED(t)) {
            CHECK(ra_kv_pool_length(pool, ids[0]) == S && ra_kv_pool_length(pool, ids[1]) == S &&
                      ra_kv_pool_free_pages(pool) == free_before, "a failed append changed the pool");
            CHECK(ra_attention_decode_paged(ctx, pool, ids, 2, &to, &tq, NULL, NULL) == RA_OK &&
                      memcmp(before, out, sizeof out) == 0, "a failed append changed the tokens");
        }
    }
    ra_rope_destroy(rope);
    ra_context_destroy(ctx);
    ra_kv_pool_destroy(pool);
}
static void pool_append(trial *t) { pool_append_decode(t, 0, 0); }
static void pool_append_ctx(trial *t) { pool_append_decode(t, 3, 0); }
static void pool_decode(trial *t) { pool_append_decode(t, 0, 1); }
static void pool_decode_ctx(trial *t) { pool_append_decode(t, 3, 1); }

/* ---- rope and attention -------------------------------------------------- */

/* Rotations allocate nothing: the sweep must end at n = 1 with success. */
static ra_status rotate_and_table(const ra_rope *rope, float *y)
{
    ra_tensor ty = ra_tensor_4d(y, RA_F32, B, S, H, D);
    ra_positions p = {.struct_size = sizeof p, .start = 1};
    float cos_t[2 * D / 2], sin_t[2 * D / 2];
    const int64_t pos[2] = {2, 1000};
    RA_TEST_TRY(ra_rope_apply(NULL, rope, &ty, &ty, &p, RA_FORWARD));
    return ra_rope_table(rope, cos_t, sin_t, pos, 2);
}

static void rope_apply(trial *t)
{
    ra_rope *rope;
    ra_rope_config c = ra_rope_config_default(D);
    c.table_size = 3; /* later positions on the fly */
    CHECK(ra_rope_create(&rope, &c) == RA_OK, "rope");
    static float y[B * S * H * D];
    memcpy(y, q, sizeof y);
    ARMED(t, rotate_and_table(rope, y));
    ra_rope_destroy(rope);
}

/* ra_attention on either path, with no context or a fresh 3-thread one
 * (whose workspace must grow), dropout on; q, k and v in dtype (bf16: the
 * bf16 units where the CPU has them, AMX's permission asked once). */
static void attention(trial *t, ra_attention_path path, int threads, ra_dtype dtype)
{
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float out[B * S * H * D];
    static uint16_t q16[B * S * H * D], k16[B * S * HKV * D], v16[B * S * HKV * D];
    memset(out, SENTINEL, sizeof out);
    ra_tensor to = ra_tensor_4d(out, RA_F32, B, S, H, D), tq = ra_tensor_4d(q, RA_F32, B, S, H, D);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D), tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    if (dtype == RA_BF16) {
        CHECK(ra_convert(q16, RA_BF16, q, RA_F32, B * S * H * D) == RA_OK &&
                  ra_convert(k16, RA_BF16, k, RA_F32, B * S * HKV * D) == RA_OK &&
                  ra_convert(v16, RA_BF16, v, RA_F32, B * S * HKV * D) == RA_OK, "convert");
        tq = ra_tensor_4d(q16, RA_BF16, B, S, H, D);
        tk = ra_tensor_4d(k16, RA_BF16, B, S, HKV, D);
        tv = ra_tensor_4d(v16, RA_BF16, B, S, HKV, D);
    }
    ra_attention_options drop = DROPOUT(0.25f, 7);
    ARMED(t, ra_attention(ctx, &to, &tq, &tk, &tv, DROP_OPTS(path, &drop)));
    if (INJECTED(t)) CHECK(is_sentinel(out, sizeof out), "out written by a failed call");
    else CHECK(!is_sentinel(out, sizeof out), "out not written");
    ra_context_destroy(ctx);
}
static void attention_ref(trial *t) { attention(t, RA_PATH_REFERENCE, 0, RA_F32); }
static void attention_ref_ctx(trial *t) { attention(t, RA_PATH_REFERENCE, 3, RA_F32); }
static void attention_flash(trial *t) { attention(t, RA_PATH_FLASH, 0, RA_F32); }
static void attention_flash_ctx(trial *t) { attention(t, RA_PATH_FLASH, 3, RA_F32); }
static void attention_flash_bf16(trial *t) { attention(t, RA_PATH_FLASH, 3, RA_BF16); }

/* ra_attention_block_backward: the second half of the sequence's queries
 * against its first half's keys, with no context or a fresh 3-thread one;
 * the gradients it adds to untouched by a failed call. */
static ra_status block_backward_call(ra_context *ctx, float *grads, const float *out,
                                     const float *lse)
{
    const int64_t h = S / 2;
    ra_tensor to = ra_tensor_4d((float *)out, RA_F32, B, S, H, D);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D), tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    ra_tensor dq = ra_tensor_4d(grads, RA_F32, B, S, H, D);
    ra_tensor dk = ra_tensor_4d(grads + B * S * H * D, RA_F32, B, h, HKV, D);
    ra_tensor dv = ra_tensor_4d(grads + B * S * H * D + B * h * HKV * D, RA_F32, B, h, HKV, D);
    tk.shape[1] = tv.shape[1] = h;
    /* dout: out itself; every query row, the keys [0, S / 2) */
    return ra_attention_block_backward(ctx, &dq, &dk, &dv, &to, &tq, &tk, &tv, &to, lse, 0, 0, 0,
                                       NULL);
}

static void block_backward(trial *t, int threads)
{
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float grads[B * S * H * D + 2 * B * S * HKV * D], out[B * S * H * D], lse[B * H * S];
    ra_tensor to = ra_tensor_4d(out, RA_F32, B, S, H, D), tq = ra_tensor_4d(q, RA_F32, B, S, H, D);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D), tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    /* without the context, so that its workspace must grow in the call */
    CHECK(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, NULL) == RA_OK, "forward");
    memset(grads, SENTINEL, sizeof grads);
    ARMED(t, block_backward_call(ctx, grads, out, lse));
    if (INJECTED(t)) CHECK(is_sentinel(grads, sizeof grads), "gradients written by a failed call");
    else CHECK(!is_sentinel(grads, sizeof grads), "gradients not added to");
    ra_context_destroy(ctx);
}
static void block_backward_plain(trial *t) { block_backward(t, 0); }
static void block_backward_ctx(trial *t) { block_backward(t, 3); }

/* ---- the KV cache ---------------------------------------------------------- */

/* A cache holding S tokens per sequence, and a copy of everything in it. */
typedef struct cache_state {
    ra_kv_cache *cache;
    unsigned char *bytes; /* K then V */
    size_t n_bytes;
    int64_t length[B];
} cache_state;

static void cache_fill(cache_state *c, ra_dtype dtype)
{
    *c = (cache_state){0};
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &(ra_rope_config){.struct_size = sizeof(ra_rope_config),
                                                  .head_dim = D, .theta = 10000}) == RA_OK, "rope");
    CHECK(ra_kv_cache_create(&c->cache, B, CAP, HKV, D, dtype) == RA_OK, "cache");
    static float qa[B * S * H * D], ka[B * S * HKV * D];
    memcpy(qa, q, sizeof qa);
    memcpy(ka, k, sizeof ka);
    ra_tensor tq = ra_tensor_4d(qa, RA_F32, B, S, H, D), tk = ra_tensor_4d(ka, RA_F32, B, S, HKV, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    const int64_t n_new[B] = {S, S - 2};
    ra_positions p = {.struct_size = sizeof p};
    CHECK(ra_kv_cache_append(NULL, c->cache, rope, &tq, &tk, &tv, &p, n_new) == RA_OK, "append");
    ra_rope_destroy(rope);
}

/* The cache's storage (K, V; an 8-bit cache's codes) and, for an 8-bit
 * cache, its scales (K's, V's), read through its insides: n bytes each. */
static void cache_parts(const cache_state *c, const void *parts[4], size_t n[4])
{
    const ra_kv_cache *cache = c->cache;
    n[0] = n[1] = (size_t)(B * CAP * HKV * D) * ra_dtype_size(cache->dtype);
    n[2] = n[3] = cache->dtype == RA_I8 ? (size_t)(B * CAP * HKV) * 4
                  : cache->dtype == RA_F8E4M3 ? HKV * 4 : 0;
    parts[0] = cache->k, parts[1] = cache->v, parts[2] = cache->k_scale, parts[3] = cache->v_scale;
}

/* Records the cache's lengths and bytes. */
static void cache_snapshot(cache_state *c)
{
    const void *parts[4];
    size_t n[4];
    cache_parts(c, parts, n);
    c->n_bytes = n[0] + n[1] + n[2] + n[3];
    c->bytes = malloc(c->n_bytes);
    for (size_t i = 0, at = 0; i < 4; at += n[i], i++)
        if (n[i]) memcpy(c->bytes + at, parts[i], n[i]);
    for (int64_t b = 0; b < B; b++) c->length[b] = ra_kv_cache_length(c->cache, b);
}

/* Whether the cache still holds what cache_snapshot recorded. */
static int cache_unchanged(const cache_state *c)
{
    const void *parts[4];
    size_t n[4];
    cache_parts(c, parts, n);
    int same = 1;
    for (size_t i = 0, at = 0; i < 4; at += n[i], i++)
        same &= !n[i] || memcmp(c->bytes + at, parts[i], n[i]) == 0;
    for (int64_t b = 0; b < B; b++) same &= ra_kv_cache_length(c->cache, b) == c->length[b];
    return same;
}

static void cache_free(cache_state *c)
{
    ra_kv_cache_destroy(c->cache);
    free(c->bytes);
}

/* Appending allocates nothing. */
static void cache_append(trial *t)
{
    cache_state c;
    cache_fill(&c, RA_BF16);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &(ra_rope_config){.struct_size = sizeof(ra_rope_config),
                                                  .head_dim = D, .theta = 10000}) == RA_OK, "rope");
    static float ka[B * 1 * HKV * D];
    memcpy(ka, k, sizeof ka);
    ra_tensor tk = ra_tensor_4d(ka, RA_F32, B, 1, HKV, D), tv = ra_tensor_4d(v, RA_F32, B, 1, HKV, D);
    ra_positions p = {.struct_size = sizeof p, .start = S};
    ARMED(t, ra_kv_cache_append(NULL, c.cache, rope, NULL, &tk, &tv, &p, NULL));
    CHECK(ra_kv_cache_length(c.cache, 0) == S + 1, "length");
    ra_rope_destroy(rope);
    cache_free(&c);
}

/* ra_kv_cache_attend of 16-bit inputs (staging and decode scratch, no
 * context: both allocated): after a failure the cache, q and out are as
 * they were. */
static void cache_attend(trial *t)
{
    cache_state c;
    cache_fill(&c, RA_F16);
    cache_snapshot(&c);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &(ra_rope_config){.struct_size = sizeof(ra_rope_config),
                                                  .head_dim = D, .theta = 10000}) == RA_OK, "rope");
    static uint16_t qh[B * H * D], q0[B * H * D], kh[B * HKV * D], vh[B * HKV * D];
    ra_convert(qh, RA_BF16, q, RA_F32, B * H * D);
    ra_convert(kh, RA_BF16, k, RA_F32, B * HKV * D);
    ra_convert(vh, RA_BF16, v, RA_F32, B * HKV * D);
    memcpy(q0, qh, sizeof q0);
    static float out[B * H * D];
    memset(out, SENTINEL, sizeof out);
    ra_tensor tq = ra_tensor_4d(qh, RA_BF16, B, 1, H, D), tk = ra_tensor_4d(kh, RA_BF16, B, 1, HKV, D);
    ra_tensor tv = ra_tensor_4d(vh, RA_BF16, B, 1, HKV, D), to = ra_tensor_4d(out, RA_F32, B, 1, H, D);
    ARMED(t, ra_kv_cache_attend(NULL, c.cache, rope, &to, &tq, &tk, &tv, NULL, NULL, NULL));
    if (INJECTED(t))
        CHECK(is_sentinel(out, sizeof out) && cache_unchanged(&c) &&
              memcmp(qh, q0, sizeof q0) == 0, "a failed attend changed something");
    else
        CHECK(!is_sentinel(out, sizeof out) && ra_kv_cache_length(c.cache, 0) == S + 1,
              "attend did not append and attend");
    ra_rope_destroy(rope);
    cache_free(&c);
}

/* ra_attention_decode over a filled cache (options: NULL, or a window,
 * soft-cap and sinks): out and the cache as they were after a failure. */
static void decode_dtype(trial *t, int threads, const ra_attention_options *options,
                         ra_dtype dtype)
{
    cache_state c;
    cache_fill(&c, dtype);
    cache_snapshot(&c);
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float out[B * 2 * H * D];
    memset(out, SENTINEL, sizeof out);
    ra_tensor to = ra_tensor_4d(out, RA_F32, B, 2, H, D), tq = ra_tensor_4d(q, RA_F32, B, 2, H, D);
    ARMED(t, ra_attention_decode(ctx, c.cache, &to, &tq, NULL, options));
    if (INJECTED(t)) CHECK(is_sentinel(out, sizeof out), "out written by a failed call");
    else CHECK(!is_sentinel(out, sizeof out), "out not written");
    CHECK(cache_unchanged(&c), "decode changed the cache");
    ra_context_destroy(ctx);
    cache_free(&c);
}
static void decode(trial *t, int threads, const ra_attention_options *options)
{
    decode_dtype(t, threads, options, RA_F16);
}
static void decode_plain(trial *t) { decode(t, 0, NULL); }
static void decode_ctx(trial *t) { decode(t, 3, NULL); }
static void decode_int8_ctx(trial *t) { decode_dtype(t, 3, NULL, RA_I8); }
static void decode_fp8(trial *t) { decode_dtype(t, 0, NULL, RA_F8E4M3); }

/* Reading an 8-bit cache back and setting fp8's scales allocate nothing. */
static void cache_read_scales(trial *t)
{
    cache_state c;
    cache_fill(&c, RA_F8E4M3);
    static float kb[S * HKV * D], vb[S * HKV * D];
    ra_tensor tk = ra_tensor_4d(kb, RA_F32, 1, S, HKV, D), tv = ra_tensor_4d(vb, RA_F32, 1, S, HKV, D);
    ARMED(t, ra_kv_cache_read(c.cache, 0, 0, &tk, &tv));
    ra_kv_cache_reset(c.cache);
    const float scales[HKV] = {0.5f, 2.0f};
    CHECK(ra_kv_cache_set_scales(c.cache, scales, scales, HKV) == RA_OK, "scales");
    cache_free(&c);
}
static void decode_masked(trial *t)
{
    static const float sinks[H] = {0};
    ra_attention_options o = ra_attention_options_init();
    o.window = 3;
    o.softcap = 5;
    o.sinks = sinks;
    decode(t, 3, &o);
}

/* ---- the layer ------------------------------------------------------------- */

/* The layer's weights as bfloat16 (layer_dtype RA_BF16: the panel of
 * widened weights is one more acquisition) or float32. */
static uint16_t wq16[DIM * DIM], wk16[HKV * D * DIM], wv16[HKV * D * DIM], wo16[DIM * DIM];
static ra_dtype layer_dtype = RA_F32;

static ra_layer *make_layer(void)
{
    ra_layer_config c = layer_config();
    ra_layer_weights w = {.struct_size = sizeof w, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    if (layer_dtype == RA_BF16) {
        ra_convert(wq16, RA_BF16, wq, RA_F32, DIM * DIM);
        ra_convert(wk16, RA_BF16, wk, RA_F32, HKV * D * DIM);
        ra_convert(wv16, RA_BF16, wv, RA_F32, HKV * D * DIM);
        ra_convert(wo16, RA_BF16, wo, RA_F32, DIM * DIM);
        w.wq = (const float *)wq16, w.wk = (const float *)wk16;
        w.wv = (const float *)wv16, w.wo = (const float *)wo16;
        w.dtype = RA_BF16;
    }
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &c, &w) == RA_OK, "layer");
    return layer;
}

static void forward(trial *t, ra_attention_path path, int threads, int training)
{
    ra_layer *layer = make_layer();
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float y[B * S * DIM];
    memset(y, SENTINEL, sizeof y);
    ra_attention_options opt = {.struct_size = sizeof opt, .path = path,
                              .dropout = training ? 0.125f : 0.0f, .seed = 3};
    ARMED(t, ra_layer_forward(ctx, layer, y, x, B, S, NULL, &opt));
    if (INJECTED(t)) CHECK(is_sentinel(y, sizeof y), "y written by a failed call");
    else CHECK(!is_sentinel(y, sizeof y), "y not written");
    ra_context_destroy(ctx);
    ra_layer_destroy(layer);
}
static void forward_ref(trial *t) { forward(t, RA_PATH_REFERENCE, 0, 0); }
static void forward_flash(trial *t) { forward(t, RA_PATH_FLASH, 0, 1); }
static void forward_flash_ctx(trial *t) { forward(t, RA_PATH_FLASH, 3, 0); }

/* The cached layer: a prefill into an empty cache, or a decode step into
 * a filled one; y, the lengths and K/V as they were after a failure. */
static void forward_cached_dtype(trial *t, int prefill, int threads, ra_dtype dtype)
{
    ra_layer *layer = make_layer();
    cache_state c;
    cache_fill(&c, dtype);
    if (prefill) ra_kv_cache_reset(c.cache);
    cache_snapshot(&c);
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float y[B * S * DIM];
    memset(y, SENTINEL, sizeof y);
    int64_t seq = prefill ? S : 1;
    ARMED(t, ra_layer_forward_cached(ctx, layer, c.cache, y, x, B, seq, NULL));
    size_t y_bytes = (size_t)(B * seq * DIM) * sizeof(float);
    if (INJECTED(t)) {
        CHECK(is_sentinel(y, y_bytes), "y written by a failed call");
        CHECK(cache_unchanged(&c), "a failed call changed the cache");
    } else {
        CHECK(!is_sentinel(y, y_bytes), "y not written");
        CHECK(ra_kv_cache_length(c.cache, 1) == c.length[1] + seq, "length");
    }
    ra_context_destroy(ctx);
    cache_free(&c);
    ra_layer_destroy(layer);
}
static void forward_cached(trial *t, int prefill, int threads)
{
    forward_cached_dtype(t, prefill, threads, RA_F32);
}
static void cached_prefill(trial *t) { forward_cached(t, 1, 0); }
static void cached_prefill_int8_ctx(trial *t) { forward_cached_dtype(t, 1, 3, RA_I8); }
static void cached_decode_fp8_ctx(trial *t) { forward_cached_dtype(t, 0, 3, RA_F8E4M3); }
static void cached_prefill_ctx(trial *t) { forward_cached(t, 1, 3); }
static void cached_decode(trial *t) { forward_cached(t, 0, 0); }
static void cached_decode_ctx(trial *t) { forward_cached(t, 0, 3); }

/* ra_layer_forward_paged: a prefill of S tokens into two sequences of a
 * pool of pages of 1 (their tables grow), then an armed step; a failure
 * changes no length, page or y. */
static void forward_paged(trial *t, int threads)
{
    ra_layer *layer = make_layer();
    ra_kv_pool *pool = NULL;
    int64_t ids[2];
    CHECK(ra_kv_pool_create(&pool, 64, 1, 4, HKV, D, RA_F32) == RA_OK &&
              ra_kv_pool_add_sequence(pool, 0, &ids[0]) == RA_OK &&
              ra_kv_pool_add_sequence(pool, 0, &ids[1]) == RA_OK, "pool");
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float y[B * S * DIM];
    CHECK(ra_layer_forward_paged(ctx, layer, pool, ids, 2, y, x, S, NULL, NULL) == RA_OK,
          "prefill");
    const int64_t free_before = ra_kv_pool_free_pages(pool);
    memset(y, SENTINEL, sizeof y);
    ARMED(t, ra_layer_forward_paged(ctx, layer, pool, ids, 2, y, x, 1, NULL, NULL));
    const int64_t grown = INJECTED(t) ? 0 : 1;
    CHECK(ra_kv_pool_length(pool, ids[0]) == S + grown && ra_kv_pool_length(pool, ids[1]) == S + grown &&
              ra_kv_pool_free_pages(pool) == free_before - 2 * grown, "lengths or pages");
    CHECK(is_sentinel(y, 2 * DIM * sizeof(float)) == !grown, "y");
    ra_context_destroy(ctx);
    ra_kv_pool_destroy(pool);
    ra_layer_destroy(layer);
}
static void paged(trial *t) { forward_paged(t, 0); }
static void paged_ctx(trial *t) { forward_paged(t, 3); }

/* ra_layer_forward_train, or (phased) its steps around
 * ra_attention_forward_lse (ra_layer_step: buffers of its own). */
static ra_status train_forward(ra_context *ctx, const ra_layer *layer, float *y,
                               ra_layer_tape *tape, int phased)
{
    if (!phased) return ra_layer_forward_train(ctx, layer, y, tape, x, B, S, NULL, NULL);
    ra_layer_step *step;
    RA_TEST_TRY(ra_layer_forward_train_begin(&step, ctx, layer, y, tape, x, B, S, NULL, NULL));
    const ra_layer_step_views *sv = ra_layer_step_get_views(step);
    ra_status st = ra_attention_forward_lse(ctx, &sv->out, sv->lse, &sv->q, &sv->k, &sv->v,
                                            &sv->options);
    if (st != RA_OK) {
        ra_layer_step_cancel(step);
        return st;
    }
    return ra_layer_step_finish(step);
}

/* ra_layer_backward (dy = x), or (phased) its steps around
 * ra_attention_backward. */
static ra_status train_backward(ra_context *ctx, const ra_layer *layer, float *dx,
                                const ra_layer_grads *g, const ra_layer_tape *tape, int phased)
{
    if (!phased) return ra_layer_backward(ctx, layer, dx, g, tape, x);
    ra_layer_step *step;
    RA_TEST_TRY(ra_layer_backward_begin(&step, ctx, layer, dx, g, tape, x));
    const ra_layer_step_views *sv = ra_layer_step_get_views(step);
    ra_status st = ra_attention_backward(ctx, &sv->dq, &sv->dk, &sv->dv, &sv->dout, &sv->q,
                                         &sv->k, &sv->v, &sv->out, sv->lse, &sv->options);
    if (st != RA_OK) {
        ra_layer_step_cancel(step);
        return st;
    }
    return ra_layer_step_finish(step);
}

/* The training forward, then (when its trial's failure was not reached)
 * the backward, whole or phased: y and dx as they were after a failure. */
static void train_how(trial *t, int threads, int phased)
{
    ra_layer *layer = make_layer();
    ra_layer_tape *tape = NULL;
    CHECK(ra_layer_tape_create(&tape, layer, B * S) == RA_OK, "tape");
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float y[B * S * DIM], dx[B * S * DIM];
    static float g_wq[DIM * DIM], g_wk[HKV * D * DIM], g_wv[HKV * D * DIM], g_wo[DIM * DIM];
    ra_layer_grads g = ra_layer_grads_init();
    g.dwq = g_wq, g.dwk = g_wk, g.dwv = g_wv, g.dwo = g_wo;
    memset(y, SENTINEL, sizeof y);
    ARMED(t, train_forward(ctx, layer, y, tape, phased));
    if (INJECTED(t)) {
        CHECK(is_sentinel(y, sizeof y), "y written by a failed call");
    } else {
        memset(dx, SENTINEL, sizeof dx);
        ARMED(t, train_backward(ctx, layer, dx, &g, tape, phased));
        if (INJECTED(t)) CHECK(is_sentinel(dx, sizeof dx), "dx written by a failed call");
    }
    ra_context_destroy(ctx);
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);
}
static void train(trial *t, int threads) { train_how(t, threads, 0); }
static void train_ctx(trial *t) { train(t, 3); }
static void phased_train_ctx(trial *t) { train_how(t, 3, 1); }

/* The same with bfloat16 weights. */
static void bf16_forward_ctx(trial *t)
{
    layer_dtype = RA_BF16;
    forward_flash_ctx(t);
    layer_dtype = RA_F32;
}
static void bf16_forward(trial *t)
{
    layer_dtype = RA_BF16;
    forward_ref(t);
    layer_dtype = RA_F32;
}
static void bf16_cached_prefill(trial *t)
{
    layer_dtype = RA_BF16;
    cached_prefill(t);
    layer_dtype = RA_F32;
}
static void bf16_cached_decode_ctx(trial *t)
{
    layer_dtype = RA_BF16;
    cached_decode_ctx(t);
    layer_dtype = RA_F32;
}
static void bf16_train(trial *t)
{
    layer_dtype = RA_BF16;
    train(t, 0);
    layer_dtype = RA_F32;
}
static void bf16_train_ctx(trial *t)
{
    layer_dtype = RA_BF16;
    train(t, 3);
    layer_dtype = RA_F32;
}
static void bf16_phased_train(trial *t)
{
    layer_dtype = RA_BF16;
    train_how(t, 0, 1);
    layer_dtype = RA_F32;
}

/* ---- latent attention ------------------------------------------------------- */

/* A latent layer of H heads of Dn 8 + Dr 8, Dv 8, r 8, rq 6 over x's DIM. */
enum { MLA_R = 8, MLA_RQ = 6, MLA_DN = 8, MLA_DR = 8, MLA_DV = 8 };
static float mla_wq_a[MLA_RQ * DIM], mla_q_norm[MLA_RQ], mla_wq_b[H * D * MLA_RQ];
static float mla_wkv_a[(MLA_R + MLA_DR) * DIM], mla_kv_norm[MLA_R];
static float mla_wkv_b[H * (MLA_DN + MLA_DV) * MLA_R], mla_wo[DIM * H * MLA_DV];

static ra_status mla_layer(ra_layer **out)
{
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM;
    c.n_heads = H;
    c.head_dim = MLA_DN + MLA_DR;
    c.kv_lora_rank = MLA_R;
    c.q_lora_rank = MLA_RQ;
    c.qk_nope_head_dim = MLA_DN;
    c.v_head_dim = MLA_DV;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq_a = mla_wq_a, w.q_a_norm = mla_q_norm, w.wq_b = mla_wq_b, w.wkv_a = mla_wkv_a;
    w.kv_a_norm = mla_kv_norm, w.wkv_b = mla_wkv_b, w.wo = mla_wo;
    return ra_layer_create(out, &c, &w);
}

/* The layer, then (when its trial's failure was not reached) a latent
 * cache. */
static void mla_create(trial *t)
{
    ra_layer *layer = (ra_layer *)NOT_NULL;
    ARMED(t, mla_layer(&layer));
    ra_layer_destroy(layer);
    if (INJECTED(t)) {
        CHECK(layer == NULL, "*out not NULL after a failure");
        return;
    }
    ra_kv_cache *cache = (ra_kv_cache *)NOT_NULL;
    ARMED(t, ra_kv_cache_create_latent(&cache, B, CAP, MLA_R, MLA_DR, RA_BF16));
    if (INJECTED(t)) CHECK(cache == NULL, "*out not NULL after a failure");
    ra_kv_cache_destroy(cache);
}

/* The training forward, then (when its trial's failure was not reached)
 * the backward: y and dx as they were after a failure. */
static void mla_train(trial *t, int threads)
{
    ra_layer *layer = NULL;
    ra_layer_tape *tape = NULL;
    CHECK(mla_layer(&layer) == RA_OK && ra_layer_tape_create(&tape, layer, B * S) == RA_OK,
          "layer and tape");
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    static float y[B * S * DIM], dx[B * S * DIM];
    static float g_wq_a[sizeof mla_wq_a / 4], g_q_norm[MLA_RQ], g_wq_b[sizeof mla_wq_b / 4];
    static float g_wkv_a[sizeof mla_wkv_a / 4], g_kv_norm[MLA_R], g_wkv_b[sizeof mla_wkv_b / 4];
    static float g_wo[sizeof mla_wo / 4];
    ra_layer_grads g = ra_layer_grads_init();
    g.dwq_a = g_wq_a, g.dq_a_norm = g_q_norm, g.dwq_b = g_wq_b, g.dwkv_a = g_wkv_a;
    g.dkv_a_norm = g_kv_norm, g.dwkv_b = g_wkv_b, g.dwo = g_wo;
    memset(y, SENTINEL, sizeof y);
    ARMED(t, train_forward(ctx, layer, y, tape, 0));
    if (INJECTED(t)) {
        CHECK(is_sentinel(y, sizeof y), "y written by a failed call");
    } else {
        memset(dx, SENTINEL, sizeof dx);
        ARMED(t, train_backward(ctx, layer, dx, &g, tape, 0));
        if (INJECTED(t)) CHECK(is_sentinel(dx, sizeof dx), "dx written by a failed call");
    }
    ra_context_destroy(ctx);
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);
}
static void mla_train_plain(trial *t) { mla_train(t, 0); }
static void mla_train_ctx(trial *t) { mla_train(t, 3); }

/* A prefill into an empty latent cache, then (prefill 0) a decode step of
 * 2 tokens: y, the lengths and the rows as they were after a failure. */
static void mla_cached(trial *t, int prefill, int threads)
{
    ra_layer *layer = NULL;
    ra_kv_cache *cache = NULL;
    static float y[B * S * DIM];
    CHECK(mla_layer(&layer) == RA_OK &&
          ra_kv_cache_create_latent(&cache, B, CAP, MLA_R, MLA_DR, RA_F32) == RA_OK,
          "layer and cache");
    if (!prefill) CHECK(ra_layer_forward_cached(NULL, layer, cache, y, x, B, S, NULL) == RA_OK, "fill");
    ra_tensor kv, vv;
    CHECK(ra_kv_cache_views(cache, &kv, &vv) == RA_OK, "views");
    static float before[B * CAP * (MLA_R + MLA_DR)];
    memcpy(before, kv.data, sizeof before);
    ra_context *ctx = NULL;
    if (threads) CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
    const int64_t seq = prefill ? S : 2, length = ra_kv_cache_length(cache, 1);
    memset(y, SENTINEL, sizeof y);
    ARMED(t, ra_layer_forward_cached(ctx, layer, cache, y, x, B, seq, NULL));
    size_t y_bytes = (size_t)(B * seq * DIM) * sizeof(float);
    if (INJECTED(t)) {
        CHECK(is_sentinel(y, y_bytes), "y written by a failed call");
        CHECK(ra_kv_cache_length(cache, 1) == length && memcmp(before, kv.data, sizeof before) == 0,
              "a failed call changed the cache");
    } else {
        CHECK(ra_kv_cache_length(cache, 1) == length + seq, "length");
    }
    ra_context_destroy(ctx);
    ra_kv_cache_destroy(cache);
    ra_layer_destroy(layer);
}
static void mla_prefill(trial *t) { mla_cached(t, 1, 3); }
static void mla_decode(trial *t) { mla_cached(t, 0, 0); }
static void mla_decode_ctx(trial *t) { mla_cached(t, 0, 3); }

/* ---- file formats ------------------------------------------------------------ */

static char temp_dir[256];

static const char *tpath(const char *name)
{
    static char paths[2][512];
    static int next;
    char *p = paths[next++ % 2];
    snprintf(p, sizeof paths[0], "%s/%s", temp_dir, name);
    return p;
}

static int count_entries(void)
{
    DIR *d = opendir(temp_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* A writer's trial: after a failure neither the file nor a temporary one. */
#define WRITER_CHECK(t, name, msg, before)                                              \
    do {                                                                                \
        struct stat st_;                                                                \
        if (INJECTED(t)) {                                                              \
            CHECK(stat(tpath(name), &st_) != 0, "%s exists after a failure", name);      \
            CHECK(count_entries() == (before), "a temporary file was left behind");      \
            CHECK((msg)[0] != '\0', "no message");                                      \
        }                                                                               \
        unlink(tpath(name));                                                            \
    } while (0)

static void npy_write(trial *t)
{
    char msg[512];
    int before = count_entries();
    const int64_t shape[2] = {S, DIM};
    ARMED(t, ra_npy_write_f32(tpath("w.npy"), x, 2, shape, msg, sizeof msg));
    WRITER_CHECK(t, "w.npy", msg, before);
}

static void npy_read(trial *t)
{
    char msg[512];
    ra_npy a;
    memset(&a, SENTINEL, sizeof a);
    ARMED(t, ra_npy_read(tpath("x.npy"), &a, msg, sizeof msg));
    if (INJECTED(t)) {
        CHECK(a.data == NULL && a.count == 0, "*out not zeroed after a failure");
        CHECK(msg[0] != '\0', "no message");
    } else {
        CHECK(a.count == S * DIM && memcmp(a.data, x, sizeof(float) * S * DIM) == 0, "data");
    }
    ra_npy_free(&a);
}

static ra_st_tensor st_tensors[3];

static void st_write(trial *t)
{
    char msg[512];
    int before = count_entries();
    ARMED(t, ra_safetensors_write(tpath("w.safetensors"), st_tensors, 3, msg, sizeof msg));
    WRITER_CHECK(t, "w.safetensors", msg, before);
}

static void st_open(trial *t)
{
    char msg[512];
    ra_safetensors *st = (ra_safetensors *)NOT_NULL;
    ARMED(t, ra_safetensors_open(&st, tpath("x.safetensors"), msg, sizeof msg));
    if (INJECTED(t)) {
        CHECK(st == NULL, "*out not NULL after a failure");
        CHECK(msg[0] != '\0', "no message");
    } else {
        const ra_st_tensor *w = ra_safetensors_find(st, "layers.0.attention.wk.weight");
        CHECK(ra_safetensors_count(st) == 3 && w && w->nbytes == sizeof wk, "tensors");
    }
    ra_safetensors_close(t->status == RA_OK ? st : NULL);
}

static const char config_json[] =
    "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"max_position_embeddings\": 256, \"rope_theta\": 10000.0,"
    " \"rope_scaling\": {\"rope_type\": \"longrope\", \"original_max_position_embeddings\": 64,"
    " \"short_factor\": [1, 1, 1, 1, 2, 2, 2, 2], \"long_factor\": [1, 2, 3, 4, 5, 6, 7, 8]},"
    " \"architectures\": [\"LlamaForCausalLM\"], \"torch_dtype\": \"bfloat16\"}";

static void config_check(trial *t, const ra_hf_fields *c, const char *msg)
{
    if (INJECTED(t)) {
        CHECK(c->hidden_size == 0 && !c->has_rope && c->rope.short_factor == NULL,
              "*out not zeroed after a failure");
        CHECK(msg[0] != '\0', "no message");
    } else {
        CHECK(c->hidden_size == DIM && c->rope.n_long_factor == D / 2, "fields");
    }
}

static void config_parse(trial *t)
{
    char msg[512];
    ra_hf_fields c;
    ARMED(t, ra_hf_fields_parse(config_json, sizeof config_json - 1, &c, msg, sizeof msg));
    config_check(t, &c, msg);
    ra_hf_fields_free(&c);
}

static void config_read(trial *t)
{
    char msg[512];
    ra_hf_fields c;
    ARMED(t, ra_hf_fields_read(tpath("config.json"), &c, msg, sizeof msg));
    config_check(t, &c, msg);
    ra_hf_fields_free(&c);
}

static void rope_parse(trial *t)
{
    static const char json[] = "{\"rope_type\": \"yarn\", \"factor\": 4,"
                               " \"short_factor\": [1, 2], \"long_factor\": [3, 4, 5]}";
    char msg[512];
    ra_hf_rope r;
    ARMED(t, ra_hf_rope_parse(json, sizeof json - 1, &r, msg, sizeof msg));
    if (INJECTED(t))
        CHECK(r.type == RA_ROPE_DEFAULT && r.short_factor == NULL && !r.has_factor,
              "*out not zeroed after a failure");
    else
        CHECK(r.type == RA_ROPE_YARN && r.n_long_factor == 3, "fields");
    ra_hf_rope_free(&r);
}

/* The checkpoint library: a layer of hf.safetensors (Meta's names, four
 * projections), its config and gradient buffers, each step's failure
 * leaving the later ones' outputs NULL. */
static ra_status hf_steps(ra_hf_checkpoint **ckpt, ra_hf_config **config, ra_hf_layer **layer,
                          ra_hf_grads **grads)
{
    ra_hf_options o = ra_hf_options_init();
    o.n_tokens = S;
    RA_TEST_TRY(ra_hf_checkpoint_open(ckpt, tpath("hf.safetensors")));
    RA_TEST_TRY(ra_hf_config_open(config, tpath("config.json")));
    RA_TEST_TRY(ra_hf_layer_create(layer, *ckpt, *config, &o));
    return ra_hf_grads_create(grads, *layer);
}

static void hf_layer(trial *t)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    ra_hf_layer *layer = NULL;
    ra_hf_grads *grads = NULL;
    ARMED(t, hf_steps(&ckpt, &config, &layer, &grads));
    if (INJECTED(t)) {
        CHECK(grads == NULL, "*out not NULL after a failure");
        CHECK(ra_hf_last_error()[0] != '\0', "no message");
    } else {
        CHECK(ra_hf_layer_tensor_count(layer) == 4 && ra_hf_grads_tensor(grads, 3) != NULL,
              "tensors");
    }
    ra_hf_grads_destroy(grads);
    ra_hf_layer_destroy(layer);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

/* A block-FP8 checkpoint of a layer of that shape (Hugging Face's names,
 * [24, 40] blocks: partial at the edges, scales [3, 2] and [2, 2]) and its
 * config (modules_to_not_convert: strings the reader copies; a model_type,
 * which gives these names their layout), dequantized into bf16 at load. */
static const char fp8_config_json[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"torch_dtype\": \"bfloat16\","
    " \"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\","
    " \"activation_scheme\": \"dynamic\", \"weight_block_size\": [24, 40],"
    " \"modules_to_not_convert\": [\"lm_head\", \"mlp.gate\"]}}";
static uint8_t fp8_codes[DIM * DIM];
static float fp8_scales[3 * 2];

static ra_status fp8_steps(ra_hf_checkpoint **ckpt, ra_hf_config **config, ra_hf_layer **layer)
{
    ra_hf_options o = ra_hf_options_init();
    o.n_tokens = S;
    RA_TEST_TRY(ra_hf_checkpoint_open(ckpt, tpath("fp8.safetensors")));
    RA_TEST_TRY(ra_hf_config_parse(config, fp8_config_json, sizeof fp8_config_json - 1));
    return ra_hf_layer_create(layer, *ckpt, *config, &o);
}

static void hf_fp8_layer(trial *t)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    ra_hf_layer *layer = NULL;
    ARMED(t, fp8_steps(&ckpt, &config, &layer));
    if (INJECTED(t)) {
        CHECK(layer == NULL, "*out not NULL after a failure");
        CHECK(ra_hf_last_error()[0] != '\0', "no message");
    } else {
        CHECK(ra_hf_layer_tensor_count(layer) == 4 &&
                  ra_layer_get_config(ra_hf_layer_get(layer))->dim == DIM, "tensors");
    }
    ra_hf_layer_destroy(layer);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

static void write_fp8_fixture(void)
{
    char msg[512];
    for (size_t i = 0; i < sizeof fp8_codes; i++)
        fp8_codes[i] = (uint8_t)((i * 37) % 126) | (uint8_t)(i % 2 ? 0x80 : 0); /* no NaN */
    for (size_t i = 0; i < sizeof fp8_scales / sizeof fp8_scales[0]; i++)
        fp8_scales[i] = 0.001f * (float)(i + 1);
    static const char *const names[4][2] = {
        {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight_scale_inv"},
        {"model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.k_proj.weight_scale_inv"},
        {"model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.v_proj.weight_scale_inv"},
        {"model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.o_proj.weight_scale_inv"}};
    ra_st_tensor ts[8];
    for (int p = 0; p < 4; p++) {
        int64_t rows = p == 1 || p == 2 ? HKV * D : DIM, srows = p == 1 || p == 2 ? 2 : 3;
        ts[2 * p] = (ra_st_tensor){names[p][0], RA_ST_F8_E4M3, 2, {rows, DIM}, rows * DIM,
                                   fp8_codes, (size_t)(rows * DIM)};
        ts[2 * p + 1] = (ra_st_tensor){names[p][1], RA_ST_F32, 2, {srows, 2}, srows * 2,
                                       fp8_scales, (size_t)srows * 2 * sizeof(float)};
    }
    CHECK(ra_safetensors_write(tpath("fp8.safetensors"), ts, 8, msg, sizeof msg) == RA_OK, "%s",
          msg);
}

/* The readers' inputs, written once before their sweeps. */
static void write_fixtures(void)
{
    char msg[512];
    const int64_t shape[2] = {S, DIM};
    CHECK(ra_npy_write_f32(tpath("x.npy"), x, 2, shape, msg, sizeof msg) == RA_OK, "%s", msg);
    ra_st_tensor ts[3] = {
        {"layers.0.attention.wq.weight", RA_ST_F32, 2, {DIM, DIM}, DIM * DIM, wq, sizeof wq},
        {"layers.0.attention.wk.weight", RA_ST_F32, 2, {HKV * D, DIM}, HKV * D * DIM, wk, sizeof wk},
        {"layers.0.attention.wv.weight", RA_ST_F32, 2, {HKV * D, DIM}, HKV * D * DIM, wv, sizeof wv},
    };
    memcpy(st_tensors, ts, sizeof ts);
    CHECK(ra_safetensors_write(tpath("x.safetensors"), st_tensors, 3, msg, sizeof msg) == RA_OK,
          "%s", msg);
    ra_st_tensor layer[4] = {ts[0], ts[1], ts[2],
                             {"layers.0.attention.wo.weight", RA_ST_F32, 2, {DIM, DIM},
                              DIM * DIM, wo, sizeof wo}};
    CHECK(ra_safetensors_write(tpath("hf.safetensors"), layer, 4, msg, sizeof msg) == RA_OK,
          "%s", msg);
    FILE *f = fopen(tpath("config.json"), "wb");
    CHECK(f && fwrite(config_json, 1, sizeof config_json - 1, f) == sizeof config_json - 1,
          "config.json");
    if (f) fclose(f);
}

/* ---- main ------------------------------------------------------------------ */

static void test_creation(void)
{
    sweep("ra_context_create(1 thread)", context_1, 0);
    sweep("ra_context_create(4 threads)", context_4, 1);
    sweep("ra_rope_create(default, table)", rope_default, 0);
    sweep("ra_rope_create(no table)", rope_no_table, 0);
    sweep("ra_rope_create(longrope)", rope_longrope, 0);
    sweep("ra_rope_create(mrope)", rope_mrope, 0);
    sweep("ra_rope_create(axial)", rope_axial, 0);
    sweep("ra_layer_create", layer_create, 0);
    sweep("ra_kv_cache_create", cache_create, 0);
    sweep("ra_kv_cache_create_window", cache_create_window, 0);
    sweep("ra_kv_cache_create(int8)", cache_create_int8, 0);
    sweep("ra_kv_cache_create_window(fp8)", cache_create_window_fp8, 0);
}

static void test_rope_and_attention(void)
{
    sweep("ra_rope_apply, ra_rope_table", rope_apply, 0);
    sweep("ra_attention(reference)", attention_ref, 0);
    sweep("ra_attention(reference, context)", attention_ref_ctx, 0);
    sweep("ra_attention(flash)", attention_flash, 0);
    sweep("ra_attention(flash, context)", attention_flash_ctx, 0);
    sweep("ra_attention(flash, context, bf16 q k v)", attention_flash_bf16, 0);
    sweep("ra_attention_block_backward", block_backward_plain, 0);
    sweep("ra_attention_block_backward(context)", block_backward_ctx, 0);
}

static void test_cache(void)
{
    sweep("ra_kv_cache_append", cache_append, 0);
    sweep("ra_kv_cache_attend(bf16)", cache_attend, 0);
    sweep("ra_attention_decode", decode_plain, 0);
    sweep("ra_attention_decode(context)", decode_ctx, 0);
    sweep("ra_attention_decode(window, softcap, sinks)", decode_masked, 0);
    sweep("ra_attention_decode(int8, context)", decode_int8_ctx, 0);
    sweep("ra_attention_decode(fp8)", decode_fp8, 0);
    sweep("ra_kv_cache_read, ra_kv_cache_set_scales", cache_read_scales, 0);
    sweep("ra_kv_pool_create(int8)", pool_create, 0);
    sweep("ra_kv_pool_fork", pool_fork, 0);
    sweep("ra_kv_pool_append", pool_append, 0);
    sweep("ra_kv_pool_append(context)", pool_append_ctx, 0);
    sweep("ra_attention_decode_paged", pool_decode, 0);
    sweep("ra_attention_decode_paged(context)", pool_decode_ctx, 0);
}

static void test_layer(void)
{
    sweep("ra_layer_forward(reference)", forward_ref, 0);
    sweep("ra_layer_forward(flash, training)", forward_flash, 0);
    sweep("ra_layer_forward(flash, context)", forward_flash_ctx, 0);
    sweep("ra_layer_forward_cached(prefill)", cached_prefill, 0);
    sweep("ra_layer_forward_cached(prefill, context)", cached_prefill_ctx, 0);
    sweep("ra_layer_forward_cached(decode)", cached_decode, 0);
    sweep("ra_layer_forward_cached(decode, context)", cached_decode_ctx, 0);
    sweep("ra_layer_forward_paged", paged, 0);
    sweep("ra_layer_forward_paged(context)", paged_ctx, 0);
    sweep("ra_layer_forward_cached(int8, prefill, context)", cached_prefill_int8_ctx, 0);
    sweep("ra_layer_forward_cached(fp8, decode, context)", cached_decode_fp8_ctx, 0);
    sweep("ra_layer_forward_train, backward (context)", train_ctx, 0);
    sweep("ra_layer_step: forward_train, backward (context)", phased_train_ctx, 0);
    sweep("bf16 weights: ra_layer_forward(reference)", bf16_forward, 0);
    sweep("bf16 weights: ra_layer_forward(flash, context)", bf16_forward_ctx, 0);
    sweep("bf16 weights: ra_layer_forward_cached(prefill)", bf16_cached_prefill, 0);
    sweep("bf16 weights: ra_layer_forward_cached(decode, context)", bf16_cached_decode_ctx, 0);
    sweep("bf16 weights: forward_train, backward", bf16_train, 0);
    sweep("bf16 weights: forward_train, backward (context)", bf16_train_ctx, 0);
    sweep("bf16 weights: ra_layer_step: forward_train, backward", bf16_phased_train, 0);
    sweep("latent: ra_layer_create, cache", mla_create, 0);
    sweep("latent: forward_train, backward", mla_train_plain, 0);
    sweep("latent: forward_train, backward (context)", mla_train_ctx, 0);
    sweep("latent: forward_cached(prefill, context)", mla_prefill, 0);
    sweep("latent: forward_cached(decode)", mla_decode, 0);
    sweep("latent: forward_cached(decode, context)", mla_decode_ctx, 0);
}

static void test_files(void)
{
    write_fixtures();
    sweep("ra_npy_write_f32", npy_write, 0);
    sweep("ra_npy_read", npy_read, 0);
    sweep("ra_safetensors_write", st_write, 0);
    sweep("ra_safetensors_open", st_open, 0);
    sweep("ra_hf_fields_parse", config_parse, 0);
    sweep("ra_hf_fields_read", config_read, 0);
    sweep("ra_hf_rope_parse", rope_parse, 0);
    sweep("ra_hf_checkpoint_open .. ra_hf_grads_create", hf_layer, 0);
    write_fp8_fixture();
    sweep("block FP8: ra_hf_checkpoint_open .. ra_hf_layer_create", hf_fp8_layer, 0);
}

int main(void)
{
    cJSON_InitHooks(&(cJSON_Hooks){ra_malloc, ra_free});
    ra_test_fill(q, sizeof q / sizeof q[0], 1);
    ra_test_fill(k, sizeof k / sizeof k[0], 2);
    ra_test_fill(v, sizeof v / sizeof v[0], 3);
    ra_test_fill(x, sizeof x / sizeof x[0], 4);
    ra_test_fill(wq, sizeof wq / sizeof wq[0], 5);
    ra_test_fill(wk, sizeof wk / sizeof wk[0], 6);
    ra_test_fill(wv, sizeof wv / sizeof wv[0], 7);
    ra_test_fill(wo, sizeof wo / sizeof wo[0], 8);
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/ra_test_alloc.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(temp_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_creation);
    RUN(test_rope_and_attention);
    RUN(test_cache);
    RUN(test_layer);
    RUN(test_files);
    unlink(tpath("x.npy"));
    unlink(tpath("x.safetensors"));
    unlink(tpath("hf.safetensors"));
    unlink(tpath("fp8.safetensors"));
    unlink(tpath("config.json"));
    rmdir(temp_dir);
    printf("  %-42s %3lld failure points\n", "total", (long long)total_points);
    return ra_test_summary("alloc_failure");
}
