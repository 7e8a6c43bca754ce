/*
 * ropeattn_mpi.h — context-parallel attention over MPI: one sequence split
 * across the ranks of a communicator.  The library is libropeattn_mpi
 * (pkg-config ropeattn-mpi, CMake ropeattn::ropeattn_mpi); it needs
 * libropeattn and an MPI library (built and tested with Open MPI).
 *
 *   ra_mpi_attention         ring attention forward (causal, zig-zag sharded):
 *                            each rank keeps its queries and passes its K/V
 *                            around the ring, merging partial softmaxes
 *                            exactly by their log-sum-exps
 *   ra_mpi_attention_backward its backward: dK/dV travel the ring with K/V
 *   ra_mpi_attention_decode  decoding against a sequence-sharded KV cache:
 *                            each rank's partial softmax, combined by one
 *                            MPI_Allreduce
 *   ra_mpi_layer_forward ... a layer over a sharded sequence: libropeattn's
 *                            phased layer calls around ring attention or
 *                            sharded decoding
 *
 * Zig-zag sharding (ra_mpi_zigzag): the S tokens of the sequence are cut
 * into 2P chunks (P ranks), chunk c holding S / 2P tokens plus one for c <
 * S % 2P, in order; rank r holds chunk r then chunk 2P - 1 - r, so every
 * rank has as much causal work as another (an early chunk sees few keys, its
 * late partner many).  S must be at least P (RA_ERR_SIZE): then every rank
 * holds a token, though with S < 2P some ranks have one chunk empty.
 *
 * Conventions: as ropeattn.h (statuses, argument order, shapes in
 * comments).  Every function here is collective over comm (but
 * ra_mpi_zigzag*, which are local): every rank of comm must call it, with
 * the same sizes and options (RA_ERR_SHAPE on every rank when they differ,
 * naming the first that does, the lowest rank whose value differs from rank
 * 0's and both values: "window is 3 on rank 0 and 0 on rank 1",
 * "padding_mask differs on rank 1 from rank 0's") and its own shard's
 * tensors.  Arguments are checked on each rank and the
 * verdict agreed by an MPI_Allreduce before any other traffic, so a bad
 * argument on one rank makes every rank return an error, never hang: the
 * rank that found it returns its own status, the others that status too.
 * comm = MPI_COMM_NULL is RA_ERR_NULL at once, with no communication: pass
 * it on every rank or on none.  The library calls MPI only from the calling
 * thread (MPI_THREAD_FUNNELED suffices, whatever the context's threads);
 * the communicator must not carry other traffic of this library at once.
 * Each failing call leaves a sentence for ra_mpi_last_error() (a failure of
 * libropeattn itself: its ra_last_error() text).  Arrays that must match
 * across ranks (n_query, the sinks' values) are compared by a 62-bit hash.
 * An error of MPI itself (possible only where the caller has set
 * MPI_ERRORS_RETURN on comm) is RA_ERR_IO on the rank that saw it and is
 * not agreed: its partners may wait; treat it as fatal, as MPI's default
 * handler does.  Results are the same bits
 * from run to run for the same P.
 *
 * RoPE is the caller's, at global positions: ra_mpi_zigzag_positions gives
 * a rank's token positions for ra_rope_apply (ra_positions.ids).
 */
#ifndef ROPEATTN_MPI_H
#define ROPEATTN_MPI_H

#include <mpi.h>

#include "ropeattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RA_BUILDING_MPI_LIBRARY) && defined(__GNUC__)
#define RA_MPI_API __attribute__((visibility("default")))
#else
#define RA_MPI_API
#endif

/* What the calling thread's last failing call of this library found wrong;
 * "" after a call that succeeded. */
RA_MPI_API const char *ra_mpi_last_error(void);

/* Rank `rank` of n_ranks's two chunks of a sequence of seq tokens: its
 * local row s < count[0] is the token at position start[0] + s, row
 * count[0] + s the one at start[1] + s; it holds count[0] + count[1] rows
 * (either count may be 0).  seq >= n_ranks >= 1 (RA_ERR_SIZE), 0 <= rank <
 * n_ranks (RA_ERR_ARGUMENT). */
RA_MPI_API ra_status ra_mpi_zigzag(int64_t seq, int n_ranks, int rank, int64_t start[2],
                                   int64_t count[2]);

/* ids [batch, n] the positions of the rank's rows (ra_mpi_zigzag), the same
 * in every batch row, for ra_positions.ids; n must be count[0] + count[1]
 * (RA_ERR_SHAPE).  batch >= 1 (RA_ERR_SIZE). */
RA_MPI_API ra_status ra_mpi_zigzag_positions(int64_t seq, int n_ranks, int rank, int64_t batch,
                                             int64_t n, int64_t *ids);

/* Causal attention over a sequence of seq tokens sharded zig-zag over the
 * ranks of comm: each rank's rows of out and lse are what ra_attention and
 * ra_attention_forward_lse over the whole sequence give for its tokens,
 * within float32 rounding (the merge's order differs: tested within 1e-6 of
 * max|out|).  Options as ra_attention's, each with its single-process
 * meaning at global positions: scale, softcap, window, chunk (chunks of
 * global positions from each row's leading padding), sinks (added once, in
 * the final merge), padding_mask [B, seq] and cu_seqlens (ending at seq):
 * the whole sequence's, indexed by global position, the same on every rank
 * (compared by hash; each rank reads every row).  A padding query's row is
 * zeros and lse -Inf, as in ra_attention.  dropout and seed: the elements
 * of the whole sequence's probabilities that ra_attention drops for that
 * seed (ra_attention_block_lse places each block in them), so the same
 * masks as one process.  The reference path is RA_ERR_UNSUPPORTED.
 *
 * The ring: P steps; at step s a rank computes its query chunks against the
 * K/V of rank r - s (ra_attention_block_lse: an earlier key chunk is wholly
 * visible, the same chunk causal, a later one skipped) while it sends the
 * K/V it holds to rank r + 1 and receives the next from r - 1
 * (MPI_Isend/MPI_Irecv into a second buffer, tested between blocks so the
 * transfer progresses under the compute); partial results are merged in
 * double, in ring order.  Memory per rank: two K/V buffers of the largest
 * shard, out in double and a block's out and lse.
 *   q, out: [B, S_local, H, D] f32     k, v: [B, S_local, Hkv, D] f32, f16
 *   or bf16 (the same dtype)           lse: [B, H, S_local] float32, contiguous
 *   S_local = count[0] + count[1] of ra_mpi_zigzag(seq, P, rank) */
RA_MPI_API ra_status ra_mpi_attention(ra_context *ctx, MPI_Comm comm, const ra_tensor *out,
                                      float *lse, const ra_tensor *q, const ra_tensor *k,
                                      const ra_tensor *v, int64_t seq,
                                      const ra_attention_options *options);

/* The backward of ra_mpi_attention: given dout = dL/dout for the rank's
 * rows, overwrites dq, dk and dv for its rows (its queries, its keys and
 * values) with what ra_attention_backward over the whole sequence gives
 * for them, within float32 rounding (the sums run in another order: tested
 * within 1e-6 of max|gradient|).  q, k, v, seq and options are what the
 * forward took; out and lse are what ra_mpi_attention returned for them.
 * With options' sinks and dsinks, every rank gets the same dsinks, bit for
 * bit: each rank's share (in double; padding queries have none) gathered
 * by one MPI_Allgather and summed in rank order.  The same options as ra_mpi_attention (and the
 * same refused).  dq, dk and dv are written at the end of the call, after
 * every input has been read, from the rank's own buffers: each is checked
 * as an output (every index its own element), and no two may share a byte
 * of their spans (RA_ERR_ARGUMENT, interleaved views of one fused buffer
 * included).
 *
 * The ring (FlashAttention-style ring backward): P steps; at step s a rank
 * computes its query chunks against the K/V of rank o = r - s
 * (ra_attention_block_backward: dq into its rows, dK/dV for o's keys into
 * a buffer of its own) while it passes the K/V on as the forward does and
 * receives from r - 1 the dK/dV that ranks o .. r - 1 have summed for o's
 * keys; it adds its own to that sum (received + own, so the ring fixes the
 * order and the bits) and sends it on to r + 1.  After the P steps one
 * more hop brings each rank its own keys' dK/dV, complete.  Per step a
 * rank moves K, V (its dtype) and dK, dV (float32): twice the forward's
 * traffic for f32 K/V, against about 2.5 times its flops
 * (docs/SCALING.md).  Memory per rank: two K/V buffers and three dK/dV
 * buffers of the largest shard, dq in float32 and lse per chunk.
 *   dq, dout, q, out: [B, S_local, H, D] f32   dk, dv: [B, S_local, Hkv, D]
 *   f32   k, v: as ra_mpi_attention's   lse: [B, H, S_local] float32,
 *   contiguous */
RA_MPI_API ra_status ra_mpi_attention_backward(ra_context *ctx, MPI_Comm comm,
                                               const ra_tensor *dq, const ra_tensor *dk,
                                               const ra_tensor *dv, const ra_tensor *dout,
                                               const ra_tensor *q, const ra_tensor *k,
                                               const ra_tensor *v, const ra_tensor *out,
                                               const float *lse, int64_t seq,
                                               const ra_attention_options *options);

/* ra_attention_decode against a sequence-sharded cache: sequence b is the
 * concatenation, in rank order, of the tokens each rank's cache holds for
 * it (rank 0's first; a rank may hold none), and query row t < n =
 * n_query[b] (NULL: T) is its token at global position total[b] - n + t,
 * total the sum of the ranks' lengths (n <= total[b], else RA_ERR_SIZE).
 * Each query's keys must already be appended, usually to the last rank's
 * cache.  q, n_query and options are the same on every rank; every rank
 * gets the same out (and lse, if not NULL), bit for bit (Open MPI's
 * allreduce, tested; docs/DESIGN.md decision 20), equal within
 * float32 rounding to ra_attention_decode on one cache holding the whole
 * sequence.  Rows t >= n are left as they were.  Options: scale, softcap,
 * window and chunk (global positions: each shard's keys placed by
 * ra_attention_decode_lse's q_start and k_start), sinks (added once, after
 * the combine); whatever ra_attention_decode refuses is refused here too.
 * The caches must be full (not window) caches
 * (RA_ERR_UNSUPPORTED), of any dtype.
 *
 * Each rank computes its shard's partial softmax per row
 * (ra_attention_decode_lse with the queries at their positions in its
 * shard, k_start its first token's); the partials (out, lse) are combined by one MPI_Allreduce with a
 * non-commutative MPI_Op (MPI applies it in rank order) over [B, H, T]
 * rows of D + 3 doubles; before it, one small MPI_Allreduce agrees on the
 * arguments and the ranks' lengths.
 *   q, out: [B, T, H, D] f32   lse: [B, H, T] float32, contiguous, or NULL */
RA_MPI_API ra_status ra_mpi_attention_decode(ra_context *ctx, MPI_Comm comm,
                                             const ra_kv_cache *cache, const ra_tensor *out,
                                             float *lse, const ra_tensor *q,
                                             const int64_t *n_query,
                                             const ra_attention_options *options);

/* A layer across the ranks of a communicator: each rank gives its zig-zag
 * shard of x ([B, S_local, dim]: the rows ra_mpi_zigzag names) and those
 * rows' global positions (ra_mpi_zigzag_positions; NULL is
 * RA_ERR_ARGUMENT), and gets its rows of the layer's output over the whole
 * sequence of s->seq tokens: the projections, norms and RoPE are per token
 * (libropeattn's phased layer calls, ra_layer_step), and the attention is
 * ra_mpi_attention's (ra_mpi_attention_backward's), with the layer's
 * window, chunks, soft-cap and sinks, and s's padding_mask and cu_seqlens.
 * The calls take the arguments of their libropeattn namesakes
 * (ra_layer_forward ...), with s after ctx.  Refused on every rank, naming
 * the reason: a latent attention (MLA) layer, max_keys,
 * positions_are_slots or max_document (RA_ERR_UNSUPPORTED); masks in the call's options
 * (RA_ERR_ARGUMENT: the whole sequence's are s's); dropout
 * (RA_ERR_UNSUPPORTED: the layer's output dropout draws by the shard's
 * rows).  Each rank's checks and the layer's steps before the attention
 * (ra_layer_forward_begin ...) are agreed by one MPI_Allreduce before the
 * ring, so a failure on one rank is a failure on every rank (the others'
 * sentence names the lowest failing rank), never a hang.
 *
 * ra_mpi_layer_forward_train and ra_mpi_layer_backward (the tape of a
 * ra_mpi_layer_forward_train with the same s) give each rank its dx rows
 * and its shard's share of the weights' gradients, which the caller sums
 * over the ranks (an MPI_Allreduce, or in rank order for the same bits
 * every run).
 *
 * ra_mpi_layer_forward_cached decodes against a sharded cache: every rank
 * gives the same x, positions and batch, each its own full cache
 * (ra_kv_cache_create, any dtype; a window cache is refused by
 * ra_mpi_attention_decode, after the step's tokens were stored), and every
 * rank gets the same y.  Each sequence is the ranks' caches in rank order:
 * while every cache is empty (the prompt) rank r stores rows [T r / P, T (r
 * + 1) / P) of the call's T tokens, afterwards the last rank stores them
 * all (its cache needs room for every later token).  If any rank lacks the
 * room, no rank stores anything (RA_ERR_CACHE_FULL on every rank).  The
 * prompt attends over the keys and values one process's prefill does: what
 * an f32, f16 or bf16 cache stores, and an 8-bit cache's float32 keys and
 * values as projected (each rank over the rows it stored), so y is one
 * process's within float32 rounding.  s's padding and documents are
 * refused there (RA_ERR_UNSUPPORTED). */
typedef struct ra_mpi_sequence {
    MPI_Comm comm;
    int64_t seq; /* the whole sequence's tokens */
    /* The whole sequence's padding and packed documents for ring attention
     * (ra_mpi_attention's padding_mask [B, seq] and cu_seqlens, the same on
     * every rank), NULL and 0 after ra_mpi_sequence_init: set them for a
     * padded or packed batch (the layer call's options must not hold
     * them).  Read at each call, so they must stay valid from a training
     * forward to its backward. */
    const uint8_t *padding_mask;
    const int64_t *cu_seqlens;
    int64_t n_documents;
} ra_mpi_sequence;

/* *s for a sequence of seq >= 1 tokens (RA_ERR_SIZE) over comm, without
 * masks.  Local. */
RA_MPI_API ra_status ra_mpi_sequence_init(ra_mpi_sequence *s, MPI_Comm comm, int64_t seq);

/* ra_layer_forward of the rank's shard. */
RA_MPI_API ra_status ra_mpi_layer_forward(ra_context *ctx, const ra_mpi_sequence *s,
                                          const ra_layer *layer, float *y, const float *x,
                                          int64_t batch, int64_t seq,
                                          const ra_positions *positions,
                                          const ra_attention_options *options);

/* ra_layer_forward_train of the rank's shard. */
RA_MPI_API ra_status ra_mpi_layer_forward_train(ra_context *ctx, const ra_mpi_sequence *s,
                                                const ra_layer *layer, float *y,
                                                ra_layer_tape *tape, const float *x,
                                                int64_t batch, int64_t seq,
                                                const ra_positions *positions,
                                                const ra_attention_options *options);

/* ra_layer_backward of a sharded training forward. */
RA_MPI_API ra_status ra_mpi_layer_backward(ra_context *ctx, const ra_mpi_sequence *s,
                                           const ra_layer *layer, float *dx,
                                           const ra_layer_grads *grads,
                                           const ra_layer_tape *tape, const float *dy);

/* ra_layer_forward_cached against the ranks' caches (positions required). */
RA_MPI_API ra_status ra_mpi_layer_forward_cached(ra_context *ctx, const ra_mpi_sequence *s,
                                                 const ra_layer *layer, ra_kv_cache *cache,
                                                 float *y, const float *x, int64_t batch,
                                                 int64_t seq, const ra_positions *positions);

#ifdef __cplusplus
}
#endif

#endif
