/*
 * tensor.c — the strided view every kernel takes: construction, checks, and
 * whether two views share memory.
 */
#include "rope_internal.h"

ra_status ra_tensor_check(const ra_tensor *t, const char *name)
{
    if (!t) return ra_fail(RA_ERR_NULL, "%s is NULL", name);
    if (!t->data) return ra_fail(RA_ERR_NULL, "%s: data is NULL", name);
    RA_TRY(ra_check_tensor_dtype(t->dtype, name));
    int64_t count, last = 0, term;
    for (int d = 0; d < 4; d++)
        if (t->shape[d] <= 0)
            return ra_fail(RA_ERR_SIZE, "%s: shape[%d] is %lld, must be >= 1", name, d,
                           (long long)t->shape[d]);
    if (ra_count(t->shape, 4, &count) != RA_OK)
        return ra_fail(RA_ERR_OVERFLOW, "%s: shape " RA_DIMS_FMT " has too many elements", name,
                       RA_DIMS(t->shape));
    if (t->stride[3] != 1)
        return ra_fail(RA_ERR_ARGUMENT, "%s: stride[3] is %lld, must be 1", name,
                       (long long)t->stride[3]);
    for (int d = 0; d < 4; d++) {
        if (t->stride[d] < 0)
            return ra_fail(RA_ERR_ARGUMENT, "%s: stride[%d] is %lld, must be >= 0", name, d,
                           (long long)t->stride[d]);
        if (ra_mul(t->shape[d] - 1, t->stride[d], &term) != RA_OK || term > RA_MAX_ELEMENTS - last)
            return ra_fail(RA_ERR_OVERFLOW, "%s: shape " RA_DIMS_FMT " with stride " RA_DIMS_FMT
                           ": the last element's offset overflows", name, RA_DIMS(t->shape),
                           RA_DIMS(t->stride));
        last += term;
    }
    return RA_OK;
}

ra_status ra_tensor_check_output(const ra_tensor *t, const char *name)
{
    RA_TRY(ra_tensor_check(t, name));
    /* The axes of extent > 1 from the smallest stride up: each stride must
     * exceed the largest offset the axes before it reach, so that every
     * index has its own element.  Contiguous, transposed and head-major
     * views all nest this way; a zero stride, or two axes that interleave,
     * do not. */
    int axes[4], n = 0;
    for (int d = 0; d < 4; d++) {
        if (t->shape[d] == 1) continue;
        int i = n++;
        for (; i > 0 && t->stride[axes[i - 1]] > t->stride[d]; i--) axes[i] = axes[i - 1];
        axes[i] = d;
    }
    int64_t reach = 0; /* cannot overflow: ra_tensor_check bounded the sum */
    for (int i = 0; i < n; i++) {
        if (t->stride[axes[i]] <= reach)
            return ra_fail(RA_ERR_ARGUMENT, "%s: stride[%d] %lld (of stride " RA_DIMS_FMT ", "
                           "shape " RA_DIMS_FMT ") lets written elements share an address",
                           name, axes[i], (long long)t->stride[axes[i]], RA_DIMS(t->stride),
                           RA_DIMS(t->shape));
        reach += (t->shape[axes[i]] - 1) * t->stride[axes[i]];
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

/* Whether some K_2 in [lo_k, hi_k] has K_2 * s in the open interval (lo, hi). */
static int multiple_between(int64_t s, int64_t lo_k, int64_t hi_k, int64_t lo, int64_t hi)
{
    if (s == 0) return lo < 0 && 0 < hi;
    int64_t k = (lo >= 0 ? lo / s : -((-lo + s - 1) / s)) + 1; /* least k with k s > lo */
    if (k < lo_k) k = lo_k;
    return k <= hi_k && k * s < hi;
}

int ra_tensor_overlaps_bytes(const ra_tensor *t, const void *p, size_t n)
{
    uintptr_t t0, t1, p0 = (uintptr_t)p;
    byte_range(t, &t0, &t1);
    return p && n && t0 < p0 + n && p0 < t1;
}

int ra_tensors_share_elements(const ra_tensor *a, const ra_tensor *b)
{
    if (!ra_tensors_overlap(a, b)) return 0;
    size_t es = ra_dtype_size(a->dtype);
    ptrdiff_t bytes = (const char *)b->data - (const char *)a->data;
    for (int d = 0; d < 3; d++)
        if (a->stride[d] != b->stride[d]) return 1; /* other lattices: assume they meet */
    if (a->dtype != b->dtype || bytes % (ptrdiff_t)es) return 1;
    /* A row of a at indices i and one of b at j meet when
     * delta + sum_d (j_d - i_d) stride_d lies in (-D_b, D_a). */
    int64_t delta = bytes / (ptrdiff_t)es, span[2], pairs;
    for (int d = 0; d < 2; d++) span[d] = a->shape[d] + b->shape[d] - 1;
    if (ra_mul(span[0], span[1], &pairs) != RA_OK || pairs > ((int64_t)1 << 22)) return 1;
    for (int64_t k0 = 1 - a->shape[0]; k0 < b->shape[0]; k0++)
        for (int64_t k1 = 1 - a->shape[1]; k1 < b->shape[1]; k1++) {
            int64_t x = delta + k0 * a->stride[0] + k1 * a->stride[1];
            if (multiple_between(a->stride[2], 1 - a->shape[2], b->shape[2] - 1,
                                 -b->shape[3] - x, a->shape[3] - x))
                return 1;
        }
    return 0;
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
