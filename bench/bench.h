/*
 * bench.h — `ropeattn bench`: each kernel timed beside the machine limit it
 * should be judged against, measured in the same run.
 *
 * A case is set up once (buffers allocated and touched, so no page fault is
 * timed), run once as a warm-up, checked, then timed: each sample runs the
 * case enough times to last BENCH_MIN_SAMPLE_S and the median sample per
 * run is reported.  Rates are GB/s for memory-bound cases (bytes read plus
 * bytes written) and GFLOP/s for compute-bound ones.
 *
 *   limit    what it measures                         judges
 *   copy     memcpy between two buffers               out-of-place rope
 *   rmw      x = a x + b in place                     in-place rope
 *   sgemm    cblas_sgemm, the projections' shape      attention, the layer
 */
#ifndef RA_BENCH_H
#define RA_BENCH_H

#include <stdint.h>

#include "ropeattn.h"

#define BENCH_MIN_SAMPLE_S 2e-3

typedef enum bench_limit {
    LIMIT_NONE = -1,
    LIMIT_COPY = 0,
    LIMIT_RMW,
    LIMIT_SGEMM,
    N_LIMITS
} bench_limit;

typedef struct bench_case {
    const char *name;
    const char *shape;      /* for people: what one run touches */
    bench_limit measures;   /* the limit this case is, or LIMIT_NONE */
    bench_limit judged_by;  /* the limit its rate is a fraction of, or LIMIT_NONE */
    double work;            /* bytes or flops of one run */
    int work_is_flops;
    const void *params;     /* handed to setup */
    /* Allocates and touches the case's buffers; prints why and returns
     * nonzero on failure. */
    int (*setup)(const void *params, ra_context *ctx, void **state);
    ra_status (*run)(void *state, ra_context *ctx);
    /* After the warm-up run: checks the result, prints why and returns
     * nonzero if it is wrong.  NULL: nothing to check. */
    int (*check)(void *state, ra_context *ctx);
    void (*teardown)(void *state);
} bench_case;

/* The cases of each file, in the order they run: limits first. */
extern const bench_case bench_limit_cases[];
extern const int bench_limit_case_count;
extern const bench_case bench_rope_cases[];
extern const int bench_rope_case_count;
extern const bench_case bench_attention_cases[];
extern const int bench_attention_case_count;

/* ---- results ----------------------------------------------------------- */

typedef struct bench_record {
    const bench_case *what;
    double median_seconds; /* of one run */
    double rate;           /* GB/s or GFLOP/s */
    double fraction;       /* rate / its limit's rate; NAN without one */
} bench_record;

/* Sets up one case, runs it once to warm up and check it, then takes
 * `repeats` timed samples.  Returns 0 or (after printing why) EXIT_FAIL. */
int bench_measure(const bench_case *c, ra_context *ctx, int repeats, bench_record *out);

/* The table is printed a row at a time, as the cases finish; JSON (an array
 * of {name, shape, median_seconds, bytes or flops, rate, rate_unit,
 * limit_name, fraction}) at the end. */
void bench_print_table_header(void);
void bench_print_table_row(const bench_record *record);
void bench_print_json(const bench_record *records, int n);

/* ---- helpers the case files share ------------------------------------- */

/* malloc'ed floats filled uniform in [-1, 1) from seed (so every page is
 * touched); NULL if out of memory. */
float *bench_random_floats(int64_t n, uint64_t seed);

/* Runs fn(arg, thread, n_threads) on n_threads threads (the caller is one);
 * returns nonzero if a thread could not start. */
int bench_parallel(int n_threads, void (*fn)(void *arg, int thread, int n_threads),
                   void *arg);

/* [begin, end) of thread's share of n items. */
void bench_split(int64_t n, int thread, int n_threads, int64_t *begin, int64_t *end);

/* max |a - b| / max |b|; Inf if either holds a NaN or Inf. */
double bench_max_rel_diff(const float *a, const float *b, int64_t n);

#endif
