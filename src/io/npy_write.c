/*
 * npy_write.c — writes float32 arrays as .npy files (format 1.0, '<f4',
 * C order), with the header padded as numpy pads it.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "io.h"
#include "io_message.h"

#define PREAMBLE_BYTES 10 /* magic, version 1.0, little-endian u16 length */
#define HEADER_ALIGN 64

/* Writes shape as a Python tuple: "()", "(5,)", "(2, 3)". */
static void format_tuple(char *buf, size_t buf_len, const int64_t *shape, int ndim)
{
    size_t used = (size_t)snprintf(buf, buf_len, "(");
    for (int i = 0; i < ndim; i++)
        used += (size_t)snprintf(buf + used, buf_len - used, "%s%lld", i > 0 ? ", " : "",
                                 (long long)shape[i]);
    snprintf(buf + used, buf_len - used, ndim == 1 ? ",)" : ")");
}

/* Builds the preamble and dict, padded with spaces and ended with '\n' so
 * that the data starts at a multiple of 64 bytes; returns the total size. */
static size_t build_header(char *buf, size_t buf_len, const int64_t *shape, int ndim)
{
    char tuple[RA_IO_SHAPE_TEXT];
    format_tuple(tuple, sizeof tuple, shape, ndim);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t end = PREAMBLE_BYTES +
                 (size_t)snprintf(buf + PREAMBLE_BYTES, buf_len - PREAMBLE_BYTES,
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
                                  tuple);
    while ((end + 1) % HEADER_ALIGN != 0) buf[end++] = ' ';
    buf[end++] = '\n';
    size_t dict_len = end - PREAMBLE_BYTES;
    buf[8] = (char)(dict_len & 0xff);
    buf[9] = (char)(dict_len >> 8);
    return end;
}

/* Writes to fd, or atomically to path when fd < 0. */
static ra_status write_npy(int fd, const char *path, const float *data, int ndim,
                           const int64_t *shape, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (path == NULL || (ndim > 0 && shape == NULL))
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_npy_write_f32: path or shape is NULL");
    if (ndim < 0 || ndim > RA_IO_MAX_DIMS)
        return ra_io_fail(msg, msg_len, RA_ERR_SHAPE,
                          "%s: cannot write %d dimensions (0 to %d are supported)", path, ndim,
                          RA_IO_MAX_DIMS);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_SIZE, "%s: dimension %d is negative (%lld)",
                              path, i, (long long)shape[i]);
        if (ra_mul(count, shape[i], &count) != RA_OK)
            return ra_io_fail(msg, msg_len, RA_ERR_OVERFLOW,
                              "%s: the shape has too many elements", path);
    }
    if (data == NULL && count > 0)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "%s: data is NULL", path);

    char header[PREAMBLE_BYTES + 2 * RA_IO_SHAPE_TEXT + HEADER_ALIGN];
    size_t header_len = build_header(header, sizeof header, shape, ndim);
    const void *parts[2] = {header, data};
    size_t sizes[2] = {header_len, (size_t)count * sizeof(float)};
    return fd < 0 ? ra_write_file_atomic(path, parts, sizes, 2, msg, msg_len)
                  : ra_io_write_parts(fd, path, parts, sizes, 2, msg, msg_len);
}

ra_status ra_npy_write_f32(const char *path, const float *data, int ndim,
                           const int64_t *shape, char *msg, size_t msg_len)
{
    return write_npy(-1, path, data, ndim, shape, msg, msg_len);
}

ra_status ra_npy_write_f32_fd(int fd, const char *path, const float *data, int ndim,
                              const int64_t *shape, char *msg, size_t msg_len)
{
    if (fd < 0) return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "ra_npy_write_f32_fd: fd < 0");
    return write_npy(fd, path, data, ndim, shape, msg, msg_len);
}
