/*
 * test_decode_q8.c — ra_attention_options' quantize_q: decode over an int8
 * cache with each query row quantized to int8 too.  Against a scalar
 * reference of the stated arithmetic (codes round(x / s_q), s_q = max|x|
 * / 127: the cache's quantizer; the integer sums in int64; each score
 * ((float)sum s_q) s_k; the softmax in
 * double) over GQA, masks, ragged lengths and queries, D with and without
 * a tail past whole 64 bytes; the same bits for 1-3 threads, for a window
 * cache and a pool as for a full cache, ra_kv_cache_attend and
 * ra_attention_decode_lse as ra_attention_decode; each score the
 * reference's bits on every kernel (VNNI's too); the error against the
 * exact path on keys and queries with outlier channels; the refusals.
 *
 *   q, out: [B, T, H, D]   k, v: [B, S, Hkv, D] f32; caches [B, S, Hkv, D]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kvcache_common.h"
#include "quant8.h"
#include "ropeattn.h"

/* A query row x = q scale [d] as the stated codes, c = round(x / s_q), s_q
 * = max|x| / 127 (rint: the test's rounding mode is to nearest, ties to
 * even), returning s_q; 0 for zeros. */
static float q8_codes(int8_t *codes, const float *q, float scale, int64_t d)
{
    float m = 0.0f, x[1100];
    for (int64_t e = 0; e < d; e++) {
        x[e] = q[e] * scale;
        m = fmaxf(m, fabsf(x[e]));
    }
    const float s = m / 127.0f;
    for (int64_t e = 0; e < d; e++)
        codes[e] = s > 0 ? (int8_t)rint(fminf(fmaxf(x[e] / s, -127.0f), 127.0f)) : 0;
    return s;
}

/* The keys the query at position p sees under o: causal, window, chunk. */
static int sees(const ra_attention_options *o, int64_t p, int64_t j)
{
    return j <= p && (!o->window || j > p - o->window) && (!o->chunk || j / o->chunk == p / o->chunk);
}

/* One output row of quantize_q's decode: query q [D] (head h) at position
 * p of a sequence whose keys are codes kc [len, Hkv, D] with scales ks
 * [len, Hkv] and values v [len, Hkv, D] (dequantized), kv head g. */
static void reference_row(float *out, const float *q, int64_t p, int64_t h, int64_t g,
                          const int8_t *kc, const float *ks, const float *v, int64_t hkv,
                          int64_t d, const ra_attention_options *o)
{
    int8_t qc[1100];
    const float scale = (float)(o->scale ? o->scale : 1.0 / sqrt((double)d));
    const float sq = q8_codes(qc, q, scale, d);
    double m = o->sinks ? o->sinks[h] : -INFINITY, l = 0, acc[1100] = {0};
    double *s = malloc(sizeof(double) * (size_t)(p + 1));
    for (int64_t j = 0; j <= p; j++) {
        if (!sees(o, p, j)) continue;
        int64_t sum = 0;
        for (int64_t e = 0; e < d; e++) sum += (int64_t)qc[e] * kc[(j * hkv + g) * d + e];
        const float score = ((float)sum * sq) * ks[j * hkv + g]; /* the stated order */
        s[j] = o->softcap ? o->softcap * tanh(score / o->softcap) : score;
        m = fmax(m, s[j]);
    }
    if (o->sinks) l = exp(o->sinks[h] - m);
    for (int64_t j = 0; j <= p; j++) {
        if (!sees(o, p, j)) continue;
        const double w = exp(s[j] - m);
        l += w;
        for (int64_t e = 0; e < d; e++) acc[e] += w * v[(j * hkv + g) * d + e];
    }
    for (int64_t e = 0; e < d; e++) out[e] = (float)(acc[e] / l);
    free(s);
}

/* The int8 codes, scales and dequantized values of n rows of D of x (as
 * the cache's append stores them: rows at RoPE position 0). */
static void cache_codes(int8_t *codes, float *scales, float *dequant, const float *x, int64_t n,
                        int64_t d)
{
    for (int64_t i = 0; i < n; i++) {
        scales[i] = ra_quantize_i8(codes + i * d, x + i * d, d);
        for (int64_t e = 0; e < d; e++) dequant[i * d + e] = scales[i] * codes[i * d + e];
    }
}

/* quantize_q's decode over an int8 cache against reference_row for one
 * shape: two sequences of lengths len[0] >= len[1], T new tokens with
 * n_query {T, T - 1}, each mask case; 2 and 3 threads give the bits of
 * 1.  The scores are the reference's bits (but the soft-cap's tanh); the
 * rest differs by float32 rounding, as the exact int8 path from its
 * reference: so its bound, 2e-5 of max|ref| (test_kvcache8.c).  Returns
 * the worst error. */
static double q8_vs_reference(int64_t H, int64_t hkv, int64_t d, const int64_t len[2],
                              const int64_t *Ts, int n_T, const mask_case *cases, int n_cases,
                              uint64_t seed)
{
    const int64_t B = 2, S = len[0], rep = H / hkv;
    float *q = malloc(4 * B * S * H * d), *k = malloc(4 * B * S * hkv * d);
    float *v = malloc(4 * B * S * hkv * d), *vd = malloc(4 * B * S * hkv * d), sinks[16];
    float *kd = malloc(4 * B * S * hkv * d), *ks = malloc(4 * B * S * hkv), *vs = malloc(4 * B * S * hkv);
    int8_t *kc = malloc((size_t)(B * S * hkv * d)), *vc = malloc((size_t)(B * S * hkv * d));
    decode_inputs(q, k, v, sinks, B, S, H, hkv, d, seed);
    cache_codes(kc, ks, kd, k, B * S * hkv, d);
    cache_codes(vc, vs, vd, v, B * S * hkv, d);
    ra_context *ctx[2];
    CHECK(ra_context_create(&ctx[0], 2) == RA_OK && ra_context_create(&ctx[1], 3) == RA_OK, "ctx");
    const int64_t T_max = Ts[n_T - 1], zero[2] = {0, 0};
    float *qt = malloc(4 * B * T_max * H * d), *out = malloc(4 * B * T_max * H * d);
    float *again = malloc(4 * B * T_max * H * d), *ref = malloc(4 * d);
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, B, S, hkv, d, RA_I8) == RA_OK, "cache");
    CHECK(append_rows(cache, k, v, B, S, hkv, d, zero, len, S) == RA_OK, "append");
    double worst = 0;
    for (int ci = 0; ci < n_cases; ci++) {
        ra_attention_options o = mask_options(&cases[ci], sinks);
        o.quantize_q = 1;
        for (int ti = 0; ti < n_T; ti++) {
            const int64_t T = Ts[ti], nq[2] = {T, T > 1 ? T - 1 : 1};
            last_queries(qt, q, B, S, T, H, d, len, nq);
            int changed;
            CHECK(decode_on_threads(ctx, cache, out, again, qt, B, T, H, d, nq, &o, &changed) ==
                      RA_OK, "decode: %s", ra_last_error());
            CHECK(changed == 0, "case %d T%lld: 2 or 3 threads changed bits", ci, (long long)T);
            for (int64_t b = 0; b < B; b++)
                for (int64_t t = 0; t < nq[b]; t++)
                    for (int64_t h = 0; h < H; h++) {
                        const int64_t p = len[b] - nq[b] + t, off = b * S * hkv;
                        reference_row(ref, qt + ((b * T + t) * H + h) * d, p, h, h / rep,
                                      kc + off * d, ks + off, vd + off * d, hkv, d, &o);
                        const double e =
                            ra_test_max_rel_diff(out + ((b * T + t) * H + h) * d, ref, d);
                        worst = fmax(worst, e);
                        CHECK(e <= 2e-5, "H%lld Hkv%lld D%lld case %d T%lld b%lld t%lld h%lld: "
                              "%.3g", (long long)H, (long long)hkv, (long long)d, ci,
                              (long long)T, (long long)b, (long long)t, (long long)h, e);
                    }
        }
    }
    ra_kv_cache_destroy(cache);
    ra_context_destroy(ctx[0]);
    ra_context_destroy(ctx[1]);
    free(q); free(k); free(v); free(vd); free(kd); free(ks); free(vs); free(kc); free(vc);
    free(qt); free(out); free(again); free(ref);
    return worst;
}

/* GQA groups of 1, 4 and 8 (rows in runs of 4, 2 and 1 with T), D of whole
 * 64 bytes (64, 128, 256), with a tail (96, 576 + 8) and under 64 (20),
 * lengths across the 1024-key chunks and off 32, windows, chunks,
 * soft-cap, scale and sinks. */
static void test_q8_vs_reference(void)
{
    static const mask_case some[] = {{0, 0, 0, 0, 1}, {1100, 0, 2.5, 0, 1}};
    static const mask_case plain[] = {{0, 0, 0, 0, 0}};
    const int64_t short_len[2] = {1100, 701}, long_len[2] = {2100, 1100}, mid_len[2] = {600, 257};
    const int64_t Ts_short[2] = {1, 3}, Ts_long[2] = {1, 5}, Ts_mid[1] = {3}, Ts_one[1] = {1};
    double worst = q8_vs_reference(4, 1, 128, short_len, Ts_short, 2, every_mask, 8, 50);
    worst = fmax(worst, q8_vs_reference(8, 1, 96, long_len, Ts_long, 2, some, 2, 60));
    worst = fmax(worst, q8_vs_reference(8, 8, 64, mid_len, Ts_mid, 1, some, 2, 70));
    worst = fmax(worst, q8_vs_reference(16, 2, 256, mid_len, Ts_one, 1, plain, 1, 80));
    worst = fmax(worst, q8_vs_reference(2, 1, 584, mid_len, Ts_mid, 1, plain, 1, 90));
    worst = fmax(worst, q8_vs_reference(3, 1, 20, mid_len, Ts_mid, 1, some, 2, 100));
    printf("  quantize_q decode vs its reference: worst %.3g (bound 2e-5)\n", worst);
}

/* Each score's bits: with window 1 query t sees key t alone, so its lse
 * (ra_attention_decode_lse, queries at positions 0 .. S - 1) is its score
 * (m = s, l = e^0 = 1): the reference's ((float)sum s_q) s_k on every path,
 * the float kernels' integer sums and VNNI's alike.  The outputs around
 * them are each path's own bits (the code that compiles the softmax and
 * P.V differs between builds: test_q8_vs_reference bounds them).  q [S, H,
 * D] against one sequence of k, v [S, Hkv, D] in an int8 cache; returns
 * how many scores differ (the first 3 reported). */
static int q8_scores_differ(float *q, const float *k, const float *v, int64_t S, int64_t H,
                            int64_t hkv, int64_t d)
{
    float *out = malloc(4 * (size_t)(S * H * d)), *lse = malloc(4 * (size_t)(H * S));
    float *kd = malloc(4 * (size_t)(S * hkv * d)), *ks = malloc(4 * (size_t)(S * hkv));
    int8_t *kc = malloc((size_t)(S * hkv * d)), *qc = malloc((size_t)d);
    cache_codes(kc, ks, kd, k, S * hkv, d);
    ra_kv_cache *cache;
    const int64_t zero[1] = {0}, len[1] = {S}, q_start[1] = {0};
    CHECK(ra_kv_cache_create(&cache, 1, S, hkv, d, RA_I8) == RA_OK, "cache");
    CHECK(append_rows(cache, k, v, 1, S, hkv, d, zero, len, S) == RA_OK, "append");
    ra_attention_options o = ra_attention_options_init();
    o.window = 1;
    o.quantize_q = 1;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, d), to = ra_tensor_4d(out, RA_F32, 1, S, H, d);
    CHECK(ra_attention_decode_lse(NULL, cache, &to, lse, &tq, NULL, q_start, NULL, &o) == RA_OK,
          "D%lld decode_lse: %s", (long long)d, ra_last_error());
    const float scale = (float)(1.0 / sqrt((double)d));
    int differ = 0;
    for (int64_t t = 0; t < S; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / (H / hkv);
            const float sq = q8_codes(qc, q + (t * H + h) * d, scale, d);
            int64_t sum = 0;
            for (int64_t e = 0; e < d; e++) sum += (int64_t)qc[e] * kc[(t * hkv + g) * d + e];
            const float score = ((float)sum * sq) * ks[t * hkv + g];
            if (lse[h * S + t] != score && differ++ < 3)
                CHECK(0, "D%lld t%lld h%lld: lse %.9g, score %.9g (sum %lld)", (long long)d,
                      (long long)t, (long long)h, lse[h * S + t], score, (long long)sum);
        }
    ra_kv_cache_destroy(cache);
    free(out); free(lse); free(kd); free(ks); free(kc); free(qc);
    return differ;
}

/* q8_scores_differ for D of whole 64 bytes, with a tail, under 64. */
static void test_q8_scores_bits(void)
{
    enum { S = 300, H = 4, HKV = 2, MAX_D = 160 };
    static const int64_t dims[4] = {64, 96, 128, 20};
    float *q = malloc(4 * S * H * MAX_D), *k = malloc(4 * S * HKV * MAX_D);
    float *v = malloc(4 * S * HKV * MAX_D);
    for (int di = 0; di < 4; di++) {
        const int64_t d = dims[di];
        ra_test_fill(q, (size_t)(S * H * d), 20 + di);
        ra_test_fill(k, (size_t)(S * HKV * d), 30 + di);
        ra_test_fill(v, (size_t)(S * HKV * d), 40 + di);
        const int differ = q8_scores_differ(q, k, v, S, H, HKV, d);
        CHECK(differ == 0, "D%lld: %d scores differ from the reference's bits", (long long)d, differ);
    }
    free(q); free(k); free(v);
}

/* The widest head_dim, 1032, at the codes' extremes: q rows of one value
 * (codes all 127) and of alternating signs against keys of one value
 * (codes all +-127) and random ones; each sum, up to 1032 127^2 (under
 * 2^24, as every partial sum), is exact on every kernel: each score is
 * the reference's bits (q8_scores_differ).  1034 (the next even D) is
 * refused. */
static void test_q8_widest(void)
{
    enum { S = 6, H = 2, D = 1032 };
    float *q = malloc(4 * S * H * D), *k = malloc(4 * S * D), *v = malloc(4 * S * D);
    ra_test_fill(k, S * D, 3);
    ra_test_fill(v, S * D, 4);
    ra_test_fill(q, S * H * D, 5);
    for (int64_t e = 0; e < D; e++) {
        k[e] = -2.0f;            /* token 0: codes -127 */
        k[D + e] = 0.5f;         /* token 1: codes 127 */
        q[e] = 3.0f;             /* token 0, head 0: codes 127 */
        q[D + e] = e % 2 ? -1.0f : 1.0f;
        q[2 * H * D + e] = 1.0f; /* token 2, head 0 */
        q[H * D + e] = 7.0f;     /* token 1, head 0 */
    }
    CHECK(q8_scores_differ(q, k, v, S, H, 1, D) == 0, "D 1032: scores differ");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 1, 1, D + 2, RA_I8) == RA_OK, "cache 1034");
    ra_attention_options o = ra_attention_options_init();
    o.quantize_q = 1;
    float *q1 = calloc(D + 2, 4), *o1 = malloc(4 * (D + 2));
    ra_tensor tq1 = ra_tensor_4d(q1, RA_F32, 1, 1, 1, D + 2), to1 = ra_tensor_4d(o1, RA_F32, 1, 1, 1, D + 2);
    CHECK(ra_attention_decode(NULL, cache, &to1, &tq1, (int64_t[]){0}, &o) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "quantize_q with head_dim 1034"), "D 1034: %s", ra_last_error());
    ra_kv_cache_destroy(cache);
    free(q); free(k); free(v); free(q1); free(o1);
}

/* A window cache decoding 600 tokens in ragged steps == a full cache
 * holding every token, bit for bit, and a pool's sequences (pages of 16)
 * == the full cache, with quantize_q, on 3 threads. */
static void test_q8_ring_and_pages(void)
{
    const int64_t B = 2, S = 600, H = 4, hkv = 1, d = 128, window = 150, max_new = 3, T = max_new;
    const mask_case mc = {window, 0, 2.0, 0, 1};
    float *q = malloc(4 * B * S * H * d), *k = malloc(4 * B * S * hkv * d);
    float *v = malloc(4 * B * S * hkv * d), sinks[4];
    float *qt = malloc(4 * B * T * H * d), *o_ring = calloc((size_t)(B * T * H * d), 4);
    float *o_full = calloc((size_t)(B * T * H * d), 4), *o_pool = calloc((size_t)(B * T * H * d), 4);
    ra_test_fill(q, (size_t)(B * S * H * d), 7);
    ra_test_fill(k, (size_t)(B * S * hkv * d), 8);
    ra_test_fill(v, (size_t)(B * S * hkv * d), 9);
    ra_test_fill(sinks, (size_t)H, 10);
    for (int64_t i = 0; i < B * S * H * d; i++) q[i] *= 3.0f;
    ra_attention_options o = mask_options(&mc, sinks);
    o.quantize_q = 1;
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    ra_tensor tq = ra_tensor_4d(qt, RA_F32, B, T, H, d);
    ra_tensor tr = ra_tensor_4d(o_ring, RA_F32, B, T, H, d);
    ra_tensor tf = ra_tensor_4d(o_full, RA_F32, B, T, H, d);
    ra_tensor tp = ra_tensor_4d(o_pool, RA_F32, B, T, H, d);
    ra_kv_cache *ring, *full;
    ra_kv_pool *pool;
    int64_t ids[2];
    CHECK(ra_kv_cache_create_window(&ring, B, window, max_new, hkv, d, RA_I8) == RA_OK, "ring");
    CHECK(ra_kv_cache_create(&full, B, S, hkv, d, RA_I8) == RA_OK, "full");
    CHECK(ra_kv_pool_create(&pool, 2 * S / 16 + 4, 16, B, hkv, d, RA_I8) == RA_OK, "pool");
    for (int b = 0; b < B; b++) CHECK(ra_kv_pool_add_sequence(pool, 0, &ids[b]) == RA_OK, "add");
    ra_rope_config rc = ra_rope_config_default(d);
    rc.table_size = 1; /* position 0 only: the pool then holds k and v themselves */
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    float *kt = malloc(4 * B * T * hkv * d), *vt = malloc(4 * B * T * hkv * d);
    int64_t zeros[2 * 3] = {0};
    int64_t done[2] = {0, 0};
    for (int64_t step = 0; done[0] < S || done[1] < S; step++) {
        int64_t n[2] = {1 + step % max_new, max_new - step % max_new};
        for (int64_t b = 0; b < B; b++) {
            n[b] = n[b] < S - done[b] ? n[b] : S - done[b];
            for (int64_t t = 0; t < n[b]; t++) {
                memcpy(qt + (b * T + t) * H * d, q + (b * S + done[b] + t) * H * d, 4 * H * d);
                memcpy(kt + (b * T + t) * hkv * d, k + (b * S + done[b] + t) * hkv * d, 4 * hkv * d);
                memcpy(vt + (b * T + t) * hkv * d, v + (b * S + done[b] + t) * hkv * d, 4 * hkv * d);
            }
        }
        CHECK(append_rows(ring, k, v, B, S, hkv, d, done, n, T) == RA_OK, "append ring");
        CHECK(append_rows(full, k, v, B, S, hkv, d, done, n, T) == RA_OK, "append full");
        ra_tensor tk = ra_tensor_4d(kt, RA_F32, B, T, hkv, d), tv = ra_tensor_4d(vt, RA_F32, B, T, hkv, d);
        ra_positions at = ra_positions_start(0);
        at.ids = zeros;
        CHECK(ra_kv_pool_append(NULL, pool, rope, ids, B, NULL, &tk, &tv, &at, n) == RA_OK,
              "append pool: %s", ra_last_error());
        CHECK(ra_attention_decode(ctx, ring, &tr, &tq, n, &o) == RA_OK, "ring: %s", ra_last_error());
        CHECK(ra_attention_decode(NULL, full, &tf, &tq, n, &o) == RA_OK, "full");
        CHECK(ra_attention_decode_paged(ctx, pool, ids, B, &tp, &tq, n, &o) == RA_OK, "paged: %s",
              ra_last_error());
        for (int64_t b = 0; b < B; b++) {
            const size_t bytes = 4 * (size_t)(n[b] * H * d);
            CHECK(memcmp(o_ring + b * T * H * d, o_full + b * T * H * d, bytes) == 0,
                  "step %lld b%lld: the ring's bits differ from the full cache's", (long long)step,
                  (long long)b);
            CHECK(memcmp(o_pool + b * T * H * d, o_full + b * T * H * d, bytes) == 0,
                  "step %lld b%lld: the pool's bits differ from the full cache's", (long long)step,
                  (long long)b);
            done[b] += n[b];
        }
    }
    ra_rope_destroy(rope);
    ra_kv_pool_destroy(pool);
    ra_kv_cache_destroy(ring);
    ra_kv_cache_destroy(full);
    ra_context_destroy(ctx);
    free(q); free(k); free(v); free(qt); free(o_ring); free(o_full); free(o_pool); free(kt); free(vt);
}

/* The other decode calls with quantize_q: ra_kv_cache_attend == its
 * append then ra_attention_decode, and ra_attention_decode_lse without
 * q_start == ra_attention_decode, bit for bit (3 steps of 2 tokens after
 * 500, RoPE at their positions, 2 threads). */
static void test_q8_attend_and_lse(void)
{
    enum { B = 1, S0 = 500, T = 2, H = 8, HKV = 2, D = 128, STEPS = 3 };
    float *k0 = malloc(4 * S0 * HKV * D), *v0 = malloc(4 * S0 * HKV * D);
    float q[T * H * D], qa[T * H * D], qb[T * H * D], k[T * HKV * D], ka[T * HKV * D];
    float kb[T * HKV * D], v[T * HKV * D];
    float o_attend[T * H * D], o_decode[T * H * D], o_lse[T * H * D], lse[H * T];
    ra_test_fill(k0, S0 * HKV * D, 1);
    ra_test_fill(v0, S0 * HKV * D, 2);
    ra_kv_cache *a, *c;
    const int64_t zero[1] = {0}, len[1] = {S0};
    CHECK(ra_kv_cache_create(&a, B, S0 + T * STEPS, HKV, D, RA_I8) == RA_OK &&
              ra_kv_cache_create(&c, B, S0 + T * STEPS, HKV, D, RA_I8) == RA_OK, "caches");
    CHECK(append_rows(a, k0, v0, B, S0, HKV, D, zero, len, S0) == RA_OK &&
              append_rows(c, k0, v0, B, S0, HKV, D, zero, len, S0) == RA_OK, "append");
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    ra_attention_options o = ra_attention_options_init();
    o.quantize_q = 1;
    for (int step = 0; step < STEPS; step++) {
        ra_test_fill(q, T * H * D, 10 + step);
        ra_test_fill(k, T * HKV * D, 20 + step);
        ra_test_fill(v, T * HKV * D, 30 + step);
        memcpy(qa, q, sizeof q); /* each call rotates its q and k in place */
        memcpy(qb, q, sizeof q);
        memcpy(ka, k, sizeof k);
        memcpy(kb, k, sizeof k);
        const ra_tensor tqa = ra_tensor_4d(qa, RA_F32, B, T, H, D), tqb = ra_tensor_4d(qb, RA_F32, B, T, H, D);
        const ra_tensor tka = ra_tensor_4d(ka, RA_F32, B, T, HKV, D), tkb = ra_tensor_4d(kb, RA_F32, B, T, HKV, D);
        const ra_tensor tv = ra_tensor_4d(v, RA_F32, B, T, HKV, D);
        const ra_tensor ta = ra_tensor_4d(o_attend, RA_F32, B, T, H, D);
        const ra_tensor td = ra_tensor_4d(o_decode, RA_F32, B, T, H, D);
        const ra_tensor tl = ra_tensor_4d(o_lse, RA_F32, B, T, H, D);
        CHECK(ra_kv_cache_attend(ctx, a, rope, &ta, &tqa, &tka, &tv, NULL, NULL, &o) == RA_OK,
              "attend: %s", ra_last_error());
        CHECK(ra_kv_cache_append(ctx, c, rope, &tqb, &tkb, &tv, NULL, NULL) == RA_OK, "append");
        CHECK(ra_attention_decode(ctx, c, &td, &tqb, NULL, &o) == RA_OK, "decode");
        CHECK(ra_attention_decode_lse(ctx, c, &tl, lse, &tqb, NULL, NULL, NULL, &o) == RA_OK,
              "decode_lse: %s", ra_last_error());
        CHECK(memcmp(o_attend, o_decode, sizeof o_attend) == 0, "step %d: attend's bits differ",
              step);
        CHECK(memcmp(o_lse, o_decode, sizeof o_lse) == 0, "step %d: decode_lse's bits differ",
              step);
    }
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
    ra_kv_cache_destroy(a);
    ra_kv_cache_destroy(c);
    free(k0); free(v0);
}

/* A roughly normal value (a sum of three uniforms, variance 1) per
 * element of rows of D, the channels in outliers (-1 ended) times factor,
 * as LLaMA-class models' keys and queries have a few channels 10-30 times
 * the rest. */
static void outlier_rows(float *x, int64_t n, int64_t d, const int *outliers, float factor,
                         uint64_t seed)
{
    float *u = malloc(4 * 3 * (size_t)n);
    ra_test_fill(u, (size_t)(3 * n), seed);
    for (int64_t i = 0; i < n; i++) {
        x[i] = u[3 * i] + u[3 * i + 1] + u[3 * i + 2];
        for (const int *c = outliers; *c >= 0; c++)
            if (i % d == *c) x[i] *= factor;
    }
    free(u);
}

/* quantize_q against the exact int8 path on realistic data: D 128, H 8,
 * Hkv 2, 4096 tokens, the last 4 as queries; keys with 4 channels 20
 * times the rest, queries with the same channels 10 times theirs, scaled so
 * that the logits have a standard deviation of a few units.  The errors:
 * max|out_q8 - out| / max|v| over every output, and the logits' own
 * |s_q8 - s| (the reference's scores against the exact ones, scale q . s_k
 * c in double) at worst and RMS.  A query's codes step is max|x| / 127,
 * set by its outlier channels: each other channel carries up to half that
 * step of error, which the key's ordinary channels sum (an outlier row
 * quantizes its ordinary channels coarsely: the cost of one scale per
 * row).  Seen on every path: out 3.5e-3 of max|v|, logits 0.062 at worst
 * and 0.009 RMS (the logits' own RMS: 3.0); bounds about twice those. */
static void test_q8_error_vs_exact(void)
{
    enum { S = 4096, H = 8, HKV = 2, D = 128, T = 4 };
    static const int channels[] = {5, 37, 70, 101, -1}, none[] = {-1};
    float *q = malloc(4 * T * H * D), *k = malloc(4 * S * HKV * D), *v = malloc(4 * S * HKV * D);
    float *o_exact = malloc(4 * T * H * D), *o_q8 = malloc(4 * T * H * D);
    outlier_rows(q, T * H * D, D, channels, 10.0f, 11);
    outlier_rows(k, S * HKV * D, D, channels, 20.0f, 12);
    outlier_rows(v, S * HKV * D, D, none, 1.0f, 13);
    for (int64_t i = 0; i < T * H * D; i++) q[i] *= 0.1f;
    ra_kv_cache *cache;
    const int64_t zero[1] = {0}, len[1] = {S}, nq[1] = {T};
    CHECK(ra_kv_cache_create(&cache, 1, S, HKV, D, RA_I8) == RA_OK, "cache");
    CHECK(append_rows(cache, k, v, 1, S, HKV, D, zero, len, S) == RA_OK, "append");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, T, H, D);
    ra_tensor te = ra_tensor_4d(o_exact, RA_F32, 1, T, H, D), t8 = ra_tensor_4d(o_q8, RA_F32, 1, T, H, D);
    ra_attention_options o = ra_attention_options_init();
    CHECK(ra_attention_decode(NULL, cache, &te, &tq, nq, &o) == RA_OK, "exact");
    o.quantize_q = 1;
    CHECK(ra_attention_decode(NULL, cache, &t8, &tq, nq, &o) == RA_OK, "quantize_q");
    double vmax = 0, out_err = 0;
    for (int64_t i = 0; i < S * HKV * D; i++) vmax = fmax(vmax, fabs(v[i]));
    for (int64_t i = 0; i < T * H * D; i++) out_err = fmax(out_err, fabs((double)o_q8[i] - o_exact[i]));
    out_err /= vmax;
    /* the logits, from the codes the cache holds */
    int8_t *kc = malloc(S * HKV * D), qc[D];
    float *ks = malloc(4 * S * HKV), *kd = malloc(4 * S * HKV * D);
    cache_codes(kc, ks, kd, k, S * HKV, D);
    const float scale = (float)(1.0 / sqrt((double)D));
    double worst = 0, sq_sum = 0, logit_sq = 0;
    for (int64_t r = 0; r < T * H; r++) {
        const int64_t g = r % H / (H / HKV);
        const float sq = q8_codes(qc, q + r * D, scale, D);
        for (int64_t j = 0; j < S; j++) {
            int64_t sum = 0;
            double exact = 0;
            for (int64_t e = 0; e < D; e++) {
                sum += (int64_t)qc[e] * kc[(j * HKV + g) * D + e];
                exact += (double)(q[r * D + e] * scale) * kc[(j * HKV + g) * D + e];
            }
            exact *= ks[j * HKV + g];
            const double diff = ((float)sum * sq) * ks[j * HKV + g] - exact;
            worst = fmax(worst, fabs(diff));
            sq_sum += diff * diff;
            logit_sq += exact * exact;
        }
    }
    const double rms = sqrt(sq_sum / (T * H * S)), logit_sd = sqrt(logit_sq / (T * H * S));
    printf("  quantize_q vs exact, outlier channels: out %.3g of max|v| (bound 7e-3), logits "
           "%.3g at worst (bound 0.12), %.3g RMS (bound 0.018), logits' RMS %.3g\n",
           out_err, worst, rms, logit_sd);
    CHECK(out_err > 0 && out_err <= 7e-3, "out: %.3g of max|v|", out_err);
    CHECK(worst <= 0.12 && rms <= 0.018, "logits: %.3g at worst, %.3g RMS", worst, rms);
    ra_kv_cache_destroy(cache);
    free(q); free(k); free(v); free(o_exact); free(o_q8); free(kc); free(ks); free(kd);
}

/* A query row of zeros: codes 0 and s_q 0, every score 0 (the mean of the
 * values seen); one holding a NaN: NaN outputs for its head only. */
static void test_q8_edges(void)
{
    enum { S = 40, H = 2, D = 64 };
    float k[S * D], v[S * D], q[H * D], out[H * D];
    ra_test_fill(k, S * D, 1);
    ra_test_fill(v, S * D, 2);
    memset(q, 0, sizeof q);
    ra_kv_cache *cache;
    const int64_t zero[1] = {0}, len[1] = {S};
    CHECK(ra_kv_cache_create(&cache, 1, S, 1, D, RA_I8) == RA_OK, "cache");
    CHECK(append_rows(cache, k, v, 1, S, 1, D, zero, len, S) == RA_OK, "append");
    ra_attention_options o = ra_attention_options_init();
    o.quantize_q = 1;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, H, D), to = ra_tensor_4d(out, RA_F32, 1, 1, H, D);
    q[D + 3] = NAN;
    CHECK(ra_attention_decode(NULL, cache, &to, &tq, NULL, &o) == RA_OK, "decode");
    /* the reference over the dequantized cache with queries of zeros: its
     * last row is the mean of every value */
    float kd[S * D], vd[S * D], ks[S], vs[S], zeros[S * H * D] = {0}, ref[S * H * D];
    int8_t kc[S * D], vc[S * D];
    cache_codes(kc, ks, kd, k, S, D);
    cache_codes(vc, vs, vd, v, S, D);
    reference_last_rows(ref, zeros, kd, vd, S, 1, H, 1, D, NULL);
    CHECK(ra_test_max_rel_diff(out, ref + (S - 1) * H * D, D) <= 2e-5,
          "a row of zeros: not the values' mean");
    for (int64_t e = 0; e < D; e++) CHECK(isnan(out[D + e]), "NaN row: element %lld is %g", (long long)e, out[D + e]);
    ra_kv_cache_destroy(cache);
}

static void test_q8_refusals(void);

static void simd_cases(void)
{
    RUN(test_q8_refusals);
    RUN(test_q8_vs_reference);
    RUN(test_q8_scores_bits);
    RUN(test_q8_widest);
    RUN(test_q8_ring_and_pages);
    RUN(test_q8_attend_and_lse);
    RUN(test_q8_error_vs_exact);
    RUN(test_q8_edges);
}

/* Refused, naming quantize_q, where it does not apply: other caches'
 * dtypes (a pool's, and ra_kv_cache_attend's before it appends), D past
 * 1032, and every call but the decode calls: the forward, backward and
 * block calls, and the layer's (uncached, training, in phases, cached under
 * a mask), which read it before any work. */
static void test_q8_refusals(void)
{
    enum { H = 2, D = 16, S = 4 };
    float q[S * H * D], k[S * H * D], v[S * H * D], out[S * H * D], lse[H * S];
    ra_test_fill(q, sizeof q / 4, 1);
    memcpy(k, q, sizeof q);
    memcpy(v, q, sizeof q);
    ra_attention_options o = ra_attention_options_init();
    o.quantize_q = 1;
    const ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    const ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), to = ra_tensor_4d(out, RA_F32, 1, S, H, D);
#define REFUSED(call, what)                                                                   \
    CHECK((call) == RA_ERR_UNSUPPORTED && strstr(ra_last_error(), "quantize_q"), "%s: %s", what, \
          ra_last_error())
    static const ra_dtype others[4] = {RA_F32, RA_BF16, RA_F16, RA_F8E4M3};
    static const char *const names[4] = {"f32", "bf16", "f16", "fp8"};
    for (int i = 0; i < 4; i++) {
        ra_kv_cache *c;
        CHECK(ra_kv_cache_create(&c, 1, S, H, D, others[i]) == RA_OK, "cache");
        CHECK(append_rows(c, k, v, 1, S, H, D, (int64_t[]){0}, (int64_t[]){S}, S) == RA_OK, "append");
        const ra_tensor q1 = ra_tensor_4d(q, RA_F32, 1, 1, H, D), o1 = ra_tensor_4d(out, RA_F32, 1, 1, H, D);
        REFUSED(ra_attention_decode(NULL, c, &o1, &q1, NULL, &o), names[i]);
        ra_kv_cache_destroy(c);
    }
    ra_kv_cache *wide;
    CHECK(ra_kv_cache_create(&wide, 1, 1, 1, 1040, RA_I8) == RA_OK, "cache");
    float qw[1040] = {0}, ow[1040];
    const ra_tensor tqw = ra_tensor_4d(qw, RA_F32, 1, 1, 1, 1040), tow = ra_tensor_4d(ow, RA_F32, 1, 1, 1, 1040);
    CHECK(ra_attention_decode(NULL, wide, &tow, &tqw, (int64_t[]){0}, &o) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "head_dim 1040"), "D 1040: %s", ra_last_error());
    ra_kv_cache_destroy(wide);
    REFUSED(ra_attention(NULL, &to, &tq, &tk, &tv, &o), "ra_attention");
    REFUSED(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o), "forward_lse");
    float dq[S * H * D], dk[S * H * D], dv[S * H * D];
    const ra_tensor tdq = ra_tensor_4d(dq, RA_F32, 1, S, H, D), tdk = ra_tensor_4d(dk, RA_F32, 1, S, H, D);
    const ra_tensor tdv = ra_tensor_4d(dv, RA_F32, 1, S, H, D);
    memset(lse, 0, sizeof lse);
    REFUSED(ra_attention_backward(NULL, &tdq, &tdk, &tdv, &to, &tq, &tk, &tv, &to, lse, &o),
            "backward");
    REFUSED(ra_attention_block_lse(NULL, &to, lse, &tq, &tk, &tv, 0, 0, S, &o), "block_lse");
    REFUSED(ra_attention_block_backward(NULL, &tdq, &tdk, &tdv, &to, &tq, &tk, &tv, &to, lse, 0,
                                        0, S, &o),
            "block_backward");
    /* the decode calls on other dtypes: a pool's, and ra_kv_cache_attend's
     * before its append (the cache keeps its length) */
    ra_kv_pool *pool;
    int64_t id;
    CHECK(ra_kv_pool_create(&pool, 2, 4, 1, H, D, RA_BF16) == RA_OK &&
              ra_kv_pool_add_sequence(pool, 0, &id) == RA_OK, "pool");
    const ra_tensor q1 = ra_tensor_4d(q, RA_F32, 1, 1, H, D), o1 = ra_tensor_4d(out, RA_F32, 1, 1, H, D);
    REFUSED(ra_attention_decode_paged(NULL, pool, &id, 1, &o1, &q1, (int64_t[]){0}, &o), "paged bf16");
    ra_kv_pool_destroy(pool);
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    ra_kv_cache *f32;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK && ra_kv_cache_create(&f32, 1, S, H, D, RA_F32) == RA_OK,
          "rope, cache");
    const ra_tensor k1 = ra_tensor_4d(k, RA_F32, 1, 1, H, D), v1 = ra_tensor_4d(v, RA_F32, 1, 1, H, D);
    REFUSED(ra_kv_cache_attend(NULL, f32, rope, &o1, &q1, &k1, &v1, NULL, NULL, &o), "attend f32");
    CHECK(ra_kv_cache_length(f32, 0) == 0, "the refused attend appended");
    /* the layer: dim H D, its weights q's values (any will do) */
    float w[(H * D) * (H * D)], x[S * H * D], y[S * H * D];
    for (int i = 0; i < (H * D) * (H * D); i++) w[i] = q[i % (S * H * D)] * 0.1f;
    memcpy(x, q, sizeof x);
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = H * D;
    lc.n_heads = H;
    lc.rope = &rc;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = lw.wk = lw.wv = lw.wo = w;
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer: %s", ra_last_error());
    REFUSED(ra_layer_forward(NULL, layer, y, x, 1, S, NULL, &o), "ra_layer_forward");
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, layer, S) == RA_OK, "tape");
    REFUSED(ra_layer_forward_train(NULL, layer, y, tape, x, 1, S, NULL, &o), "forward_train");
    ra_layer_step *step = NULL;
    REFUSED(ra_layer_forward_begin(&step, NULL, layer, y, x, 1, S, NULL, &o), "forward_begin");
    REFUSED(ra_layer_forward_train_begin(&step, NULL, layer, y, tape, x, 1, S, NULL, &o),
            "forward_train_begin");
    CHECK(step == NULL, "a refused begin made a step");
    /* the cached call under a mask, on an int8 cache: a layer's call all the same */
    ra_kv_cache *i8;
    uint8_t ones[S * S];
    memset(ones, 1, sizeof ones);
    ra_tensor mask = ra_tensor_4d(ones, RA_BOOL, 1, 1, S, S);
    ra_attention_options om = o;
    om.attn_mask = &mask;
    CHECK(ra_kv_cache_create(&i8, 1, S, H, D, RA_I8) == RA_OK, "int8 cache");
    REFUSED(ra_layer_forward_cached_mask(NULL, layer, i8, y, x, 1, S, NULL, &om),
            "forward_cached_mask");
    CHECK(ra_kv_cache_length(i8, 0) == 0, "the refused cached call appended");
    ra_kv_cache_destroy(i8);
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);
    ra_kv_cache_destroy(f32);
    ra_rope_destroy(rope);
#undef REFUSED
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("decode_q8"); /* [a-z_0-9]: run.sh reads it */
}
