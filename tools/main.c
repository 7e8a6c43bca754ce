/* main.c — the `ropeattn` command: picks the subcommand and runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm.h"

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
};
#define N_SUBCOMMANDS (int)(sizeof subcommands / sizeof subcommands[0])

/* The commands that left ropeattn for developer programs of their own
 * (issue 42), built beside it and not installed. */
static const char *const moved_commands[] = {"bench", "demo", "train-demo"};
#define N_MOVED (int)(sizeof moved_commands / sizeof moved_commands[0])

static void print_usage(void)
{
    printf("usage: ropeattn <command> [options]\n"
           "       ropeattn <command> --help\n"
           "       ropeattn --version\n\n"
           "Rotary position embedding and LLaMA-style grouped-query causal attention.\n\n"
           "commands:\n");
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        printf("  %-15s %s\n", subcommands[i].name, subcommands[i].summary);
    printf("\nbench, demo and train-demo are developer programs of their own:\n"
           "build/ropeattn-bench, build/ropeattn-demo and build/ropeattn-train-demo\n"
           "(built beside ropeattn, not installed).\n");
    printf("\nExit status: 0 on success, 1 for bad input files or a failed check,\n"
           "2 for a bad command line.\n");
}

/* The subcommand named by argv[1], run. */
static int run(int argc, char **argv)
{
    if (argc < 2) return cli_fail(EXIT_USAGE, "no command given (see 'ropeattn --help')");
    const char *name = argv[1];
    const int help = strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
                     strcmp(name, "help") == 0;
    /* `ropeattn help attention` printed this usage, not attention's, with exit 0 */
    if ((help || strcmp(name, "--version") == 0) && argc > 2)
        return cli_fail(EXIT_USAGE, "%s: unexpected argument '%s' (a command's options: "
                        "'ropeattn <command> --help')", name, argv[2]);
    if (help) {
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
    for (int i = 0; i < N_MOVED; i++)
        if (strcmp(name, moved_commands[i]) == 0)
            return cli_fail(EXIT_USAGE, "'%s' moved to the developer program ropeattn-%s "
                            "(build/ropeattn-%s; not installed)", name, name, name);
    return cli_fail(EXIT_USAGE, "unknown command '%s' (see 'ropeattn --help')", name);
}

int main(int argc, char **argv)
{
    if (cli_start() != 0) return EXIT_FAIL;
    int code = cli_comm_begin(&argc, &argv);
    if (code == 0) code = cli_run_checked(argc, argv, run);
    return cli_comm_end(code);
}
