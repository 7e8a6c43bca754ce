/*
 * npy.c — reads a .npy file (format versions 1.0, 2.0 and 3.0, C order,
 * little-endian f4 f8 f2 i4 i8, and b1) into a 64-byte aligned buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io.h"
#include "io_message.h"
#include "io_open.h"
#include "npy_header.h"

/* Longest header accepted (numpy itself refuses more than 10000 bytes). */
#define MAX_HEADER_BYTES (1u << 20)

typedef struct npy_type {
    const char *code; /* descr without its byte-order character */
    ra_npy_dtype dtype;
    size_t size;
} npy_type;

static const npy_type npy_types[] = {
    {"f4", RA_NPY_F32, 4}, {"f8", RA_NPY_F64, 8}, {"f2", RA_NPY_F16, 2},
    {"i4", RA_NPY_I32, 4}, {"i8", RA_NPY_I64, 8}, {"b1", RA_NPY_BOOL, 1},
};

/* Maps descr to a supported type.  '<' is little-endian; '=' (native) and
 * '|' (not applicable, which numpy also reads as native) are little-endian
 * too on the little-endian hosts this library runs on. */
static ra_status find_type(const char *descr, const char *path, const npy_type **out,
                           char *msg, size_t msg_len)
{
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
        if (descr[0] == '\0' || strcmp(descr + 1, npy_types[i].code) != 0) continue;
        if (descr[0] == '>')
            return ra_io_fail(msg, msg_len, RA_ERR_DTYPE,
                              "%s: big-endian dtype '%s' is not supported", path, descr);
        if (strchr("<=|", descr[0]) != NULL) {
            *out = &npy_types[i];
            return RA_OK;
        }
    }
    return ra_io_fail(msg, msg_len, RA_ERR_DTYPE,
                      "%s: dtype '%s' is not supported (only <f4, <f8, <f2, <i4, <i8 and |b1 are)",
                      path, descr);
}

/* Reads exactly n bytes; on failure names the problem in msg. */
static ra_status read_exact(FILE *f, void *buf, size_t n, const char *path, char *msg,
                            size_t msg_len)
{
    if (fread(buf, 1, n, f) == n) return RA_OK;
    if (ferror(f))
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: read failed: %s", path,
                          strerror(errno));
    return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: the file shrank while being read", path);
}

/* Reads the magic, version and header length; leaves f at the header and
 * sets *header_len and *data_start (the offset just past the header). */
static ra_status read_preamble(FILE *f, uint64_t file_size, const char *path,
                               uint32_t *header_len, uint64_t *data_start, char *msg,
                               size_t msg_len)
{
    unsigned char pre[12];
    if (file_size == 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the file is empty", path);
    size_t got = fread(pre, 1, file_size < 8 ? (size_t)file_size : 8, f);
    if (got < 6 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
    if (got < 8)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: the file is %zu bytes, too short for a .npy header", path, got);
    unsigned major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: .npy format version %u.%u is not supported", path, major, minor);
    size_t len_bytes = major == 1 ? 2 : 4; /* the header length: u16 in 1.0, u32 after */
    if (file_size < 8 + len_bytes)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: the file is %llu bytes, too short for a .npy header", path,
                          (unsigned long long)file_size);
    RA_TRY(read_exact(f, pre + 8, len_bytes, path, msg, msg_len));
    uint32_t len = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    if (len_bytes == 4) len |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    uint64_t start = 8 + len_bytes;
    if (len > file_size - start)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: header length %u exceeds the file size %llu", path, len,
                          (unsigned long long)file_size);
    if (len > MAX_HEADER_BYTES)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: header length %u exceeds the limit of %u bytes", path, len,
                          MAX_HEADER_BYTES);
    *header_len = len;
    *data_start = start + len;
    return RA_OK;
}

static ra_status read_header(FILE *f, uint32_t len, const char *path, ra_npy_header *h,
                             char *msg, size_t msg_len)
{
    char *text = ra_malloc(len > 0 ? len : 1);
    if (text == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory for the header", path);
    ra_status status = read_exact(f, text, len, path, msg, msg_len);
    if (status == RA_OK) status = ra_npy_parse_header(text, len, path, h, msg, msg_len);
    ra_free(text);
    return status;
}

/* Checks that the data area holds exactly the array's bytes; sets *count. */
static ra_status check_data_size(const ra_npy_header *h, const npy_type *type,
                                 uint64_t data_bytes, const char *path, int64_t *count,
                                 char *msg, size_t msg_len)
{
    char shape[RA_IO_SHAPE_TEXT];
    ra_io_format_shape(shape, sizeof shape, h->shape, h->ndim);
    int64_t n = 1;
    for (int i = 0; i < h->ndim; i++)
        if (ra_mul(n, h->shape[i], &n) != RA_OK)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: shape %s has too many elements", path, shape);
    uint64_t needed = (uint64_t)n * type->size;
    if (data_bytes < needed)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: truncated: the file holds %llu bytes of data but shape %s of "
                          "'%s' needs %llu", path, (unsigned long long)data_bytes, shape,
                          h->descr, (unsigned long long)needed);
    if (data_bytes > needed)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: %llu trailing bytes follow the data of shape %s of '%s'", path,
                          (unsigned long long)(data_bytes - needed), shape, h->descr);
    *count = n;
    return RA_OK;
}

static ra_status read_npy(FILE *f, uint64_t file_size, const char *path, ra_npy *out,
                          char *msg, size_t msg_len)
{
    uint32_t header_len = 0;
    uint64_t data_start = 0;
    ra_npy_header h = {0};
    const npy_type *type = NULL;
    int64_t count = 0;
    RA_TRY(read_preamble(f, file_size, path, &header_len, &data_start, msg, msg_len));
    RA_TRY(read_header(f, header_len, path, &h, msg, msg_len));
    RA_TRY(find_type(h.descr, path, &type, msg, msg_len));
    if (h.fortran_order)
        return ra_io_fail(msg, msg_len, RA_ERR_UNSUPPORTED,
                          "%s: Fortran-order arrays are not supported", path);
    RA_TRY(check_data_size(&h, type, file_size - data_start, path, &count, msg, msg_len));

    size_t bytes = (size_t)count * type->size;
    void *data = ra_alloc(bytes > 0 ? bytes : 64);
    if (data == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NOMEM,
                          "%s: out of memory for %zu bytes of data", path, bytes);
    ra_status status = read_exact(f, data, bytes, path, msg, msg_len);
    if (status != RA_OK) {
        ra_free(data);
        return status;
    }
    out->dtype = type->dtype;
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->count = count;
    out->data = data;
    return RA_OK;
}

ra_status ra_npy_read(const char *path, ra_npy *out, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) memset(out, 0, sizeof *out);
    if (path == NULL || out == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_npy_read: path or out is NULL");
    int fd;
    uint64_t file_size;
    RA_TRY(ra_io_open_regular(path, &fd, &file_size, msg, msg_len));
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        int err = errno;
        close(fd);
        return ra_io_fail(msg, msg_len, ra_io_errno_status(err), "%s: cannot open file: %s",
                          path, strerror(err));
    }
    ra_status status = read_npy(f, file_size, path, out, msg, msg_len);
    fclose(f);
    return status;
}

/* Converts a float64 npy (read by ra_npy_read from path) to float32 in
 * place: element i's 4 bytes land below element i + 1's 8. */
static ra_status narrow_f64(ra_npy *npy, const char *path, char *msg, size_t msg_len)
{
    int64_t bad = ra_io_f64_to_f32(npy->data, npy->data, npy->count);
    if (bad >= 0) {
        double d;
        memcpy(&d, (const char *)npy->data + 8 * bad, sizeof d); /* nothing was written */
        char shape[RA_IO_SHAPE_TEXT];
        ra_io_format_shape(shape, sizeof shape, npy->shape, npy->ndim);
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: element %lld of its %s float64 values is %.9g, beyond float32's "
                          "range (+-3.4028235e38)", path, (long long)bad, shape, d);
    }
    npy->dtype = RA_NPY_F32;
    return RA_OK;
}

ra_status ra_npy_read_float(const char *path, ra_npy *out, char *msg, size_t msg_len)
{
    RA_TRY(ra_npy_read(path, out, msg, msg_len));
    ra_status status = out->dtype == RA_NPY_F64 ? narrow_f64(out, path, msg, msg_len) : RA_OK;
    if (status != RA_OK) ra_npy_free(out);
    return status;
}

void ra_npy_free(ra_npy *npy)
{
    if (npy == NULL) return;
    ra_free(npy->data);
    memset(npy, 0, sizeof *npy);
}
