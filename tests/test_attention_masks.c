/*
 * test_attention_masks.c — attention with options' masks and logit changes
 * (window, chunk, padding, packed documents, scale, soft-capping, sinks):
 * the reference against a double-precision oracle written from transformers'
 * predicates (masking_utils.py, docs/MASKS.md), the flash forward and
 * backward against the reference on awkward shapes, identical bits for any
 * thread count, the backward against finite differences, and the checks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* One case: shapes, then the options.  pad: 0 none, 1 left padding (row b
 * has 3 b + 1 leading pads), 2 right padding, 3 row 0 left-padded and row 1
 * all padding.  docs: packed documents (0: one). */
typedef struct mask_case {
    int64_t b, s, h, hkv, d;
    int64_t window, chunk;
    double softcap, scale;
    int sinks, pad, docs;
} mask_case;

static const mask_case cases[] = {
    /* b, s, h, hkv, d, window, chunk, softcap, scale, sinks, pad, docs */
    {1, 1, 1, 1, 2, 1, 0, 0, 0, 0, 0, 0},
    {1, 7, 2, 1, 8, 1, 0, 0, 0, 0, 0, 0},
    {2, 65, 4, 2, 16, 3, 0, 5.0, 0, 0, 0, 0},
    {1, 130, 8, 2, 32, 100, 0, 0, 0, 1, 0, 0},       /* W not a multiple of the tile */
    {1, 130, 4, 1, 24, 500, 0, 0, 0, 0, 0, 0},       /* W >= S */
    {2, 150, 4, 2, 16, 64, 0, 0, 0.3, 0, 0, 0},      /* W = the tile */
    {2, 140, 2, 1, 16, 0, 50, 0, 0, 0, 1, 0},        /* chunks from the first real token */
    {1, 200, 4, 4, 8, 0, 64, 0, 0, 0, 0, 0},
    {1, 70, 2, 2, 8, 0, 1, 0, 0, 1, 0, 0},
    {2, 90, 4, 2, 16, 0, 0, 30.0, 0, 1, 2, 0},       /* right padding, cap, sinks */
    {2, 80, 6, 3, 10, 0, 0, 0, 0, 0, 3, 0},          /* a row of padding only */
    {1, 150, 4, 2, 16, 20, 0, 0, 0, 0, 0, 3},        /* packed documents and a window */
    {1, 129, 2, 1, 16, 0, 0, 0, 0, 1, 0, 4},
    {2, 170, 4, 1, 32, 30, 70, 20.0, 0, 1, 1, 0},    /* everything at once */
    {1, 300, 8, 1, 64, 128, 0, 0, 0, 1, 0, 0},       /* gpt-oss: window and sinks */
    {1, 260, 4, 2, 48, 100, 0, 50.0, 0.0625, 0, 0, 0}, /* Gemma 2: window, cap, scale */
};

enum { N_CASES = sizeof cases / sizeof cases[0] };

static int64_t n_q(const mask_case *c) { return c->b * c->s * c->h * c->d; }
static int64_t n_kv(const mask_case *c) { return c->b * c->s * c->hkv * c->d; }

/* The inputs of one case and its options (which point into it). */
typedef struct mask_inputs {
    float *q, *k, *v, sinks[16], dsinks[16];
    uint8_t *pad;
    int64_t cu[8];
    ra_attention_options o;
} mask_inputs;

static void inputs_make(mask_inputs *in, const mask_case *c, uint64_t seed)
{
    in->q = malloc(4 * n_q(c));
    in->k = malloc(4 * n_kv(c));
    in->v = malloc(4 * n_kv(c));
    ra_test_fill(in->q, n_q(c), seed);
    ra_test_fill(in->k, n_kv(c), seed + 1);
    ra_test_fill(in->v, n_kv(c), seed + 2);
    for (int64_t i = 0; i < n_q(c); i++) in->q[i] *= 3.0f; /* peakier softmax */
    in->o = ra_attention_options_init();
    in->o.window = c->window;
    in->o.chunk = c->chunk;
    in->o.softcap = c->softcap;
    in->o.scale = c->scale;
    for (int64_t h = 0; h < c->h; h++) in->sinks[h] = (float)h * 0.7f - 1.0f;
    if (c->h > 1) in->sinks[1] = 6.0f; /* a sink that outweighs the keys */
    if (c->sinks) in->o.sinks = in->sinks;
    in->pad = NULL;
    if (c->pad) {
        in->pad = malloc((size_t)(c->b * c->s));
        for (int64_t b = 0; b < c->b; b++)
            for (int64_t i = 0; i < c->s; i++) {
                int64_t n = 3 * b + 1 < c->s ? 3 * b + 1 : c->s - 1; /* pads per row */
                int real = c->pad == 2 ? i < c->s - n : i >= n;
                if (c->pad == 3) real = b == 0 ? i >= 5 : 0;
                in->pad[b * c->s + i] = (uint8_t)real;
            }
        in->o.padding_mask = in->pad;
    }
    if (c->docs) { /* documents of uneven lengths */
        for (int d = 0; d <= c->docs; d++) in->cu[d] = c->s * d * d / (c->docs * c->docs);
        in->o.cu_seqlens = in->cu;
        in->o.n_documents = c->docs;
    }
}

static void inputs_free(mask_inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->pad);
}

/* ---- the oracle: transformers' predicates, in double --------------------- */

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static int64_t doc_of(const mask_inputs *in, int64_t i)
{
    int64_t d = 0;
    while (in->o.cu_seqlens && in->cu[d + 1] <= i) d++;
    return d;
}

/* masking_utils.py: causal, sliding_window_overlay, chunked_overlay (with the
 * left-padding offset), padding_mask_function, packed_sequence_mask_function. */
static int sees(const mask_case *c, const mask_inputs *in, int64_t b, int64_t i, int64_t j)
{
    int64_t lp = 0;
    while (in->pad && lp < c->s && !in->pad[b * c->s + lp]) lp++;
    if (j > i) return 0;
    if (c->window && !(j > i - c->window)) return 0;
    if (c->chunk && floor_div(j - lp, c->chunk) != floor_div(i - lp, c->chunk)) return 0;
    if (in->pad && !in->pad[b * c->s + j]) return 0;
    return doc_of(in, i) == doc_of(in, j);
}

/* out [B, S, H, D] in double, padding queries 0, and lse [B, H, S]. */
static void oracle(double *out, double *lse, const mask_case *c, const mask_inputs *in)
{
    const int64_t S = c->s, H = c->h, D = c->d, rep = c->h / c->hkv;
    const double scale = c->scale ? c->scale : 1.0 / sqrt((double)D);
    double *w = malloc(sizeof(double) * S);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                double *o = out + ((b * S + i) * H + h) * D;
                const float *qi = in->q + ((b * S + i) * H + h) * D;
                memset(o, 0, sizeof(double) * D);
                lse[(b * H + h) * S + i] = -INFINITY;
                if (in->pad && !in->pad[b * S + i]) continue;
                double z = c->sinks ? exp(in->sinks[h]) : 0.0;
                for (int64_t j = 0; j < S; j++) {
                    w[j] = 0;
                    if (!sees(c, in, b, i, j)) continue;
                    const float *kj = in->k + ((b * S + j) * c->hkv + h / rep) * D;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += (double)qi[d] * kj[d];
                    s *= scale;
                    if (c->softcap) s = c->softcap * tanh(s / c->softcap);
                    w[j] = exp(s);
                    z += w[j];
                }
                for (int64_t j = 0; j < S; j++)
                    for (int64_t d = 0; d < D; d++)
                        o[d] += w[j] / z * in->v[((b * S + j) * c->hkv + h / rep) * D + d];
                lse[(b * H + h) * S + i] = log(z);
            }
    free(w);
}

/* ---- forward ------------------------------------------------------------- */

static ra_status run_forward(ra_context *ctx, const mask_case *c, mask_inputs *in,
                             ra_attention_path path, float *out, float *lse)
{
    ra_tensor q = ra_tensor_4d(in->q, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor k = ra_tensor_4d(in->k, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor v = ra_tensor_4d(in->v, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor o = ra_tensor_4d(out, RA_F32, c->b, c->s, c->h, c->d);
    in->o.path = path;
    return ra_attention_forward_lse(ctx, &o, lse, &q, &k, &v, &in->o);
}

/* Worst |lse - want| / (1 + |want|), -inf matching -inf; inf otherwise. */
static double lse_err(const float *lse, const double *want, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(want[i]) || isinf(lse[i])) {
            if (lse[i] != want[i]) return INFINITY;
            continue;
        }
        worst = fmax(worst, fabs(lse[i] - want[i]) / (1 + fabs(want[i])));
    }
    return worst;
}

/* The reference path equals the oracle to float32 rounding (1e-6 of
 * max|out|: both sum in double); padding queries are exactly 0 with lse
 * -inf.  Flash equals the reference to 2e-5 of max|out| (float32 sums in
 * another order, the online softmax's expf, vtanh's ~3e-7) and lse to
 * 1e-5 relative; threads 1, 2 and 3 give the same bits. */
static void test_forward(void)
{
    ra_context *ctx[3];
    for (int t = 0; t < 3; t++) CHECK(ra_context_create(&ctx[t], t + 1) == RA_OK, "ctx");
    for (int n = 0; n < N_CASES; n++) {
        const mask_case *c = &cases[n];
        mask_inputs in;
        inputs_make(&in, c, 100 + n);
        int64_t nl = c->b * c->h * c->s;
        double *want = malloc(8 * n_q(c)), *want_lse = malloc(8 * nl);
        float *ref = malloc(4 * n_q(c)), *ref_lse = malloc(4 * nl);
        float *fl = malloc(4 * n_q(c)), *fl_lse = malloc(4 * nl);
        float *fl2 = malloc(4 * n_q(c)), *fl2_lse = malloc(4 * nl);
        oracle(want, want_lse, c, &in);
        CHECK(run_forward(NULL, c, &in, RA_PATH_REFERENCE, ref, ref_lse) == RA_OK, "case %d: %s",
              n, ra_last_error());
        double e = ra_test_rel_err(ref, want, n_q(c));
        CHECK(e <= 1e-6, "case %d: reference vs oracle %.3g", n, e);
        e = lse_err(ref_lse, want_lse, nl);
        CHECK(e <= 1e-6, "case %d: reference lse vs oracle %.3g", n, e);
        CHECK(run_forward(ctx[0], c, &in, RA_PATH_FLASH, fl, fl_lse) == RA_OK, "case %d: %s", n,
              ra_last_error());
        e = ra_test_max_rel_diff(fl, ref, n_q(c));
        CHECK(e <= 2e-5, "case %d: flash vs reference %.3g", n, e);
        e = lse_err(fl_lse, want_lse, nl);
        CHECK(e <= 1e-5, "case %d: flash lse vs oracle %.3g", n, e);
        for (int64_t i = 0; in.pad && i < n_q(c); i++) /* padding queries */
            if (!in.pad[i / (c->h * c->d)] && (fl[i] != 0.0f || ref[i] != 0.0f)) {
                CHECK(0, "case %d: padding query element %lld is not 0", n, (long long)i);
                break;
            }
        for (int t = 1; t < 3; t++) {
            CHECK(run_forward(ctx[t], c, &in, RA_PATH_FLASH, fl2, fl2_lse) == RA_OK, "threads");
            CHECK(memcmp(fl, fl2, 4 * n_q(c)) == 0 && memcmp(fl_lse, fl2_lse, 4 * nl) == 0,
                  "case %d: %d threads change the bits", n, t + 1);
        }
        free(want);
        free(want_lse);
        free(ref);
        free(ref_lse);
        free(fl);
        free(fl_lse);
        free(fl2);
        free(fl2_lse);
        inputs_free(&in);
    }
    for (int t = 0; t < 3; t++) ra_context_destroy(ctx[t]);
}

/* ---- backward ------------------------------------------------------------ */

typedef struct grads {
    float *dq, *dk, *dv, dsinks[16];
} grads;

static ra_status run_backward(ra_context *ctx, const mask_case *c, mask_inputs *in,
                              ra_attention_path path, const float *dout, const float *out,
                              const float *lse, grads *g)
{
    ra_tensor q = ra_tensor_4d(in->q, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor k = ra_tensor_4d(in->k, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor v = ra_tensor_4d(in->v, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor o = ra_tensor_4d((float *)out, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dout_t = ra_tensor_4d((float *)dout, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dq = ra_tensor_4d(g->dq, RA_F32, c->b, c->s, c->h, c->d);
    ra_tensor dk = ra_tensor_4d(g->dk, RA_F32, c->b, c->s, c->hkv, c->d);
    ra_tensor dv = ra_tensor_4d(g->dv, RA_F32, c->b, c->s, c->hkv, c->d);
    in->o.path = path;
    in->o.dsinks = c->sinks ? g->dsinks : NULL;
    ra_status st = ra_attention_backward(ctx, &dq, &dk, &dv, &dout_t, &q, &k, &v, &o, lse, &in->o);
    in->o.dsinks = NULL;
    return st;
}

static void grads_make(grads *g, const mask_case *c)
{
    g->dq = malloc(4 * n_q(c));
    g->dk = malloc(4 * n_kv(c));
    g->dv = malloc(4 * n_kv(c));
    memset(g->dsinks, 0, sizeof g->dsinks);
}

static void grads_free(grads *g)
{
    free(g->dq);
    free(g->dk);
    free(g->dv);
}

/* Flash backward vs the reference's: 2e-5 of the largest gradient (float32
 * sums in tiles against double sums); the same bits on 1 and 3 threads. */
static void test_backward(void)
{
    ra_context *ctx1, *ctx3;
    CHECK(ra_context_create(&ctx1, 1) == RA_OK && ra_context_create(&ctx3, 3) == RA_OK, "ctx");
    for (int n = 0; n < N_CASES; n++) {
        const mask_case *c = &cases[n];
        mask_inputs in;
        inputs_make(&in, c, 300 + n);
        int64_t nl = c->b * c->h * c->s;
        float *out = malloc(4 * n_q(c)), *lse = malloc(4 * nl), *dout = malloc(4 * n_q(c));
        ra_test_fill(dout, n_q(c), 900 + n);
        grads ref, fl, fl3;
        grads_make(&ref, c);
        grads_make(&fl, c);
        grads_make(&fl3, c);
        CHECK(run_forward(ctx1, c, &in, RA_PATH_FLASH, out, lse) == RA_OK, "forward");
        CHECK(run_backward(NULL, c, &in, RA_PATH_REFERENCE, dout, out, lse, &ref) == RA_OK,
              "case %d: %s", n, ra_last_error());
        CHECK(run_backward(ctx1, c, &in, RA_PATH_FLASH, dout, out, lse, &fl) == RA_OK,
              "case %d: %s", n, ra_last_error());
        CHECK(run_backward(ctx3, c, &in, RA_PATH_FLASH, dout, out, lse, &fl3) == RA_OK, "3");
        double eq = ra_test_max_rel_diff(fl.dq, ref.dq, n_q(c));
        double ek = ra_test_max_rel_diff(fl.dk, ref.dk, n_kv(c));
        double ev = ra_test_max_rel_diff(fl.dv, ref.dv, n_kv(c));
        double es = ra_test_max_rel_diff(fl.dsinks, ref.dsinks, c->h);
        CHECK(eq <= 2e-5 && ek <= 2e-5 && ev <= 2e-5 && es <= 2e-5,
              "case %d: flash vs reference dq %.3g dk %.3g dv %.3g dsinks %.3g", n, eq, ek, ev, es);
        CHECK(memcmp(fl.dq, fl3.dq, 4 * n_q(c)) == 0 && memcmp(fl.dk, fl3.dk, 4 * n_kv(c)) == 0 &&
                  memcmp(fl.dv, fl3.dv, 4 * n_kv(c)) == 0 &&
                  memcmp(fl.dsinks, fl3.dsinks, sizeof fl.dsinks) == 0,
              "case %d: 3 threads change the gradients' bits", n);
        for (int64_t i = 0; in.pad && i < n_q(c); i++) /* padding queries */
            if (!in.pad[i / (c->h * c->d)] && (fl.dq[i] != 0.0f || ref.dq[i] != 0.0f)) {
                CHECK(0, "case %d: a padding query's dq element %lld is not 0", n, (long long)i);
                break;
            }
        grads_free(&ref);
        grads_free(&fl);
        grads_free(&fl3);
        free(out);
        free(lse);
        free(dout);
        inputs_free(&in);
    }
    ra_context_destroy(ctx1);
    ra_context_destroy(ctx3);
}

/* L = sum(w * out) through the reference path, in double. */
static double loss(const mask_case *c, mask_inputs *in, const float *w, float *out, float *lse)
{
    run_forward(NULL, c, in, RA_PATH_REFERENCE, out, lse);
    double sum = 0;
    for (int64_t i = 0; i < n_q(c); i++) sum += (double)w[i] * out[i];
    return sum;
}

/* The reference backward of soft-capping and sinks (with a window and
 * padding) against central differences of the reference forward, step
 * 1e-2: the float32 outputs' rounding (~1e-7 of L) over the step and the
 * step's O(h^2) error keep the difference under 2e-3 of the gradient's
 * scale. */
static void test_finite_differences(void)
{
    const mask_case c = {1, 12, 4, 2, 8, 5, 0, 2.0, 0, 1, 1, 0};
    mask_inputs in;
    inputs_make(&in, &c, 77);
    float *w = malloc(4 * n_q(&c)), *out = malloc(4 * n_q(&c)), *lse = malloc(4 * c.h * c.s);
    ra_test_fill(w, n_q(&c), 78);
    grads g;
    grads_make(&g, &c);
    loss(&c, &in, w, out, lse);
    CHECK(run_backward(NULL, &c, &in, RA_PATH_REFERENCE, w, out, lse, &g) == RA_OK, "%s",
          ra_last_error());
    float *const xs[4] = {in.q, in.k, in.v, in.sinks};
    const float *const gs[4] = {g.dq, g.dk, g.dv, g.dsinks};
    const int64_t ns[4] = {n_q(&c), n_kv(&c), n_kv(&c), c.h};
    static const char *const names[4] = {"dq", "dk", "dv", "dsinks"};
    const float h = 1e-2f;
    for (int x = 0; x < 4; x++) {
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < ns[x]; i++) scale = fmax(scale, fabs(gs[x][i]));
        for (int64_t i = 0; i < ns[x]; i += x == 3 ? 1 : 7) {
            float keep = xs[x][i];
            xs[x][i] = keep + h;
            double up = loss(&c, &in, w, out, lse);
            xs[x][i] = keep - h;
            double down = loss(&c, &in, w, out, lse);
            xs[x][i] = keep;
            worst = fmax(worst, fabs((up - down) / (2 * h) - gs[x][i]));
        }
        CHECK(scale > 0 && worst <= 2e-3 * scale, "%s: finite differences off by %.3g of %.3g",
              names[x], worst, scale);
    }
    grads_free(&g);
    free(w);
    free(out);
    free(lse);
    inputs_free(&in);
}


/* ---- the layer ----------------------------------------------------------- */

/* A layer with identity projections and no RoPE is its attention on
 * q = k = v = x: with the config's window, chunk and soft-cap, the weights'
 * sinks and the call's padding, it equals ra_attention with those options
 * (1e-6 of max|y|: the projections are exact, the paths the same), on both
 * paths; its backward's dsinks equal the attention backward's (and add up
 * when accumulating). */
static void test_layer(void)
{
    enum { B = 2, S = 40, H = 4, D = 8, DIM = H * D, N = B * S * DIM };
    static float eye[DIM * DIM], x[N], y[N], want[N], lse[B * H * S], dy[N], dx[N];
    static float dw[4][DIM * DIM], dq[N], dk[N], dv[N];
    float sinks[H] = {0.5f, -1.0f, 2.0f, 0.0f}, dsinks[H], dsinks_want[H];
    uint8_t pad[B * S];
    for (int i = 0; i < DIM; i++) eye[i * DIM + i] = 1.0f;
    ra_test_fill(x, N, 5);
    for (int i = 0; i < N; i++) x[i] *= 2.0f;
    ra_test_fill(dy, N, 6);
    for (int i = 0; i < B * S; i++) pad[i] = i >= S || i % S >= 3; /* row 0: 3 left pads */
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = DIM;
    lc.n_heads = H;
    lc.no_rope = 1;
    lc.window = 7;
    lc.chunk = 16;
    lc.softcap = 4.0;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = lw.wk = lw.wv = lw.wo = eye;
    lw.sinks = sinks;
    ra_layer *layer = NULL;
    ra_layer_tape *tape = NULL;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer: %s", ra_last_error());
    CHECK(ra_layer_tape_create(&tape, layer, B * S) == RA_OK, "tape");
    ra_attention_options o = ra_attention_options_init();
    o.window = lc.window;
    o.chunk = lc.chunk;
    o.softcap = lc.softcap;
    o.sinks = sinks;
    o.padding_mask = pad;
    ra_tensor t = ra_tensor_4d(x, RA_F32, B, S, H, D), tw = ra_tensor_4d(want, RA_F32, B, S, H, D);
    o.path = RA_PATH_REFERENCE;
    CHECK(ra_attention_forward_lse(NULL, &tw, lse, &t, &t, &t, &o) == RA_OK, "attention");
    ra_attention_options call = ra_attention_options_init();
    call.padding_mask = pad;
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        call.path = (ra_attention_path)path;
        CHECK(ra_layer_forward(NULL, layer, y, x, B, S, NULL, &call) == RA_OK, "%s",
              ra_last_error());
        double e = ra_test_max_rel_diff(y, want, N);
        CHECK(e <= 1e-6, "path %d: the layer vs its attention %.3g", path, e);
    }
    /* the backward's dsinks */
    call.path = RA_PATH_FLASH;
    CHECK(ra_layer_forward_train(NULL, layer, y, tape, x, B, S, NULL, &call) == RA_OK, "%s",
          ra_last_error());
    ra_layer_grads g = ra_layer_grads_init();
    g.dwq = dw[0], g.dwk = dw[1], g.dwv = dw[2], g.dwo = dw[3];
    CHECK(ra_layer_backward(NULL, layer, dx, &g, tape, dy) == RA_ERR_NULL &&
              strstr(ra_last_error(), "dsinks"),
          "no dsinks: %s", ra_last_error());
    g.dsinks = dsinks;
    CHECK(ra_layer_backward(NULL, layer, dx, &g, tape, dy) == RA_OK, "%s", ra_last_error());
    ra_tensor tdq = ra_tensor_4d(dq, RA_F32, B, S, H, D), tdk = ra_tensor_4d(dk, RA_F32, B, S, H, D);
    ra_tensor tdv = ra_tensor_4d(dv, RA_F32, B, S, H, D), tdy = ra_tensor_4d(dy, RA_F32, B, S, H, D);
    o.path = RA_PATH_FLASH;
    CHECK(ra_attention_forward_lse(NULL, &tw, lse, &t, &t, &t, &o) == RA_OK, "forward");
    o.dsinks = dsinks_want;
    CHECK(ra_attention_backward(NULL, &tdq, &tdk, &tdv, &tdy, &t, &t, &t, &tw, lse, &o) == RA_OK,
          "%s", ra_last_error());
    CHECK(memcmp(dsinks, dsinks_want, sizeof dsinks) == 0, "the layer's dsinks");
    /* the tape keeps its own copy of the padding: the caller's may change */
    static float dx_again[N];
    memset(pad, 1, sizeof pad);
    CHECK(ra_layer_backward(NULL, layer, dx_again, &g, tape, dy) == RA_OK, "%s",
          ra_last_error());
    CHECK(memcmp(dx, dx_again, sizeof dx) == 0, "the backward read the caller's padding again");
    g.accumulate = 1;
    CHECK(ra_layer_backward(NULL, layer, dx, &g, tape, dy) == RA_OK, "%s", ra_last_error());
    for (int h = 0; h < H; h++)
        CHECK(dsinks[h] == dsinks_want[h] + dsinks_want[h], "accumulated dsinks[%d]", h);
    /* masks the layer owns are refused in the call's options */
    call.window = 3;
    CHECK(ra_layer_forward(NULL, layer, y, x, B, S, NULL, &call) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "from its config"),
          "a window in the options: %s", ra_last_error());
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);
}

/* Soft-capping keeps logits beyond float32's range finite: q scaled by
 * 1e30 gives dot products of +-Inf, capped to +-c, on every path alike
 * (2e-5 of max|out|, as test_forward); a NaN in q stays in its row. */
static void test_softcap_extremes(void)
{
    const mask_case c = {1, 70, 2, 1, 16, 0, 0, 5.0, 0, 1, 0, 0};
    mask_inputs in;
    inputs_make(&in, &c, 55);
    for (int64_t i = 0; i < n_q(&c); i++) in.q[i] *= 1e30f;
    in.q[(10 * c.h + 1) * c.d + 3] = NAN; /* token 10, head 1 */
    float *ref = malloc(4 * n_q(&c)), *fl = malloc(4 * n_q(&c)), *lse = malloc(4 * c.h * c.s);
    CHECK(run_forward(NULL, &c, &in, RA_PATH_REFERENCE, ref, lse) == RA_OK, "reference");
    CHECK(run_forward(NULL, &c, &in, RA_PATH_FLASH, fl, lse) == RA_OK, "flash");
    double worst = 0, top = 0;
    for (int64_t i = 0; i < n_q(&c); i++) {
        int64_t token = i / (c.h * c.d), head = i / c.d % c.h;
        int nan_row = token == 10 && head == 1;
        CHECK(nan_row ? isnan(fl[i]) : isfinite(fl[i]), "element %lld: %g", (long long)i,
              (double)fl[i]);
        if (nan_row || !isfinite(fl[i])) continue;
        worst = fmax(worst, fabs(fl[i] - ref[i]));
        top = fmax(top, fabs(ref[i]));
    }
    CHECK(worst <= 2e-5 * top, "flash vs reference %.3g of %.3g", worst, top);
    free(ref);
    free(fl);
    free(lse);
    inputs_free(&in);
}

/* The layer through a KV cache, with its window, soft-cap and sinks: a
 * prefill of 5 then steps of 1, 3 and 2 tokens, on a full cache and on a
 * window cache (a ring of W - 1 + 3 slots, wrapping several times), equal
 * the layer without a cache to 1e-5 of max|y| (float32 sums in another
 * order); a window cache narrower than the layer's window is refused. */
static void test_layer_cached(void)
{
    enum { B = 2, S = 30, DIM = 32, H = 4, HKV = 2, D = 8, W = 6 };
    static float wq[DIM * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * DIM];
    static float x[B * S * DIM], want[B * S * DIM], y[B * S * DIM], part[B * 5 * DIM];
    static float xs[B * 5 * DIM];
    float sinks[H] = {0.3f, -0.5f, 1.5f, 0.0f};
    ra_test_fill(wq, DIM * DIM, 11);
    ra_test_fill(wk, HKV * D * DIM, 12);
    ra_test_fill(wv, HKV * D * DIM, 13);
    ra_test_fill(wo, DIM * DIM, 14);
    ra_test_fill(x, B * S * DIM, 15);
    ra_rope_config rope = ra_rope_config_default(D);
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = DIM, lc.n_heads = H, lc.n_kv_heads = HKV, lc.rope = &rope;
    lc.window = W, lc.softcap = 3.0;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = wq, lw.wk = wk, lw.wv = wv, lw.wo = wo, lw.sinks = sinks;
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &lc, &lw) == RA_OK, "layer: %s", ra_last_error());
    CHECK(ra_layer_forward(NULL, layer, want, x, B, S, NULL, NULL) == RA_OK, "forward");
    static const int64_t steps[] = {5, 1, 3, 2};
    for (int ring = 0; ring < 2; ring++) {
        ra_kv_cache *cache = NULL;
        CHECK((ring ? ra_kv_cache_create_window(&cache, B, W, 5, HKV, D, RA_F32)
                    : ra_kv_cache_create(&cache, B, S, HKV, D, RA_F32)) == RA_OK, "cache: %s",
              ra_last_error());
        for (int64_t first = 0, k = 0, n; first < S; first += n, k++) {
            n = k == 0 ? steps[0] : steps[1 + (k - 1) % 3];
            n = n < S - first ? n : S - first;
            for (int64_t b = 0; b < B; b++)
                memcpy(xs + b * n * DIM, x + (b * S + first) * DIM, sizeof(float) * n * DIM);
            CHECK(ra_layer_forward_cached(NULL, layer, cache, part, xs, B, n, NULL) == RA_OK,
                  "ring %d, tokens %lld: %s", ring, (long long)first, ra_last_error());
            for (int64_t b = 0; b < B; b++)
                memcpy(y + (b * S + first) * DIM, part + b * n * DIM, sizeof(float) * n * DIM);
        }
        double e = ra_test_max_rel_diff(y, want, B * S * DIM);
        CHECK(e <= 1e-5, "ring %d: the cached layer vs the layer %.3g", ring, e);
        ra_kv_cache_destroy(cache);
    }
    ra_kv_cache *narrow = NULL;
    CHECK(ra_kv_cache_create_window(&narrow, B, W - 1, 4, HKV, D, RA_F32) == RA_OK, "narrow");
    CHECK(ra_layer_forward_cached(NULL, layer, narrow, part, xs, B, 1, NULL) == RA_ERR_ARGUMENT,
          "a window cache narrower than the window: %s", ra_last_error());
    ra_kv_cache_destroy(narrow);
    ra_layer_destroy(layer);
}

/* Logits all -Inf (q.k overflowing below -FLT_MAX): with sinks the sink
 * takes all the weight and the row is 0 on both paths (without, NaN, as a
 * softmax: "Numbers at the edges" in ropeattn.h). */
static void test_sinks_all_minus_inf(void)
{
    enum { S = 70, H = 2, D = 8, N = S * H * D };
    static float q[N], k[N], v[N], out[N];
    float sinks[H] = {0.5f, -2.0f};
    for (int i = 0; i < N; i++) q[i] = -1e30f, k[i] = 1e30f, v[i] = (float)(i % 7) - 3.0f;
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), to = ra_tensor_4d(out, RA_F32, 1, S, H, D);
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        ra_attention_options o = ra_attention_options_init();
        o.path = (ra_attention_path)path;
        o.sinks = sinks;
        CHECK(ra_attention(NULL, &to, &tq, &tk, &tv, &o) == RA_OK, "path %d", path);
        int zeros = 1;
        for (int i = 0; i < N; i++) zeros &= out[i] == 0.0f;
        CHECK(zeros, "path %d: a row of -Inf logits with a sink is not 0", path);
        o.sinks = NULL;
        CHECK(ra_attention(NULL, &to, &tq, &tk, &tv, &o) == RA_OK && isnan(out[0]),
              "path %d: without a sink, NaN (%g)", path, (double)out[0]);
    }
}

/* Padding tokens holding NaN in q, k and v change nothing: real rows give
 * the same bits as with finite padding, padding rows and their dq are 0,
 * on both paths, forward and backward. */
static void test_padding_nonfinite(void)
{
    const mask_case c = {2, 70, 4, 2, 8, 0, 0, 0, 0, 1, 1, 0};
    const int64_t nl = c.b * c.h * c.s;
    for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
        mask_inputs in[2];
        float *out[2], *lse[2], *dout = malloc(4 * n_q(&c));
        grads g[2];
        ra_test_fill(dout, n_q(&c), 5);
        for (int t = 0; t < 2; t++) {
            inputs_make(&in[t], &c, 66);
            out[t] = malloc(4 * n_q(&c));
            lse[t] = malloc(4 * nl);
            grads_make(&g[t], &c);
            for (int64_t tok = 0; t == 1 && tok < c.b * c.s; tok++) {
                if (in[t].pad[tok]) continue;
                in[t].q[tok * c.h * c.d] = NAN;
                in[t].k[tok * c.hkv * c.d + 1] = NAN;
                in[t].v[tok * c.hkv * c.d + 2] = INFINITY;
            }
            CHECK(run_forward(NULL, &c, &in[t], (ra_attention_path)path, out[t], lse[t]) ==
                      RA_OK, "forward");
            CHECK(run_backward(NULL, &c, &in[t], (ra_attention_path)path, dout, out[t], lse[t],
                               &g[t]) == RA_OK, "backward");
        }
        for (int64_t tok = 0; tok < c.b * c.s; tok++) {
            size_t q_row = (size_t)(tok * c.h * c.d), kv_row = (size_t)(tok * c.hkv * c.d);
            size_t qn = 4 * (size_t)(c.h * c.d), kvn = 4 * (size_t)(c.hkv * c.d);
            if (in[0].pad[tok]) {
                CHECK(!memcmp(out[0] + q_row, out[1] + q_row, qn) &&
                          !memcmp(g[0].dq + q_row, g[1].dq + q_row, qn) &&
                          !memcmp(g[0].dk + kv_row, g[1].dk + kv_row, kvn) &&
                          !memcmp(g[0].dv + kv_row, g[1].dv + kv_row, kvn),
                      "path %d, token %lld: NaN in padding moved a real row", path,
                      (long long)tok);
            } else {
                int zero = 1;
                for (int64_t e = 0; e < c.h * c.d; e++)
                    zero &= out[1][q_row + e] == 0.0f && g[1].dq[q_row + e] == 0.0f;
                CHECK(zero, "path %d, token %lld: a padding row or its dq is not 0", path,
                      (long long)tok);
            }
        }
        for (int t = 0; t < 2; t++) {
            inputs_free(&in[t]);
            free(out[t]);
            free(lse[t]);
            grads_free(&g[t]);
        }
        free(dout);
    }
}

static void simd_cases(void)
{
    RUN(test_forward);
    RUN(test_softcap_extremes);
    RUN(test_sinks_all_minus_inf);
    RUN(test_padding_nonfinite);
    RUN(test_backward);
    RUN(test_layer);
    RUN(test_layer_cached);
}

/* ---- checks -------------------------------------------------------------- */

static void test_checks(void)
{
    enum { S = 4, H = 2, D = 8, N = S * H * D };
    float q[N], k[N], v[N], out[N], lse[H * S];
    ra_test_fill(q, N, 1);
    ra_test_fill(k, N, 2);
    ra_test_fill(v, N, 3);
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), to = ra_tensor_4d(out, RA_F32, 1, S, H, D);
    float sinks[H] = {0.5f, NAN};
    int64_t cu_bad[4] = {0, 3, 3, 4}, cu_short[2] = {0, 3};
    struct {
        ra_attention_options o;
        const char *detail;
    } bad[9];
    for (int i = 0; i < 9; i++) bad[i].o = ra_attention_options_init();
    bad[0].o.window = -1, bad[0].detail = "window -1";
    bad[1].o.chunk = -2, bad[1].detail = "chunk -2";
    bad[2].o.softcap = -1, bad[2].detail = "softcap -1";
    bad[3].o.scale = NAN, bad[3].detail = "scale nan";
    bad[4].o.sinks = sinks, bad[4].detail = "sinks[1]";
    bad[5].o.cu_seqlens = cu_bad, bad[5].o.n_documents = 3, bad[5].detail = "cu_seqlens[2]";
    bad[6].o.cu_seqlens = cu_short, bad[6].o.n_documents = 1, bad[6].detail = "from 0 to S = 4";
    bad[7].o.n_documents = 1, bad[7].detail = "cu_seqlens NULL";
    bad[8].o.dsinks = sinks, bad[8].detail = "dsinks without sinks";
    for (int i = 0; i < 9; i++) {
        memset(out, 0x7f, sizeof out);
        ra_status st = ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &bad[i].o);
        CHECK(st == RA_ERR_ARGUMENT && strstr(ra_last_error(), bad[i].detail),
              "case %d: status %d, \"%s\"", i, (int)st, ra_last_error());
        for (size_t b = 0; b < sizeof out; b++)
            if (((unsigned char *)out)[b] != 0x7f) {
                CHECK(0, "case %d: a refused call wrote out", i);
                break;
            }
    }
    /* outputs must not overlap the options' arrays */
    ra_attention_options o = ra_attention_options_init();
    memset(out, 0, sizeof out);
    o.sinks = out + N - H; /* the last row of out */
    ra_status st = ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o);
    CHECK(st == RA_ERR_ARGUMENT && strstr(ra_last_error(), "out overlaps sinks"),
          "out over sinks: %d, %s", (int)st, ra_last_error());
    o = ra_attention_options_init();
    o.padding_mask = (const uint8_t *)(lse + 1);
    st = ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o);
    CHECK(st == RA_ERR_ARGUMENT && strstr(ra_last_error(), "lse overlaps padding_mask"),
          "lse over the padding: %d, %s", (int)st, ra_last_error());
    o = ra_attention_options_init();
    o.path = RA_PATH_REFERENCE; /* checks only: no kernel runs */
    float dq[N], dv[N];
    _Alignas(int64_t) float dk[N]; /* cu_seqlens inside it: int64-aligned */
    ra_tensor tdq = ra_tensor_4d(dq, RA_F32, 1, S, H, D), tdk = ra_tensor_4d(dk, RA_F32, 1, S, H, D);
    ra_tensor tdv = ra_tensor_4d(dv, RA_F32, 1, S, H, D);
    CHECK(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, &o) == RA_OK, "forward");
    int64_t cu[2] = {0, S};
    memcpy(dk + 6, cu, sizeof cu);
    o.cu_seqlens = (const int64_t *)(void *)(dk + 6);
    o.n_documents = 1;
    st = ra_attention_backward(NULL, &tdq, &tdk, &tdv, &to, &tq, &tk, &tv, &to, lse, &o);
    CHECK(st == RA_ERR_ARGUMENT && strstr(ra_last_error(), "dk overlaps cu_seqlens"),
          "dk over the documents: %d, %s", (int)st, ra_last_error());
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    RUN(test_finite_differences);
    RUN(test_checks);
    return ra_test_summary("attention_masks");
}
