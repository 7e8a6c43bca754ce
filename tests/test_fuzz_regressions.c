/*
 * test_fuzz_regressions.c — the C API inputs on which the fuzzers (fuzz/)
 * found a broken promise, each fixed in the library and kept here so that
 * it stays fixed.  The file readers' findings are in test_io.c.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* ra_rope_create must refuse c with RA_ERR_ARGUMENT and leave *out NULL. */
static void expect_refused(const ra_rope_config *c, const char *what)
{
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, c);
    CHECK(st == RA_ERR_ARGUMENT && rope == NULL, "%s: status %d", what, (int)st);
    ra_rope_destroy(rope);
}

/* A rope whose parameters make the frequencies or the attention factor
 * non-finite, or the angles overflow before RA_MAX_POSITION, used to be
 * accepted and give tables of NaN; it is refused with RA_ERR_ARGUMENT. */
static void test_rope_nonfinite_frequencies(void)
{
    /* fuzz_config: yarn with rope_theta 1 divides by ln(1) = 0 */
    ra_rope_config c = ra_rope_config_default(14);
    c.type = RA_ROPE_YARN;
    c.theta = 1.0;
    c.scaling.factor = 40;
    c.scaling.original_max_position_embeddings = 4096;
    expect_refused(&c, "yarn, theta 1");
    /* fuzz_rope: linear with a subnormal factor makes theta_0 infinite */
    c = ra_rope_config_default(8);
    c.type = RA_ROPE_LINEAR;
    c.scaling.factor = 1e-320;
    expect_refused(&c, "linear, factor 1e-320");
    /* a tiny theta: theta_31 ~ 2e300, finite, but 2^32 theta_31 is not */
    c = ra_rope_config_default(64);
    c.theta = 1e-310;
    expect_refused(&c, "theta 1e-310");
    /* yarn's derived attention factor below zero */
    c = ra_rope_config_default(64);
    c.type = RA_ROPE_YARN;
    c.scaling.factor = 40;
    c.scaling.original_max_position_embeddings = 4096;
    c.scaling.mscale = -10;
    c.scaling.mscale_all_dim = 1;
    expect_refused(&c, "yarn, mscale -10");
    /* the same types with sane numbers still work, to the last position */
    c.scaling.mscale = 1;
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
    ra_positions pos = {0};
    int64_t n_new[B] = {2, 4}, n_query[B] = {1, 3};
    CHECK(ra_kv_cache_append(cache, NULL, rope, NULL, &tk, &tv, &pos, n_new) == RA_OK, "append");
    for (int i = 0; i < B * T * D; i++) out[i] = 99.0f;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, 1, D), to = ra_tensor_4d(out, RA_F32, B, T, 1, D);
    CHECK(ra_attention_decode(NULL, cache, &to, &tq, n_query) == RA_OK, "decode");
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

int main(void)
{
    RUN(test_rope_nonfinite_frequencies);
    RUN(test_decode_short_rows);
    return ra_test_summary("fuzz_regressions");
}
