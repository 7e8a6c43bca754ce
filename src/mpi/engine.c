/*
 * engine.c — ra_mpi_engine: ring attention and sharded decoding as a
 * layer's attention engine (ra_attention_engine), so that ra_layer_forward,
 * ra_layer_forward_train, ra_layer_backward and ra_layer_forward_cached_with
 * run context-parallel over a communicator.
 */
#include <limits.h>
#include <stdint.h>

#include "mpi/mpi_internal.h"

/* The layer's options with e's padding and documents of the sequence. */
static ra_attention_options with_masks(const ra_mpi_engine *e, const ra_attention_options *options)
{
    ra_attention_options o = ra_attention_options_init();
    if (options) mpi_options(&o, options);
    o.padding_mask = e->padding_mask;
    o.cu_seqlens = e->cu_seqlens;
    o.n_documents = e->n_documents;
    return o;
}

static ra_status engine_forward(void *user, ra_context *ctx, const ra_tensor *out, float *lse,
                                const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                const ra_attention_options *options)
{
    const ra_mpi_engine *e = user;
    const ra_attention_options o = with_masks(e, options);
    return ra_mpi_attention(ctx, e->comm, out, lse, q, k, v, e->seq, &o);
}

static ra_status engine_backward(void *user, ra_context *ctx, const ra_tensor *dq,
                                 const ra_tensor *dk, const ra_tensor *dv, const ra_tensor *dout,
                                 const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                 const ra_tensor *out, const float *lse,
                                 const ra_attention_options *options)
{
    const ra_mpi_engine *e = user;
    const ra_attention_options o = with_masks(e, options);
    return ra_mpi_attention_backward(ctx, e->comm, dq, dk, dv, dout, q, k, v, out, lse, e->seq,
                                     &o);
}

/* Every rank's status: the worst (by value), naming the lowest rank that
 * failed, by one MPI_Allreduce. */
static ra_status engine_agree(void *user, ra_status status)
{
    const ra_mpi_engine *e = user;
    if (e->comm == MPI_COMM_NULL) return mpi_fail(RA_ERR_ARGUMENT, "comm is MPI_COMM_NULL");
    int rank, v[2];
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(e->comm, &rank), "MPI_Comm_rank"));
    v[0] = (int)status;
    v[1] = status != RA_OK ? -rank : INT_MIN; /* the largest: the lowest failing rank */
    RA_MPI_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, e->comm),
                         "MPI_Allreduce"));
    if (v[0] == RA_OK) return RA_OK;
    return mpi_fail((ra_status)v[0], "rank %d failed (%s)", -v[1],
                    ra_status_string((ra_status)v[0]));
}

/* A cached step.  Each sequence is the ranks' caches in rank order
 * (ra_mpi_attention_decode's layout): while every rank's cache is empty (a
 * prompt) rank r stores rows [T r / P, T (r + 1) / P) of the T new tokens,
 * afterwards the last rank stores them all.  Each rank's room is agreed
 * first, so that no rank stores a token unless every rank can, and with it
 * that no rank's engine holds padding or documents (a cache holds each
 * sequence's own tokens). */
static ra_status engine_decode(void *user, ra_context *ctx, ra_kv_cache *cache,
                               const ra_tensor *out, const ra_tensor *q, const ra_tensor *k,
                               const ra_tensor *v, const ra_attention_options *options)
{
    const ra_mpi_engine *e = user;
    if (e->comm == MPI_COMM_NULL) return mpi_fail(RA_ERR_ARGUMENT, "comm is MPI_COMM_NULL");
    int rank, P;
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(e->comm, &rank), "MPI_Comm_rank"));
    RA_MPI_TRY(mpi_check(MPI_Comm_size(e->comm, &P), "MPI_Comm_size"));
    const int64_t B = k->shape[0], T = k->shape[1];
    /* One MPI_Allreduce (MAX): whether any rank's cache holds a token (then
     * the step's tokens go to the last rank, else the prompt is split), and
     * for each fact that refuses the step, whether a rank has it and the
     * lowest such rank (as -rank): masks; no room for a prompt's share; no
     * room for a later step's tokens. */
    const int64_t share = T * (rank + 1) / P - T * rank / P, later = rank == P - 1 ? T : 0;
    int64_t facts[7] = {0, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN};
    for (int64_t b = 0; b < B; b++) {
        facts[0] += ra_kv_cache_length(cache, b);
        if (ra_kv_cache_room(cache, b) < share) facts[3] = 1;
        if (ra_kv_cache_room(cache, b) < later) facts[5] = 1;
    }
    facts[1] = e->padding_mask || e->cu_seqlens || e->n_documents;
    for (int f = 1; f < 7; f += 2) facts[f + 1] = facts[f] ? -rank : INT32_MIN;
    RA_MPI_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, facts, 7, MPI_INT64_T, MPI_MAX, e->comm),
                         "MPI_Allreduce"));
    const int held = facts[0] > 0; /* a token on some rank: a later step */
    const int64_t lo = held ? (rank == P - 1 ? 0 : T) : T * rank / P;
    const int64_t hi = held ? T : T * (rank + 1) / P;
    if (facts[1])
        return mpi_fail(RA_ERR_UNSUPPORTED, "ra_mpi_engine: padding_mask or cu_seqlens in cached "
                        "decoding on rank %lld (a cache holds each sequence's own tokens; "
                        "nothing stored)", (long long)-facts[2]);
    if (facts[held ? 5 : 3])
        return mpi_fail(RA_ERR_CACHE_FULL, "rank %lld's cache has no room for its share of the "
                        "%lld new tokens (nothing stored on any rank)",
                        (long long)-facts[held ? 6 : 4], (long long)T);
    ra_status status = RA_OK;
    if (hi > lo) {
        ra_tensor kk = mpi_rows(k, lo, hi - lo), vv = mpi_rows(v, lo, hi - lo);
        status = mpi_core(ra_kv_cache_append(ctx, cache, NULL, NULL, &kk, &vv, NULL, NULL),
                          "ra_kv_cache_append");
    }
    /* (the room was agreed: a failure here is this rank's arguments) */
    const ra_status all = engine_agree(user, status);
    if (status != RA_OK || all != RA_OK) return status != RA_OK ? status : all;
    /* A prompt into 8-bit caches attends over its own float32 keys and
     * values, as one process's ra_layer_forward_cached does: each rank over
     * the rows it stored.  (Every rank's cache has the dtype of the others':
     * the step's signature holds the layer, and the layer the cache.) */
    ra_dtype dtype = RA_F32;
    ra_kv_cache_dtype(cache, &dtype); /* cache checked by the append's agree */
    if (!held && (dtype == RA_I8 || dtype == RA_F8E4M3))
        return mpi_attention_prompt(ctx, e->comm, cache, out, q, k, v, lo, hi, options);
    return ra_mpi_attention_decode(ctx, e->comm, cache, out, NULL, q, NULL, options);
}

static const char *engine_error(void *user)
{
    (void)user;
    return ra_mpi_last_error();
}

RA_MPI_API ra_status ra_mpi_engine_init(ra_mpi_engine *e, MPI_Comm comm, int64_t seq)
{
    mpi_reset();
    if (!e) return mpi_fail(RA_ERR_NULL, "e is NULL");
    if (seq < 1) return mpi_fail(RA_ERR_SIZE, "seq %lld is not positive", (long long)seq);
    e->engine = (ra_attention_engine){.struct_size = sizeof e->engine, .user = e,
                                      .forward = engine_forward, .backward = engine_backward,
                                      .error = engine_error, .decode = engine_decode,
                                      .agree = engine_agree};
    e->comm = comm;
    e->seq = seq;
    e->padding_mask = NULL;
    e->cu_seqlens = NULL;
    e->n_documents = 0;
    return RA_OK;
}
