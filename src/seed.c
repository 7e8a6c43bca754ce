/*
 * seed.c — apply_rotary_emb and repeat_kv of Meta's LLaMA code, one to one, for users
 * porting that code and for parity tests.  (precompute_freqs_cis is
 * ra_precompute_freqs in freqs.c.)
 */
#include <string.h>

#include "internal.h"

/* xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
 * xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos      (and the same for xk)
 *   x: [B, S, heads, D] in place; freqs_cos, freqs_sin: [S, D/2] */
static void rotate_heads(float *x, const float *freqs_cos, const float *freqs_sin, int64_t batch,
                         int64_t seq, int64_t heads, int64_t head_dim)
{
    int64_t half = head_dim / 2;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < seq; s++)
            for (int64_t h = 0; h < heads; h++) {
                float *row = x + ((b * seq + s) * heads + h) * head_dim;
                const float *c = freqs_cos + s * half, *sn = freqs_sin + s * half;
                for (int64_t i = 0; i < half; i++) {
                    float r = row[2 * i], im = row[2 * i + 1];
                    row[2 * i] = r * c[i] - im * sn[i];
                    row[2 * i + 1] = r * sn[i] + im * c[i];
                }
            }
}

RA_API ra_status ra_apply_rotary_emb(float *xq, float *xk, const float *freqs_cos,
                                     const float *freqs_sin, int64_t batch, int64_t seq,
                                     int64_t n_heads, int64_t n_kv_heads, int64_t head_dim)
{
    ra_error_reset();
    if (!xq || !xk || !freqs_cos || !freqs_sin)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !xq ? "xq" : !xk ? "xk"
                                                  : !freqs_cos ? "freqs_cos" : "freqs_sin");
    static const char *const q_names[4] = {"batch", "seq", "n_heads", "head_dim"};
    static const char *const k_names[4] = {"batch", "seq", "n_kv_heads", "head_dim"};
    int64_t q_dims[4] = {batch, seq, n_heads, head_dim}, k_dims[4] = {batch, seq, n_kv_heads, head_dim};
    int64_t nq, nk;
    RA_TRY(ra_count_named(q_dims, q_names, 4, &nq));
    RA_TRY(ra_count_named(k_dims, k_names, 4, &nk));
    if (head_dim % 2) return ra_fail(RA_ERR_HEAD_DIM, "head_dim %lld is odd", (long long)head_dim);
    if (n_heads % n_kv_heads)
        return ra_fail(RA_ERR_GQA, "n_heads %lld is not a multiple of n_kv_heads %lld",
                       (long long)n_heads, (long long)n_kv_heads);
    /* xq is rotated before xk is read, and the tables are read throughout. */
    int64_t n_table = seq * (head_dim / 2);
    if (ra_floats_overlap(xq, nq, xk, nk)) return ra_fail(RA_ERR_ARGUMENT, "xq overlaps xk");
    for (int i = 0; i < 4; i++) {
        const float *x = i / 2 ? xk : xq, *table = i % 2 ? freqs_sin : freqs_cos;
        if (ra_floats_overlap(x, i / 2 ? nk : nq, table, n_table))
            return ra_fail(RA_ERR_ARGUMENT, "%s overlaps %s", i / 2 ? "xk" : "xq",
                           i % 2 ? "freqs_sin" : "freqs_cos");
    }
    rotate_heads(xq, freqs_cos, freqs_sin, batch, seq, n_heads, head_dim);
    rotate_heads(xk, freqs_cos, freqs_sin, batch, seq, n_kv_heads, head_dim);
    return RA_OK;
}

/* x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
 *                    .reshape(bs, slen, n_kv_heads * n_rep, head_dim) */
RA_API ra_status ra_repeat_kv(float *out, const float *x, int64_t batch, int64_t seq,
                              int64_t n_kv_heads, int64_t head_dim, int64_t n_rep)
{
    ra_error_reset();
    if (!out || !x) return ra_fail(RA_ERR_NULL, "%s is NULL", out ? "x" : "out");
    static const char *const names[5] = {"batch", "seq", "n_kv_heads", "n_rep", "head_dim"};
    int64_t dims[5] = {batch, seq, n_kv_heads, n_rep, head_dim}, n;
    RA_TRY(ra_count_named(dims, names, 5, &n));
    if (ra_floats_overlap(out, n, x, n / n_rep)) return ra_fail(RA_ERR_ARGUMENT, "out overlaps x");
    size_t row_bytes = (size_t)head_dim * sizeof(float);
    for (int64_t t = 0; t < batch * seq; t++)
        for (int64_t h = 0; h < n_kv_heads; h++)
            for (int64_t r = 0; r < n_rep; r++)
                memcpy(out + ((t * n_kv_heads + h) * n_rep + r) * head_dim,
                       x + (t * n_kv_heads + h) * head_dim, row_bytes);
    return RA_OK;
}
