/*
 * cmd_train_demo.c — ropeattn-train-demo: the layer's gradients at work.
 * Two copies of a small model (train_model.h: embedding -> attention layer
 * -> read-out), one with RoPE and one without (no_rope), start from the same
 * weights and learn, on the same batches with AdamW, to output at each
 * position the token `back` steps earlier in a random sequence.  Finding
 * that token needs its relative position, which only RoPE gives the layer:
 * without it, attention sees contents and the causal mask only.
 *
 *   tokens, targets: [B, S] int32 (target -1: not scored, the first `back`)
 */
#include <stdio.h>
#include <stdlib.h>

#include "adamw.h"
#include "../tools/cli.h"
#include "dev.h"
#include "../tools/progress.h"
#include "random.h"
#include "train_model.h"

static const char usage[] =
    "usage: ropeattn-train-demo [--steps N] [--back K] [--seed S] [--threads N]\n"
    "                           [--quiet]\n"
    "\n"
    "Trains a small model built from the attention layer (token embedding ->\n"
    "layer (dim 64, 4 heads, 2 kv heads) -> linear read-out, cross-entropy, AdamW)\n"
    "to predict, at each position of a random sequence (32 tokens over 16\n"
    "symbols), the token K steps back.  It trains the same model twice from the\n"
    "same weights on the same batches: with RoPE, and without (the layer's\n"
    "no_rope: q and k not rotated, so attention sees no positions).  Prints both\n"
    "losses as they fall and the accuracy on held-out sequences, and exits 1 if\n"
    "the RoPE model does not beat the other by at least 30 points.\n"
    "\n"
    "  --steps N    optimizer steps (default 200)\n"
    "  --back K     how far back the target is (default 3, 1 to 16)\n"
    "  --seed S     seed of the weights and the data (default 1)\n"
    "  --threads N  threads (default: one per processor)\n"
    "  --quiet      no progress line (shown on a terminal, on stderr, when the\n"
    "               training takes more than a second)\n";

enum { VOCAB = 16, DIM = 64, HEADS = 4, KV_HEADS = 2, SEQ = 32, BATCH = 32, EVAL_BATCH = 64 };
#define LEARNING_RATE 3e-3f
#define WEIGHT_DECAY 1e-2f
#define MIN_MARGIN 0.30 /* accuracy points RoPE must win by */

typedef struct demo_options {
    int64_t steps, back, seed, threads;
    int quiet;
} demo_options;

/* Random tokens; target[b, s] = token[b, s - back], or -1 for s < back. */
static void make_batch(int32_t *tokens, int32_t *targets, int64_t batch, int64_t back,
                       uint64_t *state)
{
    for (int64_t t = 0; t < batch * SEQ; t++) tokens[t] = (int32_t)(random_next(state) % VOCAB);
    for (int64_t t = 0; t < batch * SEQ; t++) targets[t] = t % SEQ >= back ? tokens[t - back] : -1;
}

enum { ROPE, NO_ROPE, N_MODELS };
static const char *const model_names[N_MODELS] = {"with RoPE", "without RoPE"};

typedef struct demo {
    train_model model[N_MODELS];
    adamw opt[N_MODELS];
    int32_t *tokens, *targets, *eval_tokens, *eval_targets;
} demo;

static int demo_init(demo *d, const demo_options *opts)
{
    d->tokens = malloc(sizeof(int32_t) * BATCH * SEQ);
    d->targets = malloc(sizeof(int32_t) * BATCH * SEQ);
    d->eval_tokens = malloc(sizeof(int32_t) * EVAL_BATCH * SEQ);
    d->eval_targets = malloc(sizeof(int32_t) * EVAL_BATCH * SEQ);
    if (!d->tokens || !d->targets || !d->eval_tokens || !d->eval_targets)
        return cli_fail(EXIT_FAIL, "out of memory for the train demo");
    for (int i = 0; i < N_MODELS; i++) {
        train_model_config c = {VOCAB, DIM, HEADS, KV_HEADS, i == NO_ROPE, EVAL_BATCH * SEQ};
        int failed = train_model_create(&d->model[i], &c, (uint64_t)opts->seed);
        if (!failed)
            failed = adamw_init(&d->opt[i], d->model[i].n_params, LEARNING_RATE, WEIGHT_DECAY);
        if (failed) return failed;
    }
    uint64_t eval_state = (uint64_t)opts->seed ^ 0xE7A1u; /* not the training stream */
    make_batch(d->eval_tokens, d->eval_targets, EVAL_BATCH, opts->back, &eval_state);
    return 0;
}

static void demo_free(demo *d)
{
    for (int i = 0; i < N_MODELS; i++) {
        train_model_free(&d->model[i]);
        adamw_free(&d->opt[i]);
    }
    free(d->tokens);
    free(d->targets);
    free(d->eval_tokens);
    free(d->eval_targets);
}

/* Trains both models in step on the same batches, printing their losses. */
static int train(demo *d, const demo_options *opts, ra_context *ctx)
{
    uint64_t state = (uint64_t)opts->seed;
    const int64_t every = opts->steps >= 10 ? opts->steps / 10 : 1;
    const int64_t step_tokens = N_MODELS * BATCH * SEQ; /* both models' */
    progress line;
    printf("%6s  %12s  %12s\n", "step", "loss RoPE", "loss no RoPE");
    fflush(stdout);
    progress_begin(&line, "train-demo", opts->steps * step_tokens, opts->quiet);
    for (int64_t step = 1; step <= opts->steps; step++) {
        progress_update(&line, (step - 1) * step_tokens);
        make_batch(d->tokens, d->targets, BATCH, opts->back, &state);
        train_result r[N_MODELS];
        for (int i = 0; i < N_MODELS; i++) {
            ra_status status = train_model_run(&d->model[i], ctx, d->tokens, d->targets, BATCH,
                                               SEQ, 1, &r[i]);
            if (status != RA_OK) {
                progress_end(&line);
                return cli_fail_status(status, "train-demo: a training step failed");
            }
            adamw_update(&d->opt[i], d->model[i].params, d->model[i].grads);
        }
        if (step == 1 || step % every == 0) {
            progress_clear(&line);
            printf("%6lld  %12.4f  %12.4f\n", (long long)step, r[ROPE].loss, r[NO_ROPE].loss);
            fflush(stdout);
        }
    }
    progress_end(&line);
    return 0;
}

static int run(const demo_options *opts)
{
    demo d = {0};
    ra_context *ctx = NULL;
    int failed = cli_context_create(&ctx, opts->threads);
    if (!failed) failed = demo_init(&d, opts);
    if (!failed) {
        printf("train-demo: predict the token %lld steps back in random sequences of %d tokens "
               "over %d symbols\n", (long long)opts->back, SEQ, VOCAB);
        printf("model: embedding [%d, %d] -> attention layer (dim %d, %d heads, %d kv heads, "
               "head_dim %d) -> read-out [%d, %d]\n", VOCAB, DIM, DIM, HEADS, KV_HEADS,
               DIM / HEADS, DIM, VOCAB);
        printf("AdamW (lr %g, weight decay %g), batch %d, %lld steps, seed %lld; the same model "
               "with RoPE and without (no_rope)\n\n", (double)LEARNING_RATE,
               (double)WEIGHT_DECAY, BATCH, (long long)opts->steps, (long long)opts->seed);
        failed = train(&d, opts, ctx);
    }
    double accuracy[N_MODELS] = {0};
    int64_t scored = 0;
    for (int i = 0; !failed && i < N_MODELS; i++) {
        train_result r;
        ra_status status = train_model_run(&d.model[i], ctx, d.eval_tokens, d.eval_targets,
                                           EVAL_BATCH, SEQ, 0, &r);
        if (status != RA_OK) failed = cli_fail_status(status, "train-demo: evaluation failed");
        accuracy[i] = r.scored ? (double)r.correct / (double)r.scored : 0.0;
        scored = r.scored;
    }
    if (!failed) {
        printf("\nheld-out accuracy (%lld scored tokens; chance %.1f%%):\n", (long long)scored,
               100.0 / VOCAB);
        for (int i = 0; i < N_MODELS; i++)
            printf("  %-13s %5.1f%%\n", model_names[i], 100.0 * accuracy[i]);
        printf("accuracy: rope %.4f no_rope %.4f\n", accuracy[ROPE], accuracy[NO_ROPE]);
        double margin = accuracy[ROPE] - accuracy[NO_ROPE];
        if (margin >= MIN_MARGIN)
            printf("RoPE wins by %.1f points: the token %lld back is found by its relative "
                   "position, which only RoPE gives the layer\n", 100.0 * margin,
                   (long long)opts->back);
        else
            failed = cli_fail(EXIT_FAIL, "train-demo: RoPE won by %.1f points only (at least "
                              "%.0f expected)", 100.0 * margin, 100.0 * MIN_MARGIN);
    }
    demo_free(&d);
    ra_context_destroy(ctx);
    return failed;
}

int cmd_train_demo(int argc, char **argv)
{
    demo_options opts = {.steps = 200, .back = 3, .seed = 1, .threads = 0};
    const cli_option options[] = {
        CLI_INT_OPTION("--steps", &opts.steps, 1, 100000),
        CLI_INT_OPTION("--back", &opts.back, 1, 16),
        CLI_INT_OPTION("--seed", &opts.seed, 0, INT64_MAX),
        CLI_INT_OPTION("--threads", &opts.threads, 1, CLI_MAX_THREADS),
        CLI_FLAG_OPTION("--quiet", &opts.quiet),
    };
    switch (cli_parse("train-demo", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    return run(&opts);
}
