/*
 * decode_impl.h — flash-decoding over a KV cache, written once against
 * simd.h and compiled per ISA (kernels_*.c).
 *
 * A task is (b, chunk of RA_DECODE_CHUNK cache slots), all kv heads: it
 * reads its chunk front to back, each K and V row once for the whole group
 * of query rows (rep heads x T new tokens) of its kv head, and keeps, per
 * row, an online softmax:
 *   s_j = q . k_j / sqrt(D)   (slot j visible to the row, else skipped)
 *   m' = max(m, max s);  l = l e^(m - m') + sum e^(s - m');
 *   o = o e^(m - m') + sum e^(s_j - m') v_j
 * Dot products come W keys at a time: W vector partial sums, one in-register
 * transpose, and a vector add give the W scores.  The partials (o, m, l)
 * are merged across chunks by decode_merge_task, in chunk order.
 */
#include <math.h>
#include <string.h>

#include "attention_internal.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "kvcache_internal.h"

/* RA_W widened values of a K or V row from element d on. */
static inline vf load_any(const void *row, ra_dtype dtype, int64_t d)
{
    if (dtype == RA_F32) return vload((const float *)row + d);
    if (dtype == RA_BF16) return vload_bf16((const uint16_t *)row + d);
    return vload_f16((const uint16_t *)row + d);
}

/* Scores of row q (head_dim a multiple of RA_W) against keys[0 .. RA_W). */
static inline vf dot_block(const float *q, const void *const *keys, ra_dtype dtype,
                           int64_t head_dim)
{
    vf acc[RA_W];
    for (int j = 0; j < RA_W; j++) acc[j] = vsplat(0.0f);
    for (int64_t d = 0; d < head_dim; d += RA_W) {
        vf qv = vload(q + d);
        for (int j = 0; j < RA_W; j++) acc[j] += qv * load_any(keys[j], dtype, d);
    }
    vtranspose(acc);
    vf s = acc[0];
    for (int j = 1; j < RA_W; j++) s += acc[j];
    return s;
}

/* The same one key at a time, for any head_dim. */
static inline float dot_one(const float *q, const void *key, ra_dtype dtype, int64_t head_dim)
{
    float s = 0.0f;
    for (int64_t d = 0; d < head_dim; d++) s += q[d] * ra_load(key, dtype, d);
    return s;
}

static void decode_task(void *arg, int64_t task, int thread)
{
    const ra_decode_job *job = arg;
    const ra_kv_cache *c = job->cache;
    const ra_tensor *q = job->q;
    const int64_t n_kv = c->n_kv_heads, head_dim = c->head_dim, T = q->shape[1];
    const int64_t rep = q->shape[2] / n_kv, rows = job->rows;
    const int64_t chunk = task % job->n_chunks, b = task / job->n_chunks;
    const int64_t len = c->length[b], nq = job->n_query ? job->n_query[b] : T;
    const ra_tensor kt = ra_kv_cache_view(c, 0), vt = ra_kv_cache_view(c, 1);
    const float scale = (float)(1.0 / sqrt((double)head_dim));
    const int vector_dots = head_dim % RA_W == 0;
    const int64_t stride = head_dim + 2; /* a row's partial: o[D], m, l */
    float *qs = job->scratch + thread * job->per_thread;  /* [Hkv * rows, D] scaled queries */
    int64_t *last = (int64_t *)(void *)(qs + n_kv * rows * head_dim); /* [rows] */

    /* Row r = (head in group) * T + t is the token in slot len - nq + t; it
     * sees slots 0 .. that one.  Rows past nq see nothing. */
    const int64_t j0 = chunk * RA_DECODE_CHUNK;
    int64_t j_end = j0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % T;
        last[r] = t < nq ? len - nq + t : -1;
        int64_t end = last[r] + 1 < j0 + RA_DECODE_CHUNK ? last[r] + 1 : j0 + RA_DECODE_CHUNK;
        j_end = end > j_end ? end : j_end;
    }
    for (int64_t g = 0; g < n_kv; g++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t h = r / T, t = r % T;
            float *o = job->partials + (((b * n_kv + g) * job->n_chunks + chunk) * rows + r) * stride;
            memset(o, 0, (size_t)head_dim * sizeof(float));
            o[head_dim] = -INFINITY;
            o[head_dim + 1] = 0.0f;
            if (t >= nq) continue;
            const float *qrow = ra_row(q, b, t, g * rep + h);
            float *dst = qs + (g * rows + r) * head_dim;
            for (int64_t d = 0; d < head_dim; d++) dst[d] = qrow[d] * scale;
        }

    /* Key blocks outer, kv heads and rows inner: the task walks its chunk of
     * the cache front to back (every slot's Hkv rows are adjacent), and a
     * block's K and V rows stay in L1 for every row of each group. */
    for (int64_t j = j0; j < j_end; j += RA_W) {
        int n = j_end - j < RA_W ? (int)(j_end - j) : RA_W;
        for (int64_t g = 0; g < n_kv; g++) {
            const void *keys[RA_W], *vals[RA_W];
            for (int i = 0; i < RA_W; i++) {
                keys[i] = ra_row_any(&kt, b, j + (i < n ? i : 0), g);
                vals[i] = ra_row_any(&vt, b, j + (i < n ? i : 0), g);
            }
            float *group = job->partials + ((b * n_kv + g) * job->n_chunks + chunk) * rows * stride;
            for (int64_t r = 0; r < rows; r++) {
                if (j > last[r]) continue;
                int nr = last[r] - j + 1 < n ? (int)(last[r] - j + 1) : n; /* visible keys */
                float *o = group + r * stride, *m = o + head_dim, *l = m + 1;
                const float *qr = qs + (g * rows + r) * head_dim;
                float s[RA_W] = {0};
                if (vector_dots)
                    vstore(s, dot_block(qr, keys, c->dtype, head_dim));
                else
                    for (int i = 0; i < nr; i++) s[i] = dot_one(qr, keys[i], c->dtype, head_dim);
                for (int i = nr; i < RA_W; i++) s[i] = -INFINITY;
                float block_max = s[0];
                for (int i = 1; i < nr; i++) block_max = s[i] > block_max ? s[i] : block_max;
                float m_new = block_max > *m ? block_max : *m;
                /* the same exp as the flash path, so prefill and decode
                 * agree, against 0 while every score is -inf (flash_impl.h) */
                float m_exp = m_new == -INFINITY ? 0.0f : m_new;
                float alpha = vexp(vsplat(*m - m_exp))[0];
                vf p = vexp(vload(s) - vsplat(m_exp));
                vstore(s, p);
                *l = *l * alpha + vreduce_add(p);
                *m = m_new;
                int64_t d = 0;
                for (; d + RA_W <= head_dim; d += RA_W) {
                    vf acc = vload(o + d) * vsplat(alpha);
                    for (int i = 0; i < nr; i++) acc += vsplat(s[i]) * load_any(vals[i], c->dtype, d);
                    vstore(o + d, acc);
                }
                for (; d < head_dim; d++) {
                    float acc = o[d] * alpha;
                    for (int i = 0; i < nr; i++) acc += s[i] * ra_load(vals[i], c->dtype, d);
                    o[d] = acc;
                }
            }
        }
    }
}

/* out[b, t, h] = merge of the chunks' partials for that row, in chunk order:
 * m = max m_c, l = sum l_c e^(m_c - m), o = sum o_c e^(m_c - m) / l. */
static void decode_merge_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const ra_decode_job *job = arg;
    const ra_kv_cache *c = job->cache;
    const int64_t n_kv = c->n_kv_heads, head_dim = c->head_dim, T = job->q->shape[1];
    const int64_t rep = job->q->shape[2] / n_kv, rows = job->rows;
    const int64_t b = task / n_kv, g = task % n_kv, nq = job->n_query ? job->n_query[b] : T;
    const float *group = job->partials + (b * n_kv + g) * job->n_chunks * rows * (head_dim + 2);
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / T, t = r % T;
        if (t >= nq) continue;
        float m = -INFINITY;
        for (int64_t ch = 0; ch < job->n_chunks; ch++) {
            float mc = group[(ch * rows + r) * (head_dim + 2) + head_dim];
            m = mc > m ? mc : m;
        }
        float *dst = ra_row(job->out, b, t, g * rep + h), l = 0.0f;
        for (int64_t d = 0; d < head_dim; d++) dst[d] = 0.0f;
        for (int64_t ch = 0; ch < job->n_chunks; ch++) {
            const float *o = group + (ch * rows + r) * (head_dim + 2);
            if (o[head_dim] == -INFINITY) continue; /* the chunk saw nothing of this row */
            float w = expf(o[head_dim] - m);
            l += o[head_dim + 1] * w;
            for (int64_t d = 0; d < head_dim; d++) dst[d] += o[d] * w;
        }
        float inv = 1.0f / l;
        for (int64_t d = 0; d < head_dim; d++) dst[d] *= inv;
    }
}
