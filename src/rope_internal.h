/*
 * rope_internal.h — the rope object's insides, shared by rope.c (object,
 * validation, fast path), cpu/rope_impl.h (the SIMD rotation), rope_ref.c
 * (scalar reference) and layer.c.
 */
#ifndef RA_ROPE_INTERNAL_H
#define RA_ROPE_INTERNAL_H

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
    float *cos, *sin;        /* [table_size, n_pairs], attention factor applied */
    unsigned char *component; /* M-RoPE: [n_pairs], the position component
                                 (0 temporal, 1 height, 2 width) pair i
                                 rotates by (rope_mrope.c); NULL without
                                 sections */
};

/* Checks an M-RoPE config's sections (none is fine) and, when it has them,
 * sets rope->component (rope_mrope.c).  rope->config and n_pairs are set. */
ra_status ra_rope_mrope_init(ra_rope *rope);

/* cos/sin of pairs [first, first + n) for a token at the three positions
 * pos (rope->component set): pair i's entry of the table row, or of the
 * on-the-fly angles, of position pos[component[i]]. */
void ra_rope_mrope_row(const ra_rope *rope, const int64_t pos[3], int64_t first, int64_t n,
                       float *cos, float *sin);

/* theta_i for i in [0, rotary_dim / 2) and the attention factor of the
 * config's rope type (rope_scaling.c).  config's rotary_dim is resolved. */
ra_status ra_rope_frequencies(const ra_rope_config *config, double *inv_freq,
                              double *attention_factor);

/* The largest position whose rotation transformers forms with this
 * config's frequencies (rope_scaling.c): a dynamic or longrope rope is made
 * for one length, and a longer sequence has other frequencies.  config is
 * validated (ra_rope_frequencies). */
int64_t ra_rope_last_position(const ra_rope_config *config);

/* RA_ERR_POSITION, naming seq_len, when position last is beyond
 * rope->last_position. */
ra_status ra_rope_check_last(const ra_rope *rope, int64_t last);

/* attention_factor * cos/sin of pos * inv_freq[i] for i in [first, first + n):
 * formed in double and rounded once, the same numbers the table holds. */
void ra_rope_angles(const ra_rope *rope, int64_t pos, int64_t first, int64_t n,
                    float *cos, float *sin);

/* Sets every inverse frequency to 0 and the attention factor to 1, table
 * included: the rotation becomes the identity (x * 1 - y * 0 = x) on every
 * path that uses this rope.  The layer's no_rope. */
void ra_rope_zero_angles(ra_rope *rope);

/* Checks a view: non-NULL data, known dtype, positive shape, strides >= 0
 * with stride[3] == 1, and a largest offset that fits.  name: the
 * argument's ("q"), for the detail of a failure. */
ra_status ra_tensor_check(const ra_tensor *t, const char *name);

/* Whether the memory ranges of two checked views intersect (conservative:
 * interleaved views that never touch the same element also count). */
int ra_tensors_overlap(const ra_tensor *a, const ra_tensor *b);

/* Whether the checked view t touches any of the n bytes from p (NULL: no). */
int ra_tensor_overlaps_bytes(const ra_tensor *t, const void *p, size_t n);

/* Whether two checked views share an element: exact for views of one dtype
 * with the same strides (heads of one fused QKV buffer share none), else
 * ra_tensors_overlap. */
int ra_tensors_share_elements(const ra_tensor *a, const ra_tensor *b);

/* Reads the caller's positions into *out (NULL: ra_positions_start(0))
 * and checks that every position of a [batch, seq] grid is in range: in
 * [0, RA_MAX_POSITION], and at most rope->last_position.
 * Packed sequences (cu_seqlens) are RA_ERR_UNSUPPORTED, before any other
 * check, unless `packed` is set.  3-D ids (mrope_ids) need a rope with
 * sections; *out has their stride resolved. */
ra_status ra_positions_read(ra_positions *out, const ra_positions *positions,
                            const ra_rope *rope, int64_t batch, int64_t seq, int packed);

/* ra_positions_read (packed sequences refused) for an append whose row b
 * holds n_new[b] new tokens (NULL: seq), n_new checked: the rope's
 * last_position bounds those tokens only, not the rows' padding. */
ra_status ra_positions_read_new(ra_positions *out, const ra_positions *positions,
                                const ra_rope *rope, int64_t batch, int64_t seq,
                                const int64_t *n_new);

/* Checks rope arguments shared by the fast and reference paths; *pos gets
 * the positions read. */
ra_status ra_rope_check_apply(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                              const ra_positions *positions, ra_direction direction,
                              ra_positions *pos);

/* Position of token t = b * seq + s (positions already validated).  *seq_hint
 * is the packed sequence that holds t or one before it: start it at 0, or at
 * ra_position_sequence(p, t), and reuse it for increasing t.  With 3-D ids,
 * the temporal component (the rope reads all three: ra_position3). */
static inline int64_t ra_position(const ra_positions *p, int64_t t, int64_t seq,
                                  int64_t *seq_hint)
{
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
 * mrope_ids', else ra_position's three times (text). */
static inline void ra_position3(const ra_positions *p, int64_t t, int64_t seq,
                                int64_t *seq_hint, int64_t pos[3])
{
    if (p->mrope_ids) {
        for (int c = 0; c < 3; c++) pos[c] = p->mrope_ids[c * p->mrope_stride + t];
        return;
    }
    pos[0] = pos[1] = pos[2] = ra_position(p, t, seq, seq_hint);
}

/* The packed sequence that holds token t (binary search; 0 without
 * cu_seqlens). */
int64_t ra_position_sequence(const ra_positions *p, int64_t t);

/* One ra_rope_apply call, split into tasks of tokens_per_task consecutive
 * tokens (of the B * S); cpu/rope_impl.h runs a task.  out == x in place. */
typedef struct ra_rope_job {
    const ra_rope *rope;
    const ra_tensor *out, *x;
    const ra_positions *positions;
    float sign;              /* +1 forward, -1 inverse */
    int64_t tokens_per_task;
} ra_rope_job;

/* Rotates x into out (f32 views, already checked, or carved by a kernel
 * from checked ones) on the calling thread: the fast path without its
 * checks, for kernels that rotate a tile as they load it.  Same bits as
 * ra_rope_apply. */
void ra_rope_rows(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                  const ra_positions *positions);

/* The positions of rows [s0, ...) of sequence b of a [B, seq] grid, as
 * positions of a [1, ...] view of those rows (3-D ids, ids or a start;
 * p read by ra_positions_read, so its mrope_stride is resolved). */
static inline ra_positions ra_positions_of_rows(const ra_positions *p, int64_t b, int64_t s0,
                                                int64_t seq)
{
    ra_positions r = ra_positions_start(0);
    if (p->mrope_ids) {
        r.mrope_ids = p->mrope_ids + b * seq + s0;
        r.mrope_stride = p->mrope_stride;
    } else if (p->ids) r.ids = p->ids + b * seq + s0;
    else r.start = (p->starts ? p->starts[b] : p->start) + s0;
    return r;
}

/* The scalar reference rotation: no table, no threads, one element pair at
 * a time.  The oracle the fast path is tested against (bit for bit). */
ra_status ra_rope_apply_reference(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                                  const ra_positions *positions, ra_direction direction);

#endif
