/* timer.h — wall-clock seconds on CLOCK_MONOTONIC and the median of a few
 * samples, for demo and bench. */
#ifndef RA_TOOLS_TIMER_H
#define RA_TOOLS_TIMER_H

#include <time.h>

static inline double timer_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sorts samples[0..n) (n >= 1) in place and returns their median. */
static inline double timer_median(double *samples, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && samples[j - 1] > samples[j]; j--) {
            double t = samples[j];
            samples[j] = samples[j - 1];
            samples[j - 1] = t;
        }
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

#endif
