/* error.c — the calling thread's last failure in libropeattn_hf. */
#include <stdarg.h>
#include <stdio.h>

#include "hf/hf.h"

/* One per thread; as long as the longest message the CLI prints. */
static _Thread_local char detail[1024];

void hf_reset(void) { detail[0] = '\0'; }

ra_status hf_fail(ra_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    return status;
}

RA_HF_API const char *ra_hf_last_error(void) { return detail; }
