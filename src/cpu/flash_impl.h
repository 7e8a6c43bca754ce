/*
 * flash_impl.h — the flash-attention task, written once against simd.h and
 * compiled per ISA (kernels_*.c).  Causal GQA attention with an online
 * softmax over key tiles (FlashAttention's forward):
 *
 *   for each key tile [k0, k0 + BK):
 *     S  = (q * scale) K^T                 [rows, BK]   register-blocked GEMM
 *     mask keys after each query (diagonal tiles only)
 *     m' = max(m, rowmax S);  P = exp(S - m');  l = l e^(m - m') + rowsum P
 *     O  = O e^(m - m') + P V              [rows, D]    register-blocked GEMM
 *                                          (the rescale fused into its loads)
 *   out = O / l,  lse = m + log(l) when asked (the backward's input)
 *
 * rows are the rep query heads of one kv group times block_q queries, so
 * every K/V row of a tile is read once for the whole group.  Scores and
 * probabilities live transposed, St [BK, rows], so that the softmax runs
 * across rows in whole vectors.  On the float32 path Qt [D, rows] is kept
 * in slices of ROWS_STEP rows, [rows / ROWS_STEP][D, ROWS_STEP], each one
 * contiguous (32 KiB at D 128 on AVX-512, in L1) while S = Q K^T
 * broadcasts K against it; O is row-major [rows, D rounded to 16] while
 * P V broadcasts P down St's columns against V's tile, copied to a
 * contiguous [BK, D rounded to 16] (its rows are H D apart in the
 * tensor).  The bf16 GEMMs keep Ot [D, rows] (flash_bf16_impl.h).
 * 16-bit K and V rows (and q's) are widened to float32 first; with q, k
 * and v all bf16, the kernels compiled with RA_FLASH_BF16 run both GEMMs
 * on the bf16 units instead (flash_bf16_impl.h).
 * A task's result does not depend on the thread that runs it.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu/attention_job.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/rope_job.h"

/* Register blocking: MR keys (or features) x NR vectors of rows. */
#if defined(RA_SIMD_AVX512)
enum { MR = 6, NR = 4 };
#else
enum { MR = 4, NR = 2 };
#endif
/* The forward's S = Q K^T: FMR keys a block (x NR vectors of rows).  On
 * AVX2 (16 registers) 6 x 2 accumulators, 2 vectors of Qt and a broadcast
 * key: 4 x 2 left 8 FMAs in flight, which the FMA's latency (4 cycles, 2
 * a cycle) needs all of (docs/perf/2026-12-08-prefill-rope-zen3.md). */
#if defined(RA_SIMD_AVX2)
enum { FMR = 6, KMAX = 6 /* the larger of FMR and MR */ };
#else
enum { FMR = MR, KMAX = MR };
#endif
enum { BK = RA_FLASH_BK, ROWS_STEP = NR * RA_W };

/* St[j, r] = sum_d K[j, d] Qt[d, r] for keys j in [j0, j0 + n) (n <= KMAX),
 * rows r in [0, rows); St's rows are ldst floats apart, Qt's ldq (the
 * forward passes one slice of ROWS_STEP rows at a time: flash_tile).
 * krow[i] points at key j0 + i's features.  The first c0 vectors of each
 * ROWS_STEP rows are not computed but set to -Inf (rows that see none of
 * the n keys: the forward's causal diagonal).  With mx ([rows]) not NULL
 * (and c0 0), mx[r] = max(mx[r], St[j, r]) over the n keys, from the
 * registers.
 * Always inlined with n and c0 constants (scores_blocks), so that a tail of
 * n keys computes n rows of accumulators, not KMAX. */
static inline __attribute__((always_inline)) void
scores_block(float *restrict st, int64_t ldst, const float *restrict qt, int64_t ldq,
             const float *const *krow, int n, int c0, int64_t rows, int64_t head_dim,
             float *mx)
{
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS_STEP) {
        vf acc[KMAX][NR];
        for (int i = 0; i < KMAX && i < n; i++)
            for (int c = c0; c < NR; c++) acc[i][c] = vsplat(0.0f);
        for (int64_t d = 0; d < head_dim; d++) {
            vf qv[NR];
            for (int c = c0; c < NR; c++) qv[c] = vload(qt + d * ldq + r0 + c * RA_W);
            for (int i = 0; i < KMAX && i < n; i++) {
                vf kb = vsplat(krow[i][d]);
                for (int c = c0; c < NR; c++) acc[i][c] += kb * qv[c];
            }
        }
        for (int i = 0; i < KMAX && i < n; i++) {
            for (int c = 0; c < c0; c++) vstore(st + i * ldst + r0 + c * RA_W, vsplat(-INFINITY));
            for (int c = c0; c < NR; c++) vstore(st + i * ldst + r0 + c * RA_W, acc[i][c]);
        }
        for (int c = c0; mx && c < NR; c++) {
            vf m = vload(mx + r0 + c * RA_W);
            for (int i = 0; i < KMAX && i < n; i++) m = vmax(m, acc[i][c]);
            vstore(mx + r0 + c * RA_W, m);
        }
    }
}

/* scores_block for n = 1 .. KMAX keys, each n its own instantiation; c0
 * (< NR) for the forward's whole blocks of FMR keys only (0 for the
 * others). */
static void scores_blocks(float *restrict st, int64_t ldst, const float *restrict qt, int64_t ldq,
                          const float *const *krow, int n, int c0, int64_t rows,
                          int64_t head_dim, float *mx)
{
    if (n == FMR && c0 == 0) scores_block(st, ldst, qt, ldq, krow, FMR, 0, rows, head_dim, mx);
    else if (n == FMR && c0 == 1) scores_block(st, ldst, qt, ldq, krow, FMR, 1, rows, head_dim, mx);
    else if (n == FMR && c0 == 2) scores_block(st, ldst, qt, ldq, krow, FMR, 2, rows, head_dim, mx);
    else if (n == FMR) scores_block(st, ldst, qt, ldq, krow, FMR, NR - 1, rows, head_dim, mx);
    else if (n == 1) scores_block(st, ldst, qt, ldq, krow, 1, 0, rows, head_dim, mx);
    else if (n == 2) scores_block(st, ldst, qt, ldq, krow, 2, 0, rows, head_dim, mx);
    else if (n == 3) scores_block(st, ldst, qt, ldq, krow, 3, 0, rows, head_dim, mx);
    else if (n == 4) scores_block(st, ldst, qt, ldq, krow, 4, 0, rows, head_dim, mx);
    else scores_block(st, ldst, qt, ldq, krow, 5, 0, rows, head_dim, mx);
}

/* The backward's dQt += K^T dSt (the forward's float32 P V: values_rows).
 * Ot[d, r] = alpha[r] Ot[d, r] + sum_j V[j, d] Pt[j, r] for features d in
 * [d0, d0 + n) (n <= MR), keys j in [0, nk); on the first tile Ot starts at
 * zero instead.  vrow[j] points at key k0 + j's values.  Always inlined with
 * n a constant (values_blocks), so that a tail of n < MR features computes
 * n of them, not MR. */
static inline __attribute__((always_inline)) void
values_block(float *restrict ot, const float *restrict pt, const float *const *vrow, int64_t d0,
             int n, int64_t nk, int64_t rows, const float *alpha, int first)
{
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS_STEP) {
        vf acc[MR][NR], scale[NR];
        for (int c = 0; c < NR; c++) scale[c] = vload(alpha + r0 + c * RA_W);
        for (int i = 0; i < MR && i < n; i++)
            for (int c = 0; c < NR; c++)
                acc[i][c] = !first ? vload(ot + (d0 + i) * rows + r0 + c * RA_W) * scale[c]
                                   : vsplat(0.0f);
        for (int64_t j = 0; j < nk; j++) {
            vf pv[NR];
            for (int c = 0; c < NR; c++) pv[c] = vload(pt + j * rows + r0 + c * RA_W);
            const float *vj = vrow[j] + d0;
            for (int i = 0; i < MR && i < n; i++) {
                vf vb = vsplat(vj[i]);
                for (int c = 0; c < NR; c++) acc[i][c] += vb * pv[c];
            }
        }
        for (int i = 0; i < MR && i < n; i++)
            for (int c = 0; c < NR; c++) vstore(ot + (d0 + i) * rows + r0 + c * RA_W, acc[i][c]);
    }
}

/* values_block over features d0 .. head_dim: whole blocks of MR, then the
 * tail (1 .. MR - 1), each width its own instantiation. */
static void values_blocks(float *restrict ot, const float *restrict pt, const float *const *vrow,
                          int64_t head_dim, int64_t nk, int64_t rows, const float *alpha,
                          int first)
{
    int64_t d0 = 0;
    for (; d0 + MR <= head_dim; d0 += MR)
        values_block(ot, pt, vrow, d0, MR, nk, rows, alpha, first);
    int n = (int)(head_dim - d0);
    if (n == 1) values_block(ot, pt, vrow, d0, 1, nk, rows, alpha, first);
    else if (n == 2) values_block(ot, pt, vrow, d0, 2, nk, rows, alpha, first);
    else if (n == 3) values_block(ot, pt, vrow, d0, 3, nk, rows, alpha, first);
    else if (n == 4) values_block(ot, pt, vrow, d0, 4, nk, rows, alpha, first);
    else if (n == 5) values_block(ot, pt, vrow, d0, 5, nk, rows, alpha, first);
}

/* The forward's P V with O row-major: PMR rows x PNR vectors of features.
 * On AVX2 (16 registers) 6 x 2 accumulators, 2 vectors of V and a
 * broadcast of P, as FMR x NR for S = Q K^T. */
#if defined(RA_SIMD_AVX512)
enum { PMR = 4, PNR = 4 };
#elif defined(RA_SIMD_AVX2)
enum { PMR = 6, PNR = 2 };
#else
enum { PMR = 4, PNR = 2 };
#endif
/* rows, a multiple of RA_FLASH_ROWS, leave an even number past the last
 * whole block of PMR: values_rows runs them two at a time */
_Static_assert(RA_FLASH_ROWS % PMR % 2 == 0, "rows past PMR's blocks come in pairs");

/* O[i, f] = alpha[i] O[i, f] + sum_{j < nk} P[i, j] V[j, f] for rows i in
 * [0, m) (m <= PMR) and features f in [0, nv RA_W) (nv <= PNR vectors); on
 * the first tile O starts at zero instead.  P[i, j] is Pt[j * ldp + i] (St,
 * in place), O's rows are ldo floats apart, V's ldv.  The same products,
 * summed over j in the same order, as values_block's: the same bits.
 * Always inlined with m and nv constants (values_rows). */
static inline __attribute__((always_inline)) void
values_row_block(float *restrict o, int64_t ldo, const float *restrict pt, int64_t ldp,
                 const float *restrict v, int64_t ldv, int64_t nk, int m, int nv,
                 const float *alpha, int first)
{
    vf acc[PMR][PNR];
    for (int i = 0; i < m; i++)
        for (int c = 0; c < nv; c++)
            acc[i][c] = !first ? vload(o + i * ldo + c * RA_W) * vsplat(alpha[i]) : vsplat(0.0f);
    for (int64_t j = 0; j < nk; j++) {
        vf vv[PNR];
        for (int c = 0; c < nv; c++) vv[c] = vload(v + j * ldv + c * RA_W);
        for (int i = 0; i < m; i++) {
            vf pb = vsplat(pt[j * ldp + i]);
            for (int c = 0; c < nv; c++) acc[i][c] += pb * vv[c];
        }
    }
    for (int i = 0; i < m; i++)
        for (int c = 0; c < nv; c++) vstore(o + i * ldo + c * RA_W, acc[i][c]);
}

/* The keys [*j0, *j1) of a tile of nk that n rows may see: from the least
 * of their lo to the greatest of their hi (flash_tile's). */
static inline void key_span(const float *lo, const float *hi, int n, int64_t nk, int64_t *j0,
                            int64_t *j1)
{
    float l = lo[0], h = hi[0];
    for (int i = 1; i < n; i++) {
        l = lo[i] < l ? lo[i] : l;
        h = hi[i] > h ? hi[i] : h;
    }
    *j0 = l < 0 ? 0 : (int64_t)l;
    *j1 = h + 1 > (float)nk ? nk : (int64_t)h + 1;
    if (*j1 < *j0) *j1 = *j0;
}

/* values_row_block for rows [r0, r0 + m) and the features of block f0 (nv
 * vectors of them): over the keys the rows may see where lo and hi are
 * given (values_rows). */
static inline __attribute__((always_inline)) void
values_rows_at(float *restrict o, const float *restrict pt, int64_t ldp, const float *restrict v,
               int64_t nk, int64_t width, const float *alpha, int first, const float *lo,
               const float *hi, int64_t r0, int m, int64_t f0, int nv)
{
    int64_t j0 = 0, j1 = nk;
    if (lo) key_span(lo + r0, hi + r0, m, nk, &j0, &j1);
    float *ob = o + r0 * width + f0;
    const float *pb = pt + j0 * ldp + r0, *vb = v + j0 * width + f0;
    if (nv == PNR)
        values_row_block(ob, width, pb, ldp, vb, width, j1 - j0, m, PNR, alpha + r0, first);
    else if (nv == 1)
        values_row_block(ob, width, pb, ldp, vb, width, j1 - j0, m, 1, alpha + r0, first);
    else if (nv == 2)
        values_row_block(ob, width, pb, ldp, vb, width, j1 - j0, m, 2, alpha + r0, first);
    else /* 3 (PNR 4) */
        values_row_block(ob, width, pb, ldp, vb, width, j1 - j0, m, PNR - 1, alpha + r0, first);
}

/* values_rows for rows [r_begin, r_end): each block of PNR vectors of
 * features runs over those rows while its columns of V stay in L1. */
static inline __attribute__((always_inline)) void
values_rows_range(float *restrict o, const float *restrict pt, int64_t ldp,
                  const float *restrict v, int64_t nk, int64_t r_begin, int64_t r_end,
                  int64_t width, const float *alpha, int first, const float *lo, const float *hi)
{
    for (int64_t f0 = 0; f0 < width; f0 += PNR * RA_W) {
        const int nv = (width - f0) / RA_W < PNR ? (int)((width - f0) / RA_W) : PNR;
        int64_t r0 = r_begin;
        for (; r0 + PMR <= r_end; r0 += PMR)
            values_rows_at(o, pt, ldp, v, nk, width, alpha, first, lo, hi, r0, PMR, f0, nv);
        for (; RA_FLASH_ROWS % PMR != 0 && r0 < r_end; r0 += 2)
            values_rows_at(o, pt, ldp, v, nk, width, alpha, first, lo, hi, r0, 2, f0, nv);
    }
}

/* O [rows, width] = alpha O + P V for the nk keys of a tile: P in Pt [BK,
 * rows] (St, rows ldp floats apart), V [nk, width] (width: D rounded to 16,
 * zeros past D).  On AVX2, PV_ROWS rows at a time, so that their P (St's
 * columns, [BK, PV_ROWS]: 12 KiB) stays in L1 (32 KiB on Zen 3) while
 * every block of features passes over it; elsewhere all rows at once (2
 * MiB of L2 on the Intel core, where it was tuned).  With lo and hi (a
 * masked tile's, not NULL), a block of PMR rows runs over the keys its
 * rows may see only (key_span: the causal diagonal's tiles): the others'
 * P is exactly 0 in each of its rows, and adding 0 changes none of O's
 * sums: the same bits but for the sign of a zero (alpha O that underflows
 * to -0 with every product of its span 0 stays -0 where adding 0 v gave
 * +0).  Each row's sums run in the same order whatever the blocking. */
static void values_rows(float *restrict o, const float *restrict pt, int64_t ldp,
                        const float *restrict v, int64_t nk, int64_t rows, int64_t width,
                        const float *alpha, int first, const float *lo, const float *hi)
{
#if defined(RA_SIMD_AVX2)
    enum { PV_ROWS = 8 * PMR };
    for (int64_t r0 = 0; r0 < rows; r0 += PV_ROWS)
        values_rows_range(o, pt, ldp, v, nk, r0, r0 + PV_ROWS < rows ? r0 + PV_ROWS : rows, width,
                          alpha, first, lo, hi);
#else
    values_rows_range(o, pt, ldp, v, nk, 0, rows, width, alpha, first, lo, hi);
#endif
}

/* Qt[d, r0 + i] = src[i][d] * scale for a block of RA_W rows: W x W
 * in-register transposes, then the tail of D one by one. */
static void load_rows_transposed(float *restrict qt, int64_t rows, int64_t r0,
                                 const float *const *src, int64_t head_dim, float scale)
{
    int64_t d0 = 0;
    for (; d0 + RA_W <= head_dim; d0 += RA_W) {
        vf x[RA_W];
        for (int i = 0; i < RA_W; i++) x[i] = vload(src[i] + d0);
        vtranspose(x);
        for (int k = 0; k < RA_W; k++) vstore(qt + (d0 + k) * rows + r0, x[k] * vsplat(scale));
    }
    for (; d0 < head_dim; d0++)
        for (int i = 0; i < RA_W; i++) qt[d0 * rows + r0 + i] = src[i][d0] * scale;
}

/* dst[i][d] = Ot[d, r0 + i] * inv[i] for the rows whose dst is not NULL. */
static void store_rows_transposed(float *const *dst, const float *restrict ot, int64_t rows,
                                  int64_t r0, int64_t head_dim, const float *inv)
{
    int64_t d0 = 0;
    for (; d0 + RA_W <= head_dim; d0 += RA_W) {
        vf x[RA_W];
        for (int k = 0; k < RA_W; k++) x[k] = vload(ot + (d0 + k) * rows + r0);
        vtranspose(x);
        for (int i = 0; i < RA_W; i++)
            if (dst[i]) vstore(dst[i] + d0, x[i] * vsplat(inv[i]));
    }
    for (; d0 < head_dim; d0++)
        for (int i = 0; i < RA_W; i++)
            if (dst[i]) dst[i][d0] = ot[d0 * rows + r0 + i] * inv[i];
}

/* Per-thread scratch, carved as ra_flash_layout_for describes. */
typedef struct flash_tile {
    float *qt, *st, *ot, *m, *l, *alpha, *mult, *zero, *wide, *qrot;
    const float **krow; /* [BK] */
    float *lo, *hi;     /* [rows]: the first and last key of the tile each row
                           sees, counted from the tile's first key and clamped to
                           [-1, BK] (exact as floats); padding rows see them all */
    int64_t *first;     /* [rows]: each row's first key (ra_mask_first_key) */
    int64_t *last;      /* [rows]: each row's last key (ra_mask_last_key) */
    float *padkey;      /* [BK]: nonzero for the tile's padding keys */
    float *any;         /* [rows]: nonzero once attn_mask has let the row see a key */
    float *am;          /* [BK, rows]: attn_mask's tile, -Inf where a row does not
                           see a key (am_set) */
    int64_t ldst;       /* St's row stride: rows (the bf16 GEMMs'), else rows +
                           RA_FLASH_PAD, so that a column of St (values_rows
                           reads P down one) spans every set of L1 */
    const float *pack_k, *pack_v; /* ra_flash_job.pack's K and V, or NULL */
    int attn;           /* the job has an attn_mask */
    int am_set;         /* am holds the current tile's (not all 0 where seen) */
} flash_tile;

static flash_tile carve(const ra_flash_job *job, int thread, int64_t head_dim)
{
    const int64_t rows = job->layout.rows;
    flash_tile t;
    t.qt = job->scratch + thread * job->layout.per_thread;  /* [D, rows] in slices */
    t.st = t.qt + head_dim * rows;                          /* [BK, rows + RA_FLASH_PAD] */
    t.ot = t.st + BK * (rows + RA_FLASH_PAD);  /* [rows, D rounded to 16] (bf16: [D16, rows]) */
    t.m = t.ot + ra_round_up(head_dim, 16) * rows;          /* [rows] */
    t.l = t.m + rows;                                       /* [rows] */
    t.alpha = t.l + rows;                                   /* [rows] */
    t.lo = t.alpha + rows;                                  /* [rows] */
    t.hi = t.lo + rows;                                     /* [rows] */
    t.first = (int64_t *)(void *)(t.hi + rows);             /* [rows] int64 */
    t.padkey = t.hi + 3 * rows;                             /* [BK] */
    t.mult = t.padkey + BK;                                 /* [BK] */
    t.zero = t.mult + BK;                                   /* [D] zeros */
    t.krow = (const float **)(void *)(t.zero + ra_round_up(head_dim, 16)); /* [BK] */
    t.wide = t.zero + ra_round_up(head_dim, 16) + 2 * BK;           /* [BK, D rounded to 16] */
    t.qrot = t.wide + BK * ra_round_up(head_dim, 16);              /* [rows, D rounded to 16] */
    t.last = (int64_t *)(void *)(t.qrot + rows * ra_round_up(head_dim, 16)); /* [rows] int64 */
    t.any = t.qrot + rows * ra_round_up(head_dim, 16) + 2 * rows;  /* [rows] */
    t.am = t.any + rows;                                           /* [BK, rows] */
    t.pack_k = job->pack;
    t.pack_v = job->pack ? job->pack + job->args->k->shape[1] * ra_round_up(head_dim, 16) : NULL;
    t.attn = job->args->mask.attn != NULL;
    t.am_set = 0;
    return t;
}

/* e^x for the forward's softmax (x = s - m <= 0 there, or NaN), in 8
 * vector operations on AVX-512: t = x log2(e), f = t - floor(t) in [0, 1]
 * (vreduceps: exact, 1 where t is just below an integer, 0 at -Inf), 2^f
 * by a degree-5 polynomial 1 + f q(f) (fitted for relative error, 8.2e-8
 * in exact arithmetic; e^0 is 1 exactly, so a row that sees one key gets
 * its value) and 2^f 2^floor(t) by vscalefps, exact (0 at -Inf and where
 * floor(t) < -149; NaN passes).  Measured over every float x in [-1, 0]:
 * at most 1.8e-7 relative to e^x (simd.h's vexp: 2.2e-7), over [-87, 0]
 * 3.9e-6, from t's rounding as vexp's (4.0e-6); gradual underflow below
 * -87.3.  On AVX2 the same in 12 (simd.h's vexp: about 25), without
 * vreduceps and vscalefps: t clamped to -127 first (NaN passes: vmaxps
 * returns its second operand then), f = t - floor(t) (exact), the same
 * polynomial, and 2^floor(t) as a float's bits, built by adding 2^23 +
 * 127 and shifting: the same bits as AVX-512's wherever e^x >= 2^-126,
 * 0 below (where t < -127: 2^-127's bits are 0), as simd.h's vexp
 * flushes.  Elsewhere simd.h's vexp. */
#if defined(RA_SIMD_AVX512) || defined(RA_SIMD_AVX2)
static const float exp2_poly[6] = {0.0018671304f, 0.00901702978f, 0.0557999127f,
                                   0.240164444f,  0.693151295f,   1.0f};
#endif

static inline vf vexp_flash(vf x)
{
#if defined(RA_SIMD_AVX512)
    const __m512 t = _mm512_mul_ps((__m512)x, _mm512_set1_ps(1.44269504088896341f));
    const vf f = (vf)_mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    vf p = vsplat(exp2_poly[0]);
    for (int i = 1; i < 6; i++) p = p * f + vsplat(exp2_poly[i]); /* Horner */
    return (vf)_mm512_scalef_ps((__m512)p, t);
#elif defined(RA_SIMD_AVX2)
    const vf t = vmax(vsplat(-127.0f), x * vsplat(1.44269504088896341f));
    const vf n = (vf)_mm256_floor_ps((__m256)t), f = t - n;
    vf p = vsplat(exp2_poly[0]);
    for (int i = 1; i < 6; i++) p = p * f + vsplat(exp2_poly[i]); /* Horner */
    return p * (vf)((vi)(n + vsplat(8388608.0f + 127.0f)) << 23);
#else
    return vexp(x);
#endif
}

/* Soft-caps (softcap > 0), adds attn_mask's tile (t->am_set), masks (masked:
 * keys outside a row's lo .. hi, and padding keys), exponentiates and folds
 * one tile's scores into m and l, and leaves e^(m - m') in alpha for
 * values_block to rescale Ot with; rows r_begin .. r_end - 1 of rows.  With
 * tmax not NULL (none of those applies) tmax[r - r_begin] is the row's
 * largest score of the tile, and the scores are read once.  Masked, a
 * vector of rows gets P = 0 without exponentiating outside the keys its
 * rows may see (key_span; the causal diagonal's). */
static void softmax_tile(const flash_tile *t, int64_t rows, int64_t r_begin, int64_t r_end,
                         int64_t nk, int masked, int padding, float softcap, const float *tmax)
{
    const float *am = t->am_set ? t->am : NULL;
    float *const st = t->st;
    const int64_t ldst = t->ldst;
    const vf cap = vsplat(softcap), inv_cap = vsplat(1.0f / softcap);
    const int divide = !(1.0f / softcap >= FLT_MIN); /* 1 / c subnormal: s / c */
    for (int64_t r0 = r_begin; r0 < r_end; r0 += RA_W) {
        vf lo = vload(t->lo + r0), hi = vload(t->hi + r0);
        vf mx = vload(t->m + r0), m_new = mx;
        int64_t j0 = 0, j1 = nk; /* the keys [j0, j1) some row may see */
        if (masked) key_span(t->lo + r0, t->hi + r0, RA_W, nk, &j0, &j1);
        if (tmax) m_new = vmax(m_new, vload(tmax + r0 - r_begin));
        for (int64_t j = j0; !tmax && j < j1; j++) {
            vf s = vload(st + j * ldst + r0);
            if (softcap > 0) s = cap * vtanh(divide ? s / cap : s * inv_cap);
            if (am) s += vload(am + j * rows + r0);
            if (masked) {
                vf at = vsplat((float)j);
                s = vselect((at > hi) | (at < lo), vsplat(-INFINITY), s);
                if (padding && t->padkey[j]) s = vsplat(-INFINITY);
            }
            if (masked || softcap > 0 || am) vstore(st + j * ldst + r0, s);
            m_new = vmax(m_new, s);
        }
        /* m starts at -inf.  While every score so far is -inf (a logit
         * beyond -FLT_MAX, say, or keys all masked) m' is -inf too:
         * exponentiate against 0 then, so that such keys weigh 0 rather
         * than e^(-inf + inf) = NaN, as in a softmax over the whole row. */
        vf m_exp = vselect(m_new == vsplat(-INFINITY), vsplat(0.0f), m_new);
        vf alpha = vexp_flash(mx - m_exp), sum = vsplat(0.0f);
        for (int64_t j = 0; j < j0; j++) vstore(st + j * ldst + r0, vsplat(0.0f));
        for (int64_t j = j0; j < j1; j++) {
            vf p = vexp_flash(vload(st + j * ldst + r0) - m_exp);
            vstore(st + j * ldst + r0, p);
            sum += p;
        }
        for (int64_t j = j1; j < nk; j++) vstore(st + j * ldst + r0, vsplat(0.0f));
        vstore(t->l + r0, vload(t->l + r0) * alpha + sum);
        vstore(t->m + r0, m_new);
        vstore(t->alpha + r0, alpha);
    }
}

/* Whether key j of the tile is seen by row r (of rows). */
static inline int seen(const flash_tile *t, int64_t rows, int64_t r, int64_t j)
{
    return (float)j >= t->lo[r] && (float)j <= t->hi[r] && !t->padkey[j] &&
           (!t->am_set || t->am[j * rows + r] != -INFINITY);
}

/* Whether the values of a masked tile hold an Inf or a NaN: a masked key
 * weighs exactly 0 for a row, but 0 * Inf = NaN would still reach that row
 * through values_block. */
static int tile_nonfinite(const flash_tile *t, int64_t nk, int64_t head_dim)
{
    vf acc = vsplat(0.0f); /* x - x: 0 where x is finite, NaN where not */
    for (int64_t j = 0; j < nk; j++) {
        int64_t d = 0;
        for (; d + RA_W <= head_dim; d += RA_W) {
            vf x = vload(t->krow[j] + d);
            acc += x - x;
        }
        for (; d < head_dim; d++)
            if (!isfinite(t->krow[j][d])) return 1;
    }
    float lanes[RA_W];
    vstore(lanes, acc);
    for (int i = 0; i < RA_W; i++)
        if (lanes[i] != lanes[i]) return 1;
    return 0;
}

/* values_block for such a tile, one row at a time over the keys it sees,
 * in the same order; Ot[d, r] at ot[d * sd + r * sr] (transposed: sd =
 * rows, sr = 1; row-major, the float32 path's: sd = 1, sr = D rounded to
 * 16). */
static void values_seen(const flash_tile *t, int64_t nk, int64_t rows, int64_t head_dim,
                        int first, int64_t sd, int64_t sr)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < head_dim; d++) {
            float *o = t->ot + d * sd + r * sr;
            float acc = first ? 0.0f : *o * t->alpha[r];
            for (int64_t j = 0; j < nk; j++)
                if (seen(t, rows, r, j)) acc += t->krow[j][d] * t->st[j * t->ldst + r];
            *o = acc;
        }
}

/* dst[d] = src[d] widened from f16 or bf16 (exact), d in [0, D). */
static void widen_row(float *restrict dst, const uint16_t *src, ra_dtype dtype, int64_t head_dim)
{
    int64_t d = 0;
    if (dtype == RA_BF16)
        for (; d + RA_W <= head_dim; d += RA_W) vstore(dst + d, vload_bf16(src + d));
    else
        for (; d + RA_W <= head_dim; d += RA_W) vstore(dst + d, vload_f16(src + d));
    for (; d < head_dim; d++) dst[d] = ra_load(src, dtype, d);
}

/* Points rows[j] at key/value row k0 + j of (b, g) for j in [0, nk): in
 * place for float32, else widened into `wide` ([nk, D rounded to 16]). */
static void tile_rows(const float **rows, const ra_tensor *t, int64_t b, int64_t g, int64_t k0,
                      int64_t nk, float *wide, int64_t head_dim)
{
    if (t->dtype == RA_F32) {
        for (int64_t j = 0; j < nk; j++) rows[j] = ra_row(t, b, k0 + j, g);
        return;
    }
    const int64_t width = ra_round_up(head_dim, 16);
    for (int64_t j = 0; j < nk; j++) {
        widen_row(wide + j * width, ra_row_any(t, b, k0 + j, g), t->dtype, head_dim);
        rows[j] = wide + j * width;
    }
}

/* Asks for rows [s0, s0 + n) of head h of sequence b of t to be brought
 * into L2: a block's next rows while this one is computed (rows are H D
 * apart, farther than the hardware prefetchers follow). */
static void prefetch_rows(const ra_tensor *t, int64_t b, int64_t s0, int64_t n, int64_t h)
{
    const int64_t bytes = t->shape[3] * (int64_t)ra_dtype_size(t->dtype);
    for (int64_t r = 0; r < n; r++) {
        const char *row = ra_row_any(t, b, s0 + r, h);
        for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at, 0, 2);
    }
}

/* K's or V's (x's) rows k0 .. k0 + nk - 1 of (b, g) copied (float32) or
 * widened into wide [nk, D rounded to 16], zeros past D and for padding
 * keys, t->krow[j] pointing at them: contiguous whole vectors for the
 * GEMMs (in the tensor the rows are H D apart). */
static void tile_copy(const flash_tile *t, const ra_tensor *x, int64_t b, int64_t g, int64_t k0,
                      int64_t nk, int64_t head_dim, int padding)
{
    const int64_t width = ra_round_up(head_dim, 16);
    for (int64_t j = 0; j < nk; j++) {
        float *dst = t->wide + j * width;
        int64_t d = 0;
        if (!(padding && t->padkey[j]) && x->dtype == RA_F32) {
            const float *src = ra_row(x, b, k0 + j, g); /* inline: memcpy's call cost
                                                            as much for 512 bytes */
            for (; d + RA_W <= head_dim; d += RA_W) vstore(dst + d, vload(src + d));
            for (; d < head_dim; d++) dst[d] = src[d];
        } else if (!(padding && t->padkey[j])) {
            widen_row(dst, ra_row_any(x, b, k0 + j, g), x->dtype, head_dim);
            d = head_dim;
        }
        for (; d < width; d++) dst[d] = 0.0f;
        t->krow[j] = dst;
    }
}

/* Rows [s0, s0 + n) of head h of sequence b of the f32 view t, rotated by
 * RoPE at their positions into dst [n, D rounded to 16]. */
static void rotate_rows(const ra_attention_args *a, const ra_tensor *t, int64_t b, int64_t s0,
                        int64_t n, int64_t h, float *dst)
{
    const int64_t head_dim = t->shape[3], width = ra_round_up(head_dim, 16);
    ra_tensor x = {ra_row(t, b, s0, h), RA_F32, {1, n, 1, head_dim},
                   {t->stride[0], t->stride[1], t->stride[2], 1}};
    ra_tensor out = {dst, RA_F32, {1, n, 1, head_dim}, {n * width, width, width, 1}};
    ra_positions pos = ra_positions_of_rows(a->positions, b, s0, t->shape[1]);
    ra_rope_rows(a->rope, &out, &x, &pos);
}

/* K rows of a tile: rotated into wide when the job fuses RoPE. */
static void key_rows(const flash_tile *t, const ra_attention_args *a, int64_t b, int64_t g,
                     int64_t k0, int64_t nk, int64_t head_dim)
{
    if (!a->rope) {
        tile_rows(t->krow, a->k, b, g, k0, nk, t->wide, head_dim);
        return;
    }
    rotate_rows(a, a->k, b, k0, nk, g, t->wide);
    for (int64_t j = 0; j < nk; j++) t->krow[j] = t->wide + j * ra_round_up(head_dim, 16);
}

/* A row's lo and hi for the tile from key k0 (flash_tile): its first key and
 * its last (its query, causal), less k0, clamped to [-1, BK]; first < 0 (a
 * padding row, past the group's rows or the last query): every key. */
static inline void row_bounds(float *lo, float *hi, int64_t first, int64_t last, int64_t k0)
{
    int64_t l = first - k0, h = last - k0;
    *lo = first < 0 ? -1.0f : (float)(l < -1 ? -1 : l > BK ? BK : l);
    *hi = first < 0 ? (float)BK : (float)(h < -1 ? -1 : h > BK ? BK : h);
}

#if defined(RA_FLASH_BF16)
#include "cpu/flash_bf16_impl.h"
#endif

/* One task's block of work: batch row b, kv head g, queries q0 .. q0 + nq
 * - 1.  Its rows: query head h's nq queries at h * block_q; a block of
 * fewer queries than the layout's (the last one, or a decoding step's few
 * over cached keys) packs them into fewer rows, rep * nq rounded up to
 * RA_FLASH_ROWS, instead of computing the empty ones.  Each row's sums run
 * in the same order either way: the same bits.  The keys it reads, k_first
 * .. k_end - 1 (a window's or a chunk's tiles before them are skipped),
 * the last first key, first_max, and the least last key, last_min (from
 * first_max to last_min every row sees every key): first_keys. */
typedef struct flash_block {
    int64_t b, g, q0, nq, block_q, rows;
    int64_t k_first, k_end, first_max;
    int64_t last_min; /* the least last key: up to it every row sees every key
                         from first_max on */
    int started;      /* Ot holds a tile's values (a tile attn_mask leaves
                         empty is skipped) */
    int bf16; /* q, k and v bf16 (no rope): the tile's GEMMs on the bf16
                 units, on AMX's tiles where amx is set (flash_bf16_impl.h) */
    int amx;
} flash_block;

/* Task task's block: a (b, kv head) group at a time, its longest tasks
 * (last query block) first: attention_flash.c says why. */
static flash_block block_of(const ra_flash_job *job, int64_t task)
{
    const ra_attention_args *a = job->args;
    const int64_t seq = a->q->shape[1], n_kv = a->k->shape[2];
    const int64_t rep = a->q->shape[2] / n_kv, group = task / job->n_query_blocks;
    const int64_t qblock = job->n_query_blocks - 1 - task % job->n_query_blocks;
    const int64_t full = job->layout.block_q, q0 = qblock * full;
    flash_block blk = {.b = group / n_kv, .g = group % n_kv, .q0 = q0};
    blk.nq = (q0 + full < seq ? q0 + full : seq) - q0;
    blk.block_q = blk.nq;
    blk.rows = ra_round_up(rep * blk.nq, RA_FLASH_ROWS);
#if defined(RA_FLASH_BF16)
    blk.bf16 = a->q->dtype == RA_BF16 && a->k->dtype == RA_BF16 && a->v->dtype == RA_BF16 &&
             !a->rope;
#endif
#if defined(RA_FLASH_AMX)
    blk.amx = blk.bf16 && job->amx;
#endif
    return blk;
}

/* Each row's first and last key (t->first, t->last; first -1 for padding
 * rows) and the block's k_first, k_end, first_max and last_min.  Query row
 * i is key row i + q_shift (ra_attention_args.q_shift: Sk - Sq, or a
 * block's offset in ra_attention_block_lse). */
static void first_keys(const flash_tile *t, const ra_attention_args *a, flash_block *blk)
{
    const int64_t rep = a->q->shape[2] / a->k->shape[2], n_keys = a->k->shape[1];
    const int64_t shift = a->q_shift;
    /* the chunks' origin as a key row: the leading padding, less the
     * keys' first position (a block's keys start at k_start) */
    const int64_t lp = ra_mask_leading_padding(&a->mask, blk->b) - a->k_start;
    blk->k_end = 0;
    blk->k_first = n_keys;
    blk->first_max = 0;
    blk->last_min = n_keys;
    blk->started = 0;
    for (int64_t r = 0; r < blk->rows; r++) {
        int64_t h = r / blk->block_q, qi = r % blk->block_q;
        t->first[r] = -1;
        t->last[r] = n_keys;
        t->any[r] = 0.0f;
        if (h >= rep || qi >= blk->nq) continue;
        t->first[r] = ra_mask_first_key(&a->mask, shift + blk->q0 + qi, lp);
        t->last[r] = ra_mask_last_key(&a->mask, shift + blk->q0 + qi, lp, n_keys);
        blk->first_max = t->first[r] > blk->first_max ? t->first[r] : blk->first_max;
        blk->last_min = t->last[r] < blk->last_min ? t->last[r] : blk->last_min;
        if (t->first[r] > t->last[r]) continue; /* it sees no key */
        blk->k_first = t->first[r] < blk->k_first ? t->first[r] : blk->k_first;
        blk->k_end = t->last[r] + 1 > blk->k_end ? t->last[r] + 1 : blk->k_end;
    }
    if (blk->k_first > blk->k_end) blk->k_first = blk->k_end;
}

/* Qt[d, r] = q[b, q0 + i, g * rep + h, d] * scale for row r = h * block_q + i;
 * padding rows (past the group's rows or the last query) are zero, and m
 * and l start at -Inf and 0.  16-bit q rows are widened into qrot first, at
 * the same place as rotated ones; the bf16 GEMMs take Qp instead
 * (flash_bf16_impl.h). */
static void load_queries(const flash_tile *t, const ra_attention_args *a, const flash_block *blk)
{
    const ra_tensor *q = a->q;
    const int64_t head_dim = q->shape[3], rep = q->shape[2] / a->k->shape[2];
    const int64_t width = ra_round_up(head_dim, 16), block_q = blk->block_q, nq = blk->nq;
    memset(t->zero, 0, (size_t)width * sizeof(float));
    if (a->rope) /* q's rows of the tile, rotated: query head h's at row h * block_q */
        for (int64_t h = 0; h < rep && nq > 0; h++)
            rotate_rows(a, q, blk->b, blk->q0, nq, blk->g * rep + h, t->qrot + h * block_q * width);
    for (int64_t r0 = 0; r0 < blk->rows; r0 += RA_W) {
        const float *src[RA_W];
#if defined(RA_FLASH_BF16)
        const uint16_t *src16[RA_W]; /* the same rows, for the bf16 GEMMs */
#endif
        for (int i = 0; i < RA_W; i++) {
            int64_t r = r0 + i, h = r / block_q, qi = r % block_q;
            int real = h < rep && qi < nq;
            t->m[r] = -INFINITY;
            t->l[r] = 0.0f;
            const void *row = !real  ? t->zero
                              : a->rope ? t->qrot + r * width
                                        : ra_row_any(q, blk->b, blk->q0 + qi, blk->g * rep + h);
            src[i] = row;
#if defined(RA_FLASH_BF16)
            src16[i] = row;
#endif
            if (real && !a->rope && !blk->bf16 && q->dtype != RA_F32) {
                widen_row(t->qrot + r * width, row, q->dtype, head_dim);
                src[i] = t->qrot + r * width;
            }
        }
#if defined(RA_FLASH_BF16)
        if (blk->bf16) {
            load_rows_pairs((uint32_t *)(void *)t->qrot, blk->rows, r0, src16, head_dim);
            continue;
        }
#endif
        /* slice r0 / ROWS_STEP of Qt: [D, ROWS_STEP] (flash_tile) */
        load_rows_transposed(t->qt + r0 / ROWS_STEP * head_dim * ROWS_STEP, ROWS_STEP,
                             r0 % ROWS_STEP, src, head_dim, (float)a->mask.scale);
    }
}

/* The tile's padding keys (t->padkey) of nk keys from k0; returns whether
 * it has any. */
static int tile_padding(const flash_tile *t, const ra_attention_args *a, const flash_block *blk,
                        int64_t k0, int64_t nk)
{
    int padding = 0;
    for (int64_t j = 0; j < nk; j++) {
        t->padkey[j] = !ra_mask_real(&a->mask, blk->b, k0 + j);
        padding |= t->padkey[j] != 0;
    }
    return padding;
}

/* attn_mask's tile (t->am) for the keys k0 .. k0 + nk - 1, -Inf where a row
 * does not see a key (lo .. hi and padding: t's), 0 on padding rows;
 * marks the rows that see a key (t->any).  Returns RA_TILE_EMPTY (the tile
 * is skipped), RA_TILE_WHOLE (t->am is not written) or RA_TILE_BUILT. */
static int tile_attn(const flash_tile *t, const ra_attention_args *a, const flash_block *blk,
                     int64_t k0, int64_t nk)
{
    const int64_t rep = a->q->shape[2] / a->k->shape[2], rows = blk->rows;
    int any = 0, whole = 1;
    /* first whether some row sees some key, and whether attn_mask is 0 at
     * every key the rows see, each row's values read into a row of BK
     * (contiguous, in L1): a tile left empty or whole costs that alone,
     * without writing the [BK, rows] tile */
    float line[BK];
    for (int64_t r = 0; r < rows && (!any || whole); r++) {
        const int64_t h = r / blk->block_q, qi = r % blk->block_q;
        if (h < rep && qi < blk->nq &&
            ra_mask_attn_row_scan(&a->mask, blk->b, blk->g * rep + h, blk->q0 + qi, k0, nk,
                                  t->lo[r], t->hi[r], t->padkey, line, &any, &whole))
            t->any[r] = 1.0f;
    }
    if (!any) return RA_TILE_EMPTY;
    if (whole) return RA_TILE_WHOLE;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t h = r / blk->block_q, qi = r % blk->block_q;
        float *col = t->am + r; /* [j * rows] */
        if (h >= rep || qi >= blk->nq) {
            for (int64_t j = 0; j < nk; j++) col[j * rows] = 0.0f;
            continue;
        }
        /* the keys lo .. hi the other masks leave it, of the tile */
        const int64_t lo = t->lo[r] < 0 ? 0 : (int64_t)t->lo[r];
        const int64_t hi = t->hi[r] > nk - 1 ? nk - 1 : (int64_t)t->hi[r];
        for (int64_t j = 0; j < nk; j++)
            if (j < lo || j > hi) col[j * rows] = -INFINITY;
        if (lo > hi) continue;
        ra_mask_attn_row(&a->mask, blk->b, blk->g * rep + h, blk->q0 + qi, k0 + lo, hi - lo + 1,
                         line, 1);
        int row_any = 0;
        for (int64_t j = lo; j <= hi; j++) {
            const float x = t->padkey[j] ? -INFINITY : line[j - lo];
            col[j * rows] = x;
            row_any |= x != -INFINITY;
        }
        if (row_any) t->any[r] = 1.0f;
    }
    return RA_TILE_BUILT;
}

/* Whether each of RA_W rows' hi (flash_tile) is less than j. */
static inline int vector_before(const float *hi, float j)
{
    float h = hi[0];
    for (int i = 1; i < RA_W; i++) h = hi[i] > h ? hi[i] : h;
    return h < j;
}

/* St for the tile of nk keys from k0, its padding keys (t->padkey, from
 * tile_padding) read as zeros, and its softmax (softmax_tile; masked as
 * there). */
static void tile_scores(const flash_tile *t, const ra_attention_args *a, const flash_block *blk,
                        int64_t k0, int64_t nk, int padding, int masked)
{
    const int64_t head_dim = a->q->shape[3];
    const float softcap = a->mask.softcap;
#if defined(RA_FLASH_BF16)
    if (blk->bf16) {
        scores_tile_bf16(t, a->k, blk->b, blk->g, k0, nk, blk->rows, head_dim, (float)a->mask.scale,
                         blk->amx);
        softmax_tile(t, blk->rows, 0, blk->rows, nk, masked, padding, softcap, NULL);
        return;
    }
#endif
    if (a->rope) {
        key_rows(t, a, blk->b, blk->g, k0, nk, head_dim);
        for (int64_t j = 0; padding && j < nk; j++)
            if (t->padkey[j]) t->krow[j] = t->zero;
    } else if (t->pack_k) {
        for (int64_t j = 0; j < nk; j++) t->krow[j] = t->pack_k + (k0 + j) * ra_round_up(head_dim, 16);
    } else {
        tile_copy(t, a->k, blk->b, blk->g, k0, nk, head_dim, padding);
    }
    /* a slice of Qt (in L1) against every key of the tile, then the
     * slice's softmax while its scores are in L1, then the next slice;
     * where nothing changes the scores their row max is taken from the
     * GEMM's registers */
    const int plain = !masked && !(softcap > 0);
    float tmax[ROWS_STEP];
    for (int64_t r0 = 0; r0 < blk->rows; r0 += ROWS_STEP) {
        for (int i = 0; i < ROWS_STEP; i++) tmax[i] = -INFINITY;
        for (int64_t j0 = 0; j0 < nk; j0 += FMR) {
            int n = nk - j0 < FMR ? (int)(nk - j0) : FMR, c0 = 0;
            /* masked: the leading vectors of rows whose last key is before j0
             * (softmax_tile masks them whatever St holds) */
            while (masked && n == FMR && c0 < NR - 1 &&
                   vector_before(t->hi + r0 + c0 * RA_W, (float)j0))
                c0++;
            scores_blocks(t->st + j0 * t->ldst + r0, t->ldst,
                          t->qt + r0 / ROWS_STEP * head_dim * ROWS_STEP, ROWS_STEP,
                          t->krow + j0, n, c0, ROWS_STEP, head_dim, plain ? tmax : NULL);
        }
        softmax_tile(t, blk->rows, r0, r0 + ROWS_STEP, nk, masked, padding, softcap,
                     plain ? tmax : NULL);
    }
}

/* The probabilities of the tile of nk keys from k0 times their dropout
 * multipliers: element (b, head, i, j) of the [B, H, Sq, Sk] grid (a
 * block's rows placed in its sequence's [B, H, S, S]). */
static void tile_dropout(const flash_tile *t, const ra_attention_args *a, const flash_block *blk,
                         int64_t k0, int64_t nk)
{
    const ra_attention_mask *mask = &a->mask;
    const int64_t n_heads = a->q->shape[2], rep = n_heads / a->k->shape[2];
    for (int64_t r = 0; r < rep * blk->block_q; r++) {
        int64_t h = r / blk->block_q, i = r % blk->block_q;
        if (i >= blk->nq) continue;
        uint64_t first = (uint64_t)((blk->b * n_heads + blk->g * rep + h) * mask->seq +
                                    mask->q_origin + blk->q0 + i) *
                             (uint64_t)mask->n_keys + (uint64_t)(mask->k_origin + k0);
        ra_dropout_row(&a->drop, first, nk, t->mult);
        for (int64_t j = 0; j < nk; j++) t->st[j * t->ldst + r] *= t->mult[j];
    }
}

/* Ot += P V for the tile of nk keys from k0 (P in St), rescaled by alpha;
 * values_seen for a masked tile whose values hold an Inf or a NaN. */
static void tile_values(const flash_tile *t, const ra_attention_args *a, const flash_block *blk,
                        int64_t k0, int64_t nk, int masked, int padding)
{
    const int64_t head_dim = a->q->shape[3];
    const int first = !blk->started;
#if defined(RA_FLASH_BF16)
    if (blk->bf16) {
        values_tile_bf16(t, a->v, blk->b, blk->g, k0, nk, blk->rows, head_dim, masked, first,
                         blk->amx);
        return;
    }
#endif
    const int64_t width = ra_round_up(head_dim, 16);
    const float *v = t->wide; /* [nk, width] */
    if (t->pack_v) {
        v = t->pack_v + k0 * width;
        for (int64_t j = 0; j < nk; j++) t->krow[j] = v + j * width;
    } else {
        tile_copy(t, a->v, blk->b, blk->g, k0, nk, head_dim, padding);
    }
    if (masked && tile_nonfinite(t, nk, head_dim)) {
        values_seen(t, nk, blk->rows, head_dim, first, 1, width);
    } else {
        values_rows(t->ot, t->st, t->ldst, v, nk, blk->rows, width, t->alpha, first,
                    masked ? t->lo : NULL, masked ? t->hi : NULL);
    }
}

/* One key tile [k0, k0 + BK) folded into the block's online softmax;
 * skipped when attn_mask leaves it empty, unmasked when attn_mask is 0 at
 * every key and the other masks hide none. */
static void attend_tile(flash_tile *t, const ra_attention_args *a, flash_block *blk, int64_t k0)
{
    const int64_t nk = k0 + BK < blk->k_end ? BK : blk->k_end - k0;
    if (k0 + BK < blk->k_end && !t->pack_k) { /* the next tile's keys and values */
        const int64_t next = blk->k_end - k0 - BK < BK ? blk->k_end - k0 - BK : BK;
        prefetch_rows(a->k, blk->b, k0 + BK, next, blk->g);
        prefetch_rows(a->v, blk->b, k0 + BK, next, blk->g);
    } else if (k0 + BK >= blk->k_end) { /* the last tile: the rows store_outputs writes */
        const int64_t rep = a->q->shape[2] / a->k->shape[2];
        const int64_t bytes = a->q->shape[3] * (int64_t)sizeof(float);
        for (int64_t h = 0; h < rep; h++)
            for (int64_t i = 0; i < blk->nq; i++) {
                const char *row =
                    (const char *)ra_row(a->out, blk->b, blk->q0 + i, blk->g * rep + h);
                for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at, 1, 2);
            }
    }
    const int padding = tile_padding(t, a, blk, k0, nk);
    /* the causal bounds, window and padding hide some keys from some rows */
    const int bounded = blk->first_max > k0 || blk->last_min < k0 + nk - 1 || padding;
    for (int64_t r = 0; (bounded || t->attn) && r < blk->rows; r++)
        row_bounds(&t->lo[r], &t->hi[r], t->first[r], t->last[r], k0);
    const int attn = t->attn ? tile_attn(t, a, blk, k0, nk) : RA_TILE_WHOLE;
    if (attn == RA_TILE_EMPTY) return;
    t->am_set = attn == RA_TILE_BUILT;
    tile_scores(t, a, blk, k0, nk, padding, bounded || t->am_set);
    if (a->dropout) tile_dropout(t, a, blk, k0, nk);
    /* with attn_mask, values_seen as before where the values hold an Inf or
     * a NaN (keeps a whole tile's results those of its masked path) */
    tile_values(t, a, blk, k0, nk, bounded || t->attn, padding);
    blk->started = 1;
}

/* Row r's output scale 1 / l (with a sink: its share of the sum) and its
 * log-sum-exp, written to a->lse when asked; *dst NULL for a row that
 * writes zeros (written here) or nothing (padding rows of the tile). */
static float row_output(const flash_tile *t, const ra_attention_args *a, const flash_block *blk,
                        int64_t r, float **dst)
{
    const ra_attention_mask *mask = &a->mask;
    const int64_t n_heads = a->q->shape[2], rep = n_heads / a->k->shape[2];
    const int64_t head_dim = a->q->shape[3];
    const int64_t h = r / blk->block_q, qi = r % blk->block_q, head = blk->g * rep + h;
    *dst = NULL;
    if (h >= rep || qi >= blk->nq) return 0.0f;
    *dst = ra_row(a->out, blk->b, blk->q0 + qi, head);
    /* log sum_j e^(s_j) = m + log(sum_j e^(s_j - m)); a sink joins the sum
     * against the larger of m and itself */
    float m = t->m[r], l = t->l[r], lse = -INFINITY, inv = 0.0f;
    const int64_t last = t->last[r];
    const int padding = !ra_mask_query_real(mask, blk->b, blk->q0 + qi);
    if (padding || t->first[r] > last || (t->attn && t->any[r] == 0.0f) ||
        (l == 0.0f && !ra_mask_any_real(mask, blk->b, t->first[r], last))) {
        /* a padding query: zeros, whatever its inputs, lse -Inf; or one
         * that sees no key (with a shift: before the block's keys; only
         * padding among them; attn_mask masking them all): zeros, lse the
         * sink's (or -Inf) */
        memset(*dst, 0, (size_t)head_dim * sizeof(float));
        *dst = NULL;
        if (!padding && mask->sinks) lse = mask->sinks[head];
    } else if (mask->sinks) {
        float sink = mask->sinks[head], top = m > sink ? m : sink;
        float keep = m == -INFINITY ? 0.0f : expf(m - top);
        float total = l * keep + expf(sink - top);
        inv = keep / total;
        lse = top + logf(total);
    } else {
        inv = 1.0f / l;
        lse = m + logf(l);
    }
    if (a->lse) a->lse[(blk->b * n_heads + head) * a->q->shape[1] + blk->q0 + qi] = lse;
    return inv;
}

/* out = Ot / l for the block's rows, and their log-sum-exp. */
static void store_outputs(const flash_tile *t, const ra_attention_args *a, const flash_block *blk)
{
    const int64_t head_dim = a->q->shape[3], width = ra_round_up(head_dim, 16);
#if defined(RA_FLASH_BF16)
    if (blk->bf16) { /* Ot [D, rows] */
        for (int64_t r0 = 0; r0 < blk->rows; r0 += RA_W) {
            float *dst[RA_W], inv[RA_W];
            for (int i = 0; i < RA_W; i++) inv[i] = row_output(t, a, blk, r0 + i, &dst[i]);
            store_rows_transposed(dst, t->ot, blk->rows, r0, head_dim, inv);
        }
        return;
    }
#endif
    for (int64_t r = 0; r < blk->rows; r++) { /* O [rows, width] */
        float *dst;
        const float inv = row_output(t, a, blk, r, &dst), *o = t->ot + r * width;
        if (!dst) continue;
        int64_t d = 0;
        for (; d + RA_W <= head_dim; d += RA_W) vstore(dst + d, vload(o + d) * vsplat(inv));
        for (; d < head_dim; d++) dst[d] = o[d] * inv;
    }
}

static void flash_task(void *arg, int64_t task, int thread)
{
    const ra_flash_job *job = arg;
    const ra_attention_args *a = job->args;
    flash_block blk = block_of(job, job->task0 + task);
    flash_tile t = carve(job, thread, a->q->shape[3]);
    t.ldst = blk.rows + RA_FLASH_PAD;
#if defined(RA_FLASH_BF16)
    if (blk.bf16) t.ldst = blk.rows;
#endif
    first_keys(&t, a, &blk);
#if defined(RA_FLASH_AMX)
    if (blk.amx) amx_begin();
#endif
    load_queries(&t, a, &blk);
    for (int64_t k0 = blk.k_first; k0 < blk.k_end; k0 += BK) attend_tile(&t, a, &blk, k0);
    store_outputs(&t, a, &blk);
#if defined(RA_FLASH_AMX)
    if (blk.amx) _tile_release();
#endif
}
