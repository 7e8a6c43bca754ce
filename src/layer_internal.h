/*
 * layer_internal.h — the layer object, shared by layer.c (creation, the
 * inference forwards), layer_train.c (the tape and the training forward)
 * layer_backward.c and layer_step.c (the phased calls) (internal).
 */
#ifndef RA_LAYER_INTERNAL_H
#define RA_LAYER_INTERNAL_H

#include <math.h>

#include "cpu/dropout.h"
#include "gemm.h"
#include "internal.h"
#include "parallel.h"

struct ra_layer {
    ra_layer_config config; /* n_kv_heads and head_dim resolved */
    ra_layer_weights weights;
    ra_rope *rope;          /* every angle 0 when config.no_rope */
    uint64_t serial;        /* this process's count of layers made before it: a tape
                               knows its layer by it (a later layer may take the
                               address of a destroyed one) */
    int holds;              /* the caller's (until ra_layer_destroy) and one per
                               unfinished public step (atomic): the last release
                               frees the layer */
};

/* A public step's hold on layer, from its begin to its finish or cancel
 * (a layer destroyed meanwhile lives until the last release). */
void ra_layer_hold(const ra_layer *layer);
void ra_layer_release(const ra_layer *layer);

/* The products' environment for a call of the layer: its weights' dtype,
 * ctx's threads, and (16-bit weights) the panel, acquired from ctx's
 * panel workspace (NULL ctx: allocated) into *panel, which the caller
 * releases.  rows: the most rows of x a product of the call has when all
 * its products are x w^T (a forward), 0 when some are not (a backward's
 * dy W); up to RA_GEMV16_ROWS need no panel (the GEMV reads the weights
 * in place).  The one failure, for memory, comes before anything is
 * computed. */
ra_status ra_layer_gemm_begin(const ra_layer *layer, ra_context *ctx, int64_t rows,
                              ra_scratch *panel, ra_gemm_env *env);

/* Floats that n weight elements of the layer's dtype take (for overlap
 * checks). */
static inline int64_t ra_layer_weight_floats(const ra_layer *layer, int64_t n)
{
    return layer->weights.dtype == RA_F32 ? n : (n + 1) / 2;
}

/* An array a layer call reads or writes, its size in floats and its name
 * (for overlap checks). */
typedef struct ra_layer_span {
    const float *p; /* NULL: none */
    int64_t n;
    const char *name;
} ra_layer_span;

/* The most weights a layer borrows (ra_layer_weight_spans). */
enum { RA_LAYER_SPANS = 18 };

/* The weights the layer borrows, in floats' worth of their dtype (NULL
 * where the layer has none); returns their count.  A latent attention
 * layer's come in the order of ra_layer_grads' latent gradients: dwq,
 * dwq_a, dbq_a, dq_a_norm, dwq_b, dwkv_a, dbkv_a, dkv_a_norm, dwkv_b, dwo,
 * dbo, dsinks, dwgate, dbgate, dk_rope_norm. */
int ra_layer_weight_spans(const ra_layer *layer, ra_layer_span spans[RA_LAYER_SPANS]);

/* RA_ERR_ARGUMENT ("y overlaps the layer's <weight>") where y's n
 * floats touch a weight the layer borrows: writing y would change what the
 * call, or the next one, reads. */
ra_status ra_layer_check_y_apart(const ra_layer *layer, const float *y, int64_t n);

/* One forward call's arguments, checked. */
typedef struct ra_layer_call {
    int64_t batch, seq, tokens;
    int64_t n_x, n_q;                /* tokens * dim, tokens * H * D */
    ra_positions pos;                /* never packed (cu_seqlens) */
    ra_attention_options attn;       /* path REFERENCE or FLASH; dropout 0
                                        unless training */
} ra_layer_call;

/* call's batch, seq, tokens, n_x and n_q, checked (RA_ERR_SIZE,
 * RA_ERR_OVERFLOW naming the size). */
ra_status ra_layer_call_sizes(const ra_layer *layer, int64_t batch, int64_t seq,
                              ra_layer_call *call);

/* The checks of ra_layer_forward and ra_layer_forward_train: pointers,
 * sizes, y apart from x, options, positions. */
ra_status ra_layer_check_call(const ra_layer *layer, const float *y, const float *x,
                              int64_t batch, int64_t seq, const ra_positions *positions,
                              const ra_attention_options *options, ra_layer_call *call);

/* ra_layer_config.max_document: RA_ERR_ARGUMENT, naming it, where call
 * has no documents or one longer.  max_keys and positions_are_slots
 * (neither: RA_OK at once): RA_ERR_UNSUPPORTED, naming it, where a query
 * of call (its masks: the layer's and the call's padding and documents)
 * attends to more keys, or where a real query's position (call->pos) is
 * not its index in its row. */
ra_status ra_layer_check_keys(const ra_layer *layer, const ra_layer_call *call);

/* max_keys for the n new queries of a cached or paged call's sequence
 * `id` (named `what`), whose cache holds `length` tokens before them:
 * query t attends to the tokens at indices length + t and before, within
 * the layer's window and chunk (all of them with positions_are_slots). */
ra_status ra_layer_check_new_keys(const ra_layer *layer, const char *what, int64_t id,
                                  int64_t length, int64_t n);

/* ra_layer_config.positions_are_slots for the n new queries of a cached or
 * paged call's sequence `id` (named `what`), row `row` of the call's
 * [rows, seq] positions pos (read; NULL: the cache's lengths on, RA_OK),
 * whose cache holds `length` tokens before them: RA_ERR_UNSUPPORTED,
 * naming it, where query t's position is not length + t. */
ra_status ra_layer_check_new_slots(const ra_layer *layer, const ra_positions *pos,
                                   const char *what, int64_t id, int64_t row, int64_t seq,
                                   int64_t length, int64_t n);

/* A layer with a 2-D (axial) rope (the vision towers, which attend over
 * the whole image at once) on a cached or paged call (named `what`):
 * RA_ERR_UNSUPPORTED; any other layer: RA_OK. */
ra_status ra_layer_refuse_axial(const ra_layer *layer, const char *what);

/* A layer call's options.non_causal (o: the caller's options, read): the
 * attn_mask is the call's whole mask, the layer's causal mask not applied
 * (its window only on the earlier keys, window_earlier_only: Gemma 3's
 * token_type_ids masks).  RA_OK without it (RA_ERR_ARGUMENT for an
 * attn_mask on a layer with config.whole_masks); with it, RA_ERR_ARGUMENT
 * without an attn_mask or on a non_causal layer, RA_ERR_UNSUPPORTED on a
 * layer with chunks. */
ra_status ra_layer_read_whole_mask(const ra_layer *layer, const ra_attention_options *o);

/* A layer with non_causal set on a cached or paged call (named `what`):
 * RA_ERR_UNSUPPORTED; any other layer: RA_OK. */
ra_status ra_layer_refuse_non_causal(const ra_layer *layer, const char *what);

/* max_keys or positions_are_slots in a call whose keys are not the
 * call's (a phased cached step): RA_ERR_UNSUPPORTED where the layer has
 * either, naming `what`. */
ra_status ra_layer_check_keys_elsewhere(const ra_layer *layer, const char *what);

/* A layer call in phases (ra_layer_step): what its begin checked, the
 * buffers it holds and what its finish needs.  The layer calls that
 * attend with the library's own functions run as steps too, on the
 * stack, with their buffers in ctx's workspaces (memory = ctx); a public
 * step (ra_calloc'ed) allocates its own (memory = NULL). */
typedef enum ra_step_kind {
    RA_STEP_FORWARD,
    RA_STEP_CACHED,
    RA_STEP_TRAIN,
    RA_STEP_BACKWARD
} ra_step_kind;

/* The backward step's buffers, in its scratch (layer_backward.c). */
typedef struct ra_layer_back {
    ra_layer_grads grads;                /* read */
    const float *dy;
    float *g;                            /* dy after resid_dropout [T, dim] */
    const float *o;                      /* wo's input [T, H D] */
    float *dgate, *do_norm, *dsinks;     /* the gate's [T, G], o_norm's [H D], sinks' [H] */
    float *gated;                        /* the gated output [T, H D], and v's scratch before it */
    int64_t floats;                      /* the scratch's */
} ra_layer_back;

struct ra_layer_step {
    ra_step_kind kind;
    const ra_layer *layer;
    ra_context *ctx;          /* the call's threads */
    ra_context *memory;       /* where the buffers come from (NULL: allocated) */
    ra_layer_call call;       /* forward and cached steps */
    float *y;                 /* y, or the backward's dx */
    const float *x;
    ra_layer_tape *tape;      /* training and backward steps (the backward's read only) */
    ra_scratch scratch, panel, o;
    ra_gemm_env mm;
    ra_layer_step_views views;
    ra_layer_back back;
};

/* The begins and finishes of each kind (*step zeroed but for kind, layer,
 * ctx and memory; a failed begin holds nothing).  Forward and cached:
 * layer_step.c; training: layer_train.c; backward: layer_backward.c. */
ra_status ra_layer_train_begin(ra_layer_step *step, float *y, ra_layer_tape *tape,
                               const float *x, int64_t batch, int64_t seq,
                               const ra_positions *positions,
                               const ra_attention_options *options);
void ra_layer_train_finish(ra_layer_step *step);
ra_status ra_layer_back_begin(ra_layer_step *step, float *dx, const ra_layer_grads *grads,
                              const ra_layer_tape *tape, const float *dy);
void ra_layer_back_finish(ra_layer_step *step);

/* Releases the step's buffers (any kind, any of them held or not; layer.c,
 * as ra_layer_step_gemm: the steps' files call it, it calls none of them). */
void ra_layer_step_release(ra_layer_step *step);

/* The step's own GEMM environment: threads from its ctx, the panel from
 * its memory. */
ra_status ra_layer_step_gemm(ra_layer_step *step, int64_t rows);

/* One of the q, k and v projections as the layer reads it: `groups` blocks
 * of `rows` weight rows, block g at w + g * stride * dim (its bias at b + g
 * * stride; b NULL: none), giving columns [g * rows, (g + 1) * rows) of an
 * output of groups * rows.  Separate weights are one block; a fused wqkv
 * one block per key/value head. */
typedef struct ra_layer_proj {
    const void *w; /* stored as the layer's weights.dtype */
    const float *b;
    int64_t groups, rows, stride;
} ra_layer_proj;

enum { RA_PROJ_Q, RA_PROJ_K, RA_PROJ_V, RA_PROJ_GATE };

/* Projection p (RA_PROJ_Q, _K, _V, or _GATE: gated_output's, from wq's
 * rows after each head's query rows, or wgate's G rows) of the layer. */
ra_layer_proj ra_layer_proj_of(const ra_layer *layer, int p);

/* xq = wq(x), xk = wk(x), xv = wv(x) (xv NULL: not computed) for tokens
 * contiguous rows of x, each with its bias where the layer has one; then,
 * normalize set, clip_qkv's clamp, v's norm (v_norm), the q and k norms
 * where the layer has them, the L2 norm (qk_l2_norm) and xq *=
 * ra_layer_q_factor (with norm_after_rope, the q and k norms and the factor
 * are ra_layer_rotate's).  Unset, xq and xk may be NULL too (not computed). */
void ra_layer_project_qkv(const ra_layer *layer, const ra_gemm_env *mm, float *xq, float *xk,
                          float *xv, const float *x, int64_t tokens, int normalize);

/* The rope that the steps after ra_layer_project_qkv apply (the flash
 * kernel's fused rotation, a cache's append): the layer's, or NULL where
 * ra_layer_rotate must rotate q and k before them (norm_after_rope: the q
 * and k norms come after RoPE). */
const ra_rope *ra_layer_late_rope(const ra_layer *layer);

/* RoPE on q [B, S, H, D] and k [B, S, Hkv, D] at pos (read), in place:
 * each sequence's first n_new[b] tokens (NULL: all S); then, with
 * norm_after_rope, the q and k norms and q's factor (ra_layer_q_factor),
 * which ra_layer_project_qkv leaves to it. */
void ra_layer_rotate(const ra_layer *layer, ra_context *ctx, const ra_tensor *xq,
                     const ra_tensor *xk, const ra_positions *pos, const int64_t *n_new);

/* With config.rope_values (RoFormer's rotary_value), RoPE on v [B, S, Hkv,
 * D] at pos (read), in place, each sequence's first n_new[b] tokens (NULL:
 * all S); nothing otherwise. */
void ra_layer_rotate_values(const ra_layer *layer, ra_context *ctx, const ra_tensor *xv,
                            const ra_positions *pos, const int64_t *n_new);

/* Where ra_layer_late_rope is NULL, or the layer rotates v (rope_values),
 * the check a cache's append makes of positions for its rope (pos's
 * sequences' first n_new[b] tokens, NULL: seq) and then skips; RA_OK
 * otherwise. */
ra_status ra_layer_check_rotation(const ra_layer *layer, const ra_positions *pos, int64_t batch,
                                  int64_t seq, const int64_t *n_new);

/* y = wo(o) (+ bo) for tokens rows of o [tokens, H * D], the attention's
 * output, which becomes wo's input in place: o * act(gate) with
 * gated_output (ra_layer_gate_apply; gate [tokens, G] computed from x
 * [tokens, dim] into gate, before y is written: y may be x), then o_norm(o)
 * where the layer has o_norm. */
void ra_layer_project_output(const ra_layer *layer, const ra_gemm_env *mm, float *y, float *o,
                             const float *x, float *gate, int64_t tokens);

/* The output gate (gated_output; layer_gate.c).  Do: the output's
 * features per head (head_dim; v_head_dim with latent attention); G: the
 * gate's width per token, H * Do, or H with gate_per_head. */
int64_t ra_layer_gate_head_features(const ra_layer_config *config);
int64_t ra_layer_gate_width(const ra_layer_config *config);

/* gate [tokens, G] += bgate, each head's to its gates (where the layer
 * has bgate). */
void ra_layer_gate_bias(const ra_layer *layer, float *gate, int64_t tokens);

/* o [tokens, H, Do] *= act(gate) (gate [tokens, G], bgate in): sigmoid or
 * softplus (gate_softplus), each gate over its feature or its head's Do. */
void ra_layer_gate_apply(const ra_layer *layer, float *o, const float *gate, int64_t tokens);

/* The backward of ra_layer_gate_apply at the attention's output o and
 * gate: d, the gated output's gradient [tokens, H, Do], becomes o's in
 * place (d * act(gate)), and dgate [tokens, G] the gate's gradient. */
void ra_layer_gate_back(const ra_layer *layer, float *d, float *dgate, const float *o,
                        const float *gate, int64_t tokens);

/* A layer with wgate: dwgate (+)= dgate^T x, dbgate (+)= each head's sum
 * of dgate (where the layer has bgate), dx += dgate wgate, from dgate
 * [tokens, G] and x [tokens, dim]. */
void ra_layer_gate_grads(const ra_layer *layer, const ra_gemm_env *mm, float *dx,
                         const ra_layer_grads *grads, const float *dgate, const float *x,
                         int64_t tokens);

/* sigmoid(x) = 1 / (1 + e^-x), in double, rounded once. */
static inline float ra_layer_sigmoid(float x)
{
    return (float)(1.0 / (1.0 + exp(-(double)x)));
}

/* Whether wo's input is other than the attention's output (gated_output,
 * o_norm). */
int ra_layer_output_changes(const ra_layer *layer);

/* Llama 4's temperature tuning, or Ministral 3's (config.temperature_floor,
 * temperature_no_offset; nothing without it): each token's row of g
 * [tokens, H * D] times its factor at its position; the same on q and on
 * q's gradient. */
void ra_layer_temperature(const ra_layer *layer, float *g, const ra_positions *pos,
                          int64_t tokens, int64_t seq);
/* temperature_length's factor at position p: (1 + (p + 1) / L) ^ power, as
 * Beam's exp(power * log1p((p + 1) / L)). */
double ra_layer_temperature_power_at(const ra_layer_config *c, double p);

/* Each of x's n values clamped to [-limit, limit] (float32 limits). */
void ra_layer_clip(float *x, int64_t n, double limit);

/* scale * sqrt(head_dim): the factor on q that turns the kernels' 1/sqrt(D)
 * into the layer's softmax scale (1 for the default scale, up to rounding:
 * the forward and backward skip the multiply only when it is exactly 1). */
float ra_layer_q_factor(const ra_layer_config *config);

/* One q or k norm as rows of d features: row r is scaled by the weights
 * weight + (r % weight_rows) * d (weight_rows * d of them in all). */
typedef struct ra_layer_norm_shape {
    int64_t rows, d, weight_rows;
    int centered; /* LayerNorm (the row's mean subtracted first); 0: RMSNorm */
    double eps;
} ra_layer_norm_shape;

/* The norm of q (heads = H) or k (heads = Hkv) over tokens tokens: each
 * head's D features (norm_head_weights: each head its own weights), or each
 * token's heads * D (norm_whole). */
ra_layer_norm_shape ra_layer_norm_shape_of(const ra_layer_config *config, int64_t heads,
                                           int64_t tokens);

/* The o_norm (BitNet's attn_sub_norm) of tokens tokens: each token's H * D
 * features. */
ra_layer_norm_shape ra_layer_o_norm_shape(const ra_layer_config *config, int64_t tokens);

/* Llama 4's L2 norm (qk_l2_norm) of q (heads = H) or k (Hkv), and v_norm
 * (heads = Hkv): each head's D features, an RMSNorm without weights. */
ra_layer_norm_shape ra_layer_l2_shape(const ra_layer_config *config, int64_t heads,
                                      int64_t tokens);

/* Each row of x, in place: w * (row - mean) / sqrt(mean((row - mean)^2) +
 * eps) + b, mean 0 for an RMSNorm (sums in double); weight NULL: w = 1;
 * bias NULL: b = 0 (w and b as the shape's weight rows say). */
void ra_layer_norm(float *x, const float *weight, const float *bias,
                   const ra_layer_norm_shape *n);

/* The q and k norms where the layer has them (q [tokens, H * D], k
 * [tokens, Hkv * D]), in place. */
void ra_layer_qk_norms(const ra_layer *layer, float *xq, float *xk, int64_t tokens);

/* The backward of ra_layer_norm at its input x (before the norm): g, the
 * gradient of its output, becomes that of its input, in place, and
 * dweight (+)= the sum over rows of g * the normalized row (weight and
 * dweight NULL: none).  (The bias's gradient is the sum of g's rows.) */
void ra_layer_norm_backward(float *g, float *dweight, const float *x, const float *weight,
                            const ra_layer_norm_shape *n);

/* xq = wq(x), xk = wk(x), xv = wv(x) (ra_layer_project_qkv), then (rotate set) RoPE on xq and
 * xk, in place (ra_layer_rotate); unset, attention rotates them as it loads them
 * (only where ra_layer_late_rope is not NULL).
 *   x: [B, S, dim]   xq: [B, S, H, D]   xk, xv: [B, S, Hkv, D] (contiguous) */
void ra_layer_qkv(const ra_layer *layer, ra_context *ctx, const ra_gemm_env *mm, const float *x,
                  const ra_tensor *xq, const ra_tensor *xk, const ra_tensor *xv,
                  const ra_layer_call *call, int rotate);

/* y = wo(o) (ra_layer_project_output: o changes, gate is written), then
 * resid_dropout when training.
 *   o, gate: [B, S, H * D]   x, y: [B, S, dim] */
void ra_layer_output(const ra_layer *layer, const ra_gemm_env *mm, float *y, float *o,
                     const float *x, float *gate, const ra_layer_call *call);

/* resid_dropout on y [tokens, dim], elements indexed (b*S + s)*dim + c in
 * stream RA_STREAM_OUTPUT; also its backward on dy. */
static inline void ra_layer_output_dropout(float *y, int64_t n, float p, uint64_t seed)
{
    ra_dropout_mask mask = ra_dropout_mask_make(p, seed, RA_STREAM_OUTPUT);
    ra_dropout_apply(&mask, 0, y, n);
}

#endif
