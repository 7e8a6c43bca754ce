/*
 * bench_attention.c — causal GQA attention (the flash path through
 * ra_attention) at three prompt lengths, its backward at S = 2048 (both at
 * S = 2048 also with q, k and v in bf16), and the whole LLaMA-2-7B-shaped
 * layer beside its four projection GEMMs timed alone, and its backward
 * beside its forward.
 *
 *   q, out: [1, S, 32, 128]   k, v: [1, S, 8, 128]   x, y: [1, S, 4096]
 */
#include <math.h>
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "bench.h"

#define HEADS 32
#define KV_HEADS 8
#define HEAD_DIM 128
#define DIM (HEADS * HEAD_DIM)
/* Longest prompt whose reference path (an [S, S] score matrix per head) is
 * quick enough to check the flash path against. */
#define MAX_CHECKED_SEQ 512
/* How far the flash path may be from the reference path, over max |out|:
 * float32 q, k, v; bf16 ones, whose flash path on the bf16 units rounds the
 * probabilities to bf16 before P v (ra_attention: 2^-9 max |v| + 2e-5 max
 * |v| at worst, and max |v| here is about max |out|, its first row's). */
#define FLASH_TOLERANCE 1e-4
#define FLASH_BF16_TOLERANCE (0x1p-9 + 2e-5)

typedef struct attention_state {
    int64_t seq;
    float *q, *k, *v, *out; /* see the shapes above */
    uint16_t *q16, *k16, *v16; /* q, k, v rounded to bf16 (bf16 cases), else NULL */
    ra_attention_options options; /* the masks of a masked case */
    float sinks[HEADS];
    void *mask;     /* a masked case's attn_mask [1, 1, S, S] (RA_BOOL or RA_F32), or NULL */
    ra_tensor mask_view;
} attention_state;

/* A masked case's parameters: seq first, as the plain cases' int64_t. */
typedef struct masked_params {
    int64_t seq, window;
    double softcap;
    int sinks;
    int non_causal; /* no causal mask (an encoder's prefill) */
    int half_mask;       /* an attn_mask whose odd 64-key stripes are empty:
                            half the key tiles skipped */
    ra_dtype mask_dtype; /* its dtype: RA_BOOL (1 and 0) or RA_F32 (additive:
                            0 and -Inf) */
} masked_params;

static void attention_teardown(void *state)
{
    attention_state *s = state;
    if (!s) return;
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->out);
    free(s->q16);
    free(s->k16);
    free(s->v16);
    free(s->mask);
    free(s);
}

static int attention_setup(const void *params, ra_context *ctx, void **state)
{
    (void)ctx;
    attention_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for attention");
    s->seq = *(const int64_t *)params;
    s->q = bench_random_floats(s->seq * HEADS * HEAD_DIM, 8);
    s->k = bench_random_floats(s->seq * KV_HEADS * HEAD_DIM, 9);
    s->v = bench_random_floats(s->seq * KV_HEADS * HEAD_DIM, 10);
    s->out = bench_random_floats(s->seq * HEADS * HEAD_DIM, 11);
    s->options = ra_attention_options_init();
    if (!s->q || !s->k || !s->v || !s->out)
        return cli_fail(EXIT_FAIL, "bench: out of memory for attention");
    return 0;
}

/* x rounded to bf16, or NULL out of memory. */
static uint16_t *to_bf16(const float *x, int64_t n)
{
    uint16_t *y = malloc((size_t)n * sizeof *y);
    if (y) ra_convert(y, RA_BF16, x, RA_F32, n);
    return y;
}

/* attention_setup, then q, k and v rounded to bf16 (the case runs on them). */
static int bf16_setup(const void *params, ra_context *ctx, void **state)
{
    if (attention_setup(params, ctx, state)) return 1;
    attention_state *s = *state;
    s->q16 = to_bf16(s->q, s->seq * HEADS * HEAD_DIM);
    s->k16 = to_bf16(s->k, s->seq * KV_HEADS * HEAD_DIM);
    s->v16 = to_bf16(s->v, s->seq * KV_HEADS * HEAD_DIM);
    if (!s->q16 || !s->k16 || !s->v16)
        return cli_fail(EXIT_FAIL, "bench: out of memory for attention");
    return 0;
}

/* s's options: the case's window, soft-cap (Gemma 2's 50), sinks
 * (gpt-oss's, one per head around 0), non_causal and half-empty attn_mask. */
static int masked_options(attention_state *s, const masked_params *m)
{
    s->options = ra_attention_options_init();
    s->options.window = m->window;
    s->options.softcap = m->softcap;
    for (int h = 0; h < HEADS; h++) s->sinks[h] = (float)(h % 5) * 0.5f - 1.0f;
    if (m->sinks) s->options.sinks = s->sinks;
    s->options.non_causal = m->non_causal;
    if (!m->half_mask) return 0;
    const int64_t n = m->seq * m->seq;
    s->mask = malloc((size_t)n * ra_dtype_size(m->mask_dtype));
    if (!s->mask) return cli_fail(EXIT_FAIL, "bench: out of memory for attention");
    for (int64_t i = 0; i < n; i++) {
        const int seen = (i % m->seq / 64) % 2 == 0;
        if (m->mask_dtype == RA_BOOL) ((uint8_t *)s->mask)[i] = (uint8_t)seen;
        else ((float *)s->mask)[i] = seen ? 0.0f : -INFINITY;
    }
    s->mask_view = (ra_tensor){s->mask, m->mask_dtype, {1, 1, m->seq, m->seq}, {0, 0, m->seq, 1}};
    s->options.attn_mask = &s->mask_view;
    return 0;
}

/* attention_setup, then the case's masks (masked_options). */
static int masked_setup(const void *params, ra_context *ctx, void **state)
{
    const masked_params *m = params;
    if (attention_setup(&m->seq, ctx, state)) return 1;
    return masked_options(*state, m);
}

static ra_status attention_path(attention_state *s, ra_context *ctx, ra_attention_path path,
                                float *out)
{
    ra_tensor q = ra_tensor_4d(s->q, RA_F32, 1, s->seq, HEADS, HEAD_DIM);
    ra_tensor k = ra_tensor_4d(s->k, RA_F32, 1, s->seq, KV_HEADS, HEAD_DIM);
    ra_tensor v = ra_tensor_4d(s->v, RA_F32, 1, s->seq, KV_HEADS, HEAD_DIM);
    ra_tensor o = ra_tensor_4d(out, RA_F32, 1, s->seq, HEADS, HEAD_DIM);
    if (s->q16) {
        q = ra_tensor_4d(s->q16, RA_BF16, 1, s->seq, HEADS, HEAD_DIM);
        k = ra_tensor_4d(s->k16, RA_BF16, 1, s->seq, KV_HEADS, HEAD_DIM);
        v = ra_tensor_4d(s->v16, RA_BF16, 1, s->seq, KV_HEADS, HEAD_DIM);
    }
    ra_attention_options options = s->options;
    options.path = path;
    return ra_attention(ctx, &o, &q, &k, &v, &options);
}

static ra_status attention_run(void *state, ra_context *ctx)
{
    attention_state *s = state;
    return attention_path(s, ctx, RA_PATH_FLASH, s->out);
}

static int all_finite(const float *x, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return cli_fail(EXIT_FAIL, "bench: %s gave %g at %lld", what,
                                             x[i], (long long)i);
    return 0;
}

/* Flash against the reference path where that is quick, else finite. */
static int attention_check(void *state, ra_context *ctx)
{
    attention_state *s = state;
    int64_t n = s->seq * HEADS * HEAD_DIM;
    if (s->seq > MAX_CHECKED_SEQ) return all_finite(s->out, n, "attention");
    float *reference = malloc((size_t)n * sizeof(float));
    if (!reference) return cli_fail(EXIT_FAIL, "bench: out of memory for attention's check");
    ra_status status = attention_path(s, ctx, RA_PATH_REFERENCE, reference);
    double diff = status == RA_OK ? bench_max_rel_diff(s->out, reference, n) : 0;
    free(reference);
    if (status != RA_OK) return cli_fail_status(status, "bench: reference attention");
    if (!(diff <= (s->q16 ? FLASH_BF16_TOLERANCE : FLASH_TOLERANCE)))
        return cli_fail(EXIT_FAIL, "bench: flash attention differs from the reference by %.2e",
                        diff);
    return 0;
}

/* ---- the backward ----------------------------------------------------------- */

/* The forward's q, k, v and out, its lse [1, H, S], and the backward's dout,
 * dq [1, S, H, D], dk and dv [1, S, Hkv, D]. */
typedef struct backward_state {
    attention_state fwd;
    float *lse, *dout, *dq, *dk, *dv;
} backward_state;

static void backward_teardown(void *state)
{
    backward_state *s = state;
    if (!s) return;
    free(s->fwd.q);
    free(s->fwd.k);
    free(s->fwd.v);
    free(s->fwd.out);
    free(s->fwd.q16);
    free(s->fwd.k16);
    free(s->fwd.v16);
    free(s->fwd.mask);
    free(s->lse);
    free(s->dout);
    free(s->dq);
    free(s->dk);
    free(s->dv);
    free(s);
}

/* The forward (with lse) on the state's q, k and v (their bf16 copies where
 * made) under its options, untimed: the backward's out and lse. */
static int backward_forward(backward_state *s, ra_context *ctx)
{
    attention_state *f = &s->fwd;
    const int bf16 = f->q16 != NULL;
    const ra_dtype dt = bf16 ? RA_BF16 : RA_F32;
    ra_tensor q = ra_tensor_4d(bf16 ? (void *)f->q16 : f->q, dt, 1, f->seq, HEADS, HEAD_DIM);
    ra_tensor k = ra_tensor_4d(bf16 ? (void *)f->k16 : f->k, dt, 1, f->seq, KV_HEADS, HEAD_DIM);
    ra_tensor v = ra_tensor_4d(bf16 ? (void *)f->v16 : f->v, dt, 1, f->seq, KV_HEADS, HEAD_DIM);
    ra_tensor o = ra_tensor_4d(f->out, RA_F32, 1, f->seq, HEADS, HEAD_DIM);
    ra_status status = ra_attention_forward_lse(ctx, &o, s->lse, &q, &k, &v, &f->options);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: the forward before the backward");
}

/* Inputs as the forward's, then the forward itself (with lse), untimed. */
static int backward_setup(const void *params, ra_context *ctx, void **state)
{
    backward_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the attention backward");
    attention_state *f = &s->fwd;
    f->seq = *(const int64_t *)params;
    const int64_t n_q = f->seq * HEADS * HEAD_DIM, n_kv = f->seq * KV_HEADS * HEAD_DIM;
    f->q = bench_random_floats(n_q, 8);
    f->k = bench_random_floats(n_kv, 9);
    f->v = bench_random_floats(n_kv, 10);
    f->out = bench_random_floats(n_q, 11);
    s->lse = bench_random_floats(HEADS * f->seq, 19);
    s->dout = bench_random_floats(n_q, 20);
    s->dq = bench_random_floats(n_q, 21);
    s->dk = bench_random_floats(n_kv, 22);
    s->dv = bench_random_floats(n_kv, 23);
    f->options = ra_attention_options_init();
    if (!f->q || !f->k || !f->v || !f->out || !s->lse || !s->dout || !s->dq || !s->dk || !s->dv)
        return cli_fail(EXIT_FAIL, "bench: out of memory for the attention backward");
    return backward_forward(s, ctx);
}

/* backward_setup, then q, k and v rounded to bf16 and the forward again on
 * them (its out and lse), untimed: the case runs the backward on them. */
static int bf16_backward_setup(const void *params, ra_context *ctx, void **state)
{
    if (backward_setup(params, ctx, state)) return 1;
    backward_state *s = *state;
    attention_state *f = &s->fwd;
    f->q16 = to_bf16(f->q, f->seq * HEADS * HEAD_DIM);
    f->k16 = to_bf16(f->k, f->seq * KV_HEADS * HEAD_DIM);
    f->v16 = to_bf16(f->v, f->seq * KV_HEADS * HEAD_DIM);
    if (!f->q16 || !f->k16 || !f->v16)
        return cli_fail(EXIT_FAIL, "bench: out of memory for the attention backward");
    return backward_forward(s, ctx);
}

/* backward_setup (seq), then the case's masks (masked_options) and the
 * forward again under them (its out and lse). */
static int masked_backward_setup(const void *params, ra_context *ctx, void **state)
{
    const masked_params *m = params;
    if (backward_setup(&m->seq, ctx, state)) return 1;
    backward_state *s = *state;
    if (masked_options(&s->fwd, m)) return 1;
    return backward_forward(s, ctx);
}

/* The backward on q, k and v, or on their bf16 copies where setup made them. */
static ra_status backward_run(void *state, ra_context *ctx)
{
    backward_state *s = state;
    const int64_t seq = s->fwd.seq;
    const int bf16 = s->fwd.q16 != NULL;
    const ra_dtype dt = bf16 ? RA_BF16 : RA_F32;
    ra_tensor q = ra_tensor_4d(bf16 ? (void *)s->fwd.q16 : s->fwd.q, dt, 1, seq, HEADS, HEAD_DIM);
    ra_tensor k = ra_tensor_4d(bf16 ? (void *)s->fwd.k16 : s->fwd.k, dt, 1, seq, KV_HEADS,
                               HEAD_DIM);
    ra_tensor v = ra_tensor_4d(bf16 ? (void *)s->fwd.v16 : s->fwd.v, dt, 1, seq, KV_HEADS,
                               HEAD_DIM);
    ra_tensor o = ra_tensor_4d(s->fwd.out, RA_F32, 1, seq, HEADS, HEAD_DIM);
    ra_tensor dout = ra_tensor_4d(s->dout, RA_F32, 1, seq, HEADS, HEAD_DIM);
    ra_tensor dq = ra_tensor_4d(s->dq, RA_F32, 1, seq, HEADS, HEAD_DIM);
    ra_tensor dk = ra_tensor_4d(s->dk, RA_F32, 1, seq, KV_HEADS, HEAD_DIM);
    ra_tensor dv = ra_tensor_4d(s->dv, RA_F32, 1, seq, KV_HEADS, HEAD_DIM);
    return ra_attention_backward(ctx, &dq, &dk, &dv, &dout, &q, &k, &v, &o, s->lse,
                                 &s->fwd.options);
}

/* The reference backward at S = 2048 takes minutes: finite gradients here;
 * tests/test_attention_backward.c checks flash against it on many shapes. */
static int backward_check(void *state, ra_context *ctx)
{
    (void)ctx;
    backward_state *s = state;
    const int64_t n_q = s->fwd.seq * HEADS * HEAD_DIM, n_kv = s->fwd.seq * KV_HEADS * HEAD_DIM;
    if (all_finite(s->dq, n_q, "the attention backward's dq")) return 1;
    if (all_finite(s->dk, n_kv, "the attention backward's dk")) return 1;
    return all_finite(s->dv, n_kv, "the attention backward's dv");
}

typedef struct layer_state {
    int64_t seq;
    float *weights, *x, *y; /* wq | wk | wv | wo, [1, S, dim] x 2 */
    ra_layer *layer;
} layer_state;

static void layer_teardown(void *state)
{
    layer_state *s = state;
    if (!s) return;
    ra_layer_destroy(s->layer);
    free(s->weights);
    free(s->x);
    free(s->y);
    free(s);
}

static int layer_setup(const void *params, ra_context *ctx, void **state)
{
    (void)ctx;
    layer_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the layer");
    s->seq = *(const int64_t *)params;
    const int64_t kv = KV_HEADS * HEAD_DIM;
    s->weights = bench_random_floats(2 * DIM * DIM + 2 * kv * DIM, 12);
    s->x = bench_random_floats(s->seq * DIM, 13);
    s->y = bench_random_floats(s->seq * DIM, 14);
    if (!s->weights || !s->x || !s->y)
        return cli_fail(EXIT_FAIL, "bench: out of memory for the layer");
    /* Uniform in [-1, 1) scaled to nn.Linear's 1 / sqrt(in_features). */
    for (int64_t i = 0; i < 2 * DIM * DIM + 2 * kv * DIM; i++) s->weights[i] /= 64.0f;
    ra_rope_config config_rope = ra_rope_config_default(HEAD_DIM);
    ra_layer_config config = {.struct_size = sizeof config, .dim = DIM, .n_heads = HEADS,
                              .n_kv_heads = KV_HEADS,
                              .head_dim = HEAD_DIM, .rope = &config_rope};
    config_rope.table_size = s->seq;
    const float *wq = s->weights, *wk = wq + DIM * DIM, *wv = wk + kv * DIM, *wo = wv + kv * DIM;
    ra_layer_weights weights = {.struct_size = sizeof weights, .wq = wq, .wk = wk, .wv = wv,
                                .wo = wo};
    ra_status status = ra_layer_create(&s->layer, &config, &weights);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: cannot create the layer");
}

static ra_status layer_run(void *state, ra_context *ctx)
{
    layer_state *s = state;
    ra_attention_options options = {.struct_size = sizeof options, .path = RA_PATH_FLASH};
    return ra_layer_forward(ctx, s->layer, s->y, s->x, 1, s->seq, NULL, &options);
}

static int layer_check(void *state, ra_context *ctx)
{
    (void)ctx;
    layer_state *s = state;
    return all_finite(s->y, s->seq * DIM, "the layer");
}

/* ---- the layer's backward ------------------------------------------------ */

/* The layer and its training forward (untimed, in setup), then the timed
 * backward: dy, dx [1, S, dim]; dw = dwq | dwk | dwv | dwo, overwritten. */
typedef struct layer_backward_state {
    layer_state *fwd; /* the layer, x and y */
    ra_layer_tape *tape;
    float *dy, *dx, *dw;
} layer_backward_state;

static void layer_backward_teardown(void *state)
{
    layer_backward_state *s = state;
    if (!s) return;
    layer_teardown(s->fwd);
    ra_layer_tape_destroy(s->tape);
    free(s->dy);
    free(s->dx);
    free(s->dw);
    free(s);
}

static int layer_backward_setup(const void *params, ra_context *ctx, void **state)
{
    layer_backward_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the layer's backward");
    void *fwd = NULL;
    int failed = layer_setup(params, ctx, &fwd);
    s->fwd = fwd;
    if (failed) return failed;
    const int64_t seq = s->fwd->seq, kv = KV_HEADS * HEAD_DIM;
    s->dy = bench_random_floats(seq * DIM, 24);
    s->dx = bench_random_floats(seq * DIM, 25);
    s->dw = bench_random_floats(2 * DIM * DIM + 2 * kv * DIM, 26);
    if (!s->dy || !s->dx || !s->dw)
        return cli_fail(EXIT_FAIL, "bench: out of memory for the layer's backward");
    ra_attention_options options = {.struct_size = sizeof options, .path = RA_PATH_FLASH};
    ra_status status = ra_layer_tape_create(&s->tape, s->fwd->layer, seq);
    if (status == RA_OK)
        status = ra_layer_forward_train(ctx, s->fwd->layer, s->fwd->y, s->tape, s->fwd->x, 1, seq,
                                        NULL, &options);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: the layer's training forward");
}

static ra_status layer_backward_run(void *state, ra_context *ctx)
{
    layer_backward_state *s = state;
    const int64_t kv = KV_HEADS * HEAD_DIM;
    float *dwq = s->dw, *dwk = dwq + DIM * DIM, *dwv = dwk + kv * DIM, *dwo = dwv + kv * DIM;
    ra_layer_grads grads = {.struct_size = sizeof grads, .dwq = dwq, .dwk = dwk, .dwv = dwv,
                            .dwo = dwo};
    return ra_layer_backward(ctx, s->fwd->layer, s->dx, &grads, s->tape, s->dy);
}

/* Finite gradients here; tests/test_layer_backward.c and the layergrad
 * fixtures check their values. */
static int layer_backward_check(void *state, ra_context *ctx)
{
    (void)ctx;
    layer_backward_state *s = state;
    const int64_t kv = KV_HEADS * HEAD_DIM;
    if (all_finite(s->dx, s->fwd->seq * DIM, "the layer's backward (dx)")) return 1;
    return all_finite(s->dw, 2 * DIM * DIM + 2 * kv * DIM, "the layer's backward (dW)");
}

/* ---- the four projections alone ---------------------------------------- */

/* What ra_layer_forward multiplies, with the same cblas calls: xq = x wq^T,
 * xk = x wk^T, xv = x wv^T and y = o wo^T, o standing for the attention's
 * output. */
typedef struct projections_state {
    int64_t seq;
    float *weights;              /* wq | wk | wv | wo */
    float *x, *xq, *xk, *xv, *o, *y; /* [S, dim] except xk, xv: [S, Hkv D] */
} projections_state;

static void projections_teardown(void *state)
{
    projections_state *s = state;
    if (!s) return;
    free(s->weights);
    free(s->x);
    free(s->xq);
    free(s->xk);
    free(s->xv);
    free(s->o);
    free(s->y);
    free(s);
}

static int projections_setup(const void *params, ra_context *ctx, void **state)
{
    (void)ctx;
    projections_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the projections");
    s->seq = *(const int64_t *)params;
    const int64_t kv = KV_HEADS * HEAD_DIM;
    s->weights = bench_random_floats(2 * DIM * DIM + 2 * kv * DIM, 12);
    s->x = bench_random_floats(s->seq * DIM, 13);
    s->xq = bench_random_floats(s->seq * DIM, 15);
    s->xk = bench_random_floats(s->seq * kv, 16);
    s->xv = bench_random_floats(s->seq * kv, 17);
    s->o = bench_random_floats(s->seq * DIM, 18);
    s->y = bench_random_floats(s->seq * DIM, 14);
    if (!s->weights || !s->x || !s->xq || !s->xk || !s->xv || !s->o || !s->y)
        return cli_fail(EXIT_FAIL, "bench: out of memory for the projections");
    for (int64_t i = 0; i < 2 * DIM * DIM + 2 * kv * DIM; i++) s->weights[i] /= 64.0f;
    return 0;
}

/* out[M, N] = a[M, K] w[N, K]^T */
static void project(float *out, const float *a, const float *w, int64_t m, int64_t n, int64_t k)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, a,
                (int)k, w, (int)k, 0.0f, out, (int)n);
}

static ra_status projections_run(void *state, ra_context *ctx)
{
    (void)ctx;
    projections_state *s = state;
    const int64_t kv = KV_HEADS * HEAD_DIM;
    const float *wq = s->weights, *wk = wq + DIM * DIM, *wv = wk + kv * DIM, *wo = wv + kv * DIM;
    project(s->xq, s->x, wq, s->seq, DIM, DIM);
    project(s->xk, s->x, wk, s->seq, kv, DIM);
    project(s->xv, s->x, wv, s->seq, kv, DIM);
    project(s->y, s->o, wo, s->seq, DIM, DIM);
    return RA_OK;
}

/* A few entries of each output against dot products in double. */
static int projections_check(void *state, ra_context *ctx)
{
    (void)ctx;
    projections_state *s = state;
    const int64_t kv = KV_HEADS * HEAD_DIM;
    const float *wq = s->weights, *wk = wq + DIM * DIM, *wv = wk + kv * DIM, *wo = wv + kv * DIM;
    const struct {
        const float *out, *a, *w;
        int64_t n;
        const char *name;
    } outputs[] = {{s->xq, s->x, wq, DIM, "xq"}, {s->xk, s->x, wk, kv, "xk"},
                   {s->xv, s->x, wv, kv, "xv"}, {s->y, s->o, wo, DIM, "y"}};
    for (int i = 0; i < 4; i++) {
        const int64_t rows[] = {0, s->seq / 2, s->seq - 1};
        const int64_t cols[] = {0, outputs[i].n / 3, outputs[i].n - 1};
        for (int j = 0; j < 3; j++) {
            double exact = 0;
            for (int64_t k = 0; k < DIM; k++)
                exact += (double)outputs[i].a[rows[j] * DIM + k] * outputs[i].w[cols[j] * DIM + k];
            double got = outputs[i].out[rows[j] * outputs[i].n + cols[j]];
            if (!(fabs(got - exact) <= 1e-4 * sqrt((double)DIM)))
                return cli_fail(EXIT_FAIL, "bench: projection %s gives %g for %g at [%lld, %lld]",
                                outputs[i].name, got, exact, (long long)rows[j],
                                (long long)cols[j]);
        }
    }
    return 0;
}

static const int64_t seq_512 = 512, seq_2048 = 2048, seq_8192 = 8192, seq_32768 = 32768;
static const masked_params window_8192 = {8192, 1024, 0, 0, 0, 0, RA_F32},
                           softcap_2048 = {2048, 0, 50.0, 0, 0, 0, RA_F32},
                           sinks_2048 = {2048, 0, 0, 1, 0, 0, RA_F32},
                           noncausal_2048 = {2048, 0, 0, 0, 1, 0, RA_F32},
                           halfmask_2048 = {2048, 0, 0, 0, 0, 1, RA_BOOL},
                           halfmask_f32_2048 = {2048, 0, 0, 0, 0, 1, RA_F32};

/* Causal: half of the 4 B H S^2 D flops of q k^T and p v. */
#define ATTENTION_FLOPS(seq) (2.0 * HEADS * (seq) * (seq) * HEAD_DIM)
/* x wq^T, x wk^T, x wv^T and o wo^T. */
#define PROJECTION_FLOPS(seq) (2.0 * (seq) * DIM * (DIM + 2.0 * KV_HEADS * HEAD_DIM + DIM))

/* Causal attention within a window of w keys: 4 H D flops a key seen. */
#define WINDOW_FLOPS(seq, w) (4.0 * HEADS * HEAD_DIM * ((w) * ((w) + 1.0) / 2 + ((seq) - (w)) * (w)))

#define ATTENTION_CASE(case_name, case_shape, seq_param, seq, repeats, torch, one) \
    {.name = (case_name), .shape = (case_shape), .measures = LIMIT_NONE, \
     .judged_by = LIMIT_SGEMM, .work = ATTENTION_FLOPS(seq), .work_is_flops = 1, \
     .params = &(seq_param), .setup = attention_setup, .run = attention_run, \
     .check = attention_check, .teardown = attention_teardown, .max_repeats = (repeats), \
     .target = 0.85, .one_thread = (one), .target_one_thread = (one) ? 0.85 : 0, \
     .has_torch = (torch), .has_torch2 = 1}

/* The causal prefill under a mask (kind: "bool" or "additive f32") that
 * leaves half the causal tiles empty: half the flops, at most 0.8 of the
 * plain prefill's time. */
#define HALFMASK_CASE(case_name, kind, case_params)                                         \
    {.name = (case_name),                                                                   \
     .shape = "B1 H32 Hkv8 D128 S2048 causal, " kind " attn_mask half empty, flash",        \
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = 0.5 * ATTENTION_FLOPS(2048), \
     .work_is_flops = 1, .params = &(case_params), .setup = masked_setup,                   \
     .run = attention_run, .check = attention_check, .teardown = attention_teardown,        \
     .parts = "attention_prefill_f32_s2048", .parts_target = 0.8}

/* The same on q, k and v rounded to bf16, out float32; no target of its
 * own (S 2048's is a ratio to the f32 case, below). */
#define BF16_CASE(case_name, case_shape, seq_param, seq, repeats) \
    {.name = (case_name), .shape = (case_shape), .measures = LIMIT_NONE, \
     .judged_by = LIMIT_SGEMM, .work = ATTENTION_FLOPS(seq), .work_is_flops = 1, \
     .params = &(seq_param), .setup = bf16_setup, .run = attention_run, \
     .check = attention_check, .teardown = attention_teardown, .max_repeats = (repeats), \
     .has_torch2 = 1}

/* Targets (issue 4): attention at 0.70 of sgemm (issue 44: the causal f32
 * prefill at 0.85, S 2048 on one thread too, against sgemm on one thread);
 * the layer at most 1.1 times
 * its parts (the projections and attention_prefill_f32_s2048).  Issue 6: the
 * attention backward at 0.50 of sgemm, its work counted as 2.5 times the
 * forward's flops (the five GEMMs of FlashAttention-2's backward); the
 * layer's backward (the projections' dx and dW, twice their forward flops,
 * and the attention's) at most 2.5 times the layer's forward.  S = 8192 is
 * about 2 s a run: 3 samples at most.  S = 32768 checks memory, not speed:
 * the warm-up run's peak resident memory beyond q, k, v and out (1280 MiB)
 * within 64 MiB, O(threads x tile); about 30 s a run, one timed sample.  The
 * reference code's PyTorch attention holds two [1, 32, S, S] score arrays, 17 GiB at
 * S = 8192: timed at 512 and 2048 only.  Issue 20: a 1024-key window at S =
 * 8192 at 0.7 of sgemm, counting only the flops inside the window; soft-capping
 * and sinks at most 1.1 times the plain case's time at S = 2048.  Issue 23:
 * bf16 q, k and v at 1.5 times the float32 case's rate or more, forward and
 * backward (time ratios <= 1 / 1.5 in the same run).  Issue 43: non-causal
 * attention (twice the causal flops) within 2.2 times the causal case's
 * time; a bool or additive f32 attn_mask leaving half the key tiles empty
 * (skipped) within 0.8 of it (half the flops, and the masked softmax on the
 * other half), forward and backward.  Issue 40: the
 * forward's f32 and bf16 cases at S 512, 2048 and 8192 beside PyTorch 2's
 * scaled_dot_product_attention (bench/torch2.py), 1.5 times its speed. */
const bench_case bench_attention_cases[] = {
    ATTENTION_CASE("attention_prefill_f32_s512", "B1 H32 Hkv8 D128 S512 causal, flash",
                   seq_512, 512, 0, 1, 0),
    ATTENTION_CASE("attention_prefill_f32_s2048", "B1 H32 Hkv8 D128 S2048 causal, flash",
                   seq_2048, 2048, 0, 1, 1),
    ATTENTION_CASE("attention_prefill_f32_s8192", "B1 H32 Hkv8 D128 S8192 causal, flash",
                   seq_8192, 8192, 3, 0, 0),
    {.name = "attention_prefill_f32_s32768", .shape = "B1 H32 Hkv8 D128 S32768 causal, flash",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = ATTENTION_FLOPS(32768),
     .work_is_flops = 1, .params = &seq_32768, .setup = attention_setup, .run = attention_run,
     .check = attention_check, .teardown = attention_teardown, .max_repeats = 1,
     .memory_target = 64.0 * (1 << 20)},
    {.name = "attention_prefill_f32_s8192_w1024",
     .shape = "B1 H32 Hkv8 D128 S8192 window 1024, flash", .measures = LIMIT_NONE,
     .judged_by = LIMIT_SGEMM, .work = WINDOW_FLOPS(8192, 1024), .work_is_flops = 1,
     .params = &window_8192, .setup = masked_setup, .run = attention_run,
     .check = attention_check, .teardown = attention_teardown, .target = 0.7},
    {.name = "attention_prefill_f32_s2048_softcap",
     .shape = "B1 H32 Hkv8 D128 S2048 causal, soft-cap 50, flash", .measures = LIMIT_NONE,
     .judged_by = LIMIT_SGEMM, .work = ATTENTION_FLOPS(2048), .work_is_flops = 1,
     .params = &softcap_2048, .setup = masked_setup, .run = attention_run,
     .check = attention_check, .teardown = attention_teardown,
     .parts = "attention_prefill_f32_s2048", .parts_target = 1.1},
    {.name = "attention_prefill_f32_s2048_sinks",
     .shape = "B1 H32 Hkv8 D128 S2048 causal, sinks, flash", .measures = LIMIT_NONE,
     .judged_by = LIMIT_SGEMM, .work = ATTENTION_FLOPS(2048), .work_is_flops = 1,
     .params = &sinks_2048, .setup = masked_setup, .run = attention_run,
     .check = attention_check, .teardown = attention_teardown,
     .parts = "attention_prefill_f32_s2048", .parts_target = 1.1},
    {.name = "attention_prefill_f32_s2048_noncausal",
     .shape = "B1 H32 Hkv8 D128 S2048 non-causal, flash", .measures = LIMIT_NONE,
     .judged_by = LIMIT_SGEMM, .work = 2.0 * ATTENTION_FLOPS(2048), .work_is_flops = 1,
     .params = &noncausal_2048, .setup = masked_setup, .run = attention_run,
     .check = attention_check, .teardown = attention_teardown,
     .parts = "attention_prefill_f32_s2048", .parts_target = 2.2},
    HALFMASK_CASE("attention_prefill_f32_s2048_halfmask", "bool", halfmask_2048),
    HALFMASK_CASE("attention_prefill_f32_s2048_halfmask_f32", "additive f32", halfmask_f32_2048),
    BF16_CASE("attention_prefill_bf16_s512", "B1 H32 Hkv8 D128 S512 causal, bf16 q k v, flash",
              seq_512, 512, 0),
    {.name = "attention_prefill_bf16_s2048", .shape = "B1 H32 Hkv8 D128 S2048 causal, bf16 q k v, flash",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = ATTENTION_FLOPS(2048),
     .work_is_flops = 1, .params = &seq_2048, .setup = bf16_setup, .run = attention_run,
     .check = attention_check, .teardown = attention_teardown,
     .parts = "attention_prefill_f32_s2048", .parts_target = 1 / 1.5, .has_torch2 = 1},
    BF16_CASE("attention_prefill_bf16_s8192", "B1 H32 Hkv8 D128 S8192 causal, bf16 q k v, flash",
              seq_8192, 8192, 3),
    {.name = "attention_backward_f32_s2048", .shape = "B1 H32 Hkv8 D128 S2048 causal, flash dq dk dv",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = 2.5 * ATTENTION_FLOPS(2048),
     .work_is_flops = 1, .params = &seq_2048, .setup = backward_setup, .run = backward_run,
     .check = backward_check, .teardown = backward_teardown, .target = 0.5},
    {.name = "attention_backward_bf16_s2048",
     .shape = "B1 H32 Hkv8 D128 S2048 causal, bf16 q k v, flash dq dk dv",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = 2.5 * ATTENTION_FLOPS(2048),
     .work_is_flops = 1, .params = &seq_2048, .setup = bf16_backward_setup,
     .run = backward_run, .check = backward_check, .teardown = backward_teardown,
     .parts = "attention_backward_f32_s2048", .parts_target = 1 / 1.5},
    {.name = "attention_backward_f32_s2048_halfmask",
     .shape = "B1 H32 Hkv8 D128 S2048 causal, additive f32 attn_mask half empty, flash dq dk dv",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = 1.25 * ATTENTION_FLOPS(2048),
     .work_is_flops = 1, .params = &halfmask_f32_2048, .setup = masked_backward_setup,
     .run = backward_run, .check = backward_check, .teardown = backward_teardown,
     .parts = "attention_backward_f32_s2048", .parts_target = 0.8},
    {.name = "layer_projections_f32_s2048", .shape = "the layer's x wq^T, x wk^T, x wv^T, o wo^T",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = PROJECTION_FLOPS(2048),
     .work_is_flops = 1, .params = &seq_2048, .setup = projections_setup,
     .run = projections_run, .check = projections_check, .teardown = projections_teardown},
    {.name = "layer_forward_f32_s2048", .shape = "dim4096 H32 Hkv8 D128 S2048, flash",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM,
     .work = PROJECTION_FLOPS(2048) + ATTENTION_FLOPS(2048), .work_is_flops = 1,
     .params = &seq_2048, .setup = layer_setup, .run = layer_run, .check = layer_check,
     .teardown = layer_teardown,
     .parts = "layer_projections_f32_s2048,attention_prefill_f32_s2048", .parts_target = 1.1},
    {.name = "layer_backward_f32_s2048", .shape = "dim4096 H32 Hkv8 D128 S2048, flash, dx dW",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM,
     .work = 2.0 * PROJECTION_FLOPS(2048) + 2.5 * ATTENTION_FLOPS(2048), .work_is_flops = 1,
     .params = &seq_2048, .setup = layer_backward_setup, .run = layer_backward_run,
     .check = layer_backward_check, .teardown = layer_backward_teardown,
     .parts = "layer_forward_f32_s2048", .parts_target = 2.5},
};
const int bench_attention_case_count =
    sizeof bench_attention_cases / sizeof bench_attention_cases[0];
