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
 * The machine is shared and its bandwidth and sgemm rate drift by 2x within
 * minutes, so a case is never judged against a limit measured minutes
 * earlier: each of its samples directly follows one sample of its limit
 * (and of its parts, below), and the fraction is the median over those
 * pairs of (case rate / limit rate).  The limits' own rows are measured
 * alone, first.
 *
 *   limit    what it measures                         judges
 *   copy     y = x, non-temporal stores               out-of-place rope
 *   rmw      x = a x + b in place                     in-place rope (f32)
 *   rmw40M   the same over half the bytes             in-place rope (bf16)
 *   sgemm    cblas_sgemm, the projections' shape      attention, the layer
 *   readN    a vectorized sum over N MiB              decode over a cache of N MiB
 *
 * One thread's column: the decode cases, prefill f32 S 2048, rope_f32, the
 * limits that judge them and their parts are measured a second time on one
 * thread (a context of one thread, OpenBLAS set to one), in the same run,
 * each sample after one sample of its limit on one thread, so that what one
 * core does is visible on any machine, whatever its core count.  Every
 * record says which CPU ran it (bench_machine.c).
 *
 * Each bandwidth limit runs over a buffer of the bytes its cases touch, so
 * that both sides of a pair meet the same cache: each sample starts with
 * the other's lines, up to the cache's size, still to write back.  Each is
 * the fastest loop found for those bytes (bench_limits.c), and has a
 * STREAM-style reference as its part (stream_copy, stream_rmw,
 * stream_rmw40M, stream_sumN: the plain C loop over the same bytes), so
 * that the table shows the limit at least as fast as the plain loop.
 *
 * Beside the limits, two comparisons made in the same run: the whole layer
 * against the sum of its parts timed alone (the four projection GEMMs and
 * the attention core), and, where torch is installed, the PyTorch code of Meta's LLaMA
 * code for the same shapes (bench/seed_torch.py, run as a child process), and
 * where RA_BENCH_TORCH2 names a PyTorch 2 interpreter, what a PyTorch 2 user
 * runs (scaled_dot_product_attention, transformers' apply_rotary_pos_emb:
 * bench/torch2.py, likewise).
 */
#ifndef RA_BENCH_H
#define RA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ropeattn.h"

#define BENCH_MIN_SAMPLE_S 2e-3

/* Most cases a run may hold. */
#define BENCH_MAX_CASES 64

typedef enum bench_limit {
    LIMIT_NONE = -1,
    LIMIT_COPY = 0,
    LIMIT_RMW,
    LIMIT_RMW_40M,   /* the same over a buffer the size of rope_bf16's q + k */
    LIMIT_SGEMM,
    LIMIT_READ_32M,  /* the K + V of a decode cache of 4096, 16384, 32768 */
    LIMIT_READ_64M,  /* ... of 16384 bf16 tokens */
    LIMIT_READ_128M, /* f32 tokens (H 8, D 128) */
    LIMIT_READ_256M,
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
    /* For a case sized at run time (to this CPU's caches): its work and
     * shape once set up, the shape a string the state holds.  NULL: work
     * and shape above. */
    void (*sized)(const void *state, double *work, const char **shape);
    ra_status (*run)(void *state, ra_context *ctx);
    /* After the warm-up run: checks the result, prints why and returns
     * nonzero if it is wrong.  NULL: nothing to check. */
    int (*check)(void *state, ra_context *ctx);
    void (*teardown)(void *state);
    /* Timed samples at most, whatever --repeats asks (0: no cap); for cases
     * of seconds a run. */
    int max_repeats;
    /* The fraction of its limit the case should reach (0: none); drawn by
     * --svg and given in --json. */
    double target;
    /* Nonzero: also measured on one thread, against its limit on one thread
     * and with its parts on one thread (a limit that judges such a case is
     * measured on one thread too); target_one_thread is that column's
     * fraction target (0: none), parts_target applies to both. */
    int one_thread;
    double target_one_thread;
    /* Comma-separated cases that run alone what this one does together; it
     * is reported as a ratio to the sum of their times, and --only runs them
     * with it.  NULL: none. */
    const char *parts;
    double parts_target; /* the ratio to the parts it should stay within (0: none) */
    /* The time one run should take at most, in seconds (0: none): for cases
     * of a few microseconds judged by their latency, not a limit. */
    double time_target;
    /* Nonzero: the warm-up run's peak resident memory beyond what setup left
     * resident (its inputs and outputs) is measured, and should stay within
     * this many bytes. */
    double memory_target;
    /* bench/seed_torch.py times Meta's LLaMA code for this case. */
    int has_torch;
    /* bench/torch2.py times PyTorch 2's way to do it (SDPA, transformers'
     * RoPE) for this case. */
    int has_torch2;
} bench_case;

/* The cases of each file, in the order they run: limits first. */
extern const bench_case bench_limit_cases[];
extern const int bench_limit_case_count;
extern const bench_case bench_rope_cases[];
extern const int bench_rope_case_count;
extern const bench_case bench_attention_cases[];
extern const int bench_attention_case_count;
extern const bench_case bench_decode_cases[];
extern const int bench_decode_case_count;
extern const bench_case bench_paged_cases[];
extern const int bench_paged_case_count;
extern const bench_case bench_serve_cases[];
extern const int bench_serve_case_count;
extern const bench_case bench_mla_cases[];
extern const int bench_mla_case_count;
extern const bench_case bench_layer_decode_cases[];
extern const int bench_layer_decode_case_count;

/* ---- results ----------------------------------------------------------- */

/* A case's figures on one thread, beside its record's. */
typedef struct bench_one_thread {
    int measured;          /* 0: not measured (and the rest NAN) */
    double median_seconds, rate, fraction, limit_rate, parts_seconds, parts_ratio;
} bench_one_thread;

typedef struct bench_record {
    const bench_case *what;
    double work;           /* bytes or flops of one run (the case's, or sized) */
    char shape[160];       /* the case's, or sized (copied: a sized shape lives in
                              the case's state, released before the report) */
    double median_seconds; /* of one run */
    double rate;           /* GB/s or GFLOP/s, from median_seconds */
    double fraction;       /* median over pairs of rate / limit rate; NAN without a limit */
    double limit_rate;     /* median of the limit's paired samples; NAN without */
    double parts_seconds;  /* median over samples of the parts' summed times; NAN without */
    double parts_ratio;    /* median over samples of time / parts' time; NAN without */
    double torch_seconds;  /* the PyTorch code of Meta's LLaMA; NAN if not measured */
    double torch2_seconds; /* PyTorch 2 (bench/torch2.py); NAN if not measured */
    double torch2_compiled_seconds; /* the same under torch.compile; NAN if not measured */
    double extra_memory;   /* bytes, for a case with a memory_target; NAN if not measured */
    bench_one_thread one;  /* on one thread, for a case with one_thread */
} bench_record;

/* The machine the run is on, for every record: CPUID's brand string,
 * family and model (x86; elsewhere /proc/cpuinfo's model name, family and
 * model -1), the library's kernels (ra_simd_name) and their vector width,
 * and one core's level-2 cache (sysfs, else sysconf; 0 if neither says). */
typedef struct bench_machine {
    char cpu[96];
    int family, model;
    const char *simd;
    int vector_bits;
    int64_t l2_bytes;
} bench_machine;

/* Filled once, on the first call. */
const bench_machine *bench_machine_info(void);

/* What a run was: for the notes, the JSON-less table and the chart. */
typedef struct bench_run_info {
    int threads, repeats;
    int one_thread; /* the one-thread column: 1 measured, 0 the run is one thread */
    const char *simd;
    const char *torch; /* "torch 1.13.0, 2 threads" or NULL */
    const char *torch2; /* "torch 2.15.0, 2 threads" or NULL */
} bench_run_info;

/* A case set up, warmed up and checked, ready to be sampled. */
typedef struct bench_prepared {
    const bench_case *c; /* NULL: nothing prepared */
    void *state;
    double work;         /* c->work, or as c->sized says */
    const char *shape;
    int64_t runs; /* per sample; 0 until the first sample finds it */
    double extra_memory; /* see bench_case.memory_target; NAN if not measured */
} bench_prepared;

/* Sets up c, runs it once to warm up (measuring its peak memory where c
 * asks) and checks the result.  Returns 0 or
 * (after printing why) EXIT_FAIL, with nothing left to release. */
int bench_prepare(const bench_case *c, ra_context *ctx, bench_prepared *p);
void bench_release(bench_prepared *p); /* p->c NULL is allowed */

/* Takes `repeats` samples of p (at most its case's max_repeats), each right
 * after one sample of limit (NULL: none) and of each of the n_parts parts,
 * all run with ctx, and fills every field of out but the torch times (NAN)
 * and out->one (not measured).  Returns 0 or (after printing why)
 * EXIT_FAIL. */
int bench_measure(bench_prepared *p, bench_prepared *limit, bench_prepared *const *parts,
                  int n_parts, ra_context *ctx, int repeats, bench_record *out);

/* The table is printed a row at a time, as the cases finish (a row with
 * parts is followed by a line with its ratio to them); JSON (an array of
 * {name, shape, median_seconds, bytes or flops, rate, rate_unit, limit_name,
 * limit_rate, fraction, target, torch_seconds, vs_torch, torch2_seconds,
 * vs_torch2, torch2_compiled_seconds, vs_torch2_compiled, for a case with
 * parts: parts, parts_seconds, ratio_to_parts, parts_target, for a case
 * with a time target: time_target_seconds, and for a case with a memory
 * target: extra_memory_bytes, memory_target_bytes; and in every record
 * the machine: threads, cpu, cpu_family, cpu_model, simd, vector_bits, and
 * one_thread: null, or {threads 1, median_seconds, rate, limit_rate,
 * fraction, target, with parts: parts_seconds, ratio_to_parts}) at the
 * end; null where a value does not apply.  The table's header names the
 * machine and the threads of each column. */
void bench_print_table_header(const bench_run_info *info);
void bench_print_table_row(const bench_record *record);
void bench_print_json(const bench_record *records, int n, const bench_run_info *info);
const char *bench_limit_name(bench_limit limit);

/* Writes an SVG bar chart of each judged case's fraction of its limit to
 * path, atomically (a temporary file renamed into place).  Returns 0 or,
 * after printing why, EXIT_FAIL. */
int bench_write_svg(const char *path, const bench_record *records, int n,
                    const bench_run_info *info);

/* ---- PyTorch: Meta's LLaMA code (torch 1.13), and PyTorch 2 ------------ */

typedef enum bench_torch_column {
    BENCH_SEED_TORCH, /* bench/seed_torch.py, for the cases with has_torch */
    BENCH_TORCH2      /* bench/torch2.py, for the cases with has_torch2 */
} bench_torch_column;

typedef struct bench_torch_options {
    bench_torch_column column;
    int threads, repeats;
    double timeout_s;   /* the child is killed past it */
    const char *python; /* interpreter */
    const char *script; /* the column's script, or NULL to look beside the program */
} bench_torch_options;

/* Runs the column's script for the selected cases it times, in a child
 * process killed after opt->timeout_s; sets seconds[i] (and, where the
 * script gives one, compiled[i]: the time under torch.compile) for each
 * case it timed, NAN for the others.  Never fails the bench: prints one
 * note on `notes` saying what it measured or why it measured nothing, and
 * returns a description for the chart ("torch 1.13.0, 2 threads") in
 * version, or "" if nothing was measured. */
void bench_torch(const bench_case *const *cases, const int *selected, int n,
                 const bench_torch_options *opt, double *seconds, double *compiled,
                 char *version, size_t version_len, FILE *notes);

/* ---- helpers the case files share ------------------------------------- */

/* malloc'ed floats filled uniform in [-1, 1) from seed (so every page is
 * touched); NULL if out of memory. */
float *bench_random_floats(int64_t n, uint64_t seed);

/* n_threads threads for the limits' loops: the caller and n_threads - 1
 * workers started once, which sleep between runs.  create: NULL if a thread
 * could not start.  run: fn(arg, thread, n) on the first n (1 <= n <=
 * n_threads: a run on one thread uses the caller only), back when all have
 * returned.  destroy: NULL is allowed. */
typedef struct bench_pool bench_pool;
bench_pool *bench_pool_create(int n_threads);
void bench_pool_run(bench_pool *pool, int n, void (*fn)(void *arg, int thread, int n_threads),
                    void *arg);
void bench_pool_destroy(bench_pool *pool);

/* [begin, end) of thread's share of n items. */
void bench_split(int64_t n, int thread, int n_threads, int64_t *begin, int64_t *end);

/* max |a - b| / max |b|; Inf if either holds a NaN or Inf. */
double bench_max_rel_diff(const float *a, const float *b, int64_t n);

#endif
