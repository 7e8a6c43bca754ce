/* gemm.c — the layer's matrix products through CBLAS, in int-sized blocks. */
#include <cblas.h>
#include <limits.h>

#include "gemm.h"

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
