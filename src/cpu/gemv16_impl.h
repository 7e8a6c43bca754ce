/*
 * gemv16_impl.h — out[M, N] = a[M, K] w[N, K]^T for a few rows of a (the
 * layer's decode steps) with bfloat16 or float16 weights, and the widening
 * of a panel of such weights for sgemm; written once against simd.h,
 * compiled per ISA (kernels_*.c).
 *
 * Each weight is widened exactly as it loads (vload_bf16, vload_f16) and
 * multiplied by a's float32 values in float32: the numbers of the weights'
 * float32 widening, summed in this kernel's order (RA_W lanes, then the
 * lanes added, then the tail of K).  A task owns output columns [task *
 * cols_per_task, ...) of every row: four weight rows at a time are read
 * from memory once and stay in cache for the M rows of a.  Each output is
 * one task's, summed in one order: the same bits for any thread count.
 */
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "gemm.h"
#include "half.h"

static inline __attribute__((always_inline)) vf gemv16_load(const uint16_t *p, int bf16)
{
    return bf16 ? vload_bf16(p) : vload_f16(p);
}

static inline __attribute__((always_inline)) float gemv16_scalar(uint16_t h, int bf16)
{
    return bf16 ? ra_half_bf16_to_f32(h) : ra_half_f16_to_f32(h);
}

/* out[j .. j + 4) of row a: four dot products of a [k] with w's rows j.. */
static inline __attribute__((always_inline)) void gemv16_dots4(float *out, const float *a,
                                                               const uint16_t *w, int64_t k,
                                                               int bf16)
{
    vf acc0 = vsplat(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t c;
    for (c = 0; c + RA_W <= k; c += RA_W) {
        vf x = vload(a + c);
        acc0 += x * gemv16_load(w + c, bf16);
        acc1 += x * gemv16_load(w + k + c, bf16);
        acc2 += x * gemv16_load(w + 2 * k + c, bf16);
        acc3 += x * gemv16_load(w + 3 * k + c, bf16);
    }
    float s0 = vreduce_add(acc0), s1 = vreduce_add(acc1), s2 = vreduce_add(acc2),
          s3 = vreduce_add(acc3);
    for (; c < k; c++) {
        s0 += a[c] * gemv16_scalar(w[c], bf16);
        s1 += a[c] * gemv16_scalar(w[k + c], bf16);
        s2 += a[c] * gemv16_scalar(w[2 * k + c], bf16);
        s3 += a[c] * gemv16_scalar(w[3 * k + c], bf16);
    }
    out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

/* One dot product, in the same order as each of gemv16_dots4's. */
static inline __attribute__((always_inline)) float gemv16_dot1(const float *a, const uint16_t *w,
                                                               int64_t k, int bf16)
{
    vf acc = vsplat(0.0f);
    int64_t c;
    for (c = 0; c + RA_W <= k; c += RA_W) acc += vload(a + c) * gemv16_load(w + c, bf16);
    float s = vreduce_add(acc);
    for (; c < k; c++) s += a[c] * gemv16_scalar(w[c], bf16);
    return s;
}

static inline __attribute__((always_inline)) void gemv16_columns(const ra_gemv16_job *job,
                                                                 int64_t j0, int64_t j1,
                                                                 int bf16)
{
    const int64_t k = job->k;
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4)
        for (int64_t i = 0; i < job->m; i++)
            gemv16_dots4(job->out + i * job->ldo + j, job->a + i * k, job->w + j * k, k, bf16);
    for (; j < j1; j++)
        for (int64_t i = 0; i < job->m; i++)
            job->out[i * job->ldo + j] = gemv16_dot1(job->a + i * k, job->w + j * k, k, bf16);
}

static void gemv16_task(void *arg, int64_t task, int thread)
{
    const ra_gemv16_job *job = arg;
    (void)thread;
    const int64_t j0 = task * job->cols_per_task;
    const int64_t j1 = job->n - j0 < job->cols_per_task ? job->n : j0 + job->cols_per_task;
    if (job->bf16)
        gemv16_columns(job, j0, j1, 1);
    else
        gemv16_columns(job, j0, j1, 0);
}

static void widen16(float *dst, const uint16_t *src, int64_t n, int bf16)
{
    int64_t i = 0;
    if (bf16)
        for (; i + RA_W <= n; i += RA_W) vstore(dst + i, vload_bf16(src + i));
    else
        for (; i + RA_W <= n; i += RA_W) vstore(dst + i, vload_f16(src + i));
    for (; i < n; i++) dst[i] = gemv16_scalar(src[i], bf16);
}
