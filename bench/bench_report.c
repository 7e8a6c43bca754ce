/* bench_report.c — the bench's results as a table for people or as JSON. */
#include <math.h>
#include <stdio.h>

#include "bench.h"

static const char *const limit_names[N_LIMITS] = {"copy",    "rmw",     "rmw40M",
                                                    "sgemm",   "read32M", "read64M",
                                                    "read128M", "read256M"};

const char *bench_limit_name(bench_limit limit)
{
    return limit >= 0 && limit < N_LIMITS ? limit_names[limit] : "-";
}

static const char *rate_unit(const bench_case *c)
{
    return c->work_is_flops ? "GFLOP/s" : "GB/s";
}

/* A case's comma-separated parts with separator between them. */
static void print_parts(const char *parts, const char *separator)
{
    for (const char *p = parts; *p; p++) {
        if (*p == ',')
            fputs(separator, stdout);
        else
            putchar(*p);
    }
}

/* "machine: <cpu> (family F, model M), simd S (B-bit vectors), L2 ..." */
static void print_machine(void)
{
    const bench_machine *m = bench_machine_info();
    printf("machine: %s (family %d, model %d), simd %s (%d-bit vectors), L2 ", m->cpu,
           m->family, m->model, m->simd, m->vector_bits);
    if (m->l2_bytes > 0)
        printf("%lld KiB a core\n", (long long)(m->l2_bytes >> 10));
    else
        printf("unknown\n");
}

void bench_print_table_header(const bench_run_info *info)
{
    print_machine();
    if (info->one_thread)
        printf("columns: %d threads, then on 1 thread (1t: rate, fraction of its limit on 1 "
               "thread, target)\n", info->threads);
    else
        printf("columns: %d thread (the 1t columns repeat it)\n", info->threads);
    printf("%-33s %-56s %12s %8s %-7s %-8s %8s %6s %8s %8s %6s %9s %9s\n", "name", "shape",
           "median", "rate", "", "limit", "fraction", "target", "1t rate", "1t frac", "1t tgt",
           "vs torch", "vs torch2");
}

/* A fraction target, or "-". */
static void print_target(double target)
{
    if (target > 0)
        printf(" %6.2f", target);
    else
        printf(" %6s", "-");
}

void bench_print_table_row(const bench_record *r)
{
    const bench_case *c = r->what;
    double t = r->median_seconds;
    const char *unit = t >= 1 ? "s" : t >= 1e-3 ? "ms" : "us";
    double scaled = t >= 1 ? t : t >= 1e-3 ? t * 1e3 : t * 1e6;
    printf("%-33s %-56s %9.3f %-2s %8.2f %-7s ", c->name, r->shape, scaled, unit, r->rate,
           rate_unit(c));
    if (c->judged_by == LIMIT_NONE)
        printf("%-8s %8s", "-", "-");
    else
        printf("%-8s %8.3f", limit_names[c->judged_by], r->fraction);
    print_target(c->target);
    if (r->one.measured) {
        printf(" %8.2f", r->one.rate);
        if (isfinite(r->one.fraction))
            printf(" %8.3f", r->one.fraction);
        else
            printf(" %8s", "-");
        print_target(c->target_one_thread);
    } else {
        printf(" %8s %8s %6s", "-", "-", "-");
    }
    if (isfinite(r->torch_seconds))
        printf(" %8.1fx", r->torch_seconds / r->median_seconds);
    else
        printf(" %9s", "-");
    if (isfinite(r->torch2_seconds))
        printf(" %8.2fx\n", r->torch2_seconds / r->median_seconds);
    else
        printf(" %9s\n", "-");
    if (isfinite(r->torch2_compiled_seconds))
        printf("  %s vs torch2 under torch.compile: %.2fx (%.4g s against %.4g s)\n", c->name,
               r->torch2_compiled_seconds / r->median_seconds, r->torch2_compiled_seconds,
               r->median_seconds);
    if (c->parts) {
        printf("  %s / (", c->name);
        print_parts(c->parts, " + ");
        if (isfinite(r->parts_ratio))
            printf(") = %.3f", r->parts_ratio);
        else
            printf("): not measured");
        if (c->parts_target > 0) printf(" (target <= %g)", c->parts_target);
        if (isfinite(r->parts_ratio))
            printf(": %.4g s against %.4g s", r->median_seconds, r->parts_seconds);
        if (r->one.measured && isfinite(r->one.parts_ratio))
            printf("; on 1 thread %.3f: %.4g s against %.4g s", r->one.parts_ratio,
                   r->one.median_seconds, r->one.parts_seconds);
        printf("\n");
    }
    if (c->time_target > 0)
        printf("  %s: %.3g us a run (target <= %g us)\n", c->name, r->median_seconds * 1e6,
               c->time_target * 1e6);
    if (c->memory_target > 0) {
        printf("  %s peak memory beyond its inputs and outputs: ", c->name);
        if (isfinite(r->extra_memory))
            printf("%.1f MiB", r->extra_memory / (1 << 20));
        else
            printf("not measured (no /proc/self/clear_refs)");
        printf(" (target <= %g MiB)\n", c->memory_target / (1 << 20));
    }
    fflush(stdout);
}

/* A number, or null where it is NaN or infinite (JSON has neither). */
static void json_number(const char *key, double value, const char *after)
{
    if (isfinite(value))
        printf("\"%s\": %.6g%s", key, value, after);
    else
        printf("\"%s\": null%s", key, after);
}

/* A JSON string of s, with " and \\ escaped (and control characters
 * dropped). */
static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s >= 0x20)
            putchar(*s);
    putchar('"');
}

/* The machine and the run's threads: ", \"threads\": 2, \"cpu\": ..." */
static void json_machine(const bench_run_info *info)
{
    const bench_machine *m = bench_machine_info();
    printf(", \"threads\": %d, \"cpu\": ", info->threads);
    json_string(m->cpu);
    printf(", ");
    json_number("cpu_family", m->family >= 0 ? m->family : NAN, ", ");
    json_number("cpu_model", m->model >= 0 ? m->model : NAN, "");
    printf(", \"simd\": \"%s\", \"vector_bits\": %d", m->simd, m->vector_bits);
}

/* ", \"one_thread\": {...}" or null. */
static void json_one_thread(const bench_record *r)
{
    const bench_case *c = r->what;
    if (!r->one.measured) {
        printf(", \"one_thread\": null");
        return;
    }
    printf(", \"one_thread\": {\"threads\": 1, ");
    json_number("median_seconds", r->one.median_seconds, ", ");
    json_number("rate", r->one.rate, ", ");
    json_number("limit_rate", r->one.limit_rate, ", ");
    json_number("fraction", r->one.fraction, ", ");
    json_number("target", c->target_one_thread > 0 ? c->target_one_thread : NAN, "");
    if (c->parts) {
        printf(", ");
        json_number("parts_seconds", r->one.parts_seconds, ", ");
        json_number("ratio_to_parts", r->one.parts_ratio, "");
    }
    printf("}");
}

void bench_print_json(const bench_record *records, int n, const bench_run_info *info)
{
    printf("[\n");
    for (int i = 0; i < n; i++) {
        const bench_record *r = &records[i];
        const bench_case *c = r->what;
        printf("  {\"name\": \"%s\", \"shape\": \"%s\", \"median_seconds\": %.6e, "
               "\"%s\": %.0f, \"rate\": %.6g, \"rate_unit\": \"%s\", ",
               c->name, r->shape, r->median_seconds, c->work_is_flops ? "flops" : "bytes",
               r->work, r->rate, rate_unit(c));
        if (c->judged_by == LIMIT_NONE || !isfinite(r->fraction))
            printf("\"limit_name\": null, ");
        else
            printf("\"limit_name\": \"%s\", ", limit_names[c->judged_by]);
        json_number("limit_rate", r->limit_rate, ", ");
        json_number("fraction", r->fraction, ", ");
        json_number("target", c->target > 0 ? c->target : NAN, ", ");
        json_number("torch_seconds", r->torch_seconds, ", ");
        json_number("vs_torch", r->torch_seconds / r->median_seconds, ", ");
        json_number("torch2_seconds", r->torch2_seconds, ", ");
        json_number("vs_torch2", r->torch2_seconds / r->median_seconds, ", ");
        json_number("torch2_compiled_seconds", r->torch2_compiled_seconds, ", ");
        json_number("vs_torch2_compiled", r->torch2_compiled_seconds / r->median_seconds, "");
        if (c->parts) {
            printf(", \"parts\": [\"");
            print_parts(c->parts, "\", \"");
            printf("\"], ");
            json_number("parts_seconds", r->parts_seconds, ", ");
            json_number("ratio_to_parts", r->parts_ratio, ", ");
            json_number("parts_target", c->parts_target > 0 ? c->parts_target : NAN, "");
        }
        if (c->time_target > 0) {
            printf(", ");
            json_number("time_target_seconds", c->time_target, "");
        }
        if (c->memory_target > 0) {
            printf(", ");
            json_number("extra_memory_bytes", r->extra_memory, ", ");
            json_number("memory_target_bytes", c->memory_target, "");
        }
        json_machine(info);
        json_one_thread(r);
        printf("}%s\n", i + 1 < n ? "," : "");
    }
    printf("]\n");
}
