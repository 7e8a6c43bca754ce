/*
 * layer_common.c — what every kind of layer (layer.c's, latent attention's
 * layer_mla.c) and their backwards call: the norms of rows, q's factor and
 * q's temperature at its position.
 * The layer kinds call this file, never each other back.
 */
#include <math.h>

#include "layer_internal.h"
#include "rope_internal.h"

/* A row's mean (0 for an RMSNorm) and 1 / sqrt(variance about it + eps). */
static void row_moments(const float *row, const ra_layer_norm_shape *n, double *mean,
                        double *inv_std)
{
    double sum = 0, squares = 0;
    for (int64_t i = 0; n->centered && i < n->d; i++) sum += row[i];
    *mean = sum / (double)n->d;
    for (int64_t i = 0; i < n->d; i++) squares += (row[i] - *mean) * (row[i] - *mean);
    *inv_std = 1.0 / sqrt(squares / (double)n->d + n->eps);
}

void ra_layer_norm(float *x, const float *weight, const float *bias,
                   const ra_layer_norm_shape *n)
{
    for (int64_t r = 0; r < n->rows; r++) {
        float *row = x + r * n->d;
        const float *w = weight ? weight + (r % n->weight_rows) * n->d : NULL;
        const float *b = bias ? bias + (r % n->weight_rows) * n->d : NULL;
        double mean, inv_std;
        row_moments(row, n, &mean, &inv_std);
        for (int64_t i = 0; i < n->d; i++)
            row[i] = (w ? w[i] : 1.0f) * (float)((row[i] - mean) * inv_std) + (b ? b[i] : 0.0f);
    }
}

void ra_layer_norm_backward(float *g, float *dweight, const float *x, const float *weight,
                            const ra_layer_norm_shape *n)
{
    for (int64_t r = 0; r < n->rows; r++) {
        float *gr = g + r * n->d;
        const float *xr = x + r * n->d;
        const float *w = weight ? weight + (r % n->weight_rows) * n->d : NULL;
        float *dw = dweight ? dweight + (r % n->weight_rows) * n->d : NULL;
        double mean, inv_std, dot = 0, gsum = 0;
        row_moments(xr, n, &mean, &inv_std);
        for (int64_t i = 0; i < n->d; i++) {
            double xhat = (xr[i] - mean) * inv_std, gw = (double)gr[i] * (w ? w[i] : 1.0f);
            if (dw) dw[i] += (float)(gr[i] * xhat);
            dot += gw * xhat;
            gsum += gw;
        }
        dot /= (double)n->d;
        gsum = n->centered ? gsum / (double)n->d : 0.0; /* the mean's own gradient */
        for (int64_t i = 0; i < n->d; i++)
            gr[i] = (float)(inv_std * ((double)gr[i] * (w ? w[i] : 1.0f) - gsum -
                                       (xr[i] - mean) * inv_std * dot));
    }
}

float ra_layer_q_factor(const ra_layer_config *c)
{
    return (float)(c->scale * sqrt((double)c->head_dim));
}

double ra_layer_temperature_power_at(const ra_layer_config *c, double p)
{
    return exp(c->temperature_power * log1p((p + 1.0) / c->temperature_length));
}

/* q's factor at position p by temperature_floor or temperature_length. */
static float temperature_at(const ra_layer_config *c, double p)
{
    if (c->temperature_length > 0) return (float)ra_layer_temperature_power_at(c, p);
    const double offset = c->temperature_no_offset ? 0.0 : 1.0; /* Ministral 3 : Llama 4 */
    return (float)(1.0 + c->temperature_scale * log1p(floor((p + offset) / c->temperature_floor)));
}

void ra_layer_temperature(const ra_layer *layer, float *g, const ra_positions *pos,
                          int64_t tokens, int64_t seq)
{
    const ra_layer_config *c = &layer->config;
    if (c->temperature_floor == 0 && c->temperature_length == 0) return;
    const int64_t q_dim = c->n_heads * c->head_dim;
    int64_t hint = 0;
    for (int64_t t = 0; t < tokens; t++) {
        const float f = temperature_at(c, (double)ra_position(pos, t, seq, &hint));
        for (int64_t i = 0; f != 1.0f && i < q_dim; i++) g[t * q_dim + i] *= f;
    }
}
