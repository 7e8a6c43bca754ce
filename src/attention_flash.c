/*
 * attention_flash.c — the flash path's scratch and task split; the task
 * itself (tiles, online softmax, SIMD GEMM kernels) is in cpu/flash_impl.h,
 * compiled per ISA and chosen at run time (cpu/dispatch.c).
 *
 * Tasks are (b, kv head, query block), claimed a (b, kv head) group at a
 * time and, within it, longest first (last query block first), so that the
 * causal triangle's uneven tasks balance across threads (the last tasks
 * claimed are the shortest).  Group by group, the tasks running at once
 * read the same K and V rows, which the previous tasks have left in the
 * cache: one group's K and V, not all of them, between two reads of a row.
 * At S = 8192 (8 MiB of K and V per group, 64 MiB in all) that took 2 threads
 * from 0.78 to 0.87 of their rate at S = 2048 (query block by query block
 * across the groups, as before, the K and V came from memory every time).
 * Each output row is computed by one task in a fixed order, so the result
 * is the same bits for any thread count.
 */
#include "attention_internal.h"
#include "cpu/kernels.h"
#include "parallel.h"

size_t ra_attention_scratch_bytes(ra_attention_path path, int64_t seq, int64_t n_keys,
                                  int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                  int threads)
{
    int64_t n;
    if (path == RA_PATH_REFERENCE) { /* scores [Sq, Sk] and a row of dropout multipliers */
        if (ra_mul(seq + 1, n_keys, &n) != RA_OK) return 0;
    } else {
        if (n_heads / n_kv_heads > 4096 || head_dim > RA_MAX_ELEMENTS / 4096) return 0;
        ra_flash_layout f = ra_flash_layout_for(n_heads / n_kv_heads, head_dim);
        if (ra_mul(f.per_thread, threads, &n) != RA_OK) return 0;
    }
    return (size_t)n * sizeof(float);
}

void ra_attention_flash(ra_context *ctx, const ra_attention_args *args, float *scratch)
{
    const ra_tensor *q = args->q;
    ra_flash_job job;
    job.args = args;
    job.scratch = scratch;
    job.layout = ra_flash_layout_for(q->shape[2] / args->k->shape[2], q->shape[3]);
    job.n_query_blocks = (q->shape[1] + job.layout.block_q - 1) / job.layout.block_q;
    job.amx = q->dtype == RA_BF16 && args->k->dtype == RA_BF16 && args->v->dtype == RA_BF16 &&
              ra_cpu_amx_enable();
    int64_t n_tasks = job.n_query_blocks * q->shape[0] * args->k->shape[2];
    ra_parallel_for(ctx, n_tasks, ra_kernels_get()->flash_task, &job);
}
