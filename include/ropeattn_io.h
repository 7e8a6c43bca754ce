/*
 * ropeattn_io.h — the file formats of ropeattn's tool, for a program that
 * reads and writes what it does: .npy arrays (NumPy format 1.0, 2.0 and
 * 3.0, C order), .safetensors files, and output files written all at once
 * or not at all.  Part of libropeattn_hf (pkg-config ropeattn-hf, CMake
 * ropeattn::ropeattn_hf), beside ropeattn_hf.h; it needs libropeattn and
 * cJSON.  (A checkpoint of several shards, and its tensors converted for a
 * layer: ropeattn_hf.h.)
 *
 * Conventions: every call that can fail returns an ra_status (ropeattn.h)
 * and writes one sentence naming the file, the argument or the element into
 * msg (msg_len bytes, cut to fit; msg NULL or msg_len 0: no sentence),
 * "" on success.  A NULL pointer where one is required is RA_ERR_NULL.
 * Every file is read as hostile input: each size and offset in it is
 * checked before use.  Writers write a temporary file beside the target,
 * flush it to disk and rename it over the target, so that a failure
 * leaves no output file and an old file is replaced whole or not at all.
 *
 * Threads: the calls keep no state of their own, but cJSON, which parses
 * a safetensors header, keeps the position of its last error in a
 * process-wide variable: open safetensors files on one thread at a time
 * (as ropeattn_hf.h's checkpoints and configs).
 */
#ifndef ROPEATTN_IO_H
#define ROPEATTN_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ropeattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RA_BUILDING_HF_LIBRARY) && defined(__GNUC__)
#define RA_IO_API __attribute__((visibility("default")))
#else
#define RA_IO_API
#endif

/* The most dimensions an array or tensor of these files may have. */
#define RA_IO_MAX_DIMS 8

/* ---- .npy ---------------------------------------------------------------- */

typedef enum ra_npy_dtype {
    RA_NPY_F32 = 0, /* '<f4' */
    RA_NPY_F64,     /* '<f8' */
    RA_NPY_F16,     /* '<f2' */
    RA_NPY_I32,     /* '<i4' */
    RA_NPY_I64,     /* '<i8' */
    RA_NPY_BOOL,    /* '|b1': one byte per element, 0 false, nonzero true
                       (numpy writes 0 and 1) */
} ra_npy_dtype;

/* An array read whole. */
typedef struct ra_npy {
    ra_npy_dtype dtype;
    int ndim;                      /* 0 .. RA_IO_MAX_DIMS */
    int64_t shape[RA_IO_MAX_DIMS];
    int64_t count;                 /* product of shape */
    void *data;                    /* count elements, C order, aligned 64: ra_npy_free */
} ra_npy;

/* Reads a whole .npy file of one of the dtypes above (little-endian; a
 * Fortran-order, big-endian or object array is refused, naming it).  On
 * failure *out is left zeroed. */
RA_IO_API ra_status ra_npy_read(const char *path, ra_npy *out, char *msg, size_t msg_len);
/* Frees data and zeroes *npy; NULL allowed. */
RA_IO_API void ra_npy_free(ra_npy *npy);

/* ra_npy_read for an input of float values: float64 data ('<f8') comes back
 * as float32 (dtype RA_NPY_F32, as safetensors' F64 weights are read), each
 * value rounded to the nearest float32; a finite value beyond float32's
 * range fails (RA_ERR_FORMAT, naming path and the element) rather than
 * become Inf.  Other dtypes come back as read. */
RA_IO_API ra_status ra_npy_read_float(const char *path, ra_npy *out, char *msg,
                                      size_t msg_len);

/* Writes float32 data of the given shape (ndim 0 .. RA_IO_MAX_DIMS, each
 * extent >= 0) as '<f4' in C order, atomically; the _fd form writes into
 * an open file (an ra_io_output's, below) that path names in messages. */
RA_IO_API ra_status ra_npy_write_f32(const char *path, const float *data, int ndim,
                                     const int64_t *shape, char *msg, size_t msg_len);
RA_IO_API ra_status ra_npy_write_f32_fd(int fd, const char *path, const float *data, int ndim,
                                        const int64_t *shape, char *msg, size_t msg_len);

/* ---- .safetensors ---------------------------------------------------------- */

typedef enum ra_st_dtype {
    RA_ST_F32 = 0, RA_ST_F16, RA_ST_BF16, RA_ST_F64,
    RA_ST_I8, RA_ST_U8, RA_ST_I16, RA_ST_U16, RA_ST_I32, RA_ST_U32,
    RA_ST_I64, RA_ST_U64, RA_ST_BOOL, RA_ST_F8_E4M3, RA_ST_F8_E5M2,
    RA_ST_DTYPE_COUNT
} ra_st_dtype;

/* The format's name ("F32", "BF16", ...; "unknown" out of range) and the
 * bytes of one element (0 out of range). */
RA_IO_API const char *ra_st_dtype_name(ra_st_dtype dtype);
RA_IO_API size_t ra_st_dtype_size(ra_st_dtype dtype);

/* A tensor of a file (pointers into the open file: valid until
 * ra_safetensors_close), or one to write. */
typedef struct ra_st_tensor {
    const char *name;
    ra_st_dtype dtype;
    int ndim;                      /* 0 .. RA_IO_MAX_DIMS */
    int64_t shape[RA_IO_MAX_DIMS];
    int64_t count;     /* product of shape */
    const void *data;  /* count elements, little-endian; not aligned in general */
    size_t nbytes;     /* count * ra_st_dtype_size(dtype) */
} ra_st_tensor;

typedef struct ra_safetensors ra_safetensors;

/* Maps the file (a regular file) read-only and validates the whole header
 * as the format defines it: header length within the file, a UTF-8 JSON
 * object, every number plain digits, known dtypes, shapes whose element
 * count does not overflow, data_offsets [begin, end) of exactly count *
 * dtype size bytes that together tile the data area with no gap, overlap or
 * trailing byte; no duplicate names and none holding "\u0000".
 * "__metadata__" (at most once, names to strings) is skipped. */
RA_IO_API ra_status ra_safetensors_open(ra_safetensors **out, const char *path, char *msg,
                                        size_t msg_len);
RA_IO_API void ra_safetensors_close(ra_safetensors *st); /* NULL allowed */

/* Its tensors, in the order its header lists them: how many (0 for NULL),
 * the i-th (NULL out of range), the one called name (NULL if absent). */
RA_IO_API int64_t ra_safetensors_count(const ra_safetensors *st);
RA_IO_API const ra_st_tensor *ra_safetensors_at(const ra_safetensors *st, int64_t i);
RA_IO_API const ra_st_tensor *ra_safetensors_find(const ra_safetensors *st, const char *name);

/* Writes n tensors (any dtype; data, nbytes of it, as stored) into a new
 * safetensors file with {"format": "pt"} as its metadata, atomically; the
 * names must be unique, each nbytes must match the dtype and shape.  The
 * _fd form as npy's. */
RA_IO_API ra_status ra_safetensors_write(const char *path, const ra_st_tensor *tensors,
                                         int64_t n, char *msg, size_t msg_len);
RA_IO_API ra_status ra_safetensors_write_fd(int fd, const char *path,
                                            const ra_st_tensor *tensors, int64_t n, char *msg,
                                            size_t msg_len);

/* ---- output files, all at once or not at all ------------------------------- */

/* One output file staged beside its target: prepare (what would be
 * replaced, checked), create (a new temporary file in the target's folder,
 * named ".ropeattn-" and six random letters and digits, as mkstemp names
 * it, with the old file's permission bits), write
 * into fd (a writer's _fd form), close, then commit (rename over the
 * target).  discard removes a temporary file that was not committed and
 * frees the rest; call it always, last.  A caller declares one and passes
 * it to these calls; it reads path and fd, and leaves the rest (the
 * library's) as the calls set them. */
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
RA_IO_API ra_status ra_io_output_prepare(ra_io_output *out, const char *path, char *msg,
                                         size_t msg_len);
/* 1 when two prepared outputs would write the same file; 0 otherwise (and
 * for NULL or one not prepared). */
RA_IO_API int ra_io_output_same(const ra_io_output *a, const ra_io_output *b);
RA_IO_API ra_status ra_io_output_create(ra_io_output *out, char *msg, size_t msg_len);
RA_IO_API ra_status ra_io_output_close(ra_io_output *out, char *msg, size_t msg_len);
RA_IO_API ra_status ra_io_output_commit(ra_io_output *out, char *msg, size_t msg_len);
RA_IO_API void ra_io_output_discard(ra_io_output *out); /* NULL allowed */

/* Writes n_parts byte ranges (parts[i], sizes[i] bytes each), in order, to
 * fd (an ra_io_output's, for a file of any other format) and flushes them
 * to disk (fsync); name names the file in messages. */
RA_IO_API ra_status ra_io_write_parts(int fd, const char *name, const void *const *parts,
                                      const size_t *sizes, int n_parts, char *msg,
                                      size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* ROPEATTN_IO_H */
