/* io_json.c — strict JSON parsing, exact integers and config keys with
 * cJSON, and reading a JSON file whole. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io_json.h"
#include "io_message.h"
#include "io_open.h"

/* Reads exactly n bytes of fd (read() may return fewer at a time). */
static ra_status read_all(int fd, char *buf, size_t n, const char *path, char *msg,
                          size_t msg_len)
{
    for (size_t done = 0; done < n;) {
        ssize_t got = read(fd, buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: read failed: %s", path,
                              strerror(errno));
        if (got == 0)
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: the file shrank while being read",
                              path);
        done += (size_t)got;
    }
    return RA_OK;
}

/* A backslash outside a string is not JSON, so every backslash starts an
 * escape: each pair is skipped whole (\\u0000 is a backslash, then text). */
int ra_io_json_has_nul_escape(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') continue;
        if (text[i + 1] == 'u' && len - i >= 6 && memcmp(text + i + 2, "0000", 4) == 0) return 1;
        i++; /* the escaped character */
    }
    return 0;
}

ra_status ra_io_json_parse(const char *text, size_t len, cJSON **out)
{
    *out = NULL;
    if (len == SIZE_MAX || memchr(text, '\0', len) != NULL ||
        ra_io_json_has_nul_escape(text, len))
        return RA_ERR_FORMAT;
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

ra_status ra_io_read_text(const char *path, size_t max_bytes, char **text, size_t *len,
                          char *msg, size_t msg_len)
{
    int fd;
    uint64_t file_size;
    RA_TRY(ra_io_open_regular(path, &fd, &file_size, msg, msg_len));
    ra_status status = RA_OK;
    char *buf = NULL;
    if (file_size > max_bytes)
        status = ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                            "%s: the file is %llu bytes; files over %zu bytes are refused", path,
                            (unsigned long long)file_size, max_bytes);
    else if (file_size == 0)
        status = ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the file is empty", path);
    else if ((buf = ra_malloc((size_t)file_size)) == NULL)
        status = ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    else
        status = read_all(fd, buf, (size_t)file_size, path, msg, msg_len);
    close(fd);
    if (status != RA_OK) {
        ra_free(buf);
        return status;
    }
    *text = buf;
    *len = (size_t)file_size;
    return RA_OK;
}

ra_status ra_io_json_flag(const cJSON *obj, const char *key, int absent, int *out,
                          const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(obj, key, name, &item, msg, msg_len));
    int64_t v = absent;
    if (item != NULL && cJSON_IsBool(item)) v = cJSON_IsTrue(item);
    else if (item != NULL && !ra_io_json_integer(item, &v)) v = -1;
    if (v != 0 && v != 1)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be true or false",
                          name, key);
    *out = (int)v;
    return RA_OK;
}
