/* cmd_families.c — `ropeattn families`: the model families the checkpoint
 * library knows (ropeattn_hf.h's ra_hf_family_*), one a line, for people
 * and for tests/hf_sweep/family_table.py, which writes docs/FAMILIES.md's
 * table from it. */
#include <stdio.h>

#include "cli.h"
#include "ropeattn_hf.h"

static const char usage[] =
    "usage: ropeattn families\n"
    "\n"
    "Prints the model families ropeattn knows by config.json's model_type, one a\n"
    "line, sorted by model_type: the model_type, its rope layout (half: rotate_half's\n"
    "pairs (i, i + D/2); interleaved: pairs (2i, 2i + 1)) and \"runs\" or \"refused: \"\n"
    "and why, separated by tabs.  A model_type not listed is refused where its\n"
    "config describes attention (heads, rope keys ...).  docs/FAMILIES.md gives\n"
    "the table with transformers' RoPE families beside it.\n";

int cmd_families(int argc, char **argv)
{
    switch (cli_parse("families", argc, argv, NULL, 0)) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    for (int64_t i = 0; i < ra_hf_family_count(); i++) {
        const char *why = ra_hf_family_refused(i);
        printf("%s\t%s\t%s%s\n", ra_hf_family_model_type(i),
               cli_layout_names[ra_hf_family_layout(i)], why[0] ? "refused: " : "runs", why);
    }
    return fflush(stdout) == 0 ? EXIT_OK : cli_fail(EXIT_FAIL, "families: cannot write the list");
}
