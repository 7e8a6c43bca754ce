/* error.c — the calling thread's last failure in libropeattn_mpi. */
#include <stdarg.h>
#include <stdio.h>

#include "mpi/mpi_internal.h"

/* One per thread. */
static _Thread_local char detail[1024];

void mpi_reset(void) { detail[0] = '\0'; }

ra_status mpi_fail(ra_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    return status;
}

ra_status mpi_core(ra_status status, const char *what)
{
    if (status == RA_OK) return RA_OK;
    return mpi_fail(status, "%s: %s", what, ra_last_error());
}

ra_status mpi_check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS) return RA_OK;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return mpi_fail(RA_ERR_IO, "%s failed: %s", call, text);
}

RA_MPI_API const char *ra_mpi_last_error(void) { return detail; }
