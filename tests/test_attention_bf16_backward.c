/*
 * test_attention_bf16_backward.c — the flash backward with q, k and v in
 * bf16: against the float32 flash backward on the same values widened and
 * against the reference backward (sums in double), on every SIMD path, on
 * awkward shapes and with every mask; identical bits for 1, 2 and 3
 * threads; fused QKV views; Inf and NaN reaching the same gradients as on
 * the float32 path.
 *
 * The bound.  Where the bf16 units run (avx512bf16: vdpbf16ps; amx: AMX
 * tiles) the GEMMs' float32 operands are rounded to bf16 (nearest: 8
 * significant bits, relative u = 2^-8 each): Pd = P * mult and dout for
 * dV = Pd^T dO; dout for dP = dO V^T; dS for dK = dS^T Q scale and
 * dQ = dS K scale.  q, k and v are bf16
 * already, every product is exact and every sum float32.  With mult <=
 * 1 / (1 - p) and the soft-cap's slope <= 1:
 *
 *   dV:  each product Pd dO off by <= 2u (+u^2), so
 *        |err dV[j, f]| <= 2^-7 (Pd^T |dO|)[j, f], which is dv from the
 *        float32 backward run with |dout| (P >= 0);
 *   dS:  |dS[r, j]| <= P[r, j] w_r with w_r = (max|v| + max|out|)
 *        |dout_r|_1 / (1 - p) (|dP| and |Delta| each), and the rounded dout
 *        moves dP by <= u max|v| |dout_r|_1, so dS is off by <= u P w_r
 *        before its own rounding (another u P w_r);
 *   dQ:  |err dQ[r, f]| <= 2^-7 scale max|k| w_r sum_j P[r, j]
 *        <= 2^-7 scale max|k| w_r (a row's probabilities sum to <= 1);
 *   dK:  |err dK[j, f]| <= 2^-7 scale max|q| sum_r P[r, j] w_r, which is dv
 *        from the float32 backward run without dropout on rows dout_r = w_r
 *        (the same lse, so the same P; summed over the group's heads, as
 *        dK is).
 *
 * (times 1 + 2^-8 for the u^2 terms).  Each bound gets 2e-4 of the same
 * magnitude more for the float32 sums of
 * both paths in different orders (at most S rep + D ~ 2500 terms here,
 * 2^-24 each, ~1.5e-4 in the worst case) and 1e-6 of its largest value
 * absolute (subnormals flushed by the bf16 units).  Against the reference
 * (double sums) add test_attention_backward.c's flash tolerance, 1e-5
 * max|grad|.  dsinks reads only lse, out and dout, all float32: the same
 * bits.  Everywhere else bf16 inputs are widened (exact) and the result is
 * the float32 path's, bit for bit.
 *
 *   q, dq, out, dout: [B, S, H, D]   k, v, dk, dv: [B, S, Hkv, D]
 *   lse: [B, H, S]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/dispatch.h"
#include "cpu/kernels.h"
#include "harness.h"
#include "ropeattn.h"

/* One case: shapes, then the options.  pad: left padding (row b has 3 b + 1
 * leading pads); docs: packed documents (0: one). */
typedef struct bwd_case {
    int64_t b, s, h, hkv, d;
    int64_t window;
    double softcap;
    int sinks, pad, docs;
    float dropout;
    double scale; /* the softmax scale; 0: 1 / sqrt(D) */
} bwd_case;

static const bwd_case cases[] = {
    /* b, s, h, hkv, d, window, softcap, sinks, pad, docs, dropout, scale */
    {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},           /* one query, one feature */
    {1, 7, 2, 1, 3, 0, 0, 0, 0, 0, 0, 0},           /* odd D, rows below a pair of vectors */
    {2, 65, 4, 2, 16, 0, 0, 0, 0, 0, 0, 0},         /* a key tile and one key */
    {1, 64, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},          /* one whole tile, D a pair */
    {1, 130, 8, 2, 33, 0, 0, 0, 0, 0, 0, 0},        /* odd D past 32, tails of keys and rows */
    {1, 129, 3, 1, 31, 0, 0, 0, 0, 0, 0, 0},        /* odd key tail, D below 32 */
    {1, 200, 4, 4, 64, 0, 0, 0, 0, 0, 0, 0},        /* MHA */
    {1, 100, 2, 1, 100, 0, 0, 0, 0, 0, 0, 0},       /* D a multiple of 4, not of 16 */
    {1, 190, 8, 1, 128, 0, 0, 0, 0, 0, 0, 0},       /* GQA 8, the LLaMA head */
    {1, 150, 6, 2, 40, 37, 0, 0, 0, 0, 0, 0},       /* window, rep 3 */
    {2, 140, 4, 2, 24, 0, 30.0, 1, 0, 0, 0, 0},     /* soft-cap and sinks */
    {2, 170, 4, 1, 32, 0, 0, 0, 1, 0, 0, 0},        /* left padding */
    {1, 160, 4, 2, 48, 0, 0, 0, 0, 3, 0, 0},        /* packed documents */
    {1, 120, 2, 1, 20, 0, 0, 0, 0, 0, 0.25f, 0},    /* dropout */
    {1, 129, 4, 2, 17, 20, 20.0, 1, 1, 0, 0.2f, 0}, /* everything, dropout too */
    {1, 96, 4, 2, 64, 0, 0, 0, 0, 0, 0, 0.5},       /* a scale 4 times 1 / sqrt(D) */
    {1, 80, 2, 1, 32, 16, 15.0, 1, 0, 0, 0, 1.0},   /* scale 1 (Gemma-like), cap, window */
};

enum { N_CASES = sizeof cases / sizeof cases[0] };

static int64_t n_q(const bwd_case *c) { return c->b * c->s * c->h * c->d; }
static int64_t n_kv(const bwd_case *c) { return c->b * c->s * c->hkv * c->d; }

/* One case's inputs: bf16 q, k, v and their values widened (q32, k32, v32),
 * dout, the forward's out and lse (float32 flash on the widened values),
 * the options and what they point at. */
typedef struct inputs {
    uint16_t *q, *k, *v;
    float *q32, *k32, *v32, *dout, *out, *lse, sinks[16];
    uint8_t *pad;
    int64_t cu[8];
    ra_attention_options o;
} inputs;

/* The gradients of one backward run. */
typedef struct grads {
    float *dq, *dk, *dv, dsinks[16];
} grads;

/* x[0, n) uniform in [-scale, scale), rounded to bf16 in x16 and widened
 * back into x. */
static void fill16(uint16_t *x16, float *x, int64_t n, float scale, uint64_t seed)
{
    ra_test_fill(x, (size_t)n, seed);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
    ra_convert(x16, RA_BF16, x, RA_F32, n);
    ra_convert(x, RA_F32, x16, RA_BF16, n);
}

static void inputs_options(inputs *in, const bwd_case *c, uint64_t seed)
{
    in->o = ra_attention_options_init();
    in->o.path = RA_PATH_FLASH;
    in->o.window = c->window;
    in->o.scale = c->scale;
    in->o.softcap = (float)c->softcap;
    in->o.dropout = c->dropout;
    in->o.seed = seed;
    for (int64_t h = 0; h < c->h; h++) in->sinks[h] = (float)h * 0.7f - 1.0f;
    if (c->sinks) in->o.sinks = in->sinks;
    in->pad = NULL;
    if (c->pad) {
        in->pad = malloc((size_t)(c->b * c->s));
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t i = 0; i < c->s; i++) in->pad[b * c->s + i] = i >= 3 * b + 1;
        in->o.padding_mask = in->pad;
    }
    if (c->docs) {
        for (int d = 0; d <= c->docs; d++) in->cu[d] = c->s * d * d / (c->docs * c->docs);
        in->o.cu_seqlens = in->cu;
        in->o.n_documents = c->docs;
    }
}

/* The forward (float32 flash on the widened values) into out and lse. */
static ra_status forward(inputs *in, const bwd_case *c)
{
    ra_tensor q = ra_tensor_4d(in->q32, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor k = ra_tensor_4d(in->k32, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor v = ra_tensor_4d(in->v32, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor o = ra_tensor_4d(in->out, RA_F32, c->b, c->s, c->h, c->d);
    return ra_attention_forward_lse(NULL, &o, in->lse, &q, &k, &v, &in->o);
}

static void inputs_make(inputs *in, const bwd_case *c, uint64_t seed)
{
    in->q = malloc(2 * n_q(c));
    in->k = malloc(2 * n_kv(c));
    in->v = malloc(2 * n_kv(c));
    in->q32 = malloc(4 * n_q(c));
    in->k32 = malloc(4 * n_kv(c));
    in->v32 = malloc(4 * n_kv(c));
    in->dout = malloc(4 * n_q(c));
    in->out = malloc(4 * n_q(c));
    in->lse = malloc(4 * c->b * c->h * c->s);
    fill16(in->q, in->q32, n_q(c), 3.0f, seed); /* peakier softmax */
    fill16(in->k, in->k32, n_kv(c), 1.0f, seed + 1);
    fill16(in->v, in->v32, n_kv(c), 2.0f, seed + 2);
    ra_test_fill(in->dout, (size_t)n_q(c), seed + 3);
    inputs_options(in, c, seed);
    CHECK(forward(in, c) == RA_OK, "forward: %s", ra_last_error());
}

static void inputs_free(inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->q32);
    free(in->k32);
    free(in->v32);
    free(in->dout);
    free(in->out);
    free(in->lse);
    free(in->pad);
}

static void grads_make(grads *g, const bwd_case *c)
{
    g->dq = malloc(4 * n_q(c));
    g->dk = malloc(4 * n_kv(c));
    g->dv = malloc(4 * n_kv(c));
}

static void grads_free(grads *g)
{
    free(g->dq);
    free(g->dk);
    free(g->dv);
}

/* The backward of in's forward on its bf16 q, k, v (wide 0) or their
 * widened copies (wide 1), with dout (in's unless given) and options o,
 * on n_threads threads (0: no context). */
static ra_status run(grads *g, const bwd_case *c, const inputs *in, int wide, const float *dout,
                     const ra_attention_options *o, int n_threads)
{
    ra_dtype dt = wide ? RA_F32 : RA_BF16;
    ra_tensor q = ra_tensor_4d(wide ? (void *)in->q32 : in->q, dt, c->b, c->s, c->h, c->d);
    ra_tensor k = ra_tensor_4d(wide ? (void *)in->k32 : in->k, dt, c->b, c->s, c->hkv, c->d);
    ra_tensor v = ra_tensor_4d(wide ? (void *)in->v32 : in->v, dt, c->b, c->s, c->hkv, c->d);
    ra_tensor out = ra_tensor_4d(in->out, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dq = ra_tensor_4d(g->dq, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dk = ra_tensor_4d(g->dk, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor dv = ra_tensor_4d(g->dv, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor dsout = ra_tensor_4d((void *)(dout ? dout : in->dout), RA_F32, c->b, c->s, c->h,
                                   c->d);
    ra_attention_options opts = o ? *o : in->o;
    opts.dsinks = opts.sinks ? g->dsinks : NULL;
    ra_context *ctx = NULL;
    if (n_threads && ra_context_create(&ctx, n_threads) != RA_OK) return RA_ERR_NOMEM;
    ra_status st = ra_attention_backward(ctx, &dq, &dk, &dv, &dsout, &q, &k, &v, &out, in->lse,
                                         &opts);
    ra_context_destroy(ctx);
    return st;
}

static float max_abs(const float *x, int64_t n)
{
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* Whether the current path runs bf16 inputs on the bf16 units. */
static int bf16_units(void) { return ra_test_isa >= RA_ISA_AVX512BF16; }

/* The largest error / bound any case gave, per gradient: dq, dk, dv. */
static double worst_seen[3];
static const char *amx_state = "absent"; /* on the amx path: whether its tiles ran */

/* Per-element bounds (the file's comment) for dq, dk, dv: into bq, bk, bv,
 * the magnitudes times 2^-7 (1 + 2^-8) + 2e-4 plus 1e-6 of their largest. */
static void bounds(float *bq, float *bk, float *bv, const bwd_case *c, const inputs *in)
{
    const int64_t nq = n_q(c), nkv = n_kv(c), d = c->d;
    const double scale = c->scale ? c->scale : 1.0 / sqrt((double)d), keep = 1.0 - c->dropout;
    const double vmax = max_abs(in->v32, nkv), omax = max_abs(in->out, nq);
    const double qmax = max_abs(in->q32, nq), kmax = max_abs(in->k32, nkv);
    float *absdo = malloc(4 * nq), *wrows = malloc(4 * nq);
    for (int64_t row = 0; row < nq / d; row++) {
        double l1 = 0, w;
        for (int64_t f = 0; f < d; f++) l1 += fabs(in->dout[row * d + f]);
        w = (vmax + omax) * l1 / keep * (1 + 1e-6);
        for (int64_t f = 0; f < d; f++) {
            absdo[row * d + f] = fabsf(in->dout[row * d + f]);
            wrows[row * d + f] = (float)w;
            bq[row * d + f] = (float)(scale * kmax * w);
        }
    }
    grads g;
    grads_make(&g, c);
    CHECK(run(&g, c, in, 1, absdo, NULL, 0) == RA_OK, "Pd^T |dO|: %s", ra_last_error());
    memcpy(bv, g.dv, 4 * (size_t)nkv);
    ra_attention_options nodrop = in->o;
    nodrop.dropout = 0;
    CHECK(run(&g, c, in, 1, wrows, &nodrop, 0) == RA_OK, "P^T w: %s", ra_last_error());
    for (int64_t i = 0; i < nkv; i++) bk[i] = (float)(scale * qmax * g.dv[i]);
    float *const all[3] = {bq, bk, bv};
    const int64_t counts[3] = {nq, nkv, nkv};
    for (int t = 0; t < 3; t++) {
        const double floor = 1e-6 * max_abs(all[t], counts[t]);
        for (int64_t i = 0; i < counts[t]; i++)
            all[t][i] = (float)((0x1p-7 * (1 + 0x1p-8) + 2e-4) * all[t][i] + floor);
    }
    grads_free(&g);
    free(absdo);
    free(wrows);
}

/* Worst |a - b| / (bound + extra) over n floats, and where; Inf if either
 * is not finite. */
static double worst_ratio(const float *a, const float *b, const float *bound, double extra,
                          int64_t n, int64_t *at)
{
    double w = 0;
    *at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = isfinite(a[i]) && isfinite(b[i]) ? fabs((double)a[i] - b[i]) : INFINITY;
        double r = d / (bound[i] + extra);
        if (r > w) w = r, *at = i;
    }
    return w;
}

/* Every case: the bf16 backward against the float32 one on the widened
 * values (same bits where the inputs are widened, else the bound) and
 * against the reference backward. */
static void test_against_float32(void)
{
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < N_CASES; i++) {
        const bwd_case *c = &cases[i];
        inputs in;
        inputs_make(&in, c, 100 + (uint64_t)i);
        grads g, g32, ref;
        grads_make(&g, c);
        grads_make(&g32, c);
        grads_make(&ref, c);
        CHECK(run(&g, c, &in, 0, NULL, NULL, 0) == RA_OK, "case %d: %s", i, ra_last_error());
        CHECK(run(&g32, c, &in, 1, NULL, NULL, 0) == RA_OK, "case %d f32", i);
        ra_attention_options ro = in.o;
        ro.path = RA_PATH_REFERENCE;
        CHECK(run(&ref, c, &in, 1, NULL, &ro, 0) == RA_OK, "case %d ref: %s", i, ra_last_error());
        const float *got[3] = {g.dq, g.dk, g.dv}, *f32[3] = {g32.dq, g32.dk, g32.dv};
        const float *want[3] = {ref.dq, ref.dk, ref.dv};
        const int64_t n[3] = {n_q(c), n_kv(c), n_kv(c)};
        float *bound[3];
        for (int t = 0; t < 3; t++) bound[t] = calloc((size_t)n[t], 4);
        if (bf16_units()) bounds(bound[0], bound[1], bound[2], c, &in);
        CHECK(!c->sinks || memcmp(g.dsinks, g32.dsinks, 4 * (size_t)c->h) == 0,
              "case %d: dsinks not the float32 path's bits", i);
        for (int t = 0; t < 3; t++) {
            int64_t at;
            if (!bf16_units()) { /* widened: the float32 path itself */
                CHECK(memcmp(got[t], f32[t], 4 * (size_t)n[t]) == 0,
                      "case %d %s: not the float32 path's bits", i, names[t]);
            } else {
                double r = worst_ratio(got[t], f32[t], bound[t], 0, n[t], &at);
                worst_seen[t] = fmax(worst_seen[t], r);
                CHECK(r <= 1, "case %d %s: bf16 units vs float32 path %g vs %g at %lld, "
                      "%.3g of the bound %.3g", i, names[t], got[t][at], f32[t][at],
                      (long long)at, r, bound[t][at]);
            }
            /* the reference: the flash path's own tolerance on top */
            double r = worst_ratio(got[t], want[t], bound[t], 1e-5 * max_abs(want[t], n[t]) +
                                   1e-30, n[t], &at);
            CHECK(r <= 1, "case %d %s: vs reference %g vs %g at %lld, %.3g of the bound", i,
                  names[t], got[t][at], want[t][at], (long long)at, r);
        }
        for (int t = 0; t < 3; t++) free(bound[t]);
        grads_free(&g);
        grads_free(&g32);
        grads_free(&ref);
        inputs_free(&in);
    }
}

/* The same bits for 1, 2 and 3 threads (and no context), every case. */
static void test_threads(void)
{
    for (int i = 0; i < N_CASES; i++) {
        const bwd_case *c = &cases[i];
        inputs in;
        inputs_make(&in, c, 200 + (uint64_t)i);
        grads g[4];
        for (int t = 0; t < 4; t++) {
            grads_make(&g[t], c);
            CHECK(run(&g[t], c, &in, 0, NULL, NULL, t) == RA_OK, "case %d", i);
        }
        for (int t = 1; t < 4; t++)
            CHECK(memcmp(g[0].dq, g[t].dq, 4 * (size_t)n_q(c)) == 0 &&
                      memcmp(g[0].dk, g[t].dk, 4 * (size_t)n_kv(c)) == 0 &&
                      memcmp(g[0].dv, g[t].dv, 4 * (size_t)n_kv(c)) == 0 &&
                      (!c->sinks || memcmp(g[0].dsinks, g[t].dsinks, 4 * (size_t)c->h) == 0),
                  "case %d: %d threads differ from the caller's", i, t);
        for (int t = 0; t < 4; t++) grads_free(&g[t]);
        inputs_free(&in);
    }
}

/* q, k and v as views into one fused bf16 [B, S, H + 2 Hkv, D] buffer (a
 * QKV projection's output): the contiguous inputs' gradients, bit for bit. */
static void test_fused_views(void)
{
    const bwd_case c = {2, 100, 4, 2, 40, 0, 0, 0, 0, 0, 0, 0};
    const int64_t w = c.h + 2 * c.hkv, row = w * c.d;
    inputs in;
    inputs_make(&in, &c, 400);
    uint16_t *qkv = malloc(2 * (size_t)(c.b * c.s * row));
    for (int64_t b = 0; b < c.b; b++)
        for (int64_t s = 0; s < c.s; s++) {
            uint16_t *dst = qkv + (b * c.s + s) * row;
            memcpy(dst, in.q + (b * c.s + s) * c.h * c.d, 2 * (size_t)(c.h * c.d));
            memcpy(dst + c.h * c.d, in.k + (b * c.s + s) * c.hkv * c.d, 2 * (size_t)(c.hkv * c.d));
            memcpy(dst + (c.h + c.hkv) * c.d, in.v + (b * c.s + s) * c.hkv * c.d,
                   2 * (size_t)(c.hkv * c.d));
        }
    ra_tensor q = ra_tensor_4d(qkv, RA_BF16, c.b, c.s, c.h, c.d);
    ra_tensor k = ra_tensor_4d(qkv + c.h * c.d, RA_BF16, c.b, c.s, c.hkv, c.d);
    ra_tensor v = ra_tensor_4d(qkv + (c.h + c.hkv) * c.d, RA_BF16, c.b, c.s, c.hkv, c.d);
    ra_tensor *views[3] = {&q, &k, &v};
    for (int i = 0; i < 3; i++) {
        views[i]->stride[0] = c.s * row;
        views[i]->stride[1] = row;
    }
    grads g, want;
    grads_make(&g, &c);
    grads_make(&want, &c);
    CHECK(run(&want, &c, &in, 0, NULL, NULL, 2) == RA_OK, "contiguous");
    ra_tensor out = ra_tensor_4d(in.out, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor dout = ra_tensor_4d(in.dout, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor dq = ra_tensor_4d(g.dq, RA_F32, c.b, c.s, c.h, c.d);
    ra_tensor dk = ra_tensor_4d(g.dk, RA_F32, c.b, c.s, c.hkv, c.d);
    ra_tensor dv = ra_tensor_4d(g.dv, RA_F32, c.b, c.s, c.hkv, c.d);
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    CHECK(ra_attention_backward(ctx, &dq, &dk, &dv, &dout, &q, &k, &v, &out, in.lse, &in.o) ==
              RA_OK, "fused: %s", ra_last_error());
    ra_context_destroy(ctx);
    CHECK(memcmp(g.dq, want.dq, 4 * (size_t)n_q(&c)) == 0 &&
              memcmp(g.dk, want.dk, 4 * (size_t)n_kv(&c)) == 0 &&
              memcmp(g.dv, want.dv, 4 * (size_t)n_kv(&c)) == 0,
          "fused views: not the contiguous inputs' bits");
    grads_free(&g);
    grads_free(&want);
    free(qkv);
    inputs_free(&in);
}

/* An Inf or a NaN in v (or k) reaches the same gradients as on the float32
 * path: the same elements are finite on both (the forward's out and lse,
 * from the float32 path, shared). */
static void test_nonfinite(void)
{
    static const float bad[] = {INFINITY, -INFINITY, NAN};
    const bwd_case c = {1, 150, 4, 2, 32, 40, 0, 0, 0, 0, 0, 0}; /* window: masked tiles */
    for (int which = 0; which < 2; which++)
        for (int i = 0; i < 3; i++) {
            inputs in;
            inputs_make(&in, &c, 300 + (uint64_t)i);
            int64_t key = 70 + 13 * i, at = (key * c.hkv + 1) * c.d + 5; /* kv head 1 */
            float *x32 = which ? in.k32 : in.v32;
            uint16_t *x = which ? in.k : in.v;
            x32[at] = bad[i];
            ra_convert(&x[at], RA_BF16, &x32[at], RA_F32, 1);
            CHECK(forward(&in, &c) == RA_OK, "forward");
            grads g, g32;
            grads_make(&g, &c);
            grads_make(&g32, &c);
            CHECK(run(&g, &c, &in, 0, NULL, NULL, 0) == RA_OK, "run");
            CHECK(run(&g32, &c, &in, 1, NULL, NULL, 0) == RA_OK, "run f32");
            const float *a[3] = {g.dq, g.dk, g.dv}, *b[3] = {g32.dq, g32.dk, g32.dv};
            const int64_t n[3] = {n_q(&c), n_kv(&c), n_kv(&c)};
            int64_t differ = 0, nonfinite = 0, total = 0;
            for (int t = 0; t < 3; t++)
                for (int64_t j = 0; j < n[t]; j++) {
                    differ += !isfinite(a[t][j]) != !isfinite(b[t][j]);
                    nonfinite += !isfinite(a[t][j]);
                    total++;
                }
            CHECK(differ == 0 && nonfinite > 0 && nonfinite < total,
                  "%s[%lld] = %g: %lld gradients finite on one path only (%lld not finite)",
                  which ? "k" : "v", (long long)key, bad[i], (long long)differ,
                  (long long)nonfinite);
            grads_free(&g);
            grads_free(&g32);
            inputs_free(&in);
        }
}

static void simd_cases(void)
{
    if (ra_test_isa == RA_ISA_AMX) {
        amx_state = ra_cpu_amx_enable() ? "used" : "refused";
        /* a CPU with AMX whose tiles never ran would test only vdpbf16ps
         * here: a failure, unless the OS is known to refuse them */
        CHECK(ra_cpu_amx_enable() || getenv("RA_TEST_NO_AMX"),
              "the CPU has AMX and the OS refused its tiles (set RA_TEST_NO_AMX=1 where it "
              "must)");
    }
    RUN(test_against_float32);
    RUN(test_threads);
    RUN(test_fused_views);
    RUN(test_nonfinite);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    printf("attention_bf16_backward: worst error of the bf16 units against the float32 path, "
           "as a fraction of its bound: dq %.3g, dk %.3g, dv %.3g; AMX tiles %s\n",
           worst_seen[0], worst_seen[1], worst_seen[2], amx_state);
    return ra_test_summary("attention_bf16_backward");
}
