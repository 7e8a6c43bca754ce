/*
 * layer_mla.h — multi-head latent attention (DeepSeek-V2 and V3), the
 * layer kind of ra_layer_config.kv_lora_rank > 0: its checks, projections
 * and forwards (layer_mla.c), its training forward and backward
 * (layer_mla_backward.c) (internal).
 *
 * Inside, each head of q and k is laid out as transformers lays it out,
 * [nope (Dn) | rope (Dr)], and v is padded to the q/k head size D = Dn + Dr
 * with zeros, so that the attention kernels (one head size) run it
 * unchanged: the padding's outputs are 0 and are dropped before wo.
 */
#ifndef RA_LAYER_MLA_H
#define RA_LAYER_MLA_H

#include "layer_internal.h"

/* The sizes, as transformers names them. */
typedef struct ra_mla_dims {
    int64_t dim, H, D, Dn, Dr, Dv, r, rq; /* r: kv_lora_rank, rq: q_lora_rank */
    int64_t Kq; /* wq_b's input: rq, or 2 rq (q_b_raw_latent); wq's: dim */
    int64_t G;  /* the output gate's scratch per token: H Dv (gated_output), or 0 */
} ra_mla_dims;

static inline ra_mla_dims ra_mla_dims_of(const ra_layer_config *c)
{
    return (ra_mla_dims){c->dim, c->n_heads, c->head_dim, c->qk_nope_head_dim,
                         c->head_dim - c->qk_nope_head_dim, c->v_head_dim, c->kv_lora_rank,
                         c->q_lora_rank,
                         c->q_lora_rank ? c->q_lora_rank * (c->q_b_raw_latent ? 2 : 1) : c->dim,
                         c->gated_output ? c->n_heads * c->v_head_dim : 0};
}

/* The gate's rows per head in wq_b (or wq): Dv where the gate is there
 * (gated_output without wgate: A.X-K2's q_gate_proj), else 0. */
static inline int64_t ra_mla_gate_rows(const ra_layer_config *c, const ra_layer_weights *w)
{
    return c->gated_output && !w->wgate ? c->v_head_dim : 0;
}

/* ra_layer_create's checks of a latent layer's config and weights (the
 * config not yet resolved); sets n_kv_heads to n_heads and the rope's
 * head_dim and rotary_dim to Dr.  A layer that is not latent: its weights
 * must not hold latent ones. */
ra_status ra_mla_resolve(ra_layer_config *c, const ra_layer_weights *w, ra_rope_config *rope);

/* The forwards of a latent layer, called by the public functions after
 * their checks (call checked by ra_layer_check_call). */
ra_status ra_mla_forward(const ra_layer *layer, ra_context *ctx, float *y, const float *x,
                         const ra_layer_call *call);
ra_status ra_mla_forward_train(const ra_layer *layer, ra_context *ctx, float *y,
                               ra_layer_tape *tape, const float *x);
ra_status ra_mla_forward_cached(const ra_layer *layer, ra_context *ctx, ra_kv_cache *cache,
                                float *y, const float *x, int64_t batch, int64_t seq,
                                const ra_positions *positions);
ra_status ra_mla_backward(const ra_layer *layer, ra_context *ctx, float *dx,
                          const ra_layer_grads *grads, const ra_layer_tape *tape,
                          const float *dy);

/* Scratch floats of ra_mla_project for T tokens; -1 when they overflow. */
int64_t ra_mla_project_floats(const ra_mla_dims *d, int64_t T);

/* x [B, S, dim] -> q, k, v [B, S, H, D] (q times ra_layer_q_factor and
 * ra_layer_temperature's factor at its position, q's and
 * k's rope parts rotated at pos; k NULL: k and v not computed), the gate
 * [T, H Dv] where it is in wq_b's rows (ra_mla_gate_rows; gate untouched
 * otherwise), and in scratch (ra_mla_project_floats):
 * the latent after kv_a_norm, c [T, r], then the rotated shared key, kr
 * [T, Dr], at scratch's start (read by the cached forward).  Fails only
 * where RoPE refuses the positions (checked before: not reached). */
ra_status ra_mla_project(const ra_layer *layer, ra_context *ctx, float *q, float *k, float *v,
                         float *gate, const float *x, int64_t batch, int64_t seq,
                         const ra_positions *pos, float *scratch);

/* The q latent as wq_b reads it, from qa [T, rq] (the latent before its
 * norm), normed in place: qa itself, or (q_b_raw_latent) in [T, 2 rq] =
 * [q_a_norm(qa) | qa] (q_gate_proj(cat([q_resid, q_compressed]))). */
const float *ra_mla_q_input(const ra_layer *layer, float *qa, float *in, int64_t T);

/* y = wo(attn's first Dv features of each head) (+ bo), through packed
 * [T, H * Dv] (scratch), gated where the layer has gated_output (its gate
 * [T, G], bgate in: from x [T, dim] into gate, with wgate, kept for a
 * backward; else ra_mla_project's, there already).  attn: [T, H, D] */
void ra_mla_output(const ra_layer *layer, float *y, const float *attn, const float *x,
                   float *gate, int64_t T, float *packed);

/* out [T, n] = a [T, k] w [n, k]^T + b (b NULL: none). */
void ra_mla_linear(float *out, const float *a, const float *w, const float *b, int64_t T,
                   int64_t n, int64_t k);

/* A view of the rope part [Dn, D) of every head of a [B, S, heads, D]
 * array. */
/* x[0, n) *= scale, unless scale is 0 or 1 (ra_layer_config's latent scales). */
void ra_mla_scale(float *x, int64_t n, double scale);

ra_tensor ra_mla_rope_part(float *a, int64_t B, int64_t S, int64_t heads, const ra_mla_dims *d);

/* v's rows [T, H, D] packed to [T, H * Dv], and back (the padding zeroed). */
void ra_mla_pack(float *packed, const float *v, int64_t T, const ra_mla_dims *d);
void ra_mla_unpack(float *v, const float *packed, int64_t T, const ra_mla_dims *d);

#endif
