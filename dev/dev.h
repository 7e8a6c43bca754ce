/*
 * dev.h — the developer programs, apart from the user's ropeattn (issue
 * 42): each is built beside it (build/ropeattn-bench, build/ropeattn-demo,
 * build/ropeattn-train-demo) and not installed.  Each command is a
 * function as cli.h's subcommands are: argv[0] is the program's name, the
 * options follow, and it returns the exit code.
 */
#ifndef RA_DEV_H
#define RA_DEV_H

/* ropeattn-bench (bench/bench_main.c): the kernels timed beside the
 * machine's limits. */
int cmd_bench(int argc, char **argv);
/* ropeattn-demo (dev/cmd_demo.c): a LLaMA-2-7B-shaped layer, checked. */
int cmd_demo(int argc, char **argv);
/* ropeattn-train-demo (dev/cmd_train_demo.c): a small model trained with
 * and without RoPE. */
int cmd_train_demo(int argc, char **argv);

#endif
