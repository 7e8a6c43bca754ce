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
#include "outputs.h"
#include "rope_cli.h"

static const char usage[] =
    "usage: ropeattn rope --input X.npy --output Y.npy [--layout interleaved|half]\n"
    "                     [--start-pos P | --positions P.npy] [--inverse] [--threads N]\n"
    "                     [--config config.json] [--rope-parameters JSON] [--theta T]\n"
    "                     [--max-position-embeddings M] [--seq-len L]\n"
    "\n"
    "Applies rotary position embedding to X, float32 [batch, seq, heads, head_dim]\n"
    "(head_dim even), with the attention factor of the rope type applied, as\n"
    "transformers applies it; token s sits at position P + s, or at the position\n"
    "--positions gives it.  With partial_rotary_factor only the first\n"
    "rotary_dim = int(head_dim * partial_rotary_factor) features rotate.\n"
    "\n"
    "  --layout L      interleaved: pairs (2i, 2i+1), the seed (default);\n"
    "                  half: pairs (i, i + rotary_dim/2), Hugging Face rotate_half\n"
    "  --start-pos P   position of the first token (default 0)\n"
    "  --positions P   .npy of int32 or int64 positions, [seq] (every batch row)\n"
    "                  or [batch, seq]; any order, repeats allowed\n"
    "  --inverse       rotate by minus the angle (the transpose, the backward pass):\n"
    "                  undoes the forward rotation when the attention factor a is 1;\n"
    "                  with yarn's or longrope's a it scales by a again\n"
    "  --threads N     threads (default: one per processor)\n"
    ROPE_CLI_USAGE;

typedef struct rope_options {
    const char *input, *output;
    int layout, inverse, has_start_pos;
    int64_t start_pos, threads;
    rope_cli rope;
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

/* The rope for x's head_dim, from the config, --rope-parameters and flags. */
static int make_rope(const rope_options *opts, const rope_source *src, const ra_npy *x,
                     int64_t max_position, ra_rope **rope)
{
    int64_t head_dim = x->shape[3];
    if (src->config.has_head_dim && src->config.head_dim != head_dim)
        return cli_fail(EXIT_FAIL, "%s has head_dim %lld (its last axis) but %s says head_dim "
                        "%lld", opts->input, (long long)head_dim, opts->rope.config_path,
                        (long long)src->config.head_dim);
    ra_rope_config config;
    int failed = rope_cli_config("rope", &opts->rope, src, head_dim, max_position + 1, &config);
    if (failed) return failed;
    config.layout = (ra_layout)opts->layout;
    config.table_size = cli_rope_table_rows(0, max_position + 1);
    ra_status status = ra_rope_create(rope, &config);
    return status == RA_OK ? 0 : cli_fail_status(status, "cannot create the rope");
}

/* Rotates x in place. */
static int rotate(const rope_options *opts, const rope_source *src, ra_npy *x, ra_context *ctx)
{
    int64_t batch = x->shape[0], seq = x->shape[1];
    positions_file file = {0};
    int64_t *ids = NULL;
    int64_t max_position = opts->start_pos + seq - 1;
    int failed = 0;
    if (opts->rope.positions_path) {
        if (!(failed = positions_read(opts->rope.positions_path, &file)))
            failed = positions_for_batch(&file, opts->rope.positions_path, batch, seq, &ids);
        max_position = file.max;
    }
    ra_rope *rope = NULL;
    if (!failed) failed = make_rope(opts, src, x, max_position, &rope);
    if (!failed) {
        ra_tensor view = ra_tensor_4d(x->data, RA_F32, batch, seq, x->shape[2], x->shape[3]);
        ra_positions positions = {.start = opts->start_pos, .ids = ids};
        ra_status status = ra_rope_apply(rope, ctx, &view, &view, &positions,
                                         opts->inverse ? RA_INVERSE : RA_FORWARD);
        if (status != RA_OK) failed = cli_fail_status(status, "rope failed");
    }
    ra_rope_destroy(rope);
    free(ids);
    positions_free(&file);
    return failed;
}

/* The library's threads only: the rope needs no OpenBLAS (cli_context_create). */
static int create_context(ra_context **ctx, int64_t n_threads)
{
    ra_status status = ra_context_create(ctx, (int)n_threads);
    return status == RA_OK ? 0 : cli_fail_status(status, "cannot create the thread context");
}

static int run(const rope_options *opts)
{
    char msg[CLI_MSG_LEN];
    ra_npy x = {0};
    ra_context *ctx = NULL;
    rope_source src;
    cli_outputs outputs = {0};
    int failed = cli_outputs_add(&outputs, "--output", opts->output);
    const char *const inputs[][2] = {{"--input", opts->input},
                                     {"--config", opts->rope.config_path},
                                     {"--positions", opts->rope.positions_path}};
    for (size_t i = 0; !failed && i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i][1]) failed = cli_outputs_check_input(&outputs, inputs[i][0], inputs[i][1]);
    if (!failed) failed = rope_source_load(&opts->rope, &src);
    if (failed) {
        cli_outputs_free(&outputs);
        return failed;
    }
    if (ra_npy_read(opts->input, &x, msg, sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    if (!failed &&
        !(failed = check_input(&x, opts->input, opts->start_pos)) &&
        !(failed = create_context(&ctx, opts->threads)) &&
        !(failed = rotate(opts, &src, &x, ctx)) &&
        !(failed = cli_outputs_write_npy(&outputs, 0, x.data, x.ndim, x.shape)))
        failed = cli_outputs_commit(&outputs);
    cli_outputs_free(&outputs);
    ra_context_destroy(ctx);
    ra_npy_free(&x);
    rope_source_free(&src);
    return failed;
}

int cmd_rope(int argc, char **argv)
{
    rope_options opts = {.layout = RA_LAYOUT_INTERLEAVED};
    const cli_option options[] = {
        CLI_STRING_OPTION("--input", &opts.input),
        CLI_STRING_OPTION("--output", &opts.output),
        CLI_CHOICE_OPTION("--layout", &opts.layout, cli_layout_names),
        CLI_INT_OPTION("--start-pos", &opts.start_pos, 0, RA_MAX_POSITION,
                       .seen = &opts.has_start_pos),
        CLI_FLAG_OPTION("--inverse", &opts.inverse),
        CLI_INT_OPTION("--threads", &opts.threads, 1, CLI_MAX_THREADS),
        ROPE_CLI_OPTIONS(opts.rope),
    };
    switch (cli_parse("rope", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    if (!opts.input) return cli_require("rope", "--input");
    if (!opts.output) return cli_require("rope", "--output");
    if (opts.has_start_pos && opts.rope.positions_path)
        return cli_fail(EXIT_USAGE, "rope: give --start-pos or --positions, not both");
    return run(&opts);
}
