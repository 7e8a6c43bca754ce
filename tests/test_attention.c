/*
 * test_attention.c — causal GQA attention and the attention layer: the flash
 * path against the reference on many shapes (strided views too), identical
 * bits for any thread count, dropout, causality, the layer against a plain
 * composition of its steps, the two layouts through permuted weights, a layer
 * without RoPE (no_rope), and argument checks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* Views of q, k, v inside one fused [B, S, H + 2 Hkv, D] buffer, as a QKV
 * projection writes them. */
static void fused_views(float *qkv, int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t d,
                        ra_tensor *q, ra_tensor *k, ra_tensor *v)
{
    int64_t heads = h + 2 * hkv;
    ra_tensor base = ra_tensor_4d(qkv, RA_F32, b, s, heads, d);
    *q = *k = *v = base;
    q->shape[2] = h;
    k->shape[2] = v->shape[2] = hkv;
    k->data = qkv + h * d;
    v->data = qkv + (h + hkv) * d;
}

/* Tolerance flash vs reference: 2e-5 of max|out|.  The flash path sums in
 * float32 in a different order (online softmax, expf) while the reference
 * sums in double; both round to float32. */
static void test_flash_matches_reference(void)
{
    const int64_t shapes[][5] = {/* B, S, H, Hkv, D */
                                 {1, 1, 1, 1, 2},    {1, 2, 2, 1, 8},    {2, 7, 4, 1, 16},
                                 {1, 63, 8, 2, 32},  {1, 64, 4, 4, 64},  {1, 65, 8, 1, 128},
                                 {2, 130, 4, 2, 64}, {1, 200, 2, 2, 6},  {3, 17, 6, 3, 10}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int fused = 0; fused < 2; fused++) {
            const int64_t *sh = shapes[t];
            int64_t b = sh[0], s = sh[1], h = sh[2], hkv = sh[3], d = sh[4];
            int64_t n_qkv = b * s * (h + 2 * hkv) * d, n_out = b * s * h * d;
            float *qkv = malloc(sizeof(float) * n_qkv);
            float *o_ref = malloc(sizeof(float) * n_out), *o_fl = malloc(sizeof(float) * n_out);
            ra_test_fill(qkv, n_qkv, 10 + t);
            for (int64_t i = 0; i < n_qkv; i++) qkv[i] *= 3.0f; /* peakier softmax */
            ra_tensor q, k, v;
            if (fused) {
                fused_views(qkv, b, s, h, hkv, d, &q, &k, &v);
            } else {
                q = ra_tensor_4d(qkv, RA_F32, b, s, h, d);
                k = ra_tensor_4d(qkv + n_out, RA_F32, b, s, hkv, d);
                v = ra_tensor_4d(qkv + n_out + b * s * hkv * d, RA_F32, b, s, hkv, d);
            }
            ra_tensor out_ref = ra_tensor_4d(o_ref, RA_F32, b, s, h, d);
            ra_tensor out_fl = ra_tensor_4d(o_fl, RA_F32, b, s, h, d);
            CHECK(ra_attention(NULL, &out_ref, &q, &k, &v, PATH_OPTS(RA_PATH_REFERENCE)) == RA_OK,
                  "ref");
            CHECK(ra_attention(ctx, &out_fl, &q, &k, &v, PATH_OPTS(RA_PATH_FLASH)) == RA_OK,
                  "flash");
            double e = ra_test_max_rel_diff(o_fl, o_ref, n_out);
            CHECK(e <= 2e-5, "shape %zu fused %d: flash vs reference %.3g", t, fused, e);
            free(qkv);
            free(o_ref);
            free(o_fl);
        }
    ra_context_destroy(ctx);
}

/* 16-bit keys and values: the same as float32 keys and values holding the
 * widened numbers (bit for bit on the reference path, to 2e-5 on flash). */
static void test_half_kv(void)
{
    const int64_t b = 2, s = 70, h = 8, hkv = 2, d = 40;
    int64_t nq = b * s * h * d, nk = b * s * hkv * d;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk);
    float *kw = malloc(4 * nk), *vw = malloc(4 * nk);
    float *want = malloc(4 * nq), *got = malloc(4 * nq);
    uint16_t *k16 = malloc(2 * nk), *v16 = malloc(2 * nk);
    ra_test_fill(q, nq, 31);
    ra_test_fill(k, nk, 32);
    ra_test_fill(v, nk, 33);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    ra_tensor tq = ra_tensor_4d(q, RA_F32, b, s, h, d), tw = ra_tensor_4d(want, RA_F32, b, s, h, d);
    ra_tensor tg = ra_tensor_4d(got, RA_F32, b, s, h, d);
    for (int dt = RA_F16; dt <= RA_BF16; dt++) {
        ra_convert(k16, (ra_dtype)dt, k, RA_F32, nk);
        ra_convert(v16, (ra_dtype)dt, v, RA_F32, nk);
        ra_convert(kw, RA_F32, k16, (ra_dtype)dt, nk);
        ra_convert(vw, RA_F32, v16, (ra_dtype)dt, nk);
        ra_tensor tk = ra_tensor_4d(k16, (ra_dtype)dt, b, s, hkv, d);
        ra_tensor tv = ra_tensor_4d(v16, (ra_dtype)dt, b, s, hkv, d);
        ra_tensor tkw = ra_tensor_4d(kw, RA_F32, b, s, hkv, d), tvw = ra_tensor_4d(vw, RA_F32, b, s, hkv, d);
        CHECK(ra_attention(NULL, &tw, &tq, &tkw, &tvw, PATH_OPTS(RA_PATH_REFERENCE)) == RA_OK,
              "f32");
        CHECK(ra_attention(NULL, &tg, &tq, &tk, &tv, PATH_OPTS(RA_PATH_REFERENCE)) == RA_OK,
              "16-bit ref");
        CHECK(memcmp(want, got, 4 * nq) == 0, "dtype %d: reference differs from widened f32", dt);
        CHECK(ra_attention(ctx, &tg, &tq, &tk, &tv, PATH_OPTS(RA_PATH_FLASH)) == RA_OK,
              "16-bit flash");
        double e = ra_test_max_rel_diff(got, want, nq);
        CHECK(e <= 2e-5, "dtype %d: flash with 16-bit K/V differs by %.3g", dt, e);
    }
    ra_context_destroy(ctx);
    free(q); free(k); free(v); free(kw); free(vw); free(want); free(got); free(k16); free(v16);
}

/* Row 0 attends only to key 0: its output is v_0 exactly (softmax of one). */
static void test_first_row_is_v0(void)
{
    float q[4 * 8], k[4 * 8], v[4 * 8], o[4 * 8];
    ra_test_fill(q, 32, 1);
    ra_test_fill(k, 32, 2);
    ra_test_fill(v, 32, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, 4, 1, 8), tk = ra_tensor_4d(k, RA_F32, 1, 4, 1, 8);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, 4, 1, 8), to = ra_tensor_4d(o, RA_F32, 1, 4, 1, 8);
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        CHECK(ra_attention(NULL, &to, &tq, &tk, &tv, PATH_OPTS((ra_attention_path)path)) == RA_OK,
              "run");
        CHECK(memcmp(o, v, 8 * sizeof(float)) == 0, "path %d: out[0] != v[0]", path);
    }
}

/* Changing token t's q/k/v changes no output before t (causality). */
static void test_causal(void)
{
    const int64_t s = 40, h = 4, hkv = 2, d = 16;
    int64_t nq = s * h * d, nk = s * hkv * d;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk);
    float *o1 = malloc(4 * nq), *o2 = malloc(4 * nq);
    ra_test_fill(q, nq, 1);
    ra_test_fill(k, nk, 2);
    ra_test_fill(v, nk, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, s, h, d), tk = ra_tensor_4d(k, RA_F32, 1, s, hkv, d);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, s, hkv, d);
    ra_tensor t1 = ra_tensor_4d(o1, RA_F32, 1, s, h, d), t2 = ra_tensor_4d(o2, RA_F32, 1, s, h, d);
    CHECK(ra_attention(NULL, &t1, &tq, &tk, &tv, PATH_OPTS(RA_PATH_FLASH)) == RA_OK, "run");
    const int64_t t = 29;
    for (int64_t i = 0; i < hkv * d; i++) {
        k[t * hkv * d + i] += 1.0f;
        v[t * hkv * d + i] -= 2.0f;
    }
    CHECK(ra_attention(NULL, &t2, &tq, &tk, &tv, PATH_OPTS(RA_PATH_FLASH)) == RA_OK, "run");
    CHECK(memcmp(o1, o2, sizeof(float) * t * h * d) == 0, "the past changed");
    CHECK(memcmp(o1 + t * h * d, o2 + t * h * d, sizeof(float) * h * d) != 0, "token t unchanged");
    free(q);
    free(k);
    free(v);
    free(o1);
    free(o2);
}

/* The same bits for 1, 2, 3 and 5 threads, with and without dropout. */
static void test_thread_determinism(void)
{
    const int64_t b = 2, s = 150, h = 8, hkv = 2, d = 32;
    int64_t nq = b * s * h * d, nk = b * s * hkv * d;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk);
    float *o1 = malloc(4 * nq), *on = malloc(4 * nq);
    ra_test_fill(q, nq, 4);
    ra_test_fill(k, nk, 5);
    ra_test_fill(v, nk, 6);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, b, s, h, d), tk = ra_tensor_4d(k, RA_F32, b, s, hkv, d);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, b, s, hkv, d);
    ra_tensor t1 = ra_tensor_4d(o1, RA_F32, b, s, h, d), tn = ra_tensor_4d(on, RA_F32, b, s, h, d);
    ra_attention_options drop = DROPOUT(0.3f, 1234);
    for (int with_drop = 0; with_drop < 2; with_drop++) {
        const ra_attention_options *dp = with_drop ? &drop : NULL;
        CHECK(ra_attention(NULL, &t1, &tq, &tk, &tv, DROP_OPTS(RA_PATH_FLASH, dp)) == RA_OK,
              "1 thread");
        const int counts[] = {2, 3, 5};
        for (int c = 0; c < 3; c++) {
            ra_context *ctx;
            CHECK(ra_context_create(&ctx, counts[c]) == RA_OK, "ctx");
            for (int rep = 0; rep < 3; rep++) {
                memset(on, 0, 4 * nq);
                CHECK(ra_attention(ctx, &tn, &tq, &tk, &tv, DROP_OPTS(RA_PATH_FLASH, dp)) == RA_OK,
                      "n threads");
                CHECK(memcmp(o1, on, 4 * nq) == 0, "%d threads differ (dropout %d)", counts[c], with_drop);
            }
            ra_context_destroy(ctx);
        }
    }
    free(q);
    free(k);
    free(v);
    free(o1);
    free(on);
}

/* Dropout: same masks on both paths; another seed gives other masks; p = 0
 * is exactly inference; about p of the probabilities are dropped. */
static void test_dropout(void)
{
    const int64_t s = 96, h = 4, hkv = 2, d = 16;
    int64_t nq = s * h * d, nk = s * hkv * d;
    float *q = malloc(4 * nq), *k = malloc(4 * nk), *v = malloc(4 * nk);
    float *a = malloc(4 * nq), *b = malloc(4 * nq), *c = malloc(4 * nq);
    ra_test_fill(q, nq, 7);
    ra_test_fill(k, nk, 8);
    for (int64_t i = 0; i < nk; i++) v[i] = 1.0f; /* out = sum of kept probs * 1/(1-p) */
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, s, h, d), tk = ra_tensor_4d(k, RA_F32, 1, s, hkv, d);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, s, hkv, d);
    ra_tensor ta = ra_tensor_4d(a, RA_F32, 1, s, h, d), tb = ra_tensor_4d(b, RA_F32, 1, s, h, d);
    ra_tensor tc = ra_tensor_4d(c, RA_F32, 1, s, h, d);
    ra_attention_options d1 = DROPOUT(0.25f, 42), d2 = DROPOUT(0.25f, 43), d0 = DROPOUT(0.0f, 42);
    CHECK(ra_attention(NULL, &ta, &tq, &tk, &tv, DROP_OPTS(RA_PATH_REFERENCE, &d1)) == RA_OK,
          "ref");
    CHECK(ra_attention(NULL, &tb, &tq, &tk, &tv, DROP_OPTS(RA_PATH_FLASH, &d1)) == RA_OK, "flash");
    CHECK(ra_test_max_rel_diff(b, a, nq) <= 2e-5, "paths disagree under dropout: %.3g", ra_test_max_rel_diff(b, a, nq));
    CHECK(ra_attention(NULL, &tc, &tq, &tk, &tv, DROP_OPTS(RA_PATH_FLASH, &d2)) == RA_OK, "seed 2");
    CHECK(memcmp(b, c, 4 * nq) != 0, "another seed gave the same masks");
    /* Row 0 sees one key: kept (1/(1-p) = 4/3) or dropped (0), per head. */
    for (int64_t hh = 0; hh < h; hh++) {
        float o0 = b[hh * d];
        CHECK(o0 == 0.0f || fabsf(o0 - 4.0f / 3.0f) < 1e-6f, "row 0 head %lld: %g", (long long)hh, o0);
    }
    /* Mean of outputs ~ 1 (E[kept * scale] = 1), over many rows. */
    double mean = 0;
    for (int64_t i = 0; i < nq; i++) mean += b[i];
    mean /= (double)nq;
    CHECK(fabs(mean - 1.0) < 0.05, "dropout mean %.4f", mean);
    CHECK(ra_attention(NULL, &ta, &tq, &tk, &tv, PATH_OPTS(RA_PATH_FLASH)) == RA_OK, "inference");
    CHECK(ra_attention(NULL, &tc, &tq, &tk, &tv, DROP_OPTS(RA_PATH_FLASH, &d0)) == RA_OK, "p = 0");
    CHECK(memcmp(a, c, 4 * nq) == 0, "p = 0 is not inference");
    free(q);
    free(k);
    free(v);
    free(a);
    free(b);
    free(c);
}

/* ---- the layer ------------------------------------------------------------ */

typedef struct layer_case {
    int64_t b, s, dim, h, hkv;
    int64_t d; /* head_dim; 0: dim / h (H d may differ from dim) */
} layer_case;

static int64_t head_dim_of(const layer_case *c) { return c->d ? c->d : c->dim / c->h; }

/* y = x w^T for x [n, in], w [out, in], in double. */
static void linear(double *y, const float *x, const float *w, int64_t n, int64_t in, int64_t out)
{
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < in; i++) acc += (double)x[t * in + i] * w[o * in + i];
            y[t * out + o] = acc;
        }
}

/* The layer's steps composed by hand in double: projections, rope (angles in
 * double), masked softmax attention, wo. */
static void layer_by_hand(double *y, const float *x, const float *wq, const float *wk,
                          const float *wv, const float *wo, const layer_case *c, double theta,
                          int64_t start)
{
    int64_t d = head_dim_of(c), qd = c->h * d, n = c->b * c->s, rep = c->h / c->hkv;
    double *q = malloc(8 * n * qd), *k = malloc(8 * n * c->hkv * d), *v = malloc(8 * n * c->hkv * d);
    double *att = malloc(8 * n * qd), *p = malloc(8 * c->s);
    float *att_f = malloc(4 * n * qd);
    linear(q, x, wq, n, c->dim, qd);
    linear(k, x, wk, n, c->dim, c->hkv * d);
    linear(v, x, wv, n, c->dim, c->hkv * d);
    for (int64_t t = 0; t < n; t++) {
        double m = (double)(start + t % c->s);
        for (int64_t hh = 0; hh < c->h + c->hkv; hh++) {
            double *row = hh < c->h ? q + (t * c->h + hh) * d : k + (t * c->hkv + hh - c->h) * d;
            for (int64_t i = 0; i < d / 2; i++) {
                double ang = m / pow(theta, (double)(2 * i) / (double)d);
                double re = row[2 * i], im = row[2 * i + 1];
                row[2 * i] = re * cos(ang) - im * sin(ang);
                row[2 * i + 1] = re * sin(ang) + im * cos(ang);
            }
        }
    }
    for (int64_t bb = 0; bb < c->b; bb++)
        for (int64_t hh = 0; hh < c->h; hh++)
            for (int64_t i = 0; i < c->s; i++) {
                const double *qi = q + ((bb * c->s + i) * c->h + hh) * d;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *kj = k + ((bb * c->s + j) * c->hkv + hh / rep) * d;
                    double dot = 0;
                    for (int64_t e = 0; e < d; e++) dot += qi[e] * kj[e];
                    p[j] = dot / sqrt((double)d);
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                double *oi = att + ((bb * c->s + i) * c->h + hh) * d;
                for (int64_t e = 0; e < d; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= i; j++)
                        acc += p[j] / sum * v[((bb * c->s + j) * c->hkv + hh / rep) * d + e];
                    oi[e] = acc;
                }
            }
    for (int64_t i = 0; i < n * qd; i++) att_f[i] = (float)att[i];
    linear(y, att_f, wo, n, qd, c->dim);
    free(q);
    free(k);
    free(v);
    free(att);
    free(p);
    free(att_f);
}

static double rel_err_double(const float *a, const double *ref, int64_t n)
{
    double diff = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        diff = fmax(diff, fabs(a[i] - ref[i]));
        mx = fmax(mx, fabs(ref[i]));
    }
    return diff / mx;
}

/* The layer against the composition in double (1e-4 relative: the issue's
 * bound; float32 projections and attention give ~1e-6), both paths; the half
 * layout with permuted wq/wk gives the same output; threads change no bits. */
static void test_layer(void)
{
    const layer_case cases[] = {{1, 1, 16, 2, 1, 0}, {2, 7, 64, 4, 1, 0}, {1, 33, 128, 8, 2, 0},
                                {2, 19, 256, 2, 2, 0}, {1, 70, 128, 8, 1, 0},
                                /* H D != dim (Qwen3, Gemma; Mistral-Nemo) */
                                {2, 9, 48, 4, 2, 32}, {1, 21, 160, 4, 1, 16}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const layer_case *c = &cases[t];
        int64_t d = head_dim_of(c), qd = c->h * d, n = c->b * c->s, kv = c->hkv * d;
        float *x = malloc(4 * n * c->dim), *wq = malloc(4 * qd * c->dim);
        float *wk = malloc(4 * kv * c->dim), *wv = malloc(4 * kv * c->dim), *wo = malloc(4 * c->dim * qd);
        float *wq_h = malloc(4 * qd * c->dim), *wk_h = malloc(4 * kv * c->dim);
        float *y = malloc(4 * n * c->dim), *y2 = malloc(4 * n * c->dim);
        double *ref = malloc(8 * n * c->dim);
        ra_test_fill(x, n * c->dim, 100 + t);
        ra_test_fill(wq, qd * c->dim, 200 + t);
        ra_test_fill(wk, kv * c->dim, 300 + t);
        ra_test_fill(wv, kv * c->dim, 400 + t);
        ra_test_fill(wo, c->dim * qd, 500 + t);
        const int64_t start = t == 2 ? 1000 : 0;
        layer_by_hand(ref, x, wq, wk, wv, wo, c, 10000.0, start);

        ra_rope_config cfg_rope = ra_rope_config_default(0);
        ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = c->dim, .n_heads = c->h,
                               .n_kv_heads = c->hkv,
                               .head_dim = c->d, .rope = &cfg_rope};
        ra_layer_weights w = {.struct_size = sizeof w, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
        ra_layer *layer;
        CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK, "create");
        ra_positions pos = {.struct_size = sizeof pos, .start = start};
        for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
            ra_attention_options opt = {.struct_size = sizeof opt, .path = (ra_attention_path)path};
            CHECK(ra_layer_forward(ctx, layer, y, x, c->b, c->s, &pos, &opt) == RA_OK, "forward");
            double e = rel_err_double(y, ref, n * c->dim);
            CHECK(e <= 1e-4, "case %zu path %d: %.3g", t, path, e);
        }
        CHECK(ra_layer_forward(NULL, layer, y2, x, c->b, c->s, &pos, NULL) == RA_OK, "no ctx");
        CHECK(memcmp(y, y2, 4 * n * c->dim) == 0, "case %zu: threads changed bits", t);

        /* HF: half layout on wq, wk permuted per head. */
        CHECK(ra_permute_rows(wq_h, wq, RA_F32, c->h, d, c->dim, RA_LAYOUT_HALF) == RA_OK, "permute q");
        CHECK(ra_permute_rows(wk_h, wk, RA_F32, c->hkv, d, c->dim, RA_LAYOUT_HALF) == RA_OK, "permute k");
        ra_rope_config rope_h = *cfg.rope;
        rope_h.layout = RA_LAYOUT_HALF;
        ra_layer_config cfg_h = cfg;
        cfg_h.rope = &rope_h;
        ra_layer_weights w_h = {.struct_size = sizeof w_h, .wq = wq_h, .wk = wk_h, .wv = wv,
                                .wo = wo};
        ra_layer *layer_h;
        CHECK(ra_layer_create(&layer_h, &cfg_h, &w_h) == RA_OK, "create half");
        CHECK(ra_layer_forward(ctx, layer_h, y2, x, c->b, c->s, &pos, NULL) == RA_OK, "half");
        double e = ra_test_max_rel_diff(y2, y, n * c->dim);
        /* 1e-5: the same dot products, but OpenBLAS may block permuted rows differently */
        CHECK(e <= 1e-5, "case %zu: half layout with permuted weights differs by %.3g", t, e);
        /* and back: permuting to interleaved restores the original rows */
        CHECK(ra_permute_rows(wq_h + 0, wq, RA_F32, c->h, d, c->dim, RA_LAYOUT_HALF) == RA_OK, "again");
        float *back = malloc(4 * qd * c->dim);
        CHECK(ra_permute_rows(back, wq_h, RA_F32, c->h, d, c->dim, RA_LAYOUT_INTERLEAVED) == RA_OK, "back");
        CHECK(memcmp(back, wq, 4 * qd * c->dim) == 0, "permute round trip");
        free(back);
        ra_layer_destroy(layer_h);
        ra_layer_destroy(layer);
        free(x); free(wq); free(wk); free(wv); free(wo); free(wq_h); free(wk_h);
        free(y); free(y2); free(ref);
    }
    ra_context_destroy(ctx);
}

/* Training mode: deterministic per seed; dropout 0 in training = inference;
 * output dropout zeroes about p of y. */
static void test_layer_training(void)
{
    const int64_t b = 1, s = 24, dim = 64, h = 4, hkv = 2, kv = 32;
    float *x = malloc(4 * s * dim), *wq = malloc(4 * dim * dim), *wk = malloc(4 * kv * dim);
    float *wv = malloc(4 * kv * dim), *wo = malloc(4 * dim * dim);
    float *y0 = malloc(4 * s * dim), *y1 = malloc(4 * s * dim), *y2 = malloc(4 * s * dim);
    ra_test_fill(x, s * dim, 1);
    ra_test_fill(wq, dim * dim, 2);
    ra_test_fill(wk, kv * dim, 3);
    ra_test_fill(wv, kv * dim, 4);
    ra_test_fill(wo, dim * dim, 5);
    ra_rope_config cfg_rope = ra_rope_config_default(0);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = dim, .n_heads = h, .n_kv_heads = hkv,
                           .rope = &cfg_rope};
    ra_layer_weights w = {.struct_size = sizeof w, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK, "create");
    ra_attention_options inference = {.struct_size = sizeof inference, .path = RA_PATH_AUTO,
                                    .seed = 9}, train0 = {.struct_size = sizeof train0,
                                    .path = RA_PATH_AUTO, .seed = 9};
    ra_attention_options train = {.struct_size = sizeof train, .path = RA_PATH_AUTO, .dropout = 0.5f,
                                .seed = 9};
    CHECK(ra_layer_forward(NULL, layer, y0, x, b, s, NULL, &inference) == RA_OK, "inference");
    CHECK(ra_layer_forward(NULL, layer, y1, x, b, s, NULL, &train0) == RA_OK, "train p=0");
    CHECK(memcmp(y0, y1, 4 * s * dim) == 0, "training with p = 0 differs from inference");
    CHECK(ra_layer_forward(NULL, layer, y1, x, b, s, NULL, &train) == RA_OK, "train");
    CHECK(ra_layer_forward(NULL, layer, y2, x, b, s, NULL, &train) == RA_OK, "train again");
    CHECK(memcmp(y1, y2, 4 * s * dim) == 0, "same seed, different output");
    int zeros = 0;
    for (int64_t i = 0; i < s * dim; i++) zeros += y1[i] == 0.0f;
    CHECK(zeros > s * dim * 4 / 10 && zeros < s * dim * 6 / 10, "%d of %lld zeroed", zeros,
          (long long)(s * dim));
    ra_layer_destroy(layer);
    free(x); free(wq); free(wk); free(wv); free(wo); free(y0); free(y1); free(y2);
}

/* no_rope: the rotation is the identity on every path, so positions change
 * nothing (the same bits at any start or ids), the KV-cache path agrees
 * with the full forward (to 1e-5: other summation orders), and the output
 * differs from the same layer with RoPE. */
static void test_layer_no_rope(void)
{
    const int64_t s = 12, dim = 32, h = 4, hkv = 2, kv = 16;
    float *x = malloc(4 * s * dim), *wq = malloc(4 * dim * dim), *wk = malloc(4 * kv * dim);
    float *wv = malloc(4 * kv * dim), *wo = malloc(4 * dim * dim);
    float *y0 = malloc(4 * s * dim), *y1 = malloc(4 * s * dim), *y2 = malloc(4 * s * dim);
    ra_test_fill(x, s * dim, 11);
    ra_test_fill(wq, dim * dim, 12);
    ra_test_fill(wk, kv * dim, 13);
    ra_test_fill(wv, kv * dim, 14);
    ra_test_fill(wo, dim * dim, 15);
    ra_rope_config cfg_rope = ra_rope_config_default(0);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = dim, .n_heads = h, .n_kv_heads = hkv,
                           .rope = &cfg_rope, .no_rope = 1};
    cfg_rope.type = RA_ROPE_YARN; /* ignored, attention factor included */
    cfg_rope.factor = 4.0;
    cfg_rope.original_max_position_embeddings = 8;
    cfg_rope.table_size = 4;
    ra_layer_weights w = {.struct_size = sizeof w, .wq = wq, .wk = wk, .wv = wv, .wo = wo};
    ra_layer *layer, *roped;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK, "create");
    CHECK(ra_layer_get_config(layer)->no_rope == 1, "no_rope kept in the config");
    int64_t ids[12] = {9, 0, 5000, 3, 3, 70, 1, 2, 8, 100000, 4, 6};
    ra_positions start0 = {.struct_size = sizeof start0,
                           .start = 0}, far = {.struct_size = sizeof far,
                           .start = 123456}, by_ids = {.struct_size = sizeof by_ids, .ids = ids};
    CHECK(ra_layer_forward(NULL, layer, y0, x, 1, s, &start0, NULL) == RA_OK, "start 0");
    CHECK(ra_layer_forward(NULL, layer, y1, x, 1, s, &far, NULL) == RA_OK, "far start");
    CHECK(ra_layer_forward(NULL, layer, y2, x, 1, s, &by_ids, NULL) == RA_OK, "ids");
    CHECK(memcmp(y0, y1, 4 * s * dim) == 0 && memcmp(y0, y2, 4 * s * dim) == 0,
          "positions changed a layer without RoPE");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, s, hkv, dim / h, RA_F32) == RA_OK, "cache");
    CHECK(ra_layer_forward_cached(NULL, layer, cache, y1, x, 1, s - 1, &far) == RA_OK, "prefill");
    CHECK(ra_layer_forward_cached(NULL, layer, cache, y1 + (s - 1) * dim, x + (s - 1) * dim, 1, 1,
                                  NULL) == RA_OK, "decode");
    double e = ra_test_max_rel_diff(y1, y0, s * dim);
    CHECK(e <= 1e-5, "cached path without RoPE differs by %.3g", e);
    cfg.no_rope = 0;
    CHECK(ra_layer_create(&roped, &cfg, &w) == RA_OK, "create with rope");
    CHECK(ra_layer_forward(NULL, roped, y2, x, 1, s, &start0, NULL) == RA_OK, "roped");
    CHECK(ra_test_max_rel_diff(y2, y0, s * dim) > 1e-2, "no_rope changed nothing");
    ra_kv_cache_destroy(cache);
    ra_layer_destroy(roped);
    ra_layer_destroy(layer);
    free(x); free(wq); free(wk); free(wv); free(wo); free(y0); free(y1); free(y2);
}

/* An output view that would write one element twice is refused; a
 * head-major output is not, and keys and values may repeat (stride 0). */
static void test_output_aliasing(void)
{
    enum { S = 4, H = 2, D = 8, N = S * H * D };
    float q[N], k[N], v[N], ref[N], out[N];
    ra_test_fill(q, N, 1);
    ra_test_fill(k, N, 2);
    ra_test_fill(v, N, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D),
              tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), tref = ra_tensor_4d(ref, RA_F32, 1, S, H, D);
    CHECK(ra_attention(NULL, &tref, &tq, &tk, &tv, PATH_OPTS(RA_PATH_REFERENCE)) == RA_OK,
          "contiguous");
    for (int path = RA_PATH_AUTO; path < RA_PATH_COUNT; path++) {
        ra_tensor t = ra_tensor_4d(out, RA_F32, 1, S, H, D);
        t.stride[2] = 0;
        CHECK(ra_attention(NULL, &t, &tq, &tk, &tv, PATH_OPTS((ra_attention_path)path)) ==
                  RA_ERR_ARGUMENT, "path %d: zero head stride", path);
        t = ra_tensor_4d(out, RA_F32, 1, S, H, D);
        t.stride[1] = D; /* tokens and heads interleave */
        CHECK(ra_attention(NULL, &t, &tq, &tk, &tv, PATH_OPTS((ra_attention_path)path)) ==
                  RA_ERR_ARGUMENT, "path %d: interleaved", path);
        t.stride[2] = S * D; /* head-major [B, H, S, D] */
        CHECK(ra_attention(NULL, &t, &tq, &tk, &tv, PATH_OPTS((ra_attention_path)path)) == RA_OK,
              "path %d: head-major", path);
        double diff = 0;
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++)
                    diff = fmax(diff, fabs(out[(h * S + s) * D + d] - ref[(s * H + h) * D + d]));
        CHECK(diff < 1e-6, "path %d: head-major output differs by %g", path, diff);
    }
    ra_tensor one_head = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    one_head.stride[2] = 0; /* both heads read kv head 0 */
    ra_tensor tout = ra_tensor_4d(out, RA_F32, 1, S, H, D);
    CHECK(ra_attention(NULL, &tout, &tq, &one_head, &one_head, PATH_OPTS(RA_PATH_FLASH)) == RA_OK,
          "repeated keys and values");
}

static void test_errors(void)
{
    float buf[256] = {0}, out[256];
    memset(out, 0x7f, sizeof out);
    ra_layer_weights w = {.struct_size = sizeof w, .wq = buf, .wk = buf, .wv = buf, .wo = buf};
    ra_layer *layer = NULL;
    ra_rope_config cfg_rope = ra_rope_config_default(0);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = 16, .n_heads = 4, .n_kv_heads = 2,
                           .rope = &cfg_rope};
    CHECK(ra_layer_create(NULL, &cfg, &w) == RA_ERR_NULL, "NULL out");
    ra_layer_weights wnull = {.struct_size = sizeof wnull, .wq = buf, .wk = NULL, .wv = buf,
                              .wo = buf};
    CHECK(ra_layer_create(&layer, &cfg, &wnull) == RA_ERR_NULL, "NULL weight");
    cfg.n_kv_heads = 3;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_GQA, "GQA");
    cfg.n_kv_heads = 2;
    cfg.dim = 18;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_DIM, "dim not a multiple of heads");
    cfg.head_dim = 4; /* given: H D = 16 != dim = 18 is allowed (Qwen3, Mistral-Nemo) */
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK, "dim != H * D");
    ra_layer_destroy(layer);
    layer = NULL;
    cfg.norm_eps = -1e-6;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_ARGUMENT, "negative norm_eps");
    cfg.norm_eps = NAN;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_ARGUMENT, "NaN norm_eps");
    cfg.norm_eps = 0;
    /* the softmax scale: positive, and q's factor scale * sqrt(D) a float */
    const double bad_scales[] = {-0.5, NAN, INFINITY, 2e38}; /* D = 4: 4e38 */
    for (size_t i = 0; i < sizeof bad_scales / sizeof bad_scales[0]; i++) {
        cfg.scale = bad_scales[i];
        CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_ARGUMENT, "scale %g", bad_scales[i]);
    }
    cfg.scale = 0;
    const double bad_clips[] = {-1.0, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_clips / sizeof bad_clips[0]; i++) {
        cfg.clip_qkv = bad_clips[i];
        CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_ARGUMENT, "clip_qkv %g", bad_clips[i]);
    }
    cfg.clip_qkv = 0;
    cfg.norm_whole = cfg.norm_head_weights = 1; /* q_norm [H D]: which one? */
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_ARGUMENT, "norm_whole and head weights");
    cfg.norm_whole = cfg.norm_head_weights = 0;
    cfg.dim = 12;
    cfg.head_dim = 3;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_HEAD_DIM, "odd head_dim");
    cfg.dim = -16;
    cfg.head_dim = 0;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_SIZE, "negative dim");
    cfg.dim = 16;
    cfg_rope.theta = -5;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_ERR_THETA, "theta");
    cfg_rope.theta = 1e4;
    CHECK(ra_layer_create(&layer, &cfg, &w) == RA_OK && layer, "create");
    CHECK(ra_layer_get_config(layer)->head_dim == 4, "head_dim resolved");
    ra_positions neg = {.struct_size = sizeof neg, .start = -3};
    ra_attention_options bad_p = {.struct_size = sizeof bad_p, .path = RA_PATH_AUTO,
                                .dropout = 1.0f}, bad_path = {.struct_size = sizeof bad_path,
                                .path = (ra_attention_path)7};
    CHECK(ra_layer_forward(NULL, layer, out, buf, 1, 2, &neg, NULL) == RA_ERR_POSITION, "position");
    const int64_t cu[] = {0, 1, 2};
    ra_positions packed = {.struct_size = sizeof packed, .cu_seqlens = cu, .n_seqs = 2};
    CHECK(ra_layer_forward(NULL, layer, out, buf, 1, 2, &packed, NULL) == RA_ERR_UNSUPPORTED,
          "packed batches need varlen attention");
    CHECK(ra_layer_forward(NULL, layer, out, buf, 1, 2, NULL, &bad_p) == RA_ERR_ARGUMENT, "p = 1");
    CHECK(ra_layer_forward(NULL, layer, out, buf, 1, 2, NULL, &bad_path) == RA_ERR_ARGUMENT, "path");
    CHECK(ra_layer_forward(NULL, layer, out, buf, 0, 2, NULL, NULL) == RA_ERR_SIZE, "batch 0");
    CHECK(ra_layer_forward(NULL, layer, out, buf, (int64_t)1 << 40, (int64_t)1 << 40, NULL, NULL) ==
              RA_ERR_OVERFLOW, "overflow");
    CHECK(ra_layer_forward(NULL, layer, NULL, buf, 1, 2, NULL, NULL) == RA_ERR_NULL, "NULL y");
    CHECK(ra_layer_forward(NULL, layer, buf + 4, buf, 1, 2, NULL, NULL) == RA_ERR_ARGUMENT,
          "y overlapping x");
    float sentinel;
    memset(&sentinel, 0x7f, sizeof sentinel);
    int untouched = 1;
    for (int i = 0; i < 256; i++) untouched &= memcmp(&out[i], &sentinel, 4) == 0;
    CHECK(untouched, "a failing forward wrote to y");
    ra_layer_destroy(layer);

    ra_tensor q = ra_tensor_4d(buf, RA_F32, 1, 4, 4, 8), k = ra_tensor_4d(buf, RA_F32, 1, 4, 3, 8);
    ra_tensor o = ra_tensor_4d(out, RA_F32, 1, 4, 4, 8), k2 = ra_tensor_4d(buf, RA_F32, 1, 5, 2, 8);
    CHECK(ra_attention(NULL, &o, &q, &k, &k, PATH_OPTS(RA_PATH_FLASH)) == RA_ERR_GQA, "GQA");
    ra_tensor v4 = ra_tensor_4d(buf, RA_F32, 1, 4, 2, 8); /* k of 5 keys, v of 4 */
    CHECK(ra_attention(NULL, &o, &q, &k2, &v4, PATH_OPTS(RA_PATH_FLASH)) == RA_ERR_SHAPE,
          "k and v lengths differ");
    ra_tensor qb = ra_tensor_4d(buf, RA_I8, 1, 4, 4, 8); /* f32, f16, bf16: test_attention_bf16.c */
    CHECK(ra_attention(NULL, &o, &qb, &k, &k, PATH_OPTS(RA_PATH_FLASH)) == RA_ERR_DTYPE, "q dtype");
    ra_attention_options bad = DROPOUT(-0.1f, 0);
    k = ra_tensor_4d(buf, RA_F32, 1, 4, 2, 8);
    CHECK(ra_attention(NULL, &o, &q, &k, &k, DROP_OPTS(RA_PATH_FLASH, &bad)) == RA_ERR_ARGUMENT,
          "p < 0");
    CHECK(ra_attention(NULL, &o, &q, &k, &k, PATH_OPTS((ra_attention_path)9)) == RA_ERR_ARGUMENT,
          "path");
    CHECK(ra_attention(NULL, NULL, &q, &k, &k, PATH_OPTS(RA_PATH_FLASH)) == RA_ERR_NULL,
          "NULL out");
    ra_tensor o_on_q = ra_tensor_4d(buf + 8, RA_F32, 1, 4, 4, 8);
    CHECK(ra_attention(NULL, &o_on_q, &q, &k, &k, PATH_OPTS(RA_PATH_FLASH)) == RA_ERR_ARGUMENT,
          "out overlapping q");
}

/* The cases that reach the SIMD kernels, run on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_flash_matches_reference);
    RUN(test_half_kv);
    RUN(test_first_row_is_v0);
    RUN(test_causal);
    RUN(test_thread_determinism);
    RUN(test_dropout);
    RUN(test_layer);
    RUN(test_layer_training);
    RUN(test_layer_no_rope);
    RUN(test_output_aliasing);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    RUN(test_errors);
    return ra_test_summary("attention");
}
