/*
 * ring_backward.c — ra_mpi_attention_backward: ring attention's backward
 * over zig-zag shards, dK/dV travelling with K/V (FlashAttention-style
 * ring backward).
 *
 *   q, out, dout, dq: [B, S_local, H, D]   k, v, dk, dv: [B, S_local, Hkv, D]
 *   lse: [B, H, S_local]
 *   a K/V buffer: K [B, n_o, Hkv, D] then V, as ring.c's
 *   a dK/dV buffer: dK [B, n_o, Hkv, D] then dV, float32, for rank o's keys
 *
 * Step s = 0 .. P - 1, o = r - s: the rank sends the K/V in hand on to
 * r + 1 and receives o - 1's (as the forward), and receives from r - 1 the
 * dK/dV that ranks o .. r - 1 have summed for o's keys, while it computes
 * its query chunks against o's key chunks (ra_attention_block_backward):
 * dq into its own rows, dK/dV into a zeroed buffer of its own.  Then it
 * adds that buffer to the one received (received + own: the ring fixes the
 * order, so the same bits every run) and sends the sum on to r + 1.  After
 * step P - 1 the sum that arrives is the rank's own keys', complete: P + 1
 * dK/dV transfers, each under a step's compute but the last.
 * mpi_attention_backward_timed (ring_stats.h) also times the blocks and
 * the waits; ra_mpi_attention_backward is it without stats.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"
#include "mpi/ring_stats.h"

typedef struct ring_back {
    int size, rank;
    mpi_ring_shape s;
    size_t grad_row;            /* bytes of one token's dK (dV) */
    ra_attention_options block; /* the caller's, without sinks and dsinks */
    const float *sinks;         /* [H] or NULL */
    float *dsinks;              /* [H] or NULL: the caller's, with sinks */
    char *kv[2];                /* K/V buffers, each for max_rows tokens */
    float *own[2];              /* this step's dK/dV, alternate steps (one in flight) */
    float *sum;                 /* the dK/dV received */
    float *dq;                  /* [B, S_local, H, D], then [B, H] for prepare's check */
    float *lse[2];              /* the caller's lse, per query chunk: [B, H, count[i]] */
    double *share;              /* [P + 1, H]: dsinks' shares (with sinks) */
    mpi_ring_stats *stats;      /* or NULL */
} ring_back;

static void ring_back_free(ring_back *g)
{
    for (int i = 0; i < 2; i++) free(g->kv[i]), free(g->own[i]);
    free(g->sum);
    free(g->dq);
    free(g->lse[0]);
    free(g->share);
}

/* Rows of rank o's shard. */
static int64_t rows_of(const ring_back *g, int o) { return mpi_shard_rows(g->s.seq, g->size, o); }

/* Sizes and options that need no other rank: this rank's verdict. */
static ra_status check_local(ring_back *g, const ra_tensor *dq, const ra_tensor *dk,
                             const ra_tensor *dv, const ra_tensor *dout, const ra_tensor *q,
                             const ra_tensor *k, const ra_tensor *v, const ra_tensor *out,
                             const float *lse, int64_t seq, const ra_attention_options *options)
{
    const void *args[9] = {dq, dk, dv, dout, q, k, v, out, lse};
    static const char *const names[9] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out", "lse"};
    for (int i = 0; i < 9; i++)
        if (!args[i]) return mpi_fail(RA_ERR_NULL, "%s is NULL", names[i]);
    RA_MPI_TRY(mpi_ring_shapes(&g->s, q, k, v, seq, g->size, g->rank));
    const ra_tensor *f32[5] = {dq, dk, dv, dout, out};
    static const char *const f32_names[5] = {"dq", "dk", "dv", "dout", "out"};
    for (int i = 0; i < 5; i++)
        if (f32[i]->dtype != RA_F32)
            return mpi_fail(RA_ERR_DTYPE, "%s must be f32", f32_names[i]);
    RA_MPI_TRY(mpi_same_shape(out, "out", q, "q"));
    RA_MPI_TRY(mpi_same_shape(dout, "dout", q, "q"));
    RA_MPI_TRY(mpi_same_shape(dq, "dq", q, "q"));
    RA_MPI_TRY(mpi_same_shape(dk, "dk", k, "k"));
    RA_MPI_TRY(mpi_same_shape(dv, "dv", k, "k"));
    RA_MPI_TRY(mpi_check_out(dq, "dq", NULL, 0));
    RA_MPI_TRY(mpi_check_out(dk, "dk", NULL, 0));
    RA_MPI_TRY(mpi_check_out(dv, "dv", NULL, 0));
    RA_MPI_TRY(mpi_check_apart(dq, "dq", dk, "dk"));
    RA_MPI_TRY(mpi_check_apart(dq, "dq", dv, "dv"));
    RA_MPI_TRY(mpi_check_apart(dk, "dk", dv, "dv"));
    g->grad_row = (size_t)(g->s.kv_heads * g->s.head_dim) * sizeof(float);
    RA_MPI_TRY(mpi_ring_options(&g->block, options, "ra_mpi_attention_backward", &g->sinks,
                                &g->dsinks));
    const ra_tensor *const grads[3] = {dq, dk, dv};
    static const char *const grad_names[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++)
        RA_MPI_TRY(mpi_check_off_masks(grads[i], grad_names[i], NULL, 0, &g->block, g->sinks,
                                       g->s.batch, g->s.heads, seq));
    if (g->dsinks) { /* [H], written before dq, dk and dv */
        const ra_tensor ds = ra_tensor_4d(g->dsinks, RA_F32, 1, 1, g->s.heads, 1);
        for (int i = 0; i < 3; i++)
            RA_MPI_TRY(mpi_check_apart(grads[i], grad_names[i], &ds, "dsinks"));
        RA_MPI_TRY(mpi_check_off_masks(&ds, "dsinks", lse, g->s.batch * g->s.heads * g->s.n_local,
                                       &g->block, g->sinks, g->s.batch, g->s.heads, seq));
    }
    return RA_OK;
}

/* The buffers, lse per query chunk; then libropeattn's own checks of every
 * view and option: blocks whose queries all come before their keys, which
 * add nothing (into the rank's own buffers). */
static ra_status prepare(ring_back *g, ra_context *ctx, const ra_tensor *dout,
                         const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                         const ra_tensor *out, const float *lse)
{
    const int64_t B = g->s.batch, H = g->s.heads, D = g->s.head_dim, n = g->s.n_local;
    const size_t kv_bytes = 2 * (size_t)(B * g->s.max_rows) * g->s.kv_row;
    const size_t grad_bytes = 2 * (size_t)(B * g->s.max_rows) * g->grad_row;
    for (int i = 0; i < 2; i++) g->kv[i] = malloc(kv_bytes), g->own[i] = malloc(grad_bytes);
    g->sum = malloc(grad_bytes);
    g->dq = calloc((size_t)(B * n * H * D + B * H), sizeof(float));
    g->lse[0] = malloc((size_t)(B * H * n) * sizeof(float));
    if (g->dsinks) g->share = calloc((size_t)(H * (g->size + 1)), sizeof(double));
    if (!g->kv[0] || !g->kv[1] || !g->own[0] || !g->own[1] || !g->sum || !g->dq || !g->lse[0] ||
        (g->dsinks && !g->share))
        return mpi_fail(RA_ERR_NOMEM, "rank %d: out of memory for the ring's buffers", g->rank);
    g->lse[1] = g->lse[0] + B * H * g->s.count[0];
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int i = 0; i < 2; i++)
            memcpy(g->lse[i] + bh * g->s.count[i], lse + bh * n + (i ? g->s.count[0] : 0),
                   (size_t)g->s.count[i] * sizeof(float));
    memset(g->own[0], 0, grad_bytes);
    const int64_t Hkv = g->s.kv_heads;
    ra_tensor dq_all = ra_tensor_4d(g->dq, RA_F32, B, n, H, D);
    ra_tensor dk1 = ra_tensor_4d(g->own[0], RA_F32, B, 1, Hkv, D);
    ra_tensor dv1 = ra_tensor_4d(g->own[0] + B * Hkv * D, RA_F32, B, 1, Hkv, D);
    ra_tensor k1 = mpi_rows(k, 0, 1), v1 = mpi_rows(v, 0, 1);
    RA_MPI_TRY(mpi_core(ra_attention_block_backward(ctx, &dq_all, &dk1, &dv1, dout, q, &k1, &v1,
                                                    out, lse, 0, g->s.seq - 1, g->s.seq, &g->block),
                        "ra_mpi_attention_backward: q, dout, out, lse"));
    /* k and v whole: the forward's block on one query row (its scratch
     * does not grow with the keys, the backward's would), into dq's
     * memory (out [B, 1, H, D], then lse [B, H] past dq) */
    ra_tensor q1 = mpi_rows(q, 0, 1), out1 = ra_tensor_4d(g->dq, RA_F32, B, 1, H, D);
    RA_MPI_TRY(mpi_core(ra_attention_block_lse(ctx, &out1, g->dq + B * n * H * D, &q1, k, v, 0,
                                               g->s.seq - n, g->s.seq, &g->block),
                        "ra_mpi_attention_backward: k, v"));
    return RA_OK;
}

/* This rank's query chunks against rank o's key chunks (K/V in kv) into dq
 * and grad (o's dK/dV, zeroed); tests the transfers in flight between
 * blocks. */
static ra_status blocks(ring_back *g, ra_context *ctx, const ra_tensor *dout, const ra_tensor *q,
                        const ra_tensor *out, const char *kv, float *grad, int o,
                        MPI_Request *reqs, int n_reqs)
{
    int64_t ostart[2], ocount[2];
    mpi_chunks(g->s.seq, g->size, o, ostart, ocount);
    const int64_t n_o = ocount[0] + ocount[1], B = g->s.batch, Hkv = g->s.kv_heads;
    const int64_t D = g->s.head_dim;
    const ra_tensor kt = ra_tensor_4d((void *)kv, g->s.kv_dtype, B, n_o, Hkv, D);
    const ra_tensor vt = ra_tensor_4d((void *)(kv + (size_t)(B * n_o) * g->s.kv_row), g->s.kv_dtype,
                                      B, n_o, Hkv, D);
    const ra_tensor dkt = ra_tensor_4d(grad, RA_F32, B, n_o, Hkv, D);
    const ra_tensor dvt = ra_tensor_4d(grad + B * n_o * Hkv * D, RA_F32, B, n_o, Hkv, D);
    const ra_tensor dqt = ra_tensor_4d(g->dq, RA_F32, B, g->s.n_local, g->s.heads, D);
    const int64_t chunk[2] = {g->rank, 2 * (int64_t)g->size - 1 - g->rank};
    const int64_t ochunk[2] = {o, 2 * (int64_t)g->size - 1 - o};
    for (int qi = 0; qi < 2; qi++)
        for (int ki = 0; ki < 2; ki++) {
            const int64_t nq = g->s.count[qi], nk = ocount[ki];
            const int64_t q_start = g->s.start[qi], k_start = ostart[ki];
            /* the forward's blocks: one it skips adds nothing */
            if (!mpi_block_visible(&g->block, nq, nk, ochunk[ki] > chunk[qi], q_start, k_start))
                continue;
            const int64_t r0 = qi ? g->s.count[0] : 0, k0 = ki ? ocount[0] : 0;
            ra_tensor qb = mpi_rows(q, r0, nq), dob = mpi_rows(dout, r0, nq);
            ra_tensor ob = mpi_rows(out, r0, nq), dqb = mpi_rows(&dqt, r0, nq);
            ra_tensor kb = mpi_rows(&kt, k0, nk), vb = mpi_rows(&vt, k0, nk);
            ra_tensor dkb = mpi_rows(&dkt, k0, nk), dvb = mpi_rows(&dvt, k0, nk);
            const double t0 = g->stats ? MPI_Wtime() : 0.0;
            RA_MPI_TRY(mpi_core(ra_attention_block_backward(ctx, &dqb, &dkb, &dvb, &dob, &qb, &kb,
                                                            &vb, &ob, g->lse[qi], q_start,
                                                            k_start, g->s.seq, &g->block),
                                "ra_mpi_attention_backward: a block"));
            if (g->stats) g->stats->compute_s += MPI_Wtime() - t0, g->stats->blocks++;
            int done;
            if (n_reqs) MPI_Testall(n_reqs, reqs, &done, MPI_STATUSES_IGNORE);
        }
    return RA_OK;
}

/* The ring's P steps and the last hop.  A failed block stops the compute
 * but not the traffic, so that every rank completes its transfers. */
static ra_status run(ring_back *g, ra_context *ctx, const ra_tensor *dout, const ra_tensor *q,
                     const ra_tensor *out, MPI_Comm comm, MPI_Datatype kv_row,
                     MPI_Datatype grad_row)
{
    const int P = g->size, next = (g->rank + 1) % P, prev = (g->rank + P - 1) % P;
    const size_t grad_bytes = 2 * (size_t)(g->s.batch * g->s.max_rows) * g->grad_row;
    MPI_Request sent[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}; /* own[i]'s send */
    ra_status status = RA_OK;
    for (int s = 0; s < P; s++) {
        const int o = (g->rank - s + P) % P, cur = s % 2;
        const int count = (int)(2 * g->s.batch * rows_of(g, o));
        MPI_Request reqs[3];
        int n_reqs = 0, rc = MPI_SUCCESS;
        if (s + 1 < P) { /* the next K/V, as the forward */
            const int o_next = (o + P - 1) % P;
            rc = MPI_Irecv(g->kv[!cur], (int)(2 * g->s.batch * rows_of(g, o_next)), kv_row, prev,
                           s, comm, &reqs[n_reqs++]);
            if (rc == MPI_SUCCESS)
                rc = MPI_Isend(g->kv[cur], count, kv_row, next, s, comm, &reqs[n_reqs++]);
            if (g->stats) g->stats->bytes_sent += count * (int64_t)g->s.kv_row;
        }
        if (s > 0 && rc == MPI_SUCCESS) /* the dK/dV ranks o .. r - 1 summed */
            rc = MPI_Irecv(g->sum, count, grad_row, prev, P + s, comm, &reqs[n_reqs++]);
        RA_MPI_TRY(mpi_check(rc, "MPI_Irecv/MPI_Isend"));
        /* own[cur] is free once its send of two steps ago completed */
        RA_MPI_TRY(mpi_check(MPI_Wait(&sent[cur], MPI_STATUS_IGNORE), "MPI_Wait"));
        memset(g->own[cur], 0, grad_bytes);
        if (status == RA_OK)
            status = blocks(g, ctx, dout, q, out, g->kv[cur], g->own[cur], o, reqs, n_reqs);
        const double t0 = g->stats ? MPI_Wtime() : 0.0;
        if (n_reqs)
            RA_MPI_TRY(mpi_check(MPI_Waitall(n_reqs, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall"));
        if (g->stats) g->stats->wait_s += MPI_Wtime() - t0;
        if (s > 0) /* received + own, in that order */
            for (int64_t i = 0; i < (int64_t)count * (g->s.kv_heads * g->s.head_dim); i++)
                g->own[cur][i] = g->sum[i] + g->own[cur][i];
        if (P > 1) {
            RA_MPI_TRY(mpi_check(MPI_Isend(g->own[cur], count, grad_row, next, P + s + 1, comm,
                                           &sent[cur]),
                                 "MPI_Isend"));
            if (g->stats) g->stats->bytes_sent += count * (int64_t)g->grad_row;
        }
    }
    if (P > 1) { /* the last hop: this rank's own keys' sum */
        const double t0 = g->stats ? MPI_Wtime() : 0.0;
        RA_MPI_TRY(mpi_check(MPI_Recv(g->sum, (int)(2 * g->s.batch * g->s.n_local), grad_row, prev,
                                      2 * P, comm, MPI_STATUS_IGNORE),
                             "MPI_Recv"));
        RA_MPI_TRY(mpi_check(MPI_Waitall(2, sent, MPI_STATUSES_IGNORE), "MPI_Waitall"));
        if (g->stats) g->stats->wait_s += MPI_Wtime() - t0;
    }
    return status;
}

/* dL/dsinks[h] = -sum over the rows of e^(sinks[h] - lse) Delta, Delta =
 * rowsum(dout * out): this rank's rows (in double, b then row order; padding
 * queries have no share), then every rank's shares gathered and summed in
 * rank order, the same bits on every rank. */
static ra_status sinks_grad(const ring_back *g, const ra_tensor *dout, const ra_tensor *out,
                            const float *lse, MPI_Comm comm)
{
    const int64_t B = g->s.batch, H = g->s.heads, D = g->s.head_dim, n = g->s.n_local;
    double *share = g->share; /* prepare's: every rank reaches the MPI_Allgather */
    for (int64_t h = 0; h < H; h++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < n; i++) {
                if (!mpi_real_row(&g->block, g->s.seq, b, g->s.start, g->s.count, i)) continue;
                const float *dy = (const float *)dout->data + b * dout->stride[0] +
                                  i * dout->stride[1] + h * dout->stride[2];
                const float *y = (const float *)out->data + b * out->stride[0] +
                                 i * out->stride[1] + h * out->stride[2];
                double delta = 0;
                for (int64_t d = 0; d < D; d++) delta += (double)dy[d] * y[d];
                share[h] -= exp((double)g->sinks[h] - lse[(b * H + h) * n + i]) * delta;
            }
    ra_status status = mpi_check(MPI_Allgather(share, (int)H, MPI_DOUBLE, share + H, (int)H,
                                               MPI_DOUBLE, comm),
                                 "MPI_Allgather");
    for (int64_t h = 0; status == RA_OK && h < H; h++) {
        double sum = 0;
        for (int r = 0; r < g->size; r++) sum += share[H + r * H + h];
        g->dsinks[h] = (float)sum;
    }
    return status;
}

/* The float32 rows [B, n, heads, D] of src into the view dst. */
static void store(const ra_tensor *dst, const float *src)
{
    const int64_t n = dst->shape[1], heads = dst->shape[2], D = dst->shape[3];
    for (int64_t b = 0; b < dst->shape[0]; b++)
        for (int64_t s = 0; s < n; s++)
            for (int64_t h = 0; h < heads; h++)
                memcpy((float *)dst->data + b * dst->stride[0] + s * dst->stride[1] +
                           h * dst->stride[2],
                       src + ((b * n + s) * heads + h) * D, (size_t)D * sizeof(float));
}

ra_status mpi_attention_backward_timed(ra_context *ctx, MPI_Comm comm, const ra_tensor *dq,
                                       const ra_tensor *dk, const ra_tensor *dv,
                                       const ra_tensor *dout, const ra_tensor *q,
                                       const ra_tensor *k, const ra_tensor *v,
                                       const ra_tensor *out, const float *lse, int64_t seq,
                                       const ra_attention_options *options,
                                       mpi_ring_stats *stats)
{
    const double start = stats ? MPI_Wtime() : 0.0;
    if (stats) memset(stats, 0, sizeof *stats);
    mpi_reset();
    if (comm == MPI_COMM_NULL) return mpi_fail(RA_ERR_NULL, "comm is MPI_COMM_NULL");
    ring_back g;
    memset(&g, 0, sizeof g);
    g.stats = stats;
    RA_MPI_TRY(mpi_check(MPI_Comm_size(comm, &g.size), "MPI_Comm_size"));
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(comm, &g.rank), "MPI_Comm_rank"));
    ra_status status = check_local(&g, dq, dk, dv, dout, q, k, v, out, lse, seq, options);
    if (status == RA_OK) status = prepare(&g, ctx, dout, q, k, v, out, lse);
    mpi_sig sig[MPI_RING_SIG + 1];
    mpi_ring_signature(sig, &g.s, seq, status == RA_OK ? &g.block : NULL, g.sinks);
    sig[MPI_RING_SIG] = (mpi_sig){"dsinks", g.dsinks != NULL, MPI_SIG_ARRAY};
    status = mpi_agree(comm, status, sig, MPI_RING_SIG + 1);
    MPI_Datatype rows[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL}; /* K (V) row, dK (dV) row */
    for (int i = 0; i < 2 && status == RA_OK; i++) {
        status = mpi_check(MPI_Type_contiguous((int)(i ? g.grad_row : g.s.kv_row), MPI_BYTE,
                                               &rows[i]),
                           "MPI_Type_contiguous");
        if (status == RA_OK) status = mpi_check(MPI_Type_commit(&rows[i]), "MPI_Type_commit");
    }
    if (status == RA_OK) {
        mpi_pack_kv(g.kv[0], k, v);
        memset(g.dq, 0, (size_t)(g.s.batch * g.s.n_local * g.s.heads * g.s.head_dim) * sizeof(float));
        status = run(&g, ctx, dout, q, out, comm, rows[0], rows[1]);
        /* a block that failed on one rank fails the call on every rank */
        status = mpi_agree(comm, status, NULL, 0);
        if (status == RA_OK && g.dsinks) status = sinks_grad(&g, dout, out, lse, comm);
        if (status == RA_OK) {
            /* the sum of this rank's keys: the last one received (with
             * P = 1, the only step's own) */
            const float *grad = g.size > 1 ? g.sum : g.own[0];
            store(dq, g.dq);
            store(dk, grad);
            store(dv, grad + g.s.batch * g.s.n_local * g.s.kv_heads * g.s.head_dim);
        }
    }
    for (int i = 0; i < 2; i++)
        if (rows[i] != MPI_DATATYPE_NULL) MPI_Type_free(&rows[i]);
    ring_back_free(&g);
    if (stats) stats->total_s = MPI_Wtime() - start;
    return status;
}

RA_MPI_API ra_status ra_mpi_attention_backward(ra_context *ctx, MPI_Comm comm,
                                               const ra_tensor *dq, const ra_tensor *dk,
                                               const ra_tensor *dv, const ra_tensor *dout,
                                               const ra_tensor *q, const ra_tensor *k,
                                               const ra_tensor *v, const ra_tensor *out,
                                               const float *lse, int64_t seq,
                                               const ra_attention_options *options)
{
    return mpi_attention_backward_timed(ctx, comm, dq, dk, dv, dout, q, k, v, out, lse, seq,
                                        options, NULL);
}
