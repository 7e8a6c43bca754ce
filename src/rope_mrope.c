/*
 * rope_mrope.c — M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): the sections of a
 * rope config, checked, as the position component each pair rotates by, and
 * a token's cos/sin row put together from its three positions' rows.
 *
 *   component: [n_pairs], 0 temporal, 1 height, 2 width
 *   chunked (transformers' apply_multimodal_rotary_pos_emb, the sections of
 *     each half of the head): pair i takes 0 for i < s0, 1 for i < s0 + s1,
 *     else 2
 *   interleaved (Qwen3-VL's apply_interleaved_mrope, on the frequencies):
 *     1 if i % 3 == 1 and i < 3 s1, 2 if i % 3 == 2 and i < 3 s2, else 0
 */
#include "rope_internal.h"

/* The sections: each >= 0, summing to n_pairs; interleaved, each of height
 * and width must get all its s_k pairs (its slice i = k, k + 3, ... below
 * 3 s_k must stay below n_pairs, as transformers' slice would silently cut
 * it short). */
static ra_status check_sections(const ra_rope_config *c, int64_t n_pairs)
{
    const int64_t *s = c->mrope_section;
    int64_t sum = 0;
    for (int k = 0; k < 3; k++) {
        if (s[k] < 0 || s[k] > n_pairs)
            return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: mrope_section[%d] is %lld, not in "
                           "[0, rotary_dim / 2 = %lld]", k, (long long)s[k],
                           (long long)n_pairs);
        sum += s[k];
    }
    if (sum == 0) {
        if (c->mrope_interleaved)
            return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: mrope_interleaved without "
                           "mrope_section");
        return RA_OK;
    }
    if (sum != n_pairs)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: mrope_section [%lld, %lld, %lld] sums "
                       "to %lld, not rotary_dim / 2 = %lld", (long long)s[0], (long long)s[1],
                       (long long)s[2], (long long)sum, (long long)n_pairs);
    for (int k = 1; c->mrope_interleaved && k < 3; k++)
        if (s[k] > 0 && 3 * (s[k] - 1) + k >= n_pairs)
            return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: interleaved mrope_section[%d] %lld "
                           "needs pair %lld, beyond the %lld pairs", k, (long long)s[k],
                           (long long)(3 * (s[k] - 1) + k), (long long)n_pairs);
    return RA_OK;
}

ra_status ra_rope_mrope_init(ra_rope *rope)
{
    const ra_rope_config *c = &rope->config;
    RA_TRY(check_sections(c, rope->n_pairs));
    const int64_t *s = c->mrope_section;
    if (s[0] + s[1] + s[2] == 0) return RA_OK;
    rope->component = ra_malloc((size_t)rope->n_pairs);
    if (!rope->component) return ra_fail(RA_ERR_NOMEM, "allocating the rope's sections");
    for (int64_t i = 0; i < rope->n_pairs; i++) {
        unsigned char k;
        if (c->mrope_interleaved)
            k = i % 3 == 1 && i < 3 * s[1] ? 1 : i % 3 == 2 && i < 3 * s[2] ? 2 : 0;
        else
            k = i < s[0] ? 0 : i < s[0] + s[1] ? 1 : 2;
        rope->component[i] = k;
    }
    return RA_OK;
}

RA_API ra_status ra_rope_table_mrope(const ra_rope *rope, float *cos_out, float *sin_out,
                                     const int64_t *positions, int64_t n)
{
    ra_error_reset();
    if (!rope || !cos_out || !sin_out || !positions)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !rope ? "rope" : !cos_out ? "cos"
                                                  : !sin_out ? "sin" : "positions");
    if (!rope->component || rope->config.axial != RA_AXIAL_NONE)
        return ra_fail(RA_ERR_ARGUMENT, "the rope has no mrope_section: 3-D positions need one");
    if (n <= 0) return ra_fail(RA_ERR_SIZE, "n %lld: must be >= 1", (long long)n);
    int64_t total;
    if (ra_mul(n, 3, &total) != RA_OK || ra_mul(n, rope->n_pairs, &total) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "n %lld * rotary_dim / 2 %lld: too many elements",
                       (long long)n, (long long)rope->n_pairs);
    RA_TRY(ra_rope_check_table_outputs(cos_out, sin_out, total, positions, 3 * n));
    int64_t last = 0;
    for (int64_t t = 0; t < 3 * n; t++) {
        if (positions[t] < 0 || positions[t] > RA_MAX_POSITION)
            return ra_fail(RA_ERR_POSITION, "positions[%lld, %lld] is %lld, not in [0, 2^32]",
                           (long long)(t / n), (long long)(t % n), (long long)positions[t]);
        last = positions[t] > last ? positions[t] : last;
    }
    RA_TRY(ra_rope_check_last(rope, last));
    for (int64_t t = 0; t < n; t++) {
        const int64_t pos[3] = {positions[t], positions[n + t], positions[2 * n + t]};
        ra_rope_mrope_row(rope, pos, 0, rope->n_pairs, cos_out + t * rope->n_pairs,
                          sin_out + t * rope->n_pairs);
    }
    return RA_OK;
}
