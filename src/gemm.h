/*
 * gemm.h — the layer's matrix products through CBLAS (row-major sgemm; sgemv
 * for a single token), in blocks whose sizes fit cblas's int arguments
 * (internal).  Callers' inner sizes and leading dimensions (dim, H D, Hkv D)
 * fit in an int: the layer checks dim <= INT_MAX when it is created.  Called
 * from the calling thread only, never inside the library's parallel regions.
 */
#ifndef RA_GEMM_H
#define RA_GEMM_H

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

#endif
