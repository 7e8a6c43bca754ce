/*
 * io.h — inside libropeattn_hf: the public file formats (include/ropeattn_io.h:
 * .npy arrays, .safetensors files, output files written all at once) and
 * what only the library uses (float64 narrowed, a sharded checkpoint's
 * index, byte ranges written atomically).  config.json's fields and model
 * families are src/hf/fields.h's.
 *
 * Conventions (statuses, msg, hostile files, threads): ropeattn_io.h's.
 */
#ifndef RA_IO_H
#define RA_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ropeattn.h"
#include "ropeattn_io.h"

/* ---- besides the public calls ------------------------------------------- */

/* dst[i] = src[i] for n float64 values (little-endian, any alignment) each
 * rounded to the nearest float32, ties to even (NaN and +-Inf stay so; dst
 * may be src), and returns -1; or, writing nothing, the index of the first
 * finite value beyond float32's range (one that would round to +-Inf). */
int64_t ra_io_f64_to_f32(float *dst, const void *src, int64_t n);

/* Converts an F32, F16, BF16 or F64 tensor to float32 (dst: count floats,
 * each rounded to nearest); other dtypes give RA_ERR_DTYPE, and a finite F64
 * value beyond float32's range RA_ERR_FORMAT (ra_io_f64_to_f32). */
ra_status ra_st_tensor_to_f32(const ra_st_tensor *t, float *dst);

/* The shards of a sharded checkpoint, as its model.safetensors.index.json
 * names them: the distinct values of its "weight_map" object (tensor name ->
 * file), in the order first named.  Each must be a plain file name (no
 * folder, not hidden) ending in ".safetensors"; it is taken to be in the
 * index's folder. */
typedef struct ra_st_index {
    char **shards; /* [n_shards], owned */
    int64_t n_shards;
} ra_st_index;

/* Reads the index at path (at most 64 MiB; at least one tensor; at most
 * RA_ST_INDEX_MAX_SHARDS shards).  Free with ra_st_index_free. */
ra_status ra_st_index_read(const char *path, ra_st_index *out, char *msg, size_t msg_len);
void ra_st_index_free(ra_st_index *index); /* zeroes it; NULL allowed */
#define RA_ST_INDEX_MAX_SHARDS 4096

/* ---- output files (ra_io_output: ropeattn_io.h) ------------------------- */

/* All of ropeattn_io.h's steps for one file: n_parts byte ranges to path.  On any
 * failure the temporary file is removed and path is untouched. */
ra_status ra_write_file_atomic(const char *path, const void *const *parts,
                               const size_t *sizes, int n_parts, char *msg,
                               size_t msg_len);

#endif /* RA_IO_H */
