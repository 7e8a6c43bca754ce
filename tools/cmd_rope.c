/*
 * cmd_rope.c — `ropeattn rope`: rotates every head of an array by its
 * token's position (the seed's apply_rotary_emb on one tensor).
 *
 *   X: [B, S, heads, D] float32  ->  Y: the same shape
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "io/io.h"

static const char usage[] =
    "usage: ropeattn rope --input X.npy --output Y.npy [--theta T]\n"
    "                     [--layout interleaved|half] [--start-pos P] [--inverse]\n"
    "                     [--threads N]\n"
    "\n"
    "Applies rotary position embedding to X, float32 [batch, seq, heads, head_dim]\n"
    "(head_dim even); token s sits at position P + s.\n"
    "\n"
    "  --theta T      base of the frequencies theta^(-2i/head_dim) (default 10000)\n"
    "  --layout L     interleaved: pairs (2i, 2i+1), the seed (default);\n"
    "                 half: pairs (i, i + head_dim/2), Hugging Face rotate_half\n"
    "  --start-pos P  position of the first token (default 0)\n"
    "  --inverse      rotate by minus the angle: undoes the forward rotation\n"
    "  --threads N    threads (default: one per processor)\n";

typedef struct rope_options {
    const char *input, *output;
    double theta;
    int layout, inverse;
    int64_t start_pos, threads;
} rope_options;

/* X must be float32 [B, S, heads, D] with D even. */
static int check_input(const ra_npy *x, const char *path, int64_t start_pos)
{
    if (x->dtype != RA_NPY_F32)
        return cli_fail(EXIT_FAIL, "%s must hold float32 ('<f4') values", path);
    if (x->ndim != 4)
        return cli_fail(EXIT_FAIL, "%s is %d-D; expected [batch, seq, heads, head_dim]",
                        path, x->ndim);
    if (x->count == 0) return cli_fail(EXIT_FAIL, "%s is empty", path);
    if (x->shape[3] % 2 != 0)
        return cli_fail(EXIT_FAIL, "%s has head_dim %lld (its last axis); RoPE needs it even",
                        path, (long long)x->shape[3]);
    if (start_pos + x->shape[1] - 1 > RA_MAX_POSITION)
        return cli_fail(EXIT_USAGE, "rope: --start-pos %lld puts the last token beyond "
                        "position %lld", (long long)start_pos, (long long)RA_MAX_POSITION);
    return 0;
}

/* Rotates x in place. */
static int rotate(const rope_options *opts, ra_npy *x, ra_context *ctx)
{
    ra_rope_config config = ra_rope_config_default(x->shape[3]);
    config.layout = (ra_layout)opts->layout;
    config.theta = opts->theta;
    config.table_size = cli_rope_table_rows(opts->start_pos, x->shape[1]);
    ra_rope *rope = NULL;
    ra_status status = ra_rope_create(&rope, &config);
    if (status != RA_OK) return cli_fail_status(status, "cannot create the rope");
    ra_tensor view = ra_tensor_4d(x->data, RA_F32, x->shape[0], x->shape[1], x->shape[2],
                                  x->shape[3]);
    ra_positions positions = {.start = opts->start_pos};
    status = ra_rope_apply(rope, ctx, &view, &view, &positions,
                           opts->inverse ? RA_INVERSE : RA_FORWARD);
    ra_rope_destroy(rope);
    return status == RA_OK ? 0 : cli_fail_status(status, "rope failed");
}

static int run(const rope_options *opts)
{
    char msg[CLI_MSG_LEN];
    ra_npy x = {0};
    ra_context *ctx = NULL;
    int failed = cli_check_output_folder(opts->output);
    if (failed) return failed;
    if (ra_npy_read(opts->input, &x, msg, sizeof msg) != RA_OK)
        return cli_fail(EXIT_FAIL, "%s", msg);
    if (!(failed = check_input(&x, opts->input, opts->start_pos)) &&
        !(failed = cli_context_create(&ctx, opts->threads)) &&
        !(failed = rotate(opts, &x, ctx)) &&
        ra_npy_write_f32(opts->output, x.data, x.ndim, x.shape, msg, sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    ra_context_destroy(ctx);
    ra_npy_free(&x);
    return failed;
}

int cmd_rope(int argc, char **argv)
{
    rope_options opts = {.theta = 10000.0, .layout = RA_LAYOUT_INTERLEAVED};
    const cli_option options[] = {
        CLI_STRING_OPTION("--input", &opts.input),
        CLI_STRING_OPTION("--output", &opts.output),
        CLI_POSITIVE_OPTION("--theta", &opts.theta),
        CLI_CHOICE_OPTION("--layout", &opts.layout, cli_layout_names),
        CLI_INT_OPTION("--start-pos", &opts.start_pos, 0, RA_MAX_POSITION),
        CLI_FLAG_OPTION("--inverse", &opts.inverse),
        CLI_INT_OPTION("--threads", &opts.threads, 1, CLI_MAX_THREADS),
    };
    switch (cli_parse("rope", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    if (!opts.input) return cli_require("rope", "--input");
    if (!opts.output) return cli_require("rope", "--output");
    return run(&opts);
}
