/*
 * attention_ref_backward.c — the backward of LLaMA's masked attention
 * path (attention_ref.c), plain and scalar: the oracle the flash backward is
 * tested against.  Per (b, kv head g), for each query head h of the group in
 * order, on the calling thread, each forward line and its backward:
 *
 *   scores = q @ k^T / sqrt(D)          dq  = dscores @ k / sqrt(D)
 *                                       dk += dscores^T @ q / sqrt(D)
 *   scores = c tanh(scores / c)         dscores *= 1 - tanh^2(scores / c)  (soft-capping)
 *   scores = softmax(scores + mask)     dscores = P * (dP - rowsum(P * dP))
 *            (sinks in the sum)         dsink  -= p_sink rowsum(P * dP)
 *   scores = attn_dropout(scores)       dP  = dPd * mult      (mult: 0 or 1/(1-p))
 *   out    = scores @ v                 dPd = dout @ v^T,  dv += Pd^T @ dout
 *
 * P is recomputed row by row exactly as the forward does
 * (ra_attention_reference_row), and the dropout multipliers are regenerated
 * from the same Philox indices.  Dot products and sums over keys, queries
 * and heads run in double, as in the forward; the softmax backward's
 * elementwise products in float32.  dk and dv sum the group's heads in
 * double and round once.
 *
 * Keys of any length Sk (query row i at key row i + Sk - Sq), non_causal
 * and attn_mask as the forward sees them (ra_attention_reference_seen); the
 * mask is a constant: no gradient for it.
 *
 *   dq, dout, q: [B, Sq, H, D]   dk, dv, k, v: [B, Sk, Hkv, D]
 *   scratch: P and dS [Sq, Sk], mult and seen [Sk] each (floats: an even
 *            count, so the doubles after them are aligned); dk_sum, dv_sum
 *            [Sk, D], dsink [H] (doubles)
 */
#include <math.h>

#include "attention_internal.h"

/* The slope of the soft-cap at query i and key j of (b, h): 1 - tanh^2(s / c)
 * for the scaled dot product s, recomputed in double as the forward forms it. */
static double softcap_slope(const ra_attention_args *fwd, int64_t b, int64_t h, int64_t i,
                            int64_t j)
{
    const ra_tensor *q = fwd->q, *k = fwd->k;
    const int64_t head_dim = q->shape[3], kv = h / (q->shape[2] / k->shape[2]);
    const float *qi = ra_row(q, b, i, h);
    const int64_t kj = ra_offset(k, b, j, kv);
    double dot = 0;
    for (int64_t d = 0; d < head_dim; d++)
        dot += (double)qi[d] * ra_load(k->data, k->dtype, kj + d);
    double t = tanh(dot * fwd->mask.scale / fwd->mask.softcap);
    return 1.0 - t * t;
}

void ra_attention_backward_reference(const ra_attention_backward_args *args, void *scratch)
{
    const ra_attention_args *fwd = &args->fwd;
    const ra_tensor *q = fwd->q, *k = fwd->k, *v = fwd->v, *dout = args->dout;
    const int64_t batch = q->shape[0], seq = q->shape[1], n_heads = q->shape[2];
    const int64_t n_keys = k->shape[1];
    const int64_t n_kv = k->shape[2], head_dim = q->shape[3], n_rep = n_heads / n_kv;
    float *prob = scratch;                          /* [Sq, Sk]: P, then P * mult */
    float *dscores = prob + seq * n_keys;           /* [Sq, Sk] */
    float *mult = dscores + seq * n_keys;           /* [Sk] */
    float *seen = mult + n_keys;                    /* [Sk]: 1 for the keys row i sees */
    double *dk_sum = (double *)(seen + n_keys);     /* [Sk, D], after 2 (Sq + 1) Sk floats */
    double *dv_sum = dk_sum + n_keys * head_dim;    /* [Sk, D] */
    double *dsink = dv_sum + n_keys * head_dim;     /* [H] */
    const ra_attention_mask *mask = &fwd->mask;
    const double scale = mask->scale;

    for (int64_t h = 0; h < n_heads; h++) dsink[h] = 0.0;

    for (int64_t b = 0; b < batch; b++)
        for (int64_t g = 0; g < n_kv; g++) {
            for (int64_t t = 0; t < n_keys * head_dim; t++) dk_sum[t] = dv_sum[t] = 0.0;
            for (int64_t h = g * n_rep; h < (g + 1) * n_rep; h++) {
                for (int64_t i = 0; i < seq; i++) {
                    float *p = prob + i * n_keys, *ds = dscores + i * n_keys;
                    double lse = ra_attention_reference_row(fwd, b, h, i, p);
                    for (int64_t j = 0; j < n_keys; j++) {
                        mult[j] = 1.0f;
                        seen[j] = (float)ra_attention_reference_seen(fwd, b, h, i, j);
                    }
                    if (fwd->dropout) /* element (b, h, i, j) of [B, H, Sq, Sk] */
                        ra_dropout_row(&fwd->drop,
                                       (uint64_t)((b * n_heads + h) * seq + i) * (uint64_t)n_keys,
                                       n_keys, mult);
                    /* dP = (dout v^T) * mult, for the keys row i sees */
                    const float *doi = ra_row(dout, b, i, h);
                    double row_dot = 0; /* rowsum(P * dP) */
                    for (int64_t j = 0; j < n_keys; j++) {
                        ds[j] = 0.0f;
                        if (seen[j] == 0.0f) continue;
                        int64_t vj = ra_offset(v, b, j, g);
                        double dot = 0;
                        for (int64_t d = 0; d < head_dim; d++)
                            dot += (double)doi[d] * ra_load(v->data, v->dtype, vj + d);
                        ds[j] = (float)dot * mult[j];
                        row_dot += (double)p[j] * ds[j];
                    }
                    /* dscores = P * (dP - rowsum(P * dP)), in float32, then
                     * through the cap: d(c tanh(s / c))/ds = 1 - tanh^2(s / c)
                     * (attn_mask's values add after it: no gradient) */
                    for (int64_t j = 0; j < n_keys; j++)
                        ds[j] = seen[j] != 0.0f && p[j] != 0.0f ? p[j] * (ds[j] - (float)row_dot)
                                                                : 0.0f;
                    if (mask->softcap)
                        for (int64_t j = 0; j < n_keys; j++)
                            if (seen[j] != 0.0f) ds[j] *= (float)softcap_slope(fwd, b, h, i, j);
                    /* the sink's share p_sink = e^(sink - lse) of the row:
                     * dL/dsink = -p_sink rowsum(P * dP) (0 for a row that sees
                     * no key: row_dot is 0) */
                    if (mask->sinks && ra_mask_query_real(mask, b, i))
                        dsink[h] -= exp((double)mask->sinks[h] - lse) * row_dot;
                    for (int64_t j = 0; j < n_keys; j++) p[j] *= mult[j]; /* Pd */
                }
                /* dv += Pd^T dout;  dk += dscores^T q / sqrt(D) (scaled below) */
                for (int64_t j = 0; j < n_keys; j++)
                    for (int64_t d = 0; d < head_dim; d++) {
                        double acc_v = 0, acc_k = 0;
                        for (int64_t i = 0; i < seq; i++) {
                            if (prob[i * n_keys + j] == 0.0f && dscores[i * n_keys + j] == 0.0f)
                                continue; /* a key the row does not see (or weighs 0) */
                            acc_v += (double)prob[i * n_keys + j] * ra_row(dout, b, i, h)[d];
                            acc_k += (double)dscores[i * n_keys + j] * ra_row(q, b, i, h)[d];
                        }
                        dv_sum[j * head_dim + d] += acc_v;
                        dk_sum[j * head_dim + d] += acc_k;
                    }
                /* dq = dscores k / sqrt(D) */
                for (int64_t i = 0; i < seq; i++) {
                    float *dqi = ra_row(args->dq, b, i, h);
                    for (int64_t d = 0; d < head_dim; d++) {
                        double acc = 0;
                        for (int64_t j = 0; j < n_keys; j++)
                            if (dscores[i * n_keys + j] != 0.0f) /* seen keys only */
                                acc += (double)dscores[i * n_keys + j] *
                                       ra_load(k->data, k->dtype, ra_offset(k, b, j, g) + d);
                        dqi[d] = (float)(acc * scale);
                    }
                }
            }
            for (int64_t j = 0; j < n_keys; j++) {
                float *dkj = ra_row(args->dk, b, j, g), *dvj = ra_row(args->dv, b, j, g);
                for (int64_t d = 0; d < head_dim; d++) {
                    dkj[d] = (float)(dk_sum[j * head_dim + d] * scale);
                    dvj[d] = (float)dv_sum[j * head_dim + d];
                }
            }
        }
    if (args->dsinks)
        for (int64_t h = 0; h < n_heads; h++) args->dsinks[h] = (float)dsink[h];
}
