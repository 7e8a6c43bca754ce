/*
 * io_message.h — how the file-format code reports failures: a status plus one
 * sentence in the caller's msg buffer.  Private to src/io.
 */
#ifndef RA_IO_MESSAGE_H
#define RA_IO_MESSAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ropeattn.h"

#if defined(__GNUC__)
#define RA_IO_PRINTF(fmt_index) __attribute__((format(printf, fmt_index, fmt_index + 1)))
#else
#define RA_IO_PRINTF(fmt_index)
#endif

/* Writes the formatted sentence into msg (if msg is not NULL and msg_len > 0;
 * always NUL-terminated) and returns status. */
ra_status ra_io_fail(char *msg, size_t msg_len, ra_status status, const char *fmt, ...)
    RA_IO_PRINTF(4);

/* The status for a failed open, create or map with this errno: RA_ERR_NOMEM
 * for ENOMEM, else RA_ERR_IO. */
ra_status ra_io_errno_status(int err);

/* *size = the size of f, which must be a regular file (path names it in
 * any message). */
ra_status ra_io_regular_file_size(FILE *f, const char *path, uint64_t *size, char *msg,
                                  size_t msg_len);

/* Empties msg (if msg is not NULL and msg_len > 0). */
void ra_io_clear(char *msg, size_t msg_len);

/* Writes a shape as "[2, 3]" ("[]" for 0-d) into buf, truncating if needed. */
void ra_io_format_shape(char *buf, size_t buf_len, const int64_t *shape, int ndim);

/* Enough room for any shape of RA_IO_MAX_DIMS dimensions. */
#define RA_IO_SHAPE_TEXT 256

#endif
