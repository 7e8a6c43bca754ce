/*
 * attention_flash.c — causal GQA attention in tiles with an online softmax
 * (FlashAttention's forward): the [S, S] scores never exist, only one
 * [rep * BQ, BK] tile per thread.
 *
 * A task is (b, kv head g, query block): the rep = H / Hkv query heads of the
 * group share every K/V tile it loads.  For each key tile, each query row i:
 *   s_j   = q_i . k_j / sqrt(D)           (j <= i, else -inf)
 *   m'    = max(m, max_j s_j)
 *   p_j   = exp(s_j - m')
 *   l     = l * exp(m - m') + sum_j p_j          (dropout does not touch l)
 *   o     = o * exp(m - m') + sum_j p_j keep_j v_j
 * and at the end out_i = o / l.  K is transposed per tile so that the score
 * loop and the P.V loop both run over contiguous memory.
 *
 * Tasks are claimed longest first (last query block first) so that the
 * causal triangle's uneven tasks balance across threads.  Each output row is
 * computed by one task in a fixed order: the same bits for any thread count.
 */
#include <math.h>
#include <string.h>

#include "attention_internal.h"
#include "parallel.h"

enum { BQ = 64, BK = 64 };

/* Floats of per-thread scratch: tile scores, accumulators, max, sum,
 * transposed K tile, dropout multipliers. */
static int64_t thread_floats(int64_t rows, int64_t head_dim)
{
    int64_t n = rows * BK + rows * head_dim + 2 * rows + head_dim * BK + BK;
    return (n + 15) & ~(int64_t)15; /* keep each thread's slot 64-byte aligned */
}

size_t ra_attention_scratch_bytes(ra_attention_path path, int64_t seq, int64_t n_heads,
                                  int64_t n_kv_heads, int64_t head_dim, int threads)
{
    int64_t n, rows;
    if (path == RA_PATH_REFERENCE) { /* scores [S, S] and one row of dropout multipliers */
        if (ra_mul(seq, seq + 1, &n) != RA_OK) return 0;
    } else {
        if (ra_mul(n_heads / n_kv_heads, BQ, &rows) != RA_OK) return 0;
        if (ra_mul(rows, BK + head_dim + 2, &n) != RA_OK) return 0;
        if (ra_mul(thread_floats(rows, head_dim), threads, &n) != RA_OK) return 0;
    }
    return (size_t)n * sizeof(float);
}

typedef struct flash_job {
    const ra_attention_args *args;
    float *scratch;
    int64_t per_thread;
    int64_t n_query_blocks;
} flash_job;

/* Scores of one query row against keys k0 .. k0 + nk - 1 (transposed in kt). */
static void row_scores(float *s, const float *qi, const float *kt, int64_t nk, int64_t head_dim,
                       float scale, int64_t i, int64_t k0)
{
    for (int64_t j = 0; j < nk; j++) s[j] = 0.0f;
    for (int64_t d = 0; d < head_dim; d++) {
        float qd = qi[d];
        const float *kd = kt + d * BK;
        for (int64_t j = 0; j < nk; j++) s[j] += qd * kd[j];
    }
    for (int64_t j = 0; j < nk; j++) s[j] = k0 + j <= i ? s[j] * scale : -INFINITY;
}

static void flash_task(void *arg, int64_t task, int thread)
{
    const flash_job *job = arg;
    const ra_attention_args *a = job->args;
    const ra_tensor *q = a->q, *k = a->k, *v = a->v, *out = a->out;
    const int64_t seq = q->shape[1], n_heads = q->shape[2], n_kv = k->shape[2];
    const int64_t head_dim = q->shape[3], rep = n_heads / n_kv;
    const float scale = (float)(1.0 / sqrt((double)head_dim));

    int64_t groups = q->shape[0] * n_kv;
    int64_t qblock = job->n_query_blocks - 1 - task / groups;
    int64_t b = (task % groups) / n_kv, g = task % n_kv;
    int64_t q0 = qblock * BQ, q1 = q0 + BQ < seq ? q0 + BQ : seq, nq = q1 - q0;
    int64_t rows = rep * BQ;

    float *s = job->scratch + thread * job->per_thread; /* [rows, BK] */
    float *o = s + rows * BK;                            /* [rows, D] */
    float *m = o + rows * head_dim;                      /* [rows] */
    float *l = m + rows;                                 /* [rows] */
    float *kt = l + rows;                                /* [D, BK] */
    float *mult = kt + head_dim * BK;                    /* [BK] */

    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    memset(o, 0, (size_t)(rows * head_dim) * sizeof(float));

    for (int64_t k0 = 0; k0 < q1; k0 += BK) {
        int64_t nk = k0 + BK < q1 ? BK : q1 - k0;
        for (int64_t j = 0; j < nk; j++) {
            const float *kj = ra_row(k, b, k0 + j, g);
            for (int64_t d = 0; d < head_dim; d++) kt[d * BK + j] = kj[d];
        }
        for (int64_t r = 0; r < rep; r++) {
            int64_t h = g * rep + r;
            for (int64_t i = q0; i < q1; i++) {
                if (i < k0) continue; /* the whole tile is in this row's future */
                int64_t row = r * BQ + (i - q0);
                float *si = s + row * BK, *oi = o + row * head_dim;
                row_scores(si, ra_row(q, b, i, h), kt, nk, head_dim, scale, i, k0);
                float tile_max = -INFINITY;
                for (int64_t j = 0; j < nk; j++) tile_max = si[j] > tile_max ? si[j] : tile_max;
                float m_new = tile_max > m[row] ? tile_max : m[row];
                float alpha = expf(m[row] - m_new); /* 0 on the first tile */
                float sum = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    si[j] = expf(si[j] - m_new);
                    sum += si[j];
                }
                l[row] = l[row] * alpha + sum;
                m[row] = m_new;
                if (a->dropout) {
                    uint64_t first = (uint64_t)((b * n_heads + h) * seq + i) * (uint64_t)seq + k0;
                    ra_dropout_row(&a->mask, first, nk, mult);
                    for (int64_t j = 0; j < nk; j++) si[j] *= mult[j];
                }
                for (int64_t d = 0; d < head_dim; d++) oi[d] *= alpha;
                for (int64_t j = 0; j < nk; j++) {
                    float p = si[j];
                    const float *vj = ra_row(v, b, k0 + j, g);
                    for (int64_t d = 0; d < head_dim; d++) oi[d] += p * vj[d];
                }
            }
        }
    }
    for (int64_t r = 0; r < rep; r++)
        for (int64_t i = 0; i < nq; i++) {
            int64_t row = r * BQ + i;
            float inv = 1.0f / l[row], *dst = ra_row(out, b, q0 + i, g * rep + r);
            for (int64_t d = 0; d < head_dim; d++) dst[d] = o[row * head_dim + d] * inv;
        }
}

void ra_attention_flash(ra_context *ctx, const ra_attention_args *args, float *scratch)
{
    const ra_tensor *q = args->q;
    int64_t rows = (q->shape[2] / args->k->shape[2]) * BQ;
    flash_job job = {args, scratch, thread_floats(rows, q->shape[3]), (q->shape[1] + BQ - 1) / BQ};
    int64_t n_tasks = job.n_query_blocks * q->shape[0] * args->k->shape[2];
    ra_parallel_for(ctx, n_tasks, flash_task, &job);
}
