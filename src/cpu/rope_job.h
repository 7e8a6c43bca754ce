/*
 * rope_job.h — what the rope kernels (cpu/rope_impl.h) and the flash
 * kernels' rotation of a tile read (internal): the rope object's insides,
 * a rope job, the positions' lookups, and the scalar angles
 * (cpu/rope_angles.c).  The core fills them (rope.c, rope_internal.h).
 */
#ifndef RA_CPU_ROPE_JOB_H
#define RA_CPU_ROPE_JOB_H

#include "internal.h"

struct ra_rope {
    ra_rope_config config;   /* rotary_dim resolved (never 0); longrope's
                                factor lists point at short_long below */
    int64_t n_pairs;         /* rotary_dim / 2 */
    double *inv_freq;        /* [n_pairs]: theta_i for the config's type */
    double attention_factor; /* multiplies every cos and sin */
    int64_t last_position;   /* the largest position rotated as transformers
                                would (ra_rope_last_position); RA_ERR_POSITION
                                beyond it */
    double *short_long;      /* longrope: [2, n_pairs] copies, else NULL */
    float *cos, *sin;        /* attention factor applied: one array of
                                [table_size, 2, n_pairs], position m's cos
                                row then its sin row (ra_rope_table_row), so that
                                a token's rows are one run of memory; sin is
                                cos + n_pairs */
    unsigned char *component; /* M-RoPE: [n_pairs], the position component
                                 (0 temporal, 1 height, 2 width) pair i
                                 rotates by (rope_mrope.c); 2-D: 0 row, 1
                                 column (rope_axial.c); NULL otherwise */
};

/* Where position m's row starts in rope->cos and in rope->sin. */
static inline int64_t ra_rope_table_row(const ra_rope *rope, int64_t m)
{
    return m * 2 * rope->n_pairs;
}

/* One ra_rope_apply call, split into tasks of tokens_per_task consecutive
 * tokens (of the B * S); cpu/rope_impl.h runs a task.  out == x in place. */
typedef struct ra_rope_job {
    const ra_rope *rope;
    const ra_tensor *out, *x;
    const ra_positions *positions;
    float sign;              /* +1 forward, -1 inverse */
    int64_t tokens_per_task;
} ra_rope_job;

/* attention_factor * cos/sin of pos * inv_freq[i] for i in [first, first + n):
 * formed in double and rounded once, the same numbers the table holds. */
void ra_rope_angles(const ra_rope *rope, int64_t pos, int64_t first, int64_t n,
                    float *cos, float *sin);

/* cos/sin of pairs [first, first + n) for a token at the three positions
 * pos (rope->component set): pair i's entry of the table row, or of the
 * on-the-fly angles, of position pos[component[i]]. */
void ra_rope_mrope_row(const ra_rope *rope, const int64_t pos[3], int64_t first, int64_t n,
                       float *cos, float *sin);

/* The packed sequence that holds token t (binary search; 0 without
 * cu_seqlens). */
int64_t ra_position_sequence(const ra_positions *p, int64_t t);

/* Rotates x into out (f32 views, already checked, or carved by a kernel
 * from checked ones) on the calling thread: the fast path without its
 * checks, for kernels that rotate a tile as they load it.  Same bits as
 * ra_rope_apply. */
void ra_rope_rows(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                  const ra_positions *positions);

/* Position of token t = b * seq + s (positions already validated).  *seq_hint
 * is the packed sequence that holds t or one before it: start it at 0, or at
 * ra_position_sequence(p, t), and reuse it for increasing t.  With 3-D ids,
 * the temporal component (the rope reads all three: ra_position3). */
static inline int64_t ra_position(const ra_positions *p, int64_t t, int64_t seq,
                                  int64_t *seq_hint)
{
    if (p->axial_ids) return p->axial_ids[2 * t]; /* the row */
    if (p->mrope_ids) return p->mrope_ids[t]; /* the temporal component */
    if (p->ids) return p->ids[t];
    if (p->cu_seqlens) {
        int64_t i = *seq_hint;
        while (p->cu_seqlens[i + 1] <= t) i++;
        *seq_hint = i;
        return (p->starts ? p->starts[i] : p->start) + t - p->cu_seqlens[i];
    }
    int64_t b = t / seq;
    return (p->starts ? p->starts[b] : p->start) + t - b * seq;
}

/* The three components (temporal, height, width) of token t's position:
 * mrope_ids', 2-D ids' (row, column, row), else ra_position's three times
 * (text). */
static inline void ra_position3(const ra_positions *p, int64_t t, int64_t seq,
                                int64_t *seq_hint, int64_t pos[3])
{
    if (p->axial_ids) { /* (row, column, row): the row's table where they agree */
        pos[0] = pos[2] = p->axial_ids[2 * t];
        pos[1] = p->axial_ids[2 * t + 1];
        return;
    }
    if (p->mrope_ids) {
        for (int c = 0; c < 3; c++) pos[c] = p->mrope_ids[c * p->mrope_stride + t];
        return;
    }
    pos[0] = pos[1] = pos[2] = ra_position(p, t, seq, seq_hint);
}

/* The positions of rows [s0, ...) of sequence b of a [B, seq] grid, as
 * positions of a [1, ...] view of those rows (2-D or 3-D ids, ids or a start;
 * p read by ra_positions_read, so its mrope_stride is resolved). */
static inline ra_positions ra_positions_of_rows(const ra_positions *p, int64_t b, int64_t s0,
                                                int64_t seq)
{
    ra_positions r = ra_positions_start(0);
    if (p->axial_ids) {
        r.axial_ids = p->axial_ids + 2 * (b * seq + s0);
    } else if (p->mrope_ids) {
        r.mrope_ids = p->mrope_ids + b * seq + s0;
        r.mrope_stride = p->mrope_stride;
    } else if (p->ids) r.ids = p->ids + b * seq + s0;
    else r.start = (p->starts ? p->starts[b] : p->start) + s0;
    return r;
}

#endif
