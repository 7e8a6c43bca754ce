/*
 * safetensors_dtype.c — the safetensors dtype names and sizes, and the
 * conversion of floating-point tensors to float32.
 */
#include <math.h>
#include <string.h>

#include "io.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[RA_ST_DTYPE_COUNT] = {
    [RA_ST_F32] = {"F32", 4},         [RA_ST_F16] = {"F16", 2},
    [RA_ST_BF16] = {"BF16", 2},       [RA_ST_F64] = {"F64", 8},
    [RA_ST_I8] = {"I8", 1},           [RA_ST_U8] = {"U8", 1},
    [RA_ST_I16] = {"I16", 2},         [RA_ST_U16] = {"U16", 2},
    [RA_ST_I32] = {"I32", 4},         [RA_ST_U32] = {"U32", 4},
    [RA_ST_I64] = {"I64", 8},         [RA_ST_U64] = {"U64", 8},
    [RA_ST_BOOL] = {"BOOL", 1},       [RA_ST_F8_E4M3] = {"F8_E4M3", 1},
    [RA_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *ra_st_dtype_name(ra_st_dtype dtype)
{
    return (unsigned)dtype < RA_ST_DTYPE_COUNT ? dtypes[dtype].name : "unknown";
}

size_t ra_st_dtype_size(ra_st_dtype dtype)
{
    return (unsigned)dtype < RA_ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int64_t ra_io_f64_to_f32(float *dst, const void *src, int64_t n)
{
    const unsigned char *bytes = src;
    double d;
    for (int64_t i = 0; i < n; i++) { /* first the range, so that a failure writes nothing */
        memcpy(&d, bytes + 8 * i, sizeof d);
        if (isfinite(d) && isinf((float)d)) return i;
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(&d, bytes + 8 * i, sizeof d); /* read before dst[i] is written */
        dst[i] = (float)d; /* the current rounding mode: to nearest, ties to even */
    }
    return -1;
}

/* The data of a tensor sits anywhere in the file, so elements are copied
 * out with memcpy rather than read through a cast pointer.  nbytes must be
 * count elements of the dtype. */
ra_status ra_st_tensor_to_f32(const ra_st_tensor *t, float *dst)
{
    if (t == NULL || (dst == NULL && t->count > 0) || (t->data == NULL && t->count > 0))
        return RA_ERR_NULL;
    size_t size = ra_st_dtype_size(t->dtype);
    if (size == 0) return RA_ERR_DTYPE;
    if (t->count < 0 || t->nbytes % size != 0 || t->nbytes / size != (uint64_t)t->count)
        return RA_ERR_SHAPE;
    const unsigned char *src = t->data;
    switch (t->dtype) {
    case RA_ST_F32:
        if (t->count > 0) memcpy(dst, src, (size_t)t->count * sizeof(float));
        return RA_OK;
    case RA_ST_F16:
    case RA_ST_BF16:
        for (int64_t i = 0; i < t->count; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = t->dtype == RA_ST_F16 ? ra_f16_to_f32(h) : ra_bf16_to_f32(h);
        }
        return RA_OK;
    case RA_ST_F64:
        return ra_io_f64_to_f32(dst, src, t->count) < 0 ? RA_OK : RA_ERR_FORMAT;
    default:
        return RA_ERR_DTYPE;
    }
}
