/* io_message.c — failure sentences, shape text and the regular-file check
 * for the file-format code. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "io_message.h"

ra_status ra_io_fail(char *msg, size_t msg_len, ra_status status, const char *fmt, ...)
{
    if (msg != NULL && msg_len > 0) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(msg, msg_len, fmt, args);
        va_end(args);
    }
    return status;
}

ra_status ra_io_errno_status(int err)
{
    return err == ENOMEM ? RA_ERR_NOMEM : RA_ERR_IO;
}

void ra_io_clear(char *msg, size_t msg_len)
{
    if (msg != NULL && msg_len > 0) msg[0] = '\0';
}

void ra_io_format_shape(char *buf, size_t buf_len, const int64_t *shape, int ndim)
{
    if (buf_len == 0) return;
    size_t used = (size_t)snprintf(buf, buf_len, "[");
    for (int i = 0; i < ndim && used < buf_len; i++)
        used += (size_t)snprintf(buf + used, buf_len - used, "%s%lld", i > 0 ? ", " : "",
                                 (long long)shape[i]);
    if (used < buf_len) snprintf(buf + used, buf_len - used, "]");
}

ra_status ra_io_regular_file_size(FILE *f, const char *path, uint64_t *size, char *msg,
                                  size_t msg_len)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot stat file: %s", path,
                          strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: not a regular file", path);
    *size = (uint64_t)st.st_size;
    return RA_OK;
}
