/*
 * attention_ref.c — the masked attention path of Meta's LLaMA code, the oracle that the
 * flash path is tested against.  Per (b, h), on the calling thread:
 *
 *   scores = q @ k^T / sqrt(D)                      [Sq, Sk]  (or options' scale)
 *   scores = softcap * tanh(scores / softcap)       Gemma 2's soft-capping, if asked
 *   scores = scores + triu(-inf, diagonal=1)        causal mask, and options' masks
 *   scores = softmax(scores, dim=-1)                in float32 (stored), sinks in
 *                                                   the denominator if asked
 *   scores = attn_dropout(scores)                   training only
 *   out    = scores @ v                             [Sq, D]
 *
 * Query row i stands at key row i + Sk - Sq (args->q_shift): keys of any
 * length, the diagonal aligned bottom-right; attn_mask's values join the
 * logits after the soft-cap, and a row that sees no key is zero.
 * Sums run in double so the oracle is as close to exact as float32 storage
 * allows; f16/bf16 keys and values are widened to float32 element by
 * element.  Query head h reads key/value head h / (H / Hkv): no repeat_kv.
 * With args->lse the row's log-sum-exp, max + log(sum) in double, is kept
 * too (rounded to float32).
 */
#include <math.h>

#include "attention_internal.h"

/* Query row i's (b) key bounds lo .. hi before padding and attn_mask (key
 * rows: i stands at i + q_shift). */
static void row_bounds(const ra_attention_args *args, int64_t b, int64_t i, int64_t *lo,
                       int64_t *hi)
{
    const ra_attention_mask *mask = &args->mask;
    const int64_t lp = ra_mask_leading_padding(mask, b), at = i + args->q_shift;
    *lo = ra_mask_first_key(mask, at, lp);
    *hi = ra_mask_last_key(mask, at, lp, args->k->shape[1]);
}

int ra_attention_reference_seen(const ra_attention_args *args, int64_t b, int64_t h, int64_t i,
                                int64_t j)
{
    const ra_attention_mask *mask = &args->mask;
    int64_t lo, hi;
    row_bounds(args, b, i, &lo, &hi);
    return ra_mask_query_real(mask, b, i) && j >= lo && j <= hi && ra_mask_real(mask, b, j) &&
           ra_mask_attn(mask, b, h, i, j) != -INFINITY;
}

double ra_attention_reference_row(const ra_attention_args *args, int64_t b, int64_t h,
                                  int64_t i, float *row)
{
    const ra_attention_mask *mask = &args->mask;
    const ra_tensor *q = args->q, *k = args->k;
    const int64_t n_keys = k->shape[1], head_dim = q->shape[3];
    const int64_t kv = h / (q->shape[2] / k->shape[2]);
    const int64_t qi = ra_offset(q, b, i, h);
    int64_t n_seen = 0;
    for (int64_t j = 0; j < n_keys; j++) {
        row[j] = -INFINITY; /* the mask: keys not seen stay -inf */
        if (!ra_attention_reference_seen(args, b, h, i, j)) continue;
        int64_t kj = ra_offset(k, b, j, kv);
        double dot = 0;
        for (int64_t d = 0; d < head_dim; d++)
            dot += (double)ra_load(q->data, q->dtype, qi + d) *
                   ra_load(k->data, k->dtype, kj + d);
        /* attn_mask's value after scale and soft-cap */
        row[j] = (float)(ra_mask_logit(mask, dot * mask->scale) + ra_mask_attn(mask, b, h, i, j));
        n_seen++;
    }
    if (n_seen == 0) { /* a padding query, or one that sees no key: a zero row */
        for (int64_t j = 0; j < n_keys; j++) row[j] = 0.0f;
        return mask->sinks && ra_mask_query_real(mask, b, i) ? mask->sinks[h] : -INFINITY;
    }
    /* softmax over the keys seen and the sink, against their maximum */
    double max = mask->sinks ? mask->sinks[h] : -INFINITY, sum = 0;
    for (int64_t j = 0; j < n_keys; j++)
        if (ra_attention_reference_seen(args, b, h, i, j)) max = row[j] > max ? row[j] : max;
    for (int64_t j = 0; j < n_keys; j++) sum += exp((double)row[j] - max);
    if (mask->sinks) sum += exp((double)mask->sinks[h] - max);
    for (int64_t j = 0; j < n_keys; j++)
        row[j] = ra_attention_reference_seen(args, b, h, i, j)
                     ? (float)(exp((double)row[j] - max) / sum)
                     : 0.0f;
    return max + log(sum);
}

void ra_attention_reference(const ra_attention_args *args, float *scores)
{
    const ra_tensor *q = args->q, *v = args->v, *out = args->out;
    const int64_t batch = q->shape[0], seq = q->shape[1], n_heads = q->shape[2];
    const int64_t n_keys = v->shape[1], head_dim = q->shape[3], n_rep = n_heads / v->shape[2];
    float *mult = scores + seq * n_keys; /* dropout multipliers of one row */

    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < n_heads; h++) {
            int64_t kv = h / n_rep;
            for (int64_t i = 0; i < seq; i++) {
                float *row = scores + i * n_keys;
                double lse = ra_attention_reference_row(args, b, h, i, row);
                if (args->lse) args->lse[(b * n_heads + h) * seq + i] = (float)lse;
                if (args->dropout) { /* element (b, h, i, j) of [B, H, Sq, Sk] */
                    ra_dropout_row(&args->drop,
                                   (uint64_t)((b * n_heads + h) * seq + i) * (uint64_t)n_keys,
                                   n_keys, mult);
                    for (int64_t j = 0; j < n_keys; j++) row[j] *= mult[j];
                }
                /* out = P v over the keys seen (the others weigh nothing) */
                for (int64_t j = 0; j < n_keys; j++)
                    mult[j] = (float)ra_attention_reference_seen(args, b, h, i, j);
                float *oi = ra_row(out, b, i, h);
                for (int64_t d = 0; d < head_dim; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < n_keys; j++)
                        if (mult[j] != 0.0f)
                            acc += (double)row[j] *
                                   ra_load(v->data, v->dtype, ra_offset(v, b, j, kv) + d);
                    oi[d] = (float)acc;
                }
            }
        }
}
