/*
 * safetensors_write.c — writes tensors into a new .safetensors file: the
 * header length, a JSON header padded with spaces to a multiple of 8 bytes,
 * then every tensor's bytes, contiguous and in the order given.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "io.h"
#include "io_json.h"
#include "io_message.h"

/* Checks one tensor's name, dtype, shape and byte count. */
static ra_status check_tensor(const ra_st_tensor *t, int64_t i, const char *path, char *msg,
                              size_t msg_len)
{
    if (t->name == NULL || t->name[0] == '\0' || strcmp(t->name, "__metadata__") == 0)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT,
                          "%s: tensor %lld has no name or the reserved name \"__metadata__\"",
                          path, (long long)i);
    size_t size = ra_st_dtype_size(t->dtype);
    if (size == 0)
        return ra_io_fail(msg, msg_len, RA_ERR_DTYPE, "%s: tensor \"%s\": unknown dtype %d",
                          path, t->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > RA_IO_MAX_DIMS)
        return ra_io_fail(msg, msg_len, RA_ERR_SHAPE,
                          "%s: tensor \"%s\": %d dimensions (0 to %d are supported)", path,
                          t->name, t->ndim, RA_IO_MAX_DIMS);
    char shape[RA_IO_SHAPE_TEXT];
    ra_io_format_shape(shape, sizeof shape, t->shape, t->ndim);
    int64_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->shape[d] >= RA_IO_JSON_INT_LIMIT)
            return ra_io_fail(msg, msg_len, RA_ERR_SIZE,
                              "%s: tensor \"%s\": shape %s has a dimension outside [0, 2^53)",
                              path, t->name, shape);
        if (ra_mul(count, t->shape[d], &count) != RA_OK)
            return ra_io_fail(msg, msg_len, RA_ERR_OVERFLOW,
                              "%s: tensor \"%s\": shape %s has too many elements", path,
                              t->name, shape);
    }
    if ((uint64_t)count * size != t->nbytes)
        return ra_io_fail(msg, msg_len, RA_ERR_SHAPE,
                          "%s: tensor \"%s\": %zu bytes given but shape %s of %s needs %llu",
                          path, t->name, t->nbytes, shape, ra_st_dtype_name(t->dtype),
                          (unsigned long long)count * size);
    if (t->data == NULL && t->nbytes > 0)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "%s: tensor \"%s\": data is NULL", path,
                          t->name);
    return RA_OK;
}

static int by_name(const void *x, const void *y)
{
    return strcmp((*(const ra_st_tensor *const *)x)->name, (*(const ra_st_tensor *const *)y)->name);
}

/* Rejects a name given twice. */
static ra_status check_unique(const ra_st_tensor *tensors, int64_t n, const char *path,
                              char *msg, size_t msg_len)
{
    const ra_st_tensor **sorted = ra_malloc((n > 0 ? (size_t)n : 1) * sizeof *sorted);
    if (sorted == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < n; i++) sorted[i] = &tensors[i];
    qsort(sorted, (size_t)n, sizeof *sorted, by_name);
    ra_status status = RA_OK;
    for (int64_t i = 1; i < n && status == RA_OK; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            status = ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT,
                                "%s: tensor name \"%s\" appears twice", path, sorted[i]->name);
    ra_free(sorted);
    return status;
}

/* Adds item to obj under key; frees item if that fails (or obj is NULL). */
static int attach(cJSON *obj, const char *key, cJSON *item)
{
    if (item == NULL) return 0;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return 0;
    }
    return 1;
}

/* A JSON array of integers, printed exactly (cJSON would print large ones
 * through a double). */
static cJSON *integer_array(const int64_t *values, int n)
{
    cJSON *array = cJSON_CreateArray();
    for (int i = 0; i < n && array != NULL; i++) {
        char text[24];
        snprintf(text, sizeof text, "%lld", (long long)values[i]);
        if (!cJSON_AddItemToArray(array, cJSON_CreateRaw(text))) {
            cJSON_Delete(array);
            array = NULL;
        }
    }
    return array;
}

static cJSON *tensor_entry(const ra_st_tensor *t, int64_t begin)
{
    int64_t offsets[2] = {begin, begin + (int64_t)t->nbytes};
    cJSON *entry = cJSON_CreateObject();
    if (!attach(entry, "dtype", cJSON_CreateString(ra_st_dtype_name(t->dtype))) ||
        !attach(entry, "shape", integer_array(t->shape, t->ndim)) ||
        !attach(entry, "data_offsets", integer_array(offsets, 2))) {
        cJSON_Delete(entry);
        return NULL;
    }
    return entry;
}

/* The header JSON ({"__metadata__": {"format": "pt"}, then one entry per
 * tensor), malloc'ed and NUL-terminated, or NULL if memory ran out. */
static char *header_json(const ra_st_tensor *tensors, int64_t n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *metadata = cJSON_CreateObject();
    int ok = attach(root, "__metadata__", metadata) &&
             cJSON_AddStringToObject(metadata, "format", "pt") != NULL;
    int64_t offset = 0;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = attach(root, tensors[i].name, tensor_entry(&tensors[i], offset));
        offset += (int64_t)tensors[i].nbytes;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* Writes the file given a padded header of header_len bytes. */
static ra_status write_parts(int fd, const char *path, const char *header, size_t header_len,
                             const ra_st_tensor *tensors, int64_t n, char *msg, size_t msg_len)
{
    unsigned char length[8];
    for (int i = 0; i < 8; i++) length[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    const void **parts = ra_malloc((size_t)(n + 2) * sizeof *parts);
    size_t *sizes = ra_malloc((size_t)(n + 2) * sizeof *sizes);
    ra_status status;
    if (parts == NULL || sizes == NULL) {
        status = ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    } else {
        parts[0] = length;
        sizes[0] = sizeof length;
        parts[1] = header;
        sizes[1] = header_len;
        for (int64_t i = 0; i < n; i++) {
            parts[i + 2] = tensors[i].data;
            sizes[i + 2] = tensors[i].nbytes;
        }
        status = fd < 0 ? ra_write_file_atomic(path, parts, sizes, (int)(n + 2), msg, msg_len)
                        : ra_io_write_parts(fd, path, parts, sizes, (int)(n + 2), msg, msg_len);
    }
    ra_free(parts);
    ra_free(sizes);
    return status;
}

/* Writes to fd, or atomically to path when fd < 0. */
static ra_status write_safetensors(int fd, const char *path, const ra_st_tensor *tensors,
                                   int64_t n, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (path == NULL || (n > 0 && tensors == NULL))
        return ra_io_fail(msg, msg_len, RA_ERR_NULL,
                          "ra_safetensors_write: path or tensors is NULL");
    if (n < 0 || n > INT_MAX - 2)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "%s: cannot write %lld tensors", path,
                          (long long)n);
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        RA_TRY(check_tensor(&tensors[i], i, path, msg, msg_len));
        if (tensors[i].nbytes >= (uint64_t)RA_IO_JSON_INT_LIMIT - total)
            return ra_io_fail(msg, msg_len, RA_ERR_OVERFLOW,
                              "%s: the tensors hold 2^53 bytes or more", path);
        total += tensors[i].nbytes;
    }
    RA_TRY(check_unique(tensors, n, path, msg, msg_len));

    char *json = header_json(tensors, n);
    if (json == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    size_t json_len = strlen(json);
    size_t header_len = (json_len + 7) / 8 * 8;
    char *header = ra_malloc(header_len > 0 ? header_len : 1);
    ra_status status;
    if (header == NULL) {
        status = ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    } else {
        memcpy(header, json, json_len);
        memset(header + json_len, ' ', header_len - json_len);
        status = write_parts(fd, path, header, header_len, tensors, n, msg, msg_len);
    }
    ra_free(header);
    ra_free(json);
    return status;
}

ra_status ra_safetensors_write(const char *path, const ra_st_tensor *tensors,
                               int64_t n, char *msg, size_t msg_len)
{
    return write_safetensors(-1, path, tensors, n, msg, msg_len);
}

ra_status ra_safetensors_write_fd(int fd, const char *path, const ra_st_tensor *tensors,
                                  int64_t n, char *msg, size_t msg_len)
{
    if (fd < 0)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "ra_safetensors_write_fd: fd < 0");
    return write_safetensors(fd, path, tensors, n, msg, msg_len);
}
