/* ropeattn_demo.c — ropeattn-demo, the developer program that runs a
 * LLaMA-2-7B-shaped layer on generated weights and checks it (`ropeattn
 * demo` before 0.3.0).  Built beside ropeattn, not installed. */
#include "../tools/cli.h"
#include "dev.h"

int main(int argc, char **argv)
{
    if (cli_start() != 0) return EXIT_FAIL;
    return cli_run_checked(argc, argv, cmd_demo);
}
