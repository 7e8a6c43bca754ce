/* bench_measure.c — the timing loop every case goes through, and the helpers
 * the case files share. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "../tools/cli.h"
#include "../tools/random.h"
#include "../tools/timer.h"
#include "bench.h"

/* Most runs one sample may hold (for cases of a few microseconds). */
#define MAX_RUNS_PER_SAMPLE 100000

int bench_measure(const bench_case *c, ra_context *ctx, int repeats, bench_record *out)
{
    void *state = NULL;
    if (c->setup(c->params, ctx, &state)) {
        c->teardown(state);
        return EXIT_FAIL;
    }
    double *samples = malloc((size_t)repeats * sizeof(double));
    ra_status status = samples ? c->run(state, ctx) : RA_ERR_NOMEM;
    int failed = 0;
    if (status == RA_OK && c->check && c->check(state, ctx)) failed = EXIT_FAIL;

    /* One timed run tells how many runs make a sample of BENCH_MIN_SAMPLE_S. */
    int64_t runs = 1;
    if (!failed && status == RA_OK) {
        double start = timer_seconds();
        status = c->run(state, ctx);
        double once = timer_seconds() - start;
        if (once < BENCH_MIN_SAMPLE_S)
            runs = once > 0 ? (int64_t)ceil(BENCH_MIN_SAMPLE_S / once) : MAX_RUNS_PER_SAMPLE;
        if (runs > MAX_RUNS_PER_SAMPLE) runs = MAX_RUNS_PER_SAMPLE;
    }
    for (int r = 0; r < repeats && !failed && status == RA_OK; r++) {
        double start = timer_seconds();
        for (int64_t i = 0; i < runs && status == RA_OK; i++) status = c->run(state, ctx);
        samples[r] = (timer_seconds() - start) / (double)runs;
    }
    if (status != RA_OK && !failed) failed = cli_fail_status(status, c->name);
    if (!failed) {
        out->what = c;
        out->median_seconds = timer_median(samples, repeats);
        out->rate = c->work / out->median_seconds * 1e-9;
        out->fraction = NAN;
    }
    free(samples);
    c->teardown(state);
    return failed;
}

float *bench_random_floats(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)n * sizeof(float));
    if (x) random_uniform(x, (size_t)n, 1.0f, seed);
    return x;
}

typedef struct parallel_job {
    void (*fn)(void *arg, int thread, int n_threads);
    void *arg;
    int thread, n_threads;
} parallel_job;

static void *run_job(void *p)
{
    parallel_job *job = p;
    job->fn(job->arg, job->thread, job->n_threads);
    return NULL;
}

int bench_parallel(int n_threads, void (*fn)(void *arg, int thread, int n_threads),
                   void *arg)
{
    pthread_t threads[CLI_MAX_THREADS];
    parallel_job jobs[CLI_MAX_THREADS];
    int started = 0, failed = 0;
    for (int t = 1; t < n_threads; t++) {
        jobs[t] = (parallel_job){fn, arg, t, n_threads};
        if (pthread_create(&threads[t], NULL, run_job, &jobs[t]) != 0) {
            failed = 1;
            break;
        }
        started = t;
    }
    if (!failed) fn(arg, 0, n_threads);
    for (int t = 1; t <= started; t++) pthread_join(threads[t], NULL);
    return failed;
}

void bench_split(int64_t n, int thread, int n_threads, int64_t *begin, int64_t *end)
{
    *begin = n * thread / n_threads;
    *end = n * (thread + 1) / n_threads;
}

double bench_max_rel_diff(const float *a, const float *b, int64_t n)
{
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? diff / scale : diff;
}
