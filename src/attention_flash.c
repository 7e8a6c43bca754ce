/*
 * attention_flash.c — the flash path's scratch and task split; the task
 * itself (tiles, online softmax, SIMD GEMM kernels) is in cpu/flash_impl.h,
 * compiled per ISA and chosen at run time (cpu/dispatch.c).  A block of a
 * few query rows (a decoding step) runs on the decode kernel instead, when
 * it asks only for what that kernel serves (attention_short.c).
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
 *
 * With float32 K and V (not rotated on the fly) and enough query blocks,
 * each group's K and V rows are first copied, in parallel, into one
 * contiguous [Sk, D rounded to 16] each (the pack), and the group's tasks
 * then read their tiles there: in the tensor a group's rows are Hkv D
 * apart, every row on a 4 KiB page of its own, so a task's tiles touched
 * 2 Sk pages (4096 at S 2048, more than the TLB holds) and the hardware
 * prefetchers, which stop at a page's end, did not follow them; each tile
 * was also copied again for every query block.  Same values, same sums:
 * the same bits.  Causal S 2048 (H32 Hkv8 D128) on the Intel core went from
 * 0.73-0.74 to 0.80-0.82 of sgemm on one thread, 0.74-0.75 to 0.79-0.83 on
 * two (docs/perf/2026-12-07-prefill-intel.md); the scratch grows by the
 * pack, 2 Sk D floats (8 MiB at Sk 8192, D 128).
 */
#include <string.h>

#include "attention_internal.h"
#include "cpu/kernels.h"
#include "parallel.h"

/* Rows a packing task copies; query blocks a group needs per thread to be
 * packed: a packed group's tasks run on their own (its pack is the one
 * buffer), so with fewer a group's longest causal block would keep the
 * other threads waiting, where the unpacked tasks of all groups share the
 * threads. */
enum { PACK_ROWS = 64, PACK_BLOCKS_PER_THREAD = 4 };

/* Whether the group's query blocks, seq / block_q, are enough to pack for
 * this many threads (more than one, and PACK_BLOCKS_PER_THREAD each). */
static int enough_blocks(int64_t seq, ra_flash_layout f, int threads)
{
    const int64_t blocks = (seq + f.block_q - 1) / f.block_q;
    return blocks > 1 && blocks >= PACK_BLOCKS_PER_THREAD * (int64_t)threads;
}

/* Whether the flash path packs each group's K and V (above): float32 K and
 * V, no RoPE to apply, and enough query blocks to read them. */
static int flash_packs(const ra_attention_args *a, ra_flash_layout f, int threads)
{
    return enough_blocks(a->q->shape[1], f, threads) && a->k->dtype == RA_F32 &&
           a->v->dtype == RA_F32 && !a->rope;
}

size_t ra_attention_scratch_bytes(ra_attention_path path, int64_t batch, int64_t seq,
                                  int64_t n_keys, int64_t n_heads, int64_t n_kv_heads,
                                  int64_t head_dim, int threads)
{
    int64_t n;
    if (path == RA_PATH_REFERENCE) { /* scores [Sq, Sk] and a row of dropout multipliers */
        if (ra_mul(seq + 1, n_keys, &n) != RA_OK) return 0;
    } else {
        if (n_heads / n_kv_heads > 4096 || head_dim > RA_MAX_ELEMENTS / 4096) return 0;
        ra_flash_layout f = ra_flash_layout_for(n_heads / n_kv_heads, head_dim);
        int64_t pack = 0; /* 2 Sk x D rounded to 16, with enough blocks (flash_packs) */
        if (ra_mul(f.per_thread, threads, &n) != RA_OK) return 0;
        if (enough_blocks(seq, f, threads) &&
            ra_mul(n_keys, 2 * ra_round_up(head_dim, 16), &pack) != RA_OK)
            return 0;
        if (pack > RA_MAX_ELEMENTS - n) return 0;
        n += pack;
        int overflow; /* a short block's, on the decode kernel (ra_attention_flash) */
        const size_t brief = ra_attention_short_scratch_bytes(batch, seq, n_keys, n_heads,
                                                              n_kv_heads, head_dim, threads,
                                                              &overflow);
        if (overflow) return 0;
        if (brief > (size_t)n * sizeof(float)) return brief;
    }
    return (size_t)n * sizeof(float);
}

typedef struct pack_job {
    const ra_attention_args *args;
    float *pack; /* K then V: [Sk, D rounded to 16] each */
    int64_t b, g;
} pack_job;

/* Rows task PACK_ROWS .. of group (b, g)'s K and V into the pack, zeros
 * past D and for padding keys (the tiles' copies had them so). */
static void pack_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const pack_job *p = arg;
    const ra_attention_args *a = p->args;
    const int64_t n_keys = a->k->shape[1], head_dim = a->k->shape[3];
    const int64_t width = ra_round_up(head_dim, 16);
    const int64_t end = (task + 1) * PACK_ROWS < n_keys ? (task + 1) * PACK_ROWS : n_keys;
    for (int64_t j = task * PACK_ROWS; j < end; j++) {
        float *dk = p->pack + j * width, *dv = dk + n_keys * width;
        int64_t d = 0;
        if (ra_mask_real(&a->mask, p->b, j)) {
            memcpy(dk, ra_row(a->k, p->b, j, p->g), (size_t)head_dim * sizeof(float));
            memcpy(dv, ra_row(a->v, p->b, j, p->g), (size_t)head_dim * sizeof(float));
            d = head_dim;
        }
        memset(dk + d, 0, (size_t)(width - d) * sizeof(float));
        memset(dv + d, 0, (size_t)(width - d) * sizeof(float));
    }
}

void ra_attention_flash(ra_context *ctx, const ra_attention_args *args, float *scratch)
{
    if (ra_attention_short(args)) { /* a few query rows: the decode kernel's work */
        ra_attention_short_run(ctx, args, scratch);
        return;
    }
    const ra_tensor *q = args->q;
    ra_flash_job job;
    job.args = args;
    job.scratch = scratch;
    job.layout = ra_flash_layout_for(q->shape[2] / args->k->shape[2], q->shape[3]);
    job.n_query_blocks = (q->shape[1] + job.layout.block_q - 1) / job.layout.block_q;
    job.amx = q->dtype == RA_BF16 && args->k->dtype == RA_BF16 && args->v->dtype == RA_BF16 &&
              ra_cpu_amx_enable();
    job.task0 = 0;
    job.pack = NULL;
    const int64_t n_groups = q->shape[0] * args->k->shape[2], n_keys = args->k->shape[1];
    if (!flash_packs(args, job.layout, ra_parallel_threads(ctx))) {
        ra_parallel_for(ctx, job.n_query_blocks * n_groups, ra_kernels_get()->flash_task, &job);
        return;
    }
    pack_job p = {args, scratch + job.layout.per_thread * ra_parallel_threads(ctx), 0, 0};
    job.pack = p.pack;
    for (int64_t group = 0; group < n_groups; group++) { /* pack it, then its tasks */
        p.b = group / args->k->shape[2];
        p.g = group % args->k->shape[2];
        ra_parallel_for(ctx, (n_keys + PACK_ROWS - 1) / PACK_ROWS, pack_task, &p);
        job.task0 = group * job.n_query_blocks;
        ra_parallel_for(ctx, job.n_query_blocks, ra_kernels_get()->flash_task, &job);
    }
}
