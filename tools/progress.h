/*
 * progress.h — a progress line for long CLI work: on a terminal (stderr),
 * once the work has taken more than a second (RA_PROGRESS_DELAY seconds
 * when set, as git's GIT_PROGRESS_DELAY), "\r<what>: N of M tokens, T s,
 * R tokens/s" at most ten times a second, cleared when the work ends
 * (before any message).  Off with --quiet or when stderr is not a terminal.
 */
#ifndef RA_TOOLS_PROGRESS_H
#define RA_TOOLS_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    const char *what;
    int64_t total;
    double start, shown; /* seconds; shown: when the line was last drawn, 0: never */
    double delay;        /* seconds before the first line */
    int on;
} progress;

/* 0 if RA_PROGRESS_DELAY is unset, empty or a number of seconds in
 * [0, 1e6]; -1 otherwise (main() refuses to run). */
int progress_check_environment(void);
void progress_begin(progress *p, const char *what, int64_t total, int quiet);
void progress_update(progress *p, int64_t done);
void progress_end(progress *p); /* clears the line if it was drawn */
/* Clears the line (if drawn) before other output; the next update redraws it. */
void progress_clear(progress *p);

#endif
