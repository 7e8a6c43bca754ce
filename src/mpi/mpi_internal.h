/*
 * mpi_internal.h — libropeattn_mpi's shared parts (internal): its error
 * sentence, the collective agreement on a call's arguments, and views.
 */
#ifndef RA_MPI_INTERNAL_H
#define RA_MPI_INTERNAL_H

#include "ropeattn_mpi.h"

/* Returns the status of expr unless it is RA_OK. */
#define RA_MPI_TRY(expr)                                   \
    do {                                                \
        ra_status mpi_try_status_ = (expr);             \
        if (mpi_try_status_ != RA_OK) return mpi_try_status_; \
    } while (0)

/* Clears the calling thread's sentence (every public function first). */
void mpi_reset(void);

/* Sets the sentence (printf format) and returns status. */
ra_status mpi_fail(ra_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* mpi_fail(status, "<what>: <ra_last_error()>") for a failed libropeattn
 * call; RA_OK passes through. */
ra_status mpi_core(ra_status status, const char *what);

/* RA_ERR_IO naming the MPI call and its error, for rc != MPI_SUCCESS. */
ra_status mpi_check(int rc, const char *call);

/* One argument of a call, for the ranks to agree on: its name in
 * messages ("padding_mask"), and its value as an int64 read by kind. */
typedef enum mpi_sig_kind {
    MPI_SIG_INT,    /* the value itself */
    MPI_SIG_UINT64, /* the value's bits, unsigned */
    MPI_SIG_DOUBLE, /* a double's bits (mpi_sig_double) */
    MPI_SIG_FLOAT,  /* a float's, as a double's bits (mpi_sig_double) */
    MPI_SIG_DTYPE,  /* an ra_dtype */
    MPI_SIG_ARRAY,  /* 0: NULL, else 1 + a hash of the contents (mpi_hash) */
} mpi_sig_kind;

typedef struct mpi_sig {
    const char *name;
    int64_t value;
    mpi_sig_kind kind;
} mpi_sig;

/* Agrees on a call across comm with one MPI_Allreduce (MPI_MAX) over
 * int64: every rank's status and its n_sig <= RA_MPI_MAX_SIG arguments
 * (sizes, options: equal on every rank, else RA_ERR_SHAPE naming the first
 * that differs, the lowest rank whose value differs from rank 0's, and both
 * values: "padding_mask differs on rank 1 from rank 0's", "window is 3 on
 * rank 0 and 0 on rank 1").  Returns RA_OK when every rank's status was
 * RA_OK and the arguments agree; else this rank's own failure, or the worst
 * status found elsewhere, with a sentence naming the lowest rank that
 * failed. */
enum { RA_MPI_MAX_SIG = 24 };
ra_status mpi_agree(MPI_Comm comm, ra_status status, const mpi_sig *sig, int n_sig);

/* A double's bits for a signature, -0.0 as 0.0. */
int64_t mpi_sig_double(double x);

/* A 62-bit hash (FNV-1a) of n bytes, for signatures of arrays that must
 * be equal on every rank (n_query, the sinks' values); NULL hashes as
 * nothing. */
int64_t mpi_hash(const void *bytes, size_t n);

/* ra_mpi_zigzag's chunks, for arguments it accepted (no checks, the
 * thread's sentence kept). */
void mpi_chunks(int64_t seq, int n_ranks, int rank, int64_t start[2], int64_t count[2]);

/* Rows of rank o's shard of a sequence of seq tokens over P ranks. */
int64_t mpi_shard_rows(int64_t seq, int P, int o);

/* The ring's blocks' options: the caller's (RA_ERR_UNSUPPORTED, naming fn,
 * for the reference path) with its sinks and dsinks taken out into *sinks
 * and *dsinks (dsinks NULL: not wanted; NULL without sinks). */
ra_status mpi_ring_options(ra_attention_options *o, const ra_attention_options *options,
                           const char *fn, const float **sinks, float **dsinks);

/* ra_mpi_attention_decode of a prompt's T queries (every token of it; no
 * lse) into caches that held nothing before it, each rank having stored
 * rows [lo, hi) of its keys and values k, v [B, T, Hkv, D] (float32): the
 * queries attend over those rows as given, not as stored, so that a prompt
 * into 8-bit caches runs as one process's does (over its float32 keys). */
ra_status mpi_attention_prompt(ra_context *ctx, MPI_Comm comm, const ra_kv_cache *cache,
                               const ra_tensor *out, const ra_tensor *q, const ra_tensor *k,
                               const ra_tensor *v, int64_t lo, int64_t hi,
                               const ra_attention_options *options);

/* A ring call's sizes: this rank's zig-zag shard and q's, k's shapes. */
typedef struct mpi_ring_shape {
    int64_t seq, batch, heads, kv_heads, head_dim, n_local, max_rows;
    int64_t start[2], count[2]; /* this rank's chunks (ra_mpi_zigzag) */
    ra_dtype kv_dtype;
    size_t kv_row; /* bytes of one token's K (or V): Hkv D elements */
} mpi_ring_shape;

/* *s for rank of size ranks: q [B, S_local, H, D] f32 with S_local this
 * rank's rows of seq, k and v [B, S_local, Hkv, D], f32, f16 or bf16, the
 * same; max_rows the most rows a shard holds, RA_ERR_OVERFLOW when a K/V
 * message of two tensors of batch of them is past MPI's int count. */
ra_status mpi_ring_shapes(mpi_ring_shape *s, const ra_tensor *q, const ra_tensor *k,
                          const ra_tensor *v, int64_t seq, int size, int rank);

/* RA_ERR_SHAPE unless a and b (named an, bn) have the same shape. */
ra_status mpi_same_shape(const ra_tensor *a, const char *an, const ra_tensor *b, const char *bn);

/* The rows [s0, s0 + n) of axis 1 of t (n may be 0). */
ra_tensor mpi_rows(const ra_tensor *t, int64_t s0, int64_t n);

/* The caller's options over ra_attention_options_init(), as many bytes
 * as its struct_size says (an older, shorter struct: its fields); the
 * fields' values are libropeattn's to check. */
void mpi_options(ra_attention_options *o, const ra_attention_options *options);

/* out, a float32 view of the caller's shape, checked as libropeattn checks
 * an output (data, strides, every index its own element), and lse [n_lse]
 * (NULL: none) not overlapping it; name: out's, for the sentence. */
ra_status mpi_check_out(const ra_tensor *out, const char *name, const float *lse, int64_t n_lse);

/* K then V [B, n, Hkv, D] (checked views of one dtype) into dst, each
 * row of D elements in order: the ring's K/V buffer. */
void mpi_pack_kv(char *dst, const ra_tensor *k, const ra_tensor *v);

/* Whether a block of nq queries at q_start against nk keys at k_start has
 * a visible pair under o's masks; later: the keys' zig-zag chunk comes
 * after the queries' (masked whole).  A window hides the block when even
 * its first query and last key are W apart; chunked attention when its
 * last key is before the first query's chunk (chunks from position 0:
 * with padding, from each row's own start, so no block is hidden). */
int mpi_block_visible(const ra_attention_options *o, int64_t nq, int64_t nk, int later,
                      int64_t q_start, int64_t k_start);

/* A ring call's arguments for mpi_agree: seq, the shapes and dtype of s,
 * o's window, scale, softcap, chunk, padding_mask [batch, seq],
 * cu_seqlens (with n_documents), dropout and seed (o NULL: zeros, a rank
 * whose checks failed), and the values of sinks [heads] (NULL: none). */
enum { MPI_RING_SIG = 15 };
void mpi_ring_signature(mpi_sig sig[MPI_RING_SIG], const mpi_ring_shape *s, int64_t seq,
                        const ra_attention_options *o, const float *sinks);

/* Whether local row i of a zig-zag shard (chunks start, count) in batch
 * row b is a real token under o's padding_mask [B, seq] (1 without one). */
int mpi_real_row(const ra_attention_options *o, int64_t seq, int64_t b, const int64_t start[2],
                 const int64_t count[2], int64_t i);

/* An output view t (mpi_check_out'ed) and lse [n_lse] (NULL: none) that
 * must not touch what the call reads while it writes them: sinks [heads],
 * o's padding_mask [batch, seq] and cu_seqlens (RA_ERR_ARGUMENT naming
 * them).  Only addresses are compared: nothing is read. */
ra_status mpi_check_off_masks(const ra_tensor *t, const char *name, const float *lse,
                              int64_t n_lse, const ra_attention_options *o, const float *sinks,
                              int64_t batch, int64_t heads, int64_t seq);

/* Two output views (each passed mpi_check_out) that must not share a
 * byte, even as interleaved views of one buffer: RA_ERR_ARGUMENT naming
 * them. */
ra_status mpi_check_apart(const ra_tensor *a, const char *an, const ra_tensor *b,
                          const char *bn);

/* Bytes of one element of dtype (f32, f16, bf16). */
size_t mpi_dtype_size(ra_dtype dtype);

#endif
