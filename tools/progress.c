/* progress.c — the progress line of long CLI work (progress.h). */
#include "progress.h"

#include <stdio.h>
#include <unistd.h>

#include "timer.h"

void progress_begin(progress *p, const char *what, int64_t total, int quiet)
{
    *p = (progress){what, total, timer_seconds(), 0.0, !quiet && isatty(STDERR_FILENO)};
}

void progress_update(progress *p, int64_t done)
{
    if (!p->on) return;
    double now = timer_seconds(), elapsed = now - p->start;
    if (elapsed < 1.0 || now - p->shown < 0.1) return;
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
