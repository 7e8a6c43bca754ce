/*
 * test_layer_paged.c — ra_layer_forward_paged: the layer serving sequences
 * of a paged KV pool.
 *   - rounds of ragged calls (prefills of different lengths, steps, rows
 *     with no new token) give, row by row, what ra_layer_forward_cached
 *     gives each sequence alone on a contiguous cache of the pool's dtype:
 *     to float32 rounding (1e-5 of max |y|: the prefills there run the
 *     flash kernel, here the decode kernel over the stored rows; 8-bit
 *     rows: 1e-2, their prefills attend over unquantized keys there);
 *   - a GQA layer with biases and q/k norms (before RoPE, or after it:
 *     HunYuan; with a norm before wo: BitNet; with a gated output:
 *     Qwen3-Next, or by a weight of its own: AfMoE; with v's heads normed:
 *     Gemma 3n; LayerNorms with biases: Persimmon), and a sliding-window layer
 *     on window sequences (pages released as they pass);
 *   - the same bits on 1 and 3 threads; rows past n_new are 0, and
 *     nothing in x's rows past n_new reaches y (NaN there);
 *   - refusals (pool full, a window shorter than the layer's, shapes,
 *     ids, n_new) change neither the pool nor y.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { N = 3, S = 6, DIM = 32, H = 4, HKV = 2, D = 8, ROUNDS = 4 };

/* n_new per round and sequence: prefills of 5, 2 and 6, steps, a row
 * with nothing, a 3-token chunk. */
static const int64_t rounds[ROUNDS][N] = {{5, 2, 6}, {1, 1, 1}, {0, 3, 1}, {2, 1, 0}};

typedef struct weights {
    float wq[2 * H * D * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * H * D];
    float b[2 * H * D + 2 * HKV * D + DIM], norms[2 * D], o_norm[H * D];
} weights;

/* variant: 0, NORMS_AFTER_ROPE, O_NORM, GATED (wq's rows: each head's
 * query rows, then its gate rows), TEMPERATURE (Llama 4's, floor 4),
 * TEMPERATURE_AT_P (Ministral 3's), V_NORM, NORM_BIASES (LayerNorms with
 * biases: Persimmon), GATE_WEIGHT (the gate from wgate: AfMoE), GATE_HEAD
 * (wgate [H, dim], one gate per head, bgate, softplus), V_SCALE (v times a
 * constant: MiMo-V2-Flash) or TEMPERATURE_POWER (q times (1 + (p + 1) /
 * 4)^0.5: Beam's NoPE layers) */
enum { NORMS_AFTER_ROPE = 1, O_NORM, GATED, TEMPERATURE, TEMPERATURE_AT_P, V_NORM, NORM_BIASES,
       GATE_WEIGHT, GATE_HEAD, V_SCALE, TEMPERATURE_POWER, N_VARIANTS };

static ra_layer *make_layer(weights *w, int64_t window, int variant)
{
    const int64_t q_rows = variant == GATED ? 2 * H * D : H * D; /* wq's and bq's */
    const int gated = variant == GATED || variant == GATE_WEIGHT || variant == GATE_HEAD;
    ra_test_fill(w->wq, 2 * H * D * DIM, 11);
    ra_test_fill(w->wk, HKV * D * DIM, 12);
    ra_test_fill(w->wv, HKV * D * DIM, 13);
    ra_test_fill(w->wo, DIM * H * D, 14);
    ra_test_fill(w->b, 2 * H * D + 2 * HKV * D + DIM, 15);
    ra_test_fill(w->norms, 2 * D, 16);
    for (int i = 0; i < 2 * D; i++) w->norms[i] = 1.0f + 0.25f * w->norms[i];
    ra_test_fill(w->o_norm, H * D, 17);
    for (int i = 0; i < 2 * H * D * DIM; i++) w->wq[i] /= sqrtf(DIM);
    for (int i = 0; i < H * D * DIM; i++) w->wo[i] /= sqrtf(H * D);
    for (int i = 0; i < HKV * D * DIM; i++) w->wk[i] /= sqrtf(DIM), w->wv[i] /= sqrtf(DIM);
    ra_rope_config rc = ra_rope_config_default(0);
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = H, c.n_kv_heads = HKV, c.head_dim = D, c.rope = &rc;
    c.window = window;
    c.norm_after_rope = variant == NORMS_AFTER_ROPE;
    c.gated_output = gated;
    c.norm_layer = variant == NORM_BIASES;
    c.temperature_floor = variant == TEMPERATURE || variant == TEMPERATURE_AT_P ? 4 : 0;
    c.temperature_scale = 0.3;
    c.temperature_no_offset = variant == TEMPERATURE_AT_P;
    c.temperature_length = variant == TEMPERATURE_POWER ? 4 : 0;
    c.temperature_power = 0.5;
    c.v_norm = variant == V_NORM;
    c.gate_per_head = c.gate_softplus = variant == GATE_HEAD;
    c.v_scale = variant == V_SCALE ? -0.6 : 0.0;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = w->wq, lw.wk = w->wk, lw.wv = w->wv, lw.wo = w->wo;
    lw.bq = w->b, lw.bk = w->b + q_rows, lw.bv = w->b + q_rows + HKV * D;
    lw.bo = w->b + q_rows + 2 * HKV * D, lw.q_norm = w->norms, lw.k_norm = w->norms + D;
    lw.o_norm = variant == O_NORM ? w->o_norm : NULL;
    lw.q_norm_bias = variant == NORM_BIASES ? w->o_norm : NULL; /* any D values */
    lw.k_norm_bias = variant == NORM_BIASES ? w->o_norm + D : NULL;
    const int wgate = variant == GATE_WEIGHT || variant == GATE_HEAD;
    lw.wgate = wgate ? w->wq + H * D * DIM : NULL;          /* wq's second half */
    lw.bgate = variant == GATE_HEAD ? w->o_norm : NULL;    /* any H values */
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &c, &lw) == RA_OK, "layer: %s", ra_last_error());
    return layer;
}

/* Every round through the pool (y [ROUNDS, N, S, DIM]) on ctx; each
 * sequence alone through a contiguous cache (want, the same layout). */
static void run_pool(const ra_layer *layer, ra_context *ctx, ra_dtype dtype, int64_t window,
                     const float *x, float *y)
{
    ra_kv_pool *pool;
    CHECK(ra_kv_pool_create(&pool, 64, 3, 4, HKV, D, dtype) == RA_OK, "pool: %s",
          ra_last_error());
    int64_t ids[N], spare;
    CHECK(ra_kv_pool_add_sequence(pool, 0, &spare) == RA_OK, "spare"); /* ids 1..3, not 0..2 */
    for (int i = 0; i < N; i++)
        CHECK(ra_kv_pool_add_sequence(pool, window, &ids[i]) == RA_OK, "add");
    const int64_t order[N] = {ids[2], ids[0], ids[1]}; /* rows in another order than ids */
    for (int r = 0; r < ROUNDS; r++) {
        int64_t n_new[N];
        for (int i = 0; i < N; i++) n_new[i] = rounds[r][(i + 2) % N];
        float xs[N * S * DIM];
        for (int i = 0; i < N; i++)
            memcpy(xs + i * S * DIM, x + ((size_t)r * N + (i + 2) % N) * S * DIM,
                   sizeof(float) * S * DIM);
        float ys[N * S * DIM];
        CHECK(ra_layer_forward_paged(ctx, layer, pool, order, N, ys, xs, S, n_new, NULL) == RA_OK,
              "round %d: %s", r, ra_last_error());
        for (int i = 0; i < N; i++)
            memcpy(y + ((size_t)r * N + (i + 2) % N) * S * DIM, ys + i * S * DIM,
                   sizeof(float) * S * DIM);
    }
    for (int i = 0; i < N; i++) {
        int64_t total = 0;
        for (int r = 0; r < ROUNDS; r++) total += rounds[r][i];
        CHECK(ra_kv_pool_length(pool, ids[i]) == total, "length");
    }
    ra_kv_pool_destroy(pool);
}

static void run_alone(const ra_layer *layer, ra_dtype dtype, const float *x, float *want)
{
    for (int i = 0; i < N; i++) {
        ra_kv_cache *cache;
        CHECK(ra_kv_cache_create(&cache, 1, ROUNDS * S, HKV, D, dtype) == RA_OK, "cache");
        for (int r = 0; r < ROUNDS; r++) {
            float *w = want + ((size_t)r * N + i) * S * DIM;
            memset(w, 0, sizeof(float) * S * DIM);
            if (rounds[r][i] == 0) continue;
            CHECK(ra_layer_forward_cached(NULL, layer, cache, w, x + ((size_t)r * N + i) * S * DIM,
                                          1, rounds[r][i], NULL) == RA_OK,
                  "alone: %s", ra_last_error());
        }
        ra_kv_cache_destroy(cache);
    }
}

/* The pool's rounds against each sequence alone on a contiguous cache,
 * for each of n dtypes to its tolerance, and on 1 and 3 threads. */
static void matches_cached(const ra_layer *layer, const ra_dtype *dtypes, const double *tol,
                           size_t n_dtypes)
{
    const size_t n = (size_t)ROUNDS * N * S * DIM;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *y3 = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    ra_test_fill(x, n, 21);
    ra_context *three;
    CHECK(ra_context_create(&three, 3) == RA_OK, "context");
    for (size_t di = 0; layer && di < n_dtypes; di++) {
        for (size_t i = 0; i < n; i++) y[i] = y3[i] = NAN;
        run_pool(layer, NULL, dtypes[di], 0, x, y);
        run_pool(layer, three, dtypes[di], 0, x, y3);
        run_alone(layer, dtypes[di], x, want);
        CHECK(memcmp(y, y3, n * sizeof(float)) == 0, "dtype %d: 1 and 3 threads differ",
              (int)dtypes[di]);
        double err = 0, scale = 0;
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < N; i++)
                for (int t = 0; t < S; t++)
                    for (int e = 0; e < DIM; e++) {
                        const size_t at = (((size_t)r * N + i) * S + t) * DIM + e;
                        if (t >= rounds[r][i]) {
                            CHECK(y[at] == 0.0f, "round %d row %d token %d: not 0", r, i, t);
                            continue;
                        }
                        err = fmax(err, fabs((double)y[at] - want[at]));
                        scale = fmax(scale, fabs((double)want[at]));
                    }
        CHECK(err <= tol[di] * scale, "dtype %d: %.3g of max |y| %.3g", (int)dtypes[di], err,
              scale);
    }
    ra_context_destroy(three);
    free(x); free(y); free(y3); free(want);
}

static void test_matches_cached(void)
{
    static const ra_dtype dtypes[] = {RA_F32, RA_BF16, RA_I8, RA_F8E4M3};
    static const double tol[] = {1e-5, 1e-5, 1e-2, 6e-2};
    for (int variant = 0; variant < N_VARIANTS; variant++) {
        weights w;
        ra_layer *layer = make_layer(&w, 0, variant);
        matches_cached(layer, dtypes, tol, sizeof dtypes / sizeof dtypes[0]);
        ra_layer_destroy(layer);
    }
}

/* A sliding-window layer (W 3) on window sequences: the same as on full
 * sequences (the window mask hides what their released pages held). */
static void test_window(void)
{
    weights w;
    ra_layer *layer = make_layer(&w, 3, 0);
    const size_t n = (size_t)ROUNDS * N * S * DIM;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *full = malloc(n * sizeof(float));
    ra_test_fill(x, n, 22);
    run_pool(layer, NULL, RA_F32, 3, x, y);
    run_pool(layer, NULL, RA_F32, 0, x, full);
    CHECK(memcmp(y, full, n * sizeof(float)) == 0, "window sequences differ from full ones");
    ra_layer_destroy(layer);
    free(x); free(y); free(full);
}

/* Each refusal leaves the pool's lengths and free pages, and y, as they were. */
static void test_refusals(void)
{
    weights w;
    ra_layer *layer = make_layer(&w, 0, 0), *windowed = make_layer(&w, 4, 0);
    ra_kv_pool *pool, *other;
    CHECK(ra_kv_pool_create(&pool, 4, 2, 2, HKV, D, RA_F32) == RA_OK, "pool");
    CHECK(ra_kv_pool_create(&other, 4, 2, 2, HKV + 1, D, RA_F32) == RA_OK, "pool");
    int64_t a = 0, b = 0, c = 0;
    CHECK(ra_kv_pool_add_sequence(pool, 0, &a) == RA_OK && ra_kv_pool_add_sequence(pool, 2, &b) == RA_OK,
          "add");
    CHECK(ra_kv_pool_add_sequence(other, 0, &c) == RA_OK, "add");
    float x[2 * S * DIM], y[2 * S * DIM];
    ra_test_fill(x, 2 * S * DIM, 23);
    const int64_t one[1] = {a}, both[2] = {a, b}, twice[2] = {a, a}, three[1] = {3};
    const int64_t two_steps[2] = {1, 1}, too_many[1] = {S + 1}, lots[1] = {S};
    for (int i = 0; i < 2 * S * DIM; i++) y[i] = 7.0f;
    struct {
        const ra_layer *layer;
        ra_kv_pool *pool;
        const int64_t *ids, *n_new;
        int64_t n_ids;
        ra_status want;
        const char *what;
    } bad[] = {
        {NULL, pool, one, NULL, 1, RA_ERR_NULL, "no layer"},
        {layer, NULL, one, NULL, 1, RA_ERR_NULL, "no pool"},
        {layer, pool, NULL, NULL, 1, RA_ERR_NULL, "no ids"},
        {layer, pool, one, NULL, 0, RA_ERR_SIZE, "no sequences"},
        {layer, pool, three, NULL, 1, RA_ERR_ARGUMENT, "a free id"},
        {layer, pool, twice, two_steps, 2, RA_ERR_ARGUMENT, "an id twice"},
        {layer, pool, one, too_many, 1, RA_ERR_ARGUMENT, "n_new past seq"},
        {layer, other, &c, NULL, 1, RA_ERR_SHAPE, "the pool's kv heads"},
        {layer, pool, both, two_steps, 2, RA_ERR_ARGUMENT, "a window of 2, a full layer"},
        {windowed, pool, both, two_steps, 2, RA_ERR_ARGUMENT, "a window of 2, the layer's 4"},
        {layer, pool, one, lots, 1, RA_OK, "6 of the 8 tokens"},
        {layer, pool, one, lots, 1, RA_ERR_CACHE_FULL, "12 tokens in 8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int64_t len = ra_kv_pool_length(pool, a), free_pages = ra_kv_pool_free_pages(pool);
        float before[2 * S * DIM];
        memcpy(before, y, sizeof y);
        ra_status st = ra_layer_forward_paged(NULL, bad[i].layer, bad[i].pool, bad[i].ids,
                                              bad[i].n_ids, y, x, S, bad[i].n_new, NULL);
        CHECK(st == bad[i].want, "%s: status %d (%s)", bad[i].what, (int)st, ra_last_error());
        if (st == RA_OK) continue;
        CHECK(ra_kv_pool_length(pool, a) == len && ra_kv_pool_free_pages(pool) == free_pages &&
                  memcmp(before, y, sizeof y) == 0,
              "%s: the pool or y changed", bad[i].what);
    }
    ra_kv_pool_destroy(pool);
    ra_kv_pool_destroy(other);
    ra_layer_destroy(layer);
    ra_layer_destroy(windowed);
}

/* Only the new tokens' rows are read: NaN in x's rows past n_new changes
 * no bit of y; a call with no new token anywhere writes zeros and appends
 * nothing. */
static void test_rows_past_n_new(void)
{
    weights w;
    ra_layer *layer = make_layer(&w, 0, 0);
    float x[2][N * S * DIM], y[2][N * S * DIM];
    const int64_t n_new[N] = {3, 1, 0}, none[N] = {0, 0, 0};
    for (int run = 0; run < 2; run++) {
        ra_test_fill(x[run], N * S * DIM, 24);
        for (int i = 0; i < N; i++)
            for (int64_t e = n_new[i] * DIM; e < S * DIM; e++) x[run][i * S * DIM + e] = run ? NAN : 0.0f;
        ra_kv_pool *pool;
        int64_t ids[N];
        CHECK(ra_kv_pool_create(&pool, 16, 4, 4, HKV, D, RA_F32) == RA_OK, "pool");
        for (int i = 0; i < N; i++) CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[i]) == RA_OK, "add");
        CHECK(ra_layer_forward_paged(NULL, layer, pool, ids, N, y[run], x[run], S, n_new, NULL) ==
                  RA_OK, "run %d: %s", run, ra_last_error());
        float z[N * S * DIM];
        for (int i = 0; i < N * S * DIM; i++) z[i] = 7.0f;
        CHECK(ra_layer_forward_paged(NULL, layer, pool, ids, N, z, x[run], S, none, NULL) == RA_OK,
              "no new token: %s", ra_last_error());
        int zeros = 1;
        for (int i = 0; i < N * S * DIM; i++) zeros &= z[i] == 0.0f;
        CHECK(zeros, "no new token: y is not 0");
        for (int i = 0; i < N; i++)
            CHECK(ra_kv_pool_length(pool, ids[i]) == n_new[i], "sequence %d: length %lld", i,
                  (long long)ra_kv_pool_length(pool, ids[i]));
        ra_kv_pool_destroy(pool);
    }
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0, "NaN past n_new changed y");
    for (int i = 0; i < N; i++)
        for (int64_t e = n_new[i] * DIM; e < S * DIM; e++)
            CHECK(y[1][i * S * DIM + e] == 0.0f, "row %d, element %lld past n_new: not 0", i,
                  (long long)e);
    ra_layer_destroy(layer);
}

static void simd_cases(void)
{
    RUN(test_matches_cached);
    RUN(test_window);
    RUN(test_rows_past_n_new);
    RUN(test_refusals);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("layer_paged");
}
