/*
 * test_kvcache8.c — 8-bit KV caches (RA_I8, RA_F8E4M3): the scalar
 * quantizers against their definitions (quant8.h), every code through the
 * decode kernels, decode against the reference attention over the cache's
 * dequantized values (ra_kv_cache_read) with GQA, masks, ragged lengths
 * and queries, 1-3 threads and window caches, the accuracy against an f32
 * cache on realistic data, the layer through an 8-bit cache, non-finite
 * values and fp8's NaN flag, and the refusals.
 *
 *   q, out: [B, T, H, D]   k, v: [B, S, Hkv, D] f32; caches [B, S, Hkv, D]
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kvcache_common.h"
#include "kvcache_internal.h" /* nan_codes */
#include "quant8.h"
#include "ropeattn.h"

static const ra_dtype eight_bit[2] = {RA_I8, RA_F8E4M3};

/* e4m3 code c's value from its fields, in double (independent of quant8.h). */
static double e4m3_exact(int c)
{
    int e = c >> 3 & 15, m = c & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return c & 0x80 ? -v : v;
}

/* int8: scale max|x| / 127, codes within s / 2 of x / s, ties to even, the
 * largest value at +-127, zeros, NaN and Inf rows, tiny rows. */
static void test_int8_quantizer(void)
{
    const float ties[6] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -126.5f}; /* scale 1 */
    const int8_t want[6] = {127, 0, 2, 2, 0, -126};
    int8_t c[256];
    CHECK(ra_quantize_i8(c, ties, 6) == 1.0f && memcmp(c, want, 6) == 0,
          "ties: %d %d %d %d %d %d", c[0], c[1], c[2], c[3], c[4], c[5]);
    float x[256];
    for (int trial = 0; trial < 50; trial++) {
        ra_test_fill(x, 256, 100 + trial);
        const float mult = ldexpf(1.0f, trial - 25); /* 2^-25 .. 2^24 */
        for (int i = 0; i < 256; i++) x[i] *= mult;
        float s = ra_quantize_i8(c, x, 256), amax = 0;
        for (int i = 0; i < 256; i++) amax = fmaxf(amax, fabsf(x[i]));
        CHECK(s == amax / 127.0f, "trial %d: scale %g, max|x| / 127 %g", trial, s, amax / 127.0f);
        int top = 0;
        for (int i = 0; i < 256; i++) {
            CHECK(fabs(x[i] - (double)s * c[i]) <= 0.5000001 * s, "trial %d i %d: %g -> %d * %g",
                  trial, i, x[i], c[i], s);
            top |= abs(c[i]) == 127;
        }
        CHECK(top, "trial %d: no code +-127", trial);
    }
    memset(x, 0, sizeof x);
    CHECK(ra_quantize_i8(c, x, 256) == 0.0f, "zeros: scale 0");
    x[3] = 0x1p-140f; /* max / 127 is a subnormal, off by up to 2^-150: 127 times that more */
    float s = ra_quantize_i8(c, x, 256);
    CHECK(s > 0 && fabs(x[3] - (double)s * c[3]) <= 0.5 * s + 127 * 0x1p-150, "tiny row");
    x[7] = NAN;
    CHECK(isnan(ra_quantize_i8(c, x, 256)) && c[3] == 0, "NaN row: scale NaN, codes 0");
    x[7] = -INFINITY;
    CHECK(isnan(ra_quantize_i8(c, x, 256)), "Inf row: scale NaN");
}

/* e4m3: every code's value, every code back to itself, midpoints to the
 * even neighbour, saturation at 448, NaN and Inf to NaN. */
static void test_e4m3_codes(void)
{
    for (int c = 0; c < 256; c++) {
        float v = ra_e4m3_to_f32((uint8_t)c);
        if ((c & 0x7f) == 0x7f) {
            CHECK(isnan(v), "code %#x: not NaN", c);
            continue;
        }
        CHECK(v == e4m3_exact(c) && !!signbit(v) == !!(c & 0x80), "code %#x: %g, want %g", c, v,
              e4m3_exact(c));
        CHECK(ra_f32_to_e4m3(v) == c, "code %#x: %g encodes as %#x", c, v, ra_f32_to_e4m3(v));
        /* the midpoint to the next code up in magnitude rounds to the even one */
        int up = c + 1;
        if ((up & 0x7f) == 0x7f) continue;
        double mid = (e4m3_exact(c) + e4m3_exact(up)) / 2;
        int even = c & 1 ? up : c;
        CHECK(ra_f32_to_e4m3((float)mid) == even, "midpoint %g of %#x, %#x -> %#x", mid, c, up,
              ra_f32_to_e4m3((float)mid));
        CHECK(ra_f32_to_e4m3((float)(mid * (1 + 1e-6))) == up,
              "just past the midpoint of %#x", c);
    }
    CHECK(ra_f32_to_e4m3(448.0f) == 0x7e && ra_f32_to_e4m3(470.0f) == 0x7e &&
              ra_f32_to_e4m3(1e30f) == 0x7e && ra_f32_to_e4m3(-FLT_MAX) == 0xfe,
          "saturation at +-448");
    CHECK(ra_f32_to_e4m3(INFINITY) == 0x7f && ra_f32_to_e4m3(-INFINITY) == 0xff &&
              (ra_f32_to_e4m3(NAN) & 0x7f) == 0x7f, "NaN and Inf to NaN");
    CHECK(ra_f32_to_e4m3(0x1p-10f) == 0x00 && ra_f32_to_e4m3(0x1p-10f * 1.01f) == 0x01 &&
              ra_f32_to_e4m3(3 * 0x1p-10f) == 0x02 && ra_f32_to_e4m3(-0.0f) == 0x80,
          "subnormal ties and -0");
}

/* Sequence b's n tokens from position from, dequantized: k, v [n, Hkv, D]. */
static void read_tokens(const ra_kv_cache *cache, int64_t b, int64_t from, int64_t n,
                        int64_t hkv, int64_t d, float *k, float *v)
{
    ra_tensor tk = ra_tensor_4d(k, RA_F32, 1, n, hkv, d), tv = ra_tensor_4d(v, RA_F32, 1, n, hkv, d);
    CHECK(ra_kv_cache_read(cache, b, from, &tk, &tv) == RA_OK, "read: %s", ra_last_error());
}

/* Every code through the kernels' loads (vector lanes and the scalar
 * tail): V rows holding every int8 code (scale 1) or every non-NaN e4m3
 * code come out of a one-key decode bit for bit (its weight is exactly 1);
 * K rows of every code, read by H = D query heads each with a one-hot
 * query on its own feature, give each head the weight of its code's logit
 * against a zero key. */
static void test_codes_through_decode(void)
{
    for (int di = 0; di < 2; di++) {
        const ra_dtype dt = eight_bit[di];
        const int64_t d = dt == RA_I8 ? 256 : 254, h = d;
        const double top = dt == RA_I8 ? 127 : 448;
        float k[2 * 256], v[2 * 256], *q = calloc((size_t)(h * d), 4), *out = malloc(4 * h * d);
        for (int64_t i = 0; i < d; i++) {
            int code = dt == RA_I8 ? (int)i - 127 : (int)(i < 127 ? i : i + 1); /* skip 0x7f */
            float value = dt == RA_I8 ? (float)(code < 128 ? code : 0) : (float)e4m3_exact(code);
            k[i] = 0, v[i] = 0;          /* token 0: zeros */
            k[d + i] = value, v[d + i] = value;
            q[i * d + i] = (float)(sqrt((double)d) / top); /* head i: logit value / top */
        }
        ra_kv_cache *cache;
        CHECK(ra_kv_cache_create(&cache, 1, 2, 1, d, dt) == RA_OK, "cache");
        const int64_t zero[1] = {0}, one[1] = {1}, two[1] = {2};
        CHECK(append_rows(cache, k, v, 1, 2, 1, d, zero, two, 2) == RA_OK, "append");
        float back[2 * 256], vback[2 * 256];
        read_tokens(cache, 0, 0, 2, 1, d, back, vback);
        int same = 1; /* as values: RoPE at position 0 turns -0 into +0 */
        for (int64_t i = 0; i < 2 * d; i++) same &= back[i] == k[i] && vback[i] == v[i];
        CHECK(same, "dtype %d: the codes' values do not read back exactly", (int)dt);
        /* queries over token 1 alone: a window of 1 */
        ra_attention_options o = ra_attention_options_init();
        o.window = 1;
        ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, h, d), to = ra_tensor_4d(out, RA_F32, 1, 1, h, d);
        CHECK(ra_attention_decode(NULL, cache, &to, &tq, one, &o) == RA_OK, "decode");
        for (int64_t hh = 0; hh < h; hh++) {
            same = 1;
            for (int64_t e = 0; e < d; e++) same &= out[hh * d + e] == v[d + e];
            CHECK(same, "dtype %d head %lld: V's codes changed", (int)dt, (long long)hh);
        }
        /* both tokens: head i weighs token 1 by sigmoid(value_i / top) */
        CHECK(ra_attention_decode(NULL, cache, &to, &tq, one, NULL) == RA_OK, "decode 2");
        double worst = 0;
        for (int64_t hh = 0; hh < h; hh++) {
            double w = 1 / (1 + exp(-k[d + hh] / top));
            for (int64_t e = 0; e < d; e++)
                worst = fmax(worst, fabs(out[hh * d + e] - w * v[d + e]) / top);
        }
        CHECK(worst <= 1e-6, "dtype %d: K codes: %.3g", (int)dt, worst);
        ra_kv_cache_destroy(cache);
        free(q); free(out);
    }
}

/* fp8 caches get per-head scales (n_scales Hkv) that keep the test's
 * values (|x| < 1) within +-448 s: s_k = 0.004 (g + 1), s_v = 0.003 (g + 1). */
static void set_test_scales(ra_kv_cache *cache, ra_dtype dt, int64_t hkv)
{
    if (dt != RA_F8E4M3) return;
    float ks[16], vs[16];
    for (int64_t g = 0; g < hkv; g++) ks[g] = 0.004f * (float)(g + 1), vs[g] = 0.003f * (float)(g + 1);
    CHECK(ra_kv_cache_set_scales(cache, ks, vs, hkv) == RA_OK, "scales: %s", ra_last_error());
}

/* Decode over 8-bit caches against the reference over their dequantized
 * values, for one shape: two sequences of lengths len[0] >= len[1], T new
 * tokens with n_query {T, T - 1}, each mask case; 2 and 3 threads give the
 * bits of 1.  The kernel differs from the reference by float32 rounding
 * only ((q . c) s for q . (s c), (p s) c for p (s c), float32 sums against
 * double): the 2e-5 of max|ref| of the 16-bit caches (seen: a few 1e-6). */
static double decode_vs_reference(int64_t H, int64_t hkv, int64_t d,
                                  const int64_t len[2], const int64_t *Ts, int n_T,
                                  const mask_case *cases, int n_cases, uint64_t seed)
{
    const int64_t B = 2, S = len[0];
    float *q = malloc(4 * B * S * H * d), *k = malloc(4 * B * S * hkv * d);
    float *v = malloc(4 * B * S * hkv * d), *ref = malloc(4 * B * S * H * d), sinks[16];
    float *kd = malloc(4 * B * S * hkv * d), *vd = malloc(4 * B * S * hkv * d);
    decode_inputs(q, k, v, sinks, B, S, H, hkv, d, seed);
    ra_context *ctx[2];
    CHECK(ra_context_create(&ctx[0], 2) == RA_OK && ra_context_create(&ctx[1], 3) == RA_OK, "ctx");
    const int64_t T_max = Ts[n_T - 1], zero[2] = {0, 0};
    float *qt = malloc(4 * B * T_max * H * d), *out = malloc(4 * B * T_max * H * d);
    float *again = malloc(4 * B * T_max * H * d);
    double worst = 0;
    for (int di = 0; di < 2; di++) {
        const ra_dtype dt = eight_bit[di];
        ra_kv_cache *cache;
        CHECK(ra_kv_cache_create(&cache, B, S, hkv, d, dt) == RA_OK, "cache");
        set_test_scales(cache, dt, hkv);
        CHECK(append_rows(cache, k, v, B, S, hkv, d, zero, len, S) == RA_OK, "append");
        for (int64_t b = 0; b < B; b++)
            read_tokens(cache, b, 0, len[b], hkv, d, kd + b * S * hkv * d, vd + b * S * hkv * d);
        for (int ci = 0; ci < n_cases; ci++) {
            const ra_attention_options o = mask_options(&cases[ci], sinks);
            for (int64_t b = 0; b < B; b++)
                reference_last_rows(ref + b * S * H * d, q + b * S * H * d,
                                    kd + b * S * hkv * d, vd + b * S * hkv * d, len[b], T_max, H,
                                    hkv, d, &o);
            for (int ti = 0; ti < n_T; ti++) {
                const int64_t T = Ts[ti], nq[2] = {T, T > 1 ? T - 1 : 1};
                last_queries(qt, q, B, S, T, H, d, len, nq);
                int changed;
                CHECK(decode_on_threads(ctx, cache, out, again, qt, B, T, H, d, nq, &o,
                                        &changed) == RA_OK, "decode: %s", ra_last_error());
                CHECK(changed == 0, "case %d T%lld dtype %d: 2 or 3 threads changed bits", ci,
                      (long long)T, (int)dt);
                for (int64_t b = 0; b < B; b++) {
                    double e = ra_test_max_rel_diff(out + b * T * H * d,
                                                    ref + (b * S + len[b] - nq[b]) * H * d,
                                                    nq[b] * H * d);
                    worst = fmax(worst, e);
                    CHECK(e <= 2e-5, "H%lld Hkv%lld D%lld case %d T%lld dtype %d b%lld: %.3g",
                          (long long)H, (long long)hkv, (long long)d, ci, (long long)T, (int)dt,
                          (long long)b, e);
                }
            }
        }
        ra_kv_cache_destroy(cache);
    }
    ra_context_destroy(ctx[0]);
    ra_context_destroy(ctx[1]);
    free(q); free(k); free(v); free(ref); free(kd); free(vd); free(qt); free(out); free(again);
    return worst;
}

/* GQA groups of 3, 2 and 4 (rows in runs of 4, 2 and 1), D off the vector
 * widths (20: a scalar tail) and D = 128, lengths across the 1024-key
 * chunks, windows, chunks, soft-cap, scale and sinks. */
static void test_decode_vs_reference(void)
{
    static const mask_case windows[] = {{1100, 0, 2.5, 0, 1}, {0, 1000, 0, 0, 0}};
    static const mask_case plain[] = {{0, 0, 0, 0, 0}};
    const int64_t short_len[2] = {1100, 700}, long_len[2] = {2100, 1100}, mid_len[2] = {600, 257};
    const int64_t Ts_short[2] = {1, 3}, Ts_long[2] = {1, 5}, Ts_mid[1] = {3};
    double worst = decode_vs_reference(3, 1, 20, short_len, Ts_short, 2, every_mask, 8, 50);
    worst = fmax(worst, decode_vs_reference(2, 1, 16, long_len, Ts_long, 2, windows, 2, 60));
    worst = fmax(worst, decode_vs_reference(8, 2, 128, mid_len, Ts_mid, 1, plain, 1, 70));
    printf("  8-bit decode vs the reference over the dequantized cache: worst %.3g (bound 2e-5)\n",
           worst);
}

/* A window cache of each 8-bit dtype decoding 1000 tokens in ragged steps
 * == a full cache of the same dtype holding every token, bit for bit (the
 * same codes and scales; only the slots differ), and the reference over
 * the dequantized tokens (2e-5, as above), on 3 threads. */
static void test_window_cache8(void)
{
    const int64_t B = 2, S = 1000, H = 4, hkv = 2, d = 24, window = 150, max_new = 3, T = max_new;
    const mask_case mc = {window, 0, 2.0, 0, 1};
    float *q = malloc(4 * B * S * H * d), *k = malloc(4 * B * S * hkv * d);
    float *v = malloc(4 * B * S * hkv * d), *ref = malloc(4 * B * S * H * d), sinks[4];
    float *kd = malloc(4 * B * S * hkv * d), *vd = malloc(4 * B * S * hkv * d);
    float *qt = malloc(4 * B * T * H * d), *o_ring = calloc((size_t)(B * T * H * d), 4);
    float *o_full = calloc((size_t)(B * T * H * d), 4);
    ra_test_fill(q, (size_t)(B * S * H * d), 7);
    ra_test_fill(k, (size_t)(B * S * hkv * d), 8);
    ra_test_fill(v, (size_t)(B * S * hkv * d), 9);
    ra_test_fill(sinks, (size_t)H, 10);
    for (int64_t i = 0; i < B * S * H * d; i++) q[i] *= 3.0f;
    const ra_attention_options o = mask_options(&mc, sinks);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    ra_tensor tq = ra_tensor_4d(qt, RA_F32, B, T, H, d);
    ra_tensor tr = ra_tensor_4d(o_ring, RA_F32, B, T, H, d);
    ra_tensor tf = ra_tensor_4d(o_full, RA_F32, B, T, H, d);
    double worst = 0;
    for (int di = 0; di < 2; di++) {
        const ra_dtype dt = eight_bit[di];
        ra_kv_cache *ring, *full;
        CHECK(ra_kv_cache_create_window(&ring, B, window, max_new, hkv, d, dt) == RA_OK, "ring");
        CHECK(ra_kv_cache_create(&full, B, S, hkv, d, dt) == RA_OK, "full");
        set_test_scales(ring, dt, hkv);
        set_test_scales(full, dt, hkv);
        int64_t done[2] = {0, 0};
        for (int64_t step = 0; done[0] < S || done[1] < S; step++) {
            int64_t n[2] = {1 + step % max_new, max_new - step % max_new};
            for (int64_t b = 0; b < B; b++) {
                n[b] = n[b] < S - done[b] ? n[b] : S - done[b];
                for (int64_t t = 0; t < n[b]; t++)
                    memcpy(qt + (b * T + t) * H * d, q + (b * S + done[b] + t) * H * d, 4 * H * d);
            }
            CHECK(append_rows(ring, k, v, B, S, hkv, d, done, n, T) == RA_OK, "append ring");
            CHECK(append_rows(full, k, v, B, S, hkv, d, done, n, T) == RA_OK, "append full");
            CHECK(ra_attention_decode(ctx, ring, &tr, &tq, n, &o) == RA_OK, "ring: %s",
                  ra_last_error());
            CHECK(ra_attention_decode(NULL, full, &tf, &tq, n, &o) == RA_OK, "full");
            for (int64_t b = 0; b < B; b++) {
                CHECK(memcmp(o_ring + b * T * H * d, o_full + b * T * H * d, 4 * n[b] * H * d) == 0,
                      "dtype %d step %lld b%lld: the ring's bits differ from the full cache's",
                      (int)dt, (long long)step, (long long)b);
                done[b] += n[b];
            }
        }
        for (int64_t b = 0; b < B; b++) {
            read_tokens(full, b, 0, S, hkv, d, kd + b * S * hkv * d, vd + b * S * hkv * d);
            reference_last_rows(ref + b * S * H * d, q + b * S * H * d, kd + b * S * hkv * d,
                                vd + b * S * hkv * d, S, 1, H, hkv, d, &o); /* the final row */
        }
        /* the ring reads back what it holds: the last W - 1 + max_new tokens */
        float *kr = malloc(4 * (window - 1 + max_new) * hkv * d), *vr = malloc(4 * (window - 1 + max_new) * hkv * d);
        read_tokens(ring, 0, S - (window - 1 + max_new), window - 1 + max_new, hkv, d, kr, vr);
        CHECK(memcmp(kr, kd + (S - (window - 1 + max_new)) * hkv * d, 4 * (window - 1 + max_new) * hkv * d) == 0,
              "dtype %d: the ring's tokens read back differently from the full cache's", (int)dt);
        ra_tensor one_k = ra_tensor_4d(kr, RA_F32, 1, 1, hkv, d), one_v = ra_tensor_4d(vr, RA_F32, 1, 1, hkv, d);
        CHECK(ra_kv_cache_read(ring, 0, S - (window - 1 + max_new) - 1, &one_k, &one_v) ==
                  RA_ERR_ARGUMENT, "a token the ring no longer holds");
        free(kr); free(vr);
        /* the final row of each sequence against the reference */
        for (int64_t b = 0; b < B; b++)
            memcpy(qt + b * T * H * d, q + (b * S + S - 1) * H * d, 4 * H * d);
        const int64_t ones[2] = {1, 1};
        CHECK(ra_attention_decode(ctx, ring, &tr, &tq, ones, &o) == RA_OK, "last rows");
        for (int64_t b = 0; b < B; b++) {
            double e = ra_test_max_rel_diff(o_ring + b * T * H * d, ref + (b * S + S - 1) * H * d,
                                            H * d);
            worst = fmax(worst, e);
            CHECK(e <= 2e-5, "dtype %d b%lld: ring vs the reference %.3g", (int)dt, (long long)b, e);
        }
        ra_kv_cache_destroy(ring);
        ra_kv_cache_destroy(full);
    }
    printf("  8-bit window caches vs the reference: worst %.3g (bound 2e-5)\n", worst);
    ra_context_destroy(ctx);
    free(q); free(k); free(v); free(ref); free(kd); free(vd); free(qt); free(o_ring); free(o_full);
}

/* Keys and values shaped like a real layer's: roughly normal values
 * (a sum of three uniforms), keys with a few outlier channels 8 times the
 * rest (as RoPE'd keys of trained models have), queries giving logits of a
 * few units.  [n] each. */
static void realistic(float *x, int64_t n, int64_t d, int outliers, uint64_t seed)
{
    float *u = malloc(4 * 3 * (size_t)n);
    ra_test_fill(u, (size_t)(3 * n), seed);
    for (int64_t i = 0; i < n; i++) {
        x[i] = u[3 * i] + u[3 * i + 1] + u[3 * i + 2]; /* variance 1 */
        if (outliers && (i % d) % 32 < 2) x[i] *= 8.0f;
    }
    free(u);
}

/* The 8-bit caches (and a bf16 one, for scale) against an f32 cache
 * holding the same tokens, on realistic data (H 8, Hkv 2, D 128, 4096
 * tokens, the last 4 as queries, causal and with a window of 1000):
 * max|out - out32| / max|out32|.  The rows are averages over thousands of
 * keys, well below the values' own size, while each key's logit carries
 * its own quantization noise (q . dk), which averaging does not remove:
 * so the error, relative to max|out|, is several times a value's.  Seen
 * (every ISA and thread count alike: the quantization, not the path, makes
 * it): bf16 0.0035-0.005, int8 0.021-0.027 (a value within max|row| / 254,
 * the outlier channels making max|row| 8 times the rest), fp8 0.056-0.078
 * (3 mantissa bits: within 2^-4 of itself); bounds about twice that. */
static void test_accuracy_vs_f32(void)
{
    const int64_t S = 4096, H = 8, hkv = 2, d = 128, T = 4;
    float *q = malloc(4 * T * H * d), *k = malloc(4 * S * hkv * d), *v = malloc(4 * S * hkv * d);
    float *o32 = malloc(4 * T * H * d), *o8 = malloc(4 * T * H * d);
    realistic(q, T * H * d, d, 0, 1);
    realistic(k, S * hkv * d, d, 1, 2);
    realistic(v, S * hkv * d, d, 0, 3);
    for (int64_t i = 0; i < T * H * d; i++) q[i] *= 0.5f;
    ra_kv_cache *f32;
    const int64_t zero[1] = {0}, len[1] = {S}, nq[1] = {T};
    CHECK(ra_kv_cache_create(&f32, 1, S, hkv, d, RA_F32) == RA_OK, "f32 cache");
    CHECK(append_rows(f32, k, v, 1, S, hkv, d, zero, len, S) == RA_OK, "append f32");
    float ks[2], vs[2];
    for (int64_t g = 0; g < hkv; g++) {
        float km = 0, vm = 0;
        for (int64_t i = 0; i < S; i++)
            for (int64_t e = 0; e < d; e++) {
                km = fmaxf(km, fabsf(k[(i * hkv + g) * d + e]));
                vm = fmaxf(vm, fabsf(v[(i * hkv + g) * d + e]));
            }
        ks[g] = km / 448.0f, vs[g] = vm / 448.0f;
    }
    static const char *const names[4] = {"bf16", "int8", "fp8 (scales from the data)",
                                          "fp8 (scale 1)"};
    const ra_dtype dts[4] = {RA_BF16, RA_I8, RA_F8E4M3, RA_F8E4M3};
    const double bounds[4] = {1e-2, 5e-2, 1.5e-1, 1.5e-1};
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, T, H, d);
    ra_tensor t32 = ra_tensor_4d(o32, RA_F32, 1, T, H, d), t8 = ra_tensor_4d(o8, RA_F32, 1, T, H, d);
    for (int w = 0; w < 2; w++) {
        ra_attention_options o = ra_attention_options_init();
        o.window = w ? 1000 : 0;
        CHECK(ra_attention_decode(NULL, f32, &t32, &tq, nq, &o) == RA_OK, "decode f32");
        for (int c = 0; c < 4; c++) {
            ra_kv_cache *cache;
            CHECK(ra_kv_cache_create(&cache, 1, S, hkv, d, dts[c]) == RA_OK, "cache");
            if (c == 2) CHECK(ra_kv_cache_set_scales(cache, ks, vs, hkv) == RA_OK, "scales");
            CHECK(append_rows(cache, k, v, 1, S, hkv, d, zero, len, S) == RA_OK, "append");
            CHECK(ra_attention_decode(NULL, cache, &t8, &tq, nq, &o) == RA_OK, "decode");
            double e = ra_test_max_rel_diff(o8, o32, T * H * d);
            CHECK(e <= bounds[c], "%s, window %lld: %.3g", names[c], (long long)o.window, e);
            printf("  %s cache vs f32 cache, window %lld: %.3g (bound %.2g)\n", names[c],
                   (long long)o.window, e, bounds[c]);
            ra_kv_cache_destroy(cache);
        }
    }
    ra_kv_cache_destroy(f32);
    free(q); free(k); free(v); free(o32); free(o8);
}

/* A layer through 8-bit caches: prefill P then steps, against the layer
 * without a cache (f32 throughout), and the prefill's rows against a
 * prefill through an f32 cache: the same bits (the prefill attends over the
 * float32 keys and values it projected).  Bounds on the steps' rows:
 * int8 1e-2, fp8 (scale 1) 6e-2 of max|y| (seen 5.4e-3 and 3.1e-2: about
 * twice; test_accuracy_vs_f32's reasons hold here: the output projection
 * mixes the heads' errors but does not grow them relative to y). */
static void test_layer_through_cache8(void)
{
    const int64_t dim = 256, h = 8, hkv = 2, d = 32, S = 48, P = 32, B = 2;
    const int64_t qd = h * d, kv = hkv * d;
    float *wq = malloc(4 * qd * dim), *wk = malloc(4 * kv * dim), *wv = malloc(4 * kv * dim);
    float *wo = malloc(4 * dim * qd), *x = malloc(4 * B * S * dim);
    float *y = malloc(4 * B * S * dim), *yc = malloc(4 * B * S * dim), *y32 = malloc(4 * B * S * dim);
    ra_test_fill(wq, qd * dim, 1);
    ra_test_fill(wk, kv * dim, 2);
    ra_test_fill(wv, kv * dim, 3);
    ra_test_fill(wo, dim * qd, 4);
    ra_test_fill(x, B * S * dim, 5);
    for (int64_t i = 0; i < qd * dim; i++) wq[i] *= 2.0f / sqrtf((float)dim), wo[i] /= sqrtf((float)qd);
    for (int64_t i = 0; i < kv * dim; i++) wk[i] *= 2.0f / sqrtf((float)dim), wv[i] /= sqrtf((float)dim);
    ra_rope_config rc = ra_rope_config_default(0);
    ra_layer_config cfg = ra_layer_config_init();
    cfg.dim = dim, cfg.n_heads = h, cfg.n_kv_heads = hkv, cfg.rope = &rc;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo;
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK, "layer");
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    CHECK(ra_layer_forward(ctx, layer, y, x, B, S, NULL, NULL) == RA_OK, "forward");
    const ra_dtype dts[3] = {RA_F32, RA_I8, RA_F8E4M3};
    const double bounds[3] = {1e-5, 1e-2, 6e-2};
    for (int di = 0; di < 3; di++) {
        ra_kv_cache *cache;
        CHECK(ra_kv_cache_create(&cache, B, S, hkv, d, dts[di]) == RA_OK, "cache");
        float *xp = malloc(4 * B * P * dim), *yp = malloc(4 * B * P * dim);
        for (int64_t b = 0; b < B; b++) memcpy(xp + b * P * dim, x + b * S * dim, 4 * P * dim);
        CHECK(ra_layer_forward_cached(ctx, layer, cache, yp, xp, B, P, NULL) == RA_OK,
              "prefill: %s", ra_last_error());
        for (int64_t b = 0; b < B; b++) memcpy(yc + b * S * dim, yp + b * P * dim, 4 * P * dim);
        for (int64_t t = P; t < S; t++) {
            float x1[2 * 256], y1[2 * 256];
            for (int64_t b = 0; b < B; b++) memcpy(x1 + b * dim, x + (b * S + t) * dim, 4 * dim);
            CHECK(ra_layer_forward_cached(ctx, layer, cache, y1, x1, B, 1, NULL) == RA_OK, "step");
            for (int64_t b = 0; b < B; b++) memcpy(yc + (b * S + t) * dim, y1 + b * dim, 4 * dim);
        }
        if (di == 0) memcpy(y32, yc, 4 * B * S * dim);
        double worst = 0;
        for (int64_t b = 0; b < B; b++) {
            CHECK(memcmp(yc + b * S * dim, y32 + b * S * dim, 4 * P * dim) == 0,
                  "dtype %d: the prefill's rows differ from the f32 cache's", (int)dts[di]);
            worst = fmax(worst, ra_test_max_rel_diff(yc + (b * S + P) * dim, y + (b * S + P) * dim,
                                                     (S - P) * dim));
        }
        CHECK(worst <= bounds[di], "dtype %d: steps vs the layer %.3g", (int)dts[di], worst);
        printf("  layer through a %s cache, steps vs no cache: %.3g (bound %.0e)\n",
               di == 0 ? "f32" : di == 1 ? "int8" : "fp8", worst, bounds[di]);
        free(xp); free(yp);
        ra_kv_cache_destroy(cache);
    }
    ra_context_destroy(ctx);
    ra_layer_destroy(layer);
    free(wq); free(wk); free(wv); free(wo); free(x); free(y); free(yc); free(y32);
}

/* A NaN in a key (int8: its whole row; fp8: NaN's code) or an Inf in a
 * value (both: NaN) at token j reaches the rows that see j and no other;
 * fp8 saturates finite values beyond 448 s. */
static void test_non_finite(void)
{
    const int64_t S = 40, H = 4, hkv = 2, d = 16, j = 25;
    float k[40 * 2 * 16], v[40 * 2 * 16], q[4 * 16], out[4 * 16];
    ra_test_fill(q, H * d, 3);
    for (int di = 0; di < 2; di++)
        for (int which = 0; which < 2; which++) {
            ra_test_fill(k, S * hkv * d, 1);
            ra_test_fill(v, S * hkv * d, 2);
            (which ? v : k)[(j * hkv + 1) * d + 5] = which ? INFINITY : NAN; /* kv head 1 */
            ra_kv_cache *cache;
            CHECK(ra_kv_cache_create(&cache, 1, S, hkv, d, eight_bit[di]) == RA_OK, "cache");
            const int64_t zero[1] = {0}, len[1] = {S};
            CHECK(append_rows(cache, k, v, 1, S, hkv, d, zero, len, S) == RA_OK, "append");
            ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, H, d), to = ra_tensor_4d(out, RA_F32, 1, 1, H, d);
            for (int64_t p = 0; p < S; p++) {
                ra_attention_options o = ra_attention_options_init();
                o.window = p + 1; /* the query at position S - 1 sees S - 1 - p .. S - 1 */
                CHECK(ra_attention_decode(NULL, cache, &to, &tq, NULL, &o) == RA_OK, "decode");
                const int sees = S - 1 - p <= j;
                for (int64_t hh = 0; hh < H; hh++) {
                    int nan = 0;
                    for (int64_t e = 0; e < d; e++) nan |= isnan(out[hh * d + e]);
                    CHECK(nan == (sees && hh >= 2), "dtype %d %s window %lld head %lld: NaN %d",
                          (int)eight_bit[di], which ? "v Inf" : "k NaN", (long long)p + 1,
                          (long long)hh, nan);
                }
            }
            ra_kv_cache_destroy(cache);
        }
    /* saturation: 1000 and -1e30 at scale 2 are stored as +-896 */
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, 1, 1, 4, RA_F8E4M3) == RA_OK, "cache");
    const float two = 2.0f;
    CHECK(ra_kv_cache_set_scales(cache, &two, &two, 1) == RA_OK, "scales");
    float kk[4] = {1000.0f, -1e30f, 3.0f, 0.0f}, vv[4] = {0}, kb[4], vb[4];
    const int64_t zero[1] = {0}, one[1] = {1};
    CHECK(append_rows(cache, kk, vv, 1, 1, 1, 4, zero, one, 1) == RA_OK, "append");
    read_tokens(cache, 0, 0, 1, 1, 4, kb, vb);
    CHECK(kb[0] == 896.0f && kb[1] == -896.0f && kb[2] == 3.0f && kb[3] == 0.0f,
          "saturation: %g %g %g %g", kb[0], kb[1], kb[2], kb[3]);
    ra_kv_cache_destroy(cache);
}

/* An fp8 cache's decode skips the NaN check while it holds no NaN code
 * (nan_codes, kvcache_internal.h).  A NaN in K or an Inf in V at token j
 * (5: dropped by the ring; 30: stored after it wrapped), kv head 1, in a
 * vector's lanes (feature 5) or in D's tail (37 of 38: past the last whole
 * vector at every width), appended 2 tokens at a time to a full and a
 * window cache (window 8: the ring overwrites token j's slot) and, with
 * token j finite, to a clean full cache.  After each append the flag is
 * set once token j is stored and stays set when the ring drops it; the
 * last token's query (window 8) is NaN in kv head 1's heads (2, 3) iff it
 * sees token j, and every other row is the bits of the clean cache (the
 * kernels with and without the check agree bit for bit); the window cache
 * and 3 threads give the full cache's bits.  ra_kv_cache_reset clears the
 * flag, and the cache then decodes as the clean one. */
static void test_nan_flag(void)
{
    enum { S = 40, H = 4, HKV = 2, D = 38, W = 8 };
    static const int64_t at_token[2] = {5, 30}, at_feature[2] = {5, 37};
    float *k = malloc(4 * S * HKV * D), *v = malloc(4 * S * HKV * D);
    float *kc = malloc(4 * S * HKV * D), *vc = malloc(4 * S * HKV * D);
    float q[H * D], o_nan[H * D], o_ring[H * D], o_clean[H * D], o_three[H * D];
    ra_test_fill(kc, S * HKV * D, 1);
    ra_test_fill(vc, S * HKV * D, 2);
    ra_test_fill(q, H * D, 3);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 3) == RA_OK, "ctx");
    ra_attention_options o = ra_attention_options_init();
    o.window = W;
    const ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, H, D);
    const ra_tensor tn = ra_tensor_4d(o_nan, RA_F32, 1, 1, H, D);
    const ra_tensor tr = ra_tensor_4d(o_ring, RA_F32, 1, 1, H, D);
    const ra_tensor tc = ra_tensor_4d(o_clean, RA_F32, 1, 1, H, D);
    const ra_tensor t3 = ra_tensor_4d(o_three, RA_F32, 1, 1, H, D);
    for (int ji = 0; ji < 2; ji++)
        for (int fi = 0; fi < 2; fi++)
            for (int which = 0; which < 2; which++) {
                const int64_t j = at_token[ji], two = 2, all = S, zero = 0;
                memcpy(k, kc, 4 * S * HKV * D);
                memcpy(v, vc, 4 * S * HKV * D);
                (which ? v : k)[(j * HKV + 1) * D + at_feature[fi]] = which ? INFINITY : NAN;
                ra_kv_cache *full, *ring, *clean;
                CHECK(ra_kv_cache_create(&full, 1, S, HKV, D, RA_F8E4M3) == RA_OK &&
                          ra_kv_cache_create_window(&ring, 1, W, 2, HKV, D, RA_F8E4M3) == RA_OK &&
                          ra_kv_cache_create(&clean, 1, S, HKV, D, RA_F8E4M3) == RA_OK, "caches");
                for (int64_t len = 2; len <= S; len += 2) {
                    const int64_t from = len - 2;
                    CHECK(append_rows(full, k, v, 1, S, HKV, D, &from, &two, 2) == RA_OK &&
                              append_rows(ring, k, v, 1, S, HKV, D, &from, &two, 2) == RA_OK &&
                              append_rows(clean, kc, vc, 1, S, HKV, D, &from, &two, 2) == RA_OK,
                          "append");
                    CHECK(full->nan_codes == (len > j) && ring->nan_codes == (len > j) &&
                              clean->nan_codes == 0,
                          "length %lld, NaN at %lld: flags %d %d %d", (long long)len,
                          (long long)j, full->nan_codes, ring->nan_codes, clean->nan_codes);
                    CHECK(ra_attention_decode(NULL, full, &tn, &tq, NULL, &o) == RA_OK &&
                              ra_attention_decode(NULL, ring, &tr, &tq, NULL, &o) == RA_OK &&
                              ra_attention_decode(NULL, clean, &tc, &tq, NULL, &o) == RA_OK &&
                              ra_attention_decode(ctx, full, &t3, &tq, NULL, &o) == RA_OK,
                          "decode: %s", ra_last_error());
                    const int sees = j <= len - 1 && len - 1 - j < W;
                    for (int64_t hh = 0; hh < H; hh++) {
                        int nan = 0;
                        for (int64_t e = 0; e < D; e++) nan |= isnan(o_nan[hh * D + e]);
                        const int want = sees && hh >= 2;
                        CHECK(nan == want, "NaN at token %lld feature %lld (%s), length %lld, "
                              "head %lld: NaN %d", (long long)j, (long long)at_feature[fi],
                              which ? "v" : "k", (long long)len, (long long)hh, nan);
                        CHECK(want || memcmp(o_nan + hh * D, o_clean + hh * D, 4 * D) == 0,
                              "length %lld head %lld: not the clean cache's bits",
                              (long long)len, (long long)hh);
                    }
                    CHECK(memcmp(o_nan, o_ring, sizeof o_nan) == 0 &&
                              memcmp(o_nan, o_three, sizeof o_nan) == 0,
                          "length %lld: the window cache or 3 threads changed bits",
                          (long long)len);
                }
                ra_kv_cache_reset(full);
                CHECK(full->nan_codes == 0, "reset keeps the flag");
                CHECK(append_rows(full, kc, vc, 1, S, HKV, D, &zero, &all, S) == RA_OK, "refill");
                CHECK(full->nan_codes == 0 &&
                          ra_attention_decode(NULL, full, &tn, &tq, NULL, &o) == RA_OK &&
                          memcmp(o_nan, o_clean, sizeof o_nan) == 0,
                      "after reset: not the clean cache's bits");
                ra_kv_cache_destroy(full);
                ra_kv_cache_destroy(ring);
                ra_kv_cache_destroy(clean);
            }
    ra_context_destroy(ctx);
    free(k); free(v); free(kc); free(vc);
}

/* Everything else refuses the 8-bit dtypes, with RA_ERR_DTYPE; the cache's
 * own checks (scales, reads, views, latent caches). */
static void test_refusals(void)
{
    CHECK(ra_dtype_size(RA_I8) == 1 && ra_dtype_size(RA_F8E4M3) == 1, "sizes");
    float buf[64] = {0}, out[64];
    for (int di = 0; di < 2; di++) {
        const ra_dtype dt = eight_bit[di];
        ra_tensor t = ra_tensor_4d(buf, dt, 1, 2, 2, 8), f = ra_tensor_4d(out, RA_F32, 1, 2, 2, 8);
        CHECK(ra_attention(NULL, &f, &f, &t, &t, NULL) == RA_ERR_DTYPE, "attention");
        CHECK(strstr(ra_last_error(), "KV-cache storage") != NULL, "detail: %s", ra_last_error());
        CHECK(ra_convert(out, RA_F32, buf, dt, 4) == RA_ERR_DTYPE, "convert from");
        CHECK(ra_convert(buf, dt, out, RA_F32, 4) == RA_ERR_DTYPE, "convert to");
        CHECK(ra_permute_rows(out, buf, dt, 1, 8, 2, RA_LAYOUT_HALF) == RA_ERR_DTYPE, "permute");
        ra_kv_cache *c = NULL;
        CHECK(ra_kv_cache_create_latent(&c, 1, 4, 8, 4, dt) == RA_OK, "latent");
        ra_tensor lk, lv;
        CHECK(ra_kv_cache_views(c, &lk, &lv) == RA_ERR_DTYPE, "latent views");
        ra_kv_cache_destroy(c); /* its one set of scales, freed once */
        CHECK(ra_kv_cache_create(&c, 1, 4, 2, 8, dt) == RA_OK, "create");
        ra_tensor kv, vv;
        CHECK(ra_kv_cache_views(c, &kv, &vv) == RA_ERR_DTYPE, "views");
        const float good[2] = {1.0f, 0.5f}, zero_s[1] = {0.0f}, inf[1] = {INFINITY};
        if (dt == RA_I8) {
            CHECK(ra_kv_cache_set_scales(c, good, good, 2) == RA_ERR_DTYPE, "int8 scales");
        } else {
            CHECK(ra_kv_cache_set_scales(c, good, good, 2) == RA_OK, "per head");
            CHECK(ra_kv_cache_set_scales(c, good, good, 1) == RA_OK, "per layer");
            CHECK(ra_kv_cache_set_scales(c, good, good, 3) == RA_ERR_ARGUMENT, "3 scales");
            CHECK(ra_kv_cache_set_scales(c, zero_s, good, 1) == RA_ERR_ARGUMENT, "scale 0");
            CHECK(ra_kv_cache_set_scales(c, good, inf, 1) == RA_ERR_ARGUMENT, "scale Inf");
            CHECK(ra_kv_cache_set_scales(c, NULL, good, 1) == RA_ERR_NULL, "NULL");
        }
        ra_tensor rk = ra_tensor_4d(out, RA_F32, 1, 1, 2, 8), rv = ra_tensor_4d(out + 16, RA_F32, 1, 1, 2, 8);
        CHECK(ra_kv_cache_read(c, 0, 0, &rk, &rv) == RA_ERR_ARGUMENT, "read past the length");
        ra_kv_cache_destroy(c);
    }
    ra_kv_cache *c;
    CHECK(ra_kv_cache_create(&c, 1, 4, 2, 8, RA_F16) == RA_OK, "f16 cache");
    const float one = 1.0f;
    CHECK(ra_kv_cache_set_scales(c, &one, &one, 1) == RA_ERR_DTYPE, "f16 scales");
    ra_kv_cache_destroy(c);
}

/* Appends, reads and decodes that reach the kernels (RoPE's in the append). */
static void test_cache_checks(void)
{
    const int64_t hkv = 2, d = 8;
    float k[2 * 3 * 16], v[2 * 3 * 16]; /* [B 2, S 3, Hkv 2, D 8] */
    ra_test_fill(k, 96, 1);
    ra_test_fill(v, 96, 2);
    ra_kv_cache *c;
    CHECK(ra_kv_cache_create(&c, 2, 4, hkv, d, RA_F8E4M3) == RA_OK, "create");
    const int64_t zero[2] = {0, 0}, n[2] = {3, 1};
    CHECK(append_rows(c, k, v, 2, 3, hkv, d, zero, n, 3) == RA_OK, "append");
    const float s = 0.5f;
    CHECK(ra_kv_cache_set_scales(c, &s, &s, 1) == RA_ERR_ARGUMENT, "scales after an append");
    float out[3 * 16], out2[3 * 16];
    ra_tensor rk = ra_tensor_4d(out, RA_F32, 1, 3, hkv, d), rv = ra_tensor_4d(out2, RA_F32, 1, 3, hkv, d);
    CHECK(ra_kv_cache_read(c, 0, 0, &rk, &rv) == RA_OK, "read 3");
    CHECK(ra_kv_cache_read(c, 1, 0, &rk, &rv) == RA_ERR_ARGUMENT, "sequence 1 holds 1");
    CHECK(ra_kv_cache_read(c, 2, 0, &rk, &rv) == RA_ERR_ARGUMENT, "b 2");
    CHECK(ra_kv_cache_read(c, 0, -1, &rk, &rv) == RA_ERR_ARGUMENT, "from -1");
    CHECK(ra_kv_cache_read(c, 0, 0, &rk, &rk) == RA_ERR_ARGUMENT, "k overlaps v");
    ra_tensor wrong = ra_tensor_4d(out2, RA_F32, 1, 3, hkv, 4);
    CHECK(ra_kv_cache_read(c, 0, 0, &rk, &wrong) == RA_ERR_SHAPE, "shape");
    ra_tensor half = ra_tensor_4d(out2, RA_F16, 1, 3, hkv, d);
    CHECK(ra_kv_cache_read(c, 0, 0, &rk, &half) == RA_ERR_DTYPE, "dtype");
    ra_kv_cache_reset(c);
    CHECK(ra_kv_cache_set_scales(c, &s, &s, 1) == RA_OK, "scales after a reset");
    const float huge = FLT_MAX / 400.0f, tiny = 1e-30f;
    CHECK(ra_kv_cache_set_scales(c, &huge, &s, 1) == RA_ERR_ARGUMENT, "448 s beyond a float");
    /* subnormal scales, as the CLI's --cache-scale refuses them */
    const float subnormal[3] = {1e-40f, 1e-45f, FLT_MIN / 2};
    for (int i = 0; i < 3; i++) {
        CHECK(ra_kv_cache_set_scales(c, &s, &subnormal[i], 1) == RA_ERR_ARGUMENT &&
                  strstr(ra_last_error(), "v_scales[0]"), "subnormal %g: %s",
              (double)subnormal[i], ra_last_error());
        CHECK(ra_kv_cache_set_scales(c, &subnormal[i], &s, 1) == RA_ERR_ARGUMENT,
              "subnormal %g", (double)subnormal[i]);
    }
    CHECK(ra_kv_cache_set_scales(c, &(const float){FLT_MIN}, &s, 1) == RA_OK, "FLT_MIN");
    /* x / s overflowing (a finite x, s < 1) saturates: 448 s, not NaN */
    CHECK(ra_kv_cache_set_scales(c, &tiny, &tiny, 1) == RA_OK, "tiny scales");
    float big[2 * 3 * 16];
    for (int i = 0; i < 96; i++) big[i] = i % 2 ? -1e9f : 1e9f;
    CHECK(append_rows(c, big, big, 2, 3, hkv, d, zero, n, 3) == RA_OK, "append");
    CHECK(ra_kv_cache_read(c, 0, 0, &rk, &rv) == RA_OK, "read");
    for (int i = 0; i < 48; i++)
        CHECK(out[i] == (i % 2 ? -448.0f : 448.0f) * tiny, "element %d: %g, not +-448 s", i,
              out[i]);
    ra_kv_cache_destroy(c);
}

static void simd_cases(void)
{
    RUN(test_codes_through_decode);
    RUN(test_decode_vs_reference);
    RUN(test_window_cache8);
    RUN(test_accuracy_vs_f32);
    RUN(test_layer_through_cache8);
    RUN(test_non_finite);
    RUN(test_nan_flag);
    RUN(test_cache_checks);
}

int main(void)
{
    RUN(test_int8_quantizer);
    RUN(test_e4m3_codes);
    RUN(test_refusals);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("kvcache_quantized"); /* [a-z_]: run.sh reads it */
}
