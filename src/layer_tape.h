/*
 * layer_tape.h — the tape's insides, shared by layer_train.c (which fills
 * it), layer_backward.c and layer_mla_backward.c (which read it) (internal).
 */
#ifndef RA_LAYER_TAPE_H
#define RA_LAYER_TAPE_H

#include "layer_internal.h"

struct ra_layer_tape {
    const ra_layer *layer;
    uint64_t layer_serial;  /* layer->serial: the layer at that address is the tape's */
    int64_t max_tokens;
    float *activations;     /* xq | xk | xv | attn | lse (| gate: gated_output),
                               sized for max_tokens */
    int64_t *ids, *starts;  /* [3 * max_tokens] (ids or 3-D ids), [max_tokens]:
                               copies of the call's positions */
    uint8_t *padding;       /* [max_tokens]: a copy of its padding_mask */
    int64_t *cu_seqlens;    /* [max_tokens + 1]: a copy of its documents */
    /* the recorded forward */
    int filled;             /* 1 once a forward has completed */
    int steps;              /* unfinished public steps holding it (a training step
                               writes it, a backward step reads it): no training
                               forward over it meanwhile */
    int destroyed;          /* ra_layer_tape_destroy came while steps held it: the
                               last of them frees it (ra_layer_tape_release) */
    ra_layer_call call;     /* its pos and attn point at the copies above */
    const float *x;         /* borrowed */
};

/* A step's hold on tape ended: frees it when it was destroyed meanwhile
 * and no other step holds it (layer_train.c). */
void ra_layer_tape_release(ra_layer_tape *tape);

/* Whether tape was made for layer (not for another one, nor for a
 * destroyed layer whose address layer took). */
static inline int ra_layer_tape_is_for(const ra_layer_tape *tape, const ra_layer *layer)
{
    return tape->layer == layer && tape->layer_serial == layer->serial;
}

/* The tape's activations, as views. */
typedef struct ra_layer_tape_views {
    ra_tensor xq, xk, xv, attn; /* [B, S, H or Hkv, D] */
    float *lse;                 /* [B, H, S] */
    float *gate;                /* [B, S, H * D] (gated_output), before the sigmoid */
} ra_layer_tape_views;

/* The tape's activations as views for its recorded call's shape. */
static inline ra_layer_tape_views ra_layer_tape_views_of(const ra_layer_tape *tape)
{
    const ra_layer_config *c = &tape->layer->config;
    const int64_t B = tape->call.batch, S = tape->call.seq, H = c->n_heads;
    const int64_t Hkv = c->n_kv_heads, D = c->head_dim, n_q = tape->call.n_q;
    const int64_t n_kv = tape->call.tokens * Hkv * D;
    float *buf = tape->activations;
    ra_layer_tape_views v;
    v.xq = ra_tensor_4d(buf, RA_F32, B, S, H, D);
    v.xk = ra_tensor_4d(buf + n_q, RA_F32, B, S, Hkv, D);
    v.xv = ra_tensor_4d(buf + n_q + n_kv, RA_F32, B, S, Hkv, D);
    v.attn = ra_tensor_4d(buf + n_q + 2 * n_kv, RA_F32, B, S, H, D);
    v.lse = buf + 2 * n_q + 2 * n_kv;
    v.gate = v.lse + tape->call.tokens * H;
    return v;
}

/* A step's q, k, v, out and lse: the tape's (its views v). */
static inline void ra_layer_tape_step_views(ra_layer_step_views *step,
                                            const ra_layer_tape_views *v)
{
    step->q = v->xq;
    step->k = v->xk;
    step->v = v->xv;
    step->out = v->attn;
    step->lse = v->lse;
}

#endif
