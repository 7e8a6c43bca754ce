/*
 * agree.c — one MPI_Allreduce that makes every rank of a call reach the
 * same verdict on its arguments before any other traffic (and a view
 * helper the calls share).
 *
 *   buffer [2 + 2 n_sig] int64, reduced by MPI_MAX: status, the lowest
 *   failing rank as size - rank (0: none), sig[n_sig], ~sig[n_sig] (so the
 *   maximum is ~ the minimum: ~x = -x - 1 fits for every int64)
 *
 * When the ranks disagree, three more collectives, on that path only, find
 * the lowest rank whose value of the first argument that differs is not
 * rank 0's, and that value.
 */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"

/* x with the fewest digits that read back as x (as a float: single); a
 * whole number below 2^53 in full (30, not %g's 3e+01). */
static void shortest(char *buf, size_t len, double x, int single)
{
    if (x == floor(x) && fabs(x) < 0x1p53) {
        snprintf(buf, len, "%.0f", x);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, x);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)x : back == x) return;
    }
}

/* A value of a signature, as its kind reads. */
static void describe(const mpi_sig *s, int64_t value, char *buf, size_t len)
{
    double d;
    memcpy(&d, &value, sizeof d);
    switch (s->kind) {
    case MPI_SIG_DOUBLE:
    case MPI_SIG_FLOAT:
        shortest(buf, len, d, s->kind == MPI_SIG_FLOAT);
        break;
    case MPI_SIG_UINT64:
        snprintf(buf, len, "%llu", (unsigned long long)value);
        break;
    case MPI_SIG_DTYPE:
        snprintf(buf, len, "%s", value == RA_F32 ? "float32" : value == RA_F16 ? "float16"
                                 : value == RA_BF16 ? "bfloat16" : "another dtype");
        break;
    case MPI_SIG_ARRAY:
        snprintf(buf, len, "%s", value ? "set" : "NULL");
        break;
    default:
        snprintf(buf, len, "%lld", (long long)value);
    }
}

/* Names argument s (the first that differs) and the lowest rank whose
 * value differs from rank 0's, with both values (an array's contents:
 * that they differ): RA_ERR_SHAPE.  Every rank calls it. */
static ra_status disagree(MPI_Comm comm, int rank, int size, const mpi_sig *s)
{
    int64_t first = s->value, other = s->value;
    int differs = size;
    RA_MPI_TRY(mpi_check(MPI_Bcast(&first, 1, MPI_INT64_T, 0, comm), "MPI_Bcast"));
    int mine = s->value != first ? rank : size;
    RA_MPI_TRY(mpi_check(MPI_Allreduce(&mine, &differs, 1, MPI_INT, MPI_MIN, comm),
                         "MPI_Allreduce"));
    RA_MPI_TRY(mpi_check(MPI_Bcast(&other, 1, MPI_INT64_T, differs, comm), "MPI_Bcast"));
    if (s->kind == MPI_SIG_ARRAY && first && other)
        return mpi_fail(RA_ERR_SHAPE, "the ranks disagree on the call: %s differs on rank %d "
                        "from rank 0's (every rank must give the same values)", s->name,
                        differs);
    char a[64], b[64];
    describe(s, first, a, sizeof a);
    describe(s, other, b, sizeof b);
    return mpi_fail(RA_ERR_SHAPE, "the ranks disagree on the call: %s is %s on rank 0 and %s "
                    "on rank %d", s->name, a, b, differs);
}

ra_status mpi_agree(MPI_Comm comm, ra_status status, const mpi_sig *sig, int n_sig)
{
    int size = 0, rank = 0;
    RA_MPI_TRY(mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
    /* on the stack: a rank out of memory still takes part, with as many
     * values as the others */
    int64_t buf[2 + 2 * RA_MPI_MAX_SIG] = {0};
    buf[0] = status;
    buf[1] = status != RA_OK ? size - rank : 0;
    for (int i = 0; i < n_sig; i++) buf[2 + i] = sig[i].value, buf[2 + n_sig + i] = ~sig[i].value;
    RA_MPI_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, 2 + 2 * n_sig, MPI_INT64_T, MPI_MAX, comm),
                     "MPI_Allreduce"));
    if (status != RA_OK) return status; /* its own sentence stands */
    if (buf[0] != RA_OK)
        return mpi_fail((ra_status)buf[0], "rank %d failed its checks (%s); its "
                        "ra_mpi_last_error() says why", (int)(size - buf[1]),
                        ra_status_string((ra_status)buf[0]));
    for (int i = 0; i < n_sig; i++)
        if (buf[2 + i] != ~buf[2 + n_sig + i]) return disagree(comm, rank, size, &sig[i]);
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
