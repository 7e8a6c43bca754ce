/*
 * internal.h — helpers shared by the library's source files (not public).
 */
#ifndef RA_INTERNAL_H
#define RA_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "half.h"
#include "quant8.h"
#include "memory.h"
#include "ropeattn.h"

/* Returns status from the enclosing function if it is not RA_OK. */
#define RA_TRY(expr)                                    \
    do {                                                \
        ra_status ra_try_status_ = (expr);              \
        if (ra_try_status_ != RA_OK) return ra_try_status_; \
    } while (0)

/* The detail behind a failure, for ra_last_error (status.c): each public
 * function that returns a status calls ra_error_reset() first; a check
 * that fails may return ra_fail(status, "printf format", ...), which
 * records the sentence for the calling thread and returns status. */
void ra_error_reset(void);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
ra_status ra_fail(ra_status status, const char *format, ...);

/* A 4-D shape or stride in a detail:
 *   ra_fail(RA_ERR_SHAPE, "q " RA_DIMS_FMT, RA_DIMS(q->shape)) */
#define RA_DIMS_FMT "[%lld, %lld, %lld, %lld]"
#define RA_DIMS(a) (long long)(a)[0], (long long)(a)[1], (long long)(a)[2], (long long)(a)[3]

/* Copies the caller's versioned struct src (its first member: the
 * struct_size its header declared) into dst, ours of size bytes.  Below
 * min_size: RA_ERR_ARGUMENT (struct_size unset).  Fields the caller's older
 * header lacked read as zero; bytes of a newer header's fields beyond ours
 * must be zero, else RA_ERR_UNSUPPORTED.  NULL src: RA_ERR_NULL. */
ra_status ra_struct_read(void *dst, size_t size, size_t min_size, const void *src,
                         const char *what);

/* The size of each struct in 0.3.0, the first release with struct_size:
 * the offset of its first field added since (tests/test_abi.c pins them
 * to that release's layout), or the whole struct where none was.  A
 * program built against 0.3.0's header passes it; the fields it lacks
 * read as zero. */
#define RA_SIZE_0_3_ra_rope_config offsetof(ra_rope_config, axial)
#define RA_SIZE_0_3_ra_positions offsetof(ra_positions, axial_ids)
#define RA_SIZE_0_3_ra_attention_options offsetof(ra_attention_options, non_causal)
#define RA_SIZE_0_3_ra_layer_config offsetof(ra_layer_config, max_document)
#define RA_SIZE_0_3_ra_layer_grads sizeof(ra_layer_grads)

/* Reads a caller's struct of that type, of at least its 0.3.0 size.  type:
 * the struct's name, for the detail of a failure. */
#define RA_READ_STRUCT(dst, src, type) \
    ra_struct_read(&(dst), sizeof(dst), RA_SIZE_0_3_##type, (src), #type)

/* Largest element count any buffer may have: its byte size (4 bytes an
 * element) must fit in a ptrdiff_t. */
#define RA_MAX_ELEMENTS ((int64_t)(PTRDIFF_MAX / 4))

/* *out = a * b, or RA_ERR_OVERFLOW beyond RA_MAX_ELEMENTS (a, b >= 0). */
static inline ra_status ra_mul(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > RA_MAX_ELEMENTS / a) return RA_ERR_OVERFLOW;
    *out = a * b;
    return RA_OK;
}

/* Product of n positive sizes: RA_ERR_SIZE for one <= 0, RA_ERR_OVERFLOW if
 * the product exceeds RA_MAX_ELEMENTS. */
static inline ra_status ra_count(const int64_t *sizes, int n, int64_t *out)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (sizes[i] <= 0) return RA_ERR_SIZE;
    for (int i = 0; i < n; i++) RA_TRY(ra_mul(p, sizes[i], &p));
    *out = p;
    return RA_OK;
}

/* Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share memory. */
static inline int ra_bytes_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

/* Whether the float ranges [a, a + a_n) and [b, b + b_n) share memory. */
static inline int ra_floats_overlap(const float *a, int64_t a_n, const float *b, int64_t b_n)
{
    return ra_bytes_overlap(a, (size_t)a_n * sizeof(float), b, (size_t)b_n * sizeof(float));
}

/* ra_count of sizes the caller gave, names[i] naming sizes[i]: a failure's
 * detail says which ("batch 0: must be >= 1", "batch 65536 * seq 65536 *
 * dim 65536: too many elements"). */
ra_status ra_count_named(const int64_t *sizes, const char *const *names, int n, int64_t *out);

/* Element i of a buffer of the given dtype, as float32 (an 8-bit cache
 * dtype's: the code's value, before its scale). */
static inline float ra_load(const void *p, ra_dtype dtype, int64_t i)
{
    switch (dtype) {
    case RA_F16: return ra_half_f16_to_f32(((const uint16_t *)p)[i]);
    case RA_BF16: return ra_half_bf16_to_f32(((const uint16_t *)p)[i]);
    case RA_I8: return (float)((const int8_t *)p)[i];
    case RA_F8E4M3: return ra_e4m3_to_f32(((const uint8_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static inline void ra_store(void *p, ra_dtype dtype, int64_t i, float v)
{
    switch (dtype) {
    case RA_F16: ((uint16_t *)p)[i] = ra_half_f32_to_f16(v); break;
    case RA_BF16: ((uint16_t *)p)[i] = ra_half_f32_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

/* Whether dtype is one of the 8-bit KV-cache dtypes (RA_I8, RA_F8E4M3). */
static inline int ra_dtype_is_cache8(ra_dtype dtype)
{
    return dtype == RA_I8 || dtype == RA_F8E4M3;
}

/* The enum's name of a dtype, "RA_BF16", for messages ("(not a ra_dtype)"
 * for another value: print that one's number). */
const char *ra_dtype_name(ra_dtype dtype);

/* RA_OK for a tensor dtype (f32, f16, bf16); RA_ERR_DTYPE, saying so, for
 * an 8-bit cache dtype; RA_ERR_ARGUMENT for a value that is no ra_dtype.
 * name: the argument's, for the detail. */
ra_status ra_check_tensor_dtype(ra_dtype dtype, const char *name);

/* ra_tensor_check (rope_internal.h) for a view that will be written: also
 * RA_ERR_ARGUMENT when two of its elements may share an address (a zero
 * stride on an axis of extent > 1, axes whose strides interleave).  Exact
 * for views whose axes nest, as every contiguous, transposed or head-major
 * view does; an unusual interleaving that happens not to collide is refused
 * too.  name: the argument's, for the detail of a failure. */
ra_status ra_tensor_check_output(const ra_tensor *t, const char *name);


#endif
