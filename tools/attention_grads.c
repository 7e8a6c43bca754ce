/* attention_grads.c — `ropeattn attention --grad-output DY --grads G`. */
#include "attention_grads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"

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
        return cli_fail(EXIT_FAIL, "%s must hold float32 or float64 values ('<f4', '<f8')", dy_path);
    int same = dy->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = dy->shape[i] == x->shape[i];
    if (same) return 0;
    char got[128], want[128];
    format_shape(got, sizeof got, dy->shape, dy->ndim);
    format_shape(want, sizeof want, x->shape, x->ndim);
    return cli_fail(EXIT_FAIL, "%s has shape %s; the gradient of Y must have Y's shape, "
                    "which is %s's %s", dy_path, got, x_path, want);
}

/* Y, dL/dX (dx) and the layer's gradients (g); RA_ERR_NOMEM if a buffer
 * cannot be had. */
static ra_status forward_backward(const attention_grads_job *job, ra_context *ctx, float *y,
                                  float *dx, const ra_hf_grads *g)
{
    const ra_layer *layer = ra_hf_layer_get(job->layer);
    const int64_t tokens = job->batch * job->seq;
    ra_layer_tape *tape;
    ra_status status = ra_layer_tape_create(&tape, layer, tokens);
    if (status != RA_OK) return status;
    ra_attention_options options = job->attention;
    progress line; /* the forward's tokens, then the backward's */
    progress_begin(&line, "attention --grads", 2 * tokens, job->quiet);
    status = ra_layer_forward_train(ctx, layer, y, tape, job->x->data, job->batch, job->seq,
                                    &job->positions, &options);
    progress_update(&line, tokens);
    if (status == RA_OK)
        status = ra_layer_backward(ctx, layer, dx, ra_hf_grads_get(g), tape, job->dy->data);
    progress_end(&line);
    ra_layer_tape_destroy(tape);
    return status;
}

/* G: "x" = dL/dX in X's shape, then each checkpoint tensor's gradient
 * under its name, in its shape. */
static int write_gradients(const attention_grads_job *job, const float *dx,
                           const ra_hf_grads *g)
{
    int64_t n = ra_hf_layer_tensor_count(job->layer);
    ra_st_tensor *out = calloc((size_t)(1 + n), sizeof *out);
    if (!out) return cli_fail(EXIT_FAIL, "out of memory for the gradients");
    out[0] = (ra_st_tensor){.name = "x", .ndim = job->x->ndim, .count = job->x->count};
    memcpy(out[0].shape, job->x->shape, sizeof out[0].shape);
    out[0].data = dx;
    for (int64_t i = 0; i < n; i++) {
        ra_st_tensor *t = &out[1 + i];
        t->name = ra_hf_layer_tensor_name(job->layer, i);
        t->ndim = ra_hf_layer_tensor_shape(job->layer, i, t->shape);
        t->count = 1;
        for (int d = 0; d < t->ndim; d++) t->count *= t->shape[d];
        t->data = ra_hf_grads_tensor(g, i);
    }
    for (int64_t i = 0; i <= n; i++) {
        out[i].dtype = RA_ST_F32;
        out[i].nbytes = (size_t)out[i].count * sizeof(float);
    }
    int failed = cli_outputs_write_safetensors(job->outputs, 1, out, 1 + n);
    free(out);
    return failed;
}

int attention_grads_write(const attention_grads_job *job, const float *y, const float *dx,
                          const ra_hf_grads *g)
{
    int failed = cli_outputs_write_npy(job->outputs, 0, y, job->x->ndim, job->x->shape);
    if (!failed && !(failed = write_gradients(job, dx, g)))
        failed = cli_outputs_commit(job->outputs);
    return failed;
}

int attention_grads_run(const attention_grads_job *job, ra_context *ctx)
{
    ra_hf_grads *g = NULL;
    float *y = malloc((size_t)job->x->count * sizeof(float));
    float *dx = malloc((size_t)job->x->count * sizeof(float));
    ra_status status = !y || !dx ? RA_ERR_NOMEM : ra_hf_grads_create(&g, job->layer);
    if (status == RA_OK) status = forward_backward(job, ctx, y, dx, g);
    int failed = 0;
    if (status != RA_OK)
        failed = cli_fail_status(status, "attention training forward and backward failed");
    if (!failed) failed = attention_grads_write(job, y, dx, g);
    ra_hf_grads_destroy(g);
    free(dx);
    free(y);
    return failed;
}
