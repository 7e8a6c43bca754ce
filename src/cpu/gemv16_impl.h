/*
 * gemv16_impl.h — out[M, N] = a[M, K] w[N, K]^T for a few rows of a (the
 * layer's decode steps) with bfloat16 or float16 weights, and the widening
 * of a panel of such weights for sgemm; written once against simd.h,
 * compiled per ISA (kernels_*.c).
 *
 * Each weight is widened exactly as it loads and multiplied by a's float32
 * values in float32: the numbers of the weights' float32 widening, summed
 * in this kernel's order (lanes, then the lanes added, then the tail of K).
 * bfloat16 loads 2 RA_W weights as RA_W pairs (simd_half.h's
 * vload_bf16_pairs: a shift and a mask, no widening shuffle) against a's
 * even and odd values, separated once per 4 weight rows, and prefetches
 * each row 1 KiB ahead: a thread then reads bfloat16 weights at about the
 * rate OpenBLAS's sgemv reads float32 ones.  float16 widens RA_W at a time
 * (vload_f16).  A task owns output columns [task * cols_per_task, ...) of
 * every row: four weight rows at a time are read from memory once and stay
 * in cache for the M rows of a.  Each output is
 * one task's, summed in one order: the same bits for any thread count.
 *
 * On AVX2, a job with stream set (gemm.c: AMD Zen 3 and later, by CPUID)
 * reads eight weight rows at a pass and asks for no lines
 * (gemv16_dots8_stream): the hardware's prefetcher alone keeps the eight
 * streams ahead.  On one core of an AMD EPYC of family 25 model 1 (Zen 3),
 * a decode step's four products (84 MB of bfloat16 weights) read at 0.96
 * of what a plain sum over 128 MiB reads on one thread, against 0.86 with
 * four rows and the requests 1 KiB ahead; four rows and no requests gave
 * 0.84-0.93, eight rows with requests 1 or 2 KiB ahead 0.75-0.81 (a
 * harness, alternating; docs/perf/2026-12-08-paged-zen3.md).  Each output
 * sums in the same order either way: the same bits.
 */
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/simd_half.h"
#include "cpu/gemv16_job.h"
#include "half.h"

/* Lane i of the result from lane 2 i + k of a pair of vectors: k 0 the
 * even values, 1 the odd. */
#define GEMV16_EVERY_OTHER(i, k) (2 * (i) + (k))
/* How far ahead in each of the four rows the bfloat16 loop prefetches, in
 * weights: 1 KiB, 16 lines a row (with the hardware's prefetcher alone a
 * thread read at 0.85 of OpenBLAS's sgemv's bytes per second; with this,
 * 0.92 to 0.98: docs/perf/2026-12-03-bf16-weights.md). */
#define GEMV16_AHEAD 512

static inline __attribute__((always_inline)) vf gemv16_load(const uint16_t *p, int bf16)
{
    return bf16 ? vload_bf16(p) : vload_f16(p);
}

static inline __attribute__((always_inline)) float gemv16_scalar(uint16_t h, int bf16)
{
    return bf16 ? ra_half_bf16_to_f32(h) : ra_half_f16_to_f32(h);
}

/* a[c, c + 2 RA_W) as its even and its odd values. */
static inline __attribute__((always_inline)) void gemv16_x_pairs(const float *a, vf *even,
                                                                 vf *odd)
{
    vf x0 = vload(a), x1 = vload(a + RA_W);
    *even = RA_SHUFFLE(x0, x1, GEMV16_EVERY_OTHER, 0);
    *odd = RA_SHUFFLE(x0, x1, GEMV16_EVERY_OTHER, 1);
}

/* acc += x_even w_even + x_odd w_odd over bfloat16 w[0, 2 RA_W) (into
 * separate sums for the even and the odd values: two chains of adds). */
static inline __attribute__((always_inline)) void gemv16_pairs(vf *acc_even, vf *acc_odd,
                                                               vf x_even, vf x_odd,
                                                               const uint16_t *w)
{
    vf even, odd;
    vload_bf16_pairs(w, &even, &odd);
    *acc_even += x_even * even;
    *acc_odd += x_odd * odd;
}

/* out[j .. j + 4) of row a: four dot products of a [k] with w's rows j.. */
static inline __attribute__((always_inline)) void gemv16_dots4(float *out, const float *a,
                                                               const uint16_t *w, int64_t k,
                                                               int bf16)
{
    vf acc0 = vsplat(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t c = 0;
    if (bf16) {
        vf odd0 = acc0, odd1 = acc0, odd2 = acc0, odd3 = acc0;
        for (; c + 2 * RA_W <= k; c += 2 * RA_W) {
            vf xe, xo;
            __builtin_prefetch(w + c + GEMV16_AHEAD);
            __builtin_prefetch(w + k + c + GEMV16_AHEAD);
            __builtin_prefetch(w + 2 * k + c + GEMV16_AHEAD);
            __builtin_prefetch(w + 3 * k + c + GEMV16_AHEAD);
            gemv16_x_pairs(a + c, &xe, &xo);
            gemv16_pairs(&acc0, &odd0, xe, xo, w + c);
            gemv16_pairs(&acc1, &odd1, xe, xo, w + k + c);
            gemv16_pairs(&acc2, &odd2, xe, xo, w + 2 * k + c);
            gemv16_pairs(&acc3, &odd3, xe, xo, w + 3 * k + c);
        }
        acc0 += odd0, acc1 += odd1, acc2 += odd2, acc3 += odd3;
    }
    for (; c + RA_W <= k; c += RA_W) {
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
    int64_t c = 0;
    if (bf16) {
        vf odd = acc;
        for (; c + 2 * RA_W <= k; c += 2 * RA_W) {
            vf xe, xo;
            gemv16_x_pairs(a + c, &xe, &xo);
            gemv16_pairs(&acc, &odd, xe, xo, w + c);
        }
        acc += odd;
    }
    for (; c + RA_W <= k; c += RA_W) acc += vload(a + c) * gemv16_load(w + c, bf16);
    float s = vreduce_add(acc);
    for (; c < k; c++) s += a[c] * gemv16_scalar(w[c], bf16);
    return s;
}

#if defined(RA_SIMD_AVX2)
/* gemv16_dots4's sums for eight rows, with no prefetch requests: each
 * output in the same order as gemv16_dots4's, so the same bits. */
static inline __attribute__((always_inline)) void gemv16_dots8_stream(float *out, const float *a,
                                                                      const uint16_t *w,
                                                                      int64_t k, int bf16)
{
    vf acc[8], odd[8];
    for (int r = 0; r < 8; r++) acc[r] = odd[r] = vsplat(0.0f);
    int64_t c = 0;
    if (bf16) {
        for (; c + 2 * RA_W <= k; c += 2 * RA_W) {
            vf xe, xo;
            gemv16_x_pairs(a + c, &xe, &xo);
            for (int r = 0; r < 8; r++) gemv16_pairs(&acc[r], &odd[r], xe, xo, w + r * k + c);
        }
        for (int r = 0; r < 8; r++) acc[r] += odd[r];
    }
    for (; c + RA_W <= k; c += RA_W) {
        vf x = vload(a + c);
        for (int r = 0; r < 8; r++) acc[r] += x * gemv16_load(w + r * k + c, bf16);
    }
    float s[8];
    for (int r = 0; r < 8; r++) s[r] = vreduce_add(acc[r]);
    for (; c < k; c++)
        for (int r = 0; r < 8; r++) s[r] += a[c] * gemv16_scalar(w[r * k + c], bf16);
    for (int r = 0; r < 8; r++) out[r] = s[r];
}

/* gemv16_columns for a job with stream set: eight rows a pass, then
 * gemv16_columns's for the rest. */
static inline __attribute__((always_inline)) int64_t gemv16_columns8(const ra_gemv16_job *job,
                                                                     int64_t j0, int64_t j1,
                                                                     int bf16)
{
    const int64_t k = job->k;
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8)
        for (int64_t i = 0; i < job->m; i++)
            gemv16_dots8_stream(job->out + i * job->ldo + j, job->a + i * k, job->w + j * k, k,
                                bf16);
    return j;
}
#endif

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
#if defined(RA_SIMD_AVX2)
    if (job->stream) {
        if (job->bf16)
            gemv16_columns(job, gemv16_columns8(job, j0, j1, 1), j1, 1);
        else
            gemv16_columns(job, gemv16_columns8(job, j0, j1, 0), j1, 0);
        return;
    }
#endif
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
