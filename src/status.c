/* status.c — the message for each ra_status, and the calling thread's
 * detail of its last failure (ra_last_error). */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static const char *const messages[RA_STATUS_COUNT] = {
    [RA_OK] = "success",
    [RA_ERR_NULL] = "a required pointer is NULL",
    [RA_ERR_SIZE] = "a size is zero or negative",
    [RA_ERR_OVERFLOW] = "sizes too large: their product overflows",
    [RA_ERR_HEAD_DIM] = "head_dim (or rotary_dim) must be even",
    [RA_ERR_DIM] = "dim must be a multiple of n_heads when head_dim is not given",
    [RA_ERR_GQA] = "n_heads must be a multiple of n_kv_heads",
    [RA_ERR_POSITION] = "a position is negative or beyond RA_MAX_POSITION",
    [RA_ERR_THETA] = "theta (the rope base) must be a finite number > 0",
    [RA_ERR_ARGUMENT] = "an argument is out of range",
    [RA_ERR_UNSUPPORTED] = "not supported by this operation",
    [RA_ERR_NOMEM] = "out of memory",
    [RA_ERR_THREAD] = "could not start a thread",
    [RA_ERR_IO] = "file could not be opened, read or written",
    [RA_ERR_FORMAT] = "malformed file",
    [RA_ERR_NOT_FOUND] = "a named tensor or key is missing",
    [RA_ERR_DTYPE] = "unsupported element type",
    [RA_ERR_SHAPE] = "tensor shape does not fit",
    [RA_ERR_CACHE_FULL] = "the KV cache has no room for these tokens",
};

RA_API const char *ra_status_string(ra_status status)
{
    if ((unsigned)status >= RA_STATUS_COUNT) return "unknown status";
    return messages[status];
}

/* One per thread, so that threads' failures never mix. */
static _Thread_local char detail[256];

void ra_error_reset(void) { detail[0] = '\0'; }

ra_status ra_fail(ra_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    return status;
}

ra_status ra_count_named(const int64_t *sizes, const char *const *names, int n, int64_t *out)
{
    ra_status status = ra_count(sizes, n, out);
    if (status == RA_OK) return RA_OK;
    for (int i = 0; i < n; i++)
        if (sizes[i] <= 0)
            return ra_fail(status, "%s %lld: must be >= 1", names[i], (long long)sizes[i]);
    char product[sizeof detail] = "";
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof product; i++) {
        int k = snprintf(product + used, sizeof product - used, "%s%s %lld", i ? " * " : "",
                         names[i], (long long)sizes[i]);
        if (k < 0) break;
        used += (size_t)k;
    }
    return ra_fail(status, "%s: too many elements", product);
}

RA_API const char *ra_last_error(void) { return detail; }
