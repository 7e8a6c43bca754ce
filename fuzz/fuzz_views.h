/*
 * fuzz_views.h — strided views and buffers decoded from fuzzer bytes,
 * shared by the C API targets.  Each take_* clears *valid when it
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
static inline int64_t view_span(const ra_tensor *t)
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
 * stride the API refuses (stride[3] != 1, negative).  Zero bytes give a
 * contiguous view. */
static inline void take_strides(fuzz_input *in, ra_tensor *t, int broadcast, int *valid)
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
    if (broadcast && odd >= 27 && odd <= 29) t->stride[odd - 27] = 0;
    else if (odd == 30) {
        t->stride[3] = take_range(in, 0, 1) ? 2 : 0;
        *valid = 0;
    } else if (odd == 31) {
        t->stride[take_range(in, 0, 2)] = -1;
        *valid = 0;
    }
}

/* A size in [1, max], rarely 0 or -1 (then *valid = 0). */
static inline int64_t take_size(fuzz_input *in, int64_t max, int *valid)
{
    int64_t r = take_range(in, 0, max + 1);
    if (r < max) return r + 1;
    *valid = 0;
    return r == max ? 0 : -1;
}

/* A buffer of `elements` elements of the dtype (4 bytes for an unknown
 * one) filled with fuzzed values in [-2, 2), so that bugs show as changed
 * bits; *n_bytes is set. */
static inline void *take_buffer(fuzz_input *in, ra_dtype dtype, int64_t elements, size_t *n_bytes)
{
    size_t es = ra_dtype_size(dtype) ? ra_dtype_size(dtype) : 4;
    *n_bytes = (size_t)elements * es;
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

/* The view v moved from buffer `from` to buffer `to` (a copy of it). */
static inline ra_tensor rebase(ra_tensor v, const void *from, void *to)
{
    v.data = (char *)to + ((const char *)v.data - (const char *)from);
    return v;
}

/* Element i of a buffer of the given dtype, as float32, and back. */
static inline float load_elem(const void *p, ra_dtype dt, int64_t i)
{
    if (dt == RA_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == RA_F16 ? ra_f16_to_f32(h) : ra_bf16_to_f32(h);
}

static inline void store_elem(void *p, ra_dtype dt, int64_t i, float v)
{
    if (dt == RA_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = dt == RA_F16 ? ra_f32_to_f16(v) : ra_f32_to_bf16(v);
}

#endif
