/*
 * ring_stats.h — where ra_mpi_attention's (and its backward's) time goes
 * (internal: for bench/mpi/bench_mpi.c, not installed).
 * mpi_attention_timed is ra_mpi_attention that also fills *stats for this
 * rank, mpi_attention_backward_timed ra_mpi_attention_backward; the library
 * measures with MPI_Wtime and prints nothing.
 */
#ifndef RA_MPI_RING_STATS_H
#define RA_MPI_RING_STATS_H

#include "ropeattn_mpi.h"

typedef struct mpi_ring_stats {
    double compute_s;   /* the blocks: ra_attention_block_lse and the merge (the
                           backward: ra_attention_block_backward) */
    double wait_s;      /* in MPI_Waitall after a step's blocks: exposed communication
                           (the backward: and the last hop's dK/dV) */
    double total_s;     /* the whole call, checks and agreement included */
    int64_t bytes_sent; /* K/V bytes this rank sent, over its P - 1 transfers (the
                           backward: and dK/dV bytes, over P) */
    int64_t blocks;     /* the blocks computed (a later chunk's are skipped) */
} mpi_ring_stats;

ra_status mpi_attention_timed(ra_context *ctx, MPI_Comm comm, const ra_tensor *out, float *lse,
                              const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                              int64_t seq, const ra_attention_options *options,
                              mpi_ring_stats *stats);

ra_status mpi_attention_backward_timed(ra_context *ctx, MPI_Comm comm, const ra_tensor *dq,
                                       const ra_tensor *dk, const ra_tensor *dv,
                                       const ra_tensor *dout, const ra_tensor *q,
                                       const ra_tensor *k, const ra_tensor *v,
                                       const ra_tensor *out, const float *lse, int64_t seq,
                                       const ra_attention_options *options,
                                       mpi_ring_stats *stats);

#endif
