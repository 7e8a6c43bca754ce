/*
 * harness.h — the tiny test harness every tests/test_*.c uses.
 *
 *   static void test_something(void) { CHECK(x == 1, "x is %d", x); }
 *   int main(void) { RUN(test_something); return ra_test_summary("name"); }
 *
 * A test case passes when none of its CHECKs failed.  The summary prints
 * "name: N passed, N failed" and returns nonzero when anything failed.
 *
 * SIMD paths: the cases that reach the SIMD kernels run once on each path
 * this process can run, in one process: main passes a function of RUN()s
 * to ra_test_each_isa, which runs it on base, avx2 and avx512 as far as the
 * CPU goes and RA_FORCE_ISA lets (cpu/dispatch.h), each run's FAIL lines
 * labelled with its path; the summary names the paths.  A case RUN outside
 * it runs on base kernels that note their use, and fails if it reaches one:
 * it would check one path only.
 *
 * RA_TEST_ONE_PATH, defined before this header (a program whose cases do
 * not depend on the path: test_alloc_failure.c) or set non-empty in the
 * environment (`make tsan`: the threads are the same on every path), runs
 * ra_test_each_isa's body on the default path alone (the best within
 * RA_FORCE_ISA) and the cases outside it unwatched.
 */
#ifndef RA_TEST_HARNESS_H
#define RA_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/dispatch.h"
#include "ropeattn.h"

/* Shorthands for ra_attention_options: DROPOUT(p, seed) initializes one
 * with dropout; PATH_OPTS(path) points at one on a path without dropout,
 * DROP_OPTS(path, drop) at one on a path with drop's dropout (drop: a
 * pointer, NULL for none). */
#define DROPOUT(p_, seed_) \
    {.struct_size = sizeof(ra_attention_options), .dropout = (p_), .seed = (seed_)}
#define PATH_OPTS(path_) \
    (&(ra_attention_options){.struct_size = sizeof(ra_attention_options), .path = (path_)})
#define DROP_OPTS(path_, drop_)                                                    \
    (&(ra_attention_options){.struct_size = sizeof(ra_attention_options), .path = (path_), \
                             .dropout = ra_test_drop_p(drop_), .seed = ra_test_drop_seed(drop_)})
static inline float ra_test_drop_p(const ra_attention_options *d) { return d ? d->dropout : 0.0f; }
static inline uint64_t ra_test_drop_seed(const ra_attention_options *d) { return d ? d->seed : 0; }

static int ra_test_case_failures;
static int ra_test_passed;
static int ra_test_failed;
static int ra_test_isa = -1;     /* the path ra_test_each_isa runs, or -1 */
static char ra_test_label[16];   /* "[avx2] " there, else "" */
static unsigned ra_test_isas;    /* bit i: ra_test_each_isa ran on path i */
static int ra_test_runs_each;    /* cases run by ra_test_each_isa, all paths */
static int ra_test_runs_once;    /* cases run outside it */

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            ra_test_case_failures++;                                         \
            fprintf(stderr, "  FAIL %s%s:%d: %s: ", ra_test_label, __FILE__, \
                    __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

static inline int ra_test_one_path(void)
{
#if defined(RA_TEST_ONE_PATH)
    return 1;
#else
    const char *one = getenv("RA_TEST_ONE_PATH");
    return one && one[0];
#endif
}

/* Runs one test case and counts it. */
#define RUN(fn) ra_test_run(fn, #fn)

static inline void ra_test_run(void (*fn)(void), const char *name)
{
    const int watch = ra_test_isa < 0 && !ra_test_one_path();
    ra_test_case_failures = 0;
    if (watch) ra_cpu_watch_kernels();
    fn();
    if (watch && ra_cpu_kernels_ran()) {
        ra_test_case_failures++;
        fprintf(stderr, "  FAIL %s reaches the SIMD kernels: run it in ra_test_each_isa\n",
                name);
    }
    if (ra_test_case_failures) {
        ra_test_failed++;
        fprintf(stderr, "FAILED %s%s\n", ra_test_label, name);
    } else {
        ra_test_passed++;
    }
    if (ra_test_isa >= 0) ra_test_runs_each++;
    else ra_test_runs_once++;
}

/* Runs body, a function of RUN()s, on each SIMD path in turn (base up to
 * ra_cpu_isa_max()), then puts the default path back. */
static inline void ra_test_each_isa(void (*body)(void))
{
    const int first = ra_test_one_path() ? ra_cpu_isa_max() : RA_ISA_BASE;
    for (int isa = first; isa <= ra_cpu_isa_max(); isa++) {
        if (ra_cpu_force_isa(isa) != 0) {
            ra_test_failed++;
            fprintf(stderr, "FAILED: cannot switch to SIMD path %s\n", ra_cpu_isa_name(isa));
            continue;
        }
        ra_test_isa = isa;
        ra_test_isas |= 1u << isa;
        snprintf(ra_test_label, sizeof ra_test_label, "[%s] ", ra_cpu_isa_name(isa));
        body();
    }
    ra_test_isa = -1;
    ra_test_label[0] = '\0';
    ra_cpu_force_isa(ra_cpu_isa_max());
}

/* Prints which SIMD paths ran (a line run.sh shows, not a summary), then
 * the summary. */
static inline int ra_test_summary(const char *name)
{
    if (ra_test_isas) {
        int paths = 0;
        printf("%s: SIMD paths", name);
        for (int isa = RA_ISA_BASE; isa < RA_ISA_COUNT; isa++) {
            if (!(ra_test_isas >> isa & 1)) continue;
            printf(" %s", ra_cpu_isa_name(isa));
            paths++;
        }
        printf(" (%d cases on each, %d once", ra_test_runs_each / paths, ra_test_runs_once);
        const char *cap = getenv("RA_FORCE_ISA");
        if (cap && cap[0]) printf("; RA_FORCE_ISA=%s", cap);
#if defined(__x86_64__)
        else if (ra_cpu_isa_max() < RA_ISA_AMX)
            printf("; this CPU has no %s", ra_cpu_isa_name(ra_cpu_isa_max() + 1));
#endif
        if (ra_test_one_path()) printf("; RA_TEST_ONE_PATH");
        printf(")\n");
    }
    printf("%s: %d passed, %d failed\n", name, ra_test_passed, ra_test_failed);
    return ra_test_failed ? 1 : 0;
}

/* Worst |a - b| / max|b| over n elements; NaN if either holds a NaN/Inf. */
static inline double ra_test_rel_err(const float *a, const double *b, size_t n)
{
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return NAN;
        double d = fabs((double)a[i] - b[i]);
        if (d > max_diff) max_diff = d;
        if (fabs(b[i]) > max_ref) max_ref = fabs(b[i]);
    }
    return max_ref > 0 ? max_diff / max_ref : max_diff;
}

/* Worst |a - b| / max|b| over n floats; Inf if either holds a NaN/Inf. */
static inline double ra_test_max_rel_diff(const float *a, const float *b, int64_t n)
{
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        ref = fmax(ref, fabs((double)b[i]));
    }
    return ref > 0 ? diff / ref : diff;
}

/* Deterministic uniform floats in [-1, 1) (xorshift64*), for test inputs. */
static inline void ra_test_fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        uint64_t r = s * 0x2545F4914F6CDD1Dull;
        x[i] = (float)((double)(r >> 40) / (double)(1ull << 23) - 1.0);
    }
}

#endif
