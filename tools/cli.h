/*
 * cli.h — what the subcommands of the `ropeattn` tool share: exit codes,
 * error reporting, a declarative option parser, threads and output checks.
 *
 * The tool may exit; the library never does.  Every subcommand is a function
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is the subcommand's name)
 * that returns the process exit code.  A failure prints exactly one line on
 * stderr, "ropeattn: ...", and leaves no output file behind.
 */
#ifndef RA_TOOLS_CLI_H
#define RA_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "ropeattn.h"

enum {
    EXIT_OK = 0,
    EXIT_FAIL = 1,  /* bad input file or data, I/O error, a failed check */
    EXIT_USAGE = 2, /* bad command line */
};

/* Room for one error sentence from the io layer. */
#define CLI_MSG_LEN 512
/* The longest message line cli_fail prints (longer ones are cut). */
#define CLI_LINE_LEN 8192

/* Prints "ropeattn: <message>\n" on stderr, each control character in the
 * message written as \xNN, and returns exit_code. */
int cli_fail(int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For a failed library call: "ropeattn: <what>: <ra_status_string>
 * (<ra_last_error>)"; _detail: with detail (another library's sentence)
 * in place of ra_last_error's. */
int cli_fail_status(ra_status status, const char *what);
int cli_fail_status_detail(ra_status status, const char *what, const char *detail);

/* From now on cli_fail keeps its first message instead of printing it (a
 * rank of an MPI launch other than 0: comm.h says which rank prints);
 * cli_print_held prints it, if any. */
void cli_hold_messages(void);
void cli_print_held(void);

/* ---- options ----------------------------------------------------------- */

typedef enum cli_kind {
    CLI_FLAG,   /* no value; dest is int*, set to 1 */
    CLI_STRING, /* dest is const char ** */
    CLI_INT,    /* dest is int64_t *, checked against [min, max] */
    CLI_POSITIVE, /* dest is double *, a finite number > 0 */
    CLI_CHOICE, /* dest is int *, set to the index of the value in choices */
} cli_kind;

typedef struct cli_option {
    const char *name; /* "--input" */
    cli_kind kind;
    void *dest;
    int64_t min, max;           /* CLI_INT */
    const char *const *choices; /* CLI_CHOICE: NULL-terminated */
    int *seen;                  /* optional: set to 1 when the option is given */
} cli_option;

/* Table entries; trailing arguments add fields, e.g. .seen = &given. */
#define CLI_FLAG_OPTION(opt_name, ptr, ...) \
    {.name = (opt_name), .kind = CLI_FLAG, .dest = (ptr), __VA_ARGS__}
#define CLI_STRING_OPTION(opt_name, ptr, ...) \
    {.name = (opt_name), .kind = CLI_STRING, .dest = (ptr), __VA_ARGS__}
#define CLI_INT_OPTION(opt_name, ptr, lo, hi, ...) \
    {.name = (opt_name), .kind = CLI_INT, .dest = (ptr), .min = (lo), .max = (hi), __VA_ARGS__}
#define CLI_POSITIVE_OPTION(opt_name, ptr, ...) \
    {.name = (opt_name), .kind = CLI_POSITIVE, .dest = (ptr), __VA_ARGS__}
#define CLI_CHOICE_OPTION(opt_name, ptr, names, ...) \
    {.name = (opt_name), .kind = CLI_CHOICE, .dest = (ptr), .choices = (names), __VA_ARGS__}

typedef enum cli_result {
    CLI_OK,    /* options parsed: go on */
    CLI_HELP,  /* --help or -h was given: print usage and exit 0 */
    CLI_ERROR, /* the message is printed: exit with EXIT_USAGE */
} cli_result;

/* Parses argv[1..argc) against opts.  Accepts "--name value" and
 * "--name=value"; numbers must be whole strings (strtol/strtod).  Anything
 * else — an unknown option, a missing or malformed value, an option with a
 * value given twice, a positional argument — prints one message naming the
 * subcommand and returns CLI_ERROR. */
cli_result cli_parse(const char *command, int argc, char **argv,
                     const cli_option *opts, int n_opts);

/* A missing required option: prints the message, returns EXIT_USAGE. */
int cli_require(const char *command, const char *option);

/* The layout and path names accepted on the command line, indexed by
 * ra_layout and by cli_path. */
extern const char *const cli_layout_names[];
extern const char *const cli_path_names[];

typedef enum cli_path { CLI_PATH_FLASH, CLI_PATH_REFERENCE } cli_path;
ra_attention_path cli_attention_path(int cli_path_index);

/* Largest --threads value any subcommand accepts. */
#define CLI_MAX_THREADS 1024


/* ---- threads ----------------------------------------------------------- */

/* Creates a context with n_threads (0: one per processor) and sets OpenBLAS
 * to the same count, so that the projections and the library's kernels use
 * the same threads.  On failure prints the message and returns nonzero. */
int cli_context_create(ra_context **ctx, int64_t n_threads);

/* ---- a program's main (cli_main.c) ------------------------------------ */

/* First in main: holds each of the standard descriptors the program was
 * started without on /dev/null and installs the signal handlers
 * (outputs.h).  Returns 0, or -1 when a descriptor cannot be held. */
int cli_start(void);

/* run(argc, argv) after the environment's checks (RA_FORCE_ISA,
 * RA_PROGRESS_DELAY); a report that did not reach stdout fails it.
 * Returns the exit code. */
int cli_run_checked(int argc, char **argv, int (*run)(int argc, char **argv));

/* ---- subcommands ------------------------------------------------------- */

int cmd_attention(int argc, char **argv);
int cmd_rope(int argc, char **argv);
int cmd_freqs(int argc, char **argv);
int cmd_families(int argc, char **argv);
int cmd_convert_layout(int argc, char **argv);

#endif
