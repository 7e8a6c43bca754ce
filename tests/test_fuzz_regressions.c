/*
 * test_fuzz_regressions.c — the C API inputs on which the fuzzers (fuzz/)
 * found a broken promise, each fixed in the library and kept here so that
 * it stays fixed.  The file readers' findings are in test_io.c.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "rope_internal.h"
#include "ropeattn.h"

/* ra_rope_create must refuse c with RA_ERR_ARGUMENT and leave *out NULL. */
static void expect_refused(const ra_rope_config *c, const char *what)
{
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, c);
    CHECK(st == RA_ERR_ARGUMENT && rope == NULL, "%s: status %d", what, (int)st);
    ra_rope_destroy(rope);
}

/* A rope whose parameters make the frequencies non-finite, the angles
 * overflow before RA_MAX_POSITION, or the attention factor not a positive
 * float32, used to be accepted and give tables of NaN or Inf; it is
 * refused with RA_ERR_ARGUMENT. */
static void test_rope_nonfinite_frequencies(void)
{
    /* fuzz_config: yarn with rope_theta 1 divides by ln(1) = 0 */
    ra_rope_config c = ra_rope_config_default(14);
    c.type = RA_ROPE_YARN;
    c.theta = 1.0;
    c.factor = 40;
    c.original_max_position_embeddings = 4096;
    expect_refused(&c, "yarn, theta 1");
    /* fuzz_rope: linear with a subnormal factor makes theta_0 infinite */
    c = ra_rope_config_default(8);
    c.type = RA_ROPE_LINEAR;
    c.factor = 1e-320;
    expect_refused(&c, "linear, factor 1e-320");
    /* a tiny theta: theta_31 ~ 2e300, finite, but 2^32 theta_31 is not */
    c = ra_rope_config_default(64);
    c.theta = 1e-310;
    expect_refused(&c, "theta 1e-310");
    /* yarn's derived attention factor below zero */
    c = ra_rope_config_default(64);
    c.type = RA_ROPE_YARN;
    c.factor = 40;
    c.original_max_position_embeddings = 4096;
    c.mscale = -10;
    c.mscale_all_dim = 1;
    expect_refused(&c, "yarn, mscale -10");
    /* fuzz_config: yarn's derived attention factor beyond float32 made
     * every cos and sin infinite */
    c.mscale = 1.4e58;
    expect_refused(&c, "yarn, mscale 1.4e58");
    c.mscale = 1;
    c.attention_factor = 1e39;
    expect_refused(&c, "yarn, attention_factor 1e39");
    c.attention_factor = 0;
    /* the same types with sane numbers still work, to the last position */
    c.mscale = 1;
    c.theta = 1e-3;
    ra_rope *rope = NULL;
    CHECK(ra_rope_create(&rope, &c) == RA_OK, "yarn, theta 1e-3");
    float cos[32], sin[32];
    int64_t last = RA_MAX_POSITION;
    if (rope == NULL) return;
    CHECK(ra_rope_table(rope, cos, sin, &last, 1) == RA_OK, "table");
    for (int i = 0; i < 32; i++) CHECK(isfinite(cos[i]) && isfinite(sin[i]), "pair %d", i);
    ra_rope_destroy(rope);
}

/* fuzz_kvcache: with n_query[b] < T, query row t of sequence b is the token
 * in slot length[b] - n_query[b] + t (the header said length[b] - T + t,
 * a slot before the first for short sequences), and rows t >= n_query[b]
 * of out are left as they were.  B 2, lengths 2 and 4, T 3, n_query {1, 3}. */
static void test_decode_short_rows(void)
{
    enum { B = 2, S = 4, D = 4, T = 3 };
    ra_kv_cache *cache;
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    CHECK(ra_kv_cache_create(&cache, B, 8, 1, D, RA_F32) == RA_OK, "cache");
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    float k[B * S * D], v[B * S * D], q[B * T * D], out[B * T * D];
    ra_test_fill(k, B * S * D, 1);
    ra_test_fill(v, B * S * D, 2);
    ra_test_fill(q, B * T * D, 3);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, B, S, 1, D), tv = ra_tensor_4d(v, RA_F32, B, S, 1, D);
    ra_positions pos = {.struct_size = sizeof pos};
    int64_t n_new[B] = {2, 4}, n_query[B] = {1, 3};
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &pos, n_new) == RA_OK, "append");
    for (int i = 0; i < B * T * D; i++) out[i] = 99.0f;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, 1, D), to = ra_tensor_4d(out, RA_F32, B, T, 1, D);
    CHECK(ra_attention_decode(NULL, cache, &to, &tq, n_query, NULL) == RA_OK, "decode");
    ra_tensor kc, vc;
    ra_kv_cache_views(cache, &kc, &vc);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *o = out + (b * T + t) * D;
            if (t >= n_query[b]) {
                for (int d = 0; d < D; d++) CHECK(o[d] == 99.0f, "row %d of %d written", t, b);
                continue;
            }
            int64_t last = n_new[b] - n_query[b] + t; /* the query's own slot */
            double w[S], sum = 0, want[D] = {0};
            for (int j = 0; j <= last; j++) {
                const float *kj = (const float *)kc.data + b * kc.stride[0] + j * kc.stride[1];
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)q[(b * T + t) * D + d] * kj[d];
                sum += (w[j] = exp(dot / sqrt((double)D)));
            }
            for (int j = 0; j <= last; j++)
                for (int d = 0; d < D; d++)
                    want[d] += w[j] / sum *
                               ((const float *)vc.data)[b * vc.stride[0] + j * vc.stride[1] + d];
            for (int d = 0; d < D; d++)
                CHECK(fabs(o[d] - want[d]) < 1e-5, "sequence %d row %d: %g, expected %g", b, t,
                      o[d], want[d]);
        }
    ra_rope_destroy(rope);
    ra_kv_cache_destroy(cache);
}

/* fuzz_kvcache: an append from one fused QKV buffer (q, k and v heads side
 * by side in each token's row) was refused with RA_ERR_ARGUMENT, since the
 * views' address ranges overlap, while k and v sharing every element (k
 * rotated in place, so v cached rotated) were accepted.  Now the fused
 * append gives what separate buffers give, and shared elements are refused. */
static void test_append_fused_qkv(void)
{
    enum { B = 2, S = 3, H = 4, HKV = 2, D = 8, ROW = (H + 2 * HKV) * D + 3 };
    float fused[B * S * ROW], q[B * S * H * D], k[B * S * HKV * D], v[B * S * HKV * D];
    ra_test_fill(fused, B * S * ROW, 9);
    for (int t = 0; t < B * S; t++) {
        memcpy(q + t * H * D, fused + t * ROW, sizeof(float) * H * D);
        memcpy(k + t * HKV * D, fused + t * ROW + H * D, sizeof(float) * HKV * D);
        memcpy(v + t * HKV * D, fused + t * ROW + (H + HKV) * D, sizeof(float) * HKV * D);
    }
    ra_tensor fq = {fused, RA_F32, {B, S, H, D}, {S * ROW, ROW, D, 1}};
    ra_tensor fk = {fused + H * D, RA_F32, {B, S, HKV, D}, {S * ROW, ROW, D, 1}};
    ra_tensor fv = {fused + (H + HKV) * D, RA_F32, {B, S, HKV, D}, {S * ROW, ROW, D, 1}};
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D);
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    ra_kv_cache *c1 = NULL, *c2 = NULL;
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    CHECK(ra_kv_cache_create(&c1, B, 4, HKV, D, RA_F32) == RA_OK &&
          ra_kv_cache_create(&c2, B, 4, HKV, D, RA_F32) == RA_OK, "caches");
    ra_positions p = {.struct_size = sizeof p, .start = 5};
    CHECK(ra_kv_cache_append(NULL, c1, rope, &fq, &fk, &fv, &p, NULL) == RA_OK, "fused append");
    CHECK(ra_kv_cache_append(NULL, c2, rope, &tq, &tk, &tv, &p, NULL) == RA_OK, "separate");
    ra_tensor k1, v1, k2, v2;
    ra_kv_cache_views(c1, &k1, &v1);
    ra_kv_cache_views(c2, &k2, &v2);
    size_t bytes = sizeof(float) * S * D; /* the slots written, of one kv head */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HKV; h++) {
            int64_t at = b * k1.stride[0] + h * k1.stride[2]; /* the views' strides are equal */
            CHECK(memcmp((float *)k1.data + at, (float *)k2.data + at, bytes) == 0 &&
                      memcmp((float *)v1.data + at, (float *)v2.data + at, bytes) == 0,
                  "the fused append cached other values in sequence %d, kv head %d", b, h);
        }
    int same_q = 1;
    for (int t = 0; t < B * S; t++)
        same_q &= memcmp(fused + t * ROW, q + t * H * D, sizeof(float) * H * D) == 0;
    CHECK(same_q, "q rotated differently in the fused buffer");
    ra_kv_cache_reset(c1);
    CHECK(ra_kv_cache_append(NULL, c1, rope, NULL, &tk, &tk, &p, NULL) == RA_ERR_ARGUMENT,
          "k and v the same elements");
    CHECK(ra_kv_cache_append(NULL, c1, rope, &fk, &fk, &fv, &p, NULL) == RA_ERR_ARGUMENT,
          "q and k the same elements");
    CHECK(ra_kv_cache_length(c1, 0) == 0, "a refused append moved the cache");
    ra_kv_cache_destroy(c1);
    ra_kv_cache_destroy(c2);
    ra_rope_destroy(rope);
}

/* ra_tensors_share_elements against the element sets themselves, on small
 * views at random offsets: exact for equal strides, never a false "no". */
static void test_share_elements(void)
{
    uint64_t r = 12345;
#define NEXT(n) (r = r * 6364136223846793005ull + 1442695040888963407ull, (int64_t)((r >> 33) % (n)))
    float base[512];
    int exact_yes = 0, exact_no = 0;
    for (int trial = 0; trial < 20000; trial++) {
        ra_tensor t[2];
        int same = NEXT(4) != 0;
        for (int v = 0; v < 2; v++) {
            t[v].dtype = RA_F32;
            for (int d = 0; d < 4; d++) t[v].shape[d] = 1 + NEXT(d == 3 ? 4 : 3);
            for (int d = 0; d < 3; d++) t[v].stride[d] = v && same ? t[0].stride[d] : NEXT(14);
            t[v].stride[3] = 1;
            t[v].data = base + NEXT(40);
        }
        unsigned char seen[512] = {0};
        int meet = 0;
        for (int v = 0; v < 2; v++)
            for (int64_t i0 = 0; i0 < t[v].shape[0]; i0++)
                for (int64_t i1 = 0; i1 < t[v].shape[1]; i1++)
                    for (int64_t i2 = 0; i2 < t[v].shape[2]; i2++)
                        for (int64_t i3 = 0; i3 < t[v].shape[3]; i3++) {
                            int64_t e = (float *)t[v].data - base + i0 * t[v].stride[0] +
                                        i1 * t[v].stride[1] + i2 * t[v].stride[2] + i3;
                            if (v == 0) seen[e] = 1;
                            else meet |= seen[e];
                        }
        int got = ra_tensors_share_elements(&t[0], &t[1]);
        if (same) {
            CHECK(got == meet, "trial %d: %d, the elements say %d", trial, got, meet);
            exact_yes += meet, exact_no += !meet;
        } else {
            CHECK(got || !meet, "trial %d: said no, but they share an element", trial);
        }
    }
#undef NEXT
    CHECK(exact_yes > 1000 && exact_no > 1000, "cases: %d sharing, %d not", exact_yes, exact_no);
}

/* out of S = 3 tokens, one head of D = 2, with options o. */
static ra_status attend3(float out[6], const ra_attention_options *o)
{
    static float q[6] = {0.01f, 0.02f, -0.03f, 0.01f, 0.02f, 0.05f};
    static float k[6] = {0.5f, -0.25f, 0.125f, 0.75f, -0.5f, 0.25f};
    static float v[6] = {0, 1, 1, 0, 2, -1};
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 3, 1, 2), tk = ra_tensor_4d(k, RA_F32, 1, 3, 1, 2);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, 3, 1, 2), to = ra_tensor_4d(out, RA_F32, 1, 3, 1, 2);
    return ra_attention(NULL, &to, &tq, &tk, &tv, o);
}

/* fuzz_attention: a chunk of INT64_MAX with leading padding overflowed the
 * chunk's start for the padding queries (UBSan); a soft-cap of FLT_MAX
 * moved the flash path's logits (vtanh's x p subnormal, 1 / c subnormal):
 * it must leave out as without it, to float32 rounding. */
static void test_mask_extremes(void)
{
    static const uint8_t padding[3] = {0, 0, 1};
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        ra_attention_options plain = ra_attention_options_init(), o = plain;
        plain.path = o.path = (ra_attention_path)path;
        float a[6], b[6];
        o.softcap = FLT_MAX;
        CHECK(attend3(a, &plain) == RA_OK && attend3(b, &o) == RA_OK, "path %d", path);
        double worst = 0;
        for (int i = 0; i < 6; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
        CHECK(worst <= 1e-6, "path %d: softcap FLT_MAX moves out by %.3g", path, worst);
        o = plain;
        o.chunk = INT64_MAX;
        o.padding_mask = padding;
        CHECK(attend3(b, &o) == RA_OK && b[0] == 0 && b[3] == 0 && b[4] == 2 && b[5] == -1,
              "path %d: chunk INT64_MAX with padding", path);
    }
}

/* The cases that reach the SIMD kernels, run on every path (harness.h). */
/* fuzz_attention: K and V whose rows all lie at one place (stride 0 on the
 * sequence axis) in a short block (the decode kernel's shape) divided the
 * look-ahead distance by a row step of 0 bytes; such views stay on the
 * flash tiles: every key the same row, out is V's row. */
static void test_short_block_zero_row_stride(void)
{
    enum { SK = 4, D = 64 };
    float q[D], kv[D], out[D], ref[D];
    ra_test_fill(q, D, 7);
    ra_test_fill(kv, D, 8);
    const ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 1, 1, D);
    ra_tensor tk = ra_tensor_4d(kv, RA_F32, 1, SK, 1, D);
    tk.stride[1] = 0;
    for (int path = 0; path < 2; path++) {
        ra_attention_options o = ra_attention_options_init();
        o.path = path ? RA_PATH_FLASH : RA_PATH_REFERENCE;
        const ra_tensor to = ra_tensor_4d(path ? out : ref, RA_F32, 1, 1, 1, D);
        CHECK(ra_attention(NULL, &to, &tq, &tk, &tk, &o) == RA_OK, "%s", ra_last_error());
    }
    double worst = 0;
    for (int d = 0; d < D; d++) {
        CHECK(fabsf(ref[d] - kv[d]) <= 1e-6f * (1 + fabsf(kv[d])), "reference: out[%d] %g, v %g",
              d, ref[d], kv[d]);
        worst = fmax(worst, fabs((double)out[d] - ref[d]));
    }
    CHECK(worst <= 1e-6, "flash off the reference by %.3g", worst);
}

static void simd_cases(void)
{
    RUN(test_decode_short_rows);
    RUN(test_append_fused_qkv);
    RUN(test_mask_extremes);
    RUN(test_short_block_zero_row_stride);
}

int main(void)
{
    RUN(test_rope_nonfinite_frequencies);
    RUN(test_share_elements);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("fuzz_regressions");
}
