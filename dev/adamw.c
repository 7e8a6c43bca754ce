/* adamw.c — the AdamW update (adamw.h). */
#include "adamw.h"

#include <math.h>
#include <stdlib.h>

#include "../tools/cli.h"

int adamw_init(adamw *opt, int64_t n, float lr, float weight_decay)
{
    *opt = (adamw){.lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                   .weight_decay = weight_decay, .n = n};
    opt->m = calloc((size_t)n, sizeof(float));
    opt->v = calloc((size_t)n, sizeof(float));
    if (!opt->m || !opt->v) return cli_fail(EXIT_FAIL, "out of memory for the optimizer");
    return 0;
}

void adamw_free(adamw *opt)
{
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
}

void adamw_update(adamw *opt, float *params, const float *grads)
{
    opt->step++;
    const float c1 = 1.0f - powf(opt->beta1, (float)opt->step);
    const float c2 = 1.0f - powf(opt->beta2, (float)opt->step);
    for (int64_t i = 0; i < opt->n; i++) {
        float g = grads[i];
        opt->m[i] = opt->beta1 * opt->m[i] + (1.0f - opt->beta1) * g;
        opt->v[i] = opt->beta2 * opt->v[i] + (1.0f - opt->beta2) * g * g;
        params[i] -= opt->lr * opt->weight_decay * params[i];
        params[i] -= opt->lr * (opt->m[i] / c1) / (sqrtf(opt->v[i] / c2) + opt->eps);
    }
}
