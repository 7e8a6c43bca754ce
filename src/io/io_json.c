/* io_json.c — strict JSON parsing, exact integers and config keys with
 * cJSON, and reading a JSON file whole. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "io_json.h"
#include "io_message.h"

ra_status ra_io_json_parse(const char *text, size_t len, cJSON **out)
{
    *out = NULL;
    if (len == SIZE_MAX || memchr(text, '\0', len) != NULL) return RA_ERR_FORMAT;
    /* cJSON gets its own NUL-terminated copy, so that nothing it does can
     * read past the caller's bytes, and it must reach that NUL: trailing
     * non-whitespace is an error. */
    char *copy = ra_malloc(len + 1);
    if (copy == NULL) return RA_ERR_NOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    errno = 0;
    *out = cJSON_ParseWithLengthOpts(copy, len + 1, NULL, 1);
    ra_status status = *out != NULL ? RA_OK : errno == ENOMEM ? RA_ERR_NOMEM : RA_ERR_FORMAT;
    ra_free(copy);
    return status;
}

int ra_io_json_integer(const cJSON *item, int64_t *out)
{
    if (!cJSON_IsNumber(item)) return 0;
    double v = item->valuedouble;
    if (!isfinite(v) || v != floor(v) || fabs(v) >= (double)RA_IO_JSON_INT_LIMIT) return 0;
    *out = (int64_t)v;
    return 1;
}

int ra_io_json_member(const cJSON *obj, const char *key, const cJSON **out)
{
    *out = NULL;
    for (const cJSON *item = obj->child; item != NULL; item = item->next) {
        if (item->string == NULL || strcmp(item->string, key) != 0) continue;
        if (*out != NULL) return 0;
        *out = item;
    }
    return 1;
}

ra_status ra_io_json_key(const cJSON *obj, const char *key, const char *name,
                         const cJSON **out, char *msg, size_t msg_len)
{
    if (!ra_io_json_member(obj, key, out))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" appears twice", name, key);
    if (cJSON_IsNull(*out)) *out = NULL;
    return RA_OK;
}

/* Reads f, already open, as ra_io_read_text describes. */
static ra_status slurp(FILE *f, const char *path, size_t max_bytes, char **text, size_t *len,
                       char *msg, size_t msg_len)
{
    uint64_t file_size;
    RA_TRY(ra_io_regular_file_size(f, path, &file_size, msg, msg_len));
    if (file_size > max_bytes)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: the file is %llu bytes; files over %zu bytes are refused", path,
                          (unsigned long long)file_size, max_bytes);
    if (file_size == 0)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the file is empty", path);
    size_t size = (size_t)file_size;
    char *buf = ra_malloc(size);
    if (buf == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    if (fread(buf, 1, size, f) != size) {
        ra_free(buf);
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: read failed", path);
    }
    *text = buf;
    *len = size;
    return RA_OK;
}

ra_status ra_io_read_text(const char *path, size_t max_bytes, char **text, size_t *len,
                          char *msg, size_t msg_len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ra_io_fail(msg, msg_len, ra_io_errno_status(errno), "%s: cannot open file: %s",
                          path, strerror(errno));
    ra_status status = slurp(f, path, max_bytes, text, len, msg, msg_len);
    fclose(f);
    return status;
}
