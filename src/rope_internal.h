/*
 * rope_internal.h — the rope's checks, frequencies and reference, shared by
 * rope.c (object, validation, fast path), rope_ref.c (scalar reference) and
 * layer.c.  The object's insides and what the kernels read: cpu/rope_job.h.
 */
#ifndef RA_ROPE_INTERNAL_H
#define RA_ROPE_INTERNAL_H

#include "cpu/rope_job.h"
#include "internal.h"

/* Checks an M-RoPE config's sections (none is fine) and, when it has them,
 * sets rope->component (rope_mrope.c).  rope->config and n_pairs are set. */
ra_status ra_rope_mrope_init(ra_rope *rope);

/* Checks a config's 2-D (axial) fields and, for a 2-D rope, gives each
 * pair its frequency (from the default type's f_k in rope->inv_freq) and
 * axis in rope->component (rope_axial.c).  Runs before the table is made. */
ra_status ra_rope_axial_init(ra_rope *rope);

/* Which default-type frequency index k (f_k = theta^(-2k/d)) pair i of a
 * 2-D rope takes, and its axis (*axis: 0 row, 1 column): ra_rope_axial's
 * drawing.  config validated, axial set. */
int64_t ra_rope_axial_index(const ra_rope_config *config, int64_t i, int *axis);

/* theta_i for i in [0, rotary_dim / 2) and the attention factor of the
 * config's rope type (rope_scaling.c).  config's rotary_dim is resolved. */
ra_status ra_rope_frequencies(const ra_rope_config *config, double *inv_freq,
                              double *attention_factor);

/* The largest position whose rotation transformers forms with this
 * config's frequencies (rope_scaling.c): a dynamic or longrope rope is made
 * for one length, and a longer sequence has other frequencies.  config is
 * validated (ra_rope_frequencies). */
int64_t ra_rope_last_position(const ra_rope_config *config);

/* RA_ERR_ARGUMENT when a table call's outputs cos and sin ([n_entries]
 * floats each) overlap each other or its positions ([n_positions]). */
ra_status ra_rope_check_table_outputs(const float *cos_out, const float *sin_out,
                                      int64_t n_entries, const int64_t *positions,
                                      int64_t n_positions);

/* RA_ERR_POSITION, naming seq_len, when position last is beyond
 * rope->last_position. */
ra_status ra_rope_check_last(const ra_rope *rope, int64_t last);

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

/* The scalar reference rotation: no table, no threads, one element pair at
 * a time.  The oracle the fast path is tested against (bit for bit). */
ra_status ra_rope_apply_reference(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                                  const ra_positions *positions, ra_direction direction);

#endif
