/* cli.c — error reporting, option parsing, threads and output checks shared
 * by the subcommands. */
#include "cli.h"

#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *const cli_layout_names[] = {
    [RA_LAYOUT_INTERLEAVED] = "interleaved", [RA_LAYOUT_HALF] = "half", NULL};
const char *const cli_path_names[] = {
    [CLI_PATH_FLASH] = "flash", [CLI_PATH_REFERENCE] = "reference", NULL};

ra_attention_path cli_attention_path(int cli_path_index)
{
    return cli_path_index == CLI_PATH_REFERENCE ? RA_PATH_REFERENCE : RA_PATH_FLASH;
}

/* Appends text to line, each control character (C0, DEL, C1 in UTF-8) as
 * \xNN, so that the message stays one line whatever a path holds. */
static void append_escaped(char *line, size_t line_len, const char *text)
{
    size_t used = strlen(line);
    for (const unsigned char *p = (const unsigned char *)text; *p && used + 9 < line_len; p++) {
        int c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        if (*p < 0x20 || *p == 0x7f || c1) {
            used += (size_t)snprintf(line + used, line_len - used, "\\x%02x", *p);
            if (c1) used += (size_t)snprintf(line + used, line_len - used, "\\x%02x", *++p);
        } else {
            line[used++] = (char)*p;
        }
    }
    line[used] = '\0';
}

/* The first message of a process that holds them (cli_hold_messages). */
static int holding;
static char held[CLI_LINE_LEN];

void cli_hold_messages(void)
{
    holding = 1;
}

void cli_print_held(void)
{
    fputs(held, stderr);
    held[0] = '\0';
}

int cli_fail(int exit_code, const char *fmt, ...)
{
    char text[CLI_LINE_LEN], line[CLI_LINE_LEN] = "ropeattn: ";
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    append_escaped(line, sizeof line - 1, text);
    strcat(line, "\n");
    if (!holding)
        fputs(line, stderr);
    else if (held[0] == '\0')
        memcpy(held, line, sizeof held);
    return exit_code;
}

int cli_fail_status(ra_status status, const char *what)
{
    return cli_fail_status_detail(status, what, ra_last_error());
}

int cli_fail_status_detail(ra_status status, const char *what, const char *detail)
{
    if (detail[0] == '\0') return cli_fail(EXIT_FAIL, "%s: %s", what, ra_status_string(status));
    return cli_fail(EXIT_FAIL, "%s: %s (%s)", what, ra_status_string(status), detail);
}

int cli_require(const char *command, const char *option)
{
    return cli_fail(EXIT_USAGE, "%s: %s is required (see 'ropeattn %s --help')",
                    command, option, command);
}

/* ---- options ----------------------------------------------------------- */

/* Whole strings only: no leading blanks (strtol would skip them), nothing
 * after the number. */
static int parse_int(const char *text, int64_t *out)
{
    if (isspace((unsigned char)text[0])) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) return 0;
    *out = v;
    return 1;
}

static int parse_double(const char *text, double *out)
{
    if (isspace((unsigned char)text[0])) return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

/* "a, b or c" into buf. */
static void format_choices(char *buf, size_t len, const char *const *choices)
{
    buf[0] = '\0';
    for (int i = 0; choices[i]; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
                 i ? (choices[i + 1] ? ", " : " or ") : "", choices[i]);
}

/* Stores value into opt's destination; 0 (after printing why) if it does not
 * parse or is out of range. */
static int store_value(const char *command, const cli_option *opt, const char *value)
{
    switch (opt->kind) {
    case CLI_STRING:
        if (value[0] == '\0') {
            cli_fail(EXIT_USAGE, "%s: %s needs a non-empty value", command, opt->name);
            return 0;
        }
        *(const char **)opt->dest = value;
        return 1;
    case CLI_INT: {
        int64_t v;
        if (!parse_int(value, &v) || v < opt->min || v > opt->max) {
            cli_fail(EXIT_USAGE, "%s: %s must be an integer from %lld to %lld, not '%s'",
                     command, opt->name, (long long)opt->min, (long long)opt->max, value);
            return 0;
        }
        *(int64_t *)opt->dest = v;
        return 1;
    }
    case CLI_POSITIVE: {
        double v;
        if (!parse_double(value, &v) || !(v > 0)) {
            cli_fail(EXIT_USAGE, "%s: %s must be a number greater than 0, not '%s'",
                     command, opt->name, value);
            return 0;
        }
        *(double *)opt->dest = v;
        return 1;
    }
    case CLI_CHOICE:
        for (int i = 0; opt->choices[i]; i++) {
            if (strcmp(value, opt->choices[i]) == 0) {
                *(int *)opt->dest = i;
                return 1;
            }
        }
        char names[256];
        format_choices(names, sizeof names, opt->choices);
        cli_fail(EXIT_USAGE, "%s: %s must be %s, not '%s'", command, opt->name, names, value);
        return 0;
    case CLI_FLAG:
        break;
    }
    return 0;
}

static const cli_option *find_option(const cli_option *opts, int n_opts,
                                     const char *name, size_t name_len)
{
    for (int i = 0; i < n_opts; i++)
        if (strlen(opts[i].name) == name_len && strncmp(opts[i].name, name, name_len) == 0)
            return &opts[i];
    return NULL;
}

cli_result cli_parse(const char *command, int argc, char **argv,
                     const cli_option *opts, int n_opts)
{
    /* an option with a value given twice is refused: which one was meant
     * (two --output paths, two inputs) cannot be known */
    enum { MAX_OPTIONS = 256 };
    unsigned char given[MAX_OPTIONS] = {0};
    if (n_opts > MAX_OPTIONS) {
        cli_fail(EXIT_USAGE, "%s: %d options, more than cli_parse takes", command, n_opts);
        return CLI_ERROR;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return CLI_HELP;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            cli_fail(EXIT_USAGE, "%s: unexpected argument '%s' (see 'ropeattn %s --help')",
                     command, arg, command);
            return CLI_ERROR;
        }
        const char *equals = strchr(arg, '=');
        size_t name_len = equals ? (size_t)(equals - arg) : strlen(arg);
        const cli_option *opt = find_option(opts, n_opts, arg, name_len);
        if (!opt) {
            cli_fail(EXIT_USAGE, "%s: unknown option '%.*s' (see 'ropeattn %s --help')",
                     command, (int)name_len, arg, command);
            return CLI_ERROR;
        }
        if (opt->kind != CLI_FLAG && given[opt - opts]++) {
            cli_fail(EXIT_USAGE, "%s: %s is given twice", command, opt->name);
            return CLI_ERROR;
        }
        if (opt->kind == CLI_FLAG) {
            if (equals) {
                cli_fail(EXIT_USAGE, "%s: %s takes no value", command, opt->name);
                return CLI_ERROR;
            }
            *(int *)opt->dest = 1;
        } else {
            const char *value = equals ? equals + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!value) {
                cli_fail(EXIT_USAGE, "%s: %s needs a value", command, opt->name);
                return CLI_ERROR;
            }
            if (!store_value(command, opt, value)) return CLI_ERROR;
        }
        if (opt->seen) *opt->seen = 1;
    }
    return CLI_OK;
}

/* ---- threads ----------------------------------------------------------- */

/* OpenBLAS 0.3.21 (Debian 12, x86-64) maps a buffer of 128 MiB + 4 KiB for
 * each thread that runs its kernels, a worker as it starts, the calling
 * thread at its first sgemm, and retries forever when the mapping fails (an
 * address-space limit: ulimit -v), which hangs the run.  Its constructor
 * starts a worker per processor it may run on; so the process runs on one
 * processor until OpenBLAS is loaded (blas_cpus_narrow, blas_cpus_restore),
 * which then has no workers, and cli_context_create adds them once their
 * buffers and stacks fit. */
#define BLAS_BUFFER_BYTES (((size_t)128 << 20) + 4096)
#define BLAS_SPARE_BYTES ((size_t)16 << 20)
#define BLAS_WARM_UP 256 /* an sgemm of this size, shared by every thread */

static unsigned long blas_cpus[1024 / (8 * sizeof(unsigned long))]; /* as the process had */
static int blas_cpus_narrowed;

static void blas_cpus_narrow(void)
{
    unsigned long first[sizeof blas_cpus / sizeof blas_cpus[0]] = {0};
    if (syscall(SYS_sched_getaffinity, 0, sizeof blas_cpus, blas_cpus) <= 0) return;
    for (size_t i = 0; i < sizeof blas_cpus / sizeof blas_cpus[0]; i++)
        if (blas_cpus[i]) {
            first[i] = blas_cpus[i] & -blas_cpus[i]; /* its lowest processor */
            break;
        }
    blas_cpus_narrowed = syscall(SYS_sched_setaffinity, 0, sizeof first, first) == 0;
}

/* Runs before any library's constructor (in an executable; elsewhere it is
 * ignored). */
__attribute__((section(".preinit_array"), used))
static void (*const blas_cpus_narrow_early)(void) = blas_cpus_narrow;

/* Runs after the libraries' constructors, before main. */
__attribute__((constructor)) static void blas_cpus_restore(void)
{
    if (blas_cpus_narrowed) syscall(SYS_sched_setaffinity, 0, sizeof blas_cpus, blas_cpus);
}

/* Sets OpenBLAS to n_threads if the address space has room for their
 * buffers, the workers' stacks and some to spare (a mapping of that size
 * that reserves no memory, tried and given back), and has them map their
 * buffers now, with one sgemm, rather than in the middle of the run. */
static int blas_set_threads(int n_threads)
{
    pthread_attr_t attr;
    size_t stack = 0;
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_getstacksize(&attr, &stack); /* the default */
        pthread_attr_destroy(&attr);
    }
    size_t bytes = (size_t)n_threads * BLAS_BUFFER_BYTES +
                   (size_t)(n_threads - 1) * stack + BLAS_SPARE_BYTES;
    void *probe = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
    float *m = probe == MAP_FAILED ? NULL : calloc(2 * BLAS_WARM_UP * BLAS_WARM_UP, sizeof *m);
    if (probe != MAP_FAILED) munmap(probe, bytes);
    if (!m)
        return cli_fail(EXIT_FAIL, "out of memory: OpenBLAS needs %zu MiB of address space "
                        "(ulimit -v) for the buffers of %d thread%s; use fewer --threads or "
                        "raise the limit", bytes >> 20, n_threads, n_threads > 1 ? "s" : "");
    openblas_set_num_threads(n_threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BLAS_WARM_UP, BLAS_WARM_UP,
                BLAS_WARM_UP, 1.0f, m, BLAS_WARM_UP, m, BLAS_WARM_UP, 0.0f,
                m + BLAS_WARM_UP * BLAS_WARM_UP, BLAS_WARM_UP);
    free(m);
    return 0;
}

int cli_context_create(ra_context **ctx, int64_t n_threads)
{
    ra_status status = ra_context_create(ctx, (int)n_threads);
    if (status != RA_OK) return cli_fail_status(status, "cannot create the thread context");
    int failed = blas_set_threads(ra_context_threads(*ctx));
    if (failed) {
        ra_context_destroy(*ctx);
        *ctx = NULL;
    }
    return failed;
}
