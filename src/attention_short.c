/*
 * attention_short.c — the flash path's short blocks: a block of a few
 * query rows (a decoding step's new token or few over the keys before
 * them, as transformers' cache hands them to ra_attention_block_lse) runs
 * on the decode kernel (cpu/decode_impl.h) over a view of its own K and V
 * (ra_kv_cache's borrowed strides), not on the flash tiles: a tile
 * computes RA_FLASH_ROWS rows whatever the block holds (one query of a
 * group of 4 heads: 4 real rows of 64, 16 times the work).  The decode
 * kernel reads each block of keys once for the group's rows, 4 rows a
 * load, and splits the keys into chunks across threads, merged in chunk
 * order: the same bits for any thread count, not the flash tiles' bits
 * (another order of the same float32 sums).  The batch rows go to one
 * decode call (up to SHORT_BATCH of them), their chunks and kv heads
 * spread over the threads together: each row's bits are the row's alone.
 *
 * It serves what the decode kernel does as ra_attention_decode_lse does:
 * the causal mask with the queries anywhere against the keys (q_shift),
 * scale, soft-cap, window, chunk (counted from the block's k_start) and
 * sinks, out and lse.  Anything else (padding, documents, attn_mask,
 * dropout, non-causal, fused RoPE, K and V of other dtypes or row strides,
 * rows of stride 0)
 * stays on the flash tiles; a padding mask of ones, one document, or an
 * attn_mask of exactly 0 at every causal key (the causal mask given in
 * full) is none, as the tiles read them.
 *
 *   q, out: [B, Sq, H, D]   k, v: [B, Sk, Hkv, D]   lse: [B, H, Sq]
 */
#include <string.h>

#include "attention_internal.h"
#include "kvcache_internal.h"

/* The most query rows (query heads of a group times queries) a short
 * block has.  One thread of an Intel Xeon (family 6 model 167), K and V
 * of 2048 keys, D 128, the queries at the end: the flash tiles took 2.1
 * ms for any block up to 64 rows, the decode kernel 0.33, 0.55, 0.98,
 * 1.8 and 3.3 ms for 4, 8, 16, 32 and 64 (docs/perf/2026-12-06-torch2.md,
 * 2026-12-07). */
enum { SHORT_ROWS = 32 };

int ra_attention_short_shape(int64_t seq, int64_t n_keys, int64_t rep)
{
    return seq >= 1 && n_keys >= 1 && rep <= SHORT_ROWS && seq * rep <= SHORT_ROWS;
}

/* A view of batch rows b .. b + n - 1 of t: [n, S, heads, D]. */
static ra_tensor batch_rows(const ra_tensor *t, int64_t b, int64_t n)
{
    ra_tensor rows = *t;
    rows.data = (char *)t->data + (size_t)(b * t->stride[0]) * ra_dtype_size(t->dtype);
    rows.shape[0] = n;
    return rows;
}

/* Whether mask's padding, if any, marks no token (it then changes nothing,
 * the chunks' origin included): a padding mask of ones and one document
 * take the short path as none do, so that they keep its bits. */
static int no_padding(const ra_attention_mask *m)
{
    for (int64_t i = 0; m->padding && i < m->batch * m->seq; i++)
        if (!m->padding[i]) return 0;
    return 1;
}

/* Whether attn_mask, if any, is exactly 0 (-0.0 too) at every key the
 * causal mask lets a query see (query row i: keys 0 .. i + q_shift): then
 * adding it changes no score, as a flash tile it leaves whole
 * (RA_TILE_WHOLE), and the block keeps the bits it has without it.  Each
 * distinct row of the mask is read once (an axis of stride 0 once; rows
 * broadcast over the queries as the last query's, which sees the most
 * keys), at most SHORT_ROWS query rows a kv head. */
static int attn_adds_nothing(const ra_attention_args *a)
{
    const ra_attention_mask *m = &a->mask;
    if (!m->attn) return 1;
    const int64_t *st = m->attn_stride, seq = a->q->shape[1], n_keys = a->k->shape[1];
    const int64_t n_b = st[0] ? a->q->shape[0] : 1, n_h = st[1] ? a->q->shape[2] : 1;
    float row[256];
    for (int64_t b = 0; b < n_b; b++)
        for (int64_t h = 0; h < n_h; h++)
            for (int64_t i = st[2] ? 0 : seq - 1; i < seq; i++) {
                const int64_t seen = i + a->q_shift + 1 < n_keys ? i + a->q_shift + 1 : n_keys;
                for (int64_t j0 = 0; j0 < seen; j0 += 256) {
                    const int64_t n = seen - j0 < 256 ? seen - j0 : 256;
                    ra_mask_attn_row(m, b, h, i, j0, n, row, 1);
                    for (int64_t j = 0; j < n; j++)
                        if (row[j] != 0.0f) return 0;
                }
            }
    return 1;
}

int ra_attention_short(const ra_attention_args *a)
{
    const ra_attention_mask *m = &a->mask;
    const ra_tensor *k = a->k, *v = a->v;
    return ra_attention_short_shape(a->q->shape[1], k->shape[1], a->q->shape[2] / k->shape[2]) &&
           !a->rope && !a->dropout && no_padding(m) &&
           (!m->cu_seqlens || m->n_documents == 1) && !m->non_causal && !m->quantize_q &&
           k->dtype == v->dtype &&
           (k->dtype == RA_F32 || k->dtype == RA_F16 || k->dtype == RA_BF16) &&
           k->stride[1] > 0 && k->stride[1] == v->stride[1] && attn_adds_nothing(a);
}

/* Batch rows a decode call takes: all of them up to this many (each row
 * gives the call's threads one task per chunk of its keys at least, and
 * its partials, a chunk's rows and its kv heads' each, D + 2 floats: a few
 * times the row's queries). */
enum { SHORT_BATCH = 64 };

/* The decode kernel's view of batch rows b0 .. b0 + n - 1 of a's K and V
 * (n_keys keys each, lengths [n] n_keys), its queries at q_start [n] and
 * its chunks from -k_start [n]. */
static ra_kv_cache rows_view(const ra_attention_args *a, int64_t b0, int64_t n, int64_t *lengths,
                             int64_t *q_start, int64_t *k_start)
{
    const ra_tensor *k = a->k, *v = a->v;
    const size_t size = ra_dtype_size(k->dtype);
    for (int64_t b = 0; b < n; b++)
        lengths[b] = k->shape[1], q_start[b] = a->q_shift, k_start[b] = a->k_start;
    ra_kv_cache view = {.batch = n, .capacity = k->shape[1], .n_kv_heads = k->shape[2],
                        .head_dim = k->shape[3], .dtype = k->dtype,
                        .k = (char *)k->data + (size_t)(b0 * k->stride[0]) * size,
                        .v = (char *)v->data + (size_t)(b0 * v->stride[0]) * size,
                        .length = lengths};
    memcpy(view.k_stride, k->stride, sizeof view.k_stride);
    memcpy(view.v_stride, v->stride, sizeof view.v_stride);
    return view;
}

size_t ra_attention_short_scratch_bytes(int64_t batch, int64_t seq, int64_t n_keys,
                                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                        int threads, int *overflow)
{
    *overflow = 0;
    if (!ra_attention_short_shape(seq, n_keys, n_heads / n_kv_heads)) return 0;
    const int64_t n = batch < SHORT_BATCH ? batch : SHORT_BATCH;
    int64_t lengths[SHORT_BATCH];
    for (int64_t b = 0; b < n; b++) lengths[b] = n_keys;
    const ra_kv_cache view = {.batch = n, .capacity = n_keys, .n_kv_heads = n_kv_heads,
                              .head_dim = head_dim, .dtype = RA_F32, .length = lengths};
    const ra_tensor q = ra_tensor_4d(NULL, RA_F32, n, seq, n_heads, head_dim);
    size_t bytes = 0;
    *overflow = ra_attention_decode_scratch(&view, &q, threads, 0, &bytes) != RA_OK;
    return bytes;
}

void ra_attention_short_run(ra_context *ctx, const ra_attention_args *a, float *scratch)
{
    const ra_tensor *q = a->q;
    const int64_t batch = q->shape[0], n_heads = q->shape[2], seq = q->shape[1];
    ra_attention_mask mask = a->mask; /* attn_mask adds nothing (ra_attention_short) */
    mask.attn = NULL;
    int64_t lengths[SHORT_BATCH], q_start[SHORT_BATCH], k_start[SHORT_BATCH];
    for (int64_t b0 = 0; b0 < batch; b0 += SHORT_BATCH) {
        const int64_t n = batch - b0 < SHORT_BATCH ? batch - b0 : SHORT_BATCH;
        const ra_kv_cache view = rows_view(a, b0, n, lengths, q_start, k_start);
        const ra_tensor qb = batch_rows(q, b0, n), ob = batch_rows(a->out, b0, n);
        ra_attention_decode_run_at(ctx, &view, &ob, &qb, NULL, q_start, k_start,
                                   a->lse ? a->lse + b0 * n_heads * seq : NULL, &mask, scratch);
    }
}
