/*
 * bench_main.c — `ropeattn bench`: options, the OpenBLAS environment, which
 * cases run, and the report.
 *
 * OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, when set, pin OpenBLAS to a kernel
 * and cache size that may be slower than the best for this CPU, and OpenBLAS
 * reads them once, when it loads.  So unless RA_BENCH_REEXEC is set, the
 * bench re-executes itself once without them (recording what it removed in
 * RA_BENCH_REEXEC) and says so; set RA_BENCH_REEXEC=keep to measure with the
 * environment as given.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"
#include "bench.h"

static const char usage[] =
    "usage: ropeattn bench [--json] [--threads N] [--only NAME[,NAME...]] [--repeats N]\n"
    "\n"
    "Times each kernel beside the machine limit it is judged against, measured in\n"
    "the same run: memory copy and in-place read-modify-write bandwidth (GB/s) and\n"
    "cblas_sgemm (GFLOP/s).  Each case is set up once, run once to warm up and to\n"
    "check its result, then timed; the median over the repeats is reported.\n"
    "\n"
    "  --json       print a JSON array of records instead of a table (notes go to\n"
    "               stderr)\n"
    "  --threads N  threads for the library and OpenBLAS (default: one per processor)\n"
    "  --only LIST  run only these cases (comma-separated); the limits they are\n"
    "               judged against run too\n"
    "  --repeats N  timed samples per case (default 5)\n"
    "\n"
    "cases:\n"
    "  copy, rmw, sgemm                 the limits\n"
    "  rope_f32, rope_half_f32, rope_bf16, rope_oop_f32, rope_decode_f32\n"
    "  attention_prefill_f32_s512, attention_prefill_f32_s2048\n"
    "  layer_forward_f32_s2048\n"
    "\n"
    "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE can force a slower sgemm kernel; when\n"
    "either is set the bench re-runs itself once without them.  Set\n"
    "RA_BENCH_REEXEC=keep to measure with them.\n";

#define MAX_CASES 32
#define REEXEC_VAR "RA_BENCH_REEXEC"
#define REEXEC_MARK "removed"

static const char *const blas_env_vars[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};
#define N_BLAS_ENV_VARS 2

/* Every case, limits first so that the others can be judged against them. */
static int all_cases(const bench_case **cases)
{
    const bench_case *groups[] = {bench_limit_cases, bench_rope_cases, bench_attention_cases};
    const int counts[] = {bench_limit_case_count, bench_rope_case_count,
                          bench_attention_case_count};
    int n = 0;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < counts[g] && n < MAX_CASES; i++) cases[n++] = &groups[g][i];
    return n;
}

/* Re-executes this program once without the OpenBLAS variables; returns
 * only if there is nothing to remove or exec failed. */
static void reexec_without_blas_env(int argc, char **argv)
{
    if (getenv(REEXEC_VAR)) return;
    char removed[512] = REEXEC_MARK;
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        const char *value = getenv(blas_env_vars[i]);
        if (value)
            snprintf(removed + strlen(removed), sizeof removed - strlen(removed), " %s=%s",
                     blas_env_vars[i], value);
    }
    if (strcmp(removed, REEXEC_MARK) == 0) return;
    char **args = malloc((size_t)(argc + 2) * sizeof *args);
    if (!args) return;
    args[0] = "ropeattn";
    memcpy(args + 1, argv, (size_t)argc * sizeof *args);
    args[argc + 1] = NULL;
    char *saved[N_BLAS_ENV_VARS];
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        const char *value = getenv(blas_env_vars[i]);
        saved[i] = value ? strdup(value) : NULL;
        unsetenv(blas_env_vars[i]);
    }
    setenv(REEXEC_VAR, removed, 1);
    fflush(NULL);
    execv("/proc/self/exe", args);
    /* exec failed: measure with the environment as given. */
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        if (saved[i]) setenv(blas_env_vars[i], saved[i], 1);
        free(saved[i]);
    }
    setenv(REEXEC_VAR, "exec-failed", 1);
    free(args);
}

/* Notes on OpenBLAS: which core it uses and why. */
static void print_blas_notes(FILE *to)
{
    fprintf(to, "note: %s, core %s\n", openblas_get_config(), openblas_get_corename());
    const char *reexec = getenv(REEXEC_VAR);
    if (reexec && strncmp(reexec, REEXEC_MARK " ", strlen(REEXEC_MARK) + 1) == 0) {
        fprintf(to, "note: re-ran itself without%s (they force a slower sgemm kernel); set "
                REEXEC_VAR "=keep to measure with them\n", reexec + strlen(REEXEC_MARK));
        return;
    }
    for (int i = 0; i < N_BLAS_ENV_VARS; i++) {
        const char *value = getenv(blas_env_vars[i]);
        if (value)
            fprintf(to, "note: %s=%s is set: sgemm (the limit and the layer's projections) is "
                    "measured with it, which may be slower than this CPU allows\n",
                    blas_env_vars[i], value);
    }
}

/* Marks the cases --only names, and the limits they are judged by. */
static int select_cases(const char *only, const bench_case **cases, int n, int *selected)
{
    for (int i = 0; i < n; i++) selected[i] = only == NULL;
    if (!only) return 0;
    char *list = strdup(only), *save = NULL;
    if (!list) return cli_fail(EXIT_FAIL, "out of memory");
    int failed = 0;
    for (char *name = strtok_r(list, ",", &save); name && !failed;
         name = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(name, cases[i]->name) == 0) selected[i] = found = 1;
        if (!found)
            failed = cli_fail(EXIT_USAGE, "bench: unknown case '%s' in --only (see 'ropeattn "
                              "bench --help')", name);
    }
    free(list);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && selected[i]; j++)
            if (cases[j]->measures != LIMIT_NONE && cases[j]->measures == cases[i]->judged_by)
                selected[j] = 1;
    return failed;
}

static int run_cases(const bench_case **cases, const int *selected, int n, ra_context *ctx,
                     int repeats, int json)
{
    bench_record records[MAX_CASES];
    double limit_rates[N_LIMITS] = {0};
    int n_records = 0;
    FILE *notes = json ? stderr : stdout;
    fprintf(notes, "ropeattn bench: %d threads, median of %d timed samples after a warm-up\n",
            ra_context_threads(ctx), repeats);
    print_blas_notes(notes);
    if (!json) bench_print_table_header();
    for (int i = 0; i < n; i++) {
        if (!selected[i]) continue;
        bench_record *r = &records[n_records];
        int failed = bench_measure(cases[i], ctx, repeats, r);
        if (failed) return failed;
        if (cases[i]->measures != LIMIT_NONE) limit_rates[cases[i]->measures] = r->rate;
        if (cases[i]->judged_by != LIMIT_NONE)
            r->fraction = r->rate / limit_rates[cases[i]->judged_by];
        if (!json) bench_print_table_row(r);
        n_records++;
    }
    if (json) bench_print_json(records, n_records);
    return EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
    int json = 0;
    int64_t threads = 0, repeats = 5;
    const char *only = NULL;
    const cli_option options[] = {
        CLI_FLAG_OPTION("--json", &json),
        CLI_INT_OPTION("--threads", &threads, 1, CLI_MAX_THREADS),
        CLI_STRING_OPTION("--only", &only),
        CLI_INT_OPTION("--repeats", &repeats, 1, 1000),
    };
    switch (cli_parse("bench", argc, argv, options, sizeof options / sizeof options[0])) {
    case CLI_HELP: fputs(usage, stdout); return EXIT_OK;
    case CLI_ERROR: return EXIT_USAGE;
    case CLI_OK: break;
    }
    const bench_case *cases[MAX_CASES];
    int selected[MAX_CASES];
    int n = all_cases(cases);
    int failed = select_cases(only, cases, n, selected);
    if (failed) return failed;
    reexec_without_blas_env(argc, argv);
    ra_context *ctx = NULL;
    failed = cli_context_create(&ctx, threads);
    if (!failed) failed = run_cases(cases, selected, n, ctx, (int)repeats, json);
    ra_context_destroy(ctx);
    return failed;
}
