/*
 * cmd_freqs.c — `ropeattn freqs`: the seed's precompute_freqs_cis written
 * to two .npy files.
 *
 *   cos, sin: [end, head_dim / 2] float32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/io.h"

static const char usage[] =
    "usage: ropeattn freqs --head-dim D --end N [--theta T] --cos C.npy --sin S.npy\n"
    "\n"
    "Writes the tables of precompute_freqs_cis(D, N, T), float32 [N, D/2]:\n"
    "  cos[m, i] = cos(m * T^(-2i/D)),  sin[m, i] = sin(m * T^(-2i/D))\n"
    "\n"
    "  --head-dim D   features per head, even\n"
    "  --end N        positions 0 .. N-1\n"
    "  --theta T      base (default 10000)\n"
    "  --cos C        output file for the cosines\n"
    "  --sin S        output file for the sines\n"
    "Both files are written, or neither.\n";

/* Largest table this command writes, in entries of each file. */
#define MAX_TABLE_ENTRIES ((int64_t)1 << 31)

typedef struct freqs_options {
    int64_t head_dim, end;
    double theta;
    const char *cos_path, *sin_path;
} freqs_options;

static int check_options(const freqs_options *opts)
{
    if (opts->head_dim == 0) return cli_require("freqs", "--head-dim");
    if (opts->end == 0) return cli_require("freqs", "--end");
    if (!opts->cos_path) return cli_require("freqs", "--cos");
    if (!opts->sin_path) return cli_require("freqs", "--sin");
    if (opts->head_dim % 2 != 0)
        return cli_fail(EXIT_USAGE, "freqs: --head-dim must be even, not %lld",
                        (long long)opts->head_dim);
    if (opts->end > MAX_TABLE_ENTRIES / (opts->head_dim / 2))
        return cli_fail(EXIT_USAGE, "freqs: --end %lld times --head-dim %lld / 2 is more than "
                        "%lld table entries", (long long)opts->end,
                        (long long)opts->head_dim, (long long)MAX_TABLE_ENTRIES);
    if (strcmp(opts->cos_path, opts->sin_path) == 0)
        return cli_fail(EXIT_USAGE, "freqs: --cos and --sin name the same file");
    if (cli_check_output_folder(opts->cos_path)) return EXIT_FAIL;
    return cli_check_output_folder(opts->sin_path);
}

static int run(const freqs_options *opts)
{
    char msg[CLI_MSG_LEN];
    int64_t shape[2] = {opts->end, opts->head_dim / 2};
    size_t n = (size_t)(shape[0] * shape[1]);
    float *cos_table = malloc(n * sizeof(float)), *sin_table = malloc(n * sizeof(float));
    int failed = 0;
    ra_status status;
    if (!cos_table || !sin_table)
        failed = cli_fail(EXIT_FAIL, "out of memory for %lld x %lld tables",
                          (long long)shape[0], (long long)shape[1]);
    else if ((status = ra_precompute_freqs(cos_table, sin_table, opts->head_dim, opts->end,
                                           opts->theta)) != RA_OK)
        failed = cli_fail_status(status, "cannot compute the tables");
    else if (ra_npy_write_f32(opts->cos_path, cos_table, 2, shape, msg, sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    else if (ra_npy_write_f32(opts->sin_path, sin_table, 2, shape, msg, sizeof msg) != RA_OK) {
        remove(opts->cos_path); /* both files or neither */
        failed = cli_fail(EXIT_FAIL, "%s (so %s was removed too)", msg, opts->cos_path);
    }
    free(cos_table);
    free(sin_table);
    return failed;
}

int cmd_freqs(int argc, char **argv)
{
    freqs_options opts = {.theta = 10000.0};
    const cli_option options[] = {
        CLI_INT_OPTION("--head-dim", &opts.head_dim, 2, INT32_MAX),
        CLI_INT_OPTION("--end", &opts.end, 1, RA_MAX_POSITION),
        CLI_POSITIVE_OPTION("--theta", &opts.theta),
        CLI_STRING_OPTION("--cos", &opts.cos_path),
        CLI_STRING_OPTION("--sin", &opts.sin_path),
    };
    switch (cli_parse("freqs", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    int failed = check_options(&opts);
    return failed ? failed : run(&opts);
}
