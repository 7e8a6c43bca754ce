/*
 * cmd_freqs.c — `ropeattn freqs`: the cos and sin tables of a rope (any
 * Hugging Face rope type) at given positions, written to two .npy files.
 *
 *   cos, sin: [n_positions, rotary_dim / 2] float32, attention factor applied
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ropeattn_io.h"
#include "outputs.h"
#include "rope_cli.h"

static const char usage[] =
    "usage: ropeattn freqs (--end N | --positions P.npy) --cos C.npy --sin S.npy\n"
    "                      [--head-dim D] [--config config.json] [--rope-parameters JSON]\n"
    "                      [--theta T] [--max-position-embeddings M] [--seq-len L]\n"
    "                      [--hf-shape]\n"
    "\n"
    "Writes the rope's tables at each position m, float32 [n_positions, rotary_dim/2],\n"
    "with the attention factor a applied, as transformers applies it:\n"
    "  cos[m, i] = a * cos(m * theta_i),  sin[m, i] = a * sin(m * theta_i)\n"
    "theta_i and a follow the rope type (a is 1 except for yarn and longrope). The\n"
    "default type is LLaMA's precompute_freqs_cis: theta_i = T^(-2i/rotary_dim).\n"
    "rotary_dim = int(D * partial_rotary_factor) (D when there is none).\n"
    "\n"
    "  --head-dim D    features per head, even (default: the config's head_dim,\n"
    "                  else hidden_size / num_attention_heads)\n"
    "  --end N         positions 0 .. N-1\n"
    "  --positions P   .npy of int32 or int64 positions, any shape (read flat);\n"
    "                  with an M-RoPE rope (mrope_section), [3, ...] holds 3-D\n"
    "                  positions (temporal, height, width): row t of the tables\n"
    "                  takes pair i from the component its section names, as\n"
    "                  transformers puts cos and sin together; [4, ...]\n"
    "                  (Qwen3-VL's position ids) the text positions, not used\n"
    "                  here, then the 3-D ones\n"
    ROPE_CLI_USAGE
    "  --cos C         output file for the cosines\n"
    "  --sin S         output file for the sines\n"
    "  --hf-shape      write [n_positions, rotary_dim] with each angle twice,\n"
    "                  cat(t, t), as transformers' rotary embeddings return cos\n"
    "                  and sin for rotate_half (refused for a family whose own\n"
    "                  arrangement differs: Cohere and GLM)\n"
    "Both files are written, or neither.\n";

/* Largest table this command writes, in entries of each file. */
#define MAX_TABLE_ENTRIES ((int64_t)1 << 31)

/* Positions computed per call when they are 0 .. N-1. */
#define CHUNK ((int64_t)1 << 14)

typedef struct freqs_options {
    int64_t head_dim, end;
    int hf_shape;
    const char *cos_path, *sin_path;
    rope_cli rope;
} freqs_options;

static int check_options(const freqs_options *opts)
{
    if (opts->end == 0 && !opts->rope.positions_path)
        return cli_fail(EXIT_USAGE, "freqs: --end or --positions is required (see 'ropeattn "
                        "freqs --help')");
    if (opts->end != 0 && opts->rope.positions_path)
        return cli_fail(EXIT_USAGE, "freqs: give --end or --positions, not both");
    if (!opts->cos_path) return cli_require("freqs", "--cos");
    if (!opts->sin_path) return cli_require("freqs", "--sin");
    if (opts->head_dim % 2 != 0)
        return cli_fail(EXIT_USAGE, "freqs: --head-dim must be even, not %lld",
                        (long long)opts->head_dim);
    return 0;
}

/* The two outputs, checked, and the files read checked against them. */
static int check_files(const freqs_options *opts, cli_outputs *outputs)
{
    int failed = cli_outputs_add(outputs, "--cos", opts->cos_path);
    if (!failed) failed = cli_outputs_add(outputs, "--sin", opts->sin_path);
    if (!failed && opts->rope.config_path)
        failed = cli_outputs_check_input(outputs, "--config", opts->rope.config_path);
    if (!failed && opts->rope.positions_path)
        failed = cli_outputs_check_input(outputs, "--positions", opts->rope.positions_path);
    return failed;
}

/* head_dim from the flag, else the config. */
static int resolve_head_dim(const freqs_options *opts, const rope_source *src, int64_t *head_dim)
{
    *head_dim = opts->head_dim ? opts->head_dim : src->attention.head_dim;
    if (*head_dim == 0)
        return cli_fail(EXIT_USAGE, "freqs: --head-dim is required (or --config with head_dim, "
                        "or hidden_size and num_attention_heads)");
    if (*head_dim % 2 != 0)
        return cli_fail(EXIT_FAIL, "freqs: head_dim %lld from %s is odd; RoPE needs it even",
                        (long long)*head_dim, opts->rope.config_path);
    return 0;
}

/* The rows of a positions file of 3-D positions for an M-RoPE rope: 3
 * ([3, ...]) or 4 ([4, ...], Qwen3-VL's position ids: the text positions,
 * then the 3-D ones); 0 for 1-D positions. */
static int three_d_rows(const positions_file *positions, const rope_source *src)
{
    const int64_t rows = positions->ndim >= 2 ? positions->shape[0] : 0;
    return positions->ids && (rows == 3 || rows == 4) && src->attention.position_components == 3 ? (int)rows : 0;
}

/* Fills the tables: from the positions file (3-D: its last [3, n] of
 * rows3 rows), or 0 .. end-1 a chunk at a time. */
static ra_status fill(const ra_rope *rope, const freqs_options *opts,
                      const positions_file *positions, int rows3, int64_t n, int64_t pairs,
                      float *cos_table, float *sin_table)
{
    if (rows3)
        return ra_rope_table_mrope(rope, cos_table, sin_table,
                                   positions->ids + (rows3 - 3) * n, n);
    if (positions->ids)
        return ra_rope_table(rope, cos_table, sin_table, positions->ids, n);
    int64_t ids[CHUNK];
    for (int64_t at = 0; at < opts->end; at += CHUNK) {
        int64_t count = opts->end - at < CHUNK ? opts->end - at : CHUNK;
        for (int64_t i = 0; i < count; i++) ids[i] = at + i;
        ra_status status = ra_rope_table(rope, cos_table + at * pairs, sin_table + at * pairs,
                                         ids, count);
        if (status != RA_OK) return status;
    }
    return RA_OK;
}

/* Each row of pairs values becomes [row, row], in place (from the last row:
 * a row's new place overlaps only rows already moved). */
static void repeat_rows(float *table, int64_t n, int64_t pairs)
{
    for (int64_t m = n - 1; m >= 0; m--) {
        float *to = table + 2 * m * pairs;
        memmove(to + pairs, table + m * pairs, (size_t)pairs * sizeof(float));
        memmove(to, to + pairs, (size_t)pairs * sizeof(float));
    }
}

static int write_tables(const freqs_options *opts, cli_outputs *outputs, const ra_rope *rope,
                        const positions_file *positions, int rows3, int64_t n, int64_t pairs)
{
    const int64_t width = opts->hf_shape ? 2 * pairs : pairs;
    int64_t shape[2] = {n, width};
    size_t count = (size_t)(n * width);
    float *cos_table = malloc(count * sizeof(float)), *sin_table = malloc(count * sizeof(float));
    int failed = 0;
    ra_status status;
    if (!cos_table || !sin_table)
        failed = cli_fail(EXIT_FAIL, "out of memory for %lld x %lld tables", (long long)n,
                          (long long)pairs);
    else if ((status = fill(rope, opts, positions, rows3, n, pairs, cos_table, sin_table)) !=
             RA_OK)
        failed = cli_fail_status(status, "cannot compute the tables");
    if (!failed && opts->hf_shape) {
        repeat_rows(cos_table, n, pairs);
        repeat_rows(sin_table, n, pairs);
    }
    const float *tables[2] = {cos_table, sin_table};
    for (int i = 0; !failed && i < 2; i++)
        failed = cli_outputs_write_npy(outputs, i, tables[i], 2, shape);
    if (!failed) failed = cli_outputs_commit(outputs); /* both files or neither */
    free(cos_table);
    free(sin_table);
    return failed;
}

static int run(const freqs_options *opts)
{
    rope_source src;
    positions_file positions = {0};
    ra_rope *rope = NULL;
    int64_t head_dim = 0;
    cli_outputs outputs = {0};
    int failed = check_files(opts, &outputs);
    if (!failed) failed = rope_source_load(&opts->rope, &src);
    if (failed) {
        cli_outputs_free(&outputs);
        return failed;
    }
    if (!(failed = resolve_head_dim(opts, &src, &head_dim)) && opts->rope.positions_path)
        failed = positions_read(opts->rope.positions_path, &positions);
    if (!failed) {
        const int rows3 = three_d_rows(&positions, &src);
        int64_t n = positions.ids ? positions.count / (rows3 ? rows3 : 1) : opts->end;
        int64_t max_position = !positions.ids ? opts->end - 1
                               : rows3 == 4 ? positions_max(positions.ids + n, 3 * n)
                                            : positions.max;
        ra_rope_config config;
        failed = rope_cli_config("freqs", &opts->rope, &src, head_dim, max_position, &config);
        int64_t pairs = failed ? 1 : config.rotary_dim / 2;
        /* (transformers' DeepseekV3 returns cat(t, t) and pairs q's and
         * k's features itself) */
        if (!failed && opts->hf_shape && !src.attention.cos_sin_halves)
            failed = cli_fail(EXIT_FAIL, "freqs: --hf-shape writes cat(t, t) for rotate_half; "
                              "model_type \"%s\" arranges its cos and sin otherwise",
                              ra_hf_config_model_type(src.config));
        if (!failed && n > MAX_TABLE_ENTRIES / (opts->hf_shape ? 2 * pairs : pairs))
            failed = cli_fail(EXIT_USAGE, "freqs: %lld positions times rotary_dim %lld / 2 is "
                              "more than %lld table entries", (long long)n,
                              (long long)config.rotary_dim, (long long)MAX_TABLE_ENTRIES);
        if (!failed) {
            config.table_size = 0; /* every position once: no table worth keeping */
            ra_status status = ra_rope_create(&rope, &config);
            if (status != RA_OK) failed = cli_fail_status(status, "cannot create the rope");
        }
        if (!failed) failed = write_tables(opts, &outputs, rope, &positions, rows3, n, pairs);
    }
    cli_outputs_free(&outputs);
    ra_rope_destroy(rope);
    positions_free(&positions);
    rope_source_free(&src);
    return failed;
}

int cmd_freqs(int argc, char **argv)
{
    freqs_options opts = {0};
    const cli_option options[] = {
        CLI_INT_OPTION("--head-dim", &opts.head_dim, 2, INT32_MAX),
        CLI_INT_OPTION("--end", &opts.end, 1, RA_MAX_POSITION),
        CLI_STRING_OPTION("--cos", &opts.cos_path),
        CLI_STRING_OPTION("--sin", &opts.sin_path),
        CLI_FLAG_OPTION("--hf-shape", &opts.hf_shape),
        ROPE_CLI_OPTIONS(opts.rope),
    };
    switch (cli_parse("freqs", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    int failed = check_options(&opts);
    return failed ? failed : run(&opts);
}
