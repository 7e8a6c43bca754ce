/*
 * gemm.h — the layer's matrix products through CBLAS (row-major sgemm; sgemv
 * for a single token), in blocks whose sizes fit cblas's int arguments
 * (internal).  Callers' inner sizes and leading dimensions (dim, H D, Hkv D)
 * fit in an int: the layer checks dim <= INT_MAX when it is created.  Called
 * from the calling thread only, never inside the library's parallel regions.
 *
 * Weights may be stored as bfloat16 or float16 (ra_layer_weights.dtype).
 * They are widened exactly to float32 and every product and sum is float32,
 * so a 16-bit weight gives the numbers its float32 widening would, up to the
 * order of the sums:
 *   - a few rows (decode steps, m <= RA_GEMV16_ROWS): our own kernel
 *     (gemv16_impl.h) widens each weight as it loads it, reading the
 *     weights once, its threads splitting the output columns (the same
 *     bits for any thread count);
 *   - more rows (prefill, training): a panel of weight rows at a time
 *     widened into a reused buffer, then cblas_sgemm on it.
 */
#ifndef RA_GEMM_H
#define RA_GEMM_H

#include "cpu/gemv16_job.h"
#include "internal.h"

/* Each matrix's rows are contiguous; ld* is the distance between rows
 * where it may be wider than the matrix (columns of a wider one). */

/* out[M, N] = a[M, K] w[N, K]^T: nn.Linear, y = x w^T.  out's rows are
 * ldo >= N apart. */
void ra_gemm_nt(float *out, int64_t ldo, const float *a, const float *w, int64_t m, int64_t n,
                int64_t k);

/* out[M, N] = a[M, K] b[K, N] + beta out: a linear layer's input gradient,
 * dx = dy w.  a's rows are lda >= K apart. */
void ra_gemm_nn(float *out, const float *a, int64_t lda, const float *b, int64_t m, int64_t n,
                int64_t k, float beta);

/* out[M, N] = a[K, M]^T b[K, N] + beta out: a linear layer's weight
 * gradient, dw = dy^T x, summed over K tokens.  a's rows are lda >= M
 * apart. */
void ra_gemm_tn(float *out, const float *a, int64_t lda, const float *b, int64_t m, int64_t n,
                int64_t k, float beta);

/* ---- weights stored as float32, bfloat16 or float16 ----------------------- */

/* Rows of a at most for the 16-bit GEMV kernel; more go through the panel. */
enum { RA_GEMV16_ROWS = 8 };

/* What multiplies a layer's weights: their dtype, the threads of the GEMV
 * kernel, and the panel that 16-bit weights widen into. */
typedef struct ra_gemm_env {
    ra_context *ctx;      /* NULL: the calling thread alone */
    ra_dtype dtype;       /* RA_F32, RA_BF16 or RA_F16 */
    float *panel;         /* panel_floats floats; NULL for RA_F32 */
    int64_t panel_floats; /* ra_gemm_panel_floats(the longest weight row) */
} ra_gemm_env;

/* The panel's floats for weights whose rows have at most row_max values
 * and whose largest matrix has `largest` (>= row_max): about 16 MiB, at
 * least 64 rows, at most that matrix.  Each sgemm call on a panel repacks
 * the activations, so panels of few rows would cost a pass over them each
 * (4 MiB panels: 1.2 times the float32 layer's prefill time at dim 4096;
 * 16 MiB: four calls for a 4096 x 4096 weight). */
int64_t ra_gemm_panel_floats(int64_t row_max, int64_t largest);

/* The address of element `index` of weight w stored as dtype. */
static inline const void *ra_gemm_weight_at(const void *w, ra_dtype dtype, int64_t index)
{
    return (const char *)w + index * (int64_t)(dtype == RA_F32 ? 4 : 2);
}

/* ra_gemm_nt with w stored as env->dtype. */
void ra_gemm_nt_w(const ra_gemm_env *env, float *out, int64_t ldo, const float *a, const void *w,
                  int64_t m, int64_t n, int64_t k);

/* ra_gemm_nn with b (a weight [K, N]) stored as env->dtype. */
void ra_gemm_nn_w(const ra_gemm_env *env, float *out, const float *a, int64_t lda, const void *b,
                  int64_t m, int64_t n, int64_t k, float beta);

/* The job's tasks run on env->ctx's threads. */
void ra_gemv16(ra_context *ctx, const ra_gemv16_job *job);

#endif
