/*
 * bench_limits.c — the machine limits the kernels are judged against:
 * memory copy and in-place read-modify-write bandwidth over buffers the size
 * of rope_f32's q + k (and read-modify-write over the size of rope_bf16's),
 * read bandwidth over buffers the size of each decode case's K + V, and
 * cblas_sgemm on the projections' shape.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "bench.h"

/* Floats of q [1, 4096, 32, 128] plus k [1, 4096, 8, 128]. */
#define STREAM_FLOATS ((int64_t)4096 * (32 + 8) * 128)

/* The projection x wq^T of the layer at S = 2048: [M, K] x [N, K]^T. */
#define SGEMM_M 2048
#define SGEMM_N 4096
#define SGEMM_K 4096

typedef struct stream_state {
    float *src, *dst; /* [n] */
    int64_t n;
    int threads;
} stream_state;

/* params: the floats of each buffer (an int64_t). */
static int stream_setup(const void *params, ra_context *ctx, void **state)
{
    stream_state *s = calloc(1, sizeof *s);
    if (s) {
        s->n = *(const int64_t *)params;
        s->src = bench_random_floats(s->n, 1);
        s->dst = bench_random_floats(s->n, 2);
        s->threads = ra_context_threads(ctx);
    }
    *state = s;
    if (s && s->src && s->dst) return 0;
    return cli_fail(EXIT_FAIL, "bench: out of memory for the bandwidth buffers");
}

static void stream_teardown(void *state)
{
    stream_state *s = state;
    if (!s) return;
    free(s->src);
    free(s->dst);
    free(s);
}

static void copy_share(void *arg, int thread, int n_threads)
{
    stream_state *s = arg;
    int64_t begin, end;
    bench_split(s->n, thread, n_threads, &begin, &end);
    memcpy(s->dst + begin, s->src + begin, (size_t)(end - begin) * sizeof(float));
}

static ra_status copy_run(void *state, ra_context *ctx)
{
    (void)ctx;
    stream_state *s = state;
    return bench_parallel(s->threads, copy_share, s) ? RA_ERR_THREAD : RA_OK;
}

static int copy_check(void *state, ra_context *ctx)
{
    (void)ctx;
    stream_state *s = state;
    if (memcmp(s->dst, s->src, (size_t)s->n * sizeof(float)) == 0) return 0;
    return cli_fail(EXIT_FAIL, "bench: copy produced a wrong result");
}

/* x = a x + b; a and b keep the values bounded and away from subnormals. */
static void rmw_share(void *arg, int thread, int n_threads)
{
    stream_state *s = arg;
    int64_t begin, end;
    bench_split(s->n, thread, n_threads, &begin, &end);
    float *x = s->src;
    for (int64_t i = begin; i < end; i++) x[i] = x[i] * 0.999f + 0.001f;
}

static ra_status rmw_run(void *state, ra_context *ctx)
{
    (void)ctx;
    stream_state *s = state;
    return bench_parallel(s->threads, rmw_share, s) ? RA_ERR_THREAD : RA_OK;
}

/* ---- read: a vectorized sum ------------------------------------------- */

/* Sixteen floats in four independent sums: the loads, not the adds, bound it
 * (a plain float loop would be one serial chain: C forbids reassociating). */
typedef float read_vector __attribute__((vector_size(64)));

typedef struct read_state {
    const read_vector *buffer; /* [n] */
    int64_t n;
    float sums[CLI_MAX_THREADS]; /* one per thread, so the loop cannot be dropped */
    int threads;
} read_state;

static int read_setup(const void *params, ra_context *ctx, void **state)
{
    read_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(EXIT_FAIL, "bench: out of memory for the read buffer");
    s->n = *(const int64_t *)params / (int64_t)sizeof(read_vector);
    s->buffer = (const read_vector *)bench_random_floats(s->n * 16, 6);
    s->threads = ra_context_threads(ctx);
    return s->buffer ? 0 : cli_fail(EXIT_FAIL, "bench: out of memory for the read buffer");
}

static void read_teardown(void *state)
{
    read_state *s = state;
    if (!s) return;
    free((void *)s->buffer);
    free(s);
}

static void read_share(void *arg, int thread, int n_threads)
{
    read_state *s = arg;
    int64_t begin, end;
    bench_split(s->n / 4, thread, n_threads, &begin, &end);
    read_vector a = {0}, b = {0}, c = {0}, d = {0};
    for (const read_vector *x = s->buffer + 4 * begin; x < s->buffer + 4 * end; x += 4) {
        a += x[0];
        b += x[1];
        c += x[2];
        d += x[3];
    }
    a += b + c + d;
    float sum = 0;
    for (int i = 0; i < 16; i++) sum += a[i];
    s->sums[thread] = sum;
}

static ra_status read_run(void *state, ra_context *ctx)
{
    (void)ctx;
    read_state *s = state;
    return bench_parallel(s->threads, read_share, s) ? RA_ERR_THREAD : RA_OK;
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

static const int64_t stream_floats = STREAM_FLOATS, stream_floats_half = STREAM_FLOATS / 2;

static const int64_t mib_32 = (int64_t)32 << 20, mib_128 = (int64_t)128 << 20,
                     mib_256 = (int64_t)256 << 20;

#define READ_CASE(case_name, case_shape, limit, bytes) \
    {.name = (case_name), .shape = (case_shape), .measures = (limit), \
     .judged_by = LIMIT_NONE, .work = (double)(bytes), .params = &(bytes), \
     .setup = read_setup, .run = read_run, .teardown = read_teardown}

const bench_case bench_limit_cases[] = {
    {.name = "copy", .shape = "memcpy f32[20971520] (q + k of rope_f32)",
     .measures = LIMIT_COPY, .judged_by = LIMIT_NONE, .work = 2.0 * 4 * STREAM_FLOATS,
     .params = &stream_floats, .setup = stream_setup, .run = copy_run, .check = copy_check,
     .teardown = stream_teardown},
    {.name = "rmw", .shape = "x = a x + b, f32[20971520] in place", .measures = LIMIT_RMW,
     .judged_by = LIMIT_NONE, .work = 2.0 * 4 * STREAM_FLOATS, .params = &stream_floats,
     .setup = stream_setup, .run = rmw_run, .teardown = stream_teardown},
    {.name = "rmw40M", .shape = "x = a x + b, f32[10485760] in place (bytes of rope_bf16)",
     .measures = LIMIT_RMW_40M, .judged_by = LIMIT_NONE, .work = 2.0 * 4 * (STREAM_FLOATS / 2),
     .params = &stream_floats_half, .setup = stream_setup, .run = rmw_run,
     .teardown = stream_teardown},
    {.name = "sgemm", .shape = "[2048, 4096] x [4096, 4096]^T", .measures = LIMIT_SGEMM,
     .judged_by = LIMIT_NONE, .work = 2.0 * SGEMM_M * SGEMM_N * SGEMM_K, .work_is_flops = 1,
     .setup = sgemm_setup, .run = sgemm_run, .check = sgemm_check, .teardown = sgemm_teardown},
    READ_CASE("read32M", "sum of f32[8388608] (K + V of 4096 tokens)", LIMIT_READ_32M, mib_32),
    READ_CASE("read128M", "sum of f32[33554432] (K + V of 16384 tokens)", LIMIT_READ_128M,
              mib_128),
    READ_CASE("read256M", "sum of f32[67108864] (K + V of 32768 tokens)", LIMIT_READ_256M,
              mib_256),
};
const int bench_limit_case_count = sizeof bench_limit_cases / sizeof bench_limit_cases[0];
