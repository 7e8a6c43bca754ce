/* ropeattn_bench.c — ropeattn-bench, the developer program that times the
 * kernels beside the machine's limits (bench/; `ropeattn bench` before
 * 0.3.0).  Built beside ropeattn, not installed. */
#include "../tools/cli.h"
#include "dev.h"

int main(int argc, char **argv)
{
    if (cli_start() != 0) return EXIT_FAIL;
    return cli_run_checked(argc, argv, cmd_bench);
}
