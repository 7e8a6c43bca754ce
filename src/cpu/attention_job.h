/*
 * attention_job.h — what the flash kernels (cpu/flash_impl.h,
 * cpu/flash_backward_impl.h) and the decode kernels read (internal): the
 * masks, the arguments of one attention call, the flash path's tiles and
 * jobs.  The core fills them (attention_internal.h: ra_attention_prepare,
 * ra_attention_backward_prepare).
 *
 *   q, out: [B, S, H, D]   k, v: [B, S, Hkv, D]   strided views: out float32,
 *   q, k and v f32, f16 or bf16 (q float32 in the reference backward and with
 *   RoPE)
 */
#ifndef RA_CPU_ATTENTION_JOB_H
#define RA_CPU_ATTENTION_JOB_H

#include <math.h>

#include "cpu/dropout.h"
#include "internal.h"

/* The masks and logit changes of ra_attention_options, checked
 * (ra_attention_mask_read); the kernels test them with the functions below.
 * Plain causal attention has every field 0 or NULL but scale. */
typedef struct ra_attention_mask {
    double scale;               /* logits = q.k scale */
    float softcap;              /* 0: none */
    int64_t window, chunk;      /* 0: none */
    const float *sinks;         /* [H] or NULL */
    const uint8_t *padding;     /* [B, S] or NULL */
    const int64_t *cu_seqlens;  /* [n_documents + 1] or NULL */
    int64_t n_documents, seq;   /* seq: S, the padding rows' length */
    int64_t batch, n_heads;     /* B and H: the padding's rows, the sinks' count */
    /* The padding's and documents' index of query row 0 and of key row 0:
     * 0, but in a block of a longer sequence (ra_attention_block_lse's
     * q_start and k_start) */
    int64_t q_origin, k_origin;
    /* ra_attention_options' non_causal (no causal mask: a window, chunk or
     * document bounds a query on both sides), and the keys' count Sk (q's
     * S but with other key lengths; the dropout grid's last axis) */
    int non_causal;
    int64_t n_keys;
    /* ra_attention_options' window_earlier_only with non_causal: the
     * window bounds only the earlier keys */
    int window_earlier_only;
    /* attn_mask, checked: element (b, h, i, j) at attn + the dot product of
     * those indices with attn_stride (0 on a broadcast axis); RA_BOOL (0:
     * masked) or additive f32, f16, bf16 (-Inf: masked).  NULL: none. */
    const void *attn;
    ra_dtype attn_dtype;
    int64_t attn_stride[4];
    size_t attn_bytes; /* from attn to one past the last byte read */
    /* ra_attention_options' quantize_q: 1 only on the decode calls of an
     * RA_I8 cache (ra_attention_decode_check_views), else 0 */
    int quantize_q;
} ra_attention_mask;

/* Leading padding tokens of row b (0 without a padding mask): the chunks'
 * origin, counted from the padding row's start (not from k_origin). */
static inline int64_t ra_mask_leading_padding(const ra_attention_mask *mask, int64_t b)
{
    int64_t lp = 0;
    while (mask->padding && lp < mask->seq && !mask->padding[b * mask->seq + lp]) lp++;
    return lp;
}

/* The first key query i sees, before the padding mask: keys lo .. i, from
 * the window, the chunk (lp: ra_mask_leading_padding; a query within the
 * leading padding is itself padding, its row zero: no chunk bound there)
 * and the document.  i, lp and lo are key rows (the document's bounds
 * placed by k_origin). */
static inline int64_t ra_mask_first_key(const ra_attention_mask *mask, int64_t i, int64_t lp)
{
    int64_t lo = 0;
    if (mask->window && i - mask->window + 1 > lo) lo = i - mask->window + 1;
    if (mask->chunk && i >= lp) {
        int64_t start = lp + (i - lp) / mask->chunk * mask->chunk;
        if (start > lo) lo = start;
    }
    if (mask->cu_seqlens) { /* the last document start <= i */
        const int64_t at = i + mask->k_origin; /* c[a] <= at < c[z] */
        int64_t a = 0, z = mask->n_documents;
        while (z - a > 1) {
            int64_t m = a + (z - a) / 2;
            if (mask->cu_seqlens[m] <= at) a = m;
            else z = m;
        }
        if (mask->cu_seqlens[a] - mask->k_origin > lo) lo = mask->cu_seqlens[a] - mask->k_origin;
    }
    return lo;
}

/* The last key query i sees, before the padding mask and attn_mask (i, lp
 * and the result key rows, as ra_mask_first_key's): i, causal; without the
 * causal mask the window's (i + W - 1, unless window_earlier_only), the chunk's and the document's last
 * key, n_keys - 1 at most. */
static inline int64_t ra_mask_last_key(const ra_attention_mask *mask, int64_t i, int64_t lp,
                                       int64_t n_keys)
{
    int64_t hi = mask->non_causal ? n_keys - 1 : i;
    if (!mask->non_causal) return hi < n_keys - 1 ? hi : n_keys - 1;
    if (mask->window && !mask->window_earlier_only && i + mask->window - 1 < hi)
        hi = i + mask->window - 1;
    if (mask->chunk && i >= lp) {
        int64_t end = lp + ((i - lp) / mask->chunk + 1) * mask->chunk - 1;
        if (end < hi) hi = end;
    }
    if (mask->cu_seqlens) { /* the first document start > i, less one */
        const int64_t at = i + mask->k_origin;
        int64_t a = 0, z = mask->n_documents;
        while (z - a > 1) {
            int64_t m = a + (z - a) / 2;
            if (mask->cu_seqlens[m] <= at) a = m;
            else z = m;
        }
        if (mask->cu_seqlens[a + 1] - 1 - mask->k_origin < hi)
            hi = mask->cu_seqlens[a + 1] - 1 - mask->k_origin;
    }
    return hi;
}

/* attn_mask's values for query row i of (b, h) and keys j0 .. j0 + n - 1,
 * as additive logits (RA_BOOL: 0 or -Inf), to dst[j * dst_stride]. */
static inline void ra_mask_attn_row(const ra_attention_mask *mask, int64_t b, int64_t h,
                                    int64_t i, int64_t j0, int64_t n, float *dst,
                                    int64_t dst_stride)
{
    const int64_t *st = mask->attn_stride, s3 = st[3];
    const int64_t at = b * st[0] + h * st[1] + i * st[2] + j0 * s3;
    if (mask->attn_dtype == RA_BOOL) {
        const uint8_t *m = (const uint8_t *)mask->attn + at;
        for (int64_t j = 0; j < n; j++) dst[j * dst_stride] = m[j * s3] ? 0.0f : -INFINITY;
    } else if (mask->attn_dtype == RA_F32) {
        const float *m = (const float *)mask->attn + at;
        for (int64_t j = 0; j < n; j++) dst[j * dst_stride] = m[j * s3];
    } else {
        for (int64_t j = 0; j < n; j++)
            dst[j * dst_stride] = ra_load(mask->attn, mask->attn_dtype, at + j * s3);
    }
}

/* What attn_mask does to a flash tile: leaves it empty (no row sees a
 * key: skipped), whole (exactly 0, -0.0 too, at every key a row sees:
 * adding it changes no score, so its tile is not built) or neither. */
enum { RA_TILE_EMPTY, RA_TILE_WHOLE, RA_TILE_BUILT };

/* Query row i of (b, h) over the keys lo .. hi of the tile of nk keys from
 * k0 (a flash tile's row bounds, clamped to 0 .. nk - 1 here), padding keys
 * (padkey[j] nonzero) aside: sets *any where attn_mask lets it see one,
 * clears *whole where attn_mask is not 0 at one; returns whether it sees
 * one.  The quick check that lets the flash kernels skip a tile attn_mask
 * leaves empty or whole before building it.  line: [RA_FLASH_BK] scratch. */
static inline int ra_mask_attn_row_scan(const ra_attention_mask *mask, int64_t b, int64_t h,
                                        int64_t i, int64_t k0, int64_t nk, float lo, float hi,
                                        const float *padkey, float *line, int *any, int *whole)
{
    const int64_t l = lo < 0 ? 0 : (int64_t)lo, e = hi > nk - 1 ? nk - 1 : (int64_t)hi;
    int sees = 0, zero = 1;
    if (l > e) return 0;
    ra_mask_attn_row(mask, b, h, i, k0 + l, e - l + 1, line, 1);
    for (int64_t j = l; j <= e; j++)
        if (!padkey[j]) {
            sees |= line[j - l] != -INFINITY;
            zero &= line[j - l] == 0.0f;
        }
    *any |= sees;
    *whole &= zero;
    return sees;
}

/* attn_mask's value at (b, h, i, j) (ra_mask_attn_row's); 0 without one. */
static inline float ra_mask_attn(const ra_attention_mask *mask, int64_t b, int64_t h, int64_t i,
                                 int64_t j)
{
    float v = 0.0f;
    if (mask->attn) ra_mask_attn_row(mask, b, h, i, j, 1, &v, 1);
    return v;
}

/* Whether key row j of batch row b is real (not padding). */
static inline int ra_mask_real(const ra_attention_mask *mask, int64_t b, int64_t j)
{
    return !mask->padding || mask->padding[b * mask->seq + mask->k_origin + j] != 0;
}

/* Whether batch row b has a real key among key rows lo .. hi. */
static inline int ra_mask_any_real(const ra_attention_mask *mask, int64_t b, int64_t lo,
                                   int64_t hi)
{
    for (int64_t j = lo > 0 ? lo : 0; j <= hi; j++)
        if (ra_mask_real(mask, b, j)) return 1;
    return 0;
}

/* Whether query row i of batch row b is real (not padding). */
static inline int ra_mask_query_real(const ra_attention_mask *mask, int64_t b, int64_t i)
{
    return !mask->padding || mask->padding[b * mask->seq + mask->q_origin + i] != 0;
}

/* The logit of a scaled dot product: soft-capped when asked. */
static inline double ra_mask_logit(const ra_attention_mask *mask, double s)
{
    return mask->softcap > 0 ? mask->softcap * tanh(s / mask->softcap) : s;
}

typedef struct ra_attention_args {
    ra_attention_mask mask; /* masks, scale, softcap, sinks */
    const ra_tensor *out, *q, *k, *v;
    float *lse;           /* [B, H, S] or NULL: the forward also writes each
                             row's log-sum-exp (ra_attention_forward_lse) */
    int dropout;          /* nonzero: apply mask to the probabilities */
    ra_dropout_mask drop; /* stream RA_STREAM_ATTENTION */
    /* Flash path: with rope set, q and k are not yet rotated, and each tile
     * is rotated as it is loaded, at these positions (of the [B, S] grid)
     * — RoPE without a pass of its own over q and k. */
    const ra_rope *rope;
    const ra_positions *positions;
    /* Query row i is key row i + q_shift, keys [B, Sk, Hkv, D] of any
     * length Sk: Sk - Sq in ra_attention and its backward (the diagonal
     * aligned bottom-right), the block's offset in ra_attention_block_lse
     * (no dropout, padding, documents or rope then); 0 when Sk = Sq. */
    int64_t q_shift;
    /* The keys' first position (ra_attention_block_*: k_start), the chunk
     * grid being anchored at position 0: key row 0 is position k_start;
     * 0 everywhere else. */
    int64_t k_start;
} ra_attention_args;

/* The flash path's tiles: a task is (b, kv head g, block of block_q queries);
 * its rows are the rep = H / Hkv query heads of the group times block_q
 * queries, row r = (head in group) * block_q + query in block, padded to a
 * multiple of RA_FLASH_ROWS.  Keys come in tiles of RA_FLASH_BK.  About 256
 * rows share each K and V row the task reads: 64 ran at 0.63-0.65 of sgemm,
 * 256 at 0.71-0.77 (docs/perf/2026-12-02-flash-rows.md). */
enum { RA_FLASH_BK = 64, RA_FLASH_ROWS = 64, RA_FLASH_PAD = 16 };

typedef struct ra_flash_layout {
    int64_t block_q, rows;
    int64_t per_thread; /* floats of scratch for one thread (64-byte multiple) */
} ra_flash_layout;

static inline int64_t ra_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Per thread (cpu/flash_impl.h carves it): Qt [D, rows], St [BK, rows +
 * RA_FLASH_PAD] (the float32 path's rows padded: flash_tile.ldst),
 * Ot [D rounded to 16, rows] (whole AMX tiles: cpu/flash_bf16_impl.h), m, l, e^(m - m'), each row's first and last key seen in a
 * tile [rows], each row's first key [rows] (int64), the tile's padding keys
 * [BK], dropout multipliers [BK], a zero row [D rounded to 16] (the padding
 * query rows'),
 * key/value row pointers [BK], float32 copies of a tile of 16-bit (or
 * rotated) K or V [BK, D rounded to 16] (the bf16 GEMMs' packed K or V
 * there instead), and the rotated or widened query rows [rows, D rounded
 * to 16] (the bf16 GEMMs' Qp there instead); then each row's last key [rows]
 * (int64), whether it has seen a key [rows], and attn_mask's tile [BK, rows].
 * rep and head_dim are bounded
 * by the caller so that nothing here overflows. */
static inline ra_flash_layout ra_flash_layout_for(int64_t rep, int64_t head_dim)
{
    ra_flash_layout f;
    f.block_q = (256 / rep) & ~(int64_t)7;
    if (f.block_q < 8) f.block_q = 8;
    f.rows = ra_round_up(rep * f.block_q, RA_FLASH_ROWS);
    f.per_thread = ra_round_up((head_dim + ra_round_up(head_dim, 16)) * f.rows +
                                   2 * RA_FLASH_BK * f.rows + RA_FLASH_BK * RA_FLASH_PAD +
                                   10 * f.rows +
                                   2 * RA_FLASH_BK + ra_round_up(head_dim, 16) + 2 * RA_FLASH_BK +
                                   (RA_FLASH_BK + f.rows) * ra_round_up(head_dim, 16),
                               16);
    return f;
}

typedef struct ra_flash_job {
    const ra_attention_args *args;
    float *scratch; /* threads * layout.per_thread floats */
    ra_flash_layout layout;
    int64_t n_query_blocks;
    int64_t task0;      /* the first task of this run (attention_flash.c) */
    const float *pack;  /* the group's K then V rows, [Sk, D rounded to 16]
                           each, zeros past D and for padding keys; NULL:
                           the tiles copy their rows (attention_flash.c) */
    int amx; /* q, k and v bf16 and AMX usable (ra_cpu_amx_enable): the amx
                kernels' tile GEMMs run on it */
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

/*   dq, dout: [B, S, H, D]   dk, dv: [B, S, Hkv, D]   float32 strided views
 *   lse: [B, H, S] */
typedef struct ra_attention_backward_args {
    ra_attention_args fwd; /* q, k, v, the dropout; out (NULL on the reference
                              path, which does not read it); lse unused */
    const ra_tensor *dq, *dk, *dv, *dout;
    const float *lse;      /* the forward's; NULL on the reference path */
    float *dsinks;         /* [H] or NULL: the options' */
    int accumulate;        /* 0: dq, dk, dv overwritten; 1: added to, flash path only
                              (ra_attention_block_backward: keys [B, Sk, Hkv, D] of
                              any length, fwd.q_shift their offset, no dsinks) */
} ra_attention_backward_args;


/* The flash backward's task is one (b, query head h): query blocks of
 * RA_FLASH_BK rows against key tiles of RA_FLASH_BK keys, so that key tile j
 * is first met by query block j.  Its dk and dv go to per-head partial
 * buffers [B, H, S, dp], dp = D rounded up to 16, that a second pass sums
 * over each group (partial buffers [B, H, Sk, dp] for a block of Sk keys).
 * Per thread (cpu/flash_backward_impl.h carves it), with R = RA_FLASH_BK
 * rows, D16 and D32 = D rounded up to 16 and 32: Qt, dOt, dQt [D16, R];
 * Q and dO rows [R, D16]; P, P * dropout and dP/dS tiles [BK, R]; lse,
 * Delta and ones [R]; dropout multipliers [BK]; a zero row
 * [D16] (the padding query rows'); key and value row pointers [BK] each;
 * float32 copies of a tile of 16-bit K and of V [BK, D16] each; the
 * soft-cap's slopes [BK, R]; each row's first and last key of a tile [R]
 * and first key [R] (int64); the tile's padding keys [BK]; then, for the
 * bf16 units (cpu/flash_backward_bf16_impl.h), Qp and dOp [D32 / 2, R]
 * (words), P and dS rounded to bf16 [BK, R / 2] (words) and a dK or dV
 * block [BK, D16]; then each row's last key [R] (int64) and attn_mask's
 * tile [BK, R]. */
typedef struct ra_flash_backward_job {
    const ra_attention_backward_args *args;
    float *partial_k, *partial_v; /* [B, H, S, dp] each */
    float *partial_sink;          /* [B, H]: each task's share of dL/dsinks */
    float *scratch;               /* threads * per_thread floats */
    int64_t dp, per_thread;
    int amx; /* q, k and v bf16 and AMX usable (ra_cpu_amx_enable): the amx kernels'
                tile GEMMs run on it */
} ra_flash_backward_job;

static inline int64_t ra_flash_backward_per_thread(int64_t head_dim)
{
    const int64_t r = RA_FLASH_BK, d16 = ra_round_up(head_dim, 16);
    const int64_t d32 = ra_round_up(head_dim, 32);
    return ra_round_up(3 * d16 * r + 2 * r * d16 + 5 * RA_FLASH_BK * r + 9 * r +
                           2 * RA_FLASH_BK + d16 + 4 * RA_FLASH_BK + 2 * RA_FLASH_BK * d16 +
                           d32 * r + RA_FLASH_BK * r + RA_FLASH_BK * d16,
                       16);
}

#endif
