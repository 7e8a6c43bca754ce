/*
 * npy_header.h — parsing the Python-dict header of a .npy file.  Private to
 * src/io.
 */
#ifndef RA_NPY_HEADER_H
#define RA_NPY_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

typedef struct ra_npy_header {
    char descr[16]; /* as written, e.g. "<f4" */
    int fortran_order;
    int ndim;
    int64_t shape[RA_IO_MAX_DIMS];
} ra_npy_header;

/* Parses text (len bytes, e.g. "{'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), }" plus padding): the three keys exactly once each, in any
 * order, with either quote style.  Failures name path in msg: RA_ERR_FORMAT
 * for a malformed dict, RA_ERR_DTYPE for a structured dtype, RA_ERR_SHAPE for
 * more than RA_IO_MAX_DIMS dimensions. */
ra_status ra_npy_parse_header(const char *text, size_t len, const char *path,
                              ra_npy_header *out, char *msg, size_t msg_len);

#endif
