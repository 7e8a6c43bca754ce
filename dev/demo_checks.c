/* demo_checks.c — RoPE's properties, measured as worst relative errors. */
#include "demo_checks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "random.h"

/* Tokens and heads of the [1, S, H, D] arrays the checks rotate. */
#define CHECK_SEQ 64
#define CHECK_HEADS 8
#define CHECK_KV_HEADS 2

/* Position pairs (m, n) for <R_m q, R_n k> = <q, R_(n-m) k>: near, far apart,
 * and both large, up to the largest position the library accepts. */
static const int64_t position_pairs[][2] = {
    {0, 0}, {3, 7}, {7, 3}, {100, 4096}, {65535, 66535},
    {(int64_t)1 << 31, ((int64_t)1 << 31) + 5},
    {RA_MAX_POSITION - 100, RA_MAX_POSITION}, {RA_MAX_POSITION, 12},
};
#define N_PAIRS (int)(sizeof position_pairs / sizeof position_pairs[0])

/* Start positions of the arrays in the norm and inverse checks. */
static const int64_t starts[] = {0, 1000000007, RA_MAX_POSITION - CHECK_SEQ + 1};
#define N_STARTS (int)(sizeof starts / sizeof starts[0])

typedef struct buffers {
    float *x, *rotated, *restored; /* [1, S, H, D] */
    float *k, *k_seed;             /* [1, S, Hkv, D] */
    float *cos, *sin;              /* [S, D/2] */
    float *q_m, *k_n, *shifted;    /* [D] */
} buffers;

static double dot(const float *a, const float *b, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)a[i] * b[i];
    return sum;
}

/* max |a - b| / max |b| over n elements. */
double max_rel_diff(const float *a, const float *b, int64_t n)
{
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

/* out = R x (or R^T x) for an array [1, seq, heads, D] starting at start. */
static ra_status rotate(const ra_rope *rope, ra_context *ctx, float *out, const float *x,
                        int64_t seq, int64_t heads, int64_t start, ra_direction direction)
{
    int64_t d = ra_rope_get_config(rope)->head_dim;
    ra_tensor in = ra_tensor_4d((void *)x, RA_F32, 1, seq, heads, d);
    ra_tensor to = ra_tensor_4d(out, RA_F32, 1, seq, heads, d);
    ra_positions positions = {.struct_size = sizeof positions, .start = start};
    return ra_rope_apply(ctx, rope, &to, &in, &positions, direction);
}

/* Norms and inverse at each start position. */
static ra_status check_norms_and_inverse(const ra_rope *rope, ra_context *ctx, buffers *b,
                                         demo_check checks[N_ROPE_CHECKS])
{
    int64_t d = ra_rope_get_config(rope)->head_dim, n = CHECK_SEQ * CHECK_HEADS * d;
    for (int s = 0; s < N_STARTS; s++) {
        ra_status status = rotate(rope, ctx, b->rotated, b->x, CHECK_SEQ, CHECK_HEADS,
                                  starts[s], RA_FORWARD);
        if (status == RA_OK)
            status = rotate(rope, ctx, b->restored, b->rotated, CHECK_SEQ, CHECK_HEADS,
                            starts[s], RA_INVERSE);
        if (status != RA_OK) return status;
        for (int64_t h = 0; h < CHECK_SEQ * CHECK_HEADS; h++) {
            double before = sqrt(dot(b->x + h * d, b->x + h * d, d));
            double after = sqrt(dot(b->rotated + h * d, b->rotated + h * d, d));
            checks[CHECK_NORMS].worst =
                fmax(checks[CHECK_NORMS].worst, fabs(after - before) / before);
        }
        checks[CHECK_INVERSE].worst =
            fmax(checks[CHECK_INVERSE].worst, max_rel_diff(b->restored, b->x, n));
    }
    return RA_OK;
}

/* <R_m q, R_n k> against <q, R_(n-m) k> (or <R_(m-n) q, k> when m > n),
 * relative to |q| |k|. */
static ra_status check_relative_positions(const ra_rope *rope, buffers *b,
                                          demo_check checks[N_ROPE_CHECKS])
{
    int64_t d = ra_rope_get_config(rope)->head_dim;
    const float *q = b->x, *k = b->x + d;
    double scale = sqrt(dot(q, q, d) * dot(k, k, d));
    for (int p = 0; p < N_PAIRS; p++) {
        int64_t m = position_pairs[p][0], n = position_pairs[p][1];
        ra_status status = rotate(rope, NULL, b->q_m, q, 1, 1, m, RA_FORWARD);
        if (status == RA_OK) status = rotate(rope, NULL, b->k_n, k, 1, 1, n, RA_FORWARD);
        if (status == RA_OK)
            status = rotate(rope, NULL, b->shifted, n >= m ? k : q, 1, 1,
                            n >= m ? n - m : m - n, RA_FORWARD);
        if (status != RA_OK) return status;
        double scores = dot(b->q_m, b->k_n, d);
        double relative = n >= m ? dot(q, b->shifted, d) : dot(b->shifted, k, d);
        checks[CHECK_RELATIVE].worst =
            fmax(checks[CHECK_RELATIVE].worst, fabs(scores - relative) / scale);
    }
    return RA_OK;
}

/* LLaMA's apply_rotary_emb against the rope object, interleaved layout:
 * rotates q (b->x) and k in place from position 0. */
static ra_status check_seed_parity(const ra_rope *rope, ra_context *ctx, buffers *b,
                                   demo_check checks[N_ROPE_CHECKS])
{
    int64_t d = ra_rope_get_config(rope)->head_dim;
    int64_t nq = CHECK_SEQ * CHECK_HEADS * d, nk = CHECK_SEQ * CHECK_KV_HEADS * d;
    memcpy(b->restored, b->x, (size_t)nq * sizeof(float));
    memcpy(b->k_seed, b->k, (size_t)nk * sizeof(float));
    ra_status status = ra_precompute_freqs(b->cos, b->sin, d, CHECK_SEQ, 10000.0);
    if (status == RA_OK)
        status = ra_apply_rotary_emb(b->restored, b->k_seed, b->cos, b->sin, 1, CHECK_SEQ,
                                     CHECK_HEADS, CHECK_KV_HEADS, d);
    if (status == RA_OK)
        status = rotate(rope, ctx, b->rotated, b->x, CHECK_SEQ, CHECK_HEADS, 0, RA_FORWARD);
    if (status != RA_OK) return status;
    checks[CHECK_SEED].worst = max_rel_diff(b->restored, b->rotated, nq);
    status = rotate(rope, ctx, b->rotated, b->k, CHECK_SEQ, CHECK_KV_HEADS, 0, RA_FORWARD);
    if (status != RA_OK) return status;
    checks[CHECK_SEED].worst =
        fmax(checks[CHECK_SEED].worst, max_rel_diff(b->k_seed, b->rotated, nk));
    return RA_OK;
}

static ra_status check_layout(ra_layout layout, ra_context *ctx, int64_t head_dim,
                              buffers *b, demo_check checks[N_ROPE_CHECKS])
{
    ra_rope_config config = ra_rope_config_default(head_dim);
    config.layout = layout;
    config.table_size = CHECK_SEQ;
    ra_rope *rope = NULL;
    ra_status status = ra_rope_create(&rope, &config);
    if (status == RA_OK) status = check_norms_and_inverse(rope, ctx, b, checks);
    if (status == RA_OK) status = check_relative_positions(rope, b, checks);
    if (status == RA_OK && layout == RA_LAYOUT_INTERLEAVED)
        status = check_seed_parity(rope, ctx, b, checks);
    ra_rope_destroy(rope);
    return status;
}

static int alloc_buffers(buffers *b, int64_t d)
{
    size_t nq = (size_t)(CHECK_SEQ * CHECK_HEADS * d);
    size_t nk = (size_t)(CHECK_SEQ * CHECK_KV_HEADS * d);
    size_t nt = (size_t)(CHECK_SEQ * d / 2);
    b->x = malloc(nq * sizeof(float));
    b->rotated = malloc(nq * sizeof(float));
    b->restored = malloc(nq * sizeof(float));
    b->k = malloc(nk * sizeof(float));
    b->k_seed = malloc(nk * sizeof(float));
    b->cos = malloc(nt * sizeof(float));
    b->sin = malloc(nt * sizeof(float));
    b->q_m = malloc((size_t)d * sizeof(float));
    b->k_n = malloc((size_t)d * sizeof(float));
    b->shifted = malloc((size_t)d * sizeof(float));
    if (!b->x || !b->rotated || !b->restored || !b->k || !b->k_seed || !b->cos || !b->sin ||
        !b->q_m || !b->k_n || !b->shifted)
        return cli_fail(EXIT_FAIL, "out of memory for the rope checks");
    random_uniform(b->x, nq, 1.0f, 11);
    random_uniform(b->k, nk, 1.0f, 12);
    return 0;
}

static void free_buffers(buffers *b)
{
    free(b->x); free(b->rotated); free(b->restored); free(b->k); free(b->k_seed);
    free(b->cos); free(b->sin); free(b->q_m); free(b->k_n); free(b->shifted);
}

int demo_rope_checks(ra_context *ctx, int64_t head_dim, demo_check checks[N_ROPE_CHECKS])
{
    checks[CHECK_NORMS] = (demo_check){"rope keeps every head's norm", 0, 1e-5};
    checks[CHECK_RELATIVE] = (demo_check){
        "<R_m q, R_n k> = <q, R_(n-m) k>, 8 pairs, m and n up to 2^32", 0, 1e-5};
    checks[CHECK_INVERSE] = (demo_check){"inverse(apply(x)) = x", 0, 1e-5};
    checks[CHECK_SEED] = (demo_check){
        "LLaMA's apply_rotary_emb = rope (interleaved)", 0, 1e-6};
    buffers b = {0};
    int failed = alloc_buffers(&b, head_dim);
    for (int layout = 0; layout < RA_LAYOUT_COUNT && !failed; layout++) {
        ra_status status = check_layout((ra_layout)layout, ctx, head_dim, &b, checks);
        if (status != RA_OK) failed = cli_fail_status(status, "rope check failed to run");
    }
    free_buffers(&b);
    return failed;
}
