/*
 * bench_attention.c — causal GQA attention (the flash path through
 * ra_attention) at two prompt lengths, and the whole LLaMA-2-7B-shaped layer.
 *
 *   q, out: [1, S, 32, 128]   k, v: [1, S, 8, 128]   x, y: [1, S, 4096]
 */
#include <math.h>
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

typedef struct attention_state {
    int64_t seq;
    float *q, *k, *v, *out; /* see the shapes above */
} attention_state;

static void attention_teardown(void *state)
{
    attention_state *s = state;
    if (!s) return;
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->out);
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
    if (!s->q || !s->k || !s->v || !s->out)
        return cli_fail(EXIT_FAIL, "bench: out of memory for attention");
    return 0;
}

static ra_status attention_path(attention_state *s, ra_context *ctx, ra_attention_path path,
                                float *out)
{
    ra_tensor q = ra_tensor_4d(s->q, RA_F32, 1, s->seq, HEADS, HEAD_DIM);
    ra_tensor k = ra_tensor_4d(s->k, RA_F32, 1, s->seq, KV_HEADS, HEAD_DIM);
    ra_tensor v = ra_tensor_4d(s->v, RA_F32, 1, s->seq, KV_HEADS, HEAD_DIM);
    ra_tensor o = ra_tensor_4d(out, RA_F32, 1, s->seq, HEADS, HEAD_DIM);
    return ra_attention(ctx, path, &o, &q, &k, &v, NULL);
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
    if (!(diff <= 1e-4))
        return cli_fail(EXIT_FAIL, "bench: flash attention differs from the reference by %.2e",
                        diff);
    return 0;
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
    ra_layer_config config = {DIM, HEADS, KV_HEADS, HEAD_DIM, ra_rope_config_default(HEAD_DIM)};
    config.rope.table_size = s->seq;
    const float *wq = s->weights, *wk = wq + DIM * DIM, *wv = wk + kv * DIM, *wo = wv + kv * DIM;
    ra_layer_weights weights = {wq, wk, wv, wo};
    ra_status status = ra_layer_create(&s->layer, &config, &weights);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: cannot create the layer");
}

static ra_status layer_run(void *state, ra_context *ctx)
{
    layer_state *s = state;
    ra_forward_options options = {RA_PATH_FLASH, 0, 0.0f, 0};
    return ra_layer_forward(s->layer, ctx, s->y, s->x, 1, s->seq, NULL, &options);
}

static int layer_check(void *state, ra_context *ctx)
{
    (void)ctx;
    layer_state *s = state;
    return all_finite(s->y, s->seq * DIM, "the layer");
}

static const int64_t seq_512 = 512, seq_2048 = 2048;

/* Causal: half of the 4 B H S^2 D flops of q k^T and p v. */
#define ATTENTION_FLOPS(seq) (2.0 * HEADS * (seq) * (seq) * HEAD_DIM)
/* x wq^T, x wk^T, x wv^T and o wo^T. */
#define PROJECTION_FLOPS(seq) (2.0 * (seq) * DIM * (DIM + 2.0 * KV_HEADS * HEAD_DIM + DIM))

const bench_case bench_attention_cases[] = {
    {"attention_prefill_f32_s512", "B1 H32 Hkv8 D128 S512 causal, flash", LIMIT_NONE,
     LIMIT_SGEMM, ATTENTION_FLOPS(512), 1, &seq_512, attention_setup, attention_run,
     attention_check, attention_teardown},
    {"attention_prefill_f32_s2048", "B1 H32 Hkv8 D128 S2048 causal, flash", LIMIT_NONE,
     LIMIT_SGEMM, ATTENTION_FLOPS(2048), 1, &seq_2048, attention_setup, attention_run,
     attention_check, attention_teardown},
    {"layer_forward_f32_s2048", "dim4096 H32 Hkv8 D128 S2048, flash", LIMIT_NONE, LIMIT_SGEMM,
     PROJECTION_FLOPS(2048) + ATTENTION_FLOPS(2048), 1, &seq_2048, layer_setup, layer_run,
     layer_check, layer_teardown},
};
const int bench_attention_case_count =
    sizeof bench_attention_cases / sizeof bench_attention_cases[0];
