/*
 * io_open.h — opening a file the readers will read.  Private to src/io.
 */
#ifndef RA_IO_OPEN_H
#define RA_IO_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "ropeattn.h"

/* Opens path read-only without blocking and accepts only a regular file:
 * a FIFO, folder, device or socket fails with RA_ERR_IO and
 * "<path>: not a regular file (a FIFO)" (a folder, a device, a socket).  On
 * success *fd is the open descriptor (close-on-exec; the caller closes it)
 * and *size the file's size. */
ra_status ra_io_open_regular(const char *path, int *fd, uint64_t *size, char *msg,
                             size_t msg_len);

#endif
