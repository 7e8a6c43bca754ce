/* gemm.c — the layer's matrix products through CBLAS, in int-sized blocks. */
#include <cblas.h>
#include <limits.h>

#include "cpu/kernels.h"
#include "gemm.h"
#include "parallel.h"

/* Rows (or tokens) per block: the block's size and its products with the
 * other sizes stay within INT_MAX. */
static int64_t block_for(int64_t a, int64_t b)
{
    return INT_MAX / (a > b ? a : b);
}

void ra_gemm_nt(float *out, int64_t ldo, const float *a, const float *w, int64_t m, int64_t n,
                int64_t k)
{
    if (m == 1 && n <= INT_MAX && k <= INT_MAX) {
        /* One token (a decode step): OpenBLAS's sgemv streams w at 3-4x the
         * rate its sgemm reaches with a single row. */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)k, 1.0f, w, (int)k, a, 1, 0.0f, out,
                    1);
        return;
    }
    const int64_t block = block_for(ldo, k);
    for (int64_t r = 0; r < m; r += block) {
        int64_t rows = m - r < block ? m - r : block;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)k, 1.0f,
                    a + r * k, (int)k, w, (int)k, 0.0f, out + r * ldo, (int)ldo);
    }
}

void ra_gemm_nn(float *out, const float *a, int64_t lda, const float *b, int64_t m, int64_t n,
                int64_t k, float beta)
{
    const int64_t block = block_for(n, lda);
    for (int64_t r = 0; r < m; r += block) {
        int64_t rows = m - r < block ? m - r : block;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f,
                    a + r * lda, (int)lda, b, (int)n, beta, out + r * n, (int)n);
    }
}

void ra_gemm_tn(float *out, const float *a, int64_t lda, const float *b, int64_t m, int64_t n,
                int64_t k, float beta)
{
    /* Blocks of tokens add into out: the first with beta, the rest with 1. */
    const int64_t block = block_for(lda, n);
    for (int64_t t = 0; t < k; t += block) {
        int64_t tokens = k - t < block ? k - t : block;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)tokens, 1.0f,
                    a + t * lda, (int)lda, b + t * n, (int)n, t == 0 ? beta : 1.0f, out, (int)n);
    }
}

/* ---- weights stored as float32, bfloat16 or float16 ----------------------- */

enum { PANEL_FLOATS = 1 << 22, PANEL_MIN_ROWS = 64 };

int64_t ra_gemm_panel_floats(int64_t row_max, int64_t largest)
{
    int64_t rows = PANEL_FLOATS / (row_max > 0 ? row_max : 1);
    int64_t floats = (rows < PANEL_MIN_ROWS ? PANEL_MIN_ROWS : rows) * row_max;
    return floats < largest ? floats : largest;
}

void ra_gemv16(ra_context *ctx, const ra_gemv16_job *job)
{
    const int64_t tasks = (job->n + job->cols_per_task - 1) / job->cols_per_task;
    ra_parallel_for(ctx, tasks, ra_kernels_get()->gemv16_task, (void *)job);
}

/* The 16-bit GEMV for a few rows; its tasks of 64 columns (a few hundred
 * KiB of weights each at the layer's sizes) spread over the threads; on
 * AMD Zen 3 and later, eight rows a pass and the hardware's prefetcher
 * alone (gemv16_impl.h's stream). */
static void gemv16(const ra_gemm_env *env, float *out, int64_t ldo, const float *a,
                   const void *w, int64_t m, int64_t n, int64_t k)
{
    ra_gemv16_job job = {out, ldo, a, w, env->dtype == RA_BF16, m, n, k, 64, ra_cpu_zen()};
    ra_gemv16(env->ctx, &job);
}

/* rows rows of 16-bit weights [rows, cols] from w, widened into env's panel. */
static const float *widen(const ra_gemm_env *env, const void *w, int64_t rows, int64_t cols)
{
    ra_kernels_get()->widen16(env->panel, w, rows * cols, env->dtype == RA_BF16);
    return env->panel;
}

void ra_gemm_nt_w(const ra_gemm_env *env, float *out, int64_t ldo, const float *a, const void *w,
                  int64_t m, int64_t n, int64_t k)
{
    if (env->dtype == RA_F32) {
        ra_gemm_nt(out, ldo, a, w, m, n, k);
        return;
    }
    if (m <= RA_GEMV16_ROWS) {
        gemv16(env, out, ldo, a, w, m, n, k);
        return;
    }
    /* Panels of whole rows of w: columns [c, c + cols) of out. */
    const int64_t panel_rows = env->panel_floats / k;
    for (int64_t c = 0; c < n; c += panel_rows) {
        int64_t cols = n - c < panel_rows ? n - c : panel_rows;
        const float *p = widen(env, ra_gemm_weight_at(w, env->dtype, c * k), cols, k);
        ra_gemm_nt(out + c, ldo, a, p, m, cols, k);
    }
}

void ra_gemm_nn_w(const ra_gemm_env *env, float *out, const float *a, int64_t lda, const void *b,
                  int64_t m, int64_t n, int64_t k, float beta)
{
    if (env->dtype == RA_F32) {
        ra_gemm_nn(out, a, lda, b, m, n, k, beta);
        return;
    }
    /* Panels of whole rows of b (the inner dimension): each adds its
     * share of the sum into out, the first with beta. */
    const int64_t panel_rows = env->panel_floats / n;
    for (int64_t r = 0; r < k; r += panel_rows) {
        int64_t rows = k - r < panel_rows ? k - r : panel_rows;
        const float *p = widen(env, ra_gemm_weight_at(b, env->dtype, r * n), rows, n);
        ra_gemm_nn(out, a + r, lda, p, m, n, rows, r == 0 ? beta : 1.0f);
    }
}
