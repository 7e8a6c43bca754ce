/*
 * cmd_rope.c — `ropeattn rope`: rotates every head of an array by its
 * token's position (apply_rotary_emb of Meta's LLaMA reference code, or
 * transformers' apply_rotary_pos_emb, on one tensor).
 *
 *   X: [B, S, heads, D] or [B, heads, S, D] float32  ->  Y: the same shape
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "ropeattn_io.h"
#include "outputs.h"
#include "rope_cli.h"

static const char usage[] =
    "usage: ropeattn rope --input X.npy --output Y.npy [--layout interleaved|half]\n"
    "                     [--shape bshd|bhsd]\n"
    "                     [--start-pos P | --positions P.npy] [--inverse] [--threads N]\n"
    "                     [--config config.json] [--rope-parameters JSON] [--theta T]\n"
    "                     [--max-position-embeddings M] [--seq-len L]\n"
    "\n"
    "Applies rotary position embedding to X, float32 [batch, seq, heads, head_dim]\n"
    "or [batch, heads, seq, head_dim] (head_dim even), with the attention factor\n"
    "of the rope type applied, as\n"
    "transformers applies it; token s sits at position P + s, or at the position\n"
    "--positions gives it.  With partial_rotary_factor only the first\n"
    "rotary_dim = int(head_dim * partial_rotary_factor) features rotate.\n"
    "\n"
    "  --layout L      interleaved: pairs (2i, 2i+1), Meta's LLaMA reference code\n"
    "                  (the default without --config); half: pairs\n"
    "                  (i, i + rotary_dim/2), Hugging Face rotate_half (the default\n"
    "                  with --config, unless its model_type pairs interleaved:\n"
    "                  Cohere, GLM)\n"
    "  --shape S       bshd: X is [batch, seq, heads, head_dim] (default); bhsd:\n"
    "                  [batch, heads, seq, head_dim], as transformers'\n"
    "                  apply_rotary_pos_emb sees q and k.  With --config giving\n"
    "                  head counts, the heads axis must hold one of them, and an X\n"
    "                  that fits either shape needs --shape\n"
    "  --start-pos P   position of the first token (default 0)\n"
    "  --positions P   .npy of int32 or int64 positions, [seq] (every batch row)\n"
    "                  or [batch, seq]; any order, repeats allowed.  With an\n"
    "                  M-RoPE rope (mrope_section: Qwen2-VL, Qwen2.5-VL, Qwen3-VL)\n"
    "                  also 3-D positions, [3, seq] or [3, batch, seq]: (temporal,\n"
    "                  height, width), as transformers' position_ids, or [4, ...]\n"
    "                  (Qwen3-VL's: the text positions, then the 3-D ones)\n"
    "  --inverse       rotate by minus the angle (the transpose, the backward pass):\n"
    "                  undoes the forward rotation when the attention factor a is 1;\n"
    "                  with yarn's or longrope's a it scales by a again\n"
    "  --threads N     threads (default: one per processor)\n"
    ROPE_CLI_USAGE;

typedef struct rope_options {
    const char *input, *output;
    int layout, shape, inverse, has_start_pos, has_layout, has_shape;
    int64_t start_pos, threads;
    rope_cli rope;
} rope_options;

enum { SHAPE_BSHD, SHAPE_BHSD };
static const char *const shape_names[] = {"bshd", "bhsd", NULL};

/* Whether n is one of the config's head counts (or it gives none). */
static int is_head_count(const ra_hf_attention_info *c, int64_t n)
{
    if (!c->n_heads && !c->n_kv_heads) return 1;
    return (c->n_heads && n == c->n_heads) || (c->n_kv_heads && n == c->n_kv_heads);
}

/* With head counts from the config: X's heads axis must hold one, and an X
 * whose axis 1 and axis 2 could each be the heads needs --shape. */
static int check_heads(const rope_options *opts, const ra_hf_attention_info *c, const ra_npy *x)
{
    if (!c->n_heads && !c->n_kv_heads) return 0;
    int axis = opts->shape == SHAPE_BHSD ? 1 : 2;
    if (!is_head_count(c, x->shape[axis]))
        return cli_fail(EXIT_FAIL, "%s has %lld on its heads axis (axis %d, --shape %s); the "
                        "config has %lld query and %lld key/value heads%s", opts->input,
                        (long long)x->shape[axis], axis, shape_names[opts->shape],
                        (long long)c->n_heads, (long long)(c->n_kv_heads ? c->n_kv_heads
                                                                         : c->n_heads),
                        is_head_count(c, x->shape[3 - axis])
                            ? (opts->shape == SHAPE_BHSD ? ": is it [batch, seq, heads, "
                                                           "head_dim] (--shape bshd)?"
                                                         : ": is it [batch, heads, seq, "
                                                           "head_dim] (--shape bhsd)?")
                            : "");
    if (!opts->has_shape && is_head_count(c, x->shape[1]))
        return cli_fail(EXIT_USAGE, "rope: %s could be [batch, seq, heads, head_dim] or "
                        "[batch, heads, seq, head_dim] (both axes 1 and 2 hold a head count of "
                        "the config): give --shape bshd or bhsd", opts->input);
    return 0;
}

/* X must be float32 [B, S, heads, D] (or [B, heads, S, D]) with D even. */
static int check_input(const ra_npy *x, const char *path, int shape, int64_t start_pos)
{
    if (x->dtype != RA_NPY_F32)
        return cli_fail(EXIT_FAIL, "%s must hold float32 or float64 values ('<f4', '<f8')", path);
    if (x->ndim != 4)
        return cli_fail(EXIT_FAIL, "%s is %d-D; expected [batch, seq, heads, head_dim]",
                        path, x->ndim);
    if (x->count == 0) return cli_fail(EXIT_FAIL, "%s is empty", path);
    if (x->shape[3] % 2 != 0)
        return cli_fail(EXIT_FAIL, "%s has head_dim %lld (its last axis); RoPE needs it even",
                        path, (long long)x->shape[3]);
    if (start_pos + x->shape[shape == SHAPE_BHSD ? 2 : 1] - 1 > RA_MAX_POSITION)
        return cli_fail(EXIT_USAGE, "rope: --start-pos %lld puts the last token beyond "
                        "position %lld", (long long)start_pos, (long long)RA_MAX_POSITION);
    return 0;
}

/* The rope for x's head_dim, from the config, --rope-parameters and flags. */
static int make_rope(const rope_options *opts, const rope_source *src, const ra_npy *x,
                     int64_t max_position, ra_rope **rope)
{
    int64_t head_dim = x->shape[3];
    if (src->attention.head_dim_given && src->attention.head_dim != head_dim)
        return cli_fail(EXIT_FAIL, "%s has head_dim %lld (its last axis) but %s says head_dim "
                        "%lld", opts->input, (long long)head_dim, opts->rope.config_path,
                        (long long)src->attention.head_dim);
    ra_rope_config config;
    int failed = rope_cli_config("rope", &opts->rope, src, head_dim, max_position, &config);
    if (failed) return failed;
    /* Without --layout: interleaved, as Meta's code; with --config, a
     * Hugging Face model's: its family's, else rotate_half. */
    config.layout = opts->has_layout             ? (ra_layout)opts->layout
                    : src->attention.layout >= 0 ? (ra_layout)src->attention.layout
                    : src->has_config            ? RA_LAYOUT_HALF
                                                 : RA_LAYOUT_INTERLEAVED;
    ra_status status = ra_rope_create(rope, &config);
    return status == RA_OK ? 0 : cli_fail_status(status, "cannot create the rope");
}

/* Rotates x in place. */
static int rotate(const rope_options *opts, const rope_source *src, ra_npy *x, ra_context *ctx)
{
    const int bhsd = opts->shape == SHAPE_BHSD;
    int64_t batch = x->shape[0], seq = x->shape[bhsd ? 2 : 1], heads = x->shape[bhsd ? 1 : 2];
    positions_file file = {0};
    int64_t *ids = NULL;
    int64_t max_position = opts->start_pos + seq - 1;
    int failed = 0, components = 1;
    if (opts->rope.positions_path) {
        if (!(failed = positions_read(opts->rope.positions_path, &file)))
            failed = positions_for_batch(&file, opts->rope.positions_path, batch, seq,
                                         src->attention.position_components == 3, &ids, &components, NULL);
        if (!failed) max_position = positions_max(ids, components * batch * seq);
    }
    ra_rope *rope = NULL;
    if (!failed) failed = make_rope(opts, src, x, max_position, &rope);
    if (!failed) {
        /* [B, S, H, D] over X's memory; bhsd: its strides walk [B, H, S, D]. */
        int64_t d = x->shape[3];
        ra_tensor view = ra_tensor_4d(x->data, RA_F32, batch, seq, heads, d);
        if (bhsd) {
            view.stride[1] = d;
            view.stride[2] = seq * d;
        }
        ra_positions positions = positions_of_ids(ids, components, opts->start_pos);
        ra_status status = ra_rope_apply(ctx, rope, &view, &view, &positions,
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
    if (ra_npy_read_float(opts->input, &x, msg, sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    if (!failed &&
        !(failed = check_input(&x, opts->input, opts->shape, opts->start_pos)) &&
        !(failed = check_heads(opts, &src.attention, &x)) &&
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
        CLI_CHOICE_OPTION("--layout", &opts.layout, cli_layout_names, .seen = &opts.has_layout),
        CLI_CHOICE_OPTION("--shape", &opts.shape, shape_names, .seen = &opts.has_shape),
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
