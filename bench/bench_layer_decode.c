/*
 * bench_layer_decode.c — a decode step of the whole layer, LLaMA-2-7B-shaped
 * (dim 4096, H 32, Hkv 8, D 128): one token through the four projections
 * and attention over a cache of 4096 f32 tokens, with the weights stored as
 * float32 and as bfloat16.  Both steps read the same cache (32 MiB of K and
 * V); the weights are 168 MB in float32, 84 MB in bfloat16, so a step that
 * reads its weights once at the same bandwidth takes about 0.58 of the
 * float32 step's time.
 *
 * The cache is a window cache of 4096 slots and the layer's window 4096:
 * each step appends its token in the place of the oldest, so every step
 * attends over 4096 tokens however many run.
 *
 * Beside them, the bfloat16-weight layer's prefill of 2048 tokens (no
 * cache), against layer_forward_f32_s2048 (bench_attention.c): sgemm on
 * panels widened as it goes should keep the float32 layer's speed.
 *
 *   x, y: [1, 1, 4096] ([1, 2048, 4096] for the prefill)
 *   cache K, V: [1, 4096, 8, 128] f32
 */
#include <math.h>
#include <stdlib.h>

#include "../tools/cli.h"
#include "bench.h"

#define DIM 4096
#define HEADS 32
#define KV_HEADS 8
#define HEAD_DIM 128
#define WINDOW 4096
/* wq and wo [4096, 4096], wk and wv [1024, 4096] */
#define WEIGHTS (2 * DIM * DIM + 2 * KV_HEADS * HEAD_DIM * DIM)

typedef struct step_params {
    ra_dtype dtype; /* the weights': RA_F32 or RA_BF16 */
    int64_t seq;    /* tokens a run: 1 (a step through the cache) or a prefill's */
} step_params;

typedef struct step_state {
    const step_params *params;
    float *weights, *x, *y;
    uint16_t *weights16; /* the bfloat16 case's */
    ra_layer *layer;
    ra_kv_cache *cache;
} step_state;

static void step_teardown(void *state)
{
    step_state *s = state;
    if (!s) return;
    ra_kv_cache_destroy(s->cache);
    ra_layer_destroy(s->layer);
    free(s->weights);
    free(s->weights16);
    free(s->x);
    free(s->y);
    free(s);
}

/* The cache's 4096 tokens: random keys and values, rotated at their
 * positions, one at a time (a window cache takes max_new 1 a call). */
static ra_status fill_cache(step_state *s, ra_context *ctx)
{
    const int64_t kv = KV_HEADS * HEAD_DIM;
    float *k = bench_random_floats(2 * kv, 34);
    ra_rope *rope = NULL;
    ra_rope_config config = ra_rope_config_default(HEAD_DIM);
    ra_status status = k ? ra_rope_create(&rope, &config) : RA_ERR_NOMEM;
    ra_tensor kt = ra_tensor_4d(k, RA_F32, 1, 1, KV_HEADS, HEAD_DIM);
    ra_tensor vt = ra_tensor_4d(k + kv, RA_F32, 1, 1, KV_HEADS, HEAD_DIM);
    for (int64_t t = 0; status == RA_OK && t < WINDOW; t++) {
        ra_positions at = ra_positions_start(t);
        k[t % kv] = -k[t % kv]; /* a different token each time */
        status = ra_kv_cache_append(ctx, s->cache, rope, NULL, &kt, &vt, &at, NULL);
    }
    ra_rope_destroy(rope);
    free(k);
    return status;
}

/* params: a step_params. */
static int step_setup(const void *params, ra_context *ctx, void **state)
{
    step_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the layer's step");
    s->params = params;
    const ra_dtype dtype = s->params->dtype;
    s->weights = bench_random_floats(WEIGHTS, 31);
    s->x = bench_random_floats(s->params->seq * DIM, 32);
    s->y = bench_random_floats(s->params->seq * DIM, 33);
    if (dtype == RA_BF16) s->weights16 = malloc(WEIGHTS * sizeof(uint16_t));
    if (!s->weights || !s->x || !s->y || (dtype == RA_BF16 && !s->weights16))
        return cli_fail(EXIT_FAIL, "bench: out of memory for the layer's step");
    /* Uniform in [-1, 1) scaled to nn.Linear's 1 / sqrt(in_features). */
    for (int64_t i = 0; i < WEIGHTS; i++) s->weights[i] /= 64.0f;
    const float *w = s->weights;
    ra_status status = RA_OK;
    if (dtype == RA_BF16) {
        status = ra_convert(s->weights16, RA_BF16, s->weights, RA_F32, WEIGHTS);
        w = (const float *)s->weights16; /* dtype RA_BF16: uint16_t values */
        free(s->weights);                /* only the bfloat16 copy stays */
        s->weights = NULL;
    }
    const int64_t kv = KV_HEADS * HEAD_DIM, elem = dtype == RA_BF16 ? 2 : 4;
    const char *base = (const char *)w;
    ra_rope_config rope = ra_rope_config_default(HEAD_DIM);
    ra_layer_config config = ra_layer_config_init();
    config.dim = DIM, config.n_heads = HEADS, config.n_kv_heads = KV_HEADS;
    config.head_dim = HEAD_DIM, config.rope = &rope;
    config.window = s->params->seq == 1 ? WINDOW : 0; /* the steps' window cache */
    ra_layer_weights weights = ra_layer_weights_init();
    weights.dtype = dtype;
    weights.wq = (const float *)base;
    weights.wk = (const float *)(base + DIM * DIM * elem);
    weights.wv = (const float *)(base + (DIM * DIM + kv * DIM) * elem);
    weights.wo = (const float *)(base + (DIM * DIM + 2 * kv * DIM) * elem);
    if (status == RA_OK) status = ra_layer_create(&s->layer, &config, &weights);
    if (status == RA_OK && s->params->seq == 1)
        status = ra_kv_cache_create_window(&s->cache, 1, WINDOW, 1, KV_HEADS, HEAD_DIM, RA_F32);
    if (status == RA_OK && s->params->seq == 1) status = fill_cache(s, ctx);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: the layer's step: setup");
}

static ra_status step_run(void *state, ra_context *ctx)
{
    step_state *s = state;
    if (s->params->seq > 1)
        return ra_layer_forward(ctx, s->layer, s->y, s->x, 1, s->params->seq, NULL, NULL);
    return ra_layer_forward_cached(ctx, s->layer, s->cache, s->y, s->x, 1, 1, NULL);
}

static int step_check(void *state, ra_context *ctx)
{
    (void)ctx;
    step_state *s = state;
    for (int64_t i = 0; i < s->params->seq * DIM; i++)
        if (!isfinite(s->y[i]))
            return cli_fail(EXIT_FAIL, "bench: the layer's step gives %g at %lld", s->y[i],
                            (long long)i);
    return 0;
}

static const step_params f32_step = {RA_F32, 1}, bf16_step = {RA_BF16, 1},
                         bf16_prefill = {RA_BF16, 2048};

/* Bytes of one step: the weights and the cache's K and V read. */
#define STEP_BYTES(element) ((double)WEIGHTS * (element) + 2.0 * WINDOW * KV_HEADS * HEAD_DIM * 4)

/* x wq^T, x wk^T, x wv^T and o wo^T; causal attention's half of 4 H S^2 D. */
#define PREFILL_FLOPS(seq) \
    (2.0 * (seq) * (double)WEIGHTS + 2.0 * HEADS * (double)(seq) * (seq) * HEAD_DIM)

/* Targets (issue 23): the bfloat16-weight step at most 0.6 of the float32
 * one's time (its ratio to layer_decode_f32w_dim4096, measured beside it);
 * the bfloat16-weight prefill within 1.1 of the float32 layer's.  Issue 44:
 * the bfloat16-weight step at 0.85 of the read bandwidth over the bytes it
 * reads (116 MB: the read limit over 128 MiB, the nearest), on one thread
 * 0.8 of one thread's. */
const bench_case bench_layer_decode_cases[] = {
    {.name = "layer_decode_f32w_dim4096",
     .shape = "x[1,1,4096], f32 weights, window cache of 4096 f32 tokens",
     .measures = LIMIT_NONE, .judged_by = LIMIT_NONE, .work = STEP_BYTES(4),
     .params = &f32_step, .setup = step_setup, .run = step_run, .check = step_check,
     .teardown = step_teardown},
    {.name = "layer_decode_bf16w_dim4096",
     .shape = "x[1,1,4096], bf16 weights, window cache of 4096 f32 tokens",
     .measures = LIMIT_NONE, .judged_by = LIMIT_READ_128M, .work = STEP_BYTES(2),
     .params = &bf16_step, .setup = step_setup, .run = step_run, .check = step_check,
     .teardown = step_teardown, .target = 0.85, .one_thread = 1, .target_one_thread = 0.8,
     .parts = "layer_decode_f32w_dim4096", .parts_target = 0.6},
    {.name = "layer_forward_bf16w_s2048", .shape = "dim4096 H32 Hkv8 D128 S2048, bf16 weights",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = PREFILL_FLOPS(2048),
     .work_is_flops = 1, .params = &bf16_prefill, .setup = step_setup, .run = step_run,
     .check = step_check, .teardown = step_teardown, .parts = "layer_forward_f32_s2048",
     .parts_target = 1.1},
};
const int bench_layer_decode_case_count =
    sizeof bench_layer_decode_cases / sizeof bench_layer_decode_cases[0];
