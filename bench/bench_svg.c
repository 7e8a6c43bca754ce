/*
 * bench_svg.c — `ropeattn bench --svg FILE`: each judged case's rate as a
 * fraction of its limit, one horizontal bar per case, with a line at 1.0
 * (the limit), a tick at the case's target, and the rates as labels; under
 * it, for a case with a one-thread column measured apart from the run's
 * (bench.h), a thin bar (class "one-thread") with its fraction of the
 * limit on one thread and a tick at that column's target.  A
 * self-contained SVG (no scripts, no external fonts or styles), written
 * atomically.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "../tools/outputs.h"
#include "bench.h"
#include "ropeattn_io.h"

#define LABEL_W 230 /* the case names */
#define BAR_W 480   /* fraction 0 .. x_max */
#define NOTE_W 520  /* rate of limit-rate (and on one thread) to the right */
#define ROW_H 24
#define TOP 58
#define WIDTH (LABEL_W + BAR_W + NOTE_W + 20)

/* Writes s with &, <, > and " escaped. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *unit(const bench_case *c) { return c->work_is_flops ? "GFLOP/s" : "GB/s"; }

/* Green at or past the target, orange short of it, grey without one. */
static const char *bar_fill(double fraction, double target)
{
    return target <= 0 ? "#7a8ca3" : fraction >= target ? "#3a9a5b" : "#d08a2e";
}

/* Whether r's one-thread fraction gets its own bar: measured apart from
 * the run's (not a run of one thread, where the column repeats it). */
static int has_one_thread_bar(const bench_record *r, const bench_run_info *info)
{
    return info->one_thread && r->one.measured && isfinite(r->one.fraction);
}

static void draw(FILE *f, const bench_record *records, int n, const bench_run_info *info)
{
    /* The axis runs to 1.2, or further for fractions past it, up to 1.6: a
     * bar past that (a case that fits in cache, like one decode token) is
     * cut at the edge, its label giving the value. */
    int rows = 0, thin_bars = 0;
    double x_max = 1.2;
    for (int i = 0; i < n; i++)
        if (isfinite(records[i].fraction)) {
            rows++;
            x_max = fmin(1.6, fmax(x_max, ceil(records[i].fraction * 5) / 5));
            if (has_one_thread_bar(&records[i], info)) {
                thin_bars++;
                x_max = fmin(1.6, fmax(x_max, ceil(records[i].one.fraction * 5) / 5));
            }
        }
    int footer_lines = 2 + (thin_bars > 0);
    for (int i = 0; i < n; i++) footer_lines += records[i].what->parts != NULL;
    int height = TOP + rows * ROW_H + 40 + footer_lines * 18;
#define X(fraction) (LABEL_W + (fraction) / x_max * BAR_W)

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"12\">\n",
            WIDTH, height, WIDTH, height);
    fprintf(f, "<title>ropeattn bench: fraction of the machine limit</title>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">ropeattn bench: "
            "rate as a fraction of the limit measured in the same run</text>\n");
    fprintf(f, "<text x=\"10\" y=\"38\">%d threads%s, simd %s, median of %d samples",
            info->threads, thin_bars ? " (thin bars: 1 thread)" : "", info->simd,
            info->repeats);
    if (info->torch) {
        fputs("; vs ", f);
        put_text(f, info->torch);
    }
    if (info->torch2) {
        fputs("; vs ", f);
        put_text(f, info->torch2);
    }
    fputs("</text>\n", f);

    /* Grid every 0.2, the limit at 1.0. */
    int bottom = TOP + rows * ROW_H;
    for (int g = 0; g * 0.2 <= x_max + 1e-9; g++) {
        double x = X(g * 0.2);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%.1f</text>\n",
                x, TOP - 6, x, bottom, x, bottom + 14, g * 0.2);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" "
            "stroke-width=\"2\"/>\n<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">limit "
            "= 1.0</text>\n",
            X(1.0), TOP - 8, X(1.0), bottom + 2, X(1.0), TOP - 10);

    int row = 0;
    for (int i = 0; i < n; i++) {
        const bench_record *r = &records[i];
        const bench_case *c = r->what;
        if (!isfinite(r->fraction)) continue;
        int y = TOP + row++ * ROW_H;
        const int one = has_one_thread_bar(r, info);
        const int bar_h = one ? ROW_H - 12 : ROW_H - 8; /* the thin bar's room below */
        fprintf(f, "<g>\n<title>");
        put_text(f, c->name);
        fputs(": ", f);
        put_text(f, r->shape);
        fputs("</title>\n", f);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL_W - 8, y + 16);
        put_text(f, c->name);
        fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                "fill=\"%s\"/>\n",
                LABEL_W, y + 4, X(fmin(fmax(r->fraction, 0), x_max)) - LABEL_W, bar_h,
                bar_fill(r->fraction, c->target));
        if (c->target > 0)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#b22\" "
                    "stroke-width=\"2\"/>\n",
                    X(c->target), y + 1, X(c->target), one ? y + 5 + bar_h : y + ROW_H - 1);
        if (one) {
            fprintf(f, "<rect class=\"one-thread\" x=\"%d\" y=\"%d\" width=\"%.1f\" "
                    "height=\"4\" fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                    LABEL_W, y + 6 + bar_h, X(fmin(fmax(r->one.fraction, 0), x_max)) - LABEL_W,
                    bar_fill(r->one.fraction, c->target_one_thread));
            if (c->target_one_thread > 0)
                fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                        "stroke=\"#b22\" stroke-width=\"2\"/>\n",
                        X(c->target_one_thread), y + 5 + bar_h, X(c->target_one_thread),
                        y + ROW_H - 1);
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\">%.3f: %.4g of %.4g %s %s", LABEL_W + BAR_W + 10,
                y + 16, r->fraction, r->rate, r->limit_rate, unit(c),
                bench_limit_name(c->judged_by));
        if (one) fprintf(f, "; 1t %.3f: %.4g of %.4g", r->one.fraction, r->one.rate,
                         r->one.limit_rate);
        if (isfinite(r->torch_seconds))
            fprintf(f, ", %.1fx torch", r->torch_seconds / r->median_seconds);
        if (isfinite(r->torch2_seconds))
            fprintf(f, ", %.2fx torch2", r->torch2_seconds / r->median_seconds);
        fputs("</text>\n</g>\n", f);
    }

    /* Legend, the limits' own rates and the ratios to parts. */
    int y = bottom + 36;
    fprintf(f, "<text x=\"10\" y=\"%d\">bars: green at or past the target (red tick), orange "
            "short of it, grey without one</text>\n", y);
    y += 18;
    if (thin_bars) {
        fprintf(f, "<text x=\"10\" y=\"%d\">thin bars: the same case on 1 thread, against its "
                "limit on 1 thread measured in this run (its own target tick)</text>\n", y);
        y += 18;
    }
    fprintf(f, "<text x=\"10\" y=\"%d\">limits measured in this run:", y);
    const char *separator = " ";
    for (int i = 0; i < n; i++)
        if (records[i].what->measures != LIMIT_NONE) {
            fprintf(f, "%s%s %.4g %s", separator, records[i].what->name, records[i].rate,
                    unit(records[i].what));
            separator = ", ";
        }
    fputs("</text>\n", f);
    for (int i = 0; i < n; i++) {
        const bench_record *r = &records[i];
        if (!r->what->parts) continue;
        y += 18;
        fprintf(f, "<text x=\"10\" y=\"%d\">", y);
        put_text(f, r->what->name);
        fputs(" / (", f);
        for (const char *p = r->what->parts; *p; p++) {
            if (*p == ',')
                fputs(" + ", f);
            else
                fputc(*p, f);
        }
        if (isfinite(r->parts_ratio))
            fprintf(f, ") = %.3f", r->parts_ratio);
        else
            fputs("): not measured", f);
        if (r->what->parts_target > 0) fprintf(f, " (target &lt;= %g)", r->what->parts_target);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
#undef X
}

int bench_write_svg(const char *path, const bench_record *records, int n,
                    const bench_run_info *info)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return cli_fail(EXIT_FAIL, "bench: out of memory for the chart");
    draw(f, records, n, info);
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        free(text);
        return cli_fail(EXIT_FAIL, "bench: out of memory for the chart");
    }
    char msg[CLI_MSG_LEN];
    const void *parts[] = {text};
    const size_t sizes[] = {len};
    cli_outputs outputs = {0};
    int fd;
    failed = cli_outputs_add(&outputs, "--svg", path);
    if (!failed && !(failed = cli_outputs_open(&outputs, 0, &fd))) {
        if (ra_io_write_parts(fd, path, parts, sizes, 1, msg, sizeof msg) != RA_OK)
            failed = cli_fail(EXIT_FAIL, "bench: %s", msg);
        else
            failed = cli_outputs_commit(&outputs);
    }
    cli_outputs_free(&outputs);
    free(text);
    return failed;
}
