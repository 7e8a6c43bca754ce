/*
 * attention_sharded.c — attention_sharded.h: each rank's shard through the
 * layer across the ranks (ra_mpi_layer_forward ...), gathered on rank 0 by
 * one MPI_Gatherv (a row of dim floats one element).
 *
 *   X, Y: [B, S, dim]   rank r's part: [B, n_r, dim], rows
 *   rows[first[r] .. first[r + 1]) of every sequence, in that order
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attention_grads.h"
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

/* Rows rows[0 .. n) of every sequence of all [B, S, dim] into part [B, n, dim]. */
static void take_rows(float *part, const float *all, int64_t batch, int64_t seq,
                      const int64_t *rows, int64_t n, int64_t dim)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++)
            memcpy(part + (b * n + i) * dim, all + (b * seq + rows[i]) * dim,
                   (size_t)dim * sizeof *part);
}

/* Those rows' positions: --positions' ids ([components, B, n]), or
 * start_pos + row. */
static void take_positions(const attention_sharded_job *job, const int64_t *rows, int64_t n,
                           int64_t *ids)
{
    const int64_t B = job->batch, S = job->seq;
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

/* The gradients' sums over the ranks on rank 0, tensor by tensor in rank
 * order (the same bits every run); dsinks is skipped: the ring gives every
 * rank the whole sum already. */
static void sum_gradients(const attention_sharded_job *job, ra_hf_grads *g, float *buf)
{
    const float *sinks = ra_hf_grads_get(g)->dsinks;
    for (int64_t i = 0; i < ra_hf_layer_tensor_count(job->hf); i++) {
        /* g's own storage, which ra_hf_grads_tensor shows read-only */
        float *t = (float *)ra_hf_grads_tensor(g, i);
        if (t == sinks) continue;
        int64_t shape[8], count = 1;
        for (int d = 0, nd = ra_hf_layer_tensor_shape(job->hf, i, shape); d < nd; d++)
            count *= shape[d];
        if (cli_comm_rank() != 0) {
            MPI_Send(t, (int)count, MPI_FLOAT, 0, 1, MPI_COMM_WORLD);
            continue;
        }
        for (int r = 1; r < cli_comm_size(); r++) {
            MPI_Recv(buf, (int)count, MPI_FLOAT, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int64_t j = 0; j < count; j++) t[j] += buf[j];
        }
    }
}

/* The largest of the gradients' sizes (for sum_gradients' buffer), or -1
 * if one is beyond an MPI count. */
static int64_t largest_gradient(const ra_hf_layer *hf)
{
    int64_t most = 0;
    for (int64_t i = 0; i < ra_hf_layer_tensor_count(hf); i++) {
        int64_t shape[8], count = 1;
        for (int d = 0, nd = ra_hf_layer_tensor_shape(hf, i, shape); d < nd; d++)
            count *= shape[d];
        most = count > INT_MAX ? -1 : most < 0 || count < most ? most : count;
    }
    return most;
}

/* This rank's calls (packed_rows_call): each a ring over the ranks, on n
 * rows of their shards [n, shard, dim]. */
typedef struct shard_calls {
    const attention_sharded_job *job;
    ra_context *ctx;
    int64_t shard; /* this rank's tokens of a sequence */
    ra_hf_grads *g;
} shard_calls;

/* attention_grads_rows across the ranks.  A tape that could not be made
 * is NULL, which the training forward refuses on every rank. */
static ra_status train_shard(const shard_calls *c, const ra_mpi_sequence *s, int64_t n,
                             const float *x, const float *dy, const ra_positions *positions,
                             const ra_attention_options *attention, int accumulate, float *y,
                             float *dx)
{
    const ra_layer *layer = c->job->layer;
    ra_layer_grads grads = *ra_hf_grads_get(c->g);
    grads.accumulate = accumulate;
    ra_layer_tape *tape = NULL;
    const ra_status made = ra_layer_tape_create(&tape, layer, n * c->shard);
    ra_status status = ra_mpi_layer_forward_train(c->ctx, s, layer, y, tape, x, n, c->shard,
                                                  positions, attention);
    if (status == RA_OK) status = ra_mpi_layer_backward(c->ctx, s, layer, dx, &grads, tape, dy);
    ra_layer_tape_destroy(tape);
    return made != RA_OK ? made : status;
}

static ra_status shard_rows(void *arg, int64_t n, const float *x, const float *dy,
                            const int64_t *ids, const ra_attention_options *options,
                            int accumulate, float *y, float *dx)
{
    const shard_calls *c = arg;
    const attention_sharded_job *job = c->job;
    ra_mpi_sequence s;
    ra_status status = ra_mpi_sequence_init(&s, MPI_COMM_WORLD, job->seq);
    ra_positions positions = positions_of_ids(ids, job->components, 0);
    /* the whole sequence's padding or documents: the sequence's */
    s.padding_mask = options->padding_mask;
    s.cu_seqlens = options->cu_seqlens;
    s.n_documents = options->n_documents;
    ra_attention_options attention = *options;
    attention.padding_mask = NULL;
    attention.cu_seqlens = NULL;
    attention.n_documents = 0;
    if (status != RA_OK) return status;
    if (!dy) return ra_mpi_layer_forward(c->ctx, &s, job->layer, y, x, n, c->shard, &positions,
                                         &attention);
    return train_shard(c, &s, n, x, dy, &positions, &attention, accumulate, y, dx);
}

/* This rank's forward (and with DY its training forward and backward) of
 * its shard [B, n, dim]. */
static ra_status run_shard(const attention_sharded_job *job, ra_context *ctx, int64_t n,
                           const float *x, const int64_t *ids, float *y, const float *dy,
                           float *dx, ra_hf_grads *g)
{
    shard_calls calls = {job, ctx, n, g};
    const int64_t dim = ra_layer_get_config(job->layer)->dim;
    return packed_rows_run(job->packed, job->batch, n, dim, job->components, x, dy, ids,
                           job->attention, y, dx, shard_rows, &calls);
}

int attention_sharded_run(const attention_sharded_job *job, ra_context *ctx)
{
    const int rank = cli_comm_rank(), grads = job->dy != NULL;
    const int64_t B = job->batch, S = job->seq, dim = ra_layer_get_config(job->layer)->dim;
    layout l = {0};
    float *x = NULL, *y_part = NULL, *y = NULL, *buf = NULL;
    float *dy = NULL, *dx_part = NULL, *dx = NULL, *sum_buf = NULL;
    ra_hf_grads *g = NULL;
    int64_t *ids = NULL, n = 0, most = grads ? largest_gradient(job->hf) : 0;
    int failed = layout_make(&l, S);
    if (!failed && (B * S > INT_MAX || most < 0))
        failed = cli_fail(EXIT_FAIL, "attention: %s more than one MPI message counts (INT_MAX)",
                          most < 0 ? "a gradient's elements are" : "the tokens are");
    if (!failed) {
        n = l.first[rank + 1] - l.first[rank];
        const size_t part = (size_t)(B * n * dim) * sizeof(float);
        const size_t all = (size_t)(B * S * dim) * sizeof(float);
        x = malloc(part), y_part = malloc(part);
        ids = malloc((size_t)(job->components * B * n) * sizeof *ids);
        if (rank == 0) y = malloc(all), buf = malloc(all);
        if (grads) {
            dy = malloc(part), dx_part = malloc(part);
            sum_buf = malloc((size_t)most * sizeof(float) + 1);
            if (rank == 0) dx = malloc(all);
        }
        int lacking = !x || !y_part || !ids || (rank == 0 && (!y || !buf));
        lacking |= grads && (!dy || !dx_part || !sum_buf || (rank == 0 && !dx) ||
                             ra_hf_grads_create(&g, job->hf) != RA_OK);
        if (lacking) failed = cli_fail(EXIT_FAIL, "out of memory for rank %d's shard", rank);
    }
    /* from here on every rank takes part in the ring, or none does */
    failed = cli_comm_agree(failed);
    if (!failed) {
        const int64_t *rows = l.rows + l.first[rank];
        take_rows(x, job->x->data, B, S, rows, n, dim);
        if (grads) take_rows(dy, job->dy->data, B, S, rows, n, dim);
        take_positions(job, rows, n, ids);
        ra_status status = run_shard(job, ctx, n, x, ids, y_part, dy, dx_part, g);
        if (status != RA_OK)
            failed = cli_fail_status_detail(status, grads ? "attention training forward and "
                                                            "backward across ranks failed"
                                                          : "attention forward across ranks "
                                                            "failed", ra_mpi_last_error());
    }
    failed = cli_comm_agree(failed);
    if (!failed) {
        gather(&l, y, buf, y_part, B, S, dim);
        if (grads) {
            gather(&l, dx, buf, dx_part, B, S, dim);
            sum_gradients(job, g, sum_buf);
        }
        attention_grads_job write = {.layer = job->hf, .x = job->x, .dy = job->dy, .batch = B,
                                     .seq = S, .outputs = job->outputs, .quiet = 1};
        if (rank == 0 && grads)
            failed = attention_grads_write(&write, y, dx, g);
        else if (rank == 0 &&
                 !(failed = cli_outputs_write_npy(job->outputs, 0, y, job->x->ndim,
                                                  job->x->shape)))
            failed = cli_outputs_commit(job->outputs);
    }
    ra_hf_grads_destroy(g);
    free(sum_buf), free(dx), free(dx_part), free(dy);
    free(buf), free(y), free(ids), free(y_part), free(x);
    layout_free(&l);
    return failed;
}

int64_t attention_sharded_capacity(int64_t seq, int64_t prefill)
{
    const int64_t R = cli_comm_size(), r = cli_comm_rank();
    const int64_t capacity =
        prefill * (r + 1) / R - prefill * r / R + (r == R - 1 ? seq - prefill : 0);
    return capacity ? capacity : 1; /* a rank without a token of a short prompt */
}

int attention_sharded_cached(ra_context *ctx, int64_t seq, const ra_layer *layer,
                             ra_kv_cache *cache, float *y, const float *x, int64_t batch,
                             int64_t n, const ra_positions *positions)
{
    ra_mpi_sequence s;
    ra_mpi_sequence_init(&s, MPI_COMM_WORLD, seq); /* seq >= 1: no failure */
    const ra_status status =
        ra_mpi_layer_forward_cached(ctx, &s, layer, cache, y, x, batch, n, positions);
    if (status == RA_OK) return 0;
    return cli_fail_status_detail(status, "attention forward through the KV cache failed",
                                  ra_mpi_last_error());
}
