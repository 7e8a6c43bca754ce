/*
 * attention_internal.h — the attention kernels behind ra_attention and
 * ra_layer_forward (internal).
 *
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]   float32 strided views
 */
#ifndef RA_ATTENTION_INTERNAL_H
#define RA_ATTENTION_INTERNAL_H

#include "dropout.h"
#include "internal.h"

typedef struct ra_attention_args {
    const ra_tensor *out, *q, *k, *v;
    int dropout;          /* nonzero: apply mask to the probabilities */
    ra_dropout_mask mask; /* stream RA_STREAM_ATTENTION */
} ra_attention_args;

/* Validates the views and the dropout; fills args. */
ra_status ra_attention_prepare(ra_attention_args *args, const ra_tensor *out,
                               const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                               const ra_dropout *dropout);

/* Scratch bytes the path needs for these sizes and thread count; 0 when
 * that does not fit in memory. */
size_t ra_attention_scratch_bytes(ra_attention_path path, int64_t seq, int64_t n_heads,
                                  int64_t n_kv_heads, int64_t head_dim, int threads);

/* The seed's masked path, materializing [S, S] scores per head, on the
 * calling thread.  scratch: ra_attention_scratch_bytes(REFERENCE) bytes. */
void ra_attention_reference(const ra_attention_args *args, float *scratch);

/* Tiled attention with an online softmax, threads over (b, kv head, query
 * block) tasks.  scratch: ra_attention_scratch_bytes(FLASH, threads). */
void ra_attention_flash(ra_context *ctx, const ra_attention_args *args, float *scratch);

/* The flash path's tiles: a task is (b, kv head g, block of block_q queries);
 * its rows are the rep = H / Hkv query heads of the group times block_q
 * queries, row r = (head in group) * block_q + query in block, padded to a
 * multiple of RA_FLASH_ROWS.  Keys come in tiles of RA_FLASH_BK. */
enum { RA_FLASH_BK = 64, RA_FLASH_ROWS = 64 };

typedef struct ra_flash_layout {
    int64_t block_q, rows;
    int64_t per_thread; /* floats of scratch for one thread (64-byte multiple) */
} ra_flash_layout;

static inline int64_t ra_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Per thread (cpu/flash_impl.h carves it): Qt [D, rows], St [BK, rows],
 * Ot [D, rows], m, l, e^(m - m') and query positions [rows], dropout
 * multipliers [BK],
 * a zero row [D rounded to 16], key/value row pointers [BK + 16] (a
 * register block may run past the tile's keys, onto the zero row), and
 * float32 copies of a tile of 16-bit K or V [BK, D rounded to 16].  rep
 * and head_dim are bounded by the caller so that nothing here overflows. */
static inline ra_flash_layout ra_flash_layout_for(int64_t rep, int64_t head_dim)
{
    ra_flash_layout f;
    f.block_q = (64 / rep) & ~(int64_t)7;
    if (f.block_q < 8) f.block_q = 8;
    f.rows = ra_round_up(rep * f.block_q, RA_FLASH_ROWS);
    f.per_thread = ra_round_up(2 * head_dim * f.rows + RA_FLASH_BK * f.rows + 4 * f.rows +
                                   RA_FLASH_BK + ra_round_up(head_dim, 16) +
                                   2 * (RA_FLASH_BK + 16) +
                                   RA_FLASH_BK * ra_round_up(head_dim, 16),
                               16);
    return f;
}

typedef struct ra_flash_job {
    const ra_attention_args *args;
    float *scratch; /* threads * layout.per_thread floats */
    ra_flash_layout layout;
    int64_t n_query_blocks;
} ra_flash_job;

/* Row pointer of (b, s, h) in a float32 view. */
static inline float *ra_row(const ra_tensor *t, int64_t b, int64_t s, int64_t h)
{
    return (float *)t->data + b * t->stride[0] + s * t->stride[1] + h * t->stride[2];
}

/* Element offset of (b, s, h, 0) in a view of any dtype. */
static inline int64_t ra_offset(const ra_tensor *t, int64_t b, int64_t s, int64_t h)
{
    return b * t->stride[0] + s * t->stride[1] + h * t->stride[2];
}

/* Start of row (b, s, h) in a view of any dtype. */
static inline const void *ra_row_any(const ra_tensor *t, int64_t b, int64_t s, int64_t h)
{
    return (const char *)t->data + (size_t)ra_offset(t, b, s, h) * ra_dtype_size(t->dtype);
}

#endif
