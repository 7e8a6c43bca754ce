/*
 * rope_axial.c — 2-D (axial) RoPE of vision encoders (Pixtral, Qwen2-VL's
 * and Qwen2.5-VL's vision towers, Llama 4's vision model): the config's
 * checks, each pair's frequency and axis (into the rope's inv_freq and
 * component, which the table, the fast path and the M-RoPE row assembly
 * then use as they are), and the 2-D tables.
 *
 *   d = rotary_dim, q = d / 4, f_k = theta^(-2k/d) (the default rope's):
 *   pair i < q rotates by axis a0 at f_2i; pair q + j by axis a1 at f_2j
 *   (shared, Qwen's and Llama 4's rope of dim d / 2 per axis) or f_(2j+1)
 *   (alternate, Pixtral's inv_freq[0::2], inv_freq[1::2]); a0 = row,
 *   a1 = column, swapped with axial_column_first (Llama 4's x first).
 *   component: [n_pairs], 0 row, 1 column; positions (row, column, row).
 */
#include <string.h>

#include "rope_internal.h"

int64_t ra_rope_axial_index(const ra_rope_config *c, int64_t i, int *axis)
{
    const int64_t q = c->rotary_dim / 4;
    const int first = c->axial_column_first ? 1 : 0;
    if (i < q) {
        *axis = first;
        return 2 * i;
    }
    *axis = 1 - first;
    return 2 * (i - q) + (c->axial == RA_AXIAL_ALTERNATE);
}

/* The config's axial fields, against the rest of it. */
static ra_status check_axial(const ra_rope_config *c)
{
    if ((unsigned)c->axial >= RA_AXIAL_COUNT)
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: axial %d is not a ra_rope_axial",
                       (int)c->axial);
    if (c->axial == RA_AXIAL_NONE) {
        if (c->axial_column_first)
            return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: axial_column_first without axial");
        return RA_OK;
    }
    if (c->type != RA_ROPE_DEFAULT)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_rope_config: a 2-D (axial) rope of type %d: "
                       "only the default type's frequencies are implemented (transformers' "
                       "\"axial\" rope type)", (int)c->type);
    if (c->rotating_pairs)
        return ra_fail(RA_ERR_UNSUPPORTED, "ra_rope_config: rotating_pairs with a 2-D (axial) "
                       "rope");
    if (c->mrope_section[0] || c->mrope_section[1] || c->mrope_section[2])
        return ra_fail(RA_ERR_ARGUMENT, "ra_rope_config: both mrope_section (3-D positions) "
                       "and axial (2-D positions)");
    if (c->rotary_dim % 4)
        return ra_fail(RA_ERR_HEAD_DIM, "ra_rope_config: rotary_dim %lld: a 2-D (axial) rope "
                       "gives rows and columns rotary_dim / 4 pairs each, so it must be a "
                       "multiple of 4", (long long)c->rotary_dim);
    return RA_OK;
}

ra_status ra_rope_axial_init(ra_rope *rope)
{
    const ra_rope_config *c = &rope->config;
    RA_TRY(check_axial(c));
    if (c->axial == RA_AXIAL_NONE) return RA_OK;
    /* rope->inv_freq holds f_k of the default type; each pair takes its own */
    double *f = ra_malloc((size_t)rope->n_pairs * sizeof *f);
    rope->component = ra_malloc((size_t)rope->n_pairs);
    if (!f || !rope->component) {
        ra_free(f);
        return ra_fail(RA_ERR_NOMEM, "allocating the rope's axes");
    }
    memcpy(f, rope->inv_freq, (size_t)rope->n_pairs * sizeof *f);
    for (int64_t i = 0; i < rope->n_pairs; i++) {
        int axis;
        rope->inv_freq[i] = f[ra_rope_axial_index(c, i, &axis)];
        rope->component[i] = (unsigned char)axis;
    }
    ra_free(f);
    return RA_OK;
}

RA_API ra_status ra_rope_table_axial(const ra_rope *rope, float *cos_out, float *sin_out,
                                     const int64_t *positions, int64_t n)
{
    ra_error_reset();
    if (!rope || !cos_out || !sin_out || !positions)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !rope ? "rope" : !cos_out ? "cos"
                                                  : !sin_out ? "sin" : "positions");
    if (rope->config.axial == RA_AXIAL_NONE)
        return ra_fail(RA_ERR_ARGUMENT, "the rope is not 2-D (ra_rope_config.axial): 2-D "
                       "positions need one");
    if (n <= 0) return ra_fail(RA_ERR_SIZE, "n %lld: must be >= 1", (long long)n);
    int64_t total;
    if (ra_mul(n, 2, &total) != RA_OK || ra_mul(n, rope->n_pairs, &total) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "n %lld * rotary_dim / 2 %lld: too many elements",
                       (long long)n, (long long)rope->n_pairs);
    RA_TRY(ra_rope_check_table_outputs(cos_out, sin_out, total, positions, 2 * n));
    for (int64_t t = 0; t < 2 * n; t++)
        if (positions[t] < 0 || positions[t] > RA_MAX_POSITION)
            return ra_fail(RA_ERR_POSITION, "positions[%lld, %lld] is %lld, not in [0, 2^32]",
                           (long long)(t / 2), (long long)(t % 2), (long long)positions[t]);
    for (int64_t t = 0; t < n; t++) {
        const int64_t pos[3] = {positions[2 * t], positions[2 * t + 1], positions[2 * t]};
        ra_rope_mrope_row(rope, pos, 0, rope->n_pairs, cos_out + t * rope->n_pairs,
                          sin_out + t * rope->n_pairs);
    }
    return RA_OK;
}
