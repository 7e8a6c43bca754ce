/*
 * test_rope.c — frequency tables, the rotation (fast path against the scalar
 * reference, bit for bit: rope_exact.h), the seed's properties, layouts,
 * dtypes, strides, positions, the seed's functions, dtype conversion and
 * argument checks.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"
#include "cpu/dropout.h"
#include "rope_exact.h"
#include "rope_internal.h"

/* cos/sin of m * base^(-2i/d) in long double: "exact" to ~1e-15 here. */
static void exact_angle(int64_t m, int64_t i, int64_t d, double base, long double *c,
                        long double *s)
{
    long double freq = 1.0L / powl((long double)base, (long double)(2 * i) / (long double)d);
    long double angle = (long double)m * freq;
    *c = cosl(angle);
    *s = sinl(angle);
}

/* Requirement: every entry within 1e-6 of exact math up to position 2^20
 * (float32 rounding alone is 6e-8; forming the angle in float32 would be
 * ~5e-3 off at 1e5). */
static void test_freqs_precision(void)
{
    const int64_t d = 128, end = 4096;
    float *c = malloc(sizeof(float) * end * d / 2), *s = malloc(sizeof(float) * end * d / 2);
    CHECK(ra_precompute_freqs(c, s, d, end, 10000.0) == RA_OK, "precompute");
    double worst = 0;
    for (int64_t m = 0; m < end; m++)
        for (int64_t i = 0; i < d / 2; i++) {
            long double ec, es;
            exact_angle(m, i, d, 10000.0, &ec, &es);
            double e = fmax(fabsl(c[m * d / 2 + i] - ec), fabsl(s[m * d / 2 + i] - es));
            worst = fmax(worst, e);
        }
    CHECK(worst <= 1e-6, "table error %.3g", worst);

    /* Large positions through a rope object's on-the-fly path and table. */
    ra_rope_config cfg = ra_rope_config_default(d);
    cfg.theta = 500000.0;
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    int64_t pos[] = {0, 1, 4095, 4096, 100000, 524287, (1 << 20) - 1, 1 << 20, 123456789,
                     ((int64_t)1 << 31) - 1, RA_MAX_POSITION};
    int64_t n = sizeof pos / sizeof pos[0];
    CHECK(ra_rope_table(rope, c, s, pos, n) == RA_OK, "table");
    worst = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < d / 2; i++) {
            long double ec, es;
            exact_angle(pos[t], i, d, 500000.0, &ec, &es);
            worst = fmax(worst, fmax(fabsl(c[t * d / 2 + i] - ec), fabsl(s[t * d / 2 + i] - es)));
        }
    CHECK(worst <= 1e-6, "on-the-fly error %.3g", worst);
    ra_rope_destroy(rope);
    free(c);
    free(s);
}

static double dot(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Rotates one head vector to position m in place. */
static void rotate_to(const ra_rope *rope, float *x, int64_t d, int64_t m)
{
    ra_tensor t = ra_tensor_4d(x, RA_F32, 1, 1, 1, d);
    ra_positions p = {.struct_size = sizeof p, .start = m};
    ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD);
}

/* The seed's properties: R_m keeps norms; <R_m q, R_n k> = <q, R_(n-m) k>;
 * inverse undoes forward.  Tolerances: float32 rotation, ~1e-6 relative per
 * element, so 1e-5 relative to |q||k| for sums over D = 128. */
static void test_properties(void)
{
    const int64_t d = 128;
    for (int layout = 0; layout < 2; layout++) {
        ra_rope_config cfg = ra_rope_config_default(d);
        cfg.layout = (ra_layout)layout;
        ra_rope *rope;
        CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
        float q[128], k[128], a[128], b[128];
        ra_test_fill(q, d, 1);
        ra_test_fill(k, d, 2);
        double nq = sqrt(dot(q, q, d)), nk = sqrt(dot(k, k, d));
        const int64_t pairs[][2] = {{0, 0}, {3, 10}, {10, 3}, {100, 4000}, {5000, 5017},
                                    {100000, 100007}, {1 << 20, (1 << 20) + 1}};
        for (size_t t = 0; t < sizeof pairs / sizeof pairs[0]; t++) {
            int64_t m = pairs[t][0], n = pairs[t][1];
            memcpy(a, q, sizeof q);
            memcpy(b, k, sizeof k);
            rotate_to(rope, a, d, m);
            rotate_to(rope, b, d, n);
            CHECK(fabs(sqrt(dot(a, a, d)) - nq) <= 1e-5 * nq, "norm changes at %lld", (long long)m);
            double lhs = dot(a, b, d);
            if (n >= m) {
                memcpy(b, k, sizeof k);
                rotate_to(rope, b, d, n - m);
                double rhs = dot(q, b, d);
                CHECK(fabs(lhs - rhs) <= 1e-5 * nq * nk, "<R_m q, R_n k> %.9g vs %.9g (m %lld n %lld)",
                      lhs, rhs, (long long)m, (long long)n);
            }
            /* inverse o apply = identity */
            ra_tensor v = ra_tensor_4d(a, RA_F32, 1, 1, 1, d);
            ra_positions p = {.struct_size = sizeof p, .start = m};
            CHECK(ra_rope_apply(NULL, rope, &v, &v, &p, RA_INVERSE) == RA_OK, "inverse");
            double err = 0;
            for (int64_t i = 0; i < d; i++) err = fmax(err, fabs(a[i] - q[i]));
            CHECK(err <= 1e-6, "inverse error %.3g at %lld", err, (long long)m);
        }
        ra_rope_destroy(rope);
    }
}

/* Half layout on de-interleaved features equals the interleaved result
 * de-interleaved: the two layouts are one rotation, stored differently. */
static void test_layouts_agree(void)
{
    const int64_t d = 64, s = 9, h = 3;
    int64_t n = s * h * d;
    float *x = malloc(sizeof(float) * n), *xh = malloc(sizeof(float) * n);
    ra_test_fill(x, n, 7);
    for (int64_t r = 0; r < s * h; r++)
        for (int64_t i = 0; i < d / 2; i++) {
            xh[r * d + i] = x[r * d + 2 * i];
            xh[r * d + d / 2 + i] = x[r * d + 2 * i + 1];
        }
    ra_rope_config ci = ra_rope_config_default(d), ch = ra_rope_config_hf(d);
    ra_rope *ri, *rh;
    CHECK(ra_rope_create(&ri, &ci) == RA_OK && ra_rope_create(&rh, &ch) == RA_OK, "create");
    CHECK(ra_rope_apply_f32(NULL, ri, x, 1, s, h, 5) == RA_OK, "interleaved");
    CHECK(ra_rope_apply_f32(NULL, rh, xh, 1, s, h, 5) == RA_OK, "half");
    int same = 1;
    for (int64_t r = 0; r < s * h; r++)
        for (int64_t i = 0; i < d / 2; i++)
            same &= xh[r * d + i] == x[r * d + 2 * i] && xh[r * d + d / 2 + i] == x[r * d + 2 * i + 1];
    CHECK(same, "layouts disagree");
    ra_rope_destroy(ri);
    ra_rope_destroy(rh);
    free(x);
    free(xh);
}

/* ra_rope_config_hf is transformers' default rope: rotate_half's pairs (i,
 * i + D/2) at inv_freq = 10000^(-2i/D), every feature rotating, no scaling;
 * it differs from ra_rope_config_default (Meta's) in the layout alone. */
static void test_config_hf(void)
{
    enum { D = 16, S = 5 };
    ra_rope_config hf = ra_rope_config_hf(D), meta = ra_rope_config_default(D);
    CHECK(hf.layout == RA_LAYOUT_HALF && meta.layout == RA_LAYOUT_INTERLEAVED, "layouts");
    meta.layout = RA_LAYOUT_HALF;
    CHECK(memcmp(&hf, &meta, sizeof hf) == 0, "ra_rope_config_hf differs from the default "
          "in more than the layout");
    CHECK(hf.type == RA_ROPE_DEFAULT && hf.theta == 10000.0 && hf.rotary_dim == 0 &&
          hf.struct_size == sizeof hf, "transformers' default rope");
    float x[S * D], y[S * D];
    ra_test_fill(x, S * D, 11);
    memcpy(y, x, sizeof y);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &hf) == RA_OK, "create: %s", ra_last_error());
    CHECK(ra_rope_apply_f32(NULL, rope, y, 1, S, 1, 0) == RA_OK, "apply");
    double worst = 0;
    for (int64_t m = 0; m < S; m++)
        for (int64_t i = 0; i < D / 2; i++) { /* q * cos + rotate_half(q) * sin */
            long double c, s;
            exact_angle(m, i, D, 10000.0, &c, &s);
            const float *a = x + m * D, *b = y + m * D;
            double e1 = fabs((double)(a[i] * c - a[i + D / 2] * s) - b[i]);
            double e2 = fabs((double)(a[i + D / 2] * c + a[i] * s) - b[i + D / 2]);
            worst = fmax(worst, fmax(e1, e2));
        }
    CHECK(worst < 1e-6, "rotate_half at theta 10000: %g off", worst);
    ra_rope_destroy(rope);
}

/* The seed's apply_rotary_emb with precompute_freqs_cis tables equals the
 * rope object (interleaved, start 0), bit for bit. */
static void test_seed_functions(void)
{
    const int64_t b = 2, s = 5, h = 4, hkv = 2, d = 16;
    float q[2 * 5 * 4 * 16], k[2 * 5 * 2 * 16], q2[sizeof q / 4], k2[sizeof k / 4];
    float c[5 * 8], sn[5 * 8];
    ra_test_fill(q, sizeof q / 4, 3);
    ra_test_fill(k, sizeof k / 4, 4);
    memcpy(q2, q, sizeof q);
    memcpy(k2, k, sizeof k);
    CHECK(ra_precompute_freqs(c, sn, d, s, 10000.0) == RA_OK, "freqs");
    CHECK(ra_apply_rotary_emb(q, k, c, sn, b, s, h, hkv, d) == RA_OK, "seed apply");
    ra_rope_config cfg = ra_rope_config_default(d);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    CHECK(ra_rope_apply_f32(NULL, rope, q2, b, s, h, 0) == RA_OK, "q");
    CHECK(ra_rope_apply_f32(NULL, rope, k2, b, s, hkv, 0) == RA_OK, "k");
    CHECK(memcmp(q, q2, sizeof q) == 0 && memcmp(k, k2, sizeof k) == 0, "seed != rope object");
    ra_rope_destroy(rope);

    float kv[1 * 2 * 2 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, rep[24];
    CHECK(ra_repeat_kv(rep, kv, 1, 2, 2, 3, 2) == RA_OK, "repeat_kv");
    const float want[24] = {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9, 7, 8, 9, 10, 11, 12, 10, 11, 12};
    CHECK(memcmp(rep, want, sizeof want) == 0, "repeat_kv values");
}

/* Partial rotary: the features past rotary_dim pass through. */
static void test_partial_rotary(void)
{
    ra_rope_config cfg = ra_rope_config_default(16);
    cfg.rotary_dim = 8;
    cfg.layout = RA_LAYOUT_HALF;
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    float x[3 * 16], y[3 * 16];
    ra_test_fill(x, 48, 9);
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, 3, 1, 16), ty = ra_tensor_4d(y, RA_F32, 1, 3, 1, 16);
    ra_positions p = {.struct_size = sizeof p, .start = 2};
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK, "apply");
    for (int t = 0; t < 3; t++)
        CHECK(memcmp(x + t * 16 + 8, y + t * 16 + 8, 8 * sizeof(float)) == 0, "tail changed");
    CHECK(memcmp(x + 16, y + 16, 8 * sizeof(float)) != 0, "head not rotated");
    ra_rope_destroy(rope);
}

/* rotating_pairs (proportional RoPE): pairs i < n turn as the default
 * rope's (d = rotary_dim), the others keep their features; out of [0,
 * rotary_dim / 2] refused. */
static void test_rotating_pairs(void)
{
    enum { D = 16, N = 3, S = 4 };
    ra_rope_config cfg = ra_rope_config_hf(D), full = cfg;
    cfg.theta = full.theta = 100.0;
    cfg.rotating_pairs = N;
    ra_rope *rope, *all;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK && ra_rope_create(&all, &full) == RA_OK,
          "create");
    double f[D / 2], g[D / 2];
    CHECK(ra_rope_inverse_frequencies(rope, f) == RA_OK &&
          ra_rope_inverse_frequencies(all, g) == RA_OK, "frequencies");
    int ok = 1;
    for (int i = 0; i < D / 2; i++) ok &= i < N ? f[i] == g[i] && f[i] > 0 : f[i] == 0.0;
    CHECK(ok, "theta_i for i < %d, 0 after", N);
    float x[S * D], y[S * D], z[S * D];
    ra_test_fill(x, S * D, 5);
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, S, 1, D), ty = ra_tensor_4d(y, RA_F32, 1, S, 1, D);
    ra_tensor tz = ra_tensor_4d(z, RA_F32, 1, S, 1, D);
    ra_positions p = {.struct_size = sizeof p, .start = 3};
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK &&
          ra_rope_apply(NULL, all, &tz, &tx, &p, RA_FORWARD) == RA_OK, "apply");
    ok = 1;
    for (int t = 0; t < S; t++)
        for (int e = 0; e < D; e++) { /* pair i is (i, i + D/2) */
            const int turns = e % (D / 2) < N, at = t * D + e;
            ok &= turns ? y[at] == z[at] : y[at] == x[at];
        }
    CHECK(ok, "pairs below %d as the default rope, the others unchanged", N);
    ra_rope_destroy(rope);
    ra_rope_destroy(all);
    for (int bad = 0; bad < 2; bad++) {
        cfg.rotating_pairs = bad ? D / 2 + 1 : -1;
        CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "rotating_pairs") != NULL, "rotating_pairs %lld refused",
              (long long)cfg.rotating_pairs);
    }
}

static void test_conversions(void)
{
    CHECK(ra_f32_to_f16(1.0f) == 0x3c00, "1.0");
    CHECK(ra_f32_to_f16(65504.0f) == 0x7bff, "max");
    CHECK(ra_f32_to_f16(65519.0f) == 0x7bff, "below the Inf boundary");
    CHECK(ra_f32_to_f16(65520.0f) == 0x7c00, "rounds to Inf");
    CHECK(ra_f32_to_f16(-1e9f) == 0xfc00, "-Inf");
    CHECK(ra_f32_to_f16(0x1p-24f) == 0x0001, "smallest subnormal");
    CHECK(ra_f32_to_f16(0x1p-25f) == 0x0000, "tie to even (zero)");
    CHECK(ra_f32_to_f16(0x1.8p-24f) == 0x0002, "tie to even (two)");
    CHECK(ra_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "tie to even at 1");
    CHECK(ra_f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02, "tie up at 1");
    CHECK(isnan(ra_f16_to_f32(ra_f32_to_f16(NAN))), "NaN");
    CHECK(ra_bf16_to_f32(ra_f32_to_bf16(1.0f + 0x1p-8f)) == 1.0f, "bf16 tie to even");
    CHECK(ra_bf16_to_f32(ra_f32_to_bf16(1.0f + 0x1.8p-8f)) == 1.0f + 0x1p-7f, "bf16 tie up");
    CHECK(isnan(ra_bf16_to_f32(ra_f32_to_bf16(NAN))), "bf16 NaN");
    /* every f16 value survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = ra_f16_to_f32((uint16_t)h);
        if (!isnan(f) && ra_f32_to_f16(f) != h) bad++;
    }
    CHECK(bad == 0, "%d f16 values do not round-trip", bad);
}

/* Random123's known-answer vector for Philox-4x32-10. */
static void test_philox(void)
{
    const uint32_t zero_c[4] = {0, 0, 0, 0}, zero_k[2] = {0, 0};
    const uint32_t pi_c[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
    const uint32_t pi_k[2] = {0xa4093822, 0x299f31d0};
    uint32_t out[4];
    ra_philox4x32(zero_c, zero_k, out);
    CHECK(out[0] == 0x6627e8d5 && out[1] == 0xe169c58d && out[2] == 0xbc57ac4c &&
              out[3] == 0x9b00dbd8, "philox zero vector");
    ra_philox4x32(pi_c, pi_k, out);
    CHECK(out[0] == 0xd16cfe09 && out[1] == 0x94fdcceb && out[2] == 0x5001e420 &&
              out[3] == 0x24126ea1, "philox pi vector");
}

static void test_errors(void)
{
    float buf[64], c[8], s[8];
    ra_rope *rope = NULL;
    ra_rope_config cfg = ra_rope_config_default(8);
    CHECK(ra_precompute_freqs(NULL, s, 8, 1, 1e4) == RA_ERR_NULL, "NULL");
    CHECK(ra_precompute_freqs(c, s, 7, 1, 1e4) == RA_ERR_HEAD_DIM, "odd dim");
    CHECK(ra_precompute_freqs(c, s, 8, 0, 1e4) == RA_ERR_SIZE, "end 0");
    CHECK(ra_precompute_freqs(c, s, -8, 1, 1e4) == RA_ERR_SIZE, "negative dim");
    CHECK(ra_precompute_freqs(c, s, 8, 1, 0) == RA_ERR_THETA, "theta 0");
    CHECK(ra_precompute_freqs(c, s, 8, 1, -1) == RA_ERR_THETA, "theta < 0");
    CHECK(ra_precompute_freqs(c, s, 8, 1, NAN) == RA_ERR_THETA, "theta NaN");
    /* a subnormal base, refused as ra_rope_create refuses it (it ran: frequencies
     * near 1e240, angles with no correct digit) */
    CHECK(ra_precompute_freqs(c, s, 8, 1, 1e-320) == RA_ERR_THETA &&
              strstr(ra_last_error(), "not subnormal"),
          "theta 1e-320: %s", ra_last_error());
    CHECK(ra_precompute_freqs(c, s, (int64_t)1 << 62, (int64_t)1 << 30, 1e4) == RA_ERR_OVERFLOW ||
              ra_precompute_freqs(c, s, (int64_t)1 << 62, (int64_t)1 << 30, 1e4) == RA_ERR_POSITION,
          "overflow");
    CHECK(ra_rope_create(NULL, &cfg) == RA_ERR_NULL, "NULL out");
    cfg.head_dim = 7;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_HEAD_DIM && rope == NULL, "odd head_dim");
    cfg.head_dim = 8;
    cfg.theta = 0;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_THETA, "theta");
    cfg.theta = 1e4;
    cfg.layout = (ra_layout)9;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "layout");
    cfg.layout = RA_LAYOUT_HALF;
    cfg.type = RA_ROPE_YARN;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "yarn without factor or lengths");
    cfg.type = RA_ROPE_LLAMA3;
    cfg.factor = 8;
    cfg.low_freq_factor = cfg.high_freq_factor = 1;
    cfg.original_max_position_embeddings = 8192;
    /* low >= high (Llama 4 Scout has them equal): accepted, no smoothed band */
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "llama3 with low == high");
    ra_rope_destroy(rope);
    cfg.low_freq_factor = 4;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "llama3 with low > high");
    ra_rope_destroy(rope);
    cfg.factor = 0;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "llama3 without factor");
    cfg.type = RA_ROPE_YARN;
    cfg.beta_fast = 0.5; /* below the default beta_slow of 1 */
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "yarn with beta_fast < beta_slow");
    cfg.beta_fast = 0;
    cfg.type = RA_ROPE_LONGROPE;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_NULL, "longrope without factor lists");
    cfg.type = RA_ROPE_LINEAR;
    cfg.factor = -2;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "negative factor");
    cfg.factor = NAN;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "NaN factor");
    cfg.type = RA_ROPE_DYNAMIC;
    cfg.factor = 2;
    cfg.max_position_embeddings = 0;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "dynamic without L0");
    cfg.type = (ra_rope_type)77;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "unknown type");
    cfg = ra_rope_config_default(cfg.head_dim);
    cfg.rotary_dim = 10;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "rotary_dim > head_dim");
    cfg.rotary_dim = 0;
    cfg.table_size = ((int64_t)1 << 62);
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_POSITION, "huge table");
    cfg.table_size = 16;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");

    for (int i = 0; i < 64; i++) buf[i] = (float)i;
    float before[64];
    memcpy(before, buf, sizeof buf);
    ra_tensor t = ra_tensor_4d(buf, RA_F32, 1, 2, 4, 8);
    ra_positions neg = ra_positions_start(-1), far = ra_positions_start(RA_MAX_POSITION);
    ra_positions ok = ra_positions_start(0);
    int64_t ids[2] = {3, -5};
    ra_positions bad_ids = {.struct_size = sizeof bad_ids, .start = 0, .ids = ids};
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &neg, RA_FORWARD) == RA_ERR_POSITION, "negative start");
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &far, RA_FORWARD) == RA_ERR_POSITION, "past the max");
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &bad_ids, RA_FORWARD) == RA_ERR_POSITION, "negative id");
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &ok, (ra_direction)5) == RA_ERR_ARGUMENT, "direction");
    CHECK(ra_rope_apply_f32(NULL, rope, buf, 1, 2, 0, 0) == RA_ERR_SIZE, "zero heads");
    CHECK(ra_rope_apply_f32(NULL, rope, buf, -1, 2, 4, 0) == RA_ERR_SIZE, "negative batch");
    CHECK(ra_rope_apply_f32(NULL, rope, buf, (int64_t)1 << 40, (int64_t)1 << 40, 4, 0) ==
              RA_ERR_OVERFLOW, "overflowing shape");
    ra_tensor wrong_d = ra_tensor_4d(buf, RA_F32, 1, 2, 2, 16);
    CHECK(ra_rope_apply(NULL, rope, &wrong_d, &wrong_d, &ok, RA_FORWARD) == RA_ERR_SHAPE, "D");
    ra_tensor strided = t;
    strided.stride[3] = 2;
    CHECK(ra_rope_apply(NULL, rope, &strided, &strided, &ok, RA_FORWARD) == RA_ERR_ARGUMENT, "stride");
    ra_tensor other = t;
    other.dtype = RA_BF16;
    CHECK(ra_rope_apply(NULL, rope, &other, &t, &ok, RA_FORWARD) == RA_ERR_DTYPE, "dtype mismatch");
    ra_tensor shifted = ra_tensor_4d(buf + 1, RA_F32, 1, 2, 3, 8), base = ra_tensor_4d(buf, RA_F32, 1, 2, 3, 8);
    CHECK(ra_rope_apply(NULL, rope, &shifted, &base, &ok, RA_FORWARD) == RA_ERR_ARGUMENT,
          "out overlapping x without being x");
    CHECK(ra_apply_rotary_emb(buf, buf, c, s, 1, 1, 3, 2, 8) == RA_ERR_GQA, "seed: 3 heads, 2 kv");
    CHECK(memcmp(buf, before, sizeof buf) == 0, "a failing call wrote");
    CHECK(ra_repeat_kv(buf, buf, 1, 1, 1, 8, 0) == RA_ERR_SIZE, "n_rep 0");
    CHECK(ra_permute_rows(c, c, RA_F32, 1, 2, 1, RA_LAYOUT_HALF) == RA_ERR_ARGUMENT, "aliasing permute");
    CHECK(ra_convert(c, (ra_dtype)7, s, RA_F32, 1) == RA_ERR_ARGUMENT, "convert dtype");
    CHECK(strcmp(ra_status_string(RA_ERR_GQA), "n_heads must be a multiple of n_kv_heads") == 0, "text");
    CHECK(strcmp(ra_status_string((ra_status)999), "unknown status") == 0, "unknown");
    for (int st = 0; st < RA_STATUS_COUNT; st++)
        CHECK(ra_status_string((ra_status)st)[0] != '\0', "status %d has no text", st);
    ra_rope_destroy(rope);
    ra_rope_destroy(NULL);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, -1) == RA_ERR_ARGUMENT, "threads -1");
    CHECK(ra_context_create(NULL, 1) == RA_ERR_NULL, "NULL ctx out");
}

/* Inverse frequencies of a config (creating a throwaway rope). */
static ra_status frequencies_of(const ra_rope_config *cfg, double *inv_freq, double *af)
{
    ra_rope *rope;
    ra_status st = ra_rope_create(&rope, cfg);
    if (st != RA_OK) return st;
    ra_rope_inverse_frequencies(rope, inv_freq);
    *af = ra_rope_attention_factor(rope);
    ra_rope_destroy(rope);
    return RA_OK;
}

/* Each scaled type reduces to the default where its own parameters say
 * "no scaling", and moves the frequencies the documented way otherwise.
 * (Their exact values against transformers' formulas: test_fixtures.) */
static void test_rope_types(void)
{
    const int64_t d = 128;
    double base_f[64], f[64], af = 0, af0 = 0; /* read by CHECKs after a failed call too */
    ra_rope_config def = ra_rope_config_default(d);
    def.theta = 500000.0;
    def.table_size = 0;
    CHECK(frequencies_of(&def, base_f, &af0) == RA_OK && af0 == 1.0, "default");

    ra_rope_config c = def;
    c.type = RA_ROPE_LINEAR;
    c.factor = 4.0;
    CHECK(frequencies_of(&c, f, &af) == RA_OK && af == 1.0, "linear");
    int ok = 1;
    for (int i = 0; i < 64; i++) ok &= f[i] == base_f[i] / 4.0;
    CHECK(ok, "linear: theta_i / factor");

    c = def;
    c.type = RA_ROPE_DYNAMIC;
    c.factor = 2.0;
    c.max_position_embeddings = 2048;
    c.seq_len = 2048; /* not beyond L0: the default */
    CHECK(frequencies_of(&c, f, &af) == RA_OK && memcmp(f, base_f, sizeof f) == 0, "dynamic at L0");
    c.seq_len = 8192; /* base' = base * (2 * 4 - 1)^(128/126) */
    CHECK(frequencies_of(&c, f, &af) == RA_OK, "dynamic beyond L0");
    double grown = 500000.0 * pow(7.0, 128.0 / 126.0);
    CHECK(fabs(f[10] - pow(grown, -20.0 / 128.0)) <= 1e-15 * f[10], "dynamic base %.17g", f[10]);

    c = def;
    c.type = RA_ROPE_YARN;
    c.factor = 1.0;
    c.original_max_position_embeddings = 8192;
    CHECK(frequencies_of(&c, f, &af) == RA_OK && af == 1.0, "yarn factor 1");
    ok = 1;
    for (int i = 0; i < 64; i++) ok &= fabs(f[i] - base_f[i]) <= 1e-15 * base_f[i];
    CHECK(ok, "yarn with factor 1 is the default");
    c.factor = 4.0;
    CHECK(frequencies_of(&c, f, &af) == RA_OK, "yarn factor 4");
    CHECK(fabs(af - (0.1 * log(4.0) + 1.0)) < 1e-15, "yarn attention factor %.17g", af);
    CHECK(f[0] == base_f[0] && fabs(f[63] - base_f[63] / 4.0) <= 1e-15 * f[63],
          "yarn keeps high frequencies and interpolates low ones");
    c.mscale = c.mscale_all_dim = 0.707;
    CHECK(frequencies_of(&c, f, &af) == RA_OK && fabs(af - 1.0) < 1e-15, "mscale ratio 1");
    c.attention_factor = 1.25;
    CHECK(frequencies_of(&c, f, &af) == RA_OK && af == 1.25, "given attention factor");

    c = def;
    c.type = RA_ROPE_LLAMA3;
    c.factor = 1.0;
    c.low_freq_factor = 1.0;
    c.high_freq_factor = 4.0;
    c.original_max_position_embeddings = 8192;
    CHECK(frequencies_of(&c, f, &af) == RA_OK, "llama3 factor 1");
    ok = 1;
    for (int i = 0; i < 64; i++) ok &= fabs(f[i] - base_f[i]) <= 1e-15 * base_f[i];
    CHECK(ok, "llama3 with factor 1 is the default");
    c.factor = 8.0;
    CHECK(frequencies_of(&c, f, &af) == RA_OK, "llama3");
    CHECK(f[0] == base_f[0] && f[63] == base_f[63] / 8.0, "llama3 bands");

    double ones[64], longs[64];
    for (int i = 0; i < 64; i++) {
        ones[i] = 1.0;
        longs[i] = 1.0 + i;
    }
    c = def;
    c.type = RA_ROPE_LONGROPE;
    c.short_factor = ones;
    c.long_factor = longs;
    c.original_max_position_embeddings = 4096;
    c.max_position_embeddings = 131072;
    c.seq_len = 4096; /* not beyond: short factors */
    CHECK(frequencies_of(&c, f, &af) == RA_OK && memcmp(f, base_f, sizeof f) == 0, "longrope short");
    CHECK(fabs(af - sqrt(1.0 + log(32.0) / log(4096.0))) < 1e-15, "longrope attention factor");
    c.seq_len = 4097;
    CHECK(frequencies_of(&c, f, &af) == RA_OK && fabs(f[5] - base_f[5] / 6.0) <= 1e-15 * f[5],
          "longrope long factors");

    /* The attention factor multiplies the table's cos and sin. */
    ra_rope *rope;
    c.table_size = 16;
    CHECK(ra_rope_create(&rope, &c) == RA_OK, "create");
    float cs[64], sn[64];
    int64_t pos = 7;
    CHECK(ra_rope_table(rope, cs, sn, &pos, 1) == RA_OK, "table");
    CHECK(fabs(cs[5] - cos(7.0 * base_f[5] / 6.0) * af) < 1e-7, "cos times attention factor");
    ra_rope_destroy(rope);
}

/* ra_rope_table and ra_rope_apply at positions [first, first + n): the
 * status of both, which must agree. */
static ra_status rotate_at(const ra_rope *rope, int64_t first, int64_t n)
{
    float x[4 * 8] = {0}, c[4 * 4], s[4 * 4];
    int64_t pos[4];
    for (int64_t t = 0; t < n; t++) pos[t] = first + t;
    ra_status table = ra_rope_table(rope, c, s, pos, n);
    ra_tensor t = ra_tensor_4d(x, RA_F32, 1, n, 1, 8);
    ra_positions p = ra_positions_start(first);
    ra_status apply = ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD);
    CHECK(table == apply, "positions %lld..: table %d, apply %d", (long long)first, (int)table,
          (int)apply);
    return apply;
}

/* A dynamic or longrope rope is made for one length: transformers forms
 * other frequencies for a longer sequence, so positions from max(seq_len,
 * the original length) on are refused, naming seq_len (a longrope rope past
 * its original length has the long factors of every longer one).  The other
 * types rotate any position. */
static void test_length_bound(void)
{
    double shorts[4] = {1, 1, 1, 1}, longs[4] = {1, 2, 3, 4};
    ra_rope_config c = ra_rope_config_default(8);
    c.type = RA_ROPE_DYNAMIC;
    c.factor = 2.0;
    c.max_position_embeddings = 16;
    const struct {
        ra_rope_type type;
        int64_t seq_len, last; /* the largest position accepted */
    } cases[] = {
        {RA_ROPE_DYNAMIC, 0, 15},       {RA_ROPE_DYNAMIC, 12, 15},
        {RA_ROPE_DYNAMIC, 41, 40},      {RA_ROPE_LONGROPE, 0, 15},
        {RA_ROPE_LONGROPE, 16, 15},     {RA_ROPE_LONGROPE, 17, RA_MAX_POSITION},
        {RA_ROPE_DEFAULT, 0, RA_MAX_POSITION}, {RA_ROPE_LINEAR, 0, RA_MAX_POSITION},
        {RA_ROPE_YARN, 0, RA_MAX_POSITION},    {RA_ROPE_LLAMA3, 0, RA_MAX_POSITION},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c.type = cases[i].type;
        c.seq_len = cases[i].seq_len;
        c.original_max_position_embeddings = 16;
        c.low_freq_factor = 1.0;
        c.high_freq_factor = 4.0;
        c.short_factor = shorts;
        c.long_factor = longs;
        ra_rope *rope = NULL;
        ra_status created = ra_rope_create(&rope, &c);
        CHECK(created == RA_OK, "case %zu: %s", i, ra_last_error());
        if (created != RA_OK) continue;
        const int64_t last = cases[i].last;
        CHECK(rotate_at(rope, last - 3, 4) == RA_OK, "case %zu: up to %lld: %s", i,
              (long long)last, ra_last_error());
        if (last < RA_MAX_POSITION) {
            CHECK(rotate_at(rope, last - 2, 4) == RA_ERR_POSITION &&
                      strstr(ra_last_error(), "seq_len"),
                  "case %zu: position %lld: %s", i, (long long)last + 1, ra_last_error());
            int64_t ids[2] = {0, last + 1};
            ra_positions p = ra_positions_start(0);
            p.ids = ids;
            float x[2 * 8] = {0};
            ra_tensor t = ra_tensor_4d(x, RA_F32, 1, 2, 1, 8);
            CHECK(ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD) == RA_ERR_POSITION,
                  "case %zu: ids", i);
        }
        ra_rope_destroy(rope);
    }
}

/* Per-sequence starts, packed ragged batches and explicit ids all place the
 * same token at the same position: the results agree, and the fast path
 * equals the reference bit for bit, on a scaled (yarn) rope. */
static void test_positions(void)
{
    const int64_t d = 32, h = 2, total = 17;
    ra_rope_config cfg = ra_rope_config_default(d);
    cfg.type = RA_ROPE_YARN;
    cfg.factor = 4.0;
    cfg.original_max_position_embeddings = 64;
    cfg.table_size = 20; /* some positions beyond the table */
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    float x[17 * 2 * 32], a[17 * 2 * 32], b[17 * 2 * 32], r[17 * 2 * 32];
    ra_test_fill(x, sizeof x / 4, 11);
    /* three sequences packed: lengths 5, 0, 12; starts 3, 9, 30 */
    const int64_t cu[] = {0, 5, 5, 17}, starts[] = {3, 9, 30};
    int64_t ids[17];
    for (int t = 0; t < 5; t++) ids[t] = 3 + t;
    for (int t = 5; t < 17; t++) ids[t] = 30 + t - 5;
    ra_positions packed = {.struct_size = sizeof packed, .cu_seqlens = cu, .n_seqs = 3,
                           .starts = starts};
    ra_positions explicit_ids = {.struct_size = sizeof explicit_ids, .ids = ids};
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, total, h, d), ta = ra_tensor_4d(a, RA_F32, 1, total, h, d);
    ra_tensor tb = ra_tensor_4d(b, RA_F32, 1, total, h, d), tr = ra_tensor_4d(r, RA_F32, 1, total, h, d);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    CHECK(ra_rope_apply(ctx, rope, &ta, &tx, &packed, RA_FORWARD) == RA_OK, "packed");
    CHECK(ra_rope_apply(NULL, rope, &tb, &tx, &explicit_ids, RA_FORWARD) == RA_OK, "ids");
    CHECK(ra_rope_apply_reference(rope, &tr, &tx, &packed, RA_FORWARD) == RA_OK, "reference");
    CHECK(memcmp(a, b, sizeof a) == 0, "packed != ids");
    CHECK(memcmp(a, r, sizeof a) == 0, "fast != reference");

    /* A start per batch row: [2, 4] with starts {2, 100} = ids. */
    const int64_t row_starts[] = {2, 100};
    int64_t row_ids[8] = {2, 3, 4, 5, 100, 101, 102, 103};
    ra_positions per_row = {.struct_size = sizeof per_row,
                            .starts = row_starts}, per_row_ids = {.struct_size = sizeof per_row_ids,
                            .ids = row_ids};
    ra_tensor x2 = ra_tensor_4d(x, RA_F32, 2, 4, h, d), a2 = ra_tensor_4d(a, RA_F32, 2, 4, h, d);
    ra_tensor b2 = ra_tensor_4d(b, RA_F32, 2, 4, h, d);
    CHECK(ra_rope_apply(ctx, rope, &a2, &x2, &per_row, RA_FORWARD) == RA_OK, "starts");
    CHECK(ra_rope_apply(ctx, rope, &b2, &x2, &per_row_ids, RA_FORWARD) == RA_OK, "row ids");
    CHECK(memcmp(a, b, 8 * h * d * sizeof(float)) == 0, "starts != ids");

    /* Bad descriptions are refused before anything is written. */
    memcpy(b, a, sizeof a);
    const int64_t short_cu[] = {0, 5, 16}, down_cu[] = {0, 9, 5, 17}, bad_starts[] = {3, -1, 30};
    ra_positions bad1 = {.struct_size = sizeof bad1, .cu_seqlens = short_cu, .n_seqs = 2};
    ra_positions bad2 = {.struct_size = sizeof bad2, .cu_seqlens = down_cu, .n_seqs = 3};
    ra_positions bad3 = {.struct_size = sizeof bad3, .cu_seqlens = cu, .n_seqs = 3,
                         .starts = bad_starts};
    ra_positions bad4 = {.struct_size = sizeof bad4, .cu_seqlens = cu, .n_seqs = 0};
    ra_positions bad5 = {.struct_size = sizeof bad5, .starts = bad_starts};
    CHECK(ra_rope_apply(NULL, rope, &ta, &tx, &bad1, RA_FORWARD) == RA_ERR_SHAPE, "cu end");
    CHECK(ra_rope_apply(NULL, rope, &ta, &tx, &bad2, RA_FORWARD) == RA_ERR_SHAPE, "cu decreasing");
    CHECK(ra_rope_apply(NULL, rope, &ta, &tx, &bad3, RA_FORWARD) == RA_ERR_POSITION, "start < 0");
    CHECK(ra_rope_apply(NULL, rope, &ta, &tx, &bad4, RA_FORWARD) == RA_ERR_SIZE, "n_seqs 0");
    ra_tensor x3 = ra_tensor_4d(x, RA_F32, 3, 2, h, d), a3 = ra_tensor_4d(a, RA_F32, 3, 2, h, d);
    CHECK(ra_rope_apply(NULL, rope, &a3, &x3, &bad5, RA_FORWARD) == RA_ERR_POSITION, "row start < 0");
    CHECK(memcmp(a, b, sizeof a) == 0, "a refused call wrote");
    ra_context_destroy(ctx);
    ra_rope_destroy(rope);
}

/* Rows move as bytes in every dtype: bf16 permuted = f32 permuted, rounded. */
static void test_permute_dtypes(void)
{
    const int64_t heads = 2, d = 8, in = 5, n = heads * d * in;
    float w[80], wp[80];
    uint16_t wb[80], wbp[80];
    ra_test_fill(w, n, 3);
    ra_convert(wb, RA_BF16, w, RA_F32, n);
    CHECK(ra_permute_rows(wp, w, RA_F32, heads, d, in, RA_LAYOUT_HALF) == RA_OK, "f32");
    CHECK(ra_permute_rows(wbp, wb, RA_BF16, heads, d, in, RA_LAYOUT_HALF) == RA_OK, "bf16");
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= wbp[i] == ra_f32_to_bf16(wp[i]);
    CHECK(ok, "bf16 rows moved differently");
    CHECK(ra_permute_rows(wp, w, (ra_dtype)5, heads, d, in, RA_LAYOUT_HALF) == RA_ERR_ARGUMENT, "dtype");
}

/* A subnormal base is refused as the CLI's --theta refuses it, even where
 * its frequencies would be finite (rotary_dim 2 has only theta_0 = 1). */
static void test_theta_normal(void)
{
    ra_rope *rope = NULL;
    ra_rope_config cfg = ra_rope_config_default(2);
    static const double bad[] = {1e-320, 4.9e-324, 2.2e-308, 0.0, -1.0, INFINITY, NAN};
    for (int h = 2; h <= 8; h += 6)
        for (int i = 0; i < 7; i++) {
            cfg = ra_rope_config_default(h);
            cfg.theta = bad[i];
            ra_status expected = i < 3 ? RA_ERR_ARGUMENT : RA_ERR_THETA;
            CHECK(ra_rope_create(&rope, &cfg) == expected && rope == NULL,
                  "theta %g, head_dim %d", bad[i], h);
        }
    cfg = ra_rope_config_default(2);
    cfg.theta = DBL_MIN;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "theta DBL_MIN, head_dim 2");
    ra_rope_destroy(rope);
    cfg.type = RA_ROPE_LINEAR;
    cfg.theta = 1e4;
    cfg.factor = 1e-320;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT, "subnormal factor");
}

/* Views that would write one element twice are refused; views that nest
 * (transposed, head-major) and repeated reads are not; ra_permute_rows
 * refuses any overlap of out and w. */
static void test_aliasing_refused(void)
{
    enum { B = 1, S = 3, H = 2, D = 8, N = B * S * H * D };
    float x[N], out[N], ref[N], moved[2 * N];
    ra_test_fill(x, N, 11);
    ra_rope_config cfg = ra_rope_config_default(D);
    ra_rope *rope = NULL;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    if (!rope) return;
    ra_positions pos = {.struct_size = sizeof pos};
    ra_tensor tx = ra_tensor_4d(x, RA_F32, B, S, H, D), tref = ra_tensor_4d(ref, RA_F32, B, S, H, D);
    CHECK(ra_rope_apply(NULL, rope, &tref, &tx, &pos, RA_FORWARD) == RA_OK, "contiguous");

    ra_tensor t = ra_tensor_4d(out, RA_F32, B, S, H, D);
    t.stride[1] = 0; /* every token onto one row */
    CHECK(ra_rope_apply(NULL, rope, &t, &tx, &pos, RA_FORWARD) == RA_ERR_ARGUMENT, "zero stride");
    t = ra_tensor_4d(x, RA_F32, B, S, H, D);
    t.stride[2] = 0;
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &pos, RA_FORWARD) == RA_ERR_ARGUMENT,
          "zero stride in place");
    t = ra_tensor_4d(out, RA_F32, B, S, H, D);
    t.stride[2] = D / 2; /* heads half on top of one another */
    t.stride[1] = D + D / 2;
    CHECK(ra_rope_apply(NULL, rope, &t, &tx, &pos, RA_FORWARD) == RA_ERR_ARGUMENT, "interleaved");

    /* Head-major output [B, H, S, D]: accepted, the same numbers. */
    t = ra_tensor_4d(out, RA_F32, B, S, H, D);
    t.stride[2] = S * D;
    t.stride[1] = D;
    CHECK(ra_rope_apply(NULL, rope, &t, &tx, &pos, RA_FORWARD) == RA_OK, "head-major");
    int same = 1;
    for (int s = 0; s < S; s++)
        for (int h = 0; h < H; h++)
            same &= memcmp(out + (h * S + s) * D, ref + (s * H + h) * D, D * sizeof(float)) == 0;
    CHECK(same, "head-major output differs");
    /* Reading one token for every row (stride 0) is allowed. */
    t = ra_tensor_4d(x, RA_F32, B, S, H, D);
    t.stride[1] = 0;
    ra_tensor tout = ra_tensor_4d(out, RA_F32, B, S, H, D);
    CHECK(ra_rope_apply(NULL, rope, &tout, &t, &pos, RA_FORWARD) == RA_OK, "broadcast read");
    ra_rope_destroy(rope);

    memcpy(moved, x, sizeof x);
    CHECK(ra_permute_rows(moved, moved, RA_F32, H, D, S, RA_LAYOUT_HALF) == RA_ERR_ARGUMENT,
          "permute in place");
    CHECK(ra_permute_rows(moved + 1, moved, RA_F32, H, D, S, RA_LAYOUT_HALF) == RA_ERR_ARGUMENT,
          "permute overlapping forward");
    CHECK(ra_permute_rows(moved, moved + N - 1, RA_F32, H, D, S, RA_LAYOUT_HALF) ==
              RA_ERR_ARGUMENT, "permute overlapping backward");
    CHECK(ra_permute_rows(moved + N, moved, RA_F32, H, D, S, RA_LAYOUT_HALF) == RA_OK,
          "permute into the adjacent rows");
}

/* The calls with plain pointers refuse outputs that overlap their inputs
 * or each other: each once gave wrong numbers with RA_OK (in-place widening
 * read halves already overwritten; xq == xk rotated twice; the tables kept
 * sin alone). */
static void test_pointer_aliasing(void)
{
    uint16_t h[16];
    float x[16], c[8], sn[8], tab[16];
    for (int i = 0; i < 8; i++) h[i] = ra_f32_to_f16((float)(i + 1));
    CHECK(ra_convert(h, RA_F32, h, RA_F16, 4) == RA_ERR_ARGUMENT, "convert f16 -> f32 in place");
    CHECK(ra_f16_to_f32(h[1]) == 2.0f, "a refused convert wrote");
    CHECK(ra_convert((char *)h + 2, RA_F32, h, RA_F16, 2) == RA_ERR_ARGUMENT,
          "convert overlapping");
    for (int i = 0; i < 4; i++) x[i] = (float)(i + 1);
    CHECK(ra_convert(x, RA_F16, x, RA_F32, 4) == RA_OK, "convert f32 -> f16 in place");
    memcpy(h, x, 8);
    CHECK(ra_f16_to_f32(h[0]) == 1.0f && ra_f16_to_f32(h[3]) == 4.0f, "in place narrowing");
    CHECK(ra_convert(x, RA_BF16, x, RA_BF16, 4) == RA_OK, "convert to itself");
    CHECK(ra_convert((char *)x + 2, RA_F16, x, RA_F32, 4) == RA_ERR_ARGUMENT,
          "narrowing into a shifted overlap");

    for (int i = 0; i < 8; i++) x[i] = i % 2 ? 0.0f : 1.0f, c[i] = 0.0f, sn[i] = 1.0f;
    CHECK(ra_apply_rotary_emb(x, x, c, sn, 1, 1, 2, 2, 2) == RA_ERR_ARGUMENT, "xq == xk");
    CHECK(ra_apply_rotary_emb(x, x + 2, c, sn, 1, 1, 2, 2, 2) == RA_ERR_ARGUMENT,
          "xq overlapping xk");
    CHECK(ra_apply_rotary_emb(x, x + 4, x, sn, 1, 1, 2, 2, 2) == RA_ERR_ARGUMENT,
          "freqs_cos inside xq");
    CHECK(ra_apply_rotary_emb(x, x + 4, c, x + 5, 1, 1, 2, 2, 2) == RA_ERR_ARGUMENT,
          "freqs_sin inside xk");
    CHECK(x[0] == 1.0f && x[1] == 0.0f, "a refused rotation wrote");
    CHECK(ra_apply_rotary_emb(x, x + 4, c, c, 1, 1, 2, 2, 2) == RA_OK, "one table twice");
    CHECK(ra_repeat_kv(x, x, 1, 1, 1, 2, 2) == RA_ERR_ARGUMENT, "repeat_kv in place");
    CHECK(ra_repeat_kv(x + 1, x, 1, 1, 1, 2, 2) == RA_ERR_ARGUMENT, "repeat_kv overlapping");
    CHECK(ra_repeat_kv(x + 2, x, 1, 1, 1, 2, 1) == RA_OK, "repeat_kv into the next row");

    CHECK(ra_precompute_freqs(tab, tab, 4, 2, 1e4) == RA_ERR_ARGUMENT, "freqs cos == sin");
    CHECK(ra_precompute_freqs(tab, tab + 3, 4, 2, 1e4) == RA_ERR_ARGUMENT, "freqs overlapping");
    CHECK(ra_precompute_freqs(tab, tab + 4, 4, 2, 1e4) == RA_OK, "freqs side by side");

    ra_rope *rope = NULL, *mrope = NULL, *axial = NULL;
    ra_rope_config cfg = ra_rope_config_hf(8);
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    cfg.mrope_section[0] = 2, cfg.mrope_section[1] = cfg.mrope_section[2] = 1;
    CHECK(ra_rope_create(&mrope, &cfg) == RA_OK, "create mrope");
    cfg = ra_rope_config_hf(8);
    cfg.axial = RA_AXIAL_SHARED;
    CHECK(ra_rope_create(&axial, &cfg) == RA_OK, "create axial");
    if (!rope || !mrope || !axial) return;
    int64_t pos[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(ra_rope_table(rope, tab, tab, pos, 2) == RA_ERR_ARGUMENT, "table cos == sin");
    CHECK(ra_rope_table(rope, tab, tab + 7, pos, 2) == RA_ERR_ARGUMENT, "table overlapping");
    CHECK(ra_rope_table(rope, (float *)pos, tab, pos, 2) == RA_ERR_ARGUMENT,
          "table cos over positions");
    CHECK(ra_rope_table(rope, tab, (float *)(pos + 1), pos, 2) == RA_ERR_ARGUMENT,
          "table sin over positions");
    CHECK(ra_rope_table(rope, tab, tab + 8, pos, 2) == RA_OK, "table side by side");
    CHECK(ra_rope_table_mrope(mrope, tab, tab, pos, 2) == RA_ERR_ARGUMENT, "mrope cos == sin");
    CHECK(ra_rope_table_mrope(mrope, tab, (float *)(pos + 5), pos, 2) == RA_ERR_ARGUMENT,
          "mrope sin over the third component");
    CHECK(ra_rope_table_axial(axial, tab, tab + 4, pos, 2) == RA_ERR_ARGUMENT, "axial overlapping");
    CHECK(ra_rope_table_axial(axial, (float *)(pos + 3), tab, pos, 2) == RA_ERR_ARGUMENT,
          "axial cos over the columns");
    CHECK(pos[3] == 4 && pos[5] == 6, "a refused table wrote");

    /* ra_rope_apply reads the positions while it writes out: an out over
     * any of their arrays is refused (rotated bits read back as positions
     * crashed it, through Python's apply_rotary(x, ids, out=...) too). */
    int64_t grid[16];
    float xs[16];
    for (int i = 0; i < 16; i++) grid[i] = i % 4, xs[i] = 1.0f;
    grid[14] = 0, grid[15] = 2; /* cu_seqlens {0, 2}; starts {0, 2} for a batch of 2 */
    ra_tensor xt = ra_tensor_4d(xs, RA_F32, 1, 2, 1, 8), xb = ra_tensor_4d(xs, RA_F32, 2, 1, 1, 8);
    ra_tensor over = ra_tensor_4d((float *)(grid + 8), RA_F32, 1, 2, 1, 8); /* grid[8..15] */
    ra_tensor over_b = ra_tensor_4d((float *)(grid + 8), RA_F32, 2, 1, 1, 8);
    ra_positions by_ids = {.struct_size = sizeof by_ids, .ids = grid + 9};
    ra_positions by_mrope = {.struct_size = sizeof by_mrope, .mrope_ids = grid + 4};
    ra_positions by_axial = {.struct_size = sizeof by_axial, .axial_ids = grid + 6};
    ra_positions by_starts = {.struct_size = sizeof by_starts, .starts = grid + 14};
    ra_positions by_cu = {.struct_size = sizeof by_cu, .cu_seqlens = grid + 14, .n_seqs = 1};
    CHECK(ra_rope_apply(NULL, rope, &over, &xt, &by_ids, RA_FORWARD) == RA_ERR_ARGUMENT,
          "out over the ids");
    CHECK(ra_rope_apply(NULL, mrope, &over, &xt, &by_mrope, RA_FORWARD) == RA_ERR_ARGUMENT,
          "out over the mrope ids");
    CHECK(ra_rope_apply(NULL, axial, &over, &xt, &by_axial, RA_FORWARD) == RA_ERR_ARGUMENT,
          "out over the axial ids");
    CHECK(ra_rope_apply(NULL, rope, &over_b, &xb, &by_starts, RA_FORWARD) == RA_ERR_ARGUMENT,
          "out over the starts");
    CHECK(ra_rope_apply(NULL, rope, &over, &xt, &by_cu, RA_FORWARD) == RA_ERR_ARGUMENT,
          "out over cu_seqlens");
    CHECK(grid[8] == 0 && grid[9] == 1 && grid[15] == 2, "a refused rotation wrote");
    ra_rope_destroy(rope);
    ra_rope_destroy(mrope);
    ra_rope_destroy(axial);
}

/* yarn's and longrope's parameters that 0 leaves to their defaults: NaN is
 * no "0", it is refused (it read as beta_fast 32, a derived attention
 * factor). */
static void test_nan_parameters(void)
{
    ra_rope *rope = NULL;
    ra_rope_config cfg = ra_rope_config_hf(8);
    cfg.type = RA_ROPE_YARN;
    cfg.factor = 4;
    cfg.original_max_position_embeddings = 1024;
    double *fields[3] = {&cfg.beta_fast, &cfg.beta_slow, &cfg.attention_factor};
    for (int i = 0; i < 3; i++) {
        *fields[i] = NAN;
        CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT && !rope, "yarn field %d NaN", i);
        *fields[i] = 0;
    }
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "yarn");
    ra_rope_destroy(rope);
    rope = NULL;
    double f[2] = {1, 2};
    cfg = ra_rope_config_hf(4);
    cfg.type = RA_ROPE_LONGROPE;
    cfg.original_max_position_embeddings = 1024;
    cfg.factor = 4;
    cfg.short_factor = cfg.long_factor = f;
    cfg.attention_factor = NAN;
    CHECK(ra_rope_create(&rope, &cfg) == RA_ERR_ARGUMENT && !rope, "longrope attention_factor NaN");
    cfg.attention_factor = 0;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "longrope");
    ra_rope_destroy(rope);
}

/* f16 and bf16 storage: the result is the f32 rotation of the widened
 * input, rounded once (the seed's .float() ... .type_as()). */
static void test_dtype_rounding(void)
{
    const int64_t n = 3 * 5 * 2 * 64;
    ra_rope_config cfg = ra_rope_config_default(64);
    cfg.layout = RA_LAYOUT_HALF;
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    float x[3 * 5 * 2 * 64], wide[3 * 5 * 2 * 64];
    uint16_t h[3 * 5 * 2 * 64], want[3 * 5 * 2 * 64];
    ra_test_fill(x, n, 21);
    ra_positions p = {.struct_size = sizeof p, .start = 1000};
    for (int dt = RA_F16; dt <= RA_BF16; dt++) {
        ra_convert(h, (ra_dtype)dt, x, RA_F32, n);
        ra_convert(wide, RA_F32, h, (ra_dtype)dt, n);
        ra_tensor tw = ra_tensor_4d(wide, RA_F32, 3, 5, 2, 64), th = ra_tensor_4d(h, (ra_dtype)dt, 3, 5, 2, 64);
        CHECK(ra_rope_apply(NULL, rope, &tw, &tw, &p, RA_FORWARD) == RA_OK, "f32");
        ra_convert(want, (ra_dtype)dt, wide, RA_F32, n);
        CHECK(ra_rope_apply(NULL, rope, &th, &th, &p, RA_FORWARD) == RA_OK, "16-bit");
        CHECK(memcmp(h, want, sizeof h) == 0, "dtype %d: not the f32 result rounded once", dt);
    }
    ra_rope_destroy(rope);
}

/* RA_INVERSE rotates by minus the angle: checked against long double at
 * random positions, where a sign error in sin cannot hide. */
static void test_inverse_sign(void)
{
    const int64_t d = 16;
    ra_rope_config cfg = ra_rope_config_default(d);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "create");
    int64_t ids[7] = {5, 77, 3, 1234567, 9, 40000, 2};
    float x[7 * 16], y[7 * 16];
    ra_test_fill(x, 7 * 16, 5);
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, 7, 1, d), ty = ra_tensor_4d(y, RA_F32, 1, 7, 1, d);
    ra_positions p = {.struct_size = sizeof p, .ids = ids};
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_INVERSE) == RA_OK, "inverse");
    double worst = 0;
    for (int t = 0; t < 7; t++)
        for (int i = 0; i < d / 2; i++) {
            long double c, s;
            exact_angle(ids[t], i, d, 10000.0, &c, &s);
            long double a = x[t * d + 2 * i], b = x[t * d + 2 * i + 1];
            worst = fmax(worst, fabsl(y[t * d + 2 * i] - (a * c + b * s)));
            worst = fmax(worst, fabsl(y[t * d + 2 * i + 1] - (-a * s + b * c)));
        }
    CHECK(worst < 1e-6, "inverse differs from rotation by -angle: %.3g", worst);
    ra_rope_destroy(rope);
}

/* The cases that reach the SIMD kernels, run on every path (harness.h); the
 * others (tables, conversions, Philox, refusals) run once. */
static void simd_cases(void)
{
    RUN(test_fast_matches_reference);
    RUN(test_mrope_fast_matches_reference);
    RUN(test_axial_fast_matches_reference);
    RUN(test_alignments);
    RUN(test_rounding_sweep);
    RUN(test_properties);
    RUN(test_layouts_agree);
    RUN(test_config_hf);
    RUN(test_seed_functions);
    RUN(test_partial_rotary);
    RUN(test_rotating_pairs);
    RUN(test_positions);
    RUN(test_length_bound);
    RUN(test_aliasing_refused);
    RUN(test_dtype_rounding);
    RUN(test_inverse_sign);
}

int main(void)
{
    RUN(test_freqs_precision);
    RUN(test_conversions);
    RUN(test_philox);
    RUN(test_errors);
    RUN(test_rope_types);
    RUN(test_permute_dtypes);
    RUN(test_theta_normal);
    RUN(test_pointer_aliasing);
    RUN(test_nan_parameters);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("rope");
}
