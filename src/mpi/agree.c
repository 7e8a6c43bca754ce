/*
 * agree.c — one MPI_Allreduce that makes every rank of a call reach the
 * same verdict on its arguments before any other traffic (and a view
 * helper the calls share).
 *
 *   buffer [2 + 2 n_sig] int64, reduced by MPI_MAX: status, the lowest
 *   failing rank as size - rank (0: none), sig[n_sig], -sig[n_sig] (so the
 *   maximum is minus the minimum)
 */
#include <stdint.h>
#include <string.h>

#include "mpi/mpi_internal.h"

ra_status mpi_agree(MPI_Comm comm, ra_status status, const int64_t *sig, int n_sig)
{
    int size = 0, rank = 0;
    RA_MPI_TRY(mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
    /* on the stack: a rank out of memory still takes part, with as many
     * values as the others */
    int64_t buf[2 + 2 * RA_MPI_MAX_SIG] = {0};
    buf[0] = status;
    buf[1] = status != RA_OK ? size - rank : 0;
    /* a signature of INT64_MIN (only a failed rank's garbage) counts as
     * INT64_MIN + 1: its negation must fit */
    for (int i = 0; i < n_sig; i++) {
        const int64_t s = sig[i] == INT64_MIN ? INT64_MIN + 1 : sig[i];
        buf[2 + i] = s, buf[2 + n_sig + i] = -s;
    }
    RA_MPI_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, 2 + 2 * n_sig, MPI_INT64_T, MPI_MAX, comm),
                     "MPI_Allreduce"));
    if (status != RA_OK) return status; /* its own sentence stands */
    if (buf[0] != RA_OK)
        return mpi_fail((ra_status)buf[0], "rank %d failed its checks (%s); its "
                        "ra_mpi_last_error() says why", (int)(size - buf[1]),
                        ra_status_string((ra_status)buf[0]));
    for (int i = 0; i < n_sig; i++)
        if (buf[2 + i] != -buf[2 + n_sig + i])
            return mpi_fail(RA_ERR_SHAPE, "the ranks disagree on the call: its size or option "
                            "%d is %lld on some rank and %lld on another", i,
                            (long long)-buf[2 + n_sig + i], (long long)buf[2 + i]);
    return RA_OK;
}

ra_tensor mpi_rows(const ra_tensor *t, int64_t s0, int64_t n)
{
    ra_tensor r = *t;
    r.data = (char *)t->data + (size_t)(s0 * t->stride[1]) * mpi_dtype_size(t->dtype);
    r.shape[1] = n;
    return r;
}

void mpi_options(ra_attention_options *o, const ra_attention_options *options)
{
    *o = ra_attention_options_init();
    size_t n = options->struct_size < sizeof *o ? options->struct_size : sizeof *o;
    memcpy(o, options, n);
    o->struct_size = sizeof *o;
}

size_t mpi_dtype_size(ra_dtype dtype) { return dtype == RA_F32 ? 4 : 2; }

int64_t mpi_sig_double(double x)
{
    if (x == 0) x = 0; /* -0.0 and 0.0: one value */
    int64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

int64_t mpi_hash(const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; p && i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
    return (int64_t)(h >> 2); /* >= 0: its negation is an int64 too */
}
