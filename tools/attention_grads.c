/* attention_grads.c — `ropeattn attention --grad-output DY --grads G`. */
#include "attention_grads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rope_cli.h"

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

ra_status attention_grads_rows(ra_context *ctx, const ra_hf_layer *layer, const ra_hf_grads *g,
                               int64_t n, int64_t seq, const float *x, const float *dy,
                               const ra_positions *positions,
                               const ra_attention_options *attention, int accumulate, float *y,
                               float *dx, progress *line, int64_t *done)
{
    const ra_layer *l = ra_hf_layer_get(layer);
    ra_layer_grads grads = *ra_hf_grads_get(g);
    grads.accumulate = accumulate;
    ra_layer_tape *tape;
    ra_status status = ra_layer_tape_create(&tape, l, n * seq);
    if (status == RA_OK)
        status = ra_layer_forward_train(ctx, l, y, tape, x, n, seq, positions, attention);
    if (line) progress_update(line, *done += n * seq);
    if (status == RA_OK) status = ra_layer_backward(ctx, l, dx, &grads, tape, dy);
    if (line) progress_update(line, *done += n * seq);
    ra_layer_tape_destroy(tape);
    return status;
}

/* A run's calls (packed_rows_call), counted on its progress line. */
typedef struct grads_calls {
    const attention_grads_job *job;
    ra_context *ctx;
    const ra_hf_grads *g;
    progress line;
    int64_t done; /* tokens: each forward's, then each backward's */
} grads_calls;

static ra_status train_rows(void *arg, int64_t n, const float *x, const float *dy,
                            const int64_t *ids, const ra_attention_options *attention,
                            int accumulate, float *y, float *dx)
{
    grads_calls *c = arg;
    const attention_grads_job *job = c->job;
    ra_positions positions = positions_of_ids(ids, job->components, job->start_pos);
    return attention_grads_rows(c->ctx, job->layer, c->g, n, job->seq, x, dy, &positions,
                                attention, accumulate, y, dx, &c->line, &c->done);
}

/* Y, dL/dX (dx) and the layer's gradients (g); RA_ERR_NOMEM if a buffer
 * cannot be had. */
static ra_status forward_backward(const attention_grads_job *job, ra_context *ctx, float *y,
                                  float *dx, const ra_hf_grads *g)
{
    grads_calls calls = {job, ctx, g, {0}, 0};
    progress_begin(&calls.line, "attention --grads", 2 * job->batch * job->seq, job->quiet);
    const int64_t dim = ra_layer_get_config(ra_hf_layer_get(job->layer))->dim;
    ra_status status = packed_rows_run(job->packed, job->batch, job->seq, dim, job->components,
                                       job->x->data, job->dy->data, job->ids, job->attention, y,
                                       dx, train_rows, &calls);
    progress_end(&calls.line);
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
