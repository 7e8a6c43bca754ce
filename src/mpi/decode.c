/*
 * decode.c — ra_mpi_attention_decode: decoding against a sequence-sharded
 * KV cache, the shards' partial softmaxes combined by one MPI_Allreduce.
 *
 *   q, out: [B, T, H, D]   lse: [B, H, T]   lengths: [P, B] (rank-major)
 *   a partial row [D + 3] doubles: o[D] (its shard's output), m (its lse),
 *   l (1; 0 for a row that saw nothing), failed (1 on a rank whose compute
 *   failed); the rows [B, H, T] in lse's order
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"

typedef struct decode {
    int size, rank;
    int64_t batch, tokens, heads, head_dim;
    ra_attention_options block; /* the caller's, without sinks */
    const float *sinks;         /* [H] or NULL */
    int64_t *n, *q_start;       /* [B] each: the queries, their position in this shard */
    int64_t *k_start;           /* [B]: the shard's first token's position (chunks' origin) */
    int64_t *lengths;           /* [P, B] */
    float *out, *lse;           /* this shard's: [B, T, H, D], [B, H, T] */
    double *rows;               /* [B, H, T, D + 3] */
} decode;

static void decode_free(decode *g)
{
    free(g->n);
    free(g->q_start);
    free(g->k_start);
    free(g->lengths);
    free(g->out);
    free(g->lse);
    free(g->rows);
}

/* The merge of two partial rows, a from the lower ranks into b:
 * m = max(m_a, m_b), w_x = e^(m_x - m) (0 for a row that saw nothing),
 * o = o_a w_a + o_b w_b, l = l_a w_a + l_b w_b.  Not commutative in
 * rounding: MPI applies it in rank order. */
static void merge_rows(void *in, void *inout, int *len, MPI_Datatype *type)
{
    int bytes = 0;
    MPI_Type_size(*type, &bytes);
    const int64_t width = bytes / (int64_t)sizeof(double), D = width - 3;
    for (int64_t i = 0; i < *len; i++) {
        const double *a = (const double *)in + i * width;
        double *b = (double *)inout + i * width;
        const double m = a[D] > b[D] ? a[D] : b[D];
        const double wa = a[D] == -INFINITY ? 0.0 : exp(a[D] - m);
        const double wb = b[D] == -INFINITY ? 0.0 : exp(b[D] - m);
        for (int64_t d = 0; d < D; d++) b[d] = a[d] * wa + b[d] * wb;
        b[D] = m;
        b[D + 1] = a[D + 1] * wa + b[D + 1] * wb;
        b[D + 2] = a[D + 2] > b[D + 2] ? a[D + 2] : b[D + 2];
    }
}

/* This rank's verdict on its arguments, its buffers, and a dry run of
 * ra_attention_decode_lse without queries (libropeattn's checks of the
 * views, the cache and the options). */
static ra_status check_local(decode *g, ra_context *ctx, const ra_kv_cache *cache,
                             const ra_tensor *out, const float *lse, const ra_tensor *q,
                             const int64_t *n_query, const ra_attention_options *options)
{
    if (!cache || !out || !q)
        return mpi_fail(RA_ERR_NULL, "%s is NULL", !cache ? "cache" : !out ? "out" : "q");
    if (q->dtype != RA_F32 || out->dtype != RA_F32)
        return mpi_fail(RA_ERR_DTYPE, "q and out must be f32");
    for (int d = 0; d < 4; d++)
        if (q->shape[d] < 1 || out->shape[d] != q->shape[d])
            return mpi_fail(RA_ERR_SHAPE, "q [%lld, %lld, %lld, %lld] and out differ in axis %d "
                            "(or q's is not positive)", (long long)q->shape[0],
                            (long long)q->shape[1], (long long)q->shape[2],
                            (long long)q->shape[3], d);
    RA_MPI_TRY(mpi_check_out(out, "out", lse, q->shape[0] * q->shape[2] * q->shape[1]));
    g->batch = q->shape[0];
    g->tokens = q->shape[1];
    g->heads = q->shape[2];
    g->head_dim = q->shape[3];
    g->block = ra_attention_options_init();
    if (options) mpi_options(&g->block, options);
    g->sinks = g->block.sinks;
    g->block.sinks = NULL;
    RA_MPI_TRY(mpi_check_off_masks(out, "out", lse, q->shape[0] * q->shape[2] * q->shape[1],
                                   &g->block, g->sinks, g->batch, g->heads, 0));
    if (q->shape[0] * q->shape[1] * q->shape[2] > INT_MAX / 2 || q->shape[3] > INT_MAX / 2)
        return mpi_fail(RA_ERR_OVERFLOW, "q [%lld, %lld, %lld, %lld]: more rows than MPI's int "
                        "count", (long long)q->shape[0], (long long)q->shape[1],
                        (long long)q->shape[2], (long long)q->shape[3]);
    const int64_t B = g->batch, T = g->tokens, H = g->heads, D = g->head_dim;
    g->n = calloc((size_t)B, sizeof *g->n);
    g->q_start = calloc((size_t)B, sizeof *g->q_start);
    g->k_start = calloc((size_t)B, sizeof *g->k_start);
    g->lengths = malloc((size_t)(g->size * B) * sizeof *g->lengths);
    g->out = malloc((size_t)(B * T * H * D) * sizeof *g->out);
    g->lse = malloc((size_t)(B * H * T) * sizeof *g->lse);
    g->rows = malloc((size_t)(B * H * T * (D + 3)) * sizeof *g->rows);
    if (!g->n || !g->q_start || !g->k_start || !g->lengths || !g->out || !g->lse || !g->rows)
        return mpi_fail(RA_ERR_NOMEM, "rank %d: out of memory for the decode's buffers",
                        g->rank);
    /* g->n and g->q_start are zeros here: no query */
    ra_tensor lout = ra_tensor_4d(g->out, RA_F32, B, T, H, D);
    RA_MPI_TRY(mpi_core(ra_attention_decode_lse(ctx, cache, &lout, g->lse, q, g->n, g->q_start,
                                                g->k_start, options),
                        "ra_mpi_attention_decode"));
    for (int64_t b = 0; b < B; b++) {
        g->n[b] = n_query ? n_query[b] : T;
        if (g->n[b] < 0 || g->n[b] > T)
            return mpi_fail(RA_ERR_ARGUMENT, "n_query[%lld] is %lld, not in [0, %lld]",
                            (long long)b, (long long)g->n[b], (long long)T);
        g->lengths[g->rank * B + b] = ra_kv_cache_length(cache, b);
    }
    return RA_OK;
}

/* Each sequence's queries' position in this shard, from every rank's
 * lengths (the same verdict on every rank: RA_ERR_SIZE when a sequence
 * holds fewer tokens than queries). */
static ra_status place_queries(decode *g)
{
    for (int64_t b = 0; b < g->batch; b++) {
        int64_t total = 0, offset = 0;
        for (int r = 0; r < g->size; r++) {
            if (r == g->rank) offset = total;
            total += g->lengths[r * g->batch + b];
        }
        if (g->n[b] > total)
            return mpi_fail(RA_ERR_SIZE, "sequence %lld: %lld queries, but the ranks hold %lld "
                            "tokens", (long long)b, (long long)g->n[b], (long long)total);
        g->q_start[b] = total - g->n[b] - offset;
        g->k_start[b] = offset;
    }
    return RA_OK;
}

/* The partial rows of this shard's result (failed: its status, in every
 * row). */
static void fill_rows(decode *g, ra_status failed)
{
    const int64_t B = g->batch, T = g->tokens, H = g->heads, D = g->head_dim;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t i = (b * H + h) * T + t;
                double *row = g->rows + i * (D + 3);
                const float m = t < g->n[b] && !failed ? g->lse[i] : -INFINITY;
                const float *o = g->out + ((b * T + t) * H + h) * D;
                for (int64_t d = 0; d < D; d++) row[d] = m == -INFINITY ? 0.0 : o[d];
                row[D] = m;
                row[D + 1] = m == -INFINITY ? 0.0 : 1.0;
                row[D + 2] = (double)failed;
            }
}

/* out and lse from the combined rows, each query head's sink joining once
 * (as ring.c's finish); rows t >= n untouched. */
static void finish(const decode *g, const ra_tensor *out, float *lse)
{
    const int64_t T = g->tokens, H = g->heads, D = g->head_dim;
    for (int64_t b = 0; b < g->batch; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < g->n[b]; t++) {
                const int64_t i = (b * H + h) * T + t;
                const double *row = g->rows + i * (D + 3);
                double m = row[D], l = row[D + 1], keep = 1.0;
                if (g->sinks) {
                    const double sink = g->sinks[h], top = m > sink ? m : sink;
                    keep = m == -INFINITY ? 0.0 : exp(m - top);
                    l = l * keep + exp(sink - top);
                    m = top;
                }
                float *dst = (float *)out->data + b * out->stride[0] + t * out->stride[1] +
                             h * out->stride[2];
                for (int64_t d = 0; d < D; d++) dst[d] = l > 0 ? (float)(row[d] * keep / l) : 0.0f;
                if (lse) lse[i] = l > 0 ? (float)(m + log(l)) : -INFINITY;
            }
}

/* A prompt's keys and values in float32: rows [lo, hi) of k and v [B, T,
 * Hkv, D], what this rank stored of them. */
typedef struct prompt_rows {
    const ra_tensor *k, *v;
    int64_t lo, hi;
} prompt_rows;

/* This rank's partial (g->out, g->lse) of the T queries of a prompt against
 * its rows of the prompt's own keys and values (positions lo ..), through
 * ra_attention_block_lse on contiguous copies; with no rows, none seen. */
static ra_status prompt_partial(decode *g, ra_context *ctx, const ra_tensor *q,
                                const prompt_rows *p)
{
    const int64_t B = g->batch, T = g->tokens, H = g->heads, D = g->head_dim, n = p->hi - p->lo;
    if (n == 0) {
        for (int64_t i = 0; i < B * H * T; i++) g->lse[i] = -INFINITY;
        return RA_OK;
    }
    const int64_t kv_heads = p->k->shape[2];
    const ra_tensor *src[2] = {p->k, p->v};
    for (int i = 0; i < 2; i++)
        if (src[i]->dtype != RA_F32 || src[i]->stride[3] != 1 || src[i]->shape[2] != kv_heads ||
            src[i]->shape[3] != D)
            return mpi_fail(RA_ERR_ARGUMENT, "the prompt's %s must be float32 [B, T, Hkv, %lld] "
                            "with contiguous features", i ? "v" : "k", (long long)D);
    float *rows = malloc(2 * (size_t)(B * n * kv_heads * D) * sizeof(float));
    if (!rows)
        return mpi_fail(RA_ERR_NOMEM, "rank %d: out of memory for the prompt's keys", g->rank);
    for (int i = 0; i < 2; i++) /* K [B, n, Hkv, D], then V */
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < n; j++)
                for (int64_t h = 0; h < kv_heads; h++)
                    memcpy(rows + (((i * B + b) * n + j) * kv_heads + h) * D,
                           (const float *)src[i]->data + b * src[i]->stride[0] +
                               (p->lo + j) * src[i]->stride[1] + h * src[i]->stride[2],
                           (size_t)D * sizeof(float));
    ra_tensor kk = ra_tensor_4d(rows, RA_F32, B, n, kv_heads, D);
    ra_tensor vv = ra_tensor_4d(rows + B * n * kv_heads * D, RA_F32, B, n, kv_heads, D);
    ra_tensor lout = ra_tensor_4d(g->out, RA_F32, B, T, H, D);
    ra_status status = mpi_core(ra_attention_block_lse(ctx, &lout, g->lse, q, &kk, &vv, 0, p->lo,
                                                       0, &g->block),
                                "ra_mpi_attention_decode");
    free(rows);
    return status;
}

/* ra_mpi_attention_decode; with prompt, the queries are a prompt's into
 * caches that held nothing before it, and attend over its keys and values
 * as given (prompt_partial), not as the cache stored them. */
static ra_status decode_call(ra_context *ctx, MPI_Comm comm, const ra_kv_cache *cache,
                             const ra_tensor *out, float *lse, const ra_tensor *q,
                             const int64_t *n_query, const ra_attention_options *options,
                             const prompt_rows *prompt)
{
    mpi_reset();
    if (comm == MPI_COMM_NULL) return mpi_fail(RA_ERR_NULL, "comm is MPI_COMM_NULL");
    decode g;
    memset(&g, 0, sizeof g);
    RA_MPI_TRY(mpi_check(MPI_Comm_size(comm, &g.size), "MPI_Comm_size"));
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(comm, &g.rank), "MPI_Comm_rank"));
    ra_status status = check_local(&g, ctx, cache, out, lse, q, n_query, options);
    /* the call's sizes and options, and hashes of the sinks' values and of
     * n_query (the same on every rank) */
    mpi_sig sig[] = {
        {"batch", g.batch, MPI_SIG_INT},
        {"q's tokens", g.tokens, MPI_SIG_INT},
        {"heads", g.heads, MPI_SIG_INT},
        {"head_dim", g.head_dim, MPI_SIG_INT},
        {"window", g.block.window, MPI_SIG_INT},
        {"scale", mpi_sig_double(g.block.scale), MPI_SIG_DOUBLE},
        {"softcap", mpi_sig_double(g.block.softcap), MPI_SIG_DOUBLE},
        {"sinks", g.sinks ? 1 + mpi_hash(g.sinks, (size_t)g.heads * sizeof(float)) : 0,
         MPI_SIG_ARRAY},
        {"n_query", status == RA_OK ? 1 + mpi_hash(g.n, (size_t)g.batch * sizeof *g.n) : 0,
         MPI_SIG_ARRAY},
        {"chunk", g.block.chunk, MPI_SIG_INT},
        {"quantize_q", g.block.quantize_q, MPI_SIG_INT}};
    status = mpi_agree(comm, status, sig, (int)(sizeof sig / sizeof sig[0]));
    if (status == RA_OK)
        status = mpi_check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.lengths,
                                         (int)g.batch, MPI_INT64_T, comm),
                           "MPI_Allgather");
    if (status == RA_OK) status = place_queries(&g);
    MPI_Datatype row = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    if (status == RA_OK) {
        const int64_t B = g.batch, T = g.tokens, H = g.heads, D = g.head_dim;
        ra_tensor lout = ra_tensor_4d(g.out, RA_F32, B, T, H, D);
        ra_status local = prompt ? prompt_partial(&g, ctx, q, prompt)
                                 : mpi_core(ra_attention_decode_lse(ctx, cache, &lout, g.lse, q,
                                                                    g.n, g.q_start, g.k_start,
                                                                    &g.block),
                                            "ra_mpi_attention_decode");
        fill_rows(&g, local);
        status = mpi_check(MPI_Type_contiguous((int)(D + 3), MPI_DOUBLE, &row),
                           "MPI_Type_contiguous");
        if (status == RA_OK) status = mpi_check(MPI_Type_commit(&row), "MPI_Type_commit");
        if (status == RA_OK) status = mpi_check(MPI_Op_create(merge_rows, 0, &op), "MPI_Op_create");
        if (status == RA_OK)
            status = mpi_check(MPI_Allreduce(MPI_IN_PLACE, g.rows, (int)(B * H * T), row, op,
                                             comm),
                               "MPI_Allreduce");
        if (status == RA_OK && local != RA_OK) status = local;
        else if (status == RA_OK && g.rows[D + 2] != 0.0)
            status = mpi_fail((ra_status)g.rows[D + 2], "another rank failed computing its "
                              "shard (%s); its ra_mpi_last_error() says why",
                              ra_status_string((ra_status)g.rows[D + 2]));
        if (status == RA_OK) finish(&g, out, lse);
    }
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
    if (row != MPI_DATATYPE_NULL) MPI_Type_free(&row);
    decode_free(&g);
    return status;
}

RA_MPI_API ra_status ra_mpi_attention_decode(ra_context *ctx, MPI_Comm comm,
                                             const ra_kv_cache *cache, const ra_tensor *out,
                                             float *lse, const ra_tensor *q,
                                             const int64_t *n_query,
                                             const ra_attention_options *options)
{
    return decode_call(ctx, comm, cache, out, lse, q, n_query, options, NULL);
}

ra_status mpi_attention_prompt(ra_context *ctx, MPI_Comm comm, const ra_kv_cache *cache,
                               const ra_tensor *out, const ra_tensor *q, const ra_tensor *k,
                               const ra_tensor *v, int64_t lo, int64_t hi,
                               const ra_attention_options *options)
{
    const prompt_rows prompt = {k, v, lo, hi};
    return decode_call(ctx, comm, cache, out, NULL, q, NULL, options, &prompt);
}
