/*
 * test_mrope.c — M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): the rotation on
 * 3-D positions against a float64 transcription of transformers' code, text
 * positions reducing to the plain rope bit for bit, the inverse, the tables,
 * the layer (forward, KV cache, training tape) with 3-D ids, and the
 * refusals.  The bit-exact fast path against the reference is rope_exact.h's
 * test_mrope_fast_matches_reference (test_rope.c, every ISA).
 *
 * Positions are those of transformers' get_rope_index for 3 text tokens, an
 * image of t x h x w = 2 x 3 x 2 patches (after the spatial merge) and 2
 * text tokens: the image's (t, h, w) grid offset by the text before it,
 * the text after it from the grid's largest position + 1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { TEXT0 = 3, GT = 2, GH = 3, GW = 2, TEXT1 = 2, S = TEXT0 + GT * GH * GW + TEXT1 };

/* ids [3, S]: get_rope_index's positions for the sequence above, from
 * start (a sequence's earlier tokens). */
static void image_positions(int64_t *ids, int64_t start)
{
    int64_t s = 0;
    for (; s < TEXT0; s++) ids[s] = ids[S + s] = ids[2 * S + s] = start + s;
    for (int64_t t = 0; t < GT; t++)
        for (int64_t h = 0; h < GH; h++)
            for (int64_t w = 0; w < GW; w++, s++) {
                ids[s] = start + TEXT0 + t;
                ids[S + s] = start + TEXT0 + h;
                ids[2 * S + s] = start + TEXT0 + w;
            }
    const int64_t next = start + TEXT0 + (GH > GW ? (GH > GT ? GH : GT) : (GW > GT ? GW : GT));
    for (int64_t k = 0; k < TEXT1; k++, s++) ids[s] = ids[S + s] = ids[2 * S + s] = next + k;
}

/* transformers in float64, one token and head (half layout: rotate_half):
 *   freqs[c][i] = pos[c] * inv_freq[i]
 *   chunked (Qwen2-VL's apply_multimodal_rotary_pos_emb): emb_c = cat(freqs[c],
 *     freqs[c]); cos = cat(m[k % 3] for k, m in enumerate(cos.split(section * 2)))
 *   interleaved (Qwen3-VL's apply_interleaved_mrope): freqs_t = freqs[0];
 *     freqs_t[1 : 3 s1 : 3] = freqs[1][...]; freqs_t[2 : 3 s2 : 3] = freqs[2][...];
 *     emb = cat(freqs_t, freqs_t)
 *   y = x * cos + rotate_half(x) * sin
 *   x, y: [D] */
static void transformers_mrope(double *y, const float *x, const int64_t pos[3], int64_t d,
                               double theta, const int64_t section[3], int interleaved)
{
    double emb[1024];
    const int64_t half = d / 2;
    if (interleaved) {
        for (int64_t i = 0; i < half; i++) {
            double inv = 1.0 / pow(theta, (double)(2 * i) / (double)d);
            int c = 0;
            if (i % 3 == 1 && i < 3 * section[1]) c = 1;
            if (i % 3 == 2 && i < 3 * section[2]) c = 2;
            emb[i] = emb[half + i] = (double)pos[c] * inv;
        }
    } else {
        const int64_t split[6] = {section[0], section[1], section[2],
                                  section[0], section[1], section[2]};
        int64_t j = 0;
        for (int k = 0; k < 6; k++)
            for (int64_t e = 0; e < split[k]; e++, j++) {
                int64_t i = j % half; /* emb_c's frequency at feature j */
                emb[j] = (double)pos[k % 3] * (1.0 / pow(theta, (double)(2 * i) / (double)d));
            }
    }
    for (int64_t j = 0; j < d; j++) {
        double rot = j < half ? -(double)x[j + half] : (double)x[j - half];
        y[j] = (double)x[j] * cos(emb[j]) + rot * sin(emb[j]);
    }
}

typedef struct mrope_case {
    const char *name;
    int64_t d;
    double theta;
    int64_t section[3];
    int interleaved;
} mrope_case;

static const mrope_case cases[] = {
    {"qwen2_vl", 128, 1e6, {16, 24, 24}, 0},
    {"qwen3_vl", 128, 5e6, {24, 20, 20}, 1},
    {"small chunked", 16, 1e4, {2, 3, 3}, 0},
    {"small interleaved", 16, 1e4, {4, 2, 2}, 1},
};

static ra_rope *mrope(const mrope_case *c, ra_layout layout, int64_t table_size)
{
    ra_rope_config cfg = ra_rope_config_default(c->d);
    cfg.layout = layout;
    cfg.theta = c->theta;
    cfg.table_size = table_size;
    memcpy(cfg.mrope_section, c->section, sizeof cfg.mrope_section);
    cfg.mrope_interleaved = c->interleaved;
    ra_rope *rope = NULL;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "%s: create: %s", c->name, ra_last_error());
    return rope;
}

/* 3-D positions against transformers' float64 formulas: within 1e-6 of
 * max|x| (float32 rotation of values in [-1, 1]: ~2 ulp of 1), from table
 * rows and, past table_size 8, on-the-fly angles; f32 on [1, S, 2, D]. */
static void test_against_transformers(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int64_t start = 0; start <= 40; start += 40) {
            const mrope_case *c = &cases[ci];
            const int64_t d = c->d, heads = 2, n = S * heads * d;
            ra_rope *rope = mrope(c, RA_LAYOUT_HALF, 8);
            float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
            int64_t ids[3 * S];
            image_positions(ids, start);
            ra_test_fill(x, n, 11 + ci);
            ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, S, heads, d);
            ra_tensor ty = ra_tensor_4d(y, RA_F32, 1, S, heads, d);
            ra_positions p = ra_positions_start(0);
            p.mrope_ids = ids;
            CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK, "apply");
            double worst = 0, want[1024];
            for (int64_t s = 0; s < S; s++)
                for (int64_t h = 0; h < heads; h++) {
                    const int64_t pos[3] = {ids[s], ids[S + s], ids[2 * S + s]};
                    const int64_t at = (s * heads + h) * d;
                    transformers_mrope(want, x + at, pos, d, c->theta, c->section,
                                       c->interleaved);
                    for (int64_t j = 0; j < d; j++) worst = fmax(worst, fabs(y[at + j] - want[j]));
                }
            CHECK(worst <= 1e-6, "%s from %lld: %.3g from transformers' float64", c->name,
                  (long long)start, worst);
            free(x);
            free(y);
            ra_rope_destroy(rope);
        }
}

/* Text positions (one position per token, or three equal components) on an
 * M-RoPE rope are the plain rope's, bit for bit, in both layouts; so are
 * its tables. */
static void test_text_is_plain_rope(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int layout = 0; layout < 2; layout++) {
            const mrope_case *c = &cases[ci];
            const int64_t d = c->d, n = 2 * S * d;
            ra_rope *m = mrope(c, (ra_layout)layout, 16), *plain;
            ra_rope_config cfg = *ra_rope_get_config(m);
            memset(cfg.mrope_section, 0, sizeof cfg.mrope_section);
            cfg.mrope_interleaved = 0;
            CHECK(ra_rope_create(&plain, &cfg) == RA_OK, "plain");
            float *x = malloc(sizeof(float) * n), *a = malloc(sizeof(float) * n);
            float *b = malloc(sizeof(float) * n), *e = malloc(sizeof(float) * n);
            ra_test_fill(x, n, 3);
            int64_t ids[2 * S], ids3[3 * 2 * S];
            for (int64_t t = 0; t < 2 * S; t++)
                ids[t] = ids3[t] = ids3[2 * S + t] = ids3[4 * S + t] = (t * 7) % 29;
            ra_tensor tx = ra_tensor_4d(x, RA_F32, 2, S, 1, d);
            ra_tensor ta = ra_tensor_4d(a, RA_F32, 2, S, 1, d);
            ra_tensor tb = ra_tensor_4d(b, RA_F32, 2, S, 1, d);
            ra_tensor te = ra_tensor_4d(e, RA_F32, 2, S, 1, d);
            ra_positions p1 = ra_positions_start(0), p3 = ra_positions_start(0);
            p1.ids = ids;
            p3.mrope_ids = ids3;
            CHECK(ra_rope_apply(NULL, plain, &ta, &tx, &p1, RA_FORWARD) == RA_OK &&
                      ra_rope_apply(NULL, m, &tb, &tx, &p1, RA_FORWARD) == RA_OK &&
                      ra_rope_apply(NULL, m, &te, &tx, &p3, RA_FORWARD) == RA_OK, "apply");
            CHECK(memcmp(a, b, sizeof(float) * n) == 0, "%s: 1-D ids differ", c->name);
            CHECK(memcmp(a, e, sizeof(float) * n) == 0, "%s: equal 3-D ids differ", c->name);
            ra_positions start = ra_positions_start(30); /* past the table */
            CHECK(ra_rope_apply(NULL, plain, &ta, &tx, &start, RA_INVERSE) == RA_OK &&
                      ra_rope_apply(NULL, m, &tb, &tx, &start, RA_INVERSE) == RA_OK &&
                      memcmp(a, b, sizeof(float) * n) == 0, "%s: start 30 differs", c->name);

            const int64_t pairs = d / 2;
            float *c1 = malloc(sizeof(float) * 2 * S * pairs), *s1 = malloc(sizeof(float) * 2 * S * pairs);
            float *c3 = malloc(sizeof(float) * 2 * S * pairs), *s3 = malloc(sizeof(float) * 2 * S * pairs);
            CHECK(ra_rope_table(plain, c1, s1, ids, 2 * S) == RA_OK &&
                      ra_rope_table_mrope(m, c3, s3, ids3, 2 * S) == RA_OK, "tables");
            CHECK(memcmp(c1, c3, sizeof(float) * 2 * S * pairs) == 0 &&
                      memcmp(s1, s3, sizeof(float) * 2 * S * pairs) == 0,
                  "%s: text tables differ", c->name);
            CHECK(ra_rope_table(m, c3, s3, ids, 2 * S) == RA_OK &&
                      memcmp(c1, c3, sizeof(float) * 2 * S * pairs) == 0,
                  "%s: ra_rope_table of an M-RoPE rope is not the plain table", c->name);
            free(c1); free(s1); free(c3); free(s3);
            free(x); free(a); free(b); free(e);
            ra_rope_destroy(m);
            ra_rope_destroy(plain);
        }
}

/* ra_rope_table_mrope: entry (t, i) is the plain table's at pair i of the
 * position of the component pair i takes (from the float64 transcription's
 * rule: its frequency's angle), inside and past table_size 4; and applying
 * the rope is x rotated by those entries. */
static void test_tables(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const mrope_case *c = &cases[ci];
        const int64_t d = c->d, pairs = d / 2;
        ra_rope *m = mrope(c, RA_LAYOUT_HALF, 4);
        int64_t ids[3 * S];
        image_positions(ids, 1);
        float *cs = malloc(sizeof(float) * S * pairs), *sn = malloc(sizeof(float) * S * pairs);
        float *pc = malloc(sizeof(float) * pairs), *ps = malloc(sizeof(float) * pairs);
        CHECK(ra_rope_table_mrope(m, cs, sn, ids, S) == RA_OK, "table");
        int bad = 0;
        for (int64_t t = 0; t < S; t++)
            for (int64_t i = 0; i < pairs; i++) {
                int k = 0;
                if (c->interleaved) k = i % 3 == 1 && i < 3 * c->section[1] ? 1
                                        : i % 3 == 2 && i < 3 * c->section[2] ? 2 : 0;
                else k = i < c->section[0] ? 0 : i < c->section[0] + c->section[1] ? 1 : 2;
                CHECK(ra_rope_table(m, pc, ps, &ids[k * S + t], 1) == RA_OK, "row");
                bad += pc[i] != cs[t * pairs + i] || ps[i] != sn[t * pairs + i];
            }
        CHECK(bad == 0, "%s: %d table entries are not their component's", c->name, bad);
        free(cs); free(sn); free(pc); free(ps);
        ra_rope_destroy(m);
    }
}

/* RA_INVERSE is the transpose at the same 3-D positions: <R x, g> = <x, R^T g>
 * to 1e-5 relative (float32 sums of 2 * S * D products), and R^T R x = x to
 * 1e-6; in both layouts, f32. */
static void test_inverse(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int layout = 0; layout < 2; layout++) {
            const mrope_case *c = &cases[ci];
            const int64_t d = c->d, n = S * 2 * d;
            ra_rope *m = mrope(c, (ra_layout)layout, 8);
            float *x = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
            float *rx = malloc(sizeof(float) * n), *rg = malloc(sizeof(float) * n);
            float *back = malloc(sizeof(float) * n);
            ra_test_fill(x, n, 21);
            ra_test_fill(g, n, 22);
            int64_t ids[3 * S];
            image_positions(ids, 5);
            ra_positions p = ra_positions_start(0);
            p.mrope_ids = ids;
            ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, S, 2, d), tg = ra_tensor_4d(g, RA_F32, 1, S, 2, d);
            ra_tensor trx = ra_tensor_4d(rx, RA_F32, 1, S, 2, d);
            ra_tensor trg = ra_tensor_4d(rg, RA_F32, 1, S, 2, d);
            ra_tensor tb = ra_tensor_4d(back, RA_F32, 1, S, 2, d);
            CHECK(ra_rope_apply(NULL, m, &trx, &tx, &p, RA_FORWARD) == RA_OK &&
                      ra_rope_apply(NULL, m, &trg, &tg, &p, RA_INVERSE) == RA_OK &&
                      ra_rope_apply(NULL, m, &tb, &trx, &p, RA_INVERSE) == RA_OK, "apply");
            double lhs = 0, rhs = 0, scale = 0, worst = 0;
            for (int64_t i = 0; i < n; i++) {
                lhs += (double)rx[i] * g[i];
                rhs += (double)x[i] * rg[i];
                scale += fabs((double)x[i] * g[i]);
                worst = fmax(worst, fabs(back[i] - x[i]));
            }
            CHECK(fabs(lhs - rhs) <= 1e-5 * scale, "%s layout %d: <Rx, g> %.9g, <x, R^T g> %.9g",
                  c->name, layout, lhs, rhs);
            CHECK(worst <= 1e-6, "%s layout %d: R^T R x - x %.3g", c->name, layout, worst);
            free(x); free(g); free(rx); free(rg); free(back);
            ra_rope_destroy(m);
        }
}

/* Sections that do not fit, 3-D ids where they cannot go, and ids out of
 * range are refused, naming them, before anything is written. */
static void test_refusals(void)
{
    ra_rope_config cfg = ra_rope_config_default(16); /* 8 pairs */
    const struct { int64_t s[3]; int interleaved; const char *why; } bad[] = {
        {{2, 3, 2}, 0, "sums to 7"},
        {{2, 3, 4}, 0, "sums to 9"},
        {{-1, 5, 4}, 0, "mrope_section[0] is -1"},
        {{0, 0, 0}, 1, "mrope_interleaved without mrope_section"},
        {{2, 3, 3}, 1, "needs pair 8"},  /* width at 2, 5, 8: past 8 pairs */
        {{1, 4, 3}, 1, "needs pair 10"}, /* height at 1, 4, 7, 10 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ra_rope_config c = cfg;
        memcpy(c.mrope_section, bad[i].s, sizeof c.mrope_section);
        c.mrope_interleaved = bad[i].interleaved;
        ra_rope *rope = (ra_rope *)&cfg; /* must become NULL */
        CHECK(ra_rope_create(&rope, &c) == RA_ERR_ARGUMENT && rope == NULL &&
                  strstr(ra_last_error(), bad[i].why),
              "sections %zu: %s", i, ra_last_error());
    }
    ra_rope_config partial = cfg; /* sections sum to rotary_dim / 2, not head_dim / 2 */
    partial.rotary_dim = 8;
    partial.mrope_section[0] = 2, partial.mrope_section[1] = 1, partial.mrope_section[2] = 1;
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &partial) == RA_OK, "partial rotary sections");
    ra_rope_destroy(rope);

    ra_rope *plain, *m;
    CHECK(ra_rope_create(&plain, &cfg) == RA_OK, "plain");
    cfg.mrope_section[0] = 2, cfg.mrope_section[1] = 3, cfg.mrope_section[2] = 3;
    CHECK(ra_rope_create(&m, &cfg) == RA_OK, "mrope");
    float x[4 * 16], y[4 * 16], before[4 * 16];
    ra_test_fill(x, 4 * 16, 1);
    memset(y, 0x5a, sizeof y);
    memcpy(before, y, sizeof y);
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 2, 2, 1, 16), ty = ra_tensor_4d(y, RA_F32, 2, 2, 1, 16);
    int64_t ids[12] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, one[4] = {0, 1, 2, 3};
    ra_positions p = ra_positions_start(0);
    p.mrope_ids = ids;
    CHECK(ra_rope_apply(NULL, plain, &ty, &tx, &p, RA_FORWARD) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "no mrope_section"), "3-D ids on a plain rope");
    p.ids = one;
    CHECK(ra_rope_apply(NULL, m, &ty, &tx, &p, RA_FORWARD) == RA_ERR_ARGUMENT,
          "ids and mrope_ids");
    p.ids = NULL;
    p.mrope_stride = 3;
    CHECK(ra_rope_apply(NULL, m, &ty, &tx, &p, RA_FORWARD) == RA_ERR_ARGUMENT,
          "mrope_stride below the tokens");
    p.mrope_stride = 0;
    ids[9] = -1;
    CHECK(ra_rope_apply(NULL, m, &ty, &tx, &p, RA_FORWARD) == RA_ERR_POSITION &&
              strstr(ra_last_error(), "mrope_ids[2, 1] is -1"), "negative: %s", ra_last_error());
    ids[9] = RA_MAX_POSITION + 1;
    CHECK(ra_rope_apply(NULL, m, &ty, &tx, &p, RA_FORWARD) == RA_ERR_POSITION, "past 2^32");
    CHECK(memcmp(y, before, sizeof y) == 0, "a refused call wrote y");
    ids[9] = RA_MAX_POSITION; /* the last position is fine, off the table */
    CHECK(ra_rope_apply(NULL, m, &ty, &tx, &p, RA_FORWARD) == RA_OK, "2^32");

    float c[4 * 8], s[4 * 8];
    CHECK(ra_rope_table_mrope(plain, c, s, ids, 4) == RA_ERR_ARGUMENT, "table of a plain rope");
    CHECK(ra_rope_table_mrope(m, c, s, NULL, 4) == RA_ERR_NULL, "table: NULL positions");
    CHECK(ra_rope_table_mrope(m, c, s, ids, 0) == RA_ERR_SIZE, "table: n 0");
    ids[9] = -3;
    CHECK(ra_rope_table_mrope(m, c, s, ids, 4) == RA_ERR_POSITION, "table: negative");
    ra_rope_destroy(plain);
    ra_rope_destroy(m);
}

/* A Qwen2-VL-like layer (half layout, sections [2, 3, 3], q/k/v biases
 * left out) on 3-D ids, dim 32, 4 heads of 16, 2 kv heads, B = 2:
 *   - ids with equal components = the same 1-D ids, bit for bit
 *   - the KV cache (prefill 7, then decode steps, each call its rows of a
 *     [3, B, S] array through mrope_stride) = the forward, to 1e-5 of max|y|
 *     (float32 sums in another order)
 *   - the training forward = the forward, bit for bit; the backward reads
 *     the tape's copy of the ids (the caller's changed in between gives the
 *     same gradients)
 *   - temperature tuning with sections is refused */
static void test_layer(void)
{
    enum { DIM = 32, H = 4, HKV = 2, D = 16, B = 2, T = B * S };
    static float wq[H * D * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * H * D];
    static float x[T * DIM], y[T * DIM], y2[T * DIM], dy[T * DIM];
    static float dx[2][T * DIM], dw[2][4][H * D * DIM];
    ra_test_fill(wq, sizeof wq / 4, 1);
    ra_test_fill(wk, sizeof wk / 4, 2);
    ra_test_fill(wv, sizeof wv / 4, 3);
    ra_test_fill(wo, sizeof wo / 4, 4);
    ra_test_fill(x, T * DIM, 5);
    ra_test_fill(dy, T * DIM, 6);
    ra_rope_config rc = ra_rope_config_default(D);
    rc.layout = RA_LAYOUT_HALF;
    rc.theta = 1e6;
    rc.mrope_section[0] = 2, rc.mrope_section[1] = 3, rc.mrope_section[2] = 3;
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = DIM, lc.n_heads = H, lc.n_kv_heads = HKV, lc.head_dim = D, lc.rope = &rc;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = wq, lw.wk = wk, lw.wv = wv, lw.wo = wo;
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer: %s", ra_last_error());
    int64_t ids[3 * T], seq_ids[3 * S];
    for (int64_t b = 0; b < B; b++) { /* [3, B, S] from each sequence's [3, S] */
        image_positions(seq_ids, 4 * b);
        for (int c = 0; c < 3; c++) memcpy(ids + c * T + b * S, seq_ids + c * S, sizeof seq_ids / 3);
    }
    ra_positions p = ra_positions_start(0);
    p.mrope_ids = ids;
    CHECK(ra_layer_forward(NULL, layer, y, x, B, S, &p, NULL) == RA_OK, "forward");

    /* text: equal components = 1-D ids */
    int64_t text3[3 * T], text[T];
    for (int64_t t = 0; t < T; t++) text[t] = text3[t] = text3[T + t] = text3[2 * T + t] = t % S + 2;
    ra_positions pt = ra_positions_start(0), p1 = ra_positions_start(0);
    pt.mrope_ids = text3;
    p1.ids = text;
    CHECK(ra_layer_forward(NULL, layer, y2, x, B, S, &pt, NULL) == RA_OK &&
              ra_layer_forward(NULL, layer, dx[0], x, B, S, &p1, NULL) == RA_OK &&
              memcmp(y2, dx[0], sizeof y2) == 0, "layer: equal 3-D ids differ from 1-D ids");

    /* through the KV cache: prefill 7 tokens, then one at a time */
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, B, S, HKV, D, RA_F32) == RA_OK, "cache");
    float xs[B * S * DIM], ys[B * S * DIM];
    for (int64_t first = 0, n = 7; first < S; first += n, n = 1) {
        int64_t part[3 * B * S];
        for (int c = 0; c < 3; c++)
            for (int64_t b = 0; b < B; b++)
                memcpy(part + c * B * n + b * n, ids + c * T + b * S + first, sizeof(int64_t) * n);
        for (int64_t b = 0; b < B; b++)
            memcpy(xs + b * n * DIM, x + (b * S + first) * DIM, sizeof(float) * n * DIM);
        ra_positions pp = ra_positions_start(0);
        pp.mrope_ids = part;
        CHECK(ra_layer_forward_cached(NULL, layer, cache, ys, xs, B, n, &pp) == RA_OK,
              "cached: %s", ra_last_error());
        for (int64_t b = 0; b < B; b++)
            memcpy(y2 + (b * S + first) * DIM, ys + b * n * DIM, sizeof(float) * n * DIM);
    }
    CHECK(ra_test_max_rel_diff(y2, y, T * DIM) <= 1e-5, "cached: %.3g of max|y|",
          ra_test_max_rel_diff(y2, y, T * DIM));
    ra_kv_cache_destroy(cache);

    /* training: forward bit for bit; the backward reads the tape's ids */
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, layer, T) == RA_OK, "tape");
    for (int run = 0; run < 2; run++) {
        int64_t mine[3 * T];
        memcpy(mine, ids, sizeof mine);
        ra_positions pm = ra_positions_start(0);
        pm.mrope_ids = mine;
        CHECK(ra_layer_forward_train(NULL, layer, y2, tape, x, B, S, &pm, NULL) == RA_OK,
              "train: %s", ra_last_error());
        CHECK(memcmp(y2, y, sizeof y) == 0, "train forward differs from the forward");
        if (run) for (int64_t t = 0; t < 3 * T; t++) mine[t] = 7; /* the tape has its copy */
        ra_layer_grads g = ra_layer_grads_init();
        g.dwq = dw[run][0], g.dwk = dw[run][1], g.dwv = dw[run][2], g.dwo = dw[run][3];
        CHECK(ra_layer_backward(NULL, layer, dx[run], &g, tape, dy) == RA_OK, "backward");
    }
    CHECK(memcmp(dx[0], dx[1], sizeof dx[0]) == 0 && memcmp(dw[0], dw[1], sizeof dw[0]) == 0,
          "backward depends on the caller's ids after the forward");
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);

    lc.temperature_floor = 8192, lc.temperature_scale = 0.1;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_ERR_UNSUPPORTED, "temperature with sections");
    lc.temperature_floor = 0;
    memset(rc.mrope_section, 0, sizeof rc.mrope_section);
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "plain layer");
    CHECK(ra_layer_forward(NULL, layer, y, x, B, S, &p, NULL) == RA_ERR_ARGUMENT,
          "3-D ids on a layer without sections");
    ra_layer_destroy(layer);
}

/* The cases that reach the SIMD kernels, on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_against_transformers);
    RUN(test_text_is_plain_rope);
    RUN(test_inverse);
    RUN(test_refusals);
    RUN(test_layer);
}

int main(void)
{
    RUN(test_tables);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("mrope");
}
