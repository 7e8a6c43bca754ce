/*
 * fuzz_mla.c — latent attention (ra_layer_config.kv_lora_rank) on fuzzed
 * arguments: ra_layer_create (heads, the nope, rope and v parts, ranks,
 * q_proj or the q_a/q_b path, biases, n_kv_heads, rotary_dim, layout, a
 * window; out-of-range values too), ra_layer_forward on both paths,
 * ra_layer_forward_train and ra_layer_backward, and ra_layer_forward_cached
 * (a prefill of P tokens, then steps of k, in caches of every dtype), on the
 * calling thread or two.
 *
 * The flash path must give the reference path's y, the training forward
 * the inference forward's bits, and the cached forward the uncached y, to
 * 1e-4 (16-bit caches: 2e-2; 8-bit ones: finite) of the bound float32
 * errors are relative to:
 * |y| <= max row sum of |wo| times the largest |v|, |v| <= max row sum of
 * |wkv_b| times max |kv_a_norm| sqrt(r) (an RMS-normalized row's entries
 * are at most sqrt(r)), plus max |bo|.  A refusal must be a documented
 * status that leaves y and the cache as they were; a valid call must
 * succeed.  (tests/test_mla.c checks the values against transformers'
 * formulas in double.)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "ropeattn.h"

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

enum { WQ, WQ_A, BQ_A, Q_A_NORM, WQ_B, WKV_A, BKV_A, KV_A_NORM, WKV_B, WO, BO, N_W };

/* n values in [-scale, scale] from a generator seeded by the input. */
static float *random_floats(int64_t n, float scale, float offset, uint64_t *state)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = offset + scale * ((float)(*state >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
    return a;
}

/* The largest sum of |w| over a row of w [rows, cols]. */
static double max_row_sum(const float *w, int64_t rows, int64_t cols)
{
    double m = 0;
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += fabs(w[r * cols + c]);
        m = s > m ? s : m;
    }
    return m;
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        m = d > m || d != d ? d : m;
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    int valid = 1;
    const int64_t H = take_range(&in, 1, 20), Dn = take_range(&in, 0, 8);
    const int64_t Dr = 2 * take_range(&in, 0, 4), r = take_range(&in, 0, 140);
    const int64_t rq = take_range(&in, 0, 6), dim = take_range(&in, 1, 12);
    const int64_t D = Dn + Dr, Dv = take_range(&in, 0, D + 1);
    if (Dr < 2 || r < 1 || Dv < 1 || Dv > D || D % 2) valid = 0;
    const int extras = take_byte(&in);
    ra_layer_config c = ra_layer_config_init();
    c.dim = dim;
    c.n_heads = H;
    c.head_dim = D;
    c.kv_lora_rank = r;
    c.q_lora_rank = rq;
    c.qk_nope_head_dim = Dn;
    c.v_head_dim = Dv;
    c.window = extras & 1 ? take_range(&in, 1, 6) : 0;
    if (extras & 2) { /* n_kv_heads: H or 0 only */
        c.n_kv_heads = take_range(&in, 0, 4);
        if (c.n_kv_heads != 0 && c.n_kv_heads != H) valid = 0;
    }
    ra_rope_config rope = ra_rope_config_default(0);
    rope.layout = extras & 4 ? RA_LAYOUT_HALF : RA_LAYOUT_INTERLEAVED;
    if (extras & 8) {
        rope.rotary_dim = take_range(&in, 0, 8);
        if (rope.rotary_dim != 0 && rope.rotary_dim != Dr) valid = 0;
    }
    c.rope = &rope;
    const int biases = (extras & 16) != 0;
    uint64_t state = take_bits(&in, 8);
    const int64_t sizes[N_W] = {rq ? 0 : H * D * dim, rq * dim, biases ? rq : 0, rq, H * D * rq,
                                (r + Dr) * dim, biases ? r + Dr : 0, r, H * (Dn + Dv) * r,
                                dim * H * Dv, biases ? dim : 0};
    float *w[N_W];
    for (int i = 0; i < N_W; i++) {
        const int norm = i == Q_A_NORM || i == KV_A_NORM;
        const int64_t fan_in = i == WQ_B ? rq : i == WKV_B ? r : i == WO ? H * Dv : dim;
        w[i] = valid ? random_floats(sizes[i], norm ? 0.5f : 1.0f / sqrtf((float)(fan_in ? fan_in : 1)),
                                     norm ? 1.0f : 0.0f, &state)
                     : random_floats(1, 1.0f, 0.0f, &state);
    }
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = sizes[WQ] ? w[WQ] : NULL;
    lw.wq_a = sizes[WQ_A] ? w[WQ_A] : NULL;
    lw.bq_a = sizes[BQ_A] ? w[BQ_A] : NULL;
    lw.q_a_norm = sizes[Q_A_NORM] ? w[Q_A_NORM] : NULL;
    lw.wq_b = sizes[WQ_B] ? w[WQ_B] : NULL;
    lw.wkv_a = w[WKV_A];
    lw.bkv_a = sizes[BKV_A] ? w[BKV_A] : NULL;
    lw.kv_a_norm = w[KV_A_NORM];
    lw.wkv_b = w[WKV_B];
    lw.wo = w[WO];
    lw.bo = sizes[BO] ? w[BO] : NULL;
    ra_layer *layer = (ra_layer *)&layer;
    ra_status st = ra_layer_create(&layer, &c, &lw);
    if (!valid || st != RA_OK) {
        FUZZ_CHECK(!valid, "valid latent layer refused: %d (%s)", (int)st, ra_last_error());
        FUZZ_CHECK(st == RA_ERR_SIZE || st == RA_ERR_GQA || st == RA_ERR_ARGUMENT ||
                       st == RA_ERR_HEAD_DIM || st == RA_ERR_NULL,
                   "ra_layer_create: status %d", (int)st);
        FUZZ_CHECK(layer == NULL, "out not NULL after a failure");
        for (int i = 0; i < N_W; i++) free(w[i]);
        return 0;
    }
    const int64_t B = take_range(&in, 1, 3), S = take_range(&in, 1, 9), n = B * S * dim;
    ra_context *ctx = take_range(&in, 0, 1) ? two_threads : NULL;
    float *x = random_floats(n, 1.0f, 0.0f, &state);
    float *y[4];
    for (int i = 0; i < 4; i++) y[i] = calloc((size_t)n, sizeof(float));
    const double v_max = max_row_sum(w[WKV_B], H * (Dn + Dv), r) *
                         max_row_sum(w[KV_A_NORM], r, 1) * sqrt((double)r);
    const double bound = max_row_sum(w[WO], dim, H * Dv) * v_max +
                         (biases ? max_row_sum(w[BO], dim, 1) : 0.0);

    /* both paths, and the training forward */
    ra_attention_options ref = ra_attention_options_init(), flash = ref;
    ref.path = RA_PATH_REFERENCE;
    flash.path = RA_PATH_FLASH;
    FUZZ_CHECK(ra_layer_forward(ctx, layer, y[0], x, B, S, NULL, &ref) == RA_OK &&
                   ra_layer_forward(ctx, layer, y[1], x, B, S, NULL, &flash) == RA_OK,
               "forward: %s", ra_last_error());
    double e = max_diff(y[0], y[1], n);
    FUZZ_CHECK(e <= 1e-4 * bound, "flash is %.3g from the reference (bound %.3g)", e, bound);
    ra_layer_tape *tape;
    FUZZ_CHECK(ra_layer_tape_create(&tape, layer, B * S) == RA_OK, "tape");
    FUZZ_CHECK(ra_layer_forward_train(ctx, layer, y[2], tape, x, B, S, NULL, &flash) == RA_OK,
               "forward_train: %s", ra_last_error());
    FUZZ_CHECK(memcmp(y[1], y[2], (size_t)n * sizeof(float)) == 0, "training forward differs");
    float *g[N_W], *dx = calloc((size_t)n, sizeof(float));
    for (int i = 0; i < N_W; i++) g[i] = calloc((size_t)sizes[i] + 1, sizeof(float));
    ra_layer_grads grads = ra_layer_grads_init();
    grads.dwq = g[WQ], grads.dwq_a = g[WQ_A], grads.dbq_a = g[BQ_A], grads.dq_a_norm = g[Q_A_NORM];
    grads.dwq_b = g[WQ_B], grads.dwkv_a = g[WKV_A], grads.dbkv_a = g[BKV_A];
    grads.dkv_a_norm = g[KV_A_NORM], grads.dwkv_b = g[WKV_B], grads.dwo = g[WO], grads.dbo = g[BO];
    FUZZ_CHECK(ra_layer_backward(ctx, layer, dx, &grads, tape, x) == RA_OK, "backward: %s",
               ra_last_error());
    for (int64_t i = 0; i < n; i++) FUZZ_CHECK(isfinite(dx[i]), "dx[%lld] not finite", (long long)i);
    ra_layer_tape_destroy(tape);

    /* a prefill of P tokens, then steps of k, against the forward */
    static const ra_dtype dtypes[5] = {RA_F32, RA_F16, RA_BF16, RA_I8, RA_F8E4M3};
    const ra_dtype dtype = TAKE_ONE_OF(&in, dtypes);
    const int64_t P = take_range(&in, 0, S), k = take_range(&in, 1, S);
    const int64_t capacity = S + take_range(&in, S > 1 ? -1 : 0, 1);
    ra_kv_cache *cache;
    FUZZ_CHECK(ra_kv_cache_create_latent(&cache, B, capacity, r, Dr, dtype) == RA_OK, "cache: %s",
               ra_last_error());
    float *xs = malloc((size_t)n * sizeof(float)), *ys = malloc((size_t)n * sizeof(float));
    int64_t done = 0;
    while (done < S) {
        const int64_t m = done == 0 && P ? P : (k < S - done ? k : S - done);
        for (int64_t b = 0; b < B; b++)
            memcpy(xs + b * m * dim, x + (b * S + done) * dim, (size_t)(m * dim) * sizeof(float));
        for (int64_t i = 0; i < B * m * dim; i++) ys[i] = 3.0f;
        st = ra_layer_forward_cached(ctx, layer, cache, ys, xs, B, m, NULL);
        if (done + m > capacity) {
            FUZZ_CHECK(st == RA_ERR_CACHE_FULL, "past the capacity: status %d", (int)st);
            FUZZ_CHECK(ra_kv_cache_length(cache, 0) == done, "a refused call appended");
            for (int64_t i = 0; i < B * m * dim; i++) FUZZ_CHECK(ys[i] == 3.0f, "a refused call wrote y");
            break;
        }
        FUZZ_CHECK(st == RA_OK, "cached forward: %s", ra_last_error());
        for (int64_t b = 0; b < B; b++)
            memcpy(y[3] + (b * S + done) * dim, ys + b * m * dim, (size_t)(m * dim) * sizeof(float));
        done += m;
    }
    if (done == S && ra_dtype_size(dtype) == 1) { /* accuracy: test_mla.c, test_families.sh */
        for (int64_t i = 0; i < n; i++)
            FUZZ_CHECK(isfinite(y[3][i]), "8-bit cache: y[%lld] not finite", (long long)i);
    } else if (done == S) {
        e = max_diff(y[1], y[3], n);
        FUZZ_CHECK(e <= (dtype == RA_F32 ? 1e-4 : 2e-2) * bound,
                   "cached (P %lld, steps %lld, dtype %d) is %.3g from the forward (bound %.3g)",
                   (long long)P, (long long)k, (int)dtype, e, bound);
    }
    ra_kv_cache_destroy(cache);
    free(xs), free(ys), free(x), free(dx);
    for (int i = 0; i < 4; i++) free(y[i]);
    for (int i = 0; i < N_W; i++) free(w[i]), free(g[i]);
    ra_layer_destroy(layer);
    return 0;
}
