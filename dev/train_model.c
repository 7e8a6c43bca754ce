/*
 * train_model.c — the train demo's model: embedding, the attention layer and
 * a read-out, forward and backward (train_model.h).
 *
 *   x [T, dim] = embed[tokens]       y [T, dim] = layer(x)
 *   logits [T, V] = y readout^T      L = mean over scored t of -log softmax(logits[t])[target]
 */
#include "train_model.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "random.h"

/* Offsets of the parameter blocks in the flat array. */
typedef struct blocks {
    int64_t embed, wq, wk, wv, wo, readout, total;
} blocks;

static blocks blocks_of(const train_model_config *c)
{
    const int64_t dim = c->dim, kv = c->n_kv_heads * (dim / c->n_heads);
    blocks b;
    b.embed = 0;
    b.wq = b.embed + c->vocab * dim;
    b.wk = b.wq + dim * dim;
    b.wv = b.wk + kv * dim;
    b.wo = b.wv + kv * dim;
    b.readout = b.wo + dim * dim;
    b.total = b.readout + c->vocab * dim;
    return b;
}

int train_model_create(train_model *m, const train_model_config *config, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->config = *config;
    const train_model_config *c = &m->config;
    const blocks b = blocks_of(c);
    const size_t act = (size_t)(c->max_tokens * c->dim) * sizeof(float);
    m->n_params = b.total;
    m->params = malloc((size_t)b.total * sizeof(float));
    m->grads = malloc((size_t)b.total * sizeof(float));
    m->x = malloc(act);
    m->y = malloc(act);
    m->dy = malloc(act);
    m->dx = malloc(act);
    m->logits = malloc((size_t)(c->max_tokens * c->vocab) * sizeof(float));
    if (!m->params || !m->grads || !m->x || !m->y || !m->dy || !m->dx || !m->logits)
        return cli_fail(EXIT_FAIL, "out of memory for the train demo's model");

    float *p = m->params;
    const float in_bound = 1.0f / sqrtf((float)c->dim);
    random_uniform(p + b.embed, (size_t)(b.wq - b.embed), sqrtf(3.0f), seed);
    random_uniform(p + b.wq, (size_t)(b.readout - b.wq), in_bound, seed + 1);
    random_uniform(p + b.readout, (size_t)(b.total - b.readout), in_bound, seed + 2);

    ra_rope_config lc_rope = ra_rope_config_default(c->dim / c->n_heads);
    ra_layer_config lc = {.struct_size = sizeof lc, .dim = c->dim, .n_heads = c->n_heads,
                          .n_kv_heads = c->n_kv_heads,
                          .rope = &lc_rope,
                          .no_rope = c->no_rope};
    ra_layer_weights w = {.struct_size = sizeof w, .wq = p + b.wq, .wk = p + b.wk, .wv = p + b.wv,
                          .wo = p + b.wo};
    ra_status status = ra_layer_create(&m->layer, &lc, &w);
    if (status == RA_OK) status = ra_layer_tape_create(&m->tape, m->layer, c->max_tokens);
    return status == RA_OK ? 0 : cli_fail_status(status, "cannot create the train demo's layer");
}

void train_model_free(train_model *m)
{
    ra_layer_tape_destroy(m->tape);
    ra_layer_destroy(m->layer);
    free(m->params);
    free(m->grads);
    free(m->x);
    free(m->y);
    free(m->dy);
    free(m->dx);
    free(m->logits);
    memset(m, 0, sizeof *m);
}

/* Cross-entropy of row t against target; turns the row into
 * dL/dlogits = (softmax - onehot) * scale. */
static double cross_entropy(float *row, int64_t vocab, int32_t target, float scale, int *right)
{
    float max = row[0];
    int64_t argmax = 0;
    for (int64_t i = 1; i < vocab; i++)
        if (row[i] > max) max = row[i], argmax = i;
    double sum = 0;
    for (int64_t i = 0; i < vocab; i++) sum += exp((double)row[i] - max);
    double loss = log(sum) - ((double)row[target] - max);
    for (int64_t i = 0; i < vocab; i++)
        row[i] = (float)(exp((double)row[i] - max) / sum) * scale;
    row[target] -= scale;
    *right = argmax == target;
    return loss;
}

ra_status train_model_run(train_model *m, ra_context *ctx, const int32_t *tokens,
                          const int32_t *targets, int64_t batch, int64_t seq, int backward,
                          train_result *result)
{
    const train_model_config *c = &m->config;
    const blocks b = blocks_of(c);
    const int64_t T = batch * seq, dim = c->dim, V = c->vocab;
    if (T > c->max_tokens) return RA_ERR_SIZE;
    float *p = m->params, *g = m->grads;

    /* x = embed[tokens] */
    for (int64_t t = 0; t < T; t++)
        memcpy(m->x + t * dim, p + b.embed + tokens[t] * dim, (size_t)dim * sizeof(float));
    /* y = layer(x) */
    ra_attention_options train = {.struct_size = sizeof train, .path = RA_PATH_FLASH};
    ra_status status = ra_layer_forward_train(ctx, m->layer, m->y, m->tape, m->x, batch, seq,
                                              NULL, &train);
    if (status != RA_OK) return status;
    /* logits = y readout^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)V, (int)dim, 1.0f, m->y,
                (int)dim, p + b.readout, (int)dim, 0.0f, m->logits, (int)V);

    /* loss = mean cross-entropy; logits become dL/dlogits (0 where unscored) */
    *result = (train_result){0};
    for (int64_t t = 0; t < T; t++) result->scored += targets[t] >= 0;
    const float scale = result->scored ? 1.0f / (float)result->scored : 0.0f;
    for (int64_t t = 0; t < T; t++) {
        float *row = m->logits + t * V;
        if (targets[t] < 0) {
            memset(row, 0, (size_t)V * sizeof(float));
            continue;
        }
        int right;
        result->loss += cross_entropy(row, V, targets[t], scale, &right);
        result->correct += right;
    }
    if (result->scored) result->loss /= (double)result->scored;
    if (!backward) return RA_OK;

    /* logits = y readout^T: dreadout = dlogits^T y, dy = dlogits readout */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)V, (int)dim, (int)T, 1.0f,
                m->logits, (int)V, m->y, (int)dim, 0.0f, g + b.readout, (int)dim);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)dim, (int)V, 1.0f,
                m->logits, (int)V, p + b.readout, (int)dim, 0.0f, m->dy, (int)dim);
    /* y = layer(x): dx and the layer's weight gradients */
    ra_layer_grads lg = {.struct_size = sizeof lg, .dwq = g + b.wq, .dwk = g + b.wk,
                         .dwv = g + b.wv, .dwo = g + b.wo};
    status = ra_layer_backward(ctx, m->layer, m->dx, &lg, m->tape, m->dy);
    if (status != RA_OK) return status;
    /* x = embed[tokens]: dembed[token] += dx */
    memset(g + b.embed, 0, (size_t)(V * dim) * sizeof(float));
    for (int64_t t = 0; t < T; t++) {
        float *row = g + b.embed + tokens[t] * dim;
        for (int64_t i = 0; i < dim; i++) row[i] += m->dx[t * dim + i];
    }
    return RA_OK;
}
