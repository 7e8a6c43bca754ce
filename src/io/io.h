/*
 * io.h — file formats the CLI reads and writes: .npy arrays, .safetensors
 * checkpoints, and output files written all at once (config.json's fields
 * and model families are libropeattn_hf's: src/hf/fields.h).  Internal to ropeattn (built into
 * the static library with hidden visibility; not part of the public header).
 *
 * Every file is treated as hostile: each size and offset read from it is
 * bounds-checked before use, and each failure returns a status plus one
 * clear sentence in msg (which names the file).  Writers write a temporary
 * file beside the target and rename it, so a failure leaves no output file.
 *
 * Threads: the readers and writers keep no state of their own, but cJSON's
 * parser stores the position of its last error in a process-wide variable
 * (cJSON_GetErrorPtr) without synchronization, so two threads parsing at
 * once (a safetensors header, a config.json) race inside
 * cJSON.  The CLI parses on one thread; a threaded caller must do the same.
 */
#ifndef RA_IO_H
#define RA_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ropeattn.h"

#define RA_IO_MAX_DIMS 8

/* ---- .npy (NumPy format versions 1.0, 2.0 and 3.0, C order only) ------- */

typedef enum ra_npy_dtype {
    RA_NPY_F32 = 0, /* '<f4' */
    RA_NPY_F64,     /* '<f8' */
    RA_NPY_F16,     /* '<f2' */
    RA_NPY_I32,     /* '<i4' */
    RA_NPY_I64,     /* '<i8' */
} ra_npy_dtype;

typedef struct ra_npy {
    ra_npy_dtype dtype;
    int ndim;                      /* 0 .. RA_IO_MAX_DIMS */
    int64_t shape[RA_IO_MAX_DIMS];
    int64_t count;                 /* product of shape */
    void *data;                    /* count elements, malloc'ed, aligned 64 */
} ra_npy;

/* Reads a whole .npy file.  On failure *out is left zeroed. */
ra_status ra_npy_read(const char *path, ra_npy *out, char *msg, size_t msg_len);
void ra_npy_free(ra_npy *npy); /* frees data and zeroes *npy; NULL allowed */

/* ra_npy_read for an input of float values: float64 data ('<f8') comes back
 * as float32 (dtype RA_NPY_F32, as safetensors' F64 weights are read), each
 * value rounded to the nearest float32; a finite value beyond float32's
 * range fails (RA_ERR_FORMAT, naming path and the element) rather than
 * become Inf.  Other dtypes come back as read. */
ra_status ra_npy_read_float(const char *path, ra_npy *out, char *msg, size_t msg_len);

/* dst[i] = src[i] for n float64 values (little-endian, any alignment) each
 * rounded to the nearest float32, ties to even (NaN and +-Inf stay so; dst
 * may be src), and returns -1; or, writing nothing, the index of the first
 * finite value beyond float32's range (one that would round to +-Inf). */
int64_t ra_io_f64_to_f32(float *dst, const void *src, int64_t n);

/* Writes float32 data of the given shape ('<f4', C order), atomically; the
 * _fd form writes into an open file (an ra_io_output's) that path names. */
ra_status ra_npy_write_f32(const char *path, const float *data, int ndim,
                           const int64_t *shape, char *msg, size_t msg_len);
ra_status ra_npy_write_f32_fd(int fd, const char *path, const float *data, int ndim,
                              const int64_t *shape, char *msg, size_t msg_len);

/* ---- .safetensors ------------------------------------------------------ */

typedef enum ra_st_dtype {
    RA_ST_F32 = 0, RA_ST_F16, RA_ST_BF16, RA_ST_F64,
    RA_ST_I8, RA_ST_U8, RA_ST_I16, RA_ST_U16, RA_ST_I32, RA_ST_U32,
    RA_ST_I64, RA_ST_U64, RA_ST_BOOL, RA_ST_F8_E4M3, RA_ST_F8_E5M2,
    RA_ST_DTYPE_COUNT
} ra_st_dtype;

const char *ra_st_dtype_name(ra_st_dtype dtype); /* "F32", "BF16", ... */
size_t ra_st_dtype_size(ra_st_dtype dtype);

typedef struct ra_st_tensor {
    const char *name;
    ra_st_dtype dtype;
    int ndim;
    int64_t shape[RA_IO_MAX_DIMS];
    int64_t count;     /* product of shape */
    const void *data;  /* inside the mapping; not aligned in general */
    size_t nbytes;
} ra_st_tensor;

typedef struct ra_safetensors ra_safetensors;

/* Maps the file (a regular file: ra_io_open_regular) read-only and
 * validates the whole header as the format defines it: header length within
 * the file, a UTF-8 JSON object starting with '{', no "\u0000" in any
 * string, every number plain digits (no sign, fraction or exponent), known
 * dtypes, shapes whose element count does not overflow, data_offsets
 * [begin, end) ordered, of exactly count * dtype size bytes, and together
 * tiling the data area with no gap, overlap or trailing byte; no duplicate
 * names.  "__metadata__" (at most once, names to strings) is skipped. */
ra_status ra_safetensors_open(ra_safetensors **out, const char *path,
                              char *msg, size_t msg_len);
void ra_safetensors_close(ra_safetensors *st); /* NULL allowed */

int64_t ra_safetensors_count(const ra_safetensors *st);
const ra_st_tensor *ra_safetensors_at(const ra_safetensors *st, int64_t i);
const ra_st_tensor *ra_safetensors_find(const ra_safetensors *st,
                                        const char *name); /* NULL if absent */

/* Converts an F32, F16, BF16 or F64 tensor to float32 (dst: count floats,
 * each rounded to nearest); other dtypes give RA_ERR_DTYPE, and a finite F64
 * value beyond float32's range RA_ERR_FORMAT (ra_io_f64_to_f32). */
ra_status ra_st_tensor_to_f32(const ra_st_tensor *t, float *dst);

/* Writes tensors (any dtype, data given as raw bytes of nbytes each) into a
 * new safetensors file, atomically.  Names must be unique. */
ra_status ra_safetensors_write(const char *path, const ra_st_tensor *tensors,
                               int64_t n, char *msg, size_t msg_len);
ra_status ra_safetensors_write_fd(int fd, const char *path, const ra_st_tensor *tensors,
                                  int64_t n, char *msg, size_t msg_len); /* as npy's */

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

/* ---- output files, all at once or not at all -------------------------- */

/* One output file staged beside its target: prepare (what would be
 * replaced, checked), create (a new temporary file in the target's folder,
 * named ".ropeattn-XXXXXX", with the old file's permission bits), write
 * into fd (ra_io_write_parts or a writer's _fd form), close, then commit
 * (rename over the target).  discard removes a temporary file that was not
 * committed and frees the rest; call it always, last. */
typedef struct ra_io_output {
    const char *path;  /* as given; names the output in messages */
    char *target;      /* the file replaced: path, or what its symbolic link names */
    char *temp;        /* the temporary file, until committed; else NULL */
    int fd;            /* temp's descriptor while open; else -1 */
    int exists;        /* target is an existing regular file: */
    dev_t dev;         /*   its device and inode */
    ino_t ino;
    mode_t mode;       /*   permission bits, owner and group */
    uid_t uid;
    gid_t gid;
    dev_t folder_dev;  /* !exists: the folder that will hold it */
    ino_t folder_ino;
} ra_io_output;

/* Refuses a path that exists and is not a regular file (a folder, device,
 * FIFO or socket, directly or through a symbolic link) and a new file's
 * missing folder. */
ra_status ra_io_output_prepare(ra_io_output *out, const char *path, char *msg, size_t msg_len);
/* 1 when two prepared outputs would write the same file. */
int ra_io_output_same(const ra_io_output *a, const ra_io_output *b);
ra_status ra_io_output_create(ra_io_output *out, char *msg, size_t msg_len);
ra_status ra_io_output_close(ra_io_output *out, char *msg, size_t msg_len);
ra_status ra_io_output_commit(ra_io_output *out, char *msg, size_t msg_len);
void ra_io_output_discard(ra_io_output *out); /* NULL allowed */

/* Writes n_parts byte ranges, in order, to fd and flushes them to disk
 * (fsync); name names the file in messages. */
ra_status ra_io_write_parts(int fd, const char *name, const void *const *parts,
                            const size_t *sizes, int n_parts, char *msg, size_t msg_len);

/* All the steps above for one file: n_parts byte ranges to path.  On any
 * failure the temporary file is removed and path is untouched. */
ra_status ra_write_file_atomic(const char *path, const void *const *parts,
                               const size_t *sizes, int n_parts, char *msg,
                               size_t msg_len);

#endif /* RA_IO_H */
