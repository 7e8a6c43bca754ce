/*
 * fuzz_views.h — strided views, buffers and positions decoded from fuzzer
 * bytes, shared by the C API targets.  Each take_* clears *valid when it
 * chooses something the API documents as an error, so a target knows when
 * a call must succeed.
 */
#ifndef RA_FUZZ_VIEWS_H
#define RA_FUZZ_VIEWS_H

#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "ropeattn.h"

/* Elements from data to one past the last element a view reaches (shape
 * and strides valid), or 0 when it reaches none that can be computed. */
static int64_t view_span(const ra_tensor *t)
{
    int64_t last = 0;
    for (int d = 0; d < 4; d++) {
        if (t->shape[d] <= 0 || t->stride[d] < 0) return 0;
        last += (t->shape[d] - 1) * t->stride[d];
    }
    return last + 1;
}

/* Strides for t's shape: the batch, sequence and head axes nested in a
 * fuzzed order, each padded by 0..3 elements; with `broadcast`, an axis
 * may get stride 0 (allowed for a view that is only read).  Rarely, a
 * stride the API refuses (stride[3] != 1, negative). */
static void take_strides(fuzz_input *in, ra_tensor *t, int broadcast, int *valid)
{
    static const int orders[6][3] = {{2, 1, 0}, {2, 0, 1}, {1, 2, 0},
                                     {1, 0, 2}, {0, 2, 1}, {0, 1, 2}}; /* innermost first */
    const int *order = orders[take_range(in, 0, 5)];
    int64_t inner = t->shape[3] > 0 ? t->shape[3] : 1;
    t->stride[3] = 1;
    for (int k = 0; k < 3; k++) {
        int pad = take_range(in, 0, 7);
        int64_t s = inner + (pad < 4 ? pad : 0);
        t->stride[order[k]] = s;
        inner = s * (t->shape[order[k]] > 0 ? t->shape[order[k]] : 1);
    }
    int odd = take_range(in, 0, 31);
    if (broadcast && odd < 3) t->stride[odd] = 0;
    else if (odd == 3) {
        t->stride[3] = take_range(in, 0, 1) ? 2 : 0;
        *valid = 0;
    } else if (odd == 4) {
        t->stride[take_range(in, 0, 2)] = -1;
        *valid = 0;
    }
}

/* A size from a small table, rarely 0 or negative (then *valid = 0). */
static int64_t take_size(fuzz_input *in, int64_t max, int *valid)
{
    int64_t v = take_range(in, -2, max);
    if (v <= 0) *valid = 0;
    return v;
}

/* A buffer holding `elements` elements of `esize` bytes after `offset`
 * elements of lead (for alignment), filled with fuzzed small values so
 * that bugs show as changed bits; n_bytes is set. */
static void *take_buffer(fuzz_input *in, ra_dtype dtype, int64_t elements, int64_t offset,
                         size_t *n_bytes)
{
    size_t es = ra_dtype_size(dtype) ? ra_dtype_size(dtype) : 4;
    *n_bytes = (size_t)(elements + offset) * es;
    if (*n_bytes == 0) *n_bytes = 1;
    unsigned char *p = malloc(*n_bytes);
    FUZZ_CHECK(p != NULL, "out of memory");
    uint64_t seed = take_bits(in, 4) * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i + es <= *n_bytes; i += es) {
        seed ^= seed >> 12, seed ^= seed << 25, seed ^= seed >> 27;
        float v = (float)((int64_t)((seed * 0x2545F4914F6CDD1Dull) >> 52) - 2048) / 1024.0f;
        if (es == 4) memcpy(p + i, &v, 4);
        else {
            uint16_t h = dtype == RA_F16 ? ra_f32_to_f16(v) : ra_f32_to_bf16(v);
            memcpy(p + i, &h, 2);
        }
    }
    if (*n_bytes % es) p[*n_bytes - 1] = 0;
    return p;
}

/* A position near something interesting: small, around `near`, around
 * RA_MAX_POSITION, or out of range (then *valid = 0). */
static int64_t take_position(fuzz_input *in, int64_t near, int *valid)
{
    int64_t v;
    switch (take_range(in, 0, 15)) {
    case 0: v = near + take_range(in, -3, 3); break;
    case 1: v = RA_MAX_POSITION - take_range(in, -1, 40); break;
    case 2: v = take_range(in, 0, 1) ? -1 : INT64_MIN; break;
    case 3: v = (int64_t)take_bits(in, 5); break;
    default: v = take_range(in, 0, 20); break;
    }
    if (v < 0 || v > RA_MAX_POSITION) {
        if (v < 0) v = v == INT64_MIN ? v : -1;
        *valid = 0;
    }
    return v;
}

/* Positions for a [batch, seq] grid of tokens, in any of the forms
 * ra_positions takes (cu_seqlens only when `packed`), with the arrays in
 * *arrays (free each); a start that would put a later token beyond
 * RA_MAX_POSITION clears *valid too. */
typedef struct fuzz_positions {
    ra_positions p;
    int64_t *ids, *starts, *cu;
} fuzz_positions;

static void fuzz_positions_free(fuzz_positions *f)
{
    free(f->ids);
    free(f->starts);
    free(f->cu);
}

static int start_ok(int64_t start, int64_t count)
{
    return start >= 0 && start <= RA_MAX_POSITION && count - 1 <= RA_MAX_POSITION - start;
}

static void take_positions(fuzz_input *in, fuzz_positions *f, int64_t batch, int64_t seq,
                           int64_t near, int packed, int *valid)
{
    memset(f, 0, sizeof *f);
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
        int64_t n = take_range(in, -1, 4);
        f->p.n_seqs = n;
        f->cu = malloc((size_t)(n > 0 ? n + 1 : 1) * sizeof *f->cu);
        f->cu[0] = 0;
        if (n <= 0) ok = 0;
        for (int64_t i = 1; i <= n; i++) {
            int64_t step = take_range(in, 0, 7);
            f->cu[i] = i == n ? tokens : f->cu[i - 1] + step > tokens ? tokens : f->cu[i - 1] + step;
        }
        int broken = n > 0 ? take_range(in, 0, 15) : 99;
        if (broken == 0) f->cu[0] = 1, ok = 0;
        else if (broken == 1) f->cu[n] = tokens + 1, ok = 0;
        else if (broken == 2 && n >= 2) {
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
static int64_t position_of(const ra_positions *p, int64_t t, int64_t seq)
{
    if (p->ids) return p->ids[t];
    if (p->cu_seqlens) {
        int64_t i = 0;
        while (!(p->cu_seqlens[i] <= t && t < p->cu_seqlens[i + 1])) i++;
        return (p->starts ? p->starts[i] : p->start) + t - p->cu_seqlens[i];
    }
    return (p->starts ? p->starts[t / seq] : p->start) + t % seq;
}

/* Element i of a buffer of the given dtype, as float32, and back. */
static float load_elem(const void *p, ra_dtype dt, int64_t i)
{
    if (dt == RA_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == RA_F16 ? ra_f16_to_f32(h) : ra_bf16_to_f32(h);
}

static void store_elem(void *p, ra_dtype dt, int64_t i, float v)
{
    if (dt == RA_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = dt == RA_F16 ? ra_f32_to_f16(v) : ra_f32_to_bf16(v);
}

#endif
