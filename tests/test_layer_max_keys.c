/*
 * test_layer_max_keys.c — ra_layer_config.max_keys: every layer call
 * refuses a query that would attend to more keys than the bound
 * (RA_ERR_UNSUPPORTED naming max_keys, nothing written), and runs at the
 * bound with the same bits as the layer without it:
 *   - ra_layer_forward: causal (query i attends to i + 1 keys), a window
 *     (at most W keys: any length runs), a padding mask (padding keys are
 *     not attended to: a longer padded row runs);
 *   - ra_layer_forward_cached: a prefill, then decode steps (every token
 *     cached counts), the cache left as it was when refused;
 *   - ra_layer_forward_paged: the same on a pool's sequence;
 *   - ra_layer_forward_train and ra_layer_backward (its gradients);
 *   - a phased cached step (ra_layer_forward_cached_begin): refused (its
 *     keys are the caller's); max_keys < 0: RA_ERR_ARGUMENT.
 */
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { DIM = 16, H = 2, HKV = 1, D = 8, K = 5, S_MAX = 8 };

static float wq[H * D * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * H * D];
static float x[S_MAX * DIM];

/* The test's layer with max_keys and window (0: none). */
static ra_layer *make_layer(int64_t max_keys, int64_t window)
{
    ra_test_fill(wq, sizeof wq / sizeof *wq, 1);
    ra_test_fill(wk, sizeof wk / sizeof *wk, 2);
    ra_test_fill(wv, sizeof wv / sizeof *wv, 3);
    ra_test_fill(wo, sizeof wo / sizeof *wo, 4);
    ra_test_fill(x, sizeof x / sizeof *x, 5);
    ra_rope_config rc = ra_rope_config_default(0);
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = H, c.n_kv_heads = HKV, c.head_dim = D, c.rope = &rc;
    c.max_keys = max_keys, c.window = window;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo;
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &c, &w) == RA_OK, "layer: %s", ra_last_error());
    return layer;
}

static int refused(ra_status st)
{
    return st == RA_ERR_UNSUPPORTED && strstr(ra_last_error(), "max_keys") != NULL;
}

/* Whether y's n floats are all v (nothing written). */
static int all_equal(const float *y, int n, float v)
{
    for (int i = 0; i < n; i++)
        if (y[i] != v) return 0;
    return 1;
}

static void test_forward(void)
{
    ra_layer *bounded = make_layer(K, 0), *free_ = make_layer(0, 0);
    float y[S_MAX * DIM], want[S_MAX * DIM];
    CHECK(ra_layer_forward(NULL, bounded, y, x, 1, K, NULL, NULL) == RA_OK, "at max_keys: %s",
          ra_last_error());
    CHECK(ra_layer_forward(NULL, free_, want, x, 1, K, NULL, NULL) == RA_OK, "unbounded");
    CHECK(memcmp(y, want, K * DIM * sizeof(float)) == 0, "at max_keys: not the same bits");
    for (int i = 0; i < S_MAX * DIM; i++) y[i] = 7.0f;
    CHECK(refused(ra_layer_forward(NULL, bounded, y, x, 1, K + 1, NULL, NULL)),
          "one key past max_keys: %s", ra_last_error());
    CHECK(all_equal(y, S_MAX * DIM, 7.0f), "refused, y written");
    /* padding: row 0's first token is padding, so its last query attends
     * to K keys of K + 1 */
    uint8_t pad[K + 1] = {0, 1, 1, 1, 1, 1};
    ra_attention_options o = ra_attention_options_init();
    o.padding_mask = pad;
    CHECK(ra_layer_forward(NULL, bounded, y, x, 1, K + 1, NULL, &o) == RA_OK,
          "padded to K + 1: %s", ra_last_error());
    CHECK(ra_layer_forward(NULL, free_, want, x, 1, K + 1, NULL, &o) == RA_OK, "unbounded");
    CHECK(memcmp(y, want, (K + 1) * DIM * sizeof(float)) == 0, "padded: not the same bits");
    pad[0] = 1;
    CHECK(refused(ra_layer_forward(NULL, bounded, y, x, 1, K + 1, NULL, &o)),
          "unpadded K + 1: %s", ra_last_error());
    ra_layer_destroy(bounded);
    ra_layer_destroy(free_);
}

static void test_window(void)
{
    ra_layer *bounded = make_layer(3, 3), *free_ = make_layer(0, 3), *tight = make_layer(2, 3);
    float y[S_MAX * DIM], want[S_MAX * DIM];
    CHECK(ra_layer_forward(NULL, bounded, y, x, 1, S_MAX, NULL, NULL) == RA_OK,
          "window 3, max_keys 3: %s", ra_last_error());
    CHECK(ra_layer_forward(NULL, free_, want, x, 1, S_MAX, NULL, NULL) == RA_OK, "unbounded");
    CHECK(memcmp(y, want, sizeof y) == 0, "window: not the same bits");
    CHECK(refused(ra_layer_forward(NULL, tight, y, x, 1, 3, NULL, NULL)),
          "window 3, max_keys 2: %s", ra_last_error());
    ra_kv_cache *cache = NULL;
    CHECK(ra_kv_cache_create(&cache, 1, S_MAX + 4, HKV, D, RA_F32) == RA_OK, "cache");
    for (int s = 0; s < S_MAX + 4; s++) /* steps: the window bounds them */
        CHECK(ra_layer_forward_cached(NULL, bounded, cache, y, x + (s % S_MAX) * DIM, 1, 1,
                                      NULL) == RA_OK, "step %d: %s", s, ra_last_error());
    ra_kv_cache_destroy(cache);
    ra_layer_destroy(bounded);
    ra_layer_destroy(free_);
    ra_layer_destroy(tight);
}

static void test_cached(void)
{
    ra_layer *bounded = make_layer(K, 0), *free_ = make_layer(0, 0);
    ra_kv_cache *a = NULL, *b = NULL;
    CHECK(ra_kv_cache_create(&a, 1, S_MAX, HKV, D, RA_F32) == RA_OK, "cache");
    CHECK(ra_kv_cache_create(&b, 1, S_MAX, HKV, D, RA_F32) == RA_OK, "cache");
    float y[S_MAX * DIM], want[S_MAX * DIM];
    CHECK(refused(ra_layer_forward_cached(NULL, bounded, a, y, x, 1, K + 1, NULL)),
          "prefill of K + 1: %s", ra_last_error());
    CHECK(ra_kv_cache_length(a, 0) == 0, "refused prefill appended");
    /* a prefill of 3, then steps to the bound */
    for (int64_t at = 0, n = 3; at < K; at += n, n = 1) {
        CHECK(ra_layer_forward_cached(NULL, bounded, a, y, x + at * DIM, 1, n, NULL) == RA_OK,
              "to %lld: %s", (long long)(at + n), ra_last_error());
        CHECK(ra_layer_forward_cached(NULL, free_, b, want, x + at * DIM, 1, n, NULL) == RA_OK,
              "unbounded");
        CHECK(memcmp(y, want, (size_t)n * DIM * sizeof(float)) == 0, "cached to %lld: not the "
              "same bits", (long long)(at + n));
    }
    for (int i = 0; i < DIM; i++) y[i] = 7.0f;
    CHECK(refused(ra_layer_forward_cached(NULL, bounded, a, y, x + K * DIM, 1, 1, NULL)),
          "step past max_keys: %s", ra_last_error());
    CHECK(ra_kv_cache_length(a, 0) == K && all_equal(y, DIM, 7.0f), "refused step wrote");
    ra_kv_cache_destroy(a);
    ra_kv_cache_destroy(b);
    ra_layer_destroy(bounded);
    ra_layer_destroy(free_);
}

static void test_paged(void)
{
    ra_layer *bounded = make_layer(K, 0), *free_ = make_layer(0, 0);
    ra_kv_pool *pa = NULL, *pb = NULL;
    int64_t ia = -1, ib = -1;
    CHECK(ra_kv_pool_create(&pa, 8, 2, 2, HKV, D, RA_F32) == RA_OK, "pool");
    CHECK(ra_kv_pool_create(&pb, 8, 2, 2, HKV, D, RA_F32) == RA_OK, "pool");
    CHECK(ra_kv_pool_add_sequence(pa, 0, &ia) == RA_OK && ra_kv_pool_add_sequence(pb, 0, &ib)
          == RA_OK, "sequences");
    float y[S_MAX * DIM], want[S_MAX * DIM];
    for (int64_t at = 0, n = 4; at < K; at += n, n = 1) {
        CHECK(ra_layer_forward_paged(NULL, bounded, pa, &ia, 1, y, x + at * DIM, n, NULL, NULL)
              == RA_OK, "to %lld: %s", (long long)(at + n), ra_last_error());
        CHECK(ra_layer_forward_paged(NULL, free_, pb, &ib, 1, want, x + at * DIM, n, NULL, NULL)
              == RA_OK, "unbounded");
        CHECK(memcmp(y, want, (size_t)n * DIM * sizeof(float)) == 0, "paged: not the same bits");
    }
    for (int i = 0; i < DIM; i++) y[i] = 7.0f;
    CHECK(refused(ra_layer_forward_paged(NULL, bounded, pa, &ia, 1, y, x + K * DIM, 1, NULL,
                                         NULL)), "step past max_keys: %s", ra_last_error());
    CHECK(ra_kv_pool_length(pa, ia) == K && all_equal(y, DIM, 7.0f), "refused step wrote");
    /* a row with no new token attends to nothing */
    const int64_t none = 0;
    CHECK(ra_layer_forward_paged(NULL, bounded, pa, &ia, 1, y, x, 1, &none, NULL) == RA_OK,
          "n_new 0: %s", ra_last_error());
    ra_kv_pool_destroy(pa);
    ra_kv_pool_destroy(pb);
    ra_layer_destroy(bounded);
    ra_layer_destroy(free_);
}

/* The gradients of layer at seq tokens into g's 4 arrays. */
static ra_status train(ra_layer *layer, int64_t seq, float (*g)[H * D * DIM], float *dx)
{
    ra_layer_tape *tape = NULL;
    float y[S_MAX * DIM], dy[S_MAX * DIM];
    ra_test_fill(dy, S_MAX * DIM, 6);
    ra_status st = ra_layer_tape_create(&tape, layer, S_MAX);
    if (st == RA_OK) st = ra_layer_forward_train(NULL, layer, y, tape, x, 1, seq, NULL, NULL);
    ra_layer_grads grads = ra_layer_grads_init();
    grads.dwq = g[0], grads.dwk = g[1], grads.dwv = g[2], grads.dwo = g[3];
    if (st == RA_OK) st = ra_layer_backward(NULL, layer, dx, &grads, tape, dy);
    ra_layer_tape_destroy(tape);
    return st;
}

static void test_train(void)
{
    ra_layer *bounded = make_layer(K, 0), *free_ = make_layer(0, 0);
    static float g[4][H * D * DIM], want[4][H * D * DIM];
    float dx[S_MAX * DIM], want_dx[S_MAX * DIM];
    memset(g, 0, sizeof g);
    memset(want, 0, sizeof want);
    CHECK(train(bounded, K, g, dx) == RA_OK, "at max_keys: %s", ra_last_error());
    CHECK(train(free_, K, want, want_dx) == RA_OK, "unbounded");
    CHECK(memcmp(g, want, sizeof g) == 0 && memcmp(dx, want_dx, K * DIM * sizeof(float)) == 0,
          "gradients at max_keys: not the same bits");
    CHECK(refused(train(bounded, K + 1, g, dx)), "train past max_keys: %s", ra_last_error());
    ra_layer_destroy(bounded);
    ra_layer_destroy(free_);
}

static void test_refusals(void)
{
    ra_rope_config rc = ra_rope_config_default(0);
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = H, c.rope = &rc, c.max_keys = -1;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wq, w.wv = wq, w.wo = wo;
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &c, &w) == RA_ERR_ARGUMENT &&
          strstr(ra_last_error(), "max_keys"), "max_keys -1: %s", ra_last_error());
    ra_layer *bounded = make_layer(K, 0);
    float y[DIM];
    ra_positions pos = ra_positions_start(0);
    ra_layer_step *step = NULL;
    CHECK(refused(ra_layer_forward_cached_begin(&step, NULL, bounded, y, x, 1, 1, &pos)) &&
              !step, "a phased cached step: %s", ra_last_error());
    ra_layer_destroy(bounded);
}

static void body(void)
{
    RUN(test_forward);
    RUN(test_window);
    RUN(test_cached);
    RUN(test_paged);
    RUN(test_train);
}

int main(void)
{
    ra_test_each_isa(body);
    RUN(test_refusals);
    return ra_test_summary("layer_max_keys");
}
