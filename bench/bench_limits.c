/*
 * bench_limits.c — the machine limits the kernels are judged against:
 * memory copy and in-place read-modify-write bandwidth over buffers the size
 * of rope_f32's q + k (and read-modify-write over the size of rope_bf16's),
 * read bandwidth over buffers the size of each decode case's K + V, and
 * cblas_sgemm on the projections' shape.
 *
 * A bandwidth limit is the fastest loop found for its bytes on this
 * project's machines (docs/perf/2026-12-02-honest-limits.md): 64-byte
 * vectors, two streams per thread, buffers on 2 MiB pages, threads started
 * once, and for the copy, stores that bypass the caches.  Each has as its
 * part a STREAM-style reference over buffers of the same bytes (a plain C
 * loop as the compiler makes it for this CPU, run by the same threads), so
 * it is reported as its time over the reference's, sample by sample; the
 * target, <= 1.05, is "at least as fast as the plain loop" within the
 * swing of paired samples here (the read limits and the plain sum read at
 * the same rate).  Every limit and reference checks its result after the
 * warm-up run, so the compiler cannot drop a loop.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../tools/cli.h"
#include "../dev/random.h"
#include "bench.h"

/* Floats of q [1, 4096, 32, 128] plus k [1, 4096, 8, 128]. */
#define STREAM_FLOATS ((int64_t)4096 * (32 + 8) * 128)

/* The projection x wq^T of the layer at S = 2048: [M, K] x [N, K]^T. */
#define SGEMM_M 2048
#define SGEMM_N 4096
#define SGEMM_K 4096

#define HUGE_PAGE ((size_t)2 << 20)

/* The loops below compiled once per x86-64 vector width, the widest the CPU
 * and OS support chosen when the program loads (target_clones): the bench
 * is built for any x86-64, and its loops should run as wide as the
 * library's kernels do (the old read loop, built for SSE, spilled its
 * accumulators and read at half the rate).  Elsewhere, and where the
 * compiler lacks the attribute, the compiler's default. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef WIDEST
#define WIDEST
#endif

/* 64 bytes: a cache line, one AVX-512 register (two AVX2 ones, four SSE). */
typedef float line_vector __attribute__((vector_size(64)));
#define LINE_FLOATS 16

/* ---- the buffers -------------------------------------------------------- */

/* n floats uniform in [-1, 1) from seed, on 2 MiB pages where the kernel's
 * transparent huge pages allow (as ra_alloc puts the library's caches);
 * NULL if out of memory. */
static float *huge_floats(int64_t n, uint64_t seed)
{
    void *p = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
#if defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    random_uniform(p, (size_t)n, 1.0f, seed);
    return p;
}

typedef struct band_params {
    int64_t floats; /* of each buffer; a multiple of 8 lines */
    int copy;       /* 1: a destination too */
} band_params;

typedef struct band_state {
    float *x, *y; /* [n]: read (and written in place), and the copy's destination */
    int64_t n;
    bench_pool *pool;
    float sums[CLI_MAX_THREADS];     /* the float sums, one per thread */
    uint64_t words[CLI_MAX_THREADS]; /* the plain sums of 64-bit words */
} band_state;

enum { SEED_X = 1, SEED_Y = 2 };

static int band_setup(const void *params, ra_context *ctx, void **state)
{
    const band_params *p = params;
    band_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the bandwidth buffers");
    s->n = p->floats;
    s->x = huge_floats(s->n, SEED_X);
    s->y = p->copy ? huge_floats(s->n, SEED_Y) : NULL;
    if (!s->x || (p->copy && !s->y))
        return cli_fail(EXIT_FAIL, "bench: out of memory for the bandwidth buffers");
    s->pool = bench_pool_create(ra_context_threads(ctx));
    return s->pool ? 0 : cli_fail(EXIT_FAIL, "bench: cannot start the bandwidth threads");
}

static void band_teardown(void *state)
{
    band_state *s = state;
    if (!s) return;
    bench_pool_destroy(s->pool);
    free(s->x);
    free(s->y);
    free(s);
}

/* [begin, end) of thread's share of the buffer, in lines: a whole number of
 * groups of `group` lines. */
static void share_lines(const band_state *s, int group, int thread, int n_threads,
                        int64_t *begin, int64_t *end)
{
    bench_split(s->n / LINE_FLOATS / group, thread, n_threads, begin, end);
    *begin *= group;
    *end *= group;
}

/* ---- copy ---------------------------------------------------------------- */

#if defined(__x86_64__)
/* Non-temporal stores (SSE2, every x86-64) write the destination's lines
 * without first reading them into the cache: 1.5-2.1x memcpy's rate here
 * (AVX2's were no faster, AVX-512's slower). */
static void copy_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    share_lines(s, 4, thread, n_threads, &begin, &end);
    const __m128 *x = (const __m128 *)s->x;
    float *y = s->y;
    for (int64_t i = 4 * begin; i < 4 * end; i += 4) {
        __m128 a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
        _mm_stream_ps(y + 4 * i, a);
        _mm_stream_ps(y + 4 * i + 4, b);
        _mm_stream_ps(y + 4 * i + 8, c);
        _mm_stream_ps(y + 4 * i + 12, d);
    }
    _mm_sfence(); /* the streamed lines reach memory before the run ends */
}
#else
static void copy_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    share_lines(s, 4, thread, n_threads, &begin, &end);
    memcpy(s->y + begin * LINE_FLOATS, s->x + begin * LINE_FLOATS,
           (size_t)(end - begin) * sizeof(line_vector));
}
#endif

/* The reference: STREAM's copy, as the compiler makes it (vectorized, or
 * memcpy). */
WIDEST static void stream_copy_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    bench_split(s->n, thread, n_threads, &begin, &end);
    for (int64_t i = begin; i < end; i++) s->y[i] = s->x[i];
}

static ra_status copy_run(void *state, ra_context *ctx)
{
    band_state *s = state;
    bench_pool_run(s->pool, ra_context_threads(ctx), copy_share, s);
    return RA_OK;
}

static ra_status stream_copy_run(void *state, ra_context *ctx)
{
    band_state *s = state;
    bench_pool_run(s->pool, ra_context_threads(ctx), stream_copy_share, s);
    return RA_OK;
}

static int copy_check(void *state, ra_context *ctx)
{
    (void)ctx;
    band_state *s = state;
    if (memcmp(s->y, s->x, (size_t)s->n * sizeof(float)) == 0) return 0;
    return cli_fail(EXIT_FAIL, "bench: copy produced a wrong result");
}

/* ---- read-modify-write: x = a x + b in place ------------------------------ */

/* a and b keep the values bounded and away from subnormals. */
#define RMW_A 0.999f
#define RMW_B 0.001f

/* Each thread walks two halves of its share at once, a line of each per
 * step: 1.04-1.2x the plain loop's rate here over 80 MiB (the same over
 * 40 MiB), where four lines of one stream per step gained nothing. */
WIDEST static void rmw_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    share_lines(s, 2, thread, n_threads, &begin, &end);
    const int64_t half = (end - begin) / 2;
    line_vector *x = (line_vector *)s->x + begin, *y = x + half;
    for (int64_t i = 0; i < half; i++) {
        x[i] = x[i] * RMW_A + RMW_B;
        y[i] = y[i] * RMW_A + RMW_B;
    }
}

/* The reference: the plain loop (the rmw limit before these notes). */
WIDEST static void stream_rmw_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    bench_split(s->n, thread, n_threads, &begin, &end);
    float *x = s->x;
    for (int64_t i = begin; i < end; i++) x[i] = x[i] * RMW_A + RMW_B;
}

static ra_status rmw_run(void *state, ra_context *ctx)
{
    band_state *s = state;
    bench_pool_run(s->pool, ra_context_threads(ctx), rmw_share, s);
    return RA_OK;
}

static ra_status stream_rmw_run(void *state, ra_context *ctx)
{
    band_state *s = state;
    bench_pool_run(s->pool, ra_context_threads(ctx), stream_rmw_share, s);
    return RA_OK;
}

/* After the one warm-up run: every x is a x0 + b, x0 drawn again from its
 * seed (-ffp-contract=off: the same two roundings in both). */
static int rmw_check(void *state, ra_context *ctx)
{
    (void)ctx;
    band_state *s = state;
    float *x0 = malloc((size_t)s->n * sizeof(float));
    if (!x0) return cli_fail(EXIT_FAIL, "bench: out of memory for the check of rmw");
    random_uniform(x0, (size_t)s->n, 1.0f, SEED_X);
    int64_t i = 0;
    while (i < s->n && s->x[i] == x0[i] * RMW_A + RMW_B) i++;
    free(x0);
    if (i == s->n) return 0;
    return cli_fail(EXIT_FAIL, "bench: rmw produced a wrong result at %lld", (long long)i);
}

/* ---- read: a sum ---------------------------------------------------------- */

/* Each thread reads two halves of its share at once, four lines of each in
 * flight, into four independent sums of two lines each, so the loads, not
 * the adds' latency, bound it (one float chain would be serial: C forbids
 * reassociating).  Four sums, not eight: a line is two AVX2 registers, and
 * eight sums' sixteen took all of AVX2's, so the loop spilled and read at
 * 0.6-0.7 of the plain sum's rate on an AMD EPYC family 25 model 1 (Zen 3);
 * from memory four sums add a line a cycle, far above any memory's rate. */
WIDEST static void read_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    share_lines(s, 8, thread, n_threads, &begin, &end);
    const int64_t half = (end - begin) / 2; /* a multiple of 4 lines */
    const line_vector *x = (const line_vector *)s->x + begin, *y = x + half;
    line_vector a = {0}, b = {0}, c = {0}, d = {0};
    for (int64_t i = 0; i < half; i += 4) {
        a += x[i] + x[i + 1];
        b += x[i + 2] + x[i + 3];
        c += y[i] + y[i + 1];
        d += y[i + 2] + y[i + 3];
    }
    a += b + c + d;
    float sum = 0;
    for (int i = 0; i < LINE_FLOATS; i++) sum += a[i];
    s->sums[thread] = sum;
}

/* The reference: a plain sum, of the buffer's 64-bit words as integers,
 * whose adds the compiler may reorder and vectorize as it likes (and whose
 * sum is exact, whatever the order). */
typedef uint64_t float_pair __attribute__((may_alias)); /* two of the floats */

WIDEST static void stream_sum_share(void *arg, int thread, int n_threads)
{
    band_state *s = arg;
    int64_t begin, end;
    bench_split(s->n / 2, thread, n_threads, &begin, &end);
    const float_pair *w = (const float_pair *)s->x;
    uint64_t sum = 0;
    for (int64_t i = begin; i < end; i++) sum += w[i];
    s->words[thread] = sum;
}

static ra_status read_run(void *state, ra_context *ctx)
{
    band_state *s = state;
    bench_pool_run(s->pool, ra_context_threads(ctx), read_share, s);
    return RA_OK;
}

static ra_status stream_sum_run(void *state, ra_context *ctx)
{
    band_state *s = state;
    bench_pool_run(s->pool, ra_context_threads(ctx), stream_sum_share, s);
    return RA_OK;
}

/* The threads' float sums against the sum in double: their rounding is far
 * below 1e-6 of the sum of |x| (uniform values), a share left out far
 * above it. */
static int read_check(void *state, ra_context *ctx)
{
    band_state *s = state;
    double exact = 0, magnitude = 0, got = 0;
    for (int64_t i = 0; i < s->n; i++) {
        exact += s->x[i];
        magnitude += fabs(s->x[i]);
    }
    for (int t = 0; t < ra_context_threads(ctx); t++) got += s->sums[t];
    if (fabs(got - exact) <= 1e-6 * magnitude) return 0;
    return cli_fail(EXIT_FAIL, "bench: the read sums to %.9g, not %.9g", got, exact);
}

static int stream_sum_check(void *state, ra_context *ctx)
{
    band_state *s = state;
    const float_pair *w = (const float_pair *)s->x;
    uint64_t exact = 0, got = 0;
    for (int64_t i = 0; i < s->n / 2; i++) exact += w[i];
    for (int t = 0; t < ra_context_threads(ctx); t++) got += s->words[t];
    if (got == exact) return 0;
    return cli_fail(EXIT_FAIL, "bench: stream_sum produced a wrong result");
}

typedef struct sgemm_state {
    float *a, *b, *c; /* [M, K], [N, K], [M, N] */
} sgemm_state;

static void sgemm_teardown(void *state)
{
    sgemm_state *s = state;
    if (!s) return;
    free(s->a);
    free(s->b);
    free(s->c);
    free(s);
}

static int sgemm_setup(const void *params, ra_context *ctx, void **state)
{
    (void)params;
    (void)ctx;
    sgemm_state *s = calloc(1, sizeof *s);
    if (s) {
        s->a = bench_random_floats((int64_t)SGEMM_M * SGEMM_K, 3);
        s->b = bench_random_floats((int64_t)SGEMM_N * SGEMM_K, 4);
        s->c = bench_random_floats((int64_t)SGEMM_M * SGEMM_N, 5);
    }
    *state = s;
    if (s && s->a && s->b && s->c) return 0;
    return cli_fail(EXIT_FAIL, "bench: out of memory for the sgemm buffers");
}

static ra_status sgemm_run(void *state, ra_context *ctx)
{
    (void)ctx;
    sgemm_state *s = state;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, SGEMM_M, SGEMM_N, SGEMM_K, 1.0f,
                s->a, SGEMM_K, s->b, SGEMM_K, 0.0f, s->c, SGEMM_N);
    return RA_OK;
}

/* A few entries of c against dot products in double. */
static int sgemm_check(void *state, ra_context *ctx)
{
    (void)ctx;
    sgemm_state *s = state;
    const int64_t rows[] = {0, 1, SGEMM_M / 2, SGEMM_M - 1};
    const int64_t cols[] = {0, 7, SGEMM_N / 3, SGEMM_N - 1};
    for (int i = 0; i < 4; i++) {
        double exact = 0;
        for (int64_t k = 0; k < SGEMM_K; k++)
            exact += (double)s->a[rows[i] * SGEMM_K + k] * s->b[cols[i] * SGEMM_K + k];
        double got = s->c[rows[i] * SGEMM_N + cols[i]];
        if (!(fabs(got - exact) <= 1e-3 * sqrt((double)SGEMM_K)))
            return cli_fail(EXIT_FAIL, "bench: sgemm gives %g for %g at [%lld, %lld]", got,
                            exact, (long long)rows[i], (long long)cols[i]);
    }
    return 0;
}

#define MIB(n) ((int64_t)(n) << 20)

static const band_params copy_buffers = {STREAM_FLOATS, 1},
                         rmw_buffer = {STREAM_FLOATS, 0},
                         rmw40M_buffer = {STREAM_FLOATS / 2, 0},
                         read32M_buffer = {MIB(32) / 4, 0}, read64M_buffer = {MIB(64) / 4, 0},
                         read128M_buffer = {MIB(128) / 4, 0},
                         read256M_buffer = {MIB(256) / 4, 0};

/* A limit (measures: which) and, before it, its reference (LIMIT_NONE),
 * both over buffers of the params' bytes. */
#define BAND_CASE(case_name, case_shape, which, buffers, bytes, case_run, case_check, \
                  reference)                                                          \
    {.name = (case_name), .shape = (case_shape), .measures = (which),                 \
     .judged_by = LIMIT_NONE, .work = (double)(bytes), .params = &(buffers),           \
     .setup = band_setup, .run = (case_run), .check = (case_check),                   \
     .teardown = band_teardown, .parts = (reference), .parts_target = (reference) ? 1.05 : 0}

#define ROPE_BYTES (2.0 * 4 * STREAM_FLOATS)

const bench_case bench_limit_cases[] = {
    BAND_CASE("stream_copy", "y = x, f32[20971520] (the plain loop)", LIMIT_NONE,
              copy_buffers, ROPE_BYTES, stream_copy_run, copy_check, NULL),
    BAND_CASE("copy", "y = x, f32[20971520] (q + k of rope_f32)", LIMIT_COPY, copy_buffers,
              ROPE_BYTES, copy_run, copy_check, "stream_copy"),
    BAND_CASE("stream_rmw", "x = a x + b, f32[20971520] in place (the plain loop)",
              LIMIT_NONE, rmw_buffer, ROPE_BYTES, stream_rmw_run, rmw_check, NULL),
    BAND_CASE("rmw", "x = a x + b, f32[20971520] in place", LIMIT_RMW, rmw_buffer,
              ROPE_BYTES, rmw_run, rmw_check, "stream_rmw"),
    BAND_CASE("stream_rmw40M", "x = a x + b, f32[10485760] in place (the plain loop)",
              LIMIT_NONE, rmw40M_buffer, ROPE_BYTES / 2, stream_rmw_run, rmw_check, NULL),
    BAND_CASE("rmw40M", "x = a x + b, f32[10485760] in place (bytes of rope_bf16)",
              LIMIT_RMW_40M, rmw40M_buffer, ROPE_BYTES / 2, rmw_run, rmw_check,
              "stream_rmw40M"),
    {.name = "sgemm", .shape = "[2048, 4096] x [4096, 4096]^T", .measures = LIMIT_SGEMM,
     .judged_by = LIMIT_NONE, .work = 2.0 * SGEMM_M * SGEMM_N * SGEMM_K, .work_is_flops = 1,
     .setup = sgemm_setup, .run = sgemm_run, .check = sgemm_check, .teardown = sgemm_teardown},
    BAND_CASE("stream_sum32M", "sum of u64[4194304] (the plain loop)", LIMIT_NONE,
              read32M_buffer, MIB(32), stream_sum_run, stream_sum_check, NULL),
    BAND_CASE("read32M", "sum of f32[8388608] (K + V of 4096 tokens)", LIMIT_READ_32M,
              read32M_buffer, MIB(32), read_run, read_check, "stream_sum32M"),
    BAND_CASE("stream_sum64M", "sum of u64[8388608] (the plain loop)", LIMIT_NONE,
              read64M_buffer, MIB(64), stream_sum_run, stream_sum_check, NULL),
    BAND_CASE("read64M", "sum of f32[16777216] (K + V of 16384 bf16 tokens)", LIMIT_READ_64M,
              read64M_buffer, MIB(64), read_run, read_check, "stream_sum64M"),
    BAND_CASE("stream_sum128M", "sum of u64[16777216] (the plain loop)", LIMIT_NONE,
              read128M_buffer, MIB(128), stream_sum_run, stream_sum_check, NULL),
    BAND_CASE("read128M", "sum of f32[33554432] (K + V of 16384 tokens)", LIMIT_READ_128M,
              read128M_buffer, MIB(128), read_run, read_check, "stream_sum128M"),
    BAND_CASE("stream_sum256M", "sum of u64[33554432] (the plain loop)", LIMIT_NONE,
              read256M_buffer, MIB(256), stream_sum_run, stream_sum_check, NULL),
    BAND_CASE("read256M", "sum of f32[67108864] (K + V of 32768 tokens)", LIMIT_READ_256M,
              read256M_buffer, MIB(256), read_run, read_check, "stream_sum256M"),
};
const int bench_limit_case_count = sizeof bench_limit_cases / sizeof bench_limit_cases[0];
