/* bench_measure.c — the timing loop every case goes through, and the helpers
 * the case files share. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "../dev/random.h"
#include "../tools/timer.h"
#include "bench.h"

/* Most runs one sample may hold (for cases of a few microseconds). */
#define MAX_RUNS_PER_SAMPLE 100000
/* Most samples a case may take (--repeats is at most 1000). */
#define MAX_SAMPLES 1000
/* Most parts a case may have. */
#define MAX_PARTS 8

/* A "Field:  N kB" line of /proc/self/status, in bytes; NAN if absent. */
static double status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return NAN;
    char line[256];
    double bytes = NAN;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            bytes = strtod(line + n + 1, NULL) * 1024.0;
            break;
        }
    fclose(f);
    return bytes;
}

/* Starts a new peak of resident memory (Linux: "5" to clear_refs resets
 * VmHWM to VmRSS); returns the resident bytes now, or NAN if it cannot. */
static double peak_restart(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return NAN;
    int failed = fputs("5", f) < 0;
    failed |= fclose(f) != 0;
    return failed ? NAN : status_bytes("VmRSS");
}

int bench_prepare(const bench_case *c, ra_context *ctx, bench_prepared *p)
{
    *p = (bench_prepared){NULL, NULL, 0, NULL, 0, NAN};
    void *state = NULL;
    int failed = c->setup(c->params, ctx, &state) ? EXIT_FAIL : 0;
    double resident = !failed && c->memory_target > 0 ? peak_restart() : NAN;
    ra_status status = failed ? RA_OK : c->run(state, ctx);
    double extra = status_bytes("VmHWM") - resident;
    if (status != RA_OK) failed = cli_fail_status(status, c->name);
    if (!failed && c->check && c->check(state, ctx)) failed = EXIT_FAIL;
    if (failed) {
        c->teardown(state);
        return failed;
    }
    *p = (bench_prepared){c, state, c->work, c->shape, 0, extra};
    if (c->sized) c->sized(state, &p->work, &p->shape);
    return 0;
}

void bench_release(bench_prepared *p)
{
    if (p->c) p->c->teardown(p->state);
    *p = (bench_prepared){NULL, NULL, 0, NULL, 0, NAN};
}

/* Seconds per run over one sample.  The first call times one run, which
 * tells how many runs make a sample of BENCH_MIN_SAMPLE_S; when that is one
 * run, it is the sample. */
static ra_status sample(bench_prepared *p, ra_context *ctx, double *seconds)
{
    ra_status status = RA_OK;
    if (p->runs == 0) {
        double start = timer_seconds();
        status = p->c->run(p->state, ctx);
        double once = timer_seconds() - start;
        if (status != RA_OK || once >= BENCH_MIN_SAMPLE_S) {
            p->runs = 1;
            *seconds = once;
            return status;
        }
        p->runs = once > 0 ? (int64_t)ceil(BENCH_MIN_SAMPLE_S / once) : MAX_RUNS_PER_SAMPLE;
        if (p->runs > MAX_RUNS_PER_SAMPLE) p->runs = MAX_RUNS_PER_SAMPLE;
    }
    double start = timer_seconds();
    for (int64_t i = 0; i < p->runs && status == RA_OK; i++) status = p->c->run(p->state, ctx);
    *seconds = (timer_seconds() - start) / (double)p->runs;
    return status;
}

int bench_measure(bench_prepared *p, bench_prepared *limit, bench_prepared *const *parts,
                  int n_parts, ra_context *ctx, int repeats, bench_record *out)
{
    const bench_case *c = p->c;
    if (c->max_repeats > 0 && repeats > c->max_repeats) repeats = c->max_repeats;
    if (repeats > MAX_SAMPLES) repeats = MAX_SAMPLES;
    if (n_parts > MAX_PARTS) n_parts = MAX_PARTS;
    double times[MAX_SAMPLES], fractions[MAX_SAMPLES], limit_rates[MAX_SAMPLES];
    double parts_times[MAX_SAMPLES], parts_ratios[MAX_SAMPLES];
    ra_status status = RA_OK;
    const char *what = c->name;
    for (int r = 0; r < repeats && status == RA_OK; r++) {
        double t;
        if (limit) {
            status = sample(limit, ctx, &t);
            what = limit->c->name;
            limit_rates[r] = limit->work / t * 1e-9;
        }
        parts_times[r] = 0;
        for (int i = 0; i < n_parts && status == RA_OK; i++) {
            status = sample(parts[i], ctx, &t);
            what = parts[i]->c->name;
            parts_times[r] += t;
        }
        if (status != RA_OK) break;
        status = sample(p, ctx, &times[r]);
        what = c->name;
        if (limit) fractions[r] = p->work / times[r] * 1e-9 / limit_rates[r];
        parts_ratios[r] = times[r] / parts_times[r];
    }
    if (status != RA_OK) return cli_fail_status(status, what);
    *out = (bench_record){
        .what = c,
        .work = p->work,
        .median_seconds = timer_median(times, repeats),
        .fraction = limit ? timer_median(fractions, repeats) : NAN,
        .limit_rate = limit ? timer_median(limit_rates, repeats) : NAN,
        .parts_seconds = n_parts > 0 ? timer_median(parts_times, repeats) : NAN,
        .parts_ratio = n_parts > 0 ? timer_median(parts_ratios, repeats) : NAN,
        .torch_seconds = NAN,
        .torch2_seconds = NAN,
        .torch2_compiled_seconds = NAN,
        .extra_memory = p->extra_memory,
        .one = {0, NAN, NAN, NAN, NAN, NAN, NAN},
    };
    snprintf(out->shape, sizeof out->shape, "%s", p->shape);
    out->rate = p->work / out->median_seconds * 1e-9;
    return 0;
}

float *bench_random_floats(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)n * sizeof(float));
    if (x) random_uniform(x, (size_t)n, 1.0f, seed);
    return x;
}

/* Threads started once, not for each run, and workers that sleep on a
 * condition variable between runs, so that they take no core from the case
 * sampled after their limit; the caller, done with its share, waits for
 * theirs by yielding rather than sleeping, since being woken costs it tens
 * of microseconds here.  A read of 32 MiB on two threads, interleaved:
 * 49.8 GB/s so, 45.9 with the caller sleeping, 43.8 with threads created
 * for each run (docs/perf/2026-12-02-honest-limits.md). */
typedef struct pool_worker {
    bench_pool *pool;
    int thread;
} pool_worker;

struct bench_pool {
    pthread_mutex_t lock;
    pthread_cond_t start;
    void (*fn)(void *arg, int thread, int n_threads); /* the current run's */
    void *arg;
    int active; /* the current run's threads */
    unsigned generation; /* runs started */
    int stop;
    atomic_int pending; /* workers still in the current run */
    int n_threads, started;
    pthread_t threads[CLI_MAX_THREADS];
    pool_worker workers[CLI_MAX_THREADS];
};

static void *pool_main(void *p)
{
    pool_worker *w = p;
    bench_pool *pool = w->pool;
    unsigned seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (pool->generation == seen && !pool->stop)
            pthread_cond_wait(&pool->start, &pool->lock);
        if (pool->stop) break;
        seen = pool->generation;
        const int active = pool->active; /* read here: a worker left out is not waited for */
        /* fn and arg stay as they are until every worker in the run has
         * finished. */
        pthread_mutex_unlock(&pool->lock);
        if (w->thread < active) {
            pool->fn(pool->arg, w->thread, active);
            atomic_fetch_sub(&pool->pending, 1);
        }
        pthread_mutex_lock(&pool->lock);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

bench_pool *bench_pool_create(int n_threads)
{
    bench_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->n_threads = n_threads;
    atomic_init(&pool->pending, 0);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->start, NULL);
    for (int t = 1; t < n_threads; t++) {
        pool->workers[t] = (pool_worker){pool, t};
        if (pthread_create(&pool->threads[t], NULL, pool_main, &pool->workers[t]) != 0) {
            bench_pool_destroy(pool);
            return NULL;
        }
        pool->started = t;
    }
    return pool;
}

void bench_pool_run(bench_pool *pool, int n, void (*fn)(void *arg, int thread, int n_threads),
                    void *arg)
{
    if (n < 1 || n > pool->n_threads) n = pool->n_threads;
    if (n == 1) { /* the workers sleep on */
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->arg = arg;
    pool->active = n;
    atomic_store(&pool->pending, n - 1);
    pool->generation++;
    pthread_cond_broadcast(&pool->start);
    pthread_mutex_unlock(&pool->lock);
    fn(arg, 0, n);
    while (atomic_load(&pool->pending) > 0) sched_yield();
}

void bench_pool_destroy(bench_pool *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->start);
    pthread_mutex_unlock(&pool->lock);
    for (int t = 1; t <= pool->started; t++) pthread_join(pool->threads[t], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->start);
    free(pool);
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
