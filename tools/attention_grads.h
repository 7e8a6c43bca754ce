/*
 * attention_grads.h — the training side of `ropeattn attention`: with
 * --grad-output DY.npy --grads G.safetensors, the layer runs its training
 * forward (dropout 0, so Y is the inference Y) and its backward for
 * L = sum(Y * DY), and G gets dL/dX as tensor "x" and the gradient of each
 * projection's weight and bias under its own name in the checkpoint, as F32.
 */
#ifndef RA_TOOLS_ATTENTION_GRADS_H
#define RA_TOOLS_ATTENTION_GRADS_H

#include "io/io.h"
#include "ropeattn_hf.h"
#include "outputs.h"

/* Checks that DY (already read from dy_path) is float32 of X's shape; on
 * failure prints one message and returns EXIT_FAIL. */
int attention_grads_check(const ra_npy *dy, const char *dy_path, const ra_npy *x,
                          const char *x_path);

/* What one run needs: the layer and how it was found, X and DY, where the
 * tokens sit, and the two outputs (Y first, then G). */
typedef struct attention_grads_job {
    const ra_hf_layer *layer;         /* and the checkpoint's names and shapes */
    const ra_npy *x, *dy;             /* [B, S, dim] or [S, dim], float32 */
    int64_t batch, seq;
    ra_positions positions;
    ra_attention_options attention; /* the path, and the call's padding or documents */
    cli_outputs *outputs;
    int quiet; /* no progress line */
} attention_grads_job;

/* Runs the training forward and the backward, then writes Y and G and
 * commits both, or neither.  On failure prints one message and returns
 * EXIT_FAIL. */
int attention_grads_run(const attention_grads_job *job, ra_context *ctx);

/* Writes Y and G (dL/dX, then g's tensors) and commits both, or neither
 * (across an MPI launch's ranks: rank 0, with the ranks' sums); on failure
 * prints one message and returns EXIT_FAIL. */
int attention_grads_write(const attention_grads_job *job, const float *y, const float *dx,
                          const ra_hf_grads *g);

#endif
