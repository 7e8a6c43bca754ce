/*
 * fuzz_positions.h — token positions decoded from fuzzer bytes, in every
 * form ra_positions takes, and the position the header gives each token.
 * Each take_* clears *valid when it chooses something the API documents as
 * an error.
 */
#ifndef RA_FUZZ_POSITIONS_H
#define RA_FUZZ_POSITIONS_H

#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "ropeattn.h"

/* A position near something interesting: small, around `near`, around
 * RA_MAX_POSITION, or out of range (then *valid = 0). */
static inline int64_t take_position(fuzz_input *in, int64_t near, int *valid)
{
    int64_t v;
    switch (take_range(in, 0, 15)) {
    case 12: v = near + take_range(in, -3, 3); break;
    case 13: v = RA_MAX_POSITION - take_range(in, -1, 40); break;
    case 14: v = take_range(in, 0, 1) ? -1 : INT64_MIN; break;
    case 15: v = (int64_t)take_bits(in, 5); break;
    default: v = take_range(in, 0, 20); break;
    }
    if (v < 0 || v > RA_MAX_POSITION) *valid = 0;
    return v;
}

/* Positions for a [batch, seq] grid of tokens, in any of the forms
 * ra_positions takes (cu_seqlens only when `packed`); the arrays are the
 * struct's own (fuzz_positions_free).  A start that would put a later token
 * beyond RA_MAX_POSITION clears *valid too. */
typedef struct fuzz_positions {
    ra_positions p;
    int64_t *ids, *starts, *cu;
} fuzz_positions;

static inline void fuzz_positions_free(fuzz_positions *f)
{
    free(f->ids);
    free(f->starts);
    free(f->cu);
}

static inline int start_ok(int64_t start, int64_t count)
{
    return start >= 0 && start <= RA_MAX_POSITION && count - 1 <= RA_MAX_POSITION - start;
}

static inline void take_positions(fuzz_input *in, fuzz_positions *f, int64_t batch, int64_t seq,
                           int64_t near, int packed, int *valid)
{
    memset(f, 0, sizeof *f);
    f->p = ra_positions_start(0);
    int64_t tokens = batch > 0 && seq > 0 ? batch * seq : 0;
    int mode = take_range(in, 0, packed ? 4 : 3);
    int ok = 1;
    switch (mode) {
    case 0: /* one start */
        f->p.start = take_position(in, near, &ok);
        if (ok && !start_ok(f->p.start, seq)) ok = 0;
        break;
    case 1: /* a start per sequence */
        f->starts = malloc((size_t)(batch > 0 ? batch : 1) * sizeof *f->starts);
        for (int64_t b = 0; b < batch; b++) {
            f->starts[b] = take_position(in, near, &ok);
            if (ok && !start_ok(f->starts[b], seq)) ok = 0;
        }
        f->p.starts = f->starts;
        break;
    case 2:
    case 3: /* explicit ids */
        f->ids = malloc((size_t)(tokens > 0 ? tokens : 1) * sizeof *f->ids);
        for (int64_t t = 0; t < tokens; t++) f->ids[t] = take_position(in, near + t, &ok);
        f->p.ids = f->ids;
        break;
    default: { /* packed: cu_seqlens, starts or start */
        int64_t r = take_range(in, 0, 5), n = r < 4 ? r + 1 : r == 4 ? 0 : -1;
        f->p.n_seqs = n;
        f->cu = malloc((size_t)(n > 0 ? n + 1 : 1) * sizeof *f->cu);
        f->cu[0] = 0;
        if (n <= 0) ok = 0;
        for (int64_t i = 1; i <= n; i++) {
            int64_t step = take_range(in, 0, 7);
            f->cu[i] = i == n ? tokens : f->cu[i - 1] + step > tokens ? tokens : f->cu[i - 1] + step;
        }
        int broken = n > 0 ? take_range(in, 0, 15) : 0;
        if (broken == 13) f->cu[0] = 1, ok = 0;
        else if (broken == 14) f->cu[n] = tokens + 1, ok = 0;
        else if (broken == 15 && n >= 2) {
            f->cu[1] = f->cu[2] + 1;
            ok = 0;
        }
        if (take_range(in, 0, 1)) {
            f->starts = malloc((size_t)(n > 0 ? n : 1) * sizeof *f->starts);
            for (int64_t i = 0; i < n; i++) f->starts[i] = take_position(in, near, &ok);
            f->p.starts = f->starts;
        } else
            f->p.start = take_position(in, near, &ok);
        for (int64_t i = 0; ok && i < n; i++)
            if (f->cu[i + 1] < f->cu[i] ||
                !start_ok(f->starts ? f->starts[i] : f->p.start, f->cu[i + 1] - f->cu[i]))
                ok = 0;
        f->p.cu_seqlens = f->cu;
        break;
    }
    }
    if (!ok) *valid = 0;
}

/* The documented position of token t = b * seq + s. */
static inline int64_t position_of(const ra_positions *p, int64_t t, int64_t seq)
{
    if (p->ids) return p->ids[t];
    if (p->cu_seqlens) {
        int64_t i = 0;
        while (!(p->cu_seqlens[i] <= t && t < p->cu_seqlens[i + 1])) i++;
        return (p->starts ? p->starts[i] : p->start) + t - p->cu_seqlens[i];
    }
    return (p->starts ? p->starts[t / seq] : p->start) + t % seq;
}

/* The largest position rope c rotates (ropeattn.h's seq_len: a dynamic or
 * longrope rope is for one length; RA_ERR_POSITION beyond). */
static inline int64_t rope_last_position(const ra_rope_config *c)
{
    if (c->type == RA_ROPE_DYNAMIC)
        return (c->seq_len > c->max_position_embeddings ? c->seq_len
                                                        : c->max_position_embeddings) - 1;
    if (c->type == RA_ROPE_LONGROPE && c->seq_len <= c->original_max_position_embeddings)
        return c->original_max_position_embeddings - 1;
    return RA_MAX_POSITION;
}

/* The largest position of a valid [batch, seq] grid (-1: no token). */
static inline int64_t grid_last_position(const ra_positions *p, int64_t batch, int64_t seq)
{
    int64_t last = -1;
    for (int64_t t = 0; t < batch * seq; t++) {
        int64_t at = position_of(p, t, seq);
        last = at > last ? at : last;
    }
    return last;
}

#endif
