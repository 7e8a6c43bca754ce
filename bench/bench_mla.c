/*
 * bench_mla.c — multi-head latent attention (DeepSeek-V2/V3): one absorbed
 * decode step of DeepSeek-V3's 128 heads against a latent cache of 16384
 * tokens (rows of rope 64 + latent 512), and DeepSeek-V2-Lite's layer
 * forward at S = 2048.
 *
 *   decode: a layer of 128 heads, one token, latent cache [1, 16384, 1, 576] f32 (36 MiB)
 *   layer:  dim 2048, H 16, q_proj, kv_lora_rank 512, D 128 + 64, Dv 128
 *
 * The decode step is compute-bound on a CPU: each row of 576 floats (2304
 * bytes) meets 128 heads, 128 * 2 * (576 + 576) = 295 kflop, 128 flops a
 * byte, where this machine's sgemm reaches ~100 flops per byte of its read
 * bandwidth.  So it is judged by the sgemm rate, its work the flops of
 * scores and values (FlashMLA's own measure on GPUs), with the bytes it
 * reads in its shape.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "bench.h"

#define V3_HEADS 128
#define V3_LATENT 512
#define V3_ROPE 64
#define V3_ROW (V3_LATENT + V3_ROPE)
#define DECODE_LENGTH 16384

typedef struct mla_state {
    ra_kv_cache *cache;
    ra_layer *layer;
    float *weights[5]; /* wq, wkv_a, kv_a_norm, wkv_b, wo */
    float *x, *y;
    int64_t seq;
} mla_state;

static void mla_teardown(void *state)
{
    mla_state *s = state;
    if (!s) return;
    ra_kv_cache_destroy(s->cache);
    ra_layer_destroy(s->layer);
    for (int i = 0; i < 5; i++) free(s->weights[i]);
    free(s->x);
    free(s->y);
    free(s);
}

/* A latent layer of dim, H heads of Dn 128 + Dr, Dv 128, latent r, with
 * q_proj; small random weights, kv_a_norm 1. */
static ra_status make_layer(mla_state *s, int64_t dim, int64_t H, int64_t dn, int64_t dr,
                            int64_t dv, int64_t r)
{
    const int64_t D = dn + dr;
    const int64_t sizes[5] = {H * D * dim, (r + dr) * dim, r, H * (dn + dv) * r, dim * H * dv};
    for (int i = 0; i < 5; i++) {
        s->weights[i] = bench_random_floats(sizes[i], 40 + (uint64_t)i);
        if (!s->weights[i]) return RA_ERR_NOMEM;
        for (int64_t j = 0; j < sizes[i]; j++) s->weights[i][j] = i == 2 ? 1.0f : 0.05f * s->weights[i][j];
    }
    ra_layer_config c = ra_layer_config_init();
    c.dim = dim;
    c.n_heads = H;
    c.head_dim = D;
    c.kv_lora_rank = r;
    c.qk_nope_head_dim = dn;
    c.v_head_dim = dv;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = s->weights[0];
    w.wkv_a = s->weights[1];
    w.kv_a_norm = s->weights[2];
    w.wkv_b = s->weights[3];
    w.wo = s->weights[4];
    return ra_layer_create(&s->layer, &c, &w);
}

/* The decode case: a V3-shaped latent layer (128 heads of 128 + 64, Dv
 * 128, r 512, q_proj; dim 16, so that of its projections only wkv_b's 64
 * MiB, read by the absorption, weighs) takes one token's step over a latent
 * cache of 16384 tokens.  The cache is filled by the prefill of a one-head
 * layer of the same latent and rope sizes (the rows' values do not matter
 * to the timing); each run appends one more token (the cache has room for
 * 65536 runs), so later runs see a few more keys. */
static int decode_setup(const void *params, ra_context *ctx, void **state)
{
    (void)params;
    mla_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for MLA decode");
    const int64_t dim = 16;
    s->x = bench_random_floats(DECODE_LENGTH * dim, 30);
    s->y = malloc((size_t)DECODE_LENGTH * dim * sizeof(float));
    if (!s->x || !s->y) return cli_fail(EXIT_FAIL, "bench: out of memory for MLA decode");
    mla_state fill = {0};
    ra_status status = make_layer(&fill, dim, 1, 0, V3_ROPE, V3_ROPE, V3_LATENT);
    if (status == RA_OK)
        status = ra_kv_cache_create_latent(&s->cache, 1, DECODE_LENGTH + 65536, V3_LATENT,
                                           V3_ROPE, RA_F32);
    if (status == RA_OK)
        status = ra_layer_forward_cached(ctx, fill.layer, s->cache, s->y, s->x, 1, DECODE_LENGTH,
                                         NULL);
    ra_layer_destroy(fill.layer);
    for (int i = 0; i < 5; i++) free(fill.weights[i]);
    if (status == RA_OK) status = make_layer(s, dim, V3_HEADS, 128, V3_ROPE, 128, V3_LATENT);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: cannot fill the latent cache");
}

static ra_status decode_run(void *state, ra_context *ctx)
{
    mla_state *s = state;
    return ra_layer_forward_cached(ctx, s->layer, s->cache, s->y, s->x, 1, 1, NULL);
}

/* DeepSeek-V2-Lite's attention layer (q_proj, no q_lora). */
#define LITE_DIM 2048
#define LITE_HEADS 16

static int layer_setup(const void *params, ra_context *ctx, void **state)
{
    (void)ctx;
    mla_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the MLA layer");
    s->seq = *(const int64_t *)params;
    s->x = bench_random_floats(s->seq * LITE_DIM, 33);
    s->y = bench_random_floats(s->seq * LITE_DIM, 34);
    if (!s->x || !s->y) return cli_fail(EXIT_FAIL, "bench: out of memory for the MLA layer");
    ra_status status = make_layer(s, LITE_DIM, LITE_HEADS, 128, 64, 128, 512);
    return status == RA_OK ? 0 : cli_fail_status(status, "bench: cannot make the MLA layer");
}

static ra_status layer_run(void *state, ra_context *ctx)
{
    mla_state *s = state;
    return ra_layer_forward(ctx, s->layer, s->y, s->x, 1, s->seq, NULL, NULL);
}

static const int64_t seq_2048 = 2048;

/* The decode step's flops: scores and weighted rows, 2 * 576 each, per
 * head and key (the absorption's 2 * 2 * 128 * 256 * 512 add 0.7%, left
 * out). */
#define DECODE_FLOPS (2.0 * 2.0 * V3_ROW * V3_HEADS * DECODE_LENGTH)
/* The layer's: its projections, 2 S (wq + wkv_a + wkv_b + wo elements), and
 * causal attention over heads of 192 (v padded to 192: what runs), 2 S^2 H D. */
#define LITE_FLOPS(S)                                                                \
    (2.0 * (S) * (LITE_HEADS * 192.0 * LITE_DIM + 576.0 * LITE_DIM +               \
                  LITE_HEADS * 256.0 * 512 + LITE_DIM * LITE_HEADS * 128.0) +       \
     2.0 * (double)(S) * (S) * LITE_HEADS * 192)

/* No targets yet: measured in docs/perf (issue 22's bandwidth target for the
 * decode does not fit a compute-bound step; see the head of this file). */
const bench_case bench_mla_cases[] = {
    {.name = "attention_decode_mla_f32_l16384",
     .shape = "V3 layer step: H128, latent cache [16384, 576] f32",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = DECODE_FLOPS, .work_is_flops = 1,
     .setup = decode_setup, .run = decode_run, .teardown = mla_teardown},
    {.name = "layer_forward_mla_f32_s2048", .shape = "DeepSeek-V2-Lite: dim2048 H16 D192 Dv128 r512 S2048",
     .measures = LIMIT_NONE, .judged_by = LIMIT_SGEMM, .work = LITE_FLOPS(2048),
     .work_is_flops = 1, .params = &seq_2048, .setup = layer_setup, .run = layer_run,
     .teardown = mla_teardown},
};
const int bench_mla_case_count = sizeof bench_mla_cases / sizeof bench_mla_cases[0];
