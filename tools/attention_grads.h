/*
 * attention_grads.h — the training side of `ropeattn attention`: with
 * --grad-output DY.npy --grads G.safetensors, the layer runs its training
 * forward (dropout 0, so Y is the inference Y) and its backward for
 * L = sum(Y * DY), and G gets dL/dX as tensor "x" and the gradient of each
 * projection's weight and bias under its own name in the checkpoint, as F32.
 */
#ifndef RA_TOOLS_ATTENTION_GRADS_H
#define RA_TOOLS_ATTENTION_GRADS_H

#include "attention_masks.h"
#include "ropeattn_io.h"
#include "ropeattn_hf.h"
#include "outputs.h"
#include "progress.h"

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
    const int64_t *ids;               /* --positions as [components, B, S], or NULL:
                                         start_pos + s */
    int components;
    int64_t start_pos;
    ra_attention_options attention; /* the path, and the call's padding */
    const packed_rows *packed;      /* --packed's documents, or NULL */
    cli_outputs *outputs;
    int quiet; /* no progress line */
} attention_grads_job;

/* The training forward and backward of n rows [n, seq, dim]: y, dx = dL/dx
 * and the weights' gradients into g (added to what g holds with
 * accumulate); line (or NULL) counts done (the tokens of earlier forwards
 * and backwards) on, after the forward and after the backward. */
ra_status attention_grads_rows(ra_context *ctx, const ra_hf_layer *layer, const ra_hf_grads *g,
                               int64_t n, int64_t seq, const float *x, const float *dy,
                               const ra_positions *positions,
                               const ra_attention_options *attention, int accumulate, float *y,
                               float *dx, progress *line, int64_t *done);

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
