/*
 * tensor.c — the strided view every kernel takes: construction, checks, and
 * whether two views share memory.
 */
#include "rope_internal.h"

ra_status ra_tensor_check(const ra_tensor *t)
{
    if (!t) return RA_ERR_NULL;
    if (!t->data) return RA_ERR_NULL;
    if ((unsigned)t->dtype >= RA_DTYPE_COUNT) return RA_ERR_ARGUMENT;
    int64_t count, last = 0, term;
    RA_TRY(ra_count(t->shape, 4, &count));
    if (t->stride[3] != 1) return RA_ERR_ARGUMENT;
    for (int d = 0; d < 4; d++) {
        if (t->stride[d] < 0) return RA_ERR_ARGUMENT;
        RA_TRY(ra_mul(t->shape[d] - 1, t->stride[d], &term));
        if (term > RA_MAX_ELEMENTS - last) return RA_ERR_OVERFLOW;
        last += term;
    }
    return RA_OK;
}

/* [first byte, one past the last byte] a checked view can touch. */
static void byte_range(const ra_tensor *t, uintptr_t *begin, uintptr_t *end)
{
    int64_t last = 0;
    for (int d = 0; d < 4; d++) last += (t->shape[d] - 1) * t->stride[d];
    *begin = (uintptr_t)t->data;
    *end = *begin + (uintptr_t)(last + 1) * ra_dtype_size(t->dtype);
}

int ra_tensors_overlap(const ra_tensor *a, const ra_tensor *b)
{
    uintptr_t a0, a1, b0, b1;
    byte_range(a, &a0, &a1);
    byte_range(b, &b0, &b1);
    return a0 < b1 && b0 < a1;
}

/* Elements one (b, s) row of heads spans: [0, footprint) from its start. */
static int64_t row_footprint(const ra_tensor *t)
{
    return (t->shape[2] - 1) * t->stride[2] + t->shape[3];
}

/* Interleaved views: both with row stride P = stride[1] (elements of one
 * size) and stride[0] a multiple of P, so that every row starts at a
 * multiple of P from the view's start.  Row footprints [0, f1) of the view
 * at the lower address and [delta, delta + f2) of the other, delta their
 * distance modulo P, never meet when f1 <= delta and delta + f2 <= P. */
int ra_tensors_alias(const ra_tensor *a, const ra_tensor *b)
{
    if (!ra_tensors_overlap(a, b)) return 0;
    const size_t size = ra_dtype_size(a->dtype);
    const int64_t period = a->stride[1];
    if (size != ra_dtype_size(b->dtype) || b->stride[1] != period || period <= 0 ||
        a->stride[0] % period || b->stride[0] % period)
        return 1;
    uintptr_t pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
    uintptr_t distance = pa < pb ? pb - pa : pa - pb;
    if (distance % size) return 1;
    int64_t delta = (int64_t)((distance / size) % (uintptr_t)period);
    int64_t f1 = row_footprint(pa < pb ? a : b), f2 = row_footprint(pa < pb ? b : a);
    return !(f1 <= delta && delta + f2 <= period);
}

RA_API ra_tensor ra_tensor_4d(void *data, ra_dtype dtype, int64_t b, int64_t s, int64_t heads,
                              int64_t d)
{
    /* Unsigned products: an overflow here wraps instead of being undefined,
     * and ra_tensor_check rejects such a shape before any stride is used. */
    ra_tensor t = {data, dtype, {b, s, heads, d}, {0, 0, 0, 1}};
    t.stride[2] = d;
    t.stride[1] = (int64_t)((uint64_t)heads * (uint64_t)d);
    t.stride[0] = (int64_t)((uint64_t)s * (uint64_t)t.stride[1]);
    return t;
}
