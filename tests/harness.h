/*
 * harness.h — the tiny test harness every tests/test_*.c uses.
 *
 *   static void test_something(void) { CHECK(x == 1, "x is %d", x); }
 *   int main(void) { RUN(test_something); return ra_test_summary("name"); }
 *
 * A test case passes when none of its CHECKs failed.  The summary prints
 * "name: N passed, N failed" and returns nonzero when anything failed.
 */
#ifndef RA_TEST_HARNESS_H
#define RA_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            ra_test_case_failures++;                                         \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* Runs one test case and counts it. */
#define RUN(fn)                                                              \
    do {                                                                     \
        ra_test_case_failures = 0;                                           \
        fn();                                                                \
        if (ra_test_case_failures) {                                         \
            ra_test_failed++;                                                \
            fprintf(stderr, "FAILED %s\n", #fn);                             \
        } else {                                                             \
            ra_test_passed++;                                                \
        }                                                                    \
    } while (0)

static inline int ra_test_summary(const char *name)
{
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
