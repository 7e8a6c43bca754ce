/*
 * attention_ref.c — the masked attention path of Meta's LLaMA code, the oracle that the
 * flash path is tested against.  Per (b, h), on the calling thread:
 *
 *   scores = q @ k^T / sqrt(D)                      [S, S]  (or options' scale)
 *   scores = softcap * tanh(scores / softcap)       Gemma 2's soft-capping, if asked
 *   scores = scores + triu(-inf, diagonal=1)        causal mask, and options' masks
 *   scores = softmax(scores, dim=-1)                in float32 (stored), sinks in
 *                                                   the denominator if asked
 *   scores = attn_dropout(scores)                   training only
 *   out    = scores @ v                             [S, D]
 *
 * Sums run in double so the oracle is as close to exact as float32 storage
 * allows; f16/bf16 keys and values are widened to float32 element by
 * element.  Query head h reads key/value head h / (H / Hkv): no repeat_kv.
 * With args->lse the row's log-sum-exp, max + log(sum) in double, is kept
 * too (rounded to float32).
 */
#include <math.h>

#include "attention_internal.h"

double ra_attention_reference_row(const ra_attention_args *args, int64_t b, int64_t h,
                                  int64_t i, float *row)
{
    const ra_attention_mask *mask = &args->mask;
    const ra_tensor *q = args->q, *k = args->k;
    const int64_t seq = q->shape[1], head_dim = q->shape[3];
    const int64_t kv = h / (q->shape[2] / k->shape[2]);
    const int64_t lo = ra_mask_first_key(mask, i, ra_mask_leading_padding(mask, b));
    const int64_t qi = ra_offset(q, b, i, h);
    for (int64_t j = 0; j < seq; j++) row[j] = -INFINITY;
    if (!ra_mask_query_real(mask, b, i)) { /* a padding query: a zero row */
        for (int64_t j = 0; j < seq; j++) row[j] = 0.0f;
        return -INFINITY;
    }
    for (int64_t j = lo; j <= i; j++) { /* the mask: keys outside lo .. i stay -inf */
        if (!ra_mask_real(mask, b, j)) continue;
        int64_t kj = ra_offset(k, b, j, kv);
        double dot = 0;
        for (int64_t d = 0; d < head_dim; d++)
            dot += (double)ra_load(q->data, q->dtype, qi + d) *
                   ra_load(k->data, k->dtype, kj + d);
        row[j] = (float)ra_mask_logit(mask, dot * mask->scale);
    }
    /* softmax over the keys seen and the sink, against their maximum */
    double max = mask->sinks ? mask->sinks[h] : -INFINITY, sum = 0;
    for (int64_t j = lo; j <= i; j++) max = row[j] > max ? row[j] : max;
    for (int64_t j = lo; j <= i; j++) sum += exp((double)row[j] - max);
    if (mask->sinks) sum += exp((double)mask->sinks[h] - max);
    for (int64_t j = 0; j < seq; j++)
        row[j] = j >= lo && j <= i ? (float)(exp((double)row[j] - max) / sum) : 0.0f;
    return max + log(sum);
}

/* The first key row i of sequence b weighs (its probabilities before are 0). */
static int64_t lo_of(const ra_attention_args *args, int64_t b, int64_t i)
{
    return ra_mask_first_key(&args->mask, i, ra_mask_leading_padding(&args->mask, b));
}

void ra_attention_reference(const ra_attention_args *args, float *scores)
{
    const ra_tensor *q = args->q, *v = args->v, *out = args->out;
    const int64_t batch = q->shape[0], seq = q->shape[1], n_heads = q->shape[2];
    const int64_t head_dim = q->shape[3], n_rep = n_heads / v->shape[2];
    float *mult = scores + seq * seq; /* dropout multipliers of one row */

    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < n_heads; h++) {
            int64_t kv = h / n_rep;
            for (int64_t i = 0; i < seq; i++) {
                float *row = scores + i * seq;
                double lse = ra_attention_reference_row(args, b, h, i, row);
                if (args->lse) args->lse[(b * n_heads + h) * seq + i] = (float)lse;
                if (args->dropout) {
                    ra_dropout_row(&args->drop, (uint64_t)((b * n_heads + h) * seq + i) * (uint64_t)seq,
                                   seq, mult);
                    for (int64_t j = 0; j < seq; j++) row[j] *= mult[j];
                }
            }
            for (int64_t i = 0; i < seq; i++) {
                float *oi = ra_row(out, b, i, h);
                const int query = ra_mask_query_real(&args->mask, b, i); /* else a zero row */
                const int64_t lo = lo_of(args, b, i);
                for (int64_t d = 0; d < head_dim; d++) {
                    double acc = 0;
                    for (int64_t j = lo; query && j <= i; j++)
                        if (ra_mask_real(&args->mask, b, j)) /* padding keys weigh nothing */
                            acc += (double)scores[i * seq + j] *
                                   ra_load(v->data, v->dtype, ra_offset(v, b, j, kv) + d);
                    oi[d] = (float)acc;
                }
            }
        }
}
