/*
 * gemv16_job.h — what the 16-bit GEMV kernel (cpu/gemv16_impl.h) reads
 * (internal); gemm.c fills it (ra_gemv16).
 */
#ifndef RA_CPU_GEMV16_JOB_H
#define RA_CPU_GEMV16_JOB_H

#include <stdint.h>

/* One task of the 16-bit GEMV, out[M, N] = a[M, K] w[N, K]^T for
 * M <= RA_GEMV16_ROWS (gemm.h): output columns [task * cols_per_task, ...) of
 * every row (kernels.h's gemv16_task). */
typedef struct ra_gemv16_job {
    float *out;
    int64_t ldo;
    const float *a;      /* [m, k], rows contiguous */
    const uint16_t *w;   /* [n, k] */
    int bf16;            /* 1: bfloat16; 0: float16 */
    int64_t m, n, k;
    int64_t cols_per_task;
    int stream;          /* 1: eight rows a pass, no prefetch requests (AVX2
                            only; gemm.c sets it from ra_cpu_zen); the same bits */
} ra_gemv16_job;

#endif
