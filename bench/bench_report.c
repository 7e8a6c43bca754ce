/* bench_report.c — the bench's results as a table for people or as JSON. */
#include <math.h>
#include <stdio.h>

#include "bench.h"

static const char *const limit_names[N_LIMITS] = {"copy", "rmw", "sgemm"};

static const char *rate_unit(const bench_case *c)
{
    return c->work_is_flops ? "GFLOP/s" : "GB/s";
}

void bench_print_table_header(void)
{
    printf("%-28s %-56s %12s %8s %-7s %-6s %8s\n", "name", "shape", "median", "rate", "",
           "limit", "fraction");
}

void bench_print_table_row(const bench_record *r)
{
    const bench_case *c = r->what;
    double t = r->median_seconds;
    const char *unit = t >= 1 ? "s" : t >= 1e-3 ? "ms" : "us";
    double scaled = t >= 1 ? t : t >= 1e-3 ? t * 1e3 : t * 1e6;
    printf("%-28s %-56s %9.3f %-2s %8.2f %-7s ", c->name, c->shape, scaled, unit, r->rate,
           rate_unit(c));
    if (c->judged_by == LIMIT_NONE)
        printf("%-6s %8s\n", "-", "-");
    else
        printf("%-6s %8.3f\n", limit_names[c->judged_by], r->fraction);
    fflush(stdout);
}

void bench_print_json(const bench_record *records, int n)
{
    printf("[\n");
    for (int i = 0; i < n; i++) {
        const bench_record *r = &records[i];
        const bench_case *c = r->what;
        printf("  {\"name\": \"%s\", \"shape\": \"%s\", \"median_seconds\": %.6e, "
               "\"%s\": %.0f, \"rate\": %.6g, \"rate_unit\": \"%s\", ",
               c->name, c->shape, r->median_seconds, c->work_is_flops ? "flops" : "bytes",
               c->work, r->rate, rate_unit(c));
        if (c->judged_by == LIMIT_NONE || !isfinite(r->fraction))
            printf("\"limit_name\": null, \"fraction\": null}");
        else
            printf("\"limit_name\": \"%s\", \"fraction\": %.6g}", limit_names[c->judged_by],
                   r->fraction);
        printf("%s\n", i + 1 < n ? "," : "");
    }
    printf("]\n");
}
