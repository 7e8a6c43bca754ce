/*
 * flash_bf16_impl.h — flash_impl.h's two GEMMs on the CPU's bf16 units, for
 * q, k and v all in bf16 (included by flash_impl.h where RA_FLASH_BF16 is
 * defined: kernels_avx512bf16.c, and kernels_amx.c with RA_FLASH_AMX too).
 * Both units add products of bf16 pairs (exact: 8-bit significands) to
 * float32 sums, round to nearest even, bf16 subnormals read as zero and
 * subnormal sums flushed to zero:
 *
 *   AVX512-BF16 vdpbf16ps: 16 lanes += 2 products each (2 FMAs' products
 *     per instruction; on Sapphire Rapids half an FMA's rate, so that it
 *     pays on Zen 4/5, not there: docs/DESIGN.md);
 *   AMX-BF16 tdpbf16ps: a 16 x 16 float32 tile += a 16 x 32 bf16 tile times
 *     a 32 x 16 one (512 products per cycle on Sapphire Rapids).
 *
 * The tile is flash_impl.h's, with pairs of bf16 held in 32-bit words, the
 * even-indexed value in the low half (the "VNNI" layout both units read):
 *
 *   Qp [D32 / 2, rows]     Qp[p, r] = (q_r[2p], q_r[2p + 1]), 0 past D
 *                          (D32: D rounded to 32; in qrot's place, unused
 *                          without RoPE; q is not scaled)
 *   S = (K . Qp) * scale   St [BK, rows]: the dot over feature pairs; the
 *                          scale applied to the float32 sums, not rounded
 *                          into q.  vdpbf16ps reads K in place (a row's pair
 *                          p is its word p); AMX reads K packed [BK, D32]
 *                          (in wide's place), 0 past D and for padding keys
 *   softmax: flash_impl.h's, in float32 (l sums the float32 P)
 *   Pp [BK / 2, rows]      Pp[jj, r] = (P[2jj, r], P[2jj + 1, r]) rounded to
 *                          bf16 (as FlashAttention does), over St's rows
 *   O = alpha O + V^T Pp   Ot [D, rows], the dot over key pairs: vdpbf16ps
 *                          reads V packed in pairs of keys, Vp [BK / 2, D]
 *                          (wide's place); AMX reads V transposed, Vt [D16,
 *                          BK] (D16: D rounded to 16; Ot has D16 rows)
 *
 * Against the float32 path on the same bf16 inputs, only P's rounding
 * (relative 2^-8 per probability), the flushed subnormals and the order of
 * the sums differ: the bound is in include/ropeattn.h (ra_attention) and
 * docs/DESIGN.md.  A masked tile whose values hold an Inf or a NaN takes
 * flash_impl.h's values_seen on the widened values and the float32 P, so
 * that they reach exactly the rows that read them, as on the float32 path.
 * A task's result does not depend on the thread that runs it.
 */
#include "cpu/simd_half.h"

/* 32-bit word w of a bf16 row (values 2w and 2w + 1). */
static inline uint32_t bf16_word(const uint16_t *row, int64_t w)
{
    uint32_t x;
    memcpy(&x, row + 2 * w, sizeof x);
    return x;
}

/* The word holding row[d] alone (an odd D's last feature, its partner 0). */
static inline uint32_t bf16_single(const uint16_t *row, int64_t d) { return row[d]; }

/* acc + the pairwise products of a and b's words. */
static inline vf vdot_bf16(vf acc, __m512i a, __m512i b)
{
    return (vf)_mm512_dpbf16_ps((__m512)acc, (__m512bh)a, (__m512bh)b);
}

static inline __m512i vload_words(const uint32_t *p) { return _mm512_loadu_si512(p); }

/* St[j, r] = scale sum_p Qp[p, r] . K[j, pair p] for keys j in [j0, j0 + n)
 * (n <= MR), rows r in [0, rows).  krow[i] points at key j0 + i's bf16
 * features.  Always inlined with n a constant, as flash_impl.h's
 * scores_block. */
static inline __attribute__((always_inline)) void
scores_block_bf16(float *restrict st, const uint32_t *restrict qp, const uint16_t *const *krow,
                  int n, int64_t rows, int64_t head_dim, float scale)
{
    const int64_t pairs = head_dim / 2;
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS_STEP) {
        vf acc[MR][NR];
        for (int i = 0; i < MR && i < n; i++)
            for (int c = 0; c < NR; c++) acc[i][c] = vsplat(0.0f);
        for (int64_t p = 0; p < pairs; p++) {
            __m512i qv[NR];
            for (int c = 0; c < NR; c++) qv[c] = vload_words(qp + p * rows + r0 + c * RA_W);
            for (int i = 0; i < MR && i < n; i++) {
                __m512i kb = _mm512_set1_epi32((int)bf16_word(krow[i], p));
                for (int c = 0; c < NR; c++) acc[i][c] = vdot_bf16(acc[i][c], qv[c], kb);
            }
        }
        if (head_dim % 2) { /* Qp's last word holds q[D - 1] and a zero */
            __m512i qv[NR];
            for (int c = 0; c < NR; c++) qv[c] = vload_words(qp + pairs * rows + r0 + c * RA_W);
            for (int i = 0; i < MR && i < n; i++) {
                __m512i kb = _mm512_set1_epi32((int)bf16_single(krow[i], head_dim - 1));
                for (int c = 0; c < NR; c++) acc[i][c] = vdot_bf16(acc[i][c], qv[c], kb);
            }
        }
        for (int i = 0; i < MR && i < n; i++)
            for (int c = 0; c < NR; c++)
                vstore(st + i * rows + r0 + c * RA_W, acc[i][c] * vsplat(scale));
    }
}

/* scores_block_bf16 for n = 1 .. MR keys, each n its own instantiation. */
static void scores_blocks_bf16(float *restrict st, const uint32_t *restrict qp,
                               const uint16_t *const *krow, int n, int64_t rows,
                               int64_t head_dim, float scale)
{
    if (n == MR) scores_block_bf16(st, qp, krow, MR, rows, head_dim, scale);
    else if (n == 1) scores_block_bf16(st, qp, krow, 1, rows, head_dim, scale);
    else if (n == 2) scores_block_bf16(st, qp, krow, 2, rows, head_dim, scale);
    else if (n == 3) scores_block_bf16(st, qp, krow, 3, rows, head_dim, scale);
    else if (n == 4) scores_block_bf16(st, qp, krow, 4, rows, head_dim, scale);
    else scores_block_bf16(st, qp, krow, 5, rows, head_dim, scale);
}

/* Ot[d, r] = alpha[r] Ot[d, r] + sum_jj Pp[jj, r] . Vp[jj, d] for features d
 * in [d0, d0 + n) (n <= MR), key pairs jj in [0, pairs); on the first tile
 * Ot starts at zero instead.  Always inlined with n a constant, as
 * flash_impl.h's values_block. */
static inline __attribute__((always_inline)) void
values_block_bf16(float *restrict ot, const uint32_t *restrict pp, const uint32_t *restrict vp,
                  int64_t d0, int n, int64_t pairs, int64_t rows, int64_t head_dim,
                  const float *alpha, int first)
{
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS_STEP) {
        vf acc[MR][NR], scale[NR];
        for (int c = 0; c < NR; c++) scale[c] = vload(alpha + r0 + c * RA_W);
        for (int i = 0; i < MR && i < n; i++)
            for (int c = 0; c < NR; c++)
                acc[i][c] = !first ? vload(ot + (d0 + i) * rows + r0 + c * RA_W) * scale[c]
                                   : vsplat(0.0f);
        for (int64_t jj = 0; jj < pairs; jj++) {
            __m512i pv[NR];
            for (int c = 0; c < NR; c++) pv[c] = vload_words(pp + jj * rows + r0 + c * RA_W);
            const uint32_t *vj = vp + jj * head_dim + d0;
            for (int i = 0; i < MR && i < n; i++) {
                __m512i vb = _mm512_set1_epi32((int)vj[i]);
                for (int c = 0; c < NR; c++) acc[i][c] = vdot_bf16(acc[i][c], pv[c], vb);
            }
        }
        for (int i = 0; i < MR && i < n; i++)
            for (int c = 0; c < NR; c++) vstore(ot + (d0 + i) * rows + r0 + c * RA_W, acc[i][c]);
    }
}

/* values_block_bf16 over features 0 .. head_dim: whole blocks of MR, then
 * the tail, each width its own instantiation. */
static void values_blocks_bf16(float *restrict ot, const uint32_t *restrict pp,
                               const uint32_t *restrict vp, int64_t pairs, int64_t rows,
                               int64_t head_dim, const float *alpha, int first)
{
    int64_t d0 = 0;
    for (; d0 + MR <= head_dim; d0 += MR)
        values_block_bf16(ot, pp, vp, d0, MR, pairs, rows, head_dim, alpha, first);
    int n = (int)(head_dim - d0);
    if (n == 1) values_block_bf16(ot, pp, vp, d0, 1, pairs, rows, head_dim, alpha, first);
    else if (n == 2) values_block_bf16(ot, pp, vp, d0, 2, pairs, rows, head_dim, alpha, first);
    else if (n == 3) values_block_bf16(ot, pp, vp, d0, 3, pairs, rows, head_dim, alpha, first);
    else if (n == 4) values_block_bf16(ot, pp, vp, d0, 4, pairs, rows, head_dim, alpha, first);
    else if (n == 5) values_block_bf16(ot, pp, vp, d0, 5, pairs, rows, head_dim, alpha, first);
}

/* Qp[p, r0 + i] = word p of src[i] (a bf16 row of D) for a block of RA_W
 * rows: W x W in-register transposes of whole words (moves only: the bits
 * stay), then the tail one by one, an odd D's last word q[D - 1] alone,
 * then zeros up to D32 / 2. */
static void load_rows_pairs(uint32_t *restrict qp, int64_t rows, int64_t r0,
                            const uint16_t *const *src, int64_t head_dim)
{
    const int64_t pairs = head_dim / 2;
    int64_t p0 = 0;
    for (; p0 + RA_W <= pairs; p0 += RA_W) {
        vf x[RA_W];
        for (int i = 0; i < RA_W; i++) memcpy(&x[i], src[i] + 2 * p0, sizeof x[i]);
        vtranspose(x);
        for (int k = 0; k < RA_W; k++) memcpy(qp + (p0 + k) * rows + r0, &x[k], sizeof x[k]);
    }
    for (; p0 < pairs; p0++)
        for (int i = 0; i < RA_W; i++) qp[p0 * rows + r0 + i] = bf16_word(src[i], p0);
    if (head_dim % 2)
        for (int i = 0; i < RA_W; i++) qp[p0 * rows + r0 + i] = bf16_single(src[i], head_dim - 1);
    for (p0 += head_dim % 2; p0 < ra_round_up(head_dim, 32) / 2; p0++)
        for (int i = 0; i < RA_W; i++) qp[p0 * rows + r0 + i] = 0;
}

/* Points rows[j] at bf16 key/value row k0 + j of (b, g) for j in [0, nk),
 * or at zeros for the tile's padding keys (they read as zeros). */
static void tile_rows_bf16(const uint16_t **rows, const ra_tensor *t, const flash_tile *tile,
                           int64_t b, int64_t g, int64_t k0, int64_t nk)
{
    for (int64_t j = 0; j < nk; j++)
        rows[j] = tile->padkey[j] ? (const uint16_t *)(const void *)tile->zero
                                  : ra_row_any(t, b, k0 + j, g);
}

/* Whether bf16 rows [0, nk) of D hold an Inf or a NaN (exponent all ones). */
static int rows_nonfinite_bf16(const uint16_t *const *rows, int64_t nk, int64_t head_dim)
{
    int any = 0;
    for (int64_t j = 0; j < nk; j++)
        for (int64_t d = 0; d < head_dim; d++) any |= (rows[j][d] & 0x7f80) == 0x7f80;
    return any;
}

/* Vp[jj, d] = (vrow[2jj][d], vrow[2jj + 1][d]) for jj < ceil(nk / 2), the
 * partner of an odd nk's last key zero. */
static void pack_value_pairs(uint32_t *restrict vp, const uint16_t *const *vrow, int64_t nk,
                             int64_t head_dim)
{
    for (int64_t jj = 0; 2 * jj < nk; jj++) {
        const uint16_t *lo = vrow[2 * jj], *hi = 2 * jj + 1 < nk ? vrow[2 * jj + 1] : NULL;
        uint32_t *dst = vp + jj * head_dim;
        int64_t d = 0;
        for (; d + RA_W <= head_dim; d += RA_W) {
            vh a, c = {0};
            memcpy(&a, lo + d, sizeof a);
            if (hi) memcpy(&c, hi + d, sizeof c);
            vu w = __builtin_convertvector(a, vu) | __builtin_convertvector(c, vu) << 16;
            memcpy(dst + d, &w, sizeof w);
        }
        for (; d < head_dim; d++) dst[d] = lo[d] | (hi ? (uint32_t)hi[d] << 16 : 0u);
    }
}

/* Pp[jj, r] = (P[2jj, r], P[2jj + 1, r]) rounded to bf16 (simd_half.h's
 * vbf16_pack: nearest, ties to even) for jj < ceil(nk / 2), over St's first
 * rows in place (row jj is written after rows 2jj and 2jj + 1 are read);
 * the partner of an odd nk's last key is 0. */
static void pack_probability_pairs(float *st, int64_t nk, int64_t rows)
{
    for (int64_t jj = 0; 2 * jj < nk; jj++)
        for (int64_t r0 = 0; r0 < rows; r0 += RA_W) {
            vf even = vload(st + 2 * jj * rows + r0);
            vf odd = 2 * jj + 1 < nk ? vload(st + (2 * jj + 1) * rows + r0) : vsplat(0.0f);
            vu w = vbf16_pack(even, odd);
            memcpy(st + jj * rows + r0, &w, sizeof w);
        }
}

#if defined(RA_FLASH_AMX)
/* The AMX tile registers as these kernels use them, all 16 rows of 64
 * bytes: 0-3 float32 sums, 4-5 the left operand (16 x 32 bf16), 6-7 the
 * right one (16 pairs x 16 words). */
typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_config;

/* Loads the tile configuration on the calling thread (ldtilecfg), for a
 * task; _tile_release() gives the tiles back at its end. */
static void amx_begin(void)
{
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.bytes_per_row[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}

/* St[j, r] = sum_d Kpack[j, d] q_r[d] for keys j < nk rounded to 32 and all
 * rows: 2 x 2 output tiles of 16 keys x 16 rows, over D32 in steps of 32
 * features.  kp: [BK, D32] bf16; qp: Qp. */
static void scores_amx(float *st, const uint16_t *kp, const uint32_t *qp, int64_t nk,
                       int64_t rows, int64_t head_dim)
{
    const int64_t d32 = ra_round_up(head_dim, 32), row_bytes = rows * 4;
    for (int64_t j0 = 0; j0 < nk; j0 += 32)
        for (int64_t r0 = 0; r0 < rows; r0 += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t d0 = 0; d0 < d32; d0 += 32) {
                _tile_loadd(4, kp + j0 * d32 + d0, d32 * 2);
                _tile_loadd(5, kp + (j0 + 16) * d32 + d0, d32 * 2);
                _tile_loadd(6, qp + d0 / 2 * rows + r0, row_bytes);
                _tile_loadd(7, qp + d0 / 2 * rows + r0 + 16, row_bytes);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, st + j0 * rows + r0, row_bytes);
            _tile_stored(1, st + j0 * rows + r0 + 16, row_bytes);
            _tile_stored(2, st + (j0 + 16) * rows + r0, row_bytes);
            _tile_stored(3, st + (j0 + 16) * rows + r0 + 16, row_bytes);
        }
}

/* Ot[d, r] += sum_j Vt[d, j] P[j, r] for d < D16, keys j < nk rounded to
 * 32, all rows: 1 x 2 output tiles of 16 features x 16 rows.  vt: [D16,
 * BK] bf16; pp: Pp, zero for the pairs past nk. */
static void values_amx(float *ot, const uint16_t *vt, const uint32_t *pp, int64_t nk,
                       int64_t rows, int64_t head_dim)
{
    const int64_t d16 = ra_round_up(head_dim, 16), row_bytes = rows * 4;
    for (int64_t d0 = 0; d0 < d16; d0 += 16)
        for (int64_t r0 = 0; r0 < rows; r0 += 32) {
            _tile_loadd(0, ot + d0 * rows + r0, row_bytes);
            _tile_loadd(1, ot + d0 * rows + r0 + 16, row_bytes);
            for (int64_t j0 = 0; j0 < nk; j0 += 32) {
                _tile_loadd(4, vt + d0 * BK + j0, BK * 2);
                _tile_loadd(6, pp + j0 / 2 * rows + r0, row_bytes);
                _tile_loadd(7, pp + j0 / 2 * rows + r0 + 16, row_bytes);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
            }
            _tile_stored(0, ot + d0 * rows + r0, row_bytes);
            _tile_stored(1, ot + d0 * rows + r0 + 16, row_bytes);
        }
}

/* kp[j, d] = krow[j][d] for j < nk, 0 past D (to D32) and for keys nk ..
 * nk rounded to 32.  kp: [BK, D32] */
static void pack_keys_amx(uint16_t *restrict kp, const uint16_t *const *krow, int64_t nk,
                          int64_t head_dim)
{
    const int64_t d32 = ra_round_up(head_dim, 32);
    for (int64_t j = 0; j < ra_round_up(nk, 32); j++) {
        uint16_t *dst = kp + j * d32;
        if (j < nk) memcpy(dst, krow[j], (size_t)head_dim * sizeof *dst);
        memset(dst + (j < nk ? head_dim : 0), 0,
               (size_t)(j < nk ? d32 - head_dim : d32) * sizeof *dst);
    }
}

/* vt[d, j] = vrow[j][d] for d < D, j < nk; 0 for keys nk .. nk rounded to
 * 32 and features D .. D16.  vt: [D16, BK] */
static void pack_values_amx(uint16_t *restrict vt, const uint16_t *const *vrow, int64_t nk,
                            int64_t head_dim)
{
    const int64_t d16 = ra_round_up(head_dim, 16), n32 = ra_round_up(nk, 32);
    for (int64_t d = 0; d < d16; d++)
        for (int64_t j = 0; j < n32; j++)
            vt[d * BK + j] = d < head_dim && j < nk ? vrow[j][d] : 0;
}

/* Ot[d, r] = alpha[r] Ot[d, r] for d < D16 (0 on the first tile): the
 * rescale values_amx's tiles then add to. */
static void rescale_rows(float *ot, const float *alpha, int64_t rows, int64_t head_dim, int first)
{
    for (int64_t d = 0; d < ra_round_up(head_dim, 16); d++)
        for (int64_t r0 = 0; r0 < rows; r0 += RA_W)
            vstore(ot + d * rows + r0,
                   first ? vsplat(0.0f) : vload(ot + d * rows + r0) * vload(alpha + r0));
}

/* St[j, r] *= scale for keys j < nk. */
static void scale_scores(float *st, int64_t nk, int64_t rows, float scale)
{
    for (int64_t i = 0; i < nk * rows; i += RA_W) vstore(st + i, vload(st + i) * vsplat(scale));
}
#endif

/* flash_task's scores for the tile of nk keys from k0: St = (K . Qp) scale,
 * on AMX when amx is set, else on vdpbf16ps. */
static void scores_tile_bf16(const flash_tile *t, const ra_tensor *k, int64_t b, int64_t g,
                             int64_t k0, int64_t nk, int64_t rows, int64_t head_dim, float scale,
                             int amx)
{
    const uint16_t *krow[BK];
    tile_rows_bf16(krow, k, t, b, g, k0, nk);
    const uint32_t *qp = (const uint32_t *)(const void *)t->qrot;
#if defined(RA_FLASH_AMX)
    if (amx) {
        uint16_t *kp = (uint16_t *)(void *)t->wide;
        pack_keys_amx(kp, krow, nk, head_dim);
        scores_amx(t->st, kp, qp, nk, rows, head_dim);
        scale_scores(t->st, nk, rows, scale);
        return;
    }
#endif
    (void)amx;
    for (int64_t j0 = 0; j0 < nk; j0 += MR) {
        int n = nk - j0 < MR ? (int)(nk - j0) : MR;
        scores_blocks_bf16(t->st + j0 * rows, qp, krow + j0, n, rows, head_dim, scale);
    }
}

/* flash_task's O update for the tile, P in St: V^T Pp on AMX when amx is
 * set, else on vdpbf16ps; values_seen on the widened values for a masked
 * tile whose values hold an Inf or a NaN. */
static void values_tile_bf16(const flash_tile *t, const ra_tensor *v, int64_t b, int64_t g,
                             int64_t k0, int64_t nk, int64_t rows, int64_t head_dim, int masked,
                             int first, int amx)
{
    const uint16_t *vrow[BK];
    tile_rows_bf16(vrow, v, t, b, g, k0, nk);
    if (masked && rows_nonfinite_bf16(vrow, nk, head_dim)) {
        tile_rows(t->krow, v, b, g, k0, nk, t->wide, head_dim);
        for (int64_t j = 0; j < nk; j++)
            if (t->padkey[j]) t->krow[j] = t->zero;
        values_seen(t, nk, rows, head_dim, first, rows, 1);
        return;
    }
    pack_probability_pairs(t->st, nk, rows);
    const uint32_t *pp = (const uint32_t *)(const void *)t->st;
#if defined(RA_FLASH_AMX)
    if (amx) {
        /* the pairs past nk up to the last 32-key step read as zeros */
        memset(t->st + (nk + 1) / 2 * rows, 0,
               (size_t)((ra_round_up(nk, 32) / 2 - (nk + 1) / 2) * rows) * sizeof(float));
        uint16_t *vt = (uint16_t *)(void *)t->wide;
        pack_values_amx(vt, vrow, nk, head_dim);
        rescale_rows(t->ot, t->alpha, rows, head_dim, first);
        values_amx(t->ot, vt, pp, nk, rows, head_dim);
        return;
    }
#endif
    (void)amx;
    uint32_t *vp = (uint32_t *)(void *)t->wide;
    pack_value_pairs(vp, vrow, nk, head_dim);
    values_blocks_bf16(t->ot, pp, vp, (nk + 1) / 2, rows, head_dim, t->alpha, first);
}
