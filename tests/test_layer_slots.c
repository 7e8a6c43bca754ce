/*
 * test_layer_slots.c — ra_layer_config.positions_are_slots: every layer
 * call whose real query has a position other than its slot (its index in
 * its row, after the tokens its cache or pool held) is RA_ERR_UNSUPPORTED
 * naming the option, the query, its row and both numbers, with nothing
 * written; positions equal to the slots run with the same bits as the
 * layer without the option:
 *   - ra_layer_forward: positions from 0 (NULL or given) run; a start of 1,
 *     a position that restarts (packed), left padding with Hugging Face's
 *     positions (0 at the first real token) refused; a padding query's
 *     position is not checked;
 *   - ra_layer_forward_cached: a prefill and a step at the cache's length
 *     run (NULL positions continue it), a step at another position refused
 *     with the cache left as it was;
 *   - ra_layer_forward_paged: the same on a pool's sequence;
 *   - ra_layer_forward_train (and so ra_layer_backward, from its tape);
 *   - max_keys counts slots: a padded row whose real keys fit the bound
 *     and whose slots do not is refused;
 *   - a phased cached step (ra_layer_forward_cached_begin): refused.
 */
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { DIM = 16, H = 2, HKV = 1, D = 8, S = 6 };

static float wq[H * D * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * H * D];
static float x[S * DIM];

/* The test's layer: positions_are_slots set or not, max_keys (0: none). */
static ra_layer *make_layer(int slots, int64_t max_keys)
{
    ra_test_fill(wq, sizeof wq / sizeof *wq, 1);
    ra_test_fill(wk, sizeof wk / sizeof *wk, 2);
    ra_test_fill(wv, sizeof wv / sizeof *wv, 3);
    ra_test_fill(wo, sizeof wo / sizeof *wo, 4);
    ra_test_fill(x, sizeof x / sizeof *x, 5);
    ra_rope_config rc = ra_rope_config_default(0);
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = H, c.n_kv_heads = HKV, c.head_dim = D, c.rope = &rc;
    c.positions_are_slots = slots, c.max_keys = max_keys;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo;
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &c, &w) == RA_OK, "layer: %s", ra_last_error());
    return layer;
}

/* Refused naming the option and, where given, the message's detail. */
static int refused(ra_status st, const char *detail)
{
    const char *e = ra_last_error();
    return st == RA_ERR_UNSUPPORTED && strstr(e, "positions_are_slots") != NULL &&
           (!detail || strstr(e, detail) != NULL);
}

/* y's n floats set to 7, and whether they are all 7 (nothing written). */
static void poison(float *y, int n)
{
    for (int i = 0; i < n; i++) y[i] = 7.0f;
}

static int untouched(const float *y, int n)
{
    for (int i = 0; i < n; i++)
        if (y[i] != 7.0f) return 0;
    return 1;
}

/* ids [S] as positions of every row */
static ra_positions ids_of(const int64_t *ids)
{
    ra_positions p = ra_positions_start(0);
    p.ids = ids;
    return p;
}

static void test_forward(void)
{
    ra_layer *slots = make_layer(1, 0), *free_ = make_layer(0, 0);
    float y[S * DIM], want[S * DIM];
    CHECK(ra_layer_forward(NULL, slots, y, x, 1, S, NULL, NULL) == RA_OK, "slots: %s",
          ra_last_error());
    CHECK(ra_layer_forward(NULL, free_, want, x, 1, S, NULL, NULL) == RA_OK, "free");
    CHECK(memcmp(y, want, sizeof y) == 0, "slots: not the same bits");
    const int64_t same[S] = {0, 1, 2, 3, 4, 5}, restart[S] = {0, 1, 2, 0, 1, 2};
    ra_positions p = ids_of(same);
    CHECK(ra_layer_forward(NULL, slots, y, x, 1, S, &p, NULL) == RA_OK, "ids 0..5: %s",
          ra_last_error());
    poison(y, S * DIM);
    ra_positions start = ra_positions_start(1);
    CHECK(refused(ra_layer_forward(NULL, slots, y, x, 1, S, &start, NULL),
                  "query 0 of sequence 0 has position 1, not its slot 0"),
          "start 1: %s", ra_last_error());
    p = ids_of(restart);
    CHECK(refused(ra_layer_forward(NULL, slots, y, x, 1, S, &p, NULL),
                  "query 3 of sequence 0 has position 0, not its slot 3"),
          "restarted: %s", ra_last_error());
    CHECK(untouched(y, S * DIM), "refused, y written");
    /* left padding: Hugging Face's positions start at the first real
     * token (refused); the padding query's own position is not checked */
    uint8_t pad[S] = {0, 1, 1, 1, 1, 1};
    ra_attention_options o = ra_attention_options_init();
    o.padding_mask = pad;
    const int64_t hf[S] = {1, 0, 1, 2, 3, 4}, pad_free[S] = {9, 1, 2, 3, 4, 5};
    p = ids_of(hf);
    CHECK(refused(ra_layer_forward(NULL, slots, y, x, 1, S, &p, &o),
                  "query 1 of sequence 0 has position 0, not its slot 1"),
          "left padding: %s", ra_last_error());
    CHECK(untouched(y, S * DIM), "refused, y written");
    p = ids_of(pad_free);
    CHECK(ra_layer_forward(NULL, slots, y, x, 1, S, &p, &o) == RA_OK, "padding query at 9: %s",
          ra_last_error());
    CHECK(ra_layer_forward(NULL, free_, want, x, 1, S, &p, &o) == RA_OK, "free");
    CHECK(memcmp(y, want, sizeof y) == 0, "padded: not the same bits");
    /* the second row's slots restart at 0 */
    float y2[2 * 3 * DIM];
    const int64_t rows[6] = {0, 1, 2, 0, 1, 2}, shifted[6] = {0, 1, 2, 0, 1, 3};
    p = ids_of(rows);
    CHECK(ra_layer_forward(NULL, slots, y2, x, 2, 3, &p, NULL) == RA_OK, "2 rows: %s",
          ra_last_error());
    p = ids_of(shifted);
    CHECK(refused(ra_layer_forward(NULL, slots, y2, x, 2, 3, &p, NULL),
                  "query 2 of sequence 1 has position 3, not its slot 2"),
          "row 1 shifted: %s", ra_last_error());
    ra_layer_destroy(slots);
    ra_layer_destroy(free_);
}

/* max_keys with positions_are_slots counts every slot: padding too. */
static void test_keys_by_slot(void)
{
    ra_layer *slots = make_layer(1, S - 1), *by_mask = make_layer(0, S - 1);
    float y[S * DIM];
    uint8_t pad[S] = {0, 1, 1, 1, 1, 1};
    ra_attention_options o = ra_attention_options_init();
    o.padding_mask = pad;
    CHECK(ra_layer_forward(NULL, by_mask, y, x, 1, S, NULL, &o) == RA_OK, "by mask: %s",
          ra_last_error());
    poison(y, S * DIM);
    ra_status st = ra_layer_forward(NULL, slots, y, x, 1, S, NULL, &o);
    CHECK(st == RA_ERR_UNSUPPORTED && strstr(ra_last_error(), "max_keys 5: query 5 of sequence "
          "0 attends to 6 keys"), "slots past max_keys: %s", ra_last_error());
    CHECK(untouched(y, S * DIM), "refused, y written");
    ra_layer_destroy(slots);
    ra_layer_destroy(by_mask);
}

static void test_cached(void)
{
    ra_layer *slots = make_layer(1, 0), *free_ = make_layer(0, 0);
    ra_kv_cache *a = NULL, *b = NULL;
    CHECK(ra_kv_cache_create(&a, 1, S, HKV, D, RA_F32) == RA_OK, "cache");
    CHECK(ra_kv_cache_create(&b, 1, S, HKV, D, RA_F32) == RA_OK, "cache");
    float y[S * DIM], want[S * DIM];
    ra_positions one = ra_positions_start(1), at3 = ra_positions_start(3);
    CHECK(refused(ra_layer_forward_cached(NULL, slots, a, y, x, 1, 3, &one),
                  "query 0 of sequence 0 has position 1, not its slot 0"),
          "prefill at 1: %s", ra_last_error());
    CHECK(ra_kv_cache_length(a, 0) == 0, "refused prefill appended");
    ra_positions zero = ra_positions_start(0);
    CHECK(ra_layer_forward_cached(NULL, slots, a, y, x, 1, 3, &zero) == RA_OK, "prefill: %s",
          ra_last_error());
    CHECK(ra_layer_forward_cached(NULL, free_, b, want, x, 1, 3, NULL) == RA_OK, "free");
    CHECK(memcmp(y, want, 3 * DIM * sizeof(float)) == 0, "prefill: not the same bits");
    poison(y, DIM);
    CHECK(refused(ra_layer_forward_cached(NULL, slots, a, y, x + 3 * DIM, 1, 1, &one),
                  "query 0 of sequence 0 has position 1, not its slot 3"),
          "step at 1: %s", ra_last_error());
    CHECK(ra_kv_cache_length(a, 0) == 3 && untouched(y, DIM), "refused step wrote");
    CHECK(ra_layer_forward_cached(NULL, slots, a, y, x + 3 * DIM, 1, 1, &at3) == RA_OK,
          "step at 3: %s", ra_last_error());
    CHECK(ra_layer_forward_cached(NULL, slots, a, y, x + 4 * DIM, 1, 1, NULL) == RA_OK,
          "step continuing: %s", ra_last_error());
    ra_kv_cache_destroy(a);
    ra_kv_cache_destroy(b);
    ra_layer_destroy(slots);
    ra_layer_destroy(free_);
}

static void test_paged(void)
{
    ra_layer *slots = make_layer(1, 0), *free_ = make_layer(0, 0);
    ra_kv_pool *pa = NULL, *pb = NULL;
    int64_t ia = -1, ib = -1;
    CHECK(ra_kv_pool_create(&pa, 8, 2, 2, HKV, D, RA_F32) == RA_OK, "pool");
    CHECK(ra_kv_pool_create(&pb, 8, 2, 2, HKV, D, RA_F32) == RA_OK, "pool");
    CHECK(ra_kv_pool_add_sequence(pa, 0, &ia) == RA_OK && ra_kv_pool_add_sequence(pb, 0, &ib)
          == RA_OK, "sequences");
    float y[S * DIM], want[S * DIM];
    const int64_t first[4] = {0, 1, 2, 3};
    ra_positions p = ids_of(first);
    CHECK(ra_layer_forward_paged(NULL, slots, pa, &ia, 1, y, x, 4, NULL, &p) == RA_OK,
          "prefill: %s", ra_last_error());
    CHECK(ra_layer_forward_paged(NULL, free_, pb, &ib, 1, want, x, 4, NULL, NULL) == RA_OK,
          "free");
    CHECK(memcmp(y, want, 4 * DIM * sizeof(float)) == 0, "paged: not the same bits");
    poison(y, DIM);
    ra_positions two = ra_positions_start(2);
    CHECK(refused(ra_layer_forward_paged(NULL, slots, pa, &ia, 1, y, x + 4 * DIM, 1, NULL, &two),
                  "query 0 of sequence id 0 has position 2, not its slot 4"),
          "step at 2: %s", ra_last_error());
    CHECK(ra_kv_pool_length(pa, ia) == 4 && untouched(y, DIM), "refused step wrote");
    CHECK(ra_layer_forward_paged(NULL, slots, pa, &ia, 1, y, x + 4 * DIM, 1, NULL, NULL)
          == RA_OK, "step continuing: %s", ra_last_error());
    ra_kv_pool_destroy(pa);
    ra_kv_pool_destroy(pb);
    ra_layer_destroy(slots);
    ra_layer_destroy(free_);
}

/* The gradients of layer at positions p into g's 4 arrays and dx. */
static ra_status train(ra_layer *layer, const ra_positions *p, float (*g)[H * D * DIM],
                       float *dx)
{
    ra_layer_tape *tape = NULL;
    float y[S * DIM], dy[S * DIM];
    ra_test_fill(dy, S * DIM, 6);
    ra_status st = ra_layer_tape_create(&tape, layer, S);
    if (st == RA_OK) st = ra_layer_forward_train(NULL, layer, y, tape, x, 1, S, p, NULL);
    ra_layer_grads grads = ra_layer_grads_init();
    grads.dwq = g[0], grads.dwk = g[1], grads.dwv = g[2], grads.dwo = g[3];
    if (st == RA_OK) st = ra_layer_backward(NULL, layer, dx, &grads, tape, dy);
    ra_layer_tape_destroy(tape);
    return st;
}

static void test_train(void)
{
    ra_layer *slots = make_layer(1, 0), *free_ = make_layer(0, 0);
    static float g[4][H * D * DIM], want[4][H * D * DIM];
    float dx[S * DIM], want_dx[S * DIM];
    memset(g, 0, sizeof g);
    memset(want, 0, sizeof want);
    CHECK(train(slots, NULL, g, dx) == RA_OK, "slots: %s", ra_last_error());
    CHECK(train(free_, NULL, want, want_dx) == RA_OK, "free");
    CHECK(memcmp(g, want, sizeof g) == 0 && memcmp(dx, want_dx, sizeof dx) == 0,
          "gradients: not the same bits");
    ra_positions start = ra_positions_start(2);
    CHECK(refused(train(slots, &start, g, dx), "query 0 of sequence 0 has position 2"),
          "train at 2: %s", ra_last_error());
    ra_layer_destroy(slots);
    ra_layer_destroy(free_);
}

static void test_phased_cached(void)
{
    ra_layer *slots = make_layer(1, 0);
    float y[DIM];
    ra_positions pos = ra_positions_start(0);
    ra_layer_step *step = NULL;
    CHECK(refused(ra_layer_forward_cached_begin(&step, NULL, slots, y, x, 1, 1, &pos),
                  "phased cached step") && !step, "a phased cached step: %s", ra_last_error());
    ra_layer_destroy(slots);
}

static void body(void)
{
    RUN(test_forward);
    RUN(test_keys_by_slot);
    RUN(test_cached);
    RUN(test_paged);
    RUN(test_train);
}

int main(void)
{
    ra_test_each_isa(body);
    RUN(test_phased_cached);
    return ra_test_summary("layer_slots");
}
