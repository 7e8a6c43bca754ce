/*
 * adamw.h — AdamW (Loshchilov and Hutter, "Decoupled Weight Decay
 * Regularization"), as torch.optim.AdamW computes it, over one flat array of
 * parameters:
 *   m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
 *   p -= lr weight_decay p                (decoupled decay, first)
 *   p -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 */
#ifndef RA_TOOLS_ADAMW_H
#define RA_TOOLS_ADAMW_H

#include <stdint.h>

typedef struct adamw {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t n, step;
    float *m, *v; /* [n] first and second moments, zero at first */
} adamw;

/* Moments for n parameters; nonzero (after printing why) if out of memory. */
int adamw_init(adamw *opt, int64_t n, float lr, float weight_decay);
void adamw_free(adamw *opt);

/* One step: params[n] moved against grads[n]. */
void adamw_update(adamw *opt, float *params, const float *grads);

#endif
