/* attention_grads.c — `ropeattn attention --grad-output DY --grads G`. */
#include "attention_grads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* "[2, 5, 64]" */
static void format_shape(char *buf, size_t len, const int64_t *shape, int ndim)
{
    snprintf(buf, len, "[");
    for (int i = 0; i < ndim; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%lld", i ? ", " : "",
                 (long long)shape[i]);
    snprintf(buf + strlen(buf), len - strlen(buf), "]");
}

int attention_grads_check(const ra_npy *dy, const char *dy_path, const ra_npy *x,
                          const char *x_path)
{
    if (dy->dtype != RA_NPY_F32)
        return cli_fail(EXIT_FAIL, "%s must hold float32 ('<f4') values", dy_path);
    int same = dy->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = dy->shape[i] == x->shape[i];
    if (same) return 0;
    char got[128], want[128];
    format_shape(got, sizeof got, dy->shape, dy->ndim);
    format_shape(want, sizeof want, x->shape, x->ndim);
    return cli_fail(EXIT_FAIL, "%s has shape %s; the gradient of Y must have Y's shape, "
                    "which is %s's %s", dy_path, got, x_path, want);
}

/* dL/dX, and dL/dW and dL/db for each projection (db: where it has a
 * bias) and for the q and k norms (where the layer has them), float32. */
typedef struct gradients {
    float *dx, *dw[N_PROJ], *db[N_PROJ], *dnorm[2];
} gradients;

/* A fused projection's gradients share one buffer, dw[Q] (db[Q]), laid out
 * as the fused weight: in its rows (Phi-3's qkv_proj), dw[K], dw[V] (and
 * db's) point into it; grouped (GPT-NeoX), they are NULL. */
static void gradients_free(gradients *g, int fused)
{
    free(g->dx);
    for (int p = 0; p < N_PROJ; p++) {
        if (fused && (p == PROJ_K || p == PROJ_V)) continue;
        free(g->dw[p]), free(g->db[p]);
    }
    free(g->dnorm[0]), free(g->dnorm[1]);
}

/* Gradient buffers for the four projections and their biases. */
static ra_status alloc_projections(const attention_tensors *t, gradients *g)
{
    for (int p = 0; p < N_PROJ; p++) {
        const ra_st_tensor *w = t->proj[p], *b = t->bias[p];
        if (t->fused && p == PROJ_Q) w = t->fused, b = t->fused_bias;
        if (t->fused && (p == PROJ_K || p == PROJ_V)) { /* rows of Q's buffers */
            if (t->packing == FUSED_GROUPED) continue;
            g->dw[p] = g->dw[p - 1] + t->proj[p - 1]->count;
            if (b) g->db[p] = g->db[p - 1] + t->bias[p - 1]->count;
            continue;
        }
        g->dw[p] = malloc((size_t)w->count * sizeof(float));
        if (b) g->db[p] = malloc((size_t)b->count * sizeof(float));
        if (!g->dw[p] || (b && !g->db[p])) return RA_ERR_NOMEM;
    }
    return RA_OK;
}

/* How many weights norm i (0: q, 1: k) has; 0: none. */
static int64_t norm_count(const attention_tensors *t, int i)
{
    int64_t count = t->norm[i] ? t->norm[i]->count : 0;
    for (int64_t h = 0; h < t->n_head_norms[i]; h++) count += t->head_norms[i][h]->count;
    return count;
}

/* Y and the gradients; RA_ERR_NOMEM if a buffer cannot be had. */
static ra_status forward_backward(const attention_grads_job *job, ra_context *ctx, float *y,
                                  gradients *g)
{
    g->dx = malloc((size_t)job->x->count * sizeof(float));
    if (!g->dx) return RA_ERR_NOMEM;
    if (alloc_projections(job->tensors, g) != RA_OK) return RA_ERR_NOMEM;
    for (int i = 0; i < 2; i++) {
        int64_t n = norm_count(job->tensors, i);
        if (n && !(g->dnorm[i] = malloc((size_t)n * sizeof(float)))) return RA_ERR_NOMEM;
    }
    ra_layer_tape *tape;
    ra_status status = ra_layer_tape_create(&tape, job->layer, job->batch * job->seq);
    if (status != RA_OK) return status;
    ra_attention_options options = {.struct_size = sizeof options, .path = job->path};
    status = ra_layer_forward_train(job->layer, ctx, y, tape, job->x->data, job->batch,
                                              job->seq, &job->positions, &options);
    ra_layer_grads grads = {.struct_size = sizeof grads, .dwq = g->dw[PROJ_Q], .dwk = g->dw[PROJ_K],
                            .dwv = g->dw[PROJ_V],
                            .dwo = g->dw[PROJ_O], .dbq = g->db[PROJ_Q], .dbk = g->db[PROJ_K],
                            .dbv = g->db[PROJ_V], .dbo = g->db[PROJ_O], .dq_norm = g->dnorm[0],
                            .dk_norm = g->dnorm[1]};
    if (job->tensors->packing == FUSED_GROUPED) { /* the layer's wqkv */
        grads = (ra_layer_grads){.struct_size = sizeof(ra_layer_grads), .dwo = g->dw[PROJ_O],
                                 .dbo = g->db[PROJ_O],
                                 .dq_norm = g->dnorm[0], .dk_norm = g->dnorm[1],
                                 .dwqkv = g->dw[PROJ_Q], .dbqkv = g->db[PROJ_Q]};
    }
    if (status == RA_OK)
        status = ra_layer_backward(job->layer, ctx, g->dx, &grads, tape, job->dy->data);
    ra_layer_tape_destroy(tape);
    return status;
}

/* out gets the F32 tensor `data` named and shaped as like. */
static void describe(ra_st_tensor *out, const ra_st_tensor *like, float *data)
{
    memset(out, 0, sizeof *out);
    out->name = like->name;
    out->ndim = like->ndim;
    memcpy(out->shape, like->shape, sizeof out->shape);
    out->count = like->count;
    out->data = data;
    out->dtype = RA_ST_F32;
    out->nbytes = (size_t)out->count * sizeof(float);
}

/* G: "x" = dL/dX in X's shape, then each weight's, bias's and norm's
 * gradient under its name. */
static int write_gradients(const attention_grads_job *job, gradients *g)
{
    const attention_tensors *t = job->tensors;
    ra_st_tensor *out = malloc((size_t)(1 + 2 * N_PROJ + 2 + t->n_head_norms[0] +
                                        t->n_head_norms[1]) * sizeof *out);
    ra_st_tensor x = {.name = "x", .ndim = job->x->ndim, .count = job->x->count};
    if (!out) return cli_fail(EXIT_FAIL, "out of memory for the gradients");
    memcpy(x.shape, job->x->shape, sizeof x.shape);
    int n = 0;
    describe(&out[n++], &x, g->dx);
    for (int p = 0; p < N_PROJ; p++) {
        if (t->fused && (p == PROJ_K || p == PROJ_V)) continue; /* in Q's, as stored */
        describe(&out[n++], t->fused && p == PROJ_Q ? t->fused : t->proj[p], g->dw[p]);
    }
    for (int p = 0; p < N_PROJ; p++) {
        if (t->fused && (p == PROJ_K || p == PROJ_V)) continue;
        const ra_st_tensor *b = t->fused && p == PROJ_Q ? t->fused_bias : t->bias[p];
        if (b) describe(&out[n++], b, g->db[p]);
    }
    for (int i = 0; i < 2; i++) {
        if (t->norm[i]) describe(&out[n++], t->norm[i], g->dnorm[i]);
        for (int64_t h = 0, at = 0; h < t->n_head_norms[i]; at += t->head_norms[i][h++]->count)
            describe(&out[n++], t->head_norms[i][h], g->dnorm[i] + at); /* StableLM 2 */
    }
    int failed = cli_outputs_write_safetensors(job->outputs, 1, out, n);
    free(out);
    return failed;
}

int attention_grads_run(const attention_grads_job *job, ra_context *ctx)
{
    gradients g = {0};
    float *y = malloc((size_t)job->x->count * sizeof(float));
    ra_status status = y ? forward_backward(job, ctx, y, &g) : RA_ERR_NOMEM;
    int failed = 0;
    if (status != RA_OK)
        failed = cli_fail_status(status, "attention training forward and backward failed");
    if (!failed &&
        !(failed = cli_outputs_write_npy(job->outputs, 0, y, job->x->ndim, job->x->shape)) &&
        !(failed = write_gradients(job, &g)))
        failed = cli_outputs_commit(job->outputs);
    gradients_free(&g, job->tensors->fused != NULL);
    free(y);
    return failed;
}
