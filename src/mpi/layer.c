/*
 * layer.c — a layer's calls across the ranks of a communicator, each rank
 * with its shard of the sequence: libropeattn's phased layer calls
 * (ra_layer_step), with ring attention (ra_mpi_attention and its backward)
 * or sharded decoding between their phases.
 *
 *   each rank: checks, the layer up to its attention (_begin: local)
 *   -> one MPI_Allreduce of every rank's status (mpi_agree), so that no
 *      rank enters the ring another left
 *   -> the attention over every rank's shard (collective)
 *   -> the rest of the layer (ra_layer_step_finish: local, cannot fail)
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "mpi/mpi_internal.h"

RA_MPI_API ra_status ra_mpi_sequence_init(ra_mpi_sequence *s, MPI_Comm comm, int64_t seq)
{
    mpi_reset();
    if (!s) return mpi_fail(RA_ERR_NULL, "s is NULL");
    if (seq < 1) return mpi_fail(RA_ERR_SIZE, "seq %lld is not positive", (long long)seq);
    *s = (ra_mpi_sequence){comm, seq, NULL, NULL, 0};
    return RA_OK;
}

/* s, refused at once (no communicator to agree over) when NULL or
 * without one. */
static ra_status check_sequence(const ra_mpi_sequence *s)
{
    mpi_reset();
    if (!s) return mpi_fail(RA_ERR_NULL, "s is NULL");
    if (s->comm == MPI_COMM_NULL) return mpi_fail(RA_ERR_NULL, "s->comm is MPI_COMM_NULL");
    return RA_OK;
}

/* What a layer must not have to run sharded: latent attention, whose k
 * and v differ in width (the ring carries one width); a key bound or
 * slots, which count the whole sequence's keys, not the shard's; a
 * document bound (not checked against s's documents). */
static ra_status check_layer(const ra_layer *layer)
{
    if (!layer) return mpi_fail(RA_ERR_NULL, "layer is NULL");
    const ra_layer_config *c = ra_layer_get_config(layer);
    if (c->kv_lora_rank)
        return mpi_fail(RA_ERR_UNSUPPORTED, "a latent attention (MLA) layer across ranks (its "
                        "k and v differ in width, which the ring does not carry)");
    if (c->positions_are_slots)
        return mpi_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: positions_are_slots across ranks "
                        "(the shard's positions are not its slots)");
    if (c->max_keys)
        return mpi_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: max_keys %lld across ranks (a "
                        "query's keys are the whole sequence's, not the shard's)",
                        (long long)c->max_keys);
    if (c->max_document)
        return mpi_fail(RA_ERR_UNSUPPORTED, "ra_layer_config: max_document %lld across ranks "
                        "(the whole sequence's documents are ra_mpi_sequence's)",
                        (long long)c->max_document);
    return RA_OK;
}

/* A sharded forward's own refusals, then the layer's: positions are
 * required (a shard at 0, 1, ... would be rotated wrong); the call's
 * options hold no masks (the whole sequence's are s's) and no dropout
 * (the layer's output dropout draws by the shard's rows). */
static ra_status check_forward(const ra_layer *layer, const ra_positions *positions,
                               const ra_attention_options *options)
{
    if (!positions)
        return mpi_fail(RA_ERR_ARGUMENT, "a sharded layer call needs positions (its shard's "
                        "global positions: ra_mpi_zigzag_positions)");
    if (options) {
        ra_attention_options o;
        mpi_options(&o, options);
        if (o.padding_mask || o.cu_seqlens || o.n_documents)
            return mpi_fail(RA_ERR_ARGUMENT, "ra_attention_options: %s in a sharded layer call "
                            "(the whole sequence's masks are ra_mpi_sequence's)",
                            o.padding_mask ? "padding_mask" : "cu_seqlens");
        if (o.dropout > 0.0f)
            return mpi_fail(RA_ERR_UNSUPPORTED, "dropout in a sharded layer call (the layer's "
                            "output dropout would follow the shard's rows, not the "
                            "sequence's)");
    }
    return check_layer(layer);
}

/* The step's attention options with s's padding and documents. */
static ra_attention_options with_masks(const ra_mpi_sequence *s, const ra_layer_step *step)
{
    ra_attention_options o = ra_layer_step_get_views(step)->options;
    o.padding_mask = s->padding_mask;
    o.cu_seqlens = s->cu_seqlens;
    o.n_documents = s->n_documents;
    return o;
}

/* The step finished when the attention gave RA_OK, else cancelled. */
static ra_status end(ra_layer_step *step, ra_status status)
{
    if (status == RA_OK) return mpi_core(ra_layer_step_finish(step), "ra_layer_step_finish");
    ra_layer_step_cancel(step);
    return status;
}

/* ra_mpi_layer_forward, or with train its _train: the checks and the
 * layer's begin on each rank, agreed; the ring; the finish. */
static ra_status forward(ra_context *ctx, const ra_mpi_sequence *s, const ra_layer *layer,
                         float *y, int train, ra_layer_tape *tape, const float *x,
                         int64_t batch, int64_t seq, const ra_positions *positions,
                         const ra_attention_options *options)
{
    RA_MPI_TRY(check_sequence(s));
    ra_layer_step *step = NULL;
    ra_status status = check_forward(layer, positions, options);
    if (status == RA_OK && train)
        status = mpi_core(ra_layer_forward_train_begin(&step, ctx, layer, y, tape, x, batch, seq,
                                                       positions, options),
                          "ra_layer_forward_train_begin");
    else if (status == RA_OK)
        status = mpi_core(ra_layer_forward_begin(&step, ctx, layer, y, x, batch, seq, positions,
                                                 options), "ra_layer_forward_begin");
    status = mpi_agree(s->comm, status, NULL, 0);
    if (status == RA_OK) {
        const ra_layer_step_views *v = ra_layer_step_get_views(step);
        const ra_attention_options o = with_masks(s, step);
        status = ra_mpi_attention(ctx, s->comm, &v->out, v->lse, &v->q, &v->k, &v->v, s->seq,
                                  &o);
    }
    return end(step, status);
}

RA_MPI_API ra_status ra_mpi_layer_forward(ra_context *ctx, const ra_mpi_sequence *s,
                                          const ra_layer *layer, float *y, const float *x,
                                          int64_t batch, int64_t seq,
                                          const ra_positions *positions,
                                          const ra_attention_options *options)
{
    return forward(ctx, s, layer, y, 0, NULL, x, batch, seq, positions, options);
}

RA_MPI_API ra_status ra_mpi_layer_forward_train(ra_context *ctx, const ra_mpi_sequence *s,
                                                const ra_layer *layer, float *y,
                                                ra_layer_tape *tape, const float *x,
                                                int64_t batch, int64_t seq,
                                                const ra_positions *positions,
                                                const ra_attention_options *options)
{
    return forward(ctx, s, layer, y, 1, tape, x, batch, seq, positions, options);
}

RA_MPI_API ra_status ra_mpi_layer_backward(ra_context *ctx, const ra_mpi_sequence *s,
                                           const ra_layer *layer, float *dx,
                                           const ra_layer_grads *grads,
                                           const ra_layer_tape *tape, const float *dy)
{
    RA_MPI_TRY(check_sequence(s));
    ra_layer_step *step = NULL;
    ra_status status = check_layer(layer);
    if (status == RA_OK)
        status = mpi_core(ra_layer_backward_begin(&step, ctx, layer, dx, grads, tape, dy),
                          "ra_layer_backward_begin");
    status = mpi_agree(s->comm, status, NULL, 0);
    if (status == RA_OK) {
        const ra_layer_step_views *v = ra_layer_step_get_views(step);
        const ra_attention_options o = with_masks(s, step);
        status = ra_mpi_attention_backward(ctx, s->comm, &v->dq, &v->dk, &v->dv, &v->dout,
                                           &v->q, &v->k, &v->v, &v->out, v->lse, s->seq, &o);
    }
    return end(step, status);
}

/* Whether cache takes the step's k and v: an append of no rows (nothing
 * stored), which checks them against it. */
static ra_status check_cache(ra_context *ctx, ra_kv_cache *cache, const ra_layer_step *step)
{
    if (!cache) return mpi_fail(RA_ERR_NULL, "cache is NULL");
    const ra_layer_step_views *v = ra_layer_step_get_views(step);
    const int64_t B = v->k.shape[0];
    int64_t *none = calloc((size_t)B, sizeof *none);
    if (!none) return mpi_fail(RA_ERR_NOMEM, "allocating %lld counts", (long long)B);
    const ra_status status = ra_kv_cache_append(ctx, cache, NULL, NULL, &v->k, &v->v, NULL, none);
    free(none);
    return mpi_core(status, "the cache");
}

/* A cached step's attention.  Each sequence is the ranks' caches in rank
 * order (ra_mpi_attention_decode's layout): while every rank's cache is
 * empty (a prompt) rank r stores rows [T r / P, T (r + 1) / P) of the T
 * new tokens, afterwards the last rank stores them all.  Each rank's room
 * is agreed first, so that no rank stores a token unless every rank can,
 * and with it that s holds no padding or documents on any rank (a cache
 * holds each sequence's own tokens). */
static ra_status decode_step(ra_context *ctx, const ra_mpi_sequence *s, ra_kv_cache *cache,
                             const ra_layer_step_views *sv)
{
    int rank, P;
    RA_MPI_TRY(mpi_check(MPI_Comm_rank(s->comm, &rank), "MPI_Comm_rank"));
    RA_MPI_TRY(mpi_check(MPI_Comm_size(s->comm, &P), "MPI_Comm_size"));
    const ra_tensor *k = &sv->k, *v = &sv->v;
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
    facts[1] = s->padding_mask || s->cu_seqlens || s->n_documents;
    for (int f = 1; f < 7; f += 2) facts[f + 1] = facts[f] ? -rank : INT32_MIN;
    RA_MPI_TRY(mpi_check(MPI_Allreduce(MPI_IN_PLACE, facts, 7, MPI_INT64_T, MPI_MAX, s->comm),
                         "MPI_Allreduce"));
    const int held = facts[0] > 0; /* a token on some rank: a later step */
    const int64_t lo = held ? (rank == P - 1 ? 0 : T) : T * rank / P;
    const int64_t hi = held ? T : T * (rank + 1) / P;
    if (facts[1])
        return mpi_fail(RA_ERR_UNSUPPORTED, "ra_mpi_sequence: padding_mask or cu_seqlens in "
                        "cached decoding on rank %lld (a cache holds each sequence's own "
                        "tokens; nothing stored)", (long long)-facts[2]);
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
    /* (the room and the cache were agreed: a failure here is unexpected) */
    RA_MPI_TRY(mpi_agree(s->comm, status, NULL, 0));
    /* A prompt into 8-bit caches attends over its own float32 keys and
     * values, as one process's ra_layer_forward_cached does: each rank over
     * the rows it stored.  (Every rank's cache has the dtype of the others':
     * the step's signature holds the layer, and the layer the cache.) */
    ra_dtype dtype = RA_F32;
    ra_kv_cache_dtype(cache, &dtype); /* cache checked by the append's agree */
    if (!held && (dtype == RA_I8 || dtype == RA_F8E4M3))
        return mpi_attention_prompt(ctx, s->comm, cache, &sv->out, &sv->q, k, v, lo, hi,
                                    &sv->options);
    return ra_mpi_attention_decode(ctx, s->comm, cache, &sv->out, NULL, &sv->q, NULL,
                                   &sv->options);
}

RA_MPI_API ra_status ra_mpi_layer_forward_cached(ra_context *ctx, const ra_mpi_sequence *s,
                                                 const ra_layer *layer, ra_kv_cache *cache,
                                                 float *y, const float *x, int64_t batch,
                                                 int64_t seq, const ra_positions *positions)
{
    RA_MPI_TRY(check_sequence(s));
    ra_layer_step *step = NULL;
    ra_status status = check_layer(layer);
    if (status == RA_OK && !positions)
        status = mpi_fail(RA_ERR_ARGUMENT, "a sharded cached step needs positions (the cache "
                          "holds a shard: its lengths are not the tokens' positions)");
    if (status == RA_OK)
        status = mpi_core(ra_layer_forward_cached_begin(&step, ctx, layer, y, x, batch, seq,
                                                        positions),
                          "ra_layer_forward_cached_begin");
    if (status == RA_OK) status = check_cache(ctx, cache, step);
    status = mpi_agree(s->comm, status, NULL, 0);
    if (status == RA_OK) status = decode_step(ctx, s, cache, ra_layer_step_get_views(step));
    return end(step, status);
}
