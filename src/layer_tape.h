/*
 * layer_tape.h — the tape's insides, shared by layer_train.c (which fills
 * it) and layer_backward.c (which reads it) (internal).
 */
#ifndef RA_LAYER_TAPE_H
#define RA_LAYER_TAPE_H

#include "layer_internal.h"

struct ra_layer_tape {
    const ra_layer *layer;
    int64_t max_tokens;
    float *activations;     /* xq | xk | xv | attn | lse (| gate: gated_output),
                               sized for max_tokens */
    int64_t *ids, *starts;  /* [3 * max_tokens] (ids or 3-D ids), [max_tokens]:
                               copies of the call's positions */
    uint8_t *padding;       /* [max_tokens]: a copy of its padding_mask */
    int64_t *cu_seqlens;    /* [max_tokens + 1]: a copy of its documents */
    /* the recorded forward */
    int filled;             /* 1 once a forward has completed */
    ra_layer_call call;     /* its pos and attn point at the copies above */
    const float *x;         /* borrowed */
};

/* The tape's activations as views for its recorded call's shape. */
typedef struct ra_layer_tape_views {
    ra_tensor xq, xk, xv, attn; /* [B, S, H or Hkv, D] */
    float *lse;                 /* [B, H, S] */
    float *gate;                /* [B, S, H * D] (gated_output), before the sigmoid */
} ra_layer_tape_views;

ra_layer_tape_views ra_layer_tape_views_of(const ra_layer_tape *tape);

#endif
