/* progress.c — the progress line of long CLI work (progress.h). */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "timer.h"

/* RA_PROGRESS_DELAY in seconds, 1 when unset or empty; -1 if not a number in [0, 1e6]. */
static double delay_from_environment(void)
{
    const char *text = getenv("RA_PROGRESS_DELAY");
    if (text == NULL || text[0] == '\0') return 1.0;
    char *end;
    double seconds = strtod(text, &end);
    return *end == '\0' && seconds >= 0 && seconds <= 1e6 ? seconds : -1.0;
}

int progress_check_environment(void)
{
    return delay_from_environment() < 0 ? -1 : 0;
}

void progress_begin(progress *p, const char *what, int64_t total, int quiet)
{
    *p = (progress){what, total, timer_seconds(), 0.0, delay_from_environment(),
                    !quiet && isatty(STDERR_FILENO)};
}

void progress_update(progress *p, int64_t done)
{
    if (!p->on) return;
    double now = timer_seconds(), elapsed = now - p->start;
    if (elapsed < p->delay || now - p->shown < 0.1) return;
    fprintf(stderr, "\r%s: %lld of %lld tokens, %.1f s, %.0f tokens/s", p->what,
            (long long)done, (long long)p->total, elapsed, (double)done / elapsed);
    fflush(stderr);
    p->shown = now;
}

void progress_clear(progress *p)
{
    if (p->on && p->shown > 0) fputs("\r\033[K", stderr);
    p->shown = 0;
}

void progress_end(progress *p)
{
    progress_clear(p);
    p->on = 0;
}
