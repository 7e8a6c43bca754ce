/*
 * test_kvcache.c — the KV cache and decoding: prefill(N) equals prefill(N - k)
 * plus k decode steps (shapes, GQA ratios, cache dtypes), decode attention
 * against the reference over the same keys, ragged batches, positions that
 * differ from slots, identical bits for any thread count, and the errors
 * that must leave the cache unchanged.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kvcache_common.h"
#include "ropeattn.h"

typedef struct model {
    int64_t dim, h, hkv, d; /* H d may differ from dim */
    float *wq, *wk, *wv, *wo;
    float *b;               /* bq | bk | bv | bo | q_norm | k_norm, or NULL: none */
    ra_layer *layer;
} model;

/* d = 0: dim / h; extras: with biases (Qwen2 has bq, bk, bv) and q and k
 * norms (Qwen3). */
static void model_make(model *m, int64_t dim, int64_t h, int64_t hkv, int64_t d, int extras,
                       uint64_t seed)
{
    if (d == 0) d = dim / h;
    int64_t qd = h * d, kv = hkv * d;
    m->dim = dim;
    m->h = h;
    m->hkv = hkv;
    m->d = d;
    m->wq = malloc(4 * qd * dim);
    m->wk = malloc(4 * kv * dim);
    m->wv = malloc(4 * kv * dim);
    m->wo = malloc(4 * dim * qd);
    ra_test_fill(m->wq, qd * dim, seed);
    ra_test_fill(m->wk, kv * dim, seed + 1);
    ra_test_fill(m->wv, kv * dim, seed + 2);
    ra_test_fill(m->wo, dim * qd, seed + 3);
    /* nn.Linear's init scale, uniform(-1/sqrt(in), 1/sqrt(in)): realistic
     * logits, not thousands (which would turn rounding into large errors) */
    for (int64_t i = 0; i < qd * dim; i++)
        m->wq[i] /= sqrtf((float)dim), m->wo[i] /= sqrtf((float)qd);
    for (int64_t i = 0; i < kv * dim; i++) m->wk[i] /= sqrtf((float)dim), m->wv[i] /= sqrtf((float)dim);
    m->b = NULL;
    const int64_t n_b = qd + 2 * kv + dim, n_extras = n_b + 2 * d;
    if (extras) {
        m->b = malloc(4 * n_extras);
        ra_test_fill(m->b, n_extras, seed + 4);
        for (int64_t i = n_b; i < n_extras; i++) m->b[i] = 1.0f + 0.25f * m->b[i];
    }
    ra_rope_config cfg_rope = ra_rope_config_default(0);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = dim, .n_heads = h, .n_kv_heads = hkv,
                           .head_dim = d,
                           .rope = &cfg_rope};
    cfg_rope.layout = RA_LAYOUT_HALF;
    float *b = m->b;
    ra_layer_weights w = {.struct_size = sizeof w, .wq = m->wq, .wk = m->wk, .wv = m->wv,
                          .wo = m->wo,
                          .bq = b, .bk = b ? b + qd : NULL, .bv = b ? b + qd + kv : NULL,
                          .bo = b ? b + qd + 2 * kv : NULL, .q_norm = b ? b + n_b : NULL,
                          .k_norm = b ? b + n_b + d : NULL};
    CHECK(ra_layer_create(&m->layer, &cfg, &w) == RA_OK, "layer");
}

static void model_free(model *m)
{
    ra_layer_destroy(m->layer);
    free(m->wq);
    free(m->wk);
    free(m->wv);
    free(m->wo);
    free(m->b);
}

/* prefill(N) through the cache == prefill(N - k) + k single-token steps, and
 * (f32 cache) == the layer without a cache: the same float32 values summed
 * in another order (flash tiles vs decode chunks, and OpenBLAS's blocking). */
static void test_prefill_then_decode(void)
{
    const int64_t shapes[][7] = {/* dim, H, Hkv, N, k, D (0: dim / H), biases and norms */
                                 {64, 4, 4, 9, 4, 0, 0}, {128, 8, 2, 40, 7, 0, 0},
                                 {256, 8, 1, 1100, 3, 0, 0}, {256, 2, 2, 65, 65, 0, 0},
                                 /* H D != dim: Qwen3-like (wider), Mistral-Nemo-like (narrower) */
                                 {48, 4, 2, 21, 5, 32, 1}, {96, 2, 1, 17, 6, 16, 0}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int64_t dim = shapes[t][0], n = shapes[t][3], k = shapes[t][4], batch = 2;
        model m;
        model_make(&m, dim, shapes[t][1], shapes[t][2], shapes[t][5], (int)shapes[t][6], 100 + t);
        int64_t d = m.d;
        float *x = malloc(4 * batch * n * dim), *full = malloc(4 * batch * n * dim);
        float *steps = malloc(4 * batch * n * dim), *plain = malloc(4 * batch * n * dim);
        float *xs = malloc(4 * batch * n * dim), *ys = malloc(4 * batch * n * dim);
        ra_test_fill(x, batch * n * dim, 7 + t);
        CHECK(ra_layer_forward(ctx, m.layer, plain, x, batch, n, NULL, NULL) == RA_OK, "plain");
        for (int dt = RA_F32; dt <= RA_BF16; dt++) {
            ra_kv_cache *cache;
            CHECK(ra_kv_cache_create(&cache, batch, n + 3, m.hkv, d, (ra_dtype)dt) == RA_OK, "cache");
            CHECK(ra_layer_forward_cached(ctx, m.layer, cache, full, x, batch, n, NULL) == RA_OK, "full");
            CHECK(ra_kv_cache_length(cache, 1) == n, "length after prefill");
            ra_kv_cache_reset(cache);
            /* prefill N - k tokens, then one token at a time */
            int64_t p = n - k;
            if (p > 0) {
                for (int64_t b = 0; b < batch; b++)
                    memcpy(xs + b * p * dim, x + b * n * dim, 4 * p * dim);
                CHECK(ra_layer_forward_cached(ctx, m.layer, cache, ys, xs, batch, p, NULL) == RA_OK, "p");
                for (int64_t b = 0; b < batch; b++)
                    memcpy(steps + b * n * dim, ys + b * p * dim, 4 * p * dim);
            }
            for (int64_t s = p; s < n; s++) {
                for (int64_t b = 0; b < batch; b++) memcpy(xs + b * dim, x + (b * n + s) * dim, 4 * dim);
                CHECK(ra_layer_forward_cached(ctx, m.layer, cache, ys, xs, batch, 1, NULL) == RA_OK, "step");
                for (int64_t b = 0; b < batch; b++) memcpy(steps + (b * n + s) * dim, ys + b * dim, 4 * dim);
            }
            double e = ra_test_max_rel_diff(steps, full, batch * n * dim);
            /* 5e-6, not 1e-6: OpenBLAS sums a row of the projections in an
             * order that depends on how many rows the call has (attention
             * alone meets 1e-6: test_attention_prefill_vs_decode).  With a
             * 16-bit cache such a last-bit difference in k or v can round to
             * the neighbouring 16-bit value: up to one 16-bit step of one
             * element (seen: 1.1e-5 with f16), so 1e-4 (f16), 1e-3 (bf16). */
            const double bound = dt == RA_F32 ? 5e-6 : dt == RA_F16 ? 1e-4 : 1e-3;
            CHECK(e <= bound, "shape %zu dtype %d: prefill + decode vs prefill %.3g", t, dt, e);
            if (dt == RA_F32) {
                e = ra_test_max_rel_diff(full, plain, batch * n * dim);
                CHECK(e <= 1e-6, "shape %zu: cached prefill vs the layer %.3g", t, e);
            } else {
                e = ra_test_max_rel_diff(full, plain, batch * n * dim);
                CHECK(e <= (dt == RA_F16 ? 5e-3 : 3e-2), "shape %zu dtype %d: 16-bit cache far off %.3g", t, dt, e);
            }
            ra_kv_cache_destroy(cache);
        }
        free(x); free(full); free(steps); free(plain); free(xs); free(ys);
        model_free(&m);
    }
    ra_context_destroy(ctx);
}

/* The attention part alone, on the same cached keys and values: one flash
 * prefill over the cache == one decode step per token, to 1e-6 of max|out|
 * (the same numbers and the same exp; only the blocking of the online
 * softmax differs).  Every cache dtype. */
static void test_attention_prefill_vs_decode(void)
{
    const int64_t s = 150, h = 8, hkv = 2, d = 64;
    float *q = malloc(4 * s * h * d), *k = malloc(4 * s * hkv * d), *v = malloc(4 * s * hkv * d);
    float *pre = malloc(4 * s * h * d), *dec = malloc(4 * s * h * d);
    ra_test_fill(q, s * h * d, 41);
    ra_test_fill(k, s * hkv * d, 42);
    ra_test_fill(v, s * hkv * d, 43);
    for (int64_t i = 0; i < s * h * d; i++) q[i] *= 0.4f; /* logits of a few units */
    ra_rope_config rc = ra_rope_config_default(d);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (int dt = RA_F32; dt <= RA_BF16; dt++) {
        ra_kv_cache *cache;
        CHECK(ra_kv_cache_create(&cache, 1, s, hkv, d, (ra_dtype)dt) == RA_OK, "cache");
        float *qr = malloc(4 * s * h * d), *kr = malloc(4 * s * hkv * d), *vr = malloc(4 * s * hkv * d);
        memcpy(qr, q, 4 * s * h * d);
        memcpy(kr, k, 4 * s * hkv * d);
        memcpy(vr, v, 4 * s * hkv * d);
        ra_tensor tq = ra_tensor_4d(qr, RA_F32, 1, s, h, d), tk = ra_tensor_4d(kr, RA_F32, 1, s, hkv, d);
        ra_tensor tv = ra_tensor_4d(vr, RA_F32, 1, s, hkv, d);
        ra_positions p = {.struct_size = sizeof p, .start = 0};
        CHECK(ra_kv_cache_append(ctx, cache, rope, &tq, &tk, &tv, &p, NULL) == RA_OK, "append");
        ra_tensor kc, vc;
        ra_kv_cache_views(cache, &kc, &vc);
        kc.shape[1] = vc.shape[1] = s;
        ra_tensor tp = ra_tensor_4d(pre, RA_F32, 1, s, h, d);
        CHECK(ra_attention(ctx, &tp, &tq, &kc, &vc, PATH_OPTS(RA_PATH_FLASH)) == RA_OK, "flash");
        /* now token by token: a cache of the first t + 1 tokens each time */
        ra_kv_cache *grow;
        CHECK(ra_kv_cache_create(&grow, 1, s, hkv, d, (ra_dtype)dt) == RA_OK, "grow");
        memcpy(kr, k, 4 * s * hkv * d);
        memcpy(vr, v, 4 * s * hkv * d);
        for (int64_t t = 0; t < s; t++) {
            ra_tensor k1 = ra_tensor_4d(kr + t * hkv * d, RA_F32, 1, 1, hkv, d);
            ra_tensor v1 = ra_tensor_4d(vr + t * hkv * d, RA_F32, 1, 1, hkv, d);
            ra_positions pt = {.struct_size = sizeof pt, .start = t};
            CHECK(ra_kv_cache_append(NULL, grow, rope, NULL, &k1, &v1, &pt, NULL) == RA_OK, "step");
            ra_tensor q1 = ra_tensor_4d(qr + t * h * d, RA_F32, 1, 1, h, d); /* already rotated */
            ra_tensor o1 = ra_tensor_4d(dec + t * h * d, RA_F32, 1, 1, h, d);
            CHECK(ra_attention_decode(ctx, grow, &o1, &q1, NULL, NULL) == RA_OK, "decode");
        }
        double e = ra_test_max_rel_diff(dec, pre, s * h * d);
        CHECK(e <= 1e-6, "dtype %d: decode steps vs flash prefill %.3g", dt, e);
        ra_kv_cache_destroy(grow);
        ra_kv_cache_destroy(cache);
        free(qr); free(kr); free(vr);
    }
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
    free(q); free(k); free(v); free(pre); free(dec);
}

/* Decode attention of the last T tokens == the reference attention rows,
 * with ragged lengths (different per sequence), rope positions that are not
 * the slots, and the same bits for 1, 2 and 3 threads. */
static void test_decode_matches_reference(void)
{
    const int64_t b = 2, s = 600, h = 8, hkv = 2, d = 64, T = 3;
    const int64_t len[2] = {600, 257};
    int64_t nk = b * s * hkv * d, nq = b * s * h * d;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk), *ref = malloc(4 * nq);
    float *qt = malloc(4 * b * T * h * d), *o1 = malloc(4 * b * T * h * d), *on = malloc(4 * b * T * h * d);
    ra_test_fill(q, nq, 1);
    ra_test_fill(k, nk, 2);
    ra_test_fill(v, nk, 3);
    int64_t *ids = malloc(8 * b * s);
    for (int64_t i = 0; i < b * s; i++) ids[i] = 5000 + (i * 7919) % 3000; /* not the slots */
    ra_rope_config rc = ra_rope_config_default(d);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, b, s, hkv, d, RA_F32) == RA_OK, "cache");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, b, s, h, d), tk = ra_tensor_4d(k, RA_F32, b, s, hkv, d);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, b, s, hkv, d);
    ra_positions pos = {.struct_size = sizeof pos, .ids = ids};
    CHECK(ra_kv_cache_append(NULL, cache, rope, &tq, &tk, &tv, &pos, len) == RA_OK, "append");
    CHECK(ra_kv_cache_length(cache, 0) == 600 && ra_kv_cache_length(cache, 1) == 257, "lengths");
    /* reference: per sequence, causal attention over its own length (its
     * last T rows, once per process: reference_last_rows) */
    for (int64_t bb = 0; bb < b; bb++) {
        reference_last_rows(ref + bb * s * h * d, q + bb * s * h * d, k + bb * s * hkv * d,
                            v + bb * s * hkv * d, len[bb], T, h, hkv, d, NULL);
        for (int64_t t = 0; t < T; t++)
            memcpy(qt + (bb * T + t) * h * d, q + (bb * s + len[bb] - T + t) * h * d, 4 * h * d);
    }
    ra_tensor tqt = ra_tensor_4d(qt, RA_F32, b, T, h, d), to1 = ra_tensor_4d(o1, RA_F32, b, T, h, d);
    ra_tensor ton = ra_tensor_4d(on, RA_F32, b, T, h, d);
    CHECK(ra_attention_decode(NULL, cache, &to1, &tqt, NULL, NULL) == RA_OK, "decode");
    double worst = 0;
    for (int64_t bb = 0; bb < b; bb++)
        for (int64_t t = 0; t < T; t++)
            worst = fmax(worst, ra_test_max_rel_diff(o1 + (bb * T + t) * h * d,
                                             ref + (bb * s + len[bb] - T + t) * h * d, h * d));
    CHECK(worst <= 2e-5, "decode vs reference %.3g", worst);
    for (int threads = 2; threads <= 3; threads++) {
        ra_context *ctx;
        CHECK(ra_context_create(&ctx, threads) == RA_OK, "ctx");
        CHECK(ra_attention_decode(ctx, cache, &ton, &tqt, NULL, NULL) == RA_OK, "decode n");
        CHECK(memcmp(o1, on, 4 * b * T * h * d) == 0, "%d threads changed bits", threads);
        ra_context_destroy(ctx);
    }
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
    free(q); free(k); free(v); free(ref); free(qt); free(o1); free(on); free(ids);
}

/* Decode attention in double from the cache's own (widened) rows: row t of
 * sequence b, query head h, is slot len - nq + t seeing slots 0 .. that one.
 *   q: [T, H, D] of sequence b   out: [D] */
static void decode_exact(double *out, const ra_kv_cache *cache, int64_t b, const float *q,
                         int64_t h, int64_t rep, int64_t last, int64_t d)
{
    ra_tensor kt, vt;
    ra_kv_cache_views(cache, &kt, &vt);
    const int64_t size = ra_dtype_size(kt.dtype), g = h / rep;
    double *score = malloc(sizeof(double) * (size_t)(last + 1)), max = -INFINITY, sum = 0;
    float *row = malloc(sizeof(float) * (size_t)d);
    for (int64_t j = 0; j <= last; j++) {
        const char *key = (const char *)kt.data + (b * kt.stride[0] + j * kt.stride[1] + g * kt.stride[2]) * size;
        ra_convert(row, RA_F32, key, kt.dtype, d);
        double dot = 0;
        for (int64_t e = 0; e < d; e++) dot += (double)q[e] * row[e];
        score[j] = dot / sqrt((double)d);
        max = fmax(max, score[j]);
    }
    for (int64_t e = 0; e < d; e++) out[e] = 0;
    for (int64_t j = 0; j <= last; j++) {
        const char *value = (const char *)vt.data + (b * vt.stride[0] + j * vt.stride[1] + g * vt.stride[2]) * size;
        ra_convert(row, RA_F32, value, vt.dtype, d);
        double p = exp(score[j] - max);
        sum += p;
        for (int64_t e = 0; e < d; e++) out[e] += p * row[e];
    }
    for (int64_t e = 0; e < d; e++) out[e] /= sum;
    free(score);
    free(row);
}

/* The decode kernels on awkward shapes, against decode_exact: head_dim not
 * a multiple of any vector width (and below one), GQA groups of 1 to 8
 * heads (rows per group not a multiple of 4), 3 kv heads (a short cache
 * over two chunks splits its kv heads into tasks: the split must divide
 * 3), several new tokens with fewer queries than that in some sequences,
 * lengths off the 16-key blocks and past one 1024-slot chunk, every cache
 * dtype; D = 36, 48, 80, 96 end a bf16 cache's pairs (decode_impl.h) at
 * every place a span can on each vector width.  Float32 sums over up to 2100 keys of values below 1: 1e-5 of
 * the row's largest value. */
static void test_decode_shapes(void)
{
    const int64_t shapes[][5] = {/* H, Hkv, D, T, longest */
                                 {4, 4, 2, 1, 19},   {6, 2, 20, 2, 1100}, {8, 1, 128, 1, 2100},
                                 {5, 1, 64, 3, 40},  {16, 2, 8, 5, 33},  {2, 2, 36, 4, 1030},
                                 {12, 4, 128, 2, 97}, {4, 2, 16, 1, 16}, {6, 3, 16, 1, 1100},
                                 {8, 2, 48, 2, 70},  {4, 1, 96, 1, 1030}, {6, 2, 80, 3, 50}};
    const ra_dtype dtypes[] = {RA_F32, RA_F16, RA_BF16};
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int di = 0; di < 3; di++) {
            const int64_t H = shapes[si][0], hkv = shapes[si][1], d = shapes[si][2];
            const int64_t T = shapes[si][3], b = 2, cap = shapes[si][4], rep = H / hkv;
            const int64_t len[2] = {cap, cap / 2 + T}, nq[2] = {T, T > 1 ? T - 1 : T};
            float *k = malloc(4 * b * cap * hkv * d), *v = malloc(4 * b * cap * hkv * d);
            float *q = malloc(4 * b * T * H * d), *out = malloc(4 * b * T * H * d);
            double *exact = malloc(8 * d);
            ra_test_fill(k, (size_t)(b * cap * hkv * d), 10 + si);
            ra_test_fill(v, (size_t)(b * cap * hkv * d), 20 + si);
            ra_test_fill(q, (size_t)(b * T * H * d), 30 + si);
            for (int64_t i = 0; i < b * T * H * d; i++) out[i] = NAN;
            ra_rope_config rc = ra_rope_config_default(d);
            ra_rope *rope;
            ra_kv_cache *cache;
            CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
            CHECK(ra_kv_cache_create(&cache, b, cap, hkv, d, dtypes[di]) == RA_OK, "cache");
            ra_tensor tk = ra_tensor_4d(k, RA_F32, b, cap, hkv, d);
            ra_tensor tv = ra_tensor_4d(v, RA_F32, b, cap, hkv, d);
            ra_positions start = {.struct_size = sizeof start};
            CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &start, len) == RA_OK,
                  "append");
            ra_tensor tq = ra_tensor_4d(q, RA_F32, b, T, H, d);
            ra_tensor to = ra_tensor_4d(out, RA_F32, b, T, H, d);
            ra_context *ctx;
            CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
            CHECK(ra_attention_decode(ctx, cache, &to, &tq, nq, NULL) == RA_OK, "decode");
            for (int64_t bb = 0; bb < b; bb++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t h = 0; h < H; h++) {
                        const float *got = out + ((bb * T + t) * H + h) * d;
                        if (t >= nq[bb]) continue; /* rows past n_query: not written */
                        decode_exact(exact, cache, bb, q + ((bb * T + t) * H + h) * d, h, rep,
                                     len[bb] - nq[bb] + t, d);
                        double diff = 0, scale = 0;
                        for (int64_t e = 0; e < d; e++) {
                            diff = fmax(diff, fabs(got[e] - exact[e]));
                            scale = fmax(scale, fabs(exact[e]));
                        }
                        double rel = isfinite(diff) ? diff / scale : INFINITY;
                        worst = fmax(worst, rel);
                        CHECK(rel <= 1e-5, "H%lld Hkv%lld D%lld T%lld dtype %d b%lld t%lld h%lld: %.3g",
                              (long long)H, (long long)hkv, (long long)d, (long long)T,
                              (int)dtypes[di], (long long)bb, (long long)t,
                              (long long)h, rel);
                    }
            ra_context_destroy(ctx);
            ra_kv_cache_destroy(cache);
            ra_rope_destroy(rope);
            free(k); free(v); free(q); free(out); free(exact);
        }
    printf("  decode vs double on awkward shapes: worst %.3g (bound 1e-5)\n", worst);
}

/* NaN in the newest slot's key and value reaches only the rows that see it:
 * with three new tokens, the first two rows stay finite and the last is all
 * NaN, as in PyTorch (a NaN score makes the whole softmax row NaN; a masked
 * key is never multiplied in). */
static void test_decode_nan_stays_out_of_earlier_rows(void)
{
    const int64_t H = 4, hkv = 1, d = 32, T = 3, len = 40;
    float *k = malloc(4 * len * hkv * d), *v = malloc(4 * len * hkv * d);
    float *q = malloc(4 * T * H * d), *out = malloc(4 * T * H * d);
    ra_test_fill(k, (size_t)(len * hkv * d), 1);
    ra_test_fill(v, (size_t)(len * hkv * d), 2);
    ra_test_fill(q, (size_t)(T * H * d), 3);
    v[(len - 1) * hkv * d + 5] = NAN;
    k[(len - 1) * hkv * d + 7] = NAN;
    ra_rope_config rc = ra_rope_config_default(d);
    ra_rope *rope;
    ra_kv_cache *cache;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    CHECK(ra_kv_cache_create(&cache, 1, len, hkv, d, RA_F32) == RA_OK, "cache");
    ra_tensor tk = ra_tensor_4d(k, RA_F32, 1, len, hkv, d), tv = ra_tensor_4d(v, RA_F32, 1, len, hkv, d);
    ra_positions start = {.struct_size = sizeof start};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &start, NULL) == RA_OK, "append");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, T, H, d), to = ra_tensor_4d(out, RA_F32, 1, T, H, d);
    CHECK(ra_attention_decode(NULL, cache, &to, &tq, NULL, NULL) == RA_OK, "decode");
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = t * H * d; i < (t + 1) * H * d; i++)
            CHECK(t < T - 1 ? isfinite(out[i]) : isnan(out[i]), "row %lld element %lld: %g",
                  (long long)t, (long long)i, out[i]);
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
    free(k); free(v); free(q); free(out);
}

/* ---- masks in decode, and the window cache ------------------------------ */

/* Rounds x to values that f16 and bf16 both hold exactly (bf16's 8 bits of
 * mantissa, nothing below f16's smallest normal, 2^-14), so that caches of
 * every dtype hold the same keys and values as the float32 arrays and one
 * reference serves them all. */
static void round_to_halves(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u + 0x8000u) & 0xffff0000u;
        memcpy(&x[i], &u, 4);
        if (fabsf(x[i]) < 0x1p-14f) x[i] = 0.0f;
    }
}


/* Decode with masks against the reference rows, for one shape: two
 * sequences of lengths len[0] >= len[1] in full caches of each dtype
 * (holding the same values: round_to_halves), T new tokens with n_query
 * {T, T - 1}, every case in cases; 2 and 3 threads give the bits of 1.
 * Float32 sums over at most len keys of values below 1 against the
 * reference's double sums of float32 probabilities: 2e-5 of max|ref| over
 * the rows compared (seen: a few 1e-6). */
static double decode_masks_on(int64_t H, int64_t hkv, int64_t d, const int64_t len[2],
                              const int64_t *Ts, int n_T, const mask_case *cases, int n_cases,
                              uint64_t seed)
{
    const int64_t B = 2, S = len[0];
    const ra_dtype dtypes[3] = {RA_F32, RA_F16, RA_BF16};
    float *q = malloc(4 * B * S * H * d), *k = malloc(4 * B * S * hkv * d);
    float *v = malloc(4 * B * S * hkv * d), *ref = malloc(4 * B * S * H * d), sinks[16];
    decode_inputs(q, k, v, sinks, B, S, H, hkv, d, seed);
    round_to_halves(k, B * S * hkv * d);
    round_to_halves(v, B * S * hkv * d);
    ra_kv_cache *caches[3];
    const int64_t zero[2] = {0, 0};
    for (int di = 0; di < 3; di++) {
        CHECK(ra_kv_cache_create(&caches[di], B, S, hkv, d, dtypes[di]) == RA_OK, "cache");
        CHECK(append_rows(caches[di], k, v, B, S, hkv, d, zero, len, S) == RA_OK, "append");
    }
    ra_tensor kc, vc;
    ra_kv_cache_views(caches[0], &kc, &vc);
    CHECK(memcmp(kc.data, k, 4 * d) == 0, "RoPE at position 0 changed the keys");
    ra_context *ctx[2];
    CHECK(ra_context_create(&ctx[0], 2) == RA_OK && ra_context_create(&ctx[1], 3) == RA_OK, "ctx");
    const int64_t T_max = Ts[n_T - 1];
    float *qt = malloc(4 * B * T_max * H * d), *out = malloc(4 * B * T_max * H * d);
    float *again = malloc(4 * B * T_max * H * d);
    double worst = 0;
    for (int ci = 0; ci < n_cases; ci++) {
        const ra_attention_options o = mask_options(&cases[ci], sinks);
        for (int64_t b = 0; b < B; b++)
            reference_last_rows(ref + b * S * H * d, q + b * S * H * d, k + b * S * hkv * d,
                                v + b * S * hkv * d, len[b], T_max, H, hkv, d, &o);
        for (int ti = 0; ti < n_T; ti++) {
            const int64_t T = Ts[ti], nq[2] = {T, T > 1 ? T - 1 : 1};
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < T; t++) /* rows past nq: any query */
                    memcpy(qt + (b * T + t) * H * d,
                           q + (b * S + len[b] - nq[b] + (t < nq[b] ? t : 0)) * H * d, 4 * H * d);
            ra_tensor tq = ra_tensor_4d(qt, RA_F32, B, T, H, d);
            ra_tensor to = ra_tensor_4d(out, RA_F32, B, T, H, d);
            ra_tensor ta = ra_tensor_4d(again, RA_F32, B, T, H, d);
            for (int di = 0; di < 3; di++) {
                memset(out, 0, 4 * B * T * H * d);
                CHECK(ra_attention_decode(NULL, caches[di], &to, &tq, nq, &o) == RA_OK,
                      "decode: %s", ra_last_error());
                for (int64_t b = 0; b < B; b++) {
                    double e = ra_test_max_rel_diff(out + b * T * H * d,
                                                    ref + (b * S + len[b] - nq[b]) * H * d,
                                                    nq[b] * H * d);
                    worst = fmax(worst, e);
                    CHECK(e <= 2e-5, "H%lld Hkv%lld D%lld case %d T%lld dtype %d b%lld: %.3g",
                          (long long)H, (long long)hkv, (long long)d, ci, (long long)T,
                          (int)dtypes[di], (long long)b, e);
                }
                for (int c = 0; c < 2; c++) {
                    memset(again, 0, 4 * B * T * H * d);
                    CHECK(ra_attention_decode(ctx[c], caches[di], &ta, &tq, nq, &o) == RA_OK,
                          "decode on threads");
                    CHECK(memcmp(out, again, 4 * B * T * H * d) == 0,
                          "case %d T%lld dtype %d: %d threads changed bits", ci, (long long)T,
                          (int)dtypes[di], c + 2);
                }
            }
        }
    }
    for (int di = 0; di < 3; di++) ra_kv_cache_destroy(caches[di]);
    ra_context_destroy(ctx[0]);
    ra_context_destroy(ctx[1]);
    free(q); free(k); free(v); free(ref); free(qt); free(out); free(again);
    return worst;
}

/* Window, chunk, soft-cap, scale and sinks, alone and together, against
 * the reference over the whole sequence: W = 1, W past the length, windows
 * that are not multiples of RA_DECODE_CHUNK (1024) and cross its
 * boundaries, chunks across them, GQA groups of 2 and 4, D off the vector
 * widths, T up to 5, every cache dtype.  The shape without windows is short
 * (the reference is O(S^2)). */
static void test_decode_masks(void)
{
    static const mask_case everything[] = {
        {1, 0, 0, 0, 1},   {5000, 0, 2.0, 0, 0}, {100, 0, 0, 0, 0}, {0, 7, 0, 0, 0},
        {300, 0, 3.0, 0, 1}, {700, 500, 0, 0, 1}, {0, 64, 1.5, 0.2, 1}};
    static const mask_case windows[] = {
        {1100, 0, 2.5, 0, 1}, {0, 1000, 0, 0, 0}, {333, 1024, 4.0, 0.3, 0}};
    /* 1100 keys cross position 1024; a window of 1100 at 2100 crosses 1024
     * and 2048.  GQA groups of 3 and 2 heads: with T 1, 3 and 5, rows in
     * runs of 4, 2 and 1. */
    const int64_t short_len[2] = {1100, 700}, long_len[2] = {2100, 1100};
    const int64_t Ts_short[2] = {1, 3}, Ts_long[2] = {1, 5};
    double worst = decode_masks_on(3, 1, 20, short_len, Ts_short, 2, everything,
                                   (int)(sizeof everything / sizeof everything[0]), 50);
    worst = fmax(worst, decode_masks_on(2, 1, 16, long_len, Ts_long, 2, windows,
                                        (int)(sizeof windows / sizeof windows[0]), 60));
    printf("  decode with masks vs the reference: worst %.3g (bound 2e-5)\n", worst);
}

/* A window cache (a ring of W - 1 + max_new slots) decoding S = 1000
 * tokens, far past its capacity, in steps of 1 .. max_new tokens (ragged
 * across the two sequences) == the reference over the whole sequence with
 * that window, and the bits of a full cache holding every token (the same
 * chunks and blocks; only the slots differ), on 3 threads against 1.  The
 * bound as in decode_masks_on. */
static double ring_case(int64_t window, int64_t max_new, ra_dtype dtype, const mask_case *mc)
{
    const int64_t B = 2, S = 1000, H = 2, hkv = 1, d = 16, T = max_new;
    float *q = malloc(4 * B * S * H * d), *k = malloc(4 * B * S * hkv * d);
    float *v = malloc(4 * B * S * hkv * d), *ref = malloc(4 * B * S * H * d), sinks[2];
    float *qt = malloc(4 * B * T * H * d), *o_ring = calloc((size_t)(B * T * H * d), 4);
    float *o_full = calloc((size_t)(B * T * H * d), 4);
    ra_test_fill(q, (size_t)(B * S * H * d), window);
    ra_test_fill(k, (size_t)(B * S * hkv * d), window + 1);
    ra_test_fill(v, (size_t)(B * S * hkv * d), window + 2);
    ra_test_fill(sinks, (size_t)H, window + 3);
    for (int64_t i = 0; i < B * S * H * d; i++) q[i] *= 3.0f;
    round_to_halves(k, B * S * hkv * d);
    round_to_halves(v, B * S * hkv * d);
    const ra_attention_options o = mask_options(mc, sinks);
    for (int64_t b = 0; b < B; b++)
        reference_last_rows(ref + b * S * H * d, q + b * S * H * d, k + b * S * hkv * d,
                            v + b * S * hkv * d, S, S, H, hkv, d, &o);
    ra_kv_cache *ring, *full;
    CHECK(ra_kv_cache_create_window(&ring, B, window, max_new, hkv, d, dtype) == RA_OK, "ring");
    CHECK(ra_kv_cache_create(&full, B, S, hkv, d, dtype) == RA_OK, "full");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    ra_tensor tq = ra_tensor_4d(qt, RA_F32, B, T, H, d);
    ra_tensor tr = ra_tensor_4d(o_ring, RA_F32, B, T, H, d);
    ra_tensor tf = ra_tensor_4d(o_full, RA_F32, B, T, H, d);
    int64_t done[2] = {0, 0};
    double worst = 0;
    for (int64_t step = 0; done[0] < S || done[1] < S; step++) {
        int64_t n[2] = {1 + step % max_new, max_new - step % max_new};
        for (int64_t b = 0; b < B; b++) {
            n[b] = n[b] < S - done[b] ? n[b] : S - done[b];
            for (int64_t t = 0; t < n[b]; t++)
                memcpy(qt + (b * T + t) * H * d, q + (b * S + done[b] + t) * H * d, 4 * H * d);
        }
        CHECK(append_rows(ring, k, v, B, S, hkv, d, done, n, T) == RA_OK, "append ring");
        CHECK(append_rows(full, k, v, B, S, hkv, d, done, n, T) == RA_OK, "append full");
        CHECK(ra_attention_decode(ctx, ring, &tr, &tq, n, &o) == RA_OK, "decode ring: %s",
              ra_last_error());
        CHECK(ra_attention_decode(NULL, full, &tf, &tq, n, &o) == RA_OK, "decode full");
        for (int64_t b = 0; b < B; b++) {
            CHECK(memcmp(o_ring + b * T * H * d, o_full + b * T * H * d, 4 * n[b] * H * d) == 0,
                  "W %lld step %lld b%lld: the ring's bits differ from the full cache's",
                  (long long)window, (long long)step, (long long)b);
            double e = ra_test_max_rel_diff(o_ring + b * T * H * d,
                                            ref + (b * S + done[b]) * H * d, n[b] * H * d);
            worst = fmax(worst, e);
            CHECK(e <= 2e-5, "W %lld max_new %lld dtype %d step %lld b%lld: %.3g",
                  (long long)window, (long long)max_new, (int)dtype, (long long)step,
                  (long long)b, e);
            done[b] += n[b];
            CHECK(ra_kv_cache_length(ring, b) == done[b], "the ring's length is absolute");
        }
    }
    ra_context_destroy(ctx);
    ra_kv_cache_destroy(ring);
    ra_kv_cache_destroy(full);
    free(q); free(k); free(v); free(ref); free(qt); free(o_ring); free(o_full);
    return worst;
}

/* Windows inside one 1024-position chunk and across several, a ring of
 * exactly W slots (max_new 1) whose windows wrap it, multi-token steps, a
 * chunked layer on a cache of window C, soft-cap and sinks, 16-bit caches. */
static void test_window_cache(void)
{
    static const mask_case w100 = {100, 0, 0, 0, 0}, w1 = {1, 0, 0, 0, 1};
    static const mask_case w300 = {300, 0, 2.0, 0, 1}, c200 = {0, 200, 0, 0, 0};
    static const mask_case w150 = {150, 0, 0, 0, 0}; /* smaller than the cache's 250 */
    double worst = ring_case(100, 1, RA_F32, &w100);
    worst = fmax(worst, ring_case(100, 7, RA_F16, &w100));
    worst = fmax(worst, ring_case(1, 3, RA_F32, &w1));
    worst = fmax(worst, ring_case(300, 5, RA_BF16, &w300));
    worst = fmax(worst, ring_case(200, 4, RA_F32, &c200));
    worst = fmax(worst, ring_case(250, 2, RA_F32, &w150));
    printf("  window cache over 1000 tokens vs the reference: worst %.3g (bound 2e-5)\n", worst);
}

/* What decode refuses, and a window cache's limits: none of them writes. */
static void test_decode_refusals(void)
{
    const int64_t h = 2, hkv = 1, d = 8;
    float k[4 * 8], v[4 * 8], q[4 * 2 * 8], out[4 * 2 * 8], before[4 * 2 * 8];
    ra_test_fill(k, 32, 1);
    ra_test_fill(v, 32, 2);
    ra_test_fill(q, 64, 3);
    ra_test_fill(out, 64, 4);
    memcpy(before, out, sizeof out);
    ra_kv_cache *full, *ring;
    CHECK(ra_kv_cache_create(&full, 1, 4, hkv, d, RA_F32) == RA_OK, "full");
    CHECK(ra_kv_cache_create_window(&ring, 1, 3, 2, hkv, d, RA_BF16) == RA_OK, "ring");
    const int64_t two[1] = {2}, three[1] = {3}, zero[1] = {0};
    CHECK(append_rows(full, k, v, 1, 4, hkv, d, zero, two, 2) == RA_OK, "append full");
    CHECK(append_rows(ring, k, v, 1, 4, hkv, d, zero, two, 2) == RA_OK, "append ring");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, h, d), to = ra_tensor_4d(out, RA_F32, 1, 1, h, d);
    ra_attention_options o = ra_attention_options_init();
    o.dropout = 0.1f;
    CHECK(ra_attention_decode(NULL, full, &to, &tq, NULL, &o) == RA_ERR_UNSUPPORTED, "dropout");
    o = ra_attention_options_init();
    const uint8_t real[1] = {1};
    o.padding_mask = real;
    CHECK(ra_attention_decode(NULL, full, &to, &tq, NULL, &o) == RA_ERR_UNSUPPORTED, "padding");
    o = ra_attention_options_init();
    const int64_t cu[2] = {0, 1};
    o.cu_seqlens = cu;
    o.n_documents = 1;
    CHECK(ra_attention_decode(NULL, full, &to, &tq, NULL, &o) == RA_ERR_UNSUPPORTED, "cu_seqlens");
    o = ra_attention_options_init();
    const float bad_sinks[2] = {0.0f, NAN};
    o.sinks = bad_sinks;
    CHECK(ra_attention_decode(NULL, full, &to, &tq, NULL, &o) == RA_ERR_ARGUMENT, "NaN sink");
    /* a window cache: its reach, at most W back, and at most max_new queries */
    o = ra_attention_options_init();
    CHECK(ra_attention_decode(NULL, ring, &to, &tq, NULL, &o) == RA_ERR_ARGUMENT, "no window");
    o.window = 4;
    CHECK(ra_attention_decode(NULL, ring, &to, &tq, NULL, &o) == RA_ERR_ARGUMENT, "window 4 > 3");
    o.chunk = 3; /* the chunk alone keeps within 3 keys */
    CHECK(ra_attention_decode(NULL, ring, &to, &tq, NULL, &o) == RA_OK, "window 4, chunk 3");
    o.window = 2;
    o.chunk = 0;
    CHECK(ra_attention_decode(NULL, ring, &to, &tq, NULL, &o) == RA_OK, "window 2 < 3");
    memcpy(before, out, sizeof out);
    CHECK(append_rows(ring, k, v, 1, 4, hkv, d, two, two, 2) == RA_OK, "append ring");
    ra_tensor tq3 = ra_tensor_4d(q, RA_F32, 1, 3, h, d), to3 = ra_tensor_4d(out, RA_F32, 1, 3, h, d);
    CHECK(ra_attention_decode(NULL, ring, &to3, &tq3, NULL, &o) == RA_ERR_SIZE, "3 > max_new");
    ra_tensor kc, vc;
    ra_kv_cache_views(ring, &kc, &vc);
    uint16_t ring_before[4 * 8];
    memcpy(ring_before, kc.data, sizeof ring_before);
    CHECK(append_rows(ring, k, v, 1, 4, hkv, d, zero, three, 3) == RA_ERR_CACHE_FULL, "3 new");
    CHECK(ra_kv_cache_length(ring, 0) == 4 && memcmp(ring_before, kc.data, sizeof ring_before) == 0,
          "a refused append changed the ring");
    CHECK(memcmp(before, out, sizeof out) == 0, "a refused decode wrote");
    ra_kv_cache *none = NULL;
    CHECK(ra_kv_cache_create_window(&none, 1, 0, 1, hkv, d, RA_F32) == RA_ERR_SIZE && !none, "W 0");
    CHECK(ra_kv_cache_create_window(&none, 1, 2, 0, hkv, d, RA_F32) == RA_ERR_SIZE, "max_new 0");
    CHECK(ra_kv_cache_create_window(&none, 1, INT64_MAX, 2, hkv, d, RA_F32) == RA_ERR_OVERFLOW,
          "capacity overflow");
    CHECK(ra_kv_cache_create_window(NULL, 1, 2, 1, hkv, d, RA_F32) == RA_ERR_NULL, "NULL out");
    ra_kv_cache_destroy(full);
    ra_kv_cache_destroy(ring);
}

/* A full cache, a too-long append and bad arguments change nothing. */
static void test_errors(void)
{
    const int64_t d = 8, hkv = 1;
    ra_rope_config rc = ra_rope_config_default(d);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_kv_cache *cache = NULL;
    CHECK(ra_kv_cache_create(&cache, 1, 0, hkv, d, RA_F32) == RA_ERR_SIZE, "capacity 0");
    CHECK(ra_kv_cache_create(&cache, 1, 4, hkv, 7, RA_F32) == RA_ERR_HEAD_DIM, "odd D");
    CHECK(ra_kv_cache_create(&cache, 1, 4, hkv, d, (ra_dtype)9) == RA_ERR_ARGUMENT, "dtype");
    CHECK(ra_kv_cache_create(&cache, (int64_t)1 << 40, (int64_t)1 << 40, hkv, d, RA_F32) ==
              RA_ERR_OVERFLOW, "overflow");
    CHECK(ra_kv_cache_create(&cache, 1, 4, hkv, d, RA_BF16) == RA_OK, "create");
    float k[5 * 8], v[5 * 8], q[5 * 8];
    ra_test_fill(k, 40, 1);
    ra_test_fill(v, 40, 2);
    ra_test_fill(q, 40, 3);
    ra_tensor t3k = ra_tensor_4d(k, RA_F32, 1, 3, hkv, d), t3v = ra_tensor_4d(v, RA_F32, 1, 3, hkv, d);
    ra_positions p = {.struct_size = sizeof p, .start = 0};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &t3k, &t3v, &p, NULL) == RA_OK, "append 3");
    ra_tensor kc, vc;
    CHECK(ra_kv_cache_views(cache, &kc, &vc) == RA_OK, "views");
    uint16_t before[4 * 8];
    memcpy(before, kc.data, sizeof before);
    float k_before[40];
    memcpy(k_before, k, sizeof k);
    ra_tensor t2k = ra_tensor_4d(k, RA_F32, 1, 2, hkv, d), t2v = ra_tensor_4d(v, RA_F32, 1, 2, hkv, d);
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &t2k, &t2v, &p, NULL) == RA_ERR_CACHE_FULL,
          "overflow");
    CHECK(ra_kv_cache_length(cache, 0) == 3 && memcmp(before, kc.data, sizeof before) == 0 &&
              memcmp(k_before, k, sizeof k) == 0, "a refused append changed something");
    ra_tensor t1k = ra_tensor_4d(k, RA_F32, 1, 1, hkv, d), t1v = ra_tensor_4d(v, RA_F32, 1, 1, hkv, d);
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &t1k, &t1v, &p, NULL) == RA_OK, "fill");
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &t1k, &t1v, &p, NULL) == RA_ERR_CACHE_FULL,
          "full");
    ra_positions neg = {.struct_size = sizeof neg, .start = -1};
    ra_kv_cache_reset(cache);
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &t1k, &t1v, &neg, NULL) == RA_ERR_POSITION, "pos");
    const int64_t too_many[1] = {2};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &t1k, &t1v, &p, too_many) == RA_ERR_ARGUMENT, "n_new");
    ra_tensor wrong = ra_tensor_4d(k, RA_F32, 1, 1, 2, 4);
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &wrong, &wrong, &p, NULL) == RA_ERR_SHAPE, "shape");
    CHECK(ra_kv_cache_length(cache, 0) == 0, "reset");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, 2, d), to = ra_tensor_4d(q + 16, RA_F32, 1, 1, 2, d);
    CHECK(ra_attention_decode(NULL, cache, &to, &tq, NULL, NULL) == RA_ERR_SIZE, "decode on an empty cache");
    CHECK(ra_kv_cache_length(cache, 5) == -1 && strstr(ra_last_error(), "sequence 5"),
          "length of sequence 5: %s", ra_last_error());
    CHECK(ra_kv_cache_length(NULL, 0) == -1 && strstr(ra_last_error(), "NULL"), "length of NULL");
    ra_dtype dtype = RA_F32;
    CHECK(ra_kv_cache_dtype(cache, &dtype) == RA_OK && dtype == RA_BF16, "dtype");
    CHECK(ra_kv_cache_dtype(NULL, &dtype) == RA_ERR_NULL && ra_kv_cache_dtype(cache, NULL) ==
              RA_ERR_NULL, "dtype of NULL");
    ra_kv_cache_destroy(cache);
    ra_kv_cache_destroy(NULL);
    ra_rope_destroy(rope);
}

/* ---- 16-bit inputs, positions NULL, and the step in one call ------------ */

enum { XB = 2, XS = 20, XH = 4, XHKV = 2, XD = 16 }; /* XS: more than one append block */
static const int64_t x_starts[XB] = {3, 7}, x_new[XB] = {20, 13};

/* n values of x rounded to dtype, into bits (uint16) and back into x, so
 * that the float32 copy holds the 16-bit values widened. */
static void round_to(float *x, uint16_t *bits, int64_t n, ra_dtype dtype)
{
    ra_convert(bits, dtype, x, RA_F32, n);
    ra_convert(x, RA_F32, bits, dtype, n);
}

/* Each sequence's tokens in float32 (ra_kv_cache_read), equal in a and b. */
static int caches_equal(const ra_kv_cache *a, const ra_kv_cache *b)
{
    int same = 1;
    for (int64_t s = 0; s < XB; s++) {
        const int64_t n = ra_kv_cache_length(a, s);
        float *ka = calloc((size_t)(n * XHKV * XD), 4), *va = calloc((size_t)(n * XHKV * XD), 4);
        float *kb = calloc((size_t)(n * XHKV * XD), 4), *vb = calloc((size_t)(n * XHKV * XD), 4);
        ra_tensor tka = ra_tensor_4d(ka, RA_F32, 1, n, XHKV, XD), tva = ra_tensor_4d(va, RA_F32, 1, n, XHKV, XD);
        ra_tensor tkb = ra_tensor_4d(kb, RA_F32, 1, n, XHKV, XD), tvb = ra_tensor_4d(vb, RA_F32, 1, n, XHKV, XD);
        same &= n == ra_kv_cache_length(b, s) && ra_kv_cache_read(a, s, 0, &tka, &tva) == RA_OK &&
                ra_kv_cache_read(b, s, 0, &tkb, &tvb) == RA_OK &&
                memcmp(ka, kb, (size_t)(n * XHKV * XD) * 4) == 0 &&
                memcmp(va, vb, (size_t)(n * XHKV * XD) * 4) == 0;
        free(ka); free(va); free(kb); free(vb);
    }
    return same;
}

/* A 16-bit q, k, v appended to a cache of any dtype store the same bits as
 * their values widened to f32 (rotated in float32, then converted or
 * quantized once); q and k come back rotated as ra_rope_apply rotates them
 * in their own dtype; decoding a 16-bit q is decoding its f32 values. */
static void test_append_16bit(void)
{
    const int64_t nq = XB * XS * XH * XD, nk = XB * XS * XHKV * XD;
    static const ra_dtype caches[] = {RA_F32, RA_F16, RA_BF16, RA_I8, RA_F8E4M3};
    ra_rope_config rc = ra_rope_config_hf(XD);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    ra_positions at = ra_positions_start(0);
    at.starts = x_starts;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk);
    float *o32 = malloc(4 * nq), *o16 = malloc(4 * nq);
    uint16_t *q16 = malloc(2 * nq), *k16 = malloc(2 * nk), *v16 = malloc(2 * nk);
    uint16_t *qr = malloc(2 * nq), *kr = malloc(2 * nk);
    for (int in = RA_F16; in <= RA_BF16; in++)
        for (size_t c = 0; c < sizeof caches / sizeof caches[0]; c++) {
            const ra_dtype dt = (ra_dtype)in;
            ra_test_fill(q, nq, 61);
            ra_test_fill(k, nk, 62);
            ra_test_fill(v, nk, 63);
            round_to(q, q16, nq, dt);
            round_to(k, k16, nk, dt);
            round_to(v, v16, nk, dt);
            memcpy(qr, q16, 2 * nq); /* the rotation expected in place */
            memcpy(kr, k16, 2 * nk);
            ra_tensor tqr = ra_tensor_4d(qr, dt, XB, XS, XH, XD), tkr = ra_tensor_4d(kr, dt, XB, XS, XHKV, XD);
            CHECK(ra_rope_apply(NULL, rope, &tqr, &tqr, &at, RA_FORWARD) == RA_OK &&
                  ra_rope_apply(NULL, rope, &tkr, &tkr, &at, RA_FORWARD) == RA_OK, "rope");
            ra_kv_cache *wide = NULL, *half = NULL;
            CHECK(ra_kv_cache_create(&wide, XB, 64, XHKV, XD, caches[c]) == RA_OK &&
                  ra_kv_cache_create(&half, XB, 64, XHKV, XD, caches[c]) == RA_OK, "caches");
            ra_tensor tq = ra_tensor_4d(q, RA_F32, XB, XS, XH, XD), tk = ra_tensor_4d(k, RA_F32, XB, XS, XHKV, XD);
            ra_tensor tv = ra_tensor_4d(v, RA_F32, XB, XS, XHKV, XD);
            ra_tensor hq = ra_tensor_4d(q16, dt, XB, XS, XH, XD), hk = ra_tensor_4d(k16, dt, XB, XS, XHKV, XD);
            ra_tensor hv = ra_tensor_4d(v16, dt, XB, XS, XHKV, XD);
            CHECK(ra_kv_cache_append(NULL, wide, rope, &tq, &tk, &tv, &at, x_new) == RA_OK,
                  "f32 append: %s", ra_last_error());
            ra_status st = ra_kv_cache_append(ctx, half, rope, &hq, &hk, &hv, &at, x_new);
            CHECK(st == RA_OK, "input %d, cache %d: 16-bit append: %s", in, (int)caches[c],
                  ra_last_error());
            CHECK(caches_equal(wide, half), "input %d, cache %d: the cache differs from the f32 "
                  "input's", in, (int)caches[c]);
            int rotated = 1; /* rows past n_new stay as given */
            for (int64_t b = 0; b < XB; b++)
                for (int64_t t = 0; t < XS; t++) {
                    const int64_t iq = (b * XS + t) * XH * XD, ik = (b * XS + t) * XHKV * XD;
                    const uint16_t *wq = t < x_new[b] ? qr + iq : q16 + iq;
                    const uint16_t *wk = t < x_new[b] ? kr + ik : k16 + ik;
                    rotated &= memcmp(q16 + iq, wq, 2 * XH * XD) == 0 &&
                               memcmp(k16 + ik, wk, 2 * XHKV * XD) == 0;
                }
            CHECK(rotated, "input %d, cache %d: q or k not rotated as ra_rope_apply does", in,
                  (int)caches[c]);
            /* decode: q of 16 bits is its f32 values (q16 rotated, q its widening) */
            ra_convert(q, RA_F32, q16, dt, nq);
            ra_tensor to32 = ra_tensor_4d(o32, RA_F32, XB, XS, XH, XD);
            ra_tensor to16 = ra_tensor_4d(o16, RA_F32, XB, XS, XH, XD);
            memset(o32, 0, 4 * nq);
            memset(o16, 0, 4 * nq);
            CHECK(ra_attention_decode(ctx, half, &to32, &tq, x_new, NULL) == RA_OK &&
                  ra_attention_decode(ctx, half, &to16, &hq, x_new, NULL) == RA_OK,
                  "decode: %s", ra_last_error());
            CHECK(memcmp(o32, o16, 4 * nq) == 0, "input %d, cache %d: decode of a 16-bit q",
                  in, (int)caches[c]);
            ra_kv_cache_destroy(wide);
            ra_kv_cache_destroy(half);
        }
    free(q); free(k); free(v); free(o32); free(o16);
    free(q16); free(k16); free(v16); free(qr); free(kr);
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
}

/* positions NULL continues each sequence from its length: two appends
 * store and rotate what positions starting at the lengths give. */
static void test_append_continues(void)
{
    const int64_t nq = XB * XS * XH * XD, nk = XB * XS * XHKV * XD;
    ra_rope_config rc = ra_rope_config_hf(XD);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_kv_cache *given, *cont;
    CHECK(ra_kv_cache_create(&given, XB, 64, XHKV, XD, RA_F32) == RA_OK &&
          ra_kv_cache_create(&cont, XB, 64, XHKV, XD, RA_F32) == RA_OK, "caches");
    float *q[2], *k[2], *v[2];
    for (int i = 0; i < 2; i++) {
        q[i] = malloc(4 * nq), k[i] = malloc(4 * nk), v[i] = malloc(4 * nk);
    }
    for (int step = 0; step < 3; step++) {
        ra_test_fill(q[0], nq, 70 + step);
        ra_test_fill(k[0], nk, 80 + step);
        ra_test_fill(v[0], nk, 90 + step);
        memcpy(q[1], q[0], 4 * nq);
        memcpy(k[1], k[0], 4 * nk);
        memcpy(v[1], v[0], 4 * nk);
        int64_t lengths[XB];
        for (int64_t b = 0; b < XB; b++) lengths[b] = ra_kv_cache_length(given, b);
        ra_positions at = ra_positions_start(0);
        at.starts = lengths;
        ra_tensor t[2][3];
        for (int i = 0; i < 2; i++) {
            t[i][0] = ra_tensor_4d(q[i], RA_F32, XB, XS, XH, XD);
            t[i][1] = ra_tensor_4d(k[i], RA_F32, XB, XS, XHKV, XD);
            t[i][2] = ra_tensor_4d(v[i], RA_F32, XB, XS, XHKV, XD);
        }
        CHECK(ra_kv_cache_append(NULL, given, rope, &t[0][0], &t[0][1], &t[0][2], &at, x_new) ==
                  RA_OK, "given: %s", ra_last_error());
        CHECK(ra_kv_cache_append(NULL, cont, rope, &t[1][0], &t[1][1], &t[1][2], NULL, x_new) ==
                  RA_OK, "step %d: positions NULL: %s", step, ra_last_error());
        CHECK(memcmp(q[0], q[1], 4 * nq) == 0 && caches_equal(given, cont),
              "step %d: positions NULL is not the lengths", step);
    }
    for (int i = 0; i < 2; i++) {
        free(q[i]); free(k[i]); free(v[i]);
    }
    ra_kv_cache_destroy(given);
    ra_kv_cache_destroy(cont);
    ra_rope_destroy(rope);
}

/* With a rope, q and k are rotated in place: a k or q whose elements share
 * an address (a broadcast view, stride 0) is refused naming it, with the
 * cache unchanged; it was taken, its rotation refused unseen, and the keys
 * stored unrotated. */
static void test_append_broadcast_refused(void)
{
    enum { S = 3, H = 2, D = 8 };
    ra_rope_config rc = ra_rope_config_hf(D);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 16, H, D, RA_F32) == RA_OK, "cache");
    float q[S * H * D], k[H * D], v[S * H * D];
    ra_test_fill(q, S * H * D, 1);
    ra_test_fill(k, H * D, 2);
    ra_test_fill(v, S * H * D, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tv = ra_tensor_4d(v, RA_F32, 1, S, H, D);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    tk.stride[1] = 0; /* one key row for every token */
    CHECK(ra_kv_cache_append(NULL, cache, rope, &tq, &tk, &tv, NULL, NULL) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "k: stride[1] 0"),
          "broadcast k: %s", ra_last_error());
    ra_tensor tq0 = tq, tk1 = ra_tensor_4d(v, RA_F32, 1, S, H, D);
    tq0.stride[2] = 0;
    float o[S * H * D];
    ra_tensor to = ra_tensor_4d(o, RA_F32, 1, S, H, D);
    CHECK(ra_kv_cache_attend(NULL, cache, rope, &to, &tq0, &tk1, &tk1, NULL, NULL, NULL) ==
              RA_ERR_ARGUMENT, "broadcast q: %s", ra_last_error());
    CHECK(ra_kv_cache_length(cache, 0) == 0, "a refused append stored %lld tokens",
          (long long)ra_kv_cache_length(cache, 0));
    /* without a rope nothing is written to k: a broadcast k is stored as given */
    CHECK(ra_kv_cache_append(NULL, cache, NULL, NULL, &tk, &tv, NULL, NULL) == RA_OK,
          "broadcast k, no rope: %s", ra_last_error());
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
}

/* The cache's own storage (ra_kv_cache_views, for reading) given back as
 * an output or an appended input is refused naming it, and so is an out
 * whose elements share an address, the cache unchanged: out was written
 * into the cached keys, k rotated there in place, and a broadcast out
 * written row over row, with RA_OK. */
static void test_cache_storage_refused(void)
{
    enum { S = 2, H = 2, D = 8 };
    ra_rope_config rc = ra_rope_config_hf(D);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 8, H, D, RA_F32) == RA_OK, "cache");
    float q[S * H * D], k[S * H * D], v[S * H * D];
    ra_test_fill(q, S * H * D, 1);
    ra_test_fill(k, S * H * D, 2);
    ra_test_fill(v, S * H * D, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), ck = {0}, cv = {0};
    CHECK(ra_kv_cache_append(NULL, cache, rope, &tq, &tk, &tv, NULL, NULL) == RA_OK &&
              ra_kv_cache_views(cache, &ck, &cv) == RA_OK, "%s", ra_last_error());
    float before[2][S * H * D];
    ra_tensor rk = ra_tensor_4d(before[0], RA_F32, 1, S, H, D);
    ra_tensor rv = ra_tensor_4d(before[1], RA_F32, 1, S, H, D);
    CHECK(ra_kv_cache_read(cache, 0, 0, &rk, &rv) == RA_OK, "read");
    ra_tensor rows = ck; /* the keys of tokens 0 and 1, in place */
    rows.shape[1] = S;
    CHECK(ra_attention_decode(NULL, cache, &rows, &tq, NULL, NULL) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "out overlaps the cache's own storage"),
          "decode into the cache: %s", ra_last_error());
    CHECK(ra_kv_cache_attend(NULL, cache, rope, &rows, &tq, &tk, &tv, NULL, NULL, NULL) ==
              RA_ERR_ARGUMENT, "attend into the cache: %s", ra_last_error());
    CHECK(ra_kv_cache_append(NULL, cache, rope, &tq, &rows, &tv, NULL, NULL) ==
              RA_ERR_ARGUMENT && strstr(ra_last_error(), "k overlaps the cache's own storage"),
          "cached keys appended again: %s", ra_last_error());
    /* an out whose query rows share an address (stride 0): each row's
     * result written over the last, with RA_OK */
    float o[S * H * D];
    ra_tensor shared = ra_tensor_4d(o, RA_F32, 1, S, H, D);
    shared.stride[1] = 0;
    CHECK(ra_attention_decode(NULL, cache, &shared, &tq, NULL, NULL) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "out: stride[1] 0"),
          "decode into a broadcast out: %s", ra_last_error());
    CHECK(ra_kv_cache_attend(NULL, cache, rope, &shared, &tq, &tk, &tv, NULL, NULL, NULL) ==
              RA_ERR_ARGUMENT, "attend into a broadcast out: %s", ra_last_error());
    float after[2][S * H * D];
    rk.data = after[0], rv.data = after[1];
    CHECK(ra_kv_cache_read(cache, 0, 0, &rk, &rv) == RA_OK &&
              memcmp(before, after, sizeof before) == 0 && ra_kv_cache_length(cache, 0) == S,
          "a refused call changed the cache");
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
}

/* ra_kv_cache_attend == ra_kv_cache_append + ra_attention_decode of the
 * new tokens, bit for bit (cache and out), on a prefill and then steps, 16-bit
 * inputs and a window; a refusal of either part changes nothing. */
static void test_attend(void)
{
    const int64_t nq = XB * XS * XH * XD, nk = XB * XS * XHKV * XD;
    ra_rope_config rc = ra_rope_config_hf(XD);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    ra_attention_options opts = ra_attention_options_init();
    opts.window = 9;
    opts.softcap = 30.0;
    uint16_t *q[2], *k[2], *v[2];
    float *out[2];
    for (int i = 0; i < 2; i++) { /* k's buffer holds the f32 out of on_k below, so that
                                     that view overlaps k alone, wherever the heap puts
                                     the caches */
        q[i] = malloc(2 * nq), k[i] = malloc(4 * nq), v[i] = malloc(2 * nk);
        out[i] = calloc((size_t)nq, 4);
    }
    float *x = malloc(4 * nq);
    ra_kv_cache *two, *one;
    CHECK(ra_kv_cache_create(&two, XB, 40, XHKV, XD, RA_BF16) == RA_OK &&
          ra_kv_cache_create(&one, XB, 40, XHKV, XD, RA_BF16) == RA_OK, "caches");
    const int64_t steps[3][XB] = {{20, 13}, {1, 1}, {2, 0}};
    for (int step = 0; step < 3; step++) {
        uint16_t *in[3] = {q[0], k[0], v[0]};
        const int64_t n[3] = {nq, nk, nk};
        for (int j = 0; j < 3; j++) {
            ra_test_fill(x, n[j], 100 + 3 * step + j);
            ra_convert(in[j], RA_BF16, x, RA_F32, n[j]);
        }
        memcpy(q[1], q[0], 2 * nq);
        memcpy(k[1], k[0], 2 * nk);
        memcpy(v[1], v[0], 2 * nk);
        ra_tensor t[2][4];
        for (int i = 0; i < 2; i++) {
            t[i][0] = ra_tensor_4d(q[i], RA_BF16, XB, XS, XH, XD);
            t[i][1] = ra_tensor_4d(k[i], RA_BF16, XB, XS, XHKV, XD);
            t[i][2] = ra_tensor_4d(v[i], RA_BF16, XB, XS, XHKV, XD);
            t[i][3] = ra_tensor_4d(out[i], RA_F32, XB, XS, XH, XD);
        }
        CHECK(ra_kv_cache_append(ctx, two, rope, &t[0][0], &t[0][1], &t[0][2], NULL,
                                 steps[step]) == RA_OK &&
              ra_attention_decode(ctx, two, &t[0][3], &t[0][0], steps[step], &opts) == RA_OK,
              "append, decode: %s", ra_last_error());
        CHECK(ra_kv_cache_attend(ctx, one, rope, &t[1][3], &t[1][0], &t[1][1], &t[1][2], NULL,
                                 steps[step], &opts) == RA_OK,
              "step %d: attend: %s", step, ra_last_error());
        CHECK(memcmp(out[0], out[1], 4 * nq) == 0 && memcmp(q[0], q[1], 2 * nq) == 0 &&
              caches_equal(two, one), "step %d: attend differs from append + decode", step);
    }
    /* refusals: the decode's (dropout), the append's (no room) */
    ra_tensor tq = ra_tensor_4d(q[1], RA_BF16, XB, XS, XH, XD), tk = ra_tensor_4d(k[1], RA_BF16, XB, XS, XHKV, XD);
    ra_tensor tv = ra_tensor_4d(v[1], RA_BF16, XB, XS, XHKV, XD), to = ra_tensor_4d(out[1], RA_F32, XB, XS, XH, XD);
    memcpy(out[0], out[1], 4 * nq);
    memcpy(q[0], q[1], 2 * nq);
    ra_attention_options drop = opts;
    drop.dropout = 0.5f;
    CHECK(ra_kv_cache_attend(ctx, one, rope, &to, &tq, &tk, &tv, NULL, NULL, &drop) ==
              RA_ERR_UNSUPPORTED, "dropout");
    CHECK(ra_kv_cache_attend(ctx, one, rope, &to, &tq, &tk, &tv, NULL, NULL, &opts) ==
              RA_ERR_CACHE_FULL, "full");
    ra_tensor on_k = ra_tensor_4d(k[1], RA_F32, XB, XS, XH, XD); /* refused: never written */
    CHECK(ra_kv_cache_attend(ctx, one, rope, &on_k, &tq, &tk, &tv, NULL, NULL, &opts) ==
              RA_ERR_ARGUMENT && strstr(ra_last_error(), "out overlaps k"), "out on k: %s",
          ra_last_error());
    CHECK(ra_kv_cache_length(one, 0) == 23 && ra_kv_cache_length(one, 1) == 14 &&
              memcmp(out[0], out[1], 4 * nq) == 0 && memcmp(q[0], q[1], 2 * nq) == 0 &&
              caches_equal(two, one), "a refused attend changed something");
    for (int i = 0; i < 2; i++) {
        free(q[i]); free(k[i]); free(v[i]); free(out[i]);
    }
    free(x);
    ra_kv_cache_destroy(two);
    ra_kv_cache_destroy(one);
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
}

/* Every case reaches the SIMD kernels (test_errors: the calls that must
 * succeed), so each runs on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_prefill_then_decode);
    RUN(test_attention_prefill_vs_decode);
    RUN(test_decode_matches_reference);
    RUN(test_decode_shapes);
    RUN(test_decode_nan_stays_out_of_earlier_rows);
    RUN(test_errors);
    RUN(test_decode_masks);
    RUN(test_window_cache);
    RUN(test_decode_refusals);
    RUN(test_append_16bit);
    RUN(test_append_continues);
    RUN(test_append_broadcast_refused);
    RUN(test_cache_storage_refused);
    RUN(test_attend);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("kvcache");
}
