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

/* out[M, N] = a[M, K] w[N, K]^T: nn.Linear, y = x w^T. */
void ra_gemm_nt(float *out, const float *a, const float *w, int64_t m, int64_t n, int64_t k);

/* out[M, N] = a[M, K] b[K, N] + beta out: a linear layer's input gradient,
 * dx = dy w. */
void ra_gemm_nn(float *out, const float *a, const float *b, int64_t m, int64_t n, int64_t k,
                float beta);

/* out[M, N] = a[K, M]^T b[K, N] + beta out: a linear layer's weight
 * gradient, dw = dy^T x, summed over K tokens. */
void ra_gemm_tn(float *out, const float *a, const float *b, int64_t m, int64_t n, int64_t k,
                float beta);

#endif
