/*
 * fuzz_npy.c — ra_npy_read on any bytes.  A refused file must come with a
 * status that says so, a message naming the file and a zeroed ra_npy; an
 * accepted one must be what the bytes say: a supported dtype, count = the
 * product of the shape, and data equal to the last count * size bytes of
 * the file (nothing may follow the data), in a 64-byte aligned buffer.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_file.h"
#include "io/io.h"

static size_t npy_size(ra_npy_dtype d)
{
    switch (d) {
    case RA_NPY_F32: case RA_NPY_I32: return 4;
    case RA_NPY_F64: case RA_NPY_I64: return 8;
    case RA_NPY_F16: return 2;
    case RA_NPY_BOOL: return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    if (path == NULL) return 0;
    ra_npy npy;
    memset(&npy, 0xA5, sizeof npy);
    char msg[512];
    ra_status status = ra_npy_read(path, &npy, msg, sizeof msg);
    if (status != RA_OK) {
        FUZZ_CHECK(status == RA_ERR_FORMAT || status == RA_ERR_DTYPE ||
                       status == RA_ERR_SHAPE || status == RA_ERR_UNSUPPORTED,
                   "status %d: %s", (int)status, msg);
        FUZZ_CHECK(npy.data == NULL && npy.count == 0 && npy.ndim == 0, "out not zeroed");
        FUZZ_CHECK(strncmp(msg, path, strlen(path)) == 0 && msg[strlen(path)] == ':',
                   "message does not start with the path: %s", msg);
        return 0;
    }
    FUZZ_CHECK(msg[0] == '\0', "message after success: %s", msg);
    size_t es = npy_size(npy.dtype);
    FUZZ_CHECK(es != 0, "dtype %d", (int)npy.dtype);
    FUZZ_CHECK(npy.ndim >= 0 && npy.ndim <= RA_IO_MAX_DIMS, "ndim %d", npy.ndim);
    int64_t count = 1;
    for (int i = 0; i < npy.ndim; i++) {
        FUZZ_CHECK(npy.shape[i] >= 0, "negative dimension");
        count *= npy.shape[i]; /* bounded by the file size, checked below */
        if (count == 0) break;
    }
    FUZZ_CHECK(count == npy.count, "count %lld, shape says %lld", (long long)npy.count,
               (long long)count);
    uint64_t bytes = (uint64_t)npy.count * es;
    FUZZ_CHECK(size >= 10 && bytes <= size - 10, "%llu data bytes in a %zu-byte file",
               (unsigned long long)bytes, size);
    FUZZ_CHECK(npy.data != NULL && (uintptr_t)npy.data % 64 == 0, "data not aligned");
    FUZZ_CHECK(memcmp(npy.data, data + size - bytes, bytes) == 0, "data differs from the file");
    FUZZ_CHECK(memcmp(data, "\x93NUMPY", 6) == 0, "accepted without the magic");
    ra_npy_free(&npy);
    FUZZ_CHECK(npy.data == NULL && npy.count == 0, "free does not zero");
    return 0;
}
