/*
 * zigzag.c — the zig-zag layout: seq tokens in 2P chunks, rank r holding
 * chunks r and 2P - 1 - r (ropeattn_mpi.h), and its rows' positions.
 */
#include "mpi/mpi_internal.h"

void mpi_chunks(int64_t seq, int n_ranks, int rank, int64_t start[2], int64_t count[2])
{
    /* chunk c: base tokens, one more for c < extra, in order */
    const int64_t chunks = 2 * (int64_t)n_ranks, base = seq / chunks, extra = seq % chunks;
    const int64_t c[2] = {rank, chunks - 1 - rank};
    for (int i = 0; i < 2; i++) {
        start[i] = c[i] * base + (c[i] < extra ? c[i] : extra);
        count[i] = base + (c[i] < extra);
    }
}

RA_MPI_API ra_status ra_mpi_zigzag(int64_t seq, int n_ranks, int rank, int64_t start[2],
                                   int64_t count[2])
{
    mpi_reset();
    if (!start || !count) return mpi_fail(RA_ERR_NULL, "%s is NULL", !start ? "start" : "count");
    if (n_ranks < 1 || seq < n_ranks)
        return mpi_fail(RA_ERR_SIZE, "seq %lld over %d ranks: each rank needs a token",
                        (long long)seq, n_ranks);
    if (rank < 0 || rank >= n_ranks)
        return mpi_fail(RA_ERR_ARGUMENT, "rank %d is not in [0, %d)", rank, n_ranks);
    mpi_chunks(seq, n_ranks, rank, start, count);
    return RA_OK;
}

RA_MPI_API ra_status ra_mpi_zigzag_positions(int64_t seq, int n_ranks, int rank, int64_t batch,
                                             int64_t n, int64_t *ids)
{
    int64_t start[2], count[2];
    RA_MPI_TRY(ra_mpi_zigzag(seq, n_ranks, rank, start, count));
    if (!ids) return mpi_fail(RA_ERR_NULL, "ids is NULL");
    if (batch < 1) return mpi_fail(RA_ERR_SIZE, "batch %lld", (long long)batch);
    if (n != count[0] + count[1])
        return mpi_fail(RA_ERR_SHAPE, "n is %lld; rank %d holds %lld rows", (long long)n, rank,
                        (long long)(count[0] + count[1]));
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < n; s++)
            ids[b * n + s] = s < count[0] ? start[0] + s : start[1] + s - count[0];
    return RA_OK;
}
