/*
 * attention_internal.h — the attention paths behind ra_attention and
 * ra_layer_forward (internal): their checks, scratch and runs.  What the
 * kernels read (masks, arguments, jobs): cpu/attention_job.h.
 *
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]   strided views: out float32,
 *   q, k and v f32, f16 or bf16 (q float32 in the reference backward and with
 *   RoPE)
 */
#ifndef RA_ATTENTION_INTERNAL_H
#define RA_ATTENTION_INTERNAL_H

#include <math.h>

#include "cpu/attention_job.h"
#include "cpu/dropout.h"
#include "internal.h"

/* Checks options' masks for q's shape [B, S, H, D] and fills *mask. */
ra_status ra_attention_mask_read(ra_attention_mask *mask, const ra_attention_options *options,
                                 const int64_t q_shape[4]);

/* ra_attention_mask_read, but also non_causal and attn_mask ([B or 1, H or
 * 1, Sq or 1, Sk or 1], its values scanned) for n_keys keys (q_shape[1]
 * queries; with n_keys != q_shape[1], padding_mask, cu_seqlens and chunk
 * are RA_ERR_UNSUPPORTED).  ra_attention_mask_read alone refuses both
 * (RA_ERR_UNSUPPORTED): the calls that take them call this one. */
ra_status ra_attention_mask_read_keys(ra_attention_mask *mask,
                                      const ra_attention_options *options,
                                      const int64_t q_shape[4], int64_t n_keys);

/* RA_ERR_ARGUMENT ("<name> overlaps sinks") when the output view t touches
 * the mask's sinks, padding, documents or attn_mask. */
ra_status ra_attention_mask_check_output(const ra_attention_mask *mask, const ra_tensor *t,
                                         const char *name);

/* Validates the views; fills args (lse NULL) with options' dropout
 * (options read by ra_attention_options_read, or NULL: none). */
ra_status ra_attention_prepare(ra_attention_args *args, const ra_tensor *out,
                               const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                               const ra_attention_options *options);

/* The caller's options (NULL: ra_attention_options_init()), path and
 * dropout checked. */
ra_status ra_attention_options_read(ra_attention_options *out, const ra_attention_options *options);

/* *on = options' dropout p > 0 (options checked, or NULL: none) and *mask
 * its masks. */
void ra_attention_dropout(int *on, ra_dropout_mask *mask, const ra_attention_options *options);

/* Scratch bytes the path needs for these sizes (batch rows of seq
 * queries and n_keys keys) and thread count; 0 when that does not fit in
 * memory. */
size_t ra_attention_scratch_bytes(ra_attention_path path, int64_t batch, int64_t seq,
                                  int64_t n_keys, int64_t n_heads, int64_t n_kv_heads,
                                  int64_t head_dim, int threads);

/* The seed's masked path, materializing [Sq, Sk] scores per head, on the
 * calling thread.  scratch: ra_attention_scratch_bytes(REFERENCE) bytes. */
void ra_attention_reference(const ra_attention_args *args, float *scratch);

/* Whether query row i of (b, h) sees key row j: a real query, j within its
 * causal, window, chunk and document bounds, a real key, attn_mask not
 * masking it. */
int ra_attention_reference_seen(const ra_attention_args *args, int64_t b, int64_t h, int64_t i,
                                int64_t j);

/* Row i of softmax(q k^T / sqrt(D) + mask) for (b, h), before dropout, as
 * the reference forward computes it: row[j] for j in [0, Sk) (0 for the
 * keys it does not see).  Returns the row's log-sum-exp (-Inf, or the sink,
 * for a row that sees no key: its probabilities all 0).  The reference
 * backward recomputes its probabilities with it.   row: [Sk] */
double ra_attention_reference_row(const ra_attention_args *args, int64_t b, int64_t h,
                                  int64_t i, float *row);

/* Tiled attention with an online softmax, threads over (b, kv head, query
 * block) tasks.  scratch: ra_attention_scratch_bytes(FLASH, threads). */
void ra_attention_flash(ra_context *ctx, const ra_attention_args *args, float *scratch);

/* The flash path's short blocks (attention_short.c): whether args' block
 * runs on the decode kernel (a few query rows, and only what that kernel
 * serves; seq queries, n_keys keys, rep query heads a kv head); the
 * scratch bytes that needs for these sizes (0 for a block too
 * long; *overflow set when it does not fit in memory); and the run. */
int ra_attention_short(const ra_attention_args *args);
int ra_attention_short_shape(int64_t seq, int64_t n_keys, int64_t rep); /* its sizes' part */
size_t ra_attention_short_scratch_bytes(int64_t batch, int64_t seq, int64_t n_keys,
                                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                        int threads, int *overflow);
void ra_attention_short_run(ra_context *ctx, const ra_attention_args *args, float *scratch);

/* ---- the backward (attention_backward.c) --------------------------------- */

/* Validates the views and, for the flash path (path must be REFERENCE or
 * FLASH: AUTO means FLASH), out and lse; fills args (options read and
 * checked; accumulate 0).  k, v, dk and dv may be of any length Sk.
 * any_keys: a block's (ra_attention_block_backward: q_shift 0, its caller
 * places the rows and reads the sequence's masks; non_causal and attn_mask
 * refused), else ra_attention_backward's (q_shift Sk - Sq, non_causal and
 * attn_mask read). */
ra_status ra_attention_backward_prepare(ra_attention_backward_args *args, int any_keys,
                                        ra_attention_path path, const ra_tensor *dq,
                                        const ra_tensor *dk, const ra_tensor *dv,
                                        const ra_tensor *dout, const ra_tensor *q,
                                        const ra_tensor *k, const ra_tensor *v,
                                        const ra_tensor *out, const float *lse,
                                        const ra_attention_options *options);

/* Scratch bytes the backward on this path needs (q_seq: the queries', seq:
 * the keys'); 0 when that does not fit in memory. */
size_t ra_attention_backward_scratch_bytes(ra_attention_path path, int64_t batch,
                                           int64_t q_seq, int64_t seq, int64_t n_heads,
                                           int64_t head_dim, int threads);

/* Runs the prepared backward on path (REFERENCE or FLASH): its scratch, a
 * 16-bit q widened into it, the kernels. */
ra_status ra_attention_backward_run(ra_context *ctx, ra_attention_backward_args *args,
                                    ra_attention_path path);

/* The reference backward (attention_ref_backward.c), on the calling thread.
 * scratch: ra_attention_backward_scratch_bytes(REFERENCE) bytes, 64-byte
 * aligned. */
void ra_attention_backward_reference(const ra_attention_backward_args *args, void *scratch);

/* The flash backward (attention_flash_backward.c, cpu/flash_backward_impl.h).
 * scratch: ra_attention_backward_scratch_bytes(FLASH, threads) bytes. */
void ra_attention_backward_flash(ra_context *ctx, const ra_attention_backward_args *args,
                                 float *scratch);

#endif
