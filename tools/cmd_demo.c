/*
 * cmd_demo.c — `ropeattn demo`: one LLaMA-2-7B-shaped attention layer with
 * 70B-style GQA (dim 4096, H 32, Hkv 8, D 128) on deterministic weights,
 * run on both attention paths, timed, and checked.
 *
 *   x, y: [B, S, dim]   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "demo_checks.h"
#include "random.h"
#include "timer.h"

static const char usage[] =
    "usage: ropeattn demo [--seq S] [--threads N]\n"
    "\n"
    "Builds a LLaMA-2-7B-shaped attention layer (dim 4096, 32 query heads,\n"
    "8 key/value heads as in LLaMA-2-70B's GQA, head_dim 128) with weights drawn\n"
    "like nn.Linear's init from a fixed seed, runs it on batch 1 of S tokens\n"
    "through the reference and the flash attention paths, and checks:\n"
    "  - the two paths agree (layer output and attention core);\n"
    "  - RoPE keeps norms, <R_m q, R_n k> = <q, R_(n-m) k> up to position 2^32,\n"
    "    its inverse undoes it, and it equals the seed's apply_rotary_emb.\n"
    "Prints timings (median of 3 after a warm-up) and exits 1 if a check fails.\n"
    "\n"
    "  --seq S      tokens (default 256)\n"
    "  --threads N  threads (default: one per processor)\n";

#define DEMO_DIM 4096
#define DEMO_HEADS 32
#define DEMO_KV_HEADS 8
#define DEMO_HEAD_DIM (DEMO_DIM / DEMO_HEADS)
#define DEMO_SEED 3
#define DEMO_REPEATS 3
#define DEMO_MAX_SEQ 8192

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
} demo;

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
    if (!d->weights || !d->x || !d->q || !d->k || !d->v || !d->y[REFERENCE] ||
        !d->y[FLASH] || !d->out[REFERENCE] || !d->out[FLASH])
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

    ra_layer_config config = {dim, DEMO_HEADS, DEMO_KV_HEADS, DEMO_HEAD_DIM,
                              ra_rope_config_default(DEMO_HEAD_DIM)};
    config.rope.table_size = d->seq;
    ra_layer_weights weights = {w[0], w[1], w[2], w[3]};
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
}

static ra_status layer_forward(demo *d, int p)
{
    ra_forward_options options = {paths[p], 0, 0.0f, 0};
    return ra_layer_forward(d->layer, d->ctx, d->y[p], d->x, 1, d->seq, NULL, &options);
}

static ra_status attention_core(demo *d, int p)
{
    ra_tensor q = ra_tensor_4d(d->q, RA_F32, 1, d->seq, DEMO_HEADS, DEMO_HEAD_DIM);
    ra_tensor k = ra_tensor_4d(d->k, RA_F32, 1, d->seq, DEMO_KV_HEADS, DEMO_HEAD_DIM);
    ra_tensor v = ra_tensor_4d(d->v, RA_F32, 1, d->seq, DEMO_KV_HEADS, DEMO_HEAD_DIM);
    ra_tensor out = ra_tensor_4d(d->out[p], RA_F32, 1, d->seq, DEMO_HEADS, DEMO_HEAD_DIM);
    return ra_attention(d->ctx, paths[p], &out, &q, &k, &v, NULL);
}

/* Median seconds of DEMO_REPEATS runs after one warm-up. */
static ra_status time_step(ra_status (*step)(demo *, int), demo *d, int p, double *median)
{
    double samples[DEMO_REPEATS];
    ra_status status = step(d, p);
    for (int r = 0; r < DEMO_REPEATS && status == RA_OK; r++) {
        double start = timer_seconds();
        status = step(d, p);
        samples[r] = timer_seconds() - start;
    }
    if (status == RA_OK) *median = timer_median(samples, DEMO_REPEATS);
    return status;
}

/* max |a - b| / max |b|. */
static double max_rel_diff(const float *a, const float *b, int64_t n)
{
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? diff / scale : diff;
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
    printf("timings (median of %d after a warm-up)\n", DEMO_REPEATS);
    for (int p = 0; p < N_PATHS; p++) {
        double layer_s, core_s;
        ra_status status = time_step(layer_forward, d, p, &layer_s);
        if (status == RA_OK) status = time_step(attention_core, d, p, &core_s);
        if (status != RA_OK) return cli_fail_status(status, "demo layer failed");
        printf("  layer forward  x -> y          %-9s %9.2f ms %8.1f GFLOP/s\n", path_names[p],
               1e3 * layer_s, layer_flops / layer_s * 1e-9);
        printf("  attention core q, k, v -> out  %-9s %9.2f ms %8.1f GFLOP/s\n", path_names[p],
               1e3 * core_s, attention_flops / core_s * 1e-9);
    }

    demo_check checks[2 + N_ROPE_CHECKS];
    int64_t n = d->seq * DEMO_DIM;
    checks[0] = (demo_check){"flash = reference, layer output (max |diff| / max |ref|)",
                             max_rel_diff(d->y[FLASH], d->y[REFERENCE], n), 1e-4};
    checks[1] = (demo_check){"flash = reference, attention core",
                             max_rel_diff(d->out[FLASH], d->out[REFERENCE], n), 1e-4};
    int failed = demo_rope_checks(d->ctx, DEMO_HEAD_DIM, checks + 2);
    if (failed) return failed;
    printf("\nchecks\n");
    int passed = 0, total = 2 + N_ROPE_CHECKS;
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
