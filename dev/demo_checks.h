/*
 * demo_checks.h — the properties of RoPE that Meta's LLaMA code relies on, checked on
 * the library's rope for both layouts:
 *   - the rotation keeps every head's norm;
 *   - <R_m q, R_n k> = <q, R_(n-m) k>: scores depend on m - n only, checked
 *     for pairs of positions up to RA_MAX_POSITION;
 *   - the inverse undoes the forward rotation;
 *   - LLaMA's own apply_rotary_emb (ra_apply_rotary_emb with the tables
 *     of ra_precompute_freqs) equals the rope object's interleaved layout.
 */
#ifndef RA_TOOLS_DEMO_CHECKS_H
#define RA_TOOLS_DEMO_CHECKS_H

#include <stdint.h>

#include "ropeattn.h"

typedef struct demo_check {
    const char *property; /* one line: what was checked */
    double worst;         /* the worst relative error seen */
    double limit;         /* the check passes when worst <= limit */
} demo_check;

enum { CHECK_NORMS, CHECK_RELATIVE, CHECK_INVERSE, CHECK_SEED, N_ROPE_CHECKS };

/* Runs every check on heads of head_dim features.  Returns 0, or (after
 * printing why) EXIT_FAIL when the library refuses a call. */
int demo_rope_checks(ra_context *ctx, int64_t head_dim, demo_check checks[N_ROPE_CHECKS]);

/* max |a - b| / max |b| over n elements. */
double max_rel_diff(const float *a, const float *b, int64_t n);

#endif
