/*
 * layer_gate.c — the attention output's gate (ra_layer_config.gated_output)
 * as its activation multiplies the output, and its backward, for every
 * layer kind:
 *
 *   gate = x wgate^T (or wq's gate rows) + bgate[h]   [T, G]
 *   o_h *= act(gate_h)                                per feature (G = H Do),
 *                                                     or per head (G = H)
 *   act: sigmoid (Qwen3-Next, AfMoE, Beam, LFM3, Ling), or softplus (Laguna)
 *
 * Do is the output's features per head: head_dim, v_head_dim with latent
 * attention.
 */
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "layer_internal.h"

int64_t ra_layer_gate_head_features(const ra_layer_config *c)
{
    return c->kv_lora_rank ? c->v_head_dim : c->head_dim;
}

int64_t ra_layer_gate_width(const ra_layer_config *c)
{
    return c->gate_per_head ? c->n_heads : c->n_heads * ra_layer_gate_head_features(c);
}

/* act(g), in double, rounded once: torch's F.softplus (threshold 20: g
 * itself above it) or sigmoid. */
static float activation(const ra_layer_config *c, float g)
{
    if (!c->gate_softplus) return ra_layer_sigmoid(g);
    return g > 20.0f ? g : (float)log1p(exp((double)g));
}

/* act'(g): softplus's is sigmoid (1 above the threshold, as torch's
 * softplus_backward), sigmoid's s (1 - s). */
static double activation_slope(const ra_layer_config *c, float g)
{
    const double s = ra_layer_sigmoid(g);
    if (c->gate_softplus) return g > 20.0f ? 1.0 : s;
    return s * (1.0 - s);
}

void ra_layer_gate_bias(const ra_layer *layer, float *gate, int64_t tokens)
{
    const float *bgate = layer->weights.bgate;
    const int64_t G = ra_layer_gate_width(&layer->config), per = G / layer->config.n_heads;
    for (int64_t t = 0; bgate && t < tokens; t++) /* gate_proj(x) + gate_bias[None, None, :, None] */
        for (int64_t i = 0; i < G; i++) gate[t * G + i] += bgate[i / per];
}

void ra_layer_gate_apply(const ra_layer *layer, float *o, const float *gate, int64_t tokens)
{
    const ra_layer_config *c = &layer->config;
    const int64_t H = c->n_heads, Do = ra_layer_gate_head_features(c);
    const int64_t G = ra_layer_gate_width(c), per = G / H; /* gates per head: 1 or Do */
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *g = gate + t * G + h * per;
            float *oh = o + (t * H + h) * Do;
            for (int64_t e = 0; e < Do; e++) oh[e] *= activation(c, g[per == 1 ? 0 : e]);
        }
}

void ra_layer_gate_back(const ra_layer *layer, float *d, float *dgate, const float *o,
                        const float *gate, int64_t tokens)
{
    const ra_layer_config *c = &layer->config;
    const int64_t H = c->n_heads, Do = ra_layer_gate_head_features(c);
    const int64_t G = ra_layer_gate_width(c), per = G / H;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t at = (t * H + h) * Do;
            const float *g = gate + t * G + h * per;
            float *dg = dgate + t * G + h * per;
            double sum = 0; /* per head: the gate's gradient over its Do features */
            for (int64_t e = 0; e < Do; e++) {
                const float a = activation(c, g[per == 1 ? 0 : e]);
                const double back = (double)d[at + e] * o[at + e];
                if (per == 1) sum += back;
                else dg[e] = (float)(back * activation_slope(c, g[e]));
                d[at + e] = (float)((double)d[at + e] * a);
            }
            if (per == 1) dg[0] = (float)(sum * activation_slope(c, g[0]));
        }
}

void ra_layer_gate_grads(const ra_layer *layer, const ra_gemm_env *mm, float *dx,
                         const ra_layer_grads *grads, const float *dgate, const float *x,
                         int64_t tokens)
{
    const ra_layer_config *c = &layer->config;
    const ra_layer_weights *w = &layer->weights;
    const int64_t G = ra_layer_gate_width(c), per = G / c->n_heads;
    /* gate = gate_proj(x) (+ gate_bias): dwgate = dgate^T x, dx += dgate wgate */
    ra_gemm_tn(grads->dwgate, dgate, G, x, G, c->dim, tokens, grads->accumulate ? 1.0f : 0.0f);
    ra_gemm_nn_w(mm, dx, dgate, G, w->wgate, tokens, c->dim, G, 1.0f);
    if (!w->bgate) return;
    if (!grads->accumulate) memset(grads->dbgate, 0, (size_t)c->n_heads * sizeof(float));
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t i = 0; i < G; i++) grads->dbgate[i / per] += dgate[t * G + i];
}
