/*
 * attention_flash_backward.c — the flash backward's scratch, its two passes
 * and their task split.  The first pass's task (tiles, recomputed
 * probabilities, SIMD GEMM kernels) is in cpu/flash_backward_impl.h,
 * compiled per ISA and chosen at run time (cpu/dispatch.c); with q, k and
 * v in bf16 the avx512bf16 and amx kernels run its GEMMs on the bf16 units
 * (cpu/flash_backward_bf16_impl.h).
 *
 *   pass 1: one task per (b, query head h), all B * H of the same size (each
 *           walks its whole causal triangle), so they balance across
 *           threads; it writes dq for its head and its head's dk and dv to
 *           partial buffers [B, H, S, dp].
 *   pass 2: one task per (b, kv head g, block of 64 keys): dk and dv are the
 *           sums of the partials of heads g * rep .. g * rep + rep - 1, in
 *           that order; dk is scaled by 1 / sqrt(D) (or options' scale)
 *           once, here (and added to the caller's dk, dv for a block:
 *           ra_attention_block_backward).  With sinks, dL/dsinks[h] sums the tasks' shares
 *           over b, in order.
 *
 * Every element of the result is computed by one task in a fixed order, so
 * it is the same bits for any thread count, and no two tasks write the same
 * memory.
 */
#include <math.h>

#include "attention_internal.h"
#include "cpu/kernels.h"
#include "parallel.h"

enum { REDUCE_ROWS = 64 };

/* Pass 2: dk, dv rows [s0, s0 + REDUCE_ROWS) of (b, g) (key rows). */
static void reduce_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const ra_flash_backward_job *job = arg;
    const ra_attention_backward_args *a = job->args;
    const ra_tensor *q = a->fwd.q;
    const int64_t seq = a->dk->shape[1], n_heads = q->shape[2], n_kv = a->dk->shape[2];
    const int64_t head_dim = q->shape[3], rep = n_heads / n_kv, dp = job->dp;
    const int64_t blocks = (seq + REDUCE_ROWS - 1) / REDUCE_ROWS;
    const int64_t b = task / (n_kv * blocks), g = task / blocks % n_kv;
    const int64_t s0 = task % blocks * REDUCE_ROWS;
    const int64_t s1 = s0 + REDUCE_ROWS < seq ? s0 + REDUCE_ROWS : seq;
    const float scale = (float)a->fwd.mask.scale;
    for (int64_t s = s0; s < s1; s++) {
        float *dk = ra_row(a->dk, b, s, g), *dv = ra_row(a->dv, b, s, g);
        const int64_t first = ((b * n_heads + g * rep) * seq + s) * dp, head = seq * dp;
        for (int64_t d = 0; d < head_dim; d++) {
            float sk = job->partial_k[first + d], sv = job->partial_v[first + d];
            for (int64_t h = 1; h < rep; h++) {
                sk += job->partial_k[first + h * head + d];
                sv += job->partial_v[first + h * head + d];
            }
            if (a->accumulate) {
                dk[d] += sk * scale;
                dv[d] += sv;
            } else {
                dk[d] = sk * scale;
                dv[d] = sv;
            }
        }
    }
}

void ra_attention_backward_flash(ra_context *ctx, const ra_attention_backward_args *args,
                                 float *scratch)
{
    const ra_tensor *q = args->fwd.q;
    /* seq: the keys' (the queries' but in a block) */
    const int64_t batch = q->shape[0], seq = args->dk->shape[1], n_heads = q->shape[2];
    ra_flash_backward_job job;
    job.args = args;
    job.dp = ra_round_up(q->shape[3], 16);
    job.per_thread = ra_flash_backward_per_thread(q->shape[3]);
    job.partial_k = scratch;
    job.partial_v = job.partial_k + batch * n_heads * seq * job.dp;
    job.partial_sink = job.partial_v + batch * n_heads * seq * job.dp;
    job.scratch = job.partial_sink + ra_round_up(batch * n_heads, 16);
    job.amx = q->dtype == RA_BF16 && args->fwd.k->dtype == RA_BF16 &&
              args->fwd.v->dtype == RA_BF16 && ra_cpu_amx_enable();
    ra_parallel_for(ctx, batch * n_heads, ra_kernels_get()->flash_backward_task, &job);
    int64_t blocks = (seq + REDUCE_ROWS - 1) / REDUCE_ROWS;
    ra_parallel_for(ctx, batch * args->dk->shape[2] * blocks, reduce_task, &job);
    if (args->dsinks) /* the batch's shares, in order */
        for (int64_t h = 0; h < n_heads; h++) {
            double sum = 0;
            for (int64_t b = 0; b < batch; b++) sum += job.partial_sink[b * n_heads + h];
            args->dsinks[h] = (float)sum;
        }
}
