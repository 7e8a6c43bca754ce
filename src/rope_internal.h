/*
 * rope_internal.h — the rope object's insides, shared by rope.c (object,
 * validation, fast path), rope_ref.c (scalar reference) and layer.c.
 */
#ifndef RA_ROPE_INTERNAL_H
#define RA_ROPE_INTERNAL_H

#include "internal.h"

struct ra_rope {
    ra_rope_config config; /* rotary_dim resolved (never 0) */
    int64_t n_pairs;       /* rotary_dim / 2 */
    double *inv_freq;      /* [n_pairs]: theta_i = base^(-2i / rotary_dim) */
    float *cos, *sin;      /* [max_positions, n_pairs] */
};

/* inv_freq[i] = 1 / theta^(2i / rotary_dim) for i in [0, n_pairs). */
ra_status ra_inverse_frequencies(double *inv_freq, int64_t n_pairs, int64_t rotary_dim,
                                 double theta);

/* cos/sin of pos * inv_freq[i] for i in [first, first + n): the angle is
 * formed in double and rounded once, the same numbers the table holds. */
void ra_rope_angles(const ra_rope *rope, int64_t pos, int64_t first, int64_t n,
                    float *cos, float *sin);

/* Checks a view: non-NULL data, known dtype, positive shape, strides >= 0
 * with stride[3] == 1, and a largest offset that fits. */
ra_status ra_tensor_check(const ra_tensor *t);

/* Checks that every position of a [batch, seq] grid is in range. */
ra_status ra_positions_check(const ra_positions *positions, int64_t batch, int64_t seq);

/* Checks rope arguments shared by the fast and reference paths. */
ra_status ra_rope_check_apply(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                              const ra_positions *positions, ra_direction direction);

/* Position of token s of batch row b (positions already validated). */
static inline int64_t ra_position(const ra_positions *p, int64_t b, int64_t s, int64_t seq)
{
    return p->ids ? p->ids[b * seq + s] : p->start + s;
}

/* The scalar reference rotation: no table, no threads, one element pair at
 * a time.  The oracle the fast path is tested against (bit for bit). */
ra_status ra_rope_apply_reference(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                                  const ra_positions *positions, ra_direction direction);

#endif
