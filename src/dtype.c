/* dtype.c — element sizes, which dtypes a tensor may have, and float32 <->
 * float16 / bfloat16 conversion. */
#include "ropeattn.h"
#include "internal.h"

RA_API size_t ra_dtype_size(ra_dtype dtype)
{
    switch (dtype) {
    case RA_F32: return 4;
    case RA_F16: return 2;
    case RA_BF16: return 2;
    case RA_I8: return 1;
    case RA_F8E4M3: return 1;
    case RA_BOOL: return 1;
    default: return 0;
    }
}

const char *ra_dtype_name(ra_dtype dtype)
{
    switch (dtype) {
    case RA_F32: return "RA_F32";
    case RA_F16: return "RA_F16";
    case RA_BF16: return "RA_BF16";
    case RA_I8: return "RA_I8";
    case RA_F8E4M3: return "RA_F8E4M3";
    case RA_BOOL: return "RA_BOOL";
    default: return "(not a ra_dtype)";
    }
}

ra_status ra_check_tensor_dtype(ra_dtype dtype, const char *name)
{
    if (ra_dtype_is_cache8(dtype))
        return ra_fail(RA_ERR_DTYPE, "%s: %s is a KV-cache storage dtype (ra_kv_cache_create), "
                       "not a tensor's: tensors are RA_F32, RA_F16 or RA_BF16", name,
                       ra_dtype_name(dtype));
    if (dtype == RA_BOOL)
        return ra_fail(RA_ERR_DTYPE, "%s: RA_BOOL is ra_attention_options' attn_mask's dtype "
                       "only, not a tensor's: tensors are RA_F32, RA_F16 or RA_BF16", name);
    if ((unsigned)dtype >= RA_DTYPE_COUNT)
        return ra_fail(RA_ERR_ARGUMENT, "%s: dtype %d is not a ra_dtype", name, (int)dtype);
    return RA_OK;
}

RA_API float ra_bf16_to_f32(uint16_t h) { return ra_half_bf16_to_f32(h); }
RA_API uint16_t ra_f32_to_bf16(float f) { return ra_half_f32_to_bf16(f); }
RA_API float ra_f16_to_f32(uint16_t h) { return ra_half_f16_to_f32(h); }
RA_API uint16_t ra_f32_to_f16(float f) { return ra_half_f32_to_f16(f); }

RA_API ra_status ra_convert(void *dst, ra_dtype dst_dtype, const void *src,
                            ra_dtype src_dtype, int64_t n)
{
    ra_error_reset();
    if (!dst || !src) return ra_fail(RA_ERR_NULL, "%s is NULL", dst ? "src" : "dst");
    if (n <= 0) return ra_fail(RA_ERR_SIZE, "n %lld: must be >= 1", (long long)n);
    size_t ds = ra_dtype_size(dst_dtype), ss = ra_dtype_size(src_dtype);
    if (!ds || !ss)
        return ra_fail(RA_ERR_ARGUMENT, "%s %d is not a ra_dtype", ds ? "src_dtype" : "dst_dtype",
                       ds ? (int)src_dtype : (int)dst_dtype);
    RA_TRY(ra_check_tensor_dtype(dst_dtype, "dst_dtype"));
    RA_TRY(ra_check_tensor_dtype(src_dtype, "src_dtype"));
    if ((uint64_t)n > SIZE_MAX / 4)
        return ra_fail(RA_ERR_OVERFLOW, "n %lld: too many elements", (long long)n);
    /* In place, element i is written after it is read and before any later
     * one is, which only a dtype no wider than the source's keeps intact. */
    if (ra_bytes_overlap(dst, (size_t)n * ds, src, (size_t)n * ss) && !(dst == src && ds <= ss))
        return ra_fail(RA_ERR_ARGUMENT, "dst (%s) overlaps src (%s): only dst == src with a "
                       "dtype no wider than src's converts in place", ra_dtype_name(dst_dtype),
                       ra_dtype_name(src_dtype));
    for (int64_t i = 0; i < n; i++)
        ra_store(dst, dst_dtype, i, ra_load(src, src_dtype, i));
    return RA_OK;
}
