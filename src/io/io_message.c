/* io_message.c — failure sentences and shape text for the file-format code. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

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
