/* main.c — the `ropeattn` command: picks the subcommand and runs it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm.h"
#include "progress.h"
#include "outputs.h"

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"attention", cmd_attention, "run one attention layer on real weights and activations"},
    {"rope", cmd_rope, "apply rotary position embedding to a [B, S, heads, D] array"},
    {"freqs", cmd_freqs, "write the cos and sin tables of a rope (any Hugging Face rope type)"},
    {"families", cmd_families,
     "list the model families (model_type) ropeattn runs or refuses"},
    {"convert-layout", cmd_convert_layout,
     "permute wq/wk rows between the interleaved and half RoPE layouts"},
    {"demo", cmd_demo, "run a LLaMA-2-7B-shaped layer on generated weights and check it"},
    {"train-demo", cmd_train_demo,
     "train a small model built from the layer, with and without RoPE, and compare"},
    {"bench", cmd_bench, "measure rope, attention and the layer against machine limits"},
};
#define N_SUBCOMMANDS (int)(sizeof subcommands / sizeof subcommands[0])

static void print_usage(void)
{
    printf("usage: ropeattn <command> [options]\n"
           "       ropeattn <command> --help\n"
           "       ropeattn --version\n\n"
           "Rotary position embedding and LLaMA-style grouped-query causal attention.\n\n"
           "commands:\n");
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        printf("  %-15s %s\n", subcommands[i].name, subcommands[i].summary);
    printf("\nExit status: 0 on success, 1 for bad input files or a failed check,\n"
           "2 for a bad command line.\n");
}

/* The subcommand named by argv[1], run. */
static int run(int argc, char **argv)
{
    if (argc < 2) return cli_fail(EXIT_USAGE, "no command given (see 'ropeattn --help')");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_usage();
        return EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("ropeattn %s (simd %s)\n", RA_VERSION_STRING, ra_simd_name());
        return EXIT_OK;
    }
    /* across the ranks of an MPI launch, the others would each write the
     * same files */
    if (cli_comm_size() > 1 && strcmp(name, "attention") != 0)
        return cli_fail(EXIT_USAGE, "%s runs as one process; of the commands only 'attention' "
                        "runs across the %d ranks of an MPI launch", name, cli_comm_size());
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        if (strcmp(name, subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    return cli_fail(EXIT_USAGE, "unknown command '%s' (see 'ropeattn --help')", name);
}

/* run, after the environment's checks; a report that did not reach stdout
 * fails it. */
static int run_checked(int argc, char **argv)
{
    if (ra_simd_check_environment() != RA_OK)
        return cli_fail(EXIT_USAGE, "RA_FORCE_ISA must be base, avx2, avx512, avx512bf16 or amx "
                        "(or unset), "
                        "not '%.64s'", getenv("RA_FORCE_ISA"));
    if (progress_check_environment() != 0)
        return cli_fail(EXIT_USAGE, "RA_PROGRESS_DELAY must be a number of seconds from 0 to "
                        "1e6 (or unset), not '%.64s'", getenv("RA_PROGRESS_DELAY"));
    int code = run(argc, argv);
    /* A report that did not reach stdout (a full disk, a closed pipe, a file
     * size limit) is a failure too, unless the run failed already. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (code == EXIT_OK)
            code = cli_fail(EXIT_FAIL, "cannot write the standard output%s%s",
                            errno ? ": " : "", errno ? strerror(errno) : "");
    }
    return code;
}

/* Holds each of descriptors 0, 1 and 2 that the run was started without
 * on /dev/null, read-only: else the first file opened (an output's
 * temporary file) would take it, and the report (stdout) or a progress
 * line (stderr) would be written into that output.  Writes to a held one
 * fail, as to a closed one.  Returns 0, or -1 when one cannot be held. */
static int hold_standard_descriptors(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF && open("/dev/null", O_RDONLY) != fd)
            return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (hold_standard_descriptors() != 0) return EXIT_FAIL;
    cli_signals_install();
    int code = cli_comm_begin(&argc, &argv);
    if (code == 0) code = run_checked(argc, argv);
    return cli_comm_end(code);
}
