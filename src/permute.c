/*
 * permute.c — reorder the rows of wq or wk between the rope layouts.
 *
 * Within each head, interleaved row 2i (the real part of pair i) goes to half
 * row i and row 2i + 1 (the imaginary part) to row i + D/2 — what Hugging
 * Face's convert_llama_weights_to_hf.py permute() does.  q = W x then has its
 * pairs where rotate_half expects them, so attention is unchanged.
 *   w, out: [n_heads * D, in_features]
 */
#include <string.h>

#include "internal.h"

RA_API ra_status ra_permute_rows(void *out, const void *w, ra_dtype dtype, int64_t n_heads,
                                 int64_t head_dim, int64_t in_features, ra_layout to)
{
    ra_error_reset();
    if (!out || !w) return ra_fail(RA_ERR_NULL, "%s is NULL", out ? "w" : "out");
    static const char *const names[3] = {"n_heads", "head_dim", "in_features"};
    int64_t dims[3] = {n_heads, head_dim, in_features}, n;
    RA_TRY(ra_count_named(dims, names, 3, &n));
    if (head_dim % 2) return ra_fail(RA_ERR_HEAD_DIM, "head_dim %lld is odd", (long long)head_dim);
    if ((unsigned)to >= RA_LAYOUT_COUNT)
        return ra_fail(RA_ERR_ARGUMENT, "to %d is not a ra_layout", (int)to);
    RA_TRY(ra_check_tensor_dtype(dtype, "dtype"));
    /* Rows are copied one at a time: out must not share a byte with w. */
    uintptr_t bytes = (uintptr_t)n * ra_dtype_size(dtype);
    uintptr_t dst_at = (uintptr_t)out, src_at = (uintptr_t)w;
    if (dst_at < src_at + bytes && src_at < dst_at + bytes)
        return ra_fail(RA_ERR_ARGUMENT, "out overlaps w");
    int64_t half = head_dim / 2;
    size_t row_bytes = (size_t)in_features * ra_dtype_size(dtype);
    for (int64_t h = 0; h < n_heads; h++) {
        const char *src = (const char *)w + (size_t)(h * head_dim) * row_bytes;
        char *dst = (char *)out + (size_t)(h * head_dim) * row_bytes;
        for (int64_t i = 0; i < half; i++)
            for (int64_t part = 0; part < 2; part++) {
                int64_t interleaved = 2 * i + part, split = i + part * half;
                int64_t from = to == RA_LAYOUT_HALF ? interleaved : split;
                int64_t into = to == RA_LAYOUT_HALF ? split : interleaved;
                memcpy(dst + (size_t)into * row_bytes, src + (size_t)from * row_bytes, row_bytes);
            }
    }
    return RA_OK;
}
