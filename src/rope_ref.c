/*
 * rope_ref.c — the scalar reference rotation, written to be read: for each
 * token, head and pair, form the angle m * theta_i in double (m the token's
 * position, or for M-RoPE the component its pair's section names, or for a
 * 2-D rope the row or column its pair's quarter names), round cos and
 * sin (times the attention factor) to float, rotate in float32 (as LLaMA's .float() does) and round
 * once to the storage dtype.  No table, no threads, no vector tricks.
 *
 *   x, out: [B, S, heads, D]
 */
#include <math.h>
#include <string.h>

#include "rope_internal.h"

static int64_t offset(const ra_tensor *t, int64_t b, int64_t s, int64_t h)
{
    return b * t->stride[0] + s * t->stride[1] + h * t->stride[2];
}

/* M-RoPE: the position component (0 temporal, 1 height, 2 width) that
 * rotates pair i, from the sections as transformers applies them: chunked,
 * section k of each half takes component k (apply_multimodal_rotary_pos_emb);
 * interleaved, frequency i takes height at i = 1, 4, ... below 3 s1, width
 * at i = 2, 5, ... below 3 s2, else temporal (apply_interleaved_mrope).
 * Without sections every pair takes component 0, and all three are the
 * token's one position.  A 2-D rope: the first quarter of the pairs takes
 * the row (the column with axial_column_first), the second the other. */
static int component(const ra_rope_config *c, int64_t i)
{
    const int64_t *s = c->mrope_section;
    if (c->axial != RA_AXIAL_NONE) { /* (row, column, row) positions */
        int axis;
        ra_rope_axial_index(c, i, &axis);
        return axis;
    }
    if (c->mrope_interleaved) {
        if (i % 3 == 1 && i < 3 * s[1]) return 1;
        if (i % 3 == 2 && i < 3 * s[2]) return 2;
        return 0;
    }
    if (s[0] + s[1] + s[2] == 0 || i < s[0]) return 0;
    return i < s[0] + s[1] ? 1 : 2;
}

/* Pair i's inverse frequency: the type's theta_i, or for a 2-D rope the
 * default frequency f_k = theta^(-2k/d) of the index k its axis gives it:
 * Pixtral's inv_freq[0::2] for rows and [1::2] for columns, Qwen's and
 * Llama 4's theta^(-2j/(d/2)) = f_2j for both. */
static double frequency(const ra_rope *rope, int64_t i)
{
    const ra_rope_config *c = &rope->config;
    if (c->axial == RA_AXIAL_NONE) return rope->inv_freq[i];
    int axis;
    const int64_t k = ra_rope_axial_index(c, i, &axis);
    return 1.0 / pow(c->theta, (double)(2 * k) / (double)c->rotary_dim);
}

ra_status ra_rope_apply_reference(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                                  const ra_positions *positions, ra_direction direction)
{
    ra_positions pos;
    RA_TRY(ra_rope_check_apply(rope, out, x, positions, direction, &pos));
    positions = &pos;
    const int64_t batch = x->shape[0], seq = x->shape[1], heads = x->shape[2];
    const int64_t head_dim = x->shape[3], rot = rope->config.rotary_dim, half = rot / 2;
    const int interleaved = rope->config.layout == RA_LAYOUT_INTERLEAVED;
    const float sign = direction == RA_INVERSE ? -1.0f : 1.0f;

    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < seq; s++) {
            int64_t t = b * seq + s, sequence = ra_position_sequence(positions, t), m[3];
            ra_position3(positions, t, seq, &sequence, m);
            for (int64_t h = 0; h < heads; h++) {
                int64_t xo = offset(x, b, s, h), yo = offset(out, b, s, h);
                for (int64_t i = 0; i < half; i++) {
                    double angle = (double)m[component(&rope->config, i)] * frequency(rope, i);
                    double af = rope->attention_factor;
                    float c = (float)(cos(angle) * af), sn = sign * (float)(sin(angle) * af);
                    int64_t ia = interleaved ? 2 * i : i;      /* real part */
                    int64_t ib = interleaved ? 2 * i + 1 : i + half; /* imaginary part */
                    float a = ra_load(x->data, x->dtype, xo + ia);
                    float bv = ra_load(x->data, x->dtype, xo + ib);
                    ra_store(out->data, out->dtype, yo + ia, a * c - bv * sn);
                    ra_store(out->data, out->dtype, yo + ib, a * sn + bv * c);
                }
                for (int64_t j = rot; j < head_dim; j++) /* features that do not rotate */
                    ra_store(out->data, out->dtype, yo + j, ra_load(x->data, x->dtype, xo + j));
            }
        }
    return RA_OK;
}
