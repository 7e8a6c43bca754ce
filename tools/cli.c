/* cli.c — error reporting, option parsing, threads and output checks shared
 * by the subcommands. */
#include "cli.h"

#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const cli_layout_names[] = {
    [RA_LAYOUT_INTERLEAVED] = "interleaved", [RA_LAYOUT_HALF] = "half", NULL};
const char *const cli_path_names[] = {
    [CLI_PATH_FLASH] = "flash", [CLI_PATH_REFERENCE] = "reference", NULL};

ra_attention_path cli_attention_path(int cli_path_index)
{
    return cli_path_index == CLI_PATH_REFERENCE ? RA_PATH_REFERENCE : RA_PATH_FLASH;
}

int cli_fail(int exit_code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("ropeattn: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    return exit_code;
}

int cli_fail_status(ra_status status, const char *what)
{
    return cli_fail(EXIT_FAIL, "%s: %s", what, ra_status_string(status));
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

static void print_choices(const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        fprintf(stderr, "%s%s", i ? (choices[i + 1] ? ", " : " or ") : "", choices[i]);
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
        fprintf(stderr, "ropeattn: %s: %s must be ", command, opt->name);
        print_choices(opt->choices);
        fprintf(stderr, ", not '%s'\n", value);
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

/* ---- rope ------------------------------------------------------------- */

int64_t cli_rope_table_rows(int64_t start, int64_t seq)
{
    const int64_t most = (int64_t)1 << 15;
    return start + seq < most ? start + seq : most;
}

/* ---- threads ----------------------------------------------------------- */

int cli_context_create(ra_context **ctx, int64_t n_threads)
{
    ra_status status = ra_context_create(ctx, (int)n_threads);
    if (status != RA_OK) return cli_fail_status(status, "cannot create the thread context");
    openblas_set_num_threads(ra_context_threads(*ctx));
    return 0;
}

/* ---- files ------------------------------------------------------------- */

/* The folder part of path ("." for a bare name) into a new string. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *folder = malloc(len + 1);
    if (!folder) return NULL;
    memcpy(folder, slash ? path : ".", len);
    folder[len] = '\0';
    return folder;
}

int cli_same_file(const char *a, const char *b)
{
    if (strcmp(a, b) == 0) return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* a file still to be written: the same name in the same folder */
    const char *name_a = strrchr(a, '/'), *name_b = strrchr(b, '/');
    if (strcmp(name_a ? name_a + 1 : a, name_b ? name_b + 1 : b) != 0) return 0;
    char *fa = folder_of(a), *fb = folder_of(b);
    int same = fa && fb && stat(fa, &sa) == 0 && stat(fb, &sb) == 0 && sa.st_dev == sb.st_dev &&
               sa.st_ino == sb.st_ino;
    free(fa);
    free(fb);
    return same;
}

int cli_check_output_folder(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return 0; /* the current folder */
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    char *folder = malloc(len + 1);
    if (!folder) return cli_fail(EXIT_FAIL, "out of memory");
    memcpy(folder, path, len);
    folder[len] = '\0';
    struct stat st;
    int failed = 0;
    if (stat(folder, &st) != 0)
        failed = cli_fail(EXIT_FAIL, "cannot write %s: folder %s: %s", path, folder,
                          strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        failed = cli_fail(EXIT_FAIL, "cannot write %s: %s is not a folder", path, folder);
    free(folder);
    return failed;
}
