/*
 * attention_sharded.c — attention_sharded.h: each rank's shard through the
 * layer with ra_mpi_engine, gathered on rank 0 by one MPI_Gatherv (a row of
 * dim floats one element).
 *
 *   X, Y: [B, S, dim]   rank r's part: [B, n_r, dim], rows
 *   rows[first[r] .. first[r + 1]) of every sequence, in that order
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attention_sharded.h"
#include "cli.h"
#include "comm.h"
#include "rope_cli.h"
#include "ropeattn_mpi.h"

/* Every rank's rows of a sequence (ra_mpi_zigzag_positions), in rank order. */
typedef struct layout {
    int64_t *rows;  /* [S] */
    int64_t *first; /* [P + 1]: rank r's rows start at rows + first[r] */
} layout;

static void layout_free(layout *l)
{
    free(l->rows);
    free(l->first);
}

static int layout_make(layout *l, int64_t seq)
{
    const int P = cli_comm_size();
    l->rows = malloc((size_t)seq * sizeof *l->rows);
    l->first = malloc((size_t)(P + 1) * sizeof *l->first);
    if (!l->rows || !l->first) return cli_fail(EXIT_FAIL, "out of memory for the shards' rows");
    l->first[0] = 0;
    for (int r = 0; r < P; r++) {
        int64_t start[2], count[2];
        if (ra_mpi_zigzag(seq, P, r, start, count) != RA_OK)
            return cli_fail(EXIT_FAIL, "attention: %lld tokens a sequence over %d ranks: %s",
                            (long long)seq, P, ra_mpi_last_error());
        l->first[r + 1] = l->first[r] + count[0] + count[1];
        ra_mpi_zigzag_positions(seq, P, r, 1, count[0] + count[1], l->rows + l->first[r]);
    }
    return 0;
}

/* This rank's X rows and their positions: --positions' ids of those rows
 * ([components, B, n]), or start_pos + row. */
static void take_shard(const attention_sharded_job *job, const int64_t *rows, int64_t n,
                       int64_t dim, float *x, int64_t *ids)
{
    const int64_t B = job->batch, S = job->seq;
    const float *all = job->x->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < n; i++)
            memcpy(x + (b * n + i) * dim, all + (b * S + rows[i]) * dim, (size_t)dim * sizeof *x);
    for (int64_t c = 0; c < job->components; c++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < n; i++)
                ids[(c * B + b) * n + i] = job->ids ? job->ids[(c * B + b) * S + rows[i]]
                                                    : job->start_pos + rows[i];
}

/* Y [B, S, dim] on rank 0 from every rank's part; buf: rank 0's [B S, dim]. */
static void gather(const layout *l, float *y, float *buf, const float *part, int64_t batch,
                   int64_t seq, int64_t dim)
{
    const int P = cli_comm_size(), rank = cli_comm_rank();
    MPI_Datatype row;
    MPI_Type_contiguous((int)dim, MPI_FLOAT, &row);
    MPI_Type_commit(&row);
    int *counts = NULL, *displs = NULL;
    if (rank == 0) {
        counts = malloc((size_t)P * sizeof *counts);
        displs = malloc((size_t)P * sizeof *displs);
        for (int r = 0; r < P; r++) {
            counts[r] = (int)(batch * (l->first[r + 1] - l->first[r]));
            displs[r] = (int)(batch * l->first[r]);
        }
    }
    const int n = (int)(batch * (l->first[rank + 1] - l->first[rank]));
    MPI_Gatherv(part, n, row, buf, counts, displs, row, 0, MPI_COMM_WORLD);
    MPI_Type_free(&row);
    for (int r = 0; rank == 0 && r < P; r++) {
        const int64_t m = l->first[r + 1] - l->first[r], *rows = l->rows + l->first[r];
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < m; i++)
                memcpy(y + (b * seq + rows[i]) * dim, buf + (batch * l->first[r] + b * m + i) * dim,
                       (size_t)dim * sizeof *y);
    }
    free(counts);
    free(displs);
}

int attention_sharded_run(const attention_sharded_job *job, ra_context *ctx)
{
    const int rank = cli_comm_rank();
    const int64_t B = job->batch, S = job->seq, dim = ra_layer_get_config(job->layer)->dim;
    layout l = {0};
    float *x = NULL, *y_part = NULL, *y = NULL, *buf = NULL;
    int64_t *ids = NULL, n = 0;
    int failed = layout_make(&l, S);
    if (!failed && B * S > INT_MAX)
        failed = cli_fail(EXIT_FAIL, "attention: %lld tokens are more than one MPI message "
                          "counts (INT_MAX)", (long long)(B * S));
    if (!failed) {
        n = l.first[rank + 1] - l.first[rank];
        x = malloc((size_t)(B * n * dim) * sizeof *x);
        y_part = malloc((size_t)(B * n * dim) * sizeof *y_part);
        ids = malloc((size_t)(job->components * B * n) * sizeof *ids);
        if (rank == 0) {
            y = malloc((size_t)(B * S * dim) * sizeof *y);
            buf = malloc((size_t)(B * S * dim) * sizeof *buf);
        }
        if (!x || !y_part || !ids || (rank == 0 && (!y || !buf)))
            failed = cli_fail(EXIT_FAIL, "out of memory for rank %d's shard", rank);
    }
    /* from here on every rank takes part in the ring, or none does */
    failed = cli_comm_agree(failed);
    ra_mpi_engine engine;
    ra_status status = RA_OK;
    if (!failed) {
        take_shard(job, l.rows + l.first[rank], n, dim, x, ids);
        ra_positions positions = positions_of_ids(ids, job->components, 0);
        ra_attention_options attention = job->attention;
        attention.engine = &engine.engine;
        status = ra_mpi_engine_init(&engine, MPI_COMM_WORLD, S);
        if (status == RA_OK)
            status = ra_layer_forward(job->layer, ctx, y_part, x, B, n, &positions, &attention);
        if (status != RA_OK)
            failed = cli_fail_status(status, "attention forward across ranks failed");
    }
    failed = cli_comm_agree(failed);
    if (!failed) {
        gather(&l, y, buf, y_part, B, S, dim);
        if (rank == 0 && !(failed = cli_outputs_write_npy(job->outputs, 0, y, job->x->ndim,
                                                          job->x->shape)))
            failed = cli_outputs_commit(job->outputs);
    }
    free(buf);
    free(y);
    free(ids);
    free(y_part);
    free(x);
    layout_free(&l);
    return failed;
}

const ra_attention_engine *attention_sharded_engine(int64_t seq, int64_t prefill,
                                                    int64_t *capacity)
{
    static ra_mpi_engine engine;
    const int64_t R = cli_comm_size(), r = cli_comm_rank();
    *capacity = prefill * (r + 1) / R - prefill * r / R + (r == R - 1 ? seq - prefill : 0);
    if (*capacity == 0) *capacity = 1; /* a rank without a token of a short prompt */
    ra_mpi_engine_init(&engine, MPI_COMM_WORLD, seq); /* seq >= 1: no failure */
    return &engine.engine;
}
