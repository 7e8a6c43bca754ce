/* ropeattn_train_demo.c — ropeattn-train-demo, the developer program that
 * trains a small model built from the layer, with and without RoPE
 * (`ropeattn train-demo` before 0.3.0).  Built beside ropeattn, not
 * installed. */
#include "../tools/cli.h"
#include "dev.h"

int main(int argc, char **argv)
{
    if (cli_start() != 0) return EXIT_FAIL;
    return cli_run_checked(argc, argv, cmd_train_demo);
}
