/*
 * softmax_impl.h — the online softmax of a block of scores, rows at a
 * time, written once against simd.h and compiled per ISA (kernels_*.c): the
 * step between the two products of the latent layer's absorbed decode
 * (layer_mla.c), which computes the scores and the weighted rows by sgemm.
 *
 * For row r of s [rows, ld], of which the first seen[r] columns are keys
 * the row sees:
 *   s_j *= scale;  m' = max(m, max s);  alpha = e^(m - m');
 *   l = l alpha + sum e^(s_j - m');  s_j = e^(s_j - m') (0 where unseen);
 *   o_r *= alpha
 * A row that sees none of the block keeps m, l and o, its s all 0.
 */
#include <math.h>

#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/decode_job.h"

static void softmax_row(const ra_softmax_job *job, int64_t r)
{
    float *s = job->s + r * job->ld, *o = job->o + r * job->od;
    const int64_t n = job->seen[r];
    const vf scale = vsplat(job->scale);
    int64_t j;
    if (n == 0) {
        memset(s, 0, (size_t)job->cols * sizeof(float));
        return;
    }
    vf mx = vsplat(-INFINITY);
    for (j = 0; j + RA_W <= n; j += RA_W) {
        vf v = vload(s + j) * scale;
        vstore(s + j, v);
        mx = vmax(mx, v);
    }
    float m_block = vreduce_max(mx);
    for (; j < n; j++) {
        s[j] *= job->scale;
        m_block = s[j] > m_block ? s[j] : m_block;
    }
    const float m_old = job->m[r], m_new = m_block > m_old ? m_block : m_old;
    const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
    vf sum = vsplat(0.0f);
    for (j = 0; j + RA_W <= n; j += RA_W) {
        vf e = vexp(vload(s + j) - vsplat(m_new));
        vstore(s + j, e);
        sum += e;
    }
    float total = vreduce_add(sum);
    for (; j < n; j++) {
        s[j] = expf(s[j] - m_new);
        total += s[j];
    }
    for (; j < job->cols; j++) s[j] = 0.0f;
    job->m[r] = m_new;
    job->l[r] = job->l[r] * alpha + total;
    if (alpha != 1.0f)
        for (int64_t d = 0; d < job->od; d++) o[d] *= alpha;
}

static void softmax_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const ra_softmax_job *job = arg;
    const int64_t r1 = (task + 1) * job->rows_per_task;
    for (int64_t r = task * job->rows_per_task; r < r1 && r < job->rows; r++)
        softmax_row(job, r);
}
