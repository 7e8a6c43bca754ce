/*
 * train_model.h — the train demo's model, built around the library's
 * attention layer:
 *
 *   tokens [B, S] -> x = embed[tokens] [B, S, dim] -> y = layer(x) [B, S, dim]
 *   -> logits = y readout^T [B, S, V] -> cross-entropy against targets
 *
 * Its parameters live in one flat array (embedding [V, dim] | wq | wk | wv |
 * wo | read-out [V, dim]) and its gradients in another of the same layout,
 * so one optimizer step covers them all; the layer borrows its weights from
 * the array, so updates in place reach it.
 */
#ifndef RA_TOOLS_TRAIN_MODEL_H
#define RA_TOOLS_TRAIN_MODEL_H

#include <stdint.h>

#include "ropeattn.h"

typedef struct train_model_config {
    int64_t vocab, dim, n_heads, n_kv_heads;
    int no_rope;        /* the layer's no_rope: q and k not rotated */
    int64_t max_tokens; /* the most B * S per call */
} train_model_config;

typedef struct train_model {
    train_model_config config;
    int64_t n_params;
    float *params, *grads; /* [n_params] each, the layout above */
    ra_layer *layer;
    ra_layer_tape *tape;
    float *x, *y, *dy, *dx; /* [max_tokens, dim] */
    float *logits;          /* [max_tokens, V]; turned into dL/dlogits in place */
} train_model;

/* Weights drawn from seed as PyTorch's defaults would: embedding uniform with
 * unit variance, linear layers uniform in +-1/sqrt(in_features).  Nonzero
 * (after printing why) on failure; train_model_free then cleans up. */
int train_model_create(train_model *m, const train_model_config *config, uint64_t seed);
void train_model_free(train_model *m);

/* Mean cross-entropy over the tokens whose target is >= 0 (the others are
 * not scored), and how many of those the argmax gets right.  With backward
 * set, also fills m->grads with the loss's gradient (overwritten). */
typedef struct train_result {
    double loss;
    int64_t correct, scored;
} train_result;

ra_status train_model_run(train_model *m, ra_context *ctx, const int32_t *tokens,
                          const int32_t *targets, int64_t batch, int64_t seq, int backward,
                          train_result *result);

#endif
