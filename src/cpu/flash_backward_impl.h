/*
 * flash_backward_impl.h — the flash-attention backward's task, written once
 * against simd.h and compiled per ISA (kernels_*.c) after flash_impl.h,
 * whose kernels and tile helpers it reuses (scores_block, values_block,
 * load_rows_transposed, store_rows_transposed, tile_rows; MR x NR register
 * blocks).  FlashAttention-2's backward without atomics: a task is one
 * (b, query head h), BQ = BK query rows at a time.  Each step quotes the
 * forward line it differentiates:
 *
 *   for each query block (q0 .. q1):
 *     Qt = (q scale)^T, dOt = dout^T  [D, BQ];  Q, dO rows [BQ, dp]
 *     Delta = rowsum(dout * out)                                 [BQ]
 *     for each key tile (k0 .. k0 + nk), k0 < q1:
 *       St    = K Qt             [BK, BQ]  scores_block   S = q k^T scale
 *       P     = exp(St - lse), masked                    P = softmax(S + mask)
 *       Pd    = P * mult                                 Pd = attn_dropout(P)
 *       dV_k += Pd^T dO          [BK, dp] keys_gemm      out = Pd v
 *       dPt   = V dOt            [BK, BQ]  scores_block     (dPd = dout v^T)
 *       dSt   = Pd * dPt - P * Delta                       (dS = P * (dP - Delta),
 *                                                           dP = dPd * mult)
 *       dQt  += K^T dSt          [D, BQ]   values_block   S = q k^T scale
 *       dK_k += dSt^T Q          [BK, dp] keys_gemm      S = q k^T scale
 *     dq = dQt^T scale
 *
 * The tiles are transposed as in the forward (rows of queries across the
 * vector lanes), so K and V rows are broadcast straight from the caller's
 * tensors; the dK and dV GEMMs instead run features across the lanes
 * against row-major copies of Q and dO.  Delta = rowsum(dout * out) equals
 * rowsum(P * dP), dropout or not, since out = Pd v.  dK_k and dV_k are this
 * head's partial sums, rows of dp floats in the job's [B, H, S, dp]
 * buffers; key tile k0 is first met by the query block q0 = k0 (BQ = BK),
 * which writes it rather than adding to it.  A block of a longer sequence
 * (ra_attention_block_backward: query row i is key row i + q_shift, keys
 * of any length) zeroes its partial buffers first and adds every tile, and
 * adds its dq to the caller's.  attention_flash_backward.c sums the heads
 * of each group and scales dk.  A 16-bit q is widened a
 * block of rows at a time; with q, k and v all bf16 the kernels compiled
 * with RA_FLASH_BF16 run the five GEMMs on the bf16 units instead
 * (flash_backward_bf16_impl.h).  A task's result does not depend on the
 * thread that runs it.
 */
#include <math.h>
#include <string.h>

#include "cpu/attention_job.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"

enum { BQ = RA_FLASH_BK }; /* query rows per block: as many as keys per tile */

/* Per-thread scratch, carved as ra_flash_backward_per_thread counts it. */
typedef struct backward_tile {
    float *qt, *dot, *dqt;            /* [D, BQ] */
    float *qr, *dor;                  /* [BQ, dp] */
    float *pt, *pdt, *dst;            /* [BK, BQ]: P, P * mult, dP then dS */
    float *lse, *delta, *ones;        /* [BQ] */
    float *mult;                      /* [BK] */
    float *zero;                      /* [dp]: the padding query rows' */
    const float **krow, **vrow;       /* [BK] each */
    float *wide_k, *wide_v;           /* [BK, dp] each */
    float *slope;                     /* [BK, BQ]: 1 - tanh^2(s / c), the cap's slope */
    float *lo, *hi;                   /* [BQ]: as flash_tile's */
    int64_t *first;                   /* [BQ]: each row's first key */
    float *padkey;                    /* [BK] */
    uint32_t *qp, *dop;               /* [D32 / 2, BQ]: the bf16 units' (words) */
    uint32_t *pb, *dsb;               /* [BK, BQ / 2]: the bf16 units' (words) */
    float *stage;                     /* [BK, dp]: AMX's dK or dV block */
    int64_t *last;                    /* [BQ]: each row's last key */
    float *am;                        /* [BK, BQ]: attn_mask's tile (am_set) */
    int attn;                         /* the job has an attn_mask */
    int am_set;                       /* am holds the current tile's (not all
                                         0 where seen) */
} backward_tile;

static backward_tile carve_backward(const ra_flash_backward_job *job, int thread,
                                    int64_t head_dim)
{
    const int64_t dp = job->dp, d32 = ra_round_up(head_dim, 32);
    backward_tile t;
    t.qt = job->scratch + thread * job->per_thread;
    t.dot = t.qt + dp * BQ;
    t.dqt = t.dot + dp * BQ;
    t.qr = t.dqt + dp * BQ;
    t.dor = t.qr + BQ * dp;
    t.pt = t.dor + BQ * dp;
    t.pdt = t.pt + BK * BQ;
    t.dst = t.pdt + BK * BQ;
    t.lse = t.dst + BK * BQ;
    t.delta = t.lse + BQ;
    t.ones = t.delta + BQ;
    t.mult = t.ones + BQ;
    t.zero = t.mult + BK;
    t.krow = (const float **)(void *)(t.zero + dp);
    t.vrow = (const float **)(void *)(t.zero + dp + 2 * BK);
    t.wide_k = t.zero + dp + 4 * BK;
    t.wide_v = t.wide_k + BK * dp;
    t.slope = t.wide_v + BK * dp;
    t.lo = t.slope + BK * BQ;
    t.hi = t.lo + BQ;
    t.first = (int64_t *)(void *)(t.hi + BQ);
    t.padkey = t.hi + 3 * BQ;
    t.qp = (uint32_t *)(void *)(t.padkey + BK);
    t.dop = t.qp + d32 / 2 * BQ;
    t.pb = t.dop + d32 / 2 * BQ;
    t.dsb = t.pb + BK * BQ / 2;
    t.stage = (float *)(void *)(t.dsb + BK * BQ / 2);
    t.last = (int64_t *)(void *)(t.stage + BK * dp);
    t.am = t.stage + BK * dp + 2 * BQ;
    t.attn = job->args->fwd.mask.attn != NULL;
    t.am_set = 0;
    return t;
}

/* O[j, f] = (first ? 0 : O[j, f]) + sum_{r < nq} Pt[j, r] X[r, f] for keys
 * j in [0, n) (n <= MR) and features f in [0, nv RA_W) (nv <= NR vectors).
 * O and X rows are dp floats apart, Pt rows BQ.  Always inlined, so the full
 * block (n == MR, nv == NR) compiles without the tail's guards. */
static inline __attribute__((always_inline)) void
keys_block(float *restrict o, const float *restrict pt, const float *restrict x, int n, int nv,
           int64_t nq, int64_t dp, int first)
{
    vf acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int c = 0; c < NR; c++)
            acc[i][c] = !first && i < n && c < nv ? vload(o + i * dp + c * RA_W) : vsplat(0.0f);
    for (int64_t r = 0; r < nq; r++) {
        vf xv[NR];
        for (int c = 0; c < NR; c++) xv[c] = c < nv ? vload(x + r * dp + c * RA_W) : vsplat(0.0f);
        for (int i = 0; i < MR; i++) {
            vf pb = vsplat(i < n ? pt[i * BQ + r] : 0.0f);
            for (int c = 0; c < NR; c++) acc[i][c] += pb * xv[c];
        }
    }
    for (int i = 0; i < n; i++)
        for (int c = 0; c < nv; c++) vstore(o + i * dp + c * RA_W, acc[i][c]);
}

/* O[j, :] (+)= sum_{r < nq} Pt[j, r] X[r, :] for keys j in [0, nk): dV from
 * Pd and dO, dK from dS and Q.   O, X: rows of dp   Pt: [BK, BQ] */
static void keys_gemm(float *o, const float *pt, const float *x, int64_t nk, int64_t nq,
                      int64_t dp, int first)
{
    for (int64_t j0 = 0; j0 < nk; j0 += MR) {
        int n = nk - j0 < MR ? (int)(nk - j0) : MR;
        for (int64_t f0 = 0; f0 < dp; f0 += NR * RA_W) {
            int nv = (dp - f0) / RA_W < NR ? (int)((dp - f0) / RA_W) : NR;
            float *ob = o + j0 * dp + f0;
            if (n == MR && nv == NR)
                keys_block(ob, pt + j0 * BQ, x + f0, MR, NR, nq, dp, first);
            else
                keys_block(ob, pt + j0 * BQ, x + f0, n, nv, nq, dp, first);
        }
    }
}

/* P = exp(St + attn_mask - lse) in place, St soft-capped first (its slopes
 * kept) and keys outside a row's lo .. hi, or padding, or that attn_mask
 * masks, zeroed (masked tiles only); padding rows have lse = +inf and so
 * P = 0. */
static void probs_tile(const backward_tile *t, int64_t nk, int masked, int padding,
                       float softcap)
{
    const vf cap = vsplat(softcap), inv_cap = vsplat(1.0f / softcap);
    const int divide = !(1.0f / softcap >= FLT_MIN); /* as softmax_tile */
    const float *am = t->am_set ? t->am : NULL;
    for (int64_t r0 = 0; r0 < BQ; r0 += RA_W) {
        vf lse = vload(t->lse + r0), lo = vload(t->lo + r0), hi = vload(t->hi + r0);
        for (int64_t j = 0; j < nk; j++) {
            vf s = vload(t->pt + j * BQ + r0);
            if (softcap > 0) {
                vf th = vtanh(divide ? s / cap : s * inv_cap);
                vstore(t->slope + j * BQ + r0, vsplat(1.0f) - th * th);
                s = cap * th;
            }
            if (am) s += vload(am + j * BQ + r0);
            vf p = vexp(s - lse);
            if (t->attn) p = vselect(s == vsplat(-INFINITY), vsplat(0.0f), p);
            if (masked) {
                vf at = vsplat((float)j);
                p = vselect((at > hi) | (at < lo), vsplat(0.0f), p);
                if (padding && t->padkey[j]) p = vsplat(0.0f);
            }
            vstore(t->pt + j * BQ + r0, p);
        }
    }
}

/* dS = Pd * dP' - P * Delta in place of dP' = dout v^T, which is
 * P * (dP - Delta) with dP = dP' * mult (pdt == pt without dropout); then
 * through the soft-cap, times its slope. */
static void dscores_tile(const backward_tile *t, int64_t nk, int softcap)
{
    for (int64_t r0 = 0; r0 < BQ; r0 += RA_W) {
        vf delta = vload(t->delta + r0);
        for (int64_t j = 0; j < nk; j++) {
            int64_t at = j * BQ + r0;
            vf ds = vload(t->pdt + at) * vload(t->dst + at) - vload(t->pt + at) * delta;
            if (softcap) ds *= vload(t->slope + at);
            vstore(t->dst + at, ds);
        }
    }
}

/* Asks for the q, dout and out rows [q0, q0 + nq) of (b, h) to be brought
 * into the cache: the next query block's, while this one is computed (they
 * are 64 rows H * D apart, which the hardware prefetchers do not follow). */
static void prefetch_query_block(const ra_attention_backward_args *a, int64_t b, int64_t h,
                                 int64_t q0, int64_t nq)
{
    prefetch_rows(a->fwd.q, b, q0, nq, h); /* q may be 16-bit */
    prefetch_rows(a->dout, b, q0, nq, h);
    prefetch_rows(a->fwd.out, b, q0, nq, h);
}

/* Delta, lse, first and last keys for query rows [q0, q0 + nq) (lp: the
 * row's leading padding); rows past nq and padding queries have lse +inf
 * (P = 0 there) and first key -1. */
static void load_query_stats(const backward_tile *t, const ra_flash_backward_job *job, int64_t b,
                             int64_t h, int64_t q0, int64_t nq, int64_t lp)
{
    const ra_attention_backward_args *a = job->args;
    const int64_t seq = a->fwd.q->shape[1], head_dim = a->fwd.q->shape[3];
    const int64_t shift = a->fwd.q_shift;
    const float *lse = a->lse + (b * a->fwd.q->shape[2] + h) * seq;
    for (int64_t r = 0; r < BQ; r++) {
        t->delta[r] = 0.0f;
        t->lse[r] = INFINITY;
        t->first[r] = -1;
        t->last[r] = -1;
        if (r >= nq || !ra_mask_query_real(&a->fwd.mask, b, q0 + r)) continue; /* P = 0 */
        const float *o = ra_row(a->fwd.out, b, q0 + r, h), *dor = ra_row(a->dout, b, q0 + r, h);
        vf acc = vsplat(0.0f); /* Delta = rowsum(dout * out), RA_W partial sums */
        int64_t d = 0;
        for (; d + RA_W <= head_dim; d += RA_W) acc += vload(dor + d) * vload(o + d);
        float delta = vreduce_add(acc);
        for (; d < head_dim; d++) delta += dor[d] * o[d];
        t->delta[r] = delta;
        t->lse[r] = lse[q0 + r];
        t->first[r] = ra_mask_first_key(&a->fwd.mask, shift + q0 + r, lp);
        t->last[r] = ra_mask_last_key(&a->fwd.mask, shift + q0 + r, lp, a->fwd.k->shape[1]);
    }
}

/* attn_mask's tile (t->am) for query rows q0 .. q0 + nq - 1 of (b, h) and
 * keys k0 .. k0 + nk - 1: -Inf where a row does not see a key (lo .. hi,
 * padding), 0 on rows past nq and padding queries (P = 0 there anyway).
 * Returns RA_TILE_EMPTY where no row sees a key (the tile adds nothing),
 * RA_TILE_WHOLE where attn_mask is exactly 0 at every key a row sees (t->am
 * is not written), RA_TILE_BUILT otherwise; the first two cost reading each
 * row's values into a row of BK (the forward's quick check) alone. */
static int backward_tile_attn(const backward_tile *t, const ra_attention_mask *mask, int64_t b,
                              int64_t h, int64_t q0, int64_t nq, int64_t k0, int64_t nk)
{
    int any = 0, whole = 1;
    float line[BK];
    for (int64_t r = 0; r < nq && (!any || whole); r++)
        if (t->first[r] >= 0)
            ra_mask_attn_row_scan(mask, b, h, q0 + r, k0, nk, t->lo[r], t->hi[r], t->padkey,
                                  line, &any, &whole);
    if (!any) return RA_TILE_EMPTY;
    if (whole) return RA_TILE_WHOLE;
    for (int64_t r = 0; r < BQ; r++) {
        float *col = t->am + r; /* [j * BQ] */
        if (r >= nq || t->first[r] < 0) {
            for (int64_t j = 0; j < nk; j++) col[j * BQ] = 0.0f;
            continue;
        }
        const int64_t lo = t->lo[r] < 0 ? 0 : (int64_t)t->lo[r];
        const int64_t hi = t->hi[r] > nk - 1 ? nk - 1 : (int64_t)t->hi[r];
        for (int64_t j = 0; j < nk; j++) col[j * BQ] = -INFINITY;
        if (lo > hi) continue;
        ra_mask_attn_row(mask, b, h, q0 + r, k0 + lo, hi - lo + 1, col + lo * BQ, BQ);
        for (int64_t j = lo; j <= hi; j++)
            if (t->padkey[j]) col[j * BQ] = -INFINITY;
    }
    return RA_TILE_BUILT;
}

/* Q and dO rows, then Qt and dOt from them, for query rows [q0, q0 + nq);
 * rows past nq and padding queries are zero.  A 16-bit q is widened
 * (exactly) into Q's rows. */
static void load_query_block(const backward_tile *t, const ra_flash_backward_job *job, int64_t b,
                             int64_t h, int64_t q0, int64_t nq, float scale)
{
    const ra_attention_backward_args *a = job->args;
    const ra_tensor *q = a->fwd.q, *dout = a->dout;
    const int64_t head_dim = q->shape[3], dp = job->dp;
    for (int64_t r = 0; r < BQ; r++) {
        float *qr = t->qr + r * dp, *dor = t->dor + r * dp;
        memset(qr, 0, (size_t)dp * sizeof(float));
        memset(dor, 0, (size_t)dp * sizeof(float));
        if (r >= nq || !ra_mask_query_real(&a->fwd.mask, b, q0 + r)) continue;
        if (q->dtype == RA_F32)
            memcpy(qr, ra_row(q, b, q0 + r, h), (size_t)head_dim * sizeof(float));
        else
            widen_row(qr, ra_row_any(q, b, q0 + r, h), q->dtype, head_dim);
        memcpy(dor, ra_row(dout, b, q0 + r, h), (size_t)head_dim * sizeof(float));
    }
    for (int64_t r0 = 0; r0 < BQ; r0 += RA_W) {
        const float *src_q[RA_W], *src_do[RA_W];
        for (int i = 0; i < RA_W; i++) {
            src_q[i] = t->qr + (r0 + i) * dp;
            src_do[i] = t->dor + (r0 + i) * dp;
        }
        load_rows_transposed(t->qt, BQ, r0, src_q, head_dim, scale);
        load_rows_transposed(t->dot, BQ, r0, src_do, head_dim, 1.0f);
    }
}

#if defined(RA_FLASH_BF16)
#include "cpu/flash_backward_bf16_impl.h"
#endif

static void flash_backward_task(void *arg, int64_t task, int thread)
{
    const ra_flash_backward_job *job = arg;
    const ra_attention_backward_args *a = job->args;
    const ra_attention_args *f = &a->fwd;
    const ra_attention_mask *mask = &f->mask;
    const ra_tensor *q = f->q, *k = f->k, *v = f->v;
    const int64_t seq = q->shape[1], n_heads = q->shape[2], head_dim = q->shape[3];
    /* query row i is key row i + shift (ra_attention_args.q_shift: 0 but
     * in ra_attention_block_backward, where k may have another length) */
    const int64_t n_keys = k->shape[1], shift = f->q_shift;
    const int64_t b = task / n_heads, h = task % n_heads, g = h / (n_heads / k->shape[2]);
    /* the chunks' origin as a key row (flash_task's) */
    const int64_t dp = job->dp, lp = ra_mask_leading_padding(mask, b) - f->k_start;
    const float scale = (float)mask->scale;
    /* tile k0 is first met by the query block q0 = k0 (written, not added
     * to) only causal, with Sq = Sk and no tile skipped: else every tile adds
     * to partial buffers zeroed first */
    const int add_only = a->accumulate || shift != 0 || mask->non_causal || mask->attn;
    float *dk_head = job->partial_k + (b * n_heads + h) * n_keys * dp;
    float *dv_head = job->partial_v + (b * n_heads + h) * n_keys * dp;
    double dsink = 0; /* -sum over rows of p_sink Delta */
    backward_tile t = carve_backward(job, thread, head_dim);
    if (!f->dropout) t.pdt = t.pt;
#if defined(RA_FLASH_BF16)
    /* q, k and v in bf16: the GEMMs on the bf16 units, AMX's where the job
     * has them (flash_backward_bf16_impl.h) */
    const int bf16 = q->dtype == RA_BF16 && k->dtype == RA_BF16 && v->dtype == RA_BF16;
    const uint16_t *k16[BK], *v16[BK];
#else
    const int bf16 = 0;
#endif
#if defined(RA_FLASH_AMX)
    const int amx = bf16 && job->amx;
    if (amx) amx_begin();
#elif defined(RA_FLASH_BF16)
    const int amx = 0;
#endif
    memset(t.zero, 0, (size_t)dp * sizeof(float));
    for (int64_t r = 0; r < BQ; r++) t.ones[r] = 1.0f;
    if (add_only) { /* tiles are added to, never first written */
        memset(dk_head, 0, (size_t)(n_keys * dp) * sizeof(float));
        memset(dv_head, 0, (size_t)(n_keys * dp) * sizeof(float));
    }

    for (int64_t q0 = 0; q0 < seq; q0 += BQ) {
        const int64_t nq = seq - q0 < BQ ? seq - q0 : BQ, q1 = q0 + nq;
        load_query_stats(&t, job, b, h, q0, nq, lp);
#if defined(RA_FLASH_BF16)
        if (bf16) load_query_block_bf16(&t, job, b, h, q0, nq);
#endif
        if (!bf16) load_query_block(&t, job, b, h, q0, nq, scale);
        if (q1 < seq) prefetch_query_block(a, b, h, q1, seq - q1 < BQ ? seq - q1 : BQ);
        /* The tiles some row sees: from the one that holds the smallest
         * first key (tiles stay at multiples of BK, so that tile k0 is
         * still first met by the block q0 = k0) to the largest last key
         * k_end - 1; first_max and last_min as the forward's. */
        int64_t k_first = n_keys, k_end = 0, first_max = 0, last_min = n_keys;
        for (int64_t r = 0; r < nq; r++)
            if (t.first[r] >= 0) {
                first_max = t.first[r] > first_max ? t.first[r] : first_max;
                last_min = t.last[r] < last_min ? t.last[r] : last_min;
                if (t.first[r] > t.last[r]) continue; /* it sees no key */
                k_first = t.first[r] < k_first ? t.first[r] : k_first;
                k_end = t.last[r] + 1 > k_end ? t.last[r] + 1 : k_end;
            }
        if (!add_only) { /* tiles q0 .. q1 - 1 first met here: written, padding or not */
            k_first = q0 < k_first ? q0 : k_first;
            k_end = q1 > k_end ? q1 : k_end; /* (q1 <= Sq = Sk) */
        }
        if (mask->sinks)
            for (int64_t r = 0; r < nq; r++)
                if (t.first[r] >= 0)
                    dsink -= exp((double)mask->sinks[h] - t.lse[r]) * t.delta[r];
        int started = 0; /* dQt holds a tile's sum */
        for (int64_t k0 = k_first / BK * BK; k0 < k_end; k0 += BK) {
            const int64_t nk = k_end - k0 < BK ? k_end - k0 : BK;
            /* the first query block that sees this tile */
            const int first = !add_only && k0 == q0;
            int padding = 0; /* padding keys read as zeros */
            for (int64_t j = 0; j < nk; j++) {
                t.padkey[j] = !ra_mask_real(mask, b, k0 + j);
                padding |= t.padkey[j] != 0;
            }
            /* the causal bounds, window and padding hide some keys from some rows */
            const int bounded = first_max > k0 || last_min < k0 + nk - 1 || padding;
            for (int64_t r = 0; (bounded || t.attn) && r < BQ; r++)
                row_bounds(&t.lo[r], &t.hi[r], t.first[r], t.last[r], k0);
            const int attn = t.attn ? backward_tile_attn(&t, mask, b, h, q0, nq, k0, nk)
                                    : RA_TILE_WHOLE;
            if (attn == RA_TILE_EMPTY) continue; /* attn_mask leaves it empty: adds nothing */
            t.am_set = attn == RA_TILE_BUILT; /* else unmasked, where not bounded */
            const int masked = bounded || t.am_set;
            if (!bf16) {
                tile_rows(t.krow, k, b, g, k0, nk, t.wide_k, head_dim);
                tile_rows(t.vrow, v, b, g, k0, nk, t.wide_v, head_dim);
            }
            for (int64_t j = 0; j < nk; j++) {
                if (t.padkey[j]) t.krow[j] = t.vrow[j] = t.zero;
#if defined(RA_FLASH_BF16)
                if (bf16) {
                    const uint16_t *zero = (const uint16_t *)(const void *)t.zero;
                    k16[j] = t.padkey[j] ? zero : ra_row_any(k, b, k0 + j, g);
                    v16[j] = t.padkey[j] ? zero : ra_row_any(v, b, k0 + j, g);
                }
#endif
            }

#if defined(RA_FLASH_BF16)
            if (bf16) /* St = (K . Qp) scale, dPt = V . dOp */
                scores_tiles_bf16(&t, k16, v16, nk, head_dim, scale, amx);
#endif
            for (int64_t j0 = 0; !bf16 && j0 < nk; j0 += MR) /* St = K Qt */
                scores_blocks(t.pt + j0 * BQ, BQ, t.qt, BQ, t.krow + j0,
                              nk - j0 < MR ? (int)(nk - j0) : MR, 0, BQ, head_dim, NULL);
            probs_tile(&t, nk, masked, padding, mask->softcap);
            if (f->dropout) /* Pd = P * mult, the forward's multipliers */
                for (int64_t r = 0; r < BQ; r++) {
                    if (r < nq)
                        ra_dropout_row(&f->drop,
                                       (uint64_t)((b * n_heads + h) * mask->seq + mask->q_origin +
                                                  q0 + r) * (uint64_t)mask->n_keys +
                                           (uint64_t)(mask->k_origin + k0),
                                       nk, t.mult);
                    else
                        memset(t.mult, 0, (size_t)nk * sizeof(float));
                    for (int64_t j = 0; j < nk; j++) t.pdt[j * BQ + r] = t.pt[j * BQ + r] * t.mult[j];
                }
            const int first_q = !started; /* the block's first tile */
            started = 1;
#if defined(RA_FLASH_BF16)
            if (bf16) {
                dv_tile_bf16(&t, dv_head + k0 * dp, nk, nq, dp, first, amx); /* dV += Pb . dOr */
                dscores_tile(&t, nk, mask->softcap > 0);
                /* dK += dSb . Qr, dQt += K^T dSp */
                dq_dk_tile_bf16(&t, k16, dk_head + k0 * dp, nk, nq, head_dim, dp, first, first_q,
                                amx);
                continue;
            }
#endif
            keys_gemm(dv_head + k0 * dp, t.pdt, t.dor, nk, nq, dp, first); /* dV += Pd^T dO */

            for (int64_t j0 = 0; j0 < nk; j0 += MR) /* dPt = V dOt */
                scores_blocks(t.dst + j0 * BQ, BQ, t.dot, BQ, t.vrow + j0,
                              nk - j0 < MR ? (int)(nk - j0) : MR, 0, BQ, head_dim, NULL);
            dscores_tile(&t, nk, mask->softcap > 0);
            /* dQt += K^T dSt */
            values_blocks(t.dqt, t.dst, t.krow, head_dim, nk, BQ, t.ones, first_q);
            keys_gemm(dk_head + k0 * dp, t.dst, t.qr, nk, nq, dp, first); /* dK += dS^T Q */
        }
        for (int64_t r = 0; !started && r < nq; r++) /* no key seen: dq 0 (or adds 0) */
            if (!a->accumulate)
                memset(ra_row(a->dq, b, q0 + r, h), 0, (size_t)head_dim * sizeof(float));
        for (int64_t r0 = 0; started && r0 < BQ; r0 += RA_W) { /* dq = dQt^T scale */
            float *dst[RA_W], mul[RA_W];
            for (int i = 0; i < RA_W; i++) {
                dst[i] = r0 + i < nq ? ra_row(a->dq, b, q0 + r0 + i, h) : NULL;
                mul[i] = scale;
                if (dst[i] && t.first[r0 + i] < 0) { /* a padding query: zeros (none added) */
                    if (!a->accumulate) memset(dst[i], 0, (size_t)head_dim * sizeof(float));
                    dst[i] = NULL;
                }
            }
            if (!a->accumulate) {
                store_rows_transposed(dst, t.dqt, BQ, r0, head_dim, mul);
                continue;
            }
            float *rows[RA_W]; /* dq += dQt^T scale, through Q's rows (used up) */
            for (int i = 0; i < RA_W; i++) rows[i] = dst[i] ? t.qr + (r0 + i) * dp : NULL;
            store_rows_transposed(rows, t.dqt, BQ, r0, head_dim, mul);
            for (int i = 0; i < RA_W; i++)
                for (int64_t d = 0; dst[i] && d < head_dim; d++) dst[i][d] += rows[i][d];
        }
    }
    job->partial_sink[b * n_heads + h] = (float)dsink;
#if defined(RA_FLASH_AMX)
    if (amx) _tile_release();
#endif
}
