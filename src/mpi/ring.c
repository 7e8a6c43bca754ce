/*
 * ring.c — ra_mpi_attention: ring attention forward over zig-zag shards.
 *
 *   q, out: [B, S_local, H, D]   k, v: [B, S_local, Hkv, D]   lse: [B, H, S_local]
 *   a K/V buffer: K [B, n_o, Hkv, D] then V [B, n_o, Hkv, D], n_o the rows of
 *   the rank o it came from (its two chunks, in order)
 *
 * Step s = 0 .. P - 1: the buffer in hand holds rank o = r - s's K/V; the
 * rank sends it on to r + 1 and receives o - 1's into the other buffer
 * while it computes its two query chunks against o's two key chunks
 * (ra_attention_block_lse), then waits for both transfers and swaps.  Each
 * block's (out, lse) is merged into the rows' running max m, sum l and
 * weighted outputs acc, in double, in ring order: the same bits every run.
 * mpi_attention_timed (ring_stats.h, for bench/mpi) also times the blocks
 * and the waits with MPI_Wtime; ra_mpi_attention is it without stats.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"
#include "mpi/ring_stats.h"

typedef struct ring {
    int size, rank;
    mpi_ring_shape s;
    int64_t max_count;          /* the larger of this rank's two chunks */
    ra_attention_options block; /* the caller's, without sinks */
    const float *sinks;         /* [H] or NULL */
    char *buf[2];               /* K/V buffers, each for max_rows tokens */
    double *acc;                /* [B, S_local, H, D] */
    double *m, *l;              /* [B, H, S_local] */
    float *blk_out, *blk_lse;   /* [B, max_count, H, D], [B, H, max_count] */
    mpi_ring_stats *stats;      /* or NULL: mpi_attention_timed's */
} ring;

static void ring_free(ring *g)
{
    free(g->buf[0]);
    free(g->buf[1]);
    free(g->acc);
    free(g->m);
    free(g->l);
    free(g->blk_out);
    free(g->blk_lse);
}

/* Rows of rank o's shard. */
static int64_t rows_of(const ring *g, int o) { return mpi_shard_rows(g->s.seq, g->size, o); }

/* Sizes and options that need no other rank: this rank's verdict. */
static ra_status check_local(ring *g, const ra_tensor *out, const float *lse, const ra_tensor *q,
                             const ra_tensor *k, const ra_tensor *v, int64_t seq,
                             const ra_attention_options *options)
{
    if (!out || !lse || !q || !k || !v)
        return mpi_fail(RA_ERR_NULL, "%s is NULL", !out ? "out" : !lse ? "lse" : !q ? "q"
                                                   : !k ? "k" : "v");
    RA_MPI_TRY(mpi_ring_shapes(&g->s, q, k, v, seq, g->size, g->rank));
    if (out->dtype != RA_F32) return mpi_fail(RA_ERR_DTYPE, "out must be f32");
    RA_MPI_TRY(mpi_same_shape(out, "out", q, "q"));
    RA_MPI_TRY(mpi_check_out(out, "out", lse, q->shape[0] * q->shape[2] * q->shape[1]));
    RA_MPI_TRY(mpi_ring_options(&g->block, options, "ra_mpi_attention", &g->sinks, NULL));
    RA_MPI_TRY(mpi_check_off_masks(out, "out", lse, g->s.batch * g->s.heads * g->s.n_local,
                                   &g->block, g->sinks, g->s.batch, g->s.heads, seq));
    g->max_count = g->s.count[0] > g->s.count[1] ? g->s.count[0] : g->s.count[1];
    return RA_OK;
}

/* The buffers; then libropeattn's own checks of every view and option,
 * on blocks of one query (or one key) row, into the scratch. */
static ra_status prepare(ring *g, ra_context *ctx, const ra_tensor *q, const ra_tensor *k,
                         const ra_tensor *v, const ra_attention_options *options)
{
    const int64_t B = g->s.batch, H = g->s.heads, D = g->s.head_dim, n = g->s.n_local;
    const size_t kv_bytes = 2 * (size_t)(B * g->s.max_rows) * g->s.kv_row;
    g->buf[0] = malloc(kv_bytes);
    g->buf[1] = malloc(kv_bytes);
    g->acc = malloc((size_t)(B * n * H * D) * sizeof(double));
    g->m = malloc((size_t)(B * H * n) * sizeof(double));
    g->l = malloc((size_t)(B * H * n) * sizeof(double));
    g->blk_out = malloc((size_t)(B * g->max_count * H * D) * sizeof(float));
    g->blk_lse = malloc((size_t)(B * H * g->max_count) * sizeof(float));
    if (!g->buf[0] || !g->buf[1] || !g->acc || !g->m || !g->l || !g->blk_out || !g->blk_lse)
        return mpi_fail(RA_ERR_NOMEM, "rank %d: out of memory for the ring's buffers",
                        g->rank);
    /* q (every row) against k's first row, into acc's memory as float; then
     * q's first row against every key, into the block's scratch: as
     * ra_attention_block_lse will see them, sinks included */
    ra_tensor k1 = mpi_rows(k, 0, 1), v1 = mpi_rows(v, 0, 1), q1 = mpi_rows(q, 0, 1);
    ra_tensor out_all = ra_tensor_4d(g->acc, RA_F32, B, n, H, D);
    ra_tensor out1 = ra_tensor_4d(g->blk_out, RA_F32, B, 1, H, D);
    RA_MPI_TRY(mpi_core(ra_attention_block_lse(ctx, &out_all, (float *)(void *)g->m, q, &k1,
                                               &v1, g->s.seq - n, 0, g->s.seq, options),
                        "ra_mpi_attention: q"));
    RA_MPI_TRY(mpi_core(ra_attention_block_lse(ctx, &out1, g->blk_lse, &q1, k, v, g->s.seq - 1, 0,
                                               g->s.seq, options),
                        "ra_mpi_attention: k, v"));
    return RA_OK;
}

/* Merges a block's rows (query chunk rows [r0, r0 + nq)) into the running
 * m, l and acc:  m' = max(m, lse_b);  acc = acc e^(m - m') + out_b e^(lse_b - m');
 * l = l e^(m - m') + e^(lse_b - m').  A row that saw no key (lse -Inf) is
 * left alone. */
static void merge(ring *g, int64_t r0, int64_t nq)
{
    const int64_t H = g->s.heads, D = g->s.head_dim, n = g->s.n_local;
    for (int64_t b = 0; b < g->s.batch; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < nq; i++) {
                const double lb = g->blk_lse[(b * H + h) * nq + i];
                if (lb == -INFINITY) continue;
                const int64_t row = (b * H + h) * n + r0 + i;
                double *acc = g->acc + ((b * n + r0 + i) * H + h) * D, w = 1.0;
                const float *o = g->blk_out + ((b * nq + i) * H + h) * D;
                if (lb > g->m[row]) {
                    const double keep = g->m[row] == -INFINITY ? 0.0 : exp(g->m[row] - lb);
                    for (int64_t d = 0; d < D; d++) acc[d] *= keep;
                    g->l[row] *= keep;
                    g->m[row] = lb;
                } else {
                    w = exp(lb - g->m[row]);
                }
                for (int64_t d = 0; d < D; d++) acc[d] += w * o[d];
                g->l[row] += w;
            }
}

/* Computes this rank's query chunks against the key chunks of rank o,
 * whose K/V are in kv; tests the transfers in flight between blocks. */
static ra_status blocks(ring *g, ra_context *ctx, const ra_tensor *q, const char *kv, int o,
                        MPI_Request *reqs, int n_reqs)
{
    int64_t ostart[2], ocount[2];
    mpi_chunks(g->s.seq, g->size, o, ostart, ocount);
    const int64_t n_o = ocount[0] + ocount[1], B = g->s.batch;
    const ra_tensor kt = ra_tensor_4d((void *)kv, g->s.kv_dtype, B, n_o, g->s.kv_heads, g->s.head_dim);
    const ra_tensor vt = ra_tensor_4d((void *)(kv + (size_t)(B * n_o) * g->s.kv_row), g->s.kv_dtype,
                                      B, n_o, g->s.kv_heads, g->s.head_dim);
    const int64_t chunk[2] = {g->rank, 2 * (int64_t)g->size - 1 - g->rank};
    const int64_t ochunk[2] = {o, 2 * (int64_t)g->size - 1 - o};
    for (int qi = 0; qi < 2; qi++)
        for (int ki = 0; ki < 2; ki++) {
            const int64_t nq = g->s.count[qi], nk = ocount[ki];
            const int64_t q_start = g->s.start[qi], k_start = ostart[ki];
            if (!mpi_block_visible(&g->block, nq, nk, ochunk[ki] > chunk[qi], q_start, k_start))
                continue;
            const int64_t r0 = qi ? g->s.count[0] : 0;
            ra_tensor qb = mpi_rows(q, r0, nq);
            ra_tensor kb = mpi_rows(&kt, ki ? ocount[0] : 0, nk);
            ra_tensor vb = mpi_rows(&vt, ki ? ocount[0] : 0, nk);
            ra_tensor ob = ra_tensor_4d(g->blk_out, RA_F32, B, nq, g->s.heads, g->s.head_dim);
            const double t0 = g->stats ? MPI_Wtime() : 0.0;
            RA_MPI_TRY(mpi_core(ra_attention_block_lse(ctx, &ob, g->blk_lse, &qb, &kb, &vb,
                                                       q_start, k_start, g->s.seq, &g->block),
                                "ra_mpi_attention: a block"));
            merge(g, r0, nq);
            if (g->stats) g->stats->compute_s += MPI_Wtime() - t0, g->stats->blocks++;
            int done;
            if (n_reqs) MPI_Testall(n_reqs, reqs, &done, MPI_STATUSES_IGNORE);
        }
    return RA_OK;
}

/* The ring's P steps.  A failed block stops the compute but not the
 * traffic, so that every rank completes its transfers. */
static ra_status run(ring *g, ra_context *ctx, const ra_tensor *q, MPI_Comm comm,
                     MPI_Datatype row)
{
    const int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    ra_status status = RA_OK;
    for (int s = 0; s < g->size; s++) {
        const int o = (g->rank - s + g->size) % g->size, cur = s % 2;
        MPI_Request reqs[2];
        int n_reqs = 0;
        if (s + 1 < g->size) {
            const int o_next = (o + g->size - 1) % g->size;
            int rc = MPI_Irecv(g->buf[!cur], (int)(2 * g->s.batch * rows_of(g, o_next)), row, prev,
                               s, comm, &reqs[0]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(g->buf[cur], (int)(2 * g->s.batch * rows_of(g, o)), row, next, s,
                               comm, &reqs[1]);
            RA_MPI_TRY(mpi_check(rc, "MPI_Irecv/MPI_Isend"));
            n_reqs = 2;
            if (g->stats)
                g->stats->bytes_sent += 2 * g->s.batch * rows_of(g, o) * (int64_t)g->s.kv_row;
        }
        if (status == RA_OK) status = blocks(g, ctx, q, g->buf[cur], o, reqs, n_reqs);
        const double t0 = g->stats ? MPI_Wtime() : 0.0;
        if (n_reqs)
            RA_MPI_TRY(mpi_check(MPI_Waitall(n_reqs, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall"));
        if (g->stats) g->stats->wait_s += MPI_Wtime() - t0;
    }
    return status;
}

/* out and lse from the merged rows, each query head's sink joining once:
 * m' = max(m, sink), l' = l e^(m - m') + e^(sink - m').  A padding query's
 * row: zeros and lse -Inf, no sink (ra_attention's). */
static void finish(const ring *g, const ra_tensor *out, float *lse)
{
    const int64_t H = g->s.heads, D = g->s.head_dim, n = g->s.n_local;
    for (int64_t b = 0; b < g->s.batch; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++) {
                const int64_t row = (b * H + h) * n + i;
                float *dst = (float *)out->data + b * out->stride[0] + i * out->stride[1] +
                             h * out->stride[2];
                if (!mpi_real_row(&g->block, g->s.seq, b, g->s.start, g->s.count, i)) {
                    for (int64_t d = 0; d < D; d++) dst[d] = 0.0f;
                    lse[row] = -INFINITY;
                    continue;
                }
                double m = g->m[row], l = g->l[row], keep = 1.0;
                if (g->sinks) {
                    const double sink = g->sinks[h], top = m > sink ? m : sink;
                    keep = m == -INFINITY ? 0.0 : exp(m - top);
                    l = l * keep + exp(sink - top);
                    m = top;
                }
                const double *acc = g->acc + ((b * n + i) * H + h) * D;
                for (int64_t d = 0; d < D; d++) dst[d] = (float)(acc[d] * keep / l);
                lse[row] = (float)(m + log(l));
            }
}

ra_status mpi_attention_timed(ra_context *ctx, MPI_Comm comm, const ra_tensor *out, float *lse,
                              const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                              int64_t seq, const ra_attention_options *options,
                              mpi_ring_stats *stats)
{
    const double start = stats ? MPI_Wtime() : 0.0;
    if (stats) memset(stats, 0, sizeof *stats);
    mpi_reset();
    if (comm == MPI_COMM_NULL) return mpi_fail(RA_ERR_NULL, "comm is MPI_COMM_NULL");
    ring g;
    memset(&g, 0, sizeof g);
    g.stats = stats;
    RA_MPI_TRY(mpi_check(MPI_Comm_size(comm, &g.size), "MPI_Comm_size"));
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(comm, &g.rank), "MPI_Comm_rank"));
    ra_status status = check_local(&g, out, lse, q, k, v, seq, options);
    if (status == RA_OK) status = prepare(&g, ctx, q, k, v, options);
    mpi_sig sig[MPI_RING_SIG];
    mpi_ring_signature(sig, &g.s, seq, status == RA_OK ? &g.block : NULL, g.sinks);
    status = mpi_agree(comm, status, sig, MPI_RING_SIG);
    MPI_Datatype row = MPI_DATATYPE_NULL;
    if (status == RA_OK) {
        status = mpi_check(MPI_Type_contiguous((int)g.s.kv_row, MPI_BYTE, &row),
                           "MPI_Type_contiguous");
        if (status == RA_OK) status = mpi_check(MPI_Type_commit(&row), "MPI_Type_commit");
    }
    if (status == RA_OK) {
        mpi_pack_kv(g.buf[0], k, v);
        for (int64_t i = 0; i < g.s.batch * g.s.heads * g.s.n_local; i++) g.m[i] = -INFINITY, g.l[i] = 0.0;
        memset(g.acc, 0, (size_t)(g.s.batch * g.s.n_local * g.s.heads * g.s.head_dim) * sizeof(double));
        status = run(&g, ctx, q, comm, row);
        /* a block that failed on one rank fails the call on every rank */
        status = mpi_agree(comm, status, NULL, 0);
        if (status == RA_OK) finish(&g, out, lse);
    }
    if (row != MPI_DATATYPE_NULL) MPI_Type_free(&row);
    ring_free(&g);
    if (stats) stats->total_s = MPI_Wtime() - start;
    return status;
}

RA_MPI_API ra_status ra_mpi_attention(ra_context *ctx, MPI_Comm comm, const ra_tensor *out,
                                      float *lse, const ra_tensor *q, const ra_tensor *k,
                                      const ra_tensor *v, int64_t seq,
                                      const ra_attention_options *options)
{
    return mpi_attention_timed(ctx, comm, out, lse, q, k, v, seq, options, NULL);
}
