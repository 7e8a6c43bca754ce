/*
 * parallel.h — the context's thread pool and scratch memory (internal).
 *
 * Kernels split their work into tasks themselves and call ra_parallel_for;
 * a task's result must not depend on which thread runs it, so outputs are the
 * same bits for any thread count.
 */
#ifndef RA_PARALLEL_H
#define RA_PARALLEL_H

#include "internal.h"

/* Runs fn(arg, task, thread) for task in [0, n_tasks); thread is in
 * [0, ra_parallel_threads(ctx)) and names the per-thread scratch slot.  The
 * calling thread works too.  ctx may be NULL: then everything runs here. */
typedef void (*ra_task_fn)(void *arg, int64_t task, int thread);
void ra_parallel_for(ra_context *ctx, int64_t n_tasks, ra_task_fn fn, void *arg);
int ra_parallel_threads(const ra_context *ctx); /* 1 for NULL */

/* Scratch memory for one call: the context's reusable workspace (grown when
 * too small), or, with a NULL context, a fresh allocation that
 * ra_scratch_release frees.  The memory is 64-byte aligned. */
typedef struct ra_scratch {
    void *data;
    int owned;
} ra_scratch;
ra_status ra_scratch_acquire(ra_context *ctx, size_t bytes, ra_scratch *out);

/* The same from a second workspace, for a call that holds scratch while it
 * calls other library functions (which take the first): the layer's
 * backward keeps its gradient buffers across ra_attention_backward. */
enum { RA_SCRATCH_SLOTS = 3 };
ra_status ra_scratch_acquire_outer(ra_context *ctx, size_t bytes, ra_scratch *out);

/* The same from a third, for the panel that the layer's 16-bit weights
 * widen into (gemm.h), held across the calls of both others. */
ra_status ra_scratch_acquire_panel(ra_context *ctx, size_t bytes, ra_scratch *out);
void ra_scratch_release(ra_scratch *scratch);

#endif
