/*
 * cmd_demo.c — ropeattn-demo: one LLaMA-2-7B-shaped attention layer with
 * 70B-style GQA (dim 4096, H 32, Hkv 8, D 128) on deterministic weights,
 * run on both attention paths, timed, and checked; then generation: a
 * prefill into a KV cache followed by decode steps of one token, timed in
 * tokens per second and checked against the full prefill.
 *
 *   x, y: [B, S, dim]   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]
 *   KV cache: [B, S, Hkv, D] each for K and V, f32 and bf16
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tools/cli.h"
#include "dev.h"
#include "demo_checks.h"
#include "random.h"
#include "../tools/timer.h"

static const char usage[] =
    "usage: ropeattn-demo [--seq S] [--threads N]\n"
    "\n"
    "Builds a LLaMA-2-7B-shaped attention layer (dim 4096, 32 query heads,\n"
    "8 key/value heads as in LLaMA-2-70B's GQA, head_dim 128) with weights drawn\n"
    "like nn.Linear's init from a fixed seed, runs it on batch 1 of S tokens\n"
    "through the reference and the flash attention paths, and checks:\n"
    "  - the two paths agree (layer output and attention core);\n"
    "  - RoPE keeps norms, <R_m q, R_n k> = <q, R_(n-m) k> up to position 2^32,\n"
    "    its inverse undoes it, and it equals LLaMA's apply_rotary_emb.\n"
    "Then generates as an inference engine does: a prefill of the first\n"
    "S - N tokens into a KV cache (N = S/4, from 1 to 64), then N decode steps of\n"
    "one token each over the cache, with an f32 and a bf16 cache, and checks:\n"
    "  - prefill + decode steps = the full prefill (f32 cache, to 5e-6);\n"
    "  - the bf16 cache stays within 3e-2 of the f32 cache.\n"
    "Prints timings (after a warm-up: the median of 3, the reference path once;\n"
    "generation: prefill tokens/s, and decode tokens/s from the median step) and\n"
    "exits 1 if a check fails.\n"
    "\n"
    "  --seq S      tokens (default 256; generation needs 2 or more)\n"
    "  --threads N  threads (default: one per processor)\n";

#define DEMO_DIM 4096
#define DEMO_HEADS 32
#define DEMO_KV_HEADS 8
#define DEMO_HEAD_DIM (DEMO_DIM / DEMO_HEADS)
#define DEMO_SEED 3
#define DEMO_REPEATS 3
#define DEMO_MAX_SEQ 8192
#define DEMO_MAX_DECODE 64 /* decode steps of the generation */

enum { REFERENCE, FLASH, N_PATHS };
static const ra_attention_path paths[N_PATHS] = {RA_PATH_REFERENCE, RA_PATH_FLASH};
static const char *const path_names[N_PATHS] = {"reference", "flash"};

typedef struct demo {
    int64_t seq;
    ra_context *ctx;
    ra_layer *layer;
    float *weights;            /* wq | wk | wv | wo */
    float *x, *y[N_PATHS];     /* [1, S, dim] */
    float *q, *k, *v;          /* [1, S, H, D], [1, S, Hkv, D] x 2 */
    float *out[N_PATHS];       /* [1, S, H, D] */
    int64_t n_decode;          /* generation: S - n_decode prefill tokens, then steps */
    float *y_gen[2];           /* [1, S, dim]: generated with an f32, a bf16 cache */
    double *step_s;            /* [n_decode]: seconds of each decode step */
} demo;

/* The caches of the generation, indexed like demo.y_gen. */
static const ra_dtype cache_dtypes[2] = {RA_F32, RA_BF16};
static const char *const cache_names[2] = {"f32", "bf16"};

static float *alloc_floats(int64_t n) { return malloc((size_t)n * sizeof(float)); }

/* Weights uniform(-1/sqrt(in), 1/sqrt(in)) as nn.Linear's default init. */
static int build(demo *d)
{
    const int64_t dim = DEMO_DIM, kv = DEMO_KV_HEADS * DEMO_HEAD_DIM;
    const int64_t rows[4] = {dim, kv, kv, dim}, cols[4] = {dim, dim, dim, dim};
    int64_t n_weights = 2 * dim * dim + 2 * kv * dim, n_x = d->seq * dim;
    d->weights = alloc_floats(n_weights);
    d->x = alloc_floats(n_x);
    d->q = alloc_floats(n_x);
    d->k = alloc_floats(d->seq * kv);
    d->v = alloc_floats(d->seq * kv);
    for (int p = 0; p < N_PATHS; p++) {
        d->y[p] = alloc_floats(n_x);
        d->out[p] = alloc_floats(n_x);
    }
    d->n_decode = d->seq < 2 ? 0 : d->seq / 4 < 1 ? 1
                : d->seq / 4 > DEMO_MAX_DECODE ? DEMO_MAX_DECODE : d->seq / 4;
    for (int c = 0; c < 2; c++) d->y_gen[c] = alloc_floats(n_x);
    d->step_s = malloc((size_t)(d->n_decode + 1) * sizeof(double));
    if (!d->weights || !d->x || !d->q || !d->k || !d->v || !d->y[REFERENCE] ||
        !d->y[FLASH] || !d->out[REFERENCE] || !d->out[FLASH] || !d->y_gen[0] ||
        !d->y_gen[1] || !d->step_s)
        return cli_fail(EXIT_FAIL, "out of memory for the demo layer");
    const float *w[4];
    float *next = d->weights;
    for (int i = 0; i < 4; i++) {
        random_uniform(next, (size_t)(rows[i] * cols[i]), 1.0f / sqrtf((float)cols[i]),
                       DEMO_SEED + (uint64_t)i);
        w[i] = next;
        next += rows[i] * cols[i];
    }
    random_uniform(d->x, (size_t)n_x, 1.0f, DEMO_SEED + 10);
    random_uniform(d->q, (size_t)n_x, 1.0f, DEMO_SEED + 11);
    random_uniform(d->k, (size_t)(d->seq * kv), 1.0f, DEMO_SEED + 12);
    random_uniform(d->v, (size_t)(d->seq * kv), 1.0f, DEMO_SEED + 13);

    ra_rope_config config_rope = ra_rope_config_default(DEMO_HEAD_DIM);
    ra_layer_config config = {.struct_size = sizeof config, .dim = dim, .n_heads = DEMO_HEADS,
                              .n_kv_heads = DEMO_KV_HEADS,
                              .head_dim = DEMO_HEAD_DIM,
                              .rope = &config_rope};
    config_rope.table_size = d->seq;
    ra_layer_weights weights = {.struct_size = sizeof weights, .wq = w[0], .wk = w[1], .wv = w[2],
                                .wo = w[3]};
    ra_status status = ra_layer_create(&d->layer, &config, &weights);
    return status == RA_OK ? 0 : cli_fail_status(status, "cannot create the demo layer");
}

static void destroy(demo *d)
{
    ra_layer_destroy(d->layer);
    ra_context_destroy(d->ctx);
    free(d->weights); free(d->x); free(d->q); free(d->k); free(d->v);
    for (int p = 0; p < N_PATHS; p++) {
        free(d->y[p]);
        free(d->out[p]);
    }
    for (int c = 0; c < 2; c++) free(d->y_gen[c]);
    free(d->step_s);
}

static ra_status layer_forward(demo *d, int p)
{
    ra_attention_options options = {.struct_size = sizeof options, .path = paths[p]};
    return ra_layer_forward(d->ctx, d->layer, d->y[p], d->x, 1, d->seq, NULL, &options);
}

static ra_status attention_core(demo *d, int p)
{
    ra_tensor q = ra_tensor_4d(d->q, RA_F32, 1, d->seq, DEMO_HEADS, DEMO_HEAD_DIM);
    ra_tensor k = ra_tensor_4d(d->k, RA_F32, 1, d->seq, DEMO_KV_HEADS, DEMO_HEAD_DIM);
    ra_tensor v = ra_tensor_4d(d->v, RA_F32, 1, d->seq, DEMO_KV_HEADS, DEMO_HEAD_DIM);
    ra_tensor out = ra_tensor_4d(d->out[p], RA_F32, 1, d->seq, DEMO_HEADS, DEMO_HEAD_DIM);
    ra_attention_options options = ra_attention_options_init();
    options.path = paths[p];
    return ra_attention(d->ctx, &out, &q, &k, &v, &options);
}

/* Median seconds of repeats (<= DEMO_REPEATS) runs after one warm-up. */
static ra_status time_step(ra_status (*step)(demo *, int), demo *d, int p, int repeats,
                           double *median)
{
    double samples[DEMO_REPEATS];
    ra_status status = step(d, p);
    for (int r = 0; r < repeats && status == RA_OK; r++) {
        double start = timer_seconds();
        status = step(d, p);
        samples[r] = timer_seconds() - start;
    }
    if (status == RA_OK) *median = timer_median(samples, repeats);
    return status;
}

/* Generation with a cache of dtype: the first S - n_decode tokens as one
 * prefill into the empty cache, then one decode step per token, positions
 * continuing from the cache's length (NULL).  y receives the rows in order;
 * *prefill_s and d->step_s the times. */
static ra_status generate(demo *d, ra_kv_cache *cache, float *y, double *prefill_s)
{
    const int64_t n_prefill = d->seq - d->n_decode;
    ra_kv_cache_reset(cache);
    double start = timer_seconds();
    ra_status status = ra_layer_forward_cached(d->ctx, d->layer, cache, y, d->x, 1, n_prefill,
                                               NULL);
    *prefill_s = timer_seconds() - start;
    for (int64_t t = n_prefill; t < d->seq && status == RA_OK; t++) {
        start = timer_seconds();
        status = ra_layer_forward_cached(d->ctx, d->layer, cache, y + t * DEMO_DIM,
                                         d->x + t * DEMO_DIM, 1, 1, NULL);
        d->step_s[t - n_prefill] = timer_seconds() - start;
    }
    return status;
}

/* Prefill then decode with an f32 and a bf16 cache; prints the timings and
 * fills two checks.  One run each, no warm-up: the layer's own timings above
 * have warmed the weights and the kernels, and a decode rate is the median
 * of its steps. */
static int run_generation(demo *d, demo_check checks[2])
{
    const int64_t n_prefill = d->seq - d->n_decode, kv_row = DEMO_KV_HEADS * DEMO_HEAD_DIM;
    const double weight_bytes =
        (2.0 * DEMO_DIM * DEMO_DIM + 2.0 * kv_row * DEMO_DIM) * sizeof(float);
    printf("\ngeneration through a KV cache: a prefill of %lld token%s, then %lld decode "
           "step%s of 1 token\n(each step reads all %.0f MiB of weights: decoding is bound by "
           "memory bandwidth)\n", (long long)n_prefill, n_prefill == 1 ? "" : "s",
           (long long)d->n_decode, d->n_decode == 1 ? "" : "s", weight_bytes / (1 << 20));
    for (int c = 0; c < 2; c++) {
        ra_kv_cache *cache = NULL;
        double prefill_s = 0;
        ra_status status = ra_kv_cache_create(&cache, 1, d->seq, DEMO_KV_HEADS, DEMO_HEAD_DIM,
                                              cache_dtypes[c]);
        if (status == RA_OK) status = generate(d, cache, d->y_gen[c], &prefill_s);
        ra_kv_cache_destroy(cache);
        if (status != RA_OK) return cli_fail_status(status, "demo generation failed");
        double step_s = timer_median(d->step_s, (int)d->n_decode);
        /* A decode step reads every weight once, and the cache's K and V rows
         * (on average those of the middle step). */
        double cache_bytes = (double)(n_prefill + d->n_decode / 2 + 1) * 2.0 * kv_row *
                             (double)ra_dtype_size(cache_dtypes[c]);
        printf("  prefill %5lld tokens  %-4s cache %9.2f ms %9.1f tokens/s\n",
               (long long)n_prefill, cache_names[c], 1e3 * prefill_s, n_prefill / prefill_s);
        printf("  decode  %5lld steps   %-4s cache %9.2f ms %9.1f tokens/s  "
               "median step, %.1f GB/s read\n",
               (long long)d->n_decode, cache_names[c], 1e3 * step_s, 1.0 / step_s,
               (weight_bytes + cache_bytes) / step_s * 1e-9);
    }
    checks[0] = (demo_check){"prefill + decode steps = full prefill, f32 cache (all rows)",
                             max_rel_diff(d->y_gen[0], d->y[FLASH], d->seq * DEMO_DIM), 5e-6};
    checks[1] = (demo_check){"prefill + decode steps, bf16 cache = f32 cache",
                             max_rel_diff(d->y_gen[1], d->y_gen[0], d->seq * DEMO_DIM), 3e-2};
    return 0;
}

static int print_check(const demo_check *check)
{
    int passed = check->worst <= check->limit; /* NaN fails */
    printf("  %-4s  %-62s worst %.1e (limit %.0e)\n", passed ? "ok" : "FAIL", check->property,
           check->worst, check->limit);
    return passed;
}

static int run(demo *d)
{
    const double attention_flops = 2.0 * DEMO_HEADS * (double)d->seq * d->seq * DEMO_HEAD_DIM;
    const double layer_flops =
        2.0 * d->seq * DEMO_DIM * (2.0 * DEMO_DIM + 2.0 * DEMO_KV_HEADS * DEMO_HEAD_DIM) +
        attention_flops;
    printf("ropeattn demo: one attention layer shaped like LLaMA-2-7B with 70B-style GQA\n"
           "  dim %d, %d query heads, %d key/value heads, head_dim %d, batch 1, seq %lld\n"
           "  weights: uniform(-1/sqrt(in), 1/sqrt(in)) from seed %d, %.0f MiB float32; "
           "%d threads\n\n",
           DEMO_DIM, DEMO_HEADS, DEMO_KV_HEADS, DEMO_HEAD_DIM, (long long)d->seq, DEMO_SEED,
           (2.0 * DEMO_DIM * DEMO_DIM + 2.0 * DEMO_KV_HEADS * DEMO_HEAD_DIM * DEMO_DIM) * 4 /
               (1 << 20),
           ra_context_threads(d->ctx));
    printf("timings (median of %d after a warm-up; the reference path, an O(S^2) oracle, "
           "once)\n", DEMO_REPEATS);
    for (int p = 0; p < N_PATHS; p++) {
        double layer_s, core_s;
        int repeats = p == REFERENCE ? 1 : DEMO_REPEATS;
        ra_status status = time_step(layer_forward, d, p, repeats, &layer_s);
        if (status == RA_OK) status = time_step(attention_core, d, p, repeats, &core_s);
        if (status != RA_OK) return cli_fail_status(status, "demo layer failed");
        printf("  layer forward  x -> y          %-9s %9.2f ms %8.1f GFLOP/s\n", path_names[p],
               1e3 * layer_s, layer_flops / layer_s * 1e-9);
        printf("  attention core q, k, v -> out  %-9s %9.2f ms %8.1f GFLOP/s\n", path_names[p],
               1e3 * core_s, attention_flops / core_s * 1e-9);
    }

    demo_check checks[2 + N_ROPE_CHECKS + 2];
    int64_t n = d->seq * DEMO_DIM;
    checks[0] = (demo_check){"flash = reference, layer output (max |diff| / max |ref|)",
                             max_rel_diff(d->y[FLASH], d->y[REFERENCE], n), 1e-4};
    checks[1] = (demo_check){"flash = reference, attention core",
                             max_rel_diff(d->out[FLASH], d->out[REFERENCE], n), 1e-4};
    int failed = demo_rope_checks(d->ctx, DEMO_HEAD_DIM, checks + 2);
    int total = 2 + N_ROPE_CHECKS;
    if (!failed && d->n_decode > 0) {
        failed = run_generation(d, checks + total);
        total += 2;
    } else if (!failed) {
        printf("\ngeneration through a KV cache: skipped (it needs --seq 2 or more)\n");
    }
    if (failed) return failed;
    printf("\nchecks\n");
    int passed = 0;
    for (int c = 0; c < total; c++) passed += print_check(&checks[c]);
    printf("\n%s: %d of %d checks passed\n", passed == total ? "ok" : "FAILED", passed, total);
    return passed == total ? EXIT_OK : EXIT_FAIL;
}

int cmd_demo(int argc, char **argv)
{
    int64_t threads = 0, seq = 256;
    const cli_option options[] = {
        CLI_INT_OPTION("--seq", &seq, 1, DEMO_MAX_SEQ),
        CLI_INT_OPTION("--threads", &threads, 1, CLI_MAX_THREADS),
    };
    switch (cli_parse("demo", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    demo d = {.seq = seq};
    int failed = cli_context_create(&d.ctx, threads);
    if (!failed) failed = build(&d);
    if (!failed) failed = run(&d);
    destroy(&d);
    return failed;
}
