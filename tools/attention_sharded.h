/*
 * attention_sharded.h — `ropeattn attention` across the P ranks of an MPI
 * launch (tools/mpi/attention_sharded.c, built with Open MPI): every rank
 * reads the same files and runs the layer on its zig-zag shard of each
 * sequence (ra_mpi_layer_forward: ring attention, with --attention-mask's padding
 * or --packed's documents of the whole sequence, one ring per group of rows
 * that start documents alike), and rank 0 gathers Y and
 * writes it; with --grads also each rank's dL/dX rows and the sums of the
 * ranks' weight gradients (ring backward); with --prefill every rank's KV cache holds a shard of each
 * sequence, and each step's y, the same on every rank, comes from
 * sharded decoding (ra_mpi_layer_forward_cached).  Y is the one-process Y within float32
 * rounding.
 */
#ifndef RA_TOOLS_ATTENTION_SHARDED_H
#define RA_TOOLS_ATTENTION_SHARDED_H

#include "attention_masks.h"
#include "ropeattn_io.h"
#include "outputs.h"
#include "ropeattn_hf.h"

typedef struct attention_sharded_job {
    const ra_hf_layer *hf;          /* the checkpoint's layer (the gradients' names) */
    const ra_layer *layer;          /* its ra_layer */
    const ra_npy *x;                /* [B, S, dim] or [S, dim], float32, whole */
    const ra_npy *dy;               /* --grad-output, X's shape, or NULL: no --grads */
    int64_t batch, seq;
    const int64_t *ids;             /* --positions as [components, B, S], or NULL:
                                       start_pos + s */
    int components;
    int64_t start_pos;
    ra_attention_options attention; /* the path, and the padding */
    const packed_rows *packed;      /* --packed's documents, or NULL */
    cli_outputs *outputs;           /* Y (and G): written by rank 0 */
} attention_sharded_job;

/* Runs the shards and writes Y on rank 0, committing it; on failure prints
 * one message (the lowest failing rank's) and returns EXIT_FAIL on every
 * rank.  A collective: every rank calls it. */
int attention_sharded_run(const attention_sharded_job *job, ra_context *ctx);

/* --prefill P across the ranks: the tokens this rank's cache must hold
 * (sequences of seq tokens): its share of the P-token prompt, and on the
 * last rank every later token (ropeattn_mpi.h: how the ranks place
 * them). */
int64_t attention_sharded_capacity(int64_t seq, int64_t prefill);

/* One cached step of n tokens across the ranks (ra_mpi_layer_forward_cached
 * over sequences of seq tokens): 0, or on failure one message (the
 * exit code). */
int attention_sharded_cached(ra_context *ctx, int64_t seq, const ra_layer *layer,
                             ra_kv_cache *cache, float *y, const float *x, int64_t batch,
                             int64_t n, const ra_positions *positions);

#endif
