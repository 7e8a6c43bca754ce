/*
 * flash_backward_bf16_impl.h — flash_backward_impl.h's five GEMMs on the
 * CPU's bf16 units, for q, k and v all in bf16 (included by
 * flash_backward_impl.h where RA_FLASH_BF16 is defined: kernels_avx512bf16.c,
 * and kernels_amx.c with RA_FLASH_AMX too).  The units, their pair layout
 * and the forward's GEMMs reused here are flash_bf16_impl.h's.  As
 * FlashAttention-2's bf16 backward does, each GEMM's float32 operand is
 * rounded to bf16 first (nearest, ties to even: P * mult, dS and dout);
 * everything else (the soft-cap, exp, Delta, dS = P (dP - Delta), the
 * dropout, dQ's, dK's and dV's sums) stays float32.  Per query block (BQ
 * rows, padding and rows past the last zero) and key tile (BK keys):
 *
 *   Qp, dOp [D32 / 2, BQ]  words of q's and of dout rounded: load_rows_pairs
 *   Qr, dOr [BQ / 2, dp]   words (row 2rr's feature, row 2rr + 1's), in
 *                          qr's and dor's place
 *   St  = (K . Qp) scale   scores_blocks_bf16 / scores_amx, as the forward
 *   dPt = V . dOp          the same kernels
 *   Pb, dSb [BK, BQ / 2]   words: P * mult's and dS's rows rounded
 *   dV += Pb . dOr         keys_gemm_bf16 / keys_amx   [BK, dp]
 *   dK += dSb . Qr         the same
 *   dSp [BK / 2, BQ]       words: dS's pairs of keys rounded, in dSt's place
 *   dQt += K^T dSp         values_blocks_bf16 (K in pairs of keys, in
 *                          wide_k's place) / values_amx (Kt [D16, BK],
 *                          pack_keys_transposed_amx)
 *
 * On AMX dK and dV's tiles sum one query block into the stage block and
 * are then added to the partial sums (written on a tile's first block);
 * vdpbf16ps adds to them in registers, as keys_gemm does.  Against the
 * float32 backward on the same bf16 values only these roundings (relative
 * 2^-8 each at most), the flushed subnormals and the order of the sums
 * differ: ra_attention_backward and tests/test_attention_bf16_backward.c
 * state the bounds.  Non-finite k or
 * v reach the same gradients as on the float32 path: the same products
 * are formed (0 times Inf is NaN on both).  A task's result does not depend
 * on the thread that runs it.
 */

#include "half.h"

/* dst[r * stride + d] = src[r][d] rounded to bf16 for rows r < n, d < D
 * (the rows' other features unset): dout's rows, for dOp and dOr.  Scalar
 * (half.h's, which quiets any NaN the caller's dout holds): once per query
 * block, against the block's BK-key tiles of GEMMs. */
static void round_rows_bf16(uint16_t *restrict dst, int64_t stride, const float *const *src,
                            int64_t n, int64_t head_dim)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t d = 0; d < head_dim; d++) dst[r * stride + d] = ra_half_f32_to_bf16(src[r][d]);
}

/* dst[rr, f] = (rows[2rr][f], rows[2rr + 1][f]) for rr < BQ / 2 and f < dp,
 * 0 past D: bf16 rows of D, for dK's and dV's right operand.  dst: [BQ / 2,
 * dp] words */
static void pack_row_pairs(uint32_t *restrict dst, const uint16_t *const *rows, int64_t head_dim,
                           int64_t dp)
{
    for (int64_t rr = 0; rr < BQ / 2; rr++) {
        const uint16_t *lo = rows[2 * rr], *hi = rows[2 * rr + 1];
        uint32_t *o = dst + rr * dp;
        int64_t d = 0;
        for (; d + RA_W <= head_dim; d += RA_W) {
            vh a, c;
            memcpy(&a, lo + d, sizeof a);
            memcpy(&c, hi + d, sizeof c);
            vu w = __builtin_convertvector(a, vu) | __builtin_convertvector(c, vu) << 16;
            memcpy(o + d, &w, sizeof w);
        }
        for (; d < head_dim; d++) o[d] = lo[d] | (uint32_t)hi[d] << 16;
        for (; d < dp; d++) o[d] = 0;
    }
}

/* dst[j, :] = x[j, 0 .. BQ) rounded to bf16, in order, for keys j < nk; 0
 * for keys nk .. nk rounded to 32 (AMX's whole tiles).  x: [BK, BQ];
 * dst: [BK, BQ / 2] words */
static void round_tile_rows(uint32_t *restrict dst, const float *restrict x, int64_t nk)
{
    for (int64_t j = 0; j < ra_round_up(nk, 32); j++)
        for (int64_t r = 0; r < BQ; r += RA_W) {
            vh h = j < nk ? __builtin_convertvector(vbf16_round(vload(x + j * BQ + r)) >> 16, vh)
                          : (vh){0};
            memcpy((uint16_t *)(void *)(dst + j * (BQ / 2)) + r, &h, sizeof h);
        }
}

/* O[j, f] = (first ? 0 : O[j, f]) + sum_rr A[j, rr] . X[rr, f] for keys j
 * in [0, n) (n <= MR) and features f in [0, nv RA_W) (nv <= NR vectors),
 * query pairs rr < pairs.  O rows are dp floats apart, X rows dp words, A
 * rows BQ / 2 words.  Always inlined, as keys_block. */
static inline __attribute__((always_inline)) void
keys_block_bf16(float *restrict o, const uint32_t *restrict a, const uint32_t *restrict x, int n,
                int nv, int64_t pairs, int64_t dp, int first)
{
    vf acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int c = 0; c < NR; c++)
            acc[i][c] = !first && i < n && c < nv ? vload(o + i * dp + c * RA_W) : vsplat(0.0f);
    for (int64_t rr = 0; rr < pairs; rr++) {
        __m512i xv[NR];
        for (int c = 0; c < NR; c++)
            xv[c] = c < nv ? vload_words(x + rr * dp + c * RA_W) : _mm512_setzero_si512();
        for (int i = 0; i < MR; i++) {
            __m512i ab = _mm512_set1_epi32(i < n ? (int)a[i * (BQ / 2) + rr] : 0);
            for (int c = 0; c < NR; c++) acc[i][c] = vdot_bf16(acc[i][c], xv[c], ab);
        }
    }
    for (int i = 0; i < n; i++)
        for (int c = 0; c < nv; c++) vstore(o + i * dp + c * RA_W, acc[i][c]);
}

/* O[j, :] (+)= sum_rr A[j, rr] . X[rr, :] for keys j < nk over the pairs
 * of the block's nq rows: dV from Pb and dOr, dK from dSb and Qr.
 * O: rows of dp floats   A: [BK, BQ / 2]   X: [BQ / 2, dp] (words) */
static void keys_gemm_bf16(float *o, const uint32_t *a, const uint32_t *x, int64_t nk, int64_t nq,
                           int64_t dp, int first)
{
    const int64_t pairs = (nq + 1) / 2;
    for (int64_t j0 = 0; j0 < nk; j0 += MR) {
        int n = nk - j0 < MR ? (int)(nk - j0) : MR;
        for (int64_t f0 = 0; f0 < dp; f0 += NR * RA_W) {
            int nv = (dp - f0) / RA_W < NR ? (int)((dp - f0) / RA_W) : NR;
            float *ob = o + j0 * dp + f0;
            const uint32_t *ab = a + j0 * (BQ / 2);
            if (n == MR && nv == NR)
                keys_block_bf16(ob, ab, x + f0, MR, NR, pairs, dp, first);
            else
                keys_block_bf16(ob, ab, x + f0, n, nv, pairs, dp, first);
        }
    }
}

#if defined(RA_FLASH_AMX)
/* stage[j, f] = sum_r A[j, r] X[r, f] for keys j < nk rounded to 32, f <
 * dp, over all BQ rows: 2 x 2 (or 2 x 1 at a 16-feature tail) output tiles
 * of 16 keys x 16 features.  A: [BK, BQ] bf16 (rows of 0 past nk);
 * X: [BQ / 2, dp] words; stage: [BK, dp] */
static void keys_amx(float *stage, const uint32_t *a, const uint32_t *x, int64_t nk, int64_t dp)
{
    const int64_t row_bytes = dp * 4;
    for (int64_t j0 = 0; j0 < nk; j0 += 32)
        for (int64_t f0 = 0; f0 < dp; f0 += 32) {
            const int two = f0 + 16 < dp;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t r0 = 0; r0 < BQ; r0 += 32) {
                _tile_loadd(4, a + j0 * (BQ / 2) + r0 / 2, BQ * 2);
                _tile_loadd(5, a + (j0 + 16) * (BQ / 2) + r0 / 2, BQ * 2);
                _tile_loadd(6, x + r0 / 2 * dp + f0, row_bytes);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(2, 5, 6);
                if (two) {
                    _tile_loadd(7, x + r0 / 2 * dp + f0 + 16, row_bytes);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, stage + j0 * dp + f0, row_bytes);
            _tile_stored(2, stage + (j0 + 16) * dp + f0, row_bytes);
            if (two) {
                _tile_stored(1, stage + j0 * dp + f0 + 16, row_bytes);
                _tile_stored(3, stage + (j0 + 16) * dp + f0 + 16, row_bytes);
            }
        }
}

/* kt[d, j] = krow[j][d] for d < D16, keys j < nk rounded to 32 (0 past D
 * and nk): pack_values_amx's layout, as 32-bit words (pairs of keys)
 * through tmp [BK / 2, D16] words and W x W in-register transposes (moves
 * only).  kt: [D16, BK] bf16 */
static void pack_keys_transposed_amx(uint16_t *restrict kt, const uint16_t *const *krow,
                                     int64_t nk, int64_t head_dim, uint32_t *restrict tmp)
{
    const int64_t d16 = ra_round_up(head_dim, 16), pairs = ra_round_up(nk, 32) / 2;
    for (int64_t jj = 0; jj < pairs; jj++) {
        const uint16_t *lo = 2 * jj < nk ? krow[2 * jj] : NULL;
        const uint16_t *hi = 2 * jj + 1 < nk ? krow[2 * jj + 1] : NULL;
        uint32_t *dst = tmp + jj * d16;
        int64_t d = 0;
        for (; lo && d + RA_W <= head_dim; d += RA_W) {
            vh a, c = {0};
            memcpy(&a, lo + d, sizeof a);
            if (hi) memcpy(&c, hi + d, sizeof c);
            vu w = __builtin_convertvector(a, vu) | __builtin_convertvector(c, vu) << 16;
            memcpy(dst + d, &w, sizeof w);
        }
        for (; d < d16; d++)
            dst[d] = !lo || d >= head_dim ? 0u : lo[d] | (hi ? (uint32_t)hi[d] << 16 : 0u);
    }
    uint32_t *out = (uint32_t *)(void *)kt;
    for (int64_t jj0 = 0; jj0 < pairs; jj0 += RA_W)
        for (int64_t d0 = 0; d0 < d16; d0 += RA_W) {
            vf x[RA_W];
            for (int i = 0; i < RA_W; i++) memcpy(&x[i], tmp + (jj0 + i) * d16 + d0, sizeof x[i]);
            vtranspose(x);
            for (int k = 0; k < RA_W; k++)
                memcpy(out + (d0 + k) * (BK / 2) + jj0, &x[k], sizeof x[k]);
        }
}

/* O[j, :] = (first ? 0 : O[j, :]) + stage[j, :] for keys j < nk.
 * O, stage: rows of dp floats */
static void add_stage(float *o, const float *stage, int64_t nk, int64_t dp, int first)
{
    for (int64_t i = 0; i < nk * dp; i += RA_W)
        vstore(o + i, first ? vload(stage + i) : vload(o + i) + vload(stage + i));
}
#endif

/* The block's query rows for the bf16 GEMMs: Qp and dOp (dout rounded
 * through dot's place, [BQ, D32] bf16), Qr and dOr, from q's bf16 rows and
 * dout's; zeros for rows past nq and padding queries. */
static void load_query_block_bf16(const backward_tile *t, const ra_flash_backward_job *job,
                                  int64_t b, int64_t h, int64_t q0, int64_t nq)
{
    const ra_attention_backward_args *a = job->args;
    const int64_t head_dim = a->fwd.q->shape[3], d32 = ra_round_up(head_dim, 32);
    uint16_t *do16 = (uint16_t *)(void *)t->dot;
    const uint16_t *zero = (const uint16_t *)(const void *)t->zero;
    const uint16_t *q16[BQ], *dout16[BQ];
    const float *dout[BQ];
    int64_t n = 0; /* dout's real rows, rounded into do16's first rows */
    for (int64_t r = 0; r < BQ; r++) {
        int real = r < nq && ra_mask_query_real(&a->fwd.mask, b, q0 + r);
        q16[r] = real ? ra_row_any(a->fwd.q, b, q0 + r, h) : zero;
        if (real) dout[n] = ra_row(a->dout, b, q0 + r, h);
        dout16[r] = real ? do16 + n++ * d32 : zero;
    }
    round_rows_bf16(do16, d32, dout, n, head_dim);
    for (int64_t r0 = 0; r0 < BQ; r0 += RA_W) {
        load_rows_pairs(t->qp, BQ, r0, q16 + r0, head_dim);
        load_rows_pairs(t->dop, BQ, r0, dout16 + r0, head_dim);
    }
    pack_row_pairs((uint32_t *)(void *)t->qr, q16, head_dim, job->dp);
    pack_row_pairs((uint32_t *)(void *)t->dor, dout16, head_dim, job->dp);
}

/* St = (K . Qp) scale into pt, then dPt = V . dOp into dst, for the tile's
 * nk keys; k16, v16: their bf16 rows (zeros for padding keys). */
static void scores_tiles_bf16(const backward_tile *t, const uint16_t *const *k16,
                              const uint16_t *const *v16, int64_t nk, int64_t head_dim,
                              float scale, int amx)
{
#if defined(RA_FLASH_AMX)
    if (amx) {
        uint16_t *kp = (uint16_t *)(void *)t->wide_k, *vp = (uint16_t *)(void *)t->wide_v;
        pack_keys_amx(kp, k16, nk, head_dim);
        scores_amx(t->pt, kp, t->qp, nk, BQ, head_dim);
        scale_scores(t->pt, nk, BQ, scale);
        pack_keys_amx(vp, v16, nk, head_dim);
        scores_amx(t->dst, vp, t->dop, nk, BQ, head_dim);
        return;
    }
#endif
    (void)amx;
    for (int64_t j0 = 0; j0 < nk; j0 += MR) {
        int n = nk - j0 < MR ? (int)(nk - j0) : MR;
        scores_blocks_bf16(t->pt + j0 * BQ, t->qp, k16 + j0, n, BQ, head_dim, scale);
        scores_blocks_bf16(t->dst + j0 * BQ, t->dop, v16 + j0, n, BQ, head_dim, 1.0f);
    }
}

/* dV_k (+)= Pb . dOr, Pd rounded from pdt into pb. */
static void dv_tile_bf16(const backward_tile *t, float *dv, int64_t nk, int64_t nq, int64_t dp,
                         int first, int amx)
{
    round_tile_rows(t->pb, t->pdt, nk);
#if defined(RA_FLASH_AMX)
    if (amx) {
        keys_amx(t->stage, t->pb, (const uint32_t *)(const void *)t->dor, nk, dp);
        add_stage(dv, t->stage, nk, dp, first);
        return;
    }
#endif
    (void)amx;
    keys_gemm_bf16(dv, t->pb, (const uint32_t *)(const void *)t->dor, nk, nq, dp, first);
}

/* dK_k (+)= dSb . Qr and dQt (+)= K^T dSp (dQt zeroed when first_q), dS
 * rounded from dst (into dsb, then into dst's place in pairs of keys). */
static void dq_dk_tile_bf16(const backward_tile *t, const uint16_t *const *k16, float *dk,
                            int64_t nk, int64_t nq, int64_t head_dim, int64_t dp, int first,
                            int first_q, int amx)
{
    round_tile_rows(t->dsb, t->dst, nk);
    pack_probability_pairs(t->dst, nk, BQ);
    const uint32_t *dsp = (const uint32_t *)(const void *)t->dst;
#if defined(RA_FLASH_AMX)
    if (amx) {
        keys_amx(t->stage, t->dsb, (const uint32_t *)(const void *)t->qr, nk, dp);
        add_stage(dk, t->stage, nk, dp, first);
        /* the pairs past nk up to the last 32-key step read as zeros */
        memset(t->dst + (nk + 1) / 2 * BQ, 0,
               (size_t)((ra_round_up(nk, 32) / 2 - (nk + 1) / 2) * BQ) * sizeof(float));
        uint16_t *kt = (uint16_t *)(void *)t->wide_k;
        pack_keys_transposed_amx(kt, k16, nk, head_dim, (uint32_t *)(void *)t->stage);
        if (first_q) memset(t->dqt, 0, (size_t)(ra_round_up(head_dim, 16) * BQ) * sizeof(float));
        values_amx(t->dqt, kt, dsp, nk, BQ, head_dim);
        return;
    }
#endif
    (void)amx;
    keys_gemm_bf16(dk, t->dsb, (const uint32_t *)(const void *)t->qr, nk, nq, dp, first);
    uint32_t *kp = (uint32_t *)(void *)t->wide_k;
    pack_value_pairs(kp, k16, nk, head_dim);
    values_blocks_bf16(t->dqt, dsp, kp, (nk + 1) / 2, BQ, head_dim, t->ones, first_q);
}
